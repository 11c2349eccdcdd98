"""Particles and the MAC grid, compiled: particle-to-grid, grid-to-particle and RK2 advection.

Grids are patches: 3D arrays (one cell deep in 2D) whose first cell is the global cell
``org``; ``U[a]`` holds the velocity component ``a`` on the low face of each cell along axis
``a``. Interpolation weights are worked out from global coordinates before the patch's origin
is subtracted, so a particle weighs a face alike in every tile's patch: the tiling never
changes a bit. Particles come in (cell, id) order, and every face sums their contributions in
that order.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np


@nb.njit(cache=True, nogil=True, inline="always")
def _stencil(pos, a, ndim, h, org, base, frac):
    """The low corner (patch indices) and fractions of the linear stencil of component ``a``
    at ``pos``: faces sit at integer coordinates along ``a`` and at cell centres across it."""
    for b in range(3):
        if b < ndim:
            s = pos[b] / h
            if b != a:
                s -= 0.5
            f = math.floor(s)
            base[b] = np.int64(f) - org[b]
            frac[b] = s - f
        else:
            base[b] = -org[b]
            frac[b] = 0.0


@nb.njit(cache=True, nogil=True, inline="always")
def _weight(frac, di, dj, dk, ndim):
    wi = frac[0] if di else 1.0 - frac[0]
    wj = frac[1] if dj else 1.0 - frac[1]
    if ndim == 3:
        return wi * wj * (frac[2] if dk else 1.0 - frac[2])
    return wi * wj


@nb.njit(cache=True, nogil=True, inline="always")
def _interpolate(U, a, base, frac, ndim):
    """Component ``a`` of the patch's velocity at the stencil ``base``, ``frac`` (bi- or
    trilinear, one axis at a time)."""
    i, j, k = base[0], base[1], base[2]
    if ndim == 3:
        fz = frac[2]
        c00 = U[a, i, j, k] * (1.0 - fz) + U[a, i, j, k + 1] * fz
        c01 = U[a, i, j + 1, k] * (1.0 - fz) + U[a, i, j + 1, k + 1] * fz
        c10 = U[a, i + 1, j, k] * (1.0 - fz) + U[a, i + 1, j, k + 1] * fz
        c11 = U[a, i + 1, j + 1, k] * (1.0 - fz) + U[a, i + 1, j + 1, k + 1] * fz
    else:
        c00, c01, c10, c11 = U[a, i, j, k], U[a, i, j + 1, k], U[a, i + 1, j, k], U[a, i + 1, j + 1, k]
    fy = frac[1]
    return (c00 * (1.0 - fy) + c01 * fy) * (1.0 - frac[0]) + (c10 * (1.0 - fy) + c11 * fy) * frac[0]


@nb.njit(cache=True, nogil=True, inline="always")
def _sample(U, a, pos, ndim, h, org, base, frac):
    """Component ``a`` of the patch's velocity at ``pos``."""
    _stencil(pos, a, ndim, h, org, base, frac)
    return _interpolate(U, a, base, frac, ndim)


@nb.njit(cache=True, nogil=True, inline="always")
def _scatter(U, W, a, i, j, k, frac, value, ndim):
    """Add ``value`` and its weights to the stencil's faces (weights as :func:`_weight`'s)."""
    for di in range(2):
        wi = frac[0] if di else 1.0 - frac[0]
        for dj in range(2):
            wij = wi * (frac[1] if dj else 1.0 - frac[1])
            if ndim == 3:
                for dk in range(2):
                    w = wij * (frac[2] if dk else 1.0 - frac[2])
                    U[a, i + di, j + dj, k + dk] += w * value
                    W[a, i + di, j + dj, k + dk] += w
            else:
                U[a, i + di, j + dj, k] += wij * value
                W[a, i + di, j + dj, k] += wij


