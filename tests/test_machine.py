"""The machine model: rates fitted from a trace's work, the executor's constants from its task
times, the model in JSON and in the trace, and replays priced by it."""

import numpy as np
import pytest

from shoal.cluster import Cluster, Network
from shoal.errors import ShoalError
from shoal.replay import ReplayConfig, replay
from shoal.replay.machine import (
    Fit,
    MachineModel,
    PhaseModel,
    executor_delays,
    fit_linear,
    fit_trace,
    lock_wait_per_call,
)
from shoal.tiling import Tiling
from shoal.trace import Trace

NET = Network(latency_s=0.0, bandwidth_Bps=1e12, overhead_s=0.0)
RATE, FIXED = 2e-7, 3e-5


def worked_trace(work, seconds, tiles=4, **columns):
    """One phase, ``tiles`` tiles, steps of ``work`` / ``seconds`` in (step, tile) order."""
    work, seconds = np.asarray(work), np.asarray(seconds, float)
    n = len(work)
    steps = n // tiles
    tasks = {"step": np.repeat(np.arange(steps), tiles), "phase": np.zeros(n), "tile": np.tile(np.arange(tiles), steps),
             "node": np.zeros(n), "worker": np.zeros(n), "start": np.zeros(n), "end": np.zeros(n), "cost": seconds,
             "work": work, **columns}
    return Trace(tasks=tasks, messages={k: np.zeros(0) for k in ("step", "phase", "src", "dst", "bytes")},
                 phases=["kernel"], tiling=Tiling.from_counts((tiles, 1), (tiles, 1), halo=0),
                 cluster=Cluster.uniform(1, 1), placement_steps=np.array([0]),
                 placement_owners=np.zeros((1, tiles), int), step_end=np.zeros(steps), app="toy")


def test_a_fit_without_noise_recovers_the_rate_exactly():
    work = np.random.default_rng(0).integers(0, 10_000, 400)
    fit = fit_linear(work, RATE * work + FIXED)
    assert fit.rate == pytest.approx(RATE, rel=1e-9)
    assert fit.fixed == pytest.approx(FIXED, rel=1e-6)
    assert fit.r2 == pytest.approx(1.0)
    assert fit.spread == pytest.approx((0.0, 0.0), abs=1e-9)


def test_a_few_outliers_do_not_move_the_fit():
    rng = np.random.default_rng(1)
    work = rng.integers(100, 10_000, 500)
    seconds = (RATE * work + FIXED) * rng.normal(1.0, 0.01, 500)
    seconds[:3] *= 40  # tasks preempted by the host
    fit = fit_linear(work, seconds)
    assert fit.rate == pytest.approx(RATE, rel=0.02)
    assert fit.r2 > 0.99
    naive = np.polyfit(work, seconds, 1)[0]
    assert abs(naive / RATE - 1) > 0.05  # the plain least squares fit is moved


def test_tasks_of_one_size_are_all_rate():
    fit = fit_linear(np.full(50, 100), np.full(50, 1e-3))
    assert (fit.rate, fit.fixed) == (pytest.approx(1e-5), 0.0)
    assert fit_linear(np.zeros(50), np.full(50, 1e-3)).fixed == pytest.approx(1e-3)


def test_fit_trace_fits_each_phase_and_the_python_share():
    work = np.arange(1, 41) * 100
    cost = RATE * work + FIXED
    kernel = 0.75 * RATE * work
    model = fit_trace(worked_trace(work, cost, kernel=kernel), host={"cpu": "test", "cores": 1})
    pm = model.phase("toy", "kernel")
    assert pm.cost.rate == pytest.approx(RATE) and pm.cost.fixed == pytest.approx(FIXED)
    assert pm.python.rate == pytest.approx(0.25 * RATE) and pm.python.fixed == pytest.approx(FIXED)
    assert model.lock == "shared" and model.lock_threads == 1
    with pytest.raises(ShoalError, match="no rates for toy/other"):
        model.phase("toy", "other")


def test_the_model_round_trips_through_json(tmp_path):
    model = MachineModel(phases={"toy/kernel": PhaseModel(Fit(RATE, FIXED, 0.9, (-0.1, 0.2), 40), None)},
                         dispatch_s=1e-5, wake_s=5e-5, handoff_s=2e-5, lock="shared", lock_threads=2,
                         measured_by={"dispatch_s": "run"}, host={"cpu": "test", "cores": 2}, source="hand")
    back = MachineModel.from_json(model.to_json(tmp_path / "m.json"))
    assert back.to_dict() == model.to_dict()
    (tmp_path / "bad.json").write_text('{"schema": "something else"}')
    with pytest.raises(ShoalError, match="not a shoal machine model"):
        MachineModel.from_json(tmp_path / "bad.json")


def test_the_trace_carries_the_model_in_its_machine_group(tmp_path):
    work = np.arange(1, 41) * 100
    trace = worked_trace(work, RATE * work + FIXED)
    trace.machine = fit_trace(trace, host={"cpu": "test", "cores": 1}).to_dict()
    back = Trace.read(trace.write(tmp_path / "t.h5"))
    assert back.machine == trace.machine
    trace.machine = None
    assert Trace.read(trace.write(tmp_path / "old.h5")).machine is None


