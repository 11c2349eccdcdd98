"""The local executor: nodes that live inside one process, each a pool of worker threads.

Every node keeps a FIFO queue of ready tasks; any idle worker of the node takes the next one.
A task is one phase of one tile in one step. It becomes ready as soon as the tile's previous
task has finished and the halos it needs have been packed by its neighbours (and, after a
phase with a reduction, once the reduction is done; after a lagged one, once the previous
step's is). There is no other barrier: tiles of one node may be a phase ahead of tiles
elsewhere.

Kernels run without the GIL (Numba ``nogil``), so W workers run W kernels at once. All
bookkeeping happens under one lock, taken once per task: a worker books the task it finished
and takes its next one in the same hold. When the finished task makes its own tile's next
task ready, the worker runs that one at once (no queue round trip, no wake-up); a sleeping
worker is woken only for queued tasks that no worker already woken will take. Every task
records when it became ready, started and ended. The worker threads live as
long as the executor: between runs they sleep, and :meth:`LocalExecutor.reconfigure` gives
tiles new owners and nodes more or fewer threads. A run asked to stop (``stop`` event) ends at
the next step boundary every tile can reach: no tile starts a step that not every tile is
already in.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

import numpy as np

from ..cluster import Cluster
from ..errors import ShoalError
from ..log import logger
from ..records import JOB_RUNS, MESSAGES, TASKS
from ..tiling import Tiling
from .app import App, StepContext, payload_bytes, reduce_in_order
from .graph import StepGraph, TaskSequence
from .jobs import NODE_DONE, job_row, plan_ranges, range_tiles, run_range
from .timing import thread_clock
from .workers import WorkerPool

# How long a thread that wants the interpreter lock waits before it forces the holder to let go.
# Workers hand the lock to each other at every kernel call anyway; forcing it sooner only adds
# hand-overs (each costs system calls): 1 ms ran the 2D dam break at 256 tiles on 1 x 2 6-15%
# faster than 0.1 ms, in every one of 14 alternating rounds, and CPython's default 5 ms could
# leave a worker back from its kernel idle that long behind another's Python.
GIL_SWITCH_S = 1e-3
NBYTES = attrgetter("nbytes")  # a halo payload's size, when it is an array
# The columns a worker writes for a task it ran, as one tuple, in this order.
RAN = ("node", "worker", "start", "end", "cost", "work", "kernel", "kernel_calls")
NOT_RUN = (-1, -1, 0.0, 0.0, 0.0, 0, 0.0, 0)  # a task row nobody here ran (run elsewhere, or not run)
# Libraries that start threads of their own: a worker thread is one core's worth of work.
THREAD_VARIABLES = ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def configure_worker_thread() -> None:
    """Run this thread's Numba parallel regions on one thread (called once in every worker
    thread): tiles are the parallelism, and a kernel that fanned out would take other
    workers' cores. Without Numba, or where its threading layer refuses, nothing changes."""
    try:
        import numba

        numba.set_num_threads(1)
    except (ImportError, ValueError, RuntimeError):
        pass


@contextlib.contextmanager
def as_worker_thread():
    """Inside the block the calling thread runs its Numba parallel regions on one thread, as a
    worker thread does (for a thread that is its node's worker for a run); as before after it."""
    try:
        import numba

        before = numba.get_num_threads()
    except (ImportError, ValueError, RuntimeError):
        before = None
    configure_worker_thread()
    try:
        yield
    finally:
        if before is not None:
            numba.set_num_threads(before)


def worker_thread_settings() -> dict:
    """What worker threads run with, for a run's provenance record.

    Returns
    -------
    dict
        ``numba_threads`` (threads a worker's Numba parallel region uses: 1, or ``None``
        without Numba), ``switch_interval_s`` (the interpreter's switch interval during a
        run) and each of ``NUMBA_NUM_THREADS``, ``OMP_NUM_THREADS``, ``MKL_NUM_THREADS`` and
        ``OPENBLAS_NUM_THREADS`` as set in the environment (``None`` when unset).
    """
    try:
        import numba  # noqa: F401

        numba_threads = 1
    except ImportError:
        numba_threads = None
    return {"numba_threads": numba_threads, "switch_interval_s": GIL_SWITCH_S,
            **{name: os.environ.get(name) for name in THREAD_VARIABLES}}


@dataclass
class ExecutionResult:
    """What one run of the executor measured; the trace is written from it.

    ``tasks`` and ``messages`` are tables of :data:`~shoal.records.TASKS` and
    :data:`~shoal.records.MESSAGES`: every task of the steps run, in (step, phase, tile) order
    (tasks another process ran have ``node`` -1), and every halo payload packed here.

    Attributes
    ----------
    states : dict of int to state
        Every tile's state after the last step run, by tile id.
    first_step : int
        The step the run started from.
    steps : int
        Steps run: fewer than asked when the run was stopped, or on the native executor when
        the app's memory changes layout at a step before the last (a regrid).
    reductions : dict
        ``{(step, phase name): value}`` of every reduction of the steps run.
    wall_s : float
        Wall time of the run, in seconds.
    step_end : ndarray of float
        Seconds from the run's start to the end of each step run.
    oversubscribed : bool
        Whether the run had more worker threads than the machine has cores (its times then
        measure the machine's scheduler as much as the app).
    comm_cpu_s, comm_messages : ndarray, optional
        Per node, where messages move between processes (MPI): the seconds its workers spent
        moving them (before tasks and while waiting for one), and how many tile-to-tile
        payloads were sent or received.
    iterations : dict
        ``{(step, loop name): iterations run}`` of every loop of the steps run (a loop is named
        after its first phase).
    jobs : dict of ndarray, optional
        A :data:`~shoal.records.JOB_RUNS` table: every range of a job run here (none: no job
        phase ran).
    """

    states: dict[int, Any]
    first_step: int
    steps: int
    tasks: dict[str, np.ndarray]
    messages: dict[str, np.ndarray]
    reductions: dict[tuple[int, str], float]
    wall_s: float
    step_end: np.ndarray
    oversubscribed: bool
    # Per node, where messages move between processes (MPI): the seconds its workers spent
    # moving them, and how many tile-to-tile payloads were sent or received.
    comm_cpu_s: np.ndarray | None = None
    comm_messages: np.ndarray | None = None
    iterations: dict[tuple[int, str], int] = field(default_factory=dict)
    jobs: dict[str, np.ndarray] | None = None


