"""Worker threads: what they run with (one Numba thread each, recorded for provenance), and a
worker that finishes a task runs its tile's next one itself when nothing else holds it."""

import threading

import numba
import numpy as np
import pytest

from shoal.cluster import Cluster
from shoal.runtime import App, LocalExecutor, Phase
from shoal.runtime.local import GIL_SWITCH_S, THREAD_VARIABLES, worker_thread_settings
from shoal.tiling import Tiling


class ThreadsApp(App):
    """Two phases without halos; each task notes its thread and the Numba threads it may use."""

    name = "threads-test"
    phases = (Phase("a"), Phase("b"))
    grid = (16, 16)

    def init_tile(self, tile, tiling):
        return {"seen": []}

    def a(self, tile, state, halos, ctx, tiling):
        state["seen"].append((threading.get_ident(), numba.get_num_threads()))
        return 1

    b = a

    def gather(self, states, tiling):
        return {}


@pytest.mark.parametrize("workers", [1, 2])
def test_every_worker_runs_numba_on_one_thread(workers):
    tiling = Tiling.from_count((16, 16), 8)
    with LocalExecutor(ThreadsApp(), tiling, Cluster.uniform(1, workers), np.zeros(8, int)) as ex:
        res = ex.run(3)
    seen = [s for state in res.states.values() for s in state["seen"]]
    assert len(seen) == 3 * 2 * 8
    assert {n for _, n in seen} == {1}
    assert threading.get_ident() not in {t for t, _ in seen}


def test_a_tiles_next_task_with_no_inputs_runs_on_the_worker_that_made_it_ready():
    tiling = Tiling.from_count((16, 16), 8)
    with LocalExecutor(ThreadsApp(), tiling, Cluster.uniform(1, 2), np.zeros(8, int)) as ex:
        res = ex.run(4)
    t = res.tasks
    worker = t["worker"].reshape(4, 2, 8)
    assert (worker[:, 1] == worker[:, 0]).all()  # phase b of a step right after phase a, on its worker
    ready, start, end = (t[c].reshape(4, 2, 8) for c in ("ready", "start", "end"))
    assert (ready[:, 1] >= end[:, 0]).all() and (ready <= start).all()


def test_worker_thread_settings_report_numba_the_switch_interval_and_the_environment(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.delenv("MKL_NUM_THREADS", raising=False)
    settings = worker_thread_settings()
    assert settings["numba_threads"] == 1
    assert settings["switch_interval_s"] == GIL_SWITCH_S
    assert settings["OMP_NUM_THREADS"] == "1" and settings["MKL_NUM_THREADS"] is None
    assert set(THREAD_VARIABLES) <= set(settings)


class MeetApp(App):
    """A row of three tiles with halos; every task waits until all three tiles' tasks of the
    step are running at once, which needs three workers awake."""

    name = "meet-test"
    phases = (Phase("a", halo=True),)
    grid = (48, 16)

    def __init__(self):
        self.meet = threading.Barrier(3, timeout=20)

    def init_tile(self, tile, tiling):
        return {}

    def pack_halos(self, state, src, tiling):
        return dict.fromkeys(tiling.neighbours[src].tolist())

    def a(self, tile, state, halos, ctx, tiling):
        self.meet.wait()
        return 1

    def gather(self, states, tiling):
        return {}


def test_ready_tasks_wake_every_sleeping_worker_they_need():
    tiling = Tiling.from_counts((48, 16), (3, 1))
    with LocalExecutor(MeetApp(), tiling, Cluster.uniform(1, 3), np.zeros(3, int)) as ex:
        for _ in range(2):  # and again after the workers slept between runs
            res = ex.run(4)
            assert (np.sort(res.tasks["worker"].reshape(4, 3), axis=1) == [0, 1, 2]).all()
