"""Jobs: the second kind of unit, beside tiles, and what they will cost.

A **job** is work an app emits at a step or a window over the tiles it reads, usually a pair
(cloth's collision checks between two mesh partitions whose swept bounds overlap), with a
predicted cost and a size in items (triangle pairs). An app's jobs are one columnar table,
:data:`JOBS`, built and checked by :func:`job_table` (or :func:`check_jobs` for columns made
elsewhere). :class:`CostProfile` predicts the next window's costs from the last window's
measured times per tile pair (the contact-mechanics paper, §V-A). Where jobs go is
:mod:`shoal.placement.job_policies`; how a node's cores share them out,
:mod:`shoal.placement.job_split`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ShoalError
from ..records import Column, Schema

REQUEST, REPLY, WORK = 0, 1, 2
KINDS = ("request", "reply", "work")  # a job's kind is its index here: the order a node's cores take them in

JOBS = Schema("jobs", (
    Column("job", np.int64, "", "global job id: the order the app emitted the jobs in"),
    Column("kind", np.int8, "", "0 data request, 1 data reply, 2 work: a node's cores take lower kinds first "
           "(contact mechanics, Algorithm 3)"),
    Column("a", np.int32, "", "first tile the job reads"),
    Column("b", np.int32, "", "second tile the job reads, -1 for a job of one tile"),
    Column("cost", np.float64, "s", "predicted cost of the whole job"),
    Column("size", np.int64, "item", "items of the job (triangle pairs, say), which its node may split into ranges"),
    Column("group", np.int64, "", "jobs of one group are cut into collision tasks together (locality); -1: "
           "the group of the job's unordered tile pair", optional=True),
))

MEASURED = Schema("measured jobs", (
    Column("a", np.int32, "", "first tile of a job of the last window"),
    Column("b", np.int32, "", "second tile, -1 for a job of one tile"),
    Column("seconds", np.float64, "s", "the time it took"),
    Column("size", np.int64, "item", "its items"),
))


def kind_code(kind: str | int) -> int:
    """The code of a kind given by name (``request``, ``reply``, ``work``) or by code.

    Raises
    ------
    ShoalError
        For an unknown name or a code outside 0..2.
    """
    if isinstance(kind, str):
        if kind not in KINDS:
            raise ShoalError(f"unknown job kind {kind!r}; known: {', '.join(KINDS)}")
        return KINDS.index(kind)
    if not 0 <= int(kind) < len(KINDS):
        raise ShoalError(f"job kind must be 0..{len(KINDS) - 1} ({', '.join(KINDS)}), got {kind}")
    return int(kind)


def job_table(a, b=-1, *, cost, size, kind: str | int | list = "work", group=-1, job=None) -> dict[str, np.ndarray]:
    """A checked :data:`JOBS` table; scalars are repeated for every job.

    Parameters
    ----------
    a, b : int or array of int
        The tiles each job reads; ``b = -1`` for a job of one tile.
    cost : float or array of float
        Predicted cost of each job (seconds), >= 0.
    size : int or array of int
        Items of each job, >= 1.
    kind : str, int or sequence of them, default ``"work"``
        ``request``, ``reply`` or ``work`` (or their codes 0, 1, 2).
    group : int or array of int, default -1
        Explicit groups for ``locality``; -1 groups a job with the others of its tile pair.
    job : array of int, optional
        Global job ids, unique and >= 0; by default ``0 .. n - 1`` in the given order.

    Raises
    ------
    ShoalError
        For any value :func:`check_jobs` refuses.
    """
    a = np.atleast_1d(np.asarray(a))
    n = len(a)
    kinds = [kind] * n if isinstance(kind, (str, int, np.integer)) else list(kind)
    if len(kinds) != n:
        raise ShoalError(f"{len(kinds)} job kinds for {n} jobs")
    columns = {"job": np.arange(n) if job is None else job, "kind": [kind_code(k) for k in kinds], "a": a}
    for name, value in (("b", b), ("cost", cost), ("size", size), ("group", group)):
        value = np.asarray(value)
        if value.ndim == 0:
            value = np.full(n, value)
        columns[name] = value
    return check_jobs(columns)


def check_jobs(jobs: dict[str, np.ndarray], ntiles: int | None = None) -> dict[str, np.ndarray]:
    """``jobs`` as a :data:`JOBS` table with its dtypes, every value checked.

    Parameters
    ----------
    jobs : dict of arrays
        The columns of :data:`JOBS` (``group`` may be missing).
    ntiles : int, optional
        The number of tiles: ``a`` and ``b`` must name one of them.

    Raises
    ------
    ShoalError
        In one line naming the first bad job: a missing column, a value of the wrong type,
        a repeated or negative id, an unknown kind, a tile out of range, ``b == a``, a cost
        negative or not finite, a size below 1, a group below -1.
    """
    raw = {k: np.asarray(v) for k, v in jobs.items()}
    for name in JOBS.names:
        values = raw.get(name)
        if values is None:
            continue
        if values.ndim != 1:
            raise ShoalError(f"the jobs table's column {name!r} must be one-dimensional, got shape {values.shape}")
        if values.size and values.dtype.kind not in ("iuf" if name == "cost" else "iu"):
            kind = "numbers" if name == "cost" else "integers"
            raise ShoalError(f"the jobs table's column {name!r} must hold {kind}, got {values.dtype}")
    table = JOBS.table(raw)
    for name in ("job", "kind", "a", "b", "size", "group"):
        if name in table and not np.array_equal(table[name], raw[name]):
            dtype = np.dtype(JOBS.column(name).dtype).name
            raise ShoalError(f"the jobs table's column {name!r} holds integers too large for {dtype}")
    ids = table["job"]

    def refuse(bad: np.ndarray, what: str) -> None:
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ShoalError(f"job {ids[i]}: {what}")

    refuse(ids < 0, "job ids must be >= 0")
    if len(np.unique(ids)) != len(ids):
        values, counts = np.unique(ids, return_counts=True)
        raise ShoalError(f"job id {values[counts > 1][0]} appears more than once")
    kinds = ", ".join(f"{code} {name}" for code, name in enumerate(KINDS))
    refuse((table["kind"] < 0) | (table["kind"] >= len(KINDS)), f"kind must be one of {kinds}")
    refuse(table["a"] < 0, "tile a must be >= 0")
    refuse(table["b"] < -1, "tile b must be >= 0, or -1 for a job of one tile")
    refuse(table["b"] == table["a"], "reads tile a twice: give b = -1 for a job of one tile")
    if ntiles is not None:
        refuse((table["a"] >= ntiles) | (table["b"] >= ntiles), f"reads a tile outside 0..{ntiles - 1}")
    refuse(~np.isfinite(table["cost"]) | (table["cost"] < 0), "cost must be a finite number >= 0")
    refuse(table["size"] < 1, "size must be >= 1 item")
    if "group" in table:
        refuse(table["group"] < -1, "group must be >= 0, or -1 for the group of its tile pair")
    return table


# ----- costs from the last window ----------------------------------------------------------------


def pair_key(a: int, b: int) -> tuple[int, int]:
    """The unordered pair of a job's tiles ``a`` and ``b``, ``(min, max)``; ``(a, -1)`` for a job of
    one tile (``b = -1``)."""
    return (a, -1) if b < 0 else (min(a, b), max(a, b))


@dataclass(frozen=True)
class CostProfile:
    """Seconds per item by tile pair, measured over a window: predicts the next window's costs.

    The contact-mechanics paper (§V-A) predicts a collision pair's cost from the previous
    narrow phase and, to keep the bookkeeping small, gives all the pairs of one pair of
    partitions the same cost. Here: a pair's rate is its measured seconds over its measured
    items, summed over the window's rows of that unordered pair; a pair the window did not
    measure takes the window's mean rate (all seconds over all items). A job is predicted to
    cost its pair's rate times its size.

    Attributes
    ----------
    rates : dict
        Seconds per item of every measured pair, keyed by :func:`pair_key`.
    mean_rate : float
        Seconds per item over the whole window; NaN if the window measured nothing.
    """

    rates: dict[tuple[int, int], float]
    mean_rate: float

    @classmethod
    def from_measured(cls, measured: dict[str, np.ndarray]) -> CostProfile:
        """The profile of a :data:`MEASURED` table (rows: ``a``, ``b``, ``seconds``, ``size``).

        Raises
        ------
        ShoalError
            If a column is missing, a time is negative or not finite, a size is below 1 or a
            tile id below its range.
        """
        table = MEASURED.table(measured)
        seconds, size = table["seconds"], table["size"]
        if (~np.isfinite(seconds) | (seconds < 0)).any():
            raise ShoalError("measured job times must be finite numbers >= 0")
        if (size < 1).any():
            raise ShoalError("measured job sizes must be >= 1 item")
        if (table["a"] < 0).any() or (table["b"] < -1).any():
            raise ShoalError("measured jobs name tiles below 0 (b may be -1 for a job of one tile)")
        total_s: dict[tuple[int, int], float] = {}
        total_n: dict[tuple[int, int], int] = {}
        rows = np.lexsort((size, seconds, table["b"], table["a"]))  # sums in one order, whatever the rows' order
        columns = (table["a"][rows], table["b"][rows], seconds[rows], size[rows])
        for a, b, s, n in zip(*(c.tolist() for c in columns), strict=True):
            key = pair_key(a, b)
            total_s[key] = total_s.get(key, 0.0) + s
            total_n[key] = total_n.get(key, 0) + n
        items = int(size.sum())
        mean = float(sum(total_s.values()) / items) if items else float("nan")
        return cls({k: total_s[k] / total_n[k] for k in total_s}, mean)

    def predict(self, jobs: dict[str, np.ndarray]) -> np.ndarray:
        """Predicted seconds of every job of ``jobs`` (a :data:`JOBS` table), in its row order:
        its pair's rate, else the mean rate, times its size; a job with neither (the window
        measured nothing) keeps the cost the table gives it."""
        out = np.asarray(jobs["cost"], dtype=np.float64).copy()
        pairs = zip(jobs["a"].tolist(), jobs["b"].tolist(), strict=True)
        for i, (a, b) in enumerate(pairs):
            rate = self.rates.get(pair_key(a, b), self.mean_rate)
            if not np.isnan(rate):
                out[i] = rate * float(jobs["size"][i])
        return out


def job_costs(jobs: dict[str, np.ndarray], measured: dict[str, np.ndarray] | None = None) -> np.ndarray:
    """The cost of every job of ``jobs`` a policy balances: the table's own ``cost``, or, given
    the last window's ``measured`` rows, what :class:`CostProfile` predicts from them."""
    if measured is None:
        return np.asarray(jobs["cost"], dtype=np.float64)
    return CostProfile.from_measured(measured).predict(jobs)
