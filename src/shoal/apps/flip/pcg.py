"""The pressure solve's compiled pieces: the 5/7-point Poisson operator on fluid cells, the
MIC(0) preconditioner on fixed bricks, and dot products brick by brick.

The system (Bridson, *Fluid Simulation for Computer Graphics*, §5): for a fluid cell,
``diag * q - sum of q over fluid neighbours = b``, ``diag`` its neighbours that are not solid
(air has q = 0), ``b`` minus its net outflow and ``q`` the pressure in velocity units
(``p dt / (rho h)``). The preconditioner is block Jacobi with one MIC(0) factor per brick
(couplings that cross a brick's side are left out), so it depends on the bricks alone, never on
the tiling; tiles are unions of bricks. Every loop over a brick visits its cells in row-major
order, and the bricks' partial sums are added exactly (:func:`exact_digits`), in whatever order
the tiles come: the solve is bitwise the same for any tiling.

Arrays are a tile's own cells, shape ``n`` (3 axes, one cell deep in 2D), and bricks ``B``
cells a side (1 along z in 2D).
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np


@nb.njit(cache=True, nogil=True)
def operator_diagonal(fluid, solid, g, n, ndim):
    """Per own fluid cell the neighbours that are not solid (0 elsewhere); ``fluid`` and
    ``solid`` on the tile's patch, own cells from index ``g``."""
    diag = np.zeros((n[0], n[1], n[2]))
    for i in range(n[0]):
        for j in range(n[1]):
            for k in range(n[2]):
                I, J, K = i + g[0], j + g[1], k + g[2]
                if not fluid[I, J, K]:
                    continue
                count = 0
                for step in (-1, 1):
                    count += (not solid[I + step, J, K]) + (not solid[I, J + step, K])
                    if ndim == 3:
                        count += not solid[I, J, K + step]
                diag[i, j, k] = count
    return diag


@nb.njit(cache=True, nogil=True, inline="always")
def _coupled(fluid, i, j, k, a, B):
    """Whether own cell (i, j, k) and its next cell along ``a`` are both fluid in one brick
    (tiles start on a brick's corner, so a brick's last cell is one before a multiple of B)."""
    if a == 0:
        return (i + 1) % B[0] != 0 and fluid[i, j, k] and fluid[i + 1, j, k]
    if a == 1:
        return (j + 1) % B[1] != 0 and fluid[i, j, k] and fluid[i, j + 1, k]
    return (k + 1) % B[2] != 0 and fluid[i, j, k] and fluid[i, j, k + 1]


@nb.njit(cache=True, nogil=True)
def mic_factor(fluid, diag, B, ndim, tau, sigma):
    """The inverse square roots of the MIC(0) pivots of every brick's block (Bridson's Fig. 5.7,
    restricted to the brick)."""
    n = fluid.shape
    prec = np.zeros(n)
    for bi in range(0, n[0], B[0]):
        for bj in range(0, n[1], B[1]):
            for bk in range(0, n[2], B[2]):
                for i in range(bi, bi + B[0]):
                    for j in range(bj, bj + B[1]):
                        for k in range(bk, bk + B[2]):
                            if not fluid[i, j, k]:
                                continue
                            e = diag[i, j, k]
                            for a in range(ndim):
                                pi, pj, pk = (i - 1, j, k) if a == 0 else (i, j - 1, k) if a == 1 else (i, j, k - 1)
                                if (a == 0 and i == bi) or (a == 1 and j == bj) or (a == 2 and k == bk):
                                    continue
                                if not _coupled(fluid, pi, pj, pk, a, B):
                                    continue
                                others = 0
                                for b in range(ndim):
                                    if b != a and _coupled(fluid, pi, pj, pk, b, B):
                                        others += 1
                                pp = prec[pi, pj, pk] * prec[pi, pj, pk]
                                e -= pp + tau * others * pp
                            if e < sigma * diag[i, j, k]:
                                e = diag[i, j, k]
                            prec[i, j, k] = 1.0 / math.sqrt(e)
    return prec


@nb.njit(cache=True, nogil=True)
def couplings(fluid, prec, B, ndim):
    """Per cell and axis, its pivot's inverse square root where it is coupled to its next cell
    along the axis within its brick, else 0: the factor's off-diagonal terms, once per step."""
    n = fluid.shape
    out = np.zeros((3, n[0], n[1], n[2]))
    for i in range(n[0]):
        for j in range(n[1]):
            for k in range(n[2]):
                for a in range(ndim):
                    if _coupled(fluid, i, j, k, a, B):
                        out[a, i, j, k] = prec[i, j, k]
    return out


