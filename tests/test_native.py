"""The native executor: the same run as the Python executor, bit for bit, row for row.

The app-by-app identity is in ``test_apps.py``; here the executor's own contract: tilings,
placements, worker counts, loops, lagged reductions, resumes, stops, errors, trace rows, copy
plans, and idle workers that sleep instead of spinning.
"""

import os
import threading
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import assert_same_state
from graph_apps import CGHeat
from shoal.apps import all_apps
from shoal.apps.synthetic import SyntheticApp, SyntheticParams
from shoal.cluster import Cluster
from shoal.errors import ShoalError
from shoal.placement import get_policy
from shoal.runtime import App, Phase
from shoal.runtime.local import LocalExecutor
from shoal.runtime.native import KERNEL, Native, NativeExecutor
from shoal.runtime.native.plan import noop_kernel
from shoal.tiling import Tiling


def _run(cls, app, tiling, nodes=1, workers=1, steps=6, placement="birdshot", **kwargs):
    cluster = Cluster.uniform(nodes, workers)
    owner = get_policy(placement).place(tiling, cluster, 3)
    with cls(app, tiling, cluster, owner) as ex:
        return ex.run(steps, **kwargs)


def _synthetic(grid=(24, 20), work_per_cell=6.0, **params):
    return SyntheticApp(SyntheticParams(grid=list(grid), work_per_cell=work_per_cell, **params), 10)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(counts=st.tuples(st.integers(1, 6), st.integers(1, 5)), nodes=st.integers(1, 3), workers=st.integers(1, 3),
       placement=st.sampled_from(["birdshot", "sfc", "strips"]))
def test_compiled_phases_give_the_python_executors_bits_on_any_tiling_placement_and_workers(counts, nodes, workers,
                                                                                            placement):
    app = _synthetic()
    one = Tiling.from_counts(app.grid, (1, 1))
    reference = _run(LocalExecutor, app, one, steps=5)
    tiling = Tiling.from_counts(app.grid, counts)
    nodes = min(nodes, tiling.ntiles)
    got = _run(NativeExecutor, app, tiling, nodes, workers, steps=5, placement=placement)
    assert_same_state(app.gather(reference.states, one), app.gather(got.states, tiling))


def test_a_3d_run_and_its_rows_match_the_python_executors():
    app = _synthetic((12, 10, 8))
    tiling = Tiling.from_counts(app.grid, (3, 2, 2))
    a = _run(LocalExecutor, app, tiling, 2, 1)
    b = _run(NativeExecutor, app, tiling, 2, 2)
    assert_same_state(app.gather(a.states, tiling), app.gather(b.states, tiling))
    for name in ("step", "phase", "tile", "iteration", "work"):
        assert np.array_equal(a.tasks[name], b.tasks[name]), name
    for name in ("step", "phase", "src", "dst", "bytes"):  # a copy plan moves what a payload held
        assert np.array_equal(a.messages[name], b.messages[name]), name
    t = b.tasks
    assert (t["node"] >= 0).all() and (t["worker"] >= 0).all() and (t["worker"] < 2).all()
    assert (t["ready"] <= t["start"]).all() and (t["start"] <= t["end"]).all() and (t["end"] <= b.wall_s).all()
    # a tile's tasks run one after another
    for tile in range(tiling.ntiles):
        mine = t["tile"] == tile
        assert (np.diff(t["start"][mine]) > 0).all()
    assert (np.diff(b.step_end) >= 0).all()  # a step ends once every tile has ended it, after the step before


def test_a_loop_until_converged_runs_the_same_iterations_and_reductions():
    app = CGHeat()
    tiling = Tiling.from_counts(app.grid, (3, 2))
    a = _run(LocalExecutor, app, tiling, 1, 2, steps=3)
    b = _run(NativeExecutor, app, tiling, 2, 1, steps=3)
    assert a.iterations == b.iterations and min(b.iterations.values()) > 10
    assert a.reductions == b.reductions
    assert_same_state(app.gather(a.states, tiling), app.gather(b.states, tiling))
    assert np.array_equal(a.tasks["iteration"], b.tasks["iteration"])


def test_a_loop_that_must_converge_and_does_not_stops_in_one_line():
    app = CGHeat(max_iterations=3, required=True)
    with pytest.raises(ShoalError, match=r"step 0: loop matvec..update reached its 3 iterations"):
        _run(NativeExecutor, app, Tiling.from_counts(app.grid, (2, 2)), steps=2)


