"""``shoal run``: run a scenario and write a run folder."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..errors import ShoalError
from ..options import add_flags, values

NAME = "run"
HELP = "run a scenario and write a run folder"


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``run`` on the ``shoal`` command's ``subparsers``: its flags are made from the
    declared options (:class:`shoal.config.RunParams`, :class:`shoal.session.RunOptions`)."""
    from ..config import RunParams
    from ..session.options import RunOptions

    p = subparsers.add_parser(NAME, help=HELP)
    p.add_argument("scenario", nargs="?", help="built-in scenario name or path to a TOML file")
    groups = add_flags(p, RunParams)
    add_flags(p, RunOptions, groups)
    groups["view"].add_argument("--view", action="store_true", dest="start_viewer",
                                help="watch the run live in a browser: starts a viewer and prints its URL")
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
    if args.start_viewer and team.is_root:  # under mpiexec the first process's viewer watches every rank
        from ..view.attach import start_viewer

        viewer = start_viewer()
        if viewer is not None:
            print(f"live view: {viewer.url}", flush=True)
    try:
        return _run_viewed(args, team, sc, done, steps, viewer.socket if viewer is not None else args.view)
    finally:
        if viewer is not None:
            viewer.close()


def _run_viewed(args, team, sc, done: int, steps: int, view) -> int:
    from rich.console import Console
    from rich.progress import Progress

    from ..config import RunParams
    from ..log import ProgressLog
    from ..session import RunOptions, run_scenario

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

        given = {**values(args, RunParams), **values(args, RunOptions)}
        rec = run_scenario(sc, **{**given, "view": view, "team": team, "on_step": on_step})
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
