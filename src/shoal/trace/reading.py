"""Reading a trace, checked (indices in range, values finite, counts within the rows stored),
and marking a killed writer's file closed so that any HDF5 reader opens it."""

from __future__ import annotations

import ctypes
import fcntl
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

import h5py
import numpy as np

from ..cluster import Cluster, Network
from ..decomposition import Decomposition, decomposition_from_dict
from ..errors import ShoalError
from ..records import BALANCE, JOB_RUNS, MESSAGES, REDUCTIONS, TASKS, Schema
from ..tiling import Tiling
from .parts import joined
from .schema import COMMITTED, GROUP_VERSIONS, MAX_CELLS, SCHEMA, VERSION, _first_line

if TYPE_CHECKING:

    from .model import Trace


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
    if groups["decomposition"] is not None:  # a mesh partition
        tiling = _read_decomposition(groups["decomposition"], path)
    else:
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
        loop_phases=[int(v) for v in ph["loop"][()]] if ph and "loop" in ph else None,
        node_barrier_phases=[bool(v) for v in ph["node_barrier"][()]] if ph and "node_barrier" in ph else None,
        tile_bytes=groups["tiles"]["state_bytes"][()] if groups["tiles"] else None,
        balance=_checked(BALANCE, rows("balance", groups["balance"]), path) if groups["balance"] else None,
        communication={k: groups["communication"][k][()] for k in ("cpu_s", "messages")}
        if groups["communication"] else None,
        worker_steps=workers["from_step"] if workers else None,
        worker_cores=workers["cores"] if workers else None,
        machine=_read_machine(groups["machine"], path) if groups["machine"] else None,
        work_units=_work_units(ph, len(phases), path) if ph and "work" in ph.attrs else None,
        jobs=_counted_rows(groups["jobs"], JOB_RUNS, path) if groups["jobs"] is not None else None,
        reductions=_counted_rows(groups["reductions"], REDUCTIONS, path) if groups["reductions"] is not None else None,
    )
    _check_indices(trace, path)
    _check_values(trace, path)
    return trace

def _counted_rows(group, schema, path: Path) -> dict[str, np.ndarray]:
    """The complete rows of a group that keeps its own ``committed`` count (``/jobs``,
    ``/reductions``)."""
    n = int(group["committed"][0]) if "committed" in group else 0
    columns = {k: ds for k, ds in group.items() if k != "committed"}
    stored = min((len(ds) for ds in columns.values()), default=0)
    if not 0 <= n <= stored:
        raise ShoalError(f"{path}: {group.name}/committed counts {n} rows, which {group.name} does not store "
                         f"({stored})")
    return _checked(schema, {k: ds[:n] for k, ds in columns.items()}, path)


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

def _read_decomposition(g, path: Path) -> Decomposition:
    """The mesh partition of a ``/decomposition`` group, its mesh checked against its hash."""
    if g.attrs.get("kind") != "mesh":
        raise ShoalError(f"{path}: /decomposition is of kind {g.attrs.get('kind')!r}, which this shoal does not read")
    for name in ("part_of_element", "vertices", "elements"):
        if name not in g:
            raise ShoalError(f"{path} is missing /decomposition/{name}: not a complete trace")
        if len(g[name]) > MAX_CELLS:
            raise ShoalError(f"{path}: /decomposition/{name} has {len(g[name]):.3g} rows, more than the "
                             f"{MAX_CELLS:.3g} a trace may describe")
    try:
        spec = json.loads(g.attrs["spec"])
        spec["part_of_element"] = g["part_of_element"][()]
    except (KeyError, TypeError, ValueError):
        raise ShoalError(f"{path}: /decomposition has no mesh partition in its attribute 'spec'") from None
    try:
        return decomposition_from_dict(spec, mesh=(g["vertices"][()], g["elements"][()]))
    except ShoalError as exc:
        raise ShoalError(f"{path}: /decomposition: {exc}") from None

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

def _read_machine(g, path: Path) -> dict:
    try:
        model = json.loads(g["model"][()])
    except (KeyError, TypeError, ValueError) as exc:
        raise ShoalError(f"{path}: /machine/model is not a machine model in JSON ({_first_line(exc)})") from None
    if not isinstance(model, dict):
        raise ShoalError(f"{path}: /machine/model is not a machine model in JSON")
    return model

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
