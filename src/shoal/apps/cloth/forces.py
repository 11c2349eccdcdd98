"""The cloth's material forces as compiled kernels: stretch per triangle, bend per hinge, and
each vertex's sum in global stencil order.

Stretch (the contact-mechanics paper §III: constant-strain triangles) is Saint Venant–Kirchhoff
on the triangle's deformation gradient ``F = [x1 - x0, x2 - x0] Dm⁻¹`` (3 × 2, ``Dm`` the rest
edges in the triangle's own 2D frame): energy ``A (μ E:E + λ/2 tr(E)²)`` with the Green strain
``E = (FᵀF - I) / 2``, μ and λ membrane moduli in N/m. Bend is Grinspun et al.'s discrete
shells: per interior edge, ``k (θ - θ̄)²`` with ``k = k_b 3 |ē|² / (Ā₁ + Ā₂)``, θ the dihedral
angle across the edge (0 when flat) and the barred values at rest.

A kernel writes each stencil's contributions (one 3-vector per stencil vertex) into its own
rows; :func:`accumulate` then adds a vertex's rows in the order of their stencils' global
indices. A tile that computes the stencils of its vertices gets the same bits as one that
computes all of them: the paper's reproducibility rule, and shoal's.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np


@nb.njit(cache=True, nogil=True)
def stretch(x, triangles, dm_inv, area, mu, lam, rows, first):
    """Each triangle's stretch contributions into ``rows[first + 3 t + k]`` (vertex ``k`` of
    triangle ``t``); returns the energy (J)."""
    energy = 0.0
    for t in range(triangles.shape[0]):
        i0, i1, i2 = triangles[t, 0], triangles[t, 1], triangles[t, 2]
        a, b, c, d = dm_inv[t, 0, 0], dm_inv[t, 0, 1], dm_inv[t, 1, 0], dm_inv[t, 1, 1]
        # F's columns: the edges from x0 through Dm⁻¹
        e1x, e1y, e1z = x[i1, 0] - x[i0, 0], x[i1, 1] - x[i0, 1], x[i1, 2] - x[i0, 2]
        e2x, e2y, e2z = x[i2, 0] - x[i0, 0], x[i2, 1] - x[i0, 1], x[i2, 2] - x[i0, 2]
        f0x, f0y, f0z = e1x * a + e2x * c, e1y * a + e2y * c, e1z * a + e2z * c
        f1x, f1y, f1z = e1x * b + e2x * d, e1y * b + e2y * d, e1z * b + e2z * d
        g00 = 0.5 * (f0x * f0x + f0y * f0y + f0z * f0z - 1.0)
        g01 = 0.5 * (f0x * f1x + f0y * f1y + f0z * f1z)
        g11 = 0.5 * (f1x * f1x + f1y * f1y + f1z * f1z - 1.0)
        tr = g00 + g11
        s00, s01, s11 = 2.0 * mu * g00 + lam * tr, 2.0 * mu * g01, 2.0 * mu * g11 + lam * tr
        # P = F S, then the forces on x1 and x2: -A P Dm⁻ᵀ
        p0x, p0y, p0z = f0x * s00 + f1x * s01, f0y * s00 + f1y * s01, f0z * s00 + f1z * s01
        p1x, p1y, p1z = f0x * s01 + f1x * s11, f0y * s01 + f1y * s11, f0z * s01 + f1z * s11
        A = area[t]
        h1x, h1y, h1z = -A * (p0x * a + p1x * b), -A * (p0y * a + p1y * b), -A * (p0z * a + p1z * b)
        h2x, h2y, h2z = -A * (p0x * c + p1x * d), -A * (p0y * c + p1y * d), -A * (p0z * c + p1z * d)
        r = first + 3 * t
        rows[r, 0], rows[r, 1], rows[r, 2] = -(h1x + h2x), -(h1y + h2y), -(h1z + h2z)
        rows[r + 1, 0], rows[r + 1, 1], rows[r + 1, 2] = h1x, h1y, h1z
        rows[r + 2, 0], rows[r + 2, 1], rows[r + 2, 2] = h2x, h2y, h2z
        energy += A * (mu * (g00 * g00 + 2.0 * g01 * g01 + g11 * g11) + 0.5 * lam * tr * tr)
    return energy


@nb.njit(cache=True, nogil=True, inline="always")
def _cross(ax, ay, az, bx, by, bz):
    return ay * bz - az * by, az * bx - ax * bz, ax * by - ay * bx


@nb.njit(cache=True, nogil=True)
def dihedral(x, i0, i1, i2, i3):
    """The angle across edge ``x0 -> x1`` between triangles ``(x0, x1, x2)`` and ``(x1, x0, x3)``:
    0 when flat, positive when the triangles fold towards their normals."""
    ex, ey, ez = x[i1, 0] - x[i0, 0], x[i1, 1] - x[i0, 1], x[i1, 2] - x[i0, 2]
    n1x, n1y, n1z = _cross(ex, ey, ez, x[i2, 0] - x[i0, 0], x[i2, 1] - x[i0, 1], x[i2, 2] - x[i0, 2])
    n2x, n2y, n2z = _cross(x[i3, 0] - x[i0, 0], x[i3, 1] - x[i0, 1], x[i3, 2] - x[i0, 2], ex, ey, ez)
    cx, cy, cz = _cross(n1x, n1y, n1z, n2x, n2y, n2z)
    le = math.sqrt(ex * ex + ey * ey + ez * ez)
    return math.atan2((cx * ex + cy * ey + cz * ez) / le, n1x * n2x + n1y * n2y + n1z * n2z)


@nb.njit(cache=True, nogil=True)
def bend(x, hinges, rest_angle, weight, rows, first):
    """Each hinge's bend contributions into ``rows[first + 4 h + k]`` (vertex ``k`` of hinge
    ``h``: the edge's two, then the opposite ones); returns the energy (J)."""
    energy = 0.0
    for h in range(hinges.shape[0]):
        i0, i1, i2, i3 = hinges[h, 0], hinges[h, 1], hinges[h, 2], hinges[h, 3]
        ex, ey, ez = x[i1, 0] - x[i0, 0], x[i1, 1] - x[i0, 1], x[i1, 2] - x[i0, 2]
        d2x, d2y, d2z = x[i2, 0] - x[i0, 0], x[i2, 1] - x[i0, 1], x[i2, 2] - x[i0, 2]
        d3x, d3y, d3z = x[i3, 0] - x[i0, 0], x[i3, 1] - x[i0, 1], x[i3, 2] - x[i0, 2]
        n1x, n1y, n1z = _cross(ex, ey, ez, d2x, d2y, d2z)
        n2x, n2y, n2z = _cross(d3x, d3y, d3z, ex, ey, ez)
        cx, cy, cz = _cross(n1x, n1y, n1z, n2x, n2y, n2z)
        le2 = ex * ex + ey * ey + ez * ez
        le = math.sqrt(le2)
        theta = math.atan2((cx * ex + cy * ey + cz * ez) / le, n1x * n2x + n1y * n2y + n1z * n2z)
        # dθ/dx2 = -|e| N1 / |N1|², dθ/dx3 = -|e| N2 / |N2|²; the edge's vertices by the feet
        # of x2 and x3 on it (the gradients sum to zero: no net force)
        s1 = -le / (n1x * n1x + n1y * n1y + n1z * n1z)
        s2 = -le / (n2x * n2x + n2y * n2y + n2z * n2z)
        g2x, g2y, g2z = s1 * n1x, s1 * n1y, s1 * n1z
        g3x, g3y, g3z = s2 * n2x, s2 * n2y, s2 * n2z
        a1 = (d2x * ex + d2y * ey + d2z * ez) / le2
        a2 = (d3x * ex + d3y * ey + d3z * ez) / le2
        k = -2.0 * weight[h] * (theta - rest_angle[h])
        r = first + 4 * h
        rows[r, 0] = k * (-(1.0 - a1) * g2x - (1.0 - a2) * g3x)
        rows[r, 1] = k * (-(1.0 - a1) * g2y - (1.0 - a2) * g3y)
        rows[r, 2] = k * (-(1.0 - a1) * g2z - (1.0 - a2) * g3z)
        rows[r + 1, 0] = k * (-a1 * g2x - a2 * g3x)
        rows[r + 1, 1] = k * (-a1 * g2y - a2 * g3y)
        rows[r + 1, 2] = k * (-a1 * g2z - a2 * g3z)
        rows[r + 2, 0], rows[r + 2, 1], rows[r + 2, 2] = k * g2x, k * g2y, k * g2z
        rows[r + 3, 0], rows[r + 3, 1], rows[r + 3, 2] = k * g3x, k * g3y, k * g3z
        energy += weight[h] * (theta - rest_angle[h]) ** 2
    return energy


