"""The second stage of a run: the app, its tiles and their owners, the run folder claimed,
the :class:`~shoal.runtime.simulation.Simulation` with its callbacks (frames, balancing,
checkpoints, worker resizes, the live view, the resource manager).

The trace grows as the run goes: a chunk is the steps between checkpoints (every
``TRACE_CHUNK_STEPS`` steps when the run writes none), appended and committed at the chunk's
end and before every checkpoint, so a killed run leaves a trace of every completed chunk and
a resumed run carries it on from the checkpoint's step: its trace holds every step from 0.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..apps import get_app
from ..cluster import Cluster
from ..compilation import announce
from ..config import Scenario, scenario_params
from ..errors import ShoalError
from ..files import remove_partials, write_text
from ..log import FILE_ONLY, Stages, run_log
from ..placement import Balancer, policy_params
from ..placement.proxy import ProxyLoads
from ..placement.registry import check_owner
from ..provenance import busy_warning, describe, record
from ..records import BALANCE, JOB_RUNS, MESSAGES, REDUCTIONS, TASKS
from ..rundir import FolderLock, check_folder, claim_folder, new_folder
from ..runtime.simulation import At, Every, Simulation, state_bytes
from ..runtime.team import Team
from ..tiling import Tiling
from ..trace import Trace, TraceWriter, joined, mark_closed
from ..trace.model import loop_phases
from .frames import write_frame
from .options import SimulationOptions
from .resolving import Resolved, resolve

if TYPE_CHECKING:
    from ..invasive.join import InvasiveNodes, ManagerAddress
    from ..live.feed import LiveView

logger = logging.getLogger("shoal")

TRACE_CHUNK_STEPS = 50  # steps per trace chunk of a run without checkpoints


def build_tiling(sc: Scenario, app, cluster: Cluster) -> Tiling:
    """The ``app``'s tiles (:meth:`~shoal.runtime.App.decompose`): by the tile shape of the
    scenario ``sc`` (a grid's only), its tile count, or its tiles per core of ``cluster``."""
    r = sc.run
    if r.tile_shape:
        return Tiling.from_shape(app.grid, r.tile_shape, r.halo)
    count = r.tiles or r.tiles_per_core * cluster.total_cores
    return app.decompose(count, r.halo)


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


def build(plan: Resolved, team: Team, *, manager: ManagerAddress | None = None, invade_every: int = 1,
          invade_blocking: bool = False, view: str | None = None, view_every: int | None = None,
          stages: Stages | None = None) -> Built:
    """The simulation of the resolved run ``plan`` on ``team``, its run folder claimed, its
    callbacks attached, in timed stages (``app``, ``decompose``, ``place``, ``prepare``,
    ``claim``, ``proxy``, ``attach``).

    Everything that checks the input runs before the folder is claimed; should anything after
    fail, a folder this run made is removed again.

    Parameters
    ----------
    plan : Resolved
        The run, as :func:`~shoal.session.resolving.resolve` settled it.
    team : Team
        The processes that run it.
    manager : ManagerAddress, optional
        A resource manager its nodes join (:mod:`shoal.invasive.join`), invading every
        ``invade_every`` steps and waiting for each answer when ``invade_blocking``.
    invade_every : int
        Steps between a node's invades.
    invade_blocking : bool
        Each invade waits for the manager's answer.
    view : str, optional
        The Unix socket of a live viewer to feed, a frame every ``view_every`` steps.
    view_every : int, optional
        Steps between the viewer's frames (default: the live view's choice).
    stages : Stages, optional
        Where the stages' times go.
    """
    stage = stages if stages is not None else Stages()
    sc, policy, checkpoint = plan.scenario, plan.policy, plan.checkpoint
    first = checkpoint.step if checkpoint else 0
    with stage("app"):
        app = get_app(sc.app).build(sc.params, sc.run.steps)
    with stage("decompose"):
        cluster = Cluster(tuple(sc.run.workers_at(first)))
        tiling = checkpoint.tiling if checkpoint else build_tiling(sc, app, cluster)
        app.check_tiling(tiling)
    with stage("place"):
        if policy.dynamic:
            owner = policy.place(tiling, cluster, sc.run.seed, initial=sc.run.initial)
        else:
            owner = policy.place(tiling, cluster, sc.run.seed)
        owner = check_owner(owner, tiling, cluster)
    path = team.agree(plan.out if plan.out is not None else _default_out(sc))
    own = plan.resume is not None and path.resolve() == plan.resume.resolve()
    _on_root(team, lambda: check_folder(path, own))

    if team.is_root:  # only once the input is known good: bad input stays one line
        announce(sc.app)
    with stage("prepare"):
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
                         checkpoints=path / "state", overlap=sc.run.overlap,
                         executor=sc.run.executor)
        built = Built(sim, path, team.sum(state_bytes(app, sim.states, tiling.ntiles, arrays_only=False)))
    try:
        with stage("claim"):
            built.lock = _on_root(team, lambda: claim_folder(path, own))
            if team.is_root:  # the run folder exists from here on
                _open_folder(plan, built, team, own)
            sim.trace_to(built.trace)
        if policy.name == "speculative" and team.is_root:
            with stage("proxy"):
                balancer.proxy = _run_proxy(sc, app, tiling, path / "proxy")
        with stage("attach"):
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


