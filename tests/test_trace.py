import shutil
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

from conftest import edit_dataset as _set
from shoal.cli import main
from shoal.errors import ShoalError
from shoal.records import MESSAGES, TASKS
from shoal.replay.sweep import sweep
from shoal.session import run_scenario
from shoal.summary import summarize
from shoal.trace import Trace, joined, mark_closed


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "hot"
    return run_scenario("synthetic-hotspot", steps=4, set=["app.grid=[48,48]"], nodes=2, tiles=16,
                        placement="birdshot", out=out)


def test_round_trip_keeps_every_column_and_the_setup(run, tmp_path):
    a = run.trace
    path = a.write(tmp_path / "copy.h5")
    b = Trace.read(path)
    for k in TASKS.names:
        assert np.array_equal(a.tasks[k], b.tasks[k]) and a.tasks[k].dtype == b.tasks[k].dtype
    for k in a.messages:
        assert np.array_equal(a.messages[k], b.messages[k])
    assert b.phases == ["burn", "diffuse"]
    assert b.tiling.grid == (48, 48) and b.tiling.ntiles == 16
    assert b.cluster.cores == (1, 1)
    assert np.array_equal(b.owner_at(3), a.placement_owners[0])
    assert b.config["run"]["placement"] == "birdshot"
    assert not b.predicted
    assert not list(tmp_path.glob("*.partial"))


def test_trace_rows_cover_every_step_phase_and_tile_once(run):
    t = run.trace
    key = (t.tasks["step"].astype(np.int64) * 2 + t.tasks["phase"]) * 16 + t.tasks["tile"]
    assert sorted(key.tolist()) == list(range(4 * 2 * 16))
    assert (t.tasks["end"] >= t.tasks["start"]).all() and (t.tasks["cost"] >= 0).all()
    owner = t.placement_owners[0]
    assert np.array_equal(t.tasks["node"], owner[t.tasks["tile"]])


def test_kernel_time_is_recorded_and_part_of_the_cost(run):
    t = run.trace
    assert t.tasks["kernel"].sum() > 0
    assert (t.tasks["kernel"] <= t.tasks["cost"] + 1e-6).all()


def test_node_load_sums_task_costs(run):
    t = run.trace
    load = t.node_load()
    assert load.shape == (4, 2)
    assert load.sum() == pytest.approx(t.tasks["cost"].sum())


def test_a_trace_of_another_version_is_refused(run, tmp_path):
    path = run.trace.write(tmp_path / "old.h5")
    with h5py.File(path, "r+") as f:
        f.attrs["version"] = 99
    with pytest.raises(ShoalError, match="version 99"):
        Trace.read(path)


def test_not_a_trace_is_refused(tmp_path):
    (tmp_path / "x.h5").write_text("hello")
    with pytest.raises(ShoalError, match="not a readable trace"):
        Trace.read(tmp_path / "x.h5")
    with pytest.raises(ShoalError, match="no trace"):
        Trace.read(tmp_path / "missing.h5")


def test_communication_is_kept_and_gives_the_cpu_time_per_message(run, tmp_path):
    # A run in one process moves no messages: nothing to charge.
    assert run.trace.communication is None and run.trace.message_cpu_s == 0.0
    a = run.trace
    a.communication = {"cpu_s": np.array([0.3, 0.1]), "messages": np.array([1000, 1000])}
    b = Trace.read(a.write(tmp_path / "comm.h5"))
    assert np.array_equal(b.communication["cpu_s"], [0.3, 0.1])
    assert np.array_equal(b.communication["messages"], [1000, 1000])
    assert b.message_cpu_s == pytest.approx(0.4 / 2000)


def test_every_dataset_of_a_table_says_its_units_and_what_it_holds(run, tmp_path):
    path = run.trace.write(tmp_path / "units.h5")
    with h5py.File(path, "r") as f:
        assert f["tasks"]["cost"].attrs["units"] == "s"
        assert f["messages"]["bytes"].attrs["units"] == "B"
        assert all(f["tasks"][k].attrs["description"] for k in f["tasks"])


def test_a_trace_written_before_optional_groups_had_versions_still_reads():
    """A trace from the previous release: no version on its groups, no worker history."""
    t = Trace.read(Path(__file__).parent / "data" / "trace-before-groups.h5")
    assert t.phases == ["burn", "diffuse"] and t.balance["step"].tolist() == [2]
    assert t.cores_per_step().tolist() == [[1, 1]] * 4 and not t.resized
    assert t.node_load().shape == (4, 2)


