"""The shallow-water phases as native kernels, for runs whose blocks never change level
(``app.max_level == app.min_level``: the state's size is fixed; a regrid's refinement and
coarsening read the setup's bed in Python, so adaptive runs keep their phases in Python).

A tile's memory holds its pools (``h, hu, hv, b``), the saved stage (``h0, hu0, hv0``), each
block's speed and level, the tile's time, a ``report`` of what went wrong (the first bad
block and cell, the Courant number) and the ``strips_in`` inbox: the strips its face
neighbours packed (:func:`~shoal.apps.swe.kernels.pack_faces`, by a compiled packer), in
source tile order as :meth:`SWEApp._stage <shoal.apps.swe.app.SWEApp._stage>` concatenates
them. The kernels call the Python phases' compiled ``advance`` on the same values, so a run is
bitwise the Python executor's.

The integer descriptor of a tile (``ints``): the slots ``H_*``, then its blocks' face kinds and
in-tile neighbours (``nb x 4`` each), the (block, face) pairs it receives and the levels they
come at, and per face-neighbour tile what it sends it (:data:`H_SEND`: rows of reader,
first pair, pairs; then the pairs).
"""

from __future__ import annotations

import numba as nb
import numpy as np

from ...errors import ShoalError
from ...runtime.native import KERNEL, Native
from ...runtime.native.engine import PACKER
from ...runtime.native.plan import words
from .boundary import DEPTH, INFLOW
from .kernels import _write_strip, advance, fastest_cell, layout

FIELDS = ("h", "hu", "hv", "b", "h0", "hu0", "hv0", "speed", "lev", "t", "report", "strips_in")
# Descriptor slots: blocks, cells of a root block's side, order, solver, limiter, pairs received,
# where kind, local, the received pairs and levels, the send table and its pairs start; each
# field's offset (one per field, then the end).
(H_NB, H_BLOCK, H_ORDER, H_SOLVER, H_LIMITER, H_NRECV, H_KIND, H_LOCAL, H_RECV_K, H_RECV_F, H_RECV_LEV, H_NSEND,
 H_SEND, H_SEND_K, H_SEND_F, H_OFF) = range(16)
HEADER = H_OFF + len(FIELDS) + 1
# Constants: the time step's CFL number, the inflow/depth side's speed, dx0, g, dry, the sides' values.
C_CFL, C_SIDE_SPEED, C_DX0, C_G, C_DRY, C_SIDES = range(6)
# The report: bad block, i, j (-1: none), the Courant number.
R_BAD, R_I, R_J, R_COURANT = range(4)
STAGE1, STAGE2 = 1, 2


@nb.njit(nogil=True, cache=True, inline="always")
def _field(mem, ints, k):
    return mem[ints[H_OFF + k]:ints[H_OFF + k + 1]]


@nb.njit(nogil=True, cache=True, inline="always")
def _table(ints, slot, rows, columns):
    return ints[ints[slot]:ints[slot] + rows * columns].reshape((rows, columns))


@nb.njit(KERNEL, nogil=True, cache=True, error_model="numpy")
def cfl_kernel(tile, step, iteration, mem, ints, consts, reduced, out):
    """:meth:`SWEApp.cfl <shoal.apps.swe.app.SWEApp.cfl>`."""
    nb_ = ints[H_NB]
    speed = _field(mem, ints, 7)
    lev = _field(mem, ints, 8).view(np.int64)
    kind = _table(ints, H_KIND, nb_, 4)
    top = -np.inf
    for k in range(nb_):
        s = speed[k]
        if consts[C_SIDE_SPEED] > 0:
            for f in range(4):
                if kind[k, f] == INFLOW or kind[k, f] == DEPTH:
                    s = np.maximum(s, consts[C_SIDE_SPEED])
                    break
        v = s * 2.0 ** lev[k]
        if v > top or np.isnan(v):  # as np.max: a NaN wins
            top = v
            if np.isnan(v):
                break
    top = top / consts[C_DX0]
    out[0] = consts[C_CFL] / top if top > 0 else np.inf
    return nb_


