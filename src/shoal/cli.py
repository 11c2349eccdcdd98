"""shoal: run tiled simulations, balance their load, and predict placements by replay.

Every subcommand has ``--help``; errors print one line and exit 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import __version__
from .errors import ShoalError
from .log import LEVELS, announce_compilation, configure, logger


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
    from .runtime.team import current_team

    team = current_team()  # one MPI rank per node under mpiexec, else one process
    try:
        return _run(args, team)
    except (Exception, KeyboardInterrupt) as exc:
        team.abort(exc)  # under MPI: name the rank and the step, stop every rank
        raise


def _run(args, team) -> int:
    from .config import load_scenario

    if not args.scenario and not args.resume:
        raise ShoalError("give a SCENARIO to run, or --resume RUN_DIR")
    if args.resume:
        from .runtime.checkpoint import Checkpoint
        from .session import resumable

        sc = resumable(Path(args.resume))
        done = Checkpoint.latest_step(Path(args.resume) / "state")
    else:
        sc, done = load_scenario(args.scenario), 0
    steps = args.steps or sc.run.steps
    viewer = None
    if args.view and team.is_root:  # under mpiexec the first process's viewer watches every rank
        from .view.attach import start_viewer

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

    from .log import ProgressLog
    from .session import run_scenario

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
    from .report.timeline import parse_range

    steps = parse_range(args.steps, "--steps") if args.steps else None
    cores = parse_range(args.cores, "--cores") if args.cores else None
    for p in report_run(args.run, steps=steps, cores=cores, absolute=args.absolute, perfetto=args.perfetto):
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
    print(f"n = {n} nodes, s = {s} tiles per node, p = {p} busy")
    print(f"E[LIF] approximation (Birdshot Eq. 2): {approx:.4f}")
    print(f"E[LIF] exact (binomial model):         {exact:.4f}")
    try:
        mc = expected_lif_monte_carlo(n, s, p, trials=args.trials, seed=args.seed)
        print(f"E[LIF] Monte Carlo (real placement):   {mc.mean:.4f}  "
              f"(95% CI {mc.low:.4f} .. {mc.high:.4f}, {mc.trials} trials)")
    except ShoalError as exc:  # too much work: the two model values stand
        print(f"E[LIF] Monte Carlo: skipped ({exc})")
    if args.target:
        print(f"tiles per node for E[LIF] <= {args.target}: {tiles_per_node_for(args.target, n, p)}")
    if args.plot:
        from .report.lif_figures import draw_lif_figures

        for path in draw_lif_figures(n, p, s, Path(args.out)):
            print(f"wrote {path}")
    return 0


def _network(args):
    from .cluster import Network

    return Network(latency_s=args.latency, bandwidth_Bps=args.bandwidth, overhead_s=args.overhead)


def _machine(args) -> dict:
    """The executor's calibrated overheads (``--calibration FILE``), or none."""
    from .replay.calibrate import read_calibration

    return read_calibration(args.calibration) if args.calibration else {}


def _cmd_calibrate(args) -> int:
    from .replay.calibrate import calibrate, refine
    from .replay.machine import MachineModel, fit_trace
    from .trace import Trace

    if args.task_us <= 0 or args.tasks < 100 or min(args.nodes, args.workers) < 1:
        raise ShoalError("--task-us must be > 0, --tasks >= 100, --nodes and --workers >= 1")
    model = MachineModel()
    if args.from_trace:
        trace = Trace.read(args.from_trace)
        model = MachineModel.from_dict(trace.machine, args.from_trace) if trace.machine else fit_trace(trace)
        print(model.fit_line())
    if not args.no_bench:
        print(f"timing the executor on this machine ({args.tasks} tasks of {args.task_us:g} us)...", file=sys.stderr)
        cal = calibrate(tasks=args.tasks, task_s=args.task_us * 1e-6, nodes=args.nodes, workers=args.workers)
        model = refine(model, cal, args.nodes * args.workers)
    out = model.to_json(args.out)
    print(f"executor: dispatch {model.dispatch_s * 1e6:.1f} us per task, wake-up {model.wake_s * 1e6:.0f} us, "
          f"lock wait {model.handoff_s * 1e6:.1f} us per lock-free call ({model.lock_threads} threads), restart "
          f"{model.restart_s * 1e3:.2f} ms; " + ", ".join(f"{k} from {v}" for k, v in model.measured_by.items()))
    print(f"wrote {out} (give it to shoal replay as --machine, or to replay and sweep as --calibration)")
    return 0


