"""The local executor: identical results under any tiling, placement and worker count;
tasks start only when their inputs are ready; reductions are barriers in tile order (lagged
ones are read a step later, and are none)."""

import itertools
import threading
import time

import numpy as np
import pytest

from shoal.apps import get_app
from shoal.cluster import Cluster
from shoal.errors import ShoalError
from shoal.placement import POLICIES, get_policy
from shoal.runtime import App, LocalExecutor, Phase
from shoal.runtime.timing import lock_free
from shoal.tiling import Tiling

STATIC = sorted(n for n, p in POLICIES.items() if not p.dynamic)


def synthetic(grid, steps, **kw):
    spec = get_app("synthetic")
    return spec.build(spec.params(grid=list(grid), **kw), steps)


def run_synthetic(grid, tiling, nodes, workers, placement, steps=6, seed=0, **kw):
    app = synthetic(grid, steps, **kw)
    cluster = Cluster.uniform(nodes, workers)
    owner = get_policy(placement).place(tiling, cluster, seed)
    with LocalExecutor(app, tiling, cluster, owner) as executor:
        res = executor.run(steps)
    return app, res, app.gather(res.states, tiling)


GRID2 = (40, 36)
TILINGS2 = [
    Tiling.from_count(GRID2, 1),
    Tiling.from_count(GRID2, 4),
    Tiling.from_count(GRID2, 16),
    Tiling.from_shape(GRID2, (7, 5)),
]


@pytest.fixture(scope="module")
def reference2():
    return run_synthetic(GRID2, TILINGS2[0], 1, 1, "sfc")[2]


@pytest.mark.parametrize("tiling, placement, workers",
                         list(itertools.product(TILINGS2[1:], STATIC, (1, 2))))
def test_synthetic_field_bitwise_identical_for_any_tiling_placement_and_workers(reference2, tiling, placement,
                                                                               workers):
    nodes = min(3, tiling.ntiles)
    _, _, got = run_synthetic(GRID2, tiling, nodes, workers, placement, seed=5)
    for name in ("u", "burn"):
        assert got[name].tobytes() == reference2[name].tobytes(), name


@pytest.mark.parametrize("load", ["hotspot", "ramp"])
def test_3d_field_bitwise_identical_across_tilings(load):
    grid = (12, 10, 9)
    ref = run_synthetic(grid, Tiling.from_count(grid, 1), 1, 1, "sfc", load=load)[2]
    cases = [(Tiling.from_count(grid, 8), "birdshot"), (Tiling.from_shape(grid, (5, 4, 3)), "geometric")]
    for tiling, placement in cases:
        got = run_synthetic(grid, tiling, 2, 2, placement, load=load)[2]
        assert got["u"].tobytes() == ref["u"].tobytes()
        assert got["burn"].tobytes() == ref["burn"].tobytes()


def test_tasks_start_only_after_their_halo_inputs_and_run_on_their_owner():
    tiling = Tiling.from_count((48, 48), 16)
    app, res, _ = run_synthetic((48, 48), tiling, 2, 2, "birdshot", steps=5)
    T, P = tiling.ntiles, len(app.phases)
    start = res.tasks["start"].reshape(-1, T)  # (task index, tile)
    end = res.tasks["end"].reshape(-1, T)
    owner = get_policy("birdshot").place(tiling, Cluster.uniform(2, 2), 0)
    assert (res.tasks["node"].reshape(-1, T) == owner).all()
    for task in range(1, start.shape[0]):
        assert (start[task] >= end[task - 1]).all()  # a tile's tasks run one after another
        if app.phases[task % P].halo:
            for t in range(T):
                for n in tiling.neighbours[t]:
                    assert start[task, t] >= end[task - 1, n]


class RunAheadApp(App):
    """One halo phase on a row of 8 tiles. Tile 0's first task blocks its node's only worker
    until tile 7 has finished step 2, which needs nothing from tile 0: only an executor with no
    barrier between steps gets there."""

    name = "run-ahead-test"
    phases = (Phase("a", halo=True),)
    grid = (64, 16)

    def __init__(self):
        self.far_tile_done = threading.Event()

    def init_tile(self, tile, tiling):
        return {}

    def pack_halos(self, state, src, tiling):
        return dict.fromkeys(tiling.neighbours[src])

    def a(self, tile, state, halos, ctx, tiling):
        if tile == 0 and ctx.step == 0:
            state["far_tile_ran_ahead"] = self.far_tile_done.wait(timeout=60)
        if tile == 7 and ctx.step == 2:
            self.far_tile_done.set()
        return 1

    def gather(self, states, tiling):
        return {}


