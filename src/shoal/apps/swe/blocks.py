"""Which root blocks a tile holds, who their neighbours are, and how they change level.

Root block ``(bx, by)`` has the global id ``bx * nby + by``; a tile holds a rectangle of
them, in that order. The topology depends on the tiling only; levels live in the tile state.
Halo payloads between two tiles list the (block, face) pairs that touch, ordered by the
receiving block's id and face, so both sides agree on the order without sending it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...tiling import Tiling
from .boundary import KINDS
from .kernels import SOURCE_HALO, SOURCE_TILE

#: (dx, dy) of faces west, east, south, north
FACE_STEP = ((-1, 0), (1, 0), (0, -1), (0, 1))


@dataclass(frozen=True)
class Topology:
    """The root blocks of one tile and their face neighbours.

    Attributes
    ----------
    gids : ndarray of int
        Global ids of the tile's blocks, ascending.
    coords : ndarray of int, shape (nb, 2)
        Their (bx, by).
    kind : ndarray of int, shape (nb, 4)
        The side's kind (:data:`.boundary.KINDS`) at the edge, ``SOURCE_TILE`` or ``SOURCE_HALO`` inside.
    local : ndarray of int, shape (nb, 4)
        Index in this tile of the neighbour for ``SOURCE_TILE``, its tile for ``SOURCE_HALO``.
    receive : Links
        The ``(k, f)`` pairs other tiles feed, grouped by tile in payload order.
    send : Links
        This tile's ``(k, f)`` pairs other tiles need, grouped by tile in payload order.
    """

    gids: np.ndarray
    coords: np.ndarray
    kind: np.ndarray
    local: np.ndarray
    receive: Links
    send: Links


@dataclass(frozen=True)
class Links:
    """(block, face) pairs exchanged with neighbour tiles, all in one list: the pairs of
    ``tiles[i]`` are ``k[split[i]:split[i + 1]]`` and ``f[...]``."""

    tiles: tuple[int, ...]
    k: np.ndarray
    f: np.ndarray
    split: np.ndarray

    @classmethod
    def of(cls, groups: dict[int, list[tuple[int, int]]]) -> Links:
        """From ``{tile: [(k, f), ...]}`` (each list already in payload order)."""
        tiles = tuple(sorted(groups))
        pairs = [pair for t in tiles for pair in groups[t]]
        k = np.array([p[0] for p in pairs], dtype=np.int64)
        f = np.array([p[1] for p in pairs], dtype=np.int64)
        split = np.concatenate(([0], np.cumsum([len(groups[t]) for t in tiles]))).astype(np.int64)
        return cls(tiles, k, f, split)


def topology(tiling: Tiling, tile: int, sides: tuple[str, str, str, str]) -> Topology:
    """The :class:`Topology` of ``tile`` (``sides``: boundary kind of west, east, south, north)."""
    nbx, nby = tiling.grid
    (x0, x1), (y0, y1) = tiling.bounds(tile)
    coords = np.array([(bx, by) for bx in range(x0, x1) for by in range(y0, y1)], dtype=np.int64)
    gids = coords[:, 0] * nby + coords[:, 1]
    nb = len(gids)
    kind = np.zeros((nb, 4), dtype=np.int64)
    local = np.full((nb, 4), -1, dtype=np.int64)
    index = {int(g): k for k, g in enumerate(gids)}
    receive: dict[int, list] = {}
    send: dict[int, list] = {}
    for k, (bx, by) in enumerate(coords):
        for f, (sx, sy) in enumerate(FACE_STEP):
            nx, ny = bx + sx, by + sy
            if not (0 <= nx < nbx and 0 <= ny < nby):
                kind[k, f] = KINDS[sides[f]]
                continue
            g = int(nx * nby + ny)
            if g in index:
                kind[k, f], local[k, f] = SOURCE_TILE, index[g]
            else:
                t = tiling.tile_of_cell((nx, ny))
                kind[k, f], local[k, f] = SOURCE_HALO, t
                receive.setdefault(t, []).append((int(gids[k]), f, k))
                send.setdefault(t, []).append((g, f ^ 1, k, f))
    recv = Links.of({t: [(k, f) for _, f, k in sorted(v)] for t, v in receive.items()})
    snd = Links.of({t: [(k, f) for _, _, k, f in sorted(v)] for t, v in send.items()})
    return Topology(gids, coords, kind, local, recv, snd)


def balanced(target: np.ndarray, neighbour_targets: np.ndarray) -> np.ndarray:
    """One round of 2:1 balance: a block's level is at least each face neighbour's minus one.

    ``neighbour_targets`` is ``(nb, 4)`` with -1 where there is no neighbour. Rounds are
    Jacobi sweeps (every block reads the previous round's levels), so ``max_level -
    min_level`` rounds give the same levels for any tiling: the smallest levels at least the
    flagged ones with face neighbours at most one apart.
    """
    return np.maximum(target, neighbour_targets.max(axis=1) - 1)
