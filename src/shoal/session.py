"""One run from scenario to run folder, in four stages: resolve → build → simulate → write.

``resolve``
    the scenario with the caller's overrides, the placement policy and, when resuming, the
    checkpoint to continue from;
``build``
    the app, the cluster, the tiling, the first owner table, the run folder and the
    :class:`~shoal.runtime.simulation.Simulation` with its callbacks (frames, balancing,
    checkpoints, worker resizes);
``simulate``
    the steps;
``write``
    the final state, the trace and the summary.

A run folder holds ``config.toml`` (the resolved scenario), ``trace.h5``, ``state/final.npz``
(the gathered global state), ``frames/`` for the app's frames, ``summary.json`` and
``run.lock``. The summary is written last: a folder without it is an interrupted run, never
mistaken for a complete one. A run stopped on request (Ctrl-C, ``request_stop``) leaves a
checkpoint and no summary, and ``--resume`` continues it.

A run folder belongs to one run. :func:`claim_folder` refuses, before anything is written, an
``--out`` that is a file, lies under one, cannot be written, or already holds anything (a
finished run, an interrupted one, other files) unless the run resumes that very folder; it
then holds an exclusive lock on ``run.lock`` for the run's life, so a second run into the
folder is refused naming the first one's process id.

The trace grows as the run goes: a chunk is the steps between checkpoints (every
``TRACE_CHUNK_STEPS`` steps when the run writes none), appended and committed at the chunk's
end and before every checkpoint, so a killed run leaves a trace of every completed chunk and
a resumed run carries it on from the checkpoint's step: its trace holds every step from 0.
"""

from __future__ import annotations

import contextlib
import copy
import fcntl
import json
import logging
import os
import shutil
import time
import tomllib
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from . import provenance
from .apps import get_app
from .cluster import Cluster
from .config import Scenario, load_scenario, scenario_from_dict
from .errors import ShoalError
from .files import remove_partials, save_npz, write_json, write_text
from .log import FILE_ONLY, announce_compilation, run_log
from .placement import Balancer, PlacementPolicy, get_policy, policy_params
from .placement.registry import check_owner
from .records import BALANCE, MESSAGES, TASKS
from .resources import check_run
from .runtime.checkpoint import Checkpoint
from .runtime.simulation import At, Every, Simulation, state_bytes
from .runtime.team import Team, current_team
from .summary import summarize
from .tiling import Tiling
from .trace import Trace, TraceWriter

if TYPE_CHECKING:
    from .invasive.join import InvasiveNodes, ManagerAddress
    from .view.feed import LiveView

logger = logging.getLogger("shoal")

LOOKAHEAD = {"oracle"}  # needs the true loads of the future: replay only
# The keyword arguments of run_scenario that override a scenario's [run] table.
RUN_FLAGS = ("steps", "tiles", "tiles_per_core", "nodes", "workers", "placement", "period", "seed", "initial",
             "checkpoint_every")
TRACE_CHUNK_STEPS = 50  # steps per trace chunk of a run without checkpoints
LOCK = "run.lock"


@dataclass
class RunRecord:
    """A run's folder and summary (``None`` for a run stopped before its end, at ``stopped_at``)."""

    path: Path
    summary: dict | None
    stopped_at: int | None = None

    @property
    def trace(self) -> Trace:
        """The run's ``trace.h5``, read again on every access (see :class:`~shoal.trace.Trace`)."""
        return Trace.read(self.path / "trace.h5")

    def state(self) -> dict[str, np.ndarray]:
        """The final state gathered into global arrays by field name (``state/final.npz``).

        Raises
        ------
        ShoalError
            If the file is missing (a stopped run has none) or cannot be read.
        """
        path = self.path / "state" / "final.npz"
        if not path.exists():
            raise ShoalError(f"{path} is missing: the run folder has no final state")
        try:
            with np.load(path) as z:
                return {k: z[k] for k in z.files}
        except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
            raise ShoalError(f"{path} is not a readable final state (truncated or damaged): {exc}") from None

    def report(self) -> list[Path]:
        """Write the run's report pictures into its folder (as ``shoal report`` does) and return
        their paths."""
        from .report import report_run

        return report_run(self.path)


