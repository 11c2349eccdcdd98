"""``shoal replay``: replay a trace on a modeled cluster under a placement policy."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..log import logger
from ..replay.run import lock_line
from .flags import balance, calibration, network, period, replay_flags

NAME = "replay"
HELP = "replay a trace on a modeled cluster under a placement policy"


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``replay`` on the ``shoal`` command's ``subparsers``."""
    p = subparsers.add_parser(NAME, help=HELP)
    p.add_argument("trace", help="a trace.h5 or a run folder")
    p.add_argument("--nodes", type=int, help="nodes (default: the recorded run's)")
    p.add_argument("--cores", type=int,
                   help="cores per node (default: the recorded run's, with every change of worker threads it made)")
    p.add_argument("--placement", default="sfc", help="any policy of the registry")
    p.add_argument("--period", type=period, default=0,
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
    p.add_argument("--out", help="predicted run folder (default: a new runs/replay-<scenario>-<placement>-<time>)")
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
    replay_flags(p)
    p.set_defaults(func=main)
    return p


def main(args: argparse.Namespace) -> int:
    from ..replay import ReplayConfig, replay
    from ..replay.machine import MachineModel
    from ..replay.run import write_replay
    from ..rundir import check_folder, new_folder
    from ..trace import Trace

    invasive = _invasive(args)  # refused before the trace is read
    trace = Trace.read(args.trace)
    machine = MachineModel.from_json(args.machine) if args.machine else None
    if args.costs == "model" and machine is None and trace.machine is None:
        logger.info("%s has no machine model (an older trace): replaying its measured costs", args.trace)
    cfg = ReplayConfig(nodes=args.nodes, cores=None if invasive else args.cores, placement=args.placement,
                       period=args.period, invasive=invasive,
                       tiles_per_core=args.tiles_per_core, initial=args.initial, seed=args.seed, speed=args.speed,
                       network=network(args), mpi_reference=args.mpi_reference, balance=balance(args, trace),
                       proxy=Trace.read(args.proxy) if args.proxy else None, gil=args.gil, costs=args.costs,
                       machine=machine, message_cpu_s=args.message_cpu, iterations=args.iterations,
                       job_policy=args.job_policy, job_split=args.job_split,
                       **calibration(args))
    out = Path(args.out) if args.out else new_folder("runs", f"replay-{trace.scenario}-{cfg.placement}")
    check_folder(out)  # refused before the replay runs, not after
    result = replay(trace, cfg)
    s = write_replay(result, out)
    print(f"predicted run folder: {out}")
    print(f"modeled {lock_line([s['gil']])}")
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

def _invasive(args):
    """The modeled resource manager of ``--invasive`` (checked), or None; ``--cores`` is each host's pool."""
    if args.invasive is None:
        return None
    from ..replay.invasive import InvasiveConfig

    invasive = InvasiveConfig(policy=args.invasive, hosts=args.hosts, ranks_per_host=args.ranks_per_host,
                              cores=args.cores, release_delay_s=args.release_delay, request_s=args.request_cost,
                              window=args.window)
    invasive.check()
    return invasive
