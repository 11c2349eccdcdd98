"""The trace: what a run (or a replay) did, in one HDF5 file.

Schema ``shoal-trace`` version 1. Root attributes: ``schema``, ``version``, ``predicted``
(true for replays), ``app``, ``scenario``, ``phases`` (JSON list of phase names), ``config``
(JSON of the resolved configuration), ``shoal_version``.

``/tasks`` — one row per (step, phase, tile), the columns of :data:`shoal.records.TASKS`:
    ``step`` i4, ``phase`` i2, ``tile`` i4, ``node`` i4, ``worker`` i4 (worker within the node),
    ``start`` f8 and ``end`` f8 (seconds of wall time since the run began), ``cost`` f8
    (seconds of CPU time of the kernel and of packing the task's halos), ``work`` i8 (the
    app's own count: cells, particles, iterations), and, optional, ``kernel`` f8 (the part of
    ``cost`` spent in compiled kernels without the interpreter lock; absent means unknown) and
    ``kernel_calls`` i4 (how many such calls the task made: each lets go of the lock and
    takes it back), and ``ready`` f8 (seconds since the run began at which the task's last
    input arrived: ``start - ready`` is its wait for a worker). Every dataset carries
    ``units`` and ``description`` attributes.
``/messages`` — one row per halo payload from one tile to another, the columns of
    :data:`shoal.records.MESSAGES`: ``step`` i4 and ``phase`` i2 (of the task that reads it),
    ``src`` i4, ``dst`` i4, ``bytes`` i8. Messages between tiles of one node are listed too;
    a replay prices them as memory copies.
``/tiling`` — attributes ``grid``, ``halo``; datasets ``edges0``, ``edges1``[, ``edges2``].
``/cluster`` — dataset ``cores`` (per node, the worker threads at the first step it ran: the
    run's first step but for nodes that joined a resumed run later); attributes
    ``latency_s``, ``bandwidth_Bps``, ``overhead_s``. The nodes are the most the run had.
``/placement`` — ``from_step`` i4 (n,), ``owner`` i4 (n, tiles): owner table in force from
    each step on.
``/steps`` — ``step`` i4, ``end`` f8 (wall time at which the step's last task ended).

Optional groups, each with its own ``version`` attribute (absent: 1), so that a later shoal
adds groups without changing the schema's version, and older traces still read:

``/phases`` — ``barrier`` bool per phase: phases followed by a global barrier; ``lagged``
    bool per phase: the barrier holds the next phase of the step after; attribute ``work``, a
    JSON list of what each phase's ``work`` counts (its ``Phase.work``: "particle pairs", ...).
``/tiles`` — ``state_bytes`` i8 per tile: bytes a migration of the tile moves.
``/balance`` — one row per balancing step, the columns of :data:`shoal.records.BALANCE`.
``/communication`` (runs across processes) — per node, ``cpu_s`` f8 (CPU seconds of the
    thread that moved messages between processes) and ``messages`` i8 (tile-to-tile payloads
    it sent or received), over the whole run: what a replay charges per message sent or
    received.
``/workers`` — ``from_step`` i4 (n,) and ``cores`` i4 (n, nodes): the worker threads of
    every node from each step on (older traces have it only when they changed). Version 2:
    a node that was not part of the run over some steps (a run resumed on fewer nodes, or
    before it was resumed on more) holds 0 there, and is absent: no task runs on it, and
    loads, the LIF and the efficiency leave it out (:meth:`Trace.present`). A trace without
    such a row is written as version 1, which older readers take.
``/machine`` — ``model``: the machine model the run fitted from its own tasks when it ended
    (finished or stopped), as JSON (:class:`shoal.replay.machine.MachineModel`: per app and phase the
    seconds per unit of work and per task with the fit's R² and residual spread, the Python
    share likewise, the executor's dispatch, wake-up, lock wait per lock-free call and message
    CPU time, whether the nodes shared one interpreter lock, the host's CPU and cores). A
    replay prices the tasks' work with it (older traces without it replay measured costs).
``/committed`` — i8 (6,): how many rows of ``tasks``, ``messages``, ``steps``, ``placement``,
    ``workers`` and ``balance`` are complete. Rows past them belong to a chunk whose writer
    was killed, and are ignored (absent: every row is complete).

Every dataset carries ``units`` and ``description`` attributes. The tables that grow (all but
``/tiling``, ``/cluster``, ``/phases``, ``/tiles``, ``/communication``) are resizable, so a
run appends to its trace as it goes (:class:`TraceWriter`): a chunk of steps at a time,
flushed, then committed. A run killed at any moment leaves a trace of every completed chunk;
a resumed run carries its trace on from the checkpoint's step, on any number of nodes (the
steps before joined to its own: :func:`joined`). A whole trace (a replay's) is written to a
temporary name and renamed. Older shoal started a new ``trace.h5`` when a run was resumed on
another number of nodes and kept the earlier one beside it as ``trace-to-step-NNNNNN.h5``:
:meth:`Trace.read` of such a run folder joins them.

The writer keeps the file in HDF5's single-writer/multiple-reader (SWMR) mode, so the trace
can be read while the run goes, but only on a local file system: SWMR relies on POSIX write
ordering, which NFS and parallel file systems (Lustre, GPFS) do not give, and a reader there
may see torn metadata. On those, read the trace once the run has ended. A writer that was
killed leaves its file marked "open for write": :meth:`Trace.read` reads it anyway (in SWMR
read mode), and :func:`mark_closed` clears the mark so that any HDF5 reader opens it, as
``h5clear -s --increment=0`` does.

:meth:`Trace.read` checks what it reads, cheaply (vectorised, whatever the rows): the tiling's
edges against its grid, a grid of at most :data:`MAX_CELLS` cells, every index in range,
times and costs finite with costs, work and bytes not negative, and ``/committed`` counts no
larger than the rows stored. Each fault is one :class:`~shoal.errors.ShoalError` naming the
file, the dataset and the row.
"""

from __future__ import annotations

import ctypes
import fcntl
import json
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import h5py
import numpy as np

from .cluster import Cluster, Network
from .errors import ShoalError
from .files import atomic_path
from .imbalance import lif
from .records import BALANCE, MESSAGES, TASKS, Schema
from .tiling import Tiling

if TYPE_CHECKING:
    import pandas as pd

SCHEMA = "shoal-trace"
VERSION = 1
# The version of each optional group this shoal writes and reads (absent attribute: 1).
# 2 for /workers: a node absent over some steps holds 0 worker threads there.
GROUP_VERSIONS = {"phases": 1, "tiles": 1, "balance": 1, "communication": 1, "workers": 2, "machine": 1}
# The largest grid a trace may describe: 1024^3 cells. A run gathers its whole final state in
# one process and `shoal report` paints maps of one value per cell (a tile id and a load: 16 GiB
# at this size), so a larger grid is a damaged or crafted file, not a run.
MAX_CELLS = 2**30


