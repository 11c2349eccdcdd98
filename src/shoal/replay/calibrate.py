"""A small measurement of this machine, so that replays can model it.

The executor spends some time of its own on every task (queues, dependency bookkeeping,
waking workers); the replay adds it to every task. It is measured the way the executor
benchmark does: a tiny app whose kernel spins for a known time, run under the executor and
in a plain loop; the difference per task is the overhead.
"""

from __future__ import annotations

import math
import time

import numba as nb
import numpy as np

from ..cluster import Cluster
from ..runtime import LocalExecutor, Phase
from ..tiling import Tiling


@nb.njit(nogil=True, cache=True)
def spin(x, iters):
    v = x
    for _ in range(iters):
        v = math.sqrt(v + 1.0)
    return v


class SpinApp:
    name = "calibration"
    phases = (Phase("spin", halo=True),)

    def __init__(self, iters):
        self.iters = iters

    def init_tile(self, tile, tiling):
        return np.zeros(1)

    def pack_halo(self, phase, state, src, dst, tiling):
        return state[:1].copy()

    def run_phase(self, phase, tile, state, halos, ctx, tiling):
        state[0] = spin(state[0], self.iters)
        return self.iters

    def gather(self, states, tiling):
        return {}


def calibrate(tasks: int = 3000, task_s: float = 2e-4, repeats: int = 3) -> dict:
    """Per-task executor overhead (s) on one worker, best of a few repeats."""
    spin(0.0, 10)
    iters = 1000
    while True:
        tic = time.perf_counter()
        spin(0.0, iters)
        if time.perf_counter() - tic > 0.01:
            break
        iters *= 2
    iters = max(1, int(iters * task_s / (time.perf_counter() - tic)))
    tiling = Tiling.from_counts((32, 32), (8, 8))
    steps = max(1, tasks // tiling.ntiles)
    app = SpinApp(iters)
    best = np.inf
    for _ in range(repeats):
        res = LocalExecutor(app, tiling, Cluster.uniform(1, 1), np.zeros(tiling.ntiles, int)).run(steps)
        n = steps * tiling.ntiles
        best = min(best, (res.wall_s - res.task_cost.sum()) / n)
    return {"task_overhead_s": max(0.0, float(best)), "measured_tasks": int(steps * tiling.ntiles),
            "task_s": task_s}