def test_no_barrier_between_steps_tiles_run_ahead():
    tiling = Tiling.from_counts((64, 16), (8, 1))
    owner = np.arange(8) // 4  # tiles 0-3 on node 0, 4-7 on node 1
    with LocalExecutor(RunAheadApp(), tiling, Cluster.uniform(2, 1), owner) as executor:
        res = executor.run(3)
    assert res.states[0]["far_tile_ran_ahead"]
    start, end = res.tasks["start"].reshape(3, 8), res.tasks["end"].reshape(3, 8)
    assert start[2, 7] < end[0, 0]  # recorded as it happened: tile 7 was in step 2 before tile 0 left step 0


class ReduceApp(App):
    """Phase a returns tile-dependent values reduced by sum; phase b records what it saw."""

    name = "reduce-test"
    phases = (Phase("a", reduction="sum"), Phase("b", halo=True), Phase("c", reduction="min"))
    grid = (16, 16)

    def init_tile(self, tile, tiling):
        return {"seen_sum": [], "seen_min": [], "x": float(tile)}

    def pack_halos(self, state, src, tiling):
        return dict.fromkeys(tiling.neighbours[src], np.array([state["x"]]))

    def a(self, tile, state, halos, ctx, tiling):
        return 1, 0.1 * (tile + 1) + ctx.step

    def b(self, tile, state, halos, ctx, tiling):
        state["seen_sum"].append(ctx.reduced["a"])
        state["seen_min"].append(ctx.reduced.get("c"))
        return 1

    def c(self, tile, state, halos, ctx, tiling):
        return 1, float(tile + ctx.step)

    def gather(self, states, tiling):
        return {}


def test_reductions_are_barriers_combined_in_tile_order():
    tiling = Tiling.from_count((16, 16), 8)
    cluster = Cluster.uniform(2, 2)
    owner = get_policy("birdshot").place(tiling, cluster, 3)
    with LocalExecutor(ReduceApp(), tiling, cluster, owner) as executor:
        res = executor.run(4)
    for step in range(4):
        expected = 0.0
        for t in range(tiling.ntiles):
            expected += 0.1 * (t + 1) + step
        assert res.reductions[(step, "a")] == expected
        assert res.reductions[(step, "c")] == float(step)
        for t in range(tiling.ntiles):
            assert res.states[t]["seen_sum"][step] == expected
            assert res.states[t]["seen_min"][step] == (float(step - 1) if step else None)
    T = tiling.ntiles
    start, end = res.tasks["start"].reshape(4, 3, T), res.tasks["end"].reshape(4, 3, T)
    for step in range(4):
        assert start[step, 1].min() >= end[step, 0].max()  # b waits for every a
        if step:
            assert start[step, 0].min() >= end[step - 1, 2].max()  # a waits for every c


class LaggedApp(App):
    """Phase a proposes a value per tile, reduced by min one step late; tile 0's a is slow.
    Phase b records the value it read."""

    name = "lagged-test"
    phases = (Phase("a", halo=True, reduction="min", lagged=True), Phase("b"))
    grid = (16, 16)

    def __init__(self, slow_s=0.0):
        self.slow_s = slow_s

    def initial_reductions(self):
        return {"a": -1.0}

    def init_tile(self, tile, tiling):
        return {"seen": []}

    def pack_halos(self, state, src, tiling):
        return dict.fromkeys(tiling.neighbours[src])

    def a(self, tile, state, halos, ctx, tiling):
        if tile == 0:
            time.sleep(self.slow_s)
        return 1, 10.0 * ctx.step + tile

    def b(self, tile, state, halos, ctx, tiling):
        state["seen"].append(ctx.reduced["a"])
        return 1

    def gather(self, states, tiling):
        return {}