@nb.njit(cache=True, nogil=True)
def accumulate(rows, ptr, order, vertices, out):
    """``out[v]`` = the rows of vertex ``v`` (``order[ptr[v]:ptr[v + 1]]``, in global stencil
    order) added one after the other, for each ``v`` of ``vertices``."""
    for v in vertices:
        fx = fy = fz = 0.0
        for k in range(ptr[v], ptr[v + 1]):
            r = order[k]
            fx += rows[r, 0]
            fy += rows[r, 1]
            fz += rows[r, 2]
        out[v, 0], out[v, 1], out[v, 2] = fx, fy, fz


def rest_frames(vertices: np.ndarray, triangles: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each triangle's ``Dm⁻¹`` (its rest edges in its own 2D frame, inverted) and rest area."""
    x0, x1, x2 = (vertices[triangles[:, k]] for k in range(3))
    e1, e2 = x1 - x0, x2 - x0
    u = e1 / np.linalg.norm(e1, axis=1, keepdims=True)
    n = np.cross(e1, e2)
    area = 0.5 * np.linalg.norm(n, axis=1)
    w = np.cross(n / (2 * area[:, None]), u)
    dm = np.stack([np.stack([np.sum(e1 * u, 1), np.sum(e2 * u, 1)], 1),
                   np.stack([np.sum(e1 * w, 1), np.sum(e2 * w, 1)], 1)], 1)
    return np.ascontiguousarray(np.linalg.inv(dm)), area


def stencil_rows(triangles: np.ndarray, hinges: np.ndarray, nvertices: int) -> tuple[np.ndarray, np.ndarray]:
    """Per vertex, its contribution rows in global stencil order (stretch stencils, then bend
    ones): ``(ptr, order)`` in compressed rows."""
    owners = np.concatenate([triangles.ravel(), hinges.ravel()])
    order = np.argsort(owners, kind="stable").astype(np.int64)  # rows already run in stencil order
    ptr = np.searchsorted(owners[order], np.arange(nvertices + 1)).astype(np.int64)
    return ptr, order
