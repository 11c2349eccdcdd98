"""The Simulation driver: a user-owned loop, callbacks on schedules, a clean stop at a step
boundary, and a run reshaped between steps (owners, worker threads) that ends bitwise
identical to one never reshaped."""

import json
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from conftest import assert_same_state, tiny_run
from shoal.apps import get_app
from shoal.cli import main
from shoal.cluster import Cluster
from shoal.compare import compare_runs
from shoal.errors import ShoalError
from shoal.placement import get_policy
from shoal.replay import ReplayConfig, replay
from shoal.runtime import App, At, Every, Phase, Simulation
from shoal.session import run_scenario
from shoal.tiling import Tiling


def _sim(name="synthetic", tiles=8, nodes=2, workers=1, placement="birdshot", **kw):
    app = get_app(name).tiny_app()
    tiling = Tiling.from_count(app.grid, tiles)
    cluster = Cluster.uniform(nodes, workers)
    app.prepare(tiling)
    return Simulation(app, tiling, cluster, get_policy(placement).place(tiling, cluster, 1), **kw)


@pytest.mark.parametrize("name", ["synthetic", "sph2d"])
def test_a_loop_of_single_steps_equals_one_run(name):
    one = _sim(name)
    one.run(6)
    loop = _sim(name, nodes=1, workers=2, placement="sfc")
    while loop.step_count < 6:
        assert loop.step() == 1
    assert_same_state(one.gather(), loop.gather())
    assert loop.time == pytest.approx(one.time) and loop.time > 0
    assert len(loop.parts) == 6 and len(one.parts) == 1  # no callback: the run was one executor run
    for sim in (one, loop):
        sim.close()


class LastPhaseBarrier(App):
    """A step whose first phase reads the barrier its last phase reduced the step before."""

    name = "last-phase-barrier"
    phases = (Phase("smooth", halo=True), Phase("measure", reduction="max"))
    grid = (8, 8)

    def init_tile(self, tile, tiling):
        return np.array([float(tile % 5)])

    def pack_halos(self, state, src, tiling):
        return {d: state.copy() for d in tiling.neighbours[src].tolist()}

    def smooth(self, tile, state, halos, ctx, tiling):
        last = ctx.reduced["measure"] if ctx.step > 0 else 0.0  # a KeyError if a run start lost it
        state[0] = 0.5 * state[0] + 0.1 * sum(halos[s][0] for s in sorted(halos)) + last
        return 1

    def measure(self, tile, state, halos, ctx, tiling):
        return 1, float(state[0]) * 1e-3

    def gather(self, states, tiling):
        return {"v": np.array([states[t][0] for t in sorted(states)])}


@pytest.mark.parametrize("chunks", [(8,), (1, 7), (3, 5), (4, 1, 3)])
def test_a_first_phase_reads_the_last_phases_barrier_across_run_boundaries(chunks):
    """Runs split where a balancing step or a resume would split them: the first phase still
    reads the barrier of the step before, and the state is bitwise that of one run."""
    app, tiling = LastPhaseBarrier(), Tiling.from_count((8, 8), 4)
    one = Simulation(app, tiling, Cluster.uniform(1, 1), np.zeros(4, int))
    one.run(8)
    split = Simulation(app, tiling, Cluster.uniform(1, 2), np.zeros(4, int))
    for n in chunks:
        split.run(n)
    assert_same_state(one.gather(), split.gather())
    assert one.reduced == split.reduced and set(one.reduced) == {(7, "measure")}
    for sim in (one, split):
        sim.close()


def test_callbacks_run_on_their_schedules_and_measurements_see_every_step():
    sim = _sim()
    seen, measured = [], []
    sim.add_callback(lambda s: seen.append(("every 3", s.step_count)), Every(3, until=9))
    sim.add_callback(lambda s: seen.append(("at 5", s.step_count)), At((5,)))
    sim.add_measurement(lambda r: measured.append((r.step, len(r.tasks["tile"]), r.tasks["step"].tolist())))
    sim.run(10)
    assert seen == [("every 3", 3), ("at 5", 5), ("every 3", 6)]
    P, T = len(sim.app.phases), sim.tiling.ntiles
    assert [m[0] for m in measured] == list(range(10))
    assert all(n == P * T and set(steps) == {s} for s, n, steps in measured)
    # the executor ran from boundary to boundary: 0-3, 3-5, 5-6, 6-10
    assert [p.steps for p in sim.parts] == [3, 2, 1, 4]
    sim.close()


