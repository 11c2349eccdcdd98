"""Loops in the step's task graph: a group of phases repeats while the app says so, every
iteration's tasks ordinary tasks; a conjugate-gradient solve on tiles converges to the direct
solve, bitwise the same for any placement, worker count, chunking and 2 MPI ranks; compiled
Jacobi sweeps on the native executor are the Python executor's bits, in one process and on 2
MPI ranks."""

import json
import logging
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import mpi_env, mpi_python
from graph_apps import CGHeat, JacobiHeat
from shoal.cluster import Cluster
from shoal.errors import ShoalError
from shoal.placement import get_policy
from shoal.runtime import App, LocalExecutor, Loop, Phase
from shoal.runtime.graph import TaskSequence, loop_spans
from shoal.runtime.native import NativeExecutor
from shoal.tiling import Tiling

PHASES = (Phase("a"), Phase("b", reads="faces"), Phase("c", reduction="sum"), Phase("d"))


def test_a_sequence_without_loops_is_every_phase_of_every_step():
    seq = TaskSequence(PHASES, (), 3)
    assert list(seq.extend()) == list(range(12)) and seq.pending is None
    assert seq.phase == [0, 1, 2, 3] * 3 and seq.step == [0] * 4 + [1] * 4 + [2] * 4
    assert seq.step_first == [0, 4, 8] and seq.end() == 12


def test_a_sequence_waits_at_each_iteration_end_and_goes_on_as_decided():
    seq = TaskSequence(PHASES, (Loop("b", "c", 5),), 2)
    assert list(seq.extend()) == [0, 1, 2] and seq.pending[1:] == (0, 0)
    assert list(seq.decide(True)) == [3, 4]  # b, c again
    assert seq.iteration[3:5] == [1, 1] and seq.pending[1:] == (0, 1)
    assert list(seq.decide(False)) == [5, 6, 7, 8]  # d, then step 1: a, b, c
    assert seq.phase[5:] == [3, 0, 1, 2] and seq.step[5:] == [0, 1, 1, 1] and seq.iteration[5:] == [0, 0, 0, 0]
    assert seq.step_first == [0, 6]
    seq.limit(1)  # a stop: step 1 is not run
    assert seq.end() == 6
    assert list(seq.decide(False)) == []  # nothing beyond the limit


def test_a_raised_limit_resumes_the_sequence():
    seq = TaskSequence(PHASES, (), 1)
    seq.extend()
    assert list(seq.limit(2)) == [4, 5, 6, 7] and seq.end() == 8


@pytest.mark.parametrize("loops, match", [
    ((Loop("a", "z", 3),), "lacks"),
    ((Loop("c", "b", 3),), "after its last"),
    ((Loop("a", "b", 3),), "must reduce"),
    ((Loop("a", "c", 3), Loop("c", "c", 2)), "overlap"),
])
def test_loops_are_checked_against_the_phases(loops, match):
    with pytest.raises(TypeError, match=match):
        loop_spans(PHASES, loops)


def test_loops_need_a_positive_maximum_and_apps_with_loops_define_again():
    with pytest.raises(ValueError, match="max_iterations"):
        Loop("b", "c", 0)
    with pytest.raises(TypeError, match="again"):
        type("NoAgain", (App,), {"name": "x", "phases": PHASES[2:3], "loops": (Loop("c", "c", 3),),
                                 "c": lambda *a: 0, "init_tile": lambda *a: 0, "gather": lambda *a: {}})


def run(app, tiling, nodes=1, workers=1, placement="sfc", steps=3, seed=1, chunks=None):
    cluster = Cluster.uniform(nodes, workers)
    owner = get_policy(placement).place(tiling, cluster, seed)
    with LocalExecutor(app, tiling, cluster, owner) as ex:
        if chunks is None:
            return ex.run(steps)
        states, reduced, first, parts = None, {}, 0, []
        for n in chunks:
            part = ex.run(n, states=states, first_step=first, reduced_before=reduced)
            states, reduced, first = part.states, part.reductions, first + n
            parts.append(part)
        return parts


