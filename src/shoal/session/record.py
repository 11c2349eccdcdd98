"""A run's record: its folder and summary, on every process of the run."""

from __future__ import annotations

import json
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import ShoalError
from ..runtime.team import Team
from ..trace import Trace


@dataclass
class RunRecord:
    """A run's folder and summary (``None`` for a run stopped before its end, at ``stopped_at``)."""

    path: Path
    summary: dict | None
    stopped_at: int | None = None

    @property
    def trace(self) -> Trace:
        """The run's ``trace.h5``, read again on every access (see :class:`~shoal.trace.Trace`)."""
        return Trace.read(self.path)

    def state(self) -> dict[str, np.ndarray]:
        """The final state gathered into global arrays by field name (``state/final.npz``).

        Raises
        ------
        ShoalError
            If the file is missing (a stopped run has none) or cannot be read.
        """
        path = self.path / "state" / "final.npz"
        if not path.exists():
            raise ShoalError(f"{path} is missing: the run folder has no final state")
        try:
            with np.load(path) as z:
                return {k: z[k] for k in z.files}
        except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
            raise ShoalError(f"{path} is not a readable final state (truncated or damaged): {exc}") from None

    def report(self) -> list[Path]:
        """Write the run's report pictures into its folder (as ``shoal report`` does) and return
        their paths."""
        from ..report import report_run

        return report_run(self.path)


def open_run(path: str | Path) -> RunRecord:
    """A finished run folder (one with a summary)."""
    path = Path(path)
    if not path.is_dir():
        raise ShoalError(f"no run folder at {path}")
    if not (path / "summary.json").exists():
        raise ShoalError(f"{path} has no summary.json: the run did not finish")
    try:
        summary = json.loads((path / "summary.json").read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ShoalError(f"{path / 'summary.json'} is not valid JSON: {exc}") from None
    if not isinstance(summary, dict):
        raise ShoalError(f"{path / 'summary.json'} is not a JSON object")
    return RunRecord(path, summary)


def shared(team: Team, record: RunRecord | None) -> RunRecord:
    """The first process's ``record``, on every process of ``team`` (the others pass ``None``)."""
    fields = None if record is None else (str(record.path), record.summary, record.stopped_at)
    path, summary, stopped_at = team.agree(fields)
    return RunRecord(Path(path), summary, stopped_at)
