"""The front inside one zone, and the nearest point of it to a node (compiled).

A zone whose corner levels change sign holds the front. Its facets join the points where the
level's linear interpolation along the zone's edges is zero: in 2D segments across the square,
in 3D polygons across the cube. On each face (the square itself in 2D) the crossings pair up
into segments; a face crossed four times (a saddle) pairs them around its negative corners, on
both sides of the face alike, so neighbouring zones' polygons meet. Every crossing then has one
segment per face it lies on, and the segments close into loops: the polygons, walked from the
lowest edge. The image point of a node on a facet is the facet's point nearest to it: on a
segment, or on the triangles of a fan about the polygon's centre.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ...closest import on_segment, on_triangle

#: Most vertices a facet holds (a loop may cross every edge of a cube once).
MAXV = 12
#: Most facets a zone holds (one per face pairing; 2 in 2D).
MAXF = 4


def _tables(ndim: int):
    """Corners (offset bits), edges (corner pairs) and faces (edges in cyclic order) of a zone."""
    corners = [(b & 1, (b >> 1) & 1, (b >> 2) & 1) for b in range(2 ** ndim)]
    if ndim == 2:
        cycles = [(0, 1, 3, 2)]
    else:
        cycles = [(0, 2, 6, 4), (1, 3, 7, 5), (0, 1, 5, 4), (2, 3, 7, 6), (0, 1, 3, 2), (4, 5, 7, 6)]
    edges: list[tuple[int, int]] = []
    faces = []
    for cyc in cycles:
        row = []
        for i in range(4):
            a, b = sorted((cyc[i], cyc[(i + 1) % 4]))
            if (a, b) not in edges:
                edges.append((a, b))
            row.append(edges.index((a, b)))
        faces.append(row)
    return (np.array(corners, np.int64), np.array(edges, np.int64), np.array(faces, np.int64),
            np.array(cycles, np.int64))


CORNERS2, EDGES2, FACES2, CYCLES2 = _tables(2)
CORNERS3, EDGES3, FACES3, CYCLES3 = _tables(3)


@njit(cache=True, nogil=True)
def build_facets(levels, points, edges, faces, cycles, out_verts, out_nv, scratch):
    """The facets of one zone from its corner ``levels`` (no zeros) and ``points``.

    Parameters
    ----------
    levels : ndarray, shape (corners,)
    points : ndarray, shape (corners, 3)
    edges, faces, cycles : ndarray
        The zone's edge, face and face-corner tables (:data:`EDGES3`, ...).
    out_verts : ndarray, shape (MAXF, MAXV, 3)
        Filled with each facet's vertices.
    out_nv : ndarray, shape (MAXF,)
        Filled with each facet's vertex count.
    scratch : ndarray of int64, shape (4, 12)
        Room for the edges' partners and marks (no allocation per zone).

    Returns
    -------
    int
        Facets written.
    """
    ne = edges.shape[0]
    # each crossed edge's two partners, one per face it lies on; crossed; walked
    link0, link1, cross, seen = scratch[0], scratch[1], scratch[2], scratch[3]
    for e in range(ne):
        link0[e] = link1[e] = -1
        cross[e] = levels[edges[e, 0]] * levels[edges[e, 1]] < 0.0
        seen[e] = 0
    for f in range(faces.shape[0]):
        m = 0
        first = -1
        for i in range(4):
            if cross[faces[f, i]]:
                m += 1
                if first < 0:
                    first = i
        for p in range(m // 2):
            if m == 2:
                a = faces[f, first]
                b = -1
                for i in range(first + 1, 4):
                    if cross[faces[f, i]]:
                        b = faces[f, i]
            else:
                # face edge i runs from cycle corner i to i + 1: pair the two edges around a negative corner
                i = (0 if levels[cycles[f, 1]] < 0.0 else 1) + 2 * p
                a, b = faces[f, i], faces[f, (i + 1) % 4]
            if link0[a] < 0:
                link0[a] = b
            else:
                link1[a] = b
            if link0[b] < 0:
                link0[b] = a
            else:
                link1[b] = a
    nf = 0
    for start in range(ne):
        if not cross[start] or seen[start] or nf == out_nv.shape[0]:
            continue
        prev, cur, nv = -1, start, 0
        while True:
            seen[cur] = 1
            a, b = edges[cur, 0], edges[cur, 1]
            r = levels[a] / (levels[a] - levels[b])
            for d in range(3):
                out_verts[nf, nv, d] = points[a, d] + r * (points[b, d] - points[a, d])
            nv += 1
            nxt = link0[cur] if link0[cur] != prev else link1[cur]
            if nxt < 0 or nxt == start or seen[nxt] or nv == out_verts.shape[1]:
                break
            prev, cur = cur, nxt
        out_nv[nf] = nv
        nf += 1
    return nf


@njit(cache=True, nogil=True)
def image_point(verts, nv, cx, cy, cz, px, py, pz):
    """The point of a facet nearest to ``(px, py, pz)``: ``verts`` holds its ``nv`` vertices
    flat (x, y, z each), ``(cx, cy, cz)`` is its centre."""
    v = verts
    if nv == 2:
        t = on_segment(px, py, pz, v[0], v[1], v[2], v[3], v[4], v[5])
        return v[0] + t * (v[3] - v[0]), v[1] + t * (v[4] - v[1]), v[2] + t * (v[5] - v[2])
    if nv == 3:
        qx, qy, qz, _, _, _ = on_triangle(px, py, pz, v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8])
        return qx, qy, qz
    best = np.inf
    bx = by = bz = 0.0
    for i in range(nv):
        a, b = 3 * i, 3 * ((i + 1) % nv)
        qx, qy, qz, _, _, _ = on_triangle(px, py, pz, cx, cy, cz, verts[a], verts[a + 1], verts[a + 2], verts[b],
                                          verts[b + 1], verts[b + 2])
        d = (qx - px) ** 2 + (qy - py) ** 2 + (qz - pz) ** 2
        if d < best:
            best, bx, by, bz = d, qx, qy, qz
    return bx, by, bz