@nb.njit(cache=True, nogil=True)
def particles_to_grid(x, v, h, org, shape, rlo, rhi):
    """Velocities on the faces of the patch cells in [rlo, rhi) from the particles' (weighted
    averages), their weights, and the fluid cells (those holding a particle)."""
    n, ndim = x.shape
    U = np.zeros((3, shape[0], shape[1], shape[2]))
    W = np.zeros((3, shape[0], shape[1], shape[2]))
    fluid = np.zeros((shape[0], shape[1], shape[2]), np.bool_)
    base = np.empty(3, np.int64)
    frac = np.empty(3)
    nk = 2 if ndim == 3 else 1
    for p in range(n):
        for a in range(ndim):
            _stencil(x[p], a, ndim, h, org, base, frac)
            i, j, k = base[0], base[1], base[2]
            if (rlo[0] <= i and i + 1 < rhi[0] and rlo[1] <= j and j + 1 < rhi[1]
                    and (ndim == 2 or (rlo[2] <= k and k + 1 < rhi[2]))):
                _scatter(U, W, a, i, j, k, frac, v[p, a], ndim)  # the whole stencil in the region: no test per face
                continue
            for di in range(2):
                i = base[0] + di
                if i < rlo[0] or i >= rhi[0]:
                    continue
                for dj in range(2):
                    j = base[1] + dj
                    if j < rlo[1] or j >= rhi[1]:
                        continue
                    for dk in range(nk):
                        k = base[2] + dk
                        if k < rlo[2] or k >= rhi[2]:
                            continue
                        w = _weight(frac, di, dj, dk, ndim)
                        U[a, i, j, k] += w * v[p, a]
                        W[a, i, j, k] += w
        c0, c1 = np.int64(math.floor(x[p, 0] / h)) - org[0], np.int64(math.floor(x[p, 1] / h)) - org[1]
        c2 = np.int64(math.floor(x[p, 2] / h)) - org[2] if ndim == 3 else -org[2]
        if 0 <= c0 < shape[0] and 0 <= c1 < shape[1] and 0 <= c2 < shape[2]:
            fluid[c0, c1, c2] = True
    for a in range(3):
        for i in range(shape[0]):
            for j in range(shape[1]):
                for k in range(shape[2]):
                    if W[a, i, j, k] > 0.0:
                        U[a, i, j, k] /= W[a, i, j, k]
    return U, W, fluid


@nb.njit(cache=True, nogil=True)
def grid_to_particles(x, v, U, U0, h, org, flip):
    """The PIC/FLIP blend: ``v = flip (v + U(x) - U0(x)) + (1 - flip) U(x)`` in place; the
    largest velocity component after it."""
    n, ndim = x.shape
    base = np.empty(3, np.int64)
    frac = np.empty(3)
    fastest = 0.0
    for p in range(n):
        for a in range(ndim):
            _stencil(x[p], a, ndim, h, org, base, frac)
            new = _interpolate(U, a, base, frac, ndim)
            old = _interpolate(U0, a, base, frac, ndim)
            v[p, a] = flip * (v[p, a] + (new - old)) + (1.0 - flip) * new
            fastest = max(fastest, abs(v[p, a]))
    return fastest


@nb.njit(cache=True, nogil=True, inline="always")
def _in_patch(pos, ndim, h, org, shape):
    """Whether every face a sample at ``pos`` reads lies in the patch."""
    for b in range(ndim):
        c = np.int64(math.floor(pos[b] / h)) - org[b]
        if c < 1 or c + 1 >= shape[b]:
            return False
    return True


@nb.njit(cache=True, nogil=True, inline="always")
def _is_solid(pos, ndim, h, org, solid):
    c0 = np.int64(math.floor(pos[0] / h)) - org[0]
    c1 = np.int64(math.floor(pos[1] / h)) - org[1]
    c2 = np.int64(math.floor(pos[2] / h)) - org[2] if ndim == 3 else -org[2]
    return solid[c0, c1, c2]


