"""SPH throughput: particle-steps per second for the 2D and 3D dam breaks at ~100k particles,
on 1 and 2 workers, with the time per phase, and PARSEC fluidanimate on the same input over
the same frames in the same run.

fluidanimate's cost per frame grows as the flow evolves, so both are timed over frames
2-101 of ``in_100K.fluid`` (frame 1 is excluded: it includes loading and, for shoal, the
kernels' first call). Point the benchmark at fluidanimate binaries built elsewhere (serial
and pthreads) with the environment variables ``FLUIDANIMATE_SERIAL`` and
``FLUIDANIMATE_PTHREADS``; without them only shoal's figures are printed.

Every figure is the median of ``--repeats`` rounds (default 5) with its spread; the ratios to
fluidanimate are taken within each round.

Run: ``python bench/sph.py [--frames 100] [--repeats 5] [--tiles 4 8 16] [--tiles-2d 16] [--executor native]
[--data DIR] [--json FILE]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import os
import subprocess
import time
from pathlib import Path

import numpy as np

from common import Benchmark, add_arguments, repeat
from shoal.apps import get_app
from shoal.cluster import Cluster
from shoal.runtime import LocalExecutor
from shoal.runtime.native import NativeExecutor
from shoal.tiling import Tiling

DEFAULT_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "fluidanimate"


def shoal_rate(app, ntiles: int, workers: int, frames: int, executor: str = "python") -> tuple[float, dict[str, float]]:
    """Particle-steps per second over steps 2..frames+1, and CPU seconds per phase."""
    tiling = Tiling.from_count(app.grid, ntiles)
    app.prepare(tiling)
    states = {t: app.init_tile(t, tiling) for t in range(tiling.ntiles)}
    n = sum(len(s["id"]) for s in states.values())
    backend = NativeExecutor if executor == "native" else LocalExecutor
    with backend(app, tiling, Cluster.uniform(1, workers), np.zeros(tiling.ntiles, int)) as ex:
        res = ex.run(frames + 1, states=states)
    seconds = res.step_end[-1] - res.step_end[0]
    t = res.tasks
    later = t["step"] >= 1
    phases = {p.name: float(t["cost"][later & (t["phase"] == k)].sum()) for k, p in enumerate(app.phases)}
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


def round_3d(app3, ntiles: int, frames: int, peers: dict, fluid: Path, k: int, executor: str) -> dict:
    """Round ``k``: shoal on 1 and 2 workers, each paired with fluidanimate right after it."""
    # This host's speed drifts by tens of percent over minutes: each shoal run is paired with
    # the fluidanimate run right after it, and the ratios are taken per pair.
    n3 = app3.initial_count()
    out = {}
    for w in (1, 2):
        rate, phases = shoal_rate(app3, ntiles, w, frames, executor)
        out[f"shoal_{w}"] = rate
        split = ", ".join(f"{name} {v:.2f}s" for name, v in phases.items())
        line = f"round {k}: shoal 3D ({n3} particles), {w} worker(s): {rate / 1e6:.2f} M  [{split}]"
        binary, threads = peers[w]
        if binary:
            fa = fluidanimate_rate(binary, threads, fluid, frames, n3)
            out[f"fluidanimate_{w}"], out[f"ratio_{w}"] = fa, rate / fa
            line += f"; fluidanimate {threads} thread(s): {fa / 1e6:.2f} M -> ratio {rate / fa:.2f}"
        print(line, flush=True)
    out["efficiency"] = out["shoal_2"] / (2 * out["shoal_1"])
    if "fluidanimate_1" in out and "fluidanimate_2" in out:  # what this host allows two threads of a compiled code
        out["fluidanimate_efficiency"] = out["fluidanimate_2"] / (2 * out["fluidanimate_1"])
    return out


def compare_3d(app3, ntiles: int, repeats: int, frames: int, peers: dict, fluid: Path, executor: str) -> dict:
    """``repeats`` rounds of :func:`round_3d`; their medians and spreads, printed."""
    tiling = Tiling.from_count(app3.grid, ntiles)
    app3.prepare(tiling)
    busy = sum(len(app3.init_tile(t, tiling)["id"]) > 0 for t in range(tiling.ntiles))
    print(f"-- {ntiles} tiles {tiling.counts}, {busy} holding particles at the start")
    rounds = itertools.count(1)
    st = repeat(lambda: round_3d(app3, ntiles, frames, peers, fluid, next(rounds), executor), repeats)
    print(f"shoal 3D on 1 and 2 workers: {st['shoal_1'].show(1e-6, unit=' M')}, {st['shoal_2'].show(1e-6, unit=' M')}; "
          f"parallel efficiency on 2 workers {st['efficiency'].show()}")
    if "fluidanimate_efficiency" in st:
        print(f"fluidanimate's own efficiency, pthreads on 2 threads against serial: "
              f"{st['fluidanimate_efficiency'].show()}")
    for w, what in ((1, "serial, per core"), (2, "2 workers vs fluidanimate pthreads, 2 threads")):
        if f"ratio_{w}" in st:
            print(f"shoal / fluidanimate ({what}): {st[f'ratio_{w}'].show()}")
    return st


def round_2d(apps: dict, ntiles: int, frames: int, k: int, executor: str) -> dict:
    """Round ``k``: each 2D variant on 1 and 2 workers; rates and 2-worker efficiencies."""
    out = {}
    for label, app in apps.items():
        for w in (1, 2):
            out[f"{label}, {w}"], phases = shoal_rate(app, ntiles, w, frames, executor)
            split = ", ".join(f"{name} {v:.2f}s" for name, v in phases.items())
            print(f"round {k}: shoal 2D, {label}, {w} worker(s): {out[f'{label}, {w}'] / 1e6:.2f} M  [{split}]",
                  flush=True)
        out[f"{label}, efficiency"] = out[f"{label}, 2"] / (2 * out[f"{label}, 1"])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=100)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--tiles", type=int, nargs="+", default=[4, 8, 16],
                    help="3D tile counts to compare")
    ap.add_argument("--tiles-2d", type=int, default=16, help="2D tiles (0: no 2D runs)")
    ap.add_argument("--executor", choices=("python", "native"), default="python", help="shoal's executor backend")
    add_arguments(ap)  # --repeats: rounds of shoal and fluidanimate, interleaved
    args = ap.parse_args()
    fluid = args.data / "in_100K.fluid"
    serial, pthreads = os.environ.get("FLUIDANIMATE_SERIAL"), os.environ.get("FLUIDANIMATE_PTHREADS")
    peers = {1: (serial, 1), 2: (pthreads, 2)}

    with Benchmark("sph", args) as bench:
        print(f"frames 2-{args.frames + 1}; shoal's {args.executor} executor in one node; "
              f"M = million particle-steps/s; medians ± spread of {args.repeats} rounds")
        if not serial:
            print("fluidanimate: set FLUIDANIMATE_SERIAL (and FLUIDANIMATE_PTHREADS) to compare in this run")
        spec3 = get_app("sph3d")
        app3 = spec3.build(spec3.params(input=str(fluid)), args.frames + 1)
        # Each tile pays for the pairs that cross its faces a second time (the neighbour evaluates
        # them too) and for gathering its halo: fewer, larger tiles are cheaper per step, more
        # tiles give the balancer and the idle cores more to choose from.
        for ntiles in args.tiles:
            bench.add(app="sph3d", tiles=ntiles, **compare_3d(app3, ntiles, args.repeats, args.frames, peers, fluid,
                                                              args.executor))
        if not args.tiles_2d:
            return

        spec2 = get_app("sph2d")
        app2 = spec2.build(spec2.params(dx=0.0045, tank=[4.0, 2.4], fluid=[[0.0, 0.0, 1.0, 2.0]], alpha=0.3),
                           args.frames + 1)
        # Baseline: the same app with its time step reduced as a barrier in every step (read in the
        # step that computed it) instead of one step late.
        barrier = spec2.build(app2.p, args.frames + 1)
        barrier.phases = tuple(dataclasses.replace(p, lagged=False) for p in app2.phases)
        apps = {"lagged time step": app2, "time step as a barrier": barrier}
        print(f"-- 2D dam break ({app2.initial_count()} particles), {args.tiles_2d} tiles")
        rounds = itertools.count(1)
        st = repeat(lambda: round_2d(apps, args.tiles_2d, args.frames, next(rounds), args.executor), args.repeats)
        for label in apps:
            print(f"shoal 2D, {label}: 1 worker {st[f'{label}, 1'].show(1e-6, unit=' M')}, 2 workers "
                  f"{st[f'{label}, 2'].show(1e-6, unit=' M')}, 2-worker efficiency {st[f'{label}, efficiency'].show()}")
        bench.add(app="sph2d", tiles=args.tiles_2d, **{k.replace(", ", "/"): v for k, v in st.items()})


if __name__ == "__main__":
    main()