SPLIT = Path(__file__).parent / "data" / "split-run"


def test_a_run_folder_the_previous_release_split_at_a_resume_on_other_nodes_reads_as_one_run():
    """Written by the previous release: a run of 2 nodes with a checkpoint at step 4, killed
    after step 5, resumed there on 3 nodes. Its trace then started afresh at step 4 (trace.h5, on
    a clock from 0), the one before kept whole as trace-to-step-000004.h5."""
    before = Trace.read(SPLIT / "trace-to-step-000004.h5")
    after = Trace.read(SPLIT / "trace.h5")
    assert before.steps.tolist() == list(range(6)) and after.steps.tolist() == [4, 5]
    t = Trace.read(SPLIT)
    before = before.truncated(4)  # steps 4 and 5 of the killed part were run again
    assert t.steps.tolist() == list(range(6)) and t.cluster.cores == (1, 1, 1)
    assert t.worker_steps.tolist() == [0, 4] and t.worker_cores.tolist() == [[1, 1, 0], [1, 1, 1]]
    assert t.present().tolist() == [[True, True, False]] * 4 + [[True, True, True]] * 2
    clock = before.step_end[-1]  # the resumed part's times follow the part before
    first = t.tasks["step"] < 4
    assert set(t.tasks) == set(TASKS.names) - {"iteration"}  # the previous release had no loops
    for c in t.tasks:
        expected = after.tasks[c] + clock if c in ("start", "end", "ready") else after.tasks[c]
        assert t.tasks[c][first].tobytes() == before.tasks[c].tobytes(), c
        assert t.tasks[c][~first].tobytes() == expected.tobytes(), c
    assert np.array_equal(t.step_end, np.concatenate([before.step_end, after.step_end + clock]))
    assert np.array_equal(t.placement_owners, np.concatenate([before.placement_owners, after.placement_owners]))
    s = summarize(t, float(t.step_end[-1]), "wall")
    assert s["steps"] == 6 and s["nodes"] == 3
    assert s["busy_s"] == pytest.approx(before.tasks["cost"].sum() + after.tasks["cost"].sum(), rel=1e-12)
    assert s["messages"] == len(before.messages["src"]) + len(after.messages["src"])


def test_a_split_folder_s_older_part_is_left_aside_once_trace_h5_holds_every_step(tmp_path):
    """What a resume by this shoal leaves in such a folder: trace.h5 from step 0, the older part beside it."""
    whole = Trace.read(SPLIT)
    shutil.copy(SPLIT / "trace-to-step-000004.h5", tmp_path)
    whole.write(tmp_path / "trace.h5")
    again = Trace.read(tmp_path)
    assert again.tasks["step"].tobytes() == whole.tasks["step"].tobytes()
    assert again.tasks["end"].tobytes() == whole.tasks["end"].tobytes()


def test_a_run_resumed_at_its_first_step_joins_the_empty_part_before_it(run):
    """A run stopped before its first step ends resumes from step 0: the part before holds no
    step, no placement and no worker row, and the joined trace is the part after."""
    t = run.trace
    before = t.truncated(0)
    assert len(before.steps) == 0 and before.worker_cores.shape == (0, t.cluster.nodes)
    whole = joined([before, t])
    assert whole.steps.tolist() == t.steps.tolist()
    assert whole.worker_cores.tolist() == t.worker_cores.tolist()
    assert whole.tasks["end"].tobytes() == t.tasks["end"].tobytes()


def test_parts_that_are_not_one_run_are_not_joined(run):
    t = run.trace
    with pytest.raises(ShoalError, match="starts at step 0, not after step 3"):
        joined([t, t])
    other = Trace.read(SPLIT)  # another tiling
    with pytest.raises(ShoalError, match="differ in their phases or tiling"):
        joined([t.truncated(2), other])


def test_an_optional_group_newer_than_this_shoal_is_refused_by_name(run, tmp_path):
    t = run.trace
    t.balance = {"step": [2], "plan_s": [0.1], "moved": [1], "bytes": [8], "lif_before": [0.5], "lif_after": [0.1]}
    path = t.write(tmp_path / "newer.h5")
    with h5py.File(path, "r+") as f:
        assert f["balance"].attrs["version"] == 1
        f["balance"].attrs["version"] = 7
    with pytest.raises(ShoalError, match="/balance has version 7"):
        Trace.read(path)


