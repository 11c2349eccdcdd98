"""Runs under the invasive resource manager: each node's worker threads follow the cores the
manager gives it, and the state stays bitwise that of a run without it."""

import os
import threading

import numpy as np
import pytest

from shoal.cli import main
from shoal.compare import compare_runs
from shoal.invasive import start_manager
from shoal.invasive.distribution import proportional
from shoal.invasive.join import read_manager_file, write_manager_file
from shoal.runtime.workers import WorkerPool
from shoal.session import open_run, run_scenario
from shoal.trace import Trace

ADAPTIVE = ["app.blocks=[16,16]", "app.block=4", "app.extent=[640.0,640.0]", "app.column=[250.0,250.0,90.0,3.0]",
            "app.max_level=2", "app.order=2", "app.solver=fwave", "app.regrid_every=2", "app.threshold=0.02",
            "run.frame_every=0"]
STEPS = 10
SCENARIO = "swe-radial-dam-break"
RUN = [SCENARIO, "--steps", str(STEPS), "--tiles", "16", "--placement", "sfc", "--period", "0",
       *[a for s in ADAPTIVE for a in ("--set", s)]]


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """One tile on one worker, no manager."""
    out = tmp_path_factory.mktemp("invasive") / "reference"
    return run_scenario(SCENARIO, steps=STEPS, tiles=1, nodes=1, workers=1, placement="sfc", period=0, set=ADAPTIVE,
                        out=out)


