"""Numba kernels of 2D weakly compressible SPH (Monaghan 1992, 1994).

Cubic spline kernel with support 2h; Tait equation of state; continuity equation for the
density; momentum with Monaghan's artificial viscosity; thermal energy. Walls are fixed
particles whose density follows the continuity equation (dynamic boundary particles), so the
fluid feels them through pressure.

Each pair of particles is evaluated once and added to both (``rates_pairs``), walking the
particles in the global (cell, id) order: every particle receives its contributions in one
fixed order for any tiling, so results are bitwise identical.

A task makes one compiled call per phase (``rates_tile``, ``move_tile``) and one to pack its
ring halo (``ring_rows``): on small tiles the calls themselves, and the Python around them,
cost as much as the arithmetic.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from ..particles import bad_move, cells_of, members, merge_order, neighbour_pairs, put_keys, ring_keys

FLUID = 0
# A ring halo's rows (particles.py): id, cell, then position, velocity, density, mass and kind.
RING_COLUMNS = 10


@nb.njit(cache=True, nogil=True, inline="always")
def pressure(rho, rho0, B, gamma):
    return B * ((rho / rho0) ** gamma - 1.0)


@nb.njit(cache=True, nogil=True, inline="always")
def sound_speed(rho, rho0, c0, gamma):
    return c0 * (rho / rho0) ** (0.5 * (gamma - 1.0))


@nb.njit(cache=True, nogil=True, inline="always")
def dw_dr(r, h, sigma):
    """Derivative of the cubic spline with support 2h (sigma = 10 / (7 pi h^2))."""
    q = r / h
    if q < 1.0:
        return sigma / h * (-3.0 * q + 2.25 * q * q)
    if q < 2.0:
        t = 2.0 - q
        return -0.75 * sigma / h * t * t
    return 0.0


@nb.njit(cache=True, nogil=True, error_model="numpy")
def equation_of_state(rho, rho0, c0, B, gamma, P, c, p_over_rho2):
    """Pressure, sound speed and P / rho^2 of every particle (once, not once per pair)."""
    for i in range(rho.shape[0]):
        P[i] = pressure(rho[i], rho0, B, gamma)
        c[i] = sound_speed(rho[i], rho0, c0, gamma)
        p_over_rho2[i] = P[i] / (rho[i] * rho[i])


@nb.njit(cache=True, nogil=True, error_model="numpy")
def integrate(x, v, vh, rho, rhoh, e, kind, acc, drho, de, dt, first, rho0):
    """Leapfrog (Monaghan): half-step velocity and density kicked by the rates at step n,
    positions drifted with the half-step velocity, then full-step values predicted for the
    next rate evaluation. Density and velocity stay staggered, so sound waves stay stable.
    """
    kick = 0.5 * dt if first else dt
    for k in range(kind.shape[0]):
        rhoh[k] += kick * drho[k]
        if kind[k] == FLUID:
            vh[k, 0] += kick * acc[k, 0]
            vh[k, 1] += kick * acc[k, 1]
            x[k, 0] += dt * vh[k, 0]
            x[k, 1] += dt * vh[k, 1]
            v[k, 0] = vh[k, 0] + 0.5 * dt * acc[k, 0]
            v[k, 1] = vh[k, 1] + 0.5 * dt * acc[k, 1]
            e[k] += dt * de[k]
        elif rhoh[k] < rho0:
            rhoh[k] = rho0  # walls never pull on the fluid
        rho[k] = rhoh[k] + 0.5 * dt * drho[k]
        if kind[k] != FLUID and rho[k] < rho0:
            rho[k] = rho0


@nb.njit(cache=True, nogil=True, error_model="numpy")
def rates_pairs(x, v, rho, m, kind, own, start, nlx, nly, h, rho0, c0, B, gamma, alpha, beta, gx, gy):
    """Time derivatives of every particle, each pair evaluated once and added to both sides.

    Particles are walked in the global (cell, id) order; the pairs (i, j) with j before i in
    the 3x3 cells around i, one of them owned by this tile, are evaluated. Every particle
    then receives its contributions in one fixed global order, whatever the tiling. Returns
    (acc, drho, de, mu, c) for all particles (c: sound speeds); only the owned ones are
    complete.
    """
    n = rho.shape[0]
    P = np.empty(n)
    c = np.empty(n)
    pr2 = np.empty(n)
    equation_of_state(rho, rho0, c0, B, gamma, P, c, pr2)
    sigma = 10.0 / (7.0 * math.pi * h * h)
    support2 = 4.0 * h * h
    eta2 = 0.01 * h * h
    acc = np.zeros((n, 2))
    drho = np.zeros(n)
    de = np.zeros(n)
    mu = np.zeros(n)
    for cell in range(nlx * nly):
        cx, cy = cell // nly, cell % nly
        # Own particles lie inside the local grid less its outer ring: a ring cell holds halo
        # particles only, whose partners can only be own particles of the inner cells.
        edge = 1 if min(cx, cy) == 0 or cx == nlx - 1 or cy == nly - 1 else 0
        y0, y1 = max(cy - 1, edge), min(cy + 1, nly - 1 - edge)
        for i in range(start[cell], start[cell + 1]):
            xi, yi = x[i, 0], x[i, 1]
            vxi, vyi = v[i, 0], v[i, 1]
            fluid_i = kind[i] == FLUID
            own_i = own[i]
            # The three cells (cx + ox, cy - 1 .. cy + 1) are one range in (cell, id) order;
            # the row ox = +1 holds no particle before i.
            for ox in range(-1, 1):
                if cx + ox < edge or cx + ox >= nlx - edge or y0 > y1:
                    continue
                row = (cx + ox) * nly
                first, last = start[row + y0], start[row + y1 + 1]
                for j in range(first, min(last, i)):
                    if not (own_i or own[j]):
                        continue
                    fluid_j = kind[j] == FLUID
                    if not fluid_i and not fluid_j:
                        continue  # walls do not act on walls
                    rx = xi - x[j, 0]
                    ry = yi - x[j, 1]
                    r2 = rx * rx + ry * ry
                    if r2 >= support2 or r2 == 0.0:
                        continue
                    r = math.sqrt(r2)
                    f = dw_dr(r, h, sigma) / r
                    gwx = f * rx
                    gwy = f * ry
                    vx = vxi - v[j, 0]
                    vy = vyi - v[j, 1]
                    vgw = vx * gwx + vy * gwy
                    drho[i] += m[j] * vgw
                    drho[j] += m[i] * vgw
                    vr = vx * rx + vy * ry
                    visc = 0.0
                    if vr < 0.0:
                        mu_ij = -h * vr / (r2 + eta2)
                        if mu_ij > mu[i]:
                            mu[i] = mu_ij
                        if mu_ij > mu[j]:
                            mu[j] = mu_ij
                        cbar = 0.5 * (c[i] + c[j])
                        rbar = 0.5 * (rho[i] + rho[j])
                        visc = (alpha * cbar * mu_ij + beta * mu_ij * mu_ij) / rbar
                    coeff = pr2[i] + pr2[j] + visc
                    if fluid_i:
                        acc[i, 0] -= m[j] * coeff * gwx
                        acc[i, 1] -= m[j] * coeff * gwy
                        de[i] += 0.5 * m[j] * coeff * vgw
                    if fluid_j:
                        acc[j, 0] += m[i] * coeff * gwx
                        acc[j, 1] += m[i] * coeff * gwy
                        de[j] += 0.5 * m[i] * coeff * vgw
    for i in range(n):
        if kind[i] == FLUID:
            acc[i, 0] += gx
            acc[i, 1] += gy
    return acc, drho, de, mu, c


@nb.njit(cache=True, nogil=True, error_model="numpy")
def own_rates(own_index, acc, drho, de, mu, c, v, kind, h, cfl):
    """The own particles' rates, in their order; whether acceleration and density rate are all
    finite; and the largest stable step for them: Courant (with viscosity) and force limits.
    One compiled pass, with the sound speeds the rates already computed."""
    n = own_index.shape[0]
    a = np.empty((n, 2))
    r = np.empty(n)
    e = np.empty(n)
    finite = True
    dt = np.inf
    for k in range(n):
        i = own_index[k]
        a[k, 0] = acc[i, 0]
        a[k, 1] = acc[i, 1]
        r[k] = drho[i]
        e[k] = de[i]
        finite = finite and math.isfinite(a[k, 0]) and math.isfinite(a[k, 1]) and math.isfinite(r[k])
        if kind[i] != FLUID:
            continue
        speed = math.sqrt(v[i, 0] * v[i, 0] + v[i, 1] * v[i, 1])
        dt = min(dt, cfl * h / (c[i] + speed + mu[i]))
        size = math.sqrt(a[k, 0] * a[k, 0] + a[k, 1] * a[k, 1])
        if size > 0.0:
            dt = min(dt, cfl * math.sqrt(h / size))
    return a, r, e, finite, dt


@nb.njit(cache=True, nogil=True, inline="always")
def put_ring_row(table, k, ids, cell, x, v, rho, m, kind, i):
    """Row ``k`` of a ring table: particle ``i``'s id, cell, x, v, rho, m and kind."""
    put_keys(table, k, ids, cell, i)
    table[k, 3], table[k, 4], table[k, 5], table[k, 6] = x[i, 0], x[i, 1], v[i, 0], v[i, 1]
    table[k, 7], table[k, 8], table[k, 9] = rho[i], m[i], kind[i]


