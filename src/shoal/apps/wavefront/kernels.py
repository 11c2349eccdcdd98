"""The compiled steps of one Lassen iteration on a tile's nodes.

A tile holds its nodes and ``pad`` layers of its neighbours' around them, flat in one padded
box (``geo`` describes it, see :func:`geometry`); zones are named by their lowest corner. Only
band nodes and the zones they touch are visited: a tile the front is far from costs nothing.

Node states: :data:`UNREACHED`, :data:`NEARBY`, :data:`NARROWBAND`, :data:`REACHED`.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .facets import (
    CORNERS2,
    CORNERS3,
    CYCLES2,
    CYCLES3,
    EDGES2,
    EDGES3,
    FACES2,
    FACES3,
    MAXF,
    MAXV,
    build_facets,
    image_point,
)

UNREACHED, NEARBY, NARROWBAND, REACHED = 0, 1, 2, 3
# a facet is one row: its zone's global index per axis, its vertex count, centre, the distance
# from its centre to its farthest vertex, then its vertices (x, y, z each)
ZONE, COUNT, CENTRE, RADIUS, VERTS = 0, 3, 4, 7, 8
PICO = 1e-12  # levels closer to 0 than this many zones count as just behind the front (Lassen's rule)
LIMITER = 0.5  # dt = LIMITER x the band's least time of arrival
GROWTH = 1.05  # dt grows at most this much per iteration
SETTLE = 1.0 - 1e-6  # before any band: dt = SETTLE h / v (Lassen's)
CLOSEST = 0.25  # band nodes nearer the front than this many zones do not limit dt
SURFACE = 2  # a zone flag: mixed signs (1: evaluated, not mixed)
UNSET = np.finfo(np.float64).max  # the level and arrival time of a node the front has not reached (finite, as Lassen's)

# geo: pad[3], shape[3], lo[3] (global first zone), ext[3] (zones), nodes[3] (global zones per
# axis; 0 on a 2D grid's z), ndim
PAD, SHAPE, LO, EXT, NODES, NDIM = 0, 3, 6, 9, 12, 15


def geometry(lo, hi, cells, pad: int) -> np.ndarray:
    """``geo`` of a tile of zones ``lo:hi`` (per axis) of a grid of ``cells`` zones, ``pad``
    node layers around it."""
    ndim = len(cells)
    geo = np.zeros(16, np.int64)
    for a in range(3):
        if a < ndim:
            geo[PAD + a] = pad
            geo[SHAPE + a] = hi[a] - lo[a] + 2 * pad + 1
            geo[LO + a], geo[EXT + a], geo[NODES + a] = lo[a], hi[a] - lo[a], cells[a]
        else:
            geo[SHAPE + a] = 1
    geo[NDIM] = ndim
    return geo


def search_order(ndim: int, reach: float) -> tuple[np.ndarray, np.ndarray]:
    """The zones a node may take a facet from, nearest first: their low corners' offsets from
    the node (rows of 3), and the least distance from the node to each (in zones), ascending
    (ties in offset order), below ``reach`` zones."""
    span = int(np.ceil(reach)) + 1
    axes = [np.arange(-span, span + 1)] * ndim + [np.zeros(1, np.int64)] * (3 - ndim)
    offsets = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, 3).astype(np.int64)
    # a zone with low corner o spans [o, o + 1] along an axis: 0 away if o is -1 or 0
    gap = np.where(offsets < -1, -1 - offsets, np.where(offsets > 0, offsets, 0))
    gap[:, ndim:] = 0
    bound = np.sqrt((gap.astype(np.float64) ** 2).sum(axis=1))
    keep = bound < reach
    offsets, bound = offsets[keep], bound[keep]
    order = np.lexsort((offsets[:, 2], offsets[:, 1], offsets[:, 0], bound))
    return np.ascontiguousarray(offsets[order]), np.ascontiguousarray(bound[order])


def facet_cells(geo, reach: int) -> int:
    """Zones whose facets a tile's nearby nodes may take: its own and ``reach`` more per side."""
    z = 1
    for a in range(int(geo[NDIM])):
        z *= int(geo[EXT + a]) + 2 * reach
    return z


