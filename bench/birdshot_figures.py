"""The Birdshot paper's Figs. 10-13 and its Eq. (2), reproduced by replaying recorded traces.

Two cores cannot show how tiles balance on 64 or 576 cores in real time; a trace of a run can
be replayed on a modeled cluster (``shoal.replay.replay``). Every figure records the runs it
needs (``shoal run SCENARIO --executor native``, one process, 1 node x 2 workers, frames off;
into a temporary folder, or into ``--keep DIR`` where a run already there is reused), or takes
traces given with ``--trace`` / ``--proxy``, replays them, prints the numbers, draws a PNG
(``--out DIR``, default the current folder) and records its rows (``--json FILE``).

Three models of the executor price the replays (tasks always cost the fitted rate of the
trace's own machine model times their work; no interpreter lock, as a compiled runtime):

- ``recorded``: the trace's own per-task cost (the fitted fixed cost of every phase, the
  executor's measured dispatch time and the time an idle core takes to wake for a ready task);
- ``charm``: a Charm++-like runtime: 1 us a task (``task_overhead_s``), no fixed cost per
  phase and no wake-up time;
- ``charm-free-net``: ``charm`` on a network whose messages cost nothing: what balance alone
  gains (tiles of a few hundred cells send ~100k halo messages a step, which the default
  10 GbE model, 1 us of interface time each, charges).

The figures (``--figure``; each runs alone):

- ``12``: the FLIP two-way dam and sphere drop (and, with ``--scenes``, the Lassen plane),
  replayed on 8 nodes x 8 cores under geometric, birdshot, greedy and refine every 30 steps
  and speculative every 30 steps (its proxy: the same scene at half the resolution, over the
  same simulated time, recorded too). Predicted step times and speedups over geometric; the
  paper: birdshot 1.5x (dam) and 2.2x (sphere) over geometric, reactive 10 % faster on the dam
  and 12 % slower on the sphere, birdshot within 21 % of speculative.
- ``13``: the dam's step 100 (or its last step) alone, replayed under ``--seeds`` random
  birdshot assignments (``shoal.replay.sweep`` with ``birdshot_seeds``), against greedy's time
  for that step in the whole run's replay: the spread (max / min; paper 210 / 160 = 1.31) and
  the share of assignments faster than reactive (paper 20 %).
- ``10``: the tiles-per-core curve (makespan per step against tiles per core 1...64) for
  flip (dam), sph3d (fluidanimate) and wavefront (plane), from traces recorded at several
  tilings (each point aggregated from the coarsest recorded tiling that is at least as fine),
  on 32 x 18 modeled cores where the tilings reach, and on a smaller modeled cluster where 64
  tiles per core can be made of the finest recording; the optimum of each curve (paper: 2-4,
  4-8, 16-32) under both executor models.
- ``11``: FLIP's dam at growing grids with cells and tiles per node fixed (N³ cells on
  (N/16)³ nodes x 4 cores, 8³-cell tiles): CG iterations per step (``Trace.iterations``) and
  the replayed step time under birdshot, geometric and the MPI reference model
  (``mpi_reference``: a tile per core, block placement, a barrier after every phase).
- ``lif``: the wavefront's busy fraction p per step (tiles whose band holds nodes: ``advance``
  work > 0) put into Eq. (2) (and the exact expectation) with the modeled cluster's n and s,
  against Eq. (1) of the birdshot placement (busy tiles on the fullest node) and the LIF of the
  replay's loads each step (``Trace.step_lif`` of the predicted trace).

Sizes are small so that a recording takes a few minutes on a 2-core machine: FLIP at 32³
cells in 4³-cell tiles (512 tiles, MIC bricks of 4³; ``--flip-cells 64`` for 8³-cell tiles), the
wavefront at N = 64 in 512 and 1,000 tiles (a tile is at least 6 zones wide), fluidanimate with
``--sph-particles`` particles. Fig. 11 records the dam at 16³ ... 64³.

Run: ``python bench/birdshot_figures.py --figure 12|13|10|11|lif|all [--keep DIR] [--out DIR]
[--seeds 1000] [--profile charm] [--scenes dam sphere wavefront] [--flip-cells 32] [--trace FILE]
[--proxy FILE] [--json FILE]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from common import Benchmark, add_arguments
from shoal.cluster import Network
from shoal.graphics.canvas import new_figure, save_figure
from shoal.imbalance import expected_lif_approx, expected_lif_exact
from shoal.records import MESSAGES, REDUCTIONS, TASKS
from shoal.replay import ReplayConfig, replay
from shoal.replay.machine import MachineModel
from shoal.replay.sweep import sweep
from shoal.trace import Trace

FLIP_SMALL = {"app.cells": [32, 32, 32], "app.brick": 4}  # 4³-cell tiles: 512 tiles


def scenes(flip_cells: int) -> dict[str, tuple]:
    """Fig. 12's runs and their proxies: (label, scenario, sets, tiles, steps). FLIP at
    ``flip_cells``³ in 512 tiles, its proxy at half the resolution in 64 tiles over as many steps
    (both time steps are capped by ``dt_max``: the same simulated time, which the figure prints);
    the wavefront at N = 64, its proxy at N = 32 over half the iterations."""
    n, h = flip_cells, flip_cells // 2
    flip = {"app.cells": [n, n, n], "app.brick": 4}
    half = {"app.cells": [h, h, h], "app.brick": 4}
    return {
        "dam": ("dam", "flip-two-way-dam", flip, 512, 100),
        "dam-proxy": ("dam-proxy" if n == 32 else "dam", "flip-two-way-dam", half, 64, 100),
        "sphere": ("sphere", "flip-sphere-drop", flip, 512, 100),
        "sphere-proxy": ("sphere-proxy" if n == 32 else "sphere", "flip-sphere-drop", half, 64, 100),
        "wavefront": ("fig10-wavefront", "wavefront-plane", {}, 512, 110),
        "wavefront-proxy": ("wavefront-proxy", "wavefront-plane", {"app.cells": [32, 32, 32]}, 64, 55),
    }


POLICIES = (("geometric", 0), ("birdshot", 0), ("greedy", 30), ("refine", 30), ("speculative", 30))
PROFILES = ("recorded", "charm", "charm-free-net")
FREE_NET = Network(latency_s=0.0, bandwidth_Bps=1e15, overhead_s=0.0)
TPCS = (1, 2, 4, 8, 16, 32, 64)
PAPER_OPTIMA = {"flip": "2-4 (PhysBAM)", "sph3d": "4-8 (PARSEC)", "wavefront": "16-32 (Lassen)"}


class Recorder:
    """Records ``shoal run`` traces into a folder, reusing the runs already there."""

    def __init__(self, folder: Path):
        self.folder = folder

    def run(self, label: str, scenario: str, sets: dict, tiles: int, steps: int) -> Path:
        """The run folder of ``scenario`` with ``sets`` at ``tiles`` tiles for ``steps`` steps."""
        cells = sets.get("app.cells", sets.get("app.particles", ""))
        size = "x".join(map(str, cells)) if isinstance(cells, list) else str(cells)
        out = self.folder / f"{label}-{size or 'default'}-{tiles}t-{steps}s"
        if (out / "summary.json").exists():
            print(f"  reusing {out.name}", flush=True)
            return out
        cmd = [sys.executable, "-m", "shoal", "run", scenario, "--steps", str(steps), "--tiles", str(tiles),
               "--nodes", "1", "--workers", "2", "--placement", "sfc", "--executor", "native", "--out", str(out),
               "--quiet", "--set", "run.frame_every=0"]
        for key, value in sets.items():
            cmd += ["--set", f"{key}={json.dumps(value)}"]
        print(f"  recording {out.name}: {scenario} {size} cells/particles, {tiles} tiles, {steps} steps ...",
              end=" ", flush=True)
        t0 = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode or not (out / "summary.json").exists():
            lines = (done.stderr + done.stdout).strip().splitlines()
            raise SystemExit(f"recording {out.name} failed: {lines[-1] if lines else done.returncode}")
        print(f"{time.perf_counter() - t0:.0f} s", flush=True)
        return out

    def scene(self, name: str, flip_cells: int = 32) -> Path:
        """The run of Fig. 12's ``name`` (see :func:`scenes`)."""
        label, scenario, sets, tiles, steps = scenes(flip_cells)[name]
        return self.run(label, scenario, sets, tiles, steps)


