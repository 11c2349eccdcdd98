"""Dynamic placements: re-placed every K steps from measured (or predicted) loads.

Every policy starts from a static placement (``initial``, default ``sfc``) and, at each
balancing step, returns a new ``owner[tile] -> node`` from a
:class:`~shoal.placement.balancing.BalanceContext`. Policies keep whatever they need between
calls in ``memory`` (a dict owned by the caller, one per run), so one policy object serves
the executor and the replay alike. ``greedy`` and ``refine`` are Charm++'s GreedyLB and
RefineLB as Charm++ runs them (:mod:`shoal.placement.charm`); ``metis-periodic`` partitions
afresh with METIS (:mod:`shoal.placement.metis`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..cluster import Cluster
from ..decomposition import Decomposition
from ..errors import ShoalError
from .balancing import BalanceContext, node_loads
from .charm import charm_greedy, charm_refine
from .metis import DEFAULT_UFACTOR, keep_most_in_place, metis_parts
from .registry import NoParams, PlacementPolicy, check_needs, get_policy, register


@dataclass
class ToleranceParams:
    """``tolerance``: how far over the average load a node may be (1.05: 5%)."""

    tolerance: float = 1.05

    def validate(self) -> None:
        """Refuse a ``tolerance`` below 1 or not finite, in one line."""
        if not np.isfinite(self.tolerance) or self.tolerance < 1.0:
            raise ShoalError(f"tolerance must be a finite number >= 1, got {self.tolerance}")


@dataclass
class RefineParams(ToleranceParams):
    """``tolerance`` as above; ``faithful``: scan light processors and a donor's objects in
    the order Charm++ 6's linked lists hold them, and keep its stale load on processors left
    empty by a reset, as Charm++ does (false: ascending order and clean resets)."""

    faithful: bool = True


@dataclass
class SwapParams:
    """``smoothing``: weight of the newest loads in the running average (1: no memory);
    ``threshold``: how far over the mean the busiest node must be to swap; ``interval``: steps
    between two swaps at least."""

    smoothing: float = 0.5
    threshold: float = 0.10
    interval: int = 0

    def validate(self) -> None:
        """Refuse a ``smoothing`` outside (0, 1], a negative ``threshold`` or ``interval``, in one line."""
        if not 0 < self.smoothing <= 1:
            raise ShoalError(f"smoothing must lie in (0, 1], got {self.smoothing}")
        if not self.threshold >= 0:
            raise ShoalError(f"threshold must be >= 0, got {self.threshold}")
        if self.interval < 0:
            raise ShoalError(f"interval must be >= 0, got {self.interval}")


@dataclass
class MetisParams:
    """``ufactor``: how far, in thousandths, a part may weigh over its target (30: 3%, METIS's
    default); ``seed``: METIS's random seed (a seed gives one partition)."""

    ufactor: int = DEFAULT_UFACTOR
    seed: int = 0

    def validate(self) -> None:
        """Refuse a ``ufactor`` outside 1..1000 or a negative ``seed``, in one line."""
        if not 1 <= self.ufactor <= 1000:
            raise ShoalError(f"metis-periodic.ufactor must be from 1 to 1000 (thousandths over a part's target), "
                             f"got {self.ufactor}")
        if self.seed < 0:
            raise ShoalError(f"metis-periodic.seed must be >= 0, got {self.seed}")


def shed_overload(owner: np.ndarray, loads: np.ndarray, cluster: Cluster, threshold: float) -> np.ndarray:
    """Move tiles off nodes above ``threshold`` onto the least loaded nodes.

    Donors go busiest first and give their biggest tiles first, each to the node with the least
    load per core if it stays at or under the threshold; it stops when no node is over the
    threshold or no tile fits anywhere. A shoal heuristic; Charm++'s RefineLB is
    :func:`~shoal.placement.charm.charm_refine`.

    Parameters
    ----------
    owner : ndarray of int64, shape (tiles,)
        The current node of every tile (not modified).
    loads : ndarray, shape (tiles,)
        Load of every tile (seconds per step).
    cluster : Cluster
        The nodes and their cores.
    threshold : float
        The most load per core a node may keep (seconds per step).

    Returns
    -------
    ndarray of int64, shape (tiles,)
        The new owners.
    """
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


