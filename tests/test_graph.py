"""The step's task graph as data: stencils per phase (faces, all, the app's own sets per step),
reductions of several values, and over random graphs every task running once, after its inputs."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shoal.cluster import Cluster
from shoal.errors import ShoalError
from shoal.placement import get_policy
from shoal.runtime import App, LocalExecutor, Phase
from shoal.runtime.app import reduce_in_order
from shoal.runtime.graph import Links, StepGraph
from shoal.tiling import Tiling


def test_links_readers_are_the_sources_transposed_in_id_order():
    links = Links.from_sources([[1, 2], [0], [1], []], 4)
    assert links.readers == [[1], [0, 2], [0], []]
    assert links.fanin == [2, 1, 1, 0]
    assert links.base == [0, 1, 3, 4, 4] and links.count == 4
    src, dst = links.edges()
    assert src.tolist() == [0, 1, 1, 2] and dst.tolist() == [1, 0, 2, 0]


@pytest.mark.parametrize("sources", [[[0], []], [[2], []], [[1, 1], []], [[1]]])
def test_links_refuse_self_out_of_range_repeated_or_missing_tiles(sources):
    with pytest.raises(ShoalError):
        Links.from_sources(sources, 2)


def test_phase_stencils_are_declared_and_checked():
    assert Phase("a").reads == "" and not Phase("a").halo
    assert Phase("a", halo=True).reads == "all"
    assert Phase("a", reads="faces").halo
    with pytest.raises(ValueError, match="unknown stencil"):
        Phase("a", reads="diagonals")
    with pytest.raises(ValueError, match="unknown reduction"):
        Phase("a", reduction=("sum", "mean"))
    with pytest.raises(TypeError, match="reads"):
        type("NoReads", (App,), {"name": "x", "phases": (Phase("a", reads="app"),), "a": lambda *a: 0,
                                 "pack_halos": lambda *a: {}, "init_tile": lambda *a: 0, "gather": lambda *a: {}})


class StencilApp(App):
    """Every tile records whom it received halos from, per step; phase ``c`` reads the tiles the
    app names: at step s, tile t reads from the tiles ``(t + s + 1) % T`` and ``(t + 2 s + 3) % T``."""

    name = "stencil-test"
    grid = (12, 12)

    def __init__(self, reads_b="faces"):
        self.phases = (Phase("a", halo=True), Phase("b", reads=reads_b), Phase("c", reads="app"))

    def init_tile(self, tile, tiling):
        return {"heard": []}

    def pack_halos(self, state, src, tiling):
        return {t: np.full(3, float(src)) for t in range(tiling.ntiles) if t != src}

    def reads(self, phase, step, decomposition):
        T = decomposition.ntiles
        return [sorted({(t + step + 1) % T, (t + 2 * step + 3) % T} - {t}) for t in range(T)]

    def _hear(self, phase, tile, state, halos, ctx):
        assert all(int(p[0]) == src for src, p in halos.items())
        state["heard"].append((ctx.step, phase, sorted(halos)))
        return 1

    def a(self, tile, state, halos, ctx, tiling):
        return self._hear("a", tile, state, halos, ctx)

    def b(self, tile, state, halos, ctx, tiling):
        return self._hear("b", tile, state, halos, ctx)

    def c(self, tile, state, halos, ctx, tiling):
        return self._hear("c", tile, state, halos, ctx)

    def gather(self, states, tiling):
        return {}


@pytest.mark.parametrize("nodes, workers, placement", [(1, 1, "sfc"), (2, 2, "birdshot"), (3, 1, "strips")])
def test_a_phase_reads_and_messages_exactly_its_stencil(nodes, workers, placement):
    tiling = Tiling.from_count((12, 12), 9)
    app = StencilApp()
    owner = get_policy(placement).place(tiling, Cluster.uniform(nodes, workers), 1)
    with LocalExecutor(app, tiling, Cluster.uniform(nodes, workers), owner) as ex:
        res = ex.run(3)
    T = tiling.ntiles
    expected_rows = 0
    for t in range(T):
        heard = res.states[t]["heard"]
        for step in range(3):
            app_sources = app.reads(None, step, tiling)[t]
            assert heard[3 * step] == (step, "a", tiling.neighbours[t].tolist())
            assert heard[3 * step + 1] == (step, "b", tiling.face_neighbours[t].tolist())
            assert heard[3 * step + 2] == (step, "c", app_sources)
    for step in range(3):
        expected_rows += sum(map(len, tiling.neighbours)) + sum(map(len, tiling.face_neighbours))
        expected_rows += sum(map(len, app.reads(None, step, tiling)))
    m = res.messages
    assert len(m["src"]) == expected_rows
    face = (m["phase"] == 1) & (m["step"] == 0)
    got = sorted(zip(m["src"][face].tolist(), m["dst"][face].tolist(), strict=True))
    assert got == sorted((int(s), t) for t in range(T) for s in tiling.face_neighbours[t])
    assert (m["bytes"] == 24).all()


def test_a_faces_stencil_sends_4_messages_a_tile_in_2d_and_6_in_3d_where_all_sends_8_and_26():
    for grid, count, faces, every in (((12, 12), 9, 4, 8), ((9, 9, 9), 27, 6, 26)):
        tiling = Tiling.from_count(grid, count)
        graph = StepGraph(StencilApp(), tiling)
        centre = tiling.ntiles // 2
        assert graph.links(1, 0).fanin[centre] == faces
        assert graph.links(0, 0).fanin[centre] == every


class SeveralApp(App):
    """Phase a reduces (sum, max, min) of per-tile values; phase b records what it read."""

    name = "several-test"
    phases = (Phase("a", reduction=("sum", "max", "min")), Phase("b"))
    grid = (16, 16)

    def init_tile(self, tile, tiling):
        return {"seen": []}

    @staticmethod
    def value(tile, step):
        return 0.1 * (tile + 1) + step / 3, float((tile * 7 + step) % 5), -float(tile % 3) - step

    def a(self, tile, state, halos, ctx, tiling):
        return 1, self.value(tile, ctx.step)

    def b(self, tile, state, halos, ctx, tiling):
        state["seen"].append(ctx.reduced["a"])
        return 1

    def gather(self, states, tiling):
        return {"seen": np.array([states[t]["seen"] for t in sorted(states)])}


@pytest.mark.parametrize("nodes, workers, placement", [(1, 1, "sfc"), (2, 2, "birdshot"), (4, 1, "strips")])
def test_a_reduction_of_several_values_combines_each_with_its_operation_in_tile_order(nodes, workers, placement):
    tiling = Tiling.from_count((16, 16), 8)
    owner = get_policy(placement).place(tiling, Cluster.uniform(nodes, workers), 2)
    with LocalExecutor(SeveralApp(), tiling, Cluster.uniform(nodes, workers), owner) as ex:
        res = ex.run(3)
    for step in range(3):
        values = [SeveralApp.value(t, step) for t in range(8)]
        total = 0.0
        for v in values:
            total += v[0]
        expected = (total, max(v[1] for v in values), min(v[2] for v in values))
        assert res.reductions[(step, "a")] == expected
        assert all(res.states[t]["seen"][step] == expected for t in range(8))


def test_a_reduction_of_several_values_refuses_a_value_of_another_length():
    with pytest.raises(ShoalError, match="2 values"):
        reduce_in_order(("sum", "max"), [(1.0, 2.0), (1.0,)])


class RandomGraphApp(App):
    """Phases reading random per-step sets; every task logs (step, phase) and checks its
    halos came from the tiles' previous tasks."""

    name = "random-graph-test"
    grid = (8, 8)

    def __init__(self, ntiles, seed, phases):
        self.ntiles, self.seed = ntiles, seed
        self.phases = tuple(Phase(f"p{k}", reads="app", reduction=r) if halo else Phase(f"p{k}", reduction=r)
                            for k, (halo, r) in enumerate(phases))
        for phase in self.phases:
            setattr(self, phase.name, self._task)

    def reads(self, phase, step, decomposition):
        rng = np.random.default_rng([self.seed, step, self.phases.index(phase)])
        T = self.ntiles
        return [sorted(set(rng.choice(T, size=rng.integers(0, T), replace=True).tolist()) - {t})
                for t in range(T)]

    def init_tile(self, tile, tiling):
        return {"done": 0}

    def pack_halos(self, state, src, tiling):
        return dict.fromkeys(range(self.ntiles), np.array([state["done"]]))

    def _task(self, tile, state, halos, ctx, tiling):
        for payload in halos.values():  # its source had run exactly as many tasks as this tile
            assert int(payload[0]) == state["done"]
        state["done"] += 1
        return (1, float(tile)) if self.phases[state["done"] % len(self.phases) - 1].reduction else 1

    def gather(self, states, tiling):
        return {}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(count=st.sampled_from([1, 2, 4, 6, 9]), seed=st.integers(0, 10_000),
       phases=st.lists(st.tuples(st.booleans(), st.sampled_from([None, None, "sum"])), min_size=1, max_size=4),
       nodes=st.integers(1, 3), workers=st.integers(1, 2), steps=st.integers(1, 4))