@nb.njit(nogil=True, cache=True)
def _stage(mem, ints, consts, reduced, stage):
    """:meth:`SWEApp._stage <shoal.apps.swe.app.SWEApp._stage>` (no regrid: the levels are fixed)."""
    dt = reduced[0, 0]
    report = _field(mem, ints, 10)
    if np.isinf(dt):
        report[R_BAD] = -2.0
        raise ValueError("no time step")
    nb_ = ints[H_NB]
    nrecv = ints[H_NRECV]
    h, hu, hv, b = _field(mem, ints, 0), _field(mem, ints, 1), _field(mem, ints, 2), _field(mem, ints, 3)
    h0, hu0, hv0 = _field(mem, ints, 4), _field(mem, ints, 5), _field(mem, ints, 6)
    speed = _field(mem, ints, 7)
    lev = _field(mem, ints, 8).view(np.int64)
    t = _field(mem, ints, 9)
    inbox = _field(mem, ints, 11)
    halo = inbox[1:1 + np.int64(inbox[0])]
    order = ints[H_ORDER]
    courant, bad, i, j, cells = advance(
        h, hu, hv, b, h0, hu0, hv0, lev, ints[H_BLOCK], _table(ints, H_KIND, nb_, 4), _table(ints, H_LOCAL, nb_, 4),
        ints[ints[H_RECV_K]:ints[H_RECV_K] + nrecv], ints[ints[H_RECV_F]:ints[H_RECV_F] + nrecv],
        ints[ints[H_RECV_LEV]:ints[H_RECV_LEV] + nrecv], halo, consts[C_SIDES:C_SIDES + 4], dt, consts[C_DX0],
        consts[C_G], consts[C_DRY], ints[H_SOLVER], order, ints[H_LIMITER], 0 if order == 1 and stage == STAGE1
        else stage, speed)
    report[R_BAD], report[R_I], report[R_J], report[R_COURANT] = bad, i, j, courant
    if bad >= 0 or courant > 1.0:
        raise ValueError("the stage went wrong")  # explained by the app from the report
    if stage == STAGE2 or order == 1:
        t[0] = t[0] + dt
    return cells


@nb.njit(KERNEL, nogil=True, cache=True, error_model="numpy")
def stage1_kernel(tile, step, iteration, mem, ints, consts, reduced, out):
    """Forward Euler (order 1) or Heun's first stage (order 2)."""
    return _stage(mem, ints, consts, reduced, STAGE1)


@nb.njit(KERNEL, nogil=True, cache=True, error_model="numpy")
def stage2_kernel(tile, step, iteration, mem, ints, consts, reduced, out):
    """Heun's second stage."""
    return _stage(mem, ints, consts, reduced, STAGE2)


@nb.njit(PACKER, nogil=True, cache=True)
def strips_packer(src, reader, mem, ints, reader_ints, consts, slot):
    """:meth:`SWEApp.pack_strips <shoal.apps.swe.app.SWEApp.pack_strips>` for one reader: the
    strips of the blocks that touch its own, in its order."""
    nsend = ints[H_NSEND]
    send = _table(ints, H_SEND, nsend, 3)
    h, hu, hv, b = _field(mem, ints, 0), _field(mem, ints, 1), _field(mem, ints, 2), _field(mem, ints, 3)
    lev = _field(mem, ints, 8).view(np.int64)
    nn, off = layout(lev, ints[H_BLOCK])
    ks, fs = ints[H_SEND_K], ints[H_SEND_F]
    for r in range(nsend):
        if send[r, 0] != reader:
            continue
        base = 0
        for e in range(send[r, 1], send[r, 1] + send[r, 2]):
            k = ints[ks + e]
            if base + 8 * nn[k] > slot.shape[0]:
                return -1
            _write_strip(h, hu, hv, b, off[k], nn[k], ints[fs + e], slot, base)
            base += 8 * nn[k]
        return base
    return 0


