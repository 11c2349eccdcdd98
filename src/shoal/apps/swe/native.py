"""The shallow-water phases as native kernels, for fixed and adaptive blocks alike.

A tile's memory holds its pools (``h, hu, hv, b``), the saved stage (``h0, hu0, hv0``), each
block's speed, level and target level, the tile's time, a ``report`` of what went wrong (the
first bad block and cell, the Courant number) and the ``strips_in`` inbox: per face-neighbour
tile, in source tile order, the levels of the (block, face) pairs it sends and their strips
(:func:`~shoal.apps.swe.kernels.pack_faces`, by a compiled packer), or on a balance round their
target levels. The stage kernels move the levels to ``recv_lev`` and the strips end to end, as
:meth:`SWEApp._stage <shoal.apps.swe.app.SWEApp._stage>` concatenates them, and call the
Python phases' compiled ``advance`` on the same values, so a run is bitwise the Python
executor's.

Adaptive runs: on a regrid step the last stage's kernel defers to Python for the target levels
(the criterion may read the setup's bed at finer levels), the balance rounds run compiled, and
the last one defers to Python when a block changes level (refining and coarsening read the
setup's bed; the pools change size: the run ends after that step, and the next one lays the
memory out anew).

The integer descriptor of a tile (``ints``): the slots ``H_*``, then its blocks' face kinds and
in-tile neighbours (``nb x 4`` each), the (block, face) pairs it receives and each source
tile's first pair, and per face-neighbour tile what it sends it (:data:`H_SEND`: rows of
reader, first pair, pairs; then the pairs).
"""

from __future__ import annotations

import numba as nb
import numpy as np

from ...errors import ShoalError
from ...runtime.native import KERNEL, Native
from ...runtime.native.engine import DEFER, PACKER
from ...runtime.native.plan import words
from .boundary import DEPTH, INFLOW
from .kernels import _write_strip, advance, balance_round, fastest_cell, layout

FIELDS = ("h", "hu", "hv", "b", "h0", "hu0", "hv0", "speed", "lev", "t", "report", "strips_in", "target",
          "recv_lev")
LEV, REPORT, INBOX, TARGET, RECV_LEV = (FIELDS.index(name) for name in ("lev", "report", "strips_in", "target",
                                                                        "recv_lev"))
# Descriptor slots: blocks, cells of a root block's side, order, solver, limiter, pairs received,
# tiles received from, where kind, local, the received pairs and each source tile's first pair,
# the send table and its pairs start; each field's offset (one per field, then the end).
(H_NB, H_BLOCK, H_ORDER, H_SOLVER, H_LIMITER, H_NRECV, H_NSRC, H_KIND, H_LOCAL, H_RECV_K, H_RECV_F, H_RECV_SPLIT,
 H_NSEND, H_SEND, H_SEND_K, H_SEND_F, H_OFF) = range(17)
HEADER = H_OFF + len(FIELDS) + 1
# Constants: the time step's CFL number, the inflow/depth side's speed, dx0, g, dry, steps between
# regrids, balance rounds, the sides' values.
C_CFL, C_SIDE_SPEED, C_DX0, C_G, C_DRY, C_REGRID_EVERY, C_ROUNDS, C_SIDES = range(8)
# The report: bad block, i, j (-1: none), the Courant number, the cells the last stage updated.
R_BAD, R_I, R_J, R_COURANT, R_CELLS = range(5)
STAGE1, STAGE2 = 1, 2


@nb.njit(nogil=True, cache=True, inline="always")
def _field(mem, ints, k):
    return mem[ints[H_OFF + k]:ints[H_OFF + k + 1]]


@nb.njit(nogil=True, cache=True, inline="always")
def _table(ints, slot, rows, columns):
    return ints[ints[slot]:ints[slot] + rows * columns].reshape((rows, columns))


@nb.njit(nogil=True, cache=True, inline="always")
def _regrid_step(step, consts):
    """:meth:`SWEApp.regrid_step <shoal.apps.swe.app.SWEApp.regrid_step>`."""
    return consts[C_ROUNDS] > 0 and (step + 1) % np.int64(consts[C_REGRID_EVERY]) == 0


