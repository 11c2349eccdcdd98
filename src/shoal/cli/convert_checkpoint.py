"""``shoal convert-checkpoint``: convert an old pickle checkpoint (checkpoint-NNNNNN.pkl) to HDF5."""

from __future__ import annotations

import argparse
from pathlib import Path

NAME = "convert-checkpoint"
HELP = "convert an old pickle checkpoint (checkpoint-NNNNNN.pkl) to HDF5"


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``convert-checkpoint`` on the ``shoal`` command's ``subparsers``."""
    p = subparsers.add_parser(NAME, help=HELP)
    p.add_argument("file", metavar="FILE", help="the .pkl checkpoint")
    p.add_argument("--trust", action="store_true",
                   help="I trust who made this file: unpickle it (loading a pickle runs any code in it)")
    p.set_defaults(func=main)
    return p


def main(args: argparse.Namespace) -> int:
    from ..runtime.checkpoint import convert_pickle_checkpoint

    print(f"wrote {convert_pickle_checkpoint(Path(args.file), trust=args.trust)}")
    return 0
