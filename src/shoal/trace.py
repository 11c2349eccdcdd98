"""The trace: what a run (or a replay) did, in one HDF5 file.

Schema ``shoal-trace`` version 1. Root attributes: ``schema``, ``version``, ``predicted``
(true for replays), ``app``, ``scenario``, ``phases`` (JSON list of phase names), ``config``
(JSON of the resolved configuration), ``shoal_version``.

``/tasks`` — one row per (step, phase, tile), columns
    ``step`` i4, ``phase`` i2, ``tile`` i4, ``node`` i4, ``worker`` i4 (worker within the node),
    ``start`` f8 and ``end`` f8 (seconds of wall time since the run began), ``cost`` f8
    (seconds of CPU time of the kernel and of packing the task's halos), ``work`` i8 (the
    app's own count: cells, particles, iterations), and, optional, ``kernel`` f8 (the part of
    ``cost`` spent in compiled kernels without the interpreter lock; absent means unknown) and
    ``kernel_calls`` i4 (how many such calls the task made: each lets go of the lock and
    takes it back).
``/messages`` — one row per halo payload from one tile to another, columns
    ``step`` i4 and ``phase`` i2 (of the task that reads it), ``src`` i4, ``dst`` i4,
    ``bytes`` i8. Messages between tiles of one node are listed too; a replay prices them
    as memory copies.
``/tiling`` — attributes ``grid``, ``halo``; datasets ``edges0``, ``edges1``[, ``edges2``].
``/cluster`` — dataset ``cores`` (per node); attributes ``latency_s``, ``bandwidth_Bps``,
    ``overhead_s``.
``/placement`` — ``from_step`` i4 (n,), ``owner`` i4 (n, tiles): owner table in force from
    each step on.
``/steps`` — ``step`` i4, ``end`` f8 (wall time at which the step's last task ended).
``/phases`` (optional) — ``barrier`` bool per phase: phases followed by a global barrier;
``lagged`` (optional) bool per phase: the barrier holds the next phase of the step after.
``/tiles`` (optional) — ``state_bytes`` i8 per tile: bytes a migration of the tile moves.
``/balance`` (optional) — one row per balancing step: ``step`` i4 (first step under the new
    placement), ``plan_s`` f8, ``moved`` i4 (tiles), ``bytes`` i8, ``lif_before`` f8 and
    ``lif_after`` f8 (the last period's loads under the old and the new placement).
``/communication`` (optional, runs across processes) — per node, ``cpu_s`` f8 (CPU seconds of
    the thread that moved messages between processes) and ``messages`` i8 (tile-to-tile
    payloads it sent or received): what a replay charges per message sent or received.

Files are written to a temporary name and renamed, so a trace on disk is always complete.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import h5py
import numpy as np

from .cluster import Cluster, Network
from .errors import ShoalError
from .tiling import Tiling

SCHEMA = "shoal-trace"
VERSION = 1
TASK_COLUMNS = {
    "step": np.int32, "phase": np.int16, "tile": np.int32, "node": np.int32, "worker": np.int32,
    "start": np.float64, "end": np.float64, "cost": np.float64, "work": np.int64,
}
OPTIONAL_TASK_COLUMNS = {"kernel": np.float64, "kernel_calls": np.int32}
MESSAGE_COLUMNS = {"step": np.int32, "phase": np.int16, "src": np.int32, "dst": np.int32, "bytes": np.int64}
BALANCE_COLUMNS = {"step": np.int32, "plan_s": np.float64, "moved": np.int32, "bytes": np.int64,
                   "lif_before": np.float64, "lif_after": np.float64}


@dataclass
class Trace:
    """A trace in memory: column arrays plus the run's tiling, cluster and placements."""

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
    balance: dict[str, np.ndarray] | None = None  # one row per balancing step (see BALANCE_COLUMNS)
    communication: dict[str, np.ndarray] | None = None  # per node: ``cpu_s``, ``messages``

    def __post_init__(self):
        extra = {k: np.asarray(self.tasks[k], dtype=t) for k, t in OPTIONAL_TASK_COLUMNS.items() if k in self.tasks}
        self.tasks = {k: np.asarray(self.tasks[k], dtype=t) for k, t in TASK_COLUMNS.items()} | extra
        self.messages = {k: np.asarray(self.messages[k], dtype=t) for k, t in MESSAGE_COLUMNS.items()}
        lengths = {len(v) for v in self.tasks.values()}
        if len(lengths) != 1 or len({len(v) for v in self.messages.values()}) != 1:
            raise ShoalError("trace columns have different lengths")
        if self.barrier_phases is None:
            self.barrier_phases = [False] * len(self.phases)
        if self.lagged_phases is None:
            self.lagged_phases = [False] * len(self.phases)
        if self.balance is not None:
            self.balance = {k: np.asarray(self.balance[k], dtype=t) for k, t in BALANCE_COLUMNS.items()}

    @classmethod
    def of_run(cls, result, phases, tiling: Tiling, cluster: Cluster, **meta) -> Trace:
        """The trace of an executor's result (an ``ExecutionResult``) run with ``phases``;
        ``meta`` fills the other fields (app, scenario, config, balance, tile_bytes...)."""
        return cls(
            tasks={"step": result.task_step, "phase": result.task_phase, "tile": result.task_tile,
                   "node": result.task_node, "worker": result.task_worker, "start": result.task_start,
                   "end": result.task_end, "cost": result.task_cost, "work": result.task_work,
                   "kernel": result.task_kernel, "kernel_calls": result.task_kernel_calls},
            messages={"step": result.msg_step, "phase": result.msg_phase, "src": result.msg_src,
                      "dst": result.msg_dst, "bytes": result.msg_bytes},
            phases=[p.name for p in phases], tiling=tiling, cluster=cluster,
            placement_steps=np.array([step for step, _ in result.placements]),
            placement_owners=np.stack([o for _, o in result.placements]),
            step_end=result.step_end, barrier_phases=[p.reduction is not None for p in phases],
            lagged_phases=[p.lagged for p in phases],
            communication=None if result.comm_cpu_s is None else {"cpu_s": result.comm_cpu_s,
                                                                  "messages": result.comm_messages},
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

    def owner_at(self, step: int) -> np.ndarray:
        i = int(np.searchsorted(self.placement_steps, step, side="right")) - 1
        return self.placement_owners[max(i, 0)]

    def node_load(self) -> np.ndarray:
        """Per-step, per-node load: CPU seconds of its tasks divided by its cores."""
        steps = self.steps
        s_idx = np.searchsorted(steps, self.tasks["step"])
        load = np.zeros((len(steps), self.cluster.nodes))
        np.add.at(load, (s_idx, self.tasks["node"]), self.tasks["cost"])
        return load / self.cluster.core_array

    def tile_cost(self) -> np.ndarray:
        """Per-step, per-tile CPU seconds (all phases summed)."""
        steps = self.steps
        s_idx = np.searchsorted(steps, self.tasks["step"])
        out = np.zeros((len(steps), self.tiling.ntiles))
        np.add.at(out, (s_idx, self.tasks["tile"]), self.tasks["cost"])
        return out

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
            for group, cols in (("tasks", self.tasks), ("messages", self.messages)):
                g = f.create_group(group)
                for k, v in cols.items():
                    g.create_dataset(k, data=v, compression="gzip", compression_opts=1, shuffle=True)
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
            g = f.create_group("phases")
            g.create_dataset("barrier", data=np.asarray(self.barrier_phases, dtype=bool))
            g.create_dataset("lagged", data=np.asarray(self.lagged_phases, dtype=bool))
            if self.tile_bytes is not None:
                f.create_group("tiles").create_dataset("state_bytes", data=np.asarray(self.tile_bytes, np.int64))
            if self.balance is not None:
                g = f.create_group("balance")
                for k, v in self.balance.items():
                    g.create_dataset(k, data=v)
            if self.communication is not None:
                g = f.create_group("communication")
                g.create_dataset("cpu_s", data=np.asarray(self.communication["cpu_s"], np.float64))
                g.create_dataset("messages", data=np.asarray(self.communication["messages"], np.int64))
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
            tasks = {k: f["tasks"][k][()] for k in (*TASK_COLUMNS, *OPTIONAL_TASK_COLUMNS) if k in f["tasks"]}
            messages = {k: f["messages"][k][()] for k in MESSAGE_COLUMNS}
            g = f["tiling"]
            ndim = len(g.attrs["grid"])
            tiling = Tiling(tuple(int(n) for n in g.attrs["grid"]),
                            tuple(g[f"edges{a}"][()].astype(np.int64) for a in range(ndim)),
                            int(g.attrs["halo"]))
            g = f["cluster"]
            cluster = Cluster(tuple(int(c) for c in g["cores"][()]),
                              Network(float(g.attrs["latency_s"]), float(g.attrs["bandwidth_Bps"]),
                                      float(g.attrs["overhead_s"])))
            return cls(
                tasks=tasks, messages=messages, phases=json.loads(f.attrs["phases"]),
                tiling=tiling, cluster=cluster,
                placement_steps=f["placement"]["from_step"][()],
                placement_owners=f["placement"]["owner"][()],
                step_end=f["steps"]["end"][()],
                app=str(f.attrs["app"]), scenario=str(f.attrs["scenario"]),
                predicted=bool(f.attrs["predicted"]), config=json.loads(f.attrs["config"]),
                barrier_phases=[bool(b) for b in f["phases"]["barrier"][()]] if "phases" in f else None,
                lagged_phases=[bool(b) for b in f["phases"]["lagged"][()]]
                if "phases" in f and "lagged" in f["phases"] else None,
                tile_bytes=f["tiles"]["state_bytes"][()] if "tiles" in f else None,
                balance={k: f["balance"][k][()] for k in BALANCE_COLUMNS} if "balance" in f else None,
                communication={k: f["communication"][k][()] for k in ("cpu_s", "messages")}
                if "communication" in f else None,
            )


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
    extra = {k: np.bincount(key, weights=t[k], minlength=n).astype(OPTIONAL_TASK_COLUMNS[k])
             for k in OPTIONAL_TASK_COLUMNS if k in t}
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
    return Trace(
        tasks={"step": steps[grid_s], "phase": grid_p, "tile": grid_t, "node": np.zeros(n, np.int32),
               "worker": np.zeros(n, np.int32), "start": np.zeros(n), "end": np.zeros(n), "cost": cost,
               "work": work, **extra},
        messages={"step": steps[u_s], "phase": u_p, "src": u_src, "dst": u_dst, "bytes": mbytes},
        phases=trace.phases, tiling=coarse, cluster=trace.cluster, placement_steps=trace.placement_steps,
        placement_owners=cluster_owner, step_end=trace.step_end, app=trace.app, scenario=trace.scenario,
        predicted=trace.predicted, config=trace.config, barrier_phases=trace.barrier_phases,
        lagged_phases=trace.lagged_phases,
        tile_bytes=np.bincount(fine_to_coarse, weights=trace.tile_bytes, minlength=C).astype(np.int64)
        if trace.tile_bytes is not None else None, communication=trace.communication,
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
    tasks = dict(trace.tasks)
    tasks["cost"] = trace.tasks["cost"] / speed
    if "kernel" in tasks:
        tasks["kernel"] = trace.tasks["kernel"] / speed
    return Trace(tasks=tasks, messages=trace.messages, phases=trace.phases, tiling=trace.tiling,
                 cluster=trace.cluster, placement_steps=trace.placement_steps,
                 placement_owners=trace.placement_owners, step_end=trace.step_end, app=trace.app,
                 scenario=trace.scenario, predicted=trace.predicted, config=trace.config,
                 barrier_phases=trace.barrier_phases, lagged_phases=trace.lagged_phases, tile_bytes=trace.tile_bytes,
                 communication=None if trace.communication is None else
                 {"cpu_s": trace.communication["cpu_s"] / speed, "messages": trace.communication["messages"]})
