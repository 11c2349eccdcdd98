"""Initial particle layouts: fluid blocks on a lattice, walls, lines and cylinders.

Particle ids are given here, once, in a fixed global order (fluid first, then boundary
shapes), so they never depend on the tiling or the worker count.
"""

from __future__ import annotations

import numpy as np

from ..particles import FLUID, WALL


def lattice_block(x0, y0, x1, y1, dx) -> np.ndarray:
    """Points on a square lattice of spacing dx filling [x0, x1) x [y0, y1), offset by dx/2."""
    xs = np.arange(x0 + dx / 2, x1 - 1e-12, dx)
    ys = np.arange(y0 + dx / 2, y1 - 1e-12, dx)
    X, Y = np.meshgrid(xs, ys, indexing="ij")
    return np.stack([X.ravel(), Y.ravel()], axis=1)


def tank_walls(width, height, dx, layers, top=False) -> np.ndarray:
    """Wall particles around [0, width] x [0, height]: bottom, left, right (and top)."""
    pts = []
    for k in range(layers):
        off = (k + 0.5) * dx
        xs = np.arange(-off, width + off + 1e-9, dx)
        pts.append(np.stack([xs, np.full_like(xs, -off)], axis=1))  # bottom
        if top:
            pts.append(np.stack([xs, np.full_like(xs, height + off)], axis=1))
        ys = np.arange(-off + dx, height + (off if top else 0.0) + 1e-9, dx)
        pts.append(np.stack([np.full_like(ys, -off), ys], axis=1))  # left
        pts.append(np.stack([np.full_like(ys, width + off), ys], axis=1))  # right
    return np.concatenate(pts) if pts else np.empty((0, 2))


def channel_walls(length, height, dx, layers) -> np.ndarray:
    """Top and bottom walls of an open channel [0, length] x [0, height]."""
    pts = []
    for k in range(layers):
        off = (k + 0.5) * dx
        xs = np.arange(dx / 2, length, dx)
        pts.append(np.stack([xs, np.full_like(xs, -off)], axis=1))
        pts.append(np.stack([xs, np.full_like(xs, height + off)], axis=1))
    return np.concatenate(pts)


def cylinder(cx, cy, radius, dx, layers) -> np.ndarray:
    """Rings of boundary particles inside a circle (Vertanen's BPShape cylinder)."""
    pts = []
    for k in range(layers):
        r = radius - k * dx
        if r <= dx / 2:
            pts.append(np.array([[cx, cy]]))
            break
        n = max(6, int(round(2 * np.pi * r / dx)))
        ang = 2 * np.pi * np.arange(n) / n
        pts.append(np.stack([cx + r * np.cos(ang), cy + r * np.sin(ang)], axis=1))
    return np.concatenate(pts)


def line(x0, y0, x1, y1, dx, layers) -> np.ndarray:
    """A straight wall of boundary particles, thickened by parallel layers on its left side."""
    p0, p1 = np.array([x0, y0], float), np.array([x1, y1], float)
    length = np.linalg.norm(p1 - p0)
    n = max(2, int(round(length / dx)) + 1)
    t = np.linspace(0, 1, n)[:, None]
    normal = np.array([-(p1 - p0)[1], (p1 - p0)[0]]) / length
    return np.concatenate([p0 + t * (p1 - p0) + k * dx * normal for k in range(layers)])


def remove_overlaps(fluid: np.ndarray, walls: np.ndarray, min_dist: float) -> np.ndarray:
    """Drop fluid points closer than ``min_dist`` to any wall particle."""
    if len(walls) == 0 or len(fluid) == 0:
        return fluid
    from scipy.spatial import cKDTree

    d, _ = cKDTree(walls).query(fluid, k=1)
    return fluid[d >= min_dist]


def assemble(fluid: np.ndarray, walls: np.ndarray, first_id: int = 0):
    """Ids and kinds in the fixed global order: fluid, then walls."""
    x = np.concatenate([fluid, walls]) if len(walls) else fluid
    kind = np.concatenate([np.full(len(fluid), FLUID, np.int8), np.full(len(walls), WALL, np.int8)])
    ids = first_id + np.arange(len(x), dtype=np.int64)
    return ids, kind, x