def test_a_lagged_reduction_and_a_resume_read_what_an_uninterrupted_run_reads():
    spec = all_apps()["sph2d"]
    app = spec.tiny_app(8)
    tiling = Tiling.from_count(app.grid, 4)
    whole = _run(LocalExecutor, app, tiling, 1, 2, steps=6)
    cluster, owner = Cluster.uniform(2, 1), np.array([0, 1, 0, 1])
    with NativeExecutor(app, tiling, cluster, owner) as ex:
        first = ex.run(3)
        second = ex.run(3, states=first.states, first_step=3, reduced_before=first.reductions)
    assert_same_state(app.gather(whole.states, tiling), app.gather(second.states, tiling))
    assert {**first.reductions, **second.reductions} == whole.reductions


class Gated(SyntheticApp):
    """The synthetic app with a phase left in Python that holds every tile at step 4 until
    ``released()`` says so: a stop asked for at step 2 lands before the end however busy the
    host is."""

    phases = (*SyntheticApp.phases, Phase("hold", work="tiles"))

    def __init__(self, released, *args):
        super().__init__(*args)
        self.released = released

    def hold(self, tile, state, halos, ctx, tiling):
        deadline = time.monotonic() + 60
        while ctx.step >= 4 and not self.released() and time.monotonic() < deadline:
            time.sleep(1e-3)
        return 1


def test_a_stop_ends_at_a_step_boundary_and_the_run_goes_on_from_there_bitwise():
    from shoal.runtime.native.engine import LIMIT

    params = SyntheticParams(grid=[24, 20], work_per_cell=6.0)
    steps = 12
    tiling = Tiling.from_counts(params.grid, (4, 4))
    whole = _run(LocalExecutor, Gated(lambda: True, params, 10), tiling, steps=steps)
    stop = threading.Event()
    executor = []
    # Tiles wait at step 4 until the executor has taken the stop in (its step limit fell).
    app = Gated(lambda: executor[0]._shared.control[LIMIT] < steps, params, 10)
    with NativeExecutor(app, tiling, Cluster.uniform(1, 2), np.zeros(tiling.ntiles, np.int64)) as ex:
        executor.append(ex)
        part = ex.run(steps, on_step=lambda k: k == 2 and stop.set(), stop=stop)
        assert 3 <= part.steps <= 5
        assert len(part.tasks["step"]) == part.steps * 3 * tiling.ntiles and (part.tasks["node"] == 0).all()
        rest = ex.run(steps - part.steps, states=part.states, first_step=part.steps, reduced_before=part.reductions)
    assert_same_state(app.gather(whole.states, tiling), app.gather(rest.states, tiling))


def test_new_owners_and_workers_between_runs_change_no_bit():
    app = _synthetic()
    tiling = Tiling.from_counts(app.grid, (4, 3))
    whole = _run(LocalExecutor, app, tiling, steps=6)
    with NativeExecutor(app, tiling, Cluster.uniform(2, 1), np.zeros(12, np.int64)) as ex:
        a = ex.run(3)
        ex.reconfigure(owner=np.arange(12) % 2, cores={0: 2})
        b = ex.run(3, states=a.states, first_step=3, reduced_before=a.reductions)
        assert set(b.tasks["node"]) == {0, 1} and ex.cluster.cores == (2, 1)
    assert_same_state(app.gather(whole.states, tiling), app.gather(b.states, tiling))


def test_an_error_in_a_compiled_kernel_is_one_line_with_step_phase_and_tile():
    app = _synthetic(fail_at_step=3)
    with pytest.raises(ShoalError, match=r"^step 3, phase burn, tile 0: RuntimeError: injected fault"):
        _run(NativeExecutor, app, Tiling.from_counts(app.grid, (2, 2)), 1, 2)


class Faulty(App):
    """One phase left in Python that fails on one tile at one step."""

    name = "faulty"
    grid = (8, 8)
    phases = (Phase("touch", halo=True),)

    def init_tile(self, tile, tiling):
        return {"x": np.zeros(1)}

    def pack_halos(self, state, src, tiling):
        return {int(d): state["x"].copy() for d in tiling.neighbours[src]}

    def touch(self, tile, state, halos, ctx, tiling):
        if ctx.step == 2 and tile == 3:
            raise ZeroDivisionError("a tile divided by zero")
        state["x"] += sum(float(h[0]) for h in halos.values()) + 1.0
        return 1

    def gather(self, states, tiling):
        return {"x": np.array([states[t]["x"][0] for t in sorted(states)])}


