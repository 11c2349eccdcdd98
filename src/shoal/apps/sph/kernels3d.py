"""Numba kernels of PARSEC fluidanimate's SPH (Müller et al. 2003), in double precision.

Density with the poly6 kernel, pressure with the spiky gradient, viscosity with the viscosity
Laplacian, cell side = support h, penalty walls plus reflection, fixed time step.

Pairs are evaluated once and added to both particles, as fluidanimate does. A tile walks its
own and halo particles in the global (cell, id) order and evaluates the pairs (i, j), j before
i, that touch one of its own particles: every own particle then receives its contributions
in the very order of a one-tile run, so results are bitwise identical for any tiling.

A task makes one compiled call per phase (``density_tile``, ``forces_tile``) and one to pack
its ring halo (``ring_rows``): on small tiles the calls, and the Python around them, cost as
much as the arithmetic.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from ..particles import bad_move, cells_of, members, merge_order, neighbour_pairs, put_keys, ring_keys

# fluidanimate's constants (fluid.hpp)
DOMAIN_MIN = np.array([-0.065, -0.08, -0.065])
DOMAIN_MAX = np.array([0.065, 0.1, 0.065])
KERNEL_RADIUS_MULTIPLIER = 1.695
DOUBLE_REST_DENSITY = 2000.0
STIFFNESS_PRESSURE = 3.0
STIFFNESS_COLLISIONS = 30000.0
DAMPING = 128.0
VISCOSITY = 0.4
PAR_SIZE = 0.0002
GRAVITY = np.array([0.0, -9.8, 0.0])

# A ring halo's rows (particles.py): id and cell, then the position and, for the forces,
# velocity and density.
KEYS, POSITION_COLUMNS, MOTION_COLUMNS = 4, 7, 11


@nb.njit(cache=True, nogil=True, error_model="numpy")
def _earlier_spans(c, start, shape, lo, hi):
    """Particle ranges holding every neighbour of local cell ``c`` that can come before it
    and can pair with it.

    Cells are row-major with z fastest, so the three z-neighbours of one (x, y) row are one
    contiguous range in (cell, id) order: 9 ranges instead of 27 cells, and of those only the
    5 rows not after ``c``'s own row can hold earlier particles. The ranges keep the global
    order, so sums still add in it.

    Own particles all lie inside the local box less its outer ring of cells (the box is
    widened by one cell beyond where own particles reach). A cell of that ring holds halo
    particles only, whose pairs count only with own particles: its ranges are clipped to the
    inner box, which skips exactly the halo-halo pairs.
    """
    nx, ny, nz = shape
    cx = c // (ny * nz)
    cy = (c // nz) % ny
    cz = c % nz
    ring = min(cx, cy, cz) == 0 or cx == nx - 1 or cy == ny - 1 or cz == nz - 1
    edge = 1 if ring else 0  # the cells a ring cell's partners may occupy: [edge, n - edge)
    z0 = max(cz - 1, edge)
    z1 = min(cz + 1, nz - 1 - edge)
    k = 0
    if z0 > z1:
        return k
    for ox in range(-1, 1):
        if cx + ox < edge or cx + ox >= nx - edge:
            continue
        for oy in range(-1, 2 if ox < 0 else 1):
            if cy + oy < edge or cy + oy >= ny - edge:
                continue
            row = ((cx + ox) * ny + (cy + oy)) * nz
            if start[row + z1 + 1] > start[row + z0]:
                lo[k] = start[row + z0]
                hi[k] = start[row + z1 + 1]
                k += 1
    return k


@nb.njit(cache=True, nogil=True, error_model="numpy")
def densities(x, own, start, shape, h, rows, self_term, coeff):
    """Densities of the own particles, at ``rows`` of the neighbourhood in their order:
    (sum_j (h^2 - r^2)^3 + self_term) * coeff, the sum over neighbours j taken pair by pair
    in the global order.

    Branch-free: a pair out of range (or between two halo particles) adds exactly 0.0, which
    leaves every sum bitwise unchanged, and costs less than a mispredicted branch.
    """
    n = x.shape[0]
    hsq = h * h
    rho = np.zeros(n)
    lo = np.empty(5, np.int64)
    hi = np.empty(5, np.int64)
    for c in range(start.shape[0] - 1):
        if start[c + 1] == start[c]:
            continue
        k = _earlier_spans(c, start, shape, lo, hi)
        for i in range(start[c], start[c + 1]):
            # Nothing visited before i adds to i (pairs are (i, j) with j before i), so a
            # register sum started from rho[i] adds in exactly the same order.
            xi, yi, zi = x[i, 0], x[i, 1], x[i, 2]
            own_i = own[i]
            sum_i = rho[i]
            for m in range(k):
                for j in range(lo[m], min(hi[m], i)):
                    dx = xi - x[j, 0]
                    dy = yi - x[j, 1]
                    dz = zi - x[j, 2]
                    t = max(hsq - (dx * dx + dy * dy + dz * dz), 0.0)
                    if not (own_i or own[j]):
                        t = 0.0
                    tc = t * t * t
                    sum_i += tc
                    rho[j] += tc
            rho[i] = sum_i
    out = np.empty(rows.shape[0])
    for k in range(rows.shape[0]):
        out[k] = (rho[rows[k]] + self_term) * coeff
    return out


@nb.njit(cache=True, nogil=True, error_model="numpy")
def accelerations(x, v, rho, own, start, shape, h, pressure_coeff, viscosity_coeff, rest2, gravity):
    """Pressure and viscosity accelerations plus gravity (pairs once, in global order)."""
    n = x.shape[0]
    hsq = h * h
    a = np.zeros((n, 3))
    for i in range(n):
        if own[i]:
            a[i, 0] = gravity[0]
            a[i, 1] = gravity[1]
            a[i, 2] = gravity[2]
    lo = np.empty(5, np.int64)
    hi = np.empty(5, np.int64)
    for c in range(start.shape[0] - 1):
        if start[c + 1] == start[c]:
            continue
        k = _earlier_spans(c, start, shape, lo, hi)
        for i in range(start[c], start[c + 1]):
            xi, yi, zi = x[i, 0], x[i, 1], x[i, 2]
            vxi, vyi, vzi = v[i, 0], v[i, 1], v[i, 2]
            rhoi = rho[i]
            own_i = own[i]
            sx, sy, sz = a[i, 0], a[i, 1], a[i, 2]  # register sums, same order as in memory
            for m in range(k):
                for j in range(lo[m], min(hi[m], i)):
                    dx = xi - x[j, 0]
                    dy = yi - x[j, 1]
                    dz = zi - x[j, 2]
                    d2 = dx * dx + dy * dy + dz * dz
                    if d2 < hsq and (own_i or own[j]):
                        dist = math.sqrt(max(d2, 1e-12))
                        hmr = h - dist
                        f = pressure_coeff * (hmr * hmr / dist) * (rhoi + rho[j] - rest2)
                        g = viscosity_coeff * hmr
                        inv = 1.0 / (rhoi * rho[j])
                        ax = (dx * f + (v[j, 0] - vxi) * g) * inv
                        ay = (dy * f + (v[j, 1] - vyi) * g) * inv
                        az = (dz * f + (v[j, 2] - vzi) * g) * inv
                        sx += ax
                        sy += ay
                        sz += az
                        a[j, 0] -= ax
                        a[j, 1] -= ay
                        a[j, 2] -= az
            a[i, 0] = sx
            a[i, 1] = sy
            a[i, 2] = sz
    return a


@nb.njit(cache=True, nogil=True, error_model="numpy")
def advance(x, v, vh, a, rows, dt, lo, hi, par_size, stiffness, damping):
    """Penalty walls (on the predicted position), leapfrog step, then reflection at walls.

    Particle i's acceleration is row ``rows[i]`` of ``a`` (the neighbourhood's order). Returns
    whether every position is finite."""
    eps = 1e-10
    acc = np.empty(3)
    finite = True
    for i in range(x.shape[0]):
        for d in range(3):
            acc[d] = a[rows[i], d]
            pos = x[i, d] + vh[i, d] * dt
            diff = par_size - (pos - lo[d])
            if diff > eps:
                acc[d] += stiffness * diff - damping * v[i, d]
            diff = par_size - (hi[d] - pos)
            if diff > eps:
                acc[d] -= stiffness * diff + damping * v[i, d]
        for d in range(3):
            half = vh[i, d] + acc[d] * dt
            x[i, d] += half * dt
            v[i, d] = 0.5 * (vh[i, d] + half)
            vh[i, d] = half
        for d in range(3):
            if x[i, d] < lo[d]:
                x[i, d] = 2.0 * lo[d] - x[i, d]
                v[i, d] = -v[i, d]
                vh[i, d] = -vh[i, d]
            elif x[i, d] > hi[d]:
                x[i, d] = 2.0 * hi[d] - x[i, d]
                v[i, d] = -v[i, d]
                vh[i, d] = -vh[i, d]
            finite = finite and math.isfinite(x[i, d])
    return finite


@nb.njit(cache=True, nogil=True, inline="always")
def put_ring_row(table, k, ids, cell, x, v, rho, i, motion):
    """Row ``k`` of a ring table: particle ``i``'s id, cell, position and, with ``motion``,
    velocity and density."""
    put_keys(table, k, ids, cell, i)
    for d in range(3):
        table[k, KEYS + d] = x[i, d]
    if motion:
        for d in range(3):
            table[k, KEYS + 3 + d] = v[i, d]
        table[k, KEYS + 6] = rho[i]


@nb.njit(cache=True, nogil=True)
def ring_rows(cell, ids, x, v, rho, motion, los, his, skip_lo, skip_hi):
    """What the density (``motion`` false: positions) or the forces (positions, velocities,
    density) read of the particles in each box k (a neighbour's ring of cells): rows
    ``starts[k]:starts[k + 1]`` of a ring table (id, cell, then those).
    ``skip_lo, skip_hi``: a box of cells that meets none of the boxes."""
    starts, idx = members(cell, los, his, skip_lo, skip_hi)
    table = np.empty((idx.shape[0], MOTION_COLUMNS if motion else POSITION_COLUMNS))
    for k in range(idx.shape[0]):
        put_ring_row(table, k, ids, cell, x, v, rho, idx[k], motion)
    return starts, table


@nb.njit(cache=True, nogil=True)
def _merged(index, n_own, own_rows, ring, first, width):
    """Columns ``first:first + width`` of the ring table beside the own particles' array, in
    the merged order ``index`` (own particles first, then the ring's rows)."""
    out = np.empty((index.shape[0], width))
    for k in range(index.shape[0]):
        i = index[k]
        for d in range(width):
            out[k, d] = own_rows[i, d] if i < n_own else ring[i - n_own, first + d]
    return out


@nb.njit(cache=True, nogil=True, error_model="numpy")
def density_tile(cell, ids, x, ring, lo, hi, h, self_term, coeff):
    """One tile's densities: own and ring particles (``ring_rows`` without motion, concatenated)
    merged in (local cell, id) order (``merge_order``), then ``densities``.

    Returns the own particles' densities, the merge (index, cell starts, own flags, own rows,
    local grid shape) for the forces phase to reuse, and the candidate pairs weighed
    (``neighbour_pairs``): the work of both phases.
    """
    ring_ids, ring_cell = ring_keys(ring, 3)
    index, start, own, own_index, shape = merge_order(cell, ids, ring_cell, ring_ids, lo, hi)
    xs = _merged(index, ids.shape[0], x, ring, KEYS, 3)
    rho = densities(xs, own, start, (shape[0], shape[1], shape[2]), h, own_index, self_term, coeff)
    return rho, index, start, own, own_index, shape, neighbour_pairs(own, start, shape)


@nb.njit(cache=True, nogil=True, error_model="numpy")
def forces_tile(x, v, vh, rho, ids, before, ring, index, start, own, own_index, shape, h, pressure_coeff,
                viscosity_coeff, rest2, gravity, dt, wall_lo, wall_hi, par_size, stiffness, damping, origin, side,
                counts, reach_lo, reach_hi, lo, hi):
    """One tile's forces and step on the density phase's merge, with the ring's positions,
    velocities and densities (``ring_rows`` with motion): ``accelerations``, ``advance``, then
    every particle's new cell (clamped into the grid).

    Returns whether every position is finite, the new cells, the row of the smallest-id
    particle that moved more than a cell or left ``[reach_lo, reach_hi]`` (-1: none), the rows
    of the particles outside the tile's box [lo, hi), and whether they are still in (cell, id)
    order.
    """
    n_own = ids.shape[0]
    xs = _merged(index, n_own, x, ring, KEYS, 3)
    vs = _merged(index, n_own, v, ring, KEYS + 3, 3)
    rhos = _merged(index, n_own, rho.reshape(n_own, 1), ring, KEYS + 6, 1)[:, 0]
    a = accelerations(xs, vs, rhos, own, start, (shape[0], shape[1], shape[2]), h, pressure_coeff, viscosity_coeff,
                      rest2, gravity)
    finite = advance(x, v, vh, a, own_index, dt, wall_lo, wall_hi, par_size, stiffness, damping)
    cell = cells_of(x, origin, side, counts, True)
    worst = -1
    outside = np.empty(n_own, np.int64)
    n_out = 0
    in_order = True
    for i in range(n_own):
        if bad_move(before, cell, x, i, reach_lo, reach_hi) and (worst < 0 or ids[i] < ids[worst]):
            worst = i
        inside = True
        for d in range(3):
            if cell[i, d] < lo[d] or cell[i, d] >= hi[d]:
                inside = False
        if not inside:
            outside[n_out] = i
            n_out += 1
        if i > 0 and in_order:
            d = 0
            while d < 3 and cell[i, d] == cell[i - 1, d]:
                d += 1
            in_order = cell[i, d] > cell[i - 1, d] if d < 3 else ids[i] > ids[i - 1]
    return finite, cell, worst, outside[:n_out], in_order
