"""The record tables every run and replay writes: declared once, used everywhere.

A table is a dict of equally long NumPy columns. :data:`TASKS` has one row per task (one
phase of one tile in one step), :data:`MESSAGES` one row per halo payload from one tile to
another, :data:`BALANCE` one row per balancing step. The executors fill them, the MPI merge
combines them, the trace writes and reads them and the replay predicts them: every one of
them takes names, dtypes and units from here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import ShoalError


@dataclass(frozen=True)
class Column:
    """One column: its name, dtype, unit and what it holds."""

    name: str
    dtype: type
    unit: str
    description: str
    optional: bool = False  # older traces may not have it


@dataclass(frozen=True)
class Schema:
    """An ordered set of columns with the operations every table needs."""

    name: str
    columns: tuple[Column, ...]

    @property
    def names(self) -> tuple[str, ...]:
        """The column names, in schema order."""
        return tuple(c.name for c in self.columns)

    def column(self, name: str) -> Column:
        """The column called ``name``; raises ``KeyError`` if the schema has none."""
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(name)

    def empty(self, n: int = 0) -> dict[str, np.ndarray]:
        """A table of ``n`` zero rows with every column."""
        return {c.name: np.zeros(n, dtype=c.dtype) for c in self.columns}

    def table(self, columns: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The given columns with this schema's dtypes, checked for length; a missing optional
        column stays missing, a missing required one is an error."""
        out = {}
        for c in self.columns:
            if c.name in columns:
                out[c.name] = np.asarray(columns[c.name], dtype=c.dtype)
            elif not c.optional:
                raise ShoalError(f"the {self.name} table has no column {c.name!r}")
        if len({len(v) for v in out.values()}) > 1:
            raise ShoalError(f"the {self.name} table's columns have different lengths")
        return out

    def concat(self, tables: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
        """Rows of several tables one after another (columns every table has)."""
        if not tables:
            return self.empty()
        names = [n for n in self.names if all(n in t for t in tables)]
        return {n: np.concatenate([t[n] for t in tables]).astype(self.column(n).dtype, copy=False) for n in names}

    def select(self, table: dict[str, np.ndarray], rows) -> dict[str, np.ndarray]:
        """The rows ``rows`` (a mask, indices or a slice) of every column of ``table``."""
        return {k: v[rows] for k, v in table.items()}

    def from_rows(self, rows: list[tuple]) -> dict[str, np.ndarray]:
        """A table from tuples in column order (rows may stop before the optional columns)."""
        if not rows:
            return self.empty()
        width = min(len(r) for r in rows)
        return {c.name: np.array([r[i] for r in rows], dtype=c.dtype) for i, c in enumerate(self.columns[:width])}


TASKS = Schema("tasks", (
    Column("step", np.int32, "", "step of the task"),
    Column("phase", np.int16, "", "phase index within the step"),
    Column("tile", np.int32, "", "global tile id"),
    Column("node", np.int32, "", "node that ran the task"),
    Column("worker", np.int32, "", "worker thread within the node"),
    Column("start", np.float64, "s", "wall time since the run began when the task started"),
    Column("end", np.float64, "s", "wall time since the run began when the task ended"),
    Column("cost", np.float64, "s", "CPU time of the phase's kernel and of packing the task's halos"),
    Column("work", np.int64, "phase unit", "the app's own count of what the task did, in the unit its phase declares "
           "(Phase.work, kept in the /phases attribute work)"),
    Column("kernel", np.float64, "s", "part of cost spent in compiled code without the interpreter lock",
           optional=True),
    Column("kernel_calls", np.int32, "", "lock-free calls the task made (each lets go of the lock)", optional=True),
    Column("ready", np.float64, "s", "wall time since the run began when the task became ready: its last input "
           "(halo, reduction, its tile's previous task) had arrived and it was queued or taken directly by the "
           "worker that finished that tile's previous task; start - ready is the time it waited for a worker",
           optional=True),
    Column("iteration", np.int32, "", "iteration of the loop the phase repeats in (0 outside loops)", optional=True),
))

MESSAGES = Schema("messages", (
    Column("step", np.int32, "", "step of the task that reads the payload"),
    Column("phase", np.int16, "", "phase of the task that reads the payload"),
    Column("src", np.int32, "", "tile that packed the payload"),
    Column("dst", np.int32, "", "tile that reads it"),
    Column("bytes", np.int64, "B", "size of the payload"),
    Column("iteration", np.int32, "", "iteration of the loop the reading phase repeats in (0 outside loops)",
           optional=True),
))

REDUCTIONS = Schema("reductions", (
    Column("step", np.int32, "", "step of the phase that reduced"),
    Column("phase", np.int16, "", "the phase that reduced (its index)"),
    Column("operand", np.int16, "", "which of the phase's reduced values (0 for a phase that reduces one)"),
    Column("value", np.float64, "", "the value every tile read: the loop's last iteration's, where the phase repeats"),
))


def reduction_rows(reductions: dict, phases) -> dict[str, np.ndarray]:
    """``{(step, phase name): value}`` (a value, or a tuple of several) as :data:`REDUCTIONS`
    rows, by step, phase and operand.

    Parameters
    ----------
    reductions : dict
        An execution result's reductions.
    phases : sequence of str
        The app's phase names, in order.
    """
    index = {name: k for k, name in enumerate(phases)}
    return REDUCTIONS.from_rows(sorted((step, index[name], k, float(v)) for (step, name), value in reductions.items()
                                       for k, v in enumerate(np.atleast_1d(np.asarray(value, np.float64)))))


JOB_RUNS = Schema("job runs", (
    Column("step", np.int32, "", "step of the job phase the range ran in"),
    Column("iteration", np.int32, "", "iteration of the loop the job phase repeats in (0 outside loops)"),
    Column("phase", np.int16, "", "the job phase"),
    Column("job", np.int64, "", "global job id: the order the tiles emitted the jobs in (tile order)"),
    Column("kind", np.int8, "", "0 data request, 1 data reply, 2 work"),
    Column("a", np.int32, "", "first tile the job reads"),
    Column("b", np.int32, "", "second tile the job reads, -1 for a job of one tile"),
    Column("first", np.int64, "item", "first item of the range"),
    Column("stop", np.int64, "item", "one past the range's last item"),
    Column("node", np.int32, "", "node that ran the range"),
    Column("worker", np.int32, "", "worker thread within the node"),
    Column("start", np.float64, "s", "wall time since the run began when the range started"),
    Column("end", np.float64, "s", "wall time since the run began when the range ended"),
    Column("cost", np.float64, "s", "CPU time of the range"),
    Column("work", np.int64, "job unit", "the app's count of what the range did"),
    Column("predicted", np.float64, "s", "the job's predicted cost, shared by its ranges in proportion to items"),
    Column("fetched", np.int64, "B", "bytes of the tiles' inputs that came from another node"),
    Column("in_a", np.int64, "B", "bytes of the first tile's input (its payload for the jobs that read it)"),
    Column("in_b", np.int64, "B", "bytes of the second tile's input (0 for a job of one tile)"),
    Column("out_a", np.int64, "B", "bytes of the range's result for the first tile"),
    Column("out_b", np.int64, "B", "bytes of the range's result for the second tile (0 for a job of one tile)"),
))

BALANCE = Schema("balance", (
    Column("step", np.int32, "", "first step under the new placement"),
    Column("plan_s", np.float64, "s", "time the policy took to plan"),
    Column("moved", np.int32, "", "tiles that changed node"),
    Column("bytes", np.int64, "B", "bytes of state those tiles moved"),
    Column("lif_before", np.float64, "", "LIF of the last period's loads under the old placement"),
    Column("lif_after", np.float64, "", "LIF of the same loads under the new placement"),
    # Why it ran and what it cost (the adaptive trigger, shoal.placement.trigger).
    Column("decided", np.int32, "", "first step the trigger wanted a new placement at", optional=True),
    Column("imbalance_s", np.float64, "s", "time the imbalance cost since the last balancing step, beyond what its "
           "plan left (NaN: a fixed period)", optional=True),
    Column("threshold_s", np.float64, "s", "the cost that time was compared with (NaN: a fixed period)", optional=True),
    Column("cost_s", np.float64, "s", "what this balancing step cost per core", optional=True),
))

