"""``shoal report``: draw a run's load heatmap, timeline and fields as PNG."""

from __future__ import annotations

import argparse

NAME = "report"
HELP = "draw a run's load heatmap, timeline and fields as PNG"


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``report`` on the ``shoal`` command's ``subparsers``."""
    p = subparsers.add_parser(NAME, help=HELP)
    p.add_argument("run", help="a run folder")
    p.add_argument("--steps", metavar="A:B", help="timeline of steps A to B-1 (A:, :B or one step also work)")
    p.add_argument("--cores", metavar="C:D", help="timeline of cores C to D-1, numbered node by node")
    p.add_argument("--absolute", action="store_true",
                   help="load heatmap in CPU ms per core instead of relative to each step's mean")
    p.add_argument("--perfetto", action="store_true",
                   help="also write timeline.perfetto.json.gz (open it at ui.perfetto.dev to zoom)")
    p.set_defaults(func=main)
    return p


def main(args: argparse.Namespace) -> int:
    from ..report import report_run
    from ..report.timeline import parse_range

    steps = parse_range(args.steps, "--steps") if args.steps else None
    cores = parse_range(args.cores, "--cores") if args.cores else None
    for p in report_run(args.run, steps=steps, cores=cores, absolute=args.absolute, perfetto=args.perfetto):
        print(p)
    return 0
