"""The MAC grid's own steps, compiled: gravity and solid walls, the divergence, the pressure
gradient and the extrapolation into air.

The arrays are a tile's patch (see :mod:`.transfer`): its own cells start at patch index
``g`` (``g[2] = 0`` in 2D) and the faces a step computes are those of the cells in [rlo, rhi),
the tile's own cells and a ring of one around them. A face of axis ``a`` at index ``i`` lies
between cells ``i - e_a`` (below) and ``i``; it is *solid* when either is, *wet* when either
holds fluid and neither is solid.
"""

from __future__ import annotations

import numba as nb
import numpy as np


@nb.njit(cache=True, nogil=True, inline="always")
def _below(i, j, k, a):
    return (i - 1, j, k) if a == 0 else (i, j - 1, k) if a == 1 else (i, j, k - 1)


@nb.njit(cache=True, nogil=True)
def forces(U, W, fluid, solid, gravity, dt, rlo, rhi, ndim):
    """Gravity on every face that is wet or that particles weighed; zero on solid faces and on
    faces neither."""
    for a in range(ndim):
        for i in range(rlo[0], rhi[0]):
            for j in range(rlo[1], rhi[1]):
                for k in range(rlo[2], rhi[2]):
                    bi, bj, bk = _below(i, j, k, a)
                    if solid[i, j, k] or solid[bi, bj, bk]:
                        U[a, i, j, k] = 0.0
                    elif W[a, i, j, k] > 0.0 or fluid[i, j, k] or fluid[bi, bj, bk]:
                        U[a, i, j, k] += gravity[a] * dt
                    else:
                        U[a, i, j, k] = 0.0


@nb.njit(cache=True, nogil=True)
def divergence(U, fluid, g, n, ndim):
    """Minus the net outflow of every own fluid cell (the pressure system's right-hand side,
    in velocity units: the cell's face velocities summed with signs); 0 elsewhere."""
    b = np.zeros((n[0], n[1], n[2]))
    for i in range(n[0]):
        for j in range(n[1]):
            for k in range(n[2]):
                I, J, K = i + g[0], j + g[1], k + g[2]
                if not fluid[I, J, K]:
                    continue
                out = U[0, I + 1, J, K] - U[0, I, J, K]
                out += U[1, I, J + 1, K] - U[1, I, J, K]
                if ndim == 3:
                    out += U[2, I, J, K + 1] - U[2, I, J, K]
                b[i, j, k] = -out
    return b


@nb.njit(cache=True, nogil=True)
def subtract_gradient(U, q, fluid, solid, rlo, rhi, ndim):
    """``U -= q(i) - q(i - e_a)`` on the wet faces of [rlo, rhi) (q is 0 in air)."""
    for a in range(ndim):
        for i in range(rlo[0], rhi[0]):
            for j in range(rlo[1], rhi[1]):
                for k in range(rlo[2], rhi[2]):
                    bi, bj, bk = _below(i, j, k, a)
                    if solid[i, j, k] or solid[bi, bj, bk] or not (fluid[i, j, k] or fluid[bi, bj, bk]):
                        continue
                    U[a, i, j, k] -= q[i, j, k] - q[bi, bj, bk]


@nb.njit(cache=True, nogil=True, inline="always")
def _wet(fluid, solid, a, i, j, k):
    bi, bj, bk = _below(i, j, k, a)
    return not (solid[i, j, k] or solid[bi, bj, bk]) and (fluid[i, j, k] or fluid[bi, bj, bk])


@nb.njit(cache=True, nogil=True)
def extrapolate(U, fluid, solid, g, n, ndim):
    """The tile's own faces for the next step's advection: wet faces as they are, solid faces
    0, and every other face the mean of its wet neighbours of the same component (one layer
    into the air; 0 with none). Returns them, shape (ndim, n), and their largest magnitude."""
    out = np.zeros((ndim, n[0], n[1], n[2]))
    fastest = 0.0
    for a in range(ndim):
        for i in range(n[0]):
            for j in range(n[1]):
                for k in range(n[2]):
                    I, J, K = i + g[0], j + g[1], k + g[2]
                    bi, bj, bk = _below(I, J, K, a)
                    if solid[I, J, K] or solid[bi, bj, bk]:
                        continue
                    if fluid[I, J, K] or fluid[bi, bj, bk]:
                        value = U[a, I, J, K]
                    else:
                        total, count = 0.0, 0
                        for b in range(ndim):
                            for step in (-1, 1):
                                P = I + step if b == 0 else I
                                Q = J + step if b == 1 else J
                                R = K + step if b == 2 else K
                                if _wet(fluid, solid, a, P, Q, R):
                                    total += U[a, P, Q, R]
                                    count += 1
                        value = total / count if count else 0.0
                    out[a, i, j, k] = value
                    fastest = max(fastest, abs(value))
    return out, fastest


@nb.njit(cache=True, nogil=True)
def mirror_walls(U, org, cells, ndim):
    """Free slip at the domain's walls: every face of a cell outside the domain takes the
    velocity of the nearest cell inside, for each component along the wall (the component
    across it stays 0 at the wall). Axis by axis, so corners copy what the previous axis
    filled. ``org``: the patch's first global cell; ``cells``: the domain's cells per axis."""
    shape = U.shape[1:]
    for b in range(ndim):
        for i in range(shape[b]):
            c = org[b] + i
            if 0 <= c < cells[b]:
                continue
            src = i - c if c < 0 else i - (c - cells[b] + 1)
            if src < 0 or src >= shape[b]:
                continue
            for a in range(ndim):
                if a == b:
                    continue
                if b == 0:
                    U[a, i, :, :] = U[a, src, :, :]
                elif b == 1:
                    U[a, :, i, :] = U[a, :, src, :]
                else:
                    U[a, :, :, i] = U[a, :, :, src]
