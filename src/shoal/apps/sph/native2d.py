"""The 2D SPH phases as native kernels: particles in memory of a fixed capacity, halos packed by
compiled packers (see :class:`~shoal.runtime.native.Native`).

A tile's memory holds its particle fields at a capacity of rows (the first ``n`` rows used),
the rates of the last rates phase (``acc``, ``drho``, ``de``: the first ``nacc`` rows, as the
Python phases leave them), a ``clock`` (:data:`CLOCK` slots: the tile's time, counts, what the
move tells the migration) and two inboxes: the ring rows its neighbours packed for the rates
(:func:`~shoal.apps.sph.kernels2d.ring_rows`' columns) and the emigrants they packed for the
migration (every field of a particle, :data:`MIGRANT` columns). The kernels call the Python
phases' own compiled functions (``rates_tile``, ``move_tile``, ``box_order``), in the same
order on the same values, so a run is bitwise the Python executor's.

The stores' capacities, clocks and inboxes are laid out by :class:`~shoal.apps.sph.capacity.CapacityPlan`.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from ...errors import ShoalError
from ...runtime.native import KERNEL, Native
from ...runtime.native.engine import PACKER
from ..particles import FIELDS, _in, box_order, check_moves, rows_outside
from .capacity import I_LO, CapacityPlan, descriptor_slots
from .kernels2d import RING_COLUMNS, move_tile, put_ring_row, rates_tile

RATES_FIELDS = ("acc", "drho", "de")
# Slots of the clock field: time, particles created and deleted so far, particles, rows of the
# rates, and from the move to the migration the particles outside the box and whether they are
# in (cell, id) order; the time step the move read (for its error message).
T_, CREATED, DELETED, N, NACC, OUTSIDE, ORDERED, DT = range(8)
CLOCK = 8
# An emigrant's row: id, kind, x, v, vh, rho, rhoh, e, m, cell.
MIGRANT = 14
I_HI, I_CAP, I_OFF = descriptor_slots(2)  # the descriptor (see .capacity)
# The constants.
(C_H, C_RHO0, C_C0, C_B, C_GAMMA, C_ALPHA, C_BETA, C_GX, C_GY, C_CFL, C_RAMP, C_OUTFLOW, C_ORIGIN, C_SIDE, C_COUNTS,
 C_REACH_LO, C_REACH_HI) = (*range(12), 12, 14, 16, 18, 20)
NCONSTS = 22
RATES, MOVE = 0, 1  # phase indices (rows of ``reduced``)


@nb.njit(nogil=True, cache=True, inline="always")
def _field(mem, ints, k):
    return mem[ints[I_OFF + k]:ints[I_OFF + k + 1]]


@nb.njit(nogil=True, cache=True)
def particles(mem, ints):
    """Views of a tile's particle fields at full capacity, in the plan's order (particles, rates)."""
    cap = ints[I_CAP]
    ids = _field(mem, ints, 0).view(np.int64)
    kind = _field(mem, ints, 1).view(np.uint8)[:cap].view(np.int8)
    x = _field(mem, ints, 2).reshape((cap, 2))
    v = _field(mem, ints, 3).reshape((cap, 2))
    vh = _field(mem, ints, 4).reshape((cap, 2))
    rho, rhoh, e, m = _field(mem, ints, 5), _field(mem, ints, 6), _field(mem, ints, 7), _field(mem, ints, 8)
    cell = _field(mem, ints, 9).view(np.int64).reshape((cap, 2))
    acc = _field(mem, ints, 10).reshape((cap, 2))
    drho, de = _field(mem, ints, 11), _field(mem, ints, 12)
    return ids, kind, x, v, vh, rho, rhoh, e, m, cell, acc, drho, de


@nb.njit(nogil=True, cache=True, inline="always")
def _clock(mem, ints):
    return _field(mem, ints, 13)


@nb.njit(nogil=True, cache=True, inline="always")
def _rows(mem, ints, k):
    """A list of rows (16: the particles near the box's edge, -1 until known; 17: those
    outside it after the move): its length, then the rows."""
    return _field(mem, ints, k).view(np.int64)


@nb.njit(nogil=True, cache=True, inline="always")
def _inbox(mem, ints, k, columns):
    """The rows a phase's inbox holds (word 0: how many words follow)."""
    box = _field(mem, ints, k)
    used = np.int64(box[0])
    return box[1:1 + used].reshape((used // columns, columns))


@nb.njit(KERNEL, nogil=True, cache=True, error_model="numpy")
def rates_kernel(tile, step, iteration, mem, ints, consts, reduced, out):
    """:meth:`SPH2DApp.rates <shoal.apps.sph.wcsph2d.SPH2DApp.rates>`."""
    clock = _clock(mem, ints)
    n = np.int64(clock[N])
    clock[NACC] = n
    out[0] = np.inf
    if n == 0:
        return 0
    ids, kind, x, v, vh, rho, rhoh, e, m, cell, acc, drho, de = particles(mem, ints)
    ring = _inbox(mem, ints, 14, RING_COLUMNS)
    ramp, t, T = 1.0, clock[T_], consts[C_RAMP]
    if T > 0 and t < T:  # as SPH2DApp._gravity_factor
        ramp = 0.5 * (math.sin((t / T - 0.5) * math.pi) + 1.0)
    a, r, de_, finite, dt, pairs = rates_tile(
        cell[:n], ids[:n], x[:n], v[:n], rho[:n], m[:n], kind[:n], ring, ints[I_LO:I_LO + 2], ints[I_HI:I_HI + 2],
        consts[C_H], consts[C_RHO0], consts[C_C0], consts[C_B], consts[C_GAMMA], consts[C_ALPHA], consts[C_BETA],
        ramp * consts[C_GX], ramp * consts[C_GY], consts[C_CFL])
    if not finite:
        raise ValueError("SPH rates are not finite")
    acc[:n] = a
    drho[:n] = r
    de[:n] = de_
    out[0] = dt
    return pairs


@nb.njit(KERNEL, nogil=True, cache=True, error_model="numpy")
def move_kernel(tile, step, iteration, mem, ints, consts, reduced, out):
    """:meth:`SPH2DApp.move <shoal.apps.sph.wcsph2d.SPH2DApp.move>` (a tank: no inflow)."""
    clock = _clock(mem, ints)
    dt = reduced[RATES, 0]
    clock[DT] = dt
    if not math.isfinite(dt) or dt <= 0:
        raise ValueError("the time step is not positive and finite")
    t0 = clock[T_]
    n = np.int64(clock[N])
    clock[OUTSIDE], clock[ORDERED] = 0.0, 1.0
    leaving = _rows(mem, ints, 17)
    leaving[0] = 0
    if n == 0:
        clock[T_] = t0 + dt
        return 0
    ids, kind, x, v, vh, rho, rhoh, e, m, cell, acc, drho, de = particles(mem, ints)
    counts = np.empty(2, np.int64)
    counts[0], counts[1] = np.int64(consts[C_COUNTS]), np.int64(consts[C_COUNTS + 1])
    new, keep, kept, worst, outside, ordered = move_tile(
        x[:n], v[:n], vh[:n], rho[:n], rhoh[:n], e[:n], kind[:n], acc[:n], drho[:n], de[:n], ids[:n], cell[:n], dt,
        t0 == 0.0, consts[C_RHO0], consts[C_ORIGIN:C_ORIGIN + 2], consts[C_SIDE:C_SIDE + 2], counts,
        consts[C_OUTFLOW], consts[C_REACH_LO:C_REACH_LO + 2], consts[C_REACH_HI:C_REACH_HI + 2],
        ints[I_LO:I_LO + 2], ints[I_HI:I_HI + 2])
    clock[T_] = t0 + dt
    if kept < n:  # out of the grid: gone, as SPH2DApp._keep drops them (the rates' rows too)
        clock[DELETED] += n - kept
        j = 0
        for i in range(n):
            if keep[i]:
                ids[j], kind[j], rho[j], rhoh[j], e[j], m[j] = ids[i], kind[i], rho[i], rhoh[i], e[i], m[i]
                drho[j], de[j] = drho[i], de[i]
                for a in range(2):
                    x[j, a], v[j, a], vh[j, a] = x[i, a], v[i, a], vh[i, a]
                    acc[j, a], cell[j, a] = acc[i, a], cell[i, a]
                j += 1
        clock[N] = clock[NACC] = kept
    if worst >= 0:
        raise ValueError("a particle moved more than one cell")  # explained by the app (cells still the old ones)
    j = 0
    for i in range(n):
        if keep[i]:
            cell[j, 0], cell[j, 1] = new[i, 0], new[i, 1]
            j += 1
    clock[OUTSIDE], clock[ORDERED] = outside.shape[0], 1.0 if ordered else 0.0
    leaving[0] = outside.shape[0]
    leaving[1:1 + outside.shape[0]] = outside
    return n


@nb.njit(KERNEL, nogil=True, cache=True, error_model="numpy")
def migrate_kernel(tile, step, iteration, mem, ints, consts, reduced, out):
    """:meth:`SPH2DApp.migrate <shoal.apps.sph.wcsph2d.SPH2DApp.migrate>` (halos every step):
    the own particles still in the box and the immigrants, in (cell, id) order. A particle moves
    at most a cell a step (the move checks), so every emigrant lands in a neighbour's box."""
    clock = _clock(mem, ints)
    _rows(mem, ints, 16)[0] = -1  # the particles near the edge are to be found again
    n = np.int64(clock[N])
    rows = _inbox(mem, ints, 15, MIGRANT)
    if rows.shape[0] == 0 and clock[OUTSIDE] == 0 and clock[ORDERED] == 1.0:
        return n
    ids, kind, x, v, vh, rho, rhoh, e, m, cell, acc, drho, de = particles(mem, ints)
    r = rows.shape[0]
    in_ids = np.empty(r, np.int64)
    in_cell = np.empty((r, 2), np.int64)
    for k in range(r):
        in_ids[k] = np.int64(rows[k, 0])
        in_cell[k, 0], in_cell[k, 1] = np.int64(rows[k, 12]), np.int64(rows[k, 13])
    index, _ = box_order(cell[:n], ids[:n], in_cell, in_ids, ints[I_LO:I_LO + 2], ints[I_HI:I_HI + 2])
    total = index.shape[0]
    if total > ints[I_CAP]:
        return -1
    # Gather into new rows, then back (rows of the tile move within it).
    g_ids, g_kind = np.empty(total, np.int64), np.empty(total, np.int8)
    g_vec = np.empty((total, 6))  # x, v, vh
    g_cell = np.empty((total, 2), np.int64)
    g_sca = np.empty((total, 4))  # rho, rhoh, e, m
    for k in range(total):
        i = index[k]
        if i < n:
            g_ids[k], g_kind[k] = ids[i], kind[i]
            g_sca[k, 0], g_sca[k, 1], g_sca[k, 2], g_sca[k, 3] = rho[i], rhoh[i], e[i], m[i]
            for a in range(2):
                g_vec[k, a], g_vec[k, 2 + a], g_vec[k, 4 + a] = x[i, a], v[i, a], vh[i, a]
                g_cell[k, a] = cell[i, a]
        else:
            q = i - n
            g_ids[k], g_kind[k] = np.int64(rows[q, 0]), np.int8(rows[q, 1])
            for a in range(2):
                g_vec[k, a], g_vec[k, 2 + a], g_vec[k, 4 + a] = rows[q, 2 + a], rows[q, 4 + a], rows[q, 6 + a]
                g_cell[k, a] = np.int64(rows[q, 12 + a])
            g_sca[k, 0], g_sca[k, 1], g_sca[k, 2], g_sca[k, 3] = rows[q, 8], rows[q, 9], rows[q, 10], rows[q, 11]
    for k in range(total):
        ids[k], kind[k] = g_ids[k], g_kind[k]
        rho[k], rhoh[k], e[k], m[k] = g_sca[k, 0], g_sca[k, 1], g_sca[k, 2], g_sca[k, 3]
        for a in range(2):
            x[k, a], v[k, a], vh[k, a], cell[k, a] = g_vec[k, a], g_vec[k, 2 + a], g_vec[k, 4 + a], g_cell[k, a]
    clock[N] = total
    return total


@nb.njit(PACKER, nogil=True, cache=True)
def ring_packer(src, reader, mem, ints, reader_ints, consts, slot):
    """:meth:`SPH2DApp.pack_ring <shoal.apps.sph.wcsph2d.SPH2DApp.pack_ring>` for one reader:
    the particles in the ring of cells around its box, in their order."""
    n = np.int64(_clock(mem, ints)[N])
    ids, kind, x, v, vh, rho, rhoh, e, m, cell, acc, drho, de = particles(mem, ints)
    edge = _rows(mem, ints, 16)
    if edge[0] < 0:  # once per tile and step, for all its readers: who is not in its inner box
        edge[0] = rows_outside(cell, n, ints[I_LO:I_LO + 2] + 1, ints[I_HI:I_HI + 2] - 1, edge[1:])
    lo, hi = reader_ints[I_LO:I_LO + 2] - 1, reader_ints[I_HI:I_HI + 2] + 1  # the ring around its box
    rows = slot.shape[0] // RING_COLUMNS
    table = slot[:rows * RING_COLUMNS].reshape((rows, RING_COLUMNS))
    k = 0
    for q in range(edge[0]):
        i = edge[1 + q]
        if _in(cell, i, lo, hi):
            if k == rows:
                return -1
            put_ring_row(table, k, ids, cell, x, v, rho, m, kind, i)
            k += 1
    return k * RING_COLUMNS


@nb.njit(PACKER, nogil=True, cache=True)
def migrant_packer(src, reader, mem, ints, reader_ints, consts, slot):
    """:meth:`SPH2DApp.pack_emigrants <shoal.apps.sph.wcsph2d.SPH2DApp.pack_emigrants>` for one
    reader: the particles that moved into its cells, whole, in their order."""
    leaving = _rows(mem, ints, 17)
    ids, kind, x, v, vh, rho, rhoh, e, m, cell, acc, drho, de = particles(mem, ints)
    lo, hi = reader_ints[I_LO:I_LO + 2], reader_ints[I_HI:I_HI + 2]
    rows = slot.shape[0] // MIGRANT
    k = 0
    for q in range(leaving[0]):
        i = leaving[1 + q]
        if _in(cell, i, lo, hi):
            if k == rows:
                return -1
            row = slot[k * MIGRANT:(k + 1) * MIGRANT]
            row[0], row[1] = ids[i], kind[i]
            for a in range(2):
                row[2 + a], row[4 + a], row[6 + a], row[12 + a] = x[i, a], v[i, a], vh[i, a], cell[i, a]
            row[8], row[9], row[10], row[11] = rho[i], rhoh[i], e[i], m[i]
            k += 1
    return k * MIGRANT


def native_plan(app, tiling) -> Native | None:
    """The 2D SPH phases as native kernels, or ``None`` (the phases then run in Python) for
    what they do not cover: a channel (its inflow creates particles in Python) and lazy halos."""
    p = app.p
    if p.layout != "tank" or p.halo_every != 1:
        return None
    grid = app.cells
    lo_reach, hi_reach = grid.reach()
    consts = np.zeros(NCONSTS)
    consts[[C_H, C_RHO0, C_C0, C_B, C_GAMMA, C_ALPHA, C_BETA, C_GX, C_GY, C_CFL, C_RAMP, C_OUTFLOW]] = (
        app.h, p.rho0, app.c0, app.B, p.gamma, p.alpha, p.beta, p.gravity[0], p.gravity[1], p.cfl, p.gravity_ramp,
        app.outflow_x)
    consts[C_ORIGIN:C_ORIGIN + 2], consts[C_SIDE:C_SIDE + 2] = grid.origin, grid.cell
    consts[C_COUNTS:C_COUNTS + 2] = grid.counts
    consts[C_REACH_LO:C_REACH_LO + 2], consts[C_REACH_HI:C_REACH_HI + 2] = lo_reach, hi_reach

    def clock(state):
        out = np.zeros(CLOCK)
        out[[T_, CREATED, DELETED, N, NACC]] = (state["t"], state["created"], state["deleted"], len(state["id"]),
                                                len(state["acc"]))
        return out

    def unclock(state, clock):
        state["t"], state["created"], state["deleted"] = float(clock[T_]), int(clock[CREATED]), int(clock[DELETED])

    plan = CapacityPlan(tiling, FIELDS, RATES_FIELDS, {"rates": ("ring_in", RING_COLUMNS),
                                                       "migrate": ("migrants_in", MIGRANT)}, clock, unclock, N, NACC,
                        work={"edge": lambda tile, cap, inbox: cap + 1, "outside": lambda tile, cap, inbox: cap + 1})

    def explain(phase, tile, state):
        """The Python phase's error, from a copy of the tile's state as its kernel left it."""
        clock = state["clock"]
        if phase == "rates":
            raise ShoalError("SPH rates are not finite: the simulation blew up (lower app.cfl or app.dx)")
        if phase == "move":
            n = int(clock[N])
            x, ids, old = state["x"][:n], state["id"][:n], state["cell"][:n]  # the move stopped before the cells
            check_moves(old, {"x": x, "id": ids, "cell": grid.index(x)}, grid, "lower app.cfl")
            raise ShoalError(f"time step {float(clock[DT])} is not positive and finite")

    return Native(kernels={"rates": rates_kernel, "move": move_kernel, "migrate": migrate_kernel},
                  fields=plan.fields, ints=plan.ints, reader_ints=plan.reader_ints, consts=consts, prepare=plan.prepare,
                  packers={"rates": ring_packer, "migrate": migrant_packer},
                  inboxes={name: field for name, (field, _) in plan.inboxes.items()},
                  payload_words=plan.payload_words, publish=plan.publish, grow=plan.room.grow, explain=explain)
