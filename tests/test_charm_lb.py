"""Charm++ GreedyLB and RefineLB (shoal.placement.charm): hand-worked cases and properties.

Hand-worked cases use small integer loads, so every sum is exact and each comparison in a
docstring is the comparison the code makes. Overloads are written ``k * 0.01 + 1.05`` as
Charm++ computes them (``1.1600000000000001`` and friends are that expression's value).
"""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shoal.cluster import Cluster
from shoal.errors import ShoalError
from shoal.placement.charm import (
    RefineOutcome,
    _CkMaxHeap,  # Charm++'s heap, checked against a hand trace
    charm_greedy,
    charm_refine,
    greedy_lb,
    pe_background,
    pe_nodes,
    refine_lb,
    spread_over_pes,
)


def ov(k: int, start: float = 1.05) -> float:
    """The overload multirefine tries at step ``k``."""
    return k * 0.01 + start


def pe_loads(loads, pe, background) -> np.ndarray:
    return np.asarray(background, dtype=float) + np.bincount(
        np.asarray(pe, dtype=np.int64), weights=loads, minlength=len(background)
    )


def moved(before, after) -> list[tuple[int, int, int]]:
    """(object, from, to) of every object whose PE changed."""
    return [(i, int(a), int(b)) for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b]


# ---------------------------------------------------------------------------------------------
# PE expansion


def test_pe_nodes_and_background_split():
    """Node k with c cores -> c consecutive PEs; its background load is split evenly.

    cores (2, 1, 3) -> PEs 0,1 on node 0, PE 2 on node 1, PEs 3,4,5 on node 2.
    background (2, 5, 3) -> 1, 1 | 5 | 1, 1, 1.
    """
    assert pe_nodes([2, 1, 3]).tolist() == [0, 0, 1, 2, 2, 2]
    assert pe_nodes([2, 1, 3]).dtype == np.int64
    cluster = Cluster((2, 1, 3))
    assert pe_background(cluster, [2.0, 5.0, 3.0]).tolist() == [1.0, 1.0, 5.0, 1.0, 1.0, 1.0]
    assert pe_background(cluster).tolist() == [0.0] * 6
    with pytest.raises(ShoalError):
        pe_nodes([2, 0])
    with pytest.raises(ShoalError):
        pe_nodes([])


# ---------------------------------------------------------------------------------------------
# a. GreedyLB


def test_greedy_ties_then_background_changes_the_outcome():
    """3 PEs, objects 0..4 with loads 4, 2, 4, 2, 1.

    Order (heaviest first, lower id first on ties): 0 (4), 2 (4), 1 (2), 3 (2), 4 (1).

    No background, heap keys (load, pe):
      obj 0 (4): all PEs at 0, lowest index -> PE 0; loads [4, 0, 0]
      obj 2 (4): PEs 1, 2 at 0 -> PE 1;                 loads [4, 4, 0]
      obj 1 (2): PE 2 (0) -> PE 2;                      loads [4, 4, 2]
      obj 3 (2): PE 2 (2) -> PE 2;                      loads [4, 4, 4]
      obj 4 (1): all at 4, lowest index -> PE 0;        loads [5, 4, 4]   max 5
    pe = [0, 2, 1, 2, 0].

    Background (0, 0, 3): PE loads start at [0, 0, 3].
      obj 0 (4): PE 0 (0, lower than PE 1) -> [4, 0, 3]
      obj 2 (4): PE 1 (0)                   -> [4, 4, 3]
      obj 1 (2): PE 2 (3)                   -> [4, 4, 5]
      obj 3 (2): PEs 0, 1 at 4 -> PE 0      -> [6, 4, 5]
      obj 4 (1): PE 1 (4)                   -> [6, 5, 5]   max 6
    pe = [0, 2, 1, 0, 1]: objects 3 and 4 land elsewhere.
    """
    loads = [4.0, 2.0, 4.0, 2.0, 1.0]
    nodes = pe_nodes([1, 1, 1])
    pe = greedy_lb(loads, nodes, [0.0, 0.0, 0.0])
    assert pe.tolist() == [0, 2, 1, 2, 0]
    assert pe_loads(loads, pe, [0, 0, 0]).tolist() == [5.0, 4.0, 4.0]

    pe_bg = greedy_lb(loads, nodes, [0.0, 0.0, 3.0])
    assert pe_bg.tolist() == [0, 2, 1, 0, 1]
    assert pe_loads(loads, pe_bg, [0, 0, 3]).tolist() == [6.0, 5.0, 5.0]
    assert moved(pe, pe_bg) == [(3, 2, 0), (4, 0, 1)]