def test_a_lagged_reduction_is_read_a_step_later_and_is_no_barrier():
    tiling = Tiling.from_count((16, 16), 8)
    steps, T = 5, tiling.ntiles
    with LocalExecutor(LaggedApp(slow_s=0.02), tiling, Cluster.uniform(1, 2), np.zeros(T, int)) as executor:
        res = executor.run(steps)
    for t in range(T):  # step 0 reads the app's initial value, step s the minimum of step s - 1
        assert res.states[t]["seen"] == [-1.0] + [10.0 * s for s in range(steps - 1)]
    assert res.reductions[(steps - 1, "a")] == 10.0 * (steps - 1)
    start, end = res.tasks["start"].reshape(steps, 2, T), res.tasks["end"].reshape(steps, 2, T)
    # the other tiles move on while tile 0 is still in phase a: no barrier after a
    assert all(start[s, 1, 1:].min() < end[s, 0, 0] for s in range(steps))
    # but phase b of step s waits for the reduction of step s - 1
    assert all(start[s, 1].min() >= end[s - 1, 0].max() for s in range(1, steps))


def test_a_run_in_chunks_reads_the_lagged_reduction_of_the_chunk_before():
    tiling = Tiling.from_count((16, 16), 4)
    owner = np.zeros(tiling.ntiles, int)
    with LocalExecutor(LaggedApp(), tiling, Cluster.uniform(1, 2), owner) as ex:
        whole = ex.run(6)
    with LocalExecutor(LaggedApp(), tiling, Cluster.uniform(1, 2), owner) as ex:
        first = ex.run(4)
        second = ex.run(2, states=first.states, first_step=4, reduced_before=first.reductions)
        with pytest.raises(ShoalError, match="step 3"):
            ex.run(2, states=first.states, first_step=4)
    for t in range(tiling.ntiles):
        assert second.states[t]["seen"] == whole.states[t]["seen"]


def test_lagged_reductions_need_an_initial_value_and_phases_name_their_methods():
    tiling = Tiling.from_count((16, 16), 2)
    app = LaggedApp()
    app.initial_reductions = dict  # an app that provides none
    with LocalExecutor(app, tiling, Cluster.uniform(1, 1), np.zeros(2, int)) as ex:
        with pytest.raises(ShoalError, match="initial_reductions"):
            ex.run(1)
    with pytest.raises(ValueError, match="no reduction"):
        Phase("a", lagged=True)
    with pytest.raises(TypeError, match="last phase"):
        type("LastLagged", (LaggedApp,), {"phases": (Phase("b"), Phase("a", reduction="min", lagged=True))})
    with pytest.raises(TypeError, match="method 'c'"):
        type("Missing", (LaggedApp,), {"phases": (Phase("a"), Phase("c"))})
    with pytest.raises(TypeError, match="pack_halos"):  # a halo phase needs a packer
        type("NoPacker", (App,), {"phases": (Phase("a", halo=True),), "a": LaggedApp.a,
                                  "init_tile": LaggedApp.init_tile, "gather": LaggedApp.gather})


class FirstPackApp(App):
    """One halo phase; a tile's first packing burns 20 ms of CPU and notes its thread."""

    name = "first-pack-test"
    phases = (Phase("a", halo=True),)
    grid = (16, 16)

    def init_tile(self, tile, tiling):
        return {"packs": 0, "threads": set()}

    def pack_halos(self, state, src, tiling):
        state["threads"].add(threading.current_thread().name)
        if state["packs"] == 0:
            tic = time.thread_time()
            while time.thread_time() - tic < 0.02:
                pass
        state["packs"] += 1
        return dict.fromkeys(tiling.neighbours[src], np.zeros(1))

    def a(self, tile, state, halos, ctx, tiling):
        return 1

    def gather(self, states, tiling):
        return {}


@pytest.mark.parametrize("workers", [1, 2])
def test_first_halos_are_packed_by_the_workers_and_charged_to_the_first_task(workers):
    tiling = Tiling.from_count((16, 16), 4)
    with LocalExecutor(FirstPackApp(), tiling, Cluster.uniform(1, workers), np.zeros(4, int)) as ex:
        res = ex.run(3)
    for t in range(4):
        assert res.states[t]["threads"] and all(n.startswith("shoal-node0-w") for n in res.states[t]["threads"])
    cost = res.tasks["cost"].reshape(3, 4)
    assert np.all(cost[0] >= 0.02) and np.all(cost[1:] < 0.02)  # the burn lands in each tile's first task


def _nothing(x):
    return x


