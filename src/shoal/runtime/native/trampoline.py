"""The trampoline: how a compiled worker runs a phase an app leaves in Python.

A worker that meets such a task calls :func:`python_task` (a range of a job,
:func:`python_range`; the rest of a native task whose kernel deferred it,
:func:`python_deferred`), which takes the interpreter lock (Numba ``objmode``), hands the
task to the executor registered under the run's handle (its ``python_task(worker, task)``
runs the app's method with the tile's state, halos and context, packs the halos of the next
phase when they are Python payloads, and writes the work and the reduced values into the
shared arrays), and lets the lock go again. It is the only place a
worker holds the lock; a native phase comes here only when its kernel asks to.
"""

from __future__ import annotations

import numba as nb

#: Executors with a run going, by handle (an index the compiled graph carries).
RUNS: dict[int, object] = {}


def _task(handle: int, worker: int, task: int) -> int:
    return RUNS[handle].python_task(worker, task)


def _pack(handle: int, task: int) -> int:
    return RUNS[handle].python_pack(task)


def _deferred(handle: int, worker: int, task: int) -> int:
    return RUNS[handle].python_deferred(worker, task)


def _range(handle: int, worker: int, unit: int) -> int:
    return RUNS[handle].python_range(worker, unit)


@nb.njit(nogil=True, cache=True)
def python_task(handle, worker, task):
    """Run ``task`` in Python; the nanoseconds its compiled kernels took, or -1 if it failed."""
    with nb.objmode(ns="int64"):
        ns = _task(handle, worker, task)
    return ns


@nb.njit(nogil=True, cache=True)
def python_pack(handle, task):
    """Pack the Python halos the tile of ``task`` sends after it; 0, or -1 if that failed."""
    with nb.objmode(status="int64"):
        status = _pack(handle, task)
    return status


@nb.njit(nogil=True, cache=True)
def python_deferred(handle, worker, task):
    """Run the rest of native ``task`` in Python (its kernel returned ``DEFER``); the work the
    task did, or -1 if that failed."""
    with nb.objmode(work="int64"):
        work = _deferred(handle, worker, task)
    return work


@nb.njit(nogil=True, cache=True)
def python_range(handle, worker, unit):
    """Run range ``unit`` of the current job phase in Python; 0, or -1 if it failed."""
    with nb.objmode(status="int64"):
        status = _range(handle, worker, unit)
    return status