def simulated_time(run: Path) -> float | None:
    """Seconds of simulated time a run covered (its final state's ``time``), None if unknown."""
    try:
        with np.load(run / "state" / "final.npz") as z:
            return float(np.asarray(z["time"]).reshape(-1)[0]) if "time" in z else None
    except (OSError, ValueError, KeyError):
        return None


def profile_fields(trace: Trace, profile: str) -> dict:
    """ReplayConfig fields of an executor model: ``recorded`` (the trace's fixed costs, dispatch
    and wake-up) or ``charm`` (1 us a task, no fixed cost per phase, no wake-up); no lock.
    ``charm-free-net``: ``charm`` on a network whose messages cost nothing (what balance alone
    gains)."""
    net = {"network": FREE_NET} if profile == "charm-free-net" else {}
    if profile == "recorded" or trace.machine is None:
        return {"gil": "none", **net}
    data = json.loads(json.dumps(trace.machine))
    for phase in data["phases"].values():
        for fit in phase.values():
            if isinstance(fit, dict) and "fixed" in fit:
                fit["fixed"] = 0.0
    data["source"] = "charm-like: the trace's rates, no fixed cost"
    return {"gil": "none", "machine": MachineModel.from_dict(data, "charm-like model"), "task_overhead_s": 1e-6,
            "wake_s": 0.0, "payload_overhead_s": 0.0, **net}