def test_every_task_runs_once_per_step_after_all_its_inputs_on_random_graphs(count, seed, phases, nodes, workers,
                                                                             steps):
    tiling = Tiling.from_count((8, 8), count)
    app = RandomGraphApp(tiling.ntiles, seed, phases)
    cluster = Cluster.uniform(min(nodes, tiling.ntiles), workers)
    owner = get_policy("birdshot").place(tiling, cluster, seed)
    with LocalExecutor(app, tiling, cluster, owner) as ex:
        res = ex.run(steps)
    P, T = len(app.phases), tiling.ntiles
    tasks = res.tasks
    key = tasks["step"] * P * T + tasks["phase"] * T + tasks["tile"]
    assert sorted(key.tolist()) == list(range(steps * P * T))  # every unit once per step
    assert all(res.states[t]["done"] == steps * P for t in range(T))
    start = np.empty(steps * P * T)
    end = np.empty(steps * P * T)
    start[key], end[key] = tasks["start"], tasks["end"]
    m = res.messages
    expected = 0
    for step in range(steps):
        for p in range(P):
            if app.phases[p].halo:
                expected += sum(map(len, app.reads(app.phases[p], step, tiling)))
    assert len(m["src"]) == expected
    for s, p, src, dst in zip(m["step"], m["phase"], m["src"], m["dst"], strict=True):
        reader = s * P * T + p * T + dst
        producer = reader - T + (src - dst)  # the source's task before (its packing ends with it)
        if producer >= 0:
            assert end[producer] <= start[reader]