@njit(cache=True, nogil=True)
def _tables(ndim):
    if ndim == 2:
        return CORNERS2, EDGES2, FACES2, CYCLES2
    return CORNERS3, EDGES3, FACES3, CYCLES3


@njit(cache=True, nogil=True)
def _owned(geo, i, j, k):
    """Whether local node (i, j, k) is the tile's: its zones' low corners, and the grid's last
    nodes for the tiles on its high sides."""
    for a, c in ((0, i), (1, j), (2, k)):
        if geo[NODES + a] == 0:
            continue
        last = 1 if geo[LO + a] + geo[EXT + a] == geo[NODES + a] else 0
        if c < geo[PAD + a] or c >= geo[PAD + a] + geo[EXT + a] + last:
            return False
    return True


@njit(cache=True, nogil=True)
def _zone_owned(geo, i, j, k):
    """Whether the padded box's zone with low corner (i, j, k) is the tile's."""
    for a, c in ((0, i), (1, j), (2, k)):
        if geo[NODES + a] != 0 and (c < geo[PAD + a] or c >= geo[PAD + a] + geo[EXT + a]):
            return False
    return True


@njit(cache=True, nogil=True)
def _zone(geo, i, j, k):
    """Flat index of the padded box's zone with low corner (i, j, k), or -1 when the zone lies
    outside the box or the grid."""
    idx = 0
    for a, c in ((0, i), (1, j), (2, k)):
        nz = max(geo[SHAPE + a] - 1, 1)
        g = geo[LO + a] + c - geo[PAD + a]
        if c < 0 or c >= nz or g < 0 or g >= max(geo[NODES + a], 1):
            return -1
        idx = idx * nz + c
    return idx


@njit(cache=True, nogil=True)
def node_coords(geo, n):
    """Local (i, j, k) of the padded box's flat node ``n``."""
    s1, s2 = geo[SHAPE + 1], geo[SHAPE + 2]
    return n // (s1 * s2), (n // s2) % s1, n % s2


@njit(cache=True, nogil=True)
def _node(geo, i, j, k):
    return (i * geo[SHAPE + 1] + j) * geo[SHAPE + 2] + k


@njit(cache=True, nogil=True)
def _position(geo, origin, h, i, j, k):
    return (origin[0] + (geo[LO] + i - geo[PAD]) * h, origin[1] + (geo[LO + 1] + j - geo[PAD + 1]) * h,
            origin[2] + (geo[LO + 2] + k - geo[PAD + 2]) * h)


@njit(cache=True, nogil=True)
def _touches_surface(geo, corners, surf, i, j, k):
    for c in range(corners.shape[0]):
        z = _zone(geo, i - corners[c, 0], j - corners[c, 1], k - corners[c, 2])
        if z >= 0 and surf[z] == SURFACE:
            return True
    return False