def step_times(result) -> np.ndarray:
    """The predicted time of every step of a replay."""
    return np.diff(np.concatenate([[0.0], np.asarray(result.trace.step_end, dtype=np.float64)]))


def one_step(trace: Trace, step: int) -> Trace:
    """The trace of ``step`` alone, placed as the run placed it then."""
    t, m = trace.tasks, trace.messages
    i = int(np.searchsorted(trace.steps, step))
    red = trace.reductions
    return dataclasses.replace(
        trace, tasks=TASKS.select(t, t["step"] == step), messages=MESSAGES.select(m, m["step"] == step),
        step_end=np.asarray(trace.step_end)[i:i + 1], placement_steps=np.array([step]),
        placement_owners=trace.owner_at(step)[None, :], worker_steps=np.array([step]),
        worker_cores=trace.cores_per_step()[i:i + 1], balance=None, jobs=None,
        reductions=None if red is None else REDUCTIONS.select(red, red["step"] == step))


def policy_replays(trace: Trace, proxy: Trace | None, nodes: int, cores: int, profile: str) -> dict:
    """Every policy of Fig. 12 replayed: {policy: (mean step s, step times, lif mean)}."""
    out = {}
    extra = profile_fields(trace, profile)
    for name, period in POLICIES:
        if name == "speculative" and proxy is None:
            continue
        cfg = ReplayConfig(nodes=nodes, cores=cores, placement=name, period=period, initial="geometric",
                           proxy=proxy if name == "speculative" else None, **extra)
        r = replay(trace, cfg)
        times = step_times(r)
        out[name] = (float(times.mean()), times, float(np.mean(r.trace.step_lif())))
    return out