@pytest.fixture(scope="module")
def cg():
    app = CGHeat()
    tiling = Tiling.from_count(app.grid, 9)
    return app, tiling, run(app, tiling)


def test_cg_converges_to_the_direct_solve_of_every_implicit_step(cg):
    import scipy.sparse.linalg as sla

    app, tiling, res = cg
    u = app.gather({t: app.init_tile(t, tiling) for t in range(tiling.ntiles)}, tiling)["u"].ravel()
    for _ in range(3):
        u = sla.spsolve(app.matrix(), u)
    got = app.gather(res.states, tiling)["u"].ravel()
    assert np.abs(got - u).max() < 1e-9 * np.abs(u).max()
    # CG on n^2 = 576 unknowns of a well-conditioned system: tens of iterations, never the maximum
    assert all(10 < n < 100 for n in res.iterations.values()) and len(res.iterations) == 3


def test_every_iteration_is_ordinary_tasks_recorded_with_its_iteration(cg):
    app, tiling, res = cg
    T, tasks = tiling.ntiles, res.tasks
    for step in range(3):
        n = res.iterations[(step, "matvec")]
        mine = tasks["step"] == step
        assert mine.sum() == T * (2 + 2 * n)  # start, finish, and matvec + update per iteration
        for phase in (1, 2):
            rows = mine & (tasks["phase"] == phase)
            assert np.array_equal(np.bincount(tasks["iteration"][rows]), np.full(n, T))
        assert (tasks["iteration"][mine & (tasks["phase"] % 3 == 0)] == 0).all()
    m = res.messages
    assert (m["phase"] == 1).all()  # only matvec reads halos, from its face neighbours
    assert len(m["src"]) == sum(res.iterations.values()) * sum(map(len, tiling.face_neighbours))


def test_the_eigenmode_decays_by_one_plus_dt_lambda_in_one_iteration():
    app = CGHeat(initial="mode")
    tiling = Tiling.from_count(app.grid, 4)
    res = run(app, tiling, steps=2)
    u0 = app.gather({t: app.init_tile(t, tiling) for t in range(4)}, tiling)["u"]
    got = app.gather(res.states, tiling)["u"]
    assert np.abs(got - u0 / (1 + app.dt * app.eigenvalue()) ** 2).max() < 1e-14
    assert set(res.iterations.values()) == {1}


@pytest.mark.parametrize("nodes, workers, placement, chunks", [
    (2, 2, "birdshot", None), (3, 1, "strips", None), (1, 2, "sfc", (1, 2)), (2, 1, "birdshot", (2, 1)),
])
def test_cg_is_bitwise_identical_for_any_placement_workers_and_chunking(cg, nodes, workers, placement, chunks):
    app, tiling, reference = cg
    got = run(app, tiling, nodes, workers, placement, chunks=chunks)
    states = got[-1].states if chunks else got.states
    iterations = {k: v for part in got for k, v in part.iterations.items()} if chunks else got.iterations
    assert app.gather(states, tiling)["u"].tobytes() == app.gather(reference.states, tiling)["u"].tobytes()
    assert iterations == reference.iterations


def test_a_loop_that_reaches_its_maximum_warns_or_stops_a_run_that_requires_convergence(caplog):
    tiling = Tiling.from_count((24, 24), 4)
    with caplog.at_level(logging.WARNING, logger="shoal"):
        res = run(CGHeat(max_iterations=5), tiling, steps=2)
    assert res.iterations == {(0, "matvec"): 5, (1, "matvec"): 5}
    assert "reached its 5 iterations without converging" in caplog.text
    with pytest.raises(ShoalError, match=r"step 0: loop matvec\.\.update reached its 5 iterations"):
        run(CGHeat(max_iterations=5, required=True), tiling, steps=2)


