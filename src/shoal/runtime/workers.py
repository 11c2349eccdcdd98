"""The worker threads of one node, kept from run to run and resized between runs.

A pool starts its threads once. Between runs every thread sleeps on the pool's condition (it
blocks; it never spins), and :meth:`WorkerPool.start` hands all of them the next run's work.
Resizing happens only while no run is going: growing starts new threads, shrinking wakes the
surplus ones, which leave, and returns only once they have ended — a core given up is free
when ``resize`` returns, never before (invasive-compute-balancing §5.5).

:meth:`WorkerPool.pin` gives each thread a CPU: the thread sets its own affinity
(``os.sched_setaffinity(0, {cpu})`` acts on the calling thread) before the next job it runs,
so a pin takes effect between runs, as a resize does. A thread between runs is blocked and
runs nowhere, whatever its affinity still names.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence

from ..errors import ShoalError


class WorkerPool:
    """``size`` threads named ``{name}-w{k}`` that each run ``job(k)`` once per :meth:`start`.

    Parameters
    ----------
    size : int
        Threads to start with (at least one).
    name : str
        Prefix of the threads' names.
    setup : callable, optional
        Called once in every thread when it starts, before its first job (per-thread settings).
    """

    def __init__(self, size: int, name: str, setup: Callable[[], None] | None = None):
        self.name = name
        self._setup = setup
        self._cond = threading.Condition()
        self._threads: list[threading.Thread] = []
        self._target = 0  # threads with an index below this serve; the others leave
        self._job: Callable[[int], None] | None = None
        self._generation = 0  # counts the runs handed out
        self._busy = 0  # threads still inside the current run's job
        self._errors: list[BaseException] = []  # what jobs raised (the thread serves on)
        self._cpus: tuple[int, ...] | None = None  # thread k runs on CPU _cpus[k]; None: unpinned
        self._anywhere = frozenset(os.sched_getaffinity(0))  # where an unpinned thread may run
        self.resize(size)

    @property
    def size(self) -> int:
        """Threads that serve runs: the size the pool was made with or last resized to."""
        return self._target

    @property
    def pinned(self) -> bool:
        """Whether the threads run on CPUs given by :meth:`pin`."""
        return self._cpus is not None

    def resize(self, size: int) -> None:
        """Run ``size`` threads from the next :meth:`start` on (only between runs)."""
        if size < 1:
            raise ShoalError(f"a node needs at least one worker thread, got {size}")
        with self._cond:
            if self._busy:
                raise ShoalError("worker threads can only be resized between runs")
            self._target = size
            leaving = self._threads[size:]
            self._cond.notify_all()
        for th in leaving:
            th.join()
        del self._threads[size:]
        for k in range(len(self._threads), size):
            th = threading.Thread(target=self._serve, args=(k, self._generation), daemon=True,
                                  name=f"{self.name}-w{k}")
            self._threads.append(th)
            th.start()

    def pin(self, cpus: Sequence[int] | None) -> None:
        """Run thread ``k`` on CPU ``cpus[k]`` from the next :meth:`start` on; ``None``: on any
        CPU this process may use (as when the pool was made).

        Parameters
        ----------
        cpus : sequence of int or None
            One CPU per thread of the pool, at least :attr:`size` of them; threads past its end
            (after a later growth) run unpinned until pinned again.
        """
        with self._cond:
            if self._busy:
                raise ShoalError("worker threads can only be pinned between runs")
            self._cpus = None if cpus is None else tuple(int(c) for c in cpus)

    def start(self, job: Callable[[int], None]) -> None:
        """Have every thread run ``job(k)`` once, ``k`` its index."""
        with self._cond:
            self._job = job
            self._busy = self._target
            self._generation += 1
            self._cond.notify_all()

    def wait(self) -> None:
        """Block until every thread has returned from the current job; raise what a job raised."""
        with self._cond:
            while self._busy:
                self._cond.wait()
            self._job = None
            errors, self._errors = self._errors, []
        if errors:
            raise errors[0]

    def close(self) -> None:
        """End every thread (the pool cannot be used again)."""
        with self._cond:
            self._target = 0
            self._cond.notify_all()
        for th in self._threads:
            th.join()
        self._threads.clear()

    def _serve(self, k: int, seen: int) -> None:
        if self._setup is not None:
            self._setup()
        where = self._anywhere  # this thread's affinity now
        while True:
            with self._cond:
                while self._generation == seen and k < self._target:
                    self._cond.wait()
                if k >= self._target:
                    return
                seen, job = self._generation, self._job
                cpus = self._cpus
            wanted = frozenset((cpus[k],)) if cpus is not None and k < len(cpus) else self._anywhere
            try:
                if wanted != where:
                    os.sched_setaffinity(0, wanted)  # this thread only: 0 is the caller
                    where = wanted
                job(k)
            except BaseException as exc:  # the pool stays whole: wait() reports it
                with self._cond:
                    self._errors.append(exc)
            finally:
                with self._cond:
                    self._busy -= 1
                    if not self._busy:
                        self._cond.notify_all()
