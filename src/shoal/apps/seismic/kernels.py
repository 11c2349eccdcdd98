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
JIT = {"cache": True, "nogil": True, "error_model": "numpy", "boundscheck": False}


@functools.cache
def compiled(order: int, threed: bool, dtype: str = "float64"):
    """The kernels of one spatial order, for 3D (``threed``) or the x-z plane, computing in
    ``dtype`` (the constants too, so that float32 stays float32 and vectorises twice as wide)."""
    real = np.dtype(dtype).type
    c1 = real(C1 if order == 4 else 1.0)
    c2 = real(C2 if order == 4 else 0.0)
    fourth = order == 4

    o2 = 2 if fourth else 1  # the second neighbour's offset (order 2 never reads it)
    y1 = 1 if threed else 0  # offsets along y (the x-z plane never reads them)
    y2 = o2 if threed else 0

    def named(fn):
        """``fn`` under its variant's name: cached variants of one name and signature would
        collide in the one JIT of a process that loads several (and call each other's code)."""
        fn.__qualname__ = f"{fn.__qualname__}_o{order}_{3 if threed else 2}d_{dtype}"
        return fn

    # The loops below run along z over rows taken as 1D views: a loop that starts at 0 and
    # writes to few arrays is one LLVM vectorises (indexing the 3D arrays, or writing six
    # outputs in one loop, keeps it scalar).
    @numba.njit(**JIT)
    @named
    def stress(vx, vy, vz, sxx, syy, szz, sxy, sxz, syz, ca, cb, cc, zh, zz, m, mh, c1z, c2z, boxes):
        """sigma += dt C : grad v over the boxes (normal stresses: ``ca`` on their own axis,
        ``cb`` on the other horizontal one, ``cc`` on z; szz: ``zh`` horizontal, ``zz`` z;
        shear: ``m`` at integer levels, ``mh`` at half levels)."""
        cells = 0
        for b in range(boxes.shape[0]):
            i0, i1, j0, j1, k0, k1 = boxes[b]
            n = k1 - k0
            cells += (i1 - i0) * (j1 - j0) * n
            A, B, C, ZH, ZZ = ca[k0:k1], cb[k0:k1], cc[k0:k1], zh[k0:k1], zz[k0:k1]
            M, MH, Z1, Z2 = m[k0:k1], mh[k0:k1], c1z[k0:k1], c2z[k0:k1]
            for i in range(i0, i1):
                for j in range(j0, j1):
                    x0, xm1, xp1, xm2 = vx[i, j, k0:k1], vx[i - 1, j, k0:k1], vx[i + 1, j, k0:k1], vx[i - o2, j, k0:k1]
                    xj1, xj2, xjm = vx[i, j + y1, k0:k1], vx[i, j + y2, k0:k1], vx[i, j - y1, k0:k1]
                    xk1, xk2, xkm = vx[i, j, k0 + 1:k1 + 1], vx[i, j, k0 + o2:k1 + o2], vx[i, j, k0 - 1:k1 - 1]
                    y0, yjm1 = vy[i, j, k0:k1], vy[i, j - y1, k0:k1]
                    yjp1, yjm2 = vy[i, j + y1, k0:k1], vy[i, j - y2, k0:k1]
                    yi1, yi2, yim = vy[i + 1, j, k0:k1], vy[i + o2, j, k0:k1], vy[i - 1, j, k0:k1]
                    yk1, yk2, ykm = vy[i, j, k0 + 1:k1 + 1], vy[i, j, k0 + o2:k1 + o2], vy[i, j, k0 - 1:k1 - 1]
                    z0, zkm1, zkp1 = vz[i, j, k0:k1], vz[i, j, k0 - 1:k1 - 1], vz[i, j, k0 + 1:k1 + 1]
                    zkm2 = vz[i, j, k0 - o2:k1 - o2]
                    zi1, zi2, zim = vz[i + 1, j, k0:k1], vz[i + o2, j, k0:k1], vz[i - 1, j, k0:k1]
                    zj1, zj2, zjm = vz[i, j + y1, k0:k1], vz[i, j + y2, k0:k1], vz[i, j - y1, k0:k1]
                    oxx, oyy, ozz = sxx[i, j, k0:k1], syy[i, j, k0:k1], szz[i, j, k0:k1]
                    oxy, oxz, oyz = sxy[i, j, k0:k1], sxz[i, j, k0:k1], syz[i, j, k0:k1]
                    for k in range(n):
                        dxvx = c1 * (x0[k] - xm1[k])
                        dzvz = Z1[k] * (z0[k] - zkm1[k])
                        if fourth:
                            dxvx += c2 * (xp1[k] - xm2[k])
                            dzvz += Z2[k] * (zkp1[k] - zkm2[k])
                        if threed:
                            dyvy = c1 * (y0[k] - yjm1[k])
                            if fourth:
                                dyvy += c2 * (yjp1[k] - yjm2[k])
                            oxx[k] += A[k] * dxvx + B[k] * dyvy + C[k] * dzvz
                            oyy[k] += B[k] * dxvx + A[k] * dyvy + C[k] * dzvz
                            ozz[k] += ZH[k] * (dxvx + dyvy) + ZZ[k] * dzvz
                        else:
                            oxx[k] += A[k] * dxvx + C[k] * dzvz
                            oyy[k] += B[k] * dxvx + C[k] * dzvz
                            ozz[k] += ZH[k] * dxvx + ZZ[k] * dzvz
                    for k in range(n):
                        dxy = c1 * (yi1[k] - y0[k])
                        dxz = c1 * (zi1[k] - z0[k]) + Z1[k] * (xk1[k] - x0[k])
                        dyz = Z1[k] * (yk1[k] - y0[k])
                        if fourth:
                            dxy += c2 * (yi2[k] - yim[k])
                            dxz += c2 * (zi2[k] - zim[k]) + Z2[k] * (xk2[k] - xkm[k])
                            dyz += Z2[k] * (yk2[k] - ykm[k])
                        if threed:
                            dxy += c1 * (xj1[k] - x0[k])
                            dyz += c1 * (zj1[k] - z0[k])
                            if fourth:
                                dxy += c2 * (xj2[k] - xjm[k])
                                dyz += c2 * (zj2[k] - zjm[k])
                        oxy[k] += M[k] * dxy
                        oxz[k] += MH[k] * dxz
                        oyz[k] += MH[k] * dyz
        return cells

    @numba.njit(**JIT)
    @named
    def velocity(vx, vy, vz, sxx, syy, szz, sxy, sxz, syz, bx, bz, boxes):
        """v += dt / rho div sigma over the boxes (buoyancy ``bx`` at integer levels for vx and
        vy, ``bz`` at half levels for vz)."""
        cells = 0
        for b in range(boxes.shape[0]):
            i0, i1, j0, j1, k0, k1 = boxes[b]
            n = k1 - k0
            cells += (i1 - i0) * (j1 - j0) * n
            BX, BZ = bx[k0:k1], bz[k0:k1]
            for i in range(i0, i1):
                for j in range(j0, j1):
                    a0, a1, a2, am = sxx[i, j, k0:k1], sxx[i + 1, j, k0:k1], sxx[i + o2, j, k0:k1], sxx[i - 1, j, k0:k1]
                    s0, si1 = sxy[i, j, k0:k1], sxy[i + 1, j, k0:k1]
                    sim1, sim2 = sxy[i - 1, j, k0:k1], sxy[i - o2, j, k0:k1]
                    sj1, sjm1, sjm2 = sxy[i, j + y1, k0:k1], sxy[i, j - y1, k0:k1], sxy[i, j - y2, k0:k1]
                    z0, zi1 = sxz[i, j, k0:k1], sxz[i + 1, j, k0:k1]
                    zim1, zim2 = sxz[i - 1, j, k0:k1], sxz[i - o2, j, k0:k1]
                    zk1, zkm1, zkm2 = sxz[i, j, k0 + 1:k1 + 1], sxz[i, j, k0 - 1:k1 - 1], sxz[i, j, k0 - o2:k1 - o2]
                    b0, b1 = syy[i, j, k0:k1], syy[i, j + y1, k0:k1]
                    b2, bm = syy[i, j + y2, k0:k1], syy[i, j - y1, k0:k1]
                    w0, wj1 = syz[i, j, k0:k1], syz[i, j + y1, k0:k1]
                    wjm1, wjm2 = syz[i, j - y1, k0:k1], syz[i, j - y2, k0:k1]
                    wk1, wkm1, wkm2 = syz[i, j, k0 + 1:k1 + 1], syz[i, j, k0 - 1:k1 - 1], syz[i, j, k0 - o2:k1 - o2]
                    q0, q1 = szz[i, j, k0:k1], szz[i, j, k0 + 1:k1 + 1]
                    q2, qm = szz[i, j, k0 + o2:k1 + o2], szz[i, j, k0 - 1:k1 - 1]
                    ox, oy, oz = vx[i, j, k0:k1], vy[i, j, k0:k1], vz[i, j, k0:k1]
                    for k in range(n):
                        fx = c1 * (a1[k] - a0[k]) + c1 * (z0[k] - zkm1[k])
                        fy = c1 * (s0[k] - sim1[k]) + c1 * (w0[k] - wkm1[k])
                        fz = c1 * (z0[k] - zim1[k]) + c1 * (q1[k] - q0[k])
                        if fourth:
                            fx += c2 * (a2[k] - am[k]) + c2 * (zk1[k] - zkm2[k])
                            fy += c2 * (si1[k] - sim2[k]) + c2 * (wk1[k] - wkm2[k])
                            fz += c2 * (zi1[k] - zim2[k]) + c2 * (q2[k] - qm[k])
                        if threed:
                            fx += c1 * (s0[k] - sjm1[k])
                            fy += c1 * (b1[k] - b0[k])
                            fz += c1 * (w0[k] - wjm1[k])
                            if fourth:
                                fx += c2 * (sj1[k] - sjm2[k])
                                fy += c2 * (b2[k] - bm[k])
                                fz += c2 * (wj1[k] - wjm2[k])
                        ox[k] += BX[k] * fx
                        oy[k] += BX[k] * fy
                        oz[k] += BZ[k] * fz
        return cells

    @numba.njit(**JIT)
    @named
    def pml(terms, src_fields, dst_fields, psi, weights, diff, profiles, origin, boxes, mode):
        """Every C-PML term of a phase, clipped to the active ``boxes`` (padded indices).

        A term (a row of ``terms``: axis, plus?, source field, destination count, three
        destination fields, three weight rows, half node?, z coefficients?, offset in ``psi``,
        its box's six padded bounds) takes the difference ``D`` of a source field along its
        axis, updates ``psi <- b psi + a D`` (mode 0 and 2) and adds
        ``w_n[k] ((1/kappa - 1) D + psi)`` to its destinations (mode 1 and 2). ``psi`` holds every
        term's memory variables one box after the other; ``weights`` the per-level coefficient
        rows; ``diff`` the difference's (c1, c2) by level, constant (rows 0, 1) or the stress
        update's along z (rows 2, 3); ``profiles[axis, half, (1/kappa - 1, a, b), global cell]``.
        """
        ny = profiles.shape[3]
        rows = np.empty((3, ny), dtype=psi.dtype)  # the profiles along a row
        cells = 0
        for t in range(terms.shape[0]):
            axis, plus, src_i, ndst = terms[t, 0], terms[t, 1], terms[t, 2], terms[t, 3]
            src = src_fields[src_i]
            d1, d2, d3 = dst_fields[terms[t, 4]], dst_fields[terms[t, 5]], dst_fields[terms[t, 6]]
            w1, w2, w3 = weights[terms[t, 7]], weights[terms[t, 8]], weights[terms[t, 9]]
            half, zc, off = terms[t, 10], terms[t, 11], terms[t, 12]
            box = terms[t, 13:19]
            c1a, c2a = diff[2 * zc], diff[2 * zc + 1]
            prof = profiles[axis, half]
            s = 1 if plus else 0  # a plus difference at i reads i+1 and i (minus: i and i-1)
            ei, ej, ek = int(axis == 0), int(axis == 1), int(axis == 2)
            sx, sy, sz = box[1] - box[0], box[3] - box[2], box[5] - box[4]
            P3 = psi[off:off + sx * sy * sz].reshape((sx, sy, sz))
            for b in range(boxes.shape[0]):
                i0, i1 = max(boxes[b, 0], box[0]), min(boxes[b, 1], box[1])
                j0, j1 = max(boxes[b, 2], box[2]), min(boxes[b, 3], box[3])
                k0, k1 = max(boxes[b, 4], box[4]), min(boxes[b, 5], box[5])
                if i0 >= i1 or j0 >= j1 or k0 >= k1:
                    continue
                n = k1 - k0
                cells += (i1 - i0) * (j1 - j0) * n
                C1, C2 = c1a[k0:k1], c2a[k0:k1]
                W1, W2, W3 = w1[k0:k1], w2[k0:k1], w3[k0:k1]
                KI, A, BB = rows[0, :n], rows[1, :n], rows[2, :n]
                if ek:
                    q = k0 + origin[2]
                    KI[:], A[:], BB[:] = prof[0, q:q + n], prof[1, q:q + n], prof[2, q:q + n]
                for i in range(i0, i1):
                    if ei:
                        q = i + origin[0]
                        KI[:], A[:], BB[:] = prof[0, q], prof[1, q], prof[2, q]
                    for j in range(j0, j1):
                        if ej:
                            q = j + origin[1]
                            KI[:], A[:], BB[:] = prof[0, q], prof[1, q], prof[2, q]
                        ka = k0 + (s - 1) * ek
                        lo = src[i + (s - 1) * ei, j + (s - 1) * ej, ka:ka + n]
                        hi = src[i + s * ei, j + s * ej, ka + ek:ka + ek + n]
                        if fourth:
                            lo2 = src[i + (s - 2) * ei, j + (s - 2) * ej, ka - ek:ka - ek + n]
                            hi2 = src[i + (s + 1) * ei, j + (s + 1) * ej, ka + 2 * ek:ka + 2 * ek + n]
                        else:
                            lo2, hi2 = lo, hi
                        P = P3[i - box[0], j - box[2], k0 - box[4]:k1 - box[4]]
                        o1, o2_, o3 = d1[i, j, k0:k1], d2[i, j, k0:k1], d3[i, j, k0:k1]
                        if mode == 0:
                            for k in range(n):
                                d = C1[k] * (hi[k] - lo[k])
                                if fourth:
                                    d += C2[k] * (hi2[k] - lo2[k])
                                P[k] = BB[k] * P[k] + A[k] * d
                        elif mode == 2:
                            for k in range(n):
                                d = C1[k] * (hi[k] - lo[k])
                                if fourth:
                                    d += C2[k] * (hi2[k] - lo2[k])
                                p = BB[k] * P[k] + A[k] * d
                                P[k] = p
                                o1[k] += W1[k] * (KI[k] * d + p)
                        elif ndst == 1:
                            for k in range(n):
                                d = C1[k] * (hi[k] - lo[k])
                                if fourth:
                                    d += C2[k] * (hi2[k] - lo2[k])
                                o1[k] += W1[k] * (KI[k] * d + P[k])
                        else:
                            for k in range(n):
                                d = C1[k] * (hi[k] - lo[k])
                                if fourth:
                                    d += C2[k] * (hi2[k] - lo2[k])
                                tt = KI[k] * d + P[k]
                                o1[k] += W1[k] * tt
                                o2_[k] += W2[k] * tt
                                o3[k] += W3[k] * tt
        return cells

    return stress, velocity, pml