def test_greedy_equal_loads_go_round_robin():
    """Equal loads, no background: object i goes to PE i mod m (both tie-breaks at once)."""
    pe = greedy_lb([1.0] * 7, pe_nodes([1, 1, 1]), [0.0, 0.0, 0.0])
    assert pe.tolist() == [0, 1, 2, 0, 1, 2, 0]


# ---------------------------------------------------------------------------------------------
# b-d. RefineLB


def test_refine_first_pass_succeeds():
    """3 PEs, no background. Objects (id: load @ PE):
      0: 3 @ 0, 1: 2 @ 0, 2: 2 @ 0, 3: 1 @ 0, 4: 2 @ 1, 5: 1 @ 2, 6: 1 @ 2
    PE loads [8, 2, 2]; average 12 / 3 = 4; pass at 1.05: threshold 1.05 * 4 = 4.2.
    Heavy (> 4.2): PE 0. Light (< 4): PEs 1, 2.

    Donor PE 0 (8); the lightest light PE has 2, so objects with x + 2 < 4.2 fit: 2, 2, 1.
      Largest is 2, objects 1 and 2 tie -> object 1 (lower id); receivers with 2 + load < 4.2:
      PEs 1 and 2 -> PE 1 (lower index). Move 1: PE 0 -> PE 1. Loads [6, 4, 2].
      PE 1 at 4 is not above the average: it stays in the light set. PE 0 (6) still heavy.
    Donor PE 0 (6): PE 1: 2 + 4 = 6 no; PE 2: 2 + 2 = 4 < 4.2 -> object 2 (load 2; 3 + 2 = 5
      does not fit). Move 2: PE 0 -> PE 2. Loads [4, 4, 4]. PE 0 is neither heavy nor light.
    Heap empty: the pass succeeds, one pass in all. Max load 4.

    (Charm++ scans light PEs and objects in reverse order and would first move object 2 to
    PE 2, then object 1 to PE 1: the same loads, the tie broken the other way.)
    """
    loads = [3.0, 2.0, 2.0, 1.0, 2.0, 1.0, 1.0]
    start = [0, 0, 0, 0, 1, 2, 2]
    out = refine_lb(loads, start, [0.0, 0.0, 0.0])
    assert isinstance(out, RefineOutcome)
    assert out.average == 4.0
    assert out.passes == [(1.05, True)]
    assert out.overload == 1.05
    assert out.moves == [[(1, 0, 1), (2, 0, 2)]]
    assert out.pe.tolist() == [0, 1, 2, 0, 1, 2, 2]
    assert moved(start, out.pe) == [(1, 0, 1), (2, 0, 2)]
    assert pe_loads(loads, out.pe, [0, 0, 0]).max() == 4.0


