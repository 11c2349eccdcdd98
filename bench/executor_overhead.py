"""Executor overhead per task and parallel efficiency on 2 workers, before and after.

For tasks of about 0.1, 1 and 10 ms, the same Numba kernel runs (a) in a plain Python loop
over steps and tiles, (b) under the local executor with 1 worker, (c) with 2 workers (one
node of 2 workers, so the ready queue is shared). Every task reads a halo from its 8
neighbours, so dependency tracking and packing are part of what is measured. A fourth case
runs a kernel that does nothing: what is left is the executor's own time per task.

    overhead per task = (executor 1 worker wall - plain loop wall) / tasks
    efficiency (2 workers) = plain loop wall / (2 x executor 2 workers wall)

The overhead includes the app's own halo packing (8 small copies per task), which the plain
loop does not do; a second plain loop that also packs gives the executor's own share:

    executor's own per task = (executor 1 worker wall - plain loop with packing wall) / tasks

"Before" is the executor of revision ``--baseline`` (default: the one before the executor
was made leaner), measured by this same script in a subprocess that imports shoal from a
temporary ``git worktree`` of that revision; "after" is the shoal this script imports. Each
of the ``--repeats`` rounds measures before then after, so both see the same machine; every
figure is the median of the rounds with its spread, and the ratio after / before is taken
within each round.

Run: ``python bench/executor_overhead.py [--repeats 5] [--baseline REV] [--json FILE]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numba
import numpy as np

BASELINE = "aa1c2ced17c0b37795b18d4869b6e5a60e2f1d79"  # the executor before it was made leaner
CASES = ((0.0, 150), (0.1, 150), (1.0, 30), (10.0, 4))  # (task ms, steps); 0: a kernel that does nothing
GRID, COUNTS = (64, 64), (8, 8)  # 64 tiles, 8 neighbours each


@numba.njit(nogil=True, cache=True)
def spin(x, iters):
    v = x
    for _ in range(iters):
        v = np.sqrt(v + 1.0)
    return v


def iterations_for(seconds: float) -> int:
    """Iterations of :func:`spin` that take about ``seconds``."""
    spin(0.0, 1)
    iters = 1000
    while True:
        tic = time.perf_counter()
        spin(0.0, iters)
        elapsed = time.perf_counter() - tic
        if elapsed > 0.01:
            return max(1, int(iters * seconds / elapsed))
        iters *= 2


def make_app(iters: int):
    """An app of one halo phase whose kernel spins ``iters`` times (the class comes from the
    shoal imported: the baseline's or this one's)."""
    from shoal.runtime import App, Phase

    class HaloSpin(App):
        name = "halo-spin"
        phases = (Phase("spin", halo=True),)
        grid = GRID

        def init_tile(self, tile, tiling):
            return np.zeros(1)

        def pack_halos(self, state, src, tiling):
            return {dst: state[:1].copy() for dst in tiling.neighbours[src].tolist()}

        def spin(self, tile, state, halos, ctx, tiling):
            state[0] = spin(state[0], iters)
            return iters

        def gather(self, states, tiling):
            return {}

    return HaloSpin()


def measure() -> dict:
    """One round of every case with the shoal imported: wall seconds of the plain loop and of
    the executor on 1 and 2 workers."""
    from shoal.cluster import Cluster
    from shoal.runtime import LocalExecutor
    from shoal.tiling import Tiling

    tiling = Tiling.from_counts(GRID, COUNTS)
    spin(0.0, 1)  # compiled (or loaded from the cache) before anything is timed

    def plain(app, steps, pack=False):
        states = {t: app.init_tile(t, tiling) for t in range(tiling.ntiles)}
        t0 = time.perf_counter()
        for _ in range(steps):
            for t in range(tiling.ntiles):
                app.spin(t, states[t], {}, None, tiling)
                if pack:
                    app.pack_halos(states[t], t, tiling)
        return time.perf_counter() - t0

    def executor(app, steps, workers):
        owner = np.zeros(tiling.ntiles, dtype=np.int64)
        with LocalExecutor(app, tiling, Cluster.uniform(1, workers), owner) as ex:
            ex.run(1)  # threads started, caches warm
            return ex.run(steps).wall_s

    out = {}
    for ms, steps in CASES:
        app = make_app(iterations_for(ms / 1e3) if ms else 0)
        out[str(ms)] = {"plain": plain(app, steps), "packing": plain(app, steps, pack=True),
                        "exec1": executor(app, steps, 1), "exec2": executor(app, steps, 2)}
    return out


def baseline_round(worktree: Path) -> dict:
    """One round measured by the baseline's shoal, in a subprocess."""
    env = dict(os.environ, PYTHONPATH=str(worktree / "src"))
    done = subprocess.run([sys.executable, __file__, "--measure"], env=env, capture_output=True, text=True,
                          check=True)
    return json.loads(done.stdout.splitlines()[-1])


