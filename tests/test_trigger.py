"""The adaptive balancing trigger: its decisions on hand-made loads and traces, in a replay and
in a real run (no wall-clock thresholds: costs are given, or read back from what ran)."""

import math

import numpy as np
import pytest

from shoal.cluster import Cluster, Network
from shoal.errors import ShoalError
from shoal.placement import Balancer, get_policy
from shoal.placement.trigger import ADAPTIVE, Adaptive, imbalance_s, parse_period
from shoal.replay import ReplayConfig, replay
from test_replay import hand_trace

TWO = Cluster.uniform(2, 1)
NO_BARRIER = (False,)


def hot(tiles: int, at: int, load: float = 3.0) -> np.ndarray:
    """One phase: every tile costs 1 s, the hot one ``load``."""
    loads = np.ones((1, tiles))
    loads[0, at] = load
    return loads


def test_periods_are_steps_or_adaptive():
    assert parse_period("20") == 20 and parse_period(0) == 0 and parse_period(" adaptive") == ADAPTIVE
    for bad in ("-1", "often", True, 2.5, -3):
        with pytest.raises(ShoalError, match="period"):
            parse_period(bad)


def test_imbalance_is_the_busiest_node_above_the_mean_per_core_segment_by_segment():
    assert imbalance_s(np.array([[3.0, 1.0]]), np.array([0, 1]), TWO, NO_BARRIER) == 1.0
    # Node 1 has 2 cores: 4 s there is 2 s per core, as on node 0; nothing is lost.
    assert imbalance_s(np.array([[2.0, 4.0]]), np.array([0, 1]), Cluster((1, 2)), NO_BARRIER) == 0.0
    # Balanced in the sum, not between the barriers: each segment loses 1 s.
    loads = np.array([[2.0, 0.0], [0.0, 2.0]])
    assert imbalance_s(loads, np.array([0, 1]), TWO, (True, True)) == 2.0
    assert imbalance_s(loads, np.array([0, 1]), TWO, (False, False)) == 0.0


def test_fires_exactly_when_the_lost_time_reaches_the_last_cost():
    owner = np.array([0, 1])
    for cost, fires_after in ((5.0, 4), (4.0, 3), (4.5, 4), (0.5, 0)):
        t = Adaptive(min_interval=1)
        t.paid(cost)
        fired = [t.observe(s, np.array([[3.0, 1.0]]), owner, TWO, NO_BARRIER) for s in range(5)]
        assert fired.index(True) == fires_after and all(fired[fires_after:])  # 1 s lost per step
        assert t.decided == fires_after + 1 and t.lost_s == 5.0  # it keeps counting until balanced


def test_never_fires_on_a_balanced_load():
    t = Adaptive(min_interval=1)
    owner = np.array([0, 0, 1, 1])
    rng = np.random.default_rng(0)
    for s in range(200):
        loads = rng.uniform(0, 1, 2)
        assert not t.observe(s, np.array([np.r_[loads, loads[::-1]]]), owner, TWO, NO_BARRIER)
    assert t.lost_s == pytest.approx(0.0, abs=1e-12)