class CallCountApp(App):
    """Two phases; a task of tile t at step s makes (t + s) % 3 lock-free calls, and packing
    the halos for the second phase makes one more per neighbour."""

    name = "call-count-test"
    phases = (Phase("a", method="calls"), Phase("b", halo=True, method="calls"))
    grid = (16, 16)

    def init_tile(self, tile, tiling):
        return {"tile": tile}

    def pack_halos(self, state, src, tiling):
        for _ in tiling.neighbours[src]:
            lock_free(_nothing)(0)
        return dict.fromkeys(tiling.neighbours[src], np.zeros(1))

    def calls(self, tile, state, halos, ctx, tiling):
        for _ in range((tile + ctx.step) % 3):
            ctx.kernel(_nothing, 0)
        return 1

    def gather(self, states, tiling):
        return {}


@pytest.mark.parametrize("workers", [1, 2])
def test_every_task_records_its_lock_free_calls_halo_packing_included(workers):
    tiling = Tiling.from_count((16, 16), 4)
    steps = 3
    with LocalExecutor(CallCountApp(), tiling, Cluster.uniform(1, workers), np.zeros(4, int)) as ex:
        res = ex.run(steps)
    calls = res.tasks["kernel_calls"].reshape(steps, 2, 4)  # rows in (step, phase, tile) order
    neighbours = np.array([len(n) for n in tiling.neighbours])
    expected_run = (np.arange(4)[None, :] + np.arange(steps)[:, None]) % 3
    # phase "a" runs its calls and packs the halos that phase "b" of the same step reads
    assert np.array_equal(calls[:, 0], expected_run + neighbours)
    assert np.array_equal(calls[:, 1], expected_run)


class FailingApp(ReduceApp):
    def b(self, tile, state, halos, ctx, tiling):
        if ctx.step == 2 and tile == 3:
            raise ValueError("boom")
        return super().b(tile, state, halos, ctx, tiling)


def test_a_failing_kernel_stops_the_run_with_its_step_and_tile():
    tiling = Tiling.from_count((16, 16), 8)
    cluster = Cluster.uniform(2, 2)
    with LocalExecutor(FailingApp(), tiling, cluster, np.arange(8) % 2) as ex:
        with pytest.raises(ShoalError, match=r"step 2, phase b, tile 3: ValueError: boom"):
            ex.run(5)


def test_oversubscription_is_reported():
    tiling = Tiling.from_count((16, 16), 4)
    import os

    many = (os.cpu_count() or 1) + 1
    with LocalExecutor(synthetic((16, 16), 2), tiling, Cluster.uniform(many, 1), np.arange(4) % many) as ex:
        assert ex.run(2).oversubscribed
    with LocalExecutor(synthetic((16, 16), 2), tiling, Cluster.uniform(1, 1), np.zeros(4, int)) as ex:
        assert not ex.run(2).oversubscribed


def test_message_rows_match_neighbours_and_halo_sizes():
    tiling = Tiling.from_count((20, 20), 4)
    _, res, _ = run_synthetic((20, 20), tiling, 2, 1, "sfc", steps=3)
    # One diffuse phase per step, 4 tiles with 3 neighbours each.
    assert len(res.messages["src"]) == 3 * 4 * 3
    assert set(res.messages["phase"].tolist()) == {1}
    # A face halo of a 10x10 tile is 10 doubles; a corner one is a single double.
    sizes = sorted(set(res.messages["bytes"].tolist()))
    assert sizes == [8, 80]


def test_payload_sizes_count_every_array_of_nested_stores_and_shared_payloads_alike():
    from shoal.runtime.app import payload_bytes

    store = {"x": np.zeros((3, 2)), "id": np.zeros(3, np.int64), "extra": (np.zeros(2, np.int8), [np.zeros(1)])}
    assert payload_bytes(store) == 48 + 24 + 2 + 8
    assert payload_bytes(None) == 0 and payload_bytes(3.5) == 8 and payload_bytes([]) == 0

    class SharedPayloadApp(CallCountApp):
        """Tile 0 sends one shared store to every neighbour, the others a fresh one each."""
        shared = {"x": np.zeros(5)}

        def pack_halos(self, state, src, tiling):
            return {int(dst): self.shared if src == 0 else {"x": np.zeros(dst + 1)} for dst in tiling.neighbours[src]}

    tiling = Tiling.from_count((16, 16), 4)
    with LocalExecutor(SharedPayloadApp(), tiling, Cluster.uniform(1, 1), np.zeros(4, int)) as ex:
        res = ex.run(2)
    m = res.messages
    assert np.array_equal(m["bytes"], np.where(m["src"] == 0, 40, 8 * (m["dst"] + 1)))