class NodePools:
    """What every executor of in-process nodes does with its worker threads between runs: new
    owners for the tiles, more or fewer threads on a node, pinning, closing. A subclass sets
    ``owner``, ``cluster`` and ``_pools`` (``{node: WorkerPool}`` of the nodes it runs)."""

    def reconfigure(self, owner: np.ndarray | None = None, cores: dict[int, int] | None = None) -> None:
        """Between runs: new owners for the tiles, and new pool sizes for some nodes.

        Parameters
        ----------
        owner : ndarray of int, optional
            The node of every tile from the next run on; unchanged when omitted.
        cores : dict of int to int, optional
            ``{node: worker threads}`` for nodes whose pool grows or shrinks; a node keeps at
            least one thread.

        Raises
        ------
        ShoalError
            If ``cores`` names a node the cluster lacks or leaves one without a thread.
        """
        if owner is not None:
            self.owner = np.asarray(owner, dtype=np.int64).copy()
        if cores:
            new = list(self.cluster.cores)
            for node, n in cores.items():
                if not 0 <= node < self.cluster.nodes:
                    raise ShoalError(f"no node {node}: the run has nodes 0..{self.cluster.nodes - 1}")
                if n < 1:
                    raise ShoalError(f"node {node} needs at least one worker thread, got {n}")
                new[node] = int(n)
            for node, pool in self._pools.items():
                pool.resize(new[node])
            self.cluster = Cluster(tuple(new), self.cluster.network)

    def pin(self, node: int, cpus: list[int] | None) -> None:
        """Pin node ``node``'s worker threads to ``cpus`` (one CPU per thread, in thread order)
        before their next task, or unpin them (``None``); between runs only.

        Parameters
        ----------
        node : int
            A node this process runs.
        cpus : list of int or None
            The CPU of every worker thread of the node, or ``None``.
        """
        self._pools[node].pin(cpus)

    def close(self) -> None:
        """End the worker threads."""
        for pool in self._pools.values():
            pool.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class LocalExecutor(NodePools):
    """Run an app's tiles on ``cluster.nodes`` in-process nodes of ``cluster.cores[k]`` threads.

    Parameters
    ----------
    app : App
        The physics.
    tiling : Tiling
        How the grid is split.
    cluster : Cluster
        Nodes; ``cluster.cores[k]`` worker threads run on node ``k``.
    owner : ndarray
        ``owner[tile] -> node``.

    Call :meth:`close` when done (the threads are daemons, so a forgotten executor does not
    keep the process alive).
    """

    backend = "python"

    def __init__(self, app: App, tiling: Tiling, cluster: Cluster, owner: np.ndarray, job_policy: str = "locality"):
        self.app = app
        self.job_policy = job_policy  # where a job phase's jobs run (shoal.placement.job_policies)
        self.tiling = tiling
        self.cluster = cluster
        self.owner = np.asarray(owner, dtype=np.int64).copy()
        self.phases = tuple(app.phases)
        self._runners = [getattr(app, p.method) for p in self.phases]
        self._packers = [getattr(app, p.pack) if p.halo or p.jobs else None for p in self.phases]
        self._job_runners = [getattr(app, p.jobs) if p.jobs else None for p in self.phases]
        self.graph = StepGraph(app, tiling)
        # Per tile, the ranges of the last job phase it was the first tile of, as measured: it
        # hands them in with its next jobs, so every process's profiled placement reads the same.
        self._window: dict[int, list[tuple]] = {}
        self._pools = {node: WorkerPool(cluster.cores[node], f"shoal-node{node}", configure_worker_thread)
                       for node in self._nodes_here()}

    # ----- public (and the nodes' pools: see NodePools) ----------------------------------
    def run(
        self,
        steps: int,
        states: dict[int, Any] | None = None,
        first_step: int = 0,
        on_step: Callable[[int], None] | None = None,
        reduced_before: dict[tuple[int, str], float] | None = None,
        stop: threading.Event | None = None,
    ) -> ExecutionResult:
        """Run ``steps`` steps; ``on_step(k)`` is called (from this thread) as steps finish.

        ``states`` are the tiles' states by tile id to start from (a resumed run's; default
        every tile's :meth:`~shoal.runtime.app.App.init_tile`), at step ``first_step``.
        ``reduced_before`` holds the reductions of earlier steps, by (step, phase name): a
        lagged reduction's value from the step before ``first_step`` is read from there (at
        step 0 from the app's ``initial_reductions()``), and so are the barriers' values of that
        step, which the first phase reads as it would in a run that had not stopped. Once
        ``stop`` is set the run ends at the next step boundary every tile can reach; the result
        says how many steps ran.
        """
        if steps <= 0:
            raise ShoalError(f"steps must be positive, got {steps}")
        self._reduced_before = lagged_start(self.app, first_step, reduced_before or {})
        # The barriers' latest values: what a task reads of them (see _context) does not depend
        # on where runs begin and end (a balancing step, a resume).
        self._barriers_before = {p.name: reduced_value(reduced_before[(first_step - 1, p.name)])
                                 for p in self.phases
                                 if p.barrier and (first_step - 1, p.name) in (reduced_before or {})}
        T = self.tiling.ntiles
        if states is None:
            states = {t: self.app.init_tile(t, self.tiling) for t in range(T)}
        self._setup(steps, states, first_step)
        # A finished step wakes this thread only when it has steps to report (then a stop asked
        # from a step's callback is heard at once); each wake takes the interpreter lock from a
        # worker, which costs it several microseconds a task on short steps. Without one, this
        # thread looks at ``stop`` every few tens of milliseconds.
        self._wake_per_step = on_step is not None
        # Workers hand the GIL to each other between kernels (see GIL_SWITCH_S).
        switch = sys.getswitchinterval()
        sys.setswitchinterval(GIL_SWITCH_S)
        # Cyclic garbage collection would stop whichever task happens to trigger it for
        # milliseconds and land in that task's measured cost; tile states hold no cycles.
        collecting = gc.isenabled()
        gc.disable()
        self._t0 = self._start_clock()
        started = []
        try:
            with self._lock:
                self._deliver_initial_halos()
            for node, pool in self._pools.items():
                if node != self._inline:
                    pool.start(lambda w, node=node: self._guarded(node, w))
                    started.append(pool)
            reported = self._wait(on_step, stop)
        except BaseException:
            with self._lock:  # an error here (a callback, a second Ctrl-C): workers end their task and go
                self._stop()
            raise
        finally:
            for pool in started:
                pool.wait()
            sys.setswitchinterval(switch)
            if collecting:
                gc.enable()
        if self._error is not None:
            raise self._error
        wall = self._wall()
        self._report(on_step, reported)
        done, end = self._seq.steps, self._limit
        messages = self._message_rows()
        sent = messages["bytes"] >= 0
        sent[self._msg_offset[end]:] = False  # packed for a task not run
        return ExecutionResult(
            states=self.states, first_step=first_step, steps=done,
            tasks=self._task_rows(slice(0, end * T)),
            messages=MESSAGES.select(messages, sent),
            iterations={k: v for k, v in self._iterations.items() if k[0] < first_step + done},
            jobs=JOB_RUNS.from_rows(self._job_rows) if self._job_rows else None,
            reductions={k: v for k, v in self._reduced.items() if k[0] < first_step + done},
            wall_s=wall, step_end=self._step_end[:done],
            oversubscribed=self.cluster.total_cores > (os.cpu_count() or 1),
        )

    def step_tasks(self, k: int) -> dict[str, np.ndarray]:
        """The task rows of step ``k`` of the current run (counted from its first) that ran
        here; complete once the step is reported finished."""
        first = self._seq.step_first
        end = first[k + 1] if k + 1 < len(first) else len(self._seq)
        rows = self._task_rows(slice(first[k] * self._T, end * self._T))  # finished: no worker writes them
        return TASKS.select(rows, rows["node"] >= 0)

    # ----- what the MPI executor overrides --------------------------------------------------
    def _nodes_here(self) -> list[int]:
        """The nodes whose workers run in this process."""
        return list(range(self.cluster.nodes))

    def _tiles_here(self) -> np.ndarray:
        return np.ones(self.tiling.ntiles, dtype=bool)

    def _start_clock(self) -> float:
        return time.perf_counter()

    def _wait(self, on_step, stop: threading.Event | None) -> int:
        """Report finished steps until the run is over; return how many were reported."""
        reported = 0
        while not self._finished.is_set():
            # Woken as each step ends: a callback that asks to stop is heard at once.
            self._progress.wait(0.05)
            self._progress.clear()
            reported = self._report(on_step, reported)
            if stop is not None and stop.is_set() and not self._stopping:
                with self._lock:
                    self._stopping = True
                    self._limit_steps(self._frontier())
        return reported

    def _wall(self) -> float:
        return time.perf_counter() - self._t0

    def _post_halos(self, tile: int, task: int, payloads: list) -> None:
        """Hand the halos that ``tile`` packed (one per neighbour, in its neighbour order) to
        their destinations (caller holds the lock)."""
        self._deliver(tile, task, self._links[task].readers[tile], payloads)

    def _deliver(self, src: int, task: int, dsts: list, payloads: list) -> None:
        """Put the halos that ``src`` packed for task ``task`` of the tiles ``dsts`` (tiles
        here, one payload each, in order) in their inboxes, and queue each tile whose last
        halo this was (caller holds the lock)."""
        inbox, idle, nexts = self._inbox, self._idle, self._next
        if task >= self._limit:  # a halo from a rank ahead, for a task not yet in the sequence here
            for dst, payload in zip(dsts, payloads):  # noqa: B905
                inbox[dst].setdefault(task, {})[src] = payload
            return
        fanin = self._fanins[task]
        waits_token = self._token_tasks[task]
        for dst, payload in zip(dsts, payloads):  # noqa: B905 (a keyword costs a parse per task)
            box = inbox[dst]
            got = box.get(task)
            if got is None:
                box[task] = got = {}
            got[src] = payload
            # Its last halo: ready unless it waits on a reduction too (as in _ready, inline).
            if len(got) == fanin[dst] and idle[dst] and nexts[dst] == task and not (
                    waits_token and not self._tokens[dst].get(task)):
                idle[dst] = False
                self._ready_at[task * self._T + dst] = time.perf_counter() - self._t0
                self._enqueue(self._owner_of[dst], dst, task)

    def _contribute(self, tile: int, task: int, value) -> None:
        """A tile's value for the reduction of ``task`` (caller holds the lock)."""
        self._collect({tile: value}, task)

    def _all_done(self) -> None:
        """Every task of this process is done."""
        self._stop()

    def _stop(self) -> None:
        self._finished.set()
        self._progress.set()
        for c in self._conds.values():
            c.notify_all()

    # ----- stopping early (caller holds the lock) ------------------------------------------
    def _frontier(self) -> int:
        """The steps that must be completed for every tile here to stop at a step boundary:
        every step some tile here has started (a queued or running task counts as started)."""
        last = [self._next[t] - self._idle[t] for t in np.flatnonzero(self._here)]  # its latest task started
        return max((self._seq.step[i] + 1 for i in last if i >= 0), default=0)

    def _limit_steps(self, steps: int) -> None:
        """Run only the first ``steps`` steps of this run (never more than it has)."""
        steps = min(steps, self.steps)
        self._append(self._seq.limit(steps))
        self._limit = self._seq.end()
        if self._steps_done >= steps:
            self._all_done()
            return
        for t in np.flatnonzero(self._here):
            self._try_ready(int(t))

    # ----- set-up --------------------------------------------------------------------------
    def _setup(self, steps, states, first_step):
        T = self.tiling.ntiles
        self._T = T
        self.steps, self.first_step, self.states = steps, first_step, states
        # Workers that move messages themselves (the MPI executor's; the local executor has
        # none to move): ``_pump()`` before each task, outside the lock, and, while the queue is
        # empty, ``_idle_wait()`` by one idle worker at a time (lock not held; it returns once
        # a task is queued or the run is over) while the others sleep. ``_inline``: the node
        # whose one worker is the calling thread (a rank of one worker), else None.
        self._inline = self._pump = self._idle_wait = None
        self._pumping = False  # an idle worker is in _idle_wait
        self._lock = threading.Lock()
        self._conds = {node: threading.Condition(self._lock) for node in self._pools}
        self._queues = {node: deque() for node in self._pools}
        self._waiting = dict.fromkeys(self._pools, 0)  # workers of each node waiting for a ready task
        self._woken = dict.fromkeys(self._pools, 0)  # of those, the ones notified that have not yet woken
        self._finished = threading.Event()
        self._progress = threading.Event()  # set as steps end and when the run stops
        self._stopping = False
        self._error: BaseException | None = None
        # Lists, not arrays: read and written several times per task, one element at a time.
        self._next = [0] * T  # next task index of every tile
        self._owner_of = self.owner.tolist()
        here = self._tiles_here()
        self._here = here
        self._n_here = int(here.sum())
        self._tiles_of_node = [np.flatnonzero(self.owner == n).tolist() for n in range(self.cluster.nodes)]
        self._idle = here.tolist()  # not running, not queued (tiles elsewhere never run here)
        self._reduces = [p.gathers for p in self.phases]  # tasks that hand a value in (to reduce, or jobs)
        self._reductions_done = 0
        self._inbox: list[dict[int, dict[int, Any]]] = [dict() for _ in range(T)]
        self._tokens: list[dict[int, int]] = [dict() for _ in range(T)]
        self._values: dict[int, list] = {}
        self._missing: dict[int, int] = {}  # per reduction, the tiles whose value has not come
        self._reduced: dict[tuple[int, str], float] = dict(self._reduced_before)
        self._ctx_reduced: dict[str, float] = dict(self._barriers_before)
        self._contexts: dict[int, StepContext] = {}  # per task index: every tile reads the same
        self._lagged = [(i, p.name) for i, p in enumerate(self.phases) if p.lagged]
        self._lag_readers: dict[tuple[int, int], int] = {}  # (step, lagged phase) -> the task reading it
        self._left_in_step = [0] * steps  # tasks here not yet done (and loop decisions pending), per step
        self._step_end = np.zeros(steps)
        self._steps_done = 0
        self._iterations: dict[tuple[int, str], int] = {}  # (step, loop) -> iterations run
        # A task is one *instance* of a phase (a phase of a loop has one per iteration) run by
        # one tile; task index = instance x tiles + tile. Every list below grows as the sequence
        # does (all at once without loops; an iteration at a time with them): task rows in
        # (instance, tile) order, one tuple per task written by its worker (one list store; a
        # NumPy element costs ten times more), the ready times apart (written by whoever made
        # the task ready); who reads whom in every instance (None: it reads no halos); message
        # rows in (instance, source, reader) order, all but their sizes known beforehand; what
        # each instance waits on, worked out once (readiness is checked several times a task).
        self._seq = TaskSequence(self.phases, self.app.loops, steps)
        self._rows: list[tuple | None] = []
        self._ready_at: list[float] = []
        self._first = [None] * T  # (cost, kernel, calls) of packing a tile's halos ahead of its next task
        self._links: list = []
        self._fanins: list = []
        self._halo_tasks: list[bool] = []
        self._token_tasks: list[int] = []
        self._msg_offset = [0]
        self._msg_edges: list[tuple[np.ndarray, np.ndarray]] = []
        self._edges_of: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # per distinct links: (src, dst)
        self._m_bytes: list[int] = []  # -1: not packed (yet)
        self._reduce_prefix = [0]  # reductions among the first k instances
        # Jobs (a job phase's instance): every tile's input, packed after its task before; per
        # instance the ranges to run, (job row, first, stop, node); the rows of ranges run.
        self._job_tasks: list[bool] = []
        self._job_inputs: dict[int, Any] = {}
        self._units: dict[int, list] = {}
        self._job_rows: list[tuple] = []
        self._limit = 0  # tasks from this instance on are not run (not yet in the sequence, or after a stop)
        self._append(self._seq.extend())

    def _append(self, instances: range) -> None:
        """Grow every per-instance list by the sequence's new ``instances`` (caller holds the lock,
        or the run has not started)."""
        T, seq, first = self._T, self._seq, self.first_step
        for i in instances:
            phase, step = seq.phase[i], seq.step[i]
            links = self.graph.links(phase, step + first)
            self._links.append(links)
            jobs = bool(self.phases[phase].jobs)
            self._job_tasks.append(jobs)
            self._fanins.append(None if links is None else links.fanin)  # a job phase's: set as its jobs are
            self._halo_tasks.append(links is not None or jobs)  # the task before packs its inputs
            if links is None:
                self._msg_offset.append(self._msg_offset[-1])
            else:
                pair = self._edges_of.get(id(links))
                if pair is None:
                    pair = self._edges_of[id(links)] = links.edges()
                self._msg_edges.append(pair)
                self._msg_offset.append(self._msg_offset[-1] + links.count)
                self._m_bytes.extend([-1] * links.count)
            self._rows.extend([None] * T)
            self._ready_at.extend([0.0] * T)
            self._left_in_step[step] += self._n_here
            self._reduce_prefix.append(self._reduce_prefix[-1] + self._reduces[phase])
            self._token_tasks.append(self._reads_token(i))
            if self._token_tasks[i] and self.phases[seq.phase[i - 1]].lagged:
                key = (step - 1, seq.phase[i - 1])  # the lagged reduction this task reads
                if (step - 1 + first, self.phases[key[1]].name) in self._reduced:
                    self._give_token(i)
                else:
                    self._lag_readers[key] = i
        if seq.pending is not None and instances:
            self._left_in_step[seq.pending[1]] += 1  # the loop's decision, taken here too
        self._limit = seq.end()

    @property
    def _reductions_left(self) -> int:
        """Reductions of the tasks this run may still run that have not completed."""
        return self._reduce_prefix[self._limit] - self._reductions_done

    def _message_rows(self) -> dict[str, np.ndarray]:
        """The message rows of the instances appended, sizes included (-1: not packed)."""
        seq, counts = self._seq, np.diff(self._msg_offset)
        messages = MESSAGES.empty(self._msg_offset[-1])
        instance = np.repeat(np.arange(len(seq)), counts)
        messages["step"][:] = np.asarray(seq.step, dtype=np.int64)[instance] + self.first_step
        messages["phase"][:] = np.asarray(seq.phase, dtype=np.int64)[instance]
        messages["iteration"] = np.asarray(seq.iteration, dtype=np.int32)[instance]
        if self._msg_edges:
            messages["src"][:] = np.concatenate([e[0] for e in self._msg_edges])
            messages["dst"][:] = np.concatenate([e[1] for e in self._msg_edges])
        messages["bytes"][:] = self._m_bytes
        return messages

    def _task_rows(self, rows: slice) -> dict[str, np.ndarray]:
        """Task rows ``rows`` of the current run as a :data:`~shoal.records.TASKS` table."""
        T, seq = self._T, self._seq
        index = np.arange(rows.start, rows.stop)
        instance = index // T
        table = {"step": np.asarray(seq.step, dtype=np.int64)[instance] + self.first_step,
                 "phase": np.asarray(seq.phase, dtype=np.int64)[instance], "tile": index % T}
        table["iteration"] = np.asarray(seq.iteration, dtype=np.int64)[instance]
        ran = [row or NOT_RUN for row in self._rows[rows]]
        table.update(zip(RAN, zip(*ran, strict=True) if ran else [()] * len(RAN), strict=True))
        table["ready"] = self._ready_at[rows]
        return TASKS.table(table)

    def _reads_token(self, task: int) -> int:
        """1 if a task waits on a reduction token: the task before it in the sequence reduces,
        and the reduction it reads (that task's, or a step earlier when lagged) is not from
        before this run."""
        if task == 0:
            return 0  # it reads the reductions of the step before the run
        prev = self.phases[self._seq.phase[task - 1]]
        if not prev.gathers:
            return 0
        return 1 if not prev.lagged or self._seq.step[task] >= 1 else 0

    def _give_token(self, task: int) -> None:
        """A reduction that ``task`` reads is done: let every tile here run it once its other
        inputs are in (caller holds the lock)."""
        for t in np.flatnonzero(self._here):
            self._tokens[t][task] = self._tokens[t].get(task, 0) + 1
            self._try_ready(int(t))

    def _context(self, task: int) -> StepContext:
        """The step and the reductions a task reads (caller holds the lock), made once per task
        index: the last barrier's values, and each lagged value of the step before from the
        phase after the lagged one on (earlier phases of the step cannot rely on it yet)."""
        ctx = self._contexts.get(task)
        if ctx is None:
            step, phase = self._seq.step[task] + self.first_step, self._seq.phase[task]
            reduced = dict(self._ctx_reduced)
            for index, name in self._lagged:
                if phase > index and (step - 1, name) in self._reduced:
                    reduced[name] = self._reduced[(step - 1, name)]
            ctx = self._contexts[task] = StepContext(step, reduced, self._seq.iteration[task])
        return ctx

    # ----- dependency bookkeeping (caller holds the lock) ----------------------------------
    def _deliver_initial_halos(self):
        """Halos for the very first task are packed from the initial state, by the workers (see
        :meth:`_pack_ahead`)."""
        self._pack_ahead(0)

    def _pack_ahead(self, task: int) -> None:
        """Every tile here is about to run ``task``, which reads halos nobody has packed: at the
        run's start, or after a loop's decision (no tile knew its next task when its last one
        ended). Each tile's packing is queued on its node ahead of every task, and its CPU time
        is added to the tile's next task, so that this packing, which every re-balancing step
        repeats, runs in parallel and is measured like the packing that follows a task."""
        halos = task < self._limit and self._halo_tasks[task]
        for t in np.flatnonzero(self._here):
            if halos:
                self._idle[t] = False  # the tile waits for its own packing before it runs
                self._enqueue(self._owner_of[t], int(t), -1 - task)
            else:
                self._try_ready(int(t))

    def _ready(self, tile: int) -> bool:
        """Whether ``tile`` is idle and its next task has every input; if so the task is marked
        taken (the caller queues or runs it) and its ready time recorded."""
        task = self._next[tile]
        if not self._idle[tile] or task >= self._limit:
            return False
        missing = self._token_tasks[task] and 1 - self._tokens[tile].get(task, 0)
        fanin = self._fanins[task]
        if fanin is not None:
            missing += fanin[tile] - len(self._inbox[tile].get(task, ()))
        if missing:
            return False
        self._idle[tile] = False
        self._ready_at[task * self._T + tile] = time.perf_counter() - self._t0
        return True

    def _try_ready(self, tile: int) -> None:
        """Queue ``tile``'s next task on its node if it is ready."""
        if self._ready(tile):
            self._enqueue(self._owner_of[tile], tile, self._next[tile])

    def _enqueue(self, node: int, tile: int, task: int) -> None:
        self._queues[node].append((tile, task))
        if self._waiting[node]:  # else no worker sleeps: none to wake
            self._wake_one(node)

    def _wake_one(self, node: int) -> None:
        """Notify one sleeping worker of ``node`` if its queue holds more tasks than the workers
        already notified will take (a busy worker takes the rest when it finishes)."""
        woken = self._woken[node]
        if self._waiting[node] > woken and len(self._queues[node]) > woken:
            self._woken[node] = woken + 1
            self._conds[node].notify()

    # ----- workers -------------------------------------------------------------------------
    def _guarded(self, node: int, worker: int) -> None:
        """A worker's run; an error outside a task's own code still stops the run, with its cause."""
        try:
            self._worker(node, worker)
        except BaseException as exc:
            self._fail(exc, None, None)

    def _worker(self, node: int, worker: int) -> None:
        queue, cond, lock, finished = self._queues[node], self._conds[node], self._lock, self._finished
        T, t_run, seq_phase, seq_step = self._T, self._t0, self._seq.phase, self._seq.step
        job_tasks = self._job_tasks
        emits = [p.emits_jobs for p in self.phases]
        tiling, runners, reduces, halo_tasks = self.tiling, self._runners, self._reduces, self._halo_tasks
        inbox, tokens, token_tasks, contexts = self._inbox, self._tokens, self._token_tasks, self._contexts
        nexts, idle, fanins, left_in_step = self._next, self._idle, self._fanins, self._left_in_step
        post, contribute, pack_all = self._post_halos, self._contribute, self._pack_all
        states, first, rows, r_ready, waiting = self.states, self._first, self._rows, self._ready_at, self._waiting
        perf, cpu, clock = time.perf_counter, time.thread_time, thread_clock()
        pump, idle_wait = self._pump, self._idle_wait
        tile = task = -1  # the task just run, booked at the next lock (none yet)
        halo_out = value = None
        while True:
            with lock:
                # One lock per task: book the last one and take the next, its tile's own when
                # that is ready (no queue, no wake-up), else the queue's first.
                own = False
                if task >= 0:
                    nxt = task + 1
                    if halo_out is not None:
                        post(tile, nxt, halo_out)
                    nexts[tile] = nxt
                    idle[tile] = True
                    if value is not None:
                        if emits[seq_phase[task]]:  # the jobs, with what this tile's last ones measured
                            value = (value, self._window.pop(tile, []))
                        contribute(tile, task, value)
                    s = seq_step[task]
                    left_in_step[s] -= 1
                    if not left_in_step[s]:
                        self._step_done(s)
                    # The tile's next task, ready when it has every input (as in _ready).
                    if nxt < self._limit and idle[tile] and not (
                            token_tasks[nxt] and 1 - tokens[tile].get(nxt, 0)
                            or (fanin := fanins[nxt]) is not None and fanin[tile] - len(inbox[tile].get(nxt, ()))):
                        idle[tile] = False
                        r_ready[nxt * T + tile] = perf() - t_run
                        if finished.is_set():
                            return
                        task, own = nxt, True
                if not own:
                    while not queue and not finished.is_set():
                        if pump is not None and not self._pumping:  # wait by moving messages
                            self._pumping = True
                            lock.release()
                            try:
                                idle_wait()
                            finally:
                                lock.acquire()
                                self._pumping = False
                            continue
                        waiting[node] += 1
                        cond.wait()
                        waiting[node] -= 1
                        self._woken[node] = max(0, self._woken[node] - 1)
                    if finished.is_set():
                        return
                    tile, task = queue.popleft()
                    if queue and waiting[node]:
                        self._wake_one(node)
                    if pump is not None and not self._pumping and waiting[node] > self._woken[node]:
                        # A worker sleeps and none is moving messages: wake one to do it.
                        self._woken[node] += 1
                        cond.notify()
                if tile < -1:  # a range of a job
                    ctx = contexts.get(task) or self._context(task)
                elif task >= 0:
                    halos = inbox[tile].pop(task, None) or {}
                    if job_tasks[task]:  # the results of the jobs that read it, in (job, first item) order
                        halos = {k: v for k, v in sorted(halos.items()) if v is not NODE_DONE}
                    if token_tasks[task]:
                        del tokens[tile][task]
                    ctx = contexts.get(task)
                    if ctx is None:
                        ctx = self._context(task)
            if pump is not None:
                pump()  # the halos just posted leave before this task runs
            if tile < -1:
                if not self._run_unit(node, worker, -2 - tile, task, ctx):
                    return
                task = -1
                continue
            state = states[tile]
            if task < 0:  # pack ahead of task -1 - task (see _pack_ahead)
                if not self._pack_ahead_of(tile, -1 - task, state):
                    return
                task = -1
                continue
            phase = seq_phase[task]
            try:
                k0, n0 = clock
                t0, c0 = perf(), cpu()
                out = runners[phase](tile, state, halos, ctx, tiling)
                work, value = out if isinstance(out, tuple) else (out, None)
                if reduces[phase] and value is None:
                    raise ShoalError("a phase with a reduction must return a value to reduce")
                nxt = task + 1
                # (The task after a loop's last is not known yet: it is packed for ahead of it.)
                halo_out = pack_all(tile, nxt, state) if nxt < len(halo_tasks) and halo_tasks[nxt] else None
                # A task's cost is the CPU time of its kernel and of packing its halos; of that,
                # the time in lock-free compiled code is its kernel time.
                c1, t1 = cpu(), perf()
                k1, n1 = clock
            except BaseException as exc:  # stop every worker, report from the main thread
                self._fail(exc, tile, task)
                return
            ahead = first[tile]
            if ahead is None:
                rows[task * T + tile] = (node, worker, t0 - t_run, t1 - t_run, c1 - c0, int(work), k1 - k0, n1 - n0)
            else:  # the task is charged the packing done ahead of it too
                first[tile] = None
                cost, kernel, calls = ahead
                rows[task * T + tile] = (node, worker, t0 - t_run, t1 - t_run, c1 - c0 + cost, int(work),
                                         k1 - k0 + kernel, n1 - n0 + calls)
            if not reduces[phase]:
                value = None

    def _pack_ahead_of(self, tile: int, task: int, state) -> bool:
        """Pack a tile's halos for ``task``, then let it run; False if packing failed."""
        clock = thread_clock()
        try:
            k0, n0 = clock
            c0 = time.thread_time()
            out = self._pack_all(tile, task, state)
            self._first[tile] = (time.thread_time() - c0, clock[0] - k0, clock[1] - n0)
        except BaseException as exc:  # stop every worker, report from the main thread
            self._fail(exc, tile, task)
            return False
        with self._lock:
            if out is not None:
                self._post_halos(tile, task, out)
            self._idle[tile] = True
            self._try_ready(tile)
        return True

    def _pack_all(self, tile: int, task: int, state) -> list:
        """Pack ``tile``'s halos for its neighbours' task ``task``, one payload per neighbour in
        its neighbour order; record the message sizes.

        Called outside the lock: only this tile's worker touches its rows and its state.
        """
        if self._job_tasks[task]:  # one input for every job that reads the tile, kept here
            self._job_inputs[tile] = self._packers[self._seq.phase[task]](state, tile)
            return None
        payloads = self._packers[self._seq.phase[task]](state, tile, self.tiling)
        links = self._links[task]
        # Loops in C (map), not comprehensions: this runs for every task and every reader.
        out = list(map(payloads.__getitem__, links.readers[tile]))
        row = self._msg_offset[task] + links.base[tile]
        try:  # arrays (anything with ``nbytes``)
            sizes = list(map(NBYTES, out))
        except AttributeError:  # other payloads: apps send one shared empty one to most neighbours
            sizes, last, size = [0] * len(out), None, 0  # a None payload is 0 bytes
            for k, payload in enumerate(out):
                if payload is not last:
                    last, size = payload, payload_bytes(payload)
                sizes[k] = size
        self._m_bytes[row:row + len(out)] = sizes
        return out

    def _collect(self, values: dict[int, float], task: int) -> None:
        """Gather tiles' reduction values; when all tiles are in, reduce in tile order and release."""
        if task not in self._values:
            self._values[task] = [None] * self.tiling.ntiles
            self._missing[task] = self.tiling.ntiles
        vals = self._values[task]
        for tile, value in values.items():
            vals[tile] = value
        # A count, not a scan: with thousands of tiles a scan per tile's value is quadratic.
        self._missing[task] -= len(values)
        if self._missing[task]:
            return
        del self._missing[task]
        seq = self._seq
        phase = self.phases[seq.phase[task]]
        result = None if phase.emits_jobs else reduce_in_order(phase.reduction, vals)
        del self._values[task]
        step = seq.step[task] + self.first_step
        self._reductions_done += 1
        if phase.emits_jobs:
            self._emit_jobs(task + 1, vals)
            self._give_token(task + 1)
            return
        self._reduced[(step, phase.name)] = result
        if phase.lagged:
            reader = self._lag_readers.pop((seq.step[task], seq.phase[task]), None)
            if reader is not None:  # else not in the sequence yet (it takes the token then) or in the next run
                self._give_token(reader)
            return
        self._ctx_reduced[phase.name] = result
        if seq.pending is not None and seq.pending[1] == seq.step[task] and task == len(seq) - 1:
            self._decide(task, result)
            if self._error is not None:
                return
            self._pack_ahead(task + 1)
        if task + 1 < self._limit:  # else read by the next run, which gets it in reduced_before
            self._give_token(task + 1)

    def _emit_jobs(self, task: int, listed: list) -> None:
        """The tiles' jobs for the job phase ``task`` (lists in tile order) are in: place them
        (the job policy), cut big ones into ranges (the node's cores), and queue those of this
        process's nodes; each tile's task then waits for the results of every range that reads
        it (caller holds the lock)."""
        units, counts = plan_ranges(self.app, self.job_policy, self.owner, self.cluster,
                                    self.phases[self._seq.phase[task]].node_barrier, listed)
        self._fanins[task] = counts
        self._units[task] = units
        self._queue_units(task, units)

    def _queue_units(self, task: int, units: list) -> None:
        """Queue the ranges of the job phase ``task`` that this process's nodes run (caller holds
        the lock): every tile's input is here."""
        for u, (_, _, _, node) in enumerate(units):
            if node in self._pools:
                self._enqueue(node, -2 - u, task)

    def _unit_inputs(self, task: int, tiles: list) -> dict:
        """The inputs of the tiles a range of the job phase ``task`` reads, by tile: each packed
        after the tile's task before."""
        return {t: self._job_inputs[t] for t in tiles}

    def _post_results(self, key: tuple[int, int], task: int, tiles: list, results: list, measured: tuple) -> None:
        """Hand the results of the range ``key`` (its job and first item) to the tiles it read,
        one each, in order, and what the range measured, ``(a, b, seconds, items)``, to its first
        tile (caller holds the lock)."""
        self._deliver(key, task, tiles, results)
        self._window.setdefault(tiles[0], []).append(measured)

    def _run_unit(self, node: int, worker: int, unit: int, task: int, ctx: StepContext) -> bool:
        """Run one range of a job on this worker, then hand each tile it read its result;
        False if the app's job method failed."""
        row, first, stop, _ = self._units[task][unit]
        tiles = range_tiles(row)
        try:
            ran = run_range(self._job_runners[self._seq.phase[task]], row, first, stop,
                            self._unit_inputs(task, tiles), ctx, node, self._owner_of)
        except BaseException as exc:  # stop every worker, report from the main thread
            self._fail(exc, row["a"], task)
            return False
        with self._lock:
            self._job_rows.append(job_row(self._seq.step[task] + self.first_step, self._seq.iteration[task],
                                          self._seq.phase[task], row, first, stop, node, worker,
                                          ran.start - self._t0, ran.end - self._t0, ran))
            self._post_results((row["job"], first), task, tiles, [ran.results[t] for t in tiles], ran.measured)
            if self.phases[self._seq.phase[task]].node_barrier:  # the node's other tiles: this range is done
                others = [t for t in self._tiles_of_node[node] if t not in tiles]
                self._deliver((row["job"], first), task, others, [NODE_DONE] * len(others))
        return True

    def _decide(self, task: int, value) -> None:
        """The reduction ending a loop's iteration is done: ask the app whether another follows,
        and grow the sequence accordingly (caller holds the lock)."""
        loop, rel_step, it = self._seq.pending
        step = rel_step + self.first_step
        try:
            again = loop_again(self.app, loop, step, it, value)
        except ShoalError as err:
            self._failed(err, step)
            again = False
        if not again:
            self._iterations[(step, loop.name)] = it + 1
        self._left_in_step[rel_step] -= 1  # the decision is taken
        self._append(self._seq.decide(again))
        if not self._left_in_step[rel_step]:
            self._step_done(rel_step)

    def _step_done(self, s: int) -> None:
        """Step ``s`` has no task left here (caller holds the lock)."""
        self._step_end[s] = time.perf_counter() - self._t0
        self._steps_done += 1
        if self._wake_per_step:
            self._progress.set()
        if self._steps_done == self._seq.steps:
            self._all_done()

    def _fail(self, exc: BaseException, tile: int | None, task: int | None) -> None:
        """Stop every worker; the run raises ``exc`` (naming its step, phase and tile, when known)."""
        with self._lock:
            if task is None:
                what = exc if isinstance(exc, ShoalError) else f"{type(exc).__name__}: {exc}"
                err, step = ShoalError(f"executor: {what}"), self.first_step + self._steps_done
                err.__cause__ = exc
            else:
                step = self._seq.step[task] + self.first_step
                err = task_error(exc, step, self.phases[self._seq.phase[task]].name, tile)
            self._failed(err, step)

    def _failed(self, err: ShoalError, step: int) -> None:
        """Stop every worker; the run raises ``err`` (the first error only; caller holds the lock)."""
        if self._error is None:
            err.step = step
            self._error = err
        self._stop()

    def _report(self, on_step, reported: int) -> int:
        done = self._steps_done
        if on_step is not None:
            for k in range(reported, done):
                on_step(k)
        return done


