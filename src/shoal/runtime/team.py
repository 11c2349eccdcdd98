"""The processes a run spans, and what they do together between chunks of steps.

A run is one process (:class:`Team`) or one MPI rank per node (``shoal.runtime.mpi.MPITeam``,
when the program was started by ``mpiexec``). Between chunks of steps every tile is idle, and
the session asks its team to sum per-tile measurements, agree on a new owner table, move tile
states to their new owners and bring every state to the first process (for frames,
checkpoints and the final state). In one process all of this is the identity.

Which team a program runs as is :func:`shoal.runtime.launch.current_team`'s choice.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class Team:
    """One process holding every tile."""

    rank = 0
    size = 1
    is_root = True
    distributed = False  # True for MPI ranks, which hold only their own tiles' states

    def __init__(self):
        self.step = 0  # where the run is: named in error messages

    def executor(self, app, tiling, cluster, owner, overlap: bool = True, backend: str = "auto"):
        """The executor of this process's tiles (in one process, halos never wait for a network):
        the Python one (``backend="python"``), the native one (``"native"``), or the native one
        where the app compiles its phases for this run and the Python one where it does not
        (``"auto"``: a phase left in Python runs faster on the executor made for it)."""
        from .native import NativeExecutor, compiles

        if backend == "native" or (backend == "auto" and compiles(app, tiling)):
            return NativeExecutor(app, tiling, cluster, owner)
        from .local import LocalExecutor

        return LocalExecutor(app, tiling, cluster, owner)

    def local_tiles(self, owner: np.ndarray) -> np.ndarray:
        """The tiles whose state this process holds under ``owner``."""
        return np.arange(len(owner))

    def sum(self, values: np.ndarray) -> np.ndarray:
        """Element-wise sum over processes (each holds the entries of its own tiles): a new array."""
        return np.array(values, copy=True)

    def max(self, value: float) -> float:
        """The largest ``value`` over processes."""
        return float(value)

    def agree(self, obj: Any) -> Any:
        """The first process's ``obj``, on every process."""
        return obj

    def to_root(self, states: dict[int, Any], pack, unpack) -> dict[int, Any] | None:
        """Every tile's state on the first process (``None`` elsewhere); states that travel
        go as ``pack(state)`` and arrive as ``unpack(...)``."""
        return states

    def migrate(self, states: dict[int, Any], old: np.ndarray, new: np.ndarray, pack, unpack) -> dict[int, Any]:
        """Move the states of tiles whose owner changed (packed as for :meth:`to_root`);
        return this process's states."""
        return states

    def combine(self, result):
        """One execution result on the first process from every process's part."""
        return result

    def abort(self, exc: BaseException) -> None:
        """Stop the run after an error: in one process, let it propagate."""
        raise exc
