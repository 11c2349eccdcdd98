"""One run from scenario to run folder: build → place → execute → record.

A run folder holds ``config.toml`` (the resolved scenario), ``trace.h5``, ``state/final.npz``
(the gathered global state), ``frames/`` for pictures, and ``summary.json``. The summary is
written last: a folder without it is an interrupted run, never mistaken for a complete one.
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

import numpy as np

from .apps import get_app
from .cluster import Cluster
from .config import Scenario, load_scenario, scenario_from_dict
from .errors import ShoalError
from .imbalance import lif
from .placement import BalanceContext, get_policy, node_loads
from .placement.registry import check_owner
from .runtime import ExecutionResult
from .runtime.app import payload_bytes
from .runtime.checkpoint import Checkpoint, portable
from .runtime.local import merge_results
from .runtime.team import Team, current_team
from .tiling import Tiling
from .trace import Trace


def resumable(run: Path) -> Scenario:
    """The scenario of a run folder that can be resumed (it has a checkpoint)."""
    if not (run / "config.toml").exists():
        raise ShoalError(f"{run} is not a run folder (no config.toml)")
    Checkpoint.latest_path(run / "state")
    return scenario_from_dict(tomllib.loads((run / "config.toml").read_text()), str(run))


LOOKAHEAD = {"oracle"}  # needs the true loads of the future: replay only


def build_tiling(sc: Scenario, grid: tuple[int, ...], cluster: Cluster) -> Tiling:
    """Tiles of the app's cell grid: by tile shape, tile count, or tiles per core."""
    r = sc.run
    if r.tile_shape:
        return Tiling.from_shape(grid, r.tile_shape, r.halo)
    count = r.tiles or r.tiles_per_core * cluster.total_cores
    return Tiling.from_count(grid, count, r.halo)


def summarize(trace: Trace, wall_s: float, oversubscribed: bool) -> dict:
    """The headline numbers of a run, computed from its trace."""
    load = trace.node_load()  # (steps, nodes): CPU seconds per core
    steps = load.shape[0]
    cores = trace.cluster.total_cores
    busy = float(trace.tasks["cost"].sum())
    lifs = lif(load)
    modelled_step = load.max(axis=1)  # perfect packing inside a node, no waiting
    # Wall time means nothing when there are more threads than cores: judge by task costs.
    if oversubscribed:
        efficiency, basis = busy / (modelled_step.sum() * cores), "task-cost"
    else:
        efficiency, basis = busy / (wall_s * cores), "wall"
    owner = trace.owner_at(int(trace.steps[0]))
    return {
        "steps": int(steps),
        "tiles": int(trace.tiling.ntiles),
        "nodes": int(trace.cluster.nodes),
        "cores": list(trace.cluster.cores),
        "tiles_per_core": trace.tiling.ntiles / cores,
        "wall_s": float(wall_s),
        "step_time_mean_s": float(wall_s / steps),
        "step_time_model_s": float(modelled_step.mean()),
        "busy_s": busy,
        "lif_mean": float(np.mean(lifs)),
        "lif_max": float(np.max(lifs)),
        "efficiency": float(efficiency),
        "efficiency_basis": basis,
        "oversubscribed": bool(oversubscribed),
        "tiles_per_node": np.bincount(owner, minlength=trace.cluster.nodes).tolist(),
        "messages": int(len(trace.messages["src"])),
        "message_bytes": int(trace.messages["bytes"].sum()),
    }


@dataclass
class RunRecord:
    """A finished run: its folder, summary and (lazily) its trace."""

    path: Path
    summary: dict

    @property
    def trace(self) -> Trace:
        return Trace.read(self.path / "trace.h5")

    def state(self) -> dict[str, np.ndarray]:
        with np.load(self.path / "state" / "final.npz") as z:
            return {k: z[k] for k in z.files}

    def report(self) -> list[Path]:
        from .report import report_run

        return report_run(self.path)


def _default_out(sc: Scenario) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = Path("runs") / f"{sc.name}-{sc.run.placement}-{stamp}"
    path, k = base, 1
    while path.exists():
        path, k = Path(f"{base}-{k}"), k + 1
    return path


