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
(the gathered global state), ``frames/`` for the app's frames, and ``summary.json``. The
summary is written last: a folder without it is an interrupted run, never mistaken for a
complete one. A run stopped on request (Ctrl-C, ``request_stop``) leaves a checkpoint and no
summary, and ``--resume`` continues it.
"""

from __future__ import annotations

import copy
import json
import os
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .apps import get_app
from .cluster import Cluster
from .config import Scenario, load_scenario, scenario_from_dict
from .errors import ShoalError
from .placement import Balancer, PlacementPolicy, get_policy, policy_params
from .placement.registry import check_owner
from .runtime.checkpoint import Checkpoint
from .runtime.simulation import At, Every, Simulation, state_bytes
from .runtime.team import Team, current_team
from .summary import summarize
from .tiling import Tiling
from .trace import Trace

LOOKAHEAD = {"oracle"}  # needs the true loads of the future: replay only
# The keyword arguments of run_scenario that override a scenario's [run] table.
RUN_FLAGS = ("steps", "tiles", "tiles_per_core", "nodes", "workers", "placement", "period", "seed", "initial",
             "checkpoint_every")


@dataclass
class RunRecord:
    """A run's folder and summary (``None`` for a run stopped before its end, at ``stopped_at``)."""

    path: Path
    summary: dict | None
    stopped_at: int | None = None

    @property
    def trace(self) -> Trace:
        return Trace.read(self.path / "trace.h5")

    def state(self) -> dict[str, np.ndarray]:
        with np.load(self.path / "state" / "final.npz") as z:
            return {k: z[k] for k in z.files}

    def report(self) -> list[Path]:
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
    period: int | None = None,
    seed: int | None = None,
    initial: str | None = None,
    set: list[str] | tuple[str, ...] = (),  # noqa: A002  (mirrors the --set flag)
    lb: list[str] | tuple[str, ...] = (),
    out: str | Path | None = None,
    on_step: Callable[[int], None] | None = None,
    checkpoint_every: int | None = None,
    resume: str | Path | None = None,
    team: Team | None = None,
) -> RunRecord:
    """Run a scenario and write its run folder.

    Keyword arguments override the scenario's ``[run]`` table, then ``set`` applies
    ``section.key=value`` assignments and ``lb`` ``policy.key=value`` ones to the balancing
    policies' parameters. ``resume`` continues the run in that folder from its latest
    checkpoint (``scenario`` is then ignored; nodes, workers and placement may change).
    ``on_step(k)`` is called as step ``k`` finishes.

    ``team`` is who runs it: by default one process, or one MPI rank per node when started by
    ``mpiexec`` (``nodes`` is then the number of ranks). Rank 0 writes the run folder; every
    rank returns the same record.
    """
    team = team if team is not None else current_team()
    values = locals()
    flags = {k: values[k] for k in RUN_FLAGS}
    plan = resolve(scenario, flags, set, lb, resume, out, team)
    built = build(plan, team)
    try:
        if on_step is not None:
            built.sim.add_measurement(lambda record: on_step(record.step))
        simulate(built.sim, plan.scenario.run.steps)
        return write(plan, built, team)
    finally:
        built.sim.close()


# ----- resolve --------------------------------------------------------------------------------
def resolve(scenario: str | Scenario, flags: dict, assignments, lb, resume, out, team: Team) -> Resolved:
    """The scenario with every override applied and checked, and where the run starts."""
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
    return Resolved(sc, policy, checkpoint, resume, Path(out) if out is not None else None)


def resumable(run: Path) -> Scenario:
    """The scenario of a run folder that can be resumed (it has a checkpoint)."""
    if not (run / "config.toml").exists():
        raise ShoalError(f"{run} is not a run folder (no config.toml)")
    Checkpoint.latest_path(run / "state")
    return scenario_from_dict(tomllib.loads((run / "config.toml").read_text()), str(run))


# ----- build ----------------------------------------------------------------------------------
def build_tiling(sc: Scenario, grid: tuple[int, ...], cluster: Cluster) -> Tiling:
    """Tiles of the app's cell grid: by tile shape, tile count, or tiles per core."""
    r = sc.run
    if r.tile_shape:
        return Tiling.from_shape(grid, r.tile_shape, r.halo)
    count = r.tiles or r.tiles_per_core * cluster.total_cores
    return Tiling.from_count(grid, count, r.halo)


@dataclass
class Built:
    """What ``build`` makes: the simulation, its run folder and its tiles' sizes at the start."""

    sim: Simulation
    path: Path
    tile_bytes: np.ndarray


