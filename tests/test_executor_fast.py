"""The executor's lean bookkeeping: one row tuple per task made into every column, message
sizes of any mix of payloads, and the reporting thread woken per step only when it reports."""

import threading

import numpy as np

from shoal.cluster import Cluster
from shoal.records import TASKS
from shoal.runtime import App, LocalExecutor, Phase
from shoal.runtime.timing import lock_free
from shoal.tiling import Tiling


@lock_free
def _touch(x):
    return x


class MixedPayloadApp(App):
    """Two phases, the second with halos: each tile sends an array to its first neighbour,
    nothing (None) to the second and one shared store to the rest; every task makes one
    lock-free call per step it has reached and returns its tile id plus one as its work."""

    name = "mixed-payload-test"
    phases = (Phase("a"), Phase("b", halo=True))
    grid = (24, 24)
    shared = (np.zeros(3), {"x": np.zeros(2, np.int8)})

    def init_tile(self, tile, tiling):
        return {"seen": [], "steps": 0}

    def pack_halos(self, state, src, tiling):
        dsts = tiling.neighbours[src].tolist()
        out = dict.fromkeys(dsts, self.shared)
        out[dsts[0]] = np.zeros(src + 1)
        if len(dsts) > 1:
            out[dsts[1]] = None
        return out

    def a(self, tile, state, halos, ctx, tiling):
        for _ in range(ctx.step + 1):
            _touch(0)
        return tile + 1

    def b(self, tile, state, halos, ctx, tiling):
        state["seen"].append(sorted(halos))
        state["steps"] += 1
        return tile + 1

    def gather(self, states, tiling):
        return {}


def _expected_bytes(src: int, dst: int, tiling: Tiling) -> int:
    dsts = tiling.neighbours[src].tolist()
    if dst == dsts[0]:
        return 8 * (src + 1)
    if dst == dsts[1]:
        return 0
    return 24 + 2


def test_message_sizes_of_arrays_nothing_and_a_shared_store_in_one_packing():
    tiling = Tiling.from_count((24, 24), 9)
    with LocalExecutor(MixedPayloadApp(), tiling, Cluster.uniform(1, 2), np.zeros(9, int)) as ex:
        res = ex.run(3)
    m = res.messages
    assert len(m["src"]) == 3 * sum(len(nb) for nb in tiling.neighbours)
    assert set(m["phase"].tolist()) == {1}
    expected = [_expected_bytes(s, d, tiling) for s, d in zip(m["src"].tolist(), m["dst"].tolist(), strict=True)]
    assert m["bytes"].tolist() == expected
    for tile, state in res.states.items():  # every task read one halo from each neighbour
        assert state["seen"] == [sorted(tiling.neighbours[tile].tolist())] * 3


def test_task_rows_hold_every_column_from_the_tuple_each_worker_wrote():
    tiling = Tiling.from_count((24, 24), 9)
    steps = 4
    with LocalExecutor(MixedPayloadApp(), tiling, Cluster.uniform(1, 2), np.zeros(9, int)) as ex:
        res = ex.run(steps)
    t = res.tasks
    assert set(t) == set(TASKS.names)
    for name in TASKS.names:
        assert t[name].dtype == TASKS.column(name).dtype, name
    n = steps * 2 * 9
    assert len(t["tile"]) == n
    assert t["step"].tolist() == [k // 18 for k in range(n)]
    assert t["phase"].tolist() == [k // 9 % 2 for k in range(n)]
    assert t["tile"].tolist() == [k % 9 for k in range(n)]
    assert (t["node"] == 0).all() and set(t["worker"].tolist()) <= {0, 1}
    assert t["work"].tolist() == (t["tile"] + 1).tolist()
    assert t["kernel_calls"].tolist() == np.where(t["phase"] == 0, t["step"] + 1, 0).tolist()
    assert (t["ready"] <= t["start"]).all() and (t["start"] <= t["end"]).all()
    assert (t["cost"] >= t["kernel"]).all() and (t["kernel"] >= 0).all()
    assert (t["end"] <= res.wall_s).all()


class SlowApp(App):
    """One phase without halos whose tasks each wait a millisecond; counts its steps."""

    name = "slow-test"
    phases = (Phase("a"),)
    grid = (8, 8)

    def __init__(self):
        self.started = threading.Event()

    def init_tile(self, tile, tiling):
        return {"steps": 0}

    def a(self, tile, state, halos, ctx, tiling):
        self.started.set()
        threading.Event().wait(0.001)
        state["steps"] += 1
        return 1

    def gather(self, states, tiling):
        return {}


def test_a_stop_from_another_thread_ends_a_run_without_step_reports_at_a_boundary():
    tiling = Tiling.from_count((8, 8), 4)
    app, stop = SlowApp(), threading.Event()

    def ask():
        app.started.wait(60)
        stop.set()

    asker = threading.Thread(target=ask)
    asker.start()
    with LocalExecutor(app, tiling, Cluster.uniform(1, 2), np.zeros(4, int)) as ex:
        res = ex.run(5000, stop=stop)  # 10 s of tasks if it were not stopped
    asker.join()
    assert 0 < res.steps < 5000
    assert {s["steps"] for s in res.states.values()} == {res.steps}  # every tile at the same boundary
    assert len(res.tasks["tile"]) == res.steps * 4 and (res.tasks["node"] == 0).all()


def test_every_step_is_reported_in_order_with_its_complete_rows():
    tiling = Tiling.from_count((24, 24), 9)
    seen = []
    with LocalExecutor(MixedPayloadApp(), tiling, Cluster.uniform(1, 2), np.zeros(9, int)) as ex:

        def on_step(k):
            rows = ex.step_tasks(k)
            seen.append((k, len(rows["tile"]), set(rows["step"].tolist())))

        res = ex.run(6, on_step=on_step)
    assert res.steps == 6
    assert seen == [(k, 18, {k}) for k in range(6)]