def test_a_run_writes_its_machine_model_when_its_trace_closes(tmp_path):
    from shoal.session import run_scenario

    rec = run_scenario("synthetic-hotspot", steps=3, tiles=16, nodes=1, workers=1, set=["app.grid=[32,32]"],
                       out=tmp_path / "run")
    model = MachineModel.from_dict(rec.trace.machine)
    assert set(model.phases) == {f"synthetic/{p}" for p in rec.trace.phases}
    assert model.lock == "shared" and model.measured_by["dispatch_s"] == "run"


def test_a_model_twice_as_fast_halves_the_predicted_time_where_work_dominates():
    work = np.full(16, 10_000)
    trace = worked_trace(work, np.full(16, 1e-3))
    model = MachineModel(phases={"toy/kernel": PhaseModel(Fit(RATE, 0.0))})
    slow = replay(trace, ReplayConfig(nodes=1, cores=2, network=NET, machine=model))
    fast_model = MachineModel(phases={"toy/kernel": PhaseModel(Fit(RATE / 2, 0.0))})
    fast = replay(trace, ReplayConfig(nodes=1, cores=2, network=NET, machine=fast_model))
    assert slow.makespan == pytest.approx(16 * RATE * 10_000 / 2)
    assert fast.makespan == pytest.approx(slow.makespan / 2)
    # --speed divides the model's rates the same way.
    assert replay(trace, ReplayConfig(nodes=1, cores=2, network=NET, machine=model, speed=2.0)).makespan == \
        pytest.approx(fast.makespan)
    # Measured costs ignore the model's rates.
    measured = replay(trace, ReplayConfig(nodes=1, cores=2, network=NET, machine=model, costs="measured"))
    assert measured.makespan == pytest.approx(8e-3)


def test_a_trace_without_a_model_replays_its_measured_costs():
    trace = worked_trace(np.full(8, 100), np.full(8, 1e-3))
    assert trace.machine is None
    r = replay(trace, ReplayConfig(nodes=1, cores=1, network=NET))
    assert r.makespan == pytest.approx(8e-3)
    assert r.fit == "" and r.config.gil == "none" and r.config.task_overhead_s == 0.0


def test_the_trace_model_prices_tasks_and_brings_its_executor_constants():
    work = np.arange(1, 9) * 1000
    trace = worked_trace(work, np.full(8, 1.0))  # recorded seconds the model does not use
    trace.machine = MachineModel(phases={"toy/kernel": PhaseModel(Fit(1e-6, 0.0))}, dispatch_s=1e-4).to_dict()
    r = replay(trace, ReplayConfig(nodes=1, cores=1, network=NET))
    assert r.makespan == pytest.approx(1e-6 * work.sum() + 8 * 1e-4)
    assert "R2 1.00" in r.fit


def test_dispatch_and_wake_up_come_from_the_workers_timelines():
    # One worker, one tile per step, tasks of 1 ms. Tasks 1 and 2 were ready before the worker
    # finished the one before (start 20 us after its end: dispatch); task 3 became ready while
    # the worker was idle and started 70 us later.
    start = np.array([0.0, 1.02e-3, 2.04e-3, 4.0e-3])
    end = start + 1e-3
    ready = np.array([0.0, 0.5e-3, 1.5e-3, 3.93e-3])
    trace = worked_trace(np.ones(4), np.full(4, 1e-3), tiles=1, ready=ready)
    trace.tasks["start"], trace.tasks["end"] = start, end
    dispatch, wake = executor_delays(trace)
    assert dispatch == pytest.approx(2e-5)
    assert wake == pytest.approx(7e-5)


def test_the_lock_wait_per_call_is_wall_less_cpu_over_the_calls():
    trace = worked_trace(np.ones(4), np.full(4, 1e-3), kernel_calls=np.array([2, 2, 4, 0], np.int32))
    trace.tasks["end"] = trace.tasks["start"] + 1e-3 + np.array([2e-4, 2e-4, 4e-4, 0.0])
    assert lock_wait_per_call(trace) == pytest.approx(1e-4)


def test_a_lock_dominated_replay_gives_the_interval_between_no_lock_and_a_serialising_one():
    # Two tiles of 2 ms each on 2 threads sharing a lock; a quarter of each in kernels.
    trace = worked_trace(np.ones(2), np.full(2, 2e-3), tiles=2, kernel=np.full(2, 5e-4))
    r = replay(trace, ReplayConfig(nodes=1, cores=2, network=NET, gil="shared"))
    assert r.lock_interval == pytest.approx((2e-3, 3.5e-3))  # free; the second waits 1.5 ms of Python
    assert r.summary()["lock_dominated"]
    assert replay(trace, ReplayConfig(nodes=1, cores=1, network=NET, gil="shared")).lock_interval is None


def test_nodes_that_shared_one_process_are_replayed_elsewhere_with_a_lock_per_node():
    work = np.full(8, 1000)
    trace = worked_trace(work, RATE * work + FIXED)
    trace.machine = MachineModel(phases={"toy/kernel": PhaseModel(Fit(RATE, FIXED))}, lock="shared").to_dict()
    here = replay(trace, ReplayConfig(nodes=1, cores=2, network=NET)).summary()
    cluster = replay(trace, ReplayConfig(nodes=4, cores=2, network=NET)).summary()
    assert here["gil"] == "shared"  # the recorded node count: the recorded process
    assert cluster["gil"] == "process"  # a cluster runs a rank per node
    assert replay(trace, ReplayConfig(nodes=4, cores=2, network=NET, gil="shared")).summary()["gil"] == "shared"