def test_refine_first_pass_fails_then_binary_search():
    """2 PEs. Objects 0: 3 @ 0, 1: 3 @ 0, 2: 2 @ 1. Loads [6, 2]; average 4; max 6.

    Pass 1.05 (threshold 4.2): donor PE 0, light PE 1 (2): 3 + 2 = 5 >= 4.2 -> FAILS, no move.
    k_max = int((6/4 - 1.05) / 0.01 + 1) = int(45.99..) = 45 -> overload 1.5, threshold 6.0,
      run from the failed state (unchanged): PE 0 (6) is not > 6 -> succeeds, no move.
    Binary search over (lo, hi) = (0, 45), every probe from the original placement:
      k=22, 1.27, threshold 5.08: 3 + 2 = 5 < 5.08 -> move object 0 (tie with 1, lower id)
            to PE 1 (5 > 4: leaves the light set); PE 0 (3) turns light -> success, hi = 22
      k=11, 1.16, threshold 4.64: 5 >= 4.64 -> fail, lo = 11
      k=16, 1.21, threshold 4.84: fail, lo = 16
      k=19, 1.24, threshold 4.96: fail, lo = 19
      k=20, 1.25, threshold 5.0 : 5 < 5 is false (strict) -> fail, lo = 20
      k=21, 1.26, threshold 5.04: success as at k=22, hi = 21; hi - lo = 1: stop.
    Result: the k=21 pass: object 0 on PE 1, loads [3, 5], max 5, overload 1.26.
    """
    loads = [3.0, 3.0, 2.0]
    start = [0, 0, 1]
    out = refine_lb(loads, start, [0.0, 0.0])
    assert out.average == 4.0
    assert out.passes == [
        (1.05, False),
        (ov(45), True),
        (ov(22), True),
        (ov(11), False),
        (ov(16), False),
        (ov(19), False),
        (ov(20), False),
        (ov(21), True),
    ]
    assert ov(45) == 1.5 and ov(20) * 4.0 == 5.0
    assert out.overload == ov(21)
    assert out.moves == [[], [], [(0, 0, 1)], [], [], [], [], [(0, 0, 1)]]
    assert out.pe.tolist() == [1, 0, 1]
    assert moved(start, out.pe) == [(0, 0, 1)]
    assert pe_loads(loads, out.pe, [0, 0]).tolist() == [3.0, 5.0]


def test_refine_last_search_pass_fails_and_keeps_its_partial_moves():
    """2 PEs. Objects (id: load @ PE): 0: 1 @ 0, 1: 3 @ 0, 2: 9 @ 1, 3: 7 @ 0, 4: 4 @ 1, 5: 6 @ 0.
    Loads [17, 13]; average 15; max 17.

    Pass 1.05 (threshold 15.75): donor PE 0 (17), light PE 1 (13): x + 13 < 15.75 -> x < 2.75:
      object 0 (1) -> PE 1 (14, stays light). PE 0 (16) still heavy: x + 14 < 15.75 -> x < 1.75:
      none of 3, 7, 6 -> FAILS with one move made.
    k_max = int((17/15 - 1.05) / 0.01 + 1) = int(9.33..) = 9 -> overload 1.14, threshold 17.1,
      from the failed state [16, 14]: nothing heavy -> succeeds, no move.
    Binary search (0, 9), each probe from the original [17, 13]:
      k=4, 1.09, threshold 16.35: x < 3.35 -> object 1 (3) to PE 1 (16 > 15: leaves the light
           set); PE 0 (14) turns light -> success, hi = 4
      k=2, 1.07, threshold 16.05: x < 3.05 -> object 1 again (16 < 16.05) -> success, hi = 2
      k=1, 1.06, threshold 15.9 : x < 2.9 -> object 0 (1) to PE 1 (14); PE 0 (16) still heavy;
           x + 14 < 15.9 -> x < 1.9: nothing -> FAILS, lo = 1; hi - lo = 1: stop.
    The result is that failed pass's state: object 0 on PE 1, loads [16, 14], max 16 --
    neither the original placement (max 17) nor the last successful pass's (object 1 moved).
    """
    loads = [1.0, 3.0, 9.0, 7.0, 4.0, 6.0]
    start = [0, 0, 1, 0, 1, 0]
    out = refine_lb(loads, start, [0.0, 0.0])
    assert out.average == 15.0
    assert out.passes == [(1.05, False), (ov(9), True), (ov(4), True), (ov(2), True), (ov(1), False)]
    assert out.overload == ov(1)
    assert out.moves == [[(0, 0, 1)], [], [(1, 0, 1)], [(1, 0, 1)], [(0, 0, 1)]]
    assert out.pe.tolist() == [1, 0, 1, 0, 1, 0]
    assert moved(start, out.pe) == [(0, 0, 1)]
    assert pe_loads(loads, out.pe, [0, 0]).tolist() == [16.0, 14.0]
    best_success = [0, 1, 1, 0, 1, 0]  # the k=2 pass
    assert out.pe.tolist() != start and out.pe.tolist() != best_success