def _balance(args, trace) -> dict:
    """Policy parameters: the recorded scenario's ``[balance]`` table, then ``--lb``."""
    from .config import balance_table

    return balance_table(trace.config.get("balance", {}), args.lb or [])


def _invasive(args):
    """The modeled resource manager of ``--invasive`` (checked), or None; ``--cores`` is each host's pool."""
    if args.invasive is None:
        return None
    from .replay.invasive import InvasiveConfig

    invasive = InvasiveConfig(policy=args.invasive, hosts=args.hosts, ranks_per_host=args.ranks_per_host,
                              cores=args.cores, release_delay_s=args.release_delay, request_s=args.request_cost,
                              window=args.window)
    invasive.check()
    return invasive


def _cmd_replay(args) -> int:
    from .replay import ReplayConfig, replay
    from .replay.machine import MachineModel
    from .replay.run import write_replay
    from .session import check_folder
    from .trace import Trace

    invasive = _invasive(args)  # refused before the trace is read
    trace = Trace.read(args.trace)
    machine = MachineModel.from_json(args.machine) if args.machine else None
    if args.costs == "model" and machine is None and trace.machine is None:
        logger.info("%s has no machine model (an older trace): replaying its measured costs", args.trace)
    cfg = ReplayConfig(nodes=args.nodes, cores=None if invasive else args.cores, placement=args.placement,
                       period=args.period, invasive=invasive,
                       tiles_per_core=args.tiles_per_core, initial=args.initial, seed=args.seed, speed=args.speed,
                       network=_network(args), mpi_reference=args.mpi_reference, balance=_balance(args, trace),
                       proxy=Trace.read(args.proxy) if args.proxy else None, gil=args.gil, costs=args.costs,
                       machine=machine, message_cpu_s=args.message_cpu, **_machine(args))
    out = Path(args.out) if args.out else Path("runs") / f"replay-{trace.scenario}-{cfg.placement}"
    check_folder(out)  # refused before the replay runs, not after
    result = replay(trace, cfg)
    s = write_replay(result, out)
    print(f"predicted run folder: {out}")
    if s["machine_fit"]:
        logger.info("%s", s["machine_fit"])
    cores = "x".join(map(str, sorted(set(s["cores"])))) if len(set(s["cores"])) > 1 else str(s["cores"][0])
    print(f"{s['steps']} steps, {s['tiles']} tiles on {s['nodes']} nodes x {cores} cores ({s['placement']}"
          + (f", every {s['period']} steps" if isinstance(s["period"], int) and s["period"]
             else ", adaptive" if s["period"] else "") + f"): makespan {s['makespan_s']:.4g} s, "
          f"step {s['step_time_mean_s'] * 1e3:.3f} ms, LIF {s['lif_mean']:.3f}, idle {s['idle_fraction']:.1%}, "
          f"migrated {s['migrated_bytes'] / 1e6:.2f} MB; {s['events']:,} events in {s['replay_wall_s']:.2f} s"
          + (f"; {s['message_cpu_s'] * 1e6:.1f} us CPU charged per message end" if s["message_cpu_s"] else ""))
    if s["lock_dominated"]:
        lo, hi = s["lock_interval_step_s"]
        logger.info("lock-dominated: the tasks spend less than half their time in lock-free kernels; the step time "
                    "lies between %.3f ms (no lock) and %.3f ms (the lock serialising their Python share)",
                    lo * 1e3, hi * 1e3)
    if any(s["machine"].values()):
        m = s["machine"]
        print(f"executor model: {m['task_overhead_s'] * 1e6:.1f} us per task + {m['payload_overhead_s'] * 1e6:.2f} us "
              f"per payload, wake-up {m['wake_s'] * 1e6:.0f} us, restart {m['restart_s'] * 1e3:.2f} ms, lock wait "
              f"{m['handoff_s'] * 1e6:.1f} us per lock-free call ({s['gil']} lock)")
    return 0


