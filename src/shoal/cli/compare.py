"""``shoal compare``: compare two runs' final states (exit 0 same, 1 different, 2 error)."""

from __future__ import annotations

import argparse
import sys

from ..errors import ShoalError

NAME = "compare"
HELP = "compare two runs' final states (exit 0 same, 1 different, 2 error)"


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``compare`` on the ``shoal`` command's ``subparsers``."""
    p = subparsers.add_parser(NAME, help=HELP)
    p.add_argument("run_a", help="a run folder")
    p.add_argument("run_b", help="another run folder")
    p.set_defaults(func=main)
    return p


def main(args: argparse.Namespace) -> int:
    from ..compare import compare_runs

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