def _open_folder(plan: Resolved, built: Built, team: Team, own: bool) -> None:
    """The claimed run folder's first contents (first process): run.log with where the run
    runs, ``state/``, ``frames/``, ``config.toml`` and the trace writer."""
    sc, sim, path = plan.scenario, built.sim, built.path
    first = sim.step_count
    built.log.enter_context(run_log(path))
    start = f"resumed at step {first}" if first else "started"
    logger.info("%s %s: %d tiles on %d nodes (%s), into %s", sc.name, start, sim.tiling.ntiles, sim.cluster.nodes,
                plan.policy.name, path, extra=FILE_ONLY)
    built.provenance = record()
    logger.info(describe(built.provenance), extra=FILE_ONLY)
    if busy := busy_warning(built.provenance):
        logger.warning(busy, extra=FILE_ONLY)
    (path / "state").mkdir(exist_ok=True)
    (path / "frames").mkdir(exist_ok=True)
    stale = remove_partials(path / "state") + remove_partials(path, ("config.toml", "trace.h5", "summary.json"))
    if stale:  # unfinished writes of a killed run: the lock says no one else is writing them
        logger.info("removed %s", ", ".join(p.name for p in stale), extra=FILE_ONLY)
    if not own:
        write_text(path / "config.toml", sc.to_toml())
    built.trace = TraceWriter(path / "trace.h5", _trace_start(plan, built, team), resumed_at=first or None)


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
    """What the run's trace file starts as: empty tables, or for a resumed run what came before
    the checkpoint it continues from, joined to this part's nodes (:func:`~shoal.trace.joined`):
    one trace on the most nodes the run had, those a part lacked holding no worker threads
    there. The new file replaces the old one (a folder that older shoal split in parts is read
    as one run, and its parts are then held by the new file)."""
    sim, sc = built.sim, plan.scenario
    T, nodes, first = sim.tiling.ntiles, sim.cluster.nodes, sim.step_count
    phases = sim.app.phases
    start = Trace(
        tasks=TASKS.empty(), messages=MESSAGES.empty(), phases=[p.name for p in phases], tiling=sim.tiling,
        cluster=sim.cluster, placement_steps=np.zeros(0, np.int64), placement_owners=np.zeros((0, T), np.int64),
        step_end=np.zeros(0), app=sc.app, scenario=sc.name, config=sc.to_dict(),
        barrier_phases=[p.gathers for p in phases], lagged_phases=[p.lagged for p in phases],
        work_units=[p.work for p in phases],
        loop_phases=loop_phases(phases, sim.app.loops),
        jobs=JOB_RUNS.empty() if any(p.jobs for p in phases) else None,
        reductions=REDUCTIONS.empty() if any(p.reduction is not None for p in phases) else None,
        node_barrier_phases=[p.node_barrier for p in phases],
        tile_bytes=built.tile_bytes, balance=BALANCE.empty() if sim.balancer is not None else None,
        communication={"cpu_s": np.zeros(nodes), "messages": np.zeros(nodes, np.int64)} if team.distributed else None,
        worker_steps=np.zeros(0, np.int64), worker_cores=np.zeros((0, nodes), np.int64))
    if plan.checkpoint is None:
        return start
    mark_closed(plan.resume / "trace.h5")  # a killed run's trace says "open for write" until then
    try:
        before = Trace.read(plan.resume).truncated(first)
        # this part's threads in the file from the start: the writer then finds them in force
        trace = joined([before, replace(start, worker_steps=np.array([first]),
                                        worker_cores=np.array([sim.cluster.cores]))])
    except ShoalError as exc:
        logger.warning("the trace before step %d is lost (%s): the trace starts at step %d", first, exc, first)
        return start
    if len(before.steps) != first:
        logger.warning("the trace holds %d of the %d steps before the checkpoint", len(before.steps), first)
    if before.cluster.nodes != nodes:
        logger.info("the run continues on %d nodes, after %d: its trace has %d", nodes, before.cluster.nodes,
                    trace.cluster.nodes, extra=FILE_ONLY)
    return trace