class CountingLoop(App):
    """A loop of two phases that runs ``counts[step]`` iterations; every task checks that the
    halos it reads come from its neighbours' previous instance."""

    name = "counting-loop-test"
    grid = (8, 8)

    def __init__(self, counts, loop_reads, ntiles):
        self.counts, self.ntiles = counts, ntiles
        self.phases = (Phase("pre", reads="faces"), Phase("body", reads=loop_reads),
                       Phase("check", reduction=("sum", "max")), Phase("post", halo=True))
        self.loops = (Loop("body", "check", max(counts)),)

    def init_tile(self, tile, tiling):
        return {"done": 0, "log": []}

    def pack_halos(self, state, src, tiling):
        return dict.fromkeys(map(int, tiling.neighbours[src]), np.array([state["done"]]))

    def _task(self, tile, state, halos, ctx, name):
        assert all(int(h[0]) == state["done"] for h in halos.values())
        state["done"] += 1
        state["log"].append((ctx.step, name, ctx.iteration))
        return 1

    def pre(self, tile, state, halos, ctx, tiling):
        return self._task(tile, state, halos, ctx, "pre")

    def body(self, tile, state, halos, ctx, tiling):
        return self._task(tile, state, halos, ctx, "body")

    def check(self, tile, state, halos, ctx, tiling):
        return self._task(tile, state, halos, ctx, "check"), (1.0, float(ctx.iteration))

    def post(self, tile, state, halos, ctx, tiling):
        return self._task(tile, state, halos, ctx, "post")

    def again(self, loop, step, iteration, value):
        assert value == (float(self.ntiles), float(iteration))  # every tile's 1, and the iteration
        return iteration + 1 < self.counts[step]

    def gather(self, states, tiling):
        return {}


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(counts=st.lists(st.integers(1, 4), min_size=1, max_size=4), count=st.sampled_from([1, 4, 6]),
       nodes=st.integers(1, 3), workers=st.integers(1, 2), loop_reads=st.sampled_from(["faces", "all", ""]))
def test_every_instance_runs_once_per_tile_in_sequence_order_for_random_iteration_counts(counts, count, nodes,
                                                                                        workers, loop_reads):
    tiling = Tiling.from_count((8, 8), count)
    app = CountingLoop(counts, loop_reads, count)
    res = run(app, tiling, min(nodes, count), workers, "birdshot", steps=len(counts))
    expected = []
    for step, n in enumerate(counts):
        expected += [(step, "pre", 0)] + [(step, name, it) for it in range(n) for name in ("body", "check")]
        expected.append((step, "post", 0))
    for t in range(count):
        assert res.states[t]["log"] == expected
    assert res.iterations == {(s, "body"): n for s, n in enumerate(counts)}
    tasks = res.tasks
    assert len(tasks["tile"]) == len(expected) * count
    order = np.lexsort((tasks["start"], tasks["tile"]))  # per tile, in time order
    ends, starts = tasks["end"][order].reshape(count, -1), tasks["start"][order].reshape(count, -1)
    assert (starts[:, 1:] >= ends[:, :-1]).all()


SCRIPT_HEAD = """
import hashlib, json, sys
sys.path.insert(0, {tests!r})
from graph_apps import CGHeat, JacobiHeat
from shoal.cluster import Cluster
from shoal.runtime import Simulation
from shoal.runtime.launch import current_team
from shoal.tiling import Tiling
from shoal.placement import get_policy

team = current_team()
app = {app}
tiling = Tiling.from_count(app.grid, 9)
cluster = Cluster.uniform(team.size, {workers})
"""

MPI_SCRIPT = SCRIPT_HEAD + """owner = get_policy("birdshot").place(tiling, cluster, 3)
with team.executor(app, tiling, cluster, owner) as ex:
    res = ex.run(2)
mine = {{t: s for t, s in res.states.items() if owner[t] == team.rank}}
states = team.to_root(mine, app.pack_state, app.unpack_state)
combined = team.combine(res)
if team.rank == 0:
    u = app.gather(states, tiling)["u"]
    print("result", json.dumps({{"digest": hashlib.sha256(u.tobytes()).hexdigest(),
                                "iterations": sorted([k[0], n] for k, n in combined.iterations.items()),
                                "tasks": int(len(combined.tasks["tile"])),
                                "messages": int(len(combined.messages["src"]))}}))
"""