def test_an_error_in_a_python_phase_is_one_line_too():
    with pytest.raises(ShoalError, match=r"^step 2, phase touch, tile 3: ZeroDivisionError: a tile divided by zero"):
        _run(NativeExecutor, Faulty(), Tiling.from_counts((8, 8), (2, 2)), 2, 1)


def test_python_phases_read_their_neighbours_payloads_through_the_trampoline():
    class Fine(Faulty):
        def touch(self, tile, state, halos, ctx, tiling):
            return super().touch(tile, state, halos, ctx.__class__(0, ctx.reduced), tiling)

    tiling = Tiling.from_counts((8, 8), (3, 3))
    a = _run(LocalExecutor, Fine(), tiling, steps=5)
    b = _run(NativeExecutor, Fine(), tiling, 2, 2, steps=5)
    assert_same_state(Fine().gather(a.states, tiling), Fine().gather(b.states, tiling))
    assert b.messages["bytes"].sum() == a.messages["bytes"].sum() > 0


def test_compiled_job_phases_and_bad_copy_plans_are_refused_in_one_line():
    from graph_apps import MeshContact, sheet
    from shoal.mesh import MeshPartition

    vertices, elements = sheet()
    partition = MeshPartition.from_mesh(vertices, elements, 4)
    contact = MeshContact(partition, vertices)
    contact.native = lambda tiling: Native({"broad": noop_kernel}, ("x",))
    with pytest.raises(ShoalError, match="phase 'broad' emits or runs jobs: it runs in Python, not compiled"):
        NativeExecutor(contact, partition, Cluster.uniform(1, 1), np.zeros(partition.ntiles, np.int64))

    app = _synthetic()
    native = app.native

    def wrong(tiling):
        plan = native(tiling)
        return Native(plan.kernels, plan.fields, plan.ints, plan.consts,
                      lambda phase, src, dst: [("u", (slice(0, 1), slice(0, 2), slice(None)), "pad",
                                                (slice(0, 1), slice(0, 1), slice(None)))], plan.scratch)

    app.native = wrong
    with pytest.raises(ShoalError, match=r"copy plan of phase 'diffuse', tile 0 -> 1: boxes of 2 and 3 cells"):
        _run(NativeExecutor, app, Tiling.from_counts(app.grid, (2, 1)))


class Slow(App):
    """One tile whose compiled phase takes a while: the other workers have nothing to do."""

    name = "slow"
    grid = (4, 4)
    phases = (Phase("wait"),)

    def init_tile(self, tile, tiling):
        return {"x": np.zeros(1)}

    def wait(self, tile, state, halos, ctx, tiling):
        return 0

    def gather(self, states, tiling):
        return {}

    def native(self, tiling):
        return Native(kernels={"wait": busy}, fields=("x",))


import numba  # noqa: E402


@numba.njit(KERNEL, nogil=True, cache=True)
def busy(tile, step, iteration, mem, ints, consts, reduced, out):
    v = mem[0]
    for _ in range(20_000_000):
        v = np.sqrt(v + 1.0)
    mem[0] = v
    return 1


def test_idle_workers_sleep_instead_of_spinning():
    """Three workers, one tile: two have nothing to do for the whole run. Spinning, they would
    burn as much CPU as the busy one; asleep (a futex), next to nothing."""
    tiling = Tiling.from_counts((4, 4), (1, 1))
    with NativeExecutor(Slow(), tiling, Cluster.uniform(1, 3), np.zeros(1, np.int64)) as ex:
        ex.run(1)
        cpu0, t0 = time.process_time(), time.perf_counter()
        result = ex.run(3)
        cpu = time.process_time() - cpu0
    busy_s = float((result.tasks["end"] - result.tasks["start"]).sum())
    assert busy_s > 0
    assert cpu < 1.5 * busy_s + 0.05, (cpu, busy_s, time.perf_counter() - t0)


def test_task_costs_are_cpu_time_even_with_more_workers_than_cores():
    """Six workers share this machine's cores: a task's wall time then counts the time its
    thread waited for a core. The costs are scaled to the CPU time each node's workers used per
    step (read per step, not per task), so they add up to no more than the process used, and
    to most of it (the spinning)."""
    from shoal.replay.calibrate import NativeSpinApp

    tiling = Tiling.from_counts((12, 1), (12, 1))
    workers = 2 * (os.cpu_count() or 1) + 2
    with NativeExecutor(NativeSpinApp(1_000_000, halo=False), tiling, Cluster.uniform(1, workers),
                        np.zeros(12, np.int64)) as ex:
        ex.run(1)
        cpu0 = time.process_time()
        result = ex.run(4)
        cpu = time.process_time() - cpu0
    cost = float(result.tasks["cost"].sum())
    wall = float((result.tasks["end"] - result.tasks["start"]).sum())
    assert 0.5 * cpu < cost <= 1.02 * cpu + 0.005, (cost, cpu, wall)
    assert np.all(result.tasks["kernel"] <= result.tasks["cost"] + 1e-12)


