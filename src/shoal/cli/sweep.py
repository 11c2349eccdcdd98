"""``shoal sweep``: replay a trace over placements, tiles per core, periods and cluster sizes."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..replay.run import lock_line
from .flags import balance, calibration, network, replay_flags

NAME = "sweep"
HELP = "replay a trace over placements, tiles per core, periods and cluster sizes"


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``sweep`` on the ``shoal`` command's ``subparsers``."""
    p = subparsers.add_parser(NAME, help=HELP)
    p.add_argument("trace", help="a trace.h5 or a run folder")
    p.add_argument("--placements", default="geometric,strips,sfc,birdshot,greedy,refine,swap,speculative",
                   help="comma-separated policies, or 'all'")
    p.add_argument("--tiles-per-core", default="1,2,4,8,16,32", help="comma-separated tiles per core")
    p.add_argument("--periods", default="10,20,30,40",
                   help="comma-separated periods of the dynamic policies (steps, or 'adaptive')")
    p.add_argument("--nodes", default="8,32,64", help="comma-separated cluster sizes (nodes)")
    p.add_argument("--cores", type=int, default=8, help="cores per node")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--birdshot-seeds", type=int, default=0, help="also replay birdshot over this many seeds")
    p.add_argument("--jobs", type=int, help="parallel processes (default: all cores)")
    p.add_argument("--top", type=int, default=25, help="rows of the table")
    p.add_argument("--proxy", help="trace of a low-resolution run of the same scenario (for speculative)")
    p.add_argument("--out", default="runs/sweep", help="folder for sweep.json and the plots")
    replay_flags(p)
    p.set_defaults(func=main)
    return p


def main(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import Progress
    from rich.table import Table

    from ..errors import ShoalError
    from ..placement.trigger import parse_period
    from ..replay.sweep import cases, known_placements, parse_list, sweep
    from ..report.sweep_plots import draw_sweep
    from ..trace import Trace

    if args.jobs is not None and args.jobs < 1:  # before the trace is read: the flag at fault, by name
        raise ShoalError(f"--jobs {args.jobs}: must be at least 1 (replay processes at once)")
    placements = known_placements(args.placements)
    tpc, nodes = parse_list(args.tiles_per_core), parse_list(args.nodes)
    periods = parse_list(args.periods, parse_period)
    total = len(cases(placements, tpc, periods, nodes, args.cores, args.seed, None)) + args.birdshot_seeds
    model = {"balance": balance(args, Trace.read(args.trace)), "gil": args.gil, "message_cpu_s": args.message_cpu,
             "iterations": args.iterations, "job_policy": args.job_policy, "job_split": args.job_split,
             **calibration(args)}
    console = Console(width=max(Console().width, 110))
    with Progress(console=console, transient=True) as progress:
        bar = progress.add_task("replaying", total=total)
        result = sweep(args.trace, placements, tpc, periods, nodes, args.cores, seed=args.seed,
                       birdshot_seeds=args.birdshot_seeds, jobs=args.jobs, network=network(args), model=model,
                       proxy=args.proxy, on_done=lambda k: progress.update(bar, completed=k + 1))
    table = Table(title=f"predicted, ranked by makespan ({len(result.rows)} cases; "
                        f"{lock_line(r['gil'] for r in result.rows)})")
    for col in ("rank", "placement", "period", "nodes", "tiles/core", "makespan (s)", "step (ms)", "LIF",
                "idle", "migrated (MB)"):
        table.add_column(col, justify="left" if col == "placement" else "right")
    for k, r in enumerate(result.rows[: args.top]):
        table.add_row(str(k + 1), r["placement"], str(r["period"] or "-"), str(r["nodes"]),
                      f"{r['tiles_per_core']:.1f}", f"{r['makespan_s']:.4g}", f"{r['step_time_mean_s'] * 1e3:.3f}",
                      f"{r['lif_mean']:.3f}", f"{r['idle_fraction']:.1%}", f"{r['migrated_bytes'] / 1e6:.2f}")
    console.print(table)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    import json

    (out / "sweep.json").write_text(json.dumps({"rows": result.rows, "birdshot_seeds": result.seeds}, indent=1))
    for p in draw_sweep(result, out):
        console.print(f"wrote {p}")
    return 0
