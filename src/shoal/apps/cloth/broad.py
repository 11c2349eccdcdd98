"""The broad phase: which primitive pairs can come close within a collision window.

A vertex's trajectory in a window is piecewise linear between its events, so the box of its
positions at the events bounds it all (the *swept box*); a triangle's or an edge's swept box
bounds its vertices'. Two primitives whose swept boxes, each grown by half a margin, do not
overlap stay farther apart than the margin for the whole window: no pair that comes within the
first layer's thickness is ever missed, which the narrow phase (:mod:`.acm`) relies on.

The boxes go into a uniform grid hashed by sorting (the brief's simplification of the paper's
voxel library and 26-DOP hierarchies, §IV): each box lists the cells it covers, and a pair is
reported once, in the cell holding the low corner of the two boxes' overlap. The result is
sorted, so it does not depend on the order of the search: the same window gives the same
pairs in the same order whatever computed it.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .contact import EDGE_EDGE, EDGE_OBSTACLE, FACE_OBSTACLE, VERTEX_FACE, VERTEX_OBSTACLE

_SHIFT = 30  # a pair's key: kind << 60 | first << 30 | second (ids below 2³⁰, kinds below 8)
_CELLS_PER_SIDE = 16  # the largest box spans at most this many cells along an axis
_DENSE_CELLS_PER_BOX = 16  # a dense block of cells is used up to this many cells per box searched


def pair_keys(kind: int, first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """The keys of pairs ``(kind, first, second)``: sorted keys are the canonical order (all
    vertex–face pairs by vertex then triangle, then edge–edge pairs by their edges, then the
    vertex–, edge– and face–obstacle pairs by primitive then obstacle).

    Parameters
    ----------
    kind : int
        :data:`~.contact.VERTEX_FACE` (first: a vertex, second: a triangle),
        :data:`~.contact.EDGE_EDGE` (two edges, first < second), or
        :data:`~.contact.VERTEX_OBSTACLE`, :data:`~.contact.EDGE_OBSTACLE`,
        :data:`~.contact.FACE_OBSTACLE` (a vertex, an edge or a triangle; an obstacle).
    first, second : ndarray of int
        The pairs' primitives.
    """
    return (np.int64(kind) << np.int64(2 * _SHIFT)) | (np.asarray(first, np.int64) << np.int64(_SHIFT)) \
        | np.asarray(second, np.int64)


def split_keys(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(kind, first, second)`` of each key of :func:`pair_keys`.

    Parameters
    ----------
    keys : ndarray of int64
        Pair keys.
    """
    keys = np.asarray(keys, np.int64)
    low = (np.int64(1) << np.int64(_SHIFT)) - 1
    return keys >> np.int64(2 * _SHIFT), (keys >> np.int64(_SHIFT)) & low, keys & low