def test_the_unit_of_every_phase_s_work_is_kept_and_a_malformed_one_refused(run, tmp_path):
    from shoal.apps import get_app

    units = [p.work for p in get_app("synthetic").tiny_app().phases]
    assert run.trace.work_units == units == ["iterations", "cell updates"]
    path = run.trace.write(tmp_path / "units.h5")
    assert Trace.read(path).work_units == units
    with h5py.File(path, "r+") as f:
        f["phases"].attrs["work"] = '["iterations"]'  # one unit for two phases
    with pytest.raises(ShoalError, match="/phases attribute 'work'"):
        Trace.read(path)


def test_worker_history_round_trips_and_sets_the_cores_of_every_step(run, tmp_path):
    t = run.trace
    t.worker_steps, t.worker_cores = np.array([0, 2]), np.array([[1, 1], [3, 1]])
    b = Trace.read(t.write(tmp_path / "resized.h5"))
    assert b.resized and b.cores_per_step().tolist() == [[1, 1], [1, 1], [3, 1], [3, 1]]
    # load per core: the steps where node 0 held three threads divide its CPU time by three
    assert np.allclose(b.node_load()[2:, 0] * 3, run.trace.node_load()[2:, 0])


# ----- every dataset says what it holds; pandas -------------------------------------------------
def test_every_dataset_of_a_run_trace_says_its_units_and_what_it_holds(run):
    seen = []

    def check(name, obj):
        if isinstance(obj, h5py.Dataset):
            seen.append(name)
            assert "units" in obj.attrs and obj.attrs["description"], name

    with h5py.File(run.path / "trace.h5", "r") as f:
        f.visititems(check)
    assert {"tasks/cost", "messages/bytes", "steps/end", "placement/owner", "committed"} <= set(seen)


def test_to_pandas_gives_the_task_and_message_tables(run):
    tasks, messages = run.trace.to_pandas()
    assert list(tasks.columns) == [c for c in TASKS.names if c in run.trace.tasks]
    assert len(tasks) == 4 * 2 * 16 and tasks["cost"].dtype == np.float64 and tasks.attrs["units"]["cost"] == "s"
    assert list(messages.columns) == list(MESSAGES.names) and messages.attrs["units"]["bytes"] == "B"
    assert messages["bytes"].sum() == run.trace.messages["bytes"].sum()
    per_tile = tasks.groupby("tile")["cost"].sum().to_numpy()
    assert np.allclose(per_tile, run.trace.tile_cost().sum(axis=0))


def test_to_pandas_without_pandas_says_how_to_get_it(run, monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ShoalError, match=r"pip install shoal\[analysis\]"):
        run.trace.to_pandas()


# ----- damaged traces: one line naming the file -------------------------------------------------
def _edit(fn):
    def damage(path):
        with h5py.File(path, "r+") as f:
            fn(f)
    return damage


def _truncate(path):
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])




def _huge_grid(f):
    """A grid of 10^10 cells whose edges agree with it (the last tiles take the rest)."""
    f["tiling"].attrs["grid"] = [100000, 100000]
    for axis in (0, 1):
        values = f[f"tiling/edges{axis}"][()]
        values[-1] = 100000
        del f[f"tiling/edges{axis}"]
        f[f"tiling/edges{axis}"] = values


