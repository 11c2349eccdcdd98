"""Space-filling curve orders over a box of integer points in 2D and 3D.

``hilbert_order`` follows a generalized Hilbert curve that works on any box, not only on
powers of two: the box is cut in halves along its long side, or into the three parts of the
Hilbert "U", always choosing even-sized parts so that the pieces join end to start.
Consecutive points are face neighbours except for at most one diagonal step in boxes with
odd sides. ``morton_order`` interleaves bits (Z order), which jumps but is cheap.
"""

from __future__ import annotations

import numpy as np


def _sign(v: int) -> int:
    return (v > 0) - (v < 0)


def _half(v: int) -> int:
    """Half of a signed length, rounded toward zero."""
    return int(v / 2)


def _walk2d(x, y, ax, ay, bx, by, out):
    """Cover the rectangle spanned by major axis (ax, ay) and minor axis (bx, by) from (x, y)."""
    w, h = abs(ax + ay), abs(bx + by)
    dax, day = _sign(ax), _sign(ay)
    dbx, dby = _sign(bx), _sign(by)
    if h == 1:  # a single row
        for _ in range(w):
            out.append((x, y))
            x, y = x + dax, y + day
        return
    if w == 1:  # a single column
        for _ in range(h):
            out.append((x, y))
            x, y = x + dbx, y + dby
        return
    ax2, ay2 = _half(ax), _half(ay)
    bx2, by2 = _half(bx), _half(by)
    w2, h2 = abs(ax2 + ay2), abs(bx2 + by2)
    if 2 * w > 3 * h:
        # Long and thin: two halves along the major axis; keep the first half even.
        if w2 % 2 and w > 2:
            ax2, ay2 = ax2 + dax, ay2 + day
        _walk2d(x, y, ax2, ay2, bx, by, out)
        _walk2d(x + ax2, y + ay2, ax - ax2, ay - ay2, bx, by, out)
        return
    # Hilbert "U": up the first column block, across the top, back down the other side.
    if h2 % 2 and h > 2:
        bx2, by2 = bx2 + dbx, by2 + dby
    _walk2d(x, y, bx2, by2, ax2, ay2, out)
    _walk2d(x + bx2, y + by2, ax, ay, bx - bx2, by - by2, out)
    _walk2d(
        x + (ax - dax) + (bx2 - dbx),
        y + (ay - day) + (by2 - dby),
        -bx2, -by2, -(ax - ax2), -(ay - ay2), out,
    )


def _walk3d(p, a, b, c, out):
    """Cover the box spanned by axes a (major), b, c from corner p (all 3-vectors)."""
    w, h, d = (abs(sum(v)) for v in (a, b, c))
    da, db, dc = (tuple(_sign(t) for t in v) for v in (a, b, c))

    def add(u, v, k=1):
        return tuple(ui + k * vi for ui, vi in zip(u, v, strict=True))

    def line(start, step, n):
        q = start
        for _ in range(n):
            out.append(q)
            q = add(q, step)

    if h == 1 and d == 1:
        return line(p, da, w)
    if w == 1 and d == 1:
        return line(p, db, h)
    if w == 1 and h == 1:
        return line(p, dc, d)

    a2 = tuple(_half(t) for t in a)
    b2 = tuple(_half(t) for t in b)
    c2 = tuple(_half(t) for t in c)
    if abs(sum(a2)) % 2 and w > 2:
        a2 = add(a2, da)
    if abs(sum(b2)) % 2 and h > 2:
        b2 = add(b2, db)
    if abs(sum(c2)) % 2 and d > 2:
        c2 = add(c2, dc)
    neg = lambda v: tuple(-t for t in v)  # noqa: E731
    rest = lambda v, v2: add(v, v2, -1)  # noqa: E731

    if 2 * w > 3 * h and 2 * w > 3 * d:
        # Much longer than wide and deep: two halves along the major axis.
        _walk3d(p, a2, b, c, out)
        _walk3d(add(p, a2), rest(a, a2), b, c, out)
    elif 3 * h > 4 * d:
        # Flat along c: the 2D "U" in the (a, b) plane, each part carrying the full depth.
        _walk3d(p, b2, c, a2, out)
        _walk3d(add(p, b2), a, rest(b, b2), c, out)
        q = add(add(p, rest(a, da)), rest(b2, db))
        _walk3d(q, neg(b2), c, neg(rest(a, a2)), out)
    elif 3 * d > 4 * h:
        # Flat along b: the "U" in the (a, c) plane.
        _walk3d(p, c2, a2, b, out)
        _walk3d(add(p, c2), a, b, rest(c, c2), out)
        q = add(add(p, rest(a, da)), rest(c2, dc))
        _walk3d(q, neg(c2), neg(rest(a, a2)), b, out)
    else:
        # Cube-like: the five-part 3D Hilbert cell.
        _walk3d(p, b2, c2, a2, out)
        _walk3d(add(p, b2), c, a2, rest(b, b2), out)
        q = add(add(p, rest(b2, db)), rest(c, dc))
        _walk3d(q, a, neg(b2), neg(rest(c, c2)), out)
        q = add(add(add(p, rest(a, da)), b2), rest(c, dc))
        _walk3d(q, neg(c), neg(rest(a, a2)), rest(b, b2), out)
        q = add(add(p, rest(a, da)), rest(b2, db))
        _walk3d(q, neg(b2), c2, neg(rest(a, a2)), out)


