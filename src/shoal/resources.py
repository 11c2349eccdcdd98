"""What a run will ask of the machine, checked before anything is allocated.

An absurd size (a grid of 10^12 cells, a particle spacing of 10^-7 m, a hundred thousand worker
threads) would otherwise reach NumPy or the thread library and fail after minutes, or take the
machine down. The app estimates its state's bytes from its parameters alone
(:attr:`shoal.apps.AppSpec.memory`); a run holds about :data:`STATE_COPIES` copies of it (the
tiles, their halos and migrations, the gathered frames and final state). Runs above the
machine's memory or thread budget are refused with one line; ``allow_large`` (``--allow-large``)
runs them anyway.
"""

from __future__ import annotations

import os

from .errors import ShoalError

STATE_COPIES = 3  # tiles + halos/emigrants + the gathered global state at frames and the end
THREADS_PER_CORE = 64  # beyond this, a run measures the scheduler, not the placement


def machine_memory() -> int:
    """Bytes of memory available to a new run (``MemAvailable``, else physical memory)."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def thread_budget() -> int:
    """Worker threads one run may start: :data:`THREADS_PER_CORE` per core."""
    return THREADS_PER_CORE * (os.cpu_count() or 1)


def check_run(app_spec, params, worker_threads: int, *, allow_large: bool = False,
              memory: int | None = None, threads: int | None = None) -> int:
    """Refuse a run whose estimated memory or worker threads exceed the machine's.

    Parameters
    ----------
    app_spec : shoal.apps.AppSpec
        The app; its ``memory(params)`` estimates the state's bytes.
    params : dataclass
        The app's parameters.
    worker_threads : int
        The most worker threads this process will run at once (every in-process node's).
    allow_large : bool
        Run anyway.
    memory, threads : int, optional
        The budgets (default: :func:`machine_memory`, :func:`thread_budget`).

    Returns
    -------
    int
        The estimated bytes.
    """
    estimate = STATE_COPIES * int(app_spec.memory(params)) if app_spec.memory is not None else 0
    if allow_large:
        return estimate
    memory = machine_memory() if memory is None else memory
    if estimate > memory:
        raise ShoalError(f"this run needs about {_size(estimate)} of memory ({app_spec.name} state x "
                         f"{STATE_COPIES}); the machine has {_size(memory)} available: shrink it, or pass "
                         "--allow-large to try anyway")
    check_threads(worker_threads, threads=threads)
    return estimate


def check_threads(worker_threads: int, allow_large: bool = False, threads: int | None = None) -> None:
    """Refuse a run that would start ``worker_threads`` worker threads, more than ``threads``
    (default :func:`thread_budget`), unless ``allow_large``: with the invasive manager's pool
    (``--cores``) as with ``--workers``.

    Raises
    ------
    ShoalError
        Naming the threads asked for, the machine's cores and the budget.
    """
    threads = thread_budget() if threads is None else threads
    if worker_threads > threads and not allow_large:
        raise ShoalError(f"the run asks for {worker_threads} worker threads; this machine has "
                         f"{os.cpu_count()} cores and a run may start {threads} ({THREADS_PER_CORE} per core): "
                         "use fewer, or pass --allow-large to try anyway")


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(n) < 1024 or unit == "PiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.1f} PiB"


def usable_cores() -> int:
    """The cores this process may run on (its affinity mask where the system has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1