@dataclass
class Resolved:
    """What ``resolve`` settles: the scenario, its policy and where the run starts from."""

    scenario: Scenario
    policy: PlacementPolicy
    checkpoint: Checkpoint | None
    resume: Path | None
    out: Path | None


def run_scenario(
    scenario: str | Scenario,
    *,
    steps: int | None = None,
    tiles: int | None = None,
    tiles_per_core: int | None = None,
    nodes: int | None = None,
    workers: int | None = None,
    placement: str | None = None,
    period: int | str | None = None,
    seed: int | None = None,
    initial: str | None = None,
    set: list[str] | tuple[str, ...] = (),  # noqa: A002  (mirrors the --set flag)
    lb: list[str] | tuple[str, ...] = (),
    out: str | Path | None = None,
    on_step: Callable[[int], None] | None = None,
    checkpoint_every: int | None = None,
    resume: str | Path | None = None,
    team: Team | None = None,
    allow_large: bool = False,
    invasive: str | None = None,
    cores: int | None = None,
    manager: str | Path | None = None,
    invade_every: int | None = None,
    invade_blocking: bool = False,
    view: str | Path | None = None,
    view_every: int | None = None,
) -> RunRecord:
    """Run a scenario and write its run folder.

    Keyword arguments override the scenario's ``[run]`` table, then ``set`` applies
    ``section.key=value`` assignments and ``lb`` ``policy.key=value`` ones to the balancing
    policies' parameters. ``resume`` continues the run in that folder from its latest
    checkpoint (``scenario`` is then ignored; nodes, workers and placement may change).
    ``on_step(k)`` is called as step ``k`` finishes.

    ``team`` is who runs it: by default one process, or one MPI rank per node when started by
    ``mpiexec`` (``nodes`` is then the number of ranks). Rank 0 writes the run folder; every
    rank returns the same record. A run whose estimated memory or worker threads exceed the
    machine's is refused unless ``allow_large``.

    Under the invasive resource manager (``invasive`` starts one, ``manager`` joins a running
    one) every node is an application of it and its worker threads follow the cores it holds
    (:mod:`shoal.invasive.join`); the scenario's worker count only sizes the tiling.

    Parameters
    ----------
    scenario : str or Scenario
        A scenario's name or TOML file, or a loaded scenario.
    steps : int, optional
        Steps to run, counted from step 0 (a resumed run stops at the same step).
    tiles, tiles_per_core : int, optional
        The number of tiles, or tiles per worker thread of the cluster (the count is derived).
    nodes, workers : int, optional
        Nodes of the cluster and worker threads (cores) per node.
    placement : str, optional
        The placement policy's name (see ``shoal placements``).
    period : int or str, optional
        Steps between rebalancing for a dynamic policy (0: never), or ``"adaptive"``.
    seed : int, optional
        Seed of the initial placement and of any random choice of the policy.
    initial : str, optional
        The policy placing the tiles before the first step.
    set, lb : sequence of str
        ``section.key=value`` and ``policy.key=value`` assignments.
    out : str or Path, optional
        The run folder to write; a new folder under ``runs/`` by default. It is refused if it
        is a file, in use, holds a finished run, or holds other files.
    on_step : callable, optional
        Called with ``k`` as step ``k`` finishes.
    checkpoint_every : int, optional
        Steps between checkpoints in ``state/`` (the trace is appended at each).
    resume : str or Path, optional
        A run folder to continue from its latest intact checkpoint.
    team : Team, optional
        The processes running it.
    allow_large : bool
        Run even when the estimated memory or worker threads exceed the machine's.
    invasive : str, optional
        Start a resource manager with this policy (``workload`` or ``scalability``) on the
        first process, and join it.
    cores : int, optional
        The started manager's pool (default: this machine's cores; more: a logical pool,
        threads not pinned, the run marked oversubscribed).
    manager : str or Path, optional
        A manager file (:func:`~shoal.invasive.join.write_manager_file`) of a running manager to join.
    invade_every : int, optional
        Steps between a node's invades (default 1).
    invade_blocking : bool
        Each invade waits for the manager's answer (§6.1's blocking variant) instead of
        polling for it at the next step boundary.
    view : str or Path, optional
        A live viewer's Unix socket (``shoal view``) to feed: frames, loads, placements
        (:mod:`shoal.view.feed`; the run never waits for it). Under MPI the first process's
        value counts.
    view_every : int, optional
        Steps between the view's frames (default: ``run.frame_every`` when set, else about
        100 frames over the run, fewer when frames would take more than 3% of the run's time).

    Returns
    -------
    RunRecord
        The run folder and its summary (``summary`` is ``None`` for a stopped run).

    Raises
    ------
    ShoalError
        For any invalid scenario, override, folder or checkpoint, before anything is written.
    """
    from .invasive.join import check_invasive, resource_manager

    team = team if team is not None else current_team()
    values = locals()
    flags = {k: values[k] for k in RUN_FLAGS}
    check_invasive(invasive, cores, manager, invade_every)
    plan = resolve(scenario, flags, set, lb, resume, out, team, allow_large=allow_large)
    if (invasive or manager) and plan.scenario.run.resize:
        raise ShoalError("run.resize and the resource manager would both set the worker threads: give one")
    view, view_every = team.agree((str(view) if view is not None else None, view_every))
    if view_every is not None and view_every < 1:
        raise ShoalError(f"--view-every must be >= 1, got {view_every}")
    with resource_manager(team, invasive, cores, manager) as address:
        built = build(plan, team, address, invade_every or 1, view, view_every, invade_blocking)
        try:
            if on_step is not None:
                built.sim.add_measurement(lambda record: on_step(record.step))
            simulate(built.sim, plan.scenario.run.steps)
            return write(plan, built, team)
        except BaseException as exc:
            built.end_view("failed", str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)
            raise
        finally:
            built.close()


