"""``shoal calibrate``: a machine model for replays: a trace's, refined by timing this machine."""

from __future__ import annotations

import argparse
import sys

from ..errors import ShoalError

NAME = "calibrate"
HELP = "a machine model for replays: a trace's, refined by timing this machine"


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``calibrate`` on the ``shoal`` command's ``subparsers``."""
    p = subparsers.add_parser(NAME, help=HELP)
    p.add_argument("--out", default="machine.json", help="file for the machine model (JSON)")
    p.add_argument("--from-trace", metavar="TRACE", help="start from the machine model of this trace's run")
    p.add_argument("--no-bench", action="store_true",
                   help="only extract the trace's model: no micro-benchmarks (for a trace of another machine)")
    p.add_argument("--task-us", type=float, default=50.0, help="length of the timed tasks (us): about your runs'")
    p.add_argument("--tasks", type=int, default=3000)
    p.add_argument("--nodes", type=int, default=1,
                   help="nodes of the runs to model (in one process), for the restart and the lock hand-off")
    p.add_argument("--workers", type=int, default=1, help="workers per node of those runs")
    p.add_argument("--executor", choices=("python", "native"), default="python", help="the executor of those runs")
    p.set_defaults(func=main)
    return p


def main(args: argparse.Namespace) -> int:
    from ..replay.calibrate import calibrate, refine
    from ..replay.machine import MachineModel, fit_trace
    from ..trace import Trace

    if args.task_us <= 0 or args.tasks < 100 or min(args.nodes, args.workers) < 1:
        raise ShoalError("--task-us must be > 0, --tasks >= 100, --nodes and --workers >= 1")
    model = MachineModel()
    if args.from_trace:
        trace = Trace.read(args.from_trace)
        model = MachineModel.from_dict(trace.machine, args.from_trace) if trace.machine else fit_trace(trace)
        print(model.fit_line())
    if not args.no_bench:
        print(f"timing the executor on this machine ({args.tasks} tasks of {args.task_us:g} us)...", file=sys.stderr)
        cal = calibrate(tasks=args.tasks, task_s=args.task_us * 1e-6, nodes=args.nodes, workers=args.workers,
                        executor=args.executor)
        model = refine(model, cal, args.nodes * args.workers)
    out = model.to_json(args.out)
    print(f"executor: dispatch {model.dispatch_s * 1e6:.1f} us per task, wake-up {model.wake_s * 1e6:.0f} us, "
          f"lock wait {model.handoff_s * 1e6:.1f} us per lock-free call ({model.lock_threads} threads), restart "
          f"{model.restart_s * 1e3:.2f} ms; " + ", ".join(f"{k} from {v}" for k, v in model.measured_by.items()))
    print(f"wrote {out} (give it to shoal replay as --machine, or to replay and sweep as --calibration)")
    return 0