@njit(cache=True, nogil=True)
def _seed(geo, origin, h, v, bw, t, centre, delay, state, level, T, img, writes, fresh, nfresh):
    """A source fires at ``t``: the nodes of the padded box near its sphere take its level
    ``|x - c| - v (t - delay)`` where it is lower than theirs. Appends the nodes that join the
    band to ``fresh``; returns their count."""
    inst = (t - delay) * v
    lo = np.empty(3, np.int64)
    hi = np.empty(3, np.int64)
    for a in range(3):
        if geo[NODES + a] == 0:
            lo[a], hi[a] = 0, 1
            continue
        base = geo[LO + a] - geo[PAD + a]
        g0 = int(np.ceil((centre[a] - origin[a] - inst - bw) / h))
        g1 = int(np.floor((centre[a] - origin[a] + inst + bw) / h)) + 1
        lo[a] = max(max(g0, 0) - base, 0)
        hi[a] = min(min(g1, geo[NODES + a] + 1) - base, geo[SHAPE + a])
    for i in range(lo[0], hi[0]):
        for j in range(lo[1], hi[1]):
            for k in range(lo[2], hi[2]):
                x, y, z = _position(geo, origin, h, i, j, k)
                r = np.sqrt((x - centre[0]) ** 2 + (y - centre[1]) ** 2 + (z - centre[2]) ** 2)
                lv = r - inst
                if lv > bw:
                    continue
                n = _node(geo, i, j, k)
                if lv < level[n]:
                    level[n] = lv
                    if r == 0.0:
                        img[n, 0], img[n, 1], img[n, 2] = centre[0] + inst, centre[1], centre[2]
                    else:
                        s = inst / r
                        img[n, 0] = centre[0] + s * (x - centre[0])
                        img[n, 1] = centre[1] + s * (y - centre[1])
                        img[n, 2] = centre[2] + s * (z - centre[2])
                if abs(level[n]) < bw and state[n] != NARROWBAND:
                    state[n] = NARROWBAND
                    fresh[nfresh] = n
                    nfresh += 1
                if level[n] < 0.0:
                    when = max(0.0, t + level[n] / v)
                    if when < T[n]:
                        T[n] = when
                        if _owned(geo, i, j, k):
                            writes[0] += 1
                    if level[n] < -bw:
                        state[n] = REACHED
    return nfresh


