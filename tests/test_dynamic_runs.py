"""Balancing while the physics moves: results never change, balancing steps are recorded,
and the replay commands work from a real run's trace."""

import json

import numpy as np
import pytest

from shoal.cli import main
from shoal.compare import compare_runs
from shoal.errors import ShoalError
from shoal.placement import POLICIES
from shoal.session import LOOKAHEAD, run_scenario
from shoal.trace import Trace

SMALL = ["app.grid=[64,64]"]


# Every dynamic policy a real run can use (the oracle needs the future: replays only).
RUNNABLE = sorted(n for n, p in POLICIES.items() if p.dynamic and n not in LOOKAHEAD)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("dyn")
    out = {}
    out["static"] = run_scenario("synthetic-hotspot", steps=12, tiles=64, nodes=1, set=SMALL, out=base / "s").path
    for name in RUNNABLE:
        out[name] = run_scenario("synthetic-hotspot", steps=12, tiles=64, nodes=4, placement=name, period=3,
                                 set=SMALL, out=base / name).path
    return out


@pytest.mark.parametrize("name", RUNNABLE)
def test_balancing_never_changes_the_physics(runs, name):
    assert compare_runs(runs["static"], runs[name]).identical
    assert Trace.read(runs[name]).balance["step"].tolist() == [3, 6, 9]


def test_balancing_steps_are_recorded_in_trace_and_summary(runs):
    t = Trace.read(runs["greedy"])
    assert t.balance["step"].tolist() == [3, 6, 9]
    assert t.placement_steps.tolist() == [0, 3, 6, 9]
    # The recorded placement is the one tasks actually ran under.
    for first, owner in zip(t.placement_steps, t.placement_owners, strict=True):
        sel = (t.tasks["step"] >= first) & (t.tasks["step"] < first + 3)
        assert np.array_equal(t.tasks["node"][sel], owner[t.tasks["tile"][sel]])
    assert (t.balance["lif_after"] <= t.balance["lif_before"] + 1e-12).all()
    summary = json.loads((runs["greedy"] / "summary.json").read_text())
    assert summary["balance_steps"] == 3 and summary["migrated_tiles"] == int(t.balance["moved"].sum())


def test_sph_with_refine_is_identical_to_static(tmp_path):
    small = ["app.dx=0.05", "app.tank=[2.0, 1.2]", "app.fluid=[[0.0, 0.0, 0.5, 1.0]]", "run.frame_every=0"]
    a = run_scenario("sph-dam-break", steps=20, tiles=16, nodes=1, set=small, out=tmp_path / "a").path
    b = run_scenario("sph-dam-break", steps=20, tiles=16, nodes=3, placement="refine", period=5, set=small,
                     out=tmp_path / "b").path
    assert compare_runs(a, b).identical


def test_speculative_runs_a_low_resolution_proxy_first_and_keeps_the_physics(runs, tmp_path):
    rec = run_scenario("synthetic-hotspot", steps=12, tiles=64, nodes=4, placement="speculative", period=3,
                       set=SMALL, out=tmp_path / "spec")
    proxy = Trace.read(rec.path / "proxy")
    assert proxy.tiling.grid == (32, 32) and len(proxy.steps) == 12
    assert compare_runs(runs["static"], rec.path).identical
    assert len(rec.trace.balance["step"]) == 3


def test_speculative_sph_uses_a_coarser_proxy(tmp_path):
    small = ["app.dx=0.05", "app.tank=[2.0, 1.2]", "app.fluid=[[0.0, 0.0, 0.5, 1.0]]", "run.frame_every=0"]
    rec = run_scenario("sph-dam-break", steps=20, tiles=16, nodes=2, placement="speculative", period=10,
                       set=small, out=tmp_path / "spec")
    proxy = Trace.read(rec.path / "proxy")
    assert len(proxy.steps) == 10  # twice the spacing, twice the time step
    assert proxy.config["app"]["dx"] == pytest.approx(0.1)


@pytest.mark.parametrize("args, match", [
    (["--placement", "oracle", "--period", "5"], "replay"),
    (["--placement", "greedy"], "--period"),
])
def test_lookahead_and_periodless_dynamic_runs_are_refused(args, match, capsys, tmp_path):
    assert main(["run", "synthetic-hotspot", "--steps", "2", *args, "--out", str(tmp_path / "x")]) == 2
    assert match in capsys.readouterr().err