def test_refine_stale_reset_reproduces_charm_quirk():
    """2 PEs, objects 0: 4 @ 0, 1: 3 @ 0; PE 1 starts empty. Loads [7, 0]; average 3.5.

    Both modes: pass 1.05 (threshold 3.675): object 1 (3) -> PE 1 (3); PE 0 (4) still heavy,
    4 + 3 does not fit -> fail. k_max = int((2 - 1.05)/0.01 + 1) = 96 -> 2.01: from [4, 3]
    nothing is heavy -> success.

    Reset as documented (PE 1 back to 0): k=48 (1.53, threshold 5.355): object 0 (4) -> PE 1
    -> success; k=24 (1.29) success; k=12 (1.17, 4 < 4.095) success; k=6 (1.11): 4 >= 3.885,
    object 1 moves, PE 0 still heavy -> fail; k=9 (1.14, 3.99) fail; k=10 (1.15, 4.025)
    success. Result: object 0 on PE 1, loads [3, 4], overload 1.15.

    Charm++'s reset (``stale_reset=True``) leaves PE 1 at the 3 it had, as it gets no object
    back: k=48: x + 3 < 5.355 -> nothing -> fail; k=72 (1.77, 6.195): object 1 (3) fits ->
    success (PE 1 now truly 3); k=60 (1.65, 5.775) fail; k=66 (1.71, 5.985): 3 + 3 = 6 -> fail;
    k=69 (1.74, 6.09) success; k=67 (1.72, 6.02) success. Result: object 1 on PE 1, loads [4, 3].
    """
    loads, start = [4.0, 3.0], [0, 0]
    fixed = refine_lb(loads, start, [0.0, 0.0])
    assert fixed.passes == [
        (1.05, False), (ov(96), True), (ov(48), True), (ov(24), True),
        (ov(12), True), (ov(6), False), (ov(9), False), (ov(10), True),
    ]  # fmt: skip
    assert fixed.pe.tolist() == [1, 0]
    stale = refine_lb(loads, start, [0.0, 0.0], stale_reset=True)
    assert stale.passes == [
        (1.05, False), (ov(96), True), (ov(48), False), (ov(72), True),
        (ov(60), False), (ov(66), False), (ov(69), True), (ov(67), True),
    ]  # fmt: skip
    assert stale.pe.tolist() == [0, 1]
    assert stale.moves[-1] == [(1, 0, 1)]


def test_refine_charm_order_picks_another_receiver():
    """3 PEs. Objects 0: 7 @ 0, 1: 6 @ 0, 2: 14 @ 2, 3: 8 @ 0, 4: 13 @ 1, 5: 15 @ 0.
    Loads [36, 13, 14]; average 63 / 3 = 21; pass at 1.05: threshold 22.05. Heavy PE 0;
    light PEs 1 (13), 2 (14). No two loads are equal.

    Donor PE 0 (36): heaviest that fits the lightest light PE: x + 13 < 22.05 -> x < 9.05:
    object 3 (8). It fits on PE 1 (21) and on PE 2 (22 < 22.05).
      By index: PE 1 -> loads [28, 21, 14]; PE 1 stays light (21 is not > 21). Donor (28):
        x + 14 < 22.05 -> object 0 (7) -> PE 2 (21; PE 1 would reach 28). Loads [21, 21, 21].
      Charm++ order: the light list is [2, 1] (head insertion), so PE 2 -> loads [28, 13, 22];
        PE 2 leaves the light set (22 > 21). Donor (28): x + 13 < 22.05 -> object 0 (7) ->
        PE 1. Loads [21, 20, 22].
    Both passes succeed at 1.05; the receiver order alone changes the final maximum.
    """
    loads = [7.0, 6.0, 14.0, 8.0, 13.0, 15.0]
    start = [0, 0, 2, 0, 1, 0]
    by_index = refine_lb(loads, start, [0.0, 0.0, 0.0])
    assert by_index.passes == [(1.05, True)]
    assert by_index.moves == [[(3, 0, 1), (0, 0, 2)]]
    assert by_index.pe.tolist() == [2, 0, 2, 1, 1, 0]
    assert pe_loads(loads, by_index.pe, [0, 0, 0]).tolist() == [21.0, 21.0, 21.0]
    charm = refine_lb(loads, start, [0.0, 0.0, 0.0], charm_order=True)
    assert charm.passes == [(1.05, True)]
    assert charm.moves == [[(3, 0, 2), (0, 0, 1)]]
    assert charm.pe.tolist() == [1, 0, 2, 2, 1, 0]
    assert pe_loads(loads, charm.pe, [0, 0, 0]).tolist() == [21.0, 20.0, 22.0]