def phase_greedy(segments: np.ndarray, cluster: Cluster, background: np.ndarray) -> np.ndarray:
    """Place tiles so that the sum over barrier-separated segments of the busiest node's
    share is small (the step's lower bound), not just the summed load.

    ``segments`` has shape ``(segments, tiles)``. Tiles go heaviest first, by their largest
    share of any segment's total, each to the node that raises ``sum_s max_n load[n, s]`` the
    least; ties go to the node with the least total load, then the lower index. A node's
    background load is spread over the segments in proportion to their total loads. With one
    segment this is GreedyLB on per-core loads.
    """
    S, T = segments.shape
    cores = cluster.core_array.astype(np.float64)
    totals = segments.sum(axis=1)
    share = totals / totals.sum() if totals.sum() > 0 else np.full(S, 1.0 / S)
    load = (background[:, None] * share[None, :]) / cores[:, None]  # (nodes, segments), per core
    weight = (segments / np.where(totals > 0, totals, 1.0)[:, None]).max(axis=0)
    order = np.lexsort((np.arange(T), -segments.sum(axis=0), -weight))
    owner = np.empty(T, dtype=np.int64)
    for t in order:
        peak = load.max(axis=0)
        after = load + segments[:, t][None, :] / cores[:, None]
        cost = np.maximum(after, peak[None, :]).sum(axis=1)
        node = int(np.lexsort((np.arange(len(cores)), after.sum(axis=1), cost))[0])
        owner[t] = node
        load[node] = after[node]
    return owner


@dataclass(frozen=True)
class _Dynamic(PlacementPolicy):
    """What the dynamic policies share: the first placement from a static policy, and no need
    of any geometry (they balance loads; the first placement's policy checks its own needs)."""

    name: str = ""
    dynamic: bool = True
    summary: str = ""
    params: type = NoParams
    needs: frozenset[str] = frozenset()

    def place(self, tiling: Decomposition, cluster: Cluster, seed: int = 0, initial: str = "sfc") -> np.ndarray:
        """The first placement, before any load is known: the static policy ``initial``'s.

        Parameters
        ----------
        tiling : Decomposition
            The tiles to place.
        cluster : Cluster
            The nodes to place them on.
        seed : int, default 0
            Seed of a random ``initial`` placement.
        initial : str, default "sfc"
            Name of the registered policy that places first.

        Raises
        ------
        ShoalError
            If ``initial`` names no policy, or that policy cannot place these tiles.
        """
        return get_policy(initial).place(tiling, cluster, seed)

    def settings(self, ctx: BalanceContext):
        """The context's parameters of this policy, or its defaults."""
        return ctx.params if isinstance(ctx.params, self.params) else self.params()


@dataclass(frozen=True)
class NoBalancing(_Dynamic):
    """Never re-places: every balancing step keeps the owners as they are.

    A shoal baseline: it stops at the same balancing barriers as the other dynamic policies
    and pays for the same measurements, so comparing with it isolates what moving tiles gains.
    """

    name: str = "none"
    summary: str = "never re-place (a baseline with the same balancing barriers)"

    def rebalance(self, ctx: BalanceContext, memory: dict) -> np.ndarray:
        """A copy of ``ctx.owner`` (``memory`` unused)."""
        return ctx.owner.copy()


@dataclass(frozen=True)
class Greedy(_Dynamic):
    """Charm++'s GreedyLB: every tile placed afresh, heaviest first, onto the least loaded core.

    The greedy heuristic of the SAMPI paper (§V), run as Charm++ 6 runs it
    (:func:`~shoal.placement.charm.charm_greedy`): each core starts from its node's background
    load, ignores where tiles were, and so may move almost every tile.
    """

    name: str = "greedy"
    summary: str = "Charm++ GreedyLB: heaviest tile first onto the least loaded core (background counted)"

    def rebalance(self, ctx: BalanceContext, memory: dict) -> np.ndarray:
        """GreedyLB on ``ctx``'s loads per tile and background (``memory`` unused)."""
        return charm_greedy(ctx.tile_loads, ctx.cluster, ctx.background)


@dataclass(frozen=True)
class Refine(_Dynamic):
    """Charm++'s RefineLB: move few tiles, only off cores above ``tolerance`` x the average.

    The refining heuristic of the SAMPI paper (§III, §V), with the overload tolerance it tunes,
    run as Charm++ 6 runs it (:func:`~shoal.placement.charm.charm_refine`, its multirefine
    search for the lowest overload it can reach); ``faithful`` keeps Charm++'s scan orders.
    """

    name: str = "refine"
    summary: str = "Charm++ RefineLB: move tiles off cores above tolerance x average (multirefine)"
    params: type = RefineParams

    def rebalance(self, ctx: BalanceContext, memory: dict) -> np.ndarray:
        """RefineLB from ``ctx.owner`` on the period's loads per tile (``memory`` unused)."""
        p = self.settings(ctx)
        owner, _ = charm_refine(ctx.tile_loads, ctx.owner, ctx.cluster, ctx.background, p.tolerance,
                                charm_order=p.faithful, stale_reset=p.faithful)
        return owner