@nb.njit(cache=True, nogil=True)
def precondition(r, fluid, prec, coupling, B, ndim):
    """``z = M^-1 r``: per brick, the forward then the backward solve with its MIC(0) factor
    (``coupling`` from :func:`couplings`)."""
    n = r.shape
    t = np.zeros(n)
    z = np.zeros(n)
    for bi in range(0, n[0], B[0]):
        for bj in range(0, n[1], B[1]):
            for bk in range(0, n[2], B[2]):
                for i in range(bi, bi + B[0]):
                    for j in range(bj, bj + B[1]):
                        for k in range(bk, bk + B[2]):
                            if not fluid[i, j, k]:
                                continue
                            s = r[i, j, k]
                            if i > bi:
                                s += coupling[0, i - 1, j, k] * t[i - 1, j, k]
                            if j > bj:
                                s += coupling[1, i, j - 1, k] * t[i, j - 1, k]
                            if ndim == 3 and k > bk:
                                s += coupling[2, i, j, k - 1] * t[i, j, k - 1]
                            t[i, j, k] = s * prec[i, j, k]
                for i in range(bi + B[0] - 1, bi - 1, -1):
                    for j in range(bj + B[1] - 1, bj - 1, -1):
                        for k in range(bk + B[2] - 1, bk - 1, -1):
                            if not fluid[i, j, k]:
                                continue
                            s = t[i, j, k]
                            if i + 1 < bi + B[0]:
                                s += coupling[0, i, j, k] * z[i + 1, j, k]
                            if j + 1 < bj + B[1]:
                                s += coupling[1, i, j, k] * z[i, j + 1, k]
                            if ndim == 3 and k + 1 < bk + B[2]:
                                s += coupling[2, i, j, k] * z[i, j, k + 1]
                            z[i, j, k] = s * prec[i, j, k]
    return z


@nb.njit(cache=True, nogil=True)
def brick_dots(u, w, B):
    """``sum u * w`` over each brick, cells in row-major order; bricks in row-major order."""
    n = u.shape
    out = np.zeros((n[0] // B[0]) * (n[1] // B[1]) * (n[2] // B[2]))
    m = 0
    for bi in range(0, n[0], B[0]):
        for bj in range(0, n[1], B[1]):
            for bk in range(0, n[2], B[2]):
                s = 0.0
                for i in range(bi, bi + B[0]):
                    for j in range(bj, bj + B[1]):
                        for k in range(bk, bk + B[2]):
                            s += u[i, j, k] * w[i, j, k]
                out[m] = s
                m += 1
    return out


@nb.njit(cache=True, nogil=True)
def apply_operator(s, fluid, diag, ndim):
    """``A s`` on the own fluid cells; ``s`` and ``fluid`` on patches one cell wider on every
    side (one along z in 3D only), ``diag`` on the own cells."""
    n = diag.shape
    gz = 1 if ndim == 3 else 0
    q = np.zeros(n)
    for i in range(n[0]):
        for j in range(n[1]):
            for k in range(n[2]):
                I, J, K = i + 1, j + 1, k + gz
                if not fluid[I, J, K]:
                    continue
                v = diag[i, j, k] * s[I, J, K]
                for step in (-1, 1):
                    if fluid[I + step, J, K]:
                        v -= s[I + step, J, K]
                    if fluid[I, J + step, K]:
                        v -= s[I, J + step, K]
                    if ndim == 3 and fluid[I, J, K + step]:
                        v -= s[I, J, K + step]
                q[i, j, k] = v
    return q


@nb.njit(cache=True, nogil=True)
def cg_update(x, r, s, q, alpha):
    """``x += alpha s``, ``r -= alpha q`` in place; the largest ``|r|`` after it."""
    largest = 0.0
    flat_x, flat_r, flat_s, flat_q = x.reshape(-1), r.reshape(-1), s.reshape(-1), q.reshape(-1)
    for i in range(flat_x.shape[0]):
        flat_x[i] += alpha * flat_s[i]
        flat_r[i] -= alpha * flat_q[i]
        largest = max(largest, abs(flat_r[i]))
    return largest


@nb.njit(cache=True, nogil=True)
def next_direction(s, z, beta):
    """``s = z + beta s`` in place."""
    flat_s, flat_z = s.reshape(-1), z.reshape(-1)
    for i in range(flat_s.shape[0]):
        flat_s[i] = flat_z[i] + beta * flat_s[i]


# A global sum is carried as DIGITS fixed-point digits: digit k is a multiple of 2**(LOWEST +
# WIDTH k) below 2**(LOWEST + WIDTH (k + 1)), so up to 2**(53 - WIDTH) of them (bricks, then
# tiles' totals) add up exactly in any order; the reduced digits are then added with one
# correct rounding (math.fsum). Brick sums below 2**LOWEST (1e-181) are dropped, the same in
# every tiling; one at or above 2**(LOWEST + WIDTH DIGITS) (1e156) makes the sum NaN: a solve
# that far gone has diverged.
DIGITS, WIDTH, LOWEST = 24, 32, -600


@nb.njit(cache=True, nogil=True)
def exact_digits(values):
    """The fixed-point digits of ``sum(values)``, exact (see :data:`DIGITS`)."""
    out = np.zeros(DIGITS)
    top = math.ldexp(1.0, LOWEST + WIDTH * DIGITS)
    for v in values:
        if not abs(v) < top:
            out[DIGITS - 1] = np.nan
            continue
        rest = v
        for k in range(DIGITS - 1, -1, -1):
            e = LOWEST + WIDTH * k
            digit = np.trunc(math.ldexp(rest, -e))
            if digit != 0.0:
                part = math.ldexp(digit, e)
                out[k] += part
                rest -= part
    return out