def test_refine_charm_order_on_the_first_pass_case():
    """The case of test_refine_first_pass_succeeds in Charm++'s order. Light list [2, 1];
    PE 0's objects [3, 2, 1, 0] (head insertion). Donor PE 0 (8), threshold 4.2:
      PE 2 (2): object 3 (1) fits, best 1; object 2 (2) fits, best 2; object 1 (2) is not
      larger; object 0 (3) does not fit. PE 1 (2): nothing larger. -> object 2 to PE 2 (4).
    Donor PE 0 (6), objects [3, 1, 0]: PE 2 (4): none fits; PE 1 (2): object 1 (2) -> PE 1.
    Same final placement and loads [4, 4, 4], moves in the other order."""
    out = refine_lb([3.0, 2.0, 2.0, 1.0, 2.0, 1.0, 1.0], [0, 0, 0, 0, 1, 2, 2], [0.0] * 3, charm_order=True)
    assert out.passes == [(1.05, True)]
    assert out.moves == [[(2, 0, 2), (1, 0, 1)]]
    assert out.pe.tolist() == [0, 1, 2, 0, 1, 2, 2]


# ---------------------------------------------------------------------------------------------
# e. Node-level wrappers


def test_node_wrappers_on_a_two_core_and_a_one_core_node():
    """Cluster (2, 1): PEs 0, 1 on node 0, PE 2 on node 1.

    Greedy, tiles 5, 3, 3, 2, 1, background per node (2, 0) -> per PE (1, 1, 0):
      tile 0 (5): PE 2 (0)                 -> PE loads [1, 1, 5]
      tile 1 (3): PEs 0, 1 at 1 -> PE 0    -> [4, 1, 5]
      tile 2 (3): PE 1 (1)                 -> [4, 4, 5]
      tile 3 (2): PEs 0, 1 at 4 -> PE 0    -> [6, 4, 5]
      tile 4 (1): PE 1 (4)                 -> [6, 5, 5]
    PEs [2, 0, 1, 0, 1] -> owner [1, 0, 0, 0, 0]; max PE load 6.

    Refine, tiles 4, 4, 3, 1, owner [0, 0, 0, 1], background (2, 1) -> per PE (1, 1, 1).
      Inside node 0 (heaviest first, least loaded PE): tile 0 -> PE 0 (5), tile 1 -> PE 1 (5),
      tile 2 -> PE 0 (tie, lower PE; 8). Node 1: tile 3 -> PE 2 (2). PE loads [8, 5, 2].
      Average (12 + 3) / 3 = 5, threshold 1.05 * 5 = 5.25. Heavy: PE 0; light: PE 2.
      Donor PE 0: 4 + 2 = 6 no; 3 + 2 = 5 < 5.25 -> tile 2 to PE 2 (5). PE 0 at 5: done.
    One pass (1.05, success); PEs [0, 1, 2, 2]; owner [0, 0, 1, 1]; tile 2 migrated; max 5.
    """
    cluster = Cluster((2, 1))
    loads = [5.0, 3.0, 3.0, 2.0, 1.0]
    owner = charm_greedy(loads, cluster, [2.0, 0.0])
    pe = greedy_lb(loads, pe_nodes(cluster.cores), pe_background(cluster, [2.0, 0.0]))
    assert pe.tolist() == [2, 0, 1, 0, 1]
    assert owner.tolist() == [1, 0, 0, 0, 0]
    assert pe_loads(loads, pe, [1, 1, 0]).tolist() == [6.0, 5.0, 5.0]

    loads = [4.0, 4.0, 3.0, 1.0]
    start_owner = [0, 0, 0, 1]
    assert spread_over_pes(loads, start_owner, cluster, [2.0, 1.0]).tolist() == [0, 1, 0, 2]
    owner, out = charm_refine(loads, start_owner, cluster, [2.0, 1.0])
    assert out.average == 5.0
    assert out.passes == [(1.05, True)]
    assert out.moves == [[(2, 0, 2)]]
    assert out.pe.tolist() == [0, 1, 2, 2]
    assert owner.tolist() == [0, 0, 1, 1]
    assert moved(start_owner, owner) == [(2, 0, 1)]
    assert pe_loads(loads, out.pe, [1, 1, 1]).max() == 5.0


