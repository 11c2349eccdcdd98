"""shoal: run tiled simulations, balance their load, and predict placements by replay.

Every subcommand has ``--help``; errors print one line and exit 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .errors import ShoalError


def _cmd_scenarios(args) -> int:
    from rich.console import Console
    from rich.table import Table

    from .config import builtin_scenarios

    table = Table(title="built-in scenarios")
    table.add_column("name")
    table.add_column("description")
    for name, desc in builtin_scenarios().items():
        table.add_row(name, desc)
    Console().print(table)
    return 0


def _cmd_run(args) -> int:
    from rich.console import Console
    from rich.progress import Progress

    from .config import load_scenario
    from .session import run_scenario

    sc = load_scenario(args.scenario)
    steps = args.steps or sc.run.steps
    console = Console(stderr=True)
    with Progress(console=console, transient=True) as progress:
        bar = progress.add_task(f"{sc.name}", total=steps)
        rec = run_scenario(
            sc, steps=args.steps, tiles=args.tiles, tiles_per_core=args.tiles_per_core,
            nodes=args.nodes, workers=args.workers, placement=args.placement, period=args.period,
            seed=args.seed, set=args.set or [], out=args.out,
            on_step=lambda k: progress.update(bar, completed=k + 1),
        )
    s = rec.summary
    print(f"run folder: {rec.path}")
    print(f"{s['steps']} steps, {s['tiles']} tiles on {s['nodes']} nodes x {s['workers']} workers "
          f"({s['placement']}): step {s['step_time_mean_s'] * 1e3:.2f} ms, LIF {s['lif_mean']:.3f}, "
          f"efficiency {s['efficiency']:.2f} ({s['efficiency_basis']})"
          + ("  [oversubscribed: timings not meaningful]" if s["oversubscribed"] else ""))
    return 0


def _cmd_compare(args) -> int:
    from .compare import compare_runs

    try:
        cmp = compare_runs(args.run_a, args.run_b)
    except ShoalError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for name, d in cmp.fields.items():
        print(f"{name}: max |a - b| = {d:.6g}" + ("" if name not in cmp.differing else "  (differs)"))
    if cmp.position is not None:
        print(f"particles matched by id: {cmp.matched}; only in A: {cmp.only_a}; only in B: {cmp.only_b}")
        print(f"position difference: max {cmp.position[0]:.6g} m, mean {cmp.position[1]:.6g} m")
    print(f"largest absolute difference: {cmp.max_abs_diff:.6g}")
    print("identical" if cmp.identical else "different")
    return 0 if cmp.identical else 1


def _cmd_report(args) -> int:
    from .report import report_run

    for p in report_run(args.run):
        print(p)
    return 0


def _cmd_lif(args) -> int:
    from .imbalance import (
        expected_lif_approx,
        expected_lif_exact,
        expected_lif_monte_carlo,
        tiles_per_node_for,
    )

    n, p, s = args.nodes, args.busy, args.tiles_per_node
    approx = expected_lif_approx(n, s, p)
    exact = expected_lif_exact(n, s, p)
    mc = expected_lif_monte_carlo(n, s, p, trials=args.trials, seed=args.seed)
    print(f"n = {n} nodes, s = {s} tiles per node, p = {p} busy")
    print(f"E[LIF] approximation (Birdshot Eq. 2): {approx:.4f}")
    print(f"E[LIF] exact (binomial model):         {exact:.4f}")
    print(f"E[LIF] Monte Carlo (real placement):   {mc.mean:.4f}  "
          f"(95% CI {mc.low:.4f} .. {mc.high:.4f}, {mc.trials} trials)")
    if args.target:
        print(f"tiles per node for E[LIF] <= {args.target}: {tiles_per_node_for(args.target, n, p)}")
    if args.plot:
        from .report.lif_figures import draw_lif_figures

        for path in draw_lif_figures(n, p, s, Path(args.out)):
            print(f"wrote {path}")
    return 0


def _cmd_demo(args) -> int:
    from . import demo

    run = demo.placements if args.placements else demo.dam_break
    return run(steps=args.steps, out=Path(args.out))


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="shoal", description=__doc__.splitlines()[0] if __doc__ else None)
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("scenarios", help="list built-in scenarios")
    p.set_defaults(func=_cmd_scenarios)

    p = sub.add_parser("run", help="run a scenario and write a run folder")
    p.add_argument("scenario", help="built-in scenario name or path to a TOML file")
    p.add_argument("--steps", type=int)
    g = p.add_mutually_exclusive_group()
    g.add_argument("--tiles", type=int, help="total number of tiles")
    g.add_argument("--tiles-per-core", type=int, help="tiles per core (total = this x cores)")
    p.add_argument("--nodes", type=int, help="nodes (inside this process)")
    p.add_argument("--workers", type=int, help="worker threads per node")
    p.add_argument("--placement", help="placement policy name")
    p.add_argument("--period", type=int, help="steps between rebalancing (dynamic policies)")
    p.add_argument("--seed", type=int)
    p.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="override any scenario field, e.g. app.grid=[128,128] (repeatable)")
    p.add_argument("--out", help="run folder (default runs/<scenario>-<placement>-<time>)")
    p.set_defaults(func=_cmd_run)

    p = sub.add_parser("compare", help="compare two runs' final states (exit 0 same, 1 different, 2 error)")
    p.add_argument("run_a")
    p.add_argument("run_b")
    p.set_defaults(func=_cmd_compare)

    p = sub.add_parser("report", help="draw a run's load heatmap, timeline and fields as PNG")
    p.add_argument("run")
    p.set_defaults(func=_cmd_report)

    p = sub.add_parser("lif", help="expected load-imbalance factor of random placement")
    p.add_argument("--nodes", type=int, required=True)
    p.add_argument("--busy", type=float, required=True, help="fraction of busy tiles p")
    p.add_argument("--tiles-per-node", type=int, required=True)
    p.add_argument("--trials", type=int, default=20000, help="Monte Carlo trials")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--target", type=float, help="also print the tiles per node reaching this E[LIF]")
    p.add_argument("--plot", action="store_true", help="draw Birdshot's Figures 3 and 4")
    p.add_argument("--out", default=".", help="folder for the figures")
    p.set_defaults(func=_cmd_lif)

    p = sub.add_parser("demo", help="the main job: Monaghan's breaking dam on 4 in-process nodes")
    p.add_argument("--steps", type=int, default=None)
    p.add_argument("--placements", action="store_true",
                   help="instead: the synthetic hot spot under every static placement, side by side")
    p.add_argument("--out", default="runs/demo")
    p.set_defaults(func=_cmd_demo)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except ShoalError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