@dataclass
class Trace:
    """A trace in memory: record tables plus the run's tiling, cluster and placements."""

    tasks: dict[str, np.ndarray]
    messages: dict[str, np.ndarray]
    phases: list[str]
    tiling: Tiling
    cluster: Cluster
    placement_steps: np.ndarray
    placement_owners: np.ndarray
    step_end: np.ndarray
    app: str = ""
    scenario: str = ""
    predicted: bool = False
    config: dict = field(default_factory=dict)
    barrier_phases: list[bool] | None = None  # phases followed by a global barrier (reductions)
    lagged_phases: list[bool] | None = None  # barriers that hold the next phase a step later
    tile_bytes: np.ndarray | None = None  # bytes of state per tile at the start (migration cost)
    balance: dict[str, np.ndarray] | None = None  # one row per balancing step (shoal.records.BALANCE)
    communication: dict[str, np.ndarray] | None = None  # per node: ``cpu_s``, ``messages``
    worker_steps: np.ndarray | None = None  # steps from which ``worker_cores`` hold
    worker_cores: np.ndarray | None = None  # (changes, nodes) worker threads per node
    machine: dict | None = None  # the machine model the run fitted (shoal.replay.machine.MachineModel.to_dict)
    work_units: list[str] | None = None  # what each phase's ``work`` counts (its ``Phase.work``)

    def __post_init__(self):
        self.tasks = TASKS.table(self.tasks)
        self.messages = MESSAGES.table(self.messages)
        if self.barrier_phases is None:
            self.barrier_phases = [False] * len(self.phases)
        if self.lagged_phases is None:
            self.lagged_phases = [False] * len(self.phases)
        if self.balance is not None:
            self.balance = BALANCE.table(self.balance)
        if self.worker_steps is None:
            first = int(self.tasks["step"].min()) if len(self.tasks["step"]) else 0
            self.worker_steps = np.array([first])
            self.worker_cores = np.array([self.cluster.cores])
        self.worker_steps = np.asarray(self.worker_steps, dtype=np.int64)
        self.worker_cores = np.asarray(self.worker_cores, dtype=np.int64).reshape(len(self.worker_steps),
                                                                                  self.cluster.nodes)
        self.placement_steps = np.asarray(self.placement_steps, dtype=np.int64)
        self.placement_owners = np.asarray(self.placement_owners).reshape(len(self.placement_steps),
                                                                          self.tiling.ntiles)

    @classmethod
    def of_run(cls, result, phases, tiling: Tiling, cluster: Cluster, placements: list[tuple[int, np.ndarray]],
               workers: list[tuple[int, tuple[int, ...]]] | None = None, **meta) -> Trace:
        """The trace of an executor's result (an ``ExecutionResult``) run with ``phases``:
        ``placements`` and ``workers`` list (first step, owner table) and (first step, worker
        threads per node) as they changed; ``meta`` fills the other fields."""
        workers = workers or [(result.first_step, cluster.cores)]
        return cls(
            tasks=result.tasks, messages=result.messages, phases=[p.name for p in phases], tiling=tiling,
            cluster=Cluster(tuple(workers[0][1]), cluster.network),
            placement_steps=np.array([step for step, _ in placements]),
            placement_owners=np.stack([o for _, o in placements]),
            step_end=result.step_end, barrier_phases=[p.reduction is not None for p in phases],
            lagged_phases=[p.lagged for p in phases], work_units=[p.work for p in phases],
            communication=None if result.comm_cpu_s is None else {"cpu_s": result.comm_cpu_s,
                                                                  "messages": result.comm_messages},
            worker_steps=np.array([s for s, _ in workers]), worker_cores=np.array([c for _, c in workers]),
            **meta,
        )

    # ----- derived views ---------------------------------------------------------------------
    @property
    def message_cpu_s(self) -> float:
        """CPU seconds the run spent per tile-to-tile payload sent or received between
        processes (0 for runs in one process)."""
        c = self.communication
        if c is None or c["messages"].sum() == 0:
            return 0.0
        return float(c["cpu_s"].sum() / c["messages"].sum())

    @property
    def steps(self) -> np.ndarray:
        """The distinct steps that have tasks in the trace, sorted."""
        return np.unique(self.tasks["step"])

    @property
    def resized(self) -> bool:
        """Whether any node's worker threads changed during the run."""
        return len(self.worker_steps) > 1

    def owner_at(self, step: int) -> np.ndarray:
        """The node of every tile during ``step``: the latest owner table that took effect at or
        before it (the first one for a step before any)."""
        i = int(np.searchsorted(self.placement_steps, step, side="right")) - 1
        return self.placement_owners[max(i, 0)]

    def cores_per_step(self) -> np.ndarray:
        """Worker threads (cores) of every node at every step: shape (steps, nodes)."""
        i = np.searchsorted(self.worker_steps, self.steps, side="right") - 1
        return self.worker_cores[np.maximum(i, 0)]

    def present(self) -> np.ndarray:
        """Which nodes were part of the run at every step: shape (steps, nodes), false where a
        node held no worker threads (a run resumed on fewer nodes, or before more joined it)."""
        return self.cores_per_step() > 0

    def node_load(self) -> np.ndarray:
        """Per-step, per-node load: CPU seconds of its tasks divided by the cores it held (0
        where it held none: see :meth:`present`)."""
        steps = self.steps
        s_idx = np.searchsorted(steps, self.tasks["step"])
        load = np.zeros((len(steps), self.cluster.nodes))
        np.add.at(load, (s_idx, self.tasks["node"]), self.tasks["cost"])
        cores = self.cores_per_step()
        return np.divide(load, cores, out=np.zeros_like(load), where=cores > 0)

    def step_lif(self) -> np.ndarray:
        """The load-imbalance factor of every step over the nodes present at it (:meth:`present`)."""
        return np.atleast_1d(lif(self.node_load(), self.present()))

    def tile_cost(self) -> np.ndarray:
        """Per-step, per-tile CPU seconds (all phases summed)."""
        steps = self.steps
        s_idx = np.searchsorted(steps, self.tasks["step"])
        out = np.zeros((len(steps), self.tiling.ntiles))
        np.add.at(out, (s_idx, self.tasks["tile"]), self.tasks["cost"])
        return out

    def phase_table(self, column: str = "cost") -> np.ndarray:
        """A task column summed per step, phase and tile: shape (steps, phases, tiles)."""
        cost = np.zeros((len(self.steps), len(self.phases), self.tiling.ntiles))
        s_idx = np.searchsorted(self.steps, self.tasks["step"])
        np.add.at(cost, (s_idx, self.tasks["phase"], self.tasks["tile"]), self.tasks[column])
        return cost

    def with_tasks(self, **columns) -> Trace:
        """This trace with some task columns replaced."""
        return replace(self, tasks={**self.tasks, **columns})

    # ----- I/O --------------------------------------------------------------------------------
    def write(self, path: str | Path) -> Path:
        """The whole trace, atomically (a reader sees the old file or this one)."""
        path = Path(path)
        with atomic_path(path) as tmp, h5py.File(tmp, "w", libver=LIBVER) as f:
            _create(f, self)
        return path

    @classmethod
    def read(cls, path: str | Path) -> Trace:
        """The trace at ``path`` (a file, or a run folder holding ``trace.h5``); every way a
        file can be damaged is one :class:`~shoal.errors.ShoalError` naming it. A run folder
        that older shoal split in parts (``trace-to-step-NNNNNN.h5`` beside ``trace.h5``, for
        a run resumed on another number of nodes) reads as one trace (:func:`joined`)."""
        path = Path(path)
        if path.is_dir():
            if any(path.glob(f"{PART_PREFIX}*.h5")):
                return _read_parts(cls, path)
            path = path / "trace.h5"
        if not path.exists():
            raise ShoalError(f"no trace at {path}")
        try:
            f = _open_for_reading(path)
        except OSError as exc:
            raise ShoalError(f"{path} is not a readable trace (truncated or not HDF5): {_first_line(exc)}") from None
        try:
            with f:
                return _read(cls, f, path)
        except ShoalError:
            raise
        except (OSError, RuntimeError, ValueError, TypeError, KeyError) as exc:
            raise ShoalError(f"{path} is a damaged trace (truncated?): {_first_line(exc)}") from None

    def truncated(self, step: int) -> Trace:
        """The trace of the steps before ``step`` (what a run resumed at ``step`` carries on):
        placements and worker threads that took effect before it, balancing steps up to it."""
        t, m = self.tasks, self.messages
        keep_steps = self.steps < step
        placed, workers = self.placement_steps < step, self.worker_steps < step
        return replace(
            self, tasks=TASKS.select(t, t["step"] < step), messages=MESSAGES.select(m, m["step"] < step),
            step_end=np.asarray(self.step_end)[keep_steps],
            placement_steps=self.placement_steps[placed], placement_owners=self.placement_owners[placed],
            worker_steps=self.worker_steps[workers], worker_cores=self.worker_cores[workers],
            balance=None if self.balance is None else BALANCE.select(self.balance, self.balance["step"] <= step))

    def to_pandas(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        """The task and message tables as pandas DataFrames (needs ``pip install shoal[analysis]``).

        Returns
        -------
        tasks, messages : pandas.DataFrame
            One row per task and per halo payload, columns as in :data:`shoal.records.TASKS`
            and :data:`shoal.records.MESSAGES`; each column's unit is in ``df.attrs["units"]``.
        """
        try:
            import pandas as pd
        except ImportError:
            raise ShoalError("Trace.to_pandas needs pandas: pip install shoal[analysis]") from None
        out = []
        for schema, table in ((TASKS, self.tasks), (MESSAGES, self.messages)):
            df = pd.DataFrame({name: table[name] for name in schema.names if name in table})
            df.attrs["units"] = {c.name: c.unit for c in schema.columns if c.name in table}
            out.append(df)
        return out[0], out[1]


class TraceWriter:
    """A run's trace file, grown one chunk at a time while the run goes.

    The file starts as ``start`` (the header with no steps, or what a resumed run carries on),
    written atomically, and is then kept open in HDF5's single-writer/multiple-reader (SWMR)
    mode: every :meth:`append` grows the tables, flushes them, and only then raises
    ``/committed``, so a process killed at any moment leaves a file whose committed rows are
    every completed chunk (the reader ignores rows past them). While it writes, the writer holds
    a shared ``flock`` on the file (HDF5 lets go of its own lock in SWMR mode): readers open
    it, :func:`mark_closed` and other writers do not, and a killed writer's lock goes with it.
    """

    def __init__(self, path: str | Path, start: Trace, resumed_at: int | None = None):
        self.path = Path(start.write(path))
        self.clock = float(start.step_end[-1]) if len(start.step_end) else 0.0  # wall time so far
        self.communication = None if start.communication is None else dict(start.communication)
        self.nodes = start.cluster.nodes  # a part of the run on fewer nodes leaves the others at 0
        self.oversubscribed = False
        self._last = {"placement": start.placement_owners[-1] if len(start.placement_steps) else None,
                      "workers": start.worker_cores[-1] if len(start.worker_steps) else None}
        self._resumed_at = resumed_at
        self._file = h5py.File(self.path, "a", libver=LIBVER)
        self._file.swmr_mode = True
        self._lock = os.open(self.path, os.O_RDONLY)
        try:
            fcntl.flock(self._lock, fcntl.LOCK_SH)  # "being written": see mark_closed
        except OSError:
            pass  # a file system without locks: mark_closed cannot take its lock either, and leaves the file be

    def append(self, result=None, placements=(), workers=(), balance_rows=()) -> None:
        """Append one chunk and only then raise ``/committed``, so a chunk cut short by a kill
        is ignored by readers.

        Parameters
        ----------
        result : ExecutionResult or None
            The steps since the last chunk, every process's rows combined; ``None`` if none ran.
            Task times are shifted by the run's clock (seconds since the run began).
        placements : iterable of (int, numpy.ndarray)
            ``(step, owner)`` owner tables that took effect since the last chunk.
        workers : iterable of (int, numpy.ndarray)
            ``(step, cores)`` worker threads per node that took effect since the last chunk.
        balance_rows : sequence of tuple
            New ``/balance`` rows, in the column order of ``BALANCE``.
        """
        f, rows = self._file, dict(zip(COMMITTED, (int(n) for n in self._file["committed"][()]), strict=True))
        if result is not None and result.steps:
            tasks = dict(result.tasks)
            for column in ("start", "end", "ready"):  # seconds since the run (not this chunk) began
                if column in tasks:
                    tasks[column] = tasks[column] + self.clock
            rows["tasks"] = _append_columns(f["tasks"], tasks)
            rows["messages"] = _append_columns(f["messages"], result.messages)
            steps = np.arange(result.first_step, result.first_step + result.steps)
            rows["steps"] = _append_columns(f["steps"], {"step": steps, "end": result.step_end + self.clock})
            self.clock += result.wall_s
            self.oversubscribed |= bool(result.oversubscribed)
            if result.comm_cpu_s is not None and "communication" in f:
                c = self.communication or {"cpu_s": 0.0, "messages": 0}
                self.communication = {"cpu_s": c["cpu_s"] + self._per_node(result.comm_cpu_s),
                                      "messages": c["messages"] + self._per_node(result.comm_messages)}
                for name, values in self.communication.items():
                    f["communication"][name][...] = values
        for group, column, entries in (("placement", "owner", placements), ("workers", "cores", workers)):
            for step, value in entries:
                value = self._per_node(value) if group == "workers" else np.asarray(value)
                seam = step == self._resumed_at and self._last[group] is not None
                if seam and np.array_equal(value, self._last[group]):
                    continue  # the resumed run starts where the carried-on history already is
                rows[group] = _append_columns(f[group], {"from_step": [step], column: value[None]})
                self._last[group] = value
        if len(balance_rows) and "balance" in f:
            rows["balance"] = _append_columns(f["balance"], BALANCE.from_rows(list(balance_rows)))
        for name in f:
            if isinstance(f[name], h5py.Group):
                for ds in f[name].values():
                    ds.flush()
        f["committed"][...] = [rows[name] for name in COMMITTED]  # the chunk is complete only now
        f["committed"].flush()
        f.flush()

    def _per_node(self, values) -> np.ndarray:
        """Per-node ``values`` of this part of the run, for every node of the trace (0 for
        those the part lacks)."""
        values = np.asarray(values)
        return np.pad(values, (0, self.nodes - len(values)))

    def close(self) -> None:
        """Close the file and let go of its lock (:func:`mark_closed` waits for it); closing
        twice does nothing."""
        if self._file.id.valid:
            self._file.close()
            os.close(self._lock)  # after the file: HDF5 would refuse to reopen it beside our lock


LIBVER = ("v110", "latest")  # the oldest file format that SWMR appending needs
# Growing tables, in the order of the ``/committed`` row counts.
COMMITTED = ("tasks", "messages", "steps", "placement", "workers", "balance")
# Units and descriptions of the datasets that are not table columns.
DATASETS = {
    "steps/step": ("", "step"),
    "steps/end": ("s", "wall time since the run began at which the step's last task ended"),
    "placement/from_step": ("", "first step of the owner table"),
    "placement/owner": ("", "node of every tile (rows: owner tables, columns: tiles)"),
    "workers/from_step": ("", "first step of the worker threads"),
    "workers/cores": ("", "worker threads of every node (rows: changes, columns: nodes)"),
    "tiling/edges": ("cells", "cell index where each tile slab begins along the axis, and the grid's end"),
    "cluster/cores": ("", "worker threads per node at the first step"),
    "phases/barrier": ("", "whether the phase is followed by a global barrier"),
    "phases/lagged": ("", "whether the barrier holds the next phase of the step after"),
    "tiles/state_bytes": ("B", "bytes of state a migration of the tile moves"),
    "communication/cpu_s": ("s", "CPU time of the thread that moved messages between processes, per node"),
    "communication/messages": ("", "tile-to-tile payloads that thread sent or received, per node"),
    "machine/model": ("", "the machine model the run fitted from its tasks, JSON (shoal.replay.machine)"),
    "committed": ("", "complete rows of tasks, messages, steps, placement, workers, balance"),
}


def _create(f: h5py.File, t: Trace) -> None:
    """Every group of ``t``, growing tables as resizable datasets."""
    from .version import __version__

    f.attrs.update(schema=SCHEMA, version=VERSION, predicted=bool(t.predicted), app=t.app, scenario=t.scenario,
                   phases=json.dumps(list(t.phases)), config=json.dumps(t.config, default=str),
                   shoal_version=__version__)
    g = f.create_group("tiling")
    g.attrs.update(grid=list(t.tiling.grid), halo=t.tiling.halo)
    for a, e in enumerate(t.tiling.edges):
        _dataset(g, f"edges{a}", e, "tiling/edges")
    g = f.create_group("cluster")
    _dataset(g, "cores", np.asarray(t.cluster.cores, dtype=np.int32))
    net = t.cluster.network
    g.attrs.update(latency_s=net.latency_s, bandwidth_Bps=net.bandwidth_Bps, overhead_s=net.overhead_s)
    g = _optional_group(f, "phases")
    _dataset(g, "barrier", np.asarray(t.barrier_phases, dtype=bool))
    _dataset(g, "lagged", np.asarray(t.lagged_phases, dtype=bool))
    if t.work_units is not None:
        g.attrs["work"] = json.dumps(list(t.work_units))
    if t.tile_bytes is not None:
        _dataset(_optional_group(f, "tiles"), "state_bytes", np.asarray(t.tile_bytes, np.int64))
    if t.machine is not None:
        _write_machine(f, t.machine)
    if t.communication is not None:
        g = _optional_group(f, "communication")
        _dataset(g, "cpu_s", np.asarray(t.communication["cpu_s"], np.float64))
        _dataset(g, "messages", np.asarray(t.communication["messages"], np.int64))
    rows = {"tasks": _growing(f.create_group("tasks"), TASKS, t.tasks),
            "messages": _growing(f.create_group("messages"), MESSAGES, t.messages),
            "steps": _growing(f.create_group("steps"), None, {"step": t.steps.astype(np.int32),
                                                               "end": np.asarray(t.step_end, np.float64)}),
            "placement": _growing(f.create_group("placement"), None, {
                "from_step": np.asarray(t.placement_steps, np.int32),
                "owner": np.asarray(t.placement_owners, np.int32).reshape(-1, t.tiling.ntiles)}),
            "workers": _growing(_optional_group(f, "workers", 2 if (t.worker_cores == 0).any() else 1), None, {
                "from_step": t.worker_steps.astype(np.int32), "cores": t.worker_cores.astype(np.int32)}),
            "balance": _growing(_optional_group(f, "balance"), BALANCE, t.balance) if t.balance is not None else 0}
    _dataset(f, "committed", np.array([rows[name] for name in COMMITTED], dtype=np.int64))


def _dataset(group, name: str, data, key: str | None = None):
    ds = group.create_dataset(name, data=data)
    ds.attrs.update(zip(("units", "description"), DATASETS[key or ds.name.lstrip("/")], strict=True))
    return ds


def _growing(group, schema: Schema | None, table: dict[str, np.ndarray]) -> int:
    """Resizable, compressed datasets of a table's columns (chunks of rows); returns the rows."""
    for name, values in table.items():
        values = np.asarray(values)
        unit, description = ((schema.column(name).unit, schema.column(name).description) if schema is not None
                             else DATASETS[f"{group.name.lstrip('/')}/{name}"])
        row_bytes = values.dtype.itemsize * int(np.prod(values.shape[1:], dtype=np.int64))
        chunk_rows = max(1, min(8192, 2**20 // max(1, row_bytes)))  # chunks of at most about 1 MiB
        ds = group.create_dataset(name, data=values, maxshape=(None, *values.shape[1:]),
                                  chunks=(chunk_rows, *values.shape[1:]), compression="gzip", compression_opts=1,
                                  shuffle=True)
        ds.attrs.update(units=unit, description=description)
    return len(next(iter(table.values()))) if table else 0


def _append_columns(group, table: dict[str, np.ndarray]) -> int:
    """Rows added at the end of a group's resizable columns; returns the rows it now has."""
    n = 0
    for name, values in table.items():
        if name not in group:
            continue  # a column the file was created without (an optional one)
        ds, values = group[name], np.asarray(values)
        n = ds.shape[0]
        ds.resize(n + len(values), axis=0)
        ds[n:] = values
        n += len(values)
    return n


OPEN_FOR_WRITE = "already open for write"  # HDF5's words for a file whose writer never closed it


def _open_for_reading(path: Path) -> h5py.File:
    """The file opened for reading; one whose writer was killed (it still says it is open for
    writing) in SWMR read mode, the mode made for reading files a writer may still be growing."""
    try:
        return h5py.File(path, "r")
    except OSError as exc:
        if OPEN_FOR_WRITE not in str(exc):
            raise
    # HDF5 retries a SWMR read whose checksum fails, up to 100 times with growing pauses (a
    # writer may be midway): a damaged file would take minutes to refuse. One attempt here.
    fapl = h5py.h5p.create(h5py.h5p.FILE_ACCESS)
    fapl.set_libver_bounds(h5py.h5f.LIBVER_V110, h5py.h5f.LIBVER_LATEST)
    set_attempts = _hdf5_function("H5Pset_metadata_read_attempts", [ctypes.c_int64, ctypes.c_uint])
    if set_attempts is not None:
        set_attempts(fapl.id, 1)
    return h5py.File(h5py.h5f.open(bytes(path), h5py.h5f.ACC_RDONLY | h5py.h5f.ACC_SWMR_READ, fapl=fapl))


def mark_closed(path: str | Path) -> bool:
    """Mark the trace of a killed run closed, so that any HDF5 reader opens it.

    A run keeps its trace open for SWMR writing; killed, it leaves the file's superblock saying
    "open for write", and plain ``h5py.File(path)`` (or ``h5dump``) refuses it until the flag
    is cleared. This clears it as ``h5clear -s`` does (HDF5's ``clear_status_flags`` file
    access property), and moves the end of the file's data the superblock records to the
    file's end, as ``h5clear --increment=0`` does (``H5Fincrement_filesize``): a writer killed
    between flushing a chunk's datasets and the file leaves it short of that chunk, and plain
    readers would refuse it ("addr overflow"). Only a file nobody writes is touched: a live
    :class:`TraceWriter` holds a shared lock on it, and this takes an exclusive one first. Rows
    past ``/committed`` stay where they are (readers ignore them).

    Parameters
    ----------
    path : str or Path
        A ``trace.h5`` or a run folder holding one.

    Returns
    -------
    bool
        True if the flag was cleared; False if the file was not marked, is being written, is
        missing or is not HDF5 (:meth:`Trace.read` says what is wrong with it), or the HDF5
        library does not expose ``H5Pset``.
    """
    path = Path(path)
    if path.is_dir():
        path = path / "trace.h5"
    try:
        lock = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fapl = h5py.h5p.create(h5py.h5p.FILE_ACCESS)
        fapl.set_file_locking(False, True)  # the lock taken above stands for HDF5's own
        try:
            h5py.h5f.open(bytes(path), h5py.h5f.ACC_RDONLY, fapl=fapl).close()
            return False  # not marked
        except OSError as exc:
            if OPEN_FOR_WRITE not in str(exc):
                return False
        set_property = _hdf5_function("H5Pset", [ctypes.c_int64, ctypes.c_char_p, ctypes.c_void_p])
        clear = ctypes.c_bool(True)
        if set_property is None or set_property(fapl.id, b"clear_status_flags", ctypes.byref(clear)) < 0:
            return False
        file = h5py.h5f.open(bytes(path), h5py.h5f.ACC_RDWR, fapl=fapl)
        try:
            # the end of allocation a killed writer's superblock records may fall short of its last
            # chunk: set to the file's end, as h5clear --increment=0 does
            grow = _hdf5_function("H5Fincrement_filesize", [ctypes.c_int64, ctypes.c_uint64])
            if grow is not None:
                grow(file.id, 0)
        finally:
            file.close()
        return True
    except BlockingIOError:
        return False  # a live writer holds it
    except OSError:
        return False  # damaged beyond what clearing a flag mends: Trace.read names the fault
    finally:
        os.close(lock)


def _hdf5_function(name: str, argtypes: list):
    """A function of the HDF5 library h5py loaded that h5py does not wrap, taking ``argtypes``
    and returning an ``int`` (None if not found)."""
    try:
        with open("/proc/self/maps") as maps:
            libraries = {line.split()[-1] for line in maps if "libhdf5" in line and "_hl" not in line}
        function = getattr(ctypes.CDLL(sorted(libraries)[0]), name)
    except (OSError, IndexError, AttributeError):
        return None
    function.argtypes, function.restype = argtypes, ctypes.c_int
    return function


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _read(cls, f: h5py.File, path: Path) -> Trace:
    """A trace from an open file, each part checked (see :meth:`Trace.read`)."""
    def need(name: str):
        if name not in f:
            raise ShoalError(f"{path} is missing /{name}: not a complete trace")
        return f[name]

    def attr_json(name: str):
        try:
            return json.loads(f.attrs[name])
        except KeyError:
            raise ShoalError(f"{path} is missing the attribute {name!r}") from None
        except (TypeError, ValueError):
            raise ShoalError(f"{path}: attribute {name!r} is not valid JSON") from None

    if f.attrs.get("schema") != SCHEMA:
        raise ShoalError(f"{path} is not a shoal trace")
    try:
        version = int(f.attrs.get("version"))
    except (TypeError, ValueError):
        raise ShoalError(f"{path}: trace version {f.attrs.get('version')!r} is not a number") from None
    if version != VERSION:
        raise ShoalError(f"{path} has trace schema version {version}; this shoal reads {VERSION}")
    groups = {name: _optional(f, name, path) for name in GROUP_VERSIONS}
    committed = dict(zip(COMMITTED, f["committed"][()].tolist(), strict=True)) if "committed" in f else {}

    def rows(name: str, group) -> dict[str, np.ndarray]:
        """The committed rows of a growing group's datasets (rows past them: an unfinished chunk)."""
        n = committed.get(name)
        if n is None:
            return {k: ds[()] for k, ds in group.items()}
        stored = min((len(ds) for ds in group.values()), default=0)
        if not 0 <= n <= stored:
            raise ShoalError(f"{path}: /committed counts {n} rows of /{name}, which stores {stored}")
        return {k: ds[:n] for k, ds in group.items()}

    phases = attr_json("phases")
    if not isinstance(phases, list) or not all(isinstance(p, str) for p in phases):
        raise ShoalError(f"{path}: attribute 'phases' is not a JSON list of names")
    config = attr_json("config")
    g = need("tiling")
    grid = tuple(int(n) for n in g.attrs["grid"])
    edges = tuple(need(f"tiling/edges{a}")[()].astype(np.int64) for a in range(len(grid)))
    _check_grid(grid, edges, path)
    tiling = Tiling(grid, edges, int(g.attrs["halo"]))
    g = need("cluster")
    cluster = Cluster(tuple(int(c) for c in g["cores"][()]),
                      Network(*(float(g.attrs[k]) for k in ("latency_s", "bandwidth_Bps", "overhead_s"))))
    tasks = _checked(TASKS, rows("tasks", need("tasks")), path)
    messages = _checked(MESSAGES, rows("messages", need("messages")), path)
    placement = rows("placement", need("placement"))
    ph, workers = groups["phases"], groups["workers"]
    workers = rows("workers", workers) if workers is not None else None
    trace = cls(
        tasks=tasks, messages=messages, phases=phases, tiling=tiling, cluster=cluster,
        placement_steps=placement["from_step"], placement_owners=placement["owner"],
        step_end=rows("steps", need("steps"))["end"], app=str(f.attrs.get("app", "")),
        scenario=str(f.attrs.get("scenario", "")), predicted=bool(f.attrs.get("predicted", False)),
        config=config if isinstance(config, dict) else {},
        barrier_phases=[bool(b) for b in ph["barrier"][()]] if ph else None,
        lagged_phases=[bool(b) for b in ph["lagged"][()]] if ph and "lagged" in ph else None,
        tile_bytes=groups["tiles"]["state_bytes"][()] if groups["tiles"] else None,
        balance=_checked(BALANCE, rows("balance", groups["balance"]), path) if groups["balance"] else None,
        communication={k: groups["communication"][k][()] for k in ("cpu_s", "messages")}
        if groups["communication"] else None,
        worker_steps=workers["from_step"] if workers else None,
        worker_cores=workers["cores"] if workers else None,
        machine=_read_machine(groups["machine"], path) if groups["machine"] else None,
        work_units=_work_units(ph, len(phases), path) if ph and "work" in ph.attrs else None,
    )
    _check_indices(trace, path)
    _check_values(trace, path)
    return trace


def _work_units(group, phases: int, path: Path) -> list[str]:
    """The ``/phases`` group's ``work`` attribute: one unit per phase."""
    try:
        units = json.loads(group.attrs["work"])
    except (TypeError, ValueError):
        units = None
    if not (isinstance(units, list) and len(units) == phases and all(isinstance(u, str) for u in units)):
        raise ShoalError(f"{path}: /phases attribute 'work' is not a JSON list of {phases} unit names")
    return units


def _checked(schema: Schema, columns: dict[str, np.ndarray], path: Path) -> dict[str, np.ndarray]:
    missing = [c.name for c in schema.columns if not c.optional and c.name not in columns]
    if missing:
        raise ShoalError(f"{path} is missing /{schema.name}/{missing[0]}: not a complete trace")
    try:
        return schema.table(columns)
    except ShoalError as exc:
        raise ShoalError(f"{path}: {exc}") from None


def _check_indices(t: Trace, path: Path) -> None:
    """Every tile, node and phase index a table holds names one that exists."""
    T, N, P = t.tiling.ntiles, t.cluster.nodes, len(t.phases)
    checks = (("tasks", "tile", t.tasks["tile"], T), ("tasks", "phase", t.tasks["phase"], P),
              ("tasks", "node", t.tasks["node"], N), ("messages", "src", t.messages["src"], T),
              ("messages", "dst", t.messages["dst"], T), ("placement", "owner", t.placement_owners, N))
    for table, column, values, bound in checks:
        bad = (values < 0) | (values >= bound)
        if np.any(bad):
            raise ShoalError(f"{path}: /{table}/{column} holds {int(np.asarray(values)[bad].flat[0])}, outside "
                             f"0..{bound - 1}")
    if t.placement_owners.ndim != 2 or t.placement_owners.shape[1] != T:
        raise ShoalError(f"{path}: /placement/owner has shape {t.placement_owners.shape}, not (changes, {T} tiles)")
    if len(t.step_end) != len(t.steps):
        raise ShoalError(f"{path}: /steps has {len(t.step_end)} rows for {len(t.steps)} steps of tasks")
    _check_workers(t, path)


def _check_workers(t: Trace, path: Path) -> None:
    """Every ``/workers`` row gives some node a thread and none a negative count, and every
    task ran on a node that held threads at its step (0 threads: absent from the run there)."""
    cores = t.worker_cores
    bad = np.flatnonzero((cores < 0).any(axis=1) | (cores.sum(axis=1) <= 0))
    if len(bad):
        raise ShoalError(f"{path}: /workers/cores row {int(bad[0])} holds {cores[bad[0]].tolist()}: a node's "
                         "threads cannot be negative, and some node must have one")
    tasks = t.tasks
    if not len(cores):
        return  # a trace killed before its first chunk
    row = np.maximum(np.searchsorted(t.worker_steps, tasks["step"], side="right") - 1, 0)
    absent = np.flatnonzero(cores[row, tasks["node"]] == 0)
    if len(absent):
        k = int(absent[0])
        raise ShoalError(f"{path}: /tasks row {k} ran on node {int(tasks['node'][k])} at step "
                         f"{int(tasks['step'][k])}, where /workers gives that node no thread")


def store_machine(path: str | Path, model: dict) -> None:
    """Store the machine ``model`` fitted to a closed trace's run (:mod:`shoal.replay.machine`)
    as the ``/machine`` group of the trace file at ``path``, replacing one already there."""
    with h5py.File(path, "a", libver=LIBVER) as f:  # SWMR files take no new groups: reopened
        _write_machine(f, model)


def _check_grid(grid: tuple[int, ...], edges: tuple[np.ndarray, ...], path: Path) -> None:
    """A grid of 2 or 3 axes and at most :data:`MAX_CELLS` cells, cut along each axis at
    increasing edges from 0 to its size."""
    if len(grid) not in (2, 3) or min(grid) < 1:
        raise ShoalError(f"{path}: /tiling has grid {list(grid)}, not 2 or 3 positive sizes")
    cells = int(np.prod(grid, dtype=object))  # Python integers: no overflow
    if cells > MAX_CELLS:
        raise ShoalError(f"{path}: /tiling has a grid of {cells:.3g} cells ({' x '.join(map(str, grid))}), more "
                         f"than the {MAX_CELLS:.3g} a trace may describe")
    for axis, (n, e) in enumerate(zip(grid, edges, strict=True)):
        if e.ndim != 1 or len(e) < 2 or e[0] != 0 or e[-1] != n or np.any(np.diff(e) <= 0):
            raise ShoalError(f"{path}: /tiling/edges{axis} does not cut 0..{n} (the grid's axis {axis}) at increasing "
                             "positions")


def _check_values(t: Trace, path: Path) -> None:
    """Times finite; costs finite and not negative; work, lock-free calls and bytes not negative."""
    # (table, column, values, may it be negative, the rule): floats must be finite in any case
    checks = [("tasks", c, t.tasks[c], True, "times must be finite") for c in ("start", "end", "ready")
              if c in t.tasks]
    checks += [("tasks", c, t.tasks[c], False, "costs must be finite and non-negative") for c in ("cost", "kernel")
               if c in t.tasks]
    checks += [("tasks", c, t.tasks[c], False, "counts must be non-negative") for c in ("work", "kernel_calls")
               if c in t.tasks]
    checks += [("messages", "bytes", t.messages["bytes"], False, "sizes must be non-negative"),
               ("steps", "end", np.asarray(t.step_end), True, "times must be finite")]
    for table, column, values, signed, rule in checks:
        bad = ~np.isfinite(values) if values.dtype.kind == "f" else np.zeros(len(values), bool)
        if not signed:
            bad |= values < 0
        if np.any(bad):
            row = int(np.flatnonzero(bad)[0])
            raise ShoalError(f"{path}: /{table}/{column} holds {values[row]} at row {row} ({rule})")


def _write_machine(f: h5py.File, model: dict) -> None:
    """The ``/machine`` group holding ``model`` (replacing one already there)."""
    if "machine" in f:
        del f["machine"]
    _dataset(_optional_group(f, "machine"), "model", json.dumps(model))


def _read_machine(g, path: Path) -> dict:
    try:
        model = json.loads(g["model"][()])
    except (KeyError, TypeError, ValueError) as exc:
        raise ShoalError(f"{path}: /machine/model is not a machine model in JSON ({_first_line(exc)})") from None
    if not isinstance(model, dict):
        raise ShoalError(f"{path}: /machine/model is not a machine model in JSON")
    return model


def _optional_group(f, name: str, version: int | None = None):
    """A new optional group of ``version`` (by default the one this shoal reads: the oldest
    that holds what is written, where that is older, lets older shoal read it too)."""
    g = f.create_group(name)
    g.attrs["version"] = GROUP_VERSIONS[name] if version is None else version
    return g


def _optional(f, name: str, path: Path):
    """An optional group, if the file has it, after checking its version."""
    if name not in f:
        return None
    g = f[name]
    version = int(g.attrs.get("version", 1))
    if version > GROUP_VERSIONS[name]:
        raise ShoalError(f"{path}: group /{name} has version {version}, newer than this shoal reads "
                         f"({GROUP_VERSIONS[name]}): upgrade shoal")
    return g


# ----- a run recorded in parts ---------------------------------------------------------------
PART_PREFIX = "trace-to-step-"  # older shoal's name of the trace before a resume on other nodes


def joined(parts: list[Trace]) -> Trace:
    """One trace of a run recorded in ``parts``, in step order (a run and its resumed parts).

    The nodes are the most any part had; a node that a part lacks holds 0 worker threads over
    that part's steps (it is absent there: :meth:`Trace.present`), and ``/cluster/cores``
    holds each node's threads in the first part it was in. Task, message, step, placement,
    worker and balancing rows follow each other unchanged but for their times: each part's
    are counted from its own start, and shifted by the last step end of the parts before (a
    part with no steps shifts nothing). A part's first placement or worker row equal to the
    row in force before it is dropped: nothing changed there. The CPU time and payloads of
    message threads are summed per node; the setup (app, phases, tiling, configuration,
    tiles' sizes) is the first part's, the machine model the last one's that has one.

    Parameters
    ----------
    parts : list of Trace
        The run's parts in step order, each as its own trace held it (a part may have no
        steps yet: a resumed run's start, whose first ``/workers`` row gives its nodes).

    Returns
    -------
    Trace
        The run as one trace.

    Raises
    ------
    ShoalError
        If the parts differ in tiling or phases, or a part's steps do not all come after the
        steps of the parts before it.
    """
    first = parts[0]
    nodes = max(p.cluster.nodes for p in parts)
    for p in parts[1:]:
        if p.phases != first.phases or not _same_tiling(p.tiling, first.tiling):
            raise ShoalError("the parts of a run differ in their phases or tiling: they are not one run")

    def widen(rows: np.ndarray) -> np.ndarray:
        rows = np.asarray(rows, np.int64).reshape(len(rows), -1)
        return np.pad(rows, ((0, 0), (0, nodes - rows.shape[1])))

    tasks, messages, step_end = [], [], []
    history = {"placement": ([], []), "workers": ([], [])}  # (from steps, rows) of each part
    in_force = {"placement": None, "workers": None}  # the row in force at the end of the parts so far
    clock, last_step = 0.0, -1
    for p in parts:
        if len(p.steps) and p.steps[0] <= last_step:
            raise ShoalError(f"a part of the run starts at step {int(p.steps[0])}, not after step {last_step} "
                             "of the part before")
        shift = {c: p.tasks[c] + clock for c in ("start", "end", "ready") if c in p.tasks} if clock else {}
        tasks.append({**p.tasks, **shift})
        messages.append(p.messages)
        step_end.append(np.asarray(p.step_end, np.float64) + clock if clock else np.asarray(p.step_end, np.float64))
        for name, p_steps, p_rows in (("placement", p.placement_steps, np.asarray(p.placement_owners, np.int64)),
                                      ("workers", p.worker_steps, widen(p.worker_cores))):
            same = len(p_steps) and in_force[name] is not None and np.array_equal(p_rows[0], in_force[name])
            history[name][0].append(p_steps[1:] if same else p_steps)
            history[name][1].append(p_rows[1:] if same else p_rows)
            if len(p_steps):
                in_force[name] = p_rows[-1]
        if len(p.steps):
            clock, last_step = float(step_end[-1][-1]), int(p.steps[-1])
    (owner_steps, owners), (worker_steps, workers) = history["placement"], history["workers"]
    cores = [next(p.cluster.cores[n] for p in parts if n < p.cluster.nodes) for n in range(nodes)]
    balances = [p.balance for p in parts if p.balance is not None]
    comms = [p.communication for p in parts if p.communication is not None]
    return replace(
        first, tasks=TASKS.concat(tasks), messages=MESSAGES.concat(messages), step_end=np.concatenate(step_end),
        cluster=Cluster(tuple(cores), first.cluster.network),
        placement_steps=np.concatenate(owner_steps), placement_owners=np.concatenate(owners),
        worker_steps=np.concatenate(worker_steps), worker_cores=np.concatenate(workers),
        balance=BALANCE.concat(balances) if balances else None,
        communication={k: sum(np.pad(np.asarray(c[k]), (0, nodes - len(c[k]))) for c in comms)
                       for k in ("cpu_s", "messages")} if comms else None,
        machine=next((p.machine for p in reversed(parts) if p.machine is not None), None),
        work_units=next((p.work_units for p in parts if p.work_units is not None), None))


def _same_tiling(a: Tiling, b: Tiling) -> bool:
    return a.grid == b.grid and a.halo == b.halo and all(
        np.array_equal(x, y) for x, y in zip(a.edges, b.edges, strict=True))


def _read_parts(cls, folder: Path) -> Trace:
    """The trace of a run folder that older shoal split in parts: ``trace-to-step-NNNNNN.h5``
    holding the steps before ``NNNNNN`` (its rows past them, run after the checkpoint the run
    was resumed from, are dropped) and ``trace.h5`` the rest. A part ending after the first
    step of ``trace.h5`` is left out: ``trace.h5`` holds its steps already (this shoal
    resumed the run and carried them on)."""
    parts = []
    for path in folder.glob(f"{PART_PREFIX}*.h5"):
        step = path.name[len(PART_PREFIX):-len(".h5")]
        if step.isdigit():
            parts.append((int(step), path))
    last = folder / "trace.h5"
    rest = cls.read(last) if last.exists() else None
    start = int(rest.steps[0]) if rest is not None and len(rest.steps) else None
    read = [cls.read(path).truncated(step) for step, path in sorted(parts) if start is None or step <= start]
    read += [rest] if rest is not None else []
    if not read:
        raise ShoalError(f"no trace at {last}")
    try:
        return joined(read)
    except ShoalError as exc:
        raise ShoalError(f"{folder}: {exc}") from None


# ----- transformations ---------------------------------------------------------------------
def aggregate(trace: Trace, coarse: Tiling) -> Trace:
    """The trace of a coarser tiling nesting this one (sampi §II-C).

    A coarse tile's cost per (step, phase) is the sum of its fine tiles' costs (its work too);
    messages between fine tiles of one coarse tile are dropped, the others summed per
    (step, phase, coarse source, coarse destination). Timing columns are kept from the fine
    trace only where they still mean something (none: ``start``/``end`` become 0, ``ready`` goes).
    """
    fine_to_coarse = trace.tiling.fine_to_coarse(coarse)
    t = trace.tasks
    steps, P, C = trace.steps, len(trace.phases), coarse.ntiles
    s_idx = np.searchsorted(steps, t["step"])
    key = (s_idx * P + t["phase"]) * C + fine_to_coarse[t["tile"]]
    n = len(steps) * P * C
    cost = np.bincount(key, weights=t["cost"], minlength=n)
    work = np.bincount(key, weights=t["work"], minlength=n).astype(np.int64)
    extra = {c.name: np.bincount(key, weights=t[c.name], minlength=n).astype(c.dtype)
             for c in TASKS.columns if c.optional and c.name in t and c.name != "ready"}  # a time, like start
    grid_s, grid_p, grid_t = np.unravel_index(np.arange(n), (len(steps), P, C))
    m = trace.messages
    src, dst = fine_to_coarse[m["src"]], fine_to_coarse[m["dst"]]
    cross = src != dst
    ms = np.searchsorted(steps, m["step"][cross])
    mkey = ((ms * P + m["phase"][cross]) * C + src[cross]) * C + dst[cross]
    ukey, inverse = np.unique(mkey, return_inverse=True)
    mbytes = np.bincount(inverse, weights=m["bytes"][cross]).astype(np.int64)
    u_s, u_p, u_src, u_dst = np.unravel_index(ukey, (len(steps), P, C, C))
    cluster_owner = np.stack([_coarse_owner(o, fine_to_coarse, C) for o in trace.placement_owners])
    return replace(
        trace,
        tasks={"step": steps[grid_s], "phase": grid_p, "tile": grid_t, "node": np.zeros(n, np.int32),
               "worker": np.zeros(n, np.int32), "start": np.zeros(n), "end": np.zeros(n), "cost": cost,
               "work": work, **extra},
        messages={"step": steps[u_s], "phase": u_p, "src": u_src, "dst": u_dst, "bytes": mbytes},
        tiling=coarse, placement_owners=cluster_owner,
        tile_bytes=np.bincount(fine_to_coarse, weights=trace.tile_bytes, minlength=C).astype(np.int64)
        if trace.tile_bytes is not None else None,
    )


def _coarse_owner(owner: np.ndarray, fine_to_coarse: np.ndarray, ncoarse: int) -> np.ndarray:
    """Owner of each coarse tile: the node owning most of its fine tiles (lowest on ties)."""
    counts = np.zeros((ncoarse, int(owner.max()) + 1), dtype=np.int64)
    np.add.at(counts, (fine_to_coarse, owner), 1)
    return counts.argmax(axis=1)


def scaled(trace: Trace, speed: float) -> Trace:
    """The trace as it would be on cores ``speed`` times as fast (costs divided by ``speed``)."""
    if speed <= 0:
        raise ShoalError(f"core speed factor must be positive, got {speed}")
    faster = {k: trace.tasks[k] / speed for k in ("cost", "kernel") if k in trace.tasks}
    return replace(trace.with_tasks(**faster),
                   communication=None if trace.communication is None else
                   {"cpu_s": trace.communication["cpu_s"] / speed, "messages": trace.communication["messages"]})
