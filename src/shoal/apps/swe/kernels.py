"""Compiled kernels of the shallow-water app: one call per tile and phase.

A tile holds root blocks; block ``k`` is an ``m x m`` array (``m = n + 4``: ``n`` cells per
side and two ghost layers) of each of ``h, hu, hv, b``, stored one after another in flat
pools at ``off[k]``. Axis 0 is x. Faces are numbered west, east, south, north (0-3); the
opposite of face ``f`` is ``f ^ 1``.

A block's *strip* on a face is its two outermost layers of cells there, at its own level:
``[variable(4)][layer(2)][n]``, layer 0 touching the face, cells in increasing coordinate.
Every ghost is filled from the neighbour's strip, whether the neighbour lives in the same
tile (``SOURCE_TILE``) or arrives in a halo (``SOURCE_HALO``): a block's arithmetic never
depends on the tiling. At the domain's sides the ghosts follow the side's kind
(:mod:`.boundary`). Across a level jump (at most one: 2:1 balance):

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

from .boundary import DEPTH, INFLOW, OUTFLOW, WALL, depth_state, inflow_state

SOURCE_TILE, SOURCE_HALO = 4, 5  # after the sides' kinds (WALL, OUTFLOW, INFLOW, DEPTH)
FWAVE, RUSANOV = 0, 1
MINMOD, VANLEER = 0, 1


# ----- point functions ------------------------------------------------------------------------
@nb.njit(inline="always", error_model="numpy")
def _limit(a, b, lim):
    if a * b <= 0.0:
        return 0.0
    if lim == MINMOD:
        return a if abs(a) < abs(b) else b
    return 2.0 * a * b / (a + b)


@nb.njit(inline="always", error_model="numpy")
def _velocity(h, q, dry):
    return q / h if h > dry else 0.0


@nb.njit(inline="always", error_model="numpy")
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


@nb.njit(inline="always", error_model="numpy")
def _fwave(hl, ul, vl, cl, sl, hr, ur, vr, cr, sr, g):
    """The f-wave solver with Einfeldt's speeds (the flux difference split into two waves and a
    shear wave), from wet states with celerities ``c`` and square roots of depth ``s``.

    Where a rarefaction crosses the critical point (``u - c`` or ``u + c`` changes sign from
    left to right) the split has no wave to open it: it would keep a stationary
    entropy-violating jump (Ritter's dam stays a step). Where its middle state would have a
    negative depth (a thin film beside deeper water) it would make water. In both cases the
    HLLE flux with the same speeds takes over: it opens the fan and keeps depths non-negative."""
    ql, qr = hl * ul, hr * ur
    pl = ql * ul + 0.5 * g * hl * hl
    pr = qr * ur + 0.5 * g * hr * hr
    uhat = (ul * sl + ur * sr) / (sl + sr)
    chat = math.sqrt(0.5 * g * (hl + hr))
    s1 = min(ul - cl, uhat - chat)
    s2 = max(ur + cr, uhat + chat)
    d0, d1 = qr - ql, pr - pl
    d2 = qr * vr - ql * vl
    w = 1.0 / (s2 - s1)
    beta1 = (s2 * d0 - d1) * w
    beta2 = (d1 - s1 * d0) * w
    # the middle state's depth (each f-wave jumps the state by beta / s): negative where a thin
    # film meets deeper water, which the f-wave split would pass on
    empty = (s1 < 0.0 and hl + beta1 / s1 < 0.0) or (s2 > 0.0 and hr - beta2 / s2 < 0.0)
    if empty or (ul - cl < 0.0 < ur - cr) or (ul + cl < 0.0 < ur + cr):
        f0 = (s2 * ql - s1 * qr + s1 * s2 * (hr - hl)) * w
        f1 = (s2 * pl - s1 * pr + s1 * s2 * (qr - ql)) * w
        f2 = (s2 * ql * vl - s1 * qr * vr + s1 * s2 * (hr * vr - hl * vl)) * w
        return f0, f1, f2, max(-s1, s2)
    shear = d2 - beta1 * vl - beta2 * vr
    a1 = beta1 if s1 < 0.0 else 0.0
    a2 = beta2 if s2 < 0.0 else 0.0
    f0 = ql + a1 + a2
    f1 = pl + a1 * s1 + a2 * s2
    f2 = ql * vl + a1 * vl + a2 * vr + (shear if uhat < 0.0 else 0.0)
    return f0, f1, f2, max(-s1, s2)


@nb.njit(inline="always", error_model="numpy")
def _rusanov(hl, ul, vl, cl, hr, ur, vr, cr, g):
    """The Rusanov (local Lax-Friedrichs) flux, the invasive paper's."""
    ql, qr = hl * ul, hr * ur
    pl = ql * ul + 0.5 * g * hl * hl
    pr = qr * ur + 0.5 * g * hr * hr
    a = max(abs(ul) + cl, abs(ur) + cr)
    return (0.5 * (ql + qr) - 0.5 * a * (hr - hl), 0.5 * (pl + pr) - 0.5 * a * (qr - ql),
            0.5 * (ql * vl + qr * vr) - 0.5 * a * (hr * vr - hl * vl), a)


@nb.njit(inline="always", error_model="numpy")
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
        if solver == FWAVE and hl > dry and hr > dry:
            f0, f1, f2, speed = _fwave(hl, uL, vL, cl, math.sqrt(hl), hr, uR, vR, cr, math.sqrt(hr), g)
        else:
            f0, f1, f2, speed = _rusanov(hl, uL, vL, cl, hr, uR, vR, cr, g)
    return f0, f1 + 0.5 * g * (hL * hL - hl * hl), f1 + 0.5 * g * (hR * hR - hr * hr), f2, speed


# ----- strips and ghosts ----------------------------------------------------------------------
@nb.njit(cache=True, nogil=True, error_model="numpy")
def layout(lev, block):
    """Cells per side of each block at its level, and each block's offset in the pools (two
    ghost layers a side), with the pools' length last."""
    nn = np.empty(len(lev), dtype=np.int64)
    off = np.empty(len(lev) + 1, dtype=np.int64)
    off[0] = 0
    for k in range(len(lev)):
        nn[k] = block << lev[k]
        off[k + 1] = off[k] + (nn[k] + 4) ** 2
    return nn, off



@nb.njit(inline="always", error_model="numpy")
def _cell(face, n, layer, t):
    """Padded (i, j) of the cell at ``layer`` (0 = touching the face) and position ``t`` along ``face``."""
    if face == 0:
        return 2 + layer, 2 + t
    if face == 1:
        return n + 1 - layer, 2 + t
    if face == 2:
        return 2 + t, 2 + layer
    return 2 + t, n + 1 - layer


@nb.njit(inline="always", error_model="numpy")
def _ghost(face, n, layer, t):
    """Padded (i, j) of the ghost at ``layer`` (0 = touching the face) and position ``t``."""
    if face == 0:
        return 1 - layer, 2 + t
    if face == 1:
        return n + 2 + layer, 2 + t
    if face == 2:
        return 2 + t, 1 - layer
    return 2 + t, n + 2 + layer


@nb.njit(inline="always", error_model="numpy")
def _write_strip(h, hu, hv, b, o, n, f, out, base):
    """The strip of the block at pool offset ``o`` (``n`` cells a side) on face ``f``, into ``out[base:]``."""
    m = n + 4
    blocks = (h[o:o + m * m].reshape(m, m), hu[o:o + m * m].reshape(m, m),
              hv[o:o + m * m].reshape(m, m), b[o:o + m * m].reshape(m, m))
    for v in range(4):
        a = blocks[v]
        for layer in range(2):
            row = base + (v * 2 + layer) * n
            for t in range(n):
                i, j = _cell(f, n, layer, t)
                out[row + t] = a[i, j]


@nb.njit(cache=True, nogil=True, error_model="numpy")
def extract_strips(h, hu, hv, b, off, nn, strips, soff):
    """Every block's strip on every face into ``strips`` at ``soff[k, f]``."""
    for k in range(len(nn)):
        for f in range(4):
            _write_strip(h, hu, hv, b, off[k], nn[k], f, strips, soff[k, f])


@nb.njit(cache=True, nogil=True, error_model="numpy")
def pack_faces(h, hu, hv, b, lev, block, ks, fs):
    """The strips of the listed (block, face) pairs, one after another, and where each ends."""
    nn, off = layout(lev, block)
    ends = np.empty(len(ks) + 1, dtype=np.int64)
    ends[0] = 0
    for e in range(len(ks)):
        ends[e + 1] = ends[e] + 8 * nn[ks[e]]
    total = 0
    for e in range(len(ks)):
        total += 8 * nn[ks[e]]
    out = np.empty(total)
    base = 0
    for e in range(len(ks)):
        k = ks[e]
        _write_strip(h, hu, hv, b, off[k], nn[k], fs[e], out, base)
        base += 8 * nn[k]
    return out, ends


@nb.njit(cache=True, nogil=True, error_model="numpy")
def strip_sizes(nn):
    """Offsets of every (block, face) strip and their total length."""
    soff = np.empty((len(nn), 4), dtype=np.int64)
    total = 0
    for k in range(len(nn)):
        for f in range(4):
            soff[k, f] = total
            total += 8 * nn[k]
    return soff, total


@nb.njit(cache=True, nogil=True, error_model="numpy")
def fill_ghosts(h, hu, hv, b, off, nn, lev, kind, src_off, src_lev, strips, halo, side_values, g, dry):
    """Both ghost layers of every face of every block, from the neighbour's strip or the side
    (``side_values[f]``: the discharge of an inflow side ``f``, the depth of a depth side)."""
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
            if kind[k, f] <= DEPTH:
                _side_ghosts(blocks, f, n, kind[k, f], side_values[f], g, dry)
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


@nb.njit(inline="always", error_model="numpy")
def _side_ghosts(blocks, f, n, kind, value, g, dry):
    """Both ghost layers of face ``f`` on an inflow or depth side: the state of
    :func:`.boundary.inflow_state` or :func:`.boundary.depth_state` from the cell beside each
    (inflow normal to the side; a depth side keeps the cell's velocity along it), its bed."""
    normal = 1 if f < 2 else 2
    inward = 1.0 if f % 2 == 0 else -1.0  # west and south sides face +x and +y
    H, B, QN, QT = blocks[0], blocks[3], blocks[normal], blocks[3 - normal]
    for t in range(n):
        ci, cj = _cell(f, n, 0, t)
        hc = H[ci, cj]
        wet = hc > dry
        w = inward * QN[ci, cj] / hc if wet else 0.0
        along = QT[ci, cj] / hc if wet else 0.0
        if kind == INFLOW:
            hb, wb = inflow_state(value, hc, w, g, dry)
            along = 0.0
        else:
            hb, wb = depth_state(value, hc, w, g, dry)
        for layer in range(2):
            gi, gj = _ghost(f, n, layer, t)
            H[gi, gj] = hb
            QN[gi, gj] = inward * hb * wb
            QT[gi, gj] = hb * along
            B[gi, gj] = B[ci, cj]


# ----- the update -----------------------------------------------------------------------------
@nb.njit(cache=True, nogil=True, error_model="numpy")
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
                mean = np.empty((3, n))
                fastest = max(fastest, _fine_face(H, HU, HV, B, n, g, dry, solver, order, lim, face,
                                                  src[face], src_off[face], mean))
                sign = -inv if face == hi_face else inv
                for t in range(n):
                    ci, cj = _cell(face, n, 0, t)
                    i, j = ci - 2, cj - 2
                    d[0, i, j] += sign * mean[0, t]
                    d[nq, i, j] += sign * mean[1, t]
                    d[3 - nq, i, j] += sign * mean[2, t]
                    if order == 2:  # zero slope: the face's depth and bed are the cell's own
                        row = 2 if face == hi_face else 0
                        dual[row, i, j] = H[ci, cj]
                        dual[row + 1, i, j] = B[ci, cj]
        if order == 2:  # the bed's slope inside each cell (Audusse et al. 2004, second order)
            for ci in range(n):
                for cj in range(n):
                    d[nq, ci, cj] -= 0.5 * g * (dual[0, ci, cj] + dual[2, ci, cj]) * (dual[3, ci, cj]
                                                                                      - dual[1, ci, cj]) * inv
    return fastest


#: fast-math flags that keep NaN and infinity semantics (the depth checks rely on them)
FAST = {"nsz", "arcp", "contract", "afn", "reassoc"}


@nb.njit(inline="always", fastmath=FAST, error_model="numpy")
def _wet_flux(hl, ul, vl, cl, sl, hr, ur, vr, cr, sr, g, solver):
    """``_flux`` where both sides are wet over the same bed (no hydrostatic terms), from
    precomputed velocities, celerities ``c`` and square roots of depth ``s``."""
    if solver == FWAVE:
        return _fwave(hl, ul, vl, cl, sl, hr, ur, vr, cr, sr, g)
    return _rusanov(hl, ul, vl, cl, hr, ur, vr, cr, g)


@nb.njit(cache=True, nogil=True, fastmath=FAST, error_model="numpy")
def _first_order_block(H, HU, HV, B, n, dx, dt, g, dry, solver, finer, src, src_off):
    """A forward-Euler step of one block at first order, in place, written for speed.

    Velocities, celerities and square roots once per cell; then every face as if both sides
    were wet over one bed (loops the compiler vectorises), done again with the full flux where
    that was wrong (only in blocks with a dry cell or a sloping bed); faces with a finer
    neighbour take the mean of the fine fluxes. Returns the fastest wave speed (every face's
    speed is bounded by its cells': Roe averages lie between them and a hydrostatically
    reconstructed depth is at most the cell's), the largest ``|u| + |v| + 2c`` of the new
    state (for the next time step) and the first bad cell's ``(i, j)`` or -1."""
    m = n + 4
    U, V, C, S = np.empty((m, m)), np.empty((m, m)), np.empty((m, m)), np.empty((m, m))
    for i in range(m):
        for j in range(m):
            h = H[i, j]
            hw = h if h > dry else 1.0
            w = 1.0 if h > dry else 0.0
            r = w / hw
            U[i, j] = HU[i, j] * r
            V[i, j] = HV[i, j] * r
            C[i, j] = math.sqrt(g * hw) * w
            S[i, j] = math.sqrt(hw) * w
    fastest = 0.0
    simple = True  # every cell wet, the bed flat: the vectorised faces are the right ones
    b0 = B[2, 2]
    for i in range(1, n + 3):
        for j in range(1, n + 3):
            if (i == 1 or i == n + 2) and (j == 1 or j == n + 2):
                continue  # corners are not read
            fastest = max(fastest, max(abs(U[i, j]), abs(V[i, j])) + C[i, j])
            simple = simple and H[i, j] > dry and B[i, j] == b0
    fx0, fx1l, fx1r, fx2 = np.empty((n + 1, n)), np.empty((n + 1, n)), np.empty((n + 1, n)), np.empty((n + 1, n))
    fy0, fy1l, fy1r, fy2 = np.empty((n, n + 1)), np.empty((n, n + 1)), np.empty((n, n + 1)), np.empty((n, n + 1))
    for i in range(n + 1):  # x faces: fx[i, j] between cells (i - 1, j) and (i, j)
        li, ri = i + 1, i + 2
        for j in range(n):
            c = j + 2
            f0, f1, f2, _ = _wet_flux(H[li, c], U[li, c], V[li, c], C[li, c], S[li, c],
                                      H[ri, c], U[ri, c], V[ri, c], C[ri, c], S[ri, c], g, solver)
            fx0[i, j] = f0
            fx1l[i, j] = f1
            fx1r[i, j] = f1
            fx2[i, j] = f2
        if simple:
            continue
        for j in range(n):
            c = j + 2
            hl, hr, bl, br = H[li, c], H[ri, c], B[li, c], B[ri, c]
            if not (hl > dry and hr > dry and bl == br):
                f0, f1l, f1r, f2, _ = _flux(hl, bl, U[li, c], V[li, c], hr, br, U[ri, c], V[ri, c], g, dry, solver)
                fx0[i, j], fx1l[i, j], fx1r[i, j], fx2[i, j] = f0, f1l, f1r, f2
    for i in range(n):  # y faces: fy[i, j] between cells (i, j - 1) and (i, j)
        c = i + 2
        for j in range(n + 1):
            lj, rj = j + 1, j + 2
            f0, f1, f2, _ = _wet_flux(H[c, lj], V[c, lj], U[c, lj], C[c, lj], S[c, lj],
                                      H[c, rj], V[c, rj], U[c, rj], C[c, rj], S[c, rj], g, solver)
            fy0[i, j] = f0
            fy1l[i, j] = f1
            fy1r[i, j] = f1
            fy2[i, j] = f2
        if simple:
            continue
        for j in range(n + 1):
            lj, rj = j + 1, j + 2
            hl, hr, bl, br = H[c, lj], H[c, rj], B[c, lj], B[c, rj]
            if not (hl > dry and hr > dry and bl == br):
                f0, f1l, f1r, f2, _ = _flux(hl, bl, V[c, lj], U[c, lj], hr, br, V[c, rj], U[c, rj], g, dry, solver)
                fy0[i, j], fy1l[i, j], fy1r[i, j], fy2[i, j] = f0, f1l, f1r, f2
    mean = np.empty((3, n))
    for face in range(4):
        if not finer[face]:
            continue
        fastest = max(fastest, _fine_face(H, HU, HV, B, n, g, dry, solver, 1, MINMOD, face, src[face], src_off[face],
                                          mean))
        at = 0 if face % 2 == 0 else n
        for t in range(n):
            if face < 2:
                fx0[at, t], fx2[at, t] = mean[0, t], mean[2, t]
                fx1l[at, t] = fx1r[at, t] = mean[1, t]
            else:
                fy0[t, at], fy2[t, at] = mean[0, t], mean[2, t]
                fy1l[t, at] = fy1r[t, at] = mean[1, t]
    k = dt / dx
    bad_i = bad_j = -1
    after = 0.0
    for i in range(n):
        for j in range(n):
            p, q = i + 2, j + 2
            nh = H[p, q] + k * ((fx0[i, j] - fx0[i + 1, j]) + (fy0[i, j] - fy0[i, j + 1]))
            nu = HU[p, q] + k * ((fx1r[i, j] - fx1l[i + 1, j]) + (fy2[i, j] - fy2[i, j + 1]))
            nv = HV[p, q] + k * ((fx2[i, j] - fx2[i + 1, j]) + (fy1r[i, j] - fy1l[i, j + 1]))
            still = nh <= dry  # a dry cell has no velocity; round-off below zero is zero
            H[p, q] = max(nh, 0.0) if still else nh
            HU[p, q] = 0.0 if still else nu
            HV[p, q] = 0.0 if still else nv
            hw = 1.0 if still else nh
            w = 0.0 if still else 1.0
            after = max(after, (abs(nu) + abs(nv)) * (w / hw) + 2.0 * w * math.sqrt(g * hw))
            if bad_i < 0 and not (nh >= -dry and math.isfinite(nu) and math.isfinite(nv)):
                bad_i, bad_j = i, j
    return fastest, after, bad_i, bad_j


@nb.njit(cache=True, nogil=True, error_model="numpy")
def _fine_face(H, HU, HV, B, n, g, dry, solver, order, lim, face, strip, base, mean):
    """The coarse side of a face with a finer neighbour: each coarse cell's flux is the mean of
    the two fine fluxes beside it, computed as the fine block computes them.

    Writes ``mean[:, t]`` for the coarse cell at position ``t`` along the face: mass, normal
    and tangential momentum fluxes (normal: the coarse cell's side of the hydrostatic terms);
    returns the fastest wave speed."""
    nf = 2 * n
    axis = face // 2
    high = face % 2 == 1  # the neighbour lies on the high side: the coarse cell is on the left
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
        mean[0, t] = 0.5 * tot0
        mean[1, t] = 0.5 * tot1
        mean[2, t] = 0.5 * tot2
    return fastest


@nb.njit(cache=True, nogil=True, error_model="numpy")
def advance(h, hu, hv, b, h0, hu0, hv0, lev, block, kind, local, recv_k, recv_f, recv_lev, halo, side_values, dt,
            dx0, g, dry, solver, order, lim, stage, speeds):
    """One stage of one step on every block of a tile, in place.

    ``stage`` 0: forward Euler (order 1); 1: the first Heun stage (saves the state in
    ``h0, hu0, hv0``); 2: the second (averages with the saved state).

    A face's neighbour is ``kind[k, f]``: a side of the domain (:mod:`.boundary`, with its
    discharge or depth in ``side_values[f]``), block ``local[k, f]`` of this tile, or a strip
    in ``halo``; the halo's strips are those of the pairs ``recv_k, recv_f`` in order, at
    levels ``recv_lev``.

    Returns ``(courant, bad_block, bad_i, bad_j, cells)``: the stage's largest Courant number
    ``dt * speed / dx``; if a depth went negative (below ``-dry``) or a value not finite, the
    first such block and cell (else -1); the cells updated. After a step's last stage,
    ``speeds[k]`` is block ``k``'s largest ``|u| + |v| + 2c``, from which the next step's time
    step follows.
    """
    nn, off = layout(lev, block)
    soff, total = strip_sizes(nn)
    strips = np.empty(total)
    extract_strips(h, hu, hv, b, off, nn, strips, soff)
    src_off = np.zeros_like(kind)
    src_lev = np.zeros_like(kind)
    for k in range(len(nn)):  # in-tile neighbours read this tile's own strips
        for f in range(4):
            if kind[k, f] == SOURCE_TILE:
                src_off[k, f] = soff[local[k, f], f ^ 1]
                src_lev[k, f] = lev[local[k, f]]
    at = 0
    for e in range(len(recv_k)):  # the rest, one after another in the halo buffer
        src_off[recv_k[e], recv_f[e]] = at
        src_lev[recv_k[e], recv_f[e]] = recv_lev[e]
        at += 8 * (block << recv_lev[e])
    fill_ghosts(h, hu, hv, b, off, nn, lev, kind, src_off, src_lev, strips, halo, side_values, g, dry)
    nmax = 0
    for k in range(len(nn)):
        nmax = max(nmax, nn[k])
    dual = np.empty((4, nmax, nmax))
    courant = 0.0
    bad = (-1, -1, -1)
    for k in range(len(nn)):
        n = nn[k]
        m = n + 4
        o = off[k]
        H, HU, HV, B = (h[o:o + m * m].reshape(m, m), hu[o:o + m * m].reshape(m, m),
                        hv[o:o + m * m].reshape(m, m), b[o:o + m * m].reshape(m, m))
        dk = np.empty((3, n, n))
        dx = dx0 / 2.0 ** lev[k]
        finer = (src_lev[k, 0] > lev[k] and kind[k, 0] >= SOURCE_TILE,
                 src_lev[k, 1] > lev[k] and kind[k, 1] >= SOURCE_TILE,
                 src_lev[k, 2] > lev[k] and kind[k, 2] >= SOURCE_TILE,
                 src_lev[k, 3] > lev[k] and kind[k, 3] >= SOURCE_TILE)
        srcs = (strips if kind[k, 0] == SOURCE_TILE else halo, strips if kind[k, 1] == SOURCE_TILE else halo,
                strips if kind[k, 2] == SOURCE_TILE else halo, strips if kind[k, 3] == SOURCE_TILE else halo)
        offs = (src_off[k, 0], src_off[k, 1], src_off[k, 2], src_off[k, 3])
        if order == 1:
            fastest, speeds[k], i, j = _first_order_block(H, HU, HV, B, n, dx, dt, g, dry, solver, finer, srcs, offs)
            courant = max(courant, dt * fastest / dx)
            if i >= 0 and bad[0] < 0:
                bad = (k, i, j)
            continue
        dk[:] = 0.0
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
    if stage == 2:
        speeds[:] = block_speeds(h, hu, hv, lev, block, g, dry)
    cells = 0
    for k in range(len(nn)):
        cells += nn[k] * nn[k]
    return courant, bad[0], bad[1], bad[2], cells


@nb.njit(cache=True, nogil=True, fastmath=FAST, error_model="numpy")
def block_speeds(h, hu, hv, lev, block, g, dry):
    """Each block's largest ``|u| + |v| + 2c`` over its cells (m/s); dry cells count 0."""
    nn, off = layout(lev, block)
    out = np.zeros(len(nn))
    for k in range(len(nn)):
        n = nn[k]
        m = n + 4
        o = off[k]
        H, HU, HV = h[o:o + m * m].reshape(m, m), hu[o:o + m * m].reshape(m, m), hv[o:o + m * m].reshape(m, m)
        top = 0.0
        for i in range(2, n + 2):
            for j in range(2, n + 2):
                hc = H[i, j]
                hw = hc if hc > dry else 1.0
                w = 1.0 if hc > dry else 0.0
                top = max(top, (abs(HU[i, j]) + abs(HV[i, j])) * (w / hw) + 2.0 * w * math.sqrt(g * hw))
        out[k] = top
    return out


@nb.njit(cache=True, nogil=True)
def balance_round(target, kind, local, recv_k, recv_f, received):
    """One Jacobi round of 2:1 balance of a tile's target levels (:func:`.blocks.balanced`):
    each block's new target is at least each face neighbour's minus one, the neighbours in
    the tile (``kind`` ``SOURCE_TILE``, block ``local``) read from ``target``, those of other
    tiles from ``received`` (the pairs ``recv_k, recv_f`` in order). Returns the new targets."""
    nb_ = len(target)
    top = np.full(nb_, -1, np.int64)  # each block's highest neighbour target
    for k in range(nb_):
        for f in range(4):
            if kind[k, f] == SOURCE_TILE:
                top[k] = max(top[k], target[local[k, f]])
    for e in range(len(recv_k)):
        top[recv_k[e]] = max(top[recv_k[e]], np.int64(received[e]))
    out = np.empty(nb_, np.int64)
    for k in range(nb_):
        out[k] = max(target[k], top[k] - 1)
    return out


@nb.njit(cache=True, nogil=True, error_model="numpy")
def block_flags(h, hu, hv, b, lev, block, dx0, gradient, threshold, sea_level, dry, still):
    """Per block: whether the refinement criterion flags a cell (``surface``: a wet cell's
    ``|eta - sea_level| >= threshold``; ``gradient``: the surface slope between two wet face
    neighbours of the block ``>= threshold``), whether the block holds a dry cell, whether it
    holds a wet one, and whether a wet cell moves faster than ``still`` (``|u| + |v|``). Only
    the block's own cells are read, so a flag never depends on the tiling."""
    nn, off = layout(lev, block)
    flags = np.zeros(len(nn), dtype=np.bool_)
    has_dry = np.zeros(len(nn), dtype=np.bool_)
    has_wet = np.zeros(len(nn), dtype=np.bool_)
    moving = np.zeros(len(nn), dtype=np.bool_)
    for k in range(len(nn)):
        n = nn[k]
        m = n + 4
        o = off[k]
        H, B = h[o:o + m * m].reshape(m, m), b[o:o + m * m].reshape(m, m)
        HU, HV = hu[o:o + m * m].reshape(m, m), hv[o:o + m * m].reshape(m, m)
        limit = threshold * dx0 / 2.0 ** lev[k]  # a slope times the cell size: a surface difference
        for i in range(2, n + 2):
            for j in range(2, n + 2):
                if H[i, j] <= dry:
                    has_dry[k] = True
                    continue
                has_wet[k] = True
                moving[k] |= abs(HU[i, j]) + abs(HV[i, j]) > still * H[i, j]
                eta = H[i, j] + B[i, j]
                if not gradient:
                    flags[k] |= abs(eta - sea_level) >= threshold
                    continue
                if i + 1 < n + 2 and H[i + 1, j] > dry:
                    flags[k] |= abs(H[i + 1, j] + B[i + 1, j] - eta) >= limit
                if j + 1 < n + 2 and H[i, j + 1] > dry:
                    flags[k] |= abs(H[i, j + 1] + B[i, j + 1] - eta) >= limit
    return flags, has_dry, has_wet, moving


@nb.njit(cache=True, nogil=True, error_model="numpy")
def fastest_cell(h, hu, hv, lev, block, dx0, g, dry):
    """The block and cell with the largest ``(max(|u|, |v|) + c) / dx`` (1/s), and that value:
    where a time step too long for the waves shows first."""
    nn, off = layout(lev, block)
    best, at = -1.0, (-1, -1, -1)
    for k in range(len(nn)):
        n = nn[k]
        m = n + 4
        o = off[k]
        H, HU, HV = h[o:o + m * m].reshape(m, m), hu[o:o + m * m].reshape(m, m), hv[o:o + m * m].reshape(m, m)
        inv = 2.0 ** lev[k] / dx0
        for i in range(2, n + 2):
            for j in range(2, n + 2):
                if H[i, j] > dry:
                    s = (max(abs(HU[i, j]), abs(HV[i, j])) / H[i, j] + math.sqrt(g * H[i, j])) * inv
                    if s > best:
                        best, at = s, (k, i - 2, j - 2)
    return at[0], at[1], at[2], best
