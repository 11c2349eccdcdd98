"""Adaptive blocks against a uniform grid: the radial dam break of the invasive paper's Fig. 8
run with root blocks refining from level 0 to ``--max-level`` where the wave is, and uniformly
at that finest level, both timed and both measured against a uniform run at twice the finest
resolution (the reference): the L1 error of the surface in an annulus around the front.

The annulus: radii from 0.7 to 1.1 times the front's, the front being where the reference's
surface last lies ``--threshold`` above sea level, seen from the column's centre. Errors are
taken on the finest level's grid (the reference averaged 2 x 2, coarser adaptive blocks
repeated). The uniform runs are level 0 of root blocks as fine as the finest adaptive ones (the
same cells in big blocks: their fastest form). Every run is ``--tiles`` tiles per worker (two) of one node,
first order or ``--order 2``, on the native executor; the adaptive run once more on the Python
one (the baseline of the native executor's regrids: the ratio it prints).

Run: ``python bench/swe_adaptive.py [--blocks 16] [--block 8] [--max-level 3] [--time 20]
[--criterion gradient] [--threshold 0.005] [--tiles 2] [--repeats 5] [--json FILE]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from common import Benchmark, add_arguments, repeat
from shoal.apps import get_app
from shoal.apps.swe.setups import average4
from shoal.cluster import Cluster
from shoal.runtime import LocalExecutor
from shoal.runtime.native import NativeExecutor
from shoal.tiling import Tiling


def params(args, min_level: int, max_level: int, block: int):
    """The dam break of the built-in scenario at these levels, ``--blocks`` root blocks a side
    of ``block`` cells at level 0."""
    spec = get_app("swe")
    side = 2000.0
    return spec.params(setup="radial-dam-break", blocks=[args.blocks] * 2, block=block, extent=[side, side],
                       column=[600.0, 600.0, 250.0, 5.0], depth=10.0, solver=args.solver, order=args.order,
                       boundary="reflect", min_level=min_level, max_level=max_level, regrid_every=args.regrid_every,
                       criterion=args.criterion, threshold=args.threshold)


def simulate(p, end: float, workers: int, executor=NativeExecutor, tiles: int = 2) -> tuple[dict, float, int, object]:
    """Run until simulated time ``end``: the gathered state, wall seconds, steps and the app."""
    app = get_app("swe").build(p, 10**9)
    tiling = Tiling.from_count(app.grid, tiles * workers)
    app.prepare(tiling)
    states = {t: app.init_tile(t, tiling) for t in range(tiling.ntiles)}
    steps, wall, chunk = 0, 0.0, 20
    with executor(app, tiling, Cluster.uniform(1, workers), np.zeros(tiling.ntiles, int)) as ex:
        while app.time(steps, states) < end:  # the run's length in steps is not known in advance
            t0 = time.perf_counter()
            result = ex.run(chunk, states=states, first_step=steps)  # (fewer steps: a native run ends at a regrid)
            wall += time.perf_counter() - t0
            states, steps = result.states, steps + result.steps
    return app.gather(states, tiling), wall, steps, app


def annulus_error(app, gathered, level: int, reference, ref_app, ref_level: int, threshold: float) -> float:
    """L1 (m^3) of the surface against the reference's, in the annulus around its front, on
    the grid of ``app`` at ``level`` (the reference at ``ref_level`` averaged onto it)."""
    eta = app.uniform(gathered, level)
    ref = ref_app.uniform(reference, ref_level)
    while ref["h"].shape[0] > eta["h"].shape[0]:
        ref = {k: average4(v) for k, v in ref.items() if k != "eta"}
    n = eta["h"].shape[0]
    dx = app.p.extent[0] / n
    x = (np.arange(n) + 0.5) * dx
    cx, cy = app.p.column[:2]
    r = np.hypot(x[:, None] - cx, x[None, :] - cy)
    surface, ref_surface = eta["h"] + eta["b"], ref["h"] + ref["b"]
    raised = np.abs(ref_surface - app.p.sea_level) > threshold
    front = r[raised].max()
    ring = (r > 0.7 * front) & (r < 1.1 * front)
    return float(np.abs(surface - ref_surface)[ring].sum() * dx * dx)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blocks", type=int, default=16, help="root blocks per side")
    ap.add_argument("--block", type=int, default=8, help="cells per root block side at level 0")
    ap.add_argument("--max-level", type=int, default=3)
    ap.add_argument("--time", type=float, default=20.0, help="simulated seconds")
    ap.add_argument("--order", type=int, default=1)
    ap.add_argument("--solver", default="fwave")
    ap.add_argument("--criterion", default="gradient")
    ap.add_argument("--threshold", type=float, default=0.005)
    ap.add_argument("--regrid-every", type=int, default=4)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--tiles", type=int, default=2, help="tiles per worker")
    add_arguments(ap)
    args = ap.parse_args()
    top = args.max_level
    with Benchmark("swe-adaptive", args) as bench:
        print(f"radial dam break to t = {args.time:g} s, {args.blocks}^2 root blocks of {args.block}^2 cells, "
              f"levels 0-{top}, {args.criterion} >= {args.threshold:g}, order {args.order}, {args.solver}, "
              f"{args.tiles} tiles per worker; "
              f"reference: uniform level {top + 1}")
        # the uniform runs: level 0 of root blocks as fine as the finest adaptive blocks (their
        # fastest form: the same cells in big blocks)
        fine = args.block * 2**top
        reference, ref_wall, ref_steps, ref_app = simulate(params(args, 0, 0, 2 * fine), args.time, args.workers,
                                                          tiles=args.tiles)
        print(f"reference: {ref_steps} steps in {ref_wall:.1f} s")

        def one() -> dict:
            out = {}
            for name, p, level in (("adaptive", params(args, 0, top, args.block), top),
                                   ("uniform", params(args, 0, 0, fine), 0)):
                g, wall, steps, app = simulate(p, args.time, args.workers, tiles=args.tiles)
                out[f"{name}_s"] = wall
                out[f"{name}_error"] = annulus_error(app, g, level, reference, ref_app, 0, 0.01)
                out[f"{name}_cells"] = float(np.sum((p.block * 2 ** g["level"].astype(float)) ** 2))
                print(f"  {name}: {steps} steps, {wall:.2f} s, annulus L1 {out[f'{name}_error']:.4g} m^3, "
                      f"{out[f'{name}_cells']:.0f} cells at the end", flush=True)
            _, wall, steps, _ = simulate(params(args, 0, top, args.block), args.time, args.workers, LocalExecutor,
                                        args.tiles)
            out["adaptive_python_s"] = wall
            print(f"  adaptive, Python executor: {steps} steps, {wall:.2f} s", flush=True)
            out["native_speedup"] = wall / out["adaptive_s"]
            out["speedup"] = out["uniform_s"] / out["adaptive_s"]
            out["error_ratio"] = out["adaptive_error"] / out["uniform_error"]
            return out

        st = repeat(one, args.repeats)
        print(f"adaptive {st['adaptive_s'].show(unit=' s')} vs uniform {st['uniform_s'].show(unit=' s')}: "
              f"{st['speedup'].show()} faster; error adaptive / uniform {st['error_ratio'].show(digits=3)} "
              f"(adaptive {st['adaptive_error'].median:.4g}, uniform {st['uniform_error'].median:.4g} m^3)")
        print(f"adaptive on the native executor {st['adaptive_s'].show(unit=' s')} vs the Python one "
              f"{st['adaptive_python_s'].show(unit=' s')}: {st['native_speedup'].show()} faster")
        bench.add(blocks=args.blocks, block=args.block, max_level=top, time=args.time, tiles=args.tiles, **st)


if __name__ == "__main__":
    main()