def held_and_used(trace: Trace) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per (step, node): the cores recorded as held, the distinct workers that ran its tasks,
    and the work of its tasks."""
    t, steps, nodes = trace.tasks, trace.steps, trace.cluster.nodes
    used = np.zeros((len(steps), nodes), dtype=np.int64)
    work = np.zeros((len(steps), nodes))
    for i, s in enumerate(steps):
        here = t["step"] == s
        work[i] = np.bincount(t["node"][here], weights=t["work"][here], minlength=nodes)
        for n in range(nodes):
            used[i, n] = len(np.unique(t["worker"][here & (t["node"] == n)]))
    return trace.cores_per_step(), used, work


def check_cores(run, pool: int) -> tuple[np.ndarray, np.ndarray]:
    """The invariants of every run under the manager: no node ran more workers than it held
    cores, never more cores held than the pool, and the summary says so. Returns held, work."""
    held, used, work = held_and_used(run.trace)
    assert (used <= held).all() and (used >= 1).all()
    assert (held.sum(axis=1) <= pool).all() and (held >= 1).all()
    saved = run.summary["invasive"]
    assert saved["pool"] == pool
    np.testing.assert_allclose(saved["cores_mean"], held.mean(axis=0))  # what the run's last line prints
    assert (saved["cores_min"], saved["cores_max"]) == (held.sum(axis=1).min(), held.sum(axis=1).max())
    return held, work


def test_one_node_holds_the_logical_pool_and_the_state_is_bitwise_the_same(reference, tmp_path):
    assert main(["-q", "run", *RUN, "--nodes", "1", "--workers", "1", "--invasive", "workload", "--cores", "3",
                 "--out", str(tmp_path / "run")]) == 0
    run = open_run(tmp_path / "run")
    assert compare_runs(reference.path, run.path).identical
    held, _ = check_cores(run, 3)
    assert (held[:, 0] == 3).all()  # the only application gets the whole pool before its first step
    assert run.summary["oversubscribed"] and run.summary["invasive"]["oversubscribed"]  # 3 cores on fewer CPUs


def test_two_nodes_in_one_process_on_a_physical_pool_with_a_dynamic_placement(reference, tmp_path):
    """This machine's cores (workers pinned), the measured scalability graphs, and a dynamic
    placement that moves the tiles as well."""
    run = run_scenario(SCENARIO, steps=STEPS, tiles=16, nodes=2, workers=1, placement="greedy", period=3,
                       set=ADAPTIVE, out=tmp_path / "run", invasive="scalability")
    assert compare_runs(reference.path, run.path).identical
    check_cores(run, len(os.sched_getaffinity(0)))
    assert run.summary["invasive"]["policy"] == "scalability" and not run.summary["invasive"]["oversubscribed"]
    assert run.trace.balance["moved"].sum() > 0


def test_a_run_joins_a_manager_named_by_its_file(reference, tmp_path):
    with start_manager(4, "workload") as handle:
        path = write_manager_file(handle, tmp_path / "manager.json", "workload")
        assert read_manager_file(path).authkey == handle.authkey and oct(path.stat().st_mode & 0o777) == "0o600"
        run = run_scenario(SCENARIO, steps=STEPS, tiles=16, nodes=1, workers=2, placement="sfc", period=0,
                           set=ADAPTIVE, out=tmp_path / "run", manager=path, invade_every=3, invade_blocking=True)
    assert compare_runs(reference.path, run.path).identical
    held, _ = check_cores(run, 4)
    assert (held[:, 0] == 4).all() and run.summary["invasive"]["invade_every"] == 3
    assert run.summary["invasive"]["blocking"]  # each invade waited for its answer


def test_a_manager_gone_before_the_run_joins_is_one_line_and_leaves_no_folder(tmp_path, capsys):
    with start_manager(2, "workload") as handle:
        path = write_manager_file(handle, tmp_path / "manager.json", "workload")
    assert main(["run", *RUN, "--manager", str(path), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot reach the resource manager" in err[0]
    assert not (tmp_path / "run").exists()


@pytest.mark.mpi(ranks=(2, 3))
def test_ranks_hold_cores_by_their_work_and_the_state_is_bitwise_the_same(ranks, reference, mpirun, tmp_path):
    mpirun(ranks, "-q", "run", *RUN, "--invasive", "workload", "--cores", "6", "--out", tmp_path / "run")
    run = open_run(tmp_path / "run")
    assert compare_runs(reference.path, run.path).identical
    held, work = check_cores(run, 6)
    # The wave sits in rank 0's tiles: after a few steps its node holds more cores, exactly the
    # share its work of the step before asks for. (Cores between the other ranks may still be
    # on their way - released at one rank's step boundary, taken at another's - so only rank 0's
    # share is exact, at one of the last steps.)
    assert work[-1, 0] > 2 * work[-1, 1:].max()
    shares = [proportional({n: work[k - 1, n] for n in range(ranks)}, 6)[0] for k in range(len(held) - 3, len(held))]
    assert any(held[k, 0] == share for k, share in zip(range(len(held) - 3, len(held)), shares, strict=True))
    assert held[-1, 0] > held[-1, 1:].max()


@pytest.mark.parametrize("flags, match", [
    (["--invasive", "workload", "--cores", "0"], "--cores must be positive, got 0"),
    (["--invasive", "nonsense"], "unknown invasive policy 'nonsense'"),
    (["--invasive", "workload", "--manager", "m.json"], "not both"),
    (["--manager", "missing.json"], "cannot read it"),
    (["--invasive", "workload", "--invade-every", "0"], "--invade-every must be"),
    (["--nodes", "3", "--invasive", "workload", "--cores", "2"], "pool has 2 cores, fewer than the run's 3 nodes"),
])
def test_bad_input_is_one_line_and_exit_2(flags, match, tmp_path, capsys):
    assert main(["run", *RUN, *flags, "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and match in err[0]
    assert not (tmp_path / "run").exists()


def test_a_pinned_worker_runs_on_its_cpu_only():
    cpus = sorted(os.sched_getaffinity(0))
    pool = WorkerPool(len(cpus), "pin-test")
    seen, lock = {}, threading.Lock()

    def job(k):
        with lock:
            seen[k] = os.sched_getaffinity(0)

    try:
        pool.pin(cpus[::-1])
        pool.start(job)
        pool.wait()
        assert seen == {k: {cpu} for k, cpu in enumerate(cpus[::-1])}
        pool.pin(None)  # unpinned: back to every CPU the process may use
        pool.start(job)
        pool.wait()
        assert seen == dict.fromkeys(range(len(cpus)), set(cpus))
    finally:
        pool.close()
    assert os.sched_getaffinity(0) == set(cpus)  # the caller's own affinity never changed
