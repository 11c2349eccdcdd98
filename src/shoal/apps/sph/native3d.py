"""The fluidanimate-style 3D SPH phases as native kernels (see :mod:`.native2d` for the 2D ones).

A tile's memory holds its particles at a capacity (:class:`~shoal.apps.sph.capacity.CapacityPlan`),
a clock (:data:`CLOCK` slots: the step, the particle count, the candidate pairs the density
phase weighed and, from the forces to the migration, the particles outside the box and whether
they are in (cell, id) order) and three inboxes: ring positions for the density, ring motion
for the forces (:func:`~shoal.apps.sph.kernels3d.ring_rows`' columns) and emigrants for the
migration (:data:`MIGRANT` columns); and the density phase's merge of own and ring particles,
which the forces phase reuses (:func:`keep_merge`). The kernels call the Python phases'
compiled functions (``density_tile``, ``forces_tile``, ``box_order``) on the same values in the
same order, so a run is bitwise the Python executor's.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from ...errors import ShoalError
from ...runtime.native import KERNEL, Native
from ...runtime.native.engine import PACKER
from ..particles import _in, box_order, check_moves, rows_outside
from .capacity import I_LO, CapacityPlan, descriptor_slots
from .kernels3d import (
    DAMPING,
    DOMAIN_MAX,
    DOMAIN_MIN,
    DOUBLE_REST_DENSITY,
    GRAVITY,
    MOTION_COLUMNS,
    PAR_SIZE,
    POSITION_COLUMNS,
    STIFFNESS_COLLISIONS,
    density_tile,
    forces_tile,
    put_ring_row,
)

PARTICLES = ("id", "x", "v", "vh", "rho", "cell")  # the fields a 3D tile carries
STEP, N, PAIRS, OUTSIDE, ORDERED = range(5)  # clock slots
CLOCK = 5
MIGRANT = 14  # an emigrant's row: id, x, v, vh, rho, cell
I_HI, I_CAP, I_OFF = descriptor_slots(3)
# The constants: support, density, pressure and viscosity terms, fluidanimate's constants, the grid.
C_H, C_SELF, C_DENSITY, C_PRESSURE, C_VISCOSITY, C_REST2, C_DT, C_PAR, C_STIFF, C_DAMP = range(10)
C_GRAVITY, C_WALL_LO, C_WALL_HI, C_ORIGIN, C_SIDE, C_COUNTS, C_REACH_LO, C_REACH_HI = range(10, 34, 3)
NCONSTS = 34


@nb.njit(nogil=True, cache=True, inline="always")
def _field(mem, ints, k):
    return mem[ints[I_OFF + k]:ints[I_OFF + k + 1]]


@nb.njit(nogil=True, cache=True)
def particles(mem, ints):
    """Views of a tile's particle fields at full capacity, in :data:`PARTICLES` order."""
    cap = ints[I_CAP]
    ids = _field(mem, ints, 0).view(np.int64)
    x = _field(mem, ints, 1).reshape((cap, 3))
    v = _field(mem, ints, 2).reshape((cap, 3))
    vh = _field(mem, ints, 3).reshape((cap, 3))
    rho = _field(mem, ints, 4)
    cell = _field(mem, ints, 5).view(np.int64).reshape((cap, 3))
    return ids, x, v, vh, rho, cell


@nb.njit(nogil=True, cache=True, inline="always")
def _clock(mem, ints):
    return _field(mem, ints, 6)


@nb.njit(nogil=True, cache=True, inline="always")
def _rows(mem, ints, k):
    """A list of rows (11: the particles near the box's edge, -1 until known; 12: those
    outside it after the forces): its length, then the rows."""
    return _field(mem, ints, k).view(np.int64)