def _write_json(path: Path, data: dict) -> None:
    tmp = path.with_name(path.name + ".partial")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    os.replace(tmp, path)


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
    out: str | Path | None = None,
    on_step: Callable[[int], None] | None = None,
    checkpoint_every: int | None = None,
    resume: str | Path | None = None,
    team: Team | None = None,
) -> RunRecord:
    """Run a scenario and write its run folder.

    Keyword arguments override the scenario's ``[run]`` table, then ``set`` applies
    ``section.key=value`` assignments. ``resume`` continues the run in that folder from its
    latest checkpoint (``scenario`` is then ignored; nodes, workers and placement may change).

    ``team`` is who runs it: by default one process, or one MPI rank per node when started by
    ``mpiexec`` (``nodes`` is then the number of ranks). Rank 0 writes the run folder; every
    rank returns the same record.
    """
    team = team if team is not None else current_team()
    checkpoint = None
    if resume is not None:
        resume = Path(resume)
        scenario = resumable(resume)
        checkpoint = Checkpoint.latest(resume / "state")
        out = resume if out is None else out
    sc = load_scenario(scenario) if isinstance(scenario, str) else scenario
    flags = {"steps": steps, "tiles": tiles, "tiles_per_core": tiles_per_core, "nodes": nodes,
             "workers": workers, "placement": placement, "period": period, "seed": seed, "initial": initial,
             "checkpoint_every": checkpoint_every}
    if tiles_per_core is not None and tiles is None:
        flags["tiles"] = 0  # --tiles-per-core means: derive the count
    if team.distributed:
        if nodes is not None and nodes != team.size:
            raise ShoalError(f"under mpiexec there is one node per rank: --nodes {nodes} but {team.size} ranks")
        flags["nodes"] = team.size
    sc.override([f"run.{k}={json.dumps(v)}" for k, v in flags.items() if v is not None] + list(set))
    policy = get_policy(sc.run.placement)
    if policy.name in LOOKAHEAD:
        raise ShoalError(f"placement {policy.name!r} needs the loads of steps not yet run: use it in "
                         "`shoal replay` (or pick greedy, refine, greedy-refine, swap, speculative, locality, none)")
    if policy.dynamic and sc.run.period == 0:
        raise ShoalError(f"placement {policy.name!r} is dynamic: give --period (steps between rebalancing)")

    spec = get_app(sc.app)
    app = spec.build(sc.params, sc.run.steps)
    cluster = Cluster.uniform(sc.run.nodes, sc.run.workers)
    tiling = checkpoint.tiling if checkpoint else build_tiling(sc, app.grid, cluster)
    if hasattr(app, "check_tiling"):
        app.check_tiling(tiling)
    if policy.dynamic:
        owner = policy.place(tiling, cluster, sc.run.seed, initial=sc.run.initial)
    else:
        owner = policy.place(tiling, cluster, sc.run.seed)
    owner = check_owner(owner, tiling, cluster)

    path = team.agree(Path(out) if out is not None else _default_out(sc))
    if (path / "summary.json").exists():
        raise ShoalError(f"{path} already holds a finished run; choose another --out")
    if team.is_root:
        (path / "state").mkdir(parents=True, exist_ok=True)
        (path / "frames").mkdir(exist_ok=True)
        if checkpoint is None or path != resume:
            (path / "config.toml").write_text(sc.to_toml())

    if hasattr(app, "prepare"):
        app.prepare(tiling)
    mine = team.local_tiles(owner)
    if checkpoint:
        states, first = {int(t): checkpoint.states[t] for t in mine}, checkpoint.step
        if first >= sc.run.steps:
            raise ShoalError(f"the checkpoint is at step {first}, the run has only {sc.run.steps} steps")
    else:
        states, first = {int(t): app.init_tile(int(t), tiling) for t in mine}, 0
    team.step = first
    tile_bytes = team.sum(state_bytes(states, tiling.ntiles, arrays_only=False))
    proxy = None
    if policy.name == "speculative" and team.is_root:  # rank 0 plans; only it needs the proxy
        proxy = _run_proxy(sc, app, tiling, path / "proxy")
    balancer = Balancer(policy, sc.run.period, tiling, cluster, proxy) if policy.dynamic else None
    if checkpoint and balancer and checkpoint.balancer:
        balancer.memory, balancer.cost = checkpoint.balancer["memory"], checkpoint.balancer["cost"]
        if not team.is_root:
            balancer.cost = np.zeros_like(balancer.cost)  # rank 0 carries the costs measured so far
    result = _execute(app, tiling, cluster, owner, sc.run.steps, getattr(sc.params, "frame_every", 0),
                      path / "frames", on_step, states, balancer, first=first,
                      reduced=checkpoint.reduced if checkpoint else None,
                      checkpoints=path / "state" if sc.run.checkpoint_every else None,
                      checkpoint_every=sc.run.checkpoint_every, team=team, overlap=sc.run.overlap)
    final_states = team.to_root(result.states)
    result = team.combine(result)
    if not team.is_root:
        return RunRecord(path, team.agree(None))

    gathered = app.gather(final_states, tiling)
    _check_finite(gathered, sc.run.steps)
    _save_npz(path / "state" / "final.npz", gathered)

    trace = Trace.of_run(result, app.phases, tiling, cluster, balance=balancer.records() if balancer else None,
                         app=sc.app, scenario=sc.name, config=sc.to_dict(), tile_bytes=tile_bytes)
    trace.write(path / "trace.h5")

    summary = {"app": sc.app, "scenario": sc.name, "placement": sc.run.placement, "period": sc.run.period,
               "workers": sc.run.workers, "seed": sc.run.seed, "predicted": False, "ranks": team.size,
               "resumed_from_step": checkpoint.step if checkpoint else None,
               **summarize(trace, result.wall_s, result.oversubscribed)}
    if trace.communication is not None:
        summary.update(comm_cpu_s=[float(c) for c in trace.communication["cpu_s"]],
                       message_cpu_s=trace.message_cpu_s)
    if trace.balance is not None:
        summary.update(balance_steps=int(len(trace.balance["step"])), migrated_tiles=int(trace.balance["moved"].sum()),
                       migrated_bytes=int(trace.balance["bytes"].sum()))
    _write_json(path / "summary.json", summary)
    return RunRecord(path, team.agree(summary))


