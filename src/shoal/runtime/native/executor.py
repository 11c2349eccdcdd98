"""The native executor: the step's task graph run by compiled workers, Python only per run.

:class:`NativeExecutor` has the Python executor's interface (``run``, ``step_tasks``,
``reconfigure``, ``pin``, ``close``) and its contract: the same states bitwise, the same trace
rows, the same reductions in the same order, the same stop at a step boundary, the same one
line on an error. What differs is where the per-task path runs: the executor compiles the
run's task sequence into arrays once (:class:`~shoal.runtime.native.Graph`), then each
worker thread runs :func:`~shoal.runtime.native.work` without the interpreter lock
until the run ends, or until a loop's iteration needs the app's decision (the sequence then
grows, and the workers go on).

An app runs natively where it says how (:meth:`~shoal.runtime.app.App.native`): compiled phase
kernels, the state fields they work on, and copy plans for the halos. Every other phase runs
through the trampoline (:mod:`~shoal.runtime.native.trampoline`), with its halos as Python
payloads: every app runs here, native or not.
"""

from __future__ import annotations

import gc
import itertools
import logging
import sys
import threading
import time
from typing import Any

import numpy as np

from ...cluster import Cluster
from ...errors import ShoalError
from ...records import JOB_RUNS, MESSAGES, TASKS
from ...resources import machine_memory, usable_cores
from ...tiling import Tiling
from ..app import App, StepContext
from ..graph import StepGraph, TaskSequence
from ..jobs import job_row, plan_ranges, range_tiles, run_range
from ..local import (
    GIL_SWITCH_S,
    NOT_RUN,
    ExecutionResult,
    NodePools,
    configure_worker_thread,
    lagged_start,
    loop_again,
    reduced_value,
    task_error,
)
from ..timing import thread_clock
from ..workers import WorkerPool
from .engine import (
    ABSENT,
    BEFORE,
    CONTROL_SLOTS,
    DECIDE,
    DONE,
    EMIT,
    ERROR_CAPACITY,
    ERROR_HALO,
    ERROR_KERNEL,
    ERROR_KIND,
    ERROR_TASK,
    FAILED,
    JOB_INSTANCE,
    LIMIT,
    MAX,
    MIN,
    RUNNING,
    SPIN,
    SPIN_NS,
    STARTED,
    STATUS,
    STEPS_DONE,
    SUM,
    Graph,
    Shared,
    Typed,
    fill_context,
    finish_segment,
    open_segment,
    request_stop,
    warm,
    work,
)
from .plan import Across, NativeLayout, copy_plans, noop_kernel, noop_packer
from .trampoline import RUNS

OPS = {"sum": SUM, "min": MIN, "max": MAX}
_open_segment, _work = Typed(open_segment), Typed(work)  # called every segment: typed once
logger = logging.getLogger("shoal")


class _NoRoom(Exception):
    """A run's halos or states outgrew their room: it is redone with more."""


GROWTHS = 6  # times a run is redone with more room before its app's state is called too big
# The worker loop's type is its tables' lengths (a tuple of compiled functions of one signature):
# tables padded to a multiple of this compile it once for every app.
TABLE_SLOTS = 8


def _slots(table: tuple, blank) -> tuple:
    """``table`` padded with ``blank`` to a positive multiple of :data:`TABLE_SLOTS` entries."""
    return table + (blank,) * (-len(table) % TABLE_SLOTS or (0 if table else TABLE_SLOTS))


VARIABLE = -2  # a message row whose size the engine records (a packer's payload)
_handles = itertools.count(1)