def test_replay_and_sweep_commands(runs, tmp_path, capsys):
    assert main(["replay", str(runs["static"]), "--nodes", "2", "--cores", "2", "--placement", "greedy",
                 "--period", "4", "--tiles-per-core", "4", "--out", str(tmp_path / "rp")]) == 0
    summary = json.loads((tmp_path / "rp" / "summary.json").read_text())
    assert summary["predicted"] and summary["tiles"] == 16 and summary["balance_steps"] == 2
    assert main(["report", str(tmp_path / "rp")]) == 0
    assert main(["sweep", str(runs["static"]), "--placements", "sfc,birdshot,refine", "--nodes", "2",
                 "--cores", "2", "--tiles-per-core", "1,4", "--periods", "4", "--birdshot-seeds", "5",
                 "--jobs", "2", "--out", str(tmp_path / "sw")]) == 0
    data = json.loads((tmp_path / "sw" / "sweep.json").read_text())
    assert len(data["rows"]) == 6 and len(data["birdshot_seeds"]) == 5
    spans = [r["makespan_s"] for r in data["rows"]]
    assert spans == sorted(spans)
    for fig in ("fig10-step-vs-tiles-per-core.png", "fig13-birdshot-seeds.png", "fig14-step-time-over-time.png",
                "sampi-fig7-period-and-decomposition.png"):
        assert (tmp_path / "sw" / fig).stat().st_size > 5000


def test_calibrate_then_replay_and_sweep_on_the_calibrated_machine(runs, tmp_path, capsys):
    cal_file = tmp_path / "machine" / "calibration.json"
    assert main(["calibrate", "--out", str(cal_file), "--tasks", "300", "--task-us", "20", "--nodes", "2"]) == 0
    cal = json.loads(cal_file.read_text())
    assert cal["schema"] == "shoal-machine" and cal["dispatch_s"] > 0 and cal["wake_s"] > 0 and cal["lock_threads"] == 2
    assert cal["handoff_s"] >= 0  # two threads share the lock
    common = [str(runs["static"]), "--nodes", "2", "--cores", "2", "--tiles-per-core", "4"]
    assert main(["replay", *common, "--placement", "greedy", "--period", "4", "--costs", "measured",
                 "--out", str(tmp_path / "bare")]) == 0
    assert main(["replay", *common, "--placement", "greedy", "--period", "4", "--costs", "measured",
                 "--calibration", str(cal_file),
                 "--out", str(tmp_path / "cal")]) == 0
    assert "executor model:" in capsys.readouterr().out
    bare, calibrated = (json.loads((tmp_path / d / "summary.json").read_text()) for d in ("bare", "cal"))
    assert calibrated["machine"]["restart_s"] == pytest.approx(cal["restart_s"])
    assert calibrated["machine"]["handoff_s"] == pytest.approx(cal["handoff_s"])
    # the bare replay takes the constants the run recorded; the calibrated one the calibration's
    assert calibrated["machine"]["task_overhead_s"] == pytest.approx(cal["dispatch_s"])
    assert bare["machine"]["task_overhead_s"] != pytest.approx(cal["dispatch_s"])
    assert main(["sweep", *common[:5], "--placements", "sfc", "--tiles-per-core", "4", "--calibration", str(cal_file),
                 "--jobs", "1", "--out", str(tmp_path / "sw")]) == 0
    row = json.loads((tmp_path / "sw" / "sweep.json").read_text())["rows"][0]
    assert row["machine"]["task_overhead_s"] == pytest.approx(cal["dispatch_s"])
    (tmp_path / "junk.json").write_text('{"latency": 1}')
    assert main(["replay", *common, "--calibration", str(tmp_path / "junk.json")]) == 2
    assert "not a calibration" in capsys.readouterr().err


def test_replay_on_the_recording_platform_makes_the_same_balancing_decisions(runs):
    from shoal.cluster import Network
    from shoal.replay import ReplayConfig, replay

    real = Trace.read(runs["greedy"])
    predicted = replay(real, ReplayConfig(nodes=4, cores=1, placement="greedy", period=3, costs="measured",
                                          network=Network(1e-6, 5e9, 0.0))).trace
    assert predicted.placement_steps.tolist() == real.placement_steps.tolist()
    assert np.array_equal(predicted.placement_owners, real.placement_owners)
    assert np.array_equal(predicted.balance["moved"], real.balance["moved"])


