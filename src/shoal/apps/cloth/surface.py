"""The cloth's triangle surface: its rest shape, its stencils, and where it comes from.

A :class:`Surface` is an oriented manifold triangle mesh in 3D: vertices at rest and
triangles, each a *stretch stencil* (the contact-mechanics paper §III: constant-strain
triangles), and every interior edge with the two triangles across it a *bend stencil*
(discrete shells). Stencils carry global indices, stretch stencils first in triangle order,
then bend stencils in the order of their edges' sorted vertex pairs: a vertex's force is the
sum of its stencils' contributions in that order, whatever the partition (§III).

Sources: :func:`sheet` (an ``n x n`` grid with alternating diagonals, as the peers' drape
scenes) and :func:`read_obj` (any manifold, consistently oriented triangle or polygon mesh;
polygons are cut into fans).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from ...errors import ShoalError

#: A triangle whose area is below this fraction of its longest edge squared is degenerate.
DEGENERATE = 1e-10


@dataclass(frozen=True, eq=False)
class Surface:
    """An oriented manifold triangle mesh at rest (checked on creation).

    Parameters
    ----------
    vertices : ndarray, shape (n, 3)
        Rest positions, m.
    triangles : ndarray, shape (m, 3)
        Vertex indices, counter-clockwise seen from the side the normals point to.

    Raises
    ------
    ShoalError
        If a triangle is degenerate or repeats a vertex, an edge has more than two triangles
        (not a manifold), two triangles across an edge disagree on its direction (not
        consistently oriented), or an index is out of range.
    """

    vertices: np.ndarray
    triangles: np.ndarray

    def __post_init__(self):
        v = np.array(self.vertices, dtype=np.float64)
        t = np.asarray(self.triangles)
        if v.ndim != 2 or v.shape[1] != 3 or not len(v):
            raise ShoalError(f"cloth vertices must have shape (vertices, 3), got {v.shape}")
        if not np.isfinite(v).all():
            raise ShoalError(f"cloth vertex {int(np.flatnonzero(~np.isfinite(v).all(axis=1))[0])} is not finite")
        if t.ndim != 2 or t.shape[1] != 3 or not len(t) or not np.issubdtype(t.dtype, np.integer):
            raise ShoalError(f"cloth triangles must be integer vertex indices of shape (triangles, 3), got "
                             f"{t.shape} of {t.dtype}")
        t = np.array(t, dtype=np.int64)
        if (t < 0).any() or (t >= len(v)).any():
            k = int(np.flatnonzero(((t < 0) | (t >= len(v))).any(axis=1))[0])
            raise ShoalError(f"triangle {k} names a vertex outside 0..{len(v) - 1}: {t[k].tolist()}")
        s = np.sort(t, axis=1)
        if (s[:, 1:] == s[:, :-1]).any():
            k = int(np.flatnonzero((s[:, 1:] == s[:, :-1]).any(axis=1))[0])
            raise ShoalError(f"triangle {k} repeats a vertex: {t[k].tolist()}")
        a, b, c = v[t[:, 0]], v[t[:, 1]], v[t[:, 2]]
        area2 = np.linalg.norm(np.cross(b - a, c - a), axis=1)
        longest = np.max([np.sum((b - a) ** 2, axis=1), np.sum((c - b) ** 2, axis=1),
                          np.sum((a - c) ** 2, axis=1)], axis=0)
        flat = area2 <= 2 * DEGENERATE * longest
        if flat.any():
            k = int(np.flatnonzero(flat)[0])
            raise ShoalError(f"triangle {k} ({t[k].tolist()}) is degenerate: its area is "
                             f"{0.5 * area2[k]:.3g} m² for edges up to {np.sqrt(longest[k]):.3g} m")
        v.flags.writeable = t.flags.writeable = False
        object.__setattr__(self, "vertices", v)
        object.__setattr__(self, "triangles", t)
        self._check_manifold()

    # ----- edges --------------------------------------------------------------------------------
    @cached_property
    def _half_edges(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every triangle's directed edges (a, b), its triangle and its opposite vertex, sorted by
        the undirected edge (min, max), then by direction."""
        t = self.triangles
        a = t.ravel()
        b = t[:, [1, 2, 0]].ravel()
        opposite = t[:, [2, 0, 1]].ravel()
        tri = np.repeat(np.arange(len(t), dtype=np.int64), 3)
        lo, hi = np.minimum(a, b), np.maximum(a, b)
        order = np.lexsort((a > b, hi, lo))
        return np.stack([a, b], axis=1)[order], tri[order], opposite[order]

    def _check_manifold(self) -> None:
        ab, tri, _ = self._half_edges
        key = np.sort(ab, axis=1)
        new = np.concatenate([[True], (key[1:] != key[:-1]).any(axis=1)])
        starts = np.flatnonzero(new)
        counts = np.diff(np.append(starts, len(key)))
        if (counts > 2).any():
            k = starts[np.flatnonzero(counts > 2)[0]]
            raise ShoalError(f"the cloth is not a manifold: edge {key[k].tolist()} has {counts[counts > 2][0]} "
                             f"triangles ({sorted(tri[k:k + counts[counts > 2][0]].tolist())})")
        pairs = starts[counts == 2]
        same = (ab[pairs] == ab[pairs + 1]).all(axis=1)
        if same.any():
            k = pairs[np.flatnonzero(same)[0]]
            raise ShoalError(f"the cloth is not consistently oriented: triangles {int(tri[k])} and {int(tri[k + 1])} "
                             f"both run along edge {ab[k].tolist()} the same way")

    @cached_property
    def _twins(self) -> np.ndarray:
        """Where each interior edge's pair of half-edges starts in :attr:`_half_edges`."""
        key = np.sort(self._half_edges[0], axis=1)
        return np.flatnonzero((key[1:] == key[:-1]).all(axis=1))

    @cached_property
    def hinges(self) -> np.ndarray:
        """The bend stencils, shape (h, 4): per interior edge ``(x0, x1, x2, x3)``, the edge
        ``x0 -> x1`` as triangle ``(x0, x1, x2)`` runs along it, ``x3`` the opposite vertex of
        the triangle across it; in the order of the edges' sorted vertex pairs."""
        ab, _, opposite = self._half_edges
        twin = self._twins  # (the pair's first half-edge runs low -> high: its triangle is (x0, x1, x2))
        return np.stack([ab[twin, 0], ab[twin, 1], opposite[twin], opposite[twin + 1]], axis=1).astype(np.int64)

    @cached_property
    def hinge_triangles(self) -> np.ndarray:
        """The two triangles of every hinge, shape (h, 2): ``(x0, x1, x2)``'s, then ``(x1, x0, x3)``'s."""
        tri, twin = self._half_edges[1], self._twins
        return np.stack([tri[twin], tri[twin + 1]], axis=1).astype(np.int64)

    @cached_property
    def edges(self) -> np.ndarray:
        """Every undirected edge once, ``(low, high)``, sorted."""
        return np.unique(np.sort(self._half_edges[0], axis=1), axis=0)

    @property
    def stencils(self) -> int:
        """Stretch stencils (one per triangle) and bend stencils (one per interior edge)."""
        return len(self.triangles) + len(self.hinges)

    def areas(self) -> np.ndarray:
        """Every triangle's rest area, m²."""
        v, t = self.vertices, self.triangles
        return 0.5 * np.linalg.norm(np.cross(v[t[:, 1]] - v[t[:, 0]], v[t[:, 2]] - v[t[:, 0]]), axis=1)


