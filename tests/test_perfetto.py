"""Chrome/Perfetto trace event export: the file follows the format's rules (every event has
its phase type, time, process and thread; complete events of one track never overlap) and
holds exactly the trace's tasks and balancing steps."""

import json
from collections import Counter, defaultdict

import numpy as np
import pytest

from shoal import perfetto
from shoal.replay import ReplayConfig, replay
from shoal.report.timeline import select
from test_report import hotspot_trace


def read_events(path):
    doc = json.loads(path.read_text())
    assert doc["displayTimeUnit"] == "ms"
    return doc["traceEvents"]


def check_format(events):
    """The rules a trace viewer relies on; returns the events by phase type."""
    by_ph = defaultdict(list)
    for e in events:
        assert {"ph", "pid", "tid", "name"} <= set(e), e
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int)
        if e["ph"] != "M":
            assert isinstance(e["ts"], float | int) and e["ts"] >= 0
        if e["ph"] == "X":
            assert e["dur"] >= 0
        if e["ph"] == "i":
            assert e["s"] in ("g", "p", "t")
        by_ph[e["ph"]].append(e)
    assert set(by_ph) <= {"M", "X", "i"}
    tracks = defaultdict(list)
    for e in by_ph["X"]:  # in whole nanoseconds, as written
        tracks[e["pid"], e["tid"]].append((round(e["ts"] * 1e3), round((e["ts"] + e["dur"]) * 1e3)))
    for spans in tracks.values():
        spans.sort()
        ends, starts = np.array([b for _, b in spans[:-1]]), np.array([a for a, _ in spans[1:]])
        assert np.all(starts >= ends - 1), "events of one track overlap"  # 1 ns: float rounding of ts + dur
    named = {(e["pid"], e["tid"]) for e in by_ph["M"] if e["name"] == "thread_name"}
    assert set(tracks) <= named  # every track has a name
    return by_ph


@pytest.fixture(scope="module")
def predicted():
    """A replay of two phases with halo messages on 4 nodes x 3 cores, rebalancing every 2 steps."""
    return replay(hotspot_trace(8, 6, phases=("halo", "update")),
                  ReplayConfig(nodes=4, cores=3, placement="greedy", period=2)).trace


def test_a_replay_exports_one_complete_event_per_task_on_its_core(predicted, tmp_path):
    events = check_format(read_events(perfetto.export(predicted, tmp_path / "t.json")))
    t = predicted.tasks
    tasks = events["X"]
    assert len(tasks) == len(t["step"])
    expected = Counter(zip(t["step"].tolist(), t["phase"].tolist(), t["tile"].tolist(), (t["node"] + 1).tolist(),
                           (t["worker"] + 1).tolist(), strict=True))
    got = Counter((e["args"]["step"], predicted.phases.index(e["args"]["phase"]), e["args"]["tile"], e["pid"],
                   e["tid"]) for e in tasks)
    assert got == expected
    assert all(e["name"] == e["args"]["phase"] for e in tasks)
    durations = (t["end"] - t["start"]) * 1e6
    assert sum(e["dur"] for e in tasks) == pytest.approx(durations.sum(), abs=1e-3 * len(tasks))  # 1 ns each
    assert {e["args"]["name"] for e in events["M"] if e["name"] == "process_name"} == {
        "balancing", "node 0", "node 1", "node 2", "node 3"}


def test_every_balancing_step_is_an_instant_at_the_end_of_the_step_before(predicted, tmp_path):
    events = check_format(read_events(perfetto.export(predicted, tmp_path / "t.json")))
    balance = predicted.balance
    instants = events["i"]
    assert [e["args"]["step"] for e in instants] == balance["step"].tolist() == [2, 4]
    assert [e["args"]["moved"] for e in instants] == balance["moved"].tolist()
    ends = dict(zip(predicted.steps.tolist(), predicted.step_end, strict=True))
    assert [e["ts"] for e in instants] == pytest.approx([ends[s - 1] * 1e6 for s in balance["step"]])
    assert all(e["s"] == "g" and e["pid"] == perfetto.BALANCING_PID for e in instants)


def test_without_a_balance_table_the_placement_changes_are_the_instants(predicted, tmp_path):
    from dataclasses import replace

    plain = replace(predicted, balance=None)
    instants = check_format(read_events(perfetto.export(plain, tmp_path / "t.json")))["i"]
    owners = predicted.placement_owners
    assert [(e["args"]["step"], e["args"]["moved"]) for e in instants] == [
        (int(s), int((owners[k + 1] != owners[k]).sum())) for k, s in enumerate(predicted.placement_steps[1:])]


def test_a_selection_exports_only_its_tasks(predicted, tmp_path):
    _, mask = select(predicted, steps=(1, 3), cores=(3, 6))
    tasks = check_format(read_events(perfetto.export(predicted, tmp_path / "t.json", mask)))["X"]
    assert len(tasks) == mask.sum() > 0
    assert all(1 <= e["args"]["step"] < 3 and e["pid"] == 2 for e in tasks)  # cores 3-5 are node 1's


def test_a_measured_run_exports_tracks_that_never_overlap(tmp_path):
    from conftest import tiny_run
    from shoal.trace import Trace

    rec = tiny_run(tmp_path / "run", steps=4, tiles=8, nodes=2, workers=2)
    trace = Trace.read(rec.path)
    events = check_format(read_events(perfetto.export(trace, tmp_path / "t.json")))
    assert len(events["X"]) == len(trace.tasks["step"])