@pytest.mark.mpi(ranks=(2,))
@pytest.mark.parametrize("workers", [1, 2])
def test_cg_on_two_mpi_ranks_is_bitwise_the_local_solve(ranks, workers, tmp_path):
    import hashlib

    app = CGHeat()
    tiling = Tiling.from_count(app.grid, 9)
    local = run(app, tiling, steps=2)
    script = tmp_path / "cg.py"
    script.write_text(MPI_SCRIPT.format(tests=str(Path(__file__).parent), app="CGHeat()", workers=workers))
    done = subprocess.run(mpi_python(ranks, script), capture_output=True, text=True, timeout=240, env=mpi_env())
    assert done.returncode == 0, done.stderr
    line = next(x for x in done.stdout.splitlines() if x.startswith("result "))
    got = json.loads(line.split(" ", 1)[1])
    assert got["digest"] == hashlib.sha256(app.gather(local.states, tiling)["u"].tobytes()).hexdigest()
    assert got["iterations"] == sorted([k[0], n] for k, n in local.iterations.items())
    assert got["tasks"] == len(local.tasks["tile"]) and got["messages"] == len(local.messages["src"])


JACOBI_MPI = SCRIPT_HEAD + """owner = get_policy("birdshot").place(tiling, cluster, 3)
sim = Simulation(app, tiling, cluster, owner, team=team)
assert sim.executor.backend == "native"
if {stop_at} >= 0 and team.rank == 1:  # a stop asked amid the loop of a step
    sim.add_measurement(lambda r: sim.request_stop() if r.step == {stop_at} else None)
sim.run(4)
everything = sim.gather()
if team.is_root:
    print("result", json.dumps({{"digest": hashlib.sha256(everything["u"].tobytes()).hexdigest(),
                                "steps": sim.step_count,
                                "iterations": sorted([k[0], n] for p in sim.parts for k, n in p.iterations.items())}}))
sim.close()
"""


@pytest.mark.parametrize("tiles, nodes, workers", [(1, 1, 1), (9, 1, 2), (9, 2, 1)])
def test_compiled_jacobi_sweeps_in_a_loop_are_the_python_executors_bits(tiles, nodes, workers):
    app = JacobiHeat()
    tiling = Tiling.from_count(app.grid, tiles)
    cluster = Cluster.uniform(nodes, workers)
    owner = get_policy("birdshot").place(tiling, cluster, 3)
    results = []
    for executor in (LocalExecutor, NativeExecutor):
        with executor(app, tiling, cluster, owner) as ex:
            results.append(ex.run(3))
    py, nat = results
    assert np.array_equal(app.gather(py.states, tiling)["u"], app.gather(nat.states, tiling)["u"])
    assert py.iterations == nat.iterations and min(py.iterations.values()) > 10
    assert (nat.tasks["kernel"] > 0).all()  # every task compiled: no Python phase


@pytest.mark.mpi(ranks=(2,))
@pytest.mark.parametrize("workers, stop_at, compiled", [(2, -1, ("start", "sweep")), (1, 1, ("start", "sweep")),
                                                        (1, -1, ("start",))],
                         ids=["whole", "stopped", "python-halos"])
