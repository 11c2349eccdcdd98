"""Closest points on segments and triangles (Ericson, *Real-Time Collision Detection*, §5.1):
the geometry the cloth's contact pairs and the wavefront's image points share, compiled."""

from __future__ import annotations

import numba as nb


@nb.njit(cache=True, nogil=True)
def on_segment(px, py, pz, ax, ay, az, bx, by, bz):
    """The parameter ``t`` in [0, 1] of the point ``a + t (b - a)`` of segment ``a b`` closest
    to ``p`` (0 when the segment is a point)."""
    dx, dy, dz = bx - ax, by - ay, bz - az
    length2 = dx * dx + dy * dy + dz * dz
    if length2 > 0.0:
        return min(max(((px - ax) * dx + (py - ay) * dy + (pz - az) * dz) / length2, 0.0), 1.0)
    return 0.0


@nb.njit(cache=True, nogil=True)
def on_triangle(px, py, pz, ax, ay, az, bx, by, bz, cx, cy, cz):
    """The point of triangle ``abc`` closest to ``p`` and its barycentric weights:
    ``(qx, qy, qz, wa, wb, wc)``, by the Voronoi regions of the corners, sides and face (§5.1.5);
    a triangle with no area gives the point of its side ``a b``."""
    abx, aby, abz = bx - ax, by - ay, bz - az
    acx, acy, acz = cx - ax, cy - ay, cz - az
    apx, apy, apz = px - ax, py - ay, pz - az
    d1 = abx * apx + aby * apy + abz * apz
    d2 = acx * apx + acy * apy + acz * apz
    if d1 <= 0.0 and d2 <= 0.0:
        return ax, ay, az, 1.0, 0.0, 0.0
    bpx, bpy, bpz = px - bx, py - by, pz - bz
    d3 = abx * bpx + aby * bpy + abz * bpz
    d4 = acx * bpx + acy * bpy + acz * bpz
    if d3 >= 0.0 and d4 <= d3:
        return bx, by, bz, 0.0, 1.0, 0.0
    vc = d1 * d4 - d3 * d2
    if vc <= 0.0 and d1 >= 0.0 and d3 <= 0.0:
        v = d1 / (d1 - d3)
        return ax + v * abx, ay + v * aby, az + v * abz, 1.0 - v, v, 0.0
    cpx, cpy, cpz = px - cx, py - cy, pz - cz
    d5 = abx * cpx + aby * cpy + abz * cpz
    d6 = acx * cpx + acy * cpy + acz * cpz
    if d6 >= 0.0 and d5 <= d6:
        return cx, cy, cz, 0.0, 0.0, 1.0
    vb = d5 * d2 - d1 * d6
    if vb <= 0.0 and d2 >= 0.0 and d6 <= 0.0:
        w = d2 / (d2 - d6)
        return ax + w * acx, ay + w * acy, az + w * acz, 1.0 - w, 0.0, w
    va = d3 * d6 - d5 * d4
    if va <= 0.0 and d4 - d3 >= 0.0 and d5 - d6 >= 0.0:
        w = (d4 - d3) / ((d4 - d3) + (d5 - d6))
        return bx + w * (cx - bx), by + w * (cy - by), bz + w * (cz - bz), 0.0, 1.0 - w, w
    if va + vb + vc == 0.0:  # no area
        t = on_segment(px, py, pz, ax, ay, az, bx, by, bz)
        return ax + t * abx, ay + t * aby, az + t * abz, 1.0 - t, t, 0.0
    denom = 1.0 / (va + vb + vc)
    v, w = vb * denom, vc * denom
    return ax + abx * v + acx * w, ay + aby * v + acy * w, az + abz * v + acz * w, 1.0 - v - w, v, w
