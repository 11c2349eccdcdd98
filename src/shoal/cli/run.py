"""``shoal run``: run a scenario and write a run folder."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..errors import ShoalError
from .flags import lb_flag, period

NAME = "run"
HELP = "run a scenario and write a run folder"


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``run`` on the ``shoal`` command's ``subparsers``."""
    p = subparsers.add_parser(NAME, help=HELP)
    p.add_argument("scenario", nargs="?", help="built-in scenario name or path to a TOML file")
    p.add_argument("--steps", type=int, help="time steps (default: the scenario's)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--tiles", type=int, help="total number of tiles")
    g.add_argument("--tiles-per-core", type=int, help="tiles per core (total = this x cores)")
    p.add_argument("--nodes", type=int, help="nodes (inside this process; default: the scenario's)")
    p.add_argument("--workers", type=int, help="worker threads per node (default: the scenario's)")
    p.add_argument("--placement", help="placement policy name (default: the scenario's)")
    p.add_argument("--period", type=period,
                   help="steps between rebalancing (dynamic policies), or 'adaptive': when the measured imbalance "
                        "has cost more than the last balancing step")
    p.add_argument("--initial", help="static placement a dynamic policy starts from (default sfc)")
    p.add_argument("--seed", type=int, help="seed of random placements and balancers (default: the scenario's)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="override any scenario field, e.g. app.grid=[128,128] (repeatable)")
    lb_flag(p)
    p.add_argument("--out", help="run folder (default runs/<scenario>-<placement>-<time>)")
    p.add_argument("--checkpoint-every", type=int, help="write a checkpoint every this many steps")
    p.add_argument("--resume", metavar="RUN_DIR",
                   help="continue that run from its latest checkpoint (nodes, workers, placement may change)")
    p.add_argument("--allow-large", action="store_true",
                   help="run even when the estimated memory or worker threads exceed this machine's")
    p.add_argument("--invasive", metavar="POLICY",
                   help="start a resource manager (workload or scalability) and let each node's worker threads "
                        "follow the cores it gives the node")
    p.add_argument("--cores", type=int, metavar="R",
                   help="the manager's pool (default: this machine's cores; more: a logical pool, threads not "
                        "pinned, the run marked oversubscribed)")
    p.add_argument("--manager", metavar="FILE",
                   help="join the running resource manager this JSON file names (address, authkey, policy)")
    p.add_argument("--invade-every", type=int, metavar="K",
                   help="steps between a node's invades (default 1)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--view", action="store_true",
                   help="watch the run live in a browser: starts a viewer and prints its URL")
    g.add_argument("--view-socket", metavar="PATH", help="feed the running viewer listening on this Unix socket")
    p.add_argument("--view-every", type=int, metavar="K",
                   help="steps between the live view's frames (default: run.frame_every, else about 100 frames, fewer "
                        "when they would take over 3%% of the run's time)")
    p.add_argument("--log-every", type=int, default=100, metavar="N",
                   help="without a terminal (batch jobs): a progress line every N steps")
    p.add_argument("--log-seconds", type=float, default=30.0, metavar="S",
                   help="... or every S seconds, whichever comes first")
    p.set_defaults(func=main)
    return p


def main(args: argparse.Namespace) -> int:
    from ..runtime.launch import current_team

    team = current_team()  # one MPI rank per node under mpiexec, else one process
    try:
        return _run(args, team)
    except (Exception, KeyboardInterrupt) as exc:
        team.abort(exc)  # under MPI: name the rank and the step, stop every rank
        raise

def _run(args, team) -> int:
    from ..config import load_scenario

    if not args.scenario and not args.resume:
        raise ShoalError("give a SCENARIO to run, or --resume RUN_DIR")
    if args.resume:
        from ..runtime.checkpoint import Checkpoint
        from ..session import resumable

        sc = resumable(Path(args.resume))
        done = Checkpoint.latest_step(Path(args.resume) / "state")
    else:
        sc, done = load_scenario(args.scenario), 0
    steps = args.steps or sc.run.steps
    viewer = None
    if args.view and team.is_root:  # under mpiexec the first process's viewer watches every rank
        from ..view.attach import start_viewer

        viewer = start_viewer()
        if viewer is not None:
            print(f"live view: {viewer.url}", flush=True)
    try:
        return _run_viewed(args, team, sc, done, steps, viewer.socket if viewer is not None else args.view_socket)
    finally:
        if viewer is not None:
            viewer.close()


def _run_viewed(args, team, sc, done: int, steps: int, view) -> int:
    from rich.console import Console
    from rich.progress import Progress

    from ..log import ProgressLog
    from ..session import run_scenario

    console = Console(stderr=True)
    log = ProgressLog(sc.name, steps, done, every_steps=args.log_every, every_s=args.log_seconds)
    bar_shown = team.is_root and console.is_terminal and not args.quiet
    with Progress(console=console, transient=True, disable=not bar_shown) as progress:
        bar = progress.add_task(f"{sc.name}", total=steps, completed=done)

        def on_step(k: int) -> None:
            if bar_shown:
                progress.update(bar, completed=k + 1)
            elif team.is_root:
                log.step(k + 1)

        rec = run_scenario(
            sc, steps=args.steps, tiles=args.tiles, tiles_per_core=args.tiles_per_core,
            nodes=args.nodes, workers=args.workers, placement=args.placement, period=args.period,
            seed=args.seed, initial=args.initial, set=args.set or [], lb=args.lb or [], out=args.out,
            checkpoint_every=args.checkpoint_every, resume=args.resume, team=team, on_step=on_step,
            allow_large=args.allow_large, invasive=args.invasive, cores=args.cores, manager=args.manager,
            invade_every=args.invade_every, view=view, view_every=args.view_every,
        )
    if not team.is_root:
        return 0
    if rec.stopped_at is not None:
        print(f"stopped at step {rec.stopped_at} with a checkpoint: continue with shoal run --resume {rec.path}",
              file=sys.stderr)
        return 130
    s = rec.summary
    ranks = f" ({s['ranks']} MPI ranks)" if team.distributed else ""
    print(f"run folder: {rec.path}")
    held = s.get("invasive")
    workers = (f" holding {sum(held['cores_mean']):.1f} cores on average ({held['cores_min']}-{held['cores_max']}, "
               f"invasive {held['policy']})" if held else f" x {s['workers']} workers")
    print(f"{s['steps']} steps, {s['tiles']} tiles on {s['nodes']} nodes{workers}{ranks} "
          f"({s['placement']}): step {s['step_time_mean_s'] * 1e3:.2f} ms, LIF {s['lif_mean']:.3f}, "
          f"efficiency {s['efficiency']:.2f} ({s['efficiency_basis']})"
          + ("  [oversubscribed: timings not meaningful]" if s["oversubscribed"] else ""))
    return 0