def state_bytes(states: dict, ntiles: int, arrays_only: bool = True) -> np.ndarray:
    """Bytes of every tile's state held here (zero for tiles held elsewhere): what migrating
    it moves (its arrays) or what it weighs in the trace."""
    out = np.zeros(ntiles, dtype=np.int64)
    for t, s in states.items():
        s = portable(s)
        if arrays_only and isinstance(s, dict):
            s = {k: v for k, v in s.items() if isinstance(v, np.ndarray)}
        out[t] = payload_bytes(s)
    return out


def _save_npz(path: Path, arrays: dict) -> None:
    tmp = path.with_name(path.name + ".partial")
    with open(tmp, "wb") as fh:
        np.savez(fh, **arrays)
    os.replace(tmp, path)


def _check_finite(arrays: dict, step: int) -> None:
    for name, arr in arrays.items():
        if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
            raise ShoalError(f"field {name!r} holds NaN or infinity at step {step}")


class Balancer:
    """Re-places tiles every ``period`` steps of a local run from their measured CPU costs."""

    def __init__(self, policy, period: int, tiling: Tiling, cluster: Cluster, proxy=None):
        self.policy, self.period, self.tiling, self.cluster = policy, period, tiling, cluster
        self.proxy = proxy  # ProxyLoads of a low-resolution run (speculative)
        self.memory: dict = {}
        self.rows: list[tuple] = []
        self.cost = np.zeros(tiling.ntiles)

    def measure(self, part: ExecutionResult) -> None:
        """Add the CPU costs of the tasks that ran here (tasks elsewhere cost zero here)."""
        self.cost += np.bincount(part.task_tile, weights=part.task_cost, minlength=self.tiling.ntiles)

    def rebalance(self, step: int, owner: np.ndarray, states: dict, team: Team) -> np.ndarray:
        """The owner table every process agrees on: planned by the first from everyone's costs."""
        cost = team.sum(self.cost)
        nbytes = team.sum(state_bytes(states, self.tiling.ntiles))
        self.cost[:] = 0.0
        new = None
        if team.is_root:
            loads = cost / self.period
            ahead = self.proxy.loads(step, step + self.period) if self.proxy else None
            ctx = BalanceContext(self.tiling, self.cluster, owner, loads, step=step, proxy_loads=ahead)
            tic = time.perf_counter()
            new = check_owner(self.policy.rebalance(ctx, self.memory), self.tiling, self.cluster)
            plan = time.perf_counter() - tic
            moved = np.flatnonzero(new != owner)
            self.rows.append((step, plan, len(moved), int(nbytes[moved].sum()),
                              float(lif(node_loads(owner, loads, self.cluster))),
                              float(lif(node_loads(new, loads, self.cluster)))))
        return team.agree(new)

    def records(self) -> dict:
        cols = ("step", "plan_s", "moved", "bytes", "lif_before", "lif_after")
        return {c: np.array([r[i] for r in self.rows]) for i, c in enumerate(cols)}


