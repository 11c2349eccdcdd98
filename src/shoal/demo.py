"""The main job: the synthetic hot spot under every static placement, side by side."""

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

SCENARIO = "synthetic-hotspot"


def main(steps: int | None = None, out: Path = Path("runs/demo")) -> int:
    console = Console(width=max(Console().width, 100))
    sc = load_scenario(SCENARIO)
    steps = steps or sc.run.steps
    placements = [name for name, p in POLICIES.items() if not p.dynamic]
    console.print(f"[bold]shoal demo[/]: {sc.description}; {steps} steps, grid {sc.params.grid}, "
                  f"{sc.run.nodes} nodes x {sc.run.workers} worker, {sc.run.tiles_per_core} tiles per core")
    rows = []
    columns = (TextColumn("{task.description:<10}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console) as progress:
        bars = {name: progress.add_task(name, total=steps) for name in placements}
        for name in placements:
            shutil.rmtree(out / name, ignore_errors=True)  # the demo's own folders, remade each time
            rec = run_scenario(load_scenario(SCENARIO), steps=steps, placement=name, out=out / name,
                               on_step=lambda k, b=bars[name]: progress.update(b, completed=k + 1))
            report_run(rec.path)
            rows.append(rec.summary)

    s0 = rows[0]
    table = Table(title=f"{SCENARIO}: {s0['tiles']} tiles on {s0['nodes']} nodes")
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
