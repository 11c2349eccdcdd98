"""The seismic app's phases as native kernels (see :mod:`shoal.runtime.native`).

Each kernel calls the very stencils the Python phases call (:func:`.kernels.compiled`,
:func:`.kernels.activate`, :func:`.kernels.any_not_finite`) on views of the tile's memory, in
the same order, so a native run is bitwise the Python executor's.

A tile's memory holds, from float64 boundaries: ``v`` (3 components) and ``s`` (6), padded, in
the run's dtype; ``psi``; the activity flags ``active`` (bool); ``active_boxes``, the boxes
``intermediates`` found active for ``stress`` to use (row 0 holds their count); ``step`` (the
steps done, a 0-d float64); ``wave``, the source's values for the run's steps (each already
cast to the dtype, as the Python phase adds it); and ``seis``, the tile's seismogram samples.

The samples are recorded by the ``velocity`` kernel into ``seis``, whose room is made before
each run (:meth:`SeismicApp.native`'s ``prepare``): the run knows how many steps it may take,
so a kernel never needs to grow an array. The source's values are tabulated there too, by the
Python function the Python phases call (a compiled ``exp`` may differ in the last bit).

The integer descriptor of a tile (``ints``) starts with the slots named ``H_*`` below, then
the blocks' bounds, the C-PML term tables, the receivers and the source's nodes; the app's
constants (``consts``) are the padded levels and the profiles' length, then the per-level
coefficients, the C-PML weights, differences and profiles, in the dtype, byte for byte.
"""

from __future__ import annotations

import functools

import numba as nb
import numpy as np

from ...errors import ShoalError
from ...runtime.native import KERNEL
from .kernels import activate, any_not_finite, compiled

# Slots of a tile's integer descriptor.
(H_X, H_Y, H_Z, H_V, H_S, H_PSI, H_ACTIVE, H_BOXES, H_STEP, H_WAVE, H_SEIS, H_NPSI, H_NBX, H_NBY, H_NBZ,
 H_ORIGIN, H_HALO, H_FORCE, H_FREE, H_FIRST, H_ROOM, H_NREC, H_NSRC, H_NTS, H_NTV, H_CUTS, H_TS, H_TV, H_REC,
 H_SRC) = (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 18, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31,
           32, 33)
HEADER = 34
TERM = 19  # columns of a C-PML term's row (see kernels.pml)
#: Native fields, in their order in a tile's memory.
FIELDS = ("v", "s", "psi", "active", "active_boxes", "step", "wave", "seis")
# Per-level coefficients in ``consts``, in this order, then the weights (9 rows), the
# differences (4 rows) and the profiles (3 x 2 x 3 x longest).
LEVELS = ("ca", "cb", "cc", "zh", "zz", "m", "mh", "c1z", "c2z", "bx", "bz")


@nb.njit(nogil=True, cache=True)
def cuts(ints):
    """The blocks' padded bounds per axis, as :meth:`SeismicApp._layout` has them."""
    p = ints[H_CUTS]
    nbx, nby, nbz = ints[H_NBX], ints[H_NBY], ints[H_NBZ]
    lo = (ints[p:p + nbx], ints[p + 2 * nbx:p + 2 * nbx + nby],
          ints[p + 2 * (nbx + nby):p + 2 * (nbx + nby) + nbz])
    hi = (ints[p + nbx:p + 2 * nbx], ints[p + 2 * nbx + nby:p + 2 * (nbx + nby)],
          ints[p + 2 * (nbx + nby) + nbz:p + 2 * (nbx + nby + nbz)])
    return lo, hi


@nb.njit(nogil=True, cache=True)
def terms(ints, which):
    """The tile's C-PML terms of the stress (``which`` 0) or velocity (1) update."""
    n = ints[H_NTS + which]
    p = ints[H_TS + which]
    return ints[p:p + TERM * n].reshape((n, TERM))


def _stable(dispatcher, name: str) -> None:
    """Give a dispatcher a kernel captures the same identity in every process: Numba keys a
    closure's cache by its captured values, where a dispatcher pickles with an id drawn at
    random otherwise (and the kernels would compile anew in every process)."""
    try:
        if getattr(dispatcher, "_MemoMixin__uuid", None) is None:
            dispatcher._set_uuid(f"shoal.apps.seismic.native:{name}")
    except (AttributeError, AssertionError):  # a Numba without it: the cache misses, nothing worse
        pass


