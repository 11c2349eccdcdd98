"""The compiled stencils of the velocity-stress scheme, with C-PML terms and zero skipping.

Arrays are a tile's padded fields, axis order (x, y, z), z contiguous, with ``G = order // 2``
ghost layers on every side (none along y in 2D). Differences are undivided; every coefficient
is already multiplied by ``dt / dx``. Along x and y the coefficients are the scheme's constants;
along z they are per level (``c1z``, ``c2z``), so that the rows next to a free surface fall back
to second order without a branch. Material coefficients are per level too: the medium is layered.

Two differences, both fourth order with (9/8, -1/24) or second order with (1, 0):

* ``minus`` at a node from the staggered nodes half a cell either side, ``f[i] - f[i-1]``;
* ``plus`` at a half node from the nodes either side, ``f[i+1] - f[i]``.

Work is done in boxes (``boxes[b] = i0, i1, j0, j1, k0, k1`` in padded indices): the boxes of
the tile's *active* blocks. A block is active once any input of its stencils is not exactly
``+0.0``; before that, every output of its cells would be ``+0.0`` plus ``+-0.0``, that is
``+0.0`` again, which is what skipping leaves (see :func:`activate`).

C-PML terms (Komatitsch & Martin 2007) follow the plain update in the cells of an absorbing
layer: along the layer's axis the derivative ``D`` becomes ``D / kappa + psi`` with the memory
variable ``psi <- b psi + a D``; the term adds ``coef * ((1/kappa - 1) D + psi)``.
"""

from __future__ import annotations

import functools

import numba
import numpy as np

C1, C2 = 9.0 / 8.0, -1.0 / 24.0
JIT = {"cache": True, "error_model": "numpy", "boundscheck": False}


