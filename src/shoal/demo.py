"""The main job.

``shoal demo`` runs Monaghan's breaking dam (``sph-dam-break``) with Birdshot placement over
4 nodes inside this process, draws frames, an animation, contour views, the per-node load
heatmap and the worker timeline, and says where they are. ``shoal demo --placements`` runs
the synthetic hot spot under every static placement and prints them side by side.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from .config import load_scenario
from .placement import POLICIES
from .report import report_run
from .session import run_scenario

COLUMNS = (TextColumn("{task.description:<12}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())


def dam_break(steps: int | None = None, out: Path = Path("runs/demo")) -> int:
    console = Console(width=max(Console().width, 100))
    sc = load_scenario("sph-dam-break")
    steps = steps or 3000
    folder = out / "sph-dam-break"
    shutil.rmtree(folder, ignore_errors=True)  # the demo's own folder, remade each time
    console.print(f"[bold]shoal demo[/]: {sc.description}; {steps} steps, birdshot placement over "
                  f"{sc.run.nodes} nodes x {sc.run.workers} worker, {sc.run.tiles_per_core} tiles per core")
    with Progress(*COLUMNS, console=console) as progress:
        bar = progress.add_task("simulating", total=steps)
        rec = run_scenario(sc, steps=steps, placement="birdshot", out=folder,
                           on_step=lambda k: progress.update(bar, completed=k + 1))
        progress.add_task("drawing", total=None)
        report_run(rec.path)
    s = rec.summary
    n = len(rec.state()["id"])
    console.print(f"{n} particles, {s['tiles']} tiles, simulated {float(rec.state()['time']):.3f} s in "
                  f"{s['wall_s']:.1f} s of wall time; load-imbalance factor {s['lif_mean']:.3f}, "
                  f"efficiency {s['efficiency']:.2f} ({s['efficiency_basis']})")
    for name, what in [("animation.gif", "animation"), ("frames", "frames (PNG and VTK for ParaView)"),
                       ("contours-final.png", "density / pressure / speed contours"),
                       ("surge-front.png", "surge front against Martin & Moyce (1952)"),
                       ("load-heatmap.png", "per-node load over steps"), ("timeline.png", "tasks per worker"),
                       ("trace.h5", "the trace")]:
        console.print(f"  {what:<45} {(folder / name).resolve()}")
    return 0


def placements(steps: int | None = None, out: Path = Path("runs/demo")) -> int:
    """The synthetic hot spot under every static placement, side by side."""
    scenario = "synthetic-hotspot"
    console = Console(width=max(Console().width, 100))
    sc = load_scenario(scenario)
    steps = steps or sc.run.steps
    names = [name for name, p in POLICIES.items() if not p.dynamic]
    console.print(f"[bold]shoal demo --placements[/]: {sc.description}; {steps} steps, grid {sc.params.grid}, "
                  f"{sc.run.nodes} nodes x {sc.run.workers} worker, {sc.run.tiles_per_core} tiles per core")
    rows = []
    with Progress(*COLUMNS, console=console) as progress:
        bars = {name: progress.add_task(name, total=steps) for name in names}
        for name in names:
            shutil.rmtree(out / name, ignore_errors=True)
            rec = run_scenario(load_scenario(scenario), steps=steps, placement=name, out=out / name,
                               on_step=lambda k, b=bars[name]: progress.update(b, completed=k + 1))
            report_run(rec.path)
            rows.append(rec.summary)
    s0 = rows[0]
    table = Table(title=f"{scenario}: {s0['tiles']} tiles on {s0['nodes']} nodes")
    for col in ("placement", "step wall (ms)", "step model (ms)", "LIF mean", "LIF max", "efficiency"):
        table.add_column(col, justify="right" if col != "placement" else "left")
    best = min(r["step_time_model_s"] for r in rows)
    for r in rows:
        mark = " *" if r["step_time_model_s"] == best else ""
        table.add_row(r["placement"] + mark, f"{r['step_time_mean_s'] * 1e3:.2f}",
                      f"{r['step_time_model_s'] * 1e3:.2f}", f"{r['lif_mean']:.3f}",
                      f"{r['lif_max']:.3f}", f"{r['efficiency']:.2f}")
    console.print(table)
    console.print("step model = mean over steps of the busiest node's CPU time per core "
                  "(what the step would take with no waiting); * marks the fastest; efficiency is "
                  f"busy core time over {'modelled' if s0['oversubscribed'] else 'wall'} time x cores.")
    if s0["oversubscribed"]:
        console.print(f"[yellow]oversubscribed[/]: {sum(s0['cores'])} worker threads on fewer cores, so wall "
                      "times are not meaningful here; LIF and efficiency come from measured task costs.")
    console.print(f"run folders (trace.h5, summary.json, load-heatmap.png, timeline.png, placement.png, "
                  f"frames/): {out.resolve()}/<placement>")
    return 0