def sheet(n: int, size: float = 1.0, height: float = 0.0, centre: tuple[float, float] = (0.0, 0.0)) -> Surface:
    """A flat square sheet of ``n x n`` vertices in the plane ``z = height``, its quads cut along
    alternating diagonals, normals up.

    Parameters
    ----------
    n : int
        Vertices along a side (at least 2): ``n²`` vertices, ``2 (n - 1)²`` triangles.
    size : float
        Side, m.
    height : float
        The sheet's z, m.
    centre : tuple of float
        The sheet's centre (x, y), m.

    Raises
    ------
    ShoalError
        If ``n`` is below 2 or ``size`` is not positive.
    """
    if int(n) != n or n < 2:
        raise ShoalError(f"a sheet needs at least 2 vertices along a side, got {n}")
    if not size > 0:
        raise ShoalError(f"a sheet's size must be positive, got {size}")
    g = np.linspace(-size / 2, size / 2, n)
    x, y = np.meshgrid(g + centre[0], g + centre[1], indexing="ij")
    vertices = np.stack([x.ravel(), y.ravel(), np.full(n * n, float(height))], axis=1)
    ids = np.arange(n * n).reshape(n, n)
    a, b, c, d = ids[:-1, :-1], ids[1:, :-1], ids[1:, 1:], ids[:-1, 1:]  # counter-clockwise seen from +z
    flip = ((np.arange(n - 1)[:, None] + np.arange(n - 1)[None, :]) % 2).astype(bool)
    first = np.where(flip[..., None], np.stack([a, b, d], -1), np.stack([a, b, c], -1))
    second = np.where(flip[..., None], np.stack([b, c, d], -1), np.stack([a, c, d], -1))
    return Surface(vertices, np.concatenate([first.reshape(-1, 3), second.reshape(-1, 3)]))


def read_obj(path: str | Path) -> Surface:
    """The surface of a Wavefront OBJ file: its ``v`` lines and ``f`` lines (polygons cut into
    fans from their first vertex; ``v/vt/vn`` indices and negative ones read; other lines
    ignored).

    Parameters
    ----------
    path : str or Path
        The file.

    Raises
    ------
    ShoalError
        If the file cannot be read, a line is malformed, or the surface is not a manifold,
        consistently oriented, with no degenerate triangle (see :class:`Surface`).
    """
    path = Path(path)
    try:
        lines = path.read_text().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ShoalError(f"cannot read the mesh {path}: {exc}") from None
    vertices, triangles = [], []
    for number, line in enumerate(lines, 1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        try:
            if words[0] == "v":
                vertices.append([float(w) for w in words[1:4]])
                if len(words) < 4:
                    raise ValueError("a vertex needs x, y and z")
            elif words[0] == "f":
                ids = [int(w.split("/")[0]) for w in words[1:]]
                if len(ids) < 3:
                    raise ValueError("a face needs at least 3 vertices")
                ids = [i - 1 if i > 0 else len(vertices) + i for i in ids]
                triangles += [[ids[0], ids[k], ids[k + 1]] for k in range(1, len(ids) - 1)]
        except ValueError as exc:
            raise ShoalError(f"{path}, line {number}: {exc}: {line.strip()!r}") from None
    if not vertices or not triangles:
        raise ShoalError(f"{path} holds no {'vertex' if not vertices else 'face'}")
    return Surface(np.array(vertices), np.array(triangles, dtype=np.int64))
