"""The trace: what a run (or a replay) did, in one HDF5 file.

Schema ``shoal-trace`` version 1. Root attributes: ``schema``, ``version``, ``predicted``
(true for replays), ``app``, ``scenario``, ``phases`` (JSON list of phase names), ``config``
(JSON of the resolved configuration), ``shoal_version``.

``/tasks`` — one row per (step, phase, tile), columns
    ``step`` i4, ``phase`` i2, ``tile`` i4, ``node`` i4, ``worker`` i4 (worker within the node),
    ``start`` f8 and ``end`` f8 (seconds of wall time since the run began), ``cost`` f8
    (seconds of CPU time the kernel used), ``work`` i8 (the app's own count: cells,
    particles, iterations).
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
MESSAGE_COLUMNS = {"step": np.int32, "phase": np.int16, "src": np.int32, "dst": np.int32, "bytes": np.int64}


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

    def __post_init__(self):
        self.tasks = {k: np.asarray(self.tasks[k], dtype=t) for k, t in TASK_COLUMNS.items()}
        self.messages = {k: np.asarray(self.messages[k], dtype=t) for k, t in MESSAGE_COLUMNS.items()}
        lengths = {len(v) for v in self.tasks.values()}
        if len(lengths) != 1 or len({len(v) for v in self.messages.values()}) != 1:
            raise ShoalError("trace columns have different lengths")

    # ----- derived views ---------------------------------------------------------------------
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
            tasks = {k: f["tasks"][k][()] for k in TASK_COLUMNS}
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
            )
