"""Checks of an app's ``[app]`` keys, each failing with one line that names the key."""

from __future__ import annotations

import math
import numbers

from ..errors import ShoalError


def choice(name: str, value, known) -> None:
    """``app.<name>`` must be one of ``known``."""
    if value not in known:
        raise ShoalError(f"app.{name} must be one of {', '.join(map(str, known))}; got {value!r}")


def integer(name: str, value, low: int | None = None) -> None:
    """``app.<name>`` must be an integer (not a bool), at least ``low`` when given."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ShoalError(f"app.{name} must be an integer, got {value!r}")
    if low is not None and value < low:
        raise ShoalError(f"app.{name} must be >= {low}, got {value}")


def number(name: str, value) -> None:
    """``app.<name>`` must be a finite real number (not a bool)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise ShoalError(f"app.{name} must be a finite number, got {value!r}")


def vector(name: str, value, width: int) -> None:
    """``app.<name>`` must be a list of ``width`` finite numbers."""
    if not (isinstance(value, (list, tuple)) and len(value) == width):
        raise ShoalError(f"app.{name} must be {width} numbers, got {value!r}")
    for v in value:
        number(name, v)