# ----- resolve --------------------------------------------------------------------------------
def resolve(scenario: str | Scenario, flags: dict, assignments, lb, resume, out, team: Team, *,
            allow_large: bool = False) -> Resolved:
    """The scenario with every override applied and checked, and where the run starts.

    Parameters
    ----------
    scenario : str or Scenario
        The scenario's name or file, or a loaded one (ignored when ``resume`` is given).
    flags : dict
        :func:`run_scenario`'s keyword arguments of the ``[run]`` table; ``None`` leaves a value.
    assignments : sequence of str
        ``section.key=value`` overrides (``--set``).
    lb : sequence of str
        ``policy.key=value`` overrides of the balancing policies (``--lb``).
    resume : str or Path or None
        A run folder to continue from its latest checkpoint.
    out : str or Path or None
        The run folder to write (``resume``'s own folder by default when resuming).
    team : Team
        The processes of the run; under MPI the nodes are its ranks.
    allow_large : bool
        Accept a run whose estimated memory or worker threads exceed the machine's.

    Raises
    ------
    ShoalError
        For an invalid override, a policy that cannot run live, a dynamic policy without a
        period, a checkpoint past the last step, or a run too large for the machine.
    """
    checkpoint = None
    if resume is not None:
        resume = Path(resume)
        scenario = resumable(resume)
        checkpoint = Checkpoint.latest(resume / "state")
        out = resume if out is None else out
    sc = load_scenario(scenario) if isinstance(scenario, str) else copy.deepcopy(scenario)
    flags = dict(flags)
    if flags.get("tiles_per_core") is not None and flags.get("tiles") is None:
        flags["tiles"] = 0  # --tiles-per-core means: derive the count
    if team.distributed:
        if flags.get("nodes") is not None and flags["nodes"] != team.size:
            raise ShoalError(f"under mpiexec there is one node per rank: --nodes {flags['nodes']} but {team.size} "
                             "ranks")
        flags["nodes"] = team.size
    sc.override([f"run.{k}={json.dumps(v)}" for k, v in flags.items() if v is not None] + list(assignments))
    sc.override_balance(lb)
    policy = get_policy(sc.run.placement)
    if policy.name in LOOKAHEAD:
        raise ShoalError(f"placement {policy.name!r} needs the loads of steps not yet run: use it in `shoal replay` "
                         "(or pick another dynamic policy)")
    if policy.dynamic and sc.run.period == 0:
        raise ShoalError(f"placement {policy.name!r} is dynamic: give --period (steps between rebalancing)")
    if checkpoint is not None and checkpoint.step >= sc.run.steps:
        raise ShoalError(f"the checkpoint is at step {checkpoint.step}, the run has only {sc.run.steps} steps")
    check_run(get_app(sc.app), sc.params, _worker_threads(sc, team), allow_large=allow_large)
    return Resolved(sc, policy, checkpoint, resume, Path(out) if out is not None else None)