def _cmd_sweep(args) -> int:
    from rich.console import Console
    from rich.progress import Progress
    from rich.table import Table

    from .placement.trigger import parse_period
    from .replay.sweep import cases, known_placements, parse_list, sweep
    from .report.sweep_plots import draw_sweep
    from .trace import Trace

    placements = known_placements(args.placements)
    tpc, nodes = parse_list(args.tiles_per_core), parse_list(args.nodes)
    periods = parse_list(args.periods, parse_period)
    total = len(cases(placements, tpc, periods, nodes, args.cores, args.seed, None)) + args.birdshot_seeds
    model = {"balance": _balance(args, Trace.read(args.trace)), "gil": args.gil, "message_cpu_s": args.message_cpu,
             **_machine(args)}
    console = Console(width=max(Console().width, 110))
    with Progress(console=console, transient=True) as progress:
        bar = progress.add_task("replaying", total=total)
        result = sweep(args.trace, placements, tpc, periods, nodes, args.cores, seed=args.seed,
                       birdshot_seeds=args.birdshot_seeds, jobs=args.jobs, network=_network(args), model=model,
                       proxy=args.proxy, on_done=lambda k: progress.update(bar, completed=k + 1))
    table = Table(title=f"predicted, ranked by makespan ({len(result.rows)} cases)")
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


def _cmd_validate(args) -> int:
    import numpy as np
    from rich.console import Console
    from rich.table import Table

    from .provenance import busy_warning, describe
    from .replay.validate import COLUMNS, table, validate

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
                      f"{median_handoff * 1e6:.1f} us, median of the cases on several threads)")
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


def _cmd_sampi(args) -> int:
    from .replay.sweep import parse_list
    from .sampi import Workflow, parse_pair, run_workflow

    wf = Workflow(args.scenario, fine=parse_pair(args.fine), coarse=parse_pair(args.coarse), sets=args.set or [],
                  steps=args.steps, periods=parse_list(args.periods), tiles_per_core=parse_list(args.tiles_per_core),
                  nodes=args.nodes, cores=args.cores, fig6=(args.fig6_tiles_per_core, args.fig6_period),
                  validate=args.validate, repeats=args.repeats, validate_steps=args.validate_steps, jobs=args.jobs)
    out = Path(args.out)
    run_workflow(wf, out, skip_zero=args.skip_zero, say=lambda line: print(line, file=sys.stderr, flush=True))
    print((out / "results.md").read_text())
    print(f"tables (results.md, results.json) and figures: {out.resolve()}")
    return 0


def _cmd_study(args) -> int:
    import time

    from rich.console import Console
    from rich.table import Table

    from .study import make_study, run_study, table

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


def _cmd_export(args) -> int:
    from .apps.seismic.streams import export

    paths = export(args.run, args.format, args.out, origin_time=args.origin_time, network=args.network)
    print(f"wrote {len(paths)} {args.format} file(s) to {args.out}")
    return 0


def _cmd_export_tit(args) -> int:
    from .replay.run import coarsening_for
    from .replay.simgrid import export_tit
    from .trace import Trace, aggregate

    trace = Trace.read(args.trace)
    if args.ranks:
        coarse = coarsening_for(trace.tiling, args.ranks)
        if coarse is not trace.tiling:
            trace = aggregate(trace, coarse)
    out = export_tit(trace, args.out, _network(args), sampi=args.sampi)
    n = trace.tiling.ntiles
    print(f"wrote {n} rank files, index.txt, hostfile and platform.xml to {out}")
    print(f"run: cd {out} && smpirun -np {n} -platform platform.xml -hostfile hostfile -replay index.txt "
          "--cfg=network/model:CM02 --cfg=smpi/bw-factor:1 --cfg=smpi/lat-factor:1 <path to smpireplaymain>")
    return 0


def _cmd_convert_checkpoint(args) -> int:
    from .runtime.checkpoint import convert_pickle_checkpoint

    print(f"wrote {convert_pickle_checkpoint(Path(args.file), trust=args.trust)}")
    return 0


def _cmd_demo(args) -> int:
    from . import demo

    run = demo.placements if args.placements else demo.dam_break
    return run(steps=args.steps, out=Path(args.out))


def lb_flag(p) -> None:
    p.add_argument("--lb", action="append", metavar="POLICY.KEY=VALUE",
                   help="a balancing policy's parameter, e.g. refine.tolerance=1.02 (repeatable; wins over the "
                        "scenario's [balance] table)")


