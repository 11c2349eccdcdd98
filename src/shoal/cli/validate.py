"""``shoal validate``: record runs here, replay them on a model of this machine, compare."""

from __future__ import annotations

import argparse
from pathlib import Path

NAME = "validate"
HELP = "record runs here, replay them on a model of this machine, compare"


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``validate`` on the ``shoal`` command's ``subparsers``."""
    p = subparsers.add_parser(NAME, help=HELP)
    p.add_argument("--out", default="runs/validate", help="folder for the runs, table and figure")
    p.add_argument("--quick", action="store_true", help="a quarter of the steps")
    p.add_argument("--repeats", type=int, default=5, help="runs per case; medians (and spreads) are compared")
    p.set_defaults(func=main)
    return p


def main(args: argparse.Namespace) -> int:
    import numpy as np
    from rich.console import Console
    from rich.table import Table

    from ..provenance import busy_warning, describe
    from ..replay.run import lock_line
    from ..validate import COLUMNS, LOCK, table, validate

    console = Console(width=max(Console().width, 100))
    result = validate(Path(args.out), quick=args.quick, repeats=args.repeats,
                      on_case=lambda c: console.print(f"recording {c}"))
    cal = result.calibration
    shared = [r["calibration"]["handoff_s"] for r in result.rows if r["nodes"] * r["workers"] > 1]
    median_handoff = float(np.median(shared)) if shared else 0.0
    out = Table(title=f"predicted vs measured makespan on this machine, medians ± spread of {args.repeats} runs "
                      f"(executor overhead {cal['task_overhead_s'] * 1e6:.1f} us/task and "
                      f"{cal['payload_overhead_s'] * 1e6:.2f} us/payload, wake-up {cal['wake_s'] * 1e6:.0f} us, "
                      f"restart {cal['restart_s'] * 1e3:.2f} ms; first case; lock hand-off per lock-free call "
                      f"{median_handoff * 1e6:.1f} us, median of the cases on several threads; modeled "
                      f"{lock_line([LOCK])})")
    for col in COLUMNS:
        out.add_column(col, justify="left" if col in ("scenario", "placement") else "right")
    for row in table(result):
        out.add_row(*row)
    console.print(describe(result.provenance), markup=False)
    console.print(out)
    worst = max(abs(r["error"]) for r in result.rows)
    console.print(f"largest error {worst:.1%}; ranking of placements held: "
                  + ", ".join(f"{g} on {w} worker(s) per node: {'yes' if result.ranking_preserved(g, w) else 'no'}"
                              for g, w in result.ranked_sets()))
    if warning := busy_warning(result.provenance):
        console.print(f"warning: {warning}", markup=False)
    console.print(f"runs, calibration and validation.json: {Path(args.out).resolve()}")
    return 0