def test_bad_inputs_raise_shoal_error():
    nodes = pe_nodes([1, 1])
    with pytest.raises(ShoalError):
        greedy_lb([1.0, -1.0], nodes, [0.0, 0.0])
    with pytest.raises(ShoalError):
        greedy_lb([1.0], nodes, [0.0])
    with pytest.raises(ShoalError):
        refine_lb([1.0, 2.0], [0, 2], [0.0, 0.0])
    with pytest.raises(ShoalError):
        refine_lb([1.0, np.nan], [0, 1], [0.0, 0.0])
    with pytest.raises(ShoalError):
        refine_lb([1.0], [0], [0.0], tolerance=0.0)
    with pytest.raises(ShoalError):
        charm_refine([1.0, 2.0], [0, 1], Cluster((1,)), None)


# ---------------------------------------------------------------------------------------------
# f. Properties

small_loads = st.integers(0, 20).map(float)


@st.composite
def refine_cases(draw, max_pes=5, max_objs=10):
    npes = draw(st.integers(1, max_pes))
    n = draw(st.integers(0, max_objs))
    loads = draw(st.lists(small_loads, min_size=n, max_size=n))
    start = draw(st.lists(st.integers(0, npes - 1), min_size=n, max_size=n))
    background = draw(st.lists(st.integers(0, 5).map(float), min_size=npes, max_size=npes))
    return loads, start, background


def pass_starts(start, moves):
    """Where each pass started: the first and every search pass from the original placement,
    the k_max pass from where the failed first pass stopped."""
    states = []
    for j in range(len(moves)):
        if j == 1:
            state = list(start)
            for obj, _, receiver in moves[0]:
                state[obj] = receiver
        else:
            state = list(start)
        states.append(state)
    return states


@settings(max_examples=100, deadline=None)
@given(case=refine_cases(), charm_order=st.booleans())
def test_refine_moves_obey_the_pass_rules(case, charm_order):
    """Integer loads keep every sum exact, so replaying the recorded moves re-derives the
    loads each comparison saw: a donor was heavy when its pass began, a receiver was at most
    the average before (light set) and strictly below overload x average after, moved objects
    weigh > 0, a successful pass leaves no PE above overload x average, and the result is
    the last pass's final state (in both scan orders)."""
    loads, start, background = case
    out = refine_lb(loads, start, background, charm_order=charm_order)
    w = np.asarray(loads)
    avg = out.average
    assert len(out.passes) == len(out.moves) >= 1
    assert out.passes[0][0] == 1.05
    assert out.overload == out.passes[-1][0]
    if out.passes[0][1]:
        assert len(out.passes) == 1
    for (overload, ok), moves, state in zip(out.passes, out.moves, pass_starts(start, out.moves), strict=True):
        limit = overload * avg
        pe = np.asarray(state, dtype=np.int64)
        heavy_at_start = set(np.flatnonzero(pe_loads(w, pe, background) > limit).tolist())
        for obj, donor, receiver in moves:
            load = pe_loads(w, pe, background)
            assert pe[obj] == donor and donor in heavy_at_start
            assert w[obj] > 0
            assert load[receiver] <= avg
            assert load[receiver] + w[obj] < limit
            pe[obj] = receiver
        if ok:
            assert pe_loads(w, pe, background).max() <= limit
        final = pe
    assert out.pe.tolist() == final.tolist()


