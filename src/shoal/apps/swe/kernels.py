"""Compiled kernels of the shallow-water app: one call per tile and phase.

A tile holds root blocks; block ``k`` is an ``m x m`` array (``m = n + 4``: ``n`` cells per
side and two ghost layers) of each of ``h, hu, hv, b``, stored one after another in flat
pools at ``off[k]``. Axis 0 is x. Faces are numbered west, east, south, north (0-3); the
opposite of face ``f`` is ``f ^ 1``.

A block's *strip* on a face is its two outermost layers of cells there, at its own level:
``[variable(4)][layer(2)][n]``, layer 0 touching the face, cells in increasing coordinate.
Every ghost is filled from the neighbour's strip, whether the neighbour lives in the same
tile (``SOURCE_TILE``) or arrives in a halo (``SOURCE_HALO``): a block's arithmetic never
depends on the tiling. Across a level jump (at most one: 2:1 balance):

* the finer block's ghosts are the coarse cells repeated (injection), with zero slope;
* the coarser block's flux on that face is the mean of the fine fluxes, which it computes
  itself from the fine strip with the same function and the same inputs as the fine block:
  both sides see one flux, so mass and momentum are conserved to round-off (flux
  correction without a second exchange), and the coarse cell next to the finer block keeps
  zero slope so that a lake at rest stays at rest across the jump.

Fluxes: hydrostatic reconstruction (Audusse et al. 2004) at every face, then the f-wave
solver with Einfeldt speeds (as TUM SWE and GeoClaw) where both sides are wet, or the
Rusanov flux (the invasive paper's); a face with a dry side always takes Rusanov, which keeps
depths non-negative under the Courant limit.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

WALL, OUTFLOW, SOURCE_TILE, SOURCE_HALO = 0, 1, 2, 3
FWAVE, RUSANOV = 0, 1
MINMOD, VANLEER = 0, 1


# ----- point functions ------------------------------------------------------------------------
@nb.njit(inline="always")
def _limit(a, b, lim):
    if a * b <= 0.0:
        return 0.0
    if lim == MINMOD:
        return a if abs(a) < abs(b) else b
    return 2.0 * a * b / (a + b)


@nb.njit(inline="always")
def _velocity(h, q, dry):
    return q / h if h > dry else 0.0


@nb.njit(inline="always")
def _recon(hm, hc, hp, bm, bc, bp, um, uc, up, vm, vc, vp, dry, lim, flat):
    """A cell's depth, bed and velocities at its low and high faces (MUSCL on h, eta, u, v).

    ``flat`` (or a dry cell in the stencil) keeps the cell's own values: first order next to
    a finer block and at the shoreline."""
    if flat or hm <= dry or hc <= dry or hp <= dry:
        return hc, hc, bc, bc, uc, uc, vc, vc
    sh = 0.5 * _limit(hc - hm, hp - hc, lim)
    ec = hc + bc
    se = 0.5 * _limit(ec - (hm + bm), (hp + bp) - ec, lim)
    su = 0.5 * _limit(uc - um, up - uc, lim)
    sv = 0.5 * _limit(vc - vm, vp - vc, lim)
    hlo, hhi = hc - sh, hc + sh
    return hlo, hhi, (ec - se) - hlo, (ec + se) - hhi, uc - su, uc + su, vc - sv, vc + sv


@nb.njit(inline="always")
def _flux(hL, bL, uL, vL, hR, bR, uR, vR, g, dry, solver):
    """Normal flux through a face from the states on its left and right (u normal, v along).

    Returns the mass flux, the normal-momentum flux seen by the left and by the right cell
    (they differ by the hydrostatic-reconstruction terms), the tangential-momentum flux and
    the fastest wave speed."""
    bs = max(bL, bR)
    hl = max(0.0, hL + bL - bs)
    hr = max(0.0, hR + bR - bs)
    if hl <= dry:
        hl, uL, vL = max(hl, 0.0), 0.0, 0.0
    if hr <= dry:
        hr, uR, vR = max(hr, 0.0), 0.0, 0.0
    f0 = f1 = f2 = speed = 0.0
    if hl > dry or hr > dry:
        cl = math.sqrt(g * hl)
        cr = math.sqrt(g * hr)
        ql, qr = hl * uL, hr * uR
        pl = ql * uL + 0.5 * g * hl * hl
        pr = qr * uR + 0.5 * g * hr * hr
        if solver == FWAVE and hl > dry and hr > dry:
            sl, sr = math.sqrt(hl), math.sqrt(hr)
            uhat = (uL * sl + uR * sr) / (sl + sr)
            chat = math.sqrt(0.5 * g * (hl + hr))
            s1 = min(uL - cl, uhat - chat)
            s2 = max(uR + cr, uhat + chat)
            d0, d1 = qr - ql, pr - pl
            d2 = qr * vR - ql * vL
            beta1 = (s2 * d0 - d1) / (s2 - s1)
            beta2 = (d1 - s1 * d0) / (s2 - s1)
            shear = d2 - beta1 * vL - beta2 * vR
            f0, f1, f2 = ql, pl, ql * vL
            if s1 < 0.0:
                f0 += beta1
                f1 += beta1 * s1
                f2 += beta1 * vL
            if uhat < 0.0:
                f2 += shear
            if s2 < 0.0:
                f0 += beta2
                f1 += beta2 * s2
                f2 += beta2 * vR
            speed = max(abs(s1), abs(s2))
        else:
            a = max(abs(uL) + cl, abs(uR) + cr)
            f0 = 0.5 * (ql + qr) - 0.5 * a * (hr - hl)
            f1 = 0.5 * (pl + pr) - 0.5 * a * (qr - ql)
            f2 = 0.5 * (ql * vL + qr * vR) - 0.5 * a * (hr * vR - hl * vL)
            speed = a
    return f0, f1 + 0.5 * g * (hL * hL - hl * hl), f1 + 0.5 * g * (hR * hR - hr * hr), f2, speed


# ----- strips and ghosts ----------------------------------------------------------------------
@nb.njit(inline="always")
def _cell(face, n, layer, t):
    """Padded (i, j) of the cell at ``layer`` (0 = touching the face) and position ``t`` along ``face``."""
    if face == 0:
        return 2 + layer, 2 + t
    if face == 1:
        return n + 1 - layer, 2 + t
    if face == 2:
        return 2 + t, 2 + layer
    return 2 + t, n + 1 - layer


@nb.njit(inline="always")
def _ghost(face, n, layer, t):
    """Padded (i, j) of the ghost at ``layer`` (0 = touching the face) and position ``t``."""
    if face == 0:
        return 1 - layer, 2 + t
    if face == 1:
        return n + 2 + layer, 2 + t
    if face == 2:
        return 2 + t, 1 - layer
    return 2 + t, n + 2 + layer


@nb.njit(cache=True, nogil=True)
def extract_strips(h, hu, hv, b, off, nn, strips, soff):
    """Every block's strip on every face into ``strips`` at ``soff[k, f]``."""
    for k in range(len(nn)):
        n = nn[k]
        m = n + 4
        blocks = (h[off[k]:off[k] + m * m].reshape(m, m), hu[off[k]:off[k] + m * m].reshape(m, m),
                  hv[off[k]:off[k] + m * m].reshape(m, m), b[off[k]:off[k] + m * m].reshape(m, m))
        for f in range(4):
            base = soff[k, f]
            for v in range(4):
                a = blocks[v]
                for layer in range(2):
                    row = base + (v * 2 + layer) * n
                    for t in range(n):
                        i, j = _cell(f, n, layer, t)
                        strips[row + t] = a[i, j]


