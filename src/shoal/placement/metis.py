"""METIS placement: balanced parts of the tile graph that cut little halo traffic.

The tile graph has a vertex per tile and an edge between tiles that read each other's halos
(faces, edges and corners: the tiling's neighbours). A vertex weighs what its tile costs, an
edge the halo bytes the two tiles exchange per step, both ways. METIS (through pymetis) cuts
the graph into one part per node, each part's weight proportional to the node's cores within
``ufactor`` thousandths, with the least edge weight cut: the least traffic between nodes.
Within a node nothing is fixed, as for every policy: any free core takes the next ready tile.

Halo bytes are estimated from the tiles' state: a tile that holds ``b`` bytes over ``c`` cells
sends ``b * k / c`` bytes to a neighbour whose halo covers ``k`` of its cells. Without state
sizes every cell counts the same (the geometry alone), which is exact for grid apps up to a
constant factor, and METIS only sees ratios. A decomposition without boxes (a mesh partition)
gives its own graph (:meth:`~shoal.decomposition.Decomposition.graph`), whose weights (the
vertices two parts share) stand for ``k`` and its elements for ``c``.

METIS takes integer weights. Floats are scaled so that all vertex weights, and all edge weights,
each add up to about ``WEIGHT_TOTAL`` (2**26): fine enough that rounding moves a part's weight
by far less than METIS's tolerance, and far from the 2**31 where METIS's 32-bit sums overflow.
Each weight is at least 1, so that a tile that costs nothing, or a halo that carries nothing,
still counts a little (METIS wants positive edge weights).

A periodic re-partition gives parts in an arbitrary order. :func:`keep_most_in_place` maps
them to nodes by a maximum-weight matching between what each node holds now and what each part
holds (``scipy.optimize.linear_sum_assignment``), so that only the tiles that must move do.
"""

from __future__ import annotations

import numpy as np
import pymetis

from ..cluster import Cluster
from ..decomposition import Decomposition
from ..tiling import Tiling

WEIGHT_TOTAL = 1 << 26
# METIS's default tolerance for k-way partitions: the heaviest part within 3% of its target.
DEFAULT_UFACTOR = 30


