"""Lassen's wavefront throughput: band node-updates per second per core on ``wavefront-plane``
(the Birdshot paper's plane of sources, N^3 zones), against the serial Lassen rate the brief
measured, with the 2-worker efficiency and a tiles-per-core table.

A band node-update is one band node moved through one iteration (the ``advance`` phase's work,
summed over tiles and iterations): the unit in which the brief measured the serial reference,
Canary's Lassen sources in an 80-line serial driver built with g++ -O3 on this kind of machine,
4.0-5.9e5 band node-updates per second (4.5e5 at N = 64, the figure the ratio uses; the issue's
target is 2x). shoal runs the scenario's iterations (the band empties before the last) with each executor,
its kernels compiled beforehand. The rate compared with the reference is per CPU
second of the process (every thread's), the reference's own unit, which a busy shared host
distorts less than wall time; wall-time rates (from the end of the first iteration, which holds
no band: the sources fire at the third) are printed beside it, and the 2-worker efficiency is
the 1-worker wall time over twice the 2-worker one.

Both executors are measured in the same rounds: the Python one, and the native one, which runs
the three phases and the halo packers compiled with no Python per task
(:mod:`shoal.apps.wavefront.native`). Every figure is the median of ``--repeats`` rounds
(default 5) with its spread. A round runs, per executor, ``--tiles`` tiles on 1 worker and on 2
(the efficiency: the 1-worker time over twice the 2-worker time), then ``--per-core`` tiles per
core on 2 workers (the table: band node-updates per CPU second, per core, against the reference).

Run: ``python bench/wavefront.py [--cells 64] [--tiles 64] [--per-core 4 16 32] [--executors python native]
[--repeats 5] [--json FILE]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from common import Benchmark, add_arguments, repeat
from shoal.apps import get_app
from shoal.cluster import Cluster
from shoal.config import load_scenario
from shoal.runtime import LocalExecutor
from shoal.runtime.native import NativeExecutor

REFERENCE = 4.5e5  # band node-updates / s / core: serial Lassen at N = 64 (the brief, measured)
EXECUTORS = {"python": LocalExecutor, "native": NativeExecutor}
WORKERS = 2  # of the tiles-per-core table


def one_run(params, ntiles: int, workers: int, steps: int, executor: str) -> tuple[float, float, float]:
    """(band node-updates, wall seconds, CPU seconds) of a run of ``steps`` iterations on
    ``ntiles`` tiles and ``workers`` workers of ``executor``: wall time after its first
    iteration, CPU time of the whole run (the process's, every thread's; the native executor's
    kernels compiled, or loaded, before it)."""
    spec = get_app("wavefront")
    app = spec.build(params, steps)
    tiling = app.decompose(ntiles)
    app.prepare(tiling)
    with EXECUTORS[executor](app, tiling, Cluster.uniform(1, workers), np.zeros(tiling.ntiles, int)) as ex:
        cpu = time.process_time()
        res = ex.run(steps)
        cpu = time.process_time() - cpu
    t = res.tasks
    advance = [p.name for p in app.phases].index("advance")
    updates = float(t["work"][t["phase"] == advance].sum())
    return updates, float(res.step_end[-1] - res.step_end[0]), cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cells", type=int, default=64, help="N: zones per side (default 64)")
    ap.add_argument("--tiles", type=int, default=64, help="tiles of the 1- and 2-worker runs (default 64)")
    ap.add_argument("--per-core", type=int, nargs="*", default=[4, 16, 32],
                    help=f"tiles per core of the table ({WORKERS} workers; default 4 16 32)")
    ap.add_argument("--executors", nargs="+", choices=sorted(EXECUTORS), default=["python", "native"],
                    help="the executors measured, in each round (default python native)")
    add_arguments(ap)
    args = ap.parse_args()
    sc = load_scenario("wavefront-plane")
    sc.override([f"app.cells=[{args.cells},{args.cells},{args.cells}]"])
    steps = sc.run.steps * args.cells // 64  # iterations grow with N (the front crosses N zones)
    with Benchmark("wavefront", args) as bench:
        print(f"wavefront-plane at N = {args.cells}: {steps} iterations; reference (serial Lassen) "
              f"{REFERENCE:.2g} band node-updates/s/core")

        def round_():
            out, said = {}, []
            for ex in args.executors:
                u1, s1, c1 = one_run(sc.params, args.tiles, 1, steps, ex)
                u2, s2, c2 = one_run(sc.params, args.tiles, 2, steps, ex)
                out[f"{ex}_cpu_rate_1"], out[f"{ex}_wall_rate_1"] = u1 / c1, u1 / s1
                out[f"{ex}_wall_rate_2"], out[f"{ex}_efficiency"] = u2 / (2 * s2), s1 / (2 * s2)
                out[f"{ex}_ratio_1"] = u1 / c1 / REFERENCE
                for k in args.per_core:
                    u, s, c = one_run(sc.params, k * WORKERS, WORKERS, steps, ex)
                    out[f"{ex}_table_{k}"], out[f"{ex}_table_cpu_{k}"] = u / (WORKERS * s), u / c
                said.append(f"{ex} {u1 / c1:.3g} /CPU s on 1 worker, efficiency {s1 / (2 * s2):.2f}")
            print(f"  round: {'; '.join(said)}", flush=True)
            return out

        stat = repeat(round_, args.repeats)
        for ex in args.executors:
            print(f"{ex} executor, 1 worker, {args.tiles} tiles: {stat[f'{ex}_cpu_rate_1'].show(1e-6, 3)} M band "
                  f"node-updates per CPU second = {stat[f'{ex}_ratio_1'].show(1, 2)} x serial Lassen (target >= 2); "
                  f"per wall second {stat[f'{ex}_wall_rate_1'].show(1e-6, 3)} M")
            print(f"{ex} executor, 2 workers, {args.tiles} tiles: {stat[f'{ex}_wall_rate_2'].show(1e-6, 3)} M per "
                  f"wall second per core; efficiency {stat[f'{ex}_efficiency'].show(1, 2)} (target >= 0.9)")
        print(f"tiles per core ({WORKERS} workers) | executor | M band node-updates per CPU s per core | "
              "x Lassen (4.5e5) | M per wall s per core")
        for k in args.per_core:
            for ex in args.executors:
                c, s = stat[f"{ex}_table_cpu_{k}"], stat[f"{ex}_table_{k}"]
                print(f"{k:30d} | {ex:8} | {c.show(1e-6, 3):>38} | {c.median / REFERENCE:16.2f} | {s.show(1e-6, 3)}")
        bench.add(cells=args.cells, tiles=args.tiles, steps=steps, reference=REFERENCE, **stat)


if __name__ == "__main__":
    main()