@nb.njit(KERNEL, nogil=True, cache=True, error_model="numpy")
def cfl_kernel(tile, step, iteration, mem, ints, consts, reduced, out):
    """:meth:`SWEApp.cfl <shoal.apps.swe.app.SWEApp.cfl>`."""
    nb_ = ints[H_NB]
    speed = _field(mem, ints, 7)
    lev = _field(mem, ints, LEV).view(np.int64)
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
def _received_strips(mem, ints):
    """The inbox's strips end to end (moved in place) and their levels into ``recv_lev``; the
    strips."""
    inbox = _field(mem, ints, INBOX)
    recv_lev = _field(mem, ints, RECV_LEV).view(np.int64)
    split = ints[ints[H_RECV_SPLIT]:ints[H_RECV_SPLIT] + ints[H_NSRC] + 1]
    at, end = 1, 1  # where the next payload starts; where the strips so far end
    for i in range(ints[H_NSRC]):
        for e in range(split[i], split[i + 1]):
            recv_lev[e] = np.int64(inbox[at + e - split[i]])
        at += split[i + 1] - split[i]
        words = 0
        for e in range(split[i], split[i + 1]):
            words += 8 * (ints[H_BLOCK] << recv_lev[e])
        for w in range(words):  # left, over the levels read: never over a word not yet moved
            inbox[end + w] = inbox[at + w]
        at += words
        end += words
    return inbox[1:end]


@nb.njit(nogil=True, cache=True)
def _stage(step, mem, ints, consts, reduced, stage):
    """:meth:`SWEApp._stage <shoal.apps.swe.app.SWEApp._stage>`; on a regrid step's last
    stage, the target levels are left to Python."""
    dt = reduced[0, 0]
    report = _field(mem, ints, REPORT)
    if np.isinf(dt):
        report[R_BAD] = -2.0
        raise ValueError("no time step")
    nb_ = ints[H_NB]
    nrecv = ints[H_NRECV]
    h, hu, hv, b = _field(mem, ints, 0), _field(mem, ints, 1), _field(mem, ints, 2), _field(mem, ints, 3)
    h0, hu0, hv0 = _field(mem, ints, 4), _field(mem, ints, 5), _field(mem, ints, 6)
    speed = _field(mem, ints, 7)
    lev = _field(mem, ints, LEV).view(np.int64)
    t = _field(mem, ints, 9)
    halo = _received_strips(mem, ints)
    order = ints[H_ORDER]
    courant, bad, i, j, cells = advance(
        h, hu, hv, b, h0, hu0, hv0, lev, ints[H_BLOCK], _table(ints, H_KIND, nb_, 4), _table(ints, H_LOCAL, nb_, 4),
        ints[ints[H_RECV_K]:ints[H_RECV_K] + nrecv], ints[ints[H_RECV_F]:ints[H_RECV_F] + nrecv],
        _field(mem, ints, RECV_LEV).view(np.int64), halo, consts[C_SIDES:C_SIDES + 4], dt, consts[C_DX0],
        consts[C_G], consts[C_DRY], ints[H_SOLVER], order, ints[H_LIMITER], 0 if order == 1 and stage == STAGE1
        else stage, speed)
    report[R_BAD], report[R_I], report[R_J], report[R_COURANT], report[R_CELLS] = bad, i, j, courant, cells
    if bad >= 0 or courant > 1.0:
        raise ValueError("the stage went wrong")  # explained by the app from the report
    if stage == STAGE2 or order == 1:
        t[0] = t[0] + dt
        if _regrid_step(step, consts):
            return DEFER  # the target levels: :func:`native_plan`'s ``targets``
    return cells


@nb.njit(KERNEL, nogil=True, cache=True, error_model="numpy")
def stage1_kernel(tile, step, iteration, mem, ints, consts, reduced, out):
    """Forward Euler (order 1) or Heun's first stage (order 2)."""
    return _stage(step, mem, ints, consts, reduced, STAGE1)


@nb.njit(KERNEL, nogil=True, cache=True, error_model="numpy")
def stage2_kernel(tile, step, iteration, mem, ints, consts, reduced, out):
    """Heun's second stage."""
    return _stage(step, mem, ints, consts, reduced, STAGE2)


