"""Compare two runs' final states, gathered into global arrays by global index."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .errors import ShoalError
from .session import open_run


@dataclass
class Comparison:
    """Largest absolute difference per field, and which fields differ bit for bit."""

    fields: dict[str, float]
    differing: set[str] = field(default_factory=set)

    @property
    def max_abs_diff(self) -> float:
        return max(self.fields.values(), default=0.0)

    @property
    def identical(self) -> bool:
        return not self.differing


def compare_states(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> Comparison:
    if set(a) != set(b):
        raise ShoalError(f"the runs hold different fields: {sorted(a)} vs {sorted(b)}")
    diffs, differing = {}, set()
    for name in sorted(a):
        x, y = np.ascontiguousarray(a[name]), np.ascontiguousarray(b[name])
        if x.shape != y.shape or x.dtype != y.dtype:
            raise ShoalError(f"field {name!r} is {x.dtype}{x.shape} in one run and {y.dtype}{y.shape} in the other")
        if x.tobytes() == y.tobytes():  # the contract is bitwise identity
            diffs[name] = 0.0
            continue
        differing.add(name)
        d = np.abs(x.astype(np.float64) - y.astype(np.float64))
        # NaN where only one run has NaN: report it as an infinite difference.
        both_nan = np.isnan(x) & np.isnan(y) if x.dtype.kind == "f" else False
        d[np.isnan(d) & ~both_nan] = np.inf
        d[both_nan] = 0.0
        diffs[name] = float(d.max())
    return Comparison(diffs, differing)


def compare_runs(run_a: str | Path, run_b: str | Path) -> Comparison:
    return compare_states(open_run(run_a).state(), open_run(run_b).state())