def test_validate_records_replays_and_compares(tmp_path, monkeypatch):
    from shoal import validate as v

    monkeypatch.setattr(v, "CASES", v.CASES[2:4] + v.CASES[5:7])
    monkeypatch.setattr(v, "STEPS", {"synthetic": 8, "sph": 12})
    result = v.validate(tmp_path, quick=False, repeats=2)
    assert len(result.rows) == 4 and all(r["runs"] == 2 for r in result.rows)
    saved = json.loads((tmp_path / "validation.json").read_text())
    assert len(saved["calibration"]) == 4 and len(saved["rows"]) == 4
    assert all(c["task_overhead_s"] >= 0 and c["payload_overhead_s"] >= 0 for c in saved["calibration"])
    for r in result.rows:
        assert r["measured_s"] > 0 and r["predicted_s"] > 0
        assert r["error"] == pytest.approx(r["predicted_s"] / r["measured_s"] - 1)
    assert isinstance(result.ranking_preserved("synthetic"), bool)


def test_ranking_counts_cases_the_measurement_cannot_tell_apart_as_ties():
    from shoal.validate import Validation

    def row(label, measured, predicted, spread=0.02):
        return {"group": "g", "workers": 1, "nodes": 2, "label": label, "measured_s": measured,
                "predicted_s": predicted, "measured_spread": spread}

    cal = {"task_overhead_s": 0.0, "payload_overhead_s": 0.0}
    # a and b differ by 1%, inside their 2% scatter: either predicted order is fine
    assert Validation([row("a", 1.00, 1.2), row("b", 1.01, 1.1), row("c", 1.5, 1.6)], cal).ranking_preserved("g")
    # c is clearly slower than a and b: predicting it faster breaks the ranking
    assert not Validation([row("a", 1.00, 1.2), row("b", 1.01, 1.1), row("c", 1.5, 1.0)], cal).ranking_preserved("g")
    # with no scatter, 5% apart is a ranking the prediction must keep
    assert not Validation([row("a", 1.00, 1.1, 0.0), row("b", 1.05, 1.0, 0.0)], cal).ranking_preserved("g")


def test_calibrated_overhead_per_task_adds_the_payloads_share():
    from shoal.replay import ReplayConfig
    from shoal.replay.run import executor_overhead

    cfg = ReplayConfig(nodes=1, cores=1, task_overhead_s=3e-6, payload_overhead_s=0.5e-6)
    assert executor_overhead(cfg, tasks=100, payloads=400) == pytest.approx(5e-6)
    assert executor_overhead(cfg, tasks=100, payloads=0) == pytest.approx(3e-6)
    assert executor_overhead(ReplayConfig(nodes=1, cores=1, task_overhead_s=3e-6), 10, 10) == pytest.approx(3e-6)


def test_payload_overhead_is_charged_per_payload_of_the_replayed_trace(tmp_path):
    """Aggregating a trace drops the payloads inside each coarse tile, so their share shrinks."""
    from shoal.replay import ReplayConfig, replay

    rec = run_scenario("synthetic-ramp", steps=6, tiles=64, nodes=1, workers=1, set=["app.grid=[64,64]"],
                       out=tmp_path / "ramp")
    base = dict(nodes=2, cores=2, placement="sfc", tiles_per_core=2)
    free = replay(rec.trace, ReplayConfig(**base)).makespan
    per_payload = 1e-4
    charged = replay(rec.trace, ReplayConfig(**base, payload_overhead_s=per_payload)).makespan
    coarse = replay(rec.trace, ReplayConfig(**base, payload_overhead_s=per_payload)).trace
    payloads = len(coarse.messages["src"])
    assert 0 < payloads < len(rec.trace.messages["src"])
    # every payload's time lands on one of the 4 cores, which all stay busy in this replay
    assert charged - free == pytest.approx(per_payload * payloads / 4, rel=0.3)


def test_calibration_files_are_read_as_one_model(tmp_path):
    from shoal.replay.calibrate import machine_model, read_calibration

    one = {"task_overhead_s": 3e-6, "payload_overhead_s": 1e-7, "restart_s": 1e-3, "wake_s": 3e-5, "task_s": 5e-5}
    (tmp_path / "one.json").write_text(json.dumps(one))
    assert read_calibration(tmp_path / "one.json") == machine_model(one)
    cases = [one, {**one, "task_overhead_s": 5e-6}, {**one, "task_overhead_s": 9e-6}]  # as validate writes
    (tmp_path / "cases.json").write_text(json.dumps(cases))
    assert read_calibration(tmp_path / "cases.json")["task_overhead_s"] == pytest.approx(5e-6)
    for bad in ('{"latency": 1}', "[]", "not json", json.dumps({**one, "wake_s": -1.0})):
        (tmp_path / "bad.json").write_text(bad)
        with pytest.raises(ShoalError):
            read_calibration(tmp_path / "bad.json")
    with pytest.raises(ShoalError):
        read_calibration(tmp_path / "missing.json")