@dataclass(frozen=True)
class GreedyPhase(_Dynamic):
    """Balances the phases a barrier separates, not their sum (a shoal policy).

    A step whose barrier phase is imbalanced waits at the barrier however balanced the sum
    looks, so this places tiles with :func:`phase_greedy` on the loads of every segment between
    two barriers (:meth:`~shoal.placement.balancing.BalanceContext.segment_loads`) at once.
    With no barrier it is GreedyLB on per-core loads.
    """

    name: str = "greedy-phase"
    summary: str = "greedy on every barrier-separated phase at once (the phase that bounds the step)"

    def rebalance(self, ctx: BalanceContext, memory: dict) -> np.ndarray:
        """:func:`phase_greedy` on ``ctx``'s loads per segment and background (``memory`` unused)."""
        return phase_greedy(ctx.segment_loads(), ctx.cluster, ctx.background)


@dataclass(frozen=True)
class GreedyRefine(_Dynamic):
    """Refinement towards what GreedyLB would reach, moving far fewer tiles (a shoal variant).

    It computes GreedyLB's busiest node (without background load) as the load a node could
    have, then sheds tiles with :func:`shed_overload` only off nodes above ``tolerance`` x that
    load, so a placement already near GreedyLB's stays where it is.
    """

    name: str = "greedy-refine"
    summary: str = "shed tiles off nodes above tolerance x GreedyLB's maximum load (a shoal variant)"
    params: type = ToleranceParams

    def rebalance(self, ctx: BalanceContext, memory: dict) -> np.ndarray:
        """``ctx.owner`` with tiles shed off nodes above ``tolerance`` x GreedyLB's maximum (``memory`` unused)."""
        loads = ctx.tile_loads
        greedy_max = node_loads(charm_greedy(loads, ctx.cluster, np.zeros(ctx.cluster.nodes)), loads, ctx.cluster).max()
        return shed_overload(ctx.owner, loads, ctx.cluster, self.settings(ctx).tolerance * greedy_max)


@dataclass(frozen=True)
class Swap(_Dynamic):
    """Birdshot's dynamic variant (§5.3): a random placement corrected by one swap at a time.

    It keeps a smoothed cost per tile and from it the nodes' utilisation; when the busiest node
    is more than ``threshold`` over the average, its busiest tile trades places with the least
    loaded node's least busy tile, at most once every ``interval`` steps. It starts from a
    Birdshot placement.
    """

    name: str = "swap"
    summary: str = "Birdshot's dynamic variant: swap busiest/idlest tiles when overloaded"
    params: type = SwapParams

    def place(self, tiling: Decomposition, cluster: Cluster, seed: int = 0, initial: str = "birdshot") -> np.ndarray:
        """The static policy ``initial``'s placement, Birdshot's unless told, from ``seed``
        (``tiling`` and ``cluster`` as for any policy)."""
        return get_policy(initial).place(tiling, cluster, seed)

    def rebalance(self, ctx: BalanceContext, memory: dict) -> np.ndarray:
        """``ctx.owner`` with at most one swap; ``memory`` keeps the smoothed costs per tile
        (``"tile_cost"``) and the step of the last swap (``"last_swap"``)."""
        p = self.settings(ctx)
        smooth = memory.get("tile_cost")
        loads = ctx.tile_loads
        smooth = loads.copy() if smooth is None else p.smoothing * loads + (1 - p.smoothing) * smooth
        memory["tile_cost"] = smooth
        owner = ctx.owner.copy()
        util = node_loads(owner, smooth, ctx.cluster)
        last = memory.get("last_swap")
        if last is not None and ctx.step - last < p.interval:
            return owner
        mean = util.mean()
        hot, cold = int(np.argmax(util)), int(np.argmin(util))
        if mean <= 0 or util[hot] <= (1 + p.threshold) * mean or hot == cold:
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
    """Places by the loads a low-resolution proxy predicts for the coming period.

    The speculative algorithm of Shah et al. 2018, Birdshot's strongest comparison (§7.3): a
    coarse run of the same scenario goes ahead of the real one, and GreedyLB places the tiles
    by the loads it measured for the next period. Without a proxy it falls back to the
    period's measured loads, that is to :class:`Greedy`.
    """

    name: str = "speculative"
    summary: str = "GreedyLB on the loads a low-resolution proxy predicts for the next period"

    def rebalance(self, ctx: BalanceContext, memory: dict) -> np.ndarray:
        """GreedyLB on ``ctx.proxy_loads``, or on the measured loads without them (``memory`` unused)."""
        predicted = ctx.proxy_loads if ctx.proxy_loads is not None else ctx.tile_loads
        return charm_greedy(predicted, ctx.cluster, ctx.background)