def hilbert_points(shape: tuple[int, ...]) -> np.ndarray:
    """Integer points of a box in generalized Hilbert order, as an (N, ndim) array."""
    out: list = []
    if len(shape) == 1:
        return np.arange(shape[0]).reshape(-1, 1)
    if len(shape) == 2:
        w, h = shape
        if w >= h:
            _walk2d(0, 0, w, 0, 0, h, out)
        else:
            _walk2d(0, 0, 0, h, w, 0, out)
    elif len(shape) == 3:
        w, h, d = shape
        if w >= h and w >= d:
            _walk3d((0, 0, 0), (w, 0, 0), (0, h, 0), (0, 0, d), out)
        elif h >= w and h >= d:
            _walk3d((0, 0, 0), (0, h, 0), (w, 0, 0), (0, 0, d), out)
        else:
            _walk3d((0, 0, 0), (0, 0, d), (w, 0, 0), (0, h, 0), out)
    else:
        raise ValueError(f"Hilbert order supports 1 to 3 dimensions, got {len(shape)}")
    return np.asarray(out, dtype=np.int64)


def hilbert_order(shape: tuple[int, ...]) -> np.ndarray:
    """Row-major (C order) flat indices of a box's points, listed along the Hilbert curve."""
    pts = hilbert_points(shape)
    return np.ravel_multi_index(tuple(pts.T), shape).astype(np.int64)


def morton_order(shape: tuple[int, ...]) -> np.ndarray:
    """Row-major flat indices of a box's points sorted by interleaved-bit (Z) key."""
    idx = np.indices(shape).reshape(len(shape), -1).astype(np.uint64)
    bits = max(int(max(shape) - 1).bit_length(), 1)
    key = np.zeros(idx.shape[1], dtype=np.uint64)
    for bit in range(bits):
        for axis in range(len(shape)):
            b = (idx[axis] >> np.uint64(bit)) & np.uint64(1)
            key |= b << np.uint64(bit * len(shape) + axis)
    return np.argsort(key, kind="stable").astype(np.int64)


