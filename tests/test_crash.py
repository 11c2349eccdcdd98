"""Traces that survive crashes and resumes: a run killed with ``kill -9`` at random moments
leaves a readable trace of whole steps 0..k, and once resumed its trace is the trace of a run
that never stopped (every task and message row, times aside)."""

import random
import signal
import subprocess
import sys
import time

import h5py
import numpy as np
import pytest

from shoal.cli import main
from shoal.compare import compare_runs
from shoal.records import MESSAGES, TASKS
from shoal.session import run_scenario
from shoal.trace import COMMITTED, Trace, TraceWriter

STEPS, TILES, PHASES = 240, 16, 2
ARGS = ["synthetic-hotspot", "--steps", str(STEPS), "--tiles", str(TILES), "--nodes", "2",
        "--set", "app.grid=[64,64]", "--set", "app.work_per_cell=3000.0", "--checkpoint-every", "8"]
# What a trace row says apart from times and costs, which differ from one run to the next.
TASK_KEY = ("step", "phase", "tile", "node", "work")
MESSAGE_KEY = MESSAGES.names


def inode(path) -> int | None:
    return path.stat().st_ino if path.exists() else None


def rows(table: dict, names) -> list[tuple]:
    return sorted(zip(*(table[n].tolist() for n in names), strict=True))


def assert_whole_steps_from_zero(trace: Trace) -> int:
    """The trace's steps are 0..k-1, each with a task row for every phase of every tile; returns k."""
    steps = trace.steps.tolist()
    assert steps == list(range(len(steps)))
    key = (trace.tasks["step"].astype(np.int64) * PHASES + trace.tasks["phase"]) * TILES + trace.tasks["tile"]
    assert sorted(key.tolist()) == list(range(len(steps) * PHASES * TILES))
    assert len(trace.step_end) == len(steps)
    assert (trace.messages["step"] < len(steps)).all()
    return len(steps)


@pytest.mark.slow
def test_runs_killed_at_random_moments_leave_whole_steps_and_resume_to_the_uninterrupted_trace(tmp_path):
    """Three kills at seeded random moments of one run, each resumed by the next attempt
    (21 s here: three interpreter start-ups)."""
    whole = tmp_path / "whole"
    assert main(["run", *ARGS, "--out", str(whole)]) == 0
    run, rng, reached = tmp_path / "killed", random.Random(16), []
    for attempt in range(3):
        command = ["run", "--resume", str(run)] if attempt else ["run", *ARGS, "--out", str(run)]
        before = inode(run / "trace.h5")
        proc = subprocess.Popen([sys.executable, "-m", "shoal", *command], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        deadline = time.time() + 60
        while inode(run / "trace.h5") == before and proc.poll() is None and time.time() < deadline:
            time.sleep(0.01)  # a new trace file (carried on, for a resume) is begun: the run is about to step
        time.sleep(rng.uniform(0.0, 0.8))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert not (run / "summary.json").exists(), "the run finished before it was killed"
        reached.append(assert_whole_steps_from_zero(Trace.read(run)))
    print("steps traced at each kill:", reached)
    assert reached == sorted(reached) and reached[-1] > 0  # every resume carried the trace on
    assert main(["run", "--resume", str(run)]) == 0
    assert compare_runs(run, whole).identical
    a, b = Trace.read(run), Trace.read(whole)
    assert assert_whole_steps_from_zero(a) == STEPS
    assert rows(a.tasks, TASK_KEY) == rows(b.tasks, TASK_KEY)
    assert rows(a.messages, MESSAGE_KEY) == rows(b.messages, MESSAGE_KEY)
    assert a.placement_steps.tolist() == b.placement_steps.tolist() == [0]
    assert (np.diff(a.step_end) >= 0).all()  # one clock across the attempts


def test_rows_of_a_chunk_not_committed_are_not_read(tmp_path):
    """A writer killed after growing the tables but before committing them: the reader sees
    the chunks before, whole."""
    run = run_scenario("synthetic-hotspot", steps=6, tiles=4, nodes=1, set=["app.grid=[32,32]"], out=tmp_path / "r")
    trace = run.trace
    path = tmp_path / "partial.h5"
    writer = TraceWriter(path, trace.truncated(4))
    writer.close()
    with h5py.File(path, "a") as f:  # the half-done append: rows of step 4, no commit
        for name, values in TASKS.select(trace.tasks, trace.tasks["step"] == 4).items():
            ds = f["tasks"][name]
            ds.resize(ds.shape[0] + len(values), axis=0)
            ds[-len(values):] = values
        committed = dict(zip(COMMITTED, f["committed"][()].tolist(), strict=True))
    back = Trace.read(path)
    assert committed["tasks"] == 4 * PHASES * 4 and len(back.tasks["step"]) == committed["tasks"]
    assert back.steps.tolist() == [0, 1, 2, 3]


def test_a_run_resumed_into_a_new_folder_carries_the_trace_of_the_steps_before(tmp_path):
    kw = dict(steps=10, tiles=4, nodes=2, checkpoint_every=4, set=["app.grid=[32,32]"])
    full = run_scenario("synthetic-hotspot", out=tmp_path / "full", **kw)
    branch = run_scenario(None, resume=full.path, out=tmp_path / "branch")
    assert branch.summary["resumed_from_step"] == 8 and branch.summary["steps"] == 10
    a, b = full.trace, branch.trace
    assert rows(a.tasks, TASK_KEY) == rows(b.tasks, TASK_KEY)
    # the first eight steps are the first run's own rows, times included
    early = a.tasks["step"] < 8
    assert np.array_equal(np.sort(a.tasks["end"][early]), np.sort(b.tasks["end"][b.tasks["step"] < 8]))
