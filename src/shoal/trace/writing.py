"""Writing a trace: whole (a replay's, atomically), or appended chunk by chunk as a run goes
(:class:`TraceWriter`, in HDF5's single-writer/multiple-reader mode)."""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

import h5py
import numpy as np

from ..errors import ShoalError
from ..records import BALANCE, JOB_RUNS, MESSAGES, REDUCTIONS, TASKS, Schema, reduction_rows
from .schema import COMMITTED, DATASETS, LIBVER, SCHEMA, VERSION, _dataset, _optional_group

if TYPE_CHECKING:

    from .model import Trace


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
        self.phases = list(start.phases)
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
        if result is not None and getattr(result, "jobs", None) is not None and "jobs" in f:
            jobs = {**result.jobs, "start": result.jobs["start"] + self.clock - result.wall_s,
                    "end": result.jobs["end"] + self.clock - result.wall_s}
            f["jobs"]["committed"][...] = [_append_columns(f["jobs"], jobs)]  # flushed before /committed
        if result is not None and result.steps and "reductions" in f:
            rows_of = reduction_rows(result.reductions, self.phases)
            f["reductions"]["committed"][...] = [_append_columns(f["reductions"], rows_of)]
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

def _create(f: h5py.File, t: Trace) -> None:
    """Every group of ``t``, growing tables as resizable datasets."""
    from ..version import __version__

    f.attrs.update(schema=SCHEMA, version=VERSION, predicted=bool(t.predicted), app=t.app, scenario=t.scenario,
                   phases=json.dumps(list(t.phases)), config=json.dumps(t.config, default=str),
                   shoal_version=__version__)
    if t.tiling.kind == "cartesian":
        g = f.create_group("tiling")
        g.attrs.update(grid=list(t.tiling.grid), halo=t.tiling.halo)
        for a, e in enumerate(t.tiling.edges):
            _dataset(g, f"edges{a}", e, "tiling/edges")
    else:
        _write_decomposition(f, t.tiling)
    g = f.create_group("cluster")
    _dataset(g, "cores", np.asarray(t.cluster.cores, dtype=np.int32))
    net = t.cluster.network
    g.attrs.update(latency_s=net.latency_s, bandwidth_Bps=net.bandwidth_Bps, overhead_s=net.overhead_s)
    # Version 2 adds the loops: a trace without any stays readable by a reader of version 1.
    g = _optional_group(f, "phases", 2 if any(v >= 0 for v in t.loop_phases) or any(t.node_barrier_phases) else 1)
    _dataset(g, "barrier", np.asarray(t.barrier_phases, dtype=bool))
    _dataset(g, "lagged", np.asarray(t.lagged_phases, dtype=bool))
    if any(v >= 0 for v in t.loop_phases):
        _dataset(g, "loop", np.asarray(t.loop_phases, dtype=np.int32))
    if any(t.node_barrier_phases):
        _dataset(g, "node_barrier", np.asarray(t.node_barrier_phases, dtype=bool))
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
    for name, schema, table in (("jobs", JOB_RUNS, t.jobs), ("reductions", REDUCTIONS, t.reductions)):
        if table is not None:  # its own count of complete rows: /committed keeps its six
            g = _optional_group(f, name)
            _dataset(g, "committed", np.array([_growing(g, schema, table)], dtype=np.int64))
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

def _write_decomposition(f: h5py.File, d) -> None:
    """The ``/decomposition`` group of a mesh partition: its dict as the JSON attribute ``spec``
    but for the partition vector, which is a dataset, beside the mesh itself (so that the trace
    alone rebuilds the partition, its hash checked)."""
    if d.kind != "mesh":
        raise ShoalError(f"a trace stores a Cartesian tiling or a mesh partition, not a decomposition of kind "
                         f"{d.kind!r}")
    spec = {k: v for k, v in d.to_dict().items() if k != "part_of_element"}
    part = np.asarray(d.part_of_element, dtype=np.int32)
    g = _optional_group(f, "decomposition")
    g.attrs.update(kind=d.kind, spec=json.dumps(spec))
    packed = {"compression": "gzip", "compression_opts": 1, "shuffle": True}
    _dataset(g, "part_of_element", part, **packed)
    _dataset(g, "vertices", np.asarray(d.vertices, np.float64), **packed)
    _dataset(g, "elements", np.asarray(d.elements, np.int64), **packed)

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

def store_machine(path: str | Path, model: dict) -> None:
    """Store the machine ``model`` fitted to a closed trace's run (:mod:`shoal.replay.machine`)
    as the ``/machine`` group of the trace file at ``path``, replacing one already there."""
    with h5py.File(path, "a", libver=LIBVER) as f:  # SWMR files take no new groups: reopened
        _write_machine(f, model)

def _write_machine(f: h5py.File, model: dict) -> None:
    """The ``/machine`` group holding ``model`` (replacing one already there)."""
    if "machine" in f:
        del f["machine"]
    _dataset(_optional_group(f, "machine"), "model", json.dumps(model))
