"""Adaptive blocks against a uniform grid where the shoreline moves: Thacker's planar surface
oscillating in a paraboloid basin (SWASHES 4.2.2, the built-in ``swe-oscillating-lake``) for
one period, at ``--max-level``'s resolution everywhere, and on root blocks refining from level 0
to it wherever there is water (``app.threshold = 0``), once with the blocks the shoreline
crosses kept at their level (``app.freeze_dry``, the default) and once refined where it moves
(``app.shore``).

Each run is measured against the exact solution at its own final time, on the finest level's
grid (coarser blocks repeated): the mean error of the surface over the exact wet disc (as a
share of the surface's amplitude ``2 eta h0 / a``), the farthest a cell whose wetness differs
from the exact one (wet above 2% of ``h0``) lies from the exact shoreline (in finest cells),
the cells at the end, and the wall time. The uniform run is level 0 of root blocks as fine as
the finest adaptive ones (its fastest form). Every run is two tiles per worker of one node,
second order, f-wave.

Run: ``python bench/swe_thacker.py [--blocks 10] [--block 8] [--max-level 2] [--repeats 5]
[--json FILE]``.
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from common import Benchmark, add_arguments, repeat
from shoal.apps import get_app
from shoal.apps.swe import analytic
from swe_adaptive import simulate

H0, A, ETA = 0.1, 1.0, 0.5  # the basin's depth and radius, the amplitude (m), as swe-oscillating-lake
SIDE = 4.0


def params(blocks: int, block: int, max_level: int, **adapt):
    """The oscillating lake on ``blocks`` x ``blocks`` root blocks of ``block`` cells."""
    return get_app("swe").params(setup="thacker", blocks=[blocks] * 2, block=block, extent=[SIDE, SIDE],
                                 thacker=[H0, A, ETA], solver="fwave", order=2, boundary="reflect", min_level=0,
                                 max_level=max_level, regrid_every=2, threshold=0.0, **adapt)


def errors(app, gathered, level: int) -> tuple[float, float]:
    """The surface's mean error over the exact wet disc (share of the amplitude) and the
    shoreline's largest distance from the exact one (cells of ``level``)."""
    u = app.uniform(gathered, level)
    n = u["h"].shape[0]
    dx = SIDE / n
    c = (np.arange(n) + 0.5) * dx
    x, y = np.meshgrid(c, c, indexing="ij")
    t = float(gathered["time"])
    exact, _, _ = analytic.thacker(x, y, t, (SIDE / 2, SIDE / 2), H0, A, ETA)
    surface = exact + analytic.thacker_bathymetry(x, y, (SIDE / 2, SIDE / 2), H0, A)
    wet = exact > 0
    error = float(np.abs(u["h"] + u["b"] - surface)[wet].mean() / (2 * ETA * H0 / A))
    omega = analytic.thacker_frequency(H0, A)
    r = np.hypot(x - SIDE / 2 - ETA * math.cos(omega * t), y - SIDE / 2 - ETA * math.sin(omega * t))
    differ = (u["h"] > 0.02 * H0) != wet
    return error, float(np.abs(r[differ] - A).max() / dx) if differ.any() else 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blocks", type=int, default=10, help="root blocks per side")
    ap.add_argument("--block", type=int, default=8, help="cells per root block side at level 0")
    ap.add_argument("--max-level", type=int, default=2)
    ap.add_argument("--workers", type=int, default=1)
    add_arguments(ap)
    args = ap.parse_args()
    top, fine = args.max_level, args.block * 2**args.max_level
    period = analytic.thacker_period(H0, A)
    runs = (("uniform", params(args.blocks, fine, 0), 0),
            ("frozen", params(args.blocks, args.block, top), top),
            ("shore", params(args.blocks, args.block, top, shore=True), top))
    with Benchmark("swe-thacker", args) as bench:
        print(f"Thacker's lake for one period ({period:.3f} s), {args.blocks}^2 root blocks of {args.block}^2 cells, "
              f"levels 0-{top} where there is water ({args.blocks * fine}^2 cells at the finest), order 2, f-wave")

        def one() -> dict:
            out = {}
            for name, p, level in runs:
                g, wall, steps, app = simulate(p, period, args.workers)
                out[f"{name}_s"] = wall
                out[f"{name}_error"], out[f"{name}_shoreline"] = errors(app, g, level)
                out[f"{name}_cells"] = float(np.sum((p.block * 2 ** g["level"].astype(float)) ** 2))
                print(f"  {name}: {steps} steps to t = {float(g['time']):.4f} s, {wall:.2f} s, surface error "
                      f"{out[f'{name}_error']:.3%} of the amplitude, shoreline within {out[f'{name}_shoreline']:.2f} "
                      f"cells, {out[f'{name}_cells']:.0f} cells at the end", flush=True)
            for name in ("frozen", "shore"):
                out[f"{name}_speedup"] = out["uniform_s"] / out[f"{name}_s"]
                out[f"{name}_error_ratio"] = out[f"{name}_error"] / out["uniform_error"]
            return out

        st = repeat(one, args.repeats)
        for name in ("frozen", "shore"):
            print(f"{name}: {st[f'{name}_speedup'].show()} faster than uniform, surface error "
                  f"{st[f'{name}_error_ratio'].show(digits=3)} of the uniform run's "
                  f"({st[f'{name}_error'].median:.3%} against {st['uniform_error'].median:.3%}), shoreline within "
                  f"{st[f'{name}_shoreline'].median:.2f} cells (uniform {st['uniform_shoreline'].median:.2f})")
        bench.add(blocks=args.blocks, block=args.block, max_level=top, **st)


if __name__ == "__main__":
    main()