DAMAGE = {
    "truncated": (_truncate, "truncated"),
    "empty": (lambda p: p.write_bytes(b""), "not a readable trace"),
    "garbage": (lambda p: p.write_bytes(bytes(range(256)) * 40), "not a readable trace"),
    "missing tasks column": (_edit(lambda f: f["tasks"].__delitem__("cost")), "is missing /tasks/cost"),
    "missing steps": (_edit(lambda f: f.__delitem__("steps")), "is missing /steps"),
    "missing tiling edges": (_edit(lambda f: f["tiling"].__delitem__("edges1")), "is missing /tiling/edges1"),
    "non-numeric version": (_edit(lambda f: f.attrs.__setitem__("version", "one")), "'one' is not a number"),
    "tile out of range": (_edit(_set("tasks/tile", 3, 16)), "/tasks/tile holds 16, outside 0..15"),
    "negative tile": (_edit(_set("tasks/tile", 0, -1)), "/tasks/tile holds -1, outside 0..15"),
    "message to no tile": (_edit(_set("messages/dst", 0, 99)), "/messages/dst holds 99, outside 0..15"),
    "node out of range": (_edit(_set("placement/owner", (0, 2), 5)), "/placement/owner holds 5, outside 0..1"),
    "phase out of range": (_edit(_set("tasks/phase", 0, 2)), "/tasks/phase holds 2, outside 0..1"),
    "bad JSON config": (_edit(lambda f: f.attrs.__setitem__("config", "{run: 3")), "'config' is not valid JSON"),
    "bad JSON phases": (_edit(lambda f: f.attrs.__setitem__("phases", "[burn")), "'phases' is not valid JSON"),
    "phases not names": (_edit(lambda f: f.attrs.__setitem__("phases", "[1, 2]")), "not a JSON list of names"),
    "ragged columns": (_edit(lambda f: f["tasks"]["cost"].resize((5,))), "/committed counts 128 rows of /tasks, which "
                       "stores 5"),
    "committed beyond the rows": (_edit(_set("committed", 1, 10**9)), "/committed counts 1000000000 rows of /messages"),
    "negative committed": (_edit(_set("committed", 2, -1)), "/committed counts -1 rows of /steps"),
    "NaN cost": (_edit(_set("tasks/cost", 7, np.nan)), "/tasks/cost holds nan at row 7 (costs must be finite and "
                 "non-negative)"),
    "infinite cost": (_edit(_set("tasks/cost", 0, np.inf)), "/tasks/cost holds inf at row 0"),
    "negative cost": (_edit(_set("tasks/cost", 3, -1e-3)), "/tasks/cost holds -0.001 at row 3"),
    "negative work": (_edit(_set("tasks/work", 5, -4)), "/tasks/work holds -4 at row 5 (counts must be non-negative)"),
    "infinite start": (_edit(_set("tasks/start", 2, -np.inf)), "/tasks/start holds -inf at row 2 (times must be "
                       "finite)"),
    "negative bytes": (_edit(_set("messages/bytes", 1, -8)), "/messages/bytes holds -8 at row 1"),
    "NaN step end": (_edit(_set("steps/end", 0, np.nan)), "/steps/end holds nan at row 0"),
    "grid not the edges'": (_edit(lambda f: f["tiling"].attrs.__setitem__("grid", [100000, 10000])),
                            "/tiling/edges0 does not cut 0..100000"),
    "edges not increasing": (_edit(_set("tiling/edges1", 1, 0)), "/tiling/edges1 does not cut 0..48"),
    "one-axis grid": (_edit(lambda f: f["tiling"].attrs.__setitem__("grid", [48])), "not 2 or 3 positive sizes"),
    "grid of 10^10 cells": (_edit(_huge_grid), "a grid of 1e+10 cells (100000 x 100000), more than the 1.07e+09"),
    "task on an absent node": (_edit(_set("workers/cores", (0, 1), 0)), "ran on node 1 at step 0, where /workers "
                               "gives that node no thread"),
    "negative threads": (_edit(_set("workers/cores", (0, 0), -2)), "/workers/cores row 0 holds [-2, 1]"),
}


@pytest.mark.parametrize("damage, says", DAMAGE.values(), ids=DAMAGE.keys())
def test_a_damaged_trace_is_one_line_naming_the_file(damage, says, run, tmp_path):
    path = tmp_path / "trace.h5"
    shutil.copy(run.path / "trace.h5", path)
    damage(path)
    with pytest.raises(ShoalError) as err:
        Trace.read(path)
    message = str(err.value)
    assert says in message and str(path) in message and "\n" not in message


@pytest.mark.parametrize("command", [["replay", "--nodes", "2", "--cores", "1"],
                                     ["sweep", "--placements", "sfc", "--tiles-per-core", "1", "--nodes", "2",
                                      "--cores", "1", "--jobs", "2"]])