@nb.njit(nogil=True, cache=True)
def _balance(step, mem, ints, consts):
    """:meth:`SWEApp.balance <shoal.apps.swe.app.SWEApp.balance>`: one Jacobi round of 2:1
    balance of the target levels; False off regrid steps."""
    if not _regrid_step(step, consts):
        return False
    nb_, nrecv = ints[H_NB], ints[H_NRECV]
    target = _field(mem, ints, TARGET).view(np.int64)
    # the inbox: each source's targets in its pairs' order, end to end
    target[:] = balance_round(target, _table(ints, H_KIND, nb_, 4), _table(ints, H_LOCAL, nb_, 4),
                              ints[ints[H_RECV_K]:ints[H_RECV_K] + nrecv], ints[ints[H_RECV_F]:ints[H_RECV_F] + nrecv],
                              _field(mem, ints, INBOX)[1:1 + nrecv])
    return True


@nb.njit(KERNEL, nogil=True, cache=True)
def balance_kernel(tile, step, iteration, mem, ints, consts, reduced, out):
    """A round of 2:1 balance (on regrid steps)."""
    return ints[H_NB] if _balance(step, mem, ints, consts) else 0


@nb.njit(KERNEL, nogil=True, cache=True)
def regrid_kernel(tile, step, iteration, mem, ints, consts, reduced, out):
    """:meth:`SWEApp.regrid <shoal.apps.swe.app.SWEApp.regrid>`: the last round, then the
    blocks that change level move in Python (their pools change size)."""
    if not _balance(step, mem, ints, consts):
        return 0
    lev = _field(mem, ints, LEV).view(np.int64)
    target = _field(mem, ints, TARGET).view(np.int64)
    for k in range(ints[H_NB]):
        if lev[k] != target[k]:
            return DEFER
    return ints[H_NB]


@nb.njit(nogil=True, cache=True, inline="always")
def _send_rows(ints, reader):
    """The first of the (block, face) pairs this tile sends ``reader`` and how many."""
    nsend = ints[H_NSEND]
    send = _table(ints, H_SEND, nsend, 3)
    for r in range(nsend):
        if send[r, 0] == reader:
            return send[r, 1], send[r, 2]
    return 0, 0


@nb.njit(PACKER, nogil=True, cache=True)
def strips_packer(src, reader, mem, ints, reader_ints, consts, slot):
    """:meth:`SWEApp.pack_strips <shoal.apps.swe.app.SWEApp.pack_strips>` for one reader: the
    levels of the blocks that touch its own, then their strips, in its order."""
    first, pairs = _send_rows(ints, reader)
    h, hu, hv, b = _field(mem, ints, 0), _field(mem, ints, 1), _field(mem, ints, 2), _field(mem, ints, 3)
    lev = _field(mem, ints, LEV).view(np.int64)
    nn, off = layout(lev, ints[H_BLOCK])
    ks, fs = ints[H_SEND_K], ints[H_SEND_F]
    if pairs > slot.shape[0]:
        return -1
    for e in range(first, first + pairs):
        slot[e - first] = lev[ints[ks + e]]
    base = pairs
    for e in range(first, first + pairs):
        k = ints[ks + e]
        if base + 8 * nn[k] > slot.shape[0]:
            return -1
        _write_strip(h, hu, hv, b, off[k], nn[k], ints[fs + e], slot, base)
        base += 8 * nn[k]
    return base


@nb.njit(PACKER, nogil=True, cache=True)
def targets_packer(src, reader, mem, ints, reader_ints, consts, slot):
    """:meth:`SWEApp.pack_targets <shoal.apps.swe.app.SWEApp.pack_targets>` for one reader."""
    first, pairs = _send_rows(ints, reader)
    if pairs > slot.shape[0]:
        return -1
    target = _field(mem, ints, TARGET).view(np.int64)
    ks = ints[H_SEND_K]
    for e in range(first, first + pairs):
        slot[e - first] = target[ints[ks + e]]
    return pairs