# ----- Fig. 12 -------------------------------------------------------------------------------
def figure12(args, rec: Recorder, bench: Benchmark) -> None:
    names = args.scenes
    paper = {"dam": "birdshot 1.5x, reactive 1.1x birdshot's speed", "sphere": "birdshot 2.2x, birdshot 12 % faster "
             "than reactive", "wavefront": "-"}
    results = {}
    for scene in names:
        t0 = time.perf_counter()
        if args.trace and scene == "dam":
            run, prun = args.trace, args.proxy
        else:
            run, prun = rec.scene(scene, args.flip_cells), rec.scene(f"{scene}-proxy", args.flip_cells)
        tsim, psim = simulated_time(Path(run)), simulated_time(Path(prun)) if prun else None
        if tsim and psim and not args.proxy and abs(psim / tsim - 1) > 0.05:
            # The proxy is matched to the run by fraction of the run: make it cover the same time
            label, scenario, sets, tiles, steps = scenes(args.flip_cells)[f"{scene}-proxy"]
            prun = rec.run(label, scenario, sets, tiles, max(1, round(steps * tsim / psim)))
            psim = simulated_time(Path(prun))
        trace, proxy = Trace.read(run), Trace.read(prun) if prun else None
        if tsim and psim:
            print(f"  {scene}: run covers {tsim:.3f} s of simulated time, its proxy {psim:.3f} s")
        for profile in PROFILES:
            res = policy_replays(trace, proxy, 8, 8, profile)
            results[(scene, profile)] = res
            geo = res["geometric"][0]
            print(f"\nFig. 12, {scene} ({trace.tiling.ntiles} tiles, {len(trace.steps)} steps) on 8 x 8 modeled "
                  f"cores, executor model {profile} (paper: {paper[scene]} over geometric)")
            print(f"  {'policy':<22} {'step ms':>9} {'x geometric':>12} {'mean LIF':>9}")
            for name, period in POLICIES:
                if name not in res:
                    continue
                mean, times, lif_mean = res[name]
                label = f"{name}" + (f" every {period}" if period else "")
                print(f"  {label:<22} {mean * 1e3:>9.2f} {geo / mean:>11.2f}x {lif_mean:>9.2f}")
                bench.add(figure=12, scene=scene, profile=profile, policy=name, period=period, step_s=mean,
                          speedup_over_geometric=geo / mean, lif_mean=lif_mean, tiles=trace.tiling.ntiles,
                          steps=len(trace.steps))
            b = res["birdshot"][0]
            if "speculative" in res:
                print(f"  birdshot / speculative: {b / res['speculative'][0]:.2f} (paper <= 1.21); "
                      f"birdshot / greedy: {b / res['greedy'][0]:.2f} (paper dam 1.10, sphere 0.89)")
        print(f"  ({scene}: {time.perf_counter() - t0:.0f} s with recording)", flush=True)
    fig = new_figure(4.0 * len(names), 3.6)
    axes = fig.subplots(1, len(names), squeeze=False)[0]
    for ax, scene in zip(axes, names, strict=True):
        names = [n for n, _ in POLICIES if n in results[(scene, "recorded")]]
        x = np.arange(len(names))
        for k, profile in enumerate(PROFILES):
            res = results[(scene, profile)]
            geo = res["geometric"][0]
            ax.bar(x + (k - 1) * 0.27, [geo / res[n][0] for n in names], 0.27, label=profile)
        ax.set_xticks(x, [n[:6] for n in names])
        ax.set_ylabel("speedup over geometric")
        ax.set_title(f"{scene} on 8 x 8 cores")
        ax.legend(fontsize=7)
    print(f"wrote {save_figure(fig, args.out / 'birdshot-fig12.png')}")