def figures(r: dict, ms: float, steps: int) -> dict:
    """Overhead per task (s) and 2-worker efficiency of one round's case."""
    c = r[str(ms)]
    tasks = steps * COUNTS[0] * COUNTS[1]
    return {"overhead": (c["exec1"] - c["plain"]) / tasks, "own": (c["exec1"] - c["packing"]) / tasks,
            "efficiency": c["plain"] / (2 * c["exec2"]), "plain": c["plain"], "exec1": c["exec1"],
            "exec2": c["exec2"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)  # one round, as JSON
    ap.add_argument("--baseline", default=BASELINE, help=f"revision of the executor before (default {BASELINE[:10]})")
    if "--measure" in sys.argv:
        print(json.dumps(measure()))
        return
    from common import Benchmark, Stat, add_arguments

    add_arguments(ap)
    args = ap.parse_args()
    repo = Path(__file__).resolve().parents[1]
    with Benchmark("executor_overhead", args) as bench, tempfile.TemporaryDirectory() as tmp:
        worktree = Path(tmp) / "baseline"
        subprocess.run(["git", "worktree", "add", "--detach", "--quiet", str(worktree), args.baseline], cwd=repo,
                       check=True)
        try:
            rounds = [(baseline_round(worktree), measure()) for _ in range(max(args.repeats, 1))]
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(worktree)], cwd=repo, check=True)
        print(f"{COUNTS[0] * COUNTS[1]} tiles, 8 neighbours each (a halo every task); before = {args.baseline[:10]}, "
              f"after = this tree; median of {len(rounds)} rounds ±spread")
        print(f"{'task':>6} {'tasks':>6} {'plain ms':>11} {'1 worker ms: before':>20} {'after':>11} "
              f"{'overhead us/task: before':>25} {'after':>10} {'ratio':>5} {'own us/task: before':>20} "
              f"{'after':>10} {'ratio':>5} {'efficiency 2w: before':>22} {'after':>10}")
        for ms, steps in CASES:
            per_round = []
            for b, a in rounds:
                before, after = figures(b, ms, steps), figures(a, ms, steps)
                per_round.append({**{f"{k}_before": v for k, v in before.items()},
                                  **{f"{k}_after": v for k, v in after.items()},
                                  "ratio": after["overhead"] / before["overhead"],
                                  "own_ratio": after["own"] / before["own"]})
            stats = {k: Stat(tuple(r[k] for r in per_round)) for k in per_round[0]}
            name = f"{ms:.1f}ms" if ms else "empty"
            print(f"{name:>6} {steps * COUNTS[0] * COUNTS[1]:>6} {stats['plain_after'].show(1e3, 1):>11} "
                  f"{stats['exec1_before'].show(1e3, 1):>20} {stats['exec1_after'].show(1e3, 1):>11} "
                  f"{stats['overhead_before'].show(1e6, 1):>25} {stats['overhead_after'].show(1e6, 1):>10} "
                  f"{stats['ratio'].median:>5.2f} {stats['own_before'].show(1e6, 1):>20} "
                  f"{stats['own_after'].show(1e6, 1):>10} {stats['own_ratio'].median:>5.2f} "
                  f"{stats['efficiency_before'].show(1, 2):>22} {stats['efficiency_after'].show(1, 2):>10}")
            bench.add(task_ms=ms, tasks=steps * COUNTS[0] * COUNTS[1], **stats)


if __name__ == "__main__":
    main()
