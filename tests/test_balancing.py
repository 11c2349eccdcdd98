"""Invariants of the dynamic placement policies, over every key of the registry."""

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from shoal.cluster import Cluster
from shoal.placement import POLICIES, BalanceContext, get_policy, node_loads
from shoal.placement.dynamic import greedy_assign
from shoal.tiling import Tiling

DYNAMIC = sorted(n for n, p in POLICIES.items() if p.dynamic)


@st.composite
def situations(draw):
    counts = (draw(st.integers(1, 6)), draw(st.integers(1, 6)))
    tiling = Tiling.from_counts((4 * counts[0], 4 * counts[1]), counts)
    nodes = draw(st.integers(1, min(5, tiling.ntiles)))
    cluster = Cluster(tuple(draw(st.integers(1, 3)) for _ in range(nodes)))
    loads = np.array(draw(st.lists(st.floats(0, 10), min_size=tiling.ntiles, max_size=tiling.ntiles)))
    owner = np.array(draw(st.lists(st.integers(0, nodes - 1), min_size=tiling.ntiles, max_size=tiling.ntiles)))
    return BalanceContext(tiling, cluster, owner, loads, step=draw(st.integers(0, 100)),
                          future_loads=loads[::-1].copy(), proxy_loads=loads * 0.5)


@pytest.mark.parametrize("name", DYNAMIC)
@given(ctx=situations())
def test_every_policy_returns_a_complete_valid_owner_array(name, ctx):
    owner = get_policy(name).rebalance(ctx, {})
    assert owner.shape == (ctx.tiling.ntiles,)
    assert owner.min() >= 0 and owner.max() < ctx.cluster.nodes
    assert np.array_equal(owner, get_policy(name).rebalance(ctx, {}))  # deterministic


@pytest.mark.parametrize("name", DYNAMIC)
def test_every_policy_has_an_initial_placement(name):
    tiling, cluster = Tiling.from_counts((16, 16), (4, 4)), Cluster.uniform(4, 1)
    owner = get_policy(name).place(tiling, cluster, 0)
    assert sorted(np.bincount(owner).tolist()) == [4, 4, 4, 4]


@given(st.lists(st.floats(0.01, 10), min_size=2, max_size=8), st.integers(2, 3))
def test_greedy_is_within_the_lpt_bound_of_the_optimum(loads, nodes):
    loads = np.array(loads)
    cluster = Cluster.uniform(nodes, 1)
    greedy = node_loads(greedy_assign(loads, cluster), loads, cluster).max()
    best = min(np.bincount(assign, weights=loads, minlength=nodes).max()
               for assign in itertools.product(range(nodes), repeat=len(loads)))
    assert greedy <= (4 / 3 - 1 / (3 * nodes)) * best + 1e-12


def test_refine_moves_nothing_when_every_node_is_within_tolerance():
    tiling, cluster = Tiling.from_counts((16, 16), (4, 4)), Cluster.uniform(4, 1)
    owner = np.arange(16) % 4
    loads = np.ones(16) + 0.01 * (np.arange(16) % 4 == 0)  # node 0 is 1% over: within 5%
    ctx = BalanceContext(tiling, cluster, owner, loads)
    assert np.array_equal(get_policy("refine").rebalance(ctx, {}), owner)


@given(ctx=situations())
def test_refine_only_moves_tiles_off_overloaded_nodes_and_never_overloads_a_receiver(ctx):
    avg = ctx.loads.sum() / ctx.cluster.total_cores
    before = node_loads(ctx.owner, ctx.loads, ctx.cluster)
    new = get_policy("refine").rebalance(ctx, {})
    moved = np.flatnonzero(new != ctx.owner)
    assert all(before[ctx.owner[t]] > 1.05 * avg for t in moved)
    after = node_loads(new, ctx.loads, ctx.cluster)
    receivers = set(new[moved].tolist())
    assert all(after[r] <= 1.05 * avg * (1 + 1e-9) for r in receivers)


def test_greedy_refine_keeps_tiles_where_greedy_quality_allows():
    tiling, cluster = Tiling.from_counts((16, 16), (4, 4)), Cluster.uniform(4, 1)
    loads = np.ones(16)
    owner = get_policy("geometric").place(tiling, cluster, 0)  # four balanced blocks
    ctx = BalanceContext(tiling, cluster, owner, loads)
    assert np.array_equal(get_policy("greedy-refine").rebalance(ctx, {}), owner)  # already as good as greedy
    assert not np.array_equal(get_policy("greedy").rebalance(ctx, {}), owner)  # greedy reshuffles anyway


def test_swap_respects_threshold_and_interval():
    tiling, cluster = Tiling.from_counts((16, 16), (4, 4)), Cluster.uniform(4, 1)
    owner = np.arange(16) % 4
    swap = get_policy("swap")
    params = {"threshold": 0.10, "interval": 10, "smoothing": 1.0}
    calm = BalanceContext(tiling, cluster, owner, np.ones(16) + 0.05 * (owner == 0), step=0, params=params)
    assert np.array_equal(swap.rebalance(calm, {}), owner)  # 5% over: below the threshold
    loads = np.ones(16)
    loads[0] = 5.0  # node 0 far over
    memory = {}
    first = swap.rebalance(BalanceContext(tiling, cluster, owner, loads, step=10, params=params), memory)
    changed = np.flatnonzero(first != owner)
    assert len(changed) == 2 and 0 in changed  # exactly one swap, of the busiest tile
    soon = swap.rebalance(BalanceContext(tiling, cluster, first, loads, step=15, params=params), memory)
    assert np.array_equal(soon, first)  # within the interval: no second swap
    later = swap.rebalance(BalanceContext(tiling, cluster, first, loads, step=20, params=params), memory)
    assert len(np.flatnonzero(later != first)) in (0, 2)


def test_oracle_and_speculative_look_ahead():
    tiling, cluster = Tiling.from_counts((16, 16), (4, 4)), Cluster.uniform(2, 1)
    past, future = np.arange(16.0), np.arange(16.0)[::-1].copy()
    ctx = BalanceContext(tiling, cluster, np.zeros(16, int), past, future_loads=future, proxy_loads=future)
    assert np.array_equal(get_policy("oracle").rebalance(ctx, {}), greedy_assign(future, cluster))
    assert np.array_equal(get_policy("speculative").rebalance(ctx, {}), greedy_assign(future, cluster))


def test_locality_keeps_a_balanced_placement_and_fixes_an_unbalanced_one():
    tiling, cluster = Tiling.from_counts((16, 16), (4, 4)), Cluster.uniform(4, 1)
    owner = get_policy("geometric").place(tiling, cluster, 0)
    ctx = BalanceContext(tiling, cluster, owner, np.ones(16) * 0.999)
    assert np.array_equal(get_policy("locality").rebalance(ctx, {}), owner)
    hot = np.where(owner == 0, 4.0, 1.0)
    new = get_policy("locality").rebalance(BalanceContext(tiling, cluster, owner, hot), {})
    assert node_loads(new, hot, cluster).max() < node_loads(owner, hot, cluster).max()
    # Tiles that moved went to a node that owned one of their neighbours, or to the least loaded.
    assert (new != owner).sum() < 16