class _HelpFormatter(argparse.HelpFormatter):
    """Help that shows each flag's default where it has one worth showing."""

    def _get_help_string(self, action):
        text = action.help or ""
        shown = action.default not in (None, False, argparse.SUPPRESS) and not isinstance(action.default, list)
        if shown and "default" not in text and action.option_strings:
            text += " (default: %(default)s)"
        return text


def _logging_flags(p: argparse.ArgumentParser, defaults: bool) -> None:
    """-v/-q/--log-level/--debug, before or after the command (``shoal -v run ...`` or ``shoal run -v ...``)."""
    d = {} if defaults else {"default": argparse.SUPPRESS}
    g = p.add_argument_group("logging")
    g.add_argument("-v", "--verbose", action="store_true", help="say more (debug messages)", **d)
    g.add_argument("-q", "--quiet", action="store_true", help="say only warnings and errors, no progress", **d)
    g.add_argument("--log-level", choices=LEVELS, help="the level of messages shown (default info)", **d)
    g.add_argument("--debug", action="store_true", help="show the traceback of an error", **d)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="shoal", description=__doc__.splitlines()[0] if __doc__ else None,
                                 formatter_class=_HelpFormatter)
    ap.add_argument("--version", action="version", version=f"shoal {__version__}")
    _logging_flags(ap, defaults=True)
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")
    parent = argparse.ArgumentParser(add_help=False)
    _logging_flags(parent, defaults=False)
    add_parser = sub.add_parser

    def add(name, **kw):
        return add_parser(name, parents=[parent], formatter_class=_HelpFormatter, **kw)

    sub.add_parser = add  # every command takes the logging flags and shows defaults

    p = sub.add_parser("scenarios", help="list built-in scenarios")
    p.set_defaults(func=_cmd_scenarios)

    p = sub.add_parser("run", help="run a scenario and write a run folder")
    p.add_argument("scenario", nargs="?", help="built-in scenario name or path to a TOML file")
    p.add_argument("--steps", type=int, help="time steps (default: the scenario's)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--tiles", type=int, help="total number of tiles")
    g.add_argument("--tiles-per-core", type=int, help="tiles per core (total = this x cores)")
    p.add_argument("--nodes", type=int, help="nodes (inside this process; default: the scenario's)")
    p.add_argument("--workers", type=int, help="worker threads per node (default: the scenario's)")
    p.add_argument("--placement", help="placement policy name (default: the scenario's)")
    p.add_argument("--period", type=_period,
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
    p.set_defaults(func=_cmd_run)

    p = sub.add_parser("compare", help="compare two runs' final states (exit 0 same, 1 different, 2 error)")
    p.add_argument("run_a", help="a run folder")
    p.add_argument("run_b", help="another run folder")
    p.set_defaults(func=_cmd_compare)

    p = sub.add_parser("report", help="draw a run's load heatmap, timeline and fields as PNG")
    p.add_argument("run", help="a run folder")
    p.add_argument("--steps", metavar="A:B", help="timeline of steps A to B-1 (A:, :B or one step also work)")
    p.add_argument("--cores", metavar="C:D", help="timeline of cores C to D-1, numbered node by node")
    p.add_argument("--absolute", action="store_true",
                   help="load heatmap in CPU ms per core instead of relative to each step's mean")
    p.add_argument("--perfetto", action="store_true",
                   help="also write timeline.perfetto.json (open it at ui.perfetto.dev to zoom)")
    p.set_defaults(func=_cmd_report)

    def network_flags(p, overhead: bool = True):
        p.add_argument("--latency", type=float, default=5e-6, help="network latency (s)")
        p.add_argument("--bandwidth", type=float, default=1.25e9, help="network bandwidth (bytes/s)")
        if overhead:  # SimGrid's traces carry no per-message overhead
            p.add_argument("--overhead", type=float, default=1e-6, help="per-message overhead (s)")

    def model_flags(p):
        lb_flag(p)
        p.add_argument("--gil", choices=("none", "process", "shared"), default="none",
                       help="model Python's interpreter lock: none (compiled executor), one per node "
                            "(process), or one for all nodes (shared, the local executor)")
        p.add_argument("--message-cpu", type=float, default=None,
                       help="CPU seconds per payload sent or received between nodes, charged to the tasks "
                            "(default: as the trace's run measured; 0 for runs in one process)")

    def machine_flags(p):
        p.add_argument("--calibration", metavar="FILE",
                       help="model the executor's overheads as measured by 'shoal calibrate' (or validate)")

    p = sub.add_parser("replay", help="replay a trace on a modeled cluster under a placement policy")
    p.add_argument("trace", help="a trace.h5 or a run folder")
    p.add_argument("--nodes", type=int, help="nodes (default: the recorded run's)")
    p.add_argument("--cores", type=int,
                   help="cores per node (default: the recorded run's, with every change of worker threads it made)")
    p.add_argument("--placement", default="sfc", help="any policy of the registry")
    p.add_argument("--period", type=_period, default=0,
                   help="steps between rebalancing (dynamic policies), or 'adaptive': when the imbalance has cost "
                        "more than the last balancing step")
    p.add_argument("--tiles-per-core", type=int, help="aggregate the trace to about this many tiles per core")
    p.add_argument("--initial", default="sfc", help="static placement a dynamic policy starts from")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--speed", type=float, default=1.0,
                   help="modeled cores are this many times as fast (divides the machine model's rates, or the "
                        "measured costs with --costs measured)")
    p.add_argument("--costs", choices=("model", "measured"), default="model",
                   help="price tasks by their work at the machine model's rates (default; measured costs for a "
                        "trace without a model) or replay the trace's measured seconds")
    p.add_argument("--machine", metavar="FILE",
                   help="replay on this machine model (shoal calibrate --out) instead of the trace's own")
    p.add_argument("--mpi-reference", action="store_true", help="one tile per core, a barrier per phase")
    p.add_argument("--proxy", help="trace of a low-resolution run of the same scenario (for speculative)")
    p.add_argument("--out", help="predicted run folder (default runs/replay-<scenario>-<placement>)")
    p.add_argument("--invasive", metavar="POLICY",
                   help="move cores between the ranks of each host as a resource manager would: 'workload' "
                        "(cores by each rank's work) or 'scalability' (steepest ascent on measured graphs); "
                        "--cores is then each host's pool")
    p.add_argument("--hosts", type=int, default=1, help="with --invasive: hosts, one manager and pool each")
    p.add_argument("--ranks-per-host", type=int, help="with --invasive: ranks on each host (default nodes / hosts)")
    p.add_argument("--release-delay", type=float, default=0.0, metavar="S",
                   help="with --invasive: seconds from a release request to the freed core's grant")
    p.add_argument("--request-cost", type=float, default=0.0, metavar="S",
                   help="with --invasive: seconds each step's request to the manager adds")
    p.add_argument("--window", type=int, default=1, help="with --invasive: steps whose mean work is a rank's workload")
    network_flags(p)
    model_flags(p)
    machine_flags(p)
    p.set_defaults(func=_cmd_replay, gil=None)  # the lock the machine model recorded

    p = sub.add_parser("sweep", help="replay a trace over placements, tiles per core, periods and cluster sizes")
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
    network_flags(p)
    model_flags(p)
    machine_flags(p)
    p.set_defaults(func=_cmd_sweep)

    p = sub.add_parser("export", help="export a seismic run's seismograms as SAC or miniSEED (needs shoal[obspy])")
    p.add_argument("run", help="a seismic run folder")
    p.add_argument("--format", choices=("sac", "mseed"), required=True, help="SAC (one file per trace) or miniSEED")
    p.add_argument("--out", required=True, help="folder for the files")
    p.add_argument("--origin-time", help="absolute time of the run's t = 0 (default 1970-01-01T00:00:00)")
    p.add_argument("--network", default="XX", help="network code")
    p.set_defaults(func=_cmd_export)

    p = sub.add_parser("export-tit", help="export a trace as SimGrid time-independent traces (smpirun -replay)")
    p.add_argument("trace", help="a trace.h5 or a run folder")
    p.add_argument("--out", required=True, help="folder for the per-rank trace files")
    p.add_argument("--ranks", type=int, help="aggregate to about this many ranks (one tile per rank)")
    p.add_argument("--sampi", action="store_true", help="add SAMPI's iteration_in/iteration_out/migrate")
    network_flags(p, overhead=False)
    p.set_defaults(func=_cmd_export_tit, overhead=0.0)

    p = sub.add_parser("calibrate", help="a machine model for replays: a trace's, refined by timing this machine")
    p.add_argument("--out", default="machine.json", help="file for the machine model (JSON)")
    p.add_argument("--from-trace", metavar="TRACE", help="start from the machine model of this trace's run")
    p.add_argument("--no-bench", action="store_true",
                   help="only extract the trace's model: no micro-benchmarks (for a trace of another machine)")
    p.add_argument("--task-us", type=float, default=50.0, help="length of the timed tasks (us): about your runs'")
    p.add_argument("--tasks", type=int, default=3000)
    p.add_argument("--nodes", type=int, default=1,
                   help="nodes of the runs to model (in one process), for the restart and the lock hand-off")
    p.add_argument("--workers", type=int, default=1, help="workers per node of those runs")
    p.set_defaults(func=_cmd_calibrate)

    p = sub.add_parser("validate", help="record runs here, replay them on a model of this machine, compare")
    p.add_argument("--out", default="runs/validate", help="folder for the runs, table and figure")
    p.add_argument("--quick", action="store_true", help="a quarter of the steps")
    p.add_argument("--repeats", type=int, default=5, help="runs per case; medians (and spreads) are compared")
    p.set_defaults(func=_cmd_validate)

    p = sub.add_parser("sampi", help="the SAMPI workflow: record fine, aggregate, sweep GreedyLB/RefineLB, validate")
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
    p.set_defaults(func=_cmd_sampi)

    p = sub.add_parser("study", help="a parameter study: concurrent simulations under invasive, sequential and "
                                     "all-at-once (makespans, cores over time)")
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
    p.set_defaults(func=_cmd_study)

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

    p = sub.add_parser("convert-checkpoint", help="convert an old pickle checkpoint (checkpoint-NNNNNN.pkl) to HDF5")
    p.add_argument("file", metavar="FILE", help="the .pkl checkpoint")
    p.add_argument("--trust", action="store_true",
                   help="I trust who made this file: unpickle it (loading a pickle runs any code in it)")
    p.set_defaults(func=_cmd_convert_checkpoint)

    p = sub.add_parser("demo", help="the main job: Monaghan's breaking dam on 4 in-process nodes")
    p.add_argument("--steps", type=int, default=None, help="time steps of the main run (default: the scenario's)")
    p.add_argument("--placements", action="store_true",
                   help="instead: the synthetic hot spot under every static placement, side by side")
    p.add_argument("--out", default="runs/demo", help="folder for the demo's run and pictures")
    p.set_defaults(func=_cmd_demo)

    from .view.command import add_parser as add_view_parser

    add_view_parser(sub)  # shoal view: its handler is shoal.view.command.main
    return ap