class NativeExecutor(NodePools):
    """Run an app's tiles on ``cluster.nodes`` nodes of compiled worker threads, in this process.

    Parameters
    ----------
    app : App
        The physics: phases it runs natively (:meth:`~shoal.runtime.app.App.native`) run with
        no Python; the others through the trampoline.
    tiling : Tiling
        How the grid is split.
    cluster : Cluster
        Nodes; ``cluster.cores[k]`` worker threads run on node ``k``.
    owner : ndarray
        ``owner[tile] -> node``.
    job_policy : str
        Where a job phase's jobs run (:mod:`shoal.placement.job_policies`).

    Notes
    -----
    Jobs: the phase that emits them and the job phase run in Python. Once every tile has
    emitted, the workers stop (the segment ends); the executor places the jobs and cuts their
    ranges (:func:`~shoal.runtime.jobs.plan_ranges`), queues them, and the workers go on: a
    range runs through the trampoline, then counts its results in to the tiles it read.
    """

    backend = "native"

    def __init__(self, app: App, tiling: Tiling, cluster: Cluster, owner: np.ndarray, job_policy: str = "locality"):
        self.app, self.tiling, self.cluster = app, tiling, cluster
        self.job_policy = job_policy
        self.owner = np.asarray(owner, dtype=np.int64).copy()
        self.phases = tuple(app.phases)
        self.graph = StepGraph(app, tiling)
        self.layout = NativeLayout.of(app, tiling)
        self._runners = [getattr(app, p.method) for p in self.phases]
        self._packers = [getattr(app, p.pack) if p.halo or p.jobs else None for p in self.phases]
        self._job_runners = [getattr(app, p.jobs) if p.jobs else None for p in self.phases]
        self._window: dict[int, list[tuple]] = {}  # per tile, what the ranges it was first of measured
        names = [p.name for p in self.phases]
        kernels = self.layout.kernels if self.layout is not None else {}
        self._kernel_of = np.array([list(kernels).index(n) if n in kernels else -1 for n in names], np.int64)
        self._kernels = _slots(tuple(kernels.values()), noop_kernel)
        packers = self.layout.native.packers if self.layout is not None else {}
        self._packers_c = _slots(tuple(packers.values()), noop_packer)
        self._width = max([1] + [len(p.operations) for p in self.phases])
        self._handle = next(_handles)
        self._plan_cache = None  # (keys, layout fields, Plans) of the last graph: a restart reuses it
        self.first_step = 0
        warm(self._kernels, self._packers_c, len(self.phases), self._width)  # compiled before any timed run
        self._pools = {node: WorkerPool(cluster.cores[node], f"shoal-native{node}", configure_worker_thread)
                       for node in self._nodes_here()}

    def _nodes_here(self) -> list[int]:
        """The nodes whose workers this process runs."""
        return list(range(self.cluster.nodes))

    def _oversubscribed(self) -> bool:
        """Whether the run's worker threads outnumber the cores this process may use."""
        return self.cluster.total_cores > usable_cores()

    def _rank_of(self) -> tuple[int, int, np.ndarray]:
        """The processes of the run, this one's number, and each tile's process (here: one)."""
        return 1, 0, np.zeros(self.tiling.ntiles, np.int64)

    # ----- public (and the nodes' pools: see NodePools) ----------------------------------
    def run(self, steps: int, states: dict[int, Any] | None = None, first_step: int = 0, on_step=None,
            reduced_before: dict | None = None, stop: threading.Event | None = None) -> ExecutionResult:
        """Run ``steps`` steps, as :meth:`LocalExecutor.run <shoal.runtime.local.LocalExecutor.run>` does;
        fewer when the app's memory changes its layout before the last (:attr:`Native.relayout
        <shoal.runtime.native.Native>`: the result says how many ran).

        An app whose state changes size (:attr:`Native.publish <shoal.runtime.native.Native>`)
        runs from a copy of its memory: when something has no room, the run is redone from
        it with every capacity grown (steps already reported are not reported again)."""
        if steps <= 0:
            raise ShoalError(f"steps must be positive, got {steps}")
        relayout = self.layout.native.relayout if self.layout is not None else None
        if relayout is not None:  # the run ends where the memory changes its layout
            steps = next((s - first_step + 1 for s in range(first_step, first_step + steps) if relayout(s)), steps)
        if states is None:
            states = {t: self.app.init_tile(t, self.tiling) for t in range(self.tiling.ntiles)}
        native = self.layout.native if self.layout is not None else None
        reported = [0]

        def report(k):
            if k >= reported[0]:
                reported[0] = k + 1
                on_step(k)

        for attempt in range(GROWTHS):
            try:
                return self._run(steps, states, first_step, report if on_step is not None else None, reduced_before,
                                 stop, reported)
            except _NoRoom:
                logger.info("steps %d-%d: a tile's particles or halos outgrew their room; the steps are run again "
                            "with twice the room (%d of %d times)", first_step, first_step + steps - 1, attempt + 1,
                            GROWTHS)
                native.grow()
        raise ShoalError(f"app {self.app.name!r}: no room for its state after growing every capacity "
                         f"{GROWTHS} times")

    def _run(self, steps, states, first_step, on_step, reduced_before, stop, reported_before) -> ExecutionResult:
        """One attempt of :meth:`run`; a stop is not asked before the steps an earlier attempt
        reported (``reported_before[0]``) are done again."""
        T = self.tiling.ntiles
        before = dict(reduced_before or {})
        before.update(lagged_start(self.app, first_step, before))
        self.states, self.first_step, self.steps = states, first_step, steps
        self._T = T
        self._ranks, self._rank, self._process_of = self._rank_of()
        self._owner_list = self.owner.tolist()
        self._tiles_of_node = [np.flatnonzero(self.owner == n).tolist() for n in range(self.cluster.nodes)]
        self._here = self._process_of == self._rank
        self._seq = TaskSequence(self.phases, self.app.loops, steps)
        self._seq.extend()
        if self.layout is not None and self.layout.native.prepare is not None:
            self.layout.native.prepare(states, first_step, steps, self._sharing())
        self._mem, self._mem_off = (self.layout.memory(states) if self.layout is not None
                                    else (np.zeros(0), np.zeros(T + 1, np.int64)))
        publish = self.layout.native.publish if self.layout is not None else None
        self._start_mem = self._mem.copy() if publish is not None else None  # what a redo starts from
        self._ints, self._int_off, self._consts = (self.layout.descriptors(self.tiling) if self.layout is not None
                                                   else (np.zeros(0, np.int64), np.zeros(T + 1, np.int64),
                                                         np.zeros(0)))
        self._before_values(before, first_step)
        self._inbox: list[dict[int, dict[int, Any]]] = [dict() for _ in range(T)]
        self._emitted: dict[int, tuple] = {}  # per tile, the jobs it emitted and its window's measures
        self._job_inputs: dict[int, Any] = {}  # per tile, the input of the jobs that read it
        self._units: list[tuple] = []  # the current job phase's ranges: (row, first, stop, node)
        self._job_rows: list[tuple] = []
        self._contexts: dict[int, StepContext] = {}
        self._iterations: dict[tuple[int, str], int] = {}
        self._error: BaseException | None = None
        self._links: list = []  # distinct (phase, Links), in the order first met
        self._key_of: dict = {}  # (phase, id(links)) -> index in _links
        self._shared, self._planned = None, -1  # nothing carries over from a run before
        self._scales: dict[int, np.ndarray] = {}  # per step of the run, its nodes' CPU scales once taken
        self._m_bytes = np.zeros(0, np.int64)  # per message row its size (-1: not packed)
        self._edges: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # per distinct Links, its (src, dst)
        self._grow(len(self._seq))
        self._build()
        collecting = gc.isenabled()
        gc.disable()  # a collection would land in whichever task's cost it stops
        switch = sys.getswitchinterval()
        sys.setswitchinterval(GIL_SWITCH_S)
        RUNS[self._handle] = self
        self._t0 = time.monotonic_ns()  # the clock the workers stamp rows with: the wall is on it too
        reported = 0
        self._stop_from = reported_before[0]
        try:
            self._start_segment(0)
            while True:
                reported = self._segment(on_step, stop, reported)
                status = int(self._shared.control[STATUS])
                if status == FAILED or self._error is not None:
                    if (self._error is None and self._shared.control[ERROR_KIND] == ERROR_CAPACITY
                            and publish is not None):
                        self._no_room()
                    raise self._failure()
                if status == EMIT:
                    self._emit()
                elif status != DECIDE or not self._decide():
                    break
            self._ended()
        finally:
            RUNS.pop(self._handle, None)
            sys.setswitchinterval(switch)
            if collecting:
                gc.enable()
            if publish is not None:  # however the run ended (a callback's error too); once is enough
                publish(states)
        wall = (time.monotonic_ns() - self._t0) * 1e-9
        done = int(self._shared.control[STEPS_DONE])
        if on_step is not None:
            for k in range(reported, done):
                on_step(k)
        return self._result(done, wall)

    def step_tasks(self, k: int) -> dict[str, np.ndarray]:
        """The task rows of step ``k`` of the current run (counted from its first); complete
        once the step is reported finished."""
        first = self._seq.step_first
        end = first[k + 1] if k + 1 < len(first) else len(self._seq)
        rows = self._task_rows(first[k] * self._T, end * self._T, cpu=True)
        return TASKS.select(rows, rows["node"] >= 0)

    # ----- the trampoline's side (called by workers, holding the interpreter lock) -----------
    def python_task(self, worker: int, task: int) -> int:
        """Run a phase the app left in Python; the nanoseconds of its compiled kernels, or -1."""
        instance, tile = divmod(task, self._T)
        phase = self._seq.phase[instance]
        try:
            clock = thread_clock()
            k0 = clock[0]
            halos = self._inbox[tile].pop(instance, None) or {}
            if self.phases[phase].jobs:  # the results of the jobs that read it, in (job, first item) order
                halos = dict(sorted(halos.items()))
            out = self._runners[phase](tile, self.states[tile], halos, self._context(instance), self.tiling)
            work, value = out if isinstance(out, tuple) else (out, None)
            if self.phases[phase].emits_jobs:  # with what this tile's last ranges measured
                if value is None:
                    raise ShoalError("a phase that emits jobs must return them")
                self._emitted[tile] = (value, self._window.pop(tile, []))
            nvals = self._g.nvals[instance]
            if nvals:
                if value is None:
                    raise ShoalError("a phase with a reduction must return a value to reduce")
                values = value if isinstance(value, (tuple, list)) else (value,)
                if len(values) != nvals:
                    raise ShoalError(f"a reduction of {nvals} values got a tile's value {value!r}")
                self._shared.vals[task, :nvals] = values
            self._shared.r_work[task] = int(work)
            nxt = instance + 1
            if nxt < self._g.n and self._g.links[nxt] >= 0 and self._g.pypack[nxt]:
                self._pack(tile, nxt)
            elif nxt < self._g.n and self.phases[self._seq.phase[nxt]].jobs:  # one input for every job reading it
                self._job_inputs[tile] = self._packers[self._seq.phase[nxt]](self.states[tile], tile)
            return int((clock[0] - k0) * 1e9)
        except BaseException as exc:  # the run stops; the main thread raises it
            self._fail(exc, tile, instance)
            return -1

    def python_deferred(self, worker: int, task: int) -> int:
        """The rest of a native task whose kernel deferred it (:attr:`Native.deferred
        <shoal.runtime.native.Native>`); the work the task did, or -1 if that failed."""
        instance, tile = divmod(task, self._T)
        phase = self.phases[self._seq.phase[instance]].name
        try:
            return int(self.layout.native.deferred[phase](tile, self.states[tile],
                                                           self._seq.step[instance] + self.first_step))
        except BaseException as exc:
            self._fail(exc, tile, instance)
            return -1

    def python_pack(self, task: int) -> int:
        """Pack the Python halos a tile sends after a native task; 0, or -1 if that failed."""
        instance, tile = divmod(task, self._T)
        try:
            self._pack(tile, instance + 1)
            return 0
        except BaseException as exc:
            self._fail(exc, tile, instance)
            return -1

    def python_range(self, worker: int, unit: int) -> int:
        """Run range ``unit`` of the current job phase; hand each tile it read its result. 0, or
        -1 if the app's job method failed."""
        row, first, stop, node = self._units[unit]
        instance = int(self._shared.control[JOB_INSTANCE])
        phase = self._seq.phase[instance]
        tiles = range_tiles(row)
        try:
            ran = run_range(self._job_runners[phase], row, first, stop, self._range_inputs(instance, tiles),
                            self._context(instance), node, self._owner_list, clock=time.monotonic)
            self._job_rows.append(job_row(self._seq.step[instance] + self.first_step, self._seq.iteration[instance],
                                          phase, row, first, stop, node, worker, ran.start - self._t0 * 1e-9,
                                          ran.end - self._t0 * 1e-9, ran))
            self._hand_results(instance, (row["job"], first), tiles, ran)
        except BaseException as exc:
            self._fail(exc, row["a"], instance)
            return -1
        return 0

    def _range_inputs(self, instance: int, tiles: list[int]) -> dict:
        """The inputs of ``tiles`` for the job phase ``instance``: each packed after its tile's
        task before."""
        return {t: self._job_inputs[t] for t in tiles}

    def _hand_results(self, instance: int, key: tuple[int, int], tiles: list[int], ran) -> None:
        """A range's results into its tiles' inboxes, under the range's (job, first item), and
        what it measured to its first tile's window (the engine then counts the results in; a
        node barrier's other tiles are counted in with nothing to hand them)."""
        self._window.setdefault(tiles[0], []).append(ran.measured)
        for t in tiles:
            self._inbox[t].setdefault(instance, {})[key] = ran.results[t]

    def _pack(self, tile: int, instance: int) -> None:
        """Pack ``tile``'s Python halos for ``instance`` into its readers' inboxes; record sizes."""
        from ..app import payload_bytes

        links = self._links_of[instance]
        payloads = self._packers[self._seq.phase[instance]](self.states[tile], tile, self.tiling)
        row = self._msg_offset[instance] + links.base[tile]
        for k, reader in enumerate(links.readers[tile]):
            payload = payloads[reader]
            self._inbox[reader].setdefault(instance, {})[tile] = payload
            self._m_bytes[row + k] = payload_bytes(payload)

    def _context(self, instance: int) -> StepContext:
        """The step and the reductions a Python task reads (as the Python executor's)."""
        ctx = self._contexts.get(instance)
        if ctx is None:
            reduced = {}
            for q, p in enumerate(self.phases):
                src = int(self._g.ctx_src[instance, q])
                if src >= 0:
                    values = self._shared.red[src, :len(p.operations)]
                elif src == BEFORE and self._before_known[q]:
                    values = self._shared.before[q, :len(p.operations)]
                else:
                    continue
                reduced[p.name] = self._value(p, values)
            ctx = self._contexts[instance] = StepContext(self._seq.step[instance] + self.first_step, reduced,
                                                         self._seq.iteration[instance])
        return ctx

    @staticmethod
    def _value(phase, values) -> float | tuple[float, ...]:
        """A reduction's value as a task reads it: a float, or a tuple for several."""
        return tuple(float(v) for v in values) if isinstance(phase.reduction, tuple) else float(values[0])

    def _fail(self, exc: BaseException, tile: int, instance: int) -> None:
        if self._error is None:
            self._error = task_error(exc, self._seq.step[instance] + self.first_step,
                                     self.phases[self._seq.phase[instance]].name, tile)

    # ----- building the graph --------------------------------------------------------------
    def _before_values(self, before: dict, first_step: int) -> None:
        """What the first tasks read of reductions from before the run, per phase (NaN: none)."""
        P = len(self.phases)
        self._before = np.full((P, self._width), np.nan)
        self._before_known = np.zeros(P, bool)
        for q, p in enumerate(self.phases):
            key = (first_step - 1, p.name)
            if p.reduction is not None and key in before:
                value = reduced_value(before[key])
                values = value if isinstance(value, tuple) else (value,)
                self._before[q, :len(values)] = values
                self._before_known[q] = True
        self._reduced = {k: reduced_value(v) for k, v in before.items()}

    def _grow(self, n: int) -> None:
        """Shared arrays for ``n`` instances (keeping what an earlier segment wrote)."""
        T, K = self._T, self._width
        old = self._shared
        if old is not None and old.red.shape[0] >= n:
            return
        cap = max(n, 2 * (old.red.shape[0] if old is not None else 0))
        nodes = self.cluster.nodes
        R = self._ranks
        fresh = Shared(
            control=np.zeros(CONTROL_SLOTS, np.int64), need=np.zeros(cap * T, np.int64),
            remaining=np.zeros(cap, np.int64),
            vals=np.zeros((cap * T, K)), red=np.full((cap, K), np.nan), before=self._before,
            left=np.zeros(self.steps, np.int64), step_end=np.zeros(self.steps, np.int64),
            r_start=np.zeros(cap * T, np.int64), r_end=np.zeros(cap * T, np.int64),
            r_ready=np.zeros(cap * T, np.int64), r_node=np.full(cap * T, -1, np.int64),
            r_worker=np.full(cap * T, -1, np.int64), r_work=np.zeros(cap * T, np.int64),
            r_kernel=np.zeros(cap * T, np.int64),
            queue=np.zeros((nodes, T + 1), np.int64), q_head=np.zeros(nodes, np.int64),
            q_tail=np.zeros(nodes, np.int64), q_lock=np.zeros(nodes, np.int64), sleepers=np.zeros(nodes, np.int64),
            words=np.zeros(nodes, np.int32), staging=np.zeros(0), written=np.zeros(0, np.int64),
            consumed=np.zeros(0, np.int64), sent=np.zeros(0, np.int64), cpu=np.zeros(self.steps * nodes, np.int64),
            out_left=np.zeros(cap * R, np.int64), mine_left=np.zeros(cap, np.int64),
            outbox=np.zeros(cap * (R + 1), np.int64), o_ends=np.zeros(2, np.int64), parked=np.zeros(T, np.int64),
            o_word=np.zeros(1, np.int32), u_ptr=np.zeros(1, np.int64), u_tiles=np.zeros(0, np.int64))
        if old is None:
            fresh.control[LIMIT] = self.steps
            fresh.control[SPIN] = 0 if self._oversubscribed() else SPIN_NS
            fresh.control[STARTED] = -1
        else:
            m = old.red.shape[0]
            for name in ("need", "vals", "r_start", "r_end", "r_ready", "r_node", "r_worker", "r_work", "r_kernel"):
                getattr(fresh, name)[:m * T] = getattr(old, name)
            for name in ("remaining", "red", "mine_left"):
                getattr(fresh, name)[:m] = getattr(old, name)
            fresh.out_left[:m * R] = old.out_left
            fresh.outbox[:len(old.outbox)] = old.outbox  # (the ring is never wrapped: room for every batch)
            for name in ("control", "left", "step_end", "queue", "q_head", "q_tail", "staging", "written",
                         "consumed", "sent", "cpu", "o_ends", "parked", "o_word", "u_ptr", "u_tiles"):
                fresh = fresh._replace(**{name: getattr(old, name)})
        self._shared = fresh

    def _build(self, start: int = 0) -> None:
        """Compile the sequence's instances into the graph's arrays (whole-array operations:
        this runs once per run, and once per loop iteration); counters of instances from
        ``start`` on (the ones new since the last build)."""
        seq, T, P, first = self._seq, self._T, len(self.phases), self.first_step
        n = len(seq)
        phase = np.asarray(seq.phase, np.int64)
        step = np.asarray(seq.step, np.int64)
        links_of = self._links_of = [self.graph.links(p, s + first) for p, s in zip(seq.phase, seq.step, strict=True)]
        link_ids = np.full(n, -1, np.int64)  # per instance, its (phase, links) key: the copies differ by phase
        for i, links in enumerate(links_of):
            if links is not None:
                key = (seq.phase[i], id(links))
                if key not in self._key_of:
                    self._key_of[key] = len(self._links)
                    self._links.append((seq.phase[i], links))
                link_ids[i] = self._key_of[key]
        if len(self._links) != self._planned:
            keys = list(self._links)  # (phase, Links) pairs, the Links compared by identity (kept alive here)
            fields = self.layout.fields if self.layout is not None else None
            # (an app with packers sizes its payloads afresh each run: its plans are made afresh)
            cached = self._plan_cache if self.layout is None or not self.layout.native.packers else None
            if (cached is not None and len(cached[0]) == len(keys) and cached[1] == fields
                    and all(p == q and a is b for (p, a), (q, b) in zip(cached[0], keys, strict=True))):
                self._plans = cached[2]
            else:
                self._plans = copy_plans(self._links, self.layout, self.phases, T)
                self._plan_cache = (keys, [dict(f) for f in fields] if fields is not None else None, self._plans)
            self._planned = len(self._links)
            # per key (and a last row for none): fan-in per tile, and its message sizes (-1: Python's)
            self._fanin = np.zeros((len(self._links) + 1, T), np.int64)
            self._sizes = []
            self._across = self._between_processes()
            for k, (_, links) in enumerate(self._links):
                base = self._plans.lk_base[k]
                if self._plans.packer[k] >= 0:
                    self._sizes.append(np.full(links.count, VARIABLE, np.int64))
                elif self._plans.native[k]:
                    self._sizes.append(8 * self._plans.ed_size[base:base + links.count])
                else:
                    self._sizes.append(np.full(links.count, -1, np.int64))
        plans = self._plans
        has = link_ids >= 0
        pypack = (has & ~plans.native[np.maximum(link_ids, 0)]).astype(np.int64)
        emits = np.array([p.emits_jobs for p in self.phases])[phase]
        gathers = np.array([p.reduction is not None for p in self.phases])[phase] | emits  # (jobs: a list from each)
        lagged = np.array([p.lagged for p in self.phases])[phase]
        nvals = np.array([len(p.operations) for p in self.phases], np.int64)[phase]
        ops = np.array([[OPS[op] for op in p.operations] + [0] * (self._width - len(p.operations))
                        for p in self.phases], np.int64).reshape(P, self._width)[phase]
        index = np.arange(n)
        # Per step, the instance of every phase outside loops (a lagged phase is in none).
        at = np.full((self.steps + 1, P), -1, np.int64)
        at[step, phase] = index
        # What each instance reads: per barrier phase its latest instance before; per lagged
        # phase q, when the instance's phase comes after q, q's instance a step before (BEFORE:
        # the value from before the run; ABSENT: none).
        ctx_src = np.full((n, P), BEFORE, np.int64)
        for q, ph in enumerate(self.phases):
            if ph.reduction is None:
                continue
            if ph.lagged:
                prev = np.where(step >= 1, at[np.maximum(step - 1, 0), q], -1)  # step 0: from before the run
                ctx_src[:, q] = np.where(phase > q, prev, ABSENT)  # earlier phases cannot rely on it yet
            else:
                mine = np.where(phase == q, index, -1)
                ctx_src[1:, q] = np.maximum.accumulate(mine)[:-1]
        # Which instance's reduction gates each one: a barrier's next; a lagged one's reader a step on.
        gates = np.full(n, -1, np.int64)
        barrier = gathers & ~lagged
        gates[barrier] = index[barrier] + 1
        twin = at[np.minimum(step + 1, self.steps), phase]  # the lagged phase a step on; its reader follows it
        gates[lagged] = np.where(twin[lagged] >= 0, twin[lagged] + 1, -1)
        gates[gates >= n] = -1
        gated = np.full(n, -1, np.int64)  # the instance whose reduction gates each one
        gated[gates[gates >= 0]] = index[gates >= 0]
        decide = np.zeros(n, np.int64)
        if seq.pending is not None:
            decide[n - 1] = 1  # its reduction waits for the app's decision
        first_of_step = np.zeros(n, np.int64)
        first_of_step[np.asarray(seq.step_first, np.int64)] = 1
        # Message rows: per instance with links, (source, reader) order; native sizes known now.
        counts = np.array([links.count if links is not None else 0 for links in links_of], np.int64)
        self._msg_offset = np.concatenate([[0], np.cumsum(counts)])
        self._g = Graph(
            T=T, n=n, first=first, handle=self._handle, stamp_depth=plans.depth,
            phase=phase, step=step, iteration=np.asarray(seq.iteration, np.int64), kernel=self._kernel_of[phase],
            nvals=np.where(gathers, nvals, 0), ops=np.ascontiguousarray(ops), links=link_ids, pypack=pypack,
            gates=gates, decide=decide, first_of_step=first_of_step, ctx_src=ctx_src, emits=emits.astype(np.int64),
            rd_ptr=plans.rd_ptr, rd=plans.rd, in_ptr=plans.in_ptr, inc=plans.inc, lk_base=plans.lk_base,
            ed_off=plans.ed_off, ed_size=plans.ed_size, pk_ptr=plans.pk_ptr, pk=plans.pk, up_ptr=plans.up_ptr,
            up=plans.up, packer=plans.packer, ib_off=plans.ib_off, ib_cap=plans.ib_cap,
            msg_off=self._msg_offset[:-1], mem_off=self._mem_off, int_off=self._int_off, owner=self.owner,
            ranks=self._ranks, here=self._here.astype(np.int64), **self._across)
        sh = self._shared
        if sh.staging.shape[0] != plans.depth * plans.staging or len(sh.written) != plans.depth * len(plans.ed_off):
            need, free = plans.depth * plans.staging * 8, machine_memory()
            if need > free:  # (each link's slot holds its worst case: a fine tiling multiplies them)
                raise ShoalError(f"the native executor would stage {need / 2**30:.1f} GiB of halos for {T} tiles, "
                                 f"more than the {free / 2**30:.1f} GiB this machine has free: use fewer tiles or "
                                 "--executor python")
            written = np.full(plans.depth * len(plans.ed_off), -1, np.int64)
            sh = self._shared = sh._replace(staging=np.zeros(plans.depth * plans.staging), written=written,
                                            consumed=written.copy())
        if len(sh.sent) < self._msg_offset[-1]:  # words of the packers' payloads, per message row
            sent = np.zeros(max(int(self._msg_offset[-1]), 2 * len(sh.sent)), np.int64)
            sent[:len(sh.sent)] = sh.sent
            sh = self._shared = sh._replace(sent=sent)
        new = [self._sizes[k] for k in link_ids[start:] if k >= 0]
        self._m_bytes = np.concatenate([self._m_bytes[:self._msg_offset[start]], *new]).astype(np.int64)
        # Counters: own previous task, halos, the gating reduction (one reduced before ``start``
        # is done: every instance before a segment's start is).
        new_ = slice(start, n)
        later = (index[new_] > start).astype(np.int64)
        token = later * (gated[new_] >= start)
        R, mine = self._ranks, int(self._here.sum())
        others = len(np.unique(self._process_of[~self._here]))  # processes whose values come (those with tiles)
        sh.need[start * T:n * T] = (self._fanin[link_ids[new_]] + (later + token)[:, None]).ravel()
        sh.remaining[start:n] = np.where(gathers[new_], mine + others, 0)
        sh.mine_left[start:n] = np.where(gathers[new_], mine, 0)
        if R > 1:  # per (instance, rank): the tiles here that send it halos
            sh.out_left[start * R:n * R] = self._across["to_rank"].sum(axis=1)[link_ids[new_]].ravel()
        np.add.at(sh.left, step[new_], mine + emits[new_])  # (the step waits for its jobs' placement)
        if seq.pending is not None:
            sh.left[seq.pending[1]] += 1  # the step also waits for the loop's decision

    def _between_processes(self) -> dict[str, Any]:
        """Per distinct links of the run: each tile's fan-in from tiles here (into ``_fanin``),
        and the graph's tables of halos between processes (see :class:`Graph`): in one process,
        none."""
        T, R = self._T, self._ranks
        where, here = self._process_of, self._here
        K = len(self._links) + 1  # a last row for instances without links
        to_rank, rin = np.zeros((K, T, R), np.int64), np.zeros((K, T), np.int64)
        tables = {name: ([], np.zeros((K, R + 1), np.int64)) for name in ("bo", "bi", "bir")}
        for k, (_, links) in enumerate(self._links):
            src, dst = self._edges_of(links)
            edge = self._plans.lk_base[k] + np.arange(len(src))
            self._fanin[k] = np.bincount(dst[here[src] & here[dst]], minlength=T)
            if R == 1:
                continue
            out, inc = here[src] & ~here[dst], ~here[src] & here[dst]
            to_rank[k, src[out], where[dst[out]]] = 1
            pairs = np.unique(np.stack([dst[inc], where[src[inc]]]), axis=1)  # (reader here, its sources' rank)
            rin[k] = np.bincount(pairs[0], minlength=T)
            self._fanin[k] += rin[k]  # a batch from another process is one more input
            for r in range(R):
                for name, rows in (("bo", edge[out & (where[dst] == r)]), ("bi", edge[inc & (where[src] == r)]),
                                   ("bir", pairs[0][pairs[1] == r])):
                    items, ptr = tables[name]
                    ptr[k, r] = len(items)
                    items.extend(rows.tolist())
                    ptr[k, r + 1] = len(items)
        across = {"to_rank": to_rank, "rin": rin}
        for name, (items, ptr) in tables.items():
            across[name + "_ptr"] = ptr
            across[name] = np.asarray(items or [0], np.int64)
        return across

    # ----- running -------------------------------------------------------------------------
    def _start_segment(self, instance: int) -> None:
        """Every tile is about to run ``instance``, whose halos nobody has packed (the run's
        start, or after a loop's decision): pack them here, then queue every tile's task."""
        g, sh = self._g, self._shared
        if not self._here.any():  # a process left without tiles (MPI): nothing to run but jobs placed on it
            if not g.emits.any():
                sh.control[STEPS_DONE] = sh.control[LIMIT]
            return
        if g.links[instance] >= 0 and g.pypack[instance]:
            for t in np.flatnonzero(self._here).tolist():  # (an MPI rank's tiles)
                self._pack(t, instance)
        status = _open_segment(g, sh, self._mem, self._ints, self._consts, self._packers_c, instance)
        if status == ERROR_CAPACITY and self._start_mem is not None:
            self._no_room()
        if status:
            raise ShoalError("halo staging overrun before the first task")

    def _segment(self, on_step, stop, reported: int) -> int:
        """Run the workers until the segment ends; report finished steps meanwhile."""
        sh = self._shared
        sh.control[STATUS] = RUNNING if sh.control[STEPS_DONE] < sh.control[LIMIT] else DONE  # (no tile here: done)
        ended = self._start_workers()
        stopping = False
        try:
            while not ended.wait(0.002 if on_step is not None else 0.02):
                done = int(sh.control[STEPS_DONE])
                if on_step is not None:
                    for k in range(reported, done):
                        on_step(k)
                    reported = done
                if stop is not None and stop.is_set() and not stopping and done >= self._stop_from:
                    stopping = True
                    self._seq.limit(int(request_stop(sh)))
        except BaseException:
            self._stop_workers()
            raise
        self._join_workers()
        return reported

    def _start_workers(self) -> threading.Event:
        """Every worker of this process on the segment; the event is set once all have returned."""
        left = [sum(pool.size for pool in self._pools.values())]
        ended = threading.Event()
        lock = threading.Lock()

        def job(node, w):
            try:
                _work(self._g, self._shared, self._kernels, self._packers_c, self._mem, self._ints, self._consts,
                     node, w, len(self.phases), self._width)
            except BaseException as exc:  # a fault of the engine itself: the run stops with it
                if self._error is None:
                    self._error = ShoalError(f"executor: {type(exc).__name__}: {exc}")
                finish_segment(self._shared, FAILED)
            finally:
                with lock:
                    left[0] -= 1
                    if not left[0]:
                        ended.set()

        for node, pool in self._pools.items():
            pool.start(lambda w, node=node: job(node, w))
        return ended

    def _stop_workers(self) -> None:
        """End the segment (an error on the main thread) and wait for the workers."""
        finish_segment(self._shared, FAILED)
        self._join_workers()

    def _join_workers(self) -> None:
        for pool in self._pools.values():
            pool.wait()

    def _decide(self) -> bool:
        """A loop's iteration has ended: ask the app whether another follows, grow the
        sequence, and start the next segment; False when the run is over."""
        seq, sh = self._seq, self._shared
        loop, rel_step, it = seq.pending
        last = len(seq) - 1
        phase = self.phases[seq.phase[last]]
        value = self._value(phase, sh.red[last, :len(phase.operations)])
        step = rel_step + self.first_step
        again = loop_again(self.app, loop, step, it, value)  # raises if a required loop did not converge
        if not again:
            self._iterations[(step, loop.name)] = it + 1
        start = len(seq)
        seq.decide(again)
        limit = int(sh.control[LIMIT])
        if limit < seq.steps:
            seq.limit(limit)
        if len(seq) > start:
            self._grow(len(seq))
            self._build(start)
        sh = self._shared
        self._count_off_step(rel_step, 1)  # the decision is taken (it may have been the step's end)
        if len(seq) == start or sh.control[STEPS_DONE] >= limit:
            return False  # the run's last step ended with this decision
        self._start_segment(start)
        return True

    def _emit(self) -> None:
        """Every tile has emitted its jobs (the workers have stopped): place them and cut their
        ranges, then queue the ranges and the tiles of the job phase that wait for none."""
        sh, T = self._shared, self._T
        instance = int(sh.control[JOB_INSTANCE])
        phase = self.phases[self._seq.phase[instance]]
        listed = [self._emitted.pop(t) for t in range(T)]
        self._units, counts = plan_ranges(self.app, self.job_policy, self.owner, self.cluster, phase.node_barrier,
                                          listed)
        here = self._here
        ptr, tiles = [0], []
        for row, _, _, node in self._units:  # whom a range counts in: its tiles here (and its node's, at a barrier)
            mine = range_tiles(row)
            tiles += [t for t in mine if here[t]]
            if phase.node_barrier and node in self._pools:
                tiles += [t for t in self._tiles_of_node[node] if t not in mine]
            ptr.append(len(tiles))
        sh = self._shared = sh._replace(u_ptr=np.asarray(ptr, np.int64), u_tiles=np.asarray(tiles, np.int64))
        # Every tile's task before has ended: its task here waits for its ranges only.
        sh.need[instance * T:(instance + 1) * T] = counts
        queued, later = [[] for _ in range(self.cluster.nodes)], [0] * self.cluster.nodes
        ranges_here = [u for u, unit in enumerate(self._units) if unit[3] in self._pools]
        for u in ranges_here:
            node = self._units[u][3]
            if self._range_ready(instance, u):
                queued[node].append(-2 - u)
            else:  # queued once its inputs from other processes have come
                later[node] += 1
        now = time.monotonic_ns()
        for t in np.flatnonzero((np.asarray(counts) == 0) & here).tolist():
            sh.r_ready[instance * T + t] = now
            queued[self._owner_list[t]].append(instance * T + t)
        self._queue(queued, later)
        # The step waited for this placement; now for the ranges run here too.
        self._count_off_step(int(self._g.step[instance]), 1 - len(ranges_here))

    def _ended(self) -> None:
        """The run's steps are done, its states not yet published (MPI ranks agree on a redo
        here)."""

    def _sharing(self) -> Across:
        """What ``prepare`` shares with the run's other processes (in one process: none)."""
        return Across()

    def _range_ready(self, instance: int, unit: int) -> bool:
        """Whether range ``unit`` of the job phase ``instance`` has every input (here: always)."""
        return True

    def _count_off_step(self, rel_step: int, done: int) -> None:
        """``done`` of what step ``rel_step`` waits for here have ended (the workers stopped):
        the last of them ends it."""
        sh = self._shared
        sh.left[rel_step] -= done
        if not sh.left[rel_step]:
            sh.step_end[rel_step] = time.monotonic_ns()
            sh.control[STEPS_DONE] += 1

    def _queue(self, tasks: list[list[int]], later: list[int]) -> None:
        """Append ``tasks[node]`` to each node's queue (the workers stopped), with room for them
        and ``later[node]`` more ranges."""
        sh = self._shared
        cap = sh.queue.shape[1]
        pending = [[int(sh.queue[n, k % cap]) for k in range(sh.q_head[n], sh.q_tail[n])] + tasks[n]
                   for n in range(len(tasks))]
        # room for the ranges and, as ranges end, every tile of the node (one task each at most)
        need = max(len(p) + later[n] + len(self._tiles_of_node[n]) for n, p in enumerate(pending)) + 1
        if need > cap:  # a ring with room for every range and tile (its items from the start)
            sh = self._shared = sh._replace(queue=np.zeros((len(tasks), max(need, 2 * cap)), np.int64))
            for n, items in enumerate(pending):
                sh.queue[n, :len(items)] = items
                sh.q_head[n], sh.q_tail[n] = 0, len(items)
            return
        for n, items in enumerate(tasks):
            for task in items:
                sh.queue[n, sh.q_tail[n] % cap] = task
                sh.q_tail[n] += 1

    def _no_room(self):
        """Back to the run's start (the memory as it was, the states published): a redo follows."""
        self._mem[:] = self._start_mem
        self.layout.native.publish(self.states)
        raise _NoRoom

    def _failure(self) -> ShoalError:
        """The error that stopped the run, as one line naming step, phase and tile."""
        if self._error is not None:
            return self._error
        sh, g = self._shared, self._g
        task, kind = int(sh.control[ERROR_TASK]), int(sh.control[ERROR_KIND])
        instance, tile = divmod(task, self._T)
        if kind == ERROR_CAPACITY:  # an app that cannot grow its room (no publish)
            what = "no room for a halo or a tile's state, and the app cannot make more"
        elif kind == ERROR_HALO:
            what = (f"halo staging overrun: the tile packed halos its reader had not read yet (staging depth "
                    f"{g.stamp_depth})")
        elif kind == ERROR_KERNEL:
            what = self._kernel_error(instance, tile)
        else:
            what = "failed"
        return task_error(what, int(g.step[instance]) + self.first_step, self.phases[int(g.phase[instance])].name,
                          tile)

    def _kernel_error(self, instance: int, tile: int) -> Exception | str:
        """What a native kernel raised: compiled code keeps no message, so the app explains it
        from the tile's state, or the kernel runs again from Python on a copy of the tile's
        memory, which raises it here."""
        g = self._g
        native = self.layout.native
        if native.explain is not None:
            state = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in self.states[tile].items()}
            try:
                native.explain(self.phases[int(g.phase[instance])].name, tile, state)
            except Exception as exc:  # noqa: BLE001
                return exc
            return "the compiled kernel raised an error"
        reduced = np.empty((len(self.phases), self._width))
        fill_context(g, self._shared, instance, reduced)
        mem = self._mem[self._mem_off[tile]:self._mem_off[tile + 1]].copy()
        ints = self._ints[self._int_off[tile]:self._int_off[tile + 1]]
        try:
            self._kernels[g.kernel[instance]](tile, int(g.step[instance]) + self.first_step,
                                              int(g.iteration[instance]), mem, ints, self._consts, reduced,
                                              np.zeros(max(self._width, 1)))
        except Exception as exc:  # noqa: BLE001
            return exc
        return "the compiled kernel raised an error"

    # ----- results -------------------------------------------------------------------------
    def _task_rows(self, a: int, b: int, cpu: bool = False) -> dict[str, np.ndarray]:
        """Task rows ``a:b`` of the current run as a :data:`~shoal.records.TASKS` table. A task's
        cost is its wall time; with ``cpu``, when the process's threads outnumber its cores, the
        costs of a node's tasks in a step are scaled down to the CPU time its workers used in
        it, where that is less (threads kept from their cores). A step's scale is taken once, when its rows are first
        asked for (a step reported during the run): its rows in the result are the same."""
        T, sh, seq = self._T, self._shared, self._seq
        index = np.arange(a, b)
        instance = index // T
        ran = sh.r_node[a:b] >= 0
        ns = 1e-9
        start = np.where(ran, (sh.r_start[a:b] - self._t0) * ns, NOT_RUN[2])
        end = np.where(ran, (sh.r_end[a:b] - self._t0) * ns, NOT_RUN[3])
        step = np.asarray(seq.step, np.int64)[instance]
        node = sh.r_node[a:b].copy()
        cost = end - start
        kernel = np.where(ran, sh.r_kernel[a:b] * ns, 0.0)
        compiled = self._g.kernel[instance] >= 0  # a Python phase's kernel time is CPU time already
        # Only where the threads outnumber the cores: elsewhere a task's wall time is its CPU time,
        # and a step's CPU may not all be counted yet when it is first reported.
        if cpu and ran.any() and self._oversubscribed():
            nodes = self.cluster.nodes
            at = step[ran] * nodes + node[ran]
            wall = np.bincount(at, weights=cost[ran], minlength=len(sh.cpu))
            used = sh.cpu[:len(wall)] * ns
            scale = np.where(wall > used, used / np.maximum(wall, 1e-300), 1.0).reshape(-1, nodes)
            for k in np.unique(step[ran]).tolist():
                scale[k] = self._scales.setdefault(k, scale[k])
            cost[ran] *= scale.ravel()[at]
            kernel[ran & compiled] *= scale.ravel()[step[ran & compiled] * nodes + node[ran & compiled]]
        table = {"step": step + self.first_step,
                 "phase": np.asarray(seq.phase, np.int64)[instance], "tile": index % T,
                 "iteration": np.asarray(seq.iteration, np.int64)[instance],
                 "node": node, "worker": sh.r_worker[a:b].copy(), "start": start, "end": end,
                 "cost": cost, "work": np.where(ran, sh.r_work[a:b], 0),
                 "kernel": kernel, "kernel_calls": ran.astype(np.int64),
                 "ready": np.where(ran, (sh.r_ready[a:b] - self._t0) * ns, 0.0)}
        return TASKS.table(table)

    def _edges_of(self, links) -> tuple[np.ndarray, np.ndarray]:
        """``links.edges()``, made once per distinct links of the run."""
        got = self._edges.get(id(links))
        if got is None:
            got = self._edges[id(links)] = links.edges()
        return got

    def _result(self, done: int, wall: float) -> ExecutionResult:
        seq, sh, T = self._seq, self._shared, self._T
        end = seq.step_first[done] if done < len(seq.step_first) else len(seq)
        reductions = dict(self._reduced)
        for i in np.flatnonzero(self._g.nvals[:end]).tolist():  # in order: a loop's last iteration wins
            p = self.phases[seq.phase[i]]
            reductions[(seq.step[i] + self.first_step, p.name)] = self._value(p, sh.red[i, :len(p.operations)])
        messages = MESSAGES.empty(self._msg_offset[end])
        counts = np.diff(self._msg_offset[:end + 1])
        instance = np.repeat(np.arange(end), counts)
        messages["step"][:] = np.asarray(seq.step, np.int64)[instance] + self.first_step
        messages["phase"][:] = np.asarray(seq.phase, np.int64)[instance]
        messages["iteration"] = np.asarray(seq.iteration, np.int32)[instance]
        edges = [self._edges_of(self._links_of[i]) for i in range(end) if self._links_of[i] is not None]
        if edges:
            messages["src"][:] = np.concatenate([e[0] for e in edges])
            messages["dst"][:] = np.concatenate([e[1] for e in edges])
        sizes = self._m_bytes[:self._msg_offset[end]]
        messages["bytes"][:] = np.where(sizes == VARIABLE, 8 * self._shared.sent[:len(sizes)], sizes)
        step_end = (sh.step_end[:done] - self._t0) * 1e-9
        return ExecutionResult(
            states=self.states, first_step=self.first_step, steps=done,
            tasks=self._task_rows(0, end * T, cpu=True), messages=MESSAGES.select(messages, messages["bytes"] >= 0),
            reductions={k: v for k, v in reductions.items() if k[0] < self.first_step + done},
            wall_s=wall, step_end=step_end,
            oversubscribed=self._oversubscribed(),
            iterations={k: v for k, v in self._iterations.items() if k[0] < self.first_step + done},
            jobs=JOB_RUNS.from_rows(self._job_rows) if self._job_rows else None,
        )