# ----- Fig. 13 -------------------------------------------------------------------------------
def figure13(args, rec: Recorder, bench: Benchmark) -> None:
    run = args.trace or rec.scene("dam", args.flip_cells)
    trace = Trace.read(run)
    step = 100 if 100 in trace.steps else int(trace.steps[-1])
    profile = args.profile
    extra = profile_fields(trace, profile)
    t0 = time.perf_counter()
    whole = {name: replay(trace, ReplayConfig(nodes=8, cores=8, placement=name, period=period, initial="geometric",
                                              **extra))
             for name, period in (("greedy", 30), ("geometric", 0), ("birdshot", 0))}
    i = int(np.searchsorted(trace.steps, step))
    reactive = float(step_times(whole["greedy"])[i])
    geometric = float(step_times(whole["geometric"])[i])
    seed0 = float(step_times(whole["birdshot"])[i])  # seed 0 in the whole run: checks the slice
    alone = one_step(trace, step)
    with tempfile.TemporaryDirectory(prefix="fig13-") as tmp:
        path = alone.write(Path(tmp) / "step.h5")
        print(f"  replaying step {step} under {args.seeds} birdshot seeds ...", flush=True)
        done = [0]

        def progress(k: int) -> None:
            done[0] += 1
            if done[0] % max(1, args.seeds // 10) == 0:
                print(f"    {done[0]} of {args.seeds + 1} replays, {time.perf_counter() - t0:.0f} s", flush=True)

        model = {k: v for k, v in extra.items() if k != "network"}
        res = sweep(path, ["birdshot"], [0], [0], [8], 8, birdshot_seeds=args.seeds, jobs=args.jobs, model=model,
                    on_done=progress, network=extra.get("network"))
    seeds = np.array(res.seeds)
    faster = float((seeds < reactive).mean())
    spread = float(seeds.max() / seeds.min())
    wall = time.perf_counter() - t0
    print(f"\nFig. 13: dam step {step} ({trace.tiling.ntiles} tiles) on 8 x 8 cores, executor model {profile}, "
          f"over {len(seeds)} birdshot assignments ({wall:.0f} s)")
    print(f"  birdshot: min {seeds.min() * 1e3:.2f} ms, median {np.median(seeds) * 1e3:.2f}, max "
          f"{seeds.max() * 1e3:.2f}; spread max/min {spread:.2f} (paper 210/160 = 1.31)")
    print(f"  reactive (greedy every 30) {reactive * 1e3:.2f} ms at that step of its whole replay; geometric "
          f"{geometric * 1e3:.2f} ms; birdshot seed 0 {seed0 * 1e3:.2f} ms in the whole run, "
          f"{seeds[0] * 1e3:.2f} ms replayed alone")
    print(f"  birdshot faster than reactive in {faster:.0%} of assignments (paper 20 %); reactive sits at the "
          f"{faster:.0%} percentile")
    bench.add(figure=13, profile=profile, step=step, seeds=len(seeds), min_s=float(seeds.min()),
              median_s=float(np.median(seeds)), max_s=float(seeds.max()), spread=spread, reactive_s=reactive,
              birdshot_seed0_whole_s=seed0,
              geometric_s=geometric, birdshot_faster_share=faster, wall_s=wall)
    fig = new_figure(5.5, 3.6)
    ax = fig.subplots()
    ax.hist(seeds * 1e3, bins=40, color="tab:blue", alpha=0.8, label=f"birdshot, {len(seeds)} seeds")
    ax.axvline(reactive * 1e3, color="tab:red", label="reactive (greedy every 30)")
    ax.set_xlabel(f"predicted time of step {step} (ms)")
    ax.set_ylabel("assignments")
    ax.legend(fontsize=8)
    print(f"wrote {save_figure(fig, args.out / 'birdshot-fig13.png')}")


# ----- Fig. 10 -------------------------------------------------------------------------------
def fig10_series(args) -> list[tuple]:
    """Fig. 10's curves: (app, label, scenario, sets, [(tiles, steps)]) per problem, each
    recorded at several tilings (a wavefront tile is at least the facets' reach, 6 zones, wide:
    at most 10³ tiles at N = 64; finer tilings of larger grids ran out of memory here)."""
    sph = {"app.particles": args.sph_particles}
    out = [("flip", "dam", "flip-two-way-dam", FLIP_SMALL, [(64, 100), (512, 100)]),  # Fig. 12's dam at 512
           ("sph3d", "fig10-sph3d", "sph3d-dam-break", sph, [(64, 20), (512, 20), (2048, 20)]),
           ("wavefront", "fig10-wavefront", "wavefront-plane", {}, [(512, 110), (1000, 110)])]
    return out


def small_cluster(tiles: int) -> tuple[int, int]:
    """The modeled cluster on which ``tiles`` make 64 tiles per core: nodes x (2 or 4) cores."""
    total = max(2, tiles // 64)
    cores = 2 if total <= 8 else 4
    return max(1, total // cores), cores


def curve(traces: list[Trace], nodes: int, cores: int, profile: str) -> dict[int, float]:
    """Mean predicted step time per tiles-per-core value the traces can make on nodes x cores
    (birdshot), each from the coarsest trace at least as fine as needed."""
    out = {}
    traces = sorted(traces, key=lambda t: t.tiling.ntiles)
    for k in TPCS:
        need = k * nodes * cores
        fit = [t for t in traces if t.tiling.ntiles >= need]
        if not fit:
            break
        t = fit[0]
        r = replay(t, ReplayConfig(nodes=nodes, cores=cores, placement="birdshot", tiles_per_core=k,
                                   **profile_fields(t, profile)))
        out[k] = r.makespan / len(t.steps)
    return out


def figure10(args, rec: Recorder, bench: Benchmark) -> None:
    curves = {}
    for app, label, scenario, sets, tilings in fig10_series(args):
        if args.apps and app not in args.apps:
            continue
        t0 = time.perf_counter()
        traces = [Trace.read(rec.run(label, scenario, sets, n, s)) for n, s in tilings]
        finest = max(t.tiling.ntiles for t in traces)
        size = "x".join(map(str, sets.get("app.cells", []))) or str(sets.get("app.particles", "default"))
        shapes = [small_cluster(finest)] + ([(32, 18)] if finest >= 576 else [])
        if finest < 576:
            print(f"  {app} {size}: its finest tiling ({finest} tiles) cannot give 32 x 18 cores a tile each")
        for nodes, cores in shapes:
            for profile in PROFILES:
                if (nodes, cores) == (32, 18) and profile == "charm-free-net" and finest > 4096:
                    continue  # the slowest replays; the network's share shows on the smaller cluster
                c = curve(traces, nodes, cores, profile)
                curves[(f"{app} {size}", nodes, cores, profile)] = c
                best = min(c, key=c.get)
                print(f"Fig. 10, {app} {size} ({', '.join(str(t.tiling.ntiles) for t in traces)} tiles recorded) on "
                      f"{nodes} x {cores} cores, {profile}: " + ", ".join(f"{k}: {v * 1e3:.2f}" for k, v in c.items())
                      + f" ms; optimum {best} tiles per core (paper {PAPER_OPTIMA[app]}); 1 -> 2: "
                      f"{c[1] / c.get(2, math.nan):.2f}x", flush=True)
                bench.add(figure=10, app=app, size=size, tiles=[t.tiling.ntiles for t in traces], nodes=nodes,
                          cores=cores, profile=profile, step_s={str(k): v for k, v in c.items()}, optimum=best)
        print(f"  ({app} {size}: {time.perf_counter() - t0:.0f} s with recording)", flush=True)
    names = list(dict.fromkeys(k[0] for k in curves))
    fig = new_figure(4.0 * len(names), 3.6)
    axes = fig.subplots(1, len(names), squeeze=False)[0]
    for ax, name in zip(axes, names, strict=True):
        for (a, n, c, profile), cv in curves.items():
            if a != name or not cv:
                continue
            ks = list(cv)
            ax.plot(ks, [cv[k] / cv[ks[0]] for k in ks], {"recorded": "o-", "charm": "s--"}.get(profile, "^:"),
                    label=f"{n}x{c} {profile}")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("tiles per core")
        ax.set_ylabel("step time / at 1 tile per core")
        ax.set_title(f"{name} (paper optimum {PAPER_OPTIMA[name.split()[0]]})", fontsize=8)
        ax.legend(fontsize=6)
    print(f"wrote {save_figure(fig, args.out / 'birdshot-fig10.png')}")


# ----- Fig. 11 -------------------------------------------------------------------------------
def figure11(args, rec: Recorder, bench: Benchmark) -> None:
    rows = []
    variants = (("birdshot", {}), ("geometric", {}), ("mpi", {"mpi_reference": True}))
    for n in args.fig11_cells:
        nodes = (n // 16) ** 3
        tiles = (n // 8) ** 3  # 8 tiles of 8³ cells per node
        steps = 8 * n // 16  # dt ~ h: the same simulated time at every size
        t0 = time.perf_counter()
        run = rec.run("fig11-dam", "flip-two-way-dam", {"app.cells": [n, n, n], "app.brick": 4}, tiles, steps)
        trace = Trace.read(run)
        its = trace.iterations()
        per_step = np.array([its.get((int(s), "cg_matvec"), 0) for s in trace.steps])
        half = len(per_step) // 2
        cg = float(per_step[half:].mean())
        times = {}
        for profile in ("recorded", "charm"):
            for name, extra in variants:
                r = replay(trace, ReplayConfig(nodes=nodes, cores=4, placement="birdshot" if name == "mpi" else name,
                                               **extra, **profile_fields(trace, profile)))
                times[(profile, name)] = float(step_times(r)[half:].mean())
        wall = time.perf_counter() - t0
        rows.append((n, nodes, cg, times))
        print(f"Fig. 11: {n}³ cells, {nodes} nodes x 4 cores, {tiles} tiles, {steps} steps: CG iterations per step "
              f"(second half) {cg:.1f} (all: {per_step.tolist()}) [{wall:.0f} s]", flush=True)
        for profile in ("recorded", "charm"):
            b, g, m = (times[(profile, v)] for v, _ in variants)
            print(f"    {profile}: step {b * 1e3:.2f} ms birdshot, {g * 1e3:.2f} ms geometric ({g / b:.2f}x), "
                  f"{m * 1e3:.2f} ms MPI reference ({m / b:.2f}x; paper 1.8-2.1x); {b / cg * 1e3:.2f}"
                  " ms per CG iteration", flush=True)
        bench.add(figure=11, cells=n, nodes=nodes, tiles=tiles, steps=steps, cg_iterations=cg,
                  cg_per_step=per_step.tolist(), step_s={f"{a}/{b}": v for (a, b), v in times.items()})
    fig = new_figure(8.0, 3.4)
    a1, a2 = fig.subplots(1, 2)
    nodes = [r[1] for r in rows]
    a1.plot(nodes, [r[2] for r in rows], "o-")
    a1.set_xscale("log", base=2)
    a1.set_xlabel("nodes (4 cores, 16³ cells each)")
    a1.set_ylabel("CG iterations per step")
    for profile in ("recorded", "charm"):
        for name, _ in variants:
            a2.plot(nodes, [r[3][(profile, name)] * 1e3 for r in rows], "o-" if profile == "charm" else "x:",
                    label=f"{name} ({profile})")
    a2.set_xscale("log", base=2)
    a2.set_yscale("log")
    a2.set_xlabel("nodes")
    a2.set_ylabel("predicted step time (ms)")
    a2.legend(fontsize=6)
    print(f"wrote {save_figure(fig, args.out / 'birdshot-fig11.png')}")


# ----- Eq. (2) on the wavefront ----------------------------------------------------------------
def figure_lif(args, rec: Recorder, bench: Benchmark) -> None:
    run = args.trace or rec.run("fig10-wavefront", "wavefront-plane", {}, 1000, 110)
    trace = Trace.read(run)
    phase = trace.phases.index("advance")
    t = trace.tasks
    rows = t["phase"] == phase
    steps = trace.steps
    busy = np.zeros((len(steps), trace.tiling.ntiles), bool)
    s_idx = np.searchsorted(steps, t["step"][rows])
    np.logical_or.at(busy, (s_idx, t["tile"][rows]), t["work"][rows] > 0)
    p = busy.mean(axis=1)
    fig = new_figure(8.0, 3.4)
    a1, a2 = fig.subplots(1, 2)
    a1.plot(steps, p, "k-")
    a1.set_xlabel("iteration")
    a1.set_ylabel("busy fraction p")
    for nodes, cores in ((8, 8), (32, 18)):
        s = trace.tiling.ntiles // nodes
        lifs = {}
        for profile in ("recorded", "charm"):
            r = replay(trace, ReplayConfig(nodes=nodes, cores=cores, placement="birdshot",
                                           **profile_fields(trace, profile)))
            lifs[profile] = r.trace.step_lif()
        owner = r.trace.owner_at(int(steps[0]))
        per_node = np.stack([busy[:, owner == n].sum(axis=1) for n in range(nodes)], axis=1)
        eq1 = np.divide(per_node.max(axis=1), per_node.mean(axis=1), out=np.ones(len(steps)),
                        where=per_node.mean(axis=1) > 0) - 1.0
        model = np.array([expected_lif_approx(nodes, s, float(x)) if 0 < x < 1 else np.nan for x in p])
        exact = np.array([expected_lif_exact(nodes, s, float(x)) if 0 < x < 1 else np.nan for x in p])
        ok = ~np.isnan(model) & (p * s >= 1)  # at least one busy tile per node on average
        corr = float(np.corrcoef(model[ok], eq1[ok])[0, 1]) if ok.sum() > 2 else math.nan
        print(f"Eq. 2, wavefront ({trace.tiling.ntiles} tiles) on {nodes} nodes x {cores} cores, s = {s} tiles per "
              f"node, {ok.sum()} iterations with p s >= 1: busy fraction p {p[ok].min():.3f}..{p[ok].max():.3f} "
              f"(mean {p[ok].mean():.3f})")
        print(f"    means: Eq. 2 {np.nanmean(model[ok]):.2f} (exact expectation {np.nanmean(exact[ok]):.2f}); "
              f"Eq. 1 on the replay's birdshot placement (busy tiles per node) {eq1[ok].mean():.2f}; replayed "
              f"LIF of the loads: charm model {lifs['charm'][ok].mean():.2f}, recorded model "
              f"{lifs['recorded'][ok].mean():.2f}; correlation Eq. 2 / Eq. 1 {corr:.2f}")
        for q in (0.1, 0.25, 0.5, 0.75, 0.9):
            k = np.flatnonzero(ok)[int(q * (ok.sum() - 1))]
            print(f"    iteration {int(steps[k]):>3}: p = {p[k]:.3f}, Eq. 2 {model[k]:.2f}, exact {exact[k]:.2f}, "
                  f"Eq. 1 {eq1[k]:.2f}, replayed charm {lifs['charm'][k]:.2f}, recorded {lifs['recorded'][k]:.2f}")
        bench.add(figure="lif", nodes=nodes, cores=cores, tiles=trace.tiling.ntiles, busy=p.tolist(),
                  eq2=np.where(ok, model, -1).tolist(), eq2_exact=np.where(ok, exact, -1).tolist(),
                  eq1_busy=eq1.tolist(), replayed_lif_charm=lifs["charm"].tolist(),
                  replayed_lif_recorded=lifs["recorded"].tolist(), correlation=corr)
        a2.plot(steps[ok], model[ok], "--", label=f"Eq. 2, n = {nodes}")
        a2.plot(steps[ok], eq1[ok], "-", label=f"Eq. 1 of the placement, {nodes} x {cores}")
        a2.plot(steps[ok], lifs["charm"][ok], ":", label=f"replayed (charm), {nodes} x {cores}")
    a2.set_xlabel("iteration")
    a2.set_ylabel("LIF")
    a2.legend(fontsize=7)
    print(f"wrote {save_figure(fig, args.out / 'birdshot-lif.png')}")


FIGURES = {"12": figure12, "13": figure13, "10": figure10, "11": figure11, "lif": figure_lif}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--figure", choices=[*FIGURES, "all"], default="all")
    ap.add_argument("--keep", type=Path, help="record into DIR (and reuse the runs already there)")
    ap.add_argument("--out", type=Path, default=Path("."), help="folder of the PNGs (default .)")
    ap.add_argument("--trace", type=Path, help="a recorded run to use instead (Figs. 12 dam, 13, lif)")
    ap.add_argument("--proxy", type=Path, help="the speculative balancer's proxy for --trace (Fig. 12)")
    ap.add_argument("--seeds", type=int, default=1000, help="birdshot assignments of Fig. 13 (default 1000)")
    ap.add_argument("--profile", choices=PROFILES, default="charm", help="executor model of Fig. 13 (default charm)")
    ap.add_argument("--jobs", type=int, default=2, help="replay processes of Fig. 13 (default 2)")
    ap.add_argument("--scenes", nargs="+", choices=["dam", "sphere", "wavefront"], default=["dam", "sphere"],
                    help="Fig. 12's scenes (default dam sphere)")
    ap.add_argument("--apps", nargs="*", choices=["flip", "sph3d", "wavefront"], help="Fig. 10's apps (default all)")
    ap.add_argument("--sph-particles", type=int, default=50000, help="fluidanimate particles (Fig. 10)")
    ap.add_argument("--flip-cells", type=int, default=32,
                    help="cells a side of Figs. 12-13's FLIP runs (512 tiles; default 32, 4³ cells a tile)")
    ap.add_argument("--fig11-cells", type=int, nargs="+", default=[16, 32, 48, 64], help="grids of Fig. 11")
    add_arguments(ap, repeats=1)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    figures = list(FIGURES) if args.figure == "all" else [args.figure]
    with Benchmark("birdshot_figures", args) as bench, tempfile.TemporaryDirectory(prefix="birdshot-") as tmp:
        rec = Recorder(args.keep or Path(tmp))
        rec.folder.mkdir(parents=True, exist_ok=True)
        for name in figures:
            t0 = time.perf_counter()
            print(f"-- figure {name}", flush=True)
            FIGURES[name](args, rec, bench)
            print(f"-- figure {name}: {time.perf_counter() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main()
