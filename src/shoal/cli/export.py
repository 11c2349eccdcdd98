"""``shoal export``: a seismic run's seismograms as SAC or miniSEED files, through ObsPy."""

from __future__ import annotations

import argparse

NAME = "export"
HELP = "export a seismic run's seismograms as SAC or miniSEED (needs shoal[obspy])"


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``export`` on the ``shoal`` command's ``subparsers``."""
    p = subparsers.add_parser(NAME, help=HELP)
    p.add_argument("run", help="a seismic run folder")
    p.add_argument("--format", choices=("sac", "mseed"), required=True, help="SAC (one file per trace) or miniSEED")
    p.add_argument("--out", required=True, help="folder for the files")
    p.add_argument("--origin-time", help="absolute time of the run's t = 0 (default 1970-01-01T00:00:00)")
    p.add_argument("--network", default="XX", help="network code")
    p.set_defaults(func=main)
    return p


def main(args: argparse.Namespace) -> int:
    from ..apps.seismic.streams import export

    paths = export(args.run, args.format, args.out, origin_time=args.origin_time, network=args.network)
    print(f"wrote {len(paths)} {args.format} file(s) to {args.out}")
    return 0