def native_plan(app, tiling) -> Native | None:
    """The phases as native kernels, or ``None`` (Python) for an adaptive run."""
    p = app.p
    if app.rounds > 0:
        return None
    consts = np.array([p.cfl, app.side_speed, p.dx0, p.g, p.dry, *app.side_values], dtype=np.float64)
    strip = 8 * (p.block << p.min_level)  # words of one (block, face) strip: every block at one level

    def topology(tile):
        return app._topology(tiling, tile)

    def scratch(tile):
        """The saved stage, the report and the inbox (sized for every strip the tile receives)."""
        n = len(topology(tile).gids)
        pool = n * ((p.block << p.min_level) + 4) ** 2
        return {"h0": np.zeros(pool), "hu0": np.zeros(pool), "hv0": np.zeros(pool), "report": np.full(4, -1.0),
                "strips_in": np.zeros(1 + strip * len(topology(tile).receive.k))}

    descriptors = {}

    def prepare(states, first_step, steps):
        """The time as an array the kernels write, and each tile's descriptor."""
        for t, state in states.items():
            state["t"] = np.asarray(state["t"], dtype=np.float64).reshape(())
            for name, made in scratch(t).items():
                if name not in state or state[name].shape != made.shape:
                    state[name] = made
            topo = topology(t)
            send, recv = topo.send, topo.receive
            rows = np.array([[reader, send.split[i], send.split[i + 1] - send.split[i]]
                             for i, reader in enumerate(send.tiles)], dtype=np.int64).reshape(-1, 3)
            parts = [topo.kind.ravel(), topo.local.ravel(), recv.k, recv.f,
                     np.full(len(recv.k), p.min_level, dtype=np.int64), rows.ravel(), send.k, send.f]
            head = np.zeros(HEADER, dtype=np.int64)
            head[[H_NB, H_BLOCK, H_ORDER, H_SOLVER, H_LIMITER, H_NRECV, H_NSEND]] = (
                len(topo.gids), p.block, p.order, app.solver, app.limiter, len(recv.k), len(rows))
            at = HEADER
            for slot, part in zip((H_KIND, H_LOCAL, H_RECV_K, H_RECV_F, H_RECV_LEV, H_SEND, H_SEND_K, H_SEND_F), parts,
                                  strict=True):
                head[slot] = at
                at += len(part)
            head[H_OFF:] = np.cumsum([0] + [words(np.asarray(state[name])) for name in FIELDS])
            descriptors[t] = np.concatenate([head, *parts]).astype(np.int64)

    def payload_words(phase, src, reader):
        send = topology(src).send
        i = send.tiles.index(reader)
        return strip * int(send.split[i + 1] - send.split[i])

    def explain(phase, tile, state):
        """The stage's error, as :meth:`SWEApp._stage <shoal.apps.swe.app.SWEApp._stage>` says it."""
        bad, i, j, courant = state["report"]
        if bad == -2:
            raise ShoalError("no wet cell anywhere, so no time step")
        topo, lev = topology(tile), state["lev"]
        if bad >= 0:
            raise ShoalError(f"depth negative or not finite at {app._where(topo, lev, int(bad), int(i), int(j))}")
        k, i, j, _ = fastest_cell(state["h"], state["hu"], state["hv"], lev, p.block, p.dx0, p.g, p.dry)
        raise ShoalError(f"Courant number {courant:.3g} > 1 (app.cfl {p.cfl}): the time step no longer bounds the "
                         f"waves; the fastest now at {app._where(topo, lev, k, i, j)}")

    kernels = {"cfl": cfl_kernel, "stage1": stage1_kernel}
    if p.order == 2:
        kernels["stage2"] = stage2_kernel
    return Native(kernels=kernels, fields=FIELDS, ints=lambda tile: descriptors[tile], consts=consts,
                  scratch=scratch, prepare=prepare, packers=dict.fromkeys(kernels.keys() - {"cfl"}, strips_packer),
                  inboxes=dict.fromkeys(kernels.keys() - {"cfl"}, "strips_in"), payload_words=payload_words,
                  explain=explain)