def _worker_threads(sc: Scenario, team: Team) -> int:
    """The most worker threads this process runs at once over the run's resize schedule (under
    MPI, its own node's; else every in-process node's)."""
    r = sc.run
    steps = [0] + [s for s, _, _ in r.resize]
    per_step = [r.workers_at(s) for s in steps]
    return max(cores[team.rank] if team.distributed else sum(cores) for cores in per_step)


def resumable(run: Path) -> Scenario:
    """The scenario of a run folder that can be resumed (it has a checkpoint)."""
    if not (run / "config.toml").exists():
        raise ShoalError(f"{run} is not a run folder (no config.toml)")
    Checkpoint.latest_path(run / "state")
    try:
        config = tomllib.loads((run / "config.toml").read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ShoalError(f"{run / 'config.toml'} is not valid TOML: {exc}") from None
    return scenario_from_dict(config, str(run))


# ----- build ----------------------------------------------------------------------------------
def build_tiling(sc: Scenario, grid: tuple[int, ...], cluster: Cluster) -> Tiling:
    """Tiles of the app's cell ``grid`` (cells per axis): by the tile shape of the scenario
    ``sc``, its tile count, or its tiles per core of ``cluster``."""
    r = sc.run
    if r.tile_shape:
        return Tiling.from_shape(grid, r.tile_shape, r.halo)
    count = r.tiles or r.tiles_per_core * cluster.total_cores
    return Tiling.from_count(grid, count, r.halo)


@dataclass
class Built:
    """What ``build`` makes: the simulation, its run folder (claimed, with its lock), its trace
    writer (first process) and its tiles' sizes at the start."""

    sim: Simulation
    path: Path
    tile_bytes: np.ndarray
    lock: FolderLock | None = None
    trace: TraceWriter | None = None
    log: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)  # run.log, for the run's life
    provenance: dict | None = None  # the host and software at the start (first process)
    invasive: Callable[[], dict] | None = None  # under the resource manager: what the summary records of it
    view: LiveView | None = None  # what the run sends a live viewer

    def close(self) -> None:
        """End the worker threads, tell a live viewer the run failed if it has not heard how it
        ended, close the trace and run.log, and let go of the folder."""
        self.sim.close()
        self.end_view("failed", "the run ended before its end was written")
        self.release()

    def view_counts(self) -> dict | None:
        """Frames sent to the live viewer and dropped, final from here on: the last ones queued
        are given a moment to go out (first process; ``None`` without a viewer)."""
        if self.view is None or self.view.feed is None:
            return None
        sent, dropped = self.view.feed.drain()
        return {"frames_sent": sent, "frames_dropped": dropped}

    def end_view(self, status: str, message: str | None = None, summary: dict | None = None) -> None:
        """Tell the live viewer (if any, and only once) how the run ended, and log the frames
        it was sent and those dropped.

        Parameters
        ----------
        status : {"finished", "stopped", "failed"}
            How the run ended.
        message : str, optional
            The one-line error of a failed run.
        summary : dict, optional
            The run's summary.json, when it was written.
        """
        view, self.view = self.view, None
        if view is None or view.feed is None:
            return
        view.feed.close(status, view.sim.step_count, message, summary)
        logger.info("live view: %d frames sent, %d dropped", view.feed.sent, view.feed.dropped)

    def release(self) -> None:
        """Close the trace and run.log and let go of the folder (once; the simulation stays)."""
        if self.trace is not None:
            self.trace.close()
            self.trace = None
        self.log.close()
        if self.lock is not None:
            self.lock.release()
            self.lock = None


