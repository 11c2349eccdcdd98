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
    takes it back). Every dataset carries ``units`` and ``description`` attributes.
``/messages`` — one row per halo payload from one tile to another, the columns of
    :data:`shoal.records.MESSAGES`: ``step`` i4 and ``phase`` i2 (of the task that reads it),
    ``src`` i4, ``dst`` i4, ``bytes`` i8. Messages between tiles of one node are listed too;
    a replay prices them as memory copies.
``/tiling`` — attributes ``grid``, ``halo``; datasets ``edges0``, ``edges1``[, ``edges2``].
``/cluster`` — dataset ``cores`` (per node, at the first step); attributes ``latency_s``,
    ``bandwidth_Bps``, ``overhead_s``.
``/placement`` — ``from_step`` i4 (n,), ``owner`` i4 (n, tiles): owner table in force from
    each step on.
``/steps`` — ``step`` i4, ``end`` f8 (wall time at which the step's last task ended).

Optional groups, each with its own ``version`` attribute (absent: 1), so that a later shoal
adds groups without changing the schema's version, and older traces still read:

``/phases`` — ``barrier`` bool per phase: phases followed by a global barrier; ``lagged``
    bool per phase: the barrier holds the next phase of the step after.
``/tiles`` — ``state_bytes`` i8 per tile: bytes a migration of the tile moves.
``/balance`` — one row per balancing step, the columns of :data:`shoal.records.BALANCE`.
``/communication`` (runs across processes) — per node, ``cpu_s`` f8 (CPU seconds of the
    thread that moved messages between processes) and ``messages`` i8 (tile-to-tile payloads
    it sent or received): what a replay charges per message sent or received.
``/workers`` (runs whose nodes changed their worker threads) — ``from_step`` i4 (n,) and
    ``cores`` i4 (n, nodes): the worker threads of every node from each step on.

Files are written to a temporary name and renamed, so a trace on disk is always complete.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, replace
from pathlib import Path

import h5py
import numpy as np

from .cluster import Cluster, Network
from .errors import ShoalError
from .records import BALANCE, MESSAGES, TASKS, Schema
from .tiling import Tiling

SCHEMA = "shoal-trace"
VERSION = 1
# The version of each optional group this shoal writes and reads (absent attribute: 1).
GROUP_VERSIONS = {"phases": 1, "tiles": 1, "balance": 1, "communication": 1, "workers": 1}


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
        self.worker_cores = np.asarray(self.worker_cores, dtype=np.int64).reshape(len(self.worker_steps), -1)

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
            lagged_phases=[p.lagged for p in phases],
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
        return np.unique(self.tasks["step"])

    @property
    def resized(self) -> bool:
        """Whether any node's worker threads changed during the run."""
        return len(self.worker_steps) > 1

    def owner_at(self, step: int) -> np.ndarray:
        i = int(np.searchsorted(self.placement_steps, step, side="right")) - 1
        return self.placement_owners[max(i, 0)]

    def cores_per_step(self) -> np.ndarray:
        """Worker threads (cores) of every node at every step: shape (steps, nodes)."""
        i = np.searchsorted(self.worker_steps, self.steps, side="right") - 1
        return self.worker_cores[np.maximum(i, 0)]

    def node_load(self) -> np.ndarray:
        """Per-step, per-node load: CPU seconds of its tasks divided by the cores it held."""
        steps = self.steps
        s_idx = np.searchsorted(steps, self.tasks["step"])
        load = np.zeros((len(steps), self.cluster.nodes))
        np.add.at(load, (s_idx, self.tasks["node"]), self.tasks["cost"])
        return load / self.cores_per_step()

    def tile_cost(self) -> np.ndarray:
        """Per-step, per-tile CPU seconds (all phases summed)."""
        steps = self.steps
        s_idx = np.searchsorted(steps, self.tasks["step"])
        out = np.zeros((len(steps), self.tiling.ntiles))
        np.add.at(out, (s_idx, self.tasks["tile"]), self.tasks["cost"])
        return out

    def with_tasks(self, **columns) -> Trace:
        """This trace with some task columns replaced."""
        return replace(self, tasks={**self.tasks, **columns})

    # ----- I/O --------------------------------------------------------------------------------
    def write(self, path: str | Path) -> Path:
        path = Path(path)
        tmp = path.with_name(path.name + ".partial")
        with h5py.File(tmp, "w") as f:
            f.attrs["schema"] = SCHEMA
            f.attrs["version"] = VERSION
            f.attrs["predicted"] = bool(self.predicted)
            f.attrs["app"] = self.app
            f.attrs["scenario"] = self.scenario
            f.attrs["phases"] = json.dumps(list(self.phases))
            f.attrs["config"] = json.dumps(self.config, default=str)
            from . import __version__

            f.attrs["shoal_version"] = __version__
            _write_table(f.create_group("tasks"), TASKS, self.tasks, compress=True)
            _write_table(f.create_group("messages"), MESSAGES, self.messages, compress=True)
            g = f.create_group("tiling")
            g.attrs["grid"] = list(self.tiling.grid)
            g.attrs["halo"] = self.tiling.halo
            for a, e in enumerate(self.tiling.edges):
                g.create_dataset(f"edges{a}", data=e)
            g = f.create_group("cluster")
            g.create_dataset("cores", data=np.asarray(self.cluster.cores, dtype=np.int32))
            net = self.cluster.network
            g.attrs.update(latency_s=net.latency_s, bandwidth_Bps=net.bandwidth_Bps, overhead_s=net.overhead_s)
            g = f.create_group("placement")
            g.create_dataset("from_step", data=np.asarray(self.placement_steps, dtype=np.int32))
            g.create_dataset("owner", data=np.asarray(self.placement_owners, dtype=np.int32))
            g = f.create_group("steps")
            g.create_dataset("step", data=self.steps.astype(np.int32))
            g.create_dataset("end", data=np.asarray(self.step_end, dtype=np.float64))
            g = _optional_group(f, "phases")
            g.create_dataset("barrier", data=np.asarray(self.barrier_phases, dtype=bool))
            g.create_dataset("lagged", data=np.asarray(self.lagged_phases, dtype=bool))
            if self.tile_bytes is not None:
                _optional_group(f, "tiles").create_dataset("state_bytes", data=np.asarray(self.tile_bytes, np.int64))
            if self.balance is not None:
                _write_table(_optional_group(f, "balance"), BALANCE, self.balance)
            if self.communication is not None:
                g = _optional_group(f, "communication")
                g.create_dataset("cpu_s", data=np.asarray(self.communication["cpu_s"], np.float64))
                g.create_dataset("messages", data=np.asarray(self.communication["messages"], np.int64))
            if self.resized:
                g = _optional_group(f, "workers")
                g.create_dataset("from_step", data=self.worker_steps.astype(np.int32))
                g.create_dataset("cores", data=self.worker_cores.astype(np.int32))
        os.replace(tmp, path)
        return path

    @classmethod
    def read(cls, path: str | Path) -> Trace:
        path = Path(path)
        if path.is_dir():
            path = path / "trace.h5"
        if not path.exists():
            raise ShoalError(f"no trace at {path}")
        try:
            f = h5py.File(path, "r")
        except OSError as exc:
            raise ShoalError(f"{path} is not a readable trace: {exc}") from None
        with f:
            if f.attrs.get("schema") != SCHEMA:
                raise ShoalError(f"{path} is not a shoal trace")
            version = int(f.attrs["version"])
            if version != VERSION:
                raise ShoalError(f"{path} has trace schema version {version}; this shoal reads {VERSION}")
            groups = {name: _optional(f, name, path) for name in GROUP_VERSIONS}
            g = f["tiling"]
            ndim = len(g.attrs["grid"])
            tiling = Tiling(tuple(int(n) for n in g.attrs["grid"]),
                            tuple(g[f"edges{a}"][()].astype(np.int64) for a in range(ndim)),
                            int(g.attrs["halo"]))
            g = f["cluster"]
            cluster = Cluster(tuple(int(c) for c in g["cores"][()]),
                              Network(float(g.attrs["latency_s"]), float(g.attrs["bandwidth_Bps"]),
                                      float(g.attrs["overhead_s"])))
            phases, workers = groups["phases"], groups["workers"]
            return cls(
                tasks=_read_table(f["tasks"], TASKS), messages=_read_table(f["messages"], MESSAGES),
                phases=json.loads(f.attrs["phases"]), tiling=tiling, cluster=cluster,
                placement_steps=f["placement"]["from_step"][()],
                placement_owners=f["placement"]["owner"][()],
                step_end=f["steps"]["end"][()],
                app=str(f.attrs["app"]), scenario=str(f.attrs["scenario"]),
                predicted=bool(f.attrs["predicted"]), config=json.loads(f.attrs["config"]),
                barrier_phases=[bool(b) for b in phases["barrier"][()]] if phases else None,
                lagged_phases=[bool(b) for b in phases["lagged"][()]] if phases and "lagged" in phases else None,
                tile_bytes=groups["tiles"]["state_bytes"][()] if groups["tiles"] else None,
                balance=_read_table(groups["balance"], BALANCE) if groups["balance"] else None,
                communication={k: groups["communication"][k][()] for k in ("cpu_s", "messages")}
                if groups["communication"] else None,
                worker_steps=workers["from_step"][()] if workers else None,
                worker_cores=workers["cores"][()] if workers else None,
            )


def _write_table(group, schema: Schema, table: dict[str, np.ndarray], compress: bool = False) -> None:
    for name, values in table.items():
        column = schema.column(name)
        options = {"compression": "gzip", "compression_opts": 1, "shuffle": True} if compress else {}
        ds = group.create_dataset(name, data=values, **options)
        ds.attrs.update(units=column.unit, description=column.description)


def _read_table(group, schema: Schema) -> dict[str, np.ndarray]:
    return schema.table({name: group[name][()] for name in schema.names if name in group})


def _optional_group(f, name: str):
    g = f.create_group(name)
    g.attrs["version"] = GROUP_VERSIONS[name]
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


# ----- transformations ---------------------------------------------------------------------
def aggregate(trace: Trace, coarse: Tiling) -> Trace:
    """The trace of a coarser tiling nesting this one (sampi §II-C).

    A coarse tile's cost per (step, phase) is the sum of its fine tiles' costs (its work too);
    messages between fine tiles of one coarse tile are dropped, the others summed per
    (step, phase, coarse source, coarse destination). Timing columns are kept from the fine
    trace only where they still mean something (none: ``start``/``end`` become 0).
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
             for c in TASKS.columns if c.optional and c.name in t}
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