def test_worker_threads_grow_and_shrink_between_steps_and_the_state_does_not_change():
    plain = _sim(workers=2)
    plain.run(12)
    resized = _sim(workers=2)
    resized.add_callback(lambda s: s.reconfigure(workers={0: 1}), At((3,)))
    resized.add_callback(lambda s: s.reconfigure(workers={0: 3, 1: 1}), At((6,)))
    resized.add_callback(lambda s: s.reconfigure(workers={0: 2, 1: 2}), At((9,)))
    resized.run(12)
    assert_same_state(plain.gather(), resized.gather())
    assert resized.worker_history == [(0, (2, 2)), (3, (1, 2)), (6, (3, 1)), (9, (2, 2))]
    # the tasks of each stretch ran on the threads the node held then
    tasks = resized.result().tasks
    for lo, hi, cores in ((3, 6, (1, 2)), (6, 9, (3, 1))):
        sel = (tasks["step"] >= lo) & (tasks["step"] < hi)
        for node, n in enumerate(cores):
            assert set(tasks["worker"][sel & (tasks["node"] == node)].tolist()) <= set(range(n))
    with pytest.raises(ShoalError, match="at least one worker"):
        resized.reconfigure(workers={0: 0})
    with pytest.raises(ShoalError, match="no node 5"):
        resized.reconfigure(workers={5: 1})
    for sim in (plain, resized):
        sim.close()


def test_idle_workers_sleep_instead_of_spinning():
    sim = _sim(nodes=2, workers=3)
    sim.run(2)
    busy_threads = threading.active_count()
    cpu = time.process_time()
    time.sleep(0.3)  # six idle worker threads: spinning ones would burn about 1.8 s of CPU
    assert time.process_time() - cpu < 0.1
    sim.reconfigure(workers={0: 1})
    assert threading.active_count() == busy_threads - 2  # the surplus threads have ended
    sim.close()


def test_new_owners_between_steps_move_the_states_and_keep_the_physics():
    plain = _sim("sph2d")
    plain.run(8)
    moved = _sim("sph2d")
    moved.add_callback(lambda s: s.reconfigure(owner=(s.owner + 1) % 2), Every(3))
    moved.run(8)
    assert_same_state(plain.gather(), moved.gather())
    assert [step for step, _ in moved.placements] == [0, 3, 6]
    for sim in (plain, moved):
        sim.close()


def test_a_stop_requested_mid_run_ends_at_a_step_boundary_with_every_tile_there(tmp_path):
    # The Python executor: its workers report each step as they end it. Native workers run ahead of
    # the thread that reports their steps, so a stop asked from a report may come after the last
    # step (tests/test_native.py stops them deterministically).
    sim = _sim("sph2d", tiles=6, checkpoints=tmp_path, executor="python")
    sim.add_measurement(lambda r: sim.request_stop() if r.step == 4 else None)
    ran = sim.run(40)
    assert 5 <= ran < 40 and sim.stopped_at == ran  # stopped soon after step 4, before the end
    assert sim.run(5) == 0  # a stopped simulation stays stopped
    reference = _sim("sph2d", tiles=6, executor="python")
    reference.run(ran)
    assert_same_state(reference.gather(), sim.gather())
    assert (tmp_path / f"checkpoint-{ran:06d}.h5").exists()
    for s in (sim, reference):
        s.close()


