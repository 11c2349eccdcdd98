"""The core distributions of the invasive resource manager (§5.3.3): workload-proportional with
the alpha correction, steepest ascent on scalability graphs, the concave majorant of measured
points and the graph measured online — hand-worked cases, the paper's two-application example,
and properties over random inputs (brute-force optimum, least concave majorant, sum D <= R)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shoal.errors import ShoalError
from shoal.invasive.distribution import MeasuredScalability, concave_majorant, proportional, steepest_ascent

FAST = settings(max_examples=150, deadline=None)


# ----- proportional: hand-worked ------------------------------------------------------------------
def test_proportional_exact_shares():
    # 8 * (1, 1, 2) / 4 = (2, 2, 4): integer shares, every alpha is 0.
    assert proportional({"a": 1, "b": 1, "c": 2}, 8) == {"a": 2, "b": 2, "c": 4}


def test_proportional_alpha_keeps_the_sum_at_R():
    # q = 10/3 each, ceil = 4 each (12 > 10): alpha = 1 for two of the three equal remainders,
    # the later ones in the mapping's order.
    assert proportional({"a": 1, "b": 1, "c": 1}, 10) == {"a": 4, "b": 3, "c": 3}
    assert proportional({"c": 1, "b": 1, "a": 1}, 10) == {"c": 4, "b": 3, "a": 3}
    # q = (1.5, 2.5, 4): ceil (2, 3, 4) sums to 9 > 8; alpha = 1 for the smallest remainder,
    # a tie of 0.5 and 0.5, so the later (b) gives one back.
    assert proportional({"a": 3, "b": 5, "c": 8}, 8) == {"a": 2, "b": 2, "c": 4}


def test_proportional_every_application_gets_a_core():
    # q = (0.004, 3.996): rounding alone would leave a with none; it needs one to continue.
    assert proportional({"a": 1, "b": 1000}, 4) == {"a": 1, "b": 3}


def test_proportional_ranges_pin_and_the_rest_share():
    # a capped at 2: its other 2 cores go to b instead of idling.
    assert proportional({"a": 1, "b": 1}, 8, {"a": (0, 2)}) == {"a": 2, "b": 6}
    # a wants at least 3: b takes the other 5.
    assert proportional({"a": 1, "b": 7}, 8, {"a": (3, 8)}) == {"a": 3, "b": 5}
    # Upper ends summing below R: each its upper end, the rest of the pool stays free.
    assert proportional({"a": 1, "b": 5}, 8, {"a": (1, 2), "b": (0, 3)}) == {"a": 2, "b": 3}
    # Lower ends summing above R: each capped at its lower end, R shared by workload.
    assert proportional({"a": 1, "b": 1}, 4, {"a": (3, 3), "b": (3, 5)}) == {"a": 2, "b": 2}
    assert proportional({"a": 1, "b": 3}, 5, {"a": (4, 6), "b": (2, 6)}) == {"a": 3, "b": 2}
    # Three pinned at different ends in one pool: c's share of 12 * 8/11 is capped at 4, a is
    # lifted to its lower end 3, and b takes the remaining 5.
    assert proportional({"a": 1, "b": 2, "c": 8}, 12, {"a": (3, 12), "c": (1, 4)}) == {"a": 3, "b": 5, "c": 4}


def test_proportional_fewer_cores_than_applications():
    assert proportional({"x": 5, "y": 1, "z": 9}, 2) == {"x": 1, "y": 1, "z": 0}
    assert proportional({"x": 5}, 1) == {"x": 1}
    assert proportional({}, 4) == {}


# ----- steepest ascent: hand-worked -----------------------------------------------------------------
def test_steepest_ascent_follows_the_largest_gain():
    # Gains a: 1, 1, 0.5; b: 0.6, 0.4. From (1, 1): a (1), a (1), b (0.6) -> (3, 2).
    assert steepest_ascent({"a": [1.0, 2.0, 3.0, 3.5], "b": [1.0, 1.6, 2.0]}, 5) == {"a": 3, "b": 2}
    # One more core: a's 0.5 beats b's 0.4.
    assert steepest_ascent({"a": [1.0, 2.0, 3.0, 3.5], "b": [1.0, 1.6, 2.0]}, 6) == {"a": 4, "b": 2}


def test_steepest_ascent_ties_and_graph_ends():
    # Equal graphs: every tie goes to the first in the mapping's order, until its graph ends.
    equal = [1.0, 2.0, 3.0]
    assert steepest_ascent({"a": equal, "b": equal}, 5) == {"a": 3, "b": 2}
    assert steepest_ascent({"b": equal, "a": equal}, 4) == {"b": 3, "a": 1}
    # Beyond the graphs' ends every gain is 0: the spare cores still go out, in order.
    assert steepest_ascent({"a": [1.0, 1.5], "b": [1.0]}, 6) == {"a": 5, "b": 1}
    # ... unless the ranges stop them: then the rest of the pool stays free.
    assert steepest_ascent({"a": [1.0, 1.5], "b": [1.0]}, 6, {"a": (1, 2), "b": (1, 3)}) == {"a": 2, "b": 3}


def test_steepest_ascent_ranges_and_waiting():
    graphs = {"a": [1.0, 2.0, 3.0, 4.0], "b": [1.0, 1.2, 1.3, 1.35]}
    # a's gains of 1 first; past a's end (gain 0) b's 0.2 wins the last core.
    assert steepest_ascent(graphs, 6) == {"a": 4, "b": 2}
    assert steepest_ascent(graphs, 6, {"b": (3, 6)}) == {"a": 3, "b": 3}  # b starts at its lower end
    assert steepest_ascent(graphs, 6, {"a": (0, 2)}) == {"a": 2, "b": 4}
    # Lower ends over R: each capped at its lower end (a 4, b 4), cores by gain within that.
    assert steepest_ascent(graphs, 6, {"a": (4, 4), "b": (4, 4)}) == {"a": 4, "b": 2}
    assert steepest_ascent({"p": [1.0], "q": [1.0], "r": [1.0]}, 2) == {"p": 1, "q": 1, "r": 0}


def amdahl(parallel: float, cores: int) -> np.ndarray:
    """``S(c) = 1 / ((1 - p) + p / c)``, c = 1 .. cores: non-decreasing and concave."""
    c = np.arange(1, cores + 1)
    return 1.0 / ((1.0 - parallel) + parallel / c)


def test_two_applications_of_fig4():
    # Fig. 4: one graph read left to right, the other right to left; the optimum is the
    # maximum of their sum over the splits of R, inside the range, reached by steepest ascent.
    cores = 16
    first, second = amdahl(0.95, cores), amdahl(0.6, cores)
    split = np.arange(1, cores)  # cores of the first; the second holds the others
    total = first[split - 1] + second[cores - split - 1]
    best = int(split[np.argmax(total)])
    got = steepest_ascent({"first": first, "second": second}, cores)
    assert got == {"first": best, "second": cores - best}
    assert 1 < best < cores - 1
    # The sum rises to its maximum and falls after it (concave graphs: one peak).
    peak = best - 1
    assert np.all(np.diff(total[: peak + 1]) > 0) and np.all(np.diff(total[peak:]) < 0)


# ----- properties of the two distributions ----------------------------------------------------------
@st.composite
def concave_graphs(draw, longest: int):
    """A positive, non-decreasing, concave graph: S(1) > 0 then non-increasing gains >= 0."""
    gains = sorted(draw(st.lists(st.floats(0.0, 2.0), max_size=longest)), reverse=True)
    return list(np.cumsum([draw(st.floats(0.1, 2.0)), *gains]))


@st.composite
def graph_problems(draw):
    n = draw(st.integers(1, 3))
    cores = draw(st.integers(n, 7))
    graphs = {f"app{i}": draw(concave_graphs(cores)) for i in range(n)}
    ranges = {}
    for key in graphs:
        if draw(st.booleans()):
            lo = draw(st.integers(0, 2))
            ranges[key] = (lo, draw(st.integers(max(lo, 1), cores + 1)))
    if sum(max(lo, 1) for lo, _ in ranges.values()) + n - len(ranges) > cores:
        ranges = {}
    return graphs, cores, ranges


@FAST
@given(graph_problems())
def test_steepest_ascent_is_the_brute_force_optimum(problem):
    graphs, cores, ranges = problem

    def throughput(d):
        return sum(g[min(c, len(g)) - 1] for g, c in zip(graphs.values(), d, strict=True))

    bounds = [range(max(ranges.get(k, (1, cores))[0], 1), min(ranges.get(k, (1, cores))[1], cores) + 1)
              for k in graphs]
    best = max(throughput(d) for d in itertools.product(*bounds) if sum(d) <= cores)
    got = steepest_ascent(graphs, cores, ranges)
    assert sum(got.values()) <= cores
    assert all(c in b for c, b in zip(got.values(), bounds, strict=True))
    assert throughput(list(got.values())) == pytest.approx(best, rel=1e-12, abs=1e-12)


workload_values = st.one_of(st.integers(1, 20), st.floats(0.01, 100.0))


@st.composite
def workload_problems(draw):
    n = draw(st.integers(1, 6))
    workloads = {i: draw(workload_values) for i in range(n)}
    cores = draw(st.integers(1, 40))
    ranges = {}
    for key in workloads:
        if draw(st.booleans()):
            lo = draw(st.integers(0, 8))
            ranges[key] = (lo, draw(st.integers(max(lo, 1), 50)))
    return workloads, cores, ranges


def effective_bounds(keys, cores, ranges):
    """The ranges the module docstring promises: [max(lo, 1), min(hi, R)], or [1, lo] when the
    lower ends cannot all be met."""
    lo = np.array([max(ranges.get(k, (1, cores))[0], 1) for k in keys])
    hi = np.array([min(ranges.get(k, (1, cores))[1], cores) for k in keys])
    lo = np.minimum(lo, hi)
    return (np.ones_like(lo), lo) if lo.sum() > cores else (lo, hi)


@FAST
@given(workload_problems())
def test_proportional_invariants(problem):
    workloads, cores, ranges = problem
    got = proportional(workloads, cores, ranges)
    d = np.array(list(got.values()))
    assert list(got) == list(workloads)
    assert d.sum() <= cores
    if cores < len(workloads):
        assert d.tolist() == [1] * cores + [0] * (len(workloads) - cores)
        return
    lo, hi = effective_bounds(list(workloads), cores, ranges)
    assert np.all(d >= 1) and np.all(lo <= d) and np.all(d <= hi)
    assert d.sum() == min(cores, hi.sum())  # no core idles while anyone could take it
    # No core moved from j to i would bring the two closer to one level: the water-filling.
    w = np.array([float(x) for x in workloads.values()])
    for i, j in itertools.permutations(range(len(d)), 2):
        if d[i] < hi[i] and d[j] > lo[j]:
            assert (d[i] + 1) / w[i] >= (d[j] - 1) / w[j] - 1e-9


@FAST
@given(st.lists(workload_values, min_size=1, max_size=8), st.integers(1, 60))
def test_proportional_is_the_papers_formula_without_ranges(loads, cores):
    got = list(proportional(dict(enumerate(loads)), cores).values())
    if cores < len(loads):
        return
    share = [cores * float(x) / math.fsum(float(y) for y in loads) for x in loads]
    if min(share) < 1.0:  # the one-core minimum binds: the formula no longer applies alone
        return
    alpha = [math.ceil(q - 1e-9) - di for q, di in zip(share, got, strict=True)]
    assert sum(got) == cores and set(alpha) <= {0, 1}
    # More work never gets fewer cores.
    for i, j in itertools.permutations(range(len(loads)), 2):
        if float(loads[i]) > float(loads[j]):
            assert got[i] >= got[j]


@FAST
@given(st.lists(st.lists(st.floats(0.1, 5.0), min_size=1, max_size=6), min_size=1, max_size=5),
       st.integers(1, 12))
def test_steepest_ascent_invariants_on_any_graphs(graphs, cores):
    got = steepest_ascent(dict(enumerate(graphs)), cores)
    assert sum(got.values()) == cores
    if cores >= len(graphs):
        assert min(got.values()) >= 1


# ----- the concave majorant -----------------------------------------------------------------------------
def brute_force_majorant(counts, values):
    """The least non-decreasing concave majorant of the points and (0, 0) at 1 .. max(counts):
    at each c the highest chord of two points spanning c, then the running maximum."""
    points = {0: 0.0}
    for c, v in zip(counts, values, strict=True):
        points[c] = max(points.get(c, -np.inf), v)
    top = max(counts)
    hull = []
    for t in range(1, top + 1):
        hull.append(max(ya + (yb - ya) * (t - xa) / (xb - xa) if xb > xa else ya
                        for (xa, ya), (xb, yb) in itertools.product(points.items(), repeat=2)
                        if xa <= t <= xb))
    return np.maximum.accumulate(hull)


def test_majorant_hand_worked():
    # Concave and increasing already: unchanged at the points, linear between, last slope on.
    assert np.allclose(concave_majorant([1, 2, 4], [1.0, 1.8, 3.0], 6), [1.0, 1.8, 2.4, 3.0, 3.6, 4.2])
    # A dip at 3 is lifted to the chord; a drop after 4 is flattened; beyond stays flat.
    assert np.allclose(concave_majorant([1, 2, 3, 4, 5], [1.0, 2.0, 2.1, 3.0, 2.5], 7), [1, 2, 2.5, 3, 3, 3, 3])
    # One count held: the line from the origin, perfect scaling both ways.
    assert np.allclose(concave_majorant([4], [2.0], 6), [0.5, 1.0, 1.5, 2.0, 2.5, 3.0])
    # Super-linear against the origin (2 cores 2.5x one): the chord from the origin lifts S(1).
    assert np.allclose(concave_majorant([1, 2], [1.0, 2.5], 3), [1.25, 2.5, 3.75])
    # Repeated counts: the largest value; up_to below the points: the first values only.
    assert np.allclose(concave_majorant([2, 2, 1], [1.5, 1.9, 1.0], 1), [1.0])


@FAST
@given(st.lists(st.tuples(st.integers(1, 12), st.floats(0.05, 10.0)), min_size=1, max_size=8),
       st.integers(1, 20))
def test_majorant_is_the_least_concave_non_decreasing_one(points, up_to):
    counts, values = zip(*points, strict=True)
    s = concave_majorant(list(counts), list(values), up_to)
    assert s.shape == (up_to,) and np.all(s > 0)
    full = concave_majorant(list(counts), list(values), max(up_to, max(counts)) + 3)
    assert np.allclose(full[:up_to], s)
    steps = np.diff(np.concatenate(([0.0], full)))  # from S(0) = 0
    assert np.all(steps >= -1e-12)                   # non-decreasing
    assert np.all(np.diff(steps) <= 1e-9)            # concave
    for c, v in points:
        assert full[c - 1] >= v - 1e-12              # above every point
    top = max(counts)
    assert np.allclose(full[:top], brute_force_majorant(counts, values))  # and the least such
    assert np.allclose(np.diff(steps[top:]), 0.0)    # the last slope carries on beyond


# ----- the measured graph ---------------------------------------------------------------------------------
def test_measured_graph_before_and_with_one_core():
    graph = MeasuredScalability(window=3)
    assert np.array_equal(graph.graph(4), [1.0, 2.0, 3.0, 4.0])  # nothing measured: perfect scaling
    for cores, seconds in [(1, 4.0), (2, 2.5), (4, 1.6)]:
        graph.record(cores, seconds)
    # S(c) = T(1) / T(c): 1, 1.6, 2.5 at 1, 2, 4; 3 on the chord, 5 on the last slope (0.45).
    assert np.allclose(graph.graph(5), [1.0, 1.6, 2.05, 2.5, 2.95])


def test_measured_graph_median_window_and_work():
    graph = MeasuredScalability(window=3)
    for seconds in [9.0, 2.0, 2.0, 50.0, 2.0]:  # the first leaves the window; 50 is an outlier
        graph.record(2, seconds)
    graph.record(4, 1.5)
    graph.record(4, 3.0, work=2.0)  # twice the work in twice the time: the same throughput
    # Throughputs 0.5 (median of 2, 50, 2 s) and 2/3 per second at 2 and 4 cores. Never on one
    # core: the line from the origin to 2 cores gives S(1) = 0.25/s, so S(2) = 2, S(4) = 8/3.
    assert np.allclose(graph.graph(5), [1.0, 2.0, 7 / 3, 8 / 3, 3.0])


# ----- bad input ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("call, message", [
    (lambda: proportional({"a": 0}, 4), "workload of 'a' must be positive"),
    (lambda: proportional({"a": -1.0}, 4), "workload of 'a' must be positive"),
    (lambda: proportional({"a": float("nan")}, 4), "workload of 'a' must be positive"),
    (lambda: proportional({"a": 1}, 0), "number of cores R must be >= 1"),
    (lambda: proportional({"a": 1}, 2.5), "number of cores R must be a whole number"),
    (lambda: proportional({"a": 1}, 4, {"a": (3, 2)}), "core range of 'a' is empty"),
    (lambda: proportional({"a": 1}, 4, {"a": (-1, 2)}), "lower end of the core range of 'a' must be >= 0"),
    (lambda: proportional({"a": 1}, 4, {"a": (0, 0)}), "upper end of the core range of 'a' must be >= 1"),
    (lambda: proportional({"a": 1}, 4, {"b": (1, 2)}), "unknown application 'b'"),
    (lambda: proportional({"a": 1}, 4, {"a": 3}), "must be a pair"),
    (lambda: steepest_ascent({"a": [1.0, 0.0]}, 4), "scalability graph of 'a' has a non-positive value"),
    (lambda: steepest_ascent({"a": [1.0, -2.0]}, 4), "non-positive value -2.0 at 2 cores"),
    (lambda: steepest_ascent({"a": []}, 4), "non-empty"),
    (lambda: steepest_ascent({"a": [1.0]}, 0), "number of cores R must be >= 1"),
    (lambda: concave_majorant([1, 2], [1.0], 3), "2 core counts but 1 values"),
    (lambda: concave_majorant([], [], 3), "at least one point"),
    (lambda: concave_majorant([0], [1.0], 3), "core count must be >= 1"),
    (lambda: concave_majorant([1], [0.0], 3), "value at 1 cores must be positive"),
    (lambda: concave_majorant([1], [1.0], 0), "up_to must be >= 1"),
    (lambda: MeasuredScalability(window=0), "window must be >= 1"),
    (lambda: MeasuredScalability().record(0, 1.0), "cores must be >= 1"),
    (lambda: MeasuredScalability().record(1, 0.0), "step time must be positive"),
])
def test_bad_input_is_one_clear_line(call, message):
    with pytest.raises(ShoalError, match=message) as error:
        call()
    assert "\n" not in str(error.value)
