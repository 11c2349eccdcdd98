"""The seismic app: elastic waves in a layered crust, velocity-stress on a staggered grid.

Tiles are x-y columns over the full depth (the app's grid is the cells along x and y), as
Ondes3D splits its domain. Phases of a step, Ondes3D's three macro kernels, with halo exchange
between face neighbours (no diagonal tile: the stencils reach along one axis at a time) and no
global barrier:

``intermediates`` (halo: the neighbours' velocities) the C-PML memory variables of the velocity
                  derivatives, in the tile's absorbing cells. Work: C-PML cell updates.
``stress``        ``sigma += dt C : grad v``, then the C-PML terms, the moment source and the free
                  surface's images. Work: cell updates.
``velocity``      (halo: the neighbours' stresses) ``v += dt / rho div sigma`` with its C-PML terms
                  and the force source; receivers record. Work: cell updates.

Cells are computed block by block (8 x 8 columns, 32 levels deep); with ``app.skip_zero`` a
block is left alone until an input of its stencils stops being exactly zero (see
:mod:`.kernels`), which changes no bit and makes the tiles the wave has not reached cheap.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from ...errors import ShoalError
from ...runtime.app import App, Phase, StepContext
from ...tiling import Tiling
from .cpml import profile
from .kernels import activate, any_not_finite, compiled
from .medium import check_resolution, coefficients, time_step
from .params import SeismicParams
from .source import MOMENT_FIELDS, nearest_node, wavelet

VELOCITY = ("vx", "vy", "vz")
STRESS = ("sxx", "syy", "szz", "sxy", "sxz", "syz")
FIELDS = VELOCITY + STRESS
WEIGHTS = ("ca", "cb", "cc", "zh", "zz", "m", "mh", "bx", "bz")  # rows of the C-PML terms' weights
BLOCK = (8, 8, 32)  # cells of a skipping block along x, y, z (aligned to the global grid)
SAMPLES = 64  # a tile's first room for seismogram samples; doubled whenever the run outgrows it
CHECK_EVERY = 10  # steps between checks that the wavefield is still finite

# C-PML terms per axis: (plus difference?, source field, destination fields, coefficient names, half node?)
STRESS_TERMS = {
    0: ((False, "vx", ("sxx", "syy", "szz"), ("ca", "cb", "zh"), False),
        (True, "vy", ("sxy",), ("m",), True), (True, "vz", ("sxz",), ("mh",), True)),
    1: ((False, "vy", ("syy", "sxx", "szz"), ("ca", "cb", "zh"), False),
        (True, "vx", ("sxy",), ("m",), True), (True, "vz", ("syz",), ("mh",), True)),
    2: ((False, "vz", ("szz", "sxx", "syy"), ("zz", "cc", "cc"), False),
        (True, "vx", ("sxz",), ("mh",), True), (True, "vy", ("syz",), ("mh",), True)),
}
VELOCITY_TERMS = {
    0: ((True, "sxx", ("vx",), ("bx",), True), (False, "sxy", ("vy",), ("bx",), False),
        (False, "sxz", ("vz",), ("bz",), False)),
    1: ((False, "sxy", ("vx",), ("bx",), False), (True, "syy", ("vy",), ("bx",), True),
        (False, "syz", ("vz",), ("bz",), False)),
    2: ((False, "sxz", ("vx",), ("bx",), False), (False, "syz", ("vy",), ("bx",), False),
        (True, "szz", ("vz",), ("bz",), True)),
}


class SeismicApp(App):
    """See the module docstring; the stencils are in :mod:`.kernels`."""

    name = "seismic"
    transient = ("boxes", "active_boxes", "wave")  # the last two: the native kernels' (see .native)
    # Both halo phases read face neighbours only: the staggered stencils (and the C-PML terms and
    # the activity check) differentiate along one axis at a time, so a cell reads the ghosts
    # beside its tile's faces and never a diagonal one; the ghosts in the columns' corners are
    # neither filled nor read.
    phases = (Phase("intermediates", reads="faces", pack="pack_velocity", work="cell updates"),
              Phase("stress", work="cell updates"),
              Phase("velocity", reads="faces", pack="pack_stress", work="cell updates"))

    def __init__(self, params: SeismicParams, steps: int):
        params.validate()
        self.p = params
        self.steps = int(steps)
        self.shape = params.shape
        self.threed = params.ndim == 3
        self.g = params.order // 2
        self.gy = self.g if self.threed else 0
        self.grid = (self.shape[0], self.shape[1])
        self.dtype = np.dtype(params.dtype)
        self.dt = time_step(params)
        check_resolution(params)
        self.coef = coefficients(params, self.dt, self.dtype)
        self.kernels = compiled(params.order, self.threed, params.dtype)
        vp, _, _ = params.medium(params.depths())
        w = params.pml_widths()
        self.profiles = [profile(n, w[2 * a], w[2 * a + 1], params.dx, self.dt, float(vp.max()), params.f0,
                                 params.reflection, params.kappa_max, self.dtype)
                         for a, n in enumerate(self.shape)]
        self.weights = np.stack([getattr(self.coef, name) for name in WEIGHTS])
        self.diff = np.stack([self.coef.c1, self.coef.c2, self.coef.c1z, self.coef.c2z])
        longest = max(self.shape)
        self.pml_profiles = np.zeros((3, 2, 3, longest), dtype=self.dtype)
        for a, prof in enumerate(self.profiles):
            n = self.shape[a]
            self.pml_profiles[a, 0, :, :n] = prof.kinv, prof.a, prof.b
            self.pml_profiles[a, 1, :, :n] = prof.kinv_h, prof.a_h, prof.b_h
        self.source = self._source_nodes()
        self.receiver_nodes = [[nearest_node(c, params.point(r), params.dx, self.shape) for c in VELOCITY]
                               for r in params.receivers]

    # ----- geometry ---------------------------------------------------------------------------
    def _source_nodes(self) -> list[tuple[str, tuple[int, int, int], float]]:
        """(field, global node, value per unit of the wavelet) of every injection: for a force
        ``dt F_c / (rho V)`` into velocities, for a moment ``-dt M_ab / V`` into stresses."""
        p = self.p
        where = p.point(p.source_at)
        volume = p.dx ** p.ndim
        out = []
        if p.source == "force":
            d = np.array(p.direction, dtype=float)
            d = d / np.linalg.norm(d)
            for c, name in enumerate(VELOCITY):
                if d[c] == 0:
                    continue
                node = nearest_node(name, where, p.dx, self.shape)
                k = node[2] + self.g
                rho = 0.5 * (self.coef.rho[k] + self.coef.rho[k + 1]) if name == "vz" else self.coef.rho[k]
                out.append((name, node, self.dt * p.amplitude * d[c] / (rho * volume)))
        else:
            m = np.array([1, 1, 1, 0, 0, 0] if p.source == "explosion" else p.moment, dtype=float)
            for name, mab in zip(MOMENT_FIELDS, m, strict=True):
                if mab:
                    node = nearest_node(name, where, p.dx, self.shape)
                    out.append((name, node, -self.dt * p.amplitude * mab / volume))
        return out

    @functools.lru_cache(maxsize=4096)  # noqa: B019  (one app per run; tilings are few)
    def _layout(self, tiling: Tiling, tile: int):
        """A tile's bounds, padded shape, padded-to-global offset, blocks, C-PML boxes and
        face neighbours."""
        (x0, x1), (y0, y1) = tiling.bounds(tile)
        g, gy = self.g, self.gy
        shape = (x1 - x0 + 2 * g, y1 - y0 + 2 * gy, self.shape[2] + 2 * g)
        origin = np.array([x0 - g, y0 - gy, -g], dtype=np.int64)
        lo, hi = [], []
        for a, (start, stop) in enumerate(((x0, x1), (y0, y1), (0, self.shape[2]))):
            size = BLOCK[a]
            # global multiples of the block size, no block thinner than the stencil's reach (the
            # activity check assumes a face's slab lies in the next block or in the ghosts)
            reach = max((g, gy, g)[a], 1)
            cuts = [start]
            for c in range((start // size + 1) * size, stop, size):
                if c - cuts[-1] >= reach and stop - c >= reach:
                    cuts.append(c)
            cuts = np.array([*cuts, stop])
            pad = (g, gy, g)[a]
            lo.append(cuts[:-1] - start + pad)
            hi.append(cuts[1:] - start + pad)
        always = np.zeros((len(lo[0]), len(lo[1]), len(lo[2])), dtype=np.bool_)
        for _, node, _ in self.source:
            local = [node[a] - origin[a] for a in range(3)]
            if all(lo[a][0] <= local[a] < hi[a][-1] for a in range(3)):
                always[tuple(int(np.searchsorted(hi[a], local[a], side="right")) for a in range(3))] = True
        interior = [(g, shape[0] - g), (gy, shape[1] - gy), (g, shape[2] - g)]
        pml = []  # (axis, side, padded box)
        for a, prof in enumerate(self.profiles):
            for side, (b0, b1) in enumerate(prof.boxes):
                box = [list(r) for r in interior]
                lo_a, hi_a = b0 - origin[a], b1 - origin[a]
                box[a] = [max(lo_a, interior[a][0]), min(hi_a, interior[a][1])]
                if box[a][0] < box[a][1]:
                    pml.append((a, side, np.array([v for r in box for v in r], dtype=np.int64)))
        tables, size = {"s": [], "v": []}, 0
        for a, _, box in pml:
            cells = int(np.prod(box[1::2] - box[::2]))
            for kind, terms in (("s", STRESS_TERMS[a]), ("v", VELOCITY_TERMS[a])):
                names = STRESS if kind == "s" else VELOCITY
                sources = VELOCITY if kind == "s" else STRESS
                for plus, src, dsts, coefs, half in terms:
                    d = [names.index(x) for x in dsts] + [0] * (3 - len(dsts))
                    w = [WEIGHTS.index(x) for x in coefs] + [0] * (3 - len(coefs))
                    zc = int(a == 2 and kind == "s")  # the stress update's z differences
                    tables[kind].append([a, int(plus), sources.index(src), len(dsts), *d, *w, int(half), zc, size,
                                         *box])
                    size += cells
        tables = {k: np.array(v, dtype=np.int64).reshape(-1, 19) for k, v in tables.items()}
        faces = {}
        for n in tiling.face_neighbours[tile]:
            (nx0, nx1), (ny0, ny1) = tiling.bounds(int(n))
            if (ny0, ny1) == (y0, y1) and nx1 == x0:
                faces[int(n)] = "west"
            elif (ny0, ny1) == (y0, y1) and nx0 == x1:
                faces[int(n)] = "east"
            elif (nx0, nx1) == (x0, x1) and ny1 == y0:
                faces[int(n)] = "south"
            elif (nx0, nx1) == (x0, x1) and ny0 == y1:
                faces[int(n)] = "north"
        return dict(shape=shape, origin=origin, lo=tuple(lo), hi=tuple(hi), always=always, terms=tables,
                    psi=size, faces=faces, bounds=((x0, x1), (y0, y1)))

    # ----- the contract -----------------------------------------------------------------------
    def check_tiling(self, tiling: Tiling) -> None:
        """Tiles are columns over the full depth, at least ``order / 2`` cells wide."""
        super().check_tiling(tiling)
        for t in range(tiling.ntiles):
            (x0, x1), (y0, y1) = tiling.bounds(t)
            if x1 - x0 < self.g or (self.threed and y1 - y0 < self.g):
                raise ShoalError(f"app 'seismic': tile {t} is {x1 - x0} x {y1 - y0} columns; at order {self.p.order} "
                                 f"a tile must be at least {self.g} columns wide (use fewer tiles)")

    def init_tile(self, tile: int, tiling: Tiling) -> dict:
        lay = self._layout(tiling, tile)
        state = {"v": np.zeros((3, *lay["shape"]), dtype=self.dtype),
                 "s": np.zeros((6, *lay["shape"]), dtype=self.dtype),
                 "psi": np.zeros(lay["psi"], dtype=self.dtype)}
        state["active"] = lay["always"].copy() if self.p.skip_zero else np.ones_like(lay["always"])
        (x0, x1), (y0, y1) = lay["bounds"]
        mine = [(r, c) for r, nodes in enumerate(self.receiver_nodes) for c, node in enumerate(nodes)
                if x0 <= node[0] < x1 and y0 <= node[1] < y1]
        state["rec"] = np.array(mine, dtype=np.int64).reshape(-1, 2)
        # sized as the run goes (see _record): a run may be resumed with more steps than planned
        state["seis"] = np.full((len(mine), SAMPLES if mine else 0), np.nan)
        state["seis"][:, :1] = 0.0
        state["step"] = 0
        return state

    def time(self, step: int, states: dict) -> float:
        """Simulated seconds: ``step * dt``."""
        return step * self.dt

    def prepare(self, tiling: Tiling) -> None:
        """Compile the kernels on the run's first tile, with the neighbours its phases read (a
        throwaway state)."""
        read = {p.name: [int(n) for n in tiling.stencil(p.reads)[0]] for p in self.phases if p.halo}
        states = {t: self.init_tile(t, tiling) for t in {0, *(n for ns in read.values() for n in ns)}}
        ctx = StepContext(0)
        for phase in self.phases:
            halos = {}
            if phase.halo:
                pack = getattr(self, phase.pack)
                halos = {n: pack(states[n], n, tiling)[0] for n in read[phase.name]}
            getattr(self, phase.method)(0, states[0], halos, ctx, tiling)

    # ----- phases -----------------------------------------------------------------------------
    def intermediates(self, tile: int, state: dict, halos: dict, ctx: StepContext, tiling: Tiling) -> int:
        """Velocity halos into the ghosts; the memory variables of the velocity derivatives."""
        lay = self._layout(tiling, tile)
        self._unpack(state["v"], halos, lay)
        state["boxes"] = boxes = self._activate(state, state["v"], lay)
        return self._pml(state, lay, boxes, "s", 0, ctx)

    def stress(self, tile: int, state: dict, halos: dict, ctx: StepContext, tiling: Tiling) -> int:
        """The stress update, its C-PML terms, the moment source and the free surface's images."""
        lay = self._layout(tiling, tile)
        boxes = state.pop("boxes")
        c = self.coef
        cells = ctx.kernel(self.kernels[0], *state["v"], *state["s"], c.ca, c.cb, c.cc, c.zh, c.zz, c.m, c.mh,
                           c.c1z, c.c2z, boxes)
        cells += self._pml(state, lay, boxes, "s", 1, ctx)
        if self.p.source != "force":
            self._inject(state["s"], lay, STRESS, ctx.step * self.dt)
        if self.p.top == "free":
            self._image(state["s"])
        return cells

    def velocity(self, tile: int, state: dict, halos: dict, ctx: StepContext, tiling: Tiling) -> int:
        """Stress halos into the ghosts; the velocity update, its C-PML terms, the force source;
        receivers record."""
        lay = self._layout(tiling, tile)
        self._unpack(state["s"], halos, lay)
        boxes = self._activate(state, state["s"], lay)
        c = self.coef
        cells = ctx.kernel(self.kernels[1], *state["v"], *state["s"], c.bx, c.bz, boxes)
        cells += self._pml(state, lay, boxes, "v", 2, ctx)
        if self.p.source == "force":
            self._inject(state["v"], lay, VELOCITY, (ctx.step + 0.5) * self.dt)
        state["step"] = ctx.step + 1
        if len(state["rec"]):
            self._record(state, lay, ctx.step + 1)
        if (ctx.step + 1) % CHECK_EVERY == 0 and any_not_finite(state["v"]):
            raise ShoalError(f"the wavefield is no longer finite (unstable) at t = {(ctx.step + 1) * self.dt:.6g} s; "
                             f"app.dt {self.dt:.6g} s, app.cfl {self.p.cfl}")
        return cells

    # ----- pieces of the phases ---------------------------------------------------------------
    def _record(self, state, lay, n: int) -> None:
        """The tile's receivers' sample ``n``; the samples' room doubles when the run outgrows it."""
        seis = state["seis"]
        if n >= seis.shape[1]:
            grown = np.full((seis.shape[0], max(2 * seis.shape[1], n + 1)), np.nan)
            grown[:, :seis.shape[1]] = seis
            state["seis"] = seis = grown
        origin = lay["origin"]
        for row, (r, comp) in enumerate(state["rec"]):
            i, j, k = (self.receiver_nodes[r][comp][a] - origin[a] for a in range(3))
            seis[row, n] = state["v"][comp, i, j, k]

    def _activate(self, state, inputs, lay) -> np.ndarray:
        halo = np.array([self.g, self.gy, self.g], dtype=np.int64)
        return activate(state["active"], tuple(inputs), lay["lo"], lay["hi"], halo, lay["always"])

    def _pml(self, state, lay, boxes, kind, mode, ctx) -> int:
        terms = lay["terms"][kind]
        if not len(terms):
            return 0
        src, dst = (state["v"], state["s"]) if kind == "s" else (state["s"], state["v"])
        return ctx.kernel(self.kernels[2], terms, src, dst, state["psi"], self.weights, self.diff, self.pml_profiles,
                          lay["origin"], boxes, mode)

    def _inject(self, arrays, lay, fields, t) -> None:
        value = float(wavelet(self.p.wavelet, self.p.f0, self.p.delay, t))
        origin = lay["origin"]
        for name, node, scale in self.source:
            if name not in fields:
                continue
            local = tuple(int(node[a] - origin[a]) for a in range(3))
            if all(pad <= local[a] < lay["shape"][a] - pad for a, pad in enumerate((self.g, self.gy, self.g))):
                arrays[fields.index(name)][local] += self.dtype.type(scale * value)

    def _image(self, stress) -> None:
        """Stress imaging above the free surface: szz and the shear stresses sxz, syz odd about
        it (``0 - s``, so that a zero's image is +0)."""
        g = self.g
        szz = stress[2]
        szz[:, :, g] = 0.0
        for m in range(1, g + 1):
            szz[:, :, g - m] = 0.0 - szz[:, :, g + m]
        for s in (stress[4], stress[5]):
            for m in range(g):
                s[:, :, g - 1 - m] = 0.0 - s[:, :, g + m]

    # ----- halos ------------------------------------------------------------------------------
    def _slabs(self, lay, face) -> tuple[slice, slice]:
        """Padded (x, y) slices of the tile's interior cells next to ``face``."""
        g, gy = self.g, self.gy
        nx, ny = lay["shape"][0], lay["shape"][1]
        xs, ys = slice(g, nx - g), slice(gy, ny - gy)
        return {"west": (slice(g, 2 * g), ys), "east": (slice(nx - 2 * g, nx - g), ys),
                "south": (xs, slice(gy, 2 * gy)), "north": (xs, slice(ny - 2 * gy, ny - gy))}[face]

    def _ghosts(self, lay, face) -> tuple[slice, slice]:
        """Padded (x, y) slices of the ghosts on ``face``."""
        g, gy = self.g, self.gy
        nx, ny = lay["shape"][0], lay["shape"][1]
        xs, ys = slice(g, nx - g), slice(gy, ny - gy)
        return {"west": (slice(0, g), ys), "east": (slice(nx - g, nx), ys),
                "south": (xs, slice(0, gy)), "north": (xs, slice(ny - gy, ny))}[face]

    def _pack(self, fields, src, tiling) -> dict[int, np.ndarray]:
        """The slabs beside the tile's faces, one per face neighbour (the phases read no other tile)."""
        lay = self._layout(tiling, src)
        out = {}
        for n, face in lay["faces"].items():
            xs, ys = self._slabs(lay, face)
            out[n] = fields[:, xs, ys].copy()
        return out

    def pack_velocity(self, state: dict, src: int, tiling: Tiling) -> dict[int, np.ndarray]:
        """Each face neighbour gets the ``order / 2`` columns of velocities next to it."""
        return self._pack(state["v"], src, tiling)

    def pack_stress(self, state: dict, src: int, tiling: Tiling) -> dict[int, np.ndarray]:
        """Each face neighbour gets the ``order / 2`` columns of stresses next to it."""
        return self._pack(state["s"], src, tiling)

    def _unpack(self, fields, halos, lay) -> None:
        for n, face in lay["faces"].items():
            xs, ys = self._ghosts(lay, face)
            fields[:, xs, ys] = halos[n]

    # ----- the native executor ----------------------------------------------------------------
    def native(self, tiling: Tiling):
        """The three phases as compiled kernels calling the stencils above (:mod:`.native`);
        halos by copy plans of the slabs :meth:`_pack` sends into the ghosts :meth:`_unpack`
        fills. Receivers record in the velocity kernel, into samples made room for before
        each run (the run's steps are known then; a kernel cannot grow an array)."""
        from .native import native_plan

        return native_plan(self, tiling, CHECK_EVERY, VELOCITY, STRESS)

    # ----- output -----------------------------------------------------------------------------
    def gather(self, states: dict, tiling: Tiling) -> dict[str, np.ndarray]:
        """Every field's interior on the global grid, the seismograms, the receivers' and the
        source's positions and the time."""
        nx, ny, nz = self.shape
        out = {name: np.empty((nx, ny, nz), dtype=self.dtype) for name in FIELDS}
        step = int(next(iter(states.values()))["step"])
        seis = np.full((len(self.receiver_nodes), step + 1, 3), np.nan)  # the samples recorded so far
        g, gy = self.g, self.gy
        for tile, state in states.items():
            (x0, x1), (y0, y1) = tiling.bounds(tile)
            arrays = [*state["v"], *state["s"]]
            for name, a in zip(FIELDS, arrays, strict=True):
                out[name][x0:x1, y0:y1] = a[g:a.shape[0] - g, gy:a.shape[1] - gy, g:a.shape[2] - g]
            for row, (r, comp) in enumerate(state["rec"]):
                seis[r, :, comp] = state["seis"][row, :step + 1]
        out["seismograms"] = seis
        out["receivers"] = np.array([self.p.point(r) for r in self.p.receivers], dtype=float).reshape(-1, 3)
        out["source"] = np.array(self.p.point(self.p.source_at), dtype=float)
        out["time"] = np.array(step * self.dt)
        out["dt"] = np.array(self.dt)
        return out

    def frame(self, gathered: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Slices of the wavefield and the seismograms so far."""
        from .drawing import frame

        return frame(self, gathered)

    def draw(self, frame: dict[str, np.ndarray], ax, scale: tuple[float, float] | None = None):
        """A wavefield slice with the source, the receivers and the absorbing layers marked."""
        from .drawing import draw

        return draw(frame, ax, scale)

    def pictures(self, gathered: dict[str, np.ndarray], folder: Path) -> list[Path]:
        """The seismograms of every receiver, ``seismograms.png``."""
        from .drawing import draw_seismograms

        return [draw_seismograms(gathered, Path(folder) / "seismograms.png")] if len(gathered["receivers"]) else []

    def export(self, gathered: dict[str, np.ndarray], frames: Path, step: int) -> Path:
        """The 3D wavefield as VTK image data in a ParaView series, and the seismograms so far."""
        from .vtk import export

        return export(self, gathered, frames, step)