@njit(cache=True, nogil=True)
def front(geo, origin, h, v, bw, t, state, level, T, img, band, writes, halo_idx, halo_state, halo_level,
          centres, delays, radius, fired):
    """Node data from the neighbours; sources that fire; the surface zones; band nodes behind
    the front and off it are reached; the nodes near it join as nearby; the facets of the
    tile's surface zones.

    Returns
    -------
    band, left : ndarray of int64
        The tile's band nodes now, and those it reached (sorted local indices).
    surf : ndarray of int8
        Per zone of the padded box: :data:`SURFACE` where the front crosses it.
    nearby : ndarray of int64
        The tile's nearby nodes (sorted).
    facets : ndarray
        The facets of the tile's zones, a row each (:data:`ZONE`, :data:`COUNT`, ...).
    work : int
        Band nodes of the tile.
    """
    ndim = geo[NDIM]
    corners, edges, faces, cycles = _tables(ndim)
    ghost = np.empty(len(halo_idx), np.int64)
    nghost = 0
    for m in range(len(halo_idx)):
        n = halo_idx[m]
        state[n], level[n] = halo_state[m], halo_level[m]
        if halo_state[m] == NARROWBAND:
            ghost[nghost] = n
            nghost += 1
    size = geo[SHAPE] * geo[SHAPE + 1] * geo[SHAPE + 2]
    now = np.zeros(len(delays), np.bool_)
    for s in range(len(delays)):
        if not fired[s] and t >= delays[s] + radius / v:
            fired[s] = now[s] = True
    if now.any():
        fresh = np.empty(size, np.int64)
        nfresh = 0
        for s in range(len(delays)):
            if now[s]:
                nfresh = _seed(geo, origin, h, v, bw, t, centres[s], delays[s], state, level, T, img, writes,
                               fresh, nfresh)
        kept = np.empty(len(band) + nfresh, np.int64)
        nk = 0
        for n in band:
            if state[n] == NARROWBAND:
                kept[nk] = n
                nk += 1
        extra = np.empty(nfresh + nghost, np.int64)
        ne = 0
        for m in range(nfresh):
            n = fresh[m]
            i, j, k = node_coords(geo, n)
            if state[n] != NARROWBAND:
                continue
            if _owned(geo, i, j, k):
                kept[nk] = n
                nk += 1
            else:
                extra[ne] = n
                ne += 1
        band = np.unique(kept[:nk])
        for m in range(nghost):
            extra[ne] = ghost[m]
            ne += 1
        ghost, nghost = extra, ne
    nz = 1
    for a in range(3):
        nz *= max(geo[SHAPE + a] - 1, 1)
    surf = np.zeros(nz, np.int8)
    surface = np.empty(nz, np.int64)
    ns = 0
    ncorner = corners.shape[0]
    for m in range(len(band) + nghost):
        n = band[m] if m < len(band) else ghost[m - len(band)]
        i, j, k = node_coords(geo, n)
        for c in range(ncorner):
            a, b, d = i - corners[c, 0], j - corners[c, 1], k - corners[c, 2]
            z = _zone(geo, a, b, d)
            if z < 0 or surf[z] != 0:
                continue
            neg = 0
            for q in range(ncorner):
                if level[_node(geo, a + corners[q, 0], b + corners[q, 1], d + corners[q, 2])] < 0.0:
                    neg += 1
            if 0 < neg < ncorner:
                surf[z] = SURFACE
                surface[ns] = z
                ns += 1
            else:
                surf[z] = 1
    surface = np.sort(surface[:ns])
    work = len(band)
    keep = np.empty(len(band), np.int64)
    left = np.empty(len(band), np.int64)
    nkeep = nleft = 0
    for n in band:
        i, j, k = node_coords(geo, n)
        if level[n] < 0.0 and not _touches_surface(geo, corners, surf, i, j, k):
            state[n] = REACHED
            left[nleft] = n
            nleft += 1
        else:
            keep[nkeep] = n
            nkeep += 1
    band = keep[:nkeep]
    z1, z2 = max(geo[SHAPE + 1] - 1, 1), max(geo[SHAPE + 2] - 1, 1)
    around = np.zeros(nz, np.bool_)
    nearby = np.empty(size, np.int64)
    nn = 0
    klo = 0 if ndim == 2 else -1
    for m in range(ns):
        s = surface[m]
        si, sj, sk = s // (z1 * z2), (s // z2) % z1, s % z2
        for oi in range(-1, 2):
            for oj in range(-1, 2):
                for ok in range(klo, 1 - klo):
                    a, b, d = si + oi, sj + oj, sk + ok
                    z = _zone(geo, a, b, d)
                    if z < 0 or around[z]:
                        continue
                    around[z] = True
                    for q in range(ncorner):
                        i, j, k = a + corners[q, 0], b + corners[q, 1], d + corners[q, 2]
                        if not _owned(geo, i, j, k):
                            continue
                        n = _node(geo, i, j, k)
                        if state[n] == NARROWBAND or state[n] == NEARBY or level[n] < 0.0:
                            continue
                        state[n] = NEARBY
                        nearby[nn] = n
                        nn += 1
    nearby = np.sort(nearby[:nn])
    width = 2 if ndim == 2 else MAXV
    facets = np.empty((ns * MAXF, VERTS + 3 * width))
    lv = np.empty(ncorner)
    pts = np.empty((ncorner, 3))
    fverts = np.empty((MAXF, width, 3))
    fnv = np.empty(MAXF, np.int64)
    scratch = np.empty((4, 12), np.int64)
    nf = 0
    for m in range(ns):
        s = surface[m]
        si, sj, sk = s // (z1 * z2), (s // z2) % z1, s % z2
        if not _zone_owned(geo, si, sj, sk):
            continue
        for q in range(ncorner):
            i, j, k = si + corners[q, 0], sj + corners[q, 1], sk + corners[q, 2]
            lq = level[_node(geo, i, j, k)]
            lv[q] = -PICO * h if abs(lq) < PICO * h else lq
            pts[q, 0], pts[q, 1], pts[q, 2] = _position(geo, origin, h, i, j, k)
        got = build_facets(lv, pts, edges, faces, cycles, fverts, fnv, scratch)
        for f in range(got):
            row = facets[nf]
            row[ZONE] = geo[LO] + si - geo[PAD]
            row[ZONE + 1] = geo[LO + 1] + sj - geo[PAD + 1]
            row[ZONE + 2] = geo[LO + 2] + sk - geo[PAD + 2]
            row[COUNT] = fnv[f]
            for d in range(3):
                c = 0.0
                for p in range(fnv[f]):
                    c += fverts[f, p, d]
                row[CENTRE + d] = c / fnv[f]
            far = 0.0
            for p in range(fnv[f]):
                r2 = 0.0
                for d in range(3):
                    row[VERTS + 3 * p + d] = fverts[f, p, d]
                    r2 += (fverts[f, p, d] - row[CENTRE + d]) ** 2
                far = max(far, r2)
            row[RADIUS] = np.sqrt(far)
            nf += 1
    return band, left[:nleft].copy(), surf, nearby, facets[:nf].copy(), work


