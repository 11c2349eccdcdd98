"""The split of a 2D or 3D cell grid into tiles.

A tiling is described by the cut positions (``edges``) along each axis; tile ``(i, j[, k])``
spans cells ``edges[0][i]:edges[0][i+1]`` and so on. Global tile ids are the row-major
(C order) flat index of the tile's grid position, so they depend only on the cut positions,
never on where a tile runs. A tiling is the ``"cartesian"`` kind of
:class:`~shoal.decomposition.Decomposition`.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import cached_property
from typing import ClassVar

import numpy as np

from .curves import hilbert_order, morton_order
from .errors import ShoalError


def _check_grid(grid) -> tuple[int, ...]:
    grid = tuple(int(n) for n in grid)
    if len(grid) not in (2, 3):
        raise ShoalError(f"grid must have 2 or 3 dimensions, got {len(grid)}: {grid}")
    if any(n <= 0 for n in grid):
        raise ShoalError(f"grid sizes must be positive, got {grid}")
    return grid


def _balanced_counts(grid: tuple[int, ...], ntiles: int) -> tuple[int, ...]:
    """Tiles per axis whose product is ``ntiles`` and whose tiles are closest to cubes."""
    best, best_score = None, None
    ndim = len(grid)

    def factorizations(n, k):
        if k == 1:
            yield (n,)
            return
        for f in range(1, n + 1):
            if n % f == 0:
                for rest in factorizations(n // f, k - 1):
                    yield (f, *rest)

    for counts in factorizations(ntiles, ndim):
        if any(c > n for c, n in zip(counts, grid, strict=True)):
            continue
        sides = [n / c for n, c in zip(grid, counts, strict=True)]
        score = max(sides) / min(sides)
        if best_score is None or score < best_score - 1e-12:
            best, best_score = counts, score
    if best is None:
        raise ShoalError(
            f"cannot split grid {grid} into exactly {ntiles} tiles: no factorization of "
            f"{ntiles} fits the grid; pick another count or give a tile shape"
        )
    return best


@dataclass(frozen=True, eq=False)
class Tiling:
    """Tiles of a cell grid, with neighbours, halos and curve orders.

    Parameters
    ----------
    grid : tuple of int
        Cells along each axis (2 or 3 axes).
    edges : tuple of ndarray
        Cut positions along each axis, starting at 0 and ending at ``grid[axis]``.
    halo : int
        Halo width in cells; must not exceed the smallest tile extent.
    """

    grid: tuple[int, ...]
    edges: tuple[np.ndarray, ...]
    halo: int = 1

    kind: ClassVar[str] = "cartesian"
    """The kind of decomposition (:mod:`shoal.decomposition`)."""
    geometry: ClassVar[frozenset[str]] = frozenset({"boxes", "order", "graph", "centroids"})
    """What placement policies may use: boxes (``lo``, ``hi``, ``counts``), curve orders
    (``hilbert``, ``morton``), the neighbour graph and the boxes' centres."""

    def __post_init__(self):
        if self.halo < 0:
            raise ShoalError(f"halo width must be >= 0, got {self.halo}")
        smallest = min(int(np.diff(e).min()) for e in self.edges)
        if self.halo > smallest:
            raise ShoalError(
                f"halo width {self.halo} exceeds the smallest tile extent {smallest}: "
                "use fewer, larger tiles or a narrower halo"
            )

    # ----- construction -------------------------------------------------------------------
    @classmethod
    def from_shape(cls, grid, tile_shape, halo: int = 1) -> Tiling:
        """Tiles of ``tile_shape`` cells; tiles on the high edges may be smaller.

        Parameters
        ----------
        grid : sequence of int
            Cells along each axis (2 or 3 axes, each positive).
        tile_shape : sequence of int
            Cells of a tile along each axis, each positive and at most the grid's size.
        halo : int
            Halo width in cells, at most the smallest tile extent.

        Raises
        ------
        ShoalError
            If the grid or the tile shape is not one of the above, or the halo is wider than a tile.
        """
        grid = _check_grid(grid)
        tile_shape = tuple(int(t) for t in tile_shape)
        if len(tile_shape) != len(grid):
            raise ShoalError(f"tile shape {tile_shape} has {len(tile_shape)} axes, grid has {len(grid)}")
        if any(t <= 0 for t in tile_shape):
            raise ShoalError(f"tile sizes must be positive, got {tile_shape}")
        if any(t > n for t, n in zip(tile_shape, grid, strict=True)):
            raise ShoalError(f"tile shape {tile_shape} is larger than the grid {grid}")
        edges = tuple(
            np.append(np.arange(0, n, t), n).astype(np.int64) for n, t in zip(grid, tile_shape, strict=True)
        )
        return cls(grid, edges, halo)

    @classmethod
    def from_counts(cls, grid, counts, halo: int = 1) -> Tiling:
        """``counts[axis]`` tiles along each axis, sizes differing by at most one cell.

        Parameters
        ----------
        grid : sequence of int
            Cells along each axis (2 or 3 axes, each positive).
        counts : sequence of int
            Tiles along each axis, each positive and at most the grid's size.
        halo : int
            Halo width in cells, at most the smallest tile extent.

        Raises
        ------
        ShoalError
            If the grid or the counts are not the above, or the halo is wider than a tile.
        """
        grid = _check_grid(grid)
        counts = tuple(int(c) for c in counts)
        if len(counts) != len(grid):
            raise ShoalError(f"tile counts {counts} have {len(counts)} axes, grid has {len(grid)}")
        if any(c <= 0 for c in counts):
            raise ShoalError(f"tile counts must be positive, got {counts}")
        for c, n in zip(counts, grid, strict=True):
            if c > n:
                raise ShoalError(f"more tiles than cells along an axis: {c} tiles for {n} cells")
        edges = tuple(
            (np.arange(c + 1, dtype=np.int64) * n) // c for n, c in zip(grid, counts, strict=True)
        )
        return cls(grid, edges, halo)

    @classmethod
    def from_count(cls, grid, ntiles: int, halo: int = 1) -> Tiling:
        """Exactly ``ntiles`` tiles, as close to square (cubic) as the grid allows: of the ways to
        write ``ntiles`` as a product of tiles per axis, the one whose tiles have the smallest
        ratio of longest to shortest side.

        Parameters
        ----------
        grid : sequence of int
            Cells along each axis (2 or 3 axes, each positive).
        ntiles : int
            Total tiles, between 1 and the number of cells.
        halo : int
            Halo width in cells, at most the smallest tile extent.

        Raises
        ------
        ShoalError
            If no product of ``ntiles`` fits the grid (a prime count larger than every axis,
            say), or a parameter is out of range.
        """
        grid = _check_grid(grid)
        ntiles = int(ntiles)
        if ntiles <= 0:
            raise ShoalError(f"number of tiles must be positive, got {ntiles}")
        cells = int(np.prod(grid))
        if ntiles > cells:
            raise ShoalError(f"more tiles than cells: {ntiles} tiles for {cells} cells of grid {grid}")
        return cls.from_counts(grid, _balanced_counts(grid, ntiles), halo)

    # ----- shape ---------------------------------------------------------------------------
    @property
    def ndim(self) -> int:
        """Axes of the grid: 2 or 3."""
        return len(self.grid)

    @cached_property
    def counts(self) -> tuple[int, ...]:
        """Tiles along each axis."""
        return tuple(len(e) - 1 for e in self.edges)

    @property
    def ntiles(self) -> int:
        """Number of tiles; tile ids run from 0 to ``ntiles - 1``."""
        return int(np.prod(self.counts))

    def tile_index(self, tile: int) -> tuple[int, ...]:
        """Grid position ``(i, j[, k])`` of a tile id."""
        return tuple(int(v) for v in np.unravel_index(tile, self.counts))

    def tile_id(self, index) -> int:
        """Tile id of a grid position ``(i, j[, k])``, the inverse of :meth:`tile_index`."""
        return int(np.ravel_multi_index(tuple(index), self.counts))

    @cached_property
    def lo(self) -> np.ndarray:
        """First cell of every tile, shape (ntiles, ndim)."""
        idx = np.indices(self.counts).reshape(self.ndim, -1)
        return np.stack([self.edges[a][idx[a]] for a in range(self.ndim)], axis=1)

    @cached_property
    def hi(self) -> np.ndarray:
        """One past the last cell of every tile, shape (ntiles, ndim)."""
        idx = np.indices(self.counts).reshape(self.ndim, -1)
        return np.stack([self.edges[a][idx[a] + 1] for a in range(self.ndim)], axis=1)

    @cached_property
    def cells(self) -> np.ndarray:
        """Cells in every tile."""
        return np.prod(self.hi - self.lo, axis=1)

    @cached_property
    def centroids(self) -> np.ndarray:
        """Centre of every tile's box in cell units, shape (ntiles, ndim), float64."""
        return (self.lo + self.hi) / 2.0

    def bounds(self, tile: int) -> tuple[tuple[int, int], ...]:
        """``(first, one past the last)`` global cell of a tile along each axis."""
        return tuple((int(a), int(b)) for a, b in zip(self.lo[tile], self.hi[tile], strict=True))

    def slices(self, tile: int) -> tuple[slice, ...]:
        """Slices of the global cell array covered by a tile."""
        return tuple(slice(int(a), int(b)) for a, b in zip(self.lo[tile], self.hi[tile], strict=True))

    def tile_of_cell(self, cell) -> int:
        """The tile holding a global cell index."""
        cell = tuple(int(c) for c in cell)
        for c, n in zip(cell, self.grid, strict=True):
            if not 0 <= c < n:
                raise ShoalError(f"cell {cell} is outside grid {self.grid}")
        index = [int(np.searchsorted(e, c, side="right") - 1) for e, c in zip(self.edges, cell, strict=True)]
        return self.tile_id(index)

    def owner_map(self) -> np.ndarray:
        """Array of the grid's shape giving the tile id of every cell."""
        out = np.empty(self.grid, dtype=np.int64)
        for t in range(self.ntiles):
            out[self.slices(t)] = t
        return out

    # ----- neighbours and halos ------------------------------------------------------------
    @cached_property
    def neighbours(self) -> tuple[np.ndarray, ...]:
        """Neighbours of every tile across faces, edges and corners (sorted tile ids)."""
        out = []
        offsets = [o for o in itertools.product((-1, 0, 1), repeat=self.ndim) if any(o)]
        for t in range(self.ntiles):
            idx = self.tile_index(t)
            nb = []
            for o in offsets:
                j = tuple(i + d for i, d in zip(idx, o, strict=True))
                if all(0 <= v < c for v, c in zip(j, self.counts, strict=True)):
                    nb.append(self.tile_id(j))
            out.append(np.array(sorted(nb), dtype=np.int64))
        return tuple(out)

    @cached_property
    def face_neighbours(self) -> tuple[np.ndarray, ...]:
        """Neighbours of every tile across faces only (sorted tile ids): what a stencil that
        reads no diagonal cell needs (2 per axis at most: 4 in 2D, 6 in 3D)."""
        out = []
        for t in range(self.ntiles):
            idx = self.tile_index(t)
            nb = []
            for axis in range(self.ndim):
                for d in (-1, 1):
                    j = list(idx)
                    j[axis] += d
                    if 0 <= j[axis] < self.counts[axis]:
                        nb.append(self.tile_id(j))
            out.append(np.array(sorted(nb), dtype=np.int64))
        return tuple(out)

    def stencil(self, kind: str) -> tuple[np.ndarray, ...]:
        """The tiles every tile reads from under a stencil ``kind``: ``"faces"``
        (:attr:`face_neighbours`) or ``"all"`` (:attr:`neighbours`: faces, edges and corners)."""
        if kind == "faces":
            return self.face_neighbours
        if kind == "all":
            return self.neighbours
        raise ShoalError(f"a Cartesian tiling has no stencil {kind!r}; known: faces, all")

    def neighbours_csr(self) -> tuple[np.ndarray, np.ndarray]:
        """:attr:`neighbours` in compressed rows ``(xadj, adjncy)``: tile ``t``'s neighbours are
        ``adjncy[xadj[t]:xadj[t + 1]]`` (int64)."""
        xadj = np.concatenate([[0], np.cumsum([len(n) for n in self.neighbours])]).astype(np.int64)
        adjncy = np.concatenate(self.neighbours).astype(np.int64) if xadj[-1] else np.zeros(0, np.int64)
        return xadj, adjncy

    def graph(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The neighbour graph ``(xadj, adjncy, weights)`` (:meth:`neighbours_csr`), each edge
        weighing the cells the two tiles read of each other's halos, both ways added (int64;
        0 for a halo of width 0)."""
        xadj, adjncy = self.neighbours_csr()
        src = np.repeat(np.arange(self.ntiles), np.diff(xadj))

        def read(dst, frm):  # cells of each `frm` tile in the matching `dst` tile's halo
            lo = np.maximum(self.lo[dst] - self.halo, self.lo[frm])
            hi = np.minimum(self.hi[dst] + self.halo, self.hi[frm])
            return np.prod(np.clip(hi - lo, 0, None), axis=1).astype(np.int64)

        return xadj, adjncy, read(src, adjncy) + read(adjncy, src)

    def halo_region(self, dst: int, src: int) -> tuple[slice, ...] | None:
        """Global-cell slices of ``src``'s cells that lie in ``dst``'s halo (None if none)."""
        h = self.halo
        region = []
        for a in range(self.ndim):
            lo = max(self.lo[dst][a] - h, self.lo[src][a])
            hi = min(self.hi[dst][a] + h, self.hi[src][a])
            if lo >= hi:
                return None
            region.append(slice(int(lo), int(hi)))
        return tuple(region)

    # ----- orders --------------------------------------------------------------------------
    @cached_property
    def hilbert(self) -> np.ndarray:
        """Tile ids along the generalized Hilbert curve over the tile grid."""
        return hilbert_order(self.counts)

    @cached_property
    def morton(self) -> np.ndarray:
        """Tile ids in Morton (Z) order over the tile grid."""
        return morton_order(self.counts)

    # ----- nesting -------------------------------------------------------------------------
    def coarsen(self, factor) -> Tiling:
        """A coarser tiling whose tiles are unions of ``factor`` fine tiles per axis.

        The last coarse tile along an axis takes the remainder when ``factor`` does not divide
        the fine count.
        """
        factor = (int(factor),) * self.ndim if np.isscalar(factor) else tuple(int(f) for f in factor)
        if len(factor) != self.ndim or any(f <= 0 for f in factor):
            raise ShoalError(f"coarsening factor must be positive per axis, got {factor}")
        edges = []
        for e, f in zip(self.edges, factor, strict=True):
            cut = e[::f]
            if cut[-1] != e[-1]:
                cut = np.append(cut, e[-1])
            edges.append(cut.astype(np.int64))
        return Tiling(self.grid, tuple(edges), min(self.halo, min(int(np.diff(x).min()) for x in edges)))

    def fine_to_coarse(self, coarse: Tiling) -> np.ndarray:
        """For each tile of this tiling, the tile of ``coarse`` that contains it.

        Raises if ``coarse`` does not nest this tiling (its cuts must be a subset of ours).
        """
        if coarse.grid != self.grid:
            raise ShoalError(f"tilings cover different grids: {self.grid} vs {coarse.grid}")
        for a, (fe, ce) in enumerate(zip(self.edges, coarse.edges, strict=True)):
            if not np.isin(ce, fe).all():
                raise ShoalError(f"coarse tiling does not nest the fine one along axis {a}")
        return np.array([coarse.tile_of_cell(self.lo[t]) for t in range(self.ntiles)], dtype=np.int64)

    # ----- serialisation -------------------------------------------------------------------
    def to_dict(self) -> dict:
        """JSON-ready dict of ``grid``, ``edges`` (lists) and ``halo``, as checkpoints store a
        tiling; :meth:`from_dict` reads it back."""
        return {"grid": list(self.grid), "edges": [e.tolist() for e in self.edges], "halo": self.halo}

    @classmethod
    def from_dict(cls, d: dict) -> Tiling:
        """The tiling :meth:`to_dict` wrote (keys ``grid``, ``edges``, ``halo``)."""
        return cls(tuple(d["grid"]), tuple(np.asarray(e, dtype=np.int64) for e in d["edges"]), int(d["halo"]))

    def __repr__(self) -> str:
        return f"Tiling(grid={self.grid}, counts={self.counts}, halo={self.halo})"