def swept_boxes(track: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each vertex's swept box over a window: the low and high corners of its positions at
    every event, shape (n, 3) each.

    Parameters
    ----------
    track : ndarray, shape (events, n, 3)
        Positions at the window's events (its first row the start, its last the end).
    """
    return track.min(axis=0), track.max(axis=0)


def candidate_pairs(low: np.ndarray, high: np.ndarray, triangles: np.ndarray, edges: np.ndarray,
                    margin: float) -> np.ndarray:
    """The keys (:func:`pair_keys`), sorted, of every vertex–face and edge–edge pair sharing no
    vertex whose swept boxes come within ``margin`` of each other.

    Parameters
    ----------
    low, high : ndarray, shape (n, 3)
        Each vertex's swept box (:func:`swept_boxes`).
    triangles : ndarray, shape (m, 3)
        The faces.
    edges : ndarray, shape (e, 2)
        The edges.
    margin : float
        Boxes closer than this (in every axis) pair, m.
    """
    vertices, every = np.arange(len(low)), np.arange(max(len(triangles), len(edges)))
    return np.concatenate([
        primitive_pairs(VERTEX_FACE, low, high, vertices, vertices, triangles, every[:len(triangles)], margin),
        primitive_pairs(EDGE_EDGE, low, high, edges, every[:len(edges)], edges, every[:len(edges)], margin)])


def primitive_pairs(kind: int, low: np.ndarray, high: np.ndarray, queries: np.ndarray, query_ids: np.ndarray,
                    targets: np.ndarray, target_ids: np.ndarray, margin: float) -> np.ndarray:
    """The keys, sorted, of the pairs of a query and a target primitive sharing no vertex whose
    swept boxes come within ``margin``: vertex–face pairs (queries vertices, targets triangles),
    edge–edge pairs (queries and targets edges; two sets of distinct edges, or one set met with
    itself when they are the same), or any other two kinds of primitive under another kind
    (:mod:`.crossings` meets edges with triangles). What is found is every overlap of the boxes, whatever
    the subset searched, so subsets that split the primitives find, together, what the whole
    finds.

    Parameters
    ----------
    kind : int
        :data:`~.contact.VERTEX_FACE`, :data:`~.contact.EDGE_EDGE`, or another kind below 8.
    low, high : ndarray, shape (n, 3)
        Swept boxes of the vertices the primitives are rows of.
    queries, targets : ndarray of int
        The primitives, as vertex indices (a vertex: a 1D array of them) into ``low``.
    query_ids, target_ids : ndarray of int
        The primitives' global ids, which the keys hold.
    margin : float
        m.
    """
    if not len(query_ids) or not len(target_ids):
        return np.zeros(0, np.int64)
    queries = np.asarray(queries, np.int64).reshape(len(query_ids), -1)
    targets = np.asarray(targets, np.int64).reshape(len(target_ids), -1)
    half = 0.5 * margin
    ql, qh = _boxes(low, high, queries, half)
    tl, th = _boxes(low, high, targets, half)
    cell = max(float(np.median(th - tl)), float((th - tl).max()) / _CELLS_PER_SIDE, 1e-12)
    origin = np.minimum(tl.min(axis=0), ql.min(axis=0))
    same = kind == EDGE_EDGE and np.array_equal(query_ids, target_ids)  # one set: each pair once
    found = _grid_pairs(ql, qh, queries, tl, th, targets, same, kind, origin, cell)
    _, q, t = split_keys(found)
    first, second = np.asarray(query_ids, np.int64)[q], np.asarray(target_ids, np.int64)[t]
    if kind == EDGE_EDGE:
        first, second = np.minimum(first, second), np.maximum(first, second)
    return np.sort(pair_keys(kind, first, second))


def obstacle_pairs(low: np.ndarray, high: np.ndarray, triangles: np.ndarray, edges: np.ndarray, ends: np.ndarray,
                   radius: np.ndarray, margin: float, ids: tuple[np.ndarray, ...] | None = None) -> np.ndarray:
    """The keys, sorted, of every vertex–, edge– and face–obstacle pair whose swept boxes come
    within ``margin``.

    Parameters
    ----------
    low, high : ndarray, shape (n, 3)
        Each vertex's swept box.
    triangles : ndarray, shape (m, 3)
        The faces.
    edges : ndarray, shape (e, 2)
        The edges.
    ends : ndarray, shape (events, obstacles, 2, 3)
        The obstacles' ends at the window's events.
    radius : ndarray
        The obstacles' radii, m.
    margin : float
        m.
    ids : tuple of three ndarray, optional
        The vertices to pair (indices into ``low``), and the global ids of those vertices, of
        the edges and of the triangles, which the keys hold (default: every vertex, and ids
        their positions).
    """
    if ids is None:
        ids = (np.arange(len(low)), np.arange(len(low)), np.arange(len(edges)), np.arange(len(triangles)))
    vertices, vertex_ids, edge_ids, triangle_ids = ids
    keys = [np.zeros(0, np.int64)]
    primitives = ((VERTEX_OBSTACLE, low[vertices], high[vertices], vertex_ids),
                  (EDGE_OBSTACLE, low[edges].min(axis=1, initial=np.inf), high[edges].max(axis=1, initial=-np.inf),
                   edge_ids),
                  (FACE_OBSTACLE, low[triangles].min(axis=1, initial=np.inf),
                   high[triangles].max(axis=1, initial=-np.inf), triangle_ids))
    for o in range(ends.shape[1]):
        grow = radius[o] + margin
        olow, ohigh = ends[:, o].min(axis=(0, 1)) - grow, ends[:, o].max(axis=(0, 1)) + grow
        for kind, plow, phigh, pids in primitives:
            near = np.flatnonzero(np.all((plow <= ohigh) & (phigh >= olow), axis=1))
            keys.append(pair_keys(kind, np.asarray(pids, np.int64)[near], np.full(len(near), o)))
    return np.sort(np.concatenate(keys))


@nb.njit(cache=True, nogil=True)
def _boxes(low, high, rows, half):
    """The boxes of primitives (rows of vertex indices) over their vertices' boxes, grown by
    ``half`` on every side (one pass, where NumPy's gathers and reductions took three)."""
    lo = np.empty((rows.shape[0], 3))
    hi = np.empty((rows.shape[0], 3))
    for i in range(rows.shape[0]):
        for k in range(3):
            a, b = low[rows[i, 0], k], high[rows[i, 0], k]
            for j in range(1, rows.shape[1]):
                a = min(a, low[rows[i, j], k])
                b = max(b, high[rows[i, j], k])
            lo[i, k] = a - half
            hi[i, k] = b + half
    return lo, hi


@nb.njit(cache=True, nogil=True)
def _cells(lo, hi, origin, cell):
    """The integer cell range ``[a, b]`` per axis that box ``lo..hi`` covers."""
    a = np.empty(3, np.int64)
    b = np.empty(3, np.int64)
    for k in range(3):
        a[k] = int((lo[k] - origin[k]) // cell)
        b[k] = int((hi[k] - origin[k]) // cell)
    return a, b


@nb.njit(cache=True, nogil=True)
def _cell_key(i, j, k):
    return (i << 42) | (j << 21) | k


@nb.njit(cache=True, nogil=True)
def _grid(lo, hi, origin, cell):
    """Every (cell key, box) the boxes cover, sorted by cell key."""
    count = 0
    for i in range(lo.shape[0]):
        a, b = _cells(lo[i], hi[i], origin, cell)
        count += (b[0] - a[0] + 1) * (b[1] - a[1] + 1) * (b[2] - a[2] + 1)
    keys = np.empty(count, np.int64)
    ids = np.empty(count, np.int64)
    at = 0
    for i in range(lo.shape[0]):
        a, b = _cells(lo[i], hi[i], origin, cell)
        for x in range(a[0], b[0] + 1):
            for y in range(a[1], b[1] + 1):
                for z in range(a[2], b[2] + 1):
                    keys[at] = _cell_key(x, y, z)
                    ids[at] = i
                    at += 1
    order = np.argsort(keys, kind="mergesort")
    return keys[order], ids[order]


@nb.njit(cache=True, nogil=True)
def _dense_grid(lo, hi, origin, cell, dims):
    """The boxes by cell of a ``dims`` block of cells: box ``ids[start[c]:start[c + 1]]`` cover
    cell ``c`` (``(x dims[1] + y) dims[2] + z``), in box order, as :func:`_grid` lists them (a
    counting sort: no sort of the entries)."""
    start = np.zeros(dims[0] * dims[1] * dims[2] + 1, np.int64)
    for i in range(lo.shape[0]):
        a, b = _cells(lo[i], hi[i], origin, cell)
        for x in range(a[0], b[0] + 1):
            for y in range(a[1], b[1] + 1):
                for z in range(a[2], b[2] + 1):
                    start[(x * dims[1] + y) * dims[2] + z + 1] += 1
    for c in range(1, len(start)):
        start[c] += start[c - 1]
    ids = np.empty(start[-1], np.int64)
    fill = start[:-1].copy()
    for i in range(lo.shape[0]):
        a, b = _cells(lo[i], hi[i], origin, cell)
        for x in range(a[0], b[0] + 1):
            for y in range(a[1], b[1] + 1):
                for z in range(a[2], b[2] + 1):
                    c = (x * dims[1] + y) * dims[2] + z
                    ids[fill[c]] = i
                    fill[c] += 1
    return start, ids


@nb.njit(cache=True, nogil=True)
def _overlap_here(alo, ahi, blo, bhi, origin, cell, x, y, z):
    """Whether boxes a and b overlap, and cell (x, y, z) holds the low corner of their
    overlap (so each overlapping pair is reported in exactly one cell)."""
    for k in range(3):
        if alo[k] > bhi[k] or blo[k] > ahi[k]:
            return False
    c0 = int((max(alo[0], blo[0]) - origin[0]) // cell)
    c1 = int((max(alo[1], blo[1]) - origin[1]) // cell)
    c2 = int((max(alo[2], blo[2]) - origin[2]) // cell)
    return c0 == x and c1 == y and c2 == z


@nb.njit(cache=True, nogil=True)
def _grid_pairs(qlo, qhi, queries, tlo, thi, targets, same, kind, origin, cell):
    """Keys of the pairs (query, target) whose boxes overlap and that share no vertex (each
    primitive a row of its vertices); with ``same``, queries and targets are one set and each
    pair is reported once, the lower first. The targets go in a dense block of cells where it
    stays within a few cells per box (a counting sort), else in a list of cells sorted by key
    (a far-flung set of boxes would need a block too big to hold): the same pairs either way."""
    dims = np.empty(3, np.int64)
    for k in range(3):
        dims[k] = int((max(qhi[:, k].max(), thi[:, k].max()) - origin[k]) // cell) + 1
    dense = dims[0] * dims[1] * dims[2] <= _DENSE_CELLS_PER_BOX * (tlo.shape[0] + qlo.shape[0]) + 4096
    if dense:
        start, ids = _dense_grid(tlo, thi, origin, cell, dims)
        keys = np.zeros(0, np.int64)
    else:
        keys, ids = _grid(tlo, thi, origin, cell)
        start = np.zeros(0, np.int64)
    out = np.empty(64, np.int64)
    found = 0
    for q in range(qlo.shape[0]):
        a, b = _cells(qlo[q], qhi[q], origin, cell)
        for x in range(a[0], b[0] + 1):
            for y in range(a[1], b[1] + 1):
                for z in range(a[2], b[2] + 1):
                    if dense:
                        c = (x * dims[1] + y) * dims[2] + z
                        first, stop = start[c], start[c + 1]
                    else:
                        key = _cell_key(x, y, z)
                        first = np.searchsorted(keys, key)
                        stop = first
                        while stop < len(keys) and keys[stop] == key:
                            stop += 1
                    for at in range(first, stop):
                        t = ids[at]
                        if (same and t <= q) or _share(queries[q], targets[t]):
                            continue
                        if not _overlap_here(qlo[q], qhi[q], tlo[t], thi[t], origin, cell, x, y, z):
                            continue
                        if found == len(out):
                            out = np.concatenate((out, np.empty(len(out), np.int64)))
                        out[found] = (np.int64(kind) << 2 * _SHIFT) | (np.int64(q) << _SHIFT) | t
                        found += 1
    return out[:found]


@nb.njit(cache=True, nogil=True)
def _share(a, b):
    """Whether two primitives (rows of vertices) share a vertex."""
    for i in a:
        for j in b:
            if i == j:
                return True
    return False
