import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from shoal.errors import ShoalError
from shoal.imbalance import (
    MAX_NODES,
    MAX_TILES_PER_NODE,
    describe_expected_lif,
    expected_lif_approx,
    expected_lif_exact,
    expected_lif_monte_carlo,
    lif,
    lif_distribution,
    tiles_per_node_for,
)

CASES = [(4, 8, 0.5), (32, 32, 0.6), (128, 16, 0.3), (16, 64, 0.9), (64, 4, 0.25)]


def test_lif_of_measured_loads_is_max_over_mean_minus_one():
    assert lif([10, 10, 10, 10]) == 0.0
    assert lif([15, 5, 10, 10]) == pytest.approx(0.5)  # Birdshot's example: 15 / 10 - 1
    assert np.allclose(lif([[1, 1], [3, 1]]), [0.0, 0.5])
    assert lif([0, 0, 0]) == 0.0


def test_approximation_is_equation_2():
    # sqrt(2 (1/0.6 - 1)) * sqrt(ln 32 / 32), worked by hand.
    assert expected_lif_approx(32, 32, 0.6) == pytest.approx(1.1547005 * 0.3290961, rel=1e-6)
    for n, s, p in CASES:
        assert expected_lif_approx(n, s, p) == pytest.approx(
            math.sqrt(2 * (1 / p - 1)) * math.sqrt(math.log(n) / s))


@pytest.mark.parametrize("n, s, p", CASES)
def test_exact_expectation_lies_in_the_monte_carlo_confidence_interval(n, s, p):
    mc = expected_lif_monte_carlo(n, s, p, trials=40_000, seed=7, model="binomial")
    assert mc.low <= expected_lif_exact(n, s, p) <= mc.high
    assert mc.half_width < 0.02  # the interval is tight enough to mean something


@pytest.mark.parametrize("n, s, p", CASES)
def test_real_placement_is_close_to_the_binomial_model(n, s, p):
    # Exactly s tiles per node from a fixed busy set differs from independent binomials
    # (node counts are tied by their sum), but only slightly: within a few percent here.
    mc = expected_lif_monte_carlo(n, s, p, trials=20_000, seed=3, model="placement")
    assert abs(mc.mean - expected_lif_exact(n, s, p)) <= 0.03 * expected_lif_exact(n, s, p) + 3 * mc.half_width


def test_one_node_is_never_imbalanced():
    assert expected_lif_monte_carlo(1, 16, 0.5, trials=100, model="placement").mean == 0.0
    assert expected_lif_exact(1, 16, 0.5) == pytest.approx(0.0, abs=1e-12)


def test_exact_matches_brute_force_enumeration_for_a_tiny_model():
    n, s, p = 2, 2, 0.5
    # Busy tiles per node ~ B(2, 0.5): P(0)=1/4, P(1)=1/2, P(2)=1/4; max of two draws.
    probs = {0: 0.25, 1: 0.5, 2: 0.25}
    e_max = sum(max(a, b) * probs[a] * probs[b] for a in probs for b in probs)
    assert expected_lif_exact(n, s, p) == pytest.approx(e_max / (p * s) - 1)


@given(st.integers(1, 200), st.integers(1, 200), st.floats(0.05, 1.0))
def test_distribution_sums_to_one_and_gives_the_exact_mean(n, s, p):
    values, pmf = lif_distribution(n, s, p)
    assert pmf.sum() == pytest.approx(1.0)
    assert (pmf >= -1e-12).all()
    assert float(values @ pmf) == pytest.approx(expected_lif_exact(n, s, p), abs=1e-9)


def test_more_tiles_per_node_lower_the_expected_lif():
    values = [expected_lif_exact(32, s, 0.6) for s in (4, 16, 64, 256)]
    assert values == sorted(values, reverse=True)
    assert expected_lif_exact(32, 64, 1.0) == 0.0


@pytest.mark.parametrize("target, n, p", [(0.21, 32, 0.6), (0.1, 8, 0.5), (0.3, 256, 0.3)])
def test_tiles_per_node_for_is_the_smallest_that_meets_the_target(target, n, p):
    s = tiles_per_node_for(target, n, p)
    assert expected_lif_exact(n, s, p) <= target
    assert s == 1 or expected_lif_exact(n, s - 1, p) > target


def test_tiles_per_node_grows_with_the_number_of_nodes():
    need = [tiles_per_node_for(0.21, n, 0.6) for n in (2, 8, 32, 128, 512)]
    assert need == sorted(need) and need[-1] > need[0]


@pytest.mark.parametrize(
    "call",
    [
        lambda: expected_lif_exact(0, 4, 0.5),
        lambda: expected_lif_exact(4, 0, 0.5),
        lambda: expected_lif_exact(4, 4, 0.0),
        lambda: expected_lif_approx(4, 4, 1.5),
        lambda: expected_lif_monte_carlo(4, 4, 0.5, trials=1),
        lambda: expected_lif_monte_carlo(4, 4, 0.5, model="other"),
        lambda: expected_lif_monte_carlo(4, 4, 0.5, seed=-1),
        lambda: expected_lif_monte_carlo(1, 1, 0.3),  # no tile busy in the placement model
        lambda: tiles_per_node_for(0.0, 4, 0.5),
        lambda: tiles_per_node_for(float("nan"), 4, 0.5),
        lambda: expected_lif_exact(MAX_NODES + 1, 4, 0.5),
        lambda: expected_lif_exact(4, MAX_TILES_PER_NODE + 1, 0.5),
        lambda: describe_expected_lif(4, 4, 0.5, trials=0),
    ],
)
def test_bad_model_parameters_are_clear_errors(call):
    with pytest.raises(ShoalError):
        call()


def test_lif_lines_give_the_three_estimates_and_the_tiles_per_node_for_a_target():
    lines = describe_expected_lif(32, 32, 0.6, trials=4000, seed=1, target=0.1)
    assert lines[1].endswith(f"{expected_lif_approx(32, 32, 0.6):.4f}")
    assert lines[2].endswith(f"{expected_lif_exact(32, 32, 0.6):.4f}")
    mc = expected_lif_monte_carlo(32, 32, 0.6, trials=4000, seed=1)
    assert f"{mc.mean:.4f}  (95% CI {mc.low:.4f} .. {mc.high:.4f}, 4000 trials)" in lines[3]
    assert lines[4] == f"tiles per node for E[LIF] <= 0.1: {tiles_per_node_for(0.1, 32, 0.6)}"
    # one node of one tile, 30% busy: no busy tile to deal, the model values stand alone
    skipped = "E[LIF] Monte Carlo: skipped (busy fraction 0.3 leaves no busy tile among 1)"
    assert describe_expected_lif(1, 1, 0.3)[3] == skipped


@pytest.mark.parametrize("target", [None, 0.1])
def test_figure_4_holds_the_target_asked_for(target, tmp_path, monkeypatch):
    import shoal.report.lif_figures as figures

    drawn = {}
    monkeypatch.setattr(figures, "_draw4", lambda nodes, need, busy, held, path: drawn.update(
        nodes=nodes, need=need, held=held) or path)
    figures.draw_lif_figures(32, 0.6, 32, tmp_path, target=target)
    held = expected_lif_exact(32, 32, 0.6) if target is None else target
    assert drawn["held"] == held
    assert drawn["need"] == [tiles_per_node_for(held, int(n), 0.6) for n in drawn["nodes"]]
    if target is None:  # the E[LIF] of the n and s given: at n = 32 the curve would pass through s = 32
        assert tiles_per_node_for(held, 32, 0.6) == 32