def build(plan: Resolved, team: Team, manager: ManagerAddress | None = None, invade_every: int = 1,
          view: str | None = None, view_every: int | None = None, invade_blocking: bool = False) -> Built:
    """The simulation of the resolved run ``plan`` on ``team``, its run folder claimed, its
    callbacks attached; under a resource manager (a
    :class:`~shoal.invasive.join.ManagerAddress`) its nodes joined, invading every
    ``invade_every`` steps (waiting for each answer when ``invade_blocking``); fed to the live
    viewer listening on the socket ``view`` (a frame every ``view_every`` steps) when given.

    Everything that checks the input runs before the folder is claimed; should anything after
    fail, a folder this run made is removed again.
    """
    sc, policy, checkpoint = plan.scenario, plan.policy, plan.checkpoint
    app = get_app(sc.app).build(sc.params, sc.run.steps)
    first = checkpoint.step if checkpoint else 0
    cluster = Cluster(tuple(sc.run.workers_at(first)))
    tiling = checkpoint.tiling if checkpoint else build_tiling(sc, app.grid, cluster)
    app.check_tiling(tiling)
    if policy.dynamic:
        owner = policy.place(tiling, cluster, sc.run.seed, initial=sc.run.initial)
    else:
        owner = policy.place(tiling, cluster, sc.run.seed)
    owner = check_owner(owner, tiling, cluster)
    path = team.agree(plan.out if plan.out is not None else _default_out(sc))
    own = plan.resume is not None and path.resolve() == plan.resume.resolve()
    _on_root(team, lambda: check_folder(path, own))

    if team.is_root:  # only once the input is known good: bad input stays one line
        announce_compilation()
    app.prepare(tiling)
    states = None
    if checkpoint:
        states = {int(t): checkpoint.states[t] for t in team.local_tiles(owner)}
    balancer = None
    if policy.dynamic:
        balancer = Balancer(policy, sc.run.period, tiling, tuple(p.barrier for p in app.phases),
                            policy_params(policy, sc.balance))
        if checkpoint and checkpoint.balancer:
            balancer.restore(checkpoint.balancer, carry_costs=team.is_root, nodes=cluster.nodes)  # rank 0 carries
    sim = Simulation(app, tiling, cluster, owner, team=team, states=states, step=first,
                     reduced=checkpoint.reduced if checkpoint else None, balancer=balancer,
                     checkpoints=path / "state", overlap=sc.run.overlap)
    built = Built(sim, path, team.sum(state_bytes(app, sim.states, tiling.ntiles, arrays_only=False)))
    try:
        built.lock = _on_root(team, lambda: claim_folder(path, own))
        if team.is_root:  # the run folder exists from here on
            built.log.enter_context(run_log(path))
            start = f"resumed at step {first}" if first else "started"
            logger.info("%s %s: %d tiles on %d nodes (%s), into %s", sc.name, start, tiling.ntiles, cluster.nodes,
                        policy.name, path, extra=FILE_ONLY)
            built.provenance = provenance.record()
            logger.info(provenance.describe(built.provenance), extra=FILE_ONLY)
            if busy := provenance.busy_warning(built.provenance):
                logger.warning(busy, extra=FILE_ONLY)
            (path / "state").mkdir(exist_ok=True)
            (path / "frames").mkdir(exist_ok=True)
            stale = remove_partials(path / "state") + remove_partials(path, ("config.toml", "trace.h5", "summary.json"))
            if stale:  # unfinished writes of a killed run: the lock says no one else is writing them
                logger.info("removed %s", ", ".join(p.name for p in stale), extra=FILE_ONLY)
            if not own:
                write_text(path / "config.toml", sc.to_toml())
            built.trace = TraceWriter(path / "trace.h5", _trace_start(plan, built, team), resumed_at=first or None)
        sim.trace_to(built.trace)
        if policy.name == "speculative" and team.is_root:
            balancer.proxy = _run_proxy(sc, app, tiling, path / "proxy")
        if view is not None:
            built.view = _live_view(sim, sc, path, view, view_every)
        invasive = _attach(sim, sc, path / "frames", manager, invade_every, built.view, invade_blocking)
        built.invasive = invasive.describe if invasive is not None else None
    except BaseException:
        made = built.lock is not None and built.lock.made
        built.close()
        if made:
            shutil.rmtree(path, ignore_errors=True)  # nothing half-written left behind
        raise
    return built


def _on_root(team: Team, fn: Callable[[], Any]) -> Any:
    """``fn()`` on the first process; its ShoalError, if any, raised on every process."""
    result, error = None, None
    if team.is_root:
        try:
            result = fn()
        except ShoalError as exc:
            error = str(exc)
    error = team.agree(error)
    if error is not None:
        raise ShoalError(error)
    return result


