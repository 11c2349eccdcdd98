"""shoal: tiled physical simulations, load balancing, and replay on modeled clusters.

>>> import shoal
>>> run = shoal.run("synthetic-hotspot", placement="birdshot", steps=20)   # doctest: +SKIP
>>> run.report()                                                            # doctest: +SKIP

Or own the loop:

>>> sim = shoal.simulation("sph-dam-break", tiles=16, set=["app.dx=0.04"])  # doctest: +SKIP
>>> while sim.step_count < 500:                                             # doctest: +SKIP
...     sim.step()
"""

import os as _os

from .compilation import cache_folder_override as _cache_folder_override

_cache = _cache_folder_override(_os.path.dirname(__file__),
                                _os.environ.get("XDG_CACHE_HOME") or _os.path.expanduser("~/.cache"))
if _cache is not None:
    _os.environ["NUMBA_CACHE_DIR"] = _cache

from .errors import ShoalError  # noqa: E402
from .version import __version__  # noqa: E402


def run(scenario: str, **options):
    """Run a scenario and return its :class:`~shoal.session.RunRecord` (see ``shoal run``)."""
    from .session import run_scenario

    return run_scenario(scenario, **options)


def simulation(scenario: str, **options):
    """A :class:`~shoal.runtime.simulation.Simulation` of a scenario, ready to step (the same
    options as :func:`run`). Its run folder holds the configuration, and the frames and
    checkpoints the scenario asks for as the steps go; call ``close()`` when done."""
    from .runtime.launch import current_team
    from .session import RUN_FLAGS, build, resolve

    team = options.pop("team", None) or current_team()
    flags = {k: options.pop(k, None) for k in RUN_FLAGS}
    allow_large = options.pop("allow_large", False)
    plan = resolve(scenario, flags, options.pop("set", ()), options.pop("lb", ()), None, options.pop("out", None),
                   team, allow_large=allow_large)
    if options:
        raise ShoalError(f"unknown option(s) {', '.join(sorted(options))}")
    built = build(plan, team)
    built.sim.at_close(built.release)  # its trace, run.log and folder lock end with it
    return built.sim


__all__ = ["ShoalError", "run", "simulation", "__version__"]
