"""The app's frames of a run's state, on disk and for the live view."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..errors import ShoalError
from ..files import save_npz
from ..runtime.simulation import Simulation

if TYPE_CHECKING:
    from ..live.feed import LiveView


def write_frame(sim: Simulation, frames: Path, view: LiveView | None = None) -> None:
    """The app's frame of ``sim``'s current state, as ``state-<step>.npz`` in the folder
    ``frames`` (first process; NaN or infinity is a ShoalError), kept for the live ``view``
    (every process calls it)."""
    gathered = sim.gather()
    frame = None
    if gathered is not None:
        check_finite(gathered, sim.step_count)
        frame = sim.app.frame(gathered)
        save_npz(frames / f"state-{sim.step_count:06d}.npz", frame)
        sim.app.export(gathered, frames, sim.step_count)
    if view is not None:
        view.keep(sim.step_count, frame)


def check_finite(arrays: dict, step: int) -> None:
    """Refuse a state whose float ``arrays`` hold NaN or infinity at ``step`` (a ShoalError naming the field)."""
    for name, arr in arrays.items():
        if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
            raise ShoalError(f"field {name!r} holds NaN or infinity at step {step}")
