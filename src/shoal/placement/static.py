"""Static placements: geometric boxes, strips, angular sectors, space-filling-curve chunks, Birdshot, and METIS.

Each works on any decomposition that offers the geometry it ``needs``
(:mod:`shoal.decomposition`). On a Cartesian tiling they use its boxes and curve orders; on a
decomposition without them (a mesh partition) ``geometric``, ``strips`` and ``sfc`` work on the
tiles' centroids, ``metis`` on the tile graph and ``birdshot`` on the count of tiles, while
``sectors`` needs boxes and refuses.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..cluster import Cluster
from ..curves import point_order
from ..decomposition import Decomposition
from ..errors import ShoalError
from ..quotas import node_quotas
from .metis import metis_parts
from .registry import NoParams, PlacementPolicy, check_needs, register


def _check_enough_tiles(tiling: Decomposition, cluster: Cluster) -> None:
    if tiling.ntiles < cluster.nodes:
        raise ShoalError(
            f"{tiling.ntiles} tiles cannot cover {cluster.nodes} nodes: use at least one tile per node"
        )


def _chunks(order: np.ndarray, quotas: np.ndarray) -> np.ndarray:
    """Give consecutive runs of ``order`` to nodes 0, 1, ... with the given sizes."""
    owner = np.empty(len(order), dtype=np.int64)
    owner[order] = np.repeat(np.arange(len(quotas)), quotas)
    return owner


@dataclass(frozen=True)
class Geometric(PlacementPolicy):
    """Each node gets one box of tiles, by recursive bisection with cuts proportional to cores.

    The "Geometric" baseline of Birdshot §7.3 (Fig. 12), which gives each node a contiguous
    region: little halo traffic between nodes, but a node whose region holds the busy part of
    the domain stays busy. Each cut is axis-aligned, splits the tiles as the cores are split,
    halves the list of nodes where it can and prefers the longest axis. Without boxes (a mesh
    partition) it bisects the tiles' centroids the same way: recursive coordinate bisection,
    each cut across the longest side of the centroids' bounding box.
    """

    name: str = "geometric"
    dynamic: bool = False
    params: type = NoParams
    summary: str = "one contiguous box of tiles per node, sized by cores (recursive bisection)"
    needs: frozenset[str] = frozenset({"centroids"})

    def place(self, tiling: Decomposition, cluster: Cluster, seed: int = 0) -> np.ndarray:
        """One box of ``tiling``'s tiles per node of ``cluster`` (``seed`` unused: the bisection is deterministic)."""
        check_needs(self, tiling)
        _check_enough_tiles(tiling, cluster)
        if "boxes" not in tiling.geometry:
            owner = np.full(tiling.ntiles, -1, dtype=np.int64)
            self._bisect(owner, tiling.centroids, np.arange(tiling.ntiles), list(range(cluster.nodes)),
                         cluster.cores)
            return owner
        owner = np.full(tiling.counts, -1, dtype=np.int64)
        self._split(owner, (0,) * tiling.ndim, tiling.counts, list(range(cluster.nodes)), cluster.cores)
        return owner.reshape(-1)

    def _split(self, owner, lo, hi, nodes, cores):
        if len(nodes) == 1:
            owner[tuple(slice(a, b) for a, b in zip(lo, hi, strict=True))] = nodes[0]
            return
        n = len(nodes)
        extent = [b - a for a, b in zip(lo, hi, strict=True)]
        volume = int(np.prod(extent))
        prefix = np.concatenate([[0], np.cumsum([cores[i] for i in nodes])])
        best = None
        # Every axis-aligned cut, with the first k nodes on its low side: keep each side at
        # least a tile per node, match the tile split to the core split, prefer halving the
        # node list (a shallow tree) and cutting the longest axis (less surface).
        for axis in sorted(range(len(extent)), key=lambda a: -extent[a]):
            slab = volume // extent[axis]
            for c in range(1, extent[axis]):
                left = c * slab
                for k in range(max(1, n - (volume - left)), min(n - 1, left) + 1):
                    score = (abs(left / volume - prefix[k] / prefix[-1]), abs(2 * k - n))
                    if best is None or score < best[0]:
                        best = (score, axis, c, k)
        _, axis, c, k = best
        mid_hi = list(hi)
        mid_hi[axis] = lo[axis] + c
        mid_lo = list(lo)
        mid_lo[axis] = lo[axis] + c
        self._split(owner, lo, tuple(mid_hi), nodes[:k], cores)
        self._split(owner, tuple(mid_lo), hi, nodes[k:], cores)

    def _bisect(self, owner, centroids, tiles, nodes, cores):
        """Recursive coordinate bisection of ``tiles`` by their centroids: the first half of the
        nodes takes the tiles below a cut across the longest side, as many as its share of the
        cores (at least one tile per node on each side)."""
        if len(nodes) == 1:
            owner[tiles] = nodes[0]
            return
        n, k = len(nodes), len(nodes) // 2
        points = centroids[tiles]
        axis = int(np.argmax(points.max(axis=0) - points.min(axis=0)))
        along = tiles[np.lexsort((tiles, points[:, axis]))]
        share = sum(cores[i] for i in nodes[:k]) / sum(cores[i] for i in nodes)
        left = min(max(int(np.floor(len(tiles) * share + 0.5)), k), len(tiles) - (n - k))
        self._bisect(owner, centroids, along[:left], nodes[:k], cores)
        self._bisect(owner, centroids, along[left:], nodes[k:], cores)


