"""``shoal demo``: the main job: Monaghan's breaking dam on 4 in-process nodes."""

from __future__ import annotations

import argparse
from pathlib import Path

NAME = "demo"
HELP = "the main job: Monaghan's breaking dam on 4 in-process nodes"


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``demo`` on the ``shoal`` command's ``subparsers``."""
    p = subparsers.add_parser(NAME, help=HELP)
    p.add_argument("--steps", type=int, default=None, help="time steps of the main run (default: the scenario's)")
    p.add_argument("--placements", action="store_true",
                   help="instead: the synthetic hot spot under every static placement, side by side")
    p.add_argument("--out", default="runs/demo", help="folder for the demo's run and pictures")
    p.set_defaults(func=main)
    return p


def main(args: argparse.Namespace) -> int:
    from .. import demo

    run = demo.placements if args.placements else demo.dam_break
    return run(steps=args.steps, out=Path(args.out))