@functools.cache
def native_kernels(order: int, threed: bool, dtype: str, check_every: int):
    """The three phase kernels for one order, dimension and dtype (compiled, or loaded from
    the cache, here)."""
    stress_k, velocity_k, pml_k = compiled(order, threed, dtype)
    real = np.dtype(dtype).type
    g = order // 2
    nl = len(LEVELS)
    variant = f"o{order}_{3 if threed else 2}d_{dtype}_c{check_every}"

    def named(fn):
        """``fn`` under a name of its variant's: the variants' compiled code shares one process
        (one JIT), where two cached functions of one name and signature would collide."""
        fn.__qualname__ = f"{fn.__qualname__}_{variant}"
        return fn

    @nb.njit(nogil=True, cache=True)
    @named
    def tile_fields(mem, ints):
        X, Y, Z = ints[H_X], ints[H_Y], ints[H_Z]
        n = X * Y * Z
        v = mem[ints[H_V]:ints[H_S]].view(real)[:3 * n].reshape((3, X, Y, Z))
        s = mem[ints[H_S]:ints[H_PSI]].view(real)[:6 * n].reshape((6, X, Y, Z))
        psi = mem[ints[H_PSI]:ints[H_ACTIVE]].view(real)[:ints[H_NPSI]]
        nbx, nby, nbz = ints[H_NBX], ints[H_NBY], ints[H_NBZ]
        active = mem[ints[H_ACTIVE]:ints[H_BOXES]].view(np.uint8)[:nbx * nby * nbz].view(np.bool_)
        boxes = mem[ints[H_BOXES]:ints[H_STEP]].view(np.int64).reshape((nbx * nby * nbz + 1, 6))
        return v, s, psi, active.reshape((nbx, nby, nbz)), boxes

    @nb.njit(nogil=True, cache=True)
    @named
    def pml_tables(consts):
        """The C-PML weights, differences and profiles (as the app's arrays)."""
        zp, longest = int(consts[0]), int(consts[1])
        cv = consts[2:].view(real)
        at = nl * zp
        weights = cv[at:at + 9 * zp].reshape((9, zp))
        diff = cv[at + 9 * zp:at + 13 * zp].reshape((4, zp))
        profiles = cv[at + 13 * zp:at + 13 * zp + 18 * longest].reshape((3, 2, 3, longest))
        return weights, diff, profiles

    @nb.njit(nogil=True, cache=True)
    @named
    def level(consts, k):
        """Per-level coefficient ``LEVELS[k]``."""
        zp = int(consts[0])
        return consts[2:].view(real)[k * zp:(k + 1) * zp]

    @nb.njit(nogil=True, cache=True)
    @named
    def inject(fields, mem, ints, step):
        """Add the source's values of ``step`` at its nodes in this tile (as SeismicApp._inject)."""
        nsrc = ints[H_NSRC]
        if nsrc == 0:
            return
        p = ints[H_SRC]
        row = ints[H_WAVE] + (step - ints[H_FIRST]) * nsrc
        if row < ints[H_WAVE] or row + nsrc > ints[H_SEIS]:
            raise ShoalError("the source has no value tabulated for this step")
        for e in range(nsrc):
            c, i, j, k = ints[p + 4 * e], ints[p + 4 * e + 1], ints[p + 4 * e + 2], ints[p + 4 * e + 3]
            fields[c, i, j, k] += real(mem[row + e])

    for name, fn in (("stress", stress_k), ("velocity", velocity_k), ("pml", pml_k), ("tile_fields", tile_fields),
                     ("pml_tables", pml_tables), ("level", level), ("inject", inject)):
        _stable(fn, f"{name}:{variant}")

    @nb.njit(KERNEL, nogil=True, cache=True)
    @named
    def intermediates(tile, step, iteration, mem, ints, consts, reduced, out):
        # the neighbours' velocities are in the ghosts already (the copy plan's)
        v, s, psi, active, stash = tile_fields(mem, ints)
        lo, hi = cuts(ints)
        halo = ints[H_HALO:H_HALO + 3]
        boxes = activate(active, (v[0], v[1], v[2]), lo, hi, halo, active)  # ``always`` is not read
        m = boxes.shape[0]
        stash[0, 0] = m
        stash[1:1 + m] = boxes
        if ints[H_NTS] == 0:
            return 0
        weights, diff, profiles = pml_tables(consts)
        return pml_k(terms(ints, 0), v, s, psi, weights, diff, profiles, ints[H_ORIGIN:H_ORIGIN + 3], boxes, 0)

    @nb.njit(KERNEL, nogil=True, cache=True)
    @named
    def stress(tile, step, iteration, mem, ints, consts, reduced, out):
        v, s, psi, active, stash = tile_fields(mem, ints)
        boxes = stash[1:1 + stash[0, 0]]
        cells = stress_k(v[0], v[1], v[2], s[0], s[1], s[2], s[3], s[4], s[5], level(consts, 0), level(consts, 1),
                         level(consts, 2), level(consts, 3), level(consts, 4), level(consts, 5), level(consts, 6),
                         level(consts, 7), level(consts, 8), boxes)
        if ints[H_NTS]:
            weights, diff, profiles = pml_tables(consts)
            cells += pml_k(terms(ints, 0), v, s, psi, weights, diff, profiles, ints[H_ORIGIN:H_ORIGIN + 3], boxes,
                           1)
        if not ints[H_FORCE]:
            inject(s, mem, ints, step)
        if ints[H_FREE]:  # the free surface's images (as SeismicApp._image)
            X, Y = ints[H_X], ints[H_Y]
            for i in range(X):
                for j in range(Y):
                    s[2, i, j, g] = 0.0
                    for k in range(1, g + 1):
                        s[2, i, j, g - k] = 0.0 - s[2, i, j, g + k]
            for c in (4, 5):
                for i in range(X):
                    for j in range(Y):
                        for k in range(g):
                            s[c, i, j, g - 1 - k] = 0.0 - s[c, i, j, g + k]
        return cells

    @nb.njit(KERNEL, nogil=True, cache=True)
    @named
    def velocity(tile, step, iteration, mem, ints, consts, reduced, out):
        # the neighbours' stresses are in the ghosts already (the copy plan's)
        v, s, psi, active, stash = tile_fields(mem, ints)
        lo, hi = cuts(ints)
        halo = ints[H_HALO:H_HALO + 3]
        boxes = activate(active, (s[0], s[1], s[2], s[3], s[4], s[5]), lo, hi, halo, active)
        cells = velocity_k(v[0], v[1], v[2], s[0], s[1], s[2], s[3], s[4], s[5], level(consts, 9),
                           level(consts, 10), boxes)
        if ints[H_NTV]:
            weights, diff, profiles = pml_tables(consts)
            cells += pml_k(terms(ints, 1), s, v, psi, weights, diff, profiles, ints[H_ORIGIN:H_ORIGIN + 3], boxes,
                           2)
        if ints[H_FORCE]:
            inject(v, mem, ints, step)
        mem[ints[H_STEP]] = step + 1
        nrec, room = ints[H_NREC], ints[H_ROOM]
        if nrec:
            if step + 1 >= room:
                raise ShoalError("no room left for the seismogram's samples")
            seis = mem[ints[H_SEIS]:ints[H_SEIS] + nrec * room].reshape((nrec, room))
            p = ints[H_REC]
            for r in range(nrec):
                c, i, j, k = ints[p + 4 * r], ints[p + 4 * r + 1], ints[p + 4 * r + 2], ints[p + 4 * r + 3]
                seis[r, step + 1] = v[c, i, j, k]
        if (step + 1) % check_every == 0 and any_not_finite(v):
            raise ShoalError("the wavefield is no longer finite (unstable): lower app.cfl or set a smaller app.dt")
        return cells

    return {"intermediates": intermediates, "stress": stress, "velocity": velocity}


