"""Where a measurement came from: the machine, its load, the software and the thread settings.

A timing means little without the host that produced it (sampi §V validates against runs on
a controlled, isolated cluster for that reason). :func:`record` reads, at the start of a run
or a benchmark, the CPU model, the logical cores and those this process may run on, the
load average, shoal's version and git commit, the versions of Python, NumPy, Numba, mpi4py
and h5py, and the thread settings; :func:`finish` adds, at its end, the load after, the wall
time and whether the host was busy. Every run keeps the result in its ``summary.json`` under
``provenance``, every benchmark in its JSON record.

The host counts as *busy* when the load average of the last minute, less what this process
(and its waited-for children) used on average, exceeds ``BUSY_LOAD_PER_CORE`` per usable
core: other programs then competed for the cores and wall times are distorted. The load
after a short run still remembers the minute before it, so "busy after" may also mean "busy
just before".
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import socket
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path

from .resources import usable_cores

BUSY_LOAD_PER_CORE = 0.25  # other programs' runnable threads per usable core above which timings are distorted
THREAD_VARIABLES = ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
LIBRARIES = ("numpy", "numba", "mpi4py", "h5py")
PACKAGE = Path(__file__).resolve().parent


def record(threshold: float = BUSY_LOAD_PER_CORE) -> dict:
    """The provenance of a measurement that starts now.

    Parameters
    ----------
    threshold : float
        Load per usable core, beyond this process's own, above which the host counts as busy.

    Returns
    -------
    dict
        JSON-ready: ``host``, ``cpu`` (model name), ``logical_cores``, ``usable_cores`` (those
        this process may run on), ``started`` (ISO 8601, UTC), ``start_unix_s``, ``load_before``
        (1, 5 and 15 minute load averages, or None where the system has none),
        ``busy_threshold``, ``busy_before``, ``shoal`` (``version``, ``commit``, ``dirty``),
        ``versions`` (``python`` and each library's, None when not installed), ``threads`` and
        ``cpu_s_start`` (this process's CPU seconds so far, for :func:`finish`).
    """
    from .version import __version__

    load = load_average()
    usable = usable_cores()
    commit, dirty = git_commit(PACKAGE)
    rec = {
        "host": socket.gethostname(),
        "cpu": cpu_model(),
        "logical_cores": os.cpu_count(),
        "usable_cores": usable,
        "load_before": load,
        "busy_threshold": threshold,
        "busy_before": is_busy(load, usable, threshold),
        "shoal": {"version": __version__, "commit": commit, "dirty": dirty},
        "versions": {"python": platform.python_version(), **{name: library_version(name) for name in LIBRARIES}},
        "threads": thread_settings(),
    }
    # The clocks start last: reading the rest (git, imports) is not part of the measurement.
    return {**rec, "started": _now_iso(), "start_unix_s": time.time(), "cpu_s_start": process_cpu_s()}


def finish(start: dict) -> dict:
    """``start`` (a :func:`record`) completed at the end of the measurement.

    Parameters
    ----------
    start : dict
        What :func:`record` returned at the start.

    Returns
    -------
    dict
        A copy of ``start`` with ``ended`` (ISO 8601, UTC), ``wall_s``, ``load_after``,
        ``own_cores`` (the mean number of cores this process and its waited-for children kept
        busy), ``busy_after`` (the load after, less ``own_cores``, judged as before) and
        ``busy`` (busy before or after; None when the system gives no load average).
    """
    wall = max(time.time() - start["start_unix_s"], 1e-9)
    own = max(process_cpu_s() - start["cpu_s_start"], 0.0) / wall
    load = load_average()
    after = is_busy(load, start["usable_cores"], start["busy_threshold"], own=own)
    before = start["busy_before"]
    busy = None if before is None and after is None else bool(before or after)
    return {**start, "ended": _now_iso(), "wall_s": wall, "load_after": load, "own_cores": own,
            "busy_after": after, "busy": busy}


def is_busy(load: list[float] | None, usable: int, threshold: float = BUSY_LOAD_PER_CORE,
            own: float = 0.0) -> bool | None:
    """Whether other programs loaded the host: the one-minute load average less ``own``, per
    usable core, above ``threshold``.

    Parameters
    ----------
    load : list of float or None
        The 1, 5 and 15 minute load averages (None: unknown, and so is the answer).
    usable : int
        Cores this process may run on.
    threshold : float
        Load per core from other programs above which the host is busy.
    own : float
        The part of the load that is the measurement's own (mean cores it kept busy).

    Returns
    -------
    bool or None
        None when the load is unknown.
    """
    if load is None:
        return None
    return (load[0] - own) / max(usable, 1) > threshold


def describe(rec: dict) -> str:
    """One line on where a measurement ran: host, CPU, cores, load, versions, commit, threads.

    Parameters
    ----------
    rec : dict
        A :func:`record` (or :func:`finish`) result.
    """
    v, s = rec["versions"], rec["shoal"]
    commit = s["commit"][:12] + ("-dirty" if s["dirty"] else "")
    libs = ", ".join(f"{name} {v[key] or 'absent'}" for name, key in
                     (("NumPy", "numpy"), ("Numba", "numba"), ("mpi4py", "mpi4py"), ("h5py", "h5py")))
    env = rec["threads"]["environment"]
    threads = ", ".join(f"{k}={env[k]}" for k in THREAD_VARIABLES if env[k] is not None) or "none set"
    return (f"host {rec['host']}: {rec['cpu']}, {rec['logical_cores']} logical cores ({rec['usable_cores']} usable), "
            f"load {_load(rec['load_before'])}; shoal {s['version']} ({commit}), Python {v['python']}, {libs}; "
            f"thread variables: {threads}; Numba threads {rec['threads']['numba_num_threads']}")


def busy_warning(rec: dict) -> str | None:
    """The warning to print when ``rec``'s host was busy before or after (None when it was not).

    Parameters
    ----------
    rec : dict
        A :func:`record` (only the load before is judged) or :func:`finish` result.
    """
    when = [w for w, key in (("before", "busy_before"), ("after", "busy_after")) if rec.get(key)]
    if not when:
        return None
    loads = [f"{_load(rec['load_' + w])} {w}" for w in when]
    return (f"the host was busy ({'; '.join(loads)}, on {rec['usable_cores']} usable cores; busy above "
            f"{rec['busy_threshold']:g} per core from other programs): wall times are distorted")


# ----- the pieces ------------------------------------------------------------------------------
def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo`` on Linux), else what ``platform`` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("model name", "Model", "Hardware")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def load_average() -> list[float] | None:
    """The 1, 5 and 15 minute load averages, or None where the system keeps none."""
    try:
        return [float(x) for x in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def process_cpu_s() -> float:
    """CPU seconds this process and its waited-for children have used (user and system)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def library_version(name: str) -> str | None:
    """The installed version of the distribution ``name``, or None when it is not installed
    (read from its metadata: nothing is imported)."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def git_commit(package: Path) -> tuple[str, bool | None]:
    """The commit of the git checkout ``package`` was loaded from, and whether the checkout has
    uncommitted changes to tracked files.

    Only a checkout whose ``src/shoal`` is ``package`` counts: a shoal installed into some
    other repository's environment has no commit of its own.

    Parameters
    ----------
    package : Path
        The folder of the ``shoal`` package.

    Returns
    -------
    tuple of (str, bool or None)
        ``("unknown", None)`` outside a checkout, without git, or on any error.
    """
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=package, capture_output=True, text=True, check=True,
                              timeout=10).stdout.strip()

    try:
        top = Path(git("rev-parse", "--show-toplevel"))
        if (top / "src" / "shoal").resolve() != package.resolve():
            return "unknown", None
        return git("rev-parse", "HEAD"), bool(git("status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.SubprocessError):
        return "unknown", None


def thread_settings() -> dict:
    """The settings that decide how many threads the numerical libraries start.

    Returns
    -------
    dict
        ``environment``: each of ``THREAD_VARIABLES`` as this process sees it (None when
        unset); ``numba_num_threads``: Numba's thread count in this process;
        ``worker_threads``: what shoal's worker threads run with
        (:func:`~shoal.runtime.local.worker_thread_settings`).
    """
    import numba

    from .runtime.local import worker_thread_settings

    return {"environment": {k: os.environ.get(k) for k in THREAD_VARIABLES},
            "numba_num_threads": int(numba.config.NUMBA_NUM_THREADS),
            "worker_threads": worker_thread_settings()}


def _load(load: list[float] | None) -> str:
    return "unknown" if load is None else ", ".join(f"{x:.2f}" for x in load)


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
