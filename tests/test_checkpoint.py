"""Checkpoints: a run resumed from its latest checkpoint ends bitwise identical to one that
never stopped, with another node/worker count or placement if asked, even after a kill."""

import gzip
import json
import shutil
import signal
import subprocess
import sys
import time

import h5py
import numpy as np
import pytest

from shoal.cli import main
from shoal.compare import compare_runs
from shoal.lbaf import export_trace
from shoal.records import MESSAGES, TASKS
from shoal.report.loads import load_heatmap
from shoal.session import run_scenario
from shoal.trace import Trace, TraceWriter

SPH = ["app.dx=0.05", "app.tank=[2.0, 1.2]", "app.fluid=[[0.0, 0.0, 0.5, 1.0]]", "run.frame_every=0"]


def test_a_run_stopped_before_its_first_step_resumes_from_step_0(tmp_path, monkeypatch):
    """A stop that arrives before the first step ends (a viewer's, on a busy host) leaves a
    checkpoint at step 0 and a trace of no step; resumed, the run ends as one never stopped."""
    import shoal.session as session

    simulate = session.simulate

    def stop_at_once(sim, steps):
        sim.request_stop()
        simulate(sim, steps)

    args = dict(steps=6, tiles=8, nodes=2, set=["app.grid=[32,32]"])
    monkeypatch.setattr(session, "simulate", stop_at_once)
    stopped = run_scenario("synthetic-hotspot", **args, out=tmp_path / "stopped")
    assert stopped.stopped_at == 0 and (stopped.path / "state" / "checkpoint-000000.h5").exists()
    monkeypatch.setattr(session, "simulate", simulate)
    resumed = run_scenario(None, resume=stopped.path)
    full = run_scenario("synthetic-hotspot", **args, out=tmp_path / "full")
    assert resumed.summary["steps"] == 6 and Trace.read(resumed.path).steps.tolist() == list(range(6))
    assert compare_runs(full.path, resumed.path).identical


@pytest.mark.parametrize("scenario, overrides, resume_as", [
    ("synthetic-hotspot", ["app.grid=[64,64]"], dict(nodes=3, workers=1, placement="birdshot")),
    ("sph-dam-break", SPH, dict(nodes=1, workers=2, placement="geometric")),
    ("sph-dam-break", SPH + ["app.halo_every=3"], dict(nodes=2, workers=1, placement="strips")),
])
def test_resume_from_a_checkpoint_ends_identical(scenario, overrides, resume_as, tmp_path):
    full = run_scenario(scenario, steps=24, tiles=16, nodes=2, checkpoint_every=9, set=overrides,
                        out=tmp_path / "full")
    kept = sorted(p.name for p in (full.path / "state").glob("checkpoint-*.h5"))
    assert kept == ["checkpoint-000009.h5", "checkpoint-000018.h5"]
    resumed = run_scenario(None, resume=full.path, out=tmp_path / "resumed", **resume_as)
    # The trace (and the summary from it) carries on from step 0, on the same nodes or others.
    assert resumed.summary["resumed_from_step"] == 18 and resumed.summary["steps"] == 24
    assert compare_runs(full.path, resumed.path).identical


# ----- a run resumed on another number of nodes: one run, one trace --------------------------------
CHECKPOINT = 18  # of the 24 steps of ``stopped``


@pytest.fixture(scope="module")
def stopped(tmp_path_factory):
    """A run of 2 nodes with checkpoints at steps 9 and 18."""
    return run_scenario("synthetic-hotspot", steps=24, tiles=16, nodes=2, checkpoint_every=9,
                        set=["app.grid=[48,48]"], out=tmp_path_factory.mktemp("stopped") / "run")


