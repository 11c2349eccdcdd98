"""Executor overhead per task and parallel efficiency on 2 workers.

For tasks of about 0.1, 1 and 10 ms, the same Numba kernel runs (a) in a plain Python loop
over steps and tiles, (b) under the local executor with 1 worker, (c) with 2 workers (one
node of 2 workers, so the ready queue is shared). Every task reads a halo from its 8
neighbours, so dependency tracking and packing are part of what is measured.

    overhead per task = (executor 1 worker wall - plain loop wall) / tasks
    efficiency (2 workers) = plain loop wall / (2 x executor 2 workers wall)

Run: ``python bench/executor_overhead.py``. Timings are noisy on a shared machine: each
configuration is run 3 times and the best is kept.
"""

from __future__ import annotations

import time

import numpy as np

from shoal.cluster import Cluster
from shoal.replay.calibrate import SpinApp, iterations_for, spin
from shoal.runtime import LocalExecutor
from shoal.tiling import Tiling


def plain_loop(app, tiling, steps) -> float:
    states = {t: app.init_tile(t, tiling) for t in range(tiling.ntiles)}
    t0 = time.perf_counter()
    for _ in range(steps):
        for t in range(tiling.ntiles):
            app.run_spin(t, states[t], {}, None, tiling)
    return time.perf_counter() - t0


def executor(app, tiling, steps, workers) -> float:
    cluster = Cluster.uniform(1, workers)
    owner = np.zeros(tiling.ntiles, dtype=np.int64)
    with LocalExecutor(app, tiling, cluster, owner) as ex:
        return ex.run(steps).wall_s


def main() -> None:
    tiling = Tiling.from_counts((64, 64), (8, 8))
    print(f"{tiling.ntiles} tiles, 8 neighbours each (halo phase every step); best of 3")
    print(f"{'task':>8} {'tasks':>6} {'plain s':>8} {'exec1 s':>8} {'exec2 s':>8} "
          f"{'overhead us/task':>17} {'efficiency 2w':>14}")
    for target_ms, steps in ((0.1, 150), (1.0, 30), (10.0, 4)):
        app = SpinApp(iterations_for(lambda n: spin(0.0, n), target_ms / 1e3))
        executor(app, tiling, 1, 1)  # warm up threads and caches
        plain = min(plain_loop(app, tiling, steps) for _ in range(3))
        one = min(executor(app, tiling, steps, 1) for _ in range(3))
        two = min(executor(app, tiling, steps, 2) for _ in range(3))
        tasks = steps * tiling.ntiles
        overhead_us = (one - plain) / tasks * 1e6
        eff = plain / (2 * two)
        print(f"{target_ms:>6.1f}ms {tasks:>6} {plain:>8.3f} {one:>8.3f} {two:>8.3f} "
              f"{overhead_us:>17.1f} {eff:>14.2f}")


if __name__ == "__main__":
    main()