@nb.njit(cache=True, nogil=True)
def advect(x, U, solid, h, org, dt, top):
    """Move particles by RK2 (midpoint) through the patch's velocities, in place; keep them in
    the domain [0, top] and out of solid cells (a move into one keeps the axes that stay
    out, else none). Returns the new cells and -1, or the row of a particle that would have
    read beyond the patch (the step was too long)."""
    n, ndim = x.shape
    base = np.empty(3, np.int64)
    frac = np.empty(3)
    pos = np.zeros(3)
    mid = np.zeros(3)
    new = np.zeros(3)
    cell = np.empty((n, ndim), np.int64)
    margin = 1e-6 * h
    shape = U.shape[1:]
    bad = -1
    for p in range(n):
        for b in range(ndim):
            pos[b] = x[p, b]
        if not _in_patch(pos, ndim, h, org, shape):
            bad = p if bad < 0 else bad
            continue
        for b in range(ndim):
            mid[b] = pos[b] + 0.5 * dt * _sample(U, b, pos, ndim, h, org, base, frac)
        if not _in_patch(mid, ndim, h, org, shape):
            bad = p if bad < 0 else bad
            continue
        for b in range(ndim):
            new[b] = min(max(pos[b] + dt * _sample(U, b, mid, ndim, h, org, base, frac), margin), top[b] - margin)
        if not _in_patch(new, ndim, h, org, shape):
            bad = p if bad < 0 else bad
            continue
        if _is_solid(new, ndim, h, org, solid):
            moved = False
            for b in range(ndim):
                keep = new[b]
                new[b] = pos[b]
                if not _is_solid(new, ndim, h, org, solid):
                    moved = True
                    break
                new[b] = keep
            if not moved:
                for b in range(ndim):
                    new[b] = pos[b]
        for b in range(ndim):
            x[p, b] = new[b]
            cell[p, b] = np.int64(math.floor(new[b] / h))
    return cell, bad


@nb.njit(cache=True, nogil=True)
def level_set(x, start, box, lo, n, h, radius, r):
    """The surface as a level set at the tile's cell centres (Zhu & Bridson 2005): ``|c - m| - r``
    with ``m`` the particles within ``radius`` of the centre ``c`` averaged with the weights
    ``(1 - d^2 / radius^2)^3``; ``radius`` where none is. ``x`` in (cell, id) order over the
    cell box ``box`` (cells per axis, the tile's own from index 2: ``start`` the first particle
    of every cell), ``lo`` the tile's first global cell, ``n`` its cells (3 axes); radius <= h."""
    ndim = x.shape[1]
    phi = np.empty((n[0], n[1], n[2]))
    centre = np.zeros(3)
    mean = np.zeros(3)
    nk = 3 if ndim == 3 else 1
    for i in range(n[0]):
        for j in range(n[1]):
            for k in range(n[2]):
                centre[0], centre[1] = (lo[0] + i + 0.5) * h, (lo[1] + j + 0.5) * h
                if ndim == 3:
                    centre[2] = (lo[2] + k + 0.5) * h
                total = 0.0
                mean[:] = 0.0
                for di in range(3):
                    for dj in range(3):
                        for dk in range(nk):
                            c = (i + 1 + di) * box[1] + j + 1 + dj
                            if ndim == 3:
                                c = c * box[2] + k + 1 + dk
                            for q in range(start[c], start[c + 1]):
                                d2 = 0.0
                                for b in range(ndim):
                                    d2 += (centre[b] - x[q, b]) ** 2
                                if d2 < radius * radius:
                                    w = (1.0 - d2 / (radius * radius)) ** 3
                                    total += w
                                    for b in range(ndim):
                                        mean[b] += w * x[q, b]
                if total > 0.0:
                    d2 = 0.0
                    for b in range(ndim):
                        d2 += (centre[b] - mean[b] / total) ** 2
                    phi[i, j, k] = math.sqrt(d2) - r
                else:
                    phi[i, j, k] = radius
    return phi