class LaggedPairApp(App):
    """Phase a proposes (sum, min) of per-tile values, read one step later by phase b."""

    name = "lagged-pair-test"
    phases = (Phase("a", reduction=("sum", "min"), lagged=True), Phase("b"))
    grid = (8, 8)

    def initial_reductions(self):
        return {"a": (0.5, -1.0)}

    def init_tile(self, tile, tiling):
        return {"seen": []}

    def a(self, tile, state, halos, ctx, tiling):
        return 1, (float(tile + ctx.step), float(tile * ctx.step))

    def b(self, tile, state, halos, ctx, tiling):
        state["seen"].append(ctx.reduced["a"])
        return 1

    def gather(self, states, tiling):
        return {}


def test_a_lagged_reduction_of_several_values_is_read_a_step_later_across_runs():
    tiling = Tiling.from_count((8, 8), 4)
    cluster = Cluster.uniform(2, 1)
    owner = get_policy("birdshot").place(tiling, cluster, 0)
    with LocalExecutor(LaggedPairApp(), tiling, cluster, owner) as ex:
        first = ex.run(2)
        second = ex.run(2, states=first.states, first_step=2, reduced_before=first.reductions)
    expected = [(0.5, -1.0)] + [(sum(float(t + s) for t in range(4)), 0.0) for s in range(3)]
    assert all(second.states[t]["seen"] == expected for t in range(4))