def _trace_start(plan: Resolved, built: Built, team: Team) -> Trace:
    """What the run's trace file starts as: empty tables, or what came before the checkpoint a
    resumed run continues from."""
    sim, sc = built.sim, plan.scenario
    if plan.checkpoint is not None:
        source = plan.resume / "trace.h5"
        try:
            before = Trace.read(source).truncated(sim.step_count)
        except ShoalError as exc:
            logger.warning("the trace before step %d is lost (%s): the trace starts at step %d", sim.step_count, exc,
                           sim.step_count)
        else:
            if len(before.steps) == sim.step_count and before.cluster.nodes == sim.cluster.nodes:
                return before
            if before.cluster.nodes != sim.cluster.nodes:  # the trace's tables have one column per node
                why = f"the run continues on {sim.cluster.nodes} nodes, its trace has {before.cluster.nodes}"
            else:
                why = f"{source} holds {len(before.steps)} of the {sim.step_count} steps before the checkpoint"
            kept = source.with_name(f"trace-to-step-{sim.step_count:06d}.h5")
            if source.parent == built.path:
                os.replace(source, kept)
            logger.warning("%s: the trace starts at step %d%s", why, sim.step_count,
                           f" (the steps before are in {kept.name})" if source.parent == built.path else "")
    T, nodes = sim.tiling.ntiles, sim.cluster.nodes
    phases = sim.app.phases
    return Trace(
        tasks=TASKS.empty(), messages=MESSAGES.empty(), phases=[p.name for p in phases], tiling=sim.tiling,
        cluster=sim.cluster, placement_steps=np.zeros(0, np.int64), placement_owners=np.zeros((0, T), np.int64),
        step_end=np.zeros(0), app=sc.app, scenario=sc.name, config=sc.to_dict(),
        barrier_phases=[p.reduction is not None for p in phases], lagged_phases=[p.lagged for p in phases],
        work_units=[p.work for p in phases],
        tile_bytes=built.tile_bytes, balance=BALANCE.empty() if sim.balancer is not None else None,
        communication={"cpu_s": np.zeros(nodes), "messages": np.zeros(nodes, np.int64)} if team.distributed else None,
        worker_steps=np.zeros(0, np.int64), worker_cores=np.zeros((0, nodes), np.int64))


def _live_view(sim: Simulation, sc: Scenario, path: Path, socket: str, every: int | None) -> LiveView:
    """What the run sends the live viewer on ``socket`` (a connection on the first process only)."""
    from .view.feed import FRAME_SHARE, LiveView, ViewFeed, default_every, hello_message

    share = None if every else FRAME_SHARE  # an interval asked for is kept; the default one bounds the cost
    every = every or default_every(sc.run.steps, sc.run.frame_every)
    feed = (ViewFeed(socket, hello_message(sim, sc, path, every), sim.request_stop, get_app(sc.app).layout)
            if sim.team.is_root else None)
    return LiveView(sim, every, feed, share)


def _attach(sim: Simulation, sc: Scenario, frames: Path, manager: ManagerAddress | None = None,
            invade_every: int = 1, view: LiveView | None = None,
            invade_blocking: bool = False) -> InvasiveNodes | None:
    """The run's callbacks, in the order they run at a step boundary: frames, worker resizes
    (or the nodes' invades, joined to ``manager`` here: returned), balancing, the trace's
    chunk, checkpoints (each writes the chunk up to it first), and last the live ``view``'s
    (which then sees this boundary's placement, and reuses its frame on disk)."""
    r = sc.run
    if r.frame_every:
        sim.add_callback(lambda s: write_frame(s, frames, view), Every(r.frame_every))
        if sim.step_count == 0:
            write_frame(sim, frames, view)
    for step, workers in r.workers_from(sim.step_count):
        sim.add_callback(lambda s, w=workers: s.reconfigure(workers=w), At((step,)))
    invasive = None
    if manager is not None:
        from .invasive.join import join

        invasive = join(sim, manager, invade_every, invade_blocking)
    if sim.balancer is not None:
        sim.schedule_balancing(until=r.steps)
    if r.checkpoint_every:
        sim.add_callback(Simulation.write_checkpoint, Every(r.checkpoint_every, until=r.steps))
    else:
        sim.add_callback(Simulation.flush_trace, Every(TRACE_CHUNK_STEPS, until=r.steps))
    if view is not None:
        view.start()
    return invasive