@nb.njit(cache=True, nogil=True)
def ring_rows(cell, ids, x, v, rho, m, kind, los, his, skip_lo, skip_hi):
    """What ``rates_tile`` reads of the particles in each box k (a neighbour's ring of cells):
    rows ``starts[k]:starts[k + 1]`` of a ring table (id, cell, x, v, rho, m, kind).
    ``skip_lo, skip_hi``: a box of cells that meets none of the boxes."""
    starts, idx = members(cell, los, his, skip_lo, skip_hi)
    table = np.empty((idx.shape[0], RING_COLUMNS))
    for k in range(idx.shape[0]):
        put_ring_row(table, k, ids, cell, x, v, rho, m, kind, idx[k])
    return starts, table


@nb.njit(cache=True, nogil=True, error_model="numpy")
def rates_tile(cell, ids, x, v, rho, m, kind, ring, lo, hi, h, rho0, c0, B, gamma, alpha, beta, gx, gy, cfl):
    """One tile's rates: its own particles (``cell`` ... ``kind``, in (cell, id) order) and the
    ring rows its neighbours packed (``ring_rows``, concatenated) merged in (local cell, id)
    order over the tile's box [lo, hi) widened to reach every own particle's neighbour cells,
    then ``rates_pairs`` and ``own_rates``.

    Returns the own particles' (acc, drho, de), whether they are finite, the time step they
    allow, and the candidate pairs weighed (``neighbour_pairs``): the phase's work.
    """
    ring_ids, ring_cell = ring_keys(ring, 2)
    index, start, own, own_index, shape = merge_order(cell, ids, ring_cell, ring_ids, lo, hi)
    n_own = ids.shape[0]
    n = index.shape[0]
    xs = np.empty((n, 2))
    vs = np.empty((n, 2))
    rhos = np.empty(n)
    ms = np.empty(n)
    kinds = np.empty(n, np.int8)
    for k in range(n):
        i = index[k]
        if i < n_own:
            xs[k, 0], xs[k, 1], vs[k, 0], vs[k, 1] = x[i, 0], x[i, 1], v[i, 0], v[i, 1]
            rhos[k], ms[k], kinds[k] = rho[i], m[i], kind[i]
        else:
            j = i - n_own
            xs[k, 0], xs[k, 1], vs[k, 0], vs[k, 1] = ring[j, 3], ring[j, 4], ring[j, 5], ring[j, 6]
            rhos[k], ms[k], kinds[k] = ring[j, 7], ring[j, 8], np.int8(ring[j, 9])
    acc, drho, de, mu, c = rates_pairs(xs, vs, rhos, ms, kinds, own, start, shape[0], shape[1], h, rho0, c0, B, gamma,
                                       alpha, beta, gx, gy)
    a, r, e, finite, dt = own_rates(own_index, acc, drho, de, mu, c, vs, kinds, h, cfl)
    return a, r, e, finite, dt, neighbour_pairs(own, start, shape)