def test_replay_and_sweep_of_a_truncated_trace_say_so_in_one_line(command, run, tmp_path, capsys):
    path = tmp_path / "trace.h5"
    shutil.copy(run.path / "trace.h5", path)
    _truncate(path)
    out = tmp_path / "out"
    assert main([command[0], str(path), *command[1:], "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and str(path) in err and "truncated" in err
    assert not out.exists()


@pytest.mark.parametrize("jobs", ["0", "-1"])
def test_sweep_with_fewer_than_one_job_is_one_line_and_exit_2(jobs, run, tmp_path, capsys):
    out = tmp_path / "sweep"
    assert main(["sweep", str(run.path), "--placements", "sfc", "--tiles-per-core", "1", "--nodes", "2",
                 "--jobs", jobs, "--out", str(out)]) == 2
    assert capsys.readouterr().err.strip() == f"error: --jobs {jobs}: must be at least 1 (replay processes at once)"
    assert not out.exists()
    with pytest.raises(ShoalError, match=f"jobs \\(replay processes at once\\) must be at least 1, got {jobs}"):
        sweep(run.path, ["sfc"], [1], [10], [2], 1, jobs=int(jobs))


def test_sweep_reads_the_trace_before_starting_workers(run, tmp_path):
    path = tmp_path / "trace.h5"
    shutil.copy(run.path / "trace.h5", path)
    _truncate(path)
    with pytest.raises(ShoalError, match="truncated"):
        sweep(path, ["sfc"], [1], [10], [2], 1, jobs=1)


def test_a_trace_appended_in_chunks_keeps_ready_times_on_the_run_s_clock(tmp_path, monkeypatch):
    import shoal.session.building

    monkeypatch.setattr(shoal.session.building, "TRACE_CHUNK_STEPS", 4)  # three chunks: the executor stops at 4 and 8
    run_scenario("synthetic-hotspot", steps=12, set=["app.grid=[32,32]"], tiles=16, out=tmp_path / "chunks")
    t = Trace.read(tmp_path / "chunks").tasks
    assert np.all(t["ready"] <= t["start"])
    # the last chunk's tasks became ready after every task of the earlier chunks had ended
    assert t["ready"][t["step"] >= 8].min() >= t["end"][t["step"] < 8].max()


# ----- a killed writer's trace ------------------------------------------------------------------
WRITER = """
import sys, time
from shoal.trace import Trace, TraceWriter
writer = TraceWriter(sys.argv[2], Trace.read(sys.argv[1]))
print("open", flush=True)
time.sleep(600)
"""


def test_a_killed_writer_s_trace_is_marked_closed_by_report_and_a_live_one_left_alone(run, tmp_path):
    folder = tmp_path / "killed"
    shutil.copytree(run.path, folder)
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(run.path / "trace.h5"), str(folder / "trace.h5")],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline().strip() == "open"
        assert not mark_closed(folder)  # the writer lives: its file is not touched
        with pytest.raises(OSError, match="already open for write"):
            h5py.File(folder / "trace.h5", "r")
    finally:
        writer.kill()
        writer.wait()
    with pytest.raises(OSError, match="already open for write"):  # what a kill leaves for plain HDF5 readers
        h5py.File(folder / "trace.h5", "r")
    assert np.array_equal(Trace.read(folder).tasks["cost"], run.trace.tasks["cost"])  # shoal reads it (SWMR)
    assert main(["report", str(folder)]) == 0
    with h5py.File(folder / "trace.h5", "r") as f:  # plain h5py, as after h5clear -s
        rows = int(f["committed"][0])
        assert np.array_equal(f["tasks/cost"][:rows], run.trace.tasks["cost"])
    assert not mark_closed(folder)  # nothing left to clear
    assert np.array_equal(Trace.read(folder).tasks["work"], run.trace.tasks["work"])


APPENDING_WRITER = """
import sys, time
from types import SimpleNamespace
import numpy as np
from shoal.records import MESSAGES, TASKS
from shoal.trace import Trace, TraceWriter
whole = Trace.read(sys.argv[1])
writer = TraceWriter(sys.argv[2], whole.truncated(2), resumed_at=2)  # a resumed run's writer
t, m = whole.tasks, whole.messages
for step in (2, 3):
    if step == 3:  # killed after the chunk's datasets and its count were flushed, before the file itself was
        writer._file.flush = lambda: None
    writer.append(SimpleNamespace(steps=1, first_step=step, tasks=TASKS.select(t, t["step"] == step),
                                  messages=MESSAGES.select(m, m["step"] == step), step_end=np.zeros(1), wall_s=0.0,
                                  oversubscribed=False, comm_cpu_s=None))
print("open", flush=True)
time.sleep(600)
"""


def test_a_writer_killed_between_flushes_leaves_a_trace_that_reads_once_marked_closed(run, tmp_path):
    """The file records where its data ends in its superblock, which a kill between the flushes
    of a chunk's datasets and of the file leaves short of the chunk: marked closed without
    moving that end, every plain read of the chunk past it failed ("addr overflow")."""
    path = tmp_path / "trace.h5"
    writer = subprocess.Popen([sys.executable, "-c", APPENDING_WRITER, str(run.path / "trace.h5"), str(path)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline().strip() == "open"
    finally:
        writer.kill()
        writer.wait()
    assert mark_closed(path)
    back = Trace.read(path)
    assert back.steps.tolist() == [0, 1, 2, 3]
    assert back.tasks["cost"].tobytes() == run.trace.tasks["cost"].tobytes()
