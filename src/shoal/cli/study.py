"""``shoal study``: a parameter study of concurrent simulations under invasive, sequential and all-at-once
scheduling (makespans, cores over time)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

NAME = "study"
HELP = ("a parameter study: concurrent simulations under invasive, sequential and all-at-once (makespans, "
        "cores over time)")


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``study`` on the ``shoal`` command's ``subparsers``."""
    p = subparsers.add_parser(NAME, help=HELP)
    p.add_argument("scenario", help="built-in scenario name or path to a TOML file")
    p.add_argument("--vary", action="append", metavar="KEY=V1,V2,...",
                   help="simulation K gets the K-th value, e.g. app.max_level=4,5,6 (repeatable, equal lengths)")
    p.add_argument("--arrive", required=True, metavar="T1,T2,...",
                   help="each simulation's arrival, seconds after the start")
    p.add_argument("--policies", default="invasive,sequential,all-at-once",
                   help="comma-separated policies, run one after another")
    p.add_argument("--cores", type=int, help="R, the study's cores (default: this machine's; more: oversubscribed)")
    p.add_argument("--steps", type=int, help="steps of every simulation (default: the scenario's)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a field of every simulation "
                                                                       "(repeatable)")
    p.add_argument("--out", help="a new folder for the study (default runs/study-<scenario>-<time>)")
    p.set_defaults(func=main)
    return p


def main(args: argparse.Namespace) -> int:
    import time

    from rich.console import Console
    from rich.table import Table

    from ..study import make_study, run_study, table

    study = make_study(args.scenario, args.vary or [], args.arrive, args.policies, args.cores, args.steps, args.set)
    out = Path(args.out or f"runs/study-{Path(args.scenario).stem}-{time.strftime('%Y%m%d-%H%M%S')}")
    runs = run_study(study, out, say=lambda line: print(line, file=sys.stderr, flush=True))
    spans, rows = table(study, runs)
    console = Console()
    sims = Table(title=f"{study.size} simulations of {study.scenario} (seconds after each policy's start)")
    for col in ("policy", "sim", "parameters", "arrival", "start", "end", "wall", "status"):
        sims.add_column(col, justify="left" if col in ("policy", "sim", "parameters", "status") else "right")
    for row in rows:
        sims.add_row(*row)
    makespans = Table(title="makespan: first arrival to last finish")
    for col in ("policy", "makespan (s)", "/ sequential"):
        makespans.add_column(col, justify="left" if col == "policy" else "right")
    for row in spans:
        makespans.add_row(*row)
    console.print(sims)
    console.print(makespans)
    print(f"study.json, cores.png and the run folders: {out.resolve()}")
    return 0