@pytest.fixture(scope="module", params=[3, 1], ids=["on-3-nodes", "on-1-node"])
def resumed(request, stopped, tmp_path_factory):
    """``stopped`` as a run interrupted after its checkpoint at step 18 (its folder without a
    summary), resumed in place on 3 or 1 nodes; with the task and message rows its own part
    appended to the trace, on the run's clock."""
    folder = tmp_path_factory.mktemp("resumed") / "run"
    (folder / "state").mkdir(parents=True)
    for name in ("config.toml", "trace.h5", f"state/checkpoint-{CHECKPOINT:06d}.h5"):
        shutil.copy(stopped.path / name, folder / name)
    part = {"tasks": [], "messages": []}
    append = TraceWriter.append

    def spy(self, result=None, *args, **kwargs):
        if result is not None and result.steps:
            part["tasks"].append({c: v + self.clock if c in ("start", "end", "ready") else v.copy()
                                  for c, v in result.tasks.items()})
            part["messages"].append({c: v.copy() for c, v in result.messages.items()})
        return append(self, result, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(TraceWriter, "append", spy)
        record = run_scenario(None, resume=folder, nodes=request.param)
    return request.param, record, TASKS.concat(part["tasks"]), MESSAGES.concat(part["messages"])


def test_a_run_resumed_on_other_nodes_keeps_one_trace_of_every_step(stopped, resumed):
    nodes, record, tasks, messages = resumed
    assert sorted(p.name for p in record.path.glob("*.h5")) == ["trace.h5"]  # no second trace beside it
    assert compare_runs(stopped.path, record.path).identical
    trace, first = Trace.read(record.path), stopped.trace.truncated(CHECKPOINT)
    assert trace.steps.tolist() == list(range(24)) and trace.cluster.nodes == max(2, nodes)
    # Every row as the part that wrote it holds it, bit for bit: the first part's before the
    # checkpoint, the resumed part's after (its times on the run's one clock).
    before = trace.tasks["step"] < CHECKPOINT
    for c in TASKS.names:
        assert trace.tasks[c][before].tobytes() == first.tasks[c].tobytes(), c
        assert trace.tasks[c][~before].tobytes() == tasks[c].tobytes(), c
    for c in MESSAGES.names:
        assert trace.messages[c].tobytes() == np.concatenate([first.messages[c], messages[c]]).tobytes(), c
    # The nodes of each part: a node outside it holds no thread there, and runs no task.
    rows = {3: [[1, 1, 0], [1, 1, 1]], 1: [[1, 1], [1, 0]]}[nodes]
    assert trace.worker_steps.tolist() == [0, CHECKPOINT] and trace.worker_cores.tolist() == rows
    assert set(trace.tasks["node"][before].tolist()) == {0, 1}
    assert set(trace.tasks["node"][~before].tolist()) == set(range(nodes))
    with h5py.File(record.path / "trace.h5") as f:
        assert f["workers"].attrs["version"] == 2  # rows with absent nodes: older readers refuse it


def test_the_summary_of_a_resumed_run_counts_both_parts_and_only_the_nodes_present(stopped, resumed):
    nodes, record, tasks, messages = resumed
    s, first = record.summary, stopped.trace.truncated(CHECKPOINT)
    assert s["steps"] == 24 and s["nodes"] == max(2, nodes) and s["resumed_from_step"] == CHECKPOINT
    assert s["busy_s"] == pytest.approx(first.tasks["cost"].sum() + tasks["cost"].sum(), rel=1e-12)
    assert s["messages"] == len(first.messages["src"]) + len(messages["src"])
    after = [1, 1, 1] if nodes == 3 else [1, 0]
    assert s["workers_over_steps"] == [[0, [1, 1, 0] if nodes == 3 else [1, 1]], [CHECKPOINT, after]]
    # By hand: each step's CPU time per node over the nodes of its part (2, then ``nodes``).
    trace = record.trace
    t = trace.tasks
    present = np.array([2 if step < CHECKPOINT else nodes for step in range(24)])
    load = np.zeros((24, trace.cluster.nodes))
    np.add.at(load, (t["step"], t["node"]), t["cost"])
    lif = [load[k, :n].max() / load[k, :n].mean() - 1 for k, n in enumerate(present)]
    assert np.allclose(trace.step_lif(), lif, rtol=1e-12, atol=0)
    assert s["lif_mean"] == pytest.approx(np.mean(lif), rel=1e-12)
    # The core time the run held: each step's share of the time on its part's threads only.
    if s["efficiency_basis"] == "task-cost":
        held = load.max(axis=1) * present
    else:
        ends = trace.step_end
        held = np.diff(np.concatenate([[0.0], ends[:-1], [max(s["wall_s"], ends[-1])]])) * present
    assert s["core_s"] == pytest.approx(held.sum(), rel=1e-12)
    assert s["efficiency"] == pytest.approx(s["busy_s"] / held.sum(), rel=1e-12)


def test_report_and_replay_of_a_resumed_run_cover_every_step(resumed, tmp_path):
    nodes, record, _, _ = resumed
    trace = record.trace
    assert main(["report", str(record.path), "--perfetto"]) == 0
    heatmap = load_heatmap(trace).axes[0].images[0].get_array()
    assert heatmap.shape == (trace.cluster.nodes, 24)
    assert np.array_equal(np.ma.getmaskarray(heatmap), ~trace.present().T)  # absent nodes drawn apart
    with gzip.open(record.path / "timeline.perfetto.json.gz") as f:
        events = json.load(f)["traceEvents"]
    assert sum(e["ph"] == "X" for e in events) == len(trace.tasks["step"])
    lbaf = export_trace(record.path, tmp_path / "lbaf")
    assert len(lbaf) == trace.cluster.nodes
    assert all(len(json.loads(p.read_text())["phases"]) == 24 for p in lbaf)
    # On the recorded cluster each part is replayed on the nodes it had; on a given one, all of it.
    assert main(["replay", str(record.path), "--out", str(tmp_path / "recorded")]) == 0
    predicted = Trace.read(tmp_path / "recorded")
    assert predicted.steps.tolist() == list(range(24))
    assert predicted.worker_cores.tolist() == trace.worker_cores.tolist()
    p = predicted.tasks
    assert set(p["node"][p["step"] < CHECKPOINT].tolist()) == {0, 1}
    assert set(p["node"][p["step"] >= CHECKPOINT].tolist()) == set(range(nodes))
    assert main(["replay", str(record.path), "--nodes", "4", "--cores", "1", "--out", str(tmp_path / "four")]) == 0
    four = Trace.read(tmp_path / "four").tasks
    assert sorted(np.unique(four["step"]).tolist()) == list(range(24)) and set(four["node"].tolist()) == {0, 1, 2, 3}


def test_resume_with_dynamic_balancing_keeps_the_balancer_memory(tmp_path):
    kw = dict(steps=20, tiles=64, nodes=4, placement="swap", period=2, set=["app.grid=[64,64]"])
    full = run_scenario("synthetic-hotspot", checkpoint_every=10, out=tmp_path / "full", **kw)
    resumed = run_scenario(None, resume=full.path, out=tmp_path / "resumed")
    assert compare_runs(full.path, resumed.path).identical


def test_a_killed_run_resumes_in_place_and_matches_an_uninterrupted_one(tmp_path):
    args = ["synthetic-hotspot", "--steps", "300", "--tiles", "16", "--nodes", "1",
            "--set", "app.grid=[96,96]", "--set", "app.work_per_cell=3000.0"]
    run = tmp_path / "killed"
    proc = subprocess.Popen([sys.executable, "-m", "shoal", "run", *args, "--checkpoint-every", "20",
                             "--out", str(run)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while not list((run / "state").glob("checkpoint-*.h5")) and time.time() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    # 300 steps against a checkpoint every 20: the kill lands long before the end.
    assert not (run / "summary.json").exists(), "the run finished before it was killed"
    assert not (run / "state" / "final.npz").exists()  # nothing that looks complete
    assert main(["run", "--resume", str(run)]) == 0
    assert json.loads((run / "summary.json").read_text())["resumed_from_step"] >= 20
    assert main(["run", *args, "--out", str(tmp_path / "whole")]) == 0
    assert compare_runs(run, tmp_path / "whole").identical


def test_resume_errors_are_clear(tmp_path, capsys):
    plain = run_scenario("synthetic-hotspot", steps=3, tiles=4, nodes=1, set=["app.grid=[32,32]"],
                         out=tmp_path / "plain")
    assert main(["run", "--resume", str(plain.path), "--out", str(tmp_path / "x")]) == 2
    assert "no checkpoint" in capsys.readouterr().err
    assert main(["run", "--resume", str(tmp_path / "nowhere")]) == 2
    assert "not a run folder" in capsys.readouterr().err
    assert main(["run"]) == 2
    assert "--resume" in capsys.readouterr().err
