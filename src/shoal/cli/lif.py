"""``shoal lif``: expected load-imbalance factor of random placement."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import ShoalError

NAME = "lif"
HELP = "expected load-imbalance factor of random placement"


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``lif`` on the ``shoal`` command's ``subparsers``."""
    p = subparsers.add_parser(NAME, help=HELP)
    p.add_argument("--nodes", type=int, required=True)
    p.add_argument("--busy", type=float, required=True, help="fraction of busy tiles p")
    p.add_argument("--tiles-per-node", type=int, required=True)
    p.add_argument("--trials", type=int, default=20000, help="Monte Carlo trials")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--target", type=float, help="also print the tiles per node reaching this E[LIF]")
    p.add_argument("--plot", action="store_true", help="draw Birdshot's Figures 3 and 4")
    p.add_argument("--out", default=".", help="folder for the figures")
    p.set_defaults(func=main)
    return p


def main(args: argparse.Namespace) -> int:
    from ..imbalance import (
        expected_lif_approx,
        expected_lif_exact,
        expected_lif_monte_carlo,
        tiles_per_node_for,
    )

    n, p, s = args.nodes, args.busy, args.tiles_per_node
    approx = expected_lif_approx(n, s, p)
    exact = expected_lif_exact(n, s, p)
    print(f"n = {n} nodes, s = {s} tiles per node, p = {p} busy")
    print(f"E[LIF] approximation (Birdshot Eq. 2): {approx:.4f}")
    print(f"E[LIF] exact (binomial model):         {exact:.4f}")
    try:
        mc = expected_lif_monte_carlo(n, s, p, trials=args.trials, seed=args.seed)
        print(f"E[LIF] Monte Carlo (real placement):   {mc.mean:.4f}  "
              f"(95% CI {mc.low:.4f} .. {mc.high:.4f}, {mc.trials} trials)")
    except ShoalError as exc:  # too much work: the two model values stand
        print(f"E[LIF] Monte Carlo: skipped ({exc})")
    if args.target:
        print(f"tiles per node for E[LIF] <= {args.target}: {tiles_per_node_for(args.target, n, p)}")
    if args.plot:
        from ..report.lif_figures import draw_lif_figures

        for path in draw_lif_figures(n, p, s, Path(args.out)):
            print(f"wrote {path}")
    return 0