@pytest.mark.parametrize("app", ["synthetic", "sph2d", "swe"])
def test_shoal_compare_finds_the_two_backends_run_folders_identical(app, tmp_path):
    """The user's check: the same scenario on both backends, with balancing and checkpoints on
    the way, and ``shoal compare`` says identical."""
    from conftest import tiny_run
    from shoal.compare import compare_runs

    runs = {ex: tiny_run(tmp_path / ex, app, steps=8, nodes=2, workers=2, placement="greedy", period=3,
                         checkpoint_every=4, executor=ex) for ex in ("python", "native")}
    assert runs["native"].summary["steps"] == 8 and runs["native"].summary["executor"] == "native"
    verdict = compare_runs(runs["python"].path, runs["native"].path)
    assert verdict.identical, verdict


def test_a_halo_phase_whose_copy_plan_moves_nothing_still_waits_for_its_neighbours():
    app = _synthetic()
    native = app.native

    def empty(tiling):
        plan = native(tiling)
        return Native(plan.kernels, plan.fields, plan.ints, plan.consts, lambda phase, src, dst: [], plan.scratch)

    app.native = empty
    tiling = Tiling.from_counts(app.grid, (3, 3))
    result = _run(NativeExecutor, app, tiling, 1, 2, steps=4)
    t = result.tasks
    assert result.steps == 4 and (t["node"] == 0).all()
    assert (result.messages["bytes"] == 0).all()
    assert len(result.messages["bytes"]) == 4 * sum(len(n) for n in tiling.neighbours)
    diffuse = t["phase"] == 1
    for tile in range(tiling.ntiles):  # a reader starts after each neighbour's burn of the same step
        for step in range(4):
            mine = (t["tile"] == tile) & (t["step"] == step) & diffuse
            sources = (t["step"] == step) & ~diffuse & np.isin(t["tile"], tiling.neighbours[tile])
            assert t["start"][mine][0] >= t["end"][sources].max()


class Reads(App):
    """Phases left in Python that record what their context holds: a lagged reduction, read
    by the phase after it a step later and by no other, and a barrier's, read from then on."""

    name = "reads"
    grid = (6, 6)
    phases = (Phase("early"), Phase("lag", reduction="min", lagged=True), Phase("late", reduction="sum"),
              Phase("last"))

    def init_tile(self, tile, tiling):
        return {"seen": np.zeros(0)}

    def initial_reductions(self):
        return {"lag": -1.0}

    def _note(self, tile, state, ctx, value=None):
        seen = [ctx.step, len(ctx.reduced)] + [ctx.reduced[k] for k in sorted(ctx.reduced)]
        state["seen"] = np.concatenate([state["seen"], np.asarray(seen, float)])
        return 1 if value is None else (1, value)

    def early(self, tile, state, halos, ctx, tiling):
        return self._note(tile, state, ctx)

    def lag(self, tile, state, halos, ctx, tiling):
        return self._note(tile, state, ctx, float(tile + ctx.step))

    def late(self, tile, state, halos, ctx, tiling):
        return self._note(tile, state, ctx, 0.5 * tile)

    def last(self, tile, state, halos, ctx, tiling):
        return self._note(tile, state, ctx)

    def gather(self, states, tiling):
        return {"seen": np.concatenate([states[t]["seen"] for t in sorted(states)])}


def test_a_python_phase_reads_the_same_reductions_as_on_the_python_executor():
    tiling = Tiling.from_counts((6, 6), (2, 2))
    a = _run(LocalExecutor, Reads(), tiling, steps=4)
    b = _run(NativeExecutor, Reads(), tiling, 2, 1, steps=4)
    assert_same_state(Reads().gather(a.states, tiling), Reads().gather(b.states, tiling))
    assert a.reductions == b.reductions


def test_numba_warnings_leave_sys_stdout_alone():
    """Every call of the worker loop from Python makes (and ignores) a Numba warning; with
    colorama installed, Numba built its text by swapping sys.stdout, and workers doing so at
    once nested the swaps until printing recursed without end. shoal turns the highlighting off."""
    import numba.core.errors as numba_errors

    assert numba_errors.termcolor().highlight("text") == "text"
    assert type(numba_errors.termcolor()).__name__ == "NOPColorScheme"