@nb.njit(cache=True, nogil=True)
def strip_sizes(nn):
    """Offsets of every (block, face) strip and their total length."""
    soff = np.empty((len(nn), 4), dtype=np.int64)
    total = 0
    for k in range(len(nn)):
        for f in range(4):
            soff[k, f] = total
            total += 8 * nn[k]
    return soff, total


@nb.njit(cache=True, nogil=True)
def fill_ghosts(h, hu, hv, b, off, nn, lev, kind, src_off, src_lev, strips, halo):
    """Both ghost layers of every face of every block, from the neighbour's strip or the wall."""
    for k in range(len(nn)):
        n = nn[k]
        m = n + 4
        blocks = (h[off[k]:off[k] + m * m].reshape(m, m), hu[off[k]:off[k] + m * m].reshape(m, m),
                  hv[off[k]:off[k] + m * m].reshape(m, m), b[off[k]:off[k] + m * m].reshape(m, m))
        for f in range(4):
            normal = 1 if f < 2 else 2
            if kind[k, f] <= OUTFLOW:
                for v in range(4):
                    a = blocks[v]
                    sign = -1.0 if (kind[k, f] == WALL and v == normal) else 1.0
                    for layer in range(2):
                        inner = layer if kind[k, f] == WALL else 0
                        for t in range(n):
                            gi, gj = _ghost(f, n, layer, t)
                            ci, cj = _cell(f, n, inner, t)
                            a[gi, gj] = sign * a[ci, cj]
                continue
            src = strips if kind[k, f] == SOURCE_TILE else halo
            base = src_off[k, f]
            jump = src_lev[k, f] - lev[k]
            ns = n if jump == 0 else (n // 2 if jump < 0 else 2 * n)
            for v in range(4):
                a = blocks[v]
                for t in range(n):
                    if jump == 0:
                        g0 = src[base + (v * 2) * ns + t]
                        g1 = src[base + (v * 2 + 1) * ns + t]
                    elif jump < 0:  # coarser neighbour: its cell repeated over both layers
                        g0 = g1 = src[base + (v * 2) * ns + t // 2]
                    else:  # finer neighbour: the 2 x 2 mean of its two layers
                        r0 = base + (v * 2) * ns + 2 * t
                        r1 = base + (v * 2 + 1) * ns + 2 * t
                        g0 = g1 = ((src[r0] + src[r1]) + (src[r0 + 1] + src[r1 + 1])) * 0.25
                    gi, gj = _ghost(f, n, 0, t)
                    a[gi, gj] = g0
                    gi, gj = _ghost(f, n, 1, t)
                    a[gi, gj] = g1


# ----- the update -----------------------------------------------------------------------------
@nb.njit(cache=True, nogil=True)
def _block_tendency(H, HU, HV, B, n, dx, g, dry, solver, order, lim, finer, src, src_off, d, dual):
    """``d[0..2]`` += the flux divergence and bed source of one block (per unit area and time);
    returns the fastest wave speed over its faces.

    ``finer[f]`` marks faces whose neighbour is one level finer: their fluxes are the mean of
    the fine ones, computed from the neighbour's strip in ``src[f]`` at ``src_off[f]``.
    ``dual[0..3]`` is scratch for second order (the faces' depth and bed of each cell)."""
    inv = 1.0 / dx
    fastest = 0.0
    for axis in range(2):
        lo_face, hi_face = 2 * axis, 2 * axis + 1
        nq = 1 + axis  # normal momentum: hu along x, hv along y
        for i in range(n + 1):  # face i lies between cells i - 1 and i along the axis
            if (i == 0 and finer[lo_face]) or (i == n and finer[hi_face]):
                continue
            for j in range(n):
                if axis == 0:
                    pm, pc, pp, pq = (i, j + 2), (i + 1, j + 2), (i + 2, j + 2), (i + 3, j + 2)
                else:
                    pm, pc, pp, pq = (j + 2, i), (j + 2, i + 1), (j + 2, i + 2), (j + 2, i + 3)
                hl, bl = H[pc], B[pc]
                hr, br = H[pp], B[pp]
                if axis == 0:
                    ul, vl = _velocity(hl, HU[pc], dry), _velocity(hl, HV[pc], dry)
                    ur, vr = _velocity(hr, HU[pp], dry), _velocity(hr, HV[pp], dry)
                else:
                    ul, vl = _velocity(hl, HV[pc], dry), _velocity(hl, HU[pc], dry)
                    ur, vr = _velocity(hr, HV[pp], dry), _velocity(hr, HU[pp], dry)
                if order == 2:
                    hm, hq = H[pm], H[pq]
                    if axis == 0:
                        um, vm = _velocity(hm, HU[pm], dry), _velocity(hm, HV[pm], dry)
                        uq, vq = _velocity(hq, HU[pq], dry), _velocity(hq, HV[pq], dry)
                    else:
                        um, vm = _velocity(hm, HV[pm], dry), _velocity(hm, HU[pm], dry)
                        uq, vq = _velocity(hq, HV[pq], dry), _velocity(hq, HU[pq], dry)
                    # the left cell's high side; the right cell's low side
                    _, hl2, _, bl2, _, ul2, _, vl2 = _recon(hm, hl, hr, B[pm], bl, br, um, ul, ur, vm, vl, vr, dry,
                                                            lim, i == n and finer[hi_face])
                    hr2, _, br2, _, ur2, _, vr2, _ = _recon(hl, hr, hq, bl, br, B[pq], ul, ur, uq, vl, vr, vq, dry,
                                                            lim, i == 0 and finer[lo_face])
                    hl, bl, ul, vl, hr, br, ur, vr = hl2, bl2, ul2, vl2, hr2, br2, ur2, vr2
                f0, f1l, f1r, f2, s = _flux(hl, bl, ul, vl, hr, br, ur, vr, g, dry, solver)
                fastest = max(fastest, s)
                if i > 0:  # the left cell loses
                    ci, cj = (i - 1, j) if axis == 0 else (j, i - 1)
                    d[0, ci, cj] -= f0 * inv
                    d[nq, ci, cj] -= f1l * inv
                    d[3 - nq, ci, cj] -= f2 * inv
                    if order == 2:
                        dual[2, ci, cj] = hl
                        dual[3, ci, cj] = bl
                if i < n:  # the right cell gains
                    ci, cj = (i, j) if axis == 0 else (j, i)
                    d[0, ci, cj] += f0 * inv
                    d[nq, ci, cj] += f1r * inv
                    d[3 - nq, ci, cj] += f2 * inv
                    if order == 2:
                        dual[0, ci, cj] = hr
                        dual[1, ci, cj] = br
        for face in (lo_face, hi_face):
            if finer[face]:
                fastest = max(fastest, _fine_face(H, HU, HV, B, n, inv, g, dry, solver, order, lim, face,
                                                  src[face], src_off[face], d, dual))
        if order == 2:  # the bed's slope inside each cell (Audusse et al. 2004, second order)
            for ci in range(n):
                for cj in range(n):
                    d[nq, ci, cj] -= 0.5 * g * (dual[0, ci, cj] + dual[2, ci, cj]) * (dual[3, ci, cj]
                                                                                      - dual[1, ci, cj]) * inv
    return fastest


@nb.njit(cache=True, nogil=True)
def _fine_face(H, HU, HV, B, n, inv, g, dry, solver, order, lim, face, strip, base, d, dual):
    """The coarse side of a face with a finer neighbour: each coarse cell's flux is the mean of
    the two fine fluxes beside it, computed as the fine block computes them."""
    nf = 2 * n
    axis = face // 2
    high = face % 2 == 1  # the neighbour lies on the high side: the coarse cell is on the left
    nq = 1 + axis
    fastest = 0.0
    for t in range(n):
        ci, cj = _cell(face, n, 0, t)
        hc, bc = H[ci, cj], B[ci, cj]
        qn, qt = (HU[ci, cj], HV[ci, cj]) if axis == 0 else (HV[ci, cj], HU[ci, cj])
        uc, vc = _velocity(hc, qn, dry), _velocity(hc, qt, dry)
        tot0 = tot1 = tot2 = 0.0
        for s in range(2):
            tf = 2 * t + s
            h0, h1 = strip[base + 0 * nf + tf], strip[base + 1 * nf + tf]
            b0, b1 = strip[base + 6 * nf + tf], strip[base + 7 * nf + tf]
            qn0 = strip[base + (2 + 2 * axis) * nf + tf]
            qn1 = strip[base + (3 + 2 * axis) * nf + tf]
            qt0 = strip[base + (4 - 2 * axis) * nf + tf]
            qt1 = strip[base + (5 - 2 * axis) * nf + tf]
            u0, v0 = _velocity(h0, qn0, dry), _velocity(h0, qt0, dry)
            u1, v1 = _velocity(h1, qn1, dry), _velocity(h1, qt1, dry)
            hf, bf, uf, vf = h0, b0, u0, v0
            hg, bg, ug, vg = hc, bc, uc, vc
            if order == 2:
                # as the fine block sees it: its ghosts are this coarse cell, twice (zero slope)
                if high:
                    hf, _, bf, _, uf, _, vf, _ = _recon(hc, h0, h1, bc, b0, b1, uc, u0, u1, vc, v0, v1, dry, lim, False)
                    _, hg, _, bg, _, ug, _, vg = _recon(hc, hc, h0, bc, bc, b0, uc, uc, u0, vc, vc, v0, dry, lim, False)
                else:
                    _, hf, _, bf, _, uf, _, vf = _recon(h1, h0, hc, b1, b0, bc, u1, u0, uc, v1, v0, vc, dry, lim, False)
                    hg, _, bg, _, ug, _, vg, _ = _recon(h0, hc, hc, b0, bc, bc, u0, uc, uc, v0, vc, vc, dry, lim, False)
            if high:
                f0, f1l, _, f2, sp = _flux(hg, bg, ug, vg, hf, bf, uf, vf, g, dry, solver)
                tot1 += f1l
            else:
                f0, _, f1r, f2, sp = _flux(hf, bf, uf, vf, hg, bg, ug, vg, g, dry, solver)
                tot1 += f1r
            tot0 += f0
            tot2 += f2
            fastest = max(fastest, sp)
        sign = -0.5 * inv if high else 0.5 * inv
        i, j = ci - 2, cj - 2
        d[0, i, j] += sign * tot0
        d[nq, i, j] += sign * tot1
        d[3 - nq, i, j] += sign * tot2
        if order == 2:  # zero slope: the face's depth and bed are the cell's own
            row = 2 if high else 0
            dual[row, i, j] = hc
            dual[row + 1, i, j] = bc
    return fastest


@nb.njit(cache=True, nogil=True)
def advance(h, hu, hv, b, h0, hu0, hv0, off, nn, lev, kind, src_off, src_lev, halo, dt, dx0, g, dry,
            solver, order, lim, stage):
    """One stage of one step on every block of a tile, in place.

    ``stage`` 0: forward Euler (order 1); 1: the first Heun stage (saves the state in
    ``h0, hu0, hv0``); 2: the second (averages with the saved state).

    Returns ``(fastest, bad_block, bad_i, bad_j, courant)``: the largest wave speed over dx
    (1/s) and, if a depth went negative (below ``-dry``) or not finite, the block and cell
    (else -1); ``courant`` is the step's largest Courant number ``dt * speed / dx``.
    """
    soff, total = strip_sizes(nn)
    strips = np.empty(total)
    extract_strips(h, hu, hv, b, off, nn, strips, soff)
    for k in range(len(nn)):  # in-tile neighbours read this tile's own strips
        for f in range(4):
            if kind[k, f] == SOURCE_TILE:
                src_off[k, f] = soff[src_off[k, f], f ^ 1]
    fill_ghosts(h, hu, hv, b, off, nn, lev, kind, src_off, src_lev, strips, halo)
    nmax = 0
    for k in range(len(nn)):
        nmax = max(nmax, nn[k])
    d = np.empty((3, nmax, nmax))
    dual = np.empty((4, nmax, nmax))
    courant = 0.0
    bad = (-1, -1, -1)
    for k in range(len(nn)):
        n = nn[k]
        m = n + 4
        o = off[k]
        H, HU, HV, B = (h[o:o + m * m].reshape(m, m), hu[o:o + m * m].reshape(m, m),
                        hv[o:o + m * m].reshape(m, m), b[o:o + m * m].reshape(m, m))
        dk = d[:, :n, :n]
        dk[:] = 0.0
        dx = dx0 / 2.0 ** lev[k]
        finer = (src_lev[k, 0] > lev[k] and kind[k, 0] >= SOURCE_TILE,
                 src_lev[k, 1] > lev[k] and kind[k, 1] >= SOURCE_TILE,
                 src_lev[k, 2] > lev[k] and kind[k, 2] >= SOURCE_TILE,
                 src_lev[k, 3] > lev[k] and kind[k, 3] >= SOURCE_TILE)
        srcs = (strips if kind[k, 0] == SOURCE_TILE else halo, strips if kind[k, 1] == SOURCE_TILE else halo,
                strips if kind[k, 2] == SOURCE_TILE else halo, strips if kind[k, 3] == SOURCE_TILE else halo)
        offs = (src_off[k, 0], src_off[k, 1], src_off[k, 2], src_off[k, 3])
        fastest = _block_tendency(H, HU, HV, B, n, dx, g, dry, solver, order, lim, finer, srcs, offs, dk,
                                  dual[:, :n, :n])
        courant = max(courant, dt * fastest / dx)
        H0, HU0, HV0 = (h0[o:o + m * m].reshape(m, m), hu0[o:o + m * m].reshape(m, m),
                        hv0[o:o + m * m].reshape(m, m))
        for i in range(n):
            for j in range(n):
                p, q = i + 2, j + 2
                if stage == 1:
                    H0[p, q], HU0[p, q], HV0[p, q] = H[p, q], HU[p, q], HV[p, q]
                nh = H[p, q] + dt * dk[0, i, j]
                nu = HU[p, q] + dt * dk[1, i, j]
                nv = HV[p, q] + dt * dk[2, i, j]
                if stage == 2:
                    nh = 0.5 * (H0[p, q] + nh)
                    nu = 0.5 * (HU0[p, q] + nu)
                    nv = 0.5 * (HV0[p, q] + nv)
                if not (nh >= -dry) or not math.isfinite(nu + nv):
                    if bad[0] < 0:
                        bad = (k, i, j)
                if nh <= dry:  # a dry cell has no velocity; round-off below zero is zero
                    nh, nu, nv = max(nh, 0.0), 0.0, 0.0
                H[p, q], HU[p, q], HV[p, q] = nh, nu, nv
    return courant, bad[0], bad[1], bad[2]


@nb.njit(cache=True, nogil=True)
def fastest_wave(h, hu, hv, off, nn, lev, dx0, g, dry):
    """The largest ``(|u| + c + |v| + c) / dx`` over a tile's cells (1/s), for the time step."""
    top = 0.0
    for k in range(len(nn)):
        n = nn[k]
        m = n + 4
        o = off[k]
        H, HU, HV = h[o:o + m * m].reshape(m, m), hu[o:o + m * m].reshape(m, m), hv[o:o + m * m].reshape(m, m)
        inv = 2.0 ** lev[k] / dx0
        for i in range(2, n + 2):
            for j in range(2, n + 2):
                hc = H[i, j]
                if hc > dry:
                    c = math.sqrt(g * hc)
                    s = (abs(HU[i, j] / hc) + abs(HV[i, j] / hc) + 2.0 * c) * inv
                    top = max(top, s)
    return top
