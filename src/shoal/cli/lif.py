"""``shoal lif``: expected load-imbalance factor of random placement."""

from __future__ import annotations

import argparse
from pathlib import Path

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
    p.add_argument("--target", type=float,
                   help="also print the tiles per node reaching this E[LIF] (and hold it in --plot's Figure 4)")
    p.add_argument("--plot", action="store_true", help="draw Birdshot's Figures 3 and 4")
    p.add_argument("--out", default=".", help="folder for the figures")
    p.set_defaults(func=main)
    return p


def main(args: argparse.Namespace) -> int:
    from ..imbalance import describe_expected_lif

    lines = describe_expected_lif(args.nodes, args.tiles_per_node, args.busy, args.trials, args.seed, args.target)
    paths = []
    if args.plot:
        from ..report.lif_figures import draw_lif_figures

        paths = draw_lif_figures(args.nodes, args.busy, args.tiles_per_node, Path(args.out), target=args.target)
    print("\n".join(lines + [f"wrote {path}" for path in paths]))
    return 0