def task_error(exc: BaseException | str, step: int, phase: str, tile: int) -> ShoalError:
    """The one line a run stops with when a task fails: ``step S, phase P, tile T: what``
    (``what`` a ShoalError's own message, else the exception's type and message), raised from
    ``exc`` and carrying ``step``."""
    what = exc if isinstance(exc, (ShoalError, str)) else f"{type(exc).__name__}: {exc}"
    err = ShoalError(f"step {step}, phase {phase}, tile {tile}: {what}")
    if isinstance(exc, BaseException):
        err.__cause__ = exc
    err.step = step
    return err


def loop_again(app: App, loop, step: int, iteration: int, value) -> bool:
    """Whether ``loop`` runs another iteration in ``step`` after ``iteration``: the app's
    :meth:`~shoal.runtime.app.App.again`, up to the loop's ``max_iterations`` (reaching it warns
    and ends the loop).

    Raises
    ------
    ShoalError
        If the loop must converge (``required``) and reached its maximum still asking for more.
    """
    again = bool(app.again(loop, step, iteration, value))
    if again and iteration + 1 >= loop.max_iterations:
        what = (f"step {step}: loop {loop.first}..{loop.last} reached its {loop.max_iterations} iterations "
                f"without converging (last value {value})")
        if loop.required:
            err = ShoalError(what)
            err.step = step
            raise err
        logger.warning("%s; the step goes on", what)
        again = False
    return again


