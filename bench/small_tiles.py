"""Small SPH tiles: what a task costs per phase, and how well its work predicts that cost.

The 2D dam break at ``app.dx = 0.005`` (about 80k particles) on many tiles (default 256,
about 300 particles a tile) spends much of each task in Python around the kernels. For every
phase this prints, per task: the CPU time (``cost``), the part of it in compiled kernels
(``kernel``) and the rest (Python, holding the interpreter lock), the time the task spent off
any CPU (``waiting``: its wall time less its CPU time, mostly waiting for the interpreter lock
that another worker holds; on 1 worker about nothing), the work in the phase's
declared unit, and the fit of cost = rate x work + overhead over the run's tasks (R^2, the
rate and the fixed overhead per task); then the mean step time. The same for the 3D dam break
with ``--app sph3d`` (30k particles).

Every figure is the median of ``--repeats`` runs (default 5) with its spread.

``--baseline REV`` measures the step time of shoal at revision ``REV`` too (checked out in a
temporary ``git worktree``, run in a subprocess), before this tree's in every round, and
prints before, after and their ratio (the median of each round's).

Run: ``python bench/small_tiles.py [--app sph2d|sph3d] [--tiles 256] [--workers 1] [--steps 40]
[--baseline REV] [--repeats 5] [--json FILE]``.
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from common import Benchmark, Stat, add_arguments, baseline_tree, repeat, run_with
from shoal.apps import get_app
from shoal.cluster import Cluster
from shoal.placement import get_policy
from shoal.runtime import LocalExecutor
from shoal.tiling import Tiling

PARAMS = {"sph2d": {"dx": 0.005, "alpha": 0.3}, "sph3d": {"particles": 30_000}}
SKIP = 3  # first steps left out: the kernels' first calls and the first halos


def fit(work: np.ndarray, cost: np.ndarray) -> tuple[float, float, float]:
    """R^2, rate and fixed overhead of the least-squares fit cost = rate x work + overhead."""
    a = np.stack([work.astype(np.float64), np.ones(len(work))], axis=1)
    coef, *_ = np.linalg.lstsq(a, cost, rcond=None)
    spread = ((cost - cost.mean()) ** 2).sum()
    r2 = 1.0 - ((cost - a @ coef) ** 2).sum() / spread if spread else float("nan")
    return float(r2), float(coef[0]), float(coef[1])


def measure(app, tiling: Tiling, workers: int, steps: int) -> dict[str, float]:
    """One run: per phase, mean cost, kernel and work per task and the fit; the mean step time."""
    cluster = Cluster.uniform(1, workers)
    with LocalExecutor(app, tiling, cluster, get_policy("sfc").place(tiling, cluster, 0)) as ex:
        res = ex.run(steps)
    t = res.tasks
    out = {"step_s": float(np.diff(res.step_end[SKIP - 1:]).mean())}
    for k, phase in enumerate(app.phases):
        rows = (t["phase"] == k) & (t["step"] >= SKIP)
        cost, kernel, work = t["cost"][rows], t["kernel"][rows], t["work"][rows]
        r2, rate, overhead = fit(work, cost)
        waiting = np.maximum(t["end"][rows] - t["start"][rows] - cost, 0.0)
        out |= {f"{phase.name}.cost": cost.mean(), f"{phase.name}.kernel": kernel.mean(),
                f"{phase.name}.waiting": waiting.mean(),
                f"{phase.name}.work": work.mean(), f"{phase.name}.r2": r2, f"{phase.name}.rate": rate,
                f"{phase.name}.overhead": overhead}
    return out


def compare(bench, args, app, tiling: Tiling) -> None:
    """Step time before (shoal at ``args.baseline``) and after (this tree), alternating."""
    flags = ["--app", args.app, "--tiles", str(args.tiles), "--workers", str(args.workers), "--steps",
             str(args.steps), "--step-only"]
    rounds = []
    with baseline_tree(args.baseline) as tree:
        for _ in range(max(args.repeats, 1)):
            rounds.append((run_with(tree, __file__, *flags), measure(app, tiling, args.workers, args.steps)["step_s"]))
    before, after = Stat(tuple(b for b, _ in rounds)), Stat(tuple(a for _, a in rounds))
    ratio = Stat(tuple(a / b for b, a in rounds))
    print(f"{args.app}, {args.tiles} tiles, 1 node x {args.workers} workers, {args.steps} steps (steps {SKIP}+ "
          f"counted); before = {args.baseline[:10]}, after = this tree; median of {len(rounds)} rounds ±spread")
    print(f"step ms: before {before.show(1e3, 1)}, after {after.show(1e3, 1)}, after / before {ratio.show(1, 2)}")
    bench.add(baseline=args.baseline, before_step_s=before, after_step_s=after, ratio=ratio)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--app", choices=sorted(PARAMS), default="sph2d")
    ap.add_argument("--tiles", type=int, default=256)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--baseline", metavar="REV", help="also the step time of shoal at this revision")
    ap.add_argument("--step-only", action="store_true", help=argparse.SUPPRESS)  # one run's step time, as JSON
    add_arguments(ap)
    args = ap.parse_args()
    spec = get_app(args.app)
    app = spec.build(spec.params(**PARAMS[args.app]), args.steps)
    tiling = Tiling.from_count(app.grid, args.tiles)
    app.prepare(tiling)
    if args.step_only:
        print(json.dumps(measure(app, tiling, args.workers, args.steps)["step_s"]))
        return
    with Benchmark("small_tiles", args) as bench:
        if args.baseline:
            compare(bench, args, app, tiling)
            return
        stats = repeat(lambda: measure(app, tiling, args.workers, args.steps), args.repeats)
        print(f"{args.app}, {args.tiles} tiles, 1 node x {args.workers} workers, {args.steps} steps "
              f"(steps {SKIP}+ counted)")
        print(f"{'phase':9s} {'unit':15s} {'cost us':>14s} {'kernel us':>14s} {'python us':>10s} "
              f"{'waiting us':>14s} {'work':>10s} {'R^2':>6s} {'ns/unit':>9s} {'fixed us':>9s}")
        for phase in app.phases:
            s = {k.split(".", 1)[1]: v for k, v in stats.items() if k.startswith(phase.name + ".")}
            python = s["cost"].median - s["kernel"].median
            print(f"{phase.name:9s} {phase.work:15s} {s['cost'].show(1e6, 1):>14s} {s['kernel'].show(1e6, 1):>14s} "
                  f"{python * 1e6:10.1f} {s['waiting'].show(1e6, 1):>14s} {s['work'].median:10.0f} "
                  f"{s['r2'].median:6.3f} {s['rate'].median * 1e9:9.2f} "
                  f"{s['overhead'].median * 1e6:9.1f}")
            bench.add(phase=phase.name, unit=phase.work, **s)
        print(f"step {stats['step_s'].show(1e3)} ms")
        bench.add(step_s=stats["step_s"])


if __name__ == "__main__":
    main()
