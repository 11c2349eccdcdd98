"""``shoal report RUN``: per-node load heatmap, worker timeline, LIF per step, placement map,
and the app's fields."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from ..errors import ShoalError  # noqa: E402
from ..imbalance import lif  # noqa: E402
from ..trace import Trace  # noqa: E402


def load_heatmap(trace: Trace, path: Path) -> Path:
    """Per-node load over steps (sampi Figure 6a): nodes down, steps across."""
    load = trace.node_load()
    fig, ax = plt.subplots(figsize=(9, 0.3 * trace.cluster.nodes + 2.2))
    im = ax.imshow(load.T * 1e3, aspect="auto", origin="lower", cmap="viridis", interpolation="nearest",
                   extent=(trace.steps[0] - 0.5, trace.steps[-1] + 0.5, -0.5, trace.cluster.nodes - 0.5))
    ax.set_xlabel("step")
    ax.set_ylabel("node")
    kind = "predicted" if trace.predicted else "measured"
    ax.set_title(f"{trace.scenario}: {kind} load per node (CPU ms per core per step)")
    fig.colorbar(im, ax=ax, label="ms")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def timeline(trace: Trace, path: Path, max_tasks: int = 4000) -> Path:
    """Tasks per worker over wall time (a Projections-style timeline) for the first steps."""
    t = trace.tasks
    steps = trace.steps
    per_step = max(1, len(t["step"]) // len(steps))
    last = steps[min(len(steps) - 1, max(0, max_tasks // per_step - 1))]
    sel = t["step"] <= last
    cores = trace.cluster.cores
    offsets = np.concatenate([[0], np.cumsum(cores)])
    row = offsets[t["node"][sel]] + t["worker"][sel]
    fig, ax = plt.subplots(figsize=(11, 0.45 * trace.cluster.total_cores + 2))
    cmap = plt.get_cmap("tab10")
    start, end, phase = t["start"][sel] * 1e3, t["end"][sel] * 1e3, t["phase"][sel]
    for p, name in enumerate(trace.phases):
        m = phase == p
        ax.barh(row[m], end[m] - start[m], left=start[m], height=0.8, color=cmap(p % 10),
                edgecolor="none", label=name)
    ax.set_yticks(range(trace.cluster.total_cores))
    ax.set_yticklabels([f"n{n}.w{w}" for n, c in enumerate(cores) for w in range(c)])
    ax.set_xlabel("wall time (ms)")
    ax.set_title(f"{trace.scenario}: tasks per worker, steps {steps[0]}–{last}")
    ax.legend(loc="upper right", fontsize=8)
    ax.invert_yaxis()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def lif_over_steps(trace: Trace, path: Path) -> Path:
    load = trace.node_load()
    fig, ax = plt.subplots(figsize=(8, 3.2))
    ax.plot(trace.steps, lif(load), lw=1.5)
    ax.set_xlabel("step")
    ax.set_ylabel("LIF = max/mean − 1")
    ax.set_title(f"{trace.scenario}: load-imbalance factor per step")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def placement_map(trace: Trace, path: Path) -> Path | None:
    """Owner of every tile, drawn over the grid (2D grids; a middle slice of 3D ones)."""
    tiling = trace.tiling
    owner = trace.owner_at(int(trace.steps[0]))
    cell_owner = owner[tiling.owner_map()]
    if tiling.ndim == 3:
        cell_owner = cell_owner[:, :, tiling.grid[2] // 2]
    nodes = trace.cluster.nodes
    base = plt.get_cmap("tab20" if nodes > 10 else "tab10")
    cmap = matplotlib.colors.ListedColormap([base(i % base.N) for i in range(nodes)])
    norm = matplotlib.colors.BoundaryNorm(np.arange(nodes + 1) - 0.5, nodes)
    fig, ax = plt.subplots(figsize=(6, 5))
    im = ax.imshow(cell_owner.T, origin="lower", cmap=cmap, norm=norm, interpolation="nearest")
    for a, e in enumerate(tiling.edges[:2]):
        for x in e[1:-1]:
            (ax.axvline if a == 0 else ax.axhline)(x - 0.5, color="k", lw=0.3)
    ax.set_xlabel("x cell")
    ax.set_ylabel("y cell")
    ax.set_title(f"placement: {trace.config.get('run', {}).get('placement', '?')} "
                 f"({tiling.ntiles} tiles on {trace.cluster.nodes} nodes)")
    fig.colorbar(im, ax=ax, label="node", ticks=range(nodes) if nodes <= 20 else None)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def app_of_run(config: dict):
    """The run's app rebuilt from its resolved configuration (``None`` if it cannot be: a
    replay, or an input file no longer there)."""
    from ..config import scenario_from_dict

    try:
        sc = scenario_from_dict(config)
        from ..apps import get_app

        return get_app(sc.app).build(sc.params, sc.run.steps)
    except (ShoalError, KeyError, TypeError):
        return None


def _load(path: Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def app_frames(app, run: Path) -> list[Path]:
    """The app's own picture of the final state (``frame-final.png``) and, for apps without
    particle pictures of their own, of every frame written on the way (``frames/``), all on
    one colour scale: the range over every frame (Vertanen §6.2: per-frame scales mislead)."""
    final = run / "state" / "final.npz"
    if not final.exists():
        return []
    frames = [(run / "frame-final.png", app.frame(_load(final)))]
    if "x" not in frames[0][1]:
        frames += [(p.with_name(p.stem.replace("state", "frame") + ".png"), app.frame(_load(p)))
                   for p in sorted((run / "frames").glob("state-*.npz"))]
    scale = _common_scale([f for _, f in frames])
    paths = []
    for path, frame in frames:
        fig, ax = plt.subplots(figsize=(7, 5))
        fig.colorbar(app.draw(frame, ax, scale), ax=ax)
        fig.tight_layout()
        fig.savefig(path, dpi=100)
        plt.close(fig)
        paths.append(path)
    return paths


def _common_scale(frames: list[dict]) -> tuple[float, float] | None:
    """The range of what the default picture colours by, over every frame."""
    from .drawing import frame_values

    try:
        values = [frame_values(f)[0] for f in frames]
    except ValueError:
        return None
    finite = np.concatenate([v[np.isfinite(v)].ravel() for v in values])
    return (float(finite.min()), float(finite.max())) if finite.size else None


def report_run(run: str | Path) -> list[Path]:
    """Draw every picture of a run folder into it; returns their paths."""
    run = Path(run)
    if not (run / "trace.h5").exists():
        raise ShoalError(f"{run} holds no trace.h5: not a run folder")
    trace = Trace.read(run / "trace.h5")
    paths = [
        load_heatmap(trace, run / "load-heatmap.png"),
        timeline(trace, run / "timeline.png"),
        lif_over_steps(trace, run / "lif.png"),
    ]
    pm = placement_map(trace, run / "placement.png") if trace.tiling.ndim in (2, 3) else None
    if pm:
        paths.append(pm)
    (run / "frames").mkdir(exist_ok=True)
    app = None if trace.predicted else app_of_run(trace.config)
    if app is None:
        return paths
    paths += app_frames(app, run)
    final = run / "state" / "final.npz"
    state = _load(final) if final.exists() else {}
    if {"id", "x", "kind"} <= set(state) and state["x"].shape[1] == 2:
        from .particles import report_particles

        paths += report_particles(run, trace.config, app)
    return paths
