"""``shoal scenarios``: list built-in scenarios."""

from __future__ import annotations

import argparse

NAME = "scenarios"
HELP = "list built-in scenarios"


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``scenarios`` on the ``shoal`` command's ``subparsers``."""
    p = subparsers.add_parser(NAME, help=HELP)
    p.set_defaults(func=main)
    return p


def main(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from ..config import builtin_scenarios

    table = Table(title="built-in scenarios")
    table.add_column("name")
    table.add_column("description")
    for name, desc in builtin_scenarios().items():
        table.add_row(name, desc)
    Console().print(table)
    return 0