@dataclass(frozen=True)
class Strips(PlacementPolicy):
    """Horizontal bands of tiles stacked along axis 1 (y), sized by cores.

    Vertanen's strip decomposition of the SPH domain (§5.1.1): each node holds consecutive
    rows of tiles, so it talks to at most the nodes above and below it. Tiles are taken row by
    row along y (within a row along x, then z) and cut into runs of :func:`node_quotas` tiles.
    Without boxes (a mesh partition) the tiles are taken by their centroids along the longest
    side of the centroids' bounding box (ties by the other axes, then by id), so the bands are
    stacked along it and cut across it.
    """

    name: str = "strips"
    dynamic: bool = False
    params: type = NoParams
    summary: str = "horizontal bands of tiles stacked along y, sized by cores"
    needs: frozenset[str] = frozenset({"centroids"})

    def place(self, tiling: Decomposition, cluster: Cluster, seed: int = 0) -> np.ndarray:
        """Consecutive rows of ``tiling``'s tiles per node of ``cluster`` (``seed`` unused: the strips are
        deterministic)."""
        check_needs(self, tiling)
        _check_enough_tiles(tiling, cluster)
        if "boxes" not in tiling.geometry:
            c = tiling.centroids
            axis = int(np.argmax(c.max(axis=0) - c.min(axis=0)))
            keys = [np.arange(tiling.ntiles)] + [c[:, a] for a in range(tiling.ndim) if a != axis][::-1] + [c[:, axis]]
            return _chunks(np.lexsort(keys), node_quotas(tiling.ntiles, cluster.cores))
        idx = np.indices(tiling.counts).reshape(tiling.ndim, -1)
        # Row by row along y; within a row x, then z. lexsort takes the last key as primary.
        keys = [idx[a] for a in range(tiling.ndim) if a != 1][::-1] + [idx[1]]
        order = np.lexsort(keys)
        return _chunks(order, node_quotas(tiling.ntiles, cluster.cores))


@dataclass(frozen=True)
class Sectors(PlacementPolicy):
    """Equal angular sectors about the grid's centre, one per node: the invasive paper's quarters
    split along the diagonals (§6.3, Fig. 8).

    Angles are taken in the grid's own coordinates scaled to a square (each axis's cells over
    its length), so with 4 nodes the boundaries are the grid's two diagonals whatever its
    aspect. Node ``k`` owns the tiles whose centre lies in the sector centred on ``k / N`` of a
    turn counter-clockwise from the +x axis: node 0 the right triangle, then top, left, bottom.
    A centre on a boundary belongs to the sector that boundary opens (counter-clockwise), so a
    square tiling with an even count of tiles per side splits into four congruent triangles; a
    centre at the grid's centre goes to node 0. A 3D tiling is split by its first two axes.
    The sectors ignore the nodes' cores: like the paper's quarters, they stay fixed and equal.
    """

    name: str = "sectors"
    dynamic: bool = False
    params: type = NoParams
    summary: str = "equal angular sectors about the grid's centre (4 nodes: quarters split along the diagonals)"
    needs: frozenset[str] = frozenset({"boxes"})

    def place(self, tiling: Decomposition, cluster: Cluster, seed: int = 0) -> np.ndarray:
        """The node of ``cluster`` of every tile of ``tiling`` from its centre's angle (``seed`` unused:
        the sectors are fixed).

        Raises
        ------
        ShoalError
            If a node's sector holds no tile's centre, or the decomposition has no boxes (a
            mesh partition: the sectors are the grid's).
        """
        check_needs(self, tiling)
        _check_enough_tiles(tiling, cluster)
        n = cluster.nodes
        grid = np.asarray(tiling.grid[:2], dtype=np.float64)
        # Twice each centre's offset from the grid's centre, in grid lengths: exact for the
        # integer cell bounds, so centres on a diagonal have |u| == |v| exactly.
        u, v = ((tiling.lo[:, :2] + tiling.hi[:, :2] - grid) / grid).T
        turns = np.arctan2(v + 0.0, u) / (2 * np.pi) + 0.5 / n  # sector 0 starts half a sector below +x
        # A boundary centre (to rounding) opens the next sector counter-clockwise
        owner = np.floor(turns * n + 1e-9).astype(np.int64) % n
        empty = np.flatnonzero(np.bincount(owner, minlength=n) == 0)
        if len(empty):
            raise ShoalError(f"sectors leave node {int(empty[0])} of {n} without a tile on the {tiling.counts} tiling: "
                             "use more tiles or fewer nodes")
        return owner


