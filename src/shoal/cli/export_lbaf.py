"""``shoal export-lbaf``: a trace as vt's LBDatafile JSON, for LBAF and vt-tv (one file per node)."""

from __future__ import annotations

import argparse

NAME = "export-lbaf"
HELP = "export a trace as vt's LBDatafile JSON (LBAF, vt-tv): data.<node>.json"


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``export-lbaf`` on the ``shoal`` command's ``subparsers``."""
    p = subparsers.add_parser(NAME, help=HELP)
    p.add_argument("trace", help="a trace.h5 or a run folder")
    p.add_argument("--out", required=True, help="folder for the per-node files (LBAF's data_stem: OUT/data)")
    p.set_defaults(func=main)
    return p


def main(args: argparse.Namespace) -> int:
    from ..lbaf import export_trace

    for path in export_trace(args.trace, args.out):
        print(path)
    return 0
