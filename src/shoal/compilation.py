"""Numba's cache of shoal's kernels: where it lives, and a word before kernels compile.

Numba compiles a kernel on its first call and caches the machine code, so the first run of an
app pauses for seconds (up to a quarter of a minute) with nothing to show. :func:`announce`
says so once per *part* (an app, or the replay) and install: a marker file per part, named by
shoal's and Numba's versions, sits in the folder where Numba caches shoal's kernels.

Numba caches beside the sources, or in the user's cache folder when the install is read-only;
:func:`cache_folder_override` finds a writable place when neither is (the package sets
``NUMBA_CACHE_DIR`` from it on import, before any kernel is defined).
"""

from __future__ import annotations

import functools
import logging
import os
from pathlib import Path

from .version import __version__

logger = logging.getLogger("shoal")


def cache_folder_override(package: str, user_cache: str, environ=os.environ) -> str | None:
    """Where Numba should cache shoal's kernels, when its own choice would fail.

    Numba caches beside the sources (the ``package`` folder), or in the ``numba`` folder of the
    ``user_cache`` folder when the install folder is read-only; with neither writable it refuses
    to import the kernels. Then the kernels are cached in a fresh temporary folder (compiled
    once per process). ``None``: leave Numba be (also when ``environ`` sets ``NUMBA_CACHE_DIR``).
    """
    if environ.get("NUMBA_CACHE_DIR") or os.access(package, os.W_OK):
        return None
    folder = os.path.join(user_cache, "numba")
    try:
        os.makedirs(folder, exist_ok=True)
        if os.access(folder, os.W_OK):
            return None  # Numba's own fallback works
    except OSError:
        pass
    import tempfile

    return tempfile.mkdtemp(prefix="shoal-numba-")


def announce(part: str) -> None:
    """Say so before ``part``'s kernels (an app's name, or ``"replay"``) compile for the first
    time on this install, after an upgrade too: the pause that follows is not a hang."""
    marker = marker_file(part)
    if marker is None or marker.exists():
        return
    logger.info("compiling %s kernels, first run only (Numba caches them for the next runs)", part)
    try:
        marker.touch()
    except OSError:
        pass  # a cache folder we cannot write: Numba will not cache either, and says nothing


def marker_file(part: str) -> Path | None:
    """The marker of ``part``'s compiled kernels, in the folder where Numba caches this module's
    kernels (``None`` when Numba has no cache folder here)."""
    import numba

    cache = getattr(_locator(), "_cache", None)
    folder = getattr(cache, "_cache_path", None)
    if folder is None:
        return None
    return Path(folder) / f"shoal-{__version__}-numba-{numba.__version__}-{part}.compiled"


@functools.cache
def _locator():
    """A cached kernel of this module, never called: its cache object knows Numba's folder."""
    import numba

    @numba.njit(cache=True)
    def located() -> int:
        return 0

    return located