@njit(cache=True, nogil=True)
def _merge(a, b):
    """The union of two sorted arrays with no element in common, sorted."""
    out = np.empty(len(a) + len(b), np.int64)
    i = j = 0
    for m in range(len(out)):
        if j == len(b) or (i < len(a) and a[i] < b[j]):
            out[m] = a[i]
            i += 1
        else:
            out[m] = b[j]
            j += 1
    return out


@njit(cache=True, nogil=True)
def distances(geo, reach, offsets, bounds, origin, h, v, bw, state, level, img, band, nearby, surf, head, facets):
    """Nearby nodes take the distance to the nearest facet whose centre lies within twice the
    band's width (its nearest point their image point) and join the band; the tile's least
    time of arrival over band nodes off surface zones and farther than a quarter zone.

    The zones about each node are searched nearest first (``offsets`` of their low corners,
    at least ``bounds`` zones away: :func:`search_order`), stopping at the first that lies
    farther than the nearest point found, and a facet whose bounding sphere does is skipped
    (a first pass takes the nearest facet centre, a point of a facet, as the first bound): the
    facet trying every candidate would find, at a fraction of the cost. ``reach`` is the
    zones beyond its own a tile takes facets from. ``head`` (:func:`facet_cells` zones, all -1)
    lists each zone's facets while the search runs and is left all -1 again.

    Returns
    -------
    band : ndarray of int64
        The tile's band nodes, nearby ones included (sorted).
    tmin : float
        Least ``level / v`` of the band nodes that limit the time step (:data:`UNSET`: none).
    work : int
        Nearby plus band nodes.
    """
    ndim = geo[NDIM]
    corners = _tables(ndim)[0]
    base = np.zeros(3, np.int64)
    width = np.ones(3, np.int64)
    for a in range(ndim):
        base[a] = geo[LO + a] - reach
        width[a] = geo[EXT + a] + 2 * reach
    # each zone's facets as a list through `after`, the last to arrive first: a zone's facets all
    # come from its owner, in one order, so the lists do not depend on the tiling
    nf = facets.shape[0]
    after = np.full(nf, -1, np.int64)
    where = np.full(nf, -1, np.int64)
    for f in range(nf):
        c = 0
        for a in range(3):
            q = int(facets[f, ZONE + a]) - base[a]
            if q < 0 or q >= width[a]:
                c = -1
                break
            c = c * width[a] + q
        if c >= 0:
            where[f] = c
            after[f] = head[c]
            head[c] = f
    cutoff = (2.0 * bw) ** 2
    for n in nearby:
        i, j, k = node_coords(geo, n)
        x, y, z = _position(geo, origin, h, i, j, k)
        m0 = geo[LO] + i - geo[PAD] - base[0]
        m1 = geo[LO + 1] + j - geo[PAD + 1] - base[1]
        m2 = geo[LO + 2] + k - geo[PAD + 2] - base[2]
        # a fan's centre is a point of its facet: the nearest centre bounds the distance first
        near = np.inf
        for e in range(len(bounds)):
            if bounds[e] * h > near:
                break
            c0, c1, c2 = m0 + offsets[e, 0], m1 + offsets[e, 1], m2 + offsets[e, 2]
            if c0 < 0 or c0 >= width[0] or c1 < 0 or c1 >= width[1] or c2 < 0 or c2 >= width[2]:
                continue
            f = head[(c0 * width[1] + c1) * width[2] + c2]
            while f >= 0:
                d2 = (facets[f, CENTRE] - x) ** 2 + (facets[f, CENTRE + 1] - y) ** 2 + (facets[f, CENTRE + 2] - z) ** 2
                if d2 < cutoff:
                    near = min(near, np.sqrt(d2))
                f = after[f]
        best = np.inf
        bx = by = bz = 0.0
        for e in range(len(bounds)):
            if bounds[e] * h > min(best, near):
                break
            c0, c1, c2 = m0 + offsets[e, 0], m1 + offsets[e, 1], m2 + offsets[e, 2]
            if c0 < 0 or c0 >= width[0] or c1 < 0 or c1 >= width[1] or c2 < 0 or c2 >= width[2]:
                continue
            f = head[(c0 * width[1] + c1) * width[2] + c2]
            while f >= 0:
                row = facets[f]
                cx, cy, cz = row[CENTRE], row[CENTRE + 1], row[CENTRE + 2]
                d2 = (cx - x) ** 2 + (cy - y) ** 2 + (cz - z) ** 2
                # beyond the cut-off, or every point of it farther than a point already known
                if d2 < cutoff and not d2 > (min(best, near) + row[RADIUS]) ** 2:
                    qx, qy, qz = image_point(row[VERTS:], int(row[COUNT]), cx, cy, cz, x, y, z)
                    d = np.sqrt((qx - x) ** 2 + (qy - y) ** 2 + (qz - z) ** 2)
                    if d < best:
                        best, bx, by, bz = d, qx, qy, qz
                f = after[f]
        if best < np.inf:
            level[n] = best
            img[n, 0], img[n, 1], img[n, 2] = bx, by, bz
        state[n] = NARROWBAND
    for f in range(nf):
        if where[f] >= 0:
            head[where[f]] = -1
    band = _merge(band, nearby)
    tmin = UNSET
    for n in band:
        if level[n] <= CLOSEST * h or level[n] == UNSET:
            continue
        i, j, k = node_coords(geo, n)
        if _touches_surface(geo, corners, surf, i, j, k):
            continue
        tmin = min(tmin, level[n] / v)
    return band, tmin, len(band) + len(nearby)


