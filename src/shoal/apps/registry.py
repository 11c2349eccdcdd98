"""The app registry: what an app declares to be found by name.

Each app module registers an ``AppSpec``: the dataclass of its parameters (filled from a
scenario's ``[app]`` table), a constructor taking those parameters and the run's length, and
a tiny parameter set that runs in a fraction of a second, with which the conformance tests
exercise every registered app. Apps import this module only; :mod:`shoal.apps` finds them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class AppSpec:
    """An app in the registry.

    Attributes
    ----------
    name : str
        Registry key, named by a scenario's ``[app]`` table.
    params : type
        Dataclass of the app's parameters (with a ``validate()`` method).
    build : callable
        ``build(params, steps) -> App``.
    summary : str
        One line for listings.
    tiny : dict
        Parameter overrides for a run of a few steps that takes well under a second: what the
        conformance tests run.
    memory : callable, optional
        ``memory(params) -> int``: the bytes the app's state will take, estimated from the
        parameters alone, before anything is allocated. A run refuses to start when this exceeds
        what the machine has (``--allow-large`` overrides).
    layout : dict, optional
        How the live view draws some of the app's frame grids, by array name: ``"down"`` when
        the grid's second index grows downwards (depth), ``"signed"`` for a field drawn on a
        diverging scale symmetric about zero (a wavefield, a surface elevation), ``"traces"`` for
        a small array of time series (stations x times [x components]) drawn as wiggles against
        the frame's 1D array of the same number of times.
    """

    name: str
    params: type
    build: Callable[[Any, int], Any]
    summary: str
    tiny: dict = field(default_factory=dict)
    memory: Callable[[Any], int] | None = None
    layout: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def tiny_app(self, steps: int = 4):
        """The app with its tiny parameter set."""
        return self.build(self.params(**self.tiny), steps)


APPS: dict[str, AppSpec] = {}


def register_app(spec: AppSpec) -> AppSpec:
    """Add an app to the registry under ``spec.name`` and return ``spec`` unchanged.

    Registering the same spec again does nothing, so a module may be imported twice.

    Raises
    ------
    ValueError
        If another spec is already registered under the same name (a programming error, not
        a user's input).
    """
    if spec.name in APPS and APPS[spec.name] is not spec:
        raise ValueError(f"app {spec.name!r} registered twice")
    APPS[spec.name] = spec
    return spec
