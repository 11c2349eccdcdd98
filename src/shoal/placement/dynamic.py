"""Dynamic placements: re-placed every K steps from measured (or predicted) per-tile loads.

Every policy starts from a static placement (``initial``, default ``sfc``) and, at each
balancing step, returns a new ``owner[tile] -> node`` from a :class:`BalanceContext`. Loads
are per tile (seconds per step) and a node's load is the sum of its tiles divided by its
cores. Policies keep whatever they need between calls in ``memory`` (a dict owned by the
caller, one per run), so one policy object serves the executor and the replay alike.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

import numpy as np

from ..cluster import Cluster
from ..tiling import Tiling
from .registry import get_policy, register


@dataclass
class BalanceContext:
    """What a balancer may look at.

    Attributes
    ----------
    loads : ndarray
        Measured load per tile over the last period (seconds per step).
    owner : ndarray
        Current owner of every tile.
    future_loads : ndarray or None
        True loads of the coming period (only the ``oracle`` may use them).
    proxy_loads : ndarray or None
        Loads of the coming period as predicted by a low-resolution proxy (``speculative``).
    tile_bytes : ndarray or None
        Bytes of state per tile (what a migration moves).
    """

    tiling: Tiling
    cluster: Cluster
    owner: np.ndarray
    loads: np.ndarray
    step: int = 0
    future_loads: np.ndarray | None = None
    proxy_loads: np.ndarray | None = None
    tile_bytes: np.ndarray | None = None
    params: dict = field(default_factory=dict)


def node_loads(owner: np.ndarray, loads: np.ndarray, cluster: Cluster) -> np.ndarray:
    """Per-node load per core."""
    return np.bincount(owner, weights=loads, minlength=cluster.nodes) / cluster.core_array


def greedy_assign(loads: np.ndarray, cluster: Cluster) -> np.ndarray:
    """Charm++ GreedyLB: heaviest tile first onto the least loaded node (per core); ties to the
    lower node and, among equal tiles, the lower tile id."""
    order = np.lexsort((np.arange(len(loads)), -loads))
    heap = [(0.0, node) for node in range(cluster.nodes)]
    owner = np.empty(len(loads), dtype=np.int64)
    cores = cluster.core_array
    for t in order:
        load, node = heapq.heappop(heap)
        owner[t] = node
        heapq.heappush(heap, (load + loads[t] / cores[node], node))
    return owner


def refine_moves(owner: np.ndarray, loads: np.ndarray, cluster: Cluster, threshold: float) -> np.ndarray:
    """Charm++ RefineLB: move tiles off nodes above ``threshold`` (load per core) onto the least
    loaded nodes, biggest tile that fits first, never lifting a receiver above the threshold."""
    owner = owner.copy()
    cores = cluster.core_array
    load = node_loads(owner, loads, cluster)
    while True:
        donors = np.flatnonzero(load > threshold * (1 + 1e-12))
        if len(donors) == 0:
            return owner
        moved = False
        for donor in donors[np.argsort(-load[donors], kind="stable")]:
            tiles = np.flatnonzero(owner == donor)
            for t in tiles[np.lexsort((tiles, -loads[tiles]))]:
                receiver = int(np.argmin(load))
                if receiver == donor:
                    break
                if load[receiver] + loads[t] / cores[receiver] <= threshold and loads[t] > 0:
                    owner[t] = receiver
                    load[donor] -= loads[t] / cores[donor]
                    load[receiver] += loads[t] / cores[receiver]
                    moved = True
                    if load[donor] <= threshold:
                        break
        if not moved:
            return owner


@dataclass(frozen=True)
class _Dynamic:
    name: str = ""
    dynamic: bool = True
    summary: str = ""

    def place(self, tiling: Tiling, cluster: Cluster, seed: int = 0, initial: str = "sfc") -> np.ndarray:
        return get_policy(initial).place(tiling, cluster, seed)


@dataclass(frozen=True)
class NoBalancing(_Dynamic):
    name: str = "none"
    summary: str = "never re-place (a baseline with the same balancing barriers)"

    def rebalance(self, ctx: BalanceContext, memory: dict) -> np.ndarray:
        return ctx.owner.copy()


@dataclass(frozen=True)
class Greedy(_Dynamic):
    name: str = "greedy"
    summary: str = "Charm++ GreedyLB: heaviest tile first onto the least loaded node"

    def rebalance(self, ctx: BalanceContext, memory: dict) -> np.ndarray:
        return greedy_assign(ctx.loads, ctx.cluster)


@dataclass(frozen=True)
class Refine(_Dynamic):
    name: str = "refine"
    summary: str = "Charm++ RefineLB: move tiles off nodes above tolerance x average"

    def rebalance(self, ctx: BalanceContext, memory: dict) -> np.ndarray:
        tol = float(ctx.params.get("tolerance", 1.05))
        avg = ctx.loads.sum() / ctx.cluster.total_cores
        return refine_moves(ctx.owner, ctx.loads, ctx.cluster, tol * avg)


@dataclass(frozen=True)
class GreedyRefine(_Dynamic):
    name: str = "greedy-refine"
    summary: str = "RefineLB with its threshold at tolerance x GreedyLB's maximum load"

    def rebalance(self, ctx: BalanceContext, memory: dict) -> np.ndarray:
        tol = float(ctx.params.get("tolerance", 1.05))
        greedy_max = node_loads(greedy_assign(ctx.loads, ctx.cluster), ctx.loads, ctx.cluster).max()
        return refine_moves(ctx.owner, ctx.loads, ctx.cluster, tol * greedy_max)


@dataclass(frozen=True)
class Swap(_Dynamic):
    """Birdshot §5.3: smoothed per-tile cost and node utilisation; when the busiest node is more
    than ``threshold`` over the average, swap its busiest tile with the least loaded node's
    least busy tile, at most once every ``interval`` steps."""

    name: str = "swap"
    summary: str = "Birdshot's dynamic variant: swap busiest/idlest tiles when overloaded"

    def place(self, tiling: Tiling, cluster: Cluster, seed: int = 0, initial: str = "birdshot") -> np.ndarray:
        return get_policy(initial).place(tiling, cluster, seed)

    def rebalance(self, ctx: BalanceContext, memory: dict) -> np.ndarray:
        alpha = float(ctx.params.get("smoothing", 0.5))
        threshold = float(ctx.params.get("threshold", 0.10))
        interval = int(ctx.params.get("interval", 0))
        smooth = memory.get("tile_cost")
        smooth = ctx.loads.copy() if smooth is None else alpha * ctx.loads + (1 - alpha) * smooth
        memory["tile_cost"] = smooth
        owner = ctx.owner.copy()
        util = node_loads(owner, smooth, ctx.cluster)
        last = memory.get("last_swap")
        if last is not None and ctx.step - last < interval:
            return owner
        mean = util.mean()
        hot, cold = int(np.argmax(util)), int(np.argmin(util))
        if mean <= 0 or util[hot] <= (1 + threshold) * mean or hot == cold:
            return owner
        hot_tiles, cold_tiles = np.flatnonzero(owner == hot), np.flatnonzero(owner == cold)
        if len(hot_tiles) == 0 or len(cold_tiles) == 0:
            return owner
        busy = hot_tiles[np.argmax(smooth[hot_tiles])]
        idle = cold_tiles[np.argmin(smooth[cold_tiles])]
        if smooth[busy] <= smooth[idle]:
            return owner
        owner[busy], owner[idle] = cold, hot
        memory["last_swap"] = ctx.step
        return owner


@dataclass(frozen=True)
class Speculative(_Dynamic):
    """Shah et al. 2018 (Birdshot §7.3): place by the loads a low-resolution proxy of the same
    scenario predicts for the coming period (GreedyLB on those loads)."""

    name: str = "speculative"
    summary: str = "GreedyLB on the loads a low-resolution proxy predicts for the next period"

    def rebalance(self, ctx: BalanceContext, memory: dict) -> np.ndarray:
        predicted = ctx.proxy_loads if ctx.proxy_loads is not None else ctx.loads
        return greedy_assign(predicted, ctx.cluster)


@dataclass(frozen=True)
class Locality(_Dynamic):
    """Algorithm 2 of the contact-mechanics paper: a tile stays on its own node, or goes to a
    neighbour's node, while that node stays under the average; the rest go greedily, biggest
    first, to the least loaded node. (A node may fill up to the average exactly, not just below
    it, so that a perfectly balanced placement is kept as it is.)"""

    name: str = "locality"
    summary: str = "keep tiles on their own or a neighbour's node under the average, then greedy"

    def rebalance(self, ctx: BalanceContext, memory: dict) -> np.ndarray:
        cores = ctx.cluster.core_array
        avg = ctx.loads.sum() / ctx.cluster.total_cores * (1 + 1e-12)
        load = np.zeros(ctx.cluster.nodes)
        owner = np.full(len(ctx.loads), -1, dtype=np.int64)
        pending = []
        for t in np.lexsort((np.arange(len(ctx.loads)), -ctx.loads)):
            homes = [int(ctx.owner[t])] + sorted({int(ctx.owner[n]) for n in ctx.tiling.neighbours[t]} -
                                                 {int(ctx.owner[t])})
            for node in homes:
                if load[node] + ctx.loads[t] / cores[node] <= avg:
                    owner[t] = node
                    load[node] += ctx.loads[t] / cores[node]
                    break
            else:
                pending.append(t)
        for t in sorted(pending, key=lambda t: (-ctx.loads[t], t)):
            node = int(np.argmin(load))
            owner[t] = node
            load[node] += ctx.loads[t] / cores[node]
        return owner


@dataclass(frozen=True)
class Oracle(_Dynamic):
    name: str = "oracle"
    summary: str = "GreedyLB on the true loads of the coming period (a bound, for reports)"

    def rebalance(self, ctx: BalanceContext, memory: dict) -> np.ndarray:
        loads = ctx.future_loads if ctx.future_loads is not None else ctx.loads
        return greedy_assign(loads, ctx.cluster)


for _policy in (Greedy(), Refine(), GreedyRefine(), Swap(), Speculative(), Locality(), Oracle(), NoBalancing()):
    register(_policy)