def test_compiled_loops_on_two_mpi_ranks_are_the_local_python_bits(ranks, workers, stop_at, compiled, tmp_path):
    """Every rank decides each iteration alike from the same reduced bits; halos of an
    iteration a rank has not decided yet wait for it; a stop asked amid a loop ends every rank
    at one step; a sweep left in Python sends its halos between ranks as payloads."""
    import hashlib

    script = tmp_path / "jacobi.py"
    script.write_text(JACOBI_MPI.format(tests=str(Path(__file__).parent), app=f"JacobiHeat(compiled={compiled!r})",
                                         workers=workers, stop_at=stop_at))
    done = subprocess.run(mpi_python(ranks, script), capture_output=True, text=True, timeout=240, env=mpi_env())
    assert done.returncode == 0, done.stderr
    got = json.loads(next(x for x in done.stdout.splitlines() if x.startswith("result ")).split(" ", 1)[1])
    steps = got["steps"]
    assert (steps == 4) if stop_at < 0 else (2 <= steps < 4)
    app = JacobiHeat()
    tiling = Tiling.from_count(app.grid, 9)
    with LocalExecutor(app, tiling, Cluster.uniform(1, 1), np.zeros(9, int)) as ex:
        local = ex.run(steps)
    assert got["digest"] == hashlib.sha256(app.gather(local.states, tiling)["u"].tobytes()).hexdigest()
    assert got["iterations"] == sorted([k[0], n] for k, n in local.iterations.items())


# ----- traces and replays of loops ----------------------------------------------------------
def cg_trace(res, app, tiling, nodes=1, workers=1):
    from shoal.trace import Trace

    return Trace.of_run(res, app.phases, tiling, Cluster.uniform(nodes, workers),
                        placements=[(0, np.zeros(tiling.ntiles, np.int64))], loops=app.loops, app=app.name)


def test_a_trace_keeps_the_loops_and_every_steps_iterations(cg, tmp_path):
    import h5py

    from shoal.trace import Trace

    app, tiling, res = cg
    trace = cg_trace(res, app, tiling)
    back = Trace.read(trace.write(tmp_path / "trace.h5"))
    assert back.loop_phases == [-1, 0, 0, -1] and back.iterations() == res.iterations
    with h5py.File(tmp_path / "trace.h5") as f:
        assert f["phases"].attrs["version"] == 2  # a reader of version 1 refuses loops it would misread
    phase, iteration = back.slots()
    most = max(res.iterations.values())
    assert phase.tolist() == [0] + [1, 2] * most + [3]
    assert iteration.tolist() == [0] + sorted(list(range(most)) * 2) + [0]
    present = back.slot_present()
    for s in range(3):
        assert present[s].sum() == 2 + 2 * res.iterations[(s, "matvec")]


def test_a_trace_keeps_what_every_step_reduced_the_last_iteration_of_a_loop_included(cg, tmp_path):
    """Per step, the values the tiles read: the residual CG stopped on is below its tolerance."""
    from shoal.records import REDUCTIONS
    from shoal.trace import Trace

    app, tiling, res = cg
    back = Trace.read(cg_trace(res, app, tiling).write(tmp_path / "trace.h5"))
    r = back.reductions
    assert set(r) == set(REDUCTIONS.names) and len(r["step"]) == 3 * (2 + 1 + 2)  # start, matvec, update
    for step in range(3):
        for phase, name in ((0, "start"), (1, "matvec"), (2, "update")):
            rows = (r["step"] == step) & (r["phase"] == phase)
            expected = np.atleast_1d(res.reductions[(step, name)])
            assert r["operand"][rows].tolist() == list(range(len(expected)))
            assert r["value"][rows].tobytes() == np.asarray(expected, np.float64).tobytes()
        stopped = r["value"][(r["step"] == step) & (r["phase"] == 2) & (r["operand"] == 1)][0]
        assert 0 < stopped <= app.tol  # the max residual that ended the loop
    assert back.truncated(2).reductions["step"].max() == 1