def tile_graph(tiling: Decomposition,
               tile_bytes: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The graph of ``tiling``'s tiles in compressed rows: ``(xadj, adjncy, halo_bytes)``.

    ``adjncy[xadj[t]:xadj[t + 1]]`` are tile ``t``'s neighbours; ``halo_bytes`` holds, for every
    entry, the bytes the two tiles send each other per step (symmetric), estimated from
    ``tile_bytes`` (state bytes per tile; one byte per cell where None or all zero).
    """
    xadj, adjncy = tiling.neighbours_csr()
    src = np.repeat(np.arange(tiling.ntiles), np.diff(xadj))
    cells = tiling.cells.astype(np.float64)
    if tile_bytes is None or not np.any(tile_bytes):
        per_cell = np.ones(tiling.ntiles)
    else:
        per_cell = np.asarray(tile_bytes, dtype=np.float64) / cells
    if "boxes" in tiling.geometry:  # cells of each tile in the other's halo
        to_src, to_dst = _halo_cells(tiling, src, adjncy), _halo_cells(tiling, adjncy, src)
    else:  # what the two tiles share (a mesh partition: vertices), alike both ways
        shared = tiling.graph()[2]
        to_src = to_dst = np.ones(len(adjncy)) if shared is None else np.asarray(shared, dtype=np.float64)
    return xadj, adjncy, to_src * per_cell[adjncy] + to_dst * per_cell[src]


def _halo_cells(tiling: Tiling, dst: np.ndarray, src: np.ndarray) -> np.ndarray:
    """Cells of each ``src`` tile that lie in the matching ``dst`` tile's halo (vectorized
    :meth:`~shoal.tiling.Tiling.halo_region`)."""
    h = tiling.halo
    lo = np.maximum(tiling.lo[dst] - h, tiling.lo[src])
    hi = np.minimum(tiling.hi[dst] + h, tiling.hi[src])
    return np.prod(np.clip(hi - lo, 0, None), axis=1).astype(np.float64)


def integer_weights(weights: np.ndarray) -> np.ndarray:
    """Non-negative float weights as METIS integers summing to about ``WEIGHT_TOTAL``, each >= 1."""
    weights = np.asarray(weights, dtype=np.float64)
    total = weights.sum()
    if not total > 0:
        return np.ones(len(weights), np.int64)
    return np.maximum(1, np.rint(weights / total * WEIGHT_TOTAL)).astype(np.int64)  # shares first: no overflow


def metis_parts(tiling: Decomposition, cluster: Cluster, tile_cost: np.ndarray, tile_bytes: np.ndarray | None = None,
                seed: int = 0, ufactor: int = DEFAULT_UFACTOR) -> np.ndarray:
    """One METIS part of ``tiling`` per node of ``cluster``: ``part[tile]``, part ``k`` sized for
    node ``k``'s cores.

    ``tile_cost`` weighs the vertices (seconds, cells: any unit), ``tile_bytes`` the edges (see
    :func:`tile_graph`). ``seed`` seeds METIS's randomized matching, so a seed gives one
    partition; ``ufactor`` is METIS's tolerance in thousandths over a part's target. Every part
    gets at least one tile (METIS may leave one empty on tiny graphs).
    """
    nodes = cluster.nodes
    if nodes == 1:
        return np.zeros(tiling.ntiles, np.int64)
    xadj, adjncy, halo_bytes = tile_graph(tiling, tile_bytes)
    cores = cluster.core_array.astype(np.float64)
    vweights = integer_weights(tile_cost)
    options = pymetis.Options(seed=int(seed) % 2**31, ufactor=int(ufactor))
    # Target weights only where nodes differ: equal targets are METIS's default.
    tpwgts = None if np.all(cores == cores[0]) else (cores / cores.sum()).tolist()
    _, parts = pymetis.part_graph(nodes, pymetis.CSRAdjacency(xadj, adjncy), vweights=vweights,
                                  eweights=integer_weights(halo_bytes), tpwgts=tpwgts, recursive=False,
                                  options=options)
    return _fill_empty_parts(np.asarray(parts, dtype=np.int64), vweights, nodes)


def _fill_empty_parts(parts: np.ndarray, weights: np.ndarray, nparts: int) -> np.ndarray:
    """Give each empty part the lightest tile of the part with the most tiles (lowest index first)."""
    counts = np.bincount(parts, minlength=nparts)
    for empty in np.flatnonzero(counts == 0):
        donor = int(np.argmax(counts))
        tiles = np.flatnonzero(parts == donor)
        tile = tiles[np.lexsort((tiles, weights[tiles]))[0]]
        parts[tile] = empty
        counts[donor] -= 1
        counts[empty] += 1
    return parts


def keep_most_in_place(parts: np.ndarray, owner: np.ndarray, cluster: Cluster,
                       kept: np.ndarray | None = None) -> np.ndarray:
    """The owner table that puts each part on a node so that the most weight stays where it is.

    A maximum-weight matching between nodes and parts, where a node and a part weigh the
    ``kept`` (bytes; one per tile where None or all zero) of the tiles the node holds in
    ``owner`` and the part holds. Part ``k`` was sized for node ``k``'s cores, so it may only
    go to a node of as many cores: the matching runs within each group of equal nodes.
    """
    nodes = cluster.nodes
    from scipy.optimize import linear_sum_assignment  # here, not on import: a second to load

    weight = np.ones(len(parts)) if kept is None or not np.any(kept) else np.asarray(kept, dtype=np.float64)
    overlap = np.zeros((nodes, nodes))
    np.add.at(overlap, (owner, parts), weight)
    node_of_part = np.arange(nodes)
    cores = cluster.core_array
    for c in np.unique(cores):
        group = np.flatnonzero(cores == c)
        rows, cols = linear_sum_assignment(overlap[np.ix_(group, group)], maximize=True)
        node_of_part[group[cols]] = group[rows]
    return node_of_part[parts]
