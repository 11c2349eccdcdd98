"""Charm++'s GreedyLB and RefineLB, as the Charm++ 6.x central load balancers run them.

Both strategies see *processing elements* (PEs, one per core) carrying *objects* (here:
tiles) with measured loads, and each PE has a *background load* (Charm++: ``bg_walltime``,
the time the PE spent on work no migratable object owns).

GreedyLB (``GreedyLB.C``)
    Forget the current placement. Sort the objects heaviest first and give each in turn to
    the PE with the least load so far, taken from a min-heap whose keys start at the PEs'
    background loads. This is LPT list scheduling, so its maximum load is within
    ``4/3 - 1/(3m)`` of the optimum on ``m`` PEs (without background load).

RefineLB (``RefineLB.C`` -> ``Refiner::Refine`` -> ``Refiner::multirefine(reset=true)``)
    Keep the current placement and move as little as possible. With
    ``average = (sum of object loads + sum of background loads) / PEs``, a PE is *heavy* when
    its load exceeds ``overload * average`` and *light* when its load is below ``average``.
    One pass (``Refiner::refine``) puts the heavy PEs in a max-heap and, while the heap is
    not empty, takes the most loaded one (the donor) and moves the heaviest (object of the
    donor, light PE) pair whose sum stays *strictly* below ``overload * average``; objects
    of load 0 never move. The receiver leaves the light set once it is above the average;
    the donor goes back into the heap while still heavy, or joins the light set once it is
    below the average. If no pair fits, the pass fails at once and keeps the moves it made.
    ``multirefine`` runs a pass at ``overload = tolerance`` (1.05 in RefineLB); if it fails,
    a pass at ``tolerance + k_max * 0.01`` with ``k_max = int((max/average - tolerance)/0.01
    + 1)``, run *from the failed pass's state*; if that fails too, it stops there. Otherwise
    it binary-searches the step index ``k`` in ``(0, k_max)``: each probe puts every object
    back on its original PE and runs a pass at ``k * 0.01 + tolerance``. The result is what
    the last pass left, even when that pass failed halfway (as in Charm++).

Faithfulness
    Loads are summed, compared and updated in the same order and with the same strict or
    loose comparisons as Charm++ (no epsilons): the average adds the object loads in id
    order and then the background loads in PE order; a PE's load is its running object
    load plus its background load; overloads are computed as ``k * 0.01 + tolerance``
    (Charm++ compiled without fused multiply-add, the x86-64 default). All PEs are
    available and of equal speed, and every object is migratable.

Tie-breaks (deterministic)
    * GreedyLB: among objects of equal load the lower object id goes first; among equally
      loaded PEs the lower PE index wins (heap keys ``(load, pe)``). Charm++ uses
      ``std::sort`` and ``std::*_heap``, whose order among equal keys is unspecified.
    * RefineLB donor: among equally loaded heavy PEs the lower PE index comes out first.
    * RefineLB pair: the key of a pair is its object's load alone, so pairs tie whenever the
      best object fits on more than one light PE -- common, not only on equal loads. The
      first pair found wins, scanning the light PEs by ascending PE index and, for each, the
      donor's objects by ascending object id: the receiver is the lowest-index light PE the
      object fits on, not the lightest one.

    Charm++ scans linked lists that hold their elements in *reverse* insertion order: the
    light PEs highest index first, with donors that turned light during the pass ahead of
    them; a PE's objects highest id first, with objects it received ahead of them; and its
    heavy PEs come out of a binary heap (``ckheap.C``) whose order among equal loads depends
    on its history. These orders are the one place this module differs from Charm++ by
    default. They change which light PE receives an object whenever several could, and which
    object or donor goes first on exact ties of load. ``refine_lb(..., charm_order=True)``
    follows Charm++'s orders instead (its lists and heap reproduced exactly).

Reset quirk (``stale_reset``)
    Before each search probe, Charm++ zeroes every PE's object load and re-assigns the
    objects, but only PEs that get an object back have their total load recomputed: a PE
    that started without objects keeps the load the previous pass left on it until it
    receives one, and may look light-but-full or even heavy. By default such a PE is reset
    to its background load (the semantics above); ``stale_reset=True`` reproduces Charm++.
    ``charm_order=True, stale_reset=True`` is Charm++ 6's RefineLB step for step.

PE expansion (node-level wrappers :func:`charm_greedy` and :func:`charm_refine`)
    Node ``k`` with ``c`` cores becomes ``c`` consecutive PEs (:func:`pe_nodes`). A node's
    background load -- the time its cores spent on work no tile owns -- is split evenly over
    its PEs. RefineLB needs each tile's current PE, which a node-level placement does not
    record: the node's tiles are dealt to its PEs heaviest first onto the least loaded PE
    (GreedyLB within the node), which models a node whose idle cores take the next ready
    tile. A tile's new owner is the node of its final PE; a tile that only changed PE inside
    its node has not migrated. On nodes of one core each the wrappers are exactly the
    PE-level algorithms run on nodes.

Charm++ 7 dropped ``GreedyLB.C`` and ``RefineLB.C`` and serves those names through TreeLB
(``greedy.h``, ``refine.h``). Its greedy strategy is the same algorithm (in single
precision); its ``RefineLB`` is a different one (``RefineA``: a search around GreedyLB's
maximum load), which this module does not model.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike

from ..cluster import Cluster
from ..errors import ShoalError

__all__ = [
    "RefineOutcome",
    "charm_greedy",
    "charm_refine",
    "greedy_lb",
    "pe_background",
    "pe_nodes",
    "refine_lb",
    "spread_over_pes",
]

OVERLOAD_STEP = 0.01
"""Step between the overloads ``multirefine`` tries (``overloadStep`` in ``Refiner.C``)."""


# ---------------------------------------------------------------------------------------------
# Input checks


def _load_vector(values: ArrayLike, name: str, length: int | None = None) -> np.ndarray:
    """A 1-D float64 copy of ``values``, finite and >= 0, optionally of a given length."""
    arr = np.array(values, dtype=np.float64)
    if arr.ndim != 1:
        raise ShoalError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if length is not None and len(arr) != length:
        raise ShoalError(f"{name} must have {length} values, got {len(arr)}")
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise ShoalError(f"{name} must be finite and >= 0")
    return arr


def _index_vector(values: ArrayLike, name: str, length: int, bound: int) -> np.ndarray:
    """A 1-D int64 copy of ``values`` with ``length`` entries, each in ``[0, bound)``."""
    arr = np.asarray(values)
    if arr.ndim != 1 or len(arr) != length:
        raise ShoalError(f"{name} must have {length} entries, got shape {arr.shape}")
    if length and not np.issubdtype(arr.dtype, np.integer):
        raise ShoalError(f"{name} must hold integers, got {arr.dtype}")
    arr = arr.astype(np.int64)
    if length and (arr.min() < 0 or arr.max() >= bound):
        raise ShoalError(f"{name} must lie in [0, {bound}), got values in [{arr.min()}, {arr.max()}]")
    return arr


# ---------------------------------------------------------------------------------------------
# PEs


def pe_nodes(cores: Sequence[int] | ArrayLike) -> np.ndarray:
    """The node of every PE, one PE per core.

    Parameters
    ----------
    cores : sequence of int
        Cores on each node (all positive).

    Returns
    -------
    ndarray of int64
        Node ``k`` with ``cores[k]`` cores becomes ``cores[k]`` consecutive PEs, so
        ``pe_nodes([2, 1]) == [0, 0, 1]``.
    """
    arr = np.asarray(cores)
    if arr.ndim != 1 or len(arr) == 0:
        raise ShoalError(f"cores must be a non-empty list of core counts, got shape {arr.shape}")
    if not np.issubdtype(arr.dtype, np.integer) or np.any(arr <= 0):
        raise ShoalError(f"cores per node must be positive integers, got {arr.tolist()}")
    return np.repeat(np.arange(len(arr), dtype=np.int64), arr.astype(np.int64))


def pe_background(cluster: Cluster, background_node: ArrayLike | None = None) -> np.ndarray:
    """Split each node's background load evenly over its PEs.

    Parameters
    ----------
    cluster : Cluster
        The nodes and their cores.
    background_node : array_like or None
        Background load of every node: time its cores together spent on work no tile owns.
        ``None`` means none.

    Returns
    -------
    ndarray of float64
        Background load of every PE (``background_node[k] / cores[k]`` on each PE of node k).
    """
    if background_node is None:
        return np.zeros(cluster.total_cores)
    bg = _load_vector(background_node, "background_node", cluster.nodes)
    return np.repeat(bg / cluster.core_array, cluster.core_array)


# ---------------------------------------------------------------------------------------------
# GreedyLB


def greedy_lb(loads: ArrayLike, pe_node: ArrayLike, background: ArrayLike) -> np.ndarray:
    """Charm++ GreedyLB: heaviest object first onto the least loaded PE.

    Parameters
    ----------
    loads : array_like of float
        Load of every object (>= 0).
    pe_node : array_like of int
        Node of every PE (see :func:`pe_nodes`); its length is the number of PEs. GreedyLB
        ignores the topology, so only the length matters.
    background : array_like of float
        Background load of every PE: the PE's load before it receives any object.

    Returns
    -------
    ndarray of int64
        The PE of every object.

    Notes
    -----
    Objects are taken by decreasing load, the lower object id first among equal loads; each
    goes to the PE at the top of a min-heap keyed ``(load, pe)``, so among equally loaded
    PEs the lower index wins. The current placement plays no part.
    """
    npes = len(np.asarray(pe_node))
    if npes == 0:
        raise ShoalError("greedy_lb needs at least one PE")
    w = _load_vector(loads, "loads")
    bg = _load_vector(background, "background", npes)
    order = np.lexsort((np.arange(len(w)), -w))
    heap = [(b, p) for p, b in enumerate(bg.tolist())]
    heapq.heapify(heap)
    weights = w.tolist()
    pe = np.empty(len(w), dtype=np.int64)
    for obj in order.tolist():
        load, p = heap[0]
        pe[obj] = p
        heapq.heapreplace(heap, (load + weights[obj], p))
    return pe


# ---------------------------------------------------------------------------------------------
# RefineLB


@dataclass
class RefineOutcome:
    """What :func:`refine_lb` did.

    Attributes
    ----------
    pe : ndarray of int64
        Final PE of every object.
    passes : list of (float, bool)
        ``(overload, succeeded)`` of every refine pass, in the order they ran.
    overload : float
        Overload of the last pass (the one whose state is the result).
    average : float
        The average PE load the passes compared against.
    moves : list of list of (int, int, int)
        For every pass, its moves ``(object, donor PE, receiver PE)`` in order.
    """

    pe: np.ndarray
    passes: list[tuple[float, bool]]
    overload: float
    average: float = 0.0
    moves: list[list[tuple[int, int, int]]] = field(default_factory=list)


class _CkMaxHeap:
    """The binary max-heap of ``ckheap.C`` (strict comparisons), keyed by a fixed load.

    Equal keys come out in whatever order its sift-up and sift-down leave them; reproducing
    that is the point of this class.
    """

    def __init__(self) -> None:
        self.h: list[tuple[float, int]] = []

    def __bool__(self) -> bool:
        return bool(self.h)

    def push(self, load: float, pe: int) -> None:
        h = self.h
        h.append((load, pe))
        cur = len(h) - 1
        while cur:
            parent = (cur - 1) // 2
            if not h[cur][0] > h[parent][0]:
                break
            h[cur], h[parent] = h[parent], h[cur]
            cur = parent

    def pop(self) -> int:
        h = self.h
        top = h[0][1]
        h[0] = h[-1]
        h.pop()
        count, cur = len(h), 0
        while 2 * cur + 1 < count:
            c1, c2 = 2 * cur + 1, 2 * cur + 2
            best = c1 if c2 >= count or h[c1][0] > h[c2][0] else c2
            if not h[best][0] > h[cur][0]:
                break
            h[best], h[cur] = h[cur], h[best]
            cur = best
        return top


class _IndexHeap:
    """Max-heap of PEs by load, the lower PE index first among equal loads."""

    def __init__(self) -> None:
        self.h: list[tuple[float, int]] = []

    def __bool__(self) -> bool:
        return bool(self.h)

    def push(self, load: float, pe: int) -> None:
        heapq.heappush(self.h, (-load, pe))

    def pop(self) -> int:
        return heapq.heappop(self.h)[1]


class _Refiner:
    """PE and object bookkeeping of ``Refiner.C``, with its arithmetic order.

    Sets are insertion-ordered dicts: Charm++'s linked lists insert at the head, so walking
    a dict backwards is walking the Charm++ list from its head.
    """

    def __init__(self, weights: list[float], background: list[float], start: list[int], charm_order: bool):
        self.w = weights
        self.bg = background
        self.start = start
        self.charm_order = charm_order
        npes = len(background)
        self.load = list(background)  # a PE without objects weighs its background load
        self.loads = np.array(background, dtype=np.float64)  # the same, for the scans over light PEs
        self.is_light = np.zeros(npes, dtype=bool)  # the light set as a mask, kept in step with it
        self.compute = [0.0] * npes
        self.members: list[dict[int, None]] = [{} for _ in range(npes)]
        self.pe = [0] * len(weights)
        for obj, p in enumerate(start):
            self._add(obj, p)
        self.loads[:] = self.load
        # The start, kept to reset to: re-adding every object in id order rebuilds exactly
        # these sums and these member orders.
        self._initial = (list(self.compute), list(self.load), [dict(m) for m in self.members], list(self.pe))

    def _add(self, obj: int, p: int) -> None:
        self.pe[obj] = p
        self.members[p][obj] = None
        self.compute[p] += self.w[obj]
        self.load[p] = self.compute[p] + self.bg[p]

    def _remove(self, obj: int, p: int) -> None:
        del self.members[p][obj]
        self.compute[p] -= self.w[obj]
        self.load[p] = self.compute[p] + self.bg[p]

    def average(self) -> float:
        total = 0.0
        for x in self.w:
            total += x
        for b in self.bg:
            total += b
        return total / len(self.bg)

    def max_load(self) -> float:
        best = -1.0
        for x in self.load:
            if x > best:
                best = x
        return best

    def reset(self, stale: bool) -> None:
        """Every object back on its original PE.

        Charm++ zeroes the object load of every PE but refreshes the total load only of PEs
        that get an object back; ``stale=True`` keeps that quirk.
        """
        compute, load, members, pe = self._initial
        self.compute, self.pe = list(compute), list(pe)
        self.members = [dict(m) for m in members]
        self.load = [load[p] if members[p] or not stale else self.load[p] for p in range(len(load))]
        self.loads[:] = self.load

    def _best_pair(self, donor: int, light: dict[int, None], limit: float) -> tuple[int, int] | None:
        """The (object, receiver) to move off ``donor``, or None."""
        if not light:
            return None
        load, w = self.load, self.w
        # Rounded addition is monotone, so the lightest light PE takes every object that fits
        # on any light PE: the best pair's object is the heaviest that fits there.
        lightest = float(self.loads[self.is_light].min())
        best, best_obj = 0.0, -1
        if self.charm_order:
            for obj in reversed(self.members[donor]):
                x = w[obj]
                if x + lightest < limit and x > best:
                    best, best_obj = x, obj
        else:
            for obj in self.members[donor]:
                x = w[obj]
                if x + lightest < limit and (x > best or (x == best and obj < best_obj)):
                    best, best_obj = x, obj
        if best_obj < 0:
            return None
        # The first light PE of the scan on which that object fits.
        if self.charm_order:
            receiver = next(p for p in reversed(light) if best + load[p] < limit)
        else:
            receiver = min(p for p in light if best + load[p] < limit)
        return best_obj, receiver

    def refine(self, overload: float, avg: float) -> tuple[bool, list[tuple[int, int, int]]]:
        """One ``Refiner::refine`` pass; returns (succeeded, moves)."""
        load = self.load
        heavy = _CkMaxHeap() if self.charm_order else _IndexHeap()
        light: dict[int, None] = {}
        self.is_light[:] = False
        for p, x in enumerate(load):
            if x > overload * avg:
                heavy.push(x, p)
            elif x < avg:
                light[p] = None
                self.is_light[p] = True
        moves: list[tuple[int, int, int]] = []
        while heavy:
            donor = heavy.pop()
            pair = self._best_pair(donor, light, overload * avg)
            if pair is None:
                return False, moves
            obj, receiver = pair
            self._remove(obj, donor)
            self._add(obj, receiver)
            self.loads[donor], self.loads[receiver] = load[donor], load[receiver]
            moves.append((obj, donor, receiver))
            if load[receiver] > avg:
                del light[receiver]
                self.is_light[receiver] = False
            if load[donor] > overload * avg:
                heavy.push(load[donor], donor)
            elif load[donor] < avg:
                light[donor] = None
                self.is_light[donor] = True
        return True, moves


def refine_lb(
    loads: ArrayLike,
    pe_of: ArrayLike,
    background: ArrayLike,
    tolerance: float = 1.05,
    *,
    charm_order: bool = False,
    stale_reset: bool = False,
) -> RefineOutcome:
    """Charm++ RefineLB: move objects off PEs above ``overload x average`` onto light PEs.

    Parameters
    ----------
    loads : array_like of float
        Load of every object (>= 0).
    pe_of : array_like of int
        Current PE of every object.
    background : array_like of float
        Background load of every PE; its length is the number of PEs.
    tolerance : float
        The first overload tried (``Refiner(1.05)`` in RefineLB).
    charm_order : bool
        Break ties as Charm++'s data structures do (see the module docstring) instead of by
        index. Deterministic either way.
    stale_reset : bool
        Reproduce a quirk of ``Refiner::multirefine``: when it puts the objects back on
        their original PEs before a search pass, a PE that gets no object back keeps the
        total load the previous pass left it with (until it receives an object). The
        default ``False`` resets such a PE to its background load. With
        ``charm_order=True, stale_reset=True`` this is Charm++ 6's RefineLB step for step.

    Returns
    -------
    RefineOutcome
        Final PE of every object, the passes run and the last pass's overload.

    Notes
    -----
    ``average = (sum(loads) + sum(background)) / PEs``; heavy means load > overload x
    average, light means load < average. A pass takes the most loaded heavy PE (lower index
    on ties) and moves the pair (donor's object, light PE) with the largest object load
    (> 0) that keeps the receiver strictly below overload x average; among pairs of equal
    object load -- in particular one object that fits on several light PEs -- the first
    found wins, scanning light PEs by ascending index and, for each, the donor's objects by
    ascending id (``charm_order=True``: in Charm++'s list orders; see the module
    docstring). A pass fails, keeping its moves, as soon as a donor has no such pair, and
    succeeds once no PE is heavy. ``multirefine`` then tries ``tolerance``, the maximum
    step ``k_max`` from the failed state, and a binary search over the steps in between,
    each probe starting from the original placement; the result is the last pass's state.
    See the module docstring for details.
    """
    bg = _load_vector(background, "background")
    npes = len(bg)
    if npes == 0:
        raise ShoalError("refine_lb needs at least one PE")
    w = _load_vector(loads, "loads")
    start = _index_vector(pe_of, "pe_of", len(w), npes)
    tolerance = float(tolerance)
    if not np.isfinite(tolerance) or tolerance <= 0:
        raise ShoalError(f"tolerance must be positive and finite, got {tolerance}")

    state = _Refiner(w.tolist(), bg.tolist(), start.tolist(), charm_order)
    avg = state.average()
    top = state.max_load()
    passes: list[tuple[float, bool]] = []
    moves: list[list[tuple[int, int, int]]] = []

    def run(overload: float) -> bool:
        ok, done = state.refine(overload, avg)
        passes.append((overload, ok))
        moves.append(done)
        return ok

    # With avg == 0 (every load 0, or a mean of subnormal loads that underflows) no PE is light
    # and nothing can move: the first pass is the answer.
    if not run(tolerance) and avg > 0.0:
        hi = int((top / avg - tolerance) / OVERLOAD_STEP + 1)
        if run(hi * OVERLOAD_STEP + tolerance):
            lo = 0
            while hi - lo > 1:
                cur = (hi + lo) // 2
                state.reset(stale_reset)
                if run(cur * OVERLOAD_STEP + tolerance):
                    hi = cur
                else:
                    lo = cur
    return RefineOutcome(
        pe=np.asarray(state.pe, dtype=np.int64),
        passes=passes,
        overload=passes[-1][0],
        average=avg,
        moves=moves,
    )


# ---------------------------------------------------------------------------------------------
# Node-level wrappers


def spread_over_pes(
    loads: ArrayLike, owner: ArrayLike, cluster: Cluster, background_node: ArrayLike | None = None
) -> np.ndarray:
    """The PE of every tile inside its node: GreedyLB over the node's own PEs.

    Parameters
    ----------
    loads : array_like of float
        Load of every tile.
    owner : array_like of int
        Node of every tile.
    cluster : Cluster
        The nodes and their cores.
    background_node : array_like or None
        Background load of every node, split evenly over its PEs (``None``: none).

    Returns
    -------
    ndarray of int64
        Each node's tiles go heaviest first onto its least loaded PE (ties: lower tile id
        first, lower PE wins), as when a node's idle cores take the next ready tile.
    """
    w = _load_vector(loads, "loads")
    own = _index_vector(owner, "owner", len(w), cluster.nodes)
    node_of = pe_nodes(cluster.cores)
    bg = pe_background(cluster, background_node)
    first = np.concatenate([[0], np.cumsum(cluster.core_array)[:-1]])
    pe = np.empty(len(w), dtype=np.int64)
    for k in range(cluster.nodes):
        tiles = np.flatnonzero(own == k)
        pes = slice(first[k], first[k] + cluster.cores[k])
        pe[tiles] = first[k] + greedy_lb(w[tiles], node_of[pes], bg[pes])
    return pe


def charm_greedy(loads: ArrayLike, cluster: Cluster, background_node: ArrayLike | None = None) -> np.ndarray:
    """GreedyLB over the cluster's PEs, returned as the node of every tile.

    Parameters
    ----------
    loads : array_like of float
        Load of every tile.
    cluster : Cluster
        The nodes and their cores (one PE per core).
    background_node : array_like or None
        Background load of every node, split evenly over its PEs (``None``: none).

    Returns
    -------
    ndarray of int64
        Owner (node) of every tile.
    """
    node_of = pe_nodes(cluster.cores)
    return node_of[greedy_lb(loads, node_of, pe_background(cluster, background_node))]


def charm_refine(
    loads: ArrayLike,
    owner: ArrayLike,
    cluster: Cluster,
    background_node: ArrayLike | None = None,
    tolerance: float = 1.05,
    *,
    charm_order: bool = False,
    stale_reset: bool = False,
) -> tuple[np.ndarray, RefineOutcome]:
    """RefineLB over the cluster's PEs, starting from a node-level placement.

    Parameters
    ----------
    loads : array_like of float
        Load of every tile.
    owner : array_like of int
        Current node of every tile.
    cluster : Cluster
        The nodes and their cores (one PE per core).
    background_node : array_like or None
        Background load of every node, split evenly over its PEs (``None``: none).
    tolerance : float
        First overload tried (1.05 in RefineLB).
    charm_order, stale_reset : bool
        See :func:`refine_lb`.

    Returns
    -------
    owner : ndarray of int64
        New node of every tile (a tile moved between PEs of one node has not migrated).
    outcome : RefineOutcome
        The PE-level result; the tiles' starting PEs come from :func:`spread_over_pes`.
    """
    start = spread_over_pes(loads, owner, cluster, background_node)
    background = pe_background(cluster, background_node)
    outcome = refine_lb(loads, start, background, tolerance, charm_order=charm_order, stale_reset=stale_reset)
    return pe_nodes(cluster.cores)[outcome.pe], outcome
