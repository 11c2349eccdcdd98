"""How long a task spends in compiled code that runs without Python's interpreter lock.

Apps call their compiled (Numba ``nogil``) kernels through :meth:`StepContext.kernel
<shoal.runtime.app.StepContext.kernel>` or wrap them in :func:`lock_free`. Every such call is
timed on the calling thread, so the executor can record a task's kernel time apart from the
Python around it, and the replay can model only the rest as holding the lock.
"""

from __future__ import annotations

import functools
import threading
import time

_clock = threading.local()


def thread_clock() -> list:
    """This thread's lock-free clock, ``[seconds, calls]``, updated in place by every call
    through :func:`lock_free`: a caller that reads it per task keeps the list, not the
    thread-local lookup."""
    try:
        return _clock.c
    except AttributeError:
        _clock.c = clock = [0.0, 0]
        return clock


def lock_free_seconds() -> float:
    """CPU seconds this thread has spent so far in calls made through :func:`lock_free`."""
    return thread_clock()[0]


def lock_free_calls() -> int:
    """How many calls through :func:`lock_free` this thread has made so far: each one lets go
    of the interpreter lock and takes it back, a hand-off when other threads want it."""
    return thread_clock()[1]


def lock_free(fn):
    """Wrap a compiled function that runs without the interpreter lock (Numba ``nogil``), so
    that its CPU time is counted apart: the executor records it as the task's kernel time, and
    the replay models only the rest of a task as holding the lock.

    Wrap leaf calls only: a wrapped call inside another would be counted twice.
    """

    @functools.wraps(fn)
    def timed(*args):
        return call_timed(fn, args)

    return timed


def call_timed(fn, args):
    """Call ``fn(*args)``, adding its CPU time and one call to this thread's lock-free clock."""
    clock = thread_clock()
    tic = time.thread_time()
    try:
        return fn(*args)
    finally:
        clock[0] += time.thread_time() - tic
        clock[1] += 1
