"""Where the cloth passes through itself: edges crossing triangles, counted at a window's end.

The nested layers keep every pair apart, so the cloth of a kept window crosses itself nowhere;
this count is the check that does not trust them, logged for every window (the tests' own,
independent check is ``ipctk``'s). An edge and a triangle sharing no vertex cross where the
segment meets the triangle (Möller–Trumbore). Two triangles that intersect, and are not
coplanar, have an edge of one crossing the other, so a count of zero means no triangle meets
another (a positive least gap rules out the coplanar case).
"""

from __future__ import annotations

import numpy as np

from .broad import primitive_pairs, split_keys

EDGE_FACE = 5  # the kind of an (edge, triangle) pair in the search's keys only: never a contact pair


def segments_cross(corners: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Whether each segment from ``a`` to ``b`` meets its triangle (Möller–Trumbore on the whole
    segment; a segment in its triangle's plane does not count).

    Parameters
    ----------
    corners : ndarray, shape (m, 3, 3)
        Each triangle's corners, m.
    a, b : ndarray, shape (m, 3) or (3,)
        The segments' ends (one segment for every triangle, or one for all), m.
    """
    d = np.broadcast_to(b - a, (len(corners), 3))
    e1, e2 = corners[:, 1] - corners[:, 0], corners[:, 2] - corners[:, 0]
    h = np.cross(d, e2)
    det = np.einsum("ij,ij->i", e1, h)
    ok = np.abs(det) > 1e-300
    inv = np.where(ok, 1.0 / np.where(ok, det, 1.0), 0.0)
    s = a - corners[:, 0]
    u = inv * np.einsum("ij,ij->i", s, h)
    q = np.cross(s, e1)
    v = inv * np.einsum("ij,ij->i", q, d)
    t = inv * np.einsum("ij,ij->i", e2, q)
    return ok & (u >= 0) & (v >= 0) & (u + v <= 1) & (t >= 0) & (t <= 1)


def crossings(x: np.ndarray, edges: np.ndarray, triangles: np.ndarray) -> int:
    """How many of the (edge, triangle) pairs sharing no vertex cross, at positions ``x``.

    Parameters
    ----------
    x : ndarray, shape (n, 3)
        Positions, m.
    edges, triangles : ndarray of int, shape (e, 2) and (m, 3)
        The edges and triangles to meet, as rows of indices into ``x`` (any subsets: every
        pair of one edge of ``edges`` and one triangle of ``triangles`` is tried once).
    """
    if not len(edges) or not len(triangles):
        return 0
    keys = primitive_pairs(EDGE_FACE, x, x, edges, np.arange(len(edges)), triangles, np.arange(len(triangles)), 0.0)
    _, e, t = split_keys(keys)
    ends = x[edges[e]]
    return int(segments_cross(x[triangles[t]], ends[:, 0], ends[:, 1]).sum())