@njit(cache=True, nogil=True)
def fires(t, fired, delays, radius, v):
    """Whether a source not yet fired fires at ``t`` (its sphere of ``radius`` grown at ``v``
    since its delay)."""
    for s in range(len(delays)):
        if not fired[s] and t >= delays[s] + radius / v:
            return True
    return False


@njit(cache=True, nogil=True)
def time_step(tmin, last, h, v):
    """The iteration's ``dt`` from the band's least time of arrival ``tmin`` (:data:`UNSET`:
    no band yet, Lassen's settling step) and the last ``dt`` (0: none)."""
    if tmin == UNSET:
        return SETTLE * h / v
    if last == 0.0:
        return LIMITER * tmin
    return min(GROWTH * last, LIMITER * tmin)


@njit(cache=True, nogil=True)
def advance(geo, origin, h, v, t, dt, level, img, T, band, writes):
    """The band moves ``v dt``: levels fall, image points follow the normal, and a node whose
    level crosses 0 is reached at ``t + level / v``."""
    travel = v * dt
    for n in band:
        before = level[n]
        if before == UNSET:
            continue
        i, j, k = node_coords(geo, n)
        x, y, z = _position(geo, origin, h, i, j, k)
        dx, dy, dz = x - img[n, 0], y - img[n, 1], z - img[n, 2]
        norm = np.sqrt(dx * dx + dy * dy + dz * dz)
        if norm > 0.0:
            s = (travel if before >= 0.0 else -travel) / norm
            img[n, 0] += s * dx
            img[n, 1] += s * dy
            img[n, 2] += s * dz
        level[n] = before - travel
        if level[n] < 0.0 <= before:
            T[n] = t + before / v
            writes[0] += 1