@settings(max_examples=100, deadline=None)
@given(
    case=refine_cases(max_pes=4, max_objs=8),
    ties=st.booleans(),
    charm_order=st.booleans(),
    stale_reset=st.booleans(),
    data=st.data(),
)
def test_refine_matches_a_literal_pair_scan(case, ties, charm_order, stale_reset, data):
    """The module finds the best pair through the lightest light PE; a literal scan of every
    (light PE, donor object) pair in list order, with Charm++'s bookkeeping, must agree on
    float loads and on ties, in both scan orders and both reset modes."""
    _, start, background = case
    element = st.sampled_from([0.0, 0.5, 1.0, 1.5]) if ties else st.floats(0, 10, allow_nan=False)
    loads = [data.draw(element) for _ in start]
    got = refine_lb(loads, start, background, charm_order=charm_order, stale_reset=stale_reset)
    want_pe, want_passes, want_moves = literal_refine(loads, start, background, 1.05, charm_order, stale_reset)
    assert got.pe.tolist() == want_pe
    assert got.passes == want_passes
    assert got.moves == want_moves


def literal_refine(loads, start, background, tolerance, charm_order=False, stale_reset=False):
    """Refiner::multirefine(reset=true) written as plainly as possible (no shortcuts).

    Sets are plain lists: sorted by index, or (``charm_order``) Charm++'s linked lists with
    insertion at the head. The heavy heap is ckheap's (checked on its own below) or max by
    (load, lower index).
    """
    npes = len(background)
    state = {"load": list(background)}

    def assign(obj, p):
        state["pe"][obj] = p
        state["objs"][p].insert(0, obj)
        state["compute"][p] += loads[obj]
        state["load"][p] = state["compute"][p] + background[p]

    def deassign(obj, p):
        state["objs"][p].remove(obj)
        state["compute"][p] -= loads[obj]
        state["load"][p] = state["compute"][p] + background[p]

    def reset():
        state["pe"] = list(start)
        state["objs"] = [[] for _ in range(npes)]
        state["compute"] = [0.0] * npes
        if not stale_reset:
            state["load"] = list(background)
        for obj, p in enumerate(start):
            assign(obj, p)

    def push(heavy, p):
        if charm_order:
            heavy.push(state["load"][p], p)
        else:
            heavy.append(p)

    def refine(overload):
        load, moves = state["load"], []
        heavy, light = (_CkMaxHeap() if charm_order else []), []
        for p in range(npes):
            if load[p] > overload * avg:
                push(heavy, p)
            elif load[p] < avg:
                light.insert(0, p)
        while heavy:
            if charm_order:
                donor = heavy.pop()
            else:
                donor = max(heavy, key=lambda p: (load[p], -p))
                heavy.remove(donor)
            best, pair = 0.0, None
            for p in light if charm_order else sorted(light):
                for obj in state["objs"][donor] if charm_order else sorted(state["objs"][donor]):
                    if loads[obj] + load[p] < overload * avg and loads[obj] > best:
                        best, pair = loads[obj], (obj, p)
            if pair is None:
                return False, moves
            obj, receiver = pair
            deassign(obj, donor)
            assign(obj, receiver)
            moves.append((obj, donor, receiver))
            if load[receiver] > avg:
                light.remove(receiver)
            if load[donor] > overload * avg:
                push(heavy, donor)
            elif load[donor] < avg:
                light.insert(0, donor)
        return True, moves

    reset()
    total = 0.0
    for x in loads:
        total += x
    for b in background:
        total += b
    avg = total / npes
    top = max(state["load"])
    passes, all_moves = [], []

    def run(overload):
        ok, moves = refine(overload)
        passes.append((overload, ok))
        all_moves.append(moves)
        return ok

    if not run(tolerance):
        hi = int((top / avg - tolerance) / 0.01 + 1)
        if run(hi * 0.01 + tolerance):
            lo = 0
            while hi - lo > 1:
                cur = (hi + lo) // 2
                reset()
                if run(cur * 0.01 + tolerance):
                    hi = cur
                else:
                    lo = cur
    return state["pe"], passes, all_moves


