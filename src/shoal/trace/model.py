"""The :class:`Trace` in memory: a run's tables and what they say (loads per node and step, the
nodes present, per-tile costs), read from and written to its HDF5 file."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import h5py
import numpy as np

from ..cluster import Cluster
from ..decomposition import Decomposition
from ..errors import ShoalError
from ..files import atomic_path
from ..imbalance import lif
from ..records import BALANCE, JOB_RUNS, MESSAGES, REDUCTIONS, TASKS, reduction_rows
from .reading import PART_PREFIX, _open_for_reading, _read, _read_parts
from .schema import LIBVER, _first_line
from .writing import _create

if TYPE_CHECKING:
    import pandas as pd


def packed_by(step_index: np.ndarray, phase: np.ndarray, phases: int) -> tuple[np.ndarray, np.ndarray]:
    """The (step index, phase) of the task that packs a halo read by phase ``phase`` of the step
    at ``step_index`` (arrays), in a step of ``phases`` phases: the source tile's task just before
    it, the last phase of the step before for a step's first phase (step index -1 before a
    trace's first step). The executors, the replay, the SimGrid export and the Perfetto flows all
    follow this rule."""
    first = np.asarray(phase) == 0
    return np.where(first, step_index - 1, step_index), np.where(first, phases - 1, np.asarray(phase) - 1)


def loop_phases(phases, loops) -> list[int]:
    """Per phase, the index of the loop it repeats in (-1 outside loops): what a trace keeps of
    an app's :class:`~shoal.runtime.graph.Loop` declarations.

    Parameters
    ----------
    phases : sequence of Phase
        The app's phases.
    loops : sequence of Loop
        Its loops, each naming its first and last phase.
    """
    names = [p.name for p in phases]
    out = [-1] * len(names)
    for k, loop in enumerate(loops):
        for i in range(names.index(loop.first), names.index(loop.last) + 1):
            out[i] = k
    return out


@dataclass
class Trace:
    """A trace in memory: record tables plus the run's tiling, cluster and placements.

    ``tiling`` is the run's decomposition: a Cartesian :class:`~shoal.tiling.Tiling` (stored in
    ``/tiling``) or a :class:`~shoal.mesh.MeshPartition` (in ``/decomposition``, mesh included).
    """

    tasks: dict[str, np.ndarray]
    messages: dict[str, np.ndarray]
    phases: list[str]
    tiling: Decomposition
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
    loop_phases: list[int] | None = None  # per phase, the loop it repeats in (an index), or -1
    jobs: dict[str, np.ndarray] | None = None  # one row per range of a job run (shoal.records.JOB_RUNS)
    reductions: dict[str, np.ndarray] | None = None  # the values the phases reduced (shoal.records.REDUCTIONS)
    node_barrier_phases: list[bool] | None = None  # job phases whose tiles wait for every range of their node

    def __post_init__(self):
        self.tasks = TASKS.table(self.tasks)
        self.messages = MESSAGES.table(self.messages)
        if self.barrier_phases is None:
            self.barrier_phases = [False] * len(self.phases)
        if self.lagged_phases is None:
            self.lagged_phases = [False] * len(self.phases)
        if self.loop_phases is None:
            self.loop_phases = [-1] * len(self.phases)
        if self.jobs is not None:
            self.jobs = JOB_RUNS.table(self.jobs)
        if self.reductions is not None:
            self.reductions = REDUCTIONS.table(self.reductions)
        if self.node_barrier_phases is None:
            self.node_barrier_phases = [False] * len(self.phases)
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
    def of_run(cls, result, phases, tiling: Decomposition, cluster: Cluster, placements: list[tuple[int, np.ndarray]],
               workers: list[tuple[int, tuple[int, ...]]] | None = None, loops=(), **meta) -> Trace:
        """The trace of an executor's result (an ``ExecutionResult``) run with ``phases`` (and
        ``loops``) on the decomposition ``tiling`` and ``cluster``: ``placements`` and ``workers``
        list (first step, owner table) and (first step, worker threads per node) as they changed;
        ``meta`` fills the other fields."""
        workers = workers or [(result.first_step, cluster.cores)]
        meta.setdefault("loop_phases", loop_phases(phases, loops))
        meta.setdefault("jobs", result.jobs)
        if any(p.reduction is not None for p in phases):
            meta.setdefault("reductions", reduction_rows(result.reductions, [p.name for p in phases]))
        meta.setdefault("node_barrier_phases", [p.node_barrier for p in phases])
        return cls(
            tasks=result.tasks, messages=result.messages, phases=[p.name for p in phases], tiling=tiling,
            cluster=Cluster(tuple(workers[0][1]), cluster.network),
            placement_steps=np.array([step for step, _ in placements]),
            placement_owners=np.stack([o for _, o in placements]),
            step_end=result.step_end, barrier_phases=[p.gathers for p in phases],
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
        """A task column summed per step, slot and tile: shape (steps, slots, tiles). A slot is a
        phase, or without loops one iteration of a phase of a loop (see :meth:`slots`)."""
        phase, iteration = self.slots()
        cost = np.zeros((len(self.steps), len(phase), self.tiling.ntiles))
        s_idx = np.searchsorted(self.steps, self.tasks["step"])
        np.add.at(cost, (s_idx, self.slot_of(self.tasks), self.tasks["tile"]), self.tasks[column])
        return cost

    @property
    def has_loops(self) -> bool:
        """Whether some phase repeated in a loop (then a step's tasks are laid out in :meth:`slots`)."""
        return any(v >= 0 for v in self.loop_phases) and "iteration" in self.tasks

    def slots(self) -> tuple[np.ndarray, np.ndarray]:
        """``(phase, iteration)`` of every place a step's tasks take, in the order a step runs
        them: the phases, each phase of a loop once per iteration up to the most any step ran
        (a step that ran fewer leaves the rest empty: :meth:`slot_present`). Without loops,
        the phases."""
        P = len(self.phases)
        if not self.has_loops:
            return np.arange(P), np.zeros(P, np.int64)
        most = np.zeros(P, np.int64)
        np.maximum.at(most, self.tasks["phase"].astype(np.int64), self.tasks["iteration"].astype(np.int64) + 1)
        phase, iteration, p = [], [], 0
        while p < P:
            loop = self.loop_phases[p]
            if loop < 0:
                phase.append(p)
                iteration.append(0)
                p += 1
                continue
            span = [q for q in range(p, P) if self.loop_phases[q] == loop]
            for it in range(int(most[span].max(initial=1))):
                phase += span
                iteration += [it] * len(span)
            p = span[-1] + 1
        return np.array(phase, np.int64), np.array(iteration, np.int64)

    def slot_of(self, table: dict[str, np.ndarray]) -> np.ndarray:
        """The slot (see :meth:`slots`) of every row of a task or message table."""
        if not self.has_loops:
            return table["phase"].astype(np.int64)
        phase, iteration = self.slots()
        where = np.full((len(self.phases), int(iteration.max()) + 1), -1, np.int64)
        where[phase, iteration] = np.arange(len(phase))
        it = table["iteration"] if "iteration" in table else np.zeros(len(table["phase"]), np.int64)
        return where[table["phase"].astype(np.int64), it.astype(np.int64)]

    def slot_present(self) -> np.ndarray:
        """Which slots every step ran: shape (steps, slots) (all of them without loops)."""
        present = np.zeros((len(self.steps), len(self.slots()[0])), bool)
        present[np.searchsorted(self.steps, self.tasks["step"]), self.slot_of(self.tasks)] = True
        return present

    def iterations(self) -> dict[tuple[int, str], int]:
        """``{(step, loop name): iterations}`` of every step's loops (a loop is named after its
        first phase); empty without loops."""
        if not self.has_loops:
            return {}
        out: dict[tuple[int, str], int] = {}
        first = {}
        for p, loop in enumerate(self.loop_phases):
            if loop >= 0:
                first.setdefault(loop, p)
        t = self.tasks
        for p in first.values():
            rows = t["phase"] == p
            steps, its = t["step"][rows], t["iteration"][rows]
            for step in np.unique(steps):
                out[(int(step), self.phases[p])] = int(its[steps == step].max()) + 1
        return out

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
            balance=None if self.balance is None else BALANCE.select(self.balance, self.balance["step"] <= step),
            jobs=None if self.jobs is None else JOB_RUNS.select(self.jobs, self.jobs["step"] < step),
            reductions=None if self.reductions is None else REDUCTIONS.select(self.reductions,
                                                                              self.reductions["step"] < step))

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