def write_frame(sim: Simulation, frames: Path, view: LiveView | None = None) -> None:
    """The app's frame of ``sim``'s current state, as ``state-<step>.npz`` in the folder
    ``frames`` (first process; NaN or infinity is a ShoalError), kept for the live ``view``
    (every process calls it)."""
    gathered = sim.gather()
    frame = None
    if gathered is not None:
        _check_finite(gathered, sim.step_count)
        frame = sim.app.frame(gathered)
        save_npz(frames / f"state-{sim.step_count:06d}.npz", frame)
        sim.app.export(gathered, frames, sim.step_count)
    if view is not None:
        view.keep(sim.step_count, frame)


def _default_out(sc: Scenario) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = Path("runs") / f"{sc.name}-{sc.run.placement}-{stamp}"
    path, k = base, 1
    while path.exists():
        path, k = Path(f"{base}-{k}"), k + 1
    return path


# ----- the run folder -------------------------------------------------------------------------
class FolderLock:
    """An exclusive ``flock`` on a run folder's ``run.lock``, held until :meth:`release` (or the
    process ends, however it ends). ``made``: the run created the folder."""

    def __init__(self, fd: int, made: bool):
        self.fd, self.made = fd, made

    def release(self) -> None:
        """Close the lock file, which lets go of the lock; releasing twice does nothing."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def check_folder(path: Path, own: bool = False, locked: bool = False) -> None:
    """Refuse a run folder this run may not write into (one line), writing nothing.

    ``own``: the run resumes this folder, which may then hold its interrupted run; ``locked``:
    this process holds the folder's lock.
    """
    if path.exists() and not path.is_dir():
        raise ShoalError(f"--out {path} is a file, not a folder")
    existing = next(p for p in (path, *path.parents) if p.exists() or p == Path(p.anchor))
    if not existing.is_dir():
        raise ShoalError(f"--out {path} lies under {existing}, which is a file")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ShoalError(f"--out {path}: {existing} is not writable")
    if existing != path:
        return  # a new folder
    holder = None if locked else _lock_holder(path)
    if holder is not None:
        raise ShoalError(f"{path} is in use by another run (pid {holder})")
    if (path / "summary.json").exists():
        raise ShoalError(f"{path} already holds a finished run; choose another --out")
    content = sorted(p.name for p in path.iterdir() if p.name != LOCK)
    if content and not own:
        what = "an interrupted run (continue it with --resume)" if (path / "config.toml").exists() else \
            f"other files ({', '.join(content[:3])}{', ...' if len(content) > 3 else ''})"
        raise ShoalError(f"{path} already holds {what}; choose another --out")


def claim_folder(path: Path, own: bool = False) -> FolderLock:
    """Make (if need be) and lock the run folder ``path`` for this run, after
    :func:`check_folder`; the lock is held until released or the process ends. ``own``: the
    run resumes this folder, which may hold its interrupted run."""
    check_folder(path, own)
    made = not path.exists()
    try:
        path.mkdir(parents=True, exist_ok=True)
        # The lock file is opened in place, never replaced: flock holds on to its inode.
        fd = os.open(path / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise ShoalError(f"--out {path} cannot be written: {exc.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise ShoalError(f"{path} is in use by another run (pid {_lock_holder(path) or 'unknown'})") from None
    lock = FolderLock(fd, made)
    try:
        check_folder(path, own, locked=True)  # again, holding the lock: another run may have come and gone
    except ShoalError:
        lock.release()
        raise
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return lock


def _lock_holder(path: Path) -> str | None:
    """The process id holding ``path``'s lock, or None when nobody holds it."""
    try:
        fd = os.open(path / LOCK, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return None
    except BlockingIOError:
        for _ in range(20):  # a run that just took the lock writes its pid right after
            pid = os.pread(fd, 32, 0).decode(errors="replace").strip()
            if pid:
                return pid
            time.sleep(0.01)
        return "unknown"
    finally:
        os.close(fd)


def _run_proxy(sc: Scenario, app, tiling: Tiling, out: Path):
    """Run the app's low-resolution proxy of this scenario first; its loads, mapped onto our
    tiles, are what ``speculative`` balances by (Shah et al. 2018)."""
    from .replay.run import ProxyLoads

    proxy_of = app.proxy()
    if proxy_of is None:
        raise ShoalError(f"app {sc.app!r} has no low-resolution proxy: speculative needs one")
    params, step_ratio = proxy_of
    proxy = copy.deepcopy(sc)
    proxy.name, proxy.params = f"{sc.name}-proxy", params
    steps = max(1, round(sc.run.steps * step_ratio))
    rec = run_scenario(proxy, steps=steps, placement="sfc", period=0, nodes=1, workers=1,
                       tiles=min(tiling.ntiles, 64), out=out, team=Team(),
                       set=["run.frame_every=0", "run.checkpoint_every=0", "run.resize=[]"])
    return ProxyLoads(rec.trace, tiling, sc.run.steps)


# ----- simulate -------------------------------------------------------------------------------
def simulate(sim: Simulation, steps: int) -> None:
    """Run ``sim`` to step ``steps`` counted from 0 (or until it is stopped)."""
    sim.run(steps - sim.step_count)


# ----- write ----------------------------------------------------------------------------------
def write(plan: Resolved, built: Built, team: Team) -> RunRecord:
    """The trace's last chunk, the final state and the summary of ``plan``'s run ``built``
    (on the first process of ``team``); a stopped run has its trace and checkpoint already,
    and stays resumable."""
    sc, sim, path = plan.scenario, built.sim, built.path
    if sc.run.frame_every and sim.stopped_at is None and sim.step_count % sc.run.frame_every:
        write_frame(sim, path / "frames", built.view)  # the last step's, when the schedule did not write it
    if built.view is not None:
        built.view.finish()
    sim.flush_trace()
    final = sim.all_states() if sim.stopped_at is None else None
    if not team.is_root:
        return team.agree(None)
    built.trace.close()
    if sim.stopped_at is not None:
        built.end_view("stopped")
        return team.agree(RunRecord(path, None, sim.stopped_at))
    gathered = sim.app.gather(final, sim.tiling)
    _check_finite(gathered, sim.step_count)
    save_npz(path / "state" / "final.npz", gathered)
    trace = Trace.read(path / "trace.h5")  # every step from 0, a resumed run's too
    invasive = built.invasive() if built.invasive is not None else None
    oversubscribed = built.trace.oversubscribed or (invasive is not None and invasive["oversubscribed"])
    basis = "task-cost" if oversubscribed else "wall"
    measured = provenance.finish(built.provenance)  # this part's, for a resumed run
    if measured["busy_after"]:
        logger.warning(provenance.busy_warning(measured), extra=FILE_ONLY)
    summary = {"app": sc.app, "scenario": sc.name, "placement": sc.run.placement, "period": sc.run.period,
               "workers": sc.run.workers, "seed": sc.run.seed, "predicted": False, "ranks": team.size,
               "resumed_from_step": plan.checkpoint.step if plan.checkpoint else None,
               **summarize(trace, built.trace.clock, basis), "provenance": measured}
    if invasive is not None:
        summary["invasive"] = invasive
    if (view := built.view_counts()) is not None:
        summary["view"] = view
    write_json(path / "summary.json", summary)
    built.end_view("finished", summary=summary)
    return team.agree(RunRecord(path, summary))


def _check_finite(arrays: dict, step: int) -> None:
    for name, arr in arrays.items():
        if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
            raise ShoalError(f"field {name!r} holds NaN or infinity at step {step}")


def open_run(path: str | Path) -> RunRecord:
    """A finished run folder (one with a summary)."""
    path = Path(path)
    if not path.is_dir():
        raise ShoalError(f"no run folder at {path}")
    if not (path / "summary.json").exists():
        raise ShoalError(f"{path} has no summary.json: the run did not finish")
    try:
        summary = json.loads((path / "summary.json").read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ShoalError(f"{path / 'summary.json'} is not valid JSON: {exc}") from None
    if not isinstance(summary, dict):
        raise ShoalError(f"{path / 'summary.json'} is not a JSON object")
    return RunRecord(path, summary)