def test_ckheap_order_among_equal_loads():
    """ckheap.C's maxHeap with three PEs of equal load, inserted 0, 1, 2 (no swaps: sift-up
    needs a strictly greater key). deleteMax returns h[0] = PE 0 and moves the last entry
    (PE 2) to the root; its child PE 1 is not strictly greater, so PE 2 stays on top: the
    order out is 0, 2, 1. A strictly heavier PE 3 pushed later sifts to the top."""
    heap = _CkMaxHeap()
    for p in range(3):
        heap.push(5.0, p)
    assert heap.pop() == 0
    heap.push(6.0, 3)
    assert [heap.pop(), heap.pop(), heap.pop()] == [3, 2, 1]
    assert not heap


@settings(max_examples=100, deadline=None)
@given(m=st.integers(1, 3), loads=st.lists(st.integers(1, 20), min_size=1, max_size=7))
def test_greedy_within_the_lpt_bound_of_the_optimum(m, loads):
    """GreedyLB is LPT: max load <= (4/3 - 1/(3m)) x optimum (brute force over all m^n
    assignments), i.e. 3m x greedy <= (4m - 1) x optimum in exact integers."""
    w = np.asarray(loads, dtype=np.int64)
    pe = greedy_lb(w.astype(float), pe_nodes([1] * m), [0.0] * m)
    greedy_max = int(np.bincount(pe, weights=w, minlength=m).max())
    every = np.array(list(itertools.product(range(m), repeat=len(w))), dtype=np.int64)
    per_pe = np.stack([(every == p) @ w for p in range(m)], axis=1)
    optimum = int(per_pe.max(axis=1).min())
    assert optimum <= greedy_max
    assert 3 * m * greedy_max <= (4 * m - 1) * optimum


@settings(max_examples=50, deadline=None)
@given(case=refine_cases())
def test_one_core_nodes_equal_the_pe_level_functions(case):
    """On nodes of one core each, PEs are nodes and the wrappers are the algorithms on nodes."""
    loads, start, background = case
    cluster = Cluster((1,) * len(background))
    assert np.array_equal(
        charm_greedy(loads, cluster, background), greedy_lb(loads, pe_nodes(cluster.cores), background)
    )
    owner, out = charm_refine(loads, start, cluster, background)
    direct = refine_lb(loads, start, background)
    assert owner.tolist() == direct.pe.tolist() == out.pe.tolist()
    assert out.passes == direct.passes and out.moves == direct.moves


@settings(max_examples=40, deadline=None)
@given(case=refine_cases(), cores=st.lists(st.integers(1, 3), min_size=1, max_size=3), data=st.data())
def test_deterministic_and_owner_is_the_node_of_the_final_pe(case, cores, data):
    """Same input twice -> same output; owners are the nodes of the final PEs; the spread
    inside nodes keeps every tile on its node."""
    loads, _, _ = case
    cluster = Cluster(tuple(cores))
    owner = np.array(data.draw(st.lists(st.integers(0, cluster.nodes - 1), min_size=len(loads), max_size=len(loads))))
    background = data.draw(st.lists(st.integers(0, 4).map(float), min_size=cluster.nodes, max_size=cluster.nodes))
    first = charm_greedy(loads, cluster, background)
    assert np.array_equal(first, charm_greedy(loads, cluster, background))
    a_owner, a = charm_refine(loads, owner, cluster, background)
    b_owner, b = charm_refine(loads, owner, cluster, background)
    assert np.array_equal(a_owner, b_owner) and np.array_equal(a.pe, b.pe)
    assert a.passes == b.passes and a.moves == b.moves
    assert a_owner.tolist() == pe_nodes(cores)[a.pe].tolist()
    spread = spread_over_pes(loads, owner, cluster, background)
    assert pe_nodes(cores)[spread].tolist() == owner.tolist()


def test_refine_with_subnormal_loads_whose_mean_underflows_moves_nothing():
    """Found by hypothesis: one object of 5e-324 s on two PEs makes the average 0 while a PE is
    heavy; no PE can be light, so nothing moves (it used to divide by zero)."""
    out = refine_lb(np.array([5e-324]), np.array([0]), np.zeros(2), 1.02)
    assert out.pe.tolist() == [0] and out.average == 0.0 and len(out.passes) == 1
