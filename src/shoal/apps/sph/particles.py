"""Particles that live in tiles: the per-tile store, halos, and migration.

A tile holds the particles whose cell lies in its box, as a dict of arrays sorted by
(global cell, particle id). That order never depends on the tiling, and the kernels sum
over neighbours cell by cell in that order, so every sum is made in one fixed global order
whatever the tiling, placement or worker count.
"""

from __future__ import annotations

import numpy as np

from ...tiling import Tiling

# Per-particle arrays a tile carries (positions, velocities and cell coordinates are (n, ndim)).
# ``cell`` is set from ``x`` whenever particles move, so halos and migration never recompute it.
FIELDS = ("id", "kind", "x", "v", "rho", "e", "m", "cell")
FLUID, WALL = 0, 1


def empty(ndim: int) -> dict[str, np.ndarray]:
    return {
        "id": np.empty(0, np.int64), "kind": np.empty(0, np.int8), "x": np.empty((0, ndim)),
        "v": np.empty((0, ndim)), "rho": np.empty(0), "e": np.empty(0), "m": np.empty(0),
        "cell": np.empty((0, ndim), np.int64),
    }


def take(p: dict, idx) -> dict:
    return {k: p[k][idx] for k in FIELDS}


def concat(parts: list[dict], ndim: int) -> dict:
    parts = [q for q in parts if len(q["id"])]
    if not parts:
        return empty(ndim)
    return {k: np.concatenate([q[k] for q in parts]) for k in FIELDS}


class CellGrid:
    """The SPH cell grid (cell side >= kernel support) laid over the domain box."""

    def __init__(self, origin, size, support: float):
        self.origin = np.asarray(origin, dtype=np.float64)
        self.size = np.asarray(size, dtype=np.float64)
        self.counts = np.maximum((self.size / support).astype(np.int64), 1)
        self.cell = self.size / self.counts  # >= support along every axis
        self.ndim = len(self.counts)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(int(c) for c in self.counts)

    def index(self, x: np.ndarray) -> np.ndarray:
        """Integer cell coordinates (n, ndim) of positions; may lie outside the grid."""
        return np.floor((x - self.origin) / self.cell).astype(np.int64)

    def inside(self, idx: np.ndarray) -> np.ndarray:
        return np.all((idx >= 0) & (idx < self.counts), axis=1)

    def flat(self, idx: np.ndarray) -> np.ndarray:
        return np.ravel_multi_index(tuple(idx.T), self.shape)


def locate(p: dict, grid: CellGrid) -> dict:
    """Set every particle's cell from its position."""
    p["cell"] = grid.index(p["x"])
    return p


def sort_by_cell(p: dict, grid: CellGrid) -> dict:
    """Particles ordered by (global cell, id): the fixed global summation order."""
    keys = [p["id"]] + [p["cell"][:, a] for a in reversed(range(grid.ndim))]
    return take(p, np.lexsort(keys))


def in_box(p: dict, grid: CellGrid, lo, hi) -> np.ndarray:
    """Mask of particles whose cell lies in the half-open cell box [lo, hi)."""
    c = p["cell"]
    mask = (c[:, 0] >= lo[0]) & (c[:, 0] < hi[0])
    for a in range(1, grid.ndim):
        mask &= (c[:, a] >= lo[a]) & (c[:, a] < hi[a])
    return mask


def halo_of(p: dict, grid: CellGrid, tiling: Tiling, dst: int, width: int = 1) -> dict:
    """The particles a neighbour ``dst`` needs: those in the ring of cells around its box."""
    lo, hi = tiling.lo[dst] - width, tiling.hi[dst] + width
    return take(p, in_box(p, grid, lo, hi))


def emigrants_to(p: dict, grid: CellGrid, tiling: Tiling, dst: int) -> dict:
    """The particles that now lie in ``dst``'s cells."""
    return take(p, in_box(p, grid, tiling.lo[dst], tiling.hi[dst]))


def settle(p: dict, grid: CellGrid, tiling: Tiling, tile: int, immigrants: list[dict]) -> dict:
    """Keep the tile's own particles, take in immigrants, restore the (cell, id) order."""
    mine = take(p, in_box(p, grid, tiling.lo[tile], tiling.hi[tile]))
    return sort_by_cell(concat([mine, *immigrants], grid.ndim), grid)


def local_cells(cell: np.ndarray, lo, hi, width: int = 1):
    """Local cell coordinates, flat local index, and shape of the tile's box widened by ``width``.

    Local order is row-major over the widened box, which agrees with the global row-major
    order of cells.
    """
    shape = tuple(int(a) for a in (np.asarray(hi) - np.asarray(lo) + 2 * width))
    idx = cell - (np.asarray(lo) - width)
    flat = idx[:, 0].copy()
    for a in range(1, idx.shape[1]):
        flat = flat * shape[a] + idx[:, a]
    return idx, flat, shape


def merged_neighbourhood(own: dict, halos: list[dict], grid: CellGrid, lo, hi):
    """Own and halo particles in one array set sorted by (local cell, id), with cell starts.

    Returns (arrays, is_own mask in sorted order, local cell coordinates, cell_start array,
    local box shape).
    """
    allp = concat([own, *halos], grid.ndim)
    lidx, lcell, shape = local_cells(allp["cell"], lo, hi)
    order = np.lexsort((allp["id"], lcell))
    merged = take(allp, order)
    lcell = lcell[order]
    ncells = int(np.prod(shape))
    start = np.searchsorted(lcell, np.arange(ncells + 1)).astype(np.int64)
    is_own = order < len(own["id"])
    return merged, is_own, lidx[order], start, shape