def native_plan(app, tiling) -> Native:
    """The phases as native kernels."""
    p = app.p
    consts = np.array([p.cfl, app.side_speed, p.dx0, p.g, p.dry, max(p.regrid_every, 1), app.rounds,
                       *app.side_values], dtype=np.float64)
    strip = 8 * (p.block << p.max_level)  # words of one (block, face) strip at most: at the finest level

    def topology(tile):
        return app._topology(tiling, tile)

    def scratch(state, tile):
        """Per field the kernels make afresh, its length, dtype and first value: the saved stage,
        the report, the inbox (room for every strip the tile receives and its level), the
        target levels and the levels received."""
        pool, nrecv = len(state["h"]), len(topology(tile).receive.k)
        return {"h0": (pool, np.float64, 0), "hu0": (pool, np.float64, 0), "hv0": (pool, np.float64, 0),
                "report": (5, np.float64, -1), "strips_in": (1 + (1 + strip) * nrecv, np.float64, 0),
                "target": (len(state["lev"]), np.int64, 0), "recv_lev": (nrecv, np.int64, 0)}

    descriptors = {}

    def prepare(states, first_step, steps, across):
        """The time as an array the kernels write, the scratch fields, each tile's descriptor."""
        for t, state in states.items():
            state["t"] = np.asarray(state["t"], dtype=np.float64).reshape(())
            for name, (n, dtype, first) in scratch(state, t).items():
                if name not in state or state[name].shape != (n,):  # (made only where the sizes changed)
                    state[name] = np.full(n, first, dtype)
            topo = topology(t)
            send, recv = topo.send, topo.receive
            rows = np.array([[reader, send.split[i], send.split[i + 1] - send.split[i]]
                             for i, reader in enumerate(send.tiles)], dtype=np.int64).reshape(-1, 3)
            parts = [topo.kind.ravel(), topo.local.ravel(), recv.k, recv.f, recv.split, rows.ravel(), send.k, send.f]
            head = np.zeros(HEADER, dtype=np.int64)
            head[[H_NB, H_BLOCK, H_ORDER, H_SOLVER, H_LIMITER, H_NRECV, H_NSRC, H_NSEND]] = (
                len(topo.gids), p.block, p.order, app.solver, app.limiter, len(recv.k), len(recv.tiles), len(rows))
            at = HEADER
            for slot, part in zip((H_KIND, H_LOCAL, H_RECV_K, H_RECV_F, H_RECV_SPLIT, H_SEND, H_SEND_K, H_SEND_F),
                                  parts, strict=True):
                head[slot] = at
                at += len(part)
            head[H_OFF:] = np.cumsum([0] + [words(np.asarray(state[name])) for name in FIELDS])
            descriptors[t] = np.concatenate([head, *parts]).astype(np.int64)

    def payload_words(phase, src, reader):
        send = topology(src).send
        i = send.tiles.index(reader)
        pairs = int(send.split[i + 1] - send.split[i])
        return pairs * (1 + strip) if phase.startswith("stage") else pairs

    def explain(phase, tile, state):
        """The stage's error, as :meth:`SWEApp._stage <shoal.apps.swe.app.SWEApp._stage>` says it."""
        bad, i, j, courant, _ = state["report"]
        if bad == -2:
            raise ShoalError("no wet cell anywhere, so no time step")
        topo, lev = topology(tile), state["lev"]
        if bad >= 0:
            raise ShoalError(f"depth negative or not finite at {app._where(topo, lev, int(bad), int(i), int(j))}")
        k, i, j, _ = fastest_cell(state["h"], state["hu"], state["hv"], lev, p.block, p.dx0, p.g, p.dry)
        raise ShoalError(f"Courant number {courant:.3g} > 1 (app.cfl {p.cfl}): the time step no longer bounds the "
                         f"waves; the fastest now at {app._where(topo, lev, k, i, j)}")

    def targets(tile, state, step):
        """The regrid step's target levels (the last stage's work, as the kernel reported it)."""
        state["target"][...] = app._targets(state, state["lev"], topology(tile))
        return int(state["report"][R_CELLS])

    def move(tile, state, step):
        """The blocks to their target levels (new pools)."""
        return app._move_blocks(state, state["target"], topology(tile))

    stages = [phase.name for phase in app.phases if phase.name.startswith("stage")]
    kernels = {"cfl": cfl_kernel, "stage1": stage1_kernel, "stage2": stage2_kernel}
    kernels = {phase.name: kernels.get(phase.name) or (regrid_kernel if phase.method == "regrid" else balance_kernel)
               for phase in app.phases}
    halos = [name for name in kernels if name != "cfl"]
    deferred = {stages[-1]: targets}
    if app.rounds:
        deferred[app.phases[-1].name] = move
    return Native(kernels=kernels, fields=FIELDS, ints=lambda tile: descriptors[tile], consts=consts,
                  prepare=prepare,
                  packers={name: strips_packer if name in stages else targets_packer for name in halos},
                  inboxes=dict.fromkeys(halos, "strips_in"), payload_words=payload_words, explain=explain,
                  deferred=deferred, relayout=app.regrid_step if app.rounds else None)