@nb.njit(nogil=True, cache=True, inline="always")
def _inbox(mem, ints, k, columns):
    """The rows inbox ``k`` (0: positions, 1: motion, 2: migrants) holds."""
    box = _field(mem, ints, 7 + k)
    used = np.int64(box[0])
    return box[1:1 + used].reshape((used // columns, columns))


@nb.njit(nogil=True, cache=True, inline="always")
def _vector(consts, at):
    return consts[at:at + 3]


def merge_words(box: np.ndarray, rows: int) -> int:
    """Room for a merge of ``rows`` particles over a tile whose cell box has sides ``box``
    (widened by two cells: the local grid reaches a cell past particles a cell outside)."""
    return 6 + 3 * rows + int(np.prod(box + 4)) + 1 + rows // 8 + 1


@nb.njit(nogil=True, cache=True)
def keep_merge(mem, ints, index, start, own, own_index, shape):
    """Store a merge (:func:`~shoal.apps.particles.merge_order`) in the tile's ``merge``
    field: its lengths and shape, then index, start and own rows as integers, own as bytes.
    False when it does not fit."""
    box = _field(mem, ints, 10)
    ni, ns, no = index.shape[0], start.shape[0], own_index.shape[0]
    need = 6 + ni + ns + no + (ni + 7) // 8
    if need > box.shape[0]:
        return False
    box[0], box[1], box[2] = ni, ns, no
    for a in range(3):
        box[3 + a] = shape[a]
    words = box.view(np.int64)
    words[6:6 + ni] = index
    words[6 + ni:6 + ni + ns] = start
    words[6 + ni + ns:6 + ni + ns + no] = own_index
    flags = box[6 + ni + ns + no:].view(np.uint8)
    for i in range(ni):
        flags[i] = own[i]
    return True


@nb.njit(nogil=True, cache=True)
def kept_merge(mem, ints):
    """The merge :func:`keep_merge` stored: index, start, own, own rows, shape."""
    box = _field(mem, ints, 10)
    ni, ns, no = np.int64(box[0]), np.int64(box[1]), np.int64(box[2])
    shape = np.empty(3, np.int64)
    for a in range(3):
        shape[a] = np.int64(box[3 + a])
    words = box.view(np.int64)
    own = box[6 + ni + ns + no:].view(np.uint8)[:ni].view(np.bool_)
    return words[6:6 + ni], words[6 + ni:6 + ni + ns], own, words[6 + ni + ns:6 + ni + ns + no], shape


@nb.njit(KERNEL, nogil=True, cache=True, error_model="numpy")
def density_kernel(tile, step, iteration, mem, ints, consts, reduced, out):
    """:meth:`FluidAnimate3DApp.density <shoal.apps.sph.fluidanimate3d.FluidAnimate3DApp.density>`."""
    clock = _clock(mem, ints)
    n = np.int64(clock[N])
    clock[PAIRS] = 0
    if n == 0:
        return 0
    ids, x, v, vh, rho, cell = particles(mem, ints)
    ring = _inbox(mem, ints, 0, POSITION_COLUMNS)
    got = density_tile(cell[:n], ids[:n], x[:n], ring, ints[I_LO:I_LO + 3], ints[I_HI:I_HI + 3], consts[C_H],
                       consts[C_SELF], consts[C_DENSITY])
    if not keep_merge(mem, ints, got[1], got[2], got[3], got[4], got[5]):
        return -1
    rho[:n] = got[0]
    clock[PAIRS] = got[6]
    return got[6]


@nb.njit(KERNEL, nogil=True, cache=True, error_model="numpy")
def forces_kernel(tile, step, iteration, mem, ints, consts, reduced, out):
    """:meth:`FluidAnimate3DApp.forces <shoal.apps.sph.fluidanimate3d.FluidAnimate3DApp.forces>`."""
    clock = _clock(mem, ints)
    n = np.int64(clock[N])
    clock[OUTSIDE], clock[ORDERED] = 0.0, 1.0
    leaving = _rows(mem, ints, 12)
    leaving[0] = 0
    if n == 0:
        return 0
    ids, x, v, vh, rho, cell = particles(mem, ints)
    ring = _inbox(mem, ints, 1, MOTION_COLUMNS)
    lo, hi = ints[I_LO:I_LO + 3], ints[I_HI:I_HI + 3]
    index, start, own, own_index, shape = kept_merge(mem, ints)  # the same particles as the density phase's
    counts = np.empty(3, np.int64)
    for a in range(3):
        counts[a] = np.int64(consts[C_COUNTS + a])
    finite, new, worst, outside, ordered = forces_tile(
        x[:n], v[:n], vh[:n], rho[:n], ids[:n], cell[:n], ring, index, start, own, own_index, shape, consts[C_H],
        consts[C_PRESSURE], consts[C_VISCOSITY], consts[C_REST2], _vector(consts, C_GRAVITY), consts[C_DT],
        _vector(consts, C_WALL_LO), _vector(consts, C_WALL_HI), consts[C_PAR], consts[C_STIFF], consts[C_DAMP],
        _vector(consts, C_ORIGIN), _vector(consts, C_SIDE), counts, _vector(consts, C_REACH_LO),
        _vector(consts, C_REACH_HI), lo, hi)
    if not finite or worst >= 0:
        raise ValueError("the particles left the world")  # explained by the app (cells still the old ones)
    cell[:n] = new
    clock[OUTSIDE], clock[ORDERED] = outside.shape[0], 1.0 if ordered else 0.0
    leaving[0] = outside.shape[0]
    leaving[1:1 + outside.shape[0]] = outside
    return np.int64(clock[PAIRS])  # counted by the density phase, on the same neighbourhood


@nb.njit(KERNEL, nogil=True, cache=True, error_model="numpy")
def migrate_kernel(tile, step, iteration, mem, ints, consts, reduced, out):
    """:meth:`FluidAnimate3DApp.migrate <shoal.apps.sph.fluidanimate3d.FluidAnimate3DApp.migrate>`:
    the own particles still in the box and the immigrants, in (cell, id) order. A particle moves
    at most a cell a step (the forces check), so every emigrant lands in a neighbour's box."""
    clock = _clock(mem, ints)
    clock[STEP] = step + 1
    _rows(mem, ints, 11)[0] = -1  # the particles near the edge are to be found again
    n = np.int64(clock[N])
    rows = _inbox(mem, ints, 2, MIGRANT)
    if rows.shape[0] == 0 and clock[OUTSIDE] == 0 and clock[ORDERED] == 1.0:
        return n
    ids, x, v, vh, rho, cell = particles(mem, ints)
    r = rows.shape[0]
    in_ids = np.empty(r, np.int64)
    in_cell = np.empty((r, 3), np.int64)
    for k in range(r):
        in_ids[k] = np.int64(rows[k, 0])
        for a in range(3):
            in_cell[k, a] = np.int64(rows[k, 11 + a])
    index, _ = box_order(cell[:n], ids[:n], in_cell, in_ids, ints[I_LO:I_LO + 3], ints[I_HI:I_HI + 3])
    total = index.shape[0]
    if total > ints[I_CAP]:
        return -1
    g_ids = np.empty(total, np.int64)
    g_real = np.empty((total, 10))  # x, v, vh, rho
    g_cell = np.empty((total, 3), np.int64)
    for k in range(total):
        i = index[k]
        if i < n:
            g_ids[k], g_real[k, 9] = ids[i], rho[i]
            for a in range(3):
                g_real[k, a], g_real[k, 3 + a], g_real[k, 6 + a], g_cell[k, a] = x[i, a], v[i, a], vh[i, a], cell[i, a]
        else:
            q = i - n
            g_ids[k] = np.int64(rows[q, 0])
            for c in range(10):
                g_real[k, c] = rows[q, 1 + c]
            for a in range(3):
                g_cell[k, a] = np.int64(rows[q, 11 + a])
    for k in range(total):
        ids[k], rho[k] = g_ids[k], g_real[k, 9]
        for a in range(3):
            x[k, a], v[k, a], vh[k, a], cell[k, a] = g_real[k, a], g_real[k, 3 + a], g_real[k, 6 + a], g_cell[k, a]
    clock[N] = total
    return total


@nb.njit(nogil=True, cache=True, inline="always")
def _ring(mem, ints, reader_ints, slot, motion):
    """The particles in the ring of cells around the reader's box: id, cell, position, and with
    ``motion`` velocity and density (:func:`~shoal.apps.sph.kernels3d.ring_rows`)."""
    n = np.int64(_clock(mem, ints)[N])
    ids, x, v, vh, rho, cell = particles(mem, ints)
    edge = _rows(mem, ints, 11)
    if edge[0] < 0:  # once per tile and step, for all its readers: who is not in its inner box
        edge[0] = rows_outside(cell, n, ints[I_LO:I_LO + 3] + 1, ints[I_HI:I_HI + 3] - 1, edge[1:])
    lo, hi = reader_ints[I_LO:I_LO + 3] - 1, reader_ints[I_HI:I_HI + 3] + 1  # the ring around its box
    columns = MOTION_COLUMNS if motion else POSITION_COLUMNS
    rows = slot.shape[0] // columns
    table = slot[:rows * columns].reshape((rows, columns))
    k = 0
    for q in range(edge[0]):
        i = edge[1 + q]
        if _in(cell, i, lo, hi):
            if k == rows:
                return -1
            put_ring_row(table, k, ids, cell, x, v, rho, i, motion)
            k += 1
    return k * columns


@nb.njit(PACKER, nogil=True, cache=True)
def positions_packer(src, reader, mem, ints, reader_ints, consts, slot):
    """:meth:`FluidAnimate3DApp.pack_positions <shoal.apps.sph.fluidanimate3d.FluidAnimate3DApp.pack_positions>`."""
    return _ring(mem, ints, reader_ints, slot, False)


@nb.njit(PACKER, nogil=True, cache=True)
def motion_packer(src, reader, mem, ints, reader_ints, consts, slot):
    """:meth:`FluidAnimate3DApp.pack_densities <shoal.apps.sph.fluidanimate3d.FluidAnimate3DApp.pack_densities>`."""
    return _ring(mem, ints, reader_ints, slot, True)


@nb.njit(PACKER, nogil=True, cache=True)
def migrant_packer(src, reader, mem, ints, reader_ints, consts, slot):
    """:meth:`FluidAnimate3DApp.pack_emigrants <shoal.apps.sph.fluidanimate3d.FluidAnimate3DApp.pack_emigrants>`
    for one reader: the particles that moved into its cells, whole, in their order."""
    leaving = _rows(mem, ints, 12)
    ids, x, v, vh, rho, cell = particles(mem, ints)
    lo, hi = reader_ints[I_LO:I_LO + 3], reader_ints[I_HI:I_HI + 3]
    rows = slot.shape[0] // MIGRANT
    k = 0
    for q in range(leaving[0]):
        i = leaving[1 + q]
        if _in(cell, i, lo, hi):
            if k == rows:
                return -1
            row = slot[k * MIGRANT:(k + 1) * MIGRANT]
            row[0], row[10] = ids[i], rho[i]
            for a in range(3):
                row[1 + a], row[4 + a], row[7 + a], row[11 + a] = x[i, a], v[i, a], vh[i, a], cell[i, a]
            k += 1
    return k * MIGRANT


def native_plan(app, tiling) -> Native:
    """The three phases as native kernels, halos by the packers above."""
    grid = app.cells
    consts = np.zeros(NCONSTS)
    consts[[C_H, C_SELF, C_DENSITY, C_PRESSURE, C_VISCOSITY, C_REST2, C_DT, C_PAR, C_STIFF, C_DAMP]] = (
        app.h, app.h**6, app.density_coeff, app.pressure_coeff, app.viscosity_coeff, DOUBLE_REST_DENSITY,
        app.p.time_step, PAR_SIZE, STIFFNESS_COLLISIONS, DAMPING)
    for at, vector in ((C_GRAVITY, GRAVITY), (C_WALL_LO, DOMAIN_MIN), (C_WALL_HI, DOMAIN_MAX), (C_ORIGIN, grid.origin),
                       (C_SIDE, grid.cell), (C_COUNTS, grid.counts), (C_REACH_LO, app.reach[0]),
                       (C_REACH_HI, app.reach[1])):
        consts[at:at + 3] = vector

    def clock(state):
        out = np.zeros(CLOCK)
        out[[STEP, N, ORDERED]] = state["step"], len(state["id"]), 1.0
        return out

    def unclock(state, clock):
        state["step"] = int(clock[STEP])

    plan = CapacityPlan(tiling, PARTICLES, (), {"density": ("positions_in", POSITION_COLUMNS),
                                                "forces": ("motion_in", MOTION_COLUMNS),
                                                "migrate": ("migrants_in", MIGRANT)}, clock, unclock, N,
                        work={"merge": lambda t, cap, inbox: merge_words(tiling.hi[t] - tiling.lo[t], cap + inbox),
                              "edge": lambda t, cap, inbox: cap + 1, "outside": lambda t, cap, inbox: cap + 1})
    remedy = app._remedy

    def explain(phase, tile, state):
        """The forces phase's error, from a copy of the tile's state as its kernel left it."""
        n = int(state["clock"][N])
        x, ids, old = state["x"][:n], state["id"][:n], state["cell"][:n]
        if not np.isfinite(x).all():
            raise ShoalError(f"particle positions are not finite: the simulation blew up; {remedy}")
        check_moves(old, {"x": x, "id": ids, "cell": grid.index(x)}, grid, remedy)

    return Native(kernels={"density": density_kernel, "forces": forces_kernel, "migrate": migrate_kernel},
                  fields=plan.fields, ints=plan.ints, reader_ints=plan.reader_ints, consts=consts, prepare=plan.prepare,
                  packers={"density": positions_packer, "forces": motion_packer, "migrate": migrant_packer},
                  inboxes={name: field for name, (field, _) in plan.inboxes.items()},
                  payload_words=plan.payload_words, publish=plan.publish, grow=plan.room.grow, explain=explain)
