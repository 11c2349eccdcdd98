"""What an app (a physics model) provides to the executors.

An app owns the numerics only. It never knows where a tile lives: the executor hands it one
tile's state and the halo payloads that the tile's neighbours packed for it, and the app
returns how much work it did. Tile state is whatever the app wants (usually a dict of NumPy
arrays) and may change size from step to step.
"""

from __future__ import annotations

import functools
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from ..tiling import Tiling

REDUCTIONS = {"min": min, "max": max, "sum": None}


@dataclass(frozen=True)
class Phase:
    """One phase of a step.

    Parameters
    ----------
    name : str
        Shown in traces and timelines.
    halo : bool
        Whether the phase reads its neighbours' halos, packed from their state right after
        their previous task.
    reduction : {"min", "max", "sum"} or None
        Combine the value every tile returns, in tile-id order, into one global value (for
        example the minimum time step). This is a barrier: no tile starts its next phase until
        every tile has finished this one.
    lagged : bool
        The reduction is read one step later, and is no barrier: the next phase of step s
        reads the value reduced at step s - 1 (in ``ctx.reduced``), so tiles run on while the
        last ones finish this phase. Step 0 reads the app's ``initial_reductions()``. Only
        the phase right after this one may read the value, so the last phase of a step
        cannot be lagged.
    """

    name: str
    halo: bool = False
    reduction: str | None = None
    lagged: bool = False

    def __post_init__(self):
        if self.reduction not in REDUCTIONS and self.reduction is not None:
            raise ValueError(f"unknown reduction {self.reduction!r}; known: {', '.join(REDUCTIONS)}")
        if self.lagged and self.reduction is None:
            raise ValueError(f"phase {self.name!r} is lagged but has no reduction")


def reduce_in_order(kind: str, values: list[float]) -> float:
    """Combine per-tile values in tile-id order, so the result never depends on timing."""
    if kind == "sum":
        total = 0.0
        for v in values:
            total += v
        return total
    return REDUCTIONS[kind](values)


_clock = threading.local()


def lock_free_seconds() -> float:
    """CPU seconds this thread has spent so far in calls made through :func:`lock_free`."""
    return getattr(_clock, "s", 0.0)


def lock_free_calls() -> int:
    """How many calls through :func:`lock_free` this thread has made so far: each one lets go
    of the interpreter lock and takes it back, a hand-off when other threads want it."""
    return getattr(_clock, "n", 0)


def lock_free(fn):
    """Wrap a compiled function that runs without the interpreter lock (Numba ``nogil``), so
    that its CPU time is counted apart: the executor records it as the task's kernel time, and
    the replay models only the rest of a task as holding the lock.

    Wrap leaf calls only: a wrapped call inside another would be counted twice.
    """

    @functools.wraps(fn)
    def timed(*args):
        return _call_timed(fn, args)

    return timed


def _call_timed(fn, args):
    tic = time.thread_time()
    try:
        return fn(*args)
    finally:
        _clock.s = getattr(_clock, "s", 0.0) + time.thread_time() - tic
        _clock.n = getattr(_clock, "n", 0) + 1


@dataclass
class StepContext:
    """What a kernel may know besides its tile: the step and the global reductions so far.

    Apps call their compiled kernels through :meth:`kernel` (or wrap them in :func:`lock_free`),
    which times them: the rest of a task is Python holding the interpreter lock, which the
    replay models as such.
    """

    step: int
    reduced: dict[str, float] = field(default_factory=dict)

    def kernel(self, fn, *args):
        """Call a compiled kernel that runs without the interpreter lock, timing it."""
        return _call_timed(fn, args)


class App(Protocol):
    """The protocol every app follows.

    Attributes
    ----------
    name : str
        Registry key.
    phases : tuple of Phase
        The ordered phases of one step.
    """

    name: str
    phases: tuple[Phase, ...]

    def init_tile(self, tile: int, tiling: Tiling) -> Any:
        """The initial state of one tile."""
        ...

    # Optional: ``prepare(tiling)`` compiles or loads kernels before the timed run.

    def pack_halos(self, phase: int, state: Any, src: int, tiling: Tiling) -> dict[int, Any]:
        """What tile ``src`` sends each of its neighbours for their phase ``phase``:
        ``{neighbour: payload}`` for every neighbour in ``tiling.neighbours[src]``. One call
        per tile, so that an app can find all its neighbours' particles in one pass."""
        ...

    def run_phase(
        self, phase: int, tile: int, state: Any, halos: dict[int, Any], ctx: StepContext, tiling: Tiling
    ) -> tuple[int, float | None]:
        """Advance one tile through one phase; return (work count, value to reduce or None)."""
        ...

    def gather(self, states: dict[int, Any], tiling: Tiling) -> dict[str, np.ndarray]:
        """Global arrays of the whole state, independent of the tiling (for comparisons)."""
        ...


def payload_bytes(payload: Any) -> int:
    """Bytes a halo payload would take on the wire (arrays, or dicts/tuples of arrays)."""
    if payload is None:
        return 0
    if isinstance(payload, np.ndarray):
        return int(payload.nbytes)
    if isinstance(payload, dict):
        payload = payload.values()
    elif not isinstance(payload, (tuple, list)):
        return 8
    total = 0
    for v in payload:  # a store of arrays, packed for every neighbour of every task: no call per array
        total += v.nbytes if type(v) is np.ndarray else payload_bytes(v)
    return total