def native_plan(app, tiling, check_every: int, velocity: tuple[str, ...], stress: tuple[str, ...]):
    """The :class:`~shoal.runtime.native.Native` of a seismic run on ``tiling`` (see
    :meth:`SeismicApp.native <shoal.apps.seismic.app.SeismicApp.native>`; ``velocity`` and
    ``stress`` name the app's fields), or ``None`` when a copy plan cannot move its halos: a
    float32 column of odd padded depth has rows that are not whole float64 words."""
    from ...log import logger
    from ...runtime.native import Native
    from ...runtime.native.plan import words
    VELOCITY, STRESS = velocity, stress  # noqa: N806 (the app's constants)
    from .source import wavelet

    p, dtype = app.p, app.dtype
    zp = app.shape[2] + 2 * app.g
    if zp * dtype.itemsize % 8:
        logger.info("seismic: %d padded levels of %s are not whole float64 words; the phases run in Python",
                    zp, dtype)
        return None
    kernels = native_kernels(p.order, app.threed, p.dtype, check_every)
    packed = np.concatenate([*(getattr(app.coef, name) for name in LEVELS), app.weights.ravel(), app.diff.ravel(),
                             app.pml_profiles.ravel()]).astype(dtype)
    raw = np.zeros(-(-packed.nbytes // 8))
    raw.view(np.uint8)[:packed.nbytes] = packed.view(np.uint8)
    consts = np.concatenate([[zp, app.pml_profiles.shape[3]], raw])
    force = p.source == "force"
    pads = (app.g, app.gy, app.g)

    @functools.cache
    def static(tile):
        """What a tile's descriptor holds that no run changes, and its source's nodes."""
        lay = app._layout(tiling, tile)
        shape, origin = lay["shape"], lay["origin"]
        sources = []  # (field index, i, j, k), scale: the nodes SeismicApp._inject adds to, in order
        for name, node, scale in app.source:
            local = tuple(int(node[a] - origin[a]) for a in range(3))
            if all(pad <= local[a] < shape[a] - pad for a, pad in enumerate(pads)):
                index = VELOCITY.index(name) if name in VELOCITY else STRESS.index(name)
                sources.append(((index, *local), scale))
        cuts = np.concatenate([np.concatenate([lay["lo"][a], lay["hi"][a]]) for a in range(3)])
        return lay, cuts, sources

    descriptors = {}

    def prepare(states, first_step, steps, across):
        """Room for the run's samples, the source's values for its steps, and each tile's
        descriptor (the fields' offsets in its memory)."""
        times = [(s + 0.5) * app.dt if force else s * app.dt for s in range(first_step, first_step + steps)]
        values = [float(wavelet(p.wavelet, p.f0, p.delay, t)) for t in times] if app.source else []
        for t, state in states.items():
            lay, cuts, sources = static(t)
            state["step"] = np.asarray(state["step"], dtype=np.float64).reshape(())
            rec = np.asarray(state["rec"], dtype=np.int64).reshape(-1, 2)
            seis = state["seis"]
            room = first_step + steps + 1
            if len(rec) and seis.shape[1] < room:  # as SeismicApp._record grows it, once for the run
                grown = np.full((seis.shape[0], max(2 * seis.shape[1], room)), np.nan)
                grown[:, :seis.shape[1]] = seis
                state["seis"] = seis = grown
            state["wave"] = np.array([float(dtype.type(scale * value)) for value in values for _, scale in sources])
            nblocks = lay["always"].size
            if state.get("active_boxes") is None or state["active_boxes"].shape != (nblocks + 1, 6):
                state["active_boxes"] = np.zeros((nblocks + 1, 6), dtype=np.int64)
            at, offsets = 0, {}
            for name in FIELDS:
                offsets[name] = at
                at += words(np.asarray(state[name]))
            origin = lay["origin"]
            recs = [(int(c), *(int(app.receiver_nodes[r][c][a] - origin[a]) for a in range(3))) for r, c in rec]
            ts, tv = lay["terms"]["s"], lay["terms"]["v"]
            head = np.zeros(HEADER, dtype=np.int64)
            head[[H_X, H_Y, H_Z]] = lay["shape"]
            for slot, name in zip((H_V, H_S, H_PSI, H_ACTIVE, H_BOXES, H_STEP, H_WAVE, H_SEIS), FIELDS, strict=True):
                head[slot] = offsets[name]
            head[H_NPSI] = state["psi"].size
            head[[H_NBX, H_NBY, H_NBZ]] = lay["always"].shape
            head[H_ORIGIN:H_ORIGIN + 3] = origin
            head[H_HALO:H_HALO + 3] = pads
            head[H_FORCE], head[H_FREE] = force, p.top == "free"
            head[H_FIRST], head[H_ROOM] = first_step, seis.shape[1]
            head[H_NREC], head[H_NSRC], head[H_NTS], head[H_NTV] = len(rec), len(sources), len(ts), len(tv)
            parts = [cuts, ts.ravel(), tv.ravel(), np.array(recs, dtype=np.int64).ravel(),
                     np.array([n for n, _ in sources], dtype=np.int64).ravel()]
            at = HEADER
            for slot, part in zip((H_CUTS, H_TS, H_TV, H_REC, H_SRC), parts, strict=True):
                head[slot] = at
                at += len(part)
            descriptors[t] = np.concatenate([head, *parts]).astype(np.int64)

    def halos(phase, src, dst):
        """The slabs :meth:`SeismicApp._pack` sends, into the ghosts :meth:`SeismicApp._unpack`
        fills, one component at a time."""
        name, n = ("v", 3) if phase == "intermediates" else ("s", 6)
        ls, ld = app._layout(tiling, src), app._layout(tiling, dst)
        face_s, face_d = ls["faces"].get(dst), ld["faces"].get(src)
        if face_s is None or face_d is None:
            return []
        xs, ys = app._slabs(ls, face_s)
        gx, gy = app._ghosts(ld, face_d)
        return [(name, (slice(c, c + 1), xs, ys, slice(None)), name, (slice(c, c + 1), gx, gy, slice(None)))
                for c in range(n)]

    return Native(kernels=kernels, fields=FIELDS, ints=lambda tile: descriptors[tile], consts=consts, halos=halos,
                  prepare=prepare)