# Commands that run Numba kernels outside a run (a run announces them once its input is checked).
COMPILES = {"replay", "sweep", "validate", "calibrate", "sampi"}


def _period(text: str) -> int | str:
    """``--period``'s value: steps or ``adaptive`` (anything else is a usage error)."""
    from .placement.trigger import parse_period

    try:
        return parse_period(text)
    except ShoalError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def main(argv: list[str] | None = None) -> int:
    """The ``shoal`` command: one line and exit 2 for bad input, 130 when interrupted, 1 for a
    bug (with ``--debug``: its traceback)."""
    args = build_parser().parse_args(argv)
    level = args.log_level or ("debug" if args.verbose else "warning" if args.quiet else "info")
    configure(level)
    try:
        if args.command in COMPILES:
            announce_compilation()
        return args.func(args)
    except ShoalError as exc:
        return _fail(args, f"error: {_first_line(exc)}", 2)
    except KeyboardInterrupt:
        return _fail(args, "interrupted", 130)
    except MemoryError:
        return _fail(args, "error: out of memory (make the run smaller)", 2)
    except OSError as exc:
        where = f" {exc.filename}" if exc.filename else ""
        return _fail(args, f"error: cannot use{where}: {exc.strerror or _first_line(exc)}", 2)
    except Exception as exc:  # a bug: one line unless asked for more
        return _fail(args, f"error: unexpected {type(exc).__name__}: {_first_line(exc)} (run with --debug for the "
                           "traceback)", 1)


def _fail(args, line: str, code: int) -> int:
    if args.debug:
        import traceback

        traceback.print_exc()
    print(line, file=sys.stderr)
    return code


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


if __name__ == "__main__":
    raise SystemExit(main())
