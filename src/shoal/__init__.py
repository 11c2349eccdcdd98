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
# Numba builds a warning's text through colorama, which swaps sys.stdout in and out: the native
# executor's worker threads, each calling compiled code with first-class functions (a warning
# made, then ignored, at every call), nested those swaps until printing recursed without end.
_os.environ.setdefault("NUMBA_DISABLE_ERROR_MESSAGE_HIGHLIGHTING", "1")

from .errors import ShoalError  # noqa: E402
from .version import __version__  # noqa: E402


def __getattr__(name: str):
    """``shoal.run`` and ``shoal.simulation``, imported on first use (``import shoal`` stays light)."""
    if name == "run":
        from .session import run_scenario

        return run_scenario
    if name == "simulation":
        from .session import simulation

        return simulation
    raise AttributeError(f"module 'shoal' has no attribute {name!r}")


__all__ = ["ShoalError", "run", "simulation", "__version__"]
