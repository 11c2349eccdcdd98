"""Users' own apps and placement policies, without editing the package.

An app or a policy registers itself when its module is imported. Two ways bring such a module
in: an installed package declares it as an entry point (group ``shoal.apps`` or
``shoal.placements``), loaded on the first lookup of the registry; or ``shoal COMMAND
--import MODULE`` imports it (a module on ``PYTHONPATH`` or in the current folder) before the
command runs.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterable

from .errors import ShoalError


def load_entry_points(group: str, what: str) -> None:
    """Import every module other packages declare in the entry-point ``group`` (each registers
    itself); one that fails to import is a ShoalError naming it and ``what`` it would add."""
    from importlib.metadata import entry_points

    for ep in entry_points(group=group):
        try:
            ep.load()
        except Exception as exc:  # a broken plugin: say which
            raise ShoalError(f"{what} plugin {ep.name!r} ({ep.value}) failed to load: {exc}") from None


def import_modules(names: Iterable[str]) -> None:
    """Import each module of ``names`` (``--import``), the current folder first on the path as
    ``python -m`` has it; one that cannot be imported is a ShoalError naming it and why."""
    if "" not in sys.path:
        sys.path.insert(0, "")
    for name in names:
        try:
            importlib.import_module(name)
        except ShoalError:
            raise
        except Exception as exc:
            raise ShoalError(f"--import {name}: {type(exc).__name__}: {exc}") from None
