"""Compare two runs' final states, gathered into global arrays by global index."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .errors import ShoalError
from .session import open_run


@dataclass
class Comparison:
    """Largest absolute difference per field, and which fields differ bit for bit.

    For particle states (arrays keyed by particle ``id``) particles are matched by id:
    ``position`` holds the max and mean distance between matched particles and
    ``only_a``/``only_b`` the particles present in one run only (Vertanen's Table 3).
    """

    fields: dict[str, float]
    differing: set[str] = field(default_factory=set)
    position: tuple[float, float] | None = None
    only_a: int = 0
    only_b: int = 0
    matched: int = 0

    @property
    def max_abs_diff(self) -> float:
        """The largest absolute difference over all fields (0.0 when none differ or there are none)."""
        return max(self.fields.values(), default=0.0)

    @property
    def identical(self) -> bool:
        """True when every field is bitwise equal and no particle is present in one run only."""
        return not self.differing and self.only_a == 0 and self.only_b == 0


def compare_states(a: dict[str, np.ndarray], b: dict[str, np.ndarray],
                   names: tuple[str, str] = ("the first state", "the second state")) -> Comparison:
    """Compare two gathered states field by field.

    Parameters
    ----------
    a, b : dict of str to numpy.ndarray
        Global arrays by field name, as :meth:`~shoal.session.RunRecord.state` returns them.
        A state with an ``id`` array is a particle state and is matched by particle id.
    names : (str, str)
        What to call ``a`` and ``b`` in an error.

    Returns
    -------
    Comparison
        The largest absolute difference per field and which fields are not bitwise equal.

    Raises
    ------
    ShoalError
        If the states hold different fields, a field's shape or dtype differs between them,
        or a field holds NaN: NaN equals nothing, not even itself, so such a state is neither
        identical to another nor a measurable distance from it (and no run ends with one).
    """
    if set(a) != set(b):
        raise ShoalError(f"the runs hold different fields: {sorted(a)} vs {sorted(b)}")
    for state, name in ((a, names[0]), (b, names[1])):
        for field_name in sorted(state):
            values = np.asarray(state[field_name])
            if values.dtype.kind in "fc" and np.isnan(values).any():
                raise ShoalError(f"field {field_name!r} of {name} holds NaN ({int(np.isnan(values).sum())} of "
                                 f"{values.size} values), which equals nothing, not even itself")
    if "id" in a:
        return _compare_particles(a, b)
    return _compare_fields(a, b)


def _compare_particles(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> Comparison:
    """Match particles by id; compare per-particle fields on the common ones, the rest as is."""
    n = len(a["id"])
    per_particle = {k for k in a if a[k].ndim >= 1 and len(a[k]) == n and len(b[k]) == len(b["id"])}
    common, ia, ib = np.intersect1d(a["id"], b["id"], assume_unique=True, return_indices=True)
    out = _compare_fields({k: a[k][ia] for k in per_particle} | {k: a[k] for k in a if k not in per_particle},
                          {k: b[k][ib] for k in per_particle} | {k: b[k] for k in b if k not in per_particle})
    dist = np.linalg.norm(a["x"][ia] - b["x"][ib], axis=1) if len(common) else np.zeros(0)
    out.position = (float(dist.max(initial=0.0)), float(dist.mean()) if len(dist) else 0.0)
    out.only_a, out.only_b, out.matched = n - len(common), len(b["id"]) - len(common), len(common)
    return out


def _compare_fields(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> Comparison:
    diffs, differing = {}, set()
    for name in sorted(a):
        x, y = np.ascontiguousarray(a[name]), np.ascontiguousarray(b[name])
        if x.shape != y.shape or x.dtype != y.dtype:
            raise ShoalError(f"field {name!r} is {x.dtype}{x.shape} in one run and {y.dtype}{y.shape} in the other")
        if x.tobytes() == y.tobytes():  # the contract is bitwise identity
            diffs[name] = 0.0
            continue
        differing.add(name)
        with np.errstate(invalid="ignore"):  # inf - inf: the same infinity is no difference
            d = np.abs(x.astype(np.float64) - y.astype(np.float64))
        d[np.isnan(d)] = 0.0
        diffs[name] = float(d.max())
    return Comparison(diffs, differing)


def compare_runs(run_a: str | Path, run_b: str | Path) -> Comparison:
    """The final states of two finished run folders compared; a missing or damaged folder,
    summary or final state is a :class:`~shoal.errors.ShoalError` naming it (never "different").

    Parameters
    ----------
    run_a, run_b : str or Path
        The two run folders.

    Returns
    -------
    Comparison
        See :func:`compare_states`.
    """
    return compare_states(open_run(run_a).state(), open_run(run_b).state(), (f"{run_a}", f"{run_b}"))