def lagged_start(app: App, first_step: int, before: dict) -> dict:
    """The lagged reductions the first step of a run from ``first_step`` reads: from the app's
    ``initial_reductions()`` at step 0, else from ``before`` (the reductions of earlier steps,
    by (step, phase name)).

    Raises
    ------
    ShoalError
        If one of them is missing.
    """
    lagged = [p.name for p in app.phases if p.lagged]
    if not lagged:
        return {}
    if first_step == 0:
        before = {(-1, name): reduced_value(v) for name, v in app.initial_reductions().items()}
    missing = [n for n in lagged if (first_step - 1, n) not in before]
    if missing:
        where = "initial_reductions()" if first_step == 0 else f"the reductions of step {first_step - 1}"
        raise ShoalError(f"app {app.name!r}: the lagged reduction(s) {', '.join(missing)} are missing "
                         f"from {where}")
    return {(first_step - 1, n): before[(first_step - 1, n)] for n in lagged}


def merge_results(parts: list[ExecutionResult]) -> ExecutionResult:
    """One result from consecutive runs; later parts' times shift by the earlier parts' walls."""
    offset, tasks, step_end = 0.0, [], []
    for r in parts:
        shifted = dict(r.tasks)
        for name in ("start", "end", "ready"):
            if name in shifted:
                shifted[name] = shifted[name] + offset
        tasks.append(shifted)
        step_end.append(r.step_end + offset)
        offset += r.wall_s
    last = parts[-1]
    return ExecutionResult(
        states=last.states, first_step=parts[0].first_step, steps=sum(r.steps for r in parts),
        tasks=TASKS.concat(tasks), messages=MESSAGES.concat([r.messages for r in parts]),
        reductions={k: v for r in parts for k, v in r.reductions.items()},
        wall_s=offset, step_end=np.concatenate(step_end), oversubscribed=any(r.oversubscribed for r in parts),
        comm_cpu_s=sum_present([r.comm_cpu_s for r in parts]),
        comm_messages=sum_present([r.comm_messages for r in parts]),
        iterations={k: v for r in parts for k, v in r.iterations.items()},
        jobs=_shifted_jobs(parts),
    )


def _shifted_jobs(parts: list[ExecutionResult]) -> dict[str, np.ndarray] | None:
    """The job rows of consecutive runs, later parts' times shifted as their tasks are."""
    offset, tables = 0.0, []
    for r in parts:
        if r.jobs is not None:
            tables.append({**r.jobs, "start": r.jobs["start"] + offset, "end": r.jobs["end"] + offset})
        offset += r.wall_s
    return JOB_RUNS.concat(tables) if tables else None


def reduced_value(value):
    """A reduction's value as the executor keeps it: a float, or a tuple of floats for a
    reduction of several values (which a checkpoint or a message may hand back as a list)."""
    if isinstance(value, (tuple, list, np.ndarray)):
        return tuple(float(v) for v in value)
    return float(value)


def sum_present(arrays: list[np.ndarray | None]) -> np.ndarray | None:
    """Element-wise sum of the arrays that are there (``None`` if none is)."""
    present = [a for a in arrays if a is not None]
    return np.sum(present, axis=0) if present else None
