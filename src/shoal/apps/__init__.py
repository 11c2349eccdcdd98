"""Apps (physics models), in a registry keyed by name.

Each app module registers an ``AppSpec``: the dataclass of its parameters (filled from a
scenario's ``[app]`` table) and a constructor taking those parameters and the run's length.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import ShoalError


@dataclass(frozen=True)
class AppSpec:
    name: str
    params: type
    build: Callable[[Any, int], Any]
    summary: str


APPS: dict[str, AppSpec] = {}


def register_app(spec: AppSpec) -> AppSpec:
    APPS[spec.name] = spec
    return spec


def get_app(name: str) -> AppSpec:
    _load_builtin()
    try:
        return APPS[name]
    except KeyError:
        raise ShoalError(f"unknown app {name!r}; known: {', '.join(sorted(APPS))}") from None


def _load_builtin() -> None:
    from . import sph, synthetic  # noqa: F401  (they register themselves)