@functools.cache
def compiled(order: int, threed: bool):
    """The kernels of one spatial order, for 3D (``threed``) or the x-z plane."""
    c1 = C1 if order == 4 else 1.0
    c2 = C2 if order == 4 else 0.0
    fourth = order == 4

    @numba.njit(**JIT)
    def stress(vx, vy, vz, sxx, syy, szz, sxy, sxz, syz, ca, cb, cc, zh, zz, m, mh, c1z, c2z, boxes):
        """sigma += dt C : grad v over the boxes (normal stresses: ``ca`` on their own axis,
        ``cb`` on the other horizontal one, ``cc`` on z; szz: ``zh`` horizontal, ``zz`` z;
        shear: ``m`` at integer levels, ``mh`` at half levels)."""
        cells = 0
        for b in range(boxes.shape[0]):
            i0, i1, j0, j1, k0, k1 = boxes[b]
            cells += (i1 - i0) * (j1 - j0) * (k1 - k0)
            for i in range(i0, i1):
                for j in range(j0, j1):
                    for k in range(k0, k1):
                        dxvx = c1 * (vx[i, j, k] - vx[i - 1, j, k])
                        dxvy = c1 * (vy[i + 1, j, k] - vy[i, j, k])
                        dxvz = c1 * (vz[i + 1, j, k] - vz[i, j, k])
                        dzvz = c1z[k] * (vz[i, j, k] - vz[i, j, k - 1])
                        dzvx = c1z[k] * (vx[i, j, k + 1] - vx[i, j, k])
                        dzvy = c1z[k] * (vy[i, j, k + 1] - vy[i, j, k])
                        if fourth:
                            dxvx += c2 * (vx[i + 1, j, k] - vx[i - 2, j, k])
                            dxvy += c2 * (vy[i + 2, j, k] - vy[i - 1, j, k])
                            dxvz += c2 * (vz[i + 2, j, k] - vz[i - 1, j, k])
                            dzvz += c2z[k] * (vz[i, j, k + 1] - vz[i, j, k - 2])
                            dzvx += c2z[k] * (vx[i, j, k + 2] - vx[i, j, k - 1])
                            dzvy += c2z[k] * (vy[i, j, k + 2] - vy[i, j, k - 1])
                        if threed:
                            dyvy = c1 * (vy[i, j, k] - vy[i, j - 1, k])
                            dyvx = c1 * (vx[i, j + 1, k] - vx[i, j, k])
                            dyvz = c1 * (vz[i, j + 1, k] - vz[i, j, k])
                            if fourth:
                                dyvy += c2 * (vy[i, j + 1, k] - vy[i, j - 2, k])
                                dyvx += c2 * (vx[i, j + 2, k] - vx[i, j - 1, k])
                                dyvz += c2 * (vz[i, j + 2, k] - vz[i, j - 1, k])
                            sxx[i, j, k] += ca[k] * dxvx + cb[k] * dyvy + cc[k] * dzvz
                            syy[i, j, k] += cb[k] * dxvx + ca[k] * dyvy + cc[k] * dzvz
                            szz[i, j, k] += zh[k] * (dxvx + dyvy) + zz[k] * dzvz
                            sxy[i, j, k] += m[k] * (dxvy + dyvx)
                            syz[i, j, k] += mh[k] * (dyvz + dzvy)
                        else:
                            sxx[i, j, k] += ca[k] * dxvx + cc[k] * dzvz
                            syy[i, j, k] += cb[k] * dxvx + cc[k] * dzvz
                            szz[i, j, k] += zh[k] * dxvx + zz[k] * dzvz
                            sxy[i, j, k] += m[k] * dxvy
                            syz[i, j, k] += mh[k] * dzvy
                        sxz[i, j, k] += mh[k] * (dxvz + dzvx)
        return cells

    @numba.njit(**JIT)
    def velocity(vx, vy, vz, sxx, syy, szz, sxy, sxz, syz, bx, bz, boxes):
        """v += dt / rho div sigma over the boxes (buoyancy ``bx`` at integer levels for vx and
        vy, ``bz`` at half levels for vz)."""
        cells = 0
        for b in range(boxes.shape[0]):
            i0, i1, j0, j1, k0, k1 = boxes[b]
            cells += (i1 - i0) * (j1 - j0) * (k1 - k0)
            for i in range(i0, i1):
                for j in range(j0, j1):
                    for k in range(k0, k1):
                        fx = c1 * (sxx[i + 1, j, k] - sxx[i, j, k]) + c1 * (sxz[i, j, k] - sxz[i, j, k - 1])
                        fy = c1 * (sxy[i, j, k] - sxy[i - 1, j, k]) + c1 * (syz[i, j, k] - syz[i, j, k - 1])
                        fz = c1 * (sxz[i, j, k] - sxz[i - 1, j, k]) + c1 * (szz[i, j, k + 1] - szz[i, j, k])
                        if fourth:
                            fx += c2 * (sxx[i + 2, j, k] - sxx[i - 1, j, k])
                            fx += c2 * (sxz[i, j, k + 1] - sxz[i, j, k - 2])
                            fy += c2 * (sxy[i + 1, j, k] - sxy[i - 2, j, k])
                            fy += c2 * (syz[i, j, k + 1] - syz[i, j, k - 2])
                            fz += c2 * (sxz[i + 1, j, k] - sxz[i - 2, j, k])
                            fz += c2 * (szz[i, j, k + 2] - szz[i, j, k - 1])
                        if threed:
                            fx += c1 * (sxy[i, j, k] - sxy[i, j - 1, k])
                            fy += c1 * (syy[i, j + 1, k] - syy[i, j, k])
                            fz += c1 * (syz[i, j, k] - syz[i, j - 1, k])
                            if fourth:
                                fx += c2 * (sxy[i, j + 1, k] - sxy[i, j - 2, k])
                                fy += c2 * (syy[i, j + 2, k] - syy[i, j - 1, k])
                                fz += c2 * (syz[i, j + 1, k] - syz[i, j - 2, k])
                        vx[i, j, k] += bx[k] * fx
                        vy[i, j, k] += bx[k] * fy
                        vz[i, j, k] += bz[k] * fz
        return cells

    @numba.njit(**JIT)
    def pml_term(e, plus, src, d1, d2, d3, w1, w2, w3, ndst, psi, kinv, a, bb, c1a, c2a, box, origin, boxes, mode):
        """One C-PML term along the unit axis ``e`` (3 ints) inside ``box`` (padded indices,
        clipped to the active ``boxes``): the difference ``D`` of ``src`` (``plus`` or minus),
        ``psi <- bb psi + a D`` (mode 0 and 2) and ``d_n += w_n[k] ((1/kappa - 1) D + psi)`` for
        the first ``ndst`` destinations (mode 1 and 2). ``psi`` has the box's shape; the
        profiles are indexed by the global cell along the axis (``origin`` maps padded indices
        to global ones); ``c1a``, ``c2a`` are the difference's coefficients by level."""
        ei, ej, ek = e[0], e[1], e[2]
        s = 1 if plus else 0  # a plus difference at i reads i+1 and i (minus: i and i-1)
        cells = 0
        for b in range(boxes.shape[0]):
            i0, i1 = max(boxes[b, 0], box[0]), min(boxes[b, 1], box[1])
            j0, j1 = max(boxes[b, 2], box[2]), min(boxes[b, 3], box[3])
            k0, k1 = max(boxes[b, 4], box[4]), min(boxes[b, 5], box[5])
            if i0 >= i1 or j0 >= j1 or k0 >= k1:
                continue
            cells += (i1 - i0) * (j1 - j0) * (k1 - k0)
            for i in range(i0, i1):
                for j in range(j0, j1):
                    for k in range(k0, k1):
                        q = (i + origin[0]) * ei + (j + origin[1]) * ej + (k + origin[2]) * ek
                        hi = src[i + s * ei, j + s * ej, k + s * ek]
                        lo = src[i + (s - 1) * ei, j + (s - 1) * ej, k + (s - 1) * ek]
                        d = c1a[k] * (hi - lo)
                        if fourth:
                            hi2 = src[i + (s + 1) * ei, j + (s + 1) * ej, k + (s + 1) * ek]
                            lo2 = src[i + (s - 2) * ei, j + (s - 2) * ej, k + (s - 2) * ek]
                            d += c2a[k] * (hi2 - lo2)
                        pi, pj, pk = i - box[0], j - box[2], k - box[4]
                        if mode != 1:
                            psi[pi, pj, pk] = bb[q] * psi[pi, pj, pk] + a[q] * d
                        if mode != 0:
                            t = kinv[q] * d + psi[pi, pj, pk]
                            d1[i, j, k] += w1[k] * t
                            if ndst > 1:
                                d2[i, j, k] += w2[k] * t
                            if ndst > 2:
                                d3[i, j, k] += w3[k] * t
        return cells

    return stress, velocity, pml_term