@numba.njit(**JIT)
def _touched(f, i0, i1, j0, j1, k0, k1) -> bool:
    """Whether any value of ``f`` in the box is not exactly ``+0.0`` (a -0.0 counts)."""
    for i in range(i0, i1):
        for j in range(j0, j1):
            for k in range(k0, k1):
                x = f[i, j, k]
                if x != 0.0 or np.signbit(x):
                    return True
    return False


@numba.njit(**JIT)
def activate(active, fields, lo, hi, halo, always):
    """Mark blocks whose stencils' inputs are no longer all exactly ``+0.0``; return the
    boxes of the active blocks, one per run of them along z.

    ``active`` is the tile's ``(nbx, nby, nbz)`` flags (a block never goes back); ``lo``,
    ``hi`` give each block's padded bounds per axis (``lo[a][n]``); ``fields`` the inputs;
    ``halo`` the stencil's reach per axis; ``always`` the blocks that start active (the
    source's). An inactive block's own cells are all ``+0.0`` (nothing has written them), and
    the stencils reach along the axes only, so only the slabs beside its faces can bring it
    something: those inside an active neighbour, or in the ghosts beyond the tile's sides. (No
    block is thinner than the reach, so a slab never passes the neighbour it starts in.)
    """
    nbx, nby, nbz = active.shape
    new = active.copy()
    for bi in range(nbx):
        for bj in range(nby):
            for bk in range(nbz):
                if active[bi, bj, bk]:
                    continue
                i0, i1, j0, j1, k0, k1 = lo[0][bi], hi[0][bi], lo[1][bj], hi[1][bj], lo[2][bk], hi[2][bk]
                slabs = ((bi == 0 or active[max(bi - 1, 0), bj, bk], i0 - halo[0], i0, j0, j1, k0, k1),
                         (bi == nbx - 1 or active[min(bi + 1, nbx - 1), bj, bk], i1, i1 + halo[0], j0, j1, k0, k1),
                         (bj == 0 or active[bi, max(bj - 1, 0), bk], i0, i1, j0 - halo[1], j0, k0, k1),
                         (bj == nby - 1 or active[bi, min(bj + 1, nby - 1), bk], i0, i1, j1, j1 + halo[1], k0, k1),
                         (bk > 0 and active[bi, bj, max(bk - 1, 0)], i0, i1, j0, j1, k0 - halo[2], k0),
                         (bk < nbz - 1 and active[bi, bj, min(bk + 1, nbz - 1)], i0, i1, j0, j1, k1, k1 + halo[2]))
                found = False
                for slab in slabs:
                    if found or not slab[0]:
                        continue
                    for f in fields:
                        if _touched(f, slab[1], slab[2], slab[3], slab[4], slab[5], slab[6]):
                            found = True
                            break
                new[bi, bj, bk] = found
    active[:] = new
    # One box per run of active blocks along z: long rows are what the loops vectorise over.
    boxes = np.empty((int(active.sum()), 6), dtype=np.int64)
    m = 0
    for bi in range(nbx):
        for bj in range(nby):
            bk = 0
            while bk < nbz:
                if not active[bi, bj, bk]:
                    bk += 1
                    continue
                top = bk
                while bk < nbz and active[bi, bj, bk]:
                    bk += 1
                boxes[m] = (lo[0][bi], hi[0][bi], lo[1][bj], hi[1][bj], lo[2][top], hi[2][bk - 1])
                m += 1
    return boxes[:m]


@numba.njit(**JIT)
def any_not_finite(a) -> bool:
    """Whether any value of ``a`` is NaN or infinite."""
    for x in a.ravel():
        if not np.isfinite(x):
            return True
    return False
