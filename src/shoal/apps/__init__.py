"""Apps (physics models), in a registry keyed by name (:mod:`shoal.apps.registry`).

The built-in apps, and those other packages declare as entry points, are imported on the first
lookup: each registers itself, importing only the registry, never another app. What several
apps share lives beside the registry: :mod:`.checks` (the ``[app]`` keys' checks) and
:mod:`.particles` (particles that live in tiles: SPH's and FLIP's).
"""

from __future__ import annotations

from ..errors import ShoalError
from .registry import APPS, AppSpec, register_app

__all__ = ["APPS", "AppSpec", "all_apps", "get_app", "register_app"]


def all_apps() -> dict[str, AppSpec]:
    """Every registered app, built-in ones included."""
    _load_builtin()
    return dict(APPS)


def get_app(name: str) -> AppSpec:
    """The registered app called ``name`` (built-in apps are loaded on first use).

    Raises
    ------
    ShoalError
        If no app has that name; the message lists the known ones.
    """
    _load_builtin()
    try:
        return APPS[name]
    except KeyError:
        raise ShoalError(f"unknown app {name!r}; known: {', '.join(sorted(APPS))}") from None


_PLUGINS_LOADED = False


def _load_builtin() -> None:
    """Import the built-in apps and those other packages declare as entry points in the
    ``shoal.apps`` group (``[project.entry-points."shoal.apps"] heat = "mypkg.heat"``): importing
    an app's module registers it."""
    global _PLUGINS_LOADED
    from . import cloth, flip, seismic, sph, swe, synthetic, wavefront  # noqa: F401  (they register themselves)

    if _PLUGINS_LOADED:
        return
    _PLUGINS_LOADED = True
    from ..plugins import load_entry_points

    load_entry_points("shoal.apps", "app")
