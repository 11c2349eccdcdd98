"""One run from scenario to run folder: build → place → execute → record.

A run folder holds ``config.toml`` (the resolved scenario), ``trace.h5``, ``state/final.npz``
(the gathered global state), ``frames/`` for pictures, and ``summary.json``. The summary is
written last: a folder without it is an interrupted run, never mistaken for a complete one.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .apps import get_app
from .cluster import Cluster
from .config import Scenario, load_scenario
from .errors import ShoalError
from .imbalance import lif
from .placement import get_policy
from .placement.registry import check_owner
from .runtime import ExecutionResult, LocalExecutor
from .runtime.app import payload_bytes
from .runtime.local import merge_results
from .tiling import Tiling
from .trace import Trace


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
    set: list[str] | tuple[str, ...] = (),  # noqa: A002  (mirrors the --set flag)
    out: str | Path | None = None,
    on_step: Callable[[int], None] | None = None,
) -> RunRecord:
    """Run a scenario on the local executor and write its run folder.

    Keyword arguments override the scenario's ``[run]`` table, then ``set`` applies
    ``section.key=value`` assignments.
    """
    sc = load_scenario(scenario) if isinstance(scenario, str) else scenario
    flags = {"steps": steps, "tiles": tiles, "tiles_per_core": tiles_per_core, "nodes": nodes,
             "workers": workers, "placement": placement, "period": period, "seed": seed}
    if tiles_per_core is not None and tiles is None:
        flags["tiles"] = 0  # --tiles-per-core means: derive the count
    sc.override([f"run.{k}={json.dumps(v)}" for k, v in flags.items() if v is not None] + list(set))
    policy = get_policy(sc.run.placement)
    if policy.dynamic:
        raise ShoalError(f"placement {policy.name!r} is dynamic; this build runs static placements only")

    spec = get_app(sc.app)
    app = spec.build(sc.params, sc.run.steps)
    cluster = Cluster.uniform(sc.run.nodes, sc.run.workers)
    tiling = build_tiling(sc, app.grid, cluster)
    if hasattr(app, "check_tiling"):
        app.check_tiling(tiling)
    owner = check_owner(policy.place(tiling, cluster, sc.run.seed), tiling, cluster)

    path = Path(out) if out is not None else _default_out(sc)
    if (path / "summary.json").exists():
        raise ShoalError(f"{path} already holds a finished run; choose another --out")
    (path / "state").mkdir(parents=True, exist_ok=True)
    (path / "frames").mkdir(exist_ok=True)
    (path / "config.toml").write_text(sc.to_toml())

    if hasattr(app, "prepare"):
        app.prepare(tiling)
    states = {t: app.init_tile(t, tiling) for t in range(tiling.ntiles)}
    tile_bytes = np.array([payload_bytes(states[t]) for t in range(tiling.ntiles)], dtype=np.int64)
    result = _execute(app, tiling, cluster, owner, sc.run.steps, getattr(sc.params, "frame_every", 0),
                      path / "frames", on_step, states)

    gathered = app.gather(result.states, tiling)
    _check_finite(gathered, sc.run.steps)
    _save_npz(path / "state" / "final.npz", gathered)

    trace = Trace(
        tasks={"step": result.task_step, "phase": result.task_phase, "tile": result.task_tile,
               "node": result.task_node, "worker": result.task_worker, "start": result.task_start,
               "end": result.task_end, "cost": result.task_cost, "work": result.task_work},
        messages={"step": result.msg_step, "phase": result.msg_phase, "src": result.msg_src,
                  "dst": result.msg_dst, "bytes": result.msg_bytes},
        phases=[p.name for p in app.phases], tiling=tiling, cluster=cluster,
        placement_steps=np.array([0]), placement_owners=owner[None, :],
        step_end=result.step_end, app=sc.app, scenario=sc.name, config=sc.to_dict(),
        barrier_phases=[p.reduction is not None for p in app.phases], tile_bytes=tile_bytes,
    )
    trace.write(path / "trace.h5")

    summary = {"app": sc.app, "scenario": sc.name, "placement": sc.run.placement,
               "workers": sc.run.workers, "seed": sc.run.seed, "predicted": False,
               **summarize(trace, result.wall_s, result.oversubscribed)}
    _write_json(path / "summary.json", summary)
    return RunRecord(path, summary)


def _save_npz(path: Path, arrays: dict) -> None:
    tmp = path.with_name(path.name + ".partial")
    with open(tmp, "wb") as fh:
        np.savez(fh, **arrays)
    os.replace(tmp, path)


def _check_finite(arrays: dict, step: int) -> None:
    for name, arr in arrays.items():
        if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
            raise ShoalError(f"field {name!r} holds NaN or infinity at step {step}")


def _execute(app, tiling, cluster, owner, steps, frame_every, frames: Path, on_step, states) -> ExecutionResult:
    """Run all steps; when the app asks for frames, run in chunks and save the state between."""
    executor = LocalExecutor(app, tiling, cluster, owner)
    if not frame_every:
        return executor.run(steps, states=states, on_step=on_step)
    parts = []
    _save_npz(frames / "state-000000.npz", app.gather(states, tiling))
    for first in range(0, steps, frame_every):
        n = min(frame_every, steps - first)
        shifted = None if on_step is None else (lambda k, f=first: on_step(f + k))
        part = executor.run(n, states=states, first_step=first, on_step=shifted)
        states = part.states
        gathered = app.gather(states, tiling)
        _check_finite(gathered, first + n)
        _save_npz(frames / f"state-{first + n:06d}.npz", gathered)
        parts.append(part)
    return merge_results(parts)


def open_run(path: str | Path) -> RunRecord:
    """A finished run folder (one with a summary)."""
    path = Path(path)
    if not path.is_dir():
        raise ShoalError(f"no run folder at {path}")
    if not (path / "summary.json").exists():
        raise ShoalError(f"{path} has no summary.json: the run did not finish")
    return RunRecord(path, json.loads((path / "summary.json").read_text()))