@pytest.mark.slow
def test_ctrl_c_stops_a_run_that_resumes_to_the_same_end(tmp_path):
    args = ["synthetic-hotspot", "--steps", "400", "--tiles", "16", "--nodes", "1",
            "--set", "app.grid=[96,96]", "--set", "app.work_per_cell=2000.0"]
    run = tmp_path / "stopped"
    proc = subprocess.Popen([sys.executable, "-m", "shoal", "run", *args, "--checkpoint-every", "50", "--out",
                             str(run)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while not list((run / "state").glob("checkpoint-*.h5")) and time.time() < deadline:
        time.sleep(0.05)  # the first checkpoint: the run is stepping
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "continue with shoal run --resume" in err
    assert not (run / "summary.json").exists()
    assert main(["run", "--resume", str(run)]) == 0
    assert json.loads((run / "summary.json").read_text())["resumed_from_step"] > 0
    assert main(["run", *args, "--out", str(tmp_path / "whole")]) == 0
    assert compare_runs(run, tmp_path / "whole").identical


def test_a_resized_run_records_its_threads_and_the_replay_uses_them(tmp_path):
    # every tile heavy (not only the hot spot's), so that each node's cores, not the messages'
    # latency, set its modeled step
    base = dict(steps=12, tiles=16, nodes=2, workers=2, set=["app.grid=[48,48]", "app.base_work=400.0"])
    plain = run_scenario("synthetic-hotspot", out=tmp_path / "plain", **base)
    resized = run_scenario("synthetic-hotspot", out=tmp_path / "resized",
                           **{**base, "set": base["set"] + ["run.resize=[[4,0,1],[8,0,3],[8,1,1]]"]})
    assert compare_runs(plain.path, resized.path).identical
    trace = resized.trace
    assert trace.worker_steps.tolist() == [0, 4, 8]
    assert trace.worker_cores.tolist() == [[2, 2], [1, 2], [3, 1]]
    assert resized.summary["workers_over_steps"] == [[0, [2, 2]], [4, [1, 2]], [8, [3, 1]]]
    # efficiency: busy time over the core time actually held (10 cores x 4 steps, not 4 x 12)
    assert resized.summary["core_s"] < resized.summary["wall_s"] * 4
    predicted = replay(trace, ReplayConfig())
    assert predicted.trace.worker_cores.tolist() == [[2, 2], [1, 2], [3, 1]]
    cores = predicted.trace.cores_per_step()
    tasks = predicted.trace.tasks
    for s, held in zip(predicted.trace.steps, cores, strict=True):
        for node in (0, 1):
            ran = tasks["worker"][(tasks["step"] == s) & (tasks["node"] == node)]
            assert ran.max() < held[node]  # never more cores than the node held at that step
    # a node with one core at a time runs its tiles one after another: the modeled steps
    # where node 0 held one thread take longer than the same steps with two
    steady = replay(trace, ReplayConfig(nodes=2, cores=2))
    span = np.diff(np.concatenate([[0.0], predicted.trace.step_end]))
    steady_span = np.diff(np.concatenate([[0.0], steady.trace.step_end]))
    assert span[4:8].sum() > steady_span[4:8].sum()


def test_resize_schedules_are_checked(tmp_path):
    for bad, match in (("[[0,0,1]]", "step must lie"), ("[[5,2,1]]", "the node in"), ("[[5,0,0]]", "at least one"),
                       ("[[5,0]]", "step, node, workers")):
        with pytest.raises(ShoalError, match=match):
            tiny_run(tmp_path / "x", steps=10, nodes=2, set=[f"run.resize={bad}"])


def test_a_resumed_run_starts_with_the_threads_its_schedule_gave_by_then(tmp_path):
    kw = dict(steps=12, tiles=8, nodes=2, workers=2, checkpoint_every=6, set=["run.resize=[[4,0,1],[9,1,3]]"])
    full = tiny_run(tmp_path / "full", **kw)
    resumed = run_scenario(None, resume=full.path, out=tmp_path / "resumed")
    assert compare_runs(full.path, resumed.path).identical
    trace = resumed.trace  # the whole run's: carried on from the first run's trace up to step 6
    assert trace.worker_steps.tolist() == [0, 4, 9]
    assert trace.worker_cores.tolist() == [[2, 2], [1, 2], [1, 3]]
    assert trace.steps.tolist() == list(range(12))


def test_callbacks_due_at_the_stop_step_run_and_a_stop_at_the_end_is_a_finished_run():
    sim = _sim()
    seen = []
    sim.add_callback(lambda s: seen.append(s.step_count), Every(5))
    sim.add_measurement(lambda r: sim.request_stop() if r.step == 4 else None)  # the 5th step
    sim.run(20)
    assert sim.stopped_at == 5 and seen == [5]  # stopped at the boundary where the callback was due
    sim.close()
    last = _sim()
    last.add_measurement(lambda r: last.request_stop() if r.step == 9 else None)
    assert last.run(10) == 10 and last.stopped_at is None  # asked as the run ended: it ended
    assert last.run(2) == 2  # and it goes on when asked to
    last.close()


def test_an_error_in_a_callback_stops_the_workers_at_once_and_the_simulation_stays_usable():
    sim = _sim("sph2d", tiles=6)

    def boom(record):
        if record.step == 2:
            raise RuntimeError("boom")

    sim.add_measurement(boom)
    with pytest.raises(RuntimeError, match="boom"):
        sim.run(3000)
    # every worker is back in its pool (not running out the 3000 steps it had ahead of it)
    assert all(pool._busy == 0 for pool in sim.executor._pools.values())
    sim._measurements.clear()
    ran = sim.executor.run(2, states=sim.states, first_step=0)  # the pools are whole: a new run works
    assert ran.steps == 2
    sim.close()