def hilbert_keys(cells: np.ndarray, bits: int) -> np.ndarray:
    """Index along the Hilbert curve of a 2D or 3D cube of side ``2**bits`` of integer points.

    Skilling's transform ("Programming the Hilbert curve", AIP Conf. Proc. 707, 2004),
    vectorised: the coordinates are turned into the curve's transposed index, whose bits,
    interleaved most significant first, are the index.

    Parameters
    ----------
    cells : ndarray of int, shape (n, ndim)
        Points with every coordinate in ``0 .. 2**bits - 1`` (``ndim`` 2 or 3).
    bits : int
        Bits per coordinate; ``ndim * bits`` must not exceed 64.

    Returns
    -------
    ndarray of uint64, shape (n,)
        The position of every point along the curve; points next to each other on the curve
        are face neighbours.
    """
    cells = np.asarray(cells)
    ndim = cells.shape[1]
    if ndim * bits > 64:
        raise ValueError(f"{ndim} coordinates of {bits} bits do not fit a 64-bit key")
    x = [cells[:, i].astype(np.uint64) for i in range(ndim)]
    one = np.uint64(1)
    q = np.uint64(1) << np.uint64(bits - 1)
    while q > one:  # undo the excess work of the inverse transform: rotate and reflect
        p = q - one
        for i in range(ndim):
            hit = (x[i] & q) != 0
            t = np.where(hit, np.uint64(0), (x[0] ^ x[i]) & p)
            x[0] = np.where(hit, x[0] ^ p, x[0] ^ t)
            x[i] = x[i] ^ t
        q >>= one
    for i in range(1, ndim):  # Gray encode
        x[i] = x[i] ^ x[i - 1]
    t = np.zeros(len(cells), dtype=np.uint64)
    q = np.uint64(1) << np.uint64(bits - 1)
    while q > one:
        t = np.where((x[ndim - 1] & q) != 0, t ^ (q - one), t)
        q >>= one
    key = np.zeros(len(cells), dtype=np.uint64)
    for b in range(bits - 1, -1, -1):
        for i in range(ndim):
            key = (key << one) | (((x[i] ^ t) >> np.uint64(b)) & one)
    return key


def morton_keys(cells: np.ndarray, bits: int) -> np.ndarray:
    """Interleaved-bit (Z order) key of the integer points ``cells`` ``(n, ndim)``, each
    coordinate in ``0 .. 2**bits - 1`` (``ndim * bits`` at most 64), as :func:`morton_order` keys a box."""
    cells = np.asarray(cells)
    ndim = cells.shape[1]
    if ndim * bits > 64:
        raise ValueError(f"{ndim} coordinates of {bits} bits do not fit a 64-bit key")
    key = np.zeros(len(cells), dtype=np.uint64)
    for bit in range(bits):
        for axis in range(ndim):
            b = (cells[:, axis].astype(np.uint64) >> np.uint64(bit)) & np.uint64(1)
            key |= b << np.uint64(bit * ndim + axis)
    return key


def point_order(points: np.ndarray, curve: str = "hilbert", bits: int = 16) -> np.ndarray:
    """Indices of scattered points (a mesh partition's part centroids, say) along a space-filling curve.

    The points' bounding box, scaled alike on every axis so that the curve is not stretched,
    is cut into a cube of ``2**bits`` cells per axis; points are ordered by the curve's index of
    their cell, and points in one cell by their index.

    Parameters
    ----------
    points : ndarray of float, shape (n, ndim)
        Finite coordinates, ``ndim`` 2 or 3.
    curve : {"hilbert", "morton"}
        Which curve.
    bits : int
        Cells per axis as a power of two (16: 65,536).

    Returns
    -------
    ndarray of int64, shape (n,)
        The point indices in curve order.
    """
    points = np.asarray(points, dtype=np.float64)
    keys = {"hilbert": hilbert_keys, "morton": morton_keys}
    if curve not in keys:
        raise ValueError(f"unknown curve {curve!r}; known: hilbert, morton")
    lo = points.min(axis=0) if len(points) else np.zeros(points.shape[1])
    extent = float((points.max(axis=0) - lo).max()) if len(points) else 0.0
    side = 1 << bits
    scaled = (points - lo) / extent * side if extent > 0 else np.zeros_like(points)
    cells = np.minimum(scaled.astype(np.int64), side - 1)
    return np.lexsort((np.arange(len(points)), keys[curve](cells, bits))).astype(np.int64)
