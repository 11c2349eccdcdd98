"""SPH throughput: particle-steps per second for the 2D and 3D dam breaks at ~100k particles,
on 1 and 2 workers, with the time per phase, and PARSEC fluidanimate on the same input over
the same frames in the same run.

fluidanimate's cost per frame grows as the flow evolves, so both are timed over frames
2-101 of ``in_100K.fluid`` (frame 1 is excluded: it includes loading and, for shoal, the
kernels' first call). Point the benchmark at fluidanimate binaries built elsewhere (serial
and pthreads) with the environment variables ``FLUIDANIMATE_SERIAL`` and
``FLUIDANIMATE_PTHREADS``; without them only shoal's figures are printed.

Run: ``python bench/sph.py [--frames 100] [--data DIR]``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import time
from pathlib import Path

import numpy as np

from shoal.apps import get_app
from shoal.cluster import Cluster
from shoal.runtime import LocalExecutor
from shoal.tiling import Tiling

DEFAULT_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "fluidanimate"


def shoal_rate(app, ntiles: int, workers: int, frames: int) -> tuple[float, dict[str, float]]:
    """Particle-steps per second over steps 2..frames+1, and CPU seconds per phase."""
    tiling = Tiling.from_count(app.grid, ntiles)
    app.prepare(tiling)
    states = {t: app.init_tile(t, tiling) for t in range(tiling.ntiles)}
    n = sum(len(s["id"]) for s in states.values())
    res = LocalExecutor(app, tiling, Cluster.uniform(1, workers), np.zeros(tiling.ntiles, int)).run(
        frames + 1, states=states)
    seconds = res.step_end[-1] - res.step_end[0]
    later = res.task_step >= 1
    phases = {p.name: float(res.task_cost[later & (res.task_phase == k)].sum()) for k, p in enumerate(app.phases)}
    return n * frames / seconds, phases


def fluidanimate_rate(binary: str, threads: int, input_file: Path, frames: int, particles: int) -> float:
    """Frames 2..frames+1: the run with frames+1 frames minus the run with one frame."""
    def wall(k):
        t = time.perf_counter()
        subprocess.run([binary, str(threads), str(k), str(input_file)], check=True, capture_output=True)
        return time.perf_counter() - t
    one = min(wall(1) for _ in range(3))
    full = wall(frames + 1)
    return particles * frames / (full - one)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=100)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--tiles", type=int, default=8)
    args = ap.parse_args()
    fluid = args.data / "in_100K.fluid"

    print(f"frames 2-{args.frames + 1}; shoal on {args.tiles} tiles in one node; M = million particle-steps/s")
    rows = {}
    app3 = get_app("sph3d").build(get_app("sph3d").params(input=str(fluid)), args.frames + 1)
    n3 = app3.initial_count()
    for w in (1, 2):
        rate, phases = shoal_rate(app3, args.tiles, w, args.frames)
        rows[("3d", w)] = rate
        split = ", ".join(f"{k} {v:.2f}s" for k, v in phases.items())
        print(f"shoal 3D (fluidanimate method, {n3} particles), {w} worker(s): {rate / 1e6:.2f} M  [{split}]")
    spec2 = get_app("sph2d")
    app2 = spec2.build(spec2.params(dx=0.0045, tank=[4.0, 2.4], fluid=[[0.0, 0.0, 1.0, 2.0]], alpha=0.3),
                       args.frames + 1)
    for w in (1, 2):
        rate, phases = shoal_rate(app2, args.tiles * 4, w, args.frames)
        split = ", ".join(f"{k} {v:.2f}s" for k, v in phases.items())
        print(f"shoal 2D dam break ({app2.initial_count()} particles), {w} worker(s): {rate / 1e6:.2f} M  [{split}]")
    print(f"shoal 3D parallel efficiency on 2 workers: {rows[('3d', 2)] / (2 * rows[('3d', 1)]):.2f}")

    serial, pthreads = os.environ.get("FLUIDANIMATE_SERIAL"), os.environ.get("FLUIDANIMATE_PTHREADS")
    if not serial:
        print("fluidanimate: set FLUIDANIMATE_SERIAL (and FLUIDANIMATE_PTHREADS) to compare in this run")
        return
    fa1 = fluidanimate_rate(serial, 1, fluid, args.frames, n3)
    print(f"fluidanimate serial: {fa1 / 1e6:.2f} M  -> shoal / fluidanimate per core: {rows[('3d', 1)] / fa1:.2f}")
    if pthreads:
        fa2 = fluidanimate_rate(pthreads, 2, fluid, args.frames, n3)
        print(f"fluidanimate pthreads, 2 threads: {fa2 / 1e6:.2f} M  -> shoal 2 workers / fluidanimate 2 threads: "
              f"{rows[('3d', 2)] / fa2:.2f}")


if __name__ == "__main__":
    main()
