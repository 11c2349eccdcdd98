"""``shoal sampi``: the SAMPI paper's workflow on one scenario (sampi §II-C, §IV-B, §V).

1. record a fine run (many x-y column tiles) on this machine;
2. aggregate its trace to coarser tilings that nest in it, checked as Figure 3 does: a coarse
   run made for real against the aggregated fine trace, tile by tile and step by step, in work
   units (exact without zero-skipping) and in measured seconds (an error stated);
3. replay GreedyLB (``greedy``), RefineLB (``refine``) and no balancing (``sfc``, the static
   start) over balancing periods and tiles per core on a modeled cluster (Figure 7), with the
   per-core load heatmaps and the average load over time of Figure 6 at one setting;
4. optionally, real runs that fit this machine (2 ranks under ``mpiexec``, 1 node of 2
   threads) replayed on this machine's model: the makespan error and whether the balancers'
   ranking held.

The sweep and the validation's predictions go through :func:`shoal.replay.sweep.sweep` and
:func:`shoal.validate.predict`; everything lands in one folder as markdown and JSON
tables and PNG figures.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .config import balance_table, load_scenario
from .errors import ShoalError
from .files import write_json, write_text
from .graphics.canvas import new_figure, save_figure
from .replay.calibrate import calibrate, machine_model
from .replay.machine import MachineModel
from .replay.run import ReplayConfig, coarsening_for, lock_line, modelled, replay
from .replay.sweep import sweep
from .report.loads import load_heatmap
from .session import open_run, run_scenario
from .tiling import Tiling
from .trace import Trace, aggregate
from .validate import predict

BALANCERS = ("sfc", "greedy", "refine")  # none (the static start), GreedyLB, RefineLB
LABEL = {"sfc": "none", "greedy": "GreedyLB", "refine": "RefineLB"}


@dataclass
class Workflow:
    """What ``shoal sampi`` runs.

    Parameters
    ----------
    scenario : str
        A scenario's name or TOML file (an app whose tiles are x-y columns: seismic).
    fine : tuple of int
        Tiles along x and y of the recorded fine run.
    coarse : tuple of int
        Tiles along x and y of the real coarse run checked against aggregation (each must
        divide ``fine``'s).
    sets : list of str
        ``section.key=value`` scenario overrides for every run.
    steps : int, optional
        Steps of every run (default: the scenario's).
    periods, tiles_per_core : list of int
        The sweep's balancing periods and over-decomposition levels.
    nodes, cores : int
        The modeled cluster of the sweep.
    fig6 : tuple of int
        (tiles per core, period) of Figure 6's heatmaps and load curves.
    validate : bool
        Also record real runs here and compare them with their replays.
    repeats : int
        Runs of each validation case.
    validate_steps : int, optional
        Steps of the validation runs (default: ``steps``).
    jobs : int, optional
        Processes of the sweep (default: one per CPU).
    """

    scenario: str
    fine: tuple[int, int] = (16, 48)
    coarse: tuple[int, int] = (4, 4)
    sets: list[str] = field(default_factory=list)
    steps: int | None = None
    periods: list[int] = field(default_factory=lambda: [10, 20, 30, 40])
    tiles_per_core: list[int] = field(default_factory=lambda: [2, 3, 4, 8, 16])
    nodes: int = 16
    cores: int = 1
    fig6: tuple[int, int] = (4, 20)
    validate: bool = False
    repeats: int = 5
    validate_steps: int | None = None
    jobs: int | None = None

    def check(self) -> None:
        """Refuse, in one line, a workflow that cannot run: called before anything is written.

        Raises
        ------
        ShoalError
            For a scenario that is not seismic or an override it does not take, a fine tiling
            that does not cut its grid into whole columns, a coarse one not dividing it, a
            non-positive count (steps, periods, tiles per core, nodes, cores, repeats, jobs),
            more tiles per core on the modeled cluster than the fine run has tiles, Figure 6's
            setting outside the sweep, or ``--validate`` without ``mpiexec``.
        """
        counts = {"--steps": [self.steps], "--validate-steps": [self.validate_steps], "--jobs": [self.jobs],
                  "--periods": self.periods, "--tiles-per-core": self.tiles_per_core, "--nodes": [self.nodes],
                  "--cores": [self.cores], "--repeats": [self.repeats]}
        for flag, values in counts.items():
            bad = [v for v in values if v is not None and v < 1]
            if bad:
                raise ShoalError(f"{flag} {bad[0]}: must be at least 1")
        (fx, fy), (cx, cy) = self.fine, self.coarse
        if fx % cx or fy % cy:
            raise ShoalError(f"--coarse {cx}x{cy} must divide --fine {fx}x{fy} along each axis")
        if self.fig6[0] not in self.tiles_per_core or self.fig6[1] not in self.periods:
            raise ShoalError(f"Figure 6's {self.fig6[0]} tiles per core and period {self.fig6[1]} must be among the "
                             "sweep's --tiles-per-core and --periods")
        cores = self.nodes * self.cores
        if max(self.tiles_per_core) * cores > fx * fy:
            raise ShoalError(f"{max(self.tiles_per_core)} tiles per core on {self.nodes} x {self.cores} cores need "
                             f"{max(self.tiles_per_core) * cores} tiles; the fine run has {fx} x {fy} = {fx * fy}: "
                             "record a finer --fine, or model fewer --nodes or --cores")
        sc = load_scenario(self.scenario)
        if sc.app != "seismic":
            raise ShoalError(f"shoal sampi tiles x-y columns of a seismic scenario; {sc.name!r} is a {sc.app} one")
        column_shape(self.scenario, self.sets, self.fine)  # checks the overrides too
        if self.validate:
            mpiexec()


# ----- 1. the fine run -------------------------------------------------------------------------
def column_shape(scenario: str, sets: list[str], counts: tuple[int, int]) -> list[int]:
    """Columns per tile along x and y that cut the scenario's grid into ``counts`` tiles (the
    last tile of an axis takes what is left); a ShoalError when no whole number of columns does."""
    sc = load_scenario(scenario)
    sc.override(list(sets))
    grid = tuple(int(n) for n in sc.params.shape[:2])
    shape = [math.ceil(n / c) for n, c in zip(grid, counts, strict=True)]
    got = tuple(math.ceil(n / s) for n, s in zip(grid, shape, strict=True))
    if got != tuple(counts):
        raise ShoalError(f"{counts[0]} x {counts[1]} tiles of whole, equal columns do not cut the {grid[0]} x "
                         f"{grid[1]} columns of {sc.name} (they make {got[0]} x {got[1]}): change app.scale or --fine")
    return shape


def record(scenario: str, shape: list[int], sets: list[str], steps: int | None, out: Path,
           on_step: Callable[[int], None] | None = None):
    """A real run of column tiles of ``shape`` (columns along x and y) on this machine (one
    node, its cores), written to ``out``; returns its :class:`~shoal.session.RunRecord` (a
    finished folder is reused as it is)."""
    if (out / "summary.json").exists():
        return open_run(out)
    return run_scenario(scenario, steps=steps, nodes=1, workers=os.cpu_count() or 1, placement="sfc", period=0,
                        set=["run.frame_every=0", *sets, f"run.tile_shape={list(shape)}"], out=out, on_step=on_step)


# ----- 2. aggregation, as Figure 3 -----------------------------------------------------------------
def per_tile_step(trace: Trace, column: str) -> np.ndarray:
    """``column`` (``cost`` or ``work``) summed over phases: shape (steps, tiles)."""
    steps = trace.steps
    out = np.zeros((len(steps), trace.tiling.ntiles))
    np.add.at(out, (np.searchsorted(steps, trace.tasks["step"]), trace.tasks["tile"]), trace.tasks[column])
    return out


def priced(trace: Trace, like: Trace) -> Trace:
    """``trace`` with its tasks priced as the replay prices them: by the machine model the run
    of ``like`` fitted (work x rate + a fixed cost per task, per phase); as measured without one."""
    if like.machine is None:
        return trace
    return modelled(trace, MachineModel.from_dict(like.machine, "the fine run's machine model"))


def check_aggregation(fine: Trace, coarse: Trace) -> dict:
    """The aggregated fine trace against a real coarse run of the same steps, per tile and step.

    Returns
    -------
    dict
        ``tiles``, ``steps``, ``work_equal`` (every tile's work in every step identical),
        ``work_excess`` (the coarse run's work over the aggregated one's, minus 1: zero-skipping
        by blocks straddling fine cuts makes them differ) and ``work_tile_steps_differing``;
        for the measured seconds summed (``measured_*``) and for the aggregated work priced by
        the fine run's machine model, as the replay prices it (``model_*``): ``*_error`` (sum of
        |aggregated - coarse| over the coarse total), ``*_ratio`` (aggregated total over the
        coarse total) and ``*_correlation`` (of the per-step totals).
    """
    agg = aggregate(fine, coarse.tiling)
    wa, wc = per_tile_step(agg, "work"), per_tile_step(coarse, "work")
    if wa.shape != wc.shape:
        raise ShoalError(f"the coarse run has {wc.shape[0]} steps of {wc.shape[1]} tiles, the aggregated fine one "
                         f"{wa.shape[0]} of {wa.shape[1]}")
    out = {"tiles": int(coarse.tiling.ntiles), "steps": int(wc.shape[0]), "work_equal": bool(np.array_equal(wa, wc)),
           "work_excess": float(wc.sum() / wa.sum() - 1), "work_tile_steps_differing": int((wa != wc).sum())}
    cc = per_tile_step(coarse, "cost")
    for name, trace in (("measured", agg), ("model", priced(agg, fine))):
        ca = per_tile_step(trace, "cost")
        sa, sc = ca.sum(axis=1), cc.sum(axis=1)
        out[f"{name}_error"] = float(np.abs(ca - cc).sum() / cc.sum())
        out[f"{name}_ratio"] = float(ca.sum() / cc.sum())
        out[f"{name}_correlation"] = float(np.corrcoef(sa, sc)[0, 1]) if sa.std() > 0 and sc.std() > 0 else 1.0
    return out


def figure3(fine: Trace, coarse: Trace, path: Path) -> Path:
    """Figure 3: seconds per step of every coarse tile: measured in the coarse run, the fine
    run's measured seconds aggregated, and its aggregated work priced as the replay prices it.
    Each panel's scale stops at 1.2 times its 99.5th percentile (a rare stall would flatten the rest)."""
    agg = aggregate(fine, coarse.tiling)
    panels = ((per_tile_step(coarse, "cost"), f"coarse run ({coarse.tiling.ntiles} tiles), measured"),
              (per_tile_step(agg, "cost"), f"aggregated from {fine.tiling.ntiles} tiles, measured"),
              (per_tile_step(priced(agg, fine), "cost"), "aggregated, priced by the machine model"))
    fig = new_figure(14, 4)
    axes = fig.subplots(1, 3)
    for ax, (data, title) in zip(axes, panels, strict=True):
        for t in range(data.shape[1]):
            ax.plot(coarse.steps, data[:, t] * 1e3, lw=0.8)
        ax.set_ylim(0, 1.2e3 * float(np.percentile(data, 99.5)) or 1.0)
        ax.set(title=title, xlabel="step")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("CPU ms per step (one line per coarse tile)")
    return save_figure(fig, path)


def levels(fine: Tiling, tiles_per_core: list[int], cores: int) -> list[dict]:
    """The nested coarse tilings the replay aggregates to for each level of over-decomposition
    (:func:`shoal.replay.run.coarsening_for`): tiles per axis and the tiles per core they give."""
    out = []
    for tpc in tiles_per_core:
        t = coarsening_for(fine, tpc * cores)
        out.append({"tiles_per_core": tpc, "counts": list(t.counts), "tiles": int(t.ntiles),
                    "actual_tiles_per_core": t.ntiles / cores})
    return out


# ----- 3. the sweep, Figures 6 and 7 ---------------------------------------------------------------
def level_traces(fine: Trace, tiles_per_core: list[int], cores: int, out: Path) -> dict[int, Path]:
    """Step 2 of the paper's workflow: the fine trace aggregated to the nested tiling of each
    level of over-decomposition on ``cores`` cores, written to ``out/level-K.h5``. Replaying
    these (rather than letting the replay aggregate) prices each coarse task once by the
    machine model, as a coarse run pays its executor once per task."""
    out.mkdir(parents=True, exist_ok=True)
    return {tpc: aggregate(fine, coarsening_for(fine.tiling, tpc * cores)).write(out / f"level-{tpc}.h5")
            for tpc in tiles_per_core}


def balancer_sweep(levels: dict[int, Path], wf: Workflow, on_done=None) -> list[dict]:
    """Every (balancer, period, tiles per core) replay on ``wf.nodes`` x ``wf.cores``
    (:func:`shoal.replay.sweep.sweep` over each level's trace of :func:`level_traces`), none
    once per level; rows sorted by makespan, each with its ``case`` (tiles per core the level's)."""
    rows, done = [], 0
    for tpc, path in levels.items():
        trace = Trace.read(path)
        model = {"balance": balance_table(trace.config.get("balance", {})), "gil": "none"}
        result = sweep(path, list(BALANCERS), [0], wf.periods, [wf.nodes], wf.cores, jobs=wf.jobs, model=model,
                       on_done=None if on_done is None else lambda k, d=done: on_done(d + k))
        for r in result.rows:
            r["case"]["tiles_per_core"] = tpc
        rows += result.rows
        done += len(result.rows)
    return sorted(rows, key=lambda r: r["makespan_s"])


def sweep_grid(rows: list[dict]) -> dict[tuple[str, int, int], float]:
    """Makespan (s) by (balancer, period, requested tiles per core); none has period 0."""
    return {(r["placement"], int(r["period"] or 0), int(r["case"]["tiles_per_core"])): r["makespan_s"] for r in rows}


def sweep_markdown(rows: list[dict], periods: list[int], tiles_per_core: list[int]) -> str:
    """Figure 7 as a table: a row per balancer and period, a column per tiles per core
    (predicted makespan in seconds), the best cell of each balancer in bold."""
    grid = sweep_grid(rows)
    head = "| balancer | period | " + " | ".join(f"{t} tiles/core" for t in tiles_per_core) + " |"
    lines = [head, "|" + "---|" * (2 + len(tiles_per_core))]
    for name in BALANCERS:
        keys = [(name, 0)] if name == "sfc" else [(name, p) for p in periods]
        best = min(v for (n, _, _), v in grid.items() if n == name)
        for n, p in keys:
            cells = [grid[(n, p, t)] for t in tiles_per_core]
            lines.append(f"| {LABEL[n]} | {p or '-'} | " + " | ".join(
                f"**{v:.3f}**" if v == best else f"{v:.3f}" for v in cells) + " |")
    return "\n".join(lines)


def figure7(rows: list[dict], tiles_per_core: list[int], periods: list[int], at: tuple[int, int], path: Path) -> Path:
    """Figure 7: makespan against the period at ``at[0]`` tiles per core (left) and against
    tiles per core at period ``at[1]`` (right), one line per balancer."""
    grid = sweep_grid(rows)
    fig = new_figure(11, 4)
    left, right = fig.subplots(1, 2, sharey=True)
    for name in BALANCERS:
        ys = [grid[(name, 0 if name == "sfc" else p, at[0])] for p in periods]
        left.plot(periods, ys, marker="o", label=LABEL[name], ls="--" if name == "sfc" else "-")
        ys = [grid[(name, 0 if name == "sfc" else at[1], t)] for t in tiles_per_core]
        right.plot(tiles_per_core, ys, marker="o", label=LABEL[name], ls="--" if name == "sfc" else "-")
    left.set(xlabel="balancing period (steps)", ylabel="predicted makespan (s)", xticks=periods,
             title=f"{at[0]} tiles per core")
    right.set(xlabel="tiles per core", xticks=tiles_per_core, title=f"balancing every {at[1]} steps")
    for ax in (left, right):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    return save_figure(fig, path)


def figure6(trace: Trace, wf: Workflow, out: Path) -> list[Path]:
    """Figure 6 at ``wf.fig6`` (tiles per core, period) from that level's ``trace``: each
    balancer's predicted per-core load heatmap, and the average load (busy fraction of the
    cores) over modeled time."""
    tpc, period = wf.fig6
    balance = balance_table(trace.config.get("balance", {}))
    curves = new_figure(9, 4)
    ax = curves.add_subplot()
    paths = []
    for name in BALANCERS:
        cfg = ReplayConfig(nodes=wf.nodes, cores=wf.cores, placement=name, period=0 if name == "sfc" else period,
                           gil="none", balance=balance)
        result = replay(trace, cfg)
        t = result.trace
        paths.append(save_figure(load_heatmap(t, absolute=True), out / f"fig6-heatmap-{LABEL[name]}.png"))
        ends = np.asarray(t.step_end)
        spans = np.diff(np.concatenate([[0.0], ends]))
        load = t.node_load().mean(axis=1) / np.where(spans > 0, spans, np.inf)
        line, = ax.plot(ends, load, lw=1, label=f"{LABEL[name]} (makespan {result.makespan:.3g} s)")
        ax.axvline(result.makespan, color=line.get_color(), ls=":", lw=1)
    ax.set(xlabel="modeled time (s)", ylabel="average load (busy fraction of the cores)", ylim=(0, 1.05),
           title=f"{wf.nodes} x {wf.cores} cores, {tpc} tiles per core, balancing every {period} steps")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    paths.append(save_figure(curves, out / "fig6-average-load.png"))
    return paths


def ranking(rows: list[dict]) -> dict:
    """The balancers' best makespans (over periods and tiles per core) in order, with where each
    was best."""
    best = {}
    for r in rows:
        if r["placement"] not in best or r["makespan_s"] < best[r["placement"]]["makespan_s"]:
            best[r["placement"]] = r
    order = sorted(best, key=lambda n: best[n]["makespan_s"])
    return {"order": [LABEL[n] for n in order],
            "best": {LABEL[n]: {"makespan_s": best[n]["makespan_s"], "period": best[n]["period"] or None,
                                "tiles_per_core": best[n]["case"]["tiles_per_core"]} for n in order}}


# ----- 4. validation against real runs ---------------------------------------------------------------
def mpiexec() -> str:
    """The ``mpiexec`` of the environment shoal runs in, else the one on PATH."""
    import shutil

    beside = Path(sys.executable).parent / "mpiexec"
    found = str(beside) if beside.exists() else shutil.which("mpiexec")
    if not found:
        raise ShoalError("--validate needs mpiexec (pip install shoal[mpi])")
    return found


def _run_mpi(scenario: str, ranks: int, args: list[str], out: Path):
    """``shoal run`` on ``ranks`` MPI ranks (one worker each); its run record."""
    from .runtime.launch import ONE_HOST_OPEN_MPI

    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1", **ONE_HOST_OPEN_MPI}
    cmd = [mpiexec(), "--oversubscribe", "-n", str(ranks), sys.executable, "-m", "shoal", "-q", "run", scenario,
           "--workers", "1", "--out", str(out), *args]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise ShoalError(f"mpiexec -n {ranks} shoal run failed: {(done.stderr or done.stdout).strip()[-300:]}")
    return open_run(out)


def validation_cases(wf: Workflow) -> list[tuple[int, int, str, int, int]]:
    """(nodes, workers, balancer, period, tiles per core) of every real run: 2 x 1 (MPI ranks)
    and 1 x 2 (threads), tiles per core 2, 4, 8, none once and each balancer every 10 and 20 steps."""
    out = []
    for nodes, workers in ((2, 1), (1, 2)):
        for tpc in (2, 4, 8):
            out.append((nodes, workers, "sfc", 0, tpc))
            out += [(nodes, workers, b, p, tpc) for b in ("greedy", "refine") for p in (10, 20)]
    return out


def validate_real(wf: Workflow, out: Path, say: Callable[[str], None]) -> list[dict]:
    """Record every validation case ``wf.repeats`` times and replay each run on this machine's
    model (calibrated once per cluster shape): medians of measured and predicted makespans."""
    steps = wf.validate_steps or wf.steps
    sets = ["run.frame_every=0", *wf.sets]
    rows = []
    saved = out / "calibration.json"  # a workflow started again keeps the model its runs were compared with
    cals = {tuple(map(int, k.split("x"))): v for k, v in json.loads(saved.read_text()).items()} \
        if saved.exists() else {}
    for k, (nodes, workers, name, period, tpc) in enumerate(validation_cases(wf)):
        if (nodes, workers) not in cals:
            say(f"calibrating the executor for {nodes} x {workers}")
            cals[(nodes, workers)] = calibrate(nodes=nodes, workers=workers)
        cal = cals[(nodes, workers)]
        label = f"{LABEL[name]}" + (f"/{period}" if period else "")
        say(f"validation {k + 1}/{len(validation_cases(wf))}: {nodes} x {workers}, {tpc} tiles per core, {label}")
        measured, predicted = [], []
        for r in range(wf.repeats):
            folder = out / f"{nodes}x{workers}-tpc{tpc}-{name}-{period}-{r}"
            if (folder / "summary.json").exists():
                rec = open_run(folder)
            elif nodes > 1:
                args = ["--tiles-per-core", str(tpc), "--placement", name, "--period", str(period),
                        *[a for s in sets for a in ("--set", s)]] + (["--steps", str(steps)] if steps else [])
                rec = _run_mpi(wf.scenario, nodes, args, folder)
            else:
                rec = run_scenario(wf.scenario, steps=steps, tiles_per_core=tpc, nodes=nodes, workers=workers,
                                   placement=name, period=period, set=sets, out=folder)
            predicted.append(_predict(rec.trace, nodes, workers, name, period, cal))
            measured.append(rec.summary["wall_s"])
        m, p = float(np.median(measured)), float(np.median(predicted))
        rows.append({"cluster": f"{nodes}x{workers}", "nodes": nodes, "workers": workers, "balancer": LABEL[name],
                     "period": period, "tiles_per_core": tpc, "measured_s": m, "predicted_s": p, "error": p / m - 1,
                     "measured_spread": float(np.ptp(measured) / m), "predicted_spread": float(np.ptp(predicted) / p),
                     "measured_runs_s": measured, "predicted_runs_s": predicted})
    write_json(saved, {f"{n}x{w}": c for (n, w), c in cals.items()})
    return rows


def _predict(trace: Trace, nodes: int, workers: int, name: str, period: int, cal: dict) -> float:
    """The replay's makespan of a validation run: :func:`shoal.validate.predict` for
    threads in one process; for MPI ranks one interpreter lock per rank and the network and
    message CPU time the run measured."""
    if nodes == 1:
        return predict(trace, nodes, workers, name, period, cal)
    cfg = ReplayConfig(nodes=nodes, cores=workers, placement=name, period=period, network=trace.cluster.network,
                       gil="process", **machine_model(cal))
    return replay(trace, cfg).makespan


def ranking_held(rows: list[dict]) -> list[dict]:
    """Per (cluster, tiles per core, period): whether the predictions order the balancers as
    the measurements do. Measured makespans closer than their runs scatter (at least 1%) are a
    tie, which any predicted order matches; ``separated`` counts the pairs the measurements do
    order, ``agreed`` those of them the predictions order the same way."""
    out = []
    groups = sorted({(r["cluster"], r["tiles_per_core"], p) for r in rows for p in (10, 20)})
    for cluster, tpc, period in groups:
        peers = [r for r in rows if r["cluster"] == cluster and r["tiles_per_core"] == tpc
                 and r["period"] in (0, period)]
        separated = [(a, b) for a in peers for b in peers
                     if a["measured_s"] < b["measured_s"] * (1 - max(a["measured_spread"], b["measured_spread"], 0.01))]
        agreed = sum(a["predicted_s"] < b["predicted_s"] for a, b in separated)
        orders = [" < ".join(r["balancer"] for r in sorted(peers, key=lambda r, k=key: r[k]))
                  for key in ("measured_s", "predicted_s")]
        out.append({"cluster": cluster, "tiles_per_core": tpc, "period": period, "measured_order": orders[0],
                    "predicted_order": orders[1], "separated": len(separated), "agreed": int(agreed),
                    "held": agreed == len(separated)})
    return out


def validation_markdown(rows: list[dict], held: list[dict]) -> str:
    """The validation's two tables: every case, then the ranking per group."""
    lines = ["| cluster | tiles/core | balancer | period | predicted (s) | measured (s) | error |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['cluster']} | {r['tiles_per_core']} | {r['balancer']} | {r['period'] or '-'} | "
                     f"{r['predicted_s']:.3f} ±{r['predicted_spread']:.0%} | {r['measured_s']:.3f} "
                     f"±{r['measured_spread']:.0%} | {r['error']:+.1%} |")
    lines += ["", "| cluster | tiles/core | period | measured order | predicted order | pairs the runs separate: "
              "predicted alike | ranking held |", "|---|---|---|---|---|---|---|"]
    for h in held:
        lines.append(f"| {h['cluster']} | {h['tiles_per_core']} | {h['period']} | {h['measured_order']} | "
                     f"{h['predicted_order']} | {h['agreed']} of {h['separated']} | {'yes' if h['held'] else 'no'} |")
    return "\n".join(lines)


# ----- the whole workflow --------------------------------------------------------------------------
def run_one(wf: Workflow, out: Path, say: Callable[[str], None]) -> dict:
    """Steps 1-3 (and 4 with ``wf.validate``) into ``out``; returns what ``results.json`` holds."""
    wf.check()
    out.mkdir(parents=True, exist_ok=True)
    fx, fy = wf.fine
    shape = column_shape(wf.scenario, wf.sets, wf.fine)
    say(f"1. recording the fine run: {fx} x {fy} tiles of {shape[0]} x {shape[1]} columns")
    fine_rec = record(wf.scenario, shape, wf.sets, wf.steps, out / "fine", _progress(say, "fine"))
    fine = fine_rec.trace
    # Coarse tiles are whole numbers of fine ones, so that their cuts are the fine run's.
    coarse_shape = [s * f // c for s, f, c in zip(shape, wf.fine, wf.coarse, strict=True)]
    say(f"2. recording the coarse run: {wf.coarse[0]} x {wf.coarse[1]} tiles of {coarse_shape[0]} x "
        f"{coarse_shape[1]} columns")
    coarse = record(wf.scenario, coarse_shape, wf.sets, wf.steps, out / "coarse", _progress(say, "coarse")).trace
    fine.tiling.fine_to_coarse(coarse.tiling)  # a coarse tiling that does not nest is one line
    check = check_aggregation(fine, coarse)
    figure3(fine, coarse, out / "fig3-aggregation.png")
    lv = levels(fine.tiling, wf.tiles_per_core, wf.nodes * wf.cores)
    say(f"3. sweeping {', '.join(LABEL[b] for b in BALANCERS)} on {wf.nodes} x {wf.cores} cores")
    total = len(wf.tiles_per_core) * (1 + 2 * len(wf.periods))
    traces = level_traces(fine, wf.tiles_per_core, wf.nodes * wf.cores, out / "levels")
    rows = balancer_sweep(traces, wf,
                          on_done=lambda k: say(f"   replay {k + 1}/{total}") if (k + 1) % 5 == 0 else None)
    figure7(rows, wf.tiles_per_core, wf.periods, wf.fig6, out / "fig7-period-and-decomposition.png")
    figure6(Trace.read(traces[wf.fig6[0]]), wf, out)
    result = {"scenario": wf.scenario, "sets": wf.sets, "fine": list(fine.tiling.counts),
              "coarse": list(coarse.tiling.counts), "grid": list(fine.tiling.grid), "steps": int(len(fine.steps)),
              "aggregation": check, "levels": lv, "ranking": ranking(rows),
              "sweep": [{k: r[k] for k in ("placement", "period", "nodes", "makespan_s", "step_time_mean_s",
                                           "lif_mean", "idle_fraction", "migrated_bytes")}
                        | {"tiles_per_core": r["case"]["tiles_per_core"]} for r in rows]}
    md = [f"# SAMPI workflow: {wf.scenario} {' '.join(wf.sets)}", "",
          f"Fine run: {fx} x {fy} tiles of a {fine.tiling.grid[0]} x {fine.tiling.grid[1]}-column grid, "
          f"{result['steps']} steps.", "", "## Aggregation (Figure 3)", "", aggregation_markdown(check), "",
          "## Predicted makespan (s), " + f"{wf.nodes} x {wf.cores} cores (Figure 7; {lock_line(['none'])}, "
          "as the paper's compiled code)", "",
          sweep_markdown(rows, wf.periods, wf.tiles_per_core), "",
          "Best: " + ", ".join(f"{n} {b['makespan_s']:.3f} s (period {b['period'] or '-'}, "
                               f"{b['tiles_per_core']} tiles/core)" for n, b in result["ranking"]["best"].items())]
    if wf.validate:
        say("4. validating against real runs on this machine")
        vrows = validate_real(wf, out / "validate", say)
        held = ranking_held(vrows)
        result["validation"] = {"rows": vrows, "ranking": held}
        md += ["", f"## Validation: real runs here against their replays ({lock_line(['process', 'shared'])} "
               "as modeled: ranks, threads)", "",
               validation_markdown(vrows, held)]
    write_json(out / "results.json", result)
    write_text(out / "results.md", "\n".join(md) + "\n")
    return result


def aggregation_markdown(check: dict) -> str:
    """The aggregation check as a table: work, then seconds measured and as the replay prices them."""
    lines = [f"Work (cell updates) per coarse tile and step: {'identical' if check['work_equal'] else 'not identical'}"
             f" ({check['work_tile_steps_differing']} of {check['tiles'] * check['steps']} tile-steps differ; "
             f"coarse / aggregated - 1 = {check['work_excess']:+.2%}).", "",
             "| aggregated seconds | sum abs error / coarse total | aggregated / coarse total | per-step correlation |",
             "|---|---|---|---|"]
    for name, label in (("measured", "measured in the fine run"), ("model", "priced by its machine model")):
        lines.append(f"| {label} | {check[name + '_error']:.1%} | {check[name + '_ratio']:.3f} | "
                     f"{check[name + '_correlation']:.3f} |")
    return "\n".join(lines)


def run_workflow(wf: Workflow, out: Path, skip_zero: str = "scenario",
                 say: Callable[[str], None] = lambda s: None) -> dict:
    """The workflow into ``out``; with ``skip_zero`` ``"both"``, once with ``app.skip_zero`` true
    (``out/skip-on``, where the validation runs if asked) and once false (``out/skip-off``),
    and a table of how the balancers' ranking changes.

    Parameters
    ----------
    wf : Workflow
        What to run.
    out : Path
        The output folder (made if needed; finished runs in it are reused).
    skip_zero : str
        ``"scenario"`` (as the scenario says), ``"true"``, ``"false"`` or ``"both"``.
    say : callable
        Called with each progress line.

    Returns
    -------
    dict
        ``results.json``'s content (``{"skip-on": ..., "skip-off": ...}`` for both).
    """
    if skip_zero not in ("scenario", "true", "false", "both"):
        raise ShoalError(f"--skip-zero must be scenario, true, false or both, got {skip_zero!r}")
    if skip_zero != "both":
        sets = wf.sets + ([f"app.skip_zero={skip_zero}"] if skip_zero != "scenario" else [])
        return run_one(Workflow(**{**wf.__dict__, "sets": sets}), out, say)
    variants = [(flag, name, Workflow(**{**wf.__dict__, "sets": [*wf.sets, f"app.skip_zero={flag}"],
                                         "validate": wf.validate and flag == "true"}))
                for flag, name in (("true", "skip-on"), ("false", "skip-off"))]
    for _, _, one in variants:
        one.check()  # both, before the first writes anything
    results = {}
    for flag, name, one in variants:
        say(f"== app.skip_zero = {flag}")
        results[name] = run_one(one, out / name, say)
    write_json(out / "results.json", results)
    write_text(out / "results.md", skip_markdown(results) + "\n")
    return results


def skip_markdown(results: dict) -> str:
    """How the balancers' ranking and best settings change with zero-skipping on and off."""
    lines = ["| app.skip_zero | ranking (best makespan first) | " + " | ".join(LABEL[b] for b in BALANCERS) + " |",
             "|---|---|" + "---|" * len(BALANCERS)]
    for name, r in results.items():
        best = r["ranking"]["best"]
        cells = [f"{best[LABEL[b]]['makespan_s']:.3f} s (p {best[LABEL[b]]['period'] or '-'}, "
                 f"{best[LABEL[b]]['tiles_per_core']} t/c)" for b in BALANCERS]
        lines.append(f"| {'true' if name == 'skip-on' else 'false'} | {' < '.join(r['ranking']['order'])} | "
                     + " | ".join(cells) + " |")
    return "\n".join(lines)


def _progress(say: Callable[[str], None], what: str) -> Callable[[int], None]:
    """A step callback saying every 50th step."""
    return lambda k: say(f"   {what} run: step {k + 1}") if (k + 1) % 50 == 0 else None


def parse_pair(text: str) -> tuple[int, int]:
    """``NXxNY`` as two positive integers."""
    try:
        a, b = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise ShoalError(f"expected NXxNY (e.g. 16x48), got {text!r}") from None
    if a < 1 or b < 1:
        raise ShoalError(f"tile counts must be positive, got {text!r}")
    return a, b

