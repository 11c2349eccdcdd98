"""``shoal export-tit``: export a trace as SimGrid time-independent traces (smpirun -replay)."""

from __future__ import annotations

import argparse

from .flags import network, network_flags

NAME = "export-tit"
HELP = "export a trace as SimGrid time-independent traces (smpirun -replay)"


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``export-tit`` on the ``shoal`` command's ``subparsers``."""
    p = subparsers.add_parser(NAME, help=HELP)
    p.add_argument("trace", help="a trace.h5 or a run folder")
    p.add_argument("--out", required=True, help="folder for the per-rank trace files")
    p.add_argument("--ranks", type=int, help="aggregate to about this many ranks (one tile per rank)")
    p.add_argument("--sampi", action="store_true", help="add SAMPI's iteration_in/iteration_out/migrate")
    network_flags(p, overhead=False)
    p.set_defaults(func=main, overhead=0.0)
    return p


def main(args: argparse.Namespace) -> int:
    from ..replay.run import coarsening_for
    from ..replay.simgrid import export_tit
    from ..trace import Trace, aggregate

    trace = Trace.read(args.trace)
    if args.ranks:
        coarse = coarsening_for(trace.tiling, args.ranks)
        if coarse is not trace.tiling:
            trace = aggregate(trace, coarse)
    out = export_tit(trace, args.out, network(args), sampi=args.sampi)
    n = trace.tiling.ntiles
    print(f"wrote {n} rank files, index.txt, hostfile and platform.xml to {out}")
    print(f"run: cd {out} && smpirun -np {n} -platform platform.xml -hostfile hostfile -replay index.txt "
          "--cfg=network/model:CM02 --cfg=smpi/bw-factor:1 --cfg=smpi/lat-factor:1 <path to smpireplaymain>")
    return 0
