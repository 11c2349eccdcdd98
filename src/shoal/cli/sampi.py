"""``shoal sampi``: the SAMPI workflow: record fine, aggregate, sweep GreedyLB/RefineLB, validate."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

NAME = "sampi"
HELP = "the SAMPI workflow: record fine, aggregate, sweep GreedyLB/RefineLB, validate"


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``sampi`` on the ``shoal`` command's ``subparsers``."""
    p = subparsers.add_parser(NAME, help=HELP)
    p.add_argument("scenario", help="built-in scenario name or path to a TOML file (x-y column tiles: seismic)")
    p.add_argument("--fine", default="16x48", metavar="NXxNY", help="tiles along x and y of the recorded fine run")
    p.add_argument("--coarse", default="4x4", metavar="NXxNY",
                   help="tiles of the real coarse run checked against aggregation (dividing --fine)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a scenario field (repeatable)")
    p.add_argument("--steps", type=int, help="steps of every run (default: the scenario's)")
    p.add_argument("--periods", default="10,20,30,40", help="comma-separated balancing periods")
    p.add_argument("--tiles-per-core", default="2,3,4,8,16", help="comma-separated over-decomposition levels")
    p.add_argument("--nodes", type=int, default=16, help="modeled nodes of the sweep")
    p.add_argument("--cores", type=int, default=1, help="modeled cores per node of the sweep")
    p.add_argument("--fig6-tiles-per-core", type=int, default=4, help="tiles per core of Figure 6 (and Fig. 7 left)")
    p.add_argument("--fig6-period", type=int, default=20, help="period of Figure 6 (and Fig. 7 right)")
    p.add_argument("--skip-zero", default="scenario", choices=("scenario", "true", "false", "both"),
                   help="app.skip_zero of the runs; both: the workflow twice and how the ranking changes")
    p.add_argument("--validate", action="store_true",
                   help="also real runs here (2 x 1 under mpiexec, 1 x 2 threads) against their replays")
    p.add_argument("--repeats", type=int, default=5, help="runs of each validation case")
    p.add_argument("--validate-steps", type=int, help="steps of the validation runs (default: --steps)")
    p.add_argument("--jobs", type=int, help="parallel replays of the sweep (default: all cores)")
    p.add_argument("--out", default="runs/sampi", help="folder for the runs, tables and figures (finished runs in "
                                                       "it are reused)")
    p.set_defaults(func=main)
    return p


def main(args: argparse.Namespace) -> int:
    from ..replay.sweep import parse_list
    from ..sampi import Workflow, parse_pair, run_workflow

    wf = Workflow(args.scenario, fine=parse_pair(args.fine), coarse=parse_pair(args.coarse), sets=args.set or [],
                  steps=args.steps, periods=parse_list(args.periods), tiles_per_core=parse_list(args.tiles_per_core),
                  nodes=args.nodes, cores=args.cores, fig6=(args.fig6_tiles_per_core, args.fig6_period),
                  validate=args.validate, repeats=args.repeats, validate_steps=args.validate_steps, jobs=args.jobs)
    out = Path(args.out)
    run_workflow(wf, out, skip_zero=args.skip_zero, say=lambda line: print(line, file=sys.stderr, flush=True))
    print((out / "results.md").read_text())
    print(f"tables (results.md, results.json) and figures: {out.resolve()}")
    return 0
