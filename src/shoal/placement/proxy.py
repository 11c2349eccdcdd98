"""What ``speculative`` balances by: the loads a low-resolution run of the same scenario predicts
for the tiles of this run (Shah et al. 2018, Birdshot §7.3).

A live run records its proxy first; a replay takes one as ``--proxy``. Either way the proxy is a
trace, mapped here onto the tiles being placed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..decomposition import Decomposition, require
from ..errors import ShoalError

if TYPE_CHECKING:
    from ..trace import Trace


class ProxyLoads:
    """Loads a low-resolution run of the same scenario predicts for the tiles of this replay.

    Space: each proxy tile's load is spread evenly over its part of the domain and every tile
    of this replay takes the share its box overlaps (tile boxes as fractions of the grid; the
    overlap is separable, one matrix per axis). Time: steps are matched by fraction of the run
    (both runs are assumed to cover the same simulated time).
    """

    def __init__(self, proxy: Trace, tiling: Decomposition, steps: int, fixed: float = 0.0):
        for which in (proxy.tiling, tiling):  # the overlap of boxes is what maps the loads
            require(frozenset({"boxes"}), which, "mapping a proxy's loads onto the tiles")
        if proxy.tiling.ndim != tiling.ndim:
            raise ShoalError("the proxy trace has another number of dimensions")
        self.cost = proxy.tile_cost()  # (proxy steps, proxy tiles)
        self.fixed = fixed  # seconds every tile of this replay pays per step whatever its work
        self.proxy_counts = proxy.tiling.counts
        self.share = []
        for mine, theirs, n, m in zip(tiling.edges, proxy.tiling.edges, tiling.grid, proxy.tiling.grid, strict=True):
            a, b = mine / n, theirs / m
            overlap = np.clip(np.minimum(a[1:, None], b[None, 1:]) - np.maximum(a[:-1, None], b[None, :-1]), 0, None)
            self.share.append(overlap / np.diff(b)[None, :])
        self.steps = steps

    def loads(self, s0: int, s1: int) -> np.ndarray:
        """Predicted per-tile load (per step) over this replay's steps [s0, s1)."""
        P = self.cost.shape[0]
        a = min(P - 1, s0 * P // self.steps)
        b = max(a + 1, min(P, -(-s1 * P // self.steps)))
        grid = self.cost[a:b].mean(axis=0).reshape(self.proxy_counts)
        for axis, share in enumerate(self.share):
            grid = np.moveaxis(np.tensordot(share, grid, axes=([1], [axis])), 0, axis)
        return grid.reshape(-1) + self.fixed
