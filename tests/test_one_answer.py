"""One question, one answer: ``shoal replay`` and ``shoal sweep`` predict the same step time for
the same trace, placement, cluster and tiles per core, whether ``--gil`` is given or taken from
the trace's machine model, and both say which interpreter lock they modeled."""

import json
import types

import pytest

from conftest import tiny_run
from shoal.cli import main
from shoal.replay.run import lock_line

RECORDED_NODES = 2


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    """A synthetic run on 2 in-process nodes: its machine model says one lock for all nodes."""
    rec = tiny_run(tmp_path_factory.mktemp("one-answer") / "rec", steps=8, tiles=16, nodes=RECORDED_NODES)
    assert rec.trace.machine["lock"] == "shared"
    return rec.path


# (nodes, --gil given, the lock both must model): the recorded nodes keep the trace's one lock;
# another cluster size runs a rank, so a lock, per node; a given --gil wins either way.
CASES = [(RECORDED_NODES, None, "shared"), (4, None, "process"), (RECORDED_NODES, "none", "none"),
         (4, "shared", "shared")]


@pytest.fixture
def planning_takes_no_time(monkeypatch):
    """A replay charges a balancing step the time its policy took to plan, measured here and now,
    so two replays of a dynamic policy differ by that clock's noise; stopped, they must agree to
    the bit. The sweep's worker processes are forked from this one and inherit the stopped clock."""
    from shoal.placement import balancing

    monkeypatch.setattr(balancing, "time", types.SimpleNamespace(perf_counter=lambda: 0.0))


@pytest.mark.usefixtures("planning_takes_no_time")
@pytest.mark.parametrize("nodes, gil, lock", CASES, ids=[f"{n}-nodes-gil-{g}" for n, g, _ in CASES])
@pytest.mark.parametrize("placement", ["birdshot", "greedy"])
def test_replay_and_sweep_predict_the_same_step_time_and_name_the_lock(trace, tmp_path, capsys, nodes, gil, lock,
                                                                       placement):
    case = ["--cores", "2", "--seed", "3"] + (["--gil", gil] if gil else [])
    period = "4" if placement == "greedy" else "0"
    assert main(["replay", str(trace), "--nodes", str(nodes), "--placement", placement, "--period", period,
                 "--tiles-per-core", "2", *case, "--out", str(tmp_path / "replay")]) == 0
    replayed = capsys.readouterr().out
    assert main(["sweep", str(trace), "--nodes", str(nodes), "--placements", placement, "--periods", "4",
                 "--tiles-per-core", "2", *case, "--jobs", "1", "--out", str(tmp_path / "sweep")]) == 0
    swept = capsys.readouterr().out
    one = json.loads((tmp_path / "replay" / "summary.json").read_text())
    (row,) = json.loads((tmp_path / "sweep" / "sweep.json").read_text())["rows"]
    assert (row["nodes"], row["tiles"], row["period"]) == (one["nodes"], one["tiles"], one["period"])
    assert one["gil"] == row["gil"] == lock
    assert row["step_time_mean_s"] == one["step_time_mean_s"] and row["makespan_s"] == one["makespan_s"]
    line = lock_line([lock])
    assert f"modeled {line}\n" in replayed
    assert line in " ".join(swept.split())  # the table's title, however rich wraps it


def test_the_lock_line_names_each_model_once():
    assert lock_line(["process", "shared", "process"]) == (
        "interpreter lock: one per node (MPI ranks), one for all nodes (threads in one process)")
    assert lock_line(["none"]) == "interpreter lock: none (a compiled executor)"