def test_a_serial_replay_of_a_loop_trace_costs_every_iteration_once(cg):
    from shoal.replay import ReplayConfig, replay

    app, tiling, res = cg
    trace = cg_trace(res, app, tiling)
    r = replay(trace, ReplayConfig(nodes=1, cores=1, costs="measured"))
    assert r.makespan == pytest.approx(trace.tasks["cost"].sum(), rel=1e-9)
    got, want = r.trace.tasks, trace.tasks
    key = lambda t: sorted(zip(t["step"].tolist(), t["phase"].tolist(), t["iteration"].tolist(),  # noqa: E731
                               t["tile"].tolist(), strict=True))
    assert key(got) == key(want) and r.trace.iterations() == res.iterations


def test_a_replay_told_another_iteration_count_drops_or_repeats_the_last_iteration(cg):
    from shoal.replay import ReplayConfig, replay
    from shoal.trace import with_iterations

    app, tiling, res = cg
    trace = cg_trace(res, app, tiling)
    t = trace.tasks
    n = 50  # more than every step ran
    more = with_iterations(trace, n)
    assert more.iterations() == {k: n for k in res.iterations}
    extra = 0.0
    for (step, _), k in res.iterations.items():
        last = (t["step"] == step) & (t["iteration"] == k - 1) & np.isin(t["phase"], [1, 2])
        extra += (n - k) * t["cost"][last].sum()
    r = replay(trace, ReplayConfig(nodes=1, cores=1, costs="measured", iterations=n))
    assert r.makespan == pytest.approx(t["cost"].sum() + extra, rel=1e-9)
    one = with_iterations(trace, 1)
    assert one.iterations() == {k: 1 for k in res.iterations}
    assert len(one.messages["src"]) == 3 * sum(map(len, tiling.face_neighbours))
    with pytest.raises(ShoalError, match="positive"):
        with_iterations(trace, 0)


def test_aggregating_a_loop_trace_keeps_each_iteration_and_the_total_cost(cg):
    from shoal.trace import aggregate

    app, tiling, res = cg
    trace = cg_trace(res, app, tiling)
    coarse = aggregate(trace, tiling.coarsen(3))
    assert coarse.tiling.ntiles == 1 and coarse.iterations() == res.iterations
    assert coarse.tasks["cost"].sum() == pytest.approx(trace.tasks["cost"].sum(), rel=1e-12)
    assert len(coarse.messages["src"]) == 0  # one coarse tile: every halo is inside it


def test_a_replayed_loop_waits_at_every_iterations_barrier_and_not_at_slots_a_step_skipped():
    """2 tiles on 2 nodes; one phase in a loop with a sum; step 0 ran 3 iterations, step 1 one.
    Each iteration ends when the slower tile (20 ms) does, then an all-reduce of 2 latencies."""
    from shoal.cluster import Network
    from shoal.replay import ReplayConfig, replay
    from shoal.trace import Trace

    net = Network(latency_s=1e-3, bandwidth_Bps=1e6, overhead_s=0.0)
    rows = [(0, it, tile) for it in range(3) for tile in range(2)] + [(1, 0, 0), (1, 0, 1)]
    step, it, tile = (np.array(c) for c in zip(*rows, strict=True))
    n = len(rows)
    trace = Trace(
        tasks={"step": step, "phase": np.zeros(n), "iteration": it, "tile": tile, "node": np.zeros(n),
               "worker": np.zeros(n), "start": np.zeros(n), "end": np.zeros(n), "cost": 0.01 * (1 + tile),
               "work": np.ones(n)},
        messages={k: np.zeros(0) for k in ("step", "phase", "src", "dst", "bytes")},
        phases=["a"], tiling=Tiling.from_counts((2, 1), (2, 1), halo=0), cluster=Cluster.uniform(1, 1),
        placement_steps=np.array([0]), placement_owners=np.zeros((1, 2), int), step_end=np.zeros(2),
        barrier_phases=[True], loop_phases=[0])
    r = replay(trace, ReplayConfig(nodes=2, cores=1, placement="strips", network=net, costs="measured"))
    barrier = 2 * 1 * (1e-3 + 0.0)
    assert r.makespan == pytest.approx(4 * 0.02 + 3 * barrier, rel=1e-12)
