"""Chrome/Perfetto trace event export: the file is strict JSON (gzipped on request) and follows
the format's rules (every event has its phase type, time, process and thread; complete events of
one track never overlap; every flow has one start and one end inside tasks) and holds exactly the
trace's tasks, halo messages and balancing steps."""

import gzip
import json
from collections import Counter, defaultdict

import numpy as np
import pytest

from shoal import perfetto
from shoal.replay import ReplayConfig, replay
from shoal.report.timeline import select
from test_report import hotspot_trace


def _refuse(constant):
    raise ValueError(f"not JSON: {constant}")


def read_events(path):
    """The events of an export, read by a strict JSON parser (no NaN, no Infinity)."""
    raw = path.read_bytes()
    if path.suffix == ".gz":
        raw = gzip.decompress(raw)
    doc = json.loads(raw.decode("utf-8"), parse_constant=_refuse)
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
        if e["ph"] in ("s", "f"):
            assert isinstance(e["id"], int) and e["cat"] == e["name"] == perfetto.FLOW
        if e["ph"] == "f":
            assert e["bp"] == "e"  # binds to the slice enclosing its time
        by_ph[e["ph"]].append(e)
    assert set(by_ph) <= {"M", "X", "i", "s", "f"}
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


def flows(events):
    """{message row: (packing task, reading task)}, each task the complete event whose track and
    span hold the flow's start or end event; checks that every flow has exactly one of each."""
    slices = defaultdict(list)
    for e in events["X"]:
        slices[e["pid"], e["tid"]].append(e)

    def enclosing(f):
        found = [e for e in slices[f["pid"], f["tid"]] if e["ts"] <= f["ts"] <= e["ts"] + e["dur"]]
        assert len(found) == 1, f
        return found[0]["args"]

    starts = Counter(e["id"] for e in events["s"])
    ends = Counter(e["id"] for e in events["f"])
    assert set(starts.values()) <= {1} and set(ends.values()) <= {1} and starts.keys() == ends.keys()
    start = {e["id"]: enclosing(e) for e in events["s"]}
    return {e["id"]: (start[e["id"]], enclosing(e)) for e in events["f"]}


def expected_flows(trace, tasks=None):
    """{message row: ((step, phase, tile) of the task packing it, (step, phase, tile) of the task reading it)}
    for the messages whose two tasks are among ``tasks`` (every task by default)."""
    steps, last = trace.steps.tolist(), len(trace.phases) - 1
    tasks = tasks if tasks is not None else set(zip(*(trace.tasks[k].tolist() for k in ("step", "phase", "tile")),
                                                    strict=True))
    m = trace.messages
    out = {}
    for k, (s, p, src, dst) in enumerate(zip(*(m[c].tolist() for c in ("step", "phase", "src", "dst")), strict=True)):
        i = steps.index(s)
        packer = (s, p - 1, src) if p > 0 else ((steps[i - 1], last, src) if i > 0 else None)
        if packer in tasks and (s, p, dst) in tasks:
            out[k] = (packer, (s, p, dst))
    return out


def as_task(args, phases):
    return args["step"], phases.index(args["phase"]), args["tile"]


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


def test_every_halo_message_is_a_flow_from_the_task_that_packed_it_to_the_task_that_read_it(predicted, tmp_path):
    events = check_format(read_events(perfetto.export(predicted, tmp_path / "t.json")))
    got = {k: (as_task(a, predicted.phases), as_task(b, predicted.phases)) for k, (a, b) in flows(events).items()}
    expected = expected_flows(predicted)
    assert len(expected) == len(predicted.messages["step"]) > 0  # the hot spot's halos are all read after phase 0
    assert got == expected
    m = predicted.messages
    for e in events["s"]:
        assert e["args"] == {"src": int(m["src"][e["id"]]), "dst": int(m["dst"][e["id"]]),
                             "bytes": int(m["bytes"][e["id"]])}


def test_a_selection_exports_only_the_flows_between_its_tasks(predicted, tmp_path):
    _, mask = select(predicted, steps=(1, 3), cores=(3, 9))
    events = check_format(read_events(perfetto.export(predicted, tmp_path / "t.json", mask)))
    t = predicted.tasks
    chosen = set(zip(*(t[k][mask].tolist() for k in ("step", "phase", "tile")), strict=True))
    got = {k: (as_task(a, predicted.phases), as_task(b, predicted.phases)) for k, (a, b) in flows(events).items()}
    assert got == expected_flows(predicted, chosen)
    assert 0 < len(got) < len(predicted.messages["step"])


def test_the_gzipped_export_holds_the_same_events_and_the_same_bytes_every_time(predicted, tmp_path):
    plain = perfetto.export(predicted, tmp_path / "t.json")
    packed = perfetto.export(predicted, tmp_path / "t.json.gz")
    assert packed.read_bytes()[:2] == b"\x1f\x8b"  # gzip's magic number
    assert gzip.decompress(packed.read_bytes()) == plain.read_bytes()
    assert perfetto.export(predicted, tmp_path / "again.json.gz").read_bytes() == packed.read_bytes()
    assert len(packed.read_bytes()) < len(plain.read_bytes()) / 4


def test_a_run_with_dynamic_balancing_exports_strict_json(tmp_path):
    """Under a fixed period the trigger's columns are NaN: JSON has no NaN, so they are null."""
    from conftest import tiny_run
    from shoal.trace import Trace

    rec = tiny_run(tmp_path / "run", steps=6, tiles=8, nodes=2, workers=2, placement="greedy", period=2)
    trace = Trace.read(rec.path)
    assert np.isnan(trace.balance["imbalance_s"]).all() and len(trace.balance["step"]) == 2
    path = perfetto.export(trace, tmp_path / "t.json.gz")
    events = check_format(read_events(path))  # a strict parser: NaN or Infinity would raise
    instants = events["i"]
    assert [e["args"]["step"] for e in instants] == trace.balance["step"].tolist()
    assert all(e["args"]["imbalance_s"] is None and e["args"]["threshold_s"] is None for e in instants)
    assert [e["args"]["lif_before"] for e in instants] == pytest.approx(trace.balance["lif_before"].tolist())


def test_a_measured_run_exports_tracks_that_never_overlap_and_its_halos_as_flows(tmp_path):
    from conftest import tiny_run
    from shoal.trace import Trace

    rec = tiny_run(tmp_path / "run", steps=4, tiles=8, nodes=2, workers=2)
    trace = Trace.read(rec.path)
    events = check_format(read_events(perfetto.export(trace, tmp_path / "t.json")))
    assert len(events["X"]) == len(trace.tasks["step"])
    got = {k: (as_task(a, trace.phases), as_task(b, trace.phases)) for k, (a, b) in flows(events).items()}
    assert got == expected_flows(trace)
    first = trace.messages["step"] == trace.steps[0]
    assert len(got) == len(trace.messages["step"]) - np.count_nonzero(first & (trace.messages["phase"] == 0)) > 0