def test_fires_once_per_drift_period_on_a_drifting_hot_spot():
    # 4 tiles of 1 s, a hot one of 3 s moving one tile every 10 steps. Alone on node 0 it is
    # balanced (3 s against 3 s).
    t, owner, decided = Adaptive(min_interval=1), np.array([0, 1, 1, 1]), []
    for s in range(60):
        loads = hot(4, (s // 10) % 4)
        t.observe(s, loads, owner, TWO, NO_BARRIER)
        if t.pending:  # balance before the next step: the hot tile alone on node 0
            decided.append(t.decided)
            owner = np.ones(4, np.int64)
            owner[np.argmax(loads[0])] = 0
            t.balanced(s + 1, imbalance_s(loads, owner, TWO, NO_BARRIER))
            t.paid(4.5)
    # Misplaced, node 1 lags 4 s behind: 2 s lost per step. The first cost is estimated as one
    # mean step (3 s per core): 2 + 2 s fire after the second step of the first drift; then
    # 4.5 s measured: after the third step of every drift.
    assert decided == [12, 23, 33, 43, 53]


def test_respects_the_minimum_interval():
    t, owner, decided = Adaptive(min_interval=4), np.array([0, 1]), []
    t.paid(0.5)
    for s in range(16):
        if t.observe(s, np.array([[9.0, 1.0]]), owner, TWO, NO_BARRIER):
            decided.append(t.decided)
            t.balanced(s + 1, 0.0)  # a balancer that fixes nothing, and thinks it did
    assert decided == [4, 8, 12, 16]


def test_what_balancing_cannot_fix_does_not_make_it_fire_again():
    # One tile of 10 s and one of 1 s on two nodes: the best placement still loses 4.5 s a step.
    t, owner, loads = Adaptive(min_interval=1), np.array([0, 0]), np.array([[10.0, 1.0]])
    fired = [s for s in range(50) if t.observe(s, loads, owner, TWO, NO_BARRIER)]
    assert fired[0] == 0  # 5.5 s lost in the first step: more than one mean step (5.5 s)
    owner = np.array([0, 1])
    t.balanced(1, imbalance_s(loads, owner, TWO, NO_BARRIER))
    t.paid(0.1)
    assert not any(t.observe(s, loads, owner, TWO, NO_BARRIER) for s in range(1, 100))


def test_the_trigger_state_survives_a_checkpoint():
    t = Adaptive(min_interval=3)
    t.paid(1.5)
    for s in range(4):
        t.observe(s, np.array([[2.0, 1.0]]), np.array([0, 1]), TWO, NO_BARRIER)
    again = Adaptive(min_interval=3)
    again.restore(t.state())
    assert again.state() == t.state() and again.pending and again.decided == 3


def test_balancer_rows_say_why_and_what_the_step_cost():
    tiling = hand_trace(2, [[[1.0, 1.0]]], [], phases=("a",)).tiling
    b = Balancer(get_policy("greedy"), ADAPTIVE, tiling, NO_BARRIER)
    b.trigger.paid(1.0)
    owner = np.array([0, 0])
    assert not b.observe(0, np.array([[3.0, 1.0]]), owner, TWO)  # min interval 2
    assert b.observe(1, np.array([[3.0, 1.0]]), owner, TWO) and b.due
    new = b.plan(2, owner, TWO, np.array([[3.0, 1.0]]), np.zeros(0), np.zeros(2, np.int64))
    b.paid(0.25)
    step, _, moved, _, _, _, decided, lost, threshold, cost = b.rows[-1]
    assert (step, moved, decided, lost, threshold, cost) == (2, 1, 2, 4.0, 1.0, 0.25)
    assert sorted(new.tolist()) == [0, 1] and not b.due
    assert b.trigger.residual_s == 1.0 and b.trigger.cost_s == 0.25  # 3 s against 1 s: 1 s above the mean
    fixed = Balancer(get_policy("greedy"), 5, tiling, NO_BARRIER)
    assert fixed.trigger is None and not fixed.observe(0, np.array([[3.0, 1.0]]), owner, TWO)
    fixed.plan(5, owner, TWO, np.array([[3.0, 1.0]]), np.zeros(0), np.zeros(2, np.int64))
    assert fixed.rows[-1][6] == 5 and math.isnan(fixed.rows[-1][7])


def test_a_replay_balances_a_moving_hot_spot_at_the_expected_steps():
    # 4 tiles on 2 nodes of 1 core, a barrier ending every step: a step takes the busiest node's
    # load. The hot tile (5 s, the others 1 s) moves every 12 steps; greedy puts it alone, the
    # other three together: 5 s against 3 s, 1 s lost a step (the plan's residual).
    S = 36
    costs = [[hot(4, (s // 12) % 4, 5.0)[0]] for s in range(S)]
    trace = hand_trace(4, costs, [], phases=("a",), barrier=[True])
    trace.tile_bytes = np.zeros(4, np.int64)
    net = Network(latency_s=0.0, bandwidth_Bps=1e12, overhead_s=0.0)
    r = replay(trace, ReplayConfig(nodes=2, cores=1, placement="greedy", period=ADAPTIVE, initial="strips",
                                   network=net, restart_s=4.5, costs="measured"))
    # Strips put tiles 0-1 on node 0: 6 s against 2 s, 2 s lost a step; the first cost is one
    # mean step (4 s): it fires after step 1. That step costs node 1's 4 s wait in its last
    # step (2 s per core) and the 4.5 s restart: 6.5 s (the plan's microseconds aside).
    # - the move at step 12: 7 s against 1 s, 3 s lost, 2 s beyond the residual: 8 s pass
    #   6.5 s after 4 steps; balanced at 16;
    # - that plan sees mostly the old hot spot in the loads since step 2 (tile 0: 3.86 s,
    #   tile 1: 2.14 s) and keeps the new one with the others: 2.86 s lost a step against
    #   7.5 s (a 3 s wait and the restart): 3 steps, balanced at 19, now right;
    # - the move at step 24: 2 s lost a step against 7.5 s: balanced at 28, again from mostly
    #   old loads; 1.78 s lost a step: 5 steps, balanced at 33.
    assert r.trace.balance["step"].tolist() == [2, 16, 19, 28, 33]
    assert r.trace.placement_steps.tolist() == [0, 2, 16, 19, 28, 33]
    # Every fixed period balances too often, or at the wrong time.
    for k in (1, 2, 3, 4, 6, 12):
        cfg = ReplayConfig(nodes=2, cores=1, placement="greedy", period=k, initial="strips", network=net,
                           restart_s=4.5, costs="measured")
        assert r.makespan < replay(trace, cfg).makespan


def test_a_real_run_balances_where_the_rule_on_its_own_trace_says(tmp_path):
    from shoal.runtime.team import Team
    from shoal.session import SimulationOptions, build, resolve, simulate, write
    from shoal.trace import Trace

    team, steps = Team(), 24
    flags = dict(steps=steps, tiles=64, nodes=4, workers=1, placement="greedy", period=ADAPTIVE)
    plan = resolve("synthetic-hotspot", flags, SimulationOptions(set=("app.grid=[64,64]",), out=tmp_path / "run"), team)
    built = build(plan, team)
    try:
        simulate(built.sim, steps)
        write(plan, built, team)
        rows = list(built.sim.balancer.rows)
        barrier = built.sim.balancer.barrier
    finally:
        built.close()
    trace = Trace.read(tmp_path / "run")
    assert trace.balance["step"].tolist() == [r[0] for r in rows] and len(rows) >= 1
    P, T = len(trace.phases), trace.tiling.ntiles
    t = trace.tasks
    loads = np.zeros((steps, P, T))
    np.add.at(loads, (t["step"], t["phase"], t["tile"]), t["cost"])
    # The rule, replayed on the trace's own costs and placements with each balancing step's
    # measured cost: it decides the step each row names; the run balanced there or at the next
    # step boundary every tile could reach.
    rule, last, k = Adaptive(), 0, 0
    for s in range(steps):
        owner = trace.placement_owners[np.searchsorted(trace.placement_steps, s, side="right") - 1]
        if k < len(rows) and s == rows[k][0]:
            step, _, _, _, _, _, decided, lost, threshold, cost = rows[k]
            assert rule.decided == decided <= step and rule.lost_s == pytest.approx(lost)
            assert rule.threshold_s == pytest.approx(threshold) and step - last >= rule.min_interval
            rule.balanced(step, imbalance_s(loads[last:step].mean(axis=0), owner, trace.cluster, barrier))
            rule.paid(cost)
            last, k = step, k + 1
        rule.observe(s, loads[s], owner, trace.cluster, barrier)
    assert k == len(rows)


def test_adaptive_from_the_command_line_a_scenario_key_and_a_sweep(tmp_path, capsys):
    import json

    from shoal.cli import main
    from shoal.config import load_scenario
    from shoal.replay.sweep import sweep

    run = tmp_path / "run"
    assert main(["run", "synthetic-hotspot", "--steps", "8", "--tiles", "16", "--nodes", "2", "--placement", "greedy",
                 "--period", "adaptive", "--set", "app.grid=[32,32]", "--out", str(run), "--quiet"]) == 0
    assert json.loads((run / "summary.json").read_text())["period"] == ADAPTIVE
    assert load_scenario(str(run / "config.toml")).run.period == ADAPTIVE  # the resolved scenario keeps it
    replay_out = str(tmp_path / "predicted")
    assert main(["replay", str(run), "--placement", "greedy", "--period", "adaptive", "--out", replay_out]) == 0
    with pytest.raises(SystemExit):
        main(["replay", str(run), "--placement", "greedy", "--period", "sometimes"])
    assert "a period is a number of steps or 'adaptive'" in capsys.readouterr().err
    sc = load_scenario("synthetic-hotspot")
    with pytest.raises(ShoalError, match="run.period"):
        sc.override(["run.period=-2"])
    assert sc.override(["run.period=adaptive"]).run.period == ADAPTIVE
    rows = sweep(run / "trace.h5", ["greedy", "sfc"], [2], [2, ADAPTIVE], [2], 1, jobs=1).rows
    assert sorted(str(r["period"]) for r in rows) == ["0", "2", ADAPTIVE]
