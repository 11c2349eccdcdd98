"""``make demo``'s dam break on both executors: wall time of the whole simulation (frames
drawn on the way included, as the demo runs it), the same particles at the end.

The demo's own settings (``shoal.demo``: dx, steps to 1.8 s, birdshot over the scenario's
4 nodes x 1 worker, frames every steps / 90); the Python executor is the baseline, run in the
same round. Each round checks that both backends end with the same particles, bit for bit.

Run: ``python bench/demo.py [--repeats 5] [--steps N] [--json FILE]``.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np

from common import Benchmark, add_arguments, repeat
from shoal import demo
from shoal.apps import get_app
from shoal.config import load_scenario
from shoal.session import run_scenario


def demo_steps() -> int:
    """The demo's step count (to 1.8 s of simulated time)."""
    sc = load_scenario("sph-dam-break")
    sc.override([f"app.dx={demo.DEMO_DX}"])
    dt0 = get_app(sc.app).build(sc.params, 1).initial_reductions()["rates"]
    return int(np.ceil(demo.DEMO_END_S / dt0 * 1.12))


def one_round(steps: int) -> dict[str, float]:
    """Both executors once: their wall seconds and the ratio."""
    walls, finals = {}, {}
    with tempfile.TemporaryDirectory(prefix="shoal-bench-demo-") as tmp:
        for executor in ("python", "native"):
            rec = run_scenario("sph-dam-break", steps=steps, placement="birdshot", out=Path(tmp) / executor,
                               executor=executor, set=[f"app.dx={demo.DEMO_DX}",
                                                       f"run.frame_every={max(1, steps // demo.DEMO_FRAMES)}"])
            walls[executor] = rec.summary["wall_s"]
            finals[executor] = rec.state()
    a, b = finals["python"], finals["native"]
    same = all(np.array_equal(np.atleast_1d(a[k]).view(np.uint8), np.atleast_1d(b[k]).view(np.uint8)) for k in a)
    if not same:
        raise SystemExit("the two executors ended with different particles")
    return {"python_s": walls["python"], "native_s": walls["native"], "speedup": walls["python"] / walls["native"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(ap)
    ap.add_argument("--steps", type=int, default=0, help="steps (default: the demo's)")
    args = ap.parse_args()
    steps = args.steps or demo_steps()
    with Benchmark("demo", args) as bench:
        stat = repeat(lambda: one_round(steps), args.repeats)
        print(f"dam break, dx = {demo.DEMO_DX} m, {steps} steps, 4 nodes x 1 worker, birdshot, frames every "
              f"{max(1, steps // demo.DEMO_FRAMES)} steps (median of {args.repeats}):")
        print(f"  python executor {stat['python_s'].show(1, 1, ' s')}   native executor "
              f"{stat['native_s'].show(1, 1, ' s')}   speedup {stat['speedup'].show(1, 2, 'x')} (target 3x)")
        bench.add(steps=steps, **stat)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