@dataclass(frozen=True)
class SpaceFillingCurve(PlacementPolicy):
    """Contiguous chunks of the tiles' Hilbert order, sized by cores.

    The usual space-filling-curve partition (a shoal baseline, and the default first placement
    of the dynamic policies): consecutive tiles along the curve are near each other, so each
    node holds a compact region, with :func:`node_quotas` tiles per node. A Cartesian tiling's
    curve runs over its grid of tiles (its ``hilbert`` order); a decomposition without an order
    (a mesh partition) is ordered along the Hilbert curve of its tiles' centroids
    (:func:`~shoal.curves.point_order`).
    """

    name: str = "sfc"
    dynamic: bool = False
    params: type = NoParams
    summary: str = "contiguous chunks along the Hilbert curve, sized by cores"
    needs: frozenset[str] = frozenset({"centroids"})

    def place(self, tiling: Decomposition, cluster: Cluster, seed: int = 0) -> np.ndarray:
        """Consecutive tiles of ``tiling``'s Hilbert curve per node of ``cluster`` (``seed`` unused)."""
        check_needs(self, tiling)
        _check_enough_tiles(tiling, cluster)
        order = tiling.hilbert if "order" in tiling.geometry else point_order(tiling.centroids, "hilbert")
        return _chunks(order, node_quotas(tiling.ntiles, cluster.cores))


@dataclass(frozen=True)
class Birdshot(PlacementPolicy):
    """Tiles assigned to nodes uniformly at random, with exact counts proportional to cores.

    Birdshot scheduling (Birdshot §4, analysed in §5): with many tiles per core a random
    assignment balances any load with high probability, with no measurement and no migration.
    The assignment is a random permutation of the tiles, drawn from ``seed``, cut into runs
    of :func:`node_quotas` tiles.
    """

    name: str = "birdshot"
    dynamic: bool = False
    params: type = NoParams
    summary: str = "random tiles per node (Birdshot), counts proportional to cores, seeded"
    needs: frozenset[str] = frozenset()

    def place(self, tiling: Decomposition, cluster: Cluster, seed: int = 0) -> np.ndarray:
        """Random tiles of ``tiling`` per node of ``cluster``, the same for the same ``seed``."""
        check_needs(self, tiling)
        _check_enough_tiles(tiling, cluster)
        order = np.random.default_rng(seed).permutation(tiling.ntiles)
        return _chunks(order, node_quotas(tiling.ntiles, cluster.cores))


@dataclass(frozen=True)
class Metis(PlacementPolicy):
    """METIS's k-way partition of the tile graph, seeded: parts weighted by cells (before a run
    every cell is predicted to cost the same; a mesh part's cells are its elements), sized by
    cores, cutting the fewest halo bytes."""

    name: str = "metis"
    dynamic: bool = False
    params: type = NoParams
    summary: str = "METIS partition of the tile graph: balanced cells per core, least halo traffic between nodes"
    needs: frozenset[str] = frozenset({"graph"})

    def place(self, tiling: Decomposition, cluster: Cluster, seed: int = 0) -> np.ndarray:
        """One METIS part of ``tiling`` per node of ``cluster``, the same for the same ``seed``."""
        check_needs(self, tiling)
        _check_enough_tiles(tiling, cluster)
        return metis_parts(tiling, cluster, tiling.cells, seed=seed)


for _policy in (Geometric(), Strips(), Sectors(), SpaceFillingCurve(), Birdshot(), Metis()):
    register(_policy)