def _live_view(sim: Simulation, sc: Scenario, path: Path, socket: str, every: int | None) -> LiveView:
    """What the run sends the live viewer on ``socket`` (a connection on the first process only)."""
    from ..live.feed import FRAME_SHARE, LiveView, ViewFeed, default_every, hello_message

    share = None if every else FRAME_SHARE  # an interval asked for is kept; the default one bounds the cost
    every = every or default_every(sc.run.steps, sc.run.frame_every)
    feed = None
    if sim.team.is_root:
        hello = hello_message(sim, sc.to_dict(), scenario_params(sc), path, every)
        feed = ViewFeed(socket, hello, sim.request_stop, get_app(sc.app).layout)
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
        from ..invasive.join import join

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


def _default_out(sc: Scenario) -> Path:
    """A new folder under ``runs/`` named after the scenario (a label, never a path) and its placement."""
    return new_folder("runs", f"{sc.name}-{sc.run.placement}")


def _run_proxy(sc: Scenario, app, tiling: Tiling, out: Path):
    """Run the app's low-resolution proxy of this scenario first; its loads, mapped onto our
    tiles, are what ``speculative`` balances by (Shah et al. 2018)."""
    from .writing import simulate, write  # the proxy is a whole run of its own

    proxy_of = app.proxy()
    if proxy_of is None:
        raise ShoalError(f"app {sc.app!r} has no low-resolution proxy: speculative needs one")
    params, step_ratio = proxy_of
    proxy = copy.deepcopy(sc)
    proxy.name, proxy.params = f"{sc.name}-proxy", params
    steps = max(1, round(sc.run.steps * step_ratio))
    options = SimulationOptions(set=("run.frame_every=0", "run.checkpoint_every=0", "run.resize=[]"), out=out)
    overrides = {"steps": steps, "placement": "sfc", "period": 0, "nodes": 1, "workers": 1,
                 "tiles": min(tiling.ntiles, 64)}
    team = Team()
    plan = resolve(proxy, overrides, options, team)
    built = build(plan, team)
    try:
        simulate(built.sim, plan.scenario.run.steps)
        rec = write(plan, built, team)
    finally:
        built.close()
    return ProxyLoads(rec.trace, tiling, sc.run.steps)