@numba.njit(**JIT)
def activate(active, fields, lo, hi, halo, always):
    """Mark blocks whose stencils' inputs are no longer all exactly ``+0.0``; return the
    boxes of the active blocks.

    ``active`` is the tile's ``(nbx, nby, nbz)`` flags (a block never goes back); ``lo``,
    ``hi`` give each block's padded bounds per axis (``lo[a][n]``); ``fields`` the inputs; ``halo`` the stencil's
    reach per axis. Only candidates are scanned: an inactive block next to an active one, on the
    tile's side (where halos arrive) or flagged ``always`` (the source's).
    """
    nbx, nby, nbz = active.shape
    new = active.copy()
    for bi in range(nbx):
        for bj in range(nby):
            for bk in range(nbz):
                if active[bi, bj, bk]:
                    continue
                cand = always[bi, bj, bk] or bi == 0 or bi == nbx - 1 or bj == 0 or bj == nby - 1
                if not cand:
                    for di in range(max(bi - 1, 0), min(bi + 2, nbx)):
                        for dj in range(max(bj - 1, 0), min(bj + 2, nby)):
                            for dk in range(max(bk - 1, 0), min(bk + 2, nbz)):
                                cand = cand or active[di, dj, dk]
                if not cand:
                    continue
                i0, i1 = lo[0][bi] - halo[0], hi[0][bi] + halo[0]
                j0, j1 = lo[1][bj] - halo[1], hi[1][bj] + halo[1]
                k0, k1 = lo[2][bk] - halo[2], hi[2][bk] + halo[2]
                found = False
                for f in fields:
                    if found:
                        break
                    for i in range(i0, i1):
                        if found:
                            break
                        for j in range(j0, j1):
                            for k in range(k0, k1):
                                x = f[i, j, k]
                                if x != 0.0 or np.signbit(x):
                                    found = True
                                    break
                new[bi, bj, bk] = found
    active[:] = new
    n = int(active.sum())
    boxes = np.empty((n, 6), dtype=np.int64)
    m = 0
    for bi in range(nbx):
        for bj in range(nby):
            for bk in range(nbz):
                if active[bi, bj, bk]:
                    boxes[m] = (lo[0][bi], hi[0][bi], lo[1][bj], hi[1][bj], lo[2][bk], hi[2][bk])
                    m += 1
    return boxes


@numba.njit(**JIT)
def any_not_finite(a) -> bool:
    """Whether any value of ``a`` is NaN or infinite."""
    for x in a.ravel():
        if not np.isfinite(x):
            return True
    return False
