"""The simulation driver: the loop a user owns.

A :class:`Simulation` steps an app's tiles on an executor and exposes the run between steps::

    sim = Simulation(app, tiling, cluster, owner)
    sim.add_callback(write_frame, Every(50))
    while sim.step_count < 500:
        sim.step()
        print(sim.step_count, sim.time)

Work attached to the run is data, not branches in the loop: callbacks on schedules run at
step boundaries (balancing every K steps, frames every F, checkpoints every C, a user's own),
and measurement callbacks receive every step's task rows as the step finishes. ``run(n)``
runs its steps in as few executor runs as the schedules allow: tiles run ahead of each other
inside one, and meet only where a callback is due. A schedule that cannot be known ahead
(:class:`When`: balancing when the adaptive trigger fires) ends the executor's run at the next
step boundary every tile can reach once it becomes due, as a stop does.

Between steps the run can be reshaped: new owners for the tiles (their states move with
them) and more or fewer worker threads on any node. The set of tiles is fixed for the run.
:meth:`Simulation.request_stop` (and Ctrl-C) ends the run at the next step boundary every
tile can reach, with a checkpoint written when the simulation has a checkpoint folder.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..cluster import Cluster
from ..errors import ShoalError
from ..tiling import Tiling
from .app import App, payload_bytes
from .checkpoint import Checkpoint
from .local import ExecutionResult, merge_results
from .team import Team


# ----- schedules ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Every:
    """Every ``steps`` steps (steps k, 2k, ...), only before step ``until`` if given."""

    steps: int
    until: int | None = None

    def __post_init__(self):
        if self.steps < 1:
            raise ShoalError(f"a schedule needs a positive interval, got {self.steps}")

    def due(self, step: int) -> bool:
        """Whether the action runs at the boundary after ``step`` steps (never at step 0)."""
        return step > 0 and step % self.steps == 0 and (self.until is None or step < self.until)

    def next_after(self, step: int) -> int | None:
        """The first step after ``step`` at which the action is due, or ``None`` if none is."""
        nxt = (step // self.steps + 1) * self.steps
        return nxt if self.until is None or nxt < self.until else None


@dataclass(frozen=True)
class At:
    """At the listed steps."""

    steps: tuple[int, ...]

    def due(self, step: int) -> bool:
        """Whether ``step`` is one of the listed steps."""
        return step in self.steps

    def next_after(self, step: int) -> int | None:
        """The first listed step after ``step``, or ``None`` if none is."""
        return min((s for s in self.steps if s > step), default=None)


@dataclass(frozen=True)
class When:
    """At the step boundaries where ``due_now()`` holds, only before step ``until`` if given.
    Nothing is known ahead: whoever makes it true asks the executor to stop at the next step
    boundary (see :meth:`Simulation.schedule_balancing`)."""

    due_now: Callable[[], bool]
    until: int | None = None

    def due(self, step: int) -> bool:
        """Whether ``due_now()`` holds at the boundary after ``step`` steps (never at step 0)."""
        return step > 0 and (self.until is None or step < self.until) and self.due_now()

    def next_after(self, step: int) -> int | None:
        """Never known ahead: ``None``."""
        return None


@dataclass
class Callback:
    """An action run at the step boundaries its schedule names; it receives the simulation."""

    action: Callable[[Simulation], None]
    schedule: Every | At | When


@dataclass(frozen=True)
class StepRecord:
    """What a measurement callback receives as each step finishes: the step, and the task
    rows (:data:`~shoal.records.TASKS`) of that step that ran in this process."""

    step: int
    tasks: dict[str, np.ndarray] = field(repr=False)


# ----- the driver ---------------------------------------------------------------------------------
class Simulation:
    """Step an app's tiles; see the module docstring.

    Parameters
    ----------
    app, tiling, cluster, owner
        The physics, its tiles, the nodes (``cluster.cores[k]`` worker threads on node k)
        and ``owner[tile] -> node``.
    team : Team, optional
        The processes the run spans (default one; ``shoal.runtime.mpi.MPITeam`` under mpiexec).
    states : dict, optional
        This process's tile states to start from (default: the app's initial states).
    step : int
        The step ``states`` are at.
    reduced : dict, optional
        The reductions of the step before ``step`` (a resumed run's, from its checkpoint).
    balancer : shoal.placement.balancing.Balancer, optional
        Re-places tiles from measured loads, on the schedule :meth:`schedule_balancing` sets.
    checkpoints : Path, optional
        Where :meth:`write_checkpoint` (and a stop) writes checkpoints.
    overlap : bool
        MPI: send halos the moment they are packed.
    executor : {"auto", "python", "native"}
        The executor backend (:mod:`shoal.runtime.local`, :mod:`shoal.runtime.native`); ``auto``
        is the native one where the app compiles its phases for the run in one process.
    """

    def __init__(self, app: App, tiling: Tiling, cluster: Cluster, owner: np.ndarray, *, team: Team | None = None,
                 states: dict[int, Any] | None = None, step: int = 0, reduced: dict | None = None,
                 balancer=None, checkpoints: Path | None = None, overlap: bool = True, executor: str = "auto"):
        self.app, self.tiling = app, tiling
        self.team = team if team is not None else Team()
        owner = np.asarray(owner, dtype=np.int64)
        if states is None:
            states = {int(t): app.init_tile(int(t), tiling) for t in self.team.local_tiles(owner)}
        self.states = states
        self.step_count = step
        self.reduced = dict(reduced or {})
        self.balancer = balancer
        self.checkpoints = checkpoints
        self.parts: list[ExecutionResult] = []
        self.placements: list[tuple[int, np.ndarray]] = [(step, owner.copy())]
        self.worker_history: list[tuple[int, tuple[int, ...]]] = [(step, tuple(cluster.cores))]
        self.stopped_at: int | None = None
        self.trace_writer = None  # the first process's TraceWriter, when the run records a trace
        self._tracing = False
        self._traced = {"parts": 0, "placements": 0, "workers": 0, "balance": 0}  # entries already appended
        self._callbacks: list[Callback] = []
        self._measurements: list[Callable[[StepRecord], None]] = []
        self._stop = threading.Event()  # a stop asked for: the run ends
        self._halt = threading.Event()  # the executor's run ends at the next step boundary (a stop, or a When due)
        self.team.step = step
        self.executor = self.team.executor(app, tiling, cluster, owner, overlap, executor)
        self._closers: list[Callable[[], None]] = []

    # ----- what a user reads between steps ------------------------------------------------------
    @property
    def owner(self) -> np.ndarray:
        """The node of every tile (indexed by tile) for the next step."""
        return self.executor.owner

    @property
    def cluster(self) -> Cluster:
        """The nodes and their worker threads for the next step (changes with ``reconfigure``)."""
        return self.executor.cluster

    @property
    def time(self) -> float:
        """Simulated time after :attr:`step_count` steps (the app's clock)."""
        return self.app.time(self.step_count, self.states)

    def gather(self) -> dict[str, np.ndarray] | None:
        """The app's global arrays of the current state, on the first process (``None`` elsewhere)."""
        everything = self.all_states()
        return self.app.gather(everything, self.tiling) if everything is not None else None

    def all_states(self) -> dict[int, Any] | None:
        """Every tile's portable state on the first process (``None`` elsewhere)."""
        app = self.app
        return self.team.to_root({t: app.portable(s) for t, s in self.states.items()}, app.pack_state,
                                 app.unpack_state)

    # ----- what runs at step boundaries ----------------------------------------------------------
    def add_callback(self, action: Callable[[Simulation], None], schedule: Every | At | When) -> None:
        """Run ``action(sim)`` at every step boundary ``schedule`` names (in the order added)."""
        self._callbacks.append(Callback(action, schedule))

    def add_measurement(self, fn: Callable[[StepRecord], None]) -> None:
        """Call ``fn(StepRecord)`` as each step finishes, from the thread that runs the loop."""
        self._measurements.append(fn)

    def request_stop(self) -> None:
        """End the run at the next step boundary every tile can reach (safe from any thread)."""
        self._stop.set()
        self._halt.set()

    def schedule_balancing(self, until: int | None = None) -> None:
        """Run :meth:`rebalance` when the balancer's period says, only before step ``until``.

        A fixed period is a schedule known ahead (:class:`Every`). The adaptive trigger is fed
        each step's measured task costs as the step finishes; the step after which it fires,
        the executor is asked to end its run at the next step boundary every tile can reach
        (no executor run stops when it does not), and the balancing step runs there.

        Raises
        ------
        ShoalError
            For the adaptive trigger under ``mpiexec``: each rank measures only its own node.
        """
        b = self.balancer
        if b.trigger is None:
            self.add_callback(Simulation.rebalance, Every(b.period, until=until))
            return
        if self.team.distributed:
            raise ShoalError("the adaptive trigger needs every node's loads in one process: under mpiexec give "
                             "--period a number of steps")
        self.add_measurement(self._watch)
        self.add_callback(Simulation.rebalance, When(lambda: b.due, until))

    def _watch(self, record: StepRecord) -> None:
        t, (P, T) = record.tasks, self.balancer.cost.shape
        loads = np.bincount(t["phase"].astype(np.int64) * T + t["tile"], weights=t["cost"], minlength=P * T)
        if self.balancer.observe(record.step, loads.reshape(P, T), self.owner, self.cluster):
            self._halt.set()

    # ----- stepping -------------------------------------------------------------------------------
    def step(self) -> int:
        """Run one step; return the steps run (0 once stopped)."""
        return self.run(1)

    def run(self, steps: int) -> int:
        """Run ``steps`` steps (fewer if stopped); return how many ran."""
        if steps < 0:
            raise ShoalError(f"steps must be >= 0, got {steps}")
        if self.stopped_at is not None:
            return 0
        if self.team.max(float(self._stop.is_set())) > 0:  # asked before this run: every tile is at a boundary now
            self._stopped()
            self._stop.clear()
            self._halt.clear()
            return 0
        target, start = self.step_count + steps, self.step_count
        with _ctrl_c_stops(self):
            while self.step_count < target:
                cut = min([target] + [s for c in self._callbacks if (s := c.schedule.next_after(self.step_count))])
                self._advance(cut - self.step_count)
                stopping = self.team.max(float(self._stop.is_set())) > 0  # every process stops together
                # A stop ends where every tile could: no callback is due before that step, and
                # those due at it run, as they would have without the stop.
                for c in self._callbacks:
                    if c.schedule.due(self.step_count):
                        c.action(self)
                if stopping:
                    if self.step_count < target:
                        self._stopped()
                    self._stop.clear()  # a stop asked as the run reached its end: it ended
                    self._halt.clear()
                    break
        return self.step_count - start

    def _advance(self, steps: int) -> ExecutionResult:
        first = self.step_count
        on_step = self._report if self._measurements else None
        self._halt.clear()
        if self._stop.is_set():  # asked while the callbacks between two cuts ran
            self._halt.set()
        part = self.executor.run(steps, states=self.states, first_step=first, on_step=on_step,
                                 reduced_before=self.reduced, stop=self._halt)
        self.parts.append(part)
        self.states = part.states
        self.step_count = first + part.steps
        self.team.step = self.step_count
        if part.steps:  # what the next run reads: this one's last step's reductions
            self.reduced = {k: v for k, v in part.reductions.items() if k[0] == self.step_count - 1}
        if self.balancer is not None:
            self.balancer.measure(part)
        return part

    def _report(self, k: int) -> None:
        record = StepRecord(self.executor.first_step + k, self.executor.step_tasks(k))
        for fn in self._measurements:
            fn(record)

    def _stopped(self) -> None:
        self.stopped_at = self.step_count
        if self.checkpoints is not None:
            self.write_checkpoint()

    # ----- reshaping the run between steps -----------------------------------------------------
    def reconfigure(self, owner: np.ndarray | None = None, workers: dict[int, int] | None = None) -> None:
        """New owners for the tiles and new worker threads for some nodes, from the next step.

        Parameters
        ----------
        owner : numpy.ndarray, optional
            The node of every tile; the states of tiles that change node move to it. Checked
            against the tiling and cluster (a ShoalError if invalid).
        workers : dict of int to int, optional
            ``{node: worker threads}`` for nodes that grow or shrink.
        """
        if owner is not None:
            from ..placement.registry import check_owner

            new = check_owner(owner, self.tiling, self.cluster)
            app = self.app
            self.states = self.team.migrate({t: app.portable(s) for t, s in self.states.items()}, self.owner, new,
                                            app.pack_state, app.unpack_state)
            self.executor.reconfigure(owner=new)
            self.placements.append((self.step_count, new.copy()))
        if workers:
            self.executor.reconfigure(cores=workers)
            self.worker_history.append((self.step_count, tuple(self.cluster.cores)))

    def rebalance(self) -> None:
        """One balancing step: the balancer plans from every process's measurements on the
        first process, and every process applies the owner table it planned. What it cost per
        core is handed to the balancer: the cores' wait for the last tile of the executor run
        that stopped for it (:func:`stop_wait`), planning, agreeing on the plan and moving the
        tiles (not the executor's restart, which the next run pays)."""
        tic = time.perf_counter()
        b = self.balancer
        cost, background, steps = b.take_measurements()
        cost, background = self.team.sum(cost), self.team.sum(background)
        nbytes = self.team.sum(state_bytes(self.app, self.states, self.tiling.ntiles))  # what moving each costs
        new = None
        if self.team.is_root:
            new = b.plan(self.step_count, self.owner, self.cluster, cost / max(steps, 1), background / max(steps, 1),
                         nbytes)
        self.reconfigure(owner=self.team.agree(new))
        wait = self.team.max(stop_wait(self.parts[-1])) if self.parts else 0.0
        b.paid(wait + self.team.max(time.perf_counter() - tic))

    def write_checkpoint(self) -> None:
        """A checkpoint of the current step into :attr:`checkpoints` (written by the first process),
        after the trace's chunk up to it: a run resumed from it finds every earlier step traced."""
        if self.checkpoints is None:
            raise ShoalError("this simulation has no checkpoint folder")
        self.flush_trace()
        everything = self.all_states()
        balancer = self.balancer.checkpoint_state(self.team) if self.balancer is not None else {}
        if self.team.is_root:
            Checkpoint(self.step_count, self.tiling, everything, self.owner, balancer, self.reduced).write(
                self.checkpoints)

    # ----- the trace, a chunk at a time ---------------------------------------------------------
    def trace_to(self, writer) -> None:
        """Append the run's trace to ``writer`` (a :class:`~shoal.trace.TraceWriter` on the first
        process, ``None`` on the others) at every :meth:`flush_trace`. Every process calls it."""
        self.trace_writer, self._tracing = writer, True

    def flush_trace(self) -> None:
        """Append what ran since the last chunk: every process's task and message rows (gathered
        on the first process, which writes them), the placements, worker threads and balancing
        steps since. Every process calls it at the same step boundary; a no-op without a trace."""
        if not self._tracing:
            return
        done = self._traced
        new = self.parts[done["parts"]:]
        if not new and done["placements"] == len(self.placements) and done["workers"] == len(self.worker_history):
            return
        combined = self.team.combine(merge_results(new)) if new else None
        rows = self.balancer.rows if self.balancer is not None else []
        if self.trace_writer is not None:
            self.trace_writer.append(combined, self.placements[done["placements"]:],
                                     self.worker_history[done["workers"]:], rows[done["balance"]:])
        done.update(parts=len(self.parts), placements=len(self.placements), workers=len(self.worker_history),
                    balance=len(rows))

    # ----- results ------------------------------------------------------------------------------
    def result(self) -> ExecutionResult:
        """Everything this process ran, as one result (times shifted to one clock)."""
        if not self.parts:
            raise ShoalError("the simulation has not run a step")
        return merge_results(self.parts)

    def close(self) -> None:
        """End the worker threads, then run what :meth:`at_close` was given (once)."""
        self.executor.close()
        while self._closers:
            self._closers.pop()()

    def at_close(self, release: Callable[[], None]) -> None:
        """Call ``release()`` when the simulation closes (after its workers end): what owns
        files for the run (trace, log, folder lock) lets go of them then."""
        self._closers.append(release)


def stop_wait(part: ExecutionResult) -> float:
    """Seconds per core that the cores which ran tasks in ``part`` waited at its end for the
    last task: what stopping every tile at one step boundary cost them.

    Parameters
    ----------
    part : ExecutionResult
        One executor run.

    Returns
    -------
    float
        The mean over those cores of the last task's end minus their own last task's end (0 if
        the run ran no task).
    """
    t = part.tasks
    t = {k: v[t["node"] >= 0] for k, v in t.items()}  # rows of tasks other processes ran have node -1
    if not len(t["end"]):
        return 0.0
    core = t["node"].astype(np.int64) * (int(t["worker"].max()) + 1) + t["worker"]
    last = np.full(int(core.max()) + 1, -np.inf)
    np.maximum.at(last, core, t["end"])
    last = last[np.isfinite(last)]
    return float(last.max() - last.mean())


def state_bytes(app: App, states: dict, ntiles: int, arrays_only: bool = True) -> np.ndarray:
    """Bytes of every portable tile state held here (zero for tiles held elsewhere).

    Parameters
    ----------
    app : App
        The app whose ``portable`` form of a state is measured.
    states : dict of int to state
        Tile states held by this process, by tile index.
    ntiles : int
        The number of tiles of the tiling (the length of the result).
    arrays_only : bool
        Count only the state's arrays (what migrating it moves); ``False`` counts its numbers
        too (what it weighs in the trace).

    Returns
    -------
    numpy.ndarray of int64
        Bytes per tile.
    """
    out = np.zeros(ntiles, dtype=np.int64)
    for t, s in states.items():
        s = app.portable(s)
        if arrays_only and isinstance(s, dict):
            s = {k: v for k, v in s.items() if isinstance(v, np.ndarray)}
        out[t] = payload_bytes(s)
    return out


class _ctrl_c_stops:
    """While a simulation runs in the main thread, Ctrl-C requests a stop (a second one
    interrupts at once), and so does SIGUSR1: ``mpiexec`` passes that one on to every rank,
    where it would end the job on Ctrl-C."""

    def __init__(self, sim: Simulation):
        self.sim, self.previous = sim, {}

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            self.previous = {signal.SIGINT: signal.signal(signal.SIGINT, self._interrupted),
                             signal.SIGUSR1: signal.signal(signal.SIGUSR1, self._asked)}
        return self

    def __exit__(self, *exc):
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)

    def _asked(self, signum, frame):
        self.sim.request_stop()

    def _interrupted(self, signum, frame):
        if self.sim._stop.is_set():
            raise KeyboardInterrupt
        sys.stderr.write(f"\nshoal: stopping at the next step boundary (step {self.sim.step_count} or after); "
                         "press Ctrl-C again to interrupt at once\n")
        self.sim.request_stop()