def _run_proxy(sc: Scenario, app, tiling: Tiling, out: Path):
    """Run the app's low-resolution proxy of this scenario first; its loads, mapped onto our
    tiles, are what ``speculative`` balances by (Shah et al. 2018)."""
    from .replay.run import ProxyLoads

    if not hasattr(app, "proxy"):
        raise ShoalError(f"app {sc.app!r} has no low-resolution proxy: speculative needs one")
    params, step_ratio = app.proxy()
    proxy = copy.deepcopy(sc)
    proxy.name, proxy.params = f"{sc.name}-proxy", params
    steps = max(1, round(sc.run.steps * step_ratio))
    rec = run_scenario(proxy, steps=steps, placement="sfc", period=0, nodes=1, workers=1,
                       tiles=min(tiling.ntiles, 64), out=out, team=Team())
    return ProxyLoads(rec.trace, tiling, sc.run.steps)


def _execute(app, tiling, cluster, owner, steps, frame_every, frames: Path, on_step, states,
             balancer: Balancer | None, first: int = 0, reduced: dict | None = None,
             checkpoints: Path | None = None, checkpoint_every: int = 0, team: Team | None = None,
             overlap: bool = True) -> ExecutionResult:
    """Run steps ``first``..``steps``, in chunks when the app asks for frames, a balancer
    re-places tiles, or checkpoints are due. ``reduced`` holds the reductions of the steps
    before ``first`` (a resumed run's, from its checkpoint): lagged ones are read from there.

    Between chunks every tile is idle: frames are gathered there, tiles change owner there (in
    one process, migration is a change of owner; its bytes are recorded all the same; across
    ranks their states move), and checkpoints are written there.
    """
    team = team if team is not None else Team()
    executor = team.executor(app, tiling, cluster, owner, overlap)
    cuts = {steps}
    for every in (frame_every, balancer.period if balancer else 0, checkpoint_every if checkpoints else 0):
        if every:
            cuts |= set(range((first // every + 1) * every, steps, every))
    if frame_every and first == 0:
        everything = team.to_root(states)
        if team.is_root:
            _save_npz(frames / "state-000000.npz", app.gather(everything, tiling))
    parts, placements = [], [(first, executor.owner.copy())]
    reduced = dict(reduced or {})
    for cut in sorted(cuts):
        team.step = first
        shifted = None if on_step is None else (lambda k, f=first: on_step(f + k))
        part = executor.run(cut - first, states=states, first_step=first, on_step=shifted, reduced_before=reduced)
        reduced = {k: v for k, v in part.reductions.items() if k[0] == cut - 1}  # what the next chunk reads
        team.step = cut
        states = part.states
        parts.append(part)
        framed = frame_every and (cut % frame_every == 0 or cut == steps)
        checkpointed = checkpoints and cut % checkpoint_every == 0 and cut < steps
        if balancer:
            balancer.measure(part)
        everything = team.to_root(states) if framed or checkpointed else None
        if framed and team.is_root:
            gathered = app.gather(everything, tiling)
            _check_finite(gathered, cut)
            _save_npz(frames / f"state-{cut:06d}.npz", gathered)
        if balancer and cut % balancer.period == 0 and cut < steps:
            new = balancer.rebalance(cut, executor.owner, states, team)
            states = team.migrate(states, executor.owner, new)
            executor.owner = new
            placements.append((cut, executor.owner.copy()))
        if checkpointed:
            memory = {"memory": balancer.memory, "cost": team.sum(balancer.cost)} if balancer else {}
        if checkpointed and team.is_root:
            Checkpoint(cut, tiling, everything, executor.owner, memory, reduced).write(checkpoints)
        first = cut
    result = merge_results(parts)
    result.placements = placements
    return result


def open_run(path: str | Path) -> RunRecord:
    """A finished run folder (one with a summary)."""
    path = Path(path)
    if not path.is_dir():
        raise ShoalError(f"no run folder at {path}")
    if not (path / "summary.json").exists():
        raise ShoalError(f"{path} has no summary.json: the run did not finish")
    return RunRecord(path, json.loads((path / "summary.json").read_text()))
