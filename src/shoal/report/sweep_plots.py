"""Pictures of a sweep: Birdshot's Figures 10, 13 and 14 and SAMPI's Figure 7."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np

from ..graphics.canvas import new_figure, save_figure


def _axes(width_in: float, height_in: float, panels: int = 1):
    """A figure on its own canvas (the caller's matplotlib backend is left alone) and its axes."""
    fig = new_figure(width_in, height_in)
    axes = fig.subplots(1, panels)
    return fig, axes


def step_time_vs_tiles_per_core(rows, path: Path) -> Path:
    """Birdshot Figure 10: predicted step time against tiles per core, one line per policy,
    from a sweep's ``rows`` (its largest node count), drawn to ``path``."""
    fig, ax = _axes(7, 4.2)
    nodes = max(r["nodes"] for r in rows)
    lines = defaultdict(dict)
    for r in rows:
        if r["nodes"] != nodes:
            continue
        key = r["placement"] + (f"/{r['period']}" if r["period"] else "")  # "/adaptive" for the trigger
        tpc = round(r["tiles_per_core"])
        lines[key][tpc] = min(lines[key].get(tpc, np.inf), r["step_time_mean_s"])
    for key, pts in sorted(lines.items()):
        xs = sorted(pts)
        ax.plot(xs, [pts[x] * 1e3 for x in xs], marker="o", label=key)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("tiles per core")
    ax.set_ylabel("predicted step time (ms)")
    ax.set_title(f"Step time vs tiles per core ({nodes} nodes)")
    ax.legend(fontsize=7, ncol=2)
    ax.grid(alpha=0.3)
    return save_figure(fig, path)


def birdshot_seeds(seeds, reference_rows, path: Path) -> Path:
    """Birdshot Figure 13: the distribution of predicted step time over many random placements
    (``seeds``: one step time per seed), the ``reference_rows``' step times marked, drawn to ``path``."""
    fig, ax = _axes(7, 4)
    ax.hist(np.array(seeds) * 1e3, bins=40, color="tab:blue", alpha=0.8)
    for r in reference_rows:
        ax.axvline(r["step_time_mean_s"] * 1e3, ls="--", lw=1, color="k")
        ax.text(r["step_time_mean_s"] * 1e3, ax.get_ylim()[1] * 0.9, r["placement"], rotation=90, fontsize=7)
    ax.set_xlabel("predicted step time (ms)")
    ax.set_ylabel("seeds")
    ax.set_title(f"Birdshot over {len(seeds)} seeds")
    return save_figure(fig, path)


def step_time_over_time(rows, path: Path) -> Path:
    """Birdshot Figure 14: predicted step time over the run, one line per policy (the best of
    a sweep's ``rows`` for each), drawn to ``path``."""
    fig, ax = _axes(8, 4.2)
    best = {}
    for r in rows:
        if r["placement"] not in best or r["makespan_s"] < best[r["placement"]]["makespan_s"]:
            best[r["placement"]] = r
    for name, r in sorted(best.items()):
        ax.plot(np.array(r["step_times"]) * 1e3, lw=1, label=name)
    ax.set_xlabel("step")
    ax.set_ylabel("predicted step time (ms)")
    ax.set_title("Step time over the run (best configuration of each policy)")
    ax.legend(fontsize=7, ncol=2)
    ax.grid(alpha=0.3)
    return save_figure(fig, path)


def makespan_vs_period_and_decomposition(rows, path: Path) -> Path:
    """SAMPI Figure 7: makespan vs balancing period, and vs over-decomposition, from a sweep's
    ``rows`` (its largest node count), drawn to ``path``."""
    nodes = max(r["nodes"] for r in rows)
    rows = [r for r in rows if r["nodes"] == nodes]
    fig, (a, b) = _axes(11, 4, panels=2)
    by = defaultdict(lambda: defaultdict(list))
    adaptive = defaultdict(list)  # the adaptive trigger has no period: a dashed line per policy
    for r in rows:
        if r["period"] == "adaptive":
            adaptive[r["placement"]].append(r["makespan_s"])
        elif r["period"]:
            by[r["placement"]][r["period"]].append(r["makespan_s"])
    for name, pts in sorted(by.items()):
        xs = sorted(pts)
        line, = a.plot(xs, [min(pts[x]) for x in xs], marker="o", label=name)
        if name in adaptive:
            a.axhline(min(adaptive.pop(name)), color=line.get_color(), ls="--", lw=1, label=f"{name} adaptive")
    for name, spans in sorted(adaptive.items()):  # adaptive without fixed periods of the same policy
        a.axhline(min(spans), ls="--", lw=1, label=f"{name} adaptive")
    a.set_xlabel("balancing period (steps)")
    a.set_ylabel("predicted makespan (s)")
    a.set_title("Makespan vs period")
    a.grid(alpha=0.3)
    if a.get_lines():
        a.legend(fontsize=7)
    else:  # only static placements were swept
        a.text(0.5, 0.5, "no dynamic policy in this sweep", ha="center", va="center", transform=a.transAxes)
    by = defaultdict(lambda: defaultdict(list))
    for r in rows:
        by[r["placement"]][round(r["tiles_per_core"])].append(r["makespan_s"])
    for name, pts in sorted(by.items()):
        xs = sorted(pts)
        b.plot(xs, [min(pts[x]) for x in xs], marker="o", label=name)
    b.set_xscale("log", base=2)
    b.set_xlabel("tiles per core")
    b.set_title("Makespan vs over-decomposition")
    b.grid(alpha=0.3)
    b.legend(fontsize=7, ncol=2)
    return save_figure(fig, path)


def draw_sweep(result, out: Path) -> list[Path]:
    """Every figure of a sweep's ``result`` (a ``SweepResult``) into the folder ``out``; returns their paths."""
    out.mkdir(parents=True, exist_ok=True)
    paths = [step_time_vs_tiles_per_core(result.rows, out / "fig10-step-vs-tiles-per-core.png"),
             step_time_over_time(result.rows, out / "fig14-step-time-over-time.png"),
             makespan_vs_period_and_decomposition(result.rows, out / "sampi-fig7-period-and-decomposition.png")]
    if result.seeds:
        refs = [r for r in result.rows if r["placement"] in ("geometric", "sfc", "strips")][:3]
        paths.append(birdshot_seeds(result.seeds, refs, out / "fig13-birdshot-seeds.png"))
    return paths
