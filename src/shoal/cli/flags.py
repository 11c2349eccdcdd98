"""Flags several commands share: the network, the machine model, balancing parameters, periods."""

from __future__ import annotations

import argparse

from ..errors import ShoalError


def period(text: str) -> int | str:
    """``--period``'s value: steps or ``adaptive`` (anything else is a usage error)."""
    from ..placement.trigger import parse_period

    try:
        return parse_period(text)
    except ShoalError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def lb_flag(p: argparse.ArgumentParser) -> None:
    """``--lb POLICY.KEY=VALUE`` (repeatable): a balancing policy's parameter."""
    p.add_argument("--lb", action="append", metavar="POLICY.KEY=VALUE",
                   help="a balancing policy's parameter, e.g. refine.tolerance=1.02 (repeatable; wins over the "
                        "scenario's [balance] table)")


def network_flags(p: argparse.ArgumentParser, overhead: bool = True) -> None:
    """The modeled network's latency, bandwidth and (unless ``overhead`` is False) per-message overhead."""
    p.add_argument("--latency", type=float, default=5e-6, help="network latency (s)")
    p.add_argument("--bandwidth", type=float, default=1.25e9, help="network bandwidth (bytes/s)")
    if overhead:  # SimGrid's traces carry no per-message overhead
        p.add_argument("--overhead", type=float, default=1e-6, help="per-message overhead (s)")


def network(args: argparse.Namespace):
    """The :class:`~shoal.cluster.Network` of :func:`network_flags`."""
    from ..cluster import Network

    return Network(latency_s=args.latency, bandwidth_Bps=args.bandwidth, overhead_s=args.overhead)


def model_flags(p: argparse.ArgumentParser) -> None:
    """How a replay models the executor: balancing parameters, the interpreter lock, message CPU."""
    lb_flag(p)
    p.add_argument("--gil", choices=("none", "process", "shared"), default=None,
                   help="model Python's interpreter lock: none (compiled executor), one per node (process), or one "
                        "for all nodes (shared, the local executor) (default: as the trace's run had it, from its "
                        "machine model: shared for its own nodes in one process, process for other cluster sizes; "
                        "none for a trace without a model)")
    p.add_argument("--message-cpu", type=float, default=None,
                   help="CPU seconds per payload sent or received between nodes, charged to the tasks "
                        "(default: as the trace's run measured; 0 for runs in one process)")


def replay_flags(p: argparse.ArgumentParser) -> None:
    """What every replaying command takes: the network, the model of the executor, a calibration."""
    network_flags(p)
    model_flags(p)
    machine_flags(p)
    p.add_argument("--iterations", type=int, metavar="N",
                   help="every loop of every step runs N iterations (missing ones repeat the step's last recorded "
                        "iteration); default: the recorded counts")
    p.add_argument("--job-policy", default="locality",
                   help="where the recorded jobs run on the modeled nodes: even, profiled or locality (default)")
    p.add_argument("--job-split", type=int, default=0, metavar="ITEMS",
                   help="cut a job of more items into ranges its node's cores share (default 0: never)")


def machine_flags(p: argparse.ArgumentParser) -> None:
    """``--calibration FILE``: the executor's overheads as measured by ``shoal calibrate``."""
    p.add_argument("--calibration", metavar="FILE",
                   help="model the executor's overheads as measured by 'shoal calibrate' (or validate)")


def calibration(args: argparse.Namespace) -> dict:
    """The executor's calibrated overheads (``--calibration FILE``), or none."""
    from ..replay.calibrate import read_calibration

    return read_calibration(args.calibration) if args.calibration else {}


def balance(args: argparse.Namespace, trace) -> dict:
    """Policy parameters: the recorded scenario's ``[balance]`` table, then ``--lb``."""
    from ..config import balance_table

    return balance_table(trace.config.get("balance", {}), args.lb or [])