@dataclass(frozen=True)
class Locality(_Dynamic):
    """The locality-aware balancer of the contact-mechanics paper (§V-B, Algorithm 2), applied to tiles.

    Registered as ``tile-locality`` (``locality`` still names it, deprecated: the job placement
    policy of that name, :mod:`shoal.placement.jobs`, is the paper's algorithm on jobs).
    Tiles go heaviest first: a tile stays on its own node, or goes to a neighbour's node, while
    that node stays under the average load per core; the rest go greedily, biggest first, to
    the least loaded node. (A node may fill up to the average exactly, not just below it, so
    that a perfectly balanced placement is kept as it is.)
    """

    name: str = "tile-locality"
    summary: str = "keep tiles on their own or a neighbour's node under the average, then greedy"

    def rebalance(self, ctx: BalanceContext, memory: dict) -> np.ndarray:
        """Algorithm 2 on the period's loads per tile and ``ctx.tiling``'s neighbours (``memory`` unused)."""
        cores = ctx.cluster.core_array
        loads = ctx.tile_loads
        avg = loads.sum() / ctx.cluster.total_cores * (1 + 1e-12)
        load = np.zeros(ctx.cluster.nodes)
        owner = np.full(len(loads), -1, dtype=np.int64)
        pending = []
        for t in np.lexsort((np.arange(len(loads)), -loads)):
            homes = [int(ctx.owner[t])] + sorted({int(ctx.owner[n]) for n in ctx.tiling.neighbours[t]} -
                                                 {int(ctx.owner[t])})
            for node in homes:
                if load[node] + loads[t] / cores[node] <= avg:
                    owner[t] = node
                    load[node] += loads[t] / cores[node]
                    break
            else:
                pending.append(t)
        for t in sorted(pending, key=lambda t: (-loads[t], t)):
            node = int(np.argmin(load))
            owner[t] = node
            load[node] += loads[t] / cores[node]
        return owner


@dataclass(frozen=True)
class MetisPeriodic(_Dynamic):
    """METIS afresh every period on the measured loads (vertex weights) and the halo bytes the
    tiles' state sizes imply (edge weights); the new parts go to the nodes that already hold
    most of their bytes, so a partition that barely changed moves barely anything."""

    name: str = "metis-periodic"
    summary: str = "METIS on the measured loads every period, parts matched to nodes to move the fewest bytes"
    params: type = MetisParams
    needs: frozenset[str] = frozenset({"graph"})

    def rebalance(self, ctx: BalanceContext, memory: dict) -> np.ndarray:
        """METIS's parts of ``ctx``'s tile graph, each on the node that holds most of its bytes
        (``memory`` unused: every period starts afresh)."""
        check_needs(self, ctx.tiling)
        p = self.settings(ctx)
        parts = metis_parts(ctx.tiling, ctx.cluster, ctx.tile_loads, ctx.tile_bytes, p.seed, p.ufactor)
        return keep_most_in_place(parts, ctx.owner, ctx.cluster, ctx.tile_bytes)


@dataclass(frozen=True)
class Oracle(_Dynamic):
    """GreedyLB on the true loads of the coming period: what perfect foresight would reach.

    A bound for reports, not a policy a run can use (a shoal addition): only a replay knows the
    future, and hands it over as ``ctx.future_loads``; without them it is :class:`Greedy`.
    """

    name: str = "oracle"
    summary: str = "GreedyLB on the true loads of the coming period (a bound, for reports)"

    def rebalance(self, ctx: BalanceContext, memory: dict) -> np.ndarray:
        """GreedyLB on ``ctx.future_loads``, or on the measured loads without them (``memory`` unused)."""
        loads = ctx.future_loads if ctx.future_loads is not None else ctx.tile_loads
        return charm_greedy(loads, ctx.cluster, ctx.background)


for _policy in (Greedy(), Refine(), GreedyPhase(), GreedyRefine(), Swap(), Speculative(), Locality(), MetisPeriodic(),
                Oracle(), NoBalancing()):
    register(_policy)