def build(plan: Resolved, team: Team) -> Built:
    """The simulation of a resolved run, its callbacks attached, and the run folder made."""
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
    if (path / "summary.json").exists():
        raise ShoalError(f"{path} already holds a finished run; choose another --out")
    if team.is_root:
        (path / "state").mkdir(parents=True, exist_ok=True)
        (path / "frames").mkdir(exist_ok=True)
        if checkpoint is None or path != plan.resume:
            (path / "config.toml").write_text(sc.to_toml())

    app.prepare(tiling)
    states = None
    if checkpoint:
        states = {int(t): checkpoint.states[t] for t in team.local_tiles(owner)}
    balancer = None
    if policy.dynamic:
        proxy = _run_proxy(sc, app, tiling, path / "proxy") if policy.name == "speculative" and team.is_root else None
        balancer = Balancer(policy, sc.run.period, tiling, tuple(p.barrier for p in app.phases),
                            policy_params(policy, sc.balance), proxy)
        if checkpoint and checkpoint.balancer:
            balancer.restore(checkpoint.balancer, carry_costs=team.is_root, nodes=cluster.nodes)  # rank 0 carries
    sim = Simulation(app, tiling, cluster, owner, team=team, states=states, step=first,
                     reduced=checkpoint.reduced if checkpoint else None, balancer=balancer,
                     checkpoints=path / "state", overlap=sc.run.overlap)
    _attach(sim, sc, path / "frames")
    return Built(sim, path, team.sum(state_bytes(app, sim.states, tiling.ntiles, arrays_only=False)))


def _attach(sim: Simulation, sc: Scenario, frames: Path) -> None:
    """The run's callbacks, in the order they run at a step boundary: frames, worker resizes,
    balancing, checkpoints."""
    r = sc.run
    if r.frame_every:
        sim.add_callback(lambda s: write_frame(s, frames), Every(r.frame_every))
        if sim.step_count == 0:
            write_frame(sim, frames)
    for step, workers in r.workers_from(sim.step_count):
        sim.add_callback(lambda s, w=workers: s.reconfigure(workers=w), At((step,)))
    if sim.balancer is not None:
        sim.add_callback(Simulation.rebalance, Every(r.period, until=r.steps))
    if r.checkpoint_every:
        sim.add_callback(Simulation.write_checkpoint, Every(r.checkpoint_every, until=r.steps))


def write_frame(sim: Simulation, frames: Path) -> None:
    """The app's frame of the current state, as ``frames/state-<step>.npz`` (first process)."""
    gathered = sim.gather()
    if gathered is not None:
        _check_finite(gathered, sim.step_count)
        _save_npz(frames / f"state-{sim.step_count:06d}.npz", sim.app.frame(gathered))


def _default_out(sc: Scenario) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = Path("runs") / f"{sc.name}-{sc.run.placement}-{stamp}"
    path, k = base, 1
    while path.exists():
        path, k = Path(f"{base}-{k}"), k + 1
    return path


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
    """Run to step ``steps`` (or until stopped)."""
    sim.run(steps - sim.step_count)


# ----- write ----------------------------------------------------------------------------------
def write(plan: Resolved, built: Built, team: Team) -> RunRecord:
    """The final state, the trace and the summary (on the first process); a stopped run
    writes its trace only and stays resumable."""
    sc, sim, path = plan.scenario, built.sim, built.path
    if sc.run.frame_every and sim.stopped_at is None and sim.step_count % sc.run.frame_every:
        write_frame(sim, path / "frames")  # the last step's, when the schedule did not write it
    final = sim.all_states() if sim.stopped_at is None else None
    result = team.combine(sim.result())
    if not team.is_root:
        return team.agree(None)
    trace = Trace.of_run(result, sim.app.phases, sim.tiling, sim.cluster, placements=sim.placements,
                         workers=sim.worker_history, balance=sim.balancer.records() if sim.balancer else None,
                         app=sc.app, scenario=sc.name, config=sc.to_dict(), tile_bytes=built.tile_bytes)
    trace.write(path / "trace.h5")
    if sim.stopped_at is not None:
        return team.agree(RunRecord(path, None, sim.stopped_at))
    gathered = sim.app.gather(final, sim.tiling)
    _check_finite(gathered, sim.step_count)
    _save_npz(path / "state" / "final.npz", gathered)
    summary = {"app": sc.app, "scenario": sc.name, "placement": sc.run.placement, "period": sc.run.period,
               "workers": sc.run.workers, "seed": sc.run.seed, "predicted": False, "ranks": team.size,
               "resumed_from_step": plan.checkpoint.step if plan.checkpoint else None,
               **summarize(trace, result.wall_s, "task-cost" if result.oversubscribed else "wall")}
    _write_json(path / "summary.json", summary)
    return team.agree(RunRecord(path, summary))


def _write_json(path: Path, data: dict) -> None:
    tmp = path.with_name(path.name + ".partial")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    os.replace(tmp, path)


def _save_npz(path: Path, arrays: dict[str, Any]) -> None:
    tmp = path.with_name(path.name + ".partial")
    with open(tmp, "wb") as fh:
        np.savez(fh, **arrays)
    os.replace(tmp, path)


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
    return RunRecord(path, json.loads((path / "summary.json").read_text()))