@nb.njit(cache=True, nogil=True, error_model="numpy")
def move_tile(x, v, vh, rho, rhoh, e, kind, acc, drho, de, ids, before, dt, first, rho0, origin, side, counts,
              outflow_x, reach_lo, reach_hi, lo, hi):
    """``integrate``, then every particle's new cell and what the Python around the move needs:

    ``cell`` the new cells; ``keep`` the particles still in the world (inside the cell grid and
    short of ``outflow_x``); of those kept, in the order they keep: the row of the smallest-id
    one that moved more than a cell or left ``[reach_lo, reach_hi]`` (-1: none), the rows
    outside the tile's box [lo, hi), and whether they are still in (cell, id) order.
    """
    integrate(x, v, vh, rho, rhoh, e, kind, acc, drho, de, dt, first, rho0)
    cell = cells_of(x, origin, side, counts, False)
    n = ids.shape[0]
    keep = np.empty(n, np.bool_)
    outside = np.empty(n, np.int64)
    n_out = 0
    kept = 0
    worst = -1
    worst_id = 0
    in_order = True
    last = -1
    for i in range(n):
        keep[i] = not x[i, 0] >= outflow_x
        for a in range(2):
            if cell[i, a] < 0 or cell[i, a] >= counts[a]:
                keep[i] = False
        if not keep[i]:
            continue
        if bad_move(before, cell, x, i, reach_lo, reach_hi) and (worst < 0 or ids[i] < worst_id):
            worst, worst_id = kept, ids[i]
        if not (lo[0] <= cell[i, 0] < hi[0] and lo[1] <= cell[i, 1] < hi[1]):
            outside[n_out] = kept
            n_out += 1
        if last >= 0 and in_order:
            if cell[i, 0] != cell[last, 0]:
                in_order = cell[i, 0] > cell[last, 0]
            elif cell[i, 1] != cell[last, 1]:
                in_order = cell[i, 1] > cell[last, 1]
            else:
                in_order = ids[i] > ids[last]
        last = i
        kept += 1
    return cell, keep, kept, worst, outside[:n_out], in_order
