"""The invasive paper's four benchmarks (§6.1-6.4), runnable on any core count.

- §6.1: what talking to the resource manager costs a very small step loop: no manager, a
  blocking invade per step, a non-blocking invade and poll per step (real, here); then the
  same on a real 128-cell SWE run, as the paper ran it (:func:`swe_overhead`). A non-blocking
  invade is each step's request cost in the replays below; a moved core's release delay is
  taken as two blocking round trips (release request to the holder and its acknowledgement, then the
  grant to the receiver).
- §6.2: the ramp on 2 ranks (``L0(t) = T - t``, ``L1(t) = t``, ``L^2`` square roots per step, a
  barrier): a tiny real run of ``synthetic-ramp`` with and without ``--invasive``, then the
  modeled ramp (:func:`shoal.replay.invasive.ramp_trace`) replayed on a modeled 40-core node,
  invasive against the equal static split, for several T. The ratio approaches the closed
  form 4/7 (derived in :func:`shoal.replay.invasive.ramp_limit`) as far as whole cores allow.
  Break-even: the static run takes ``S(T) = (7 / 6R) a T^3`` (``a`` seconds per square root)
  and the invasive one ``rho S(T) + c T`` (``c`` per step: the request), so they meet at
  ``T* = sqrt(6 R c / (7 a (1 - rho)))``.
- §6.3: the radial dam break (app swe) on 4 ranks owning the quarters split along the diagonals
  (``sectors``), replayed on a modeled node: static, cores following the wave (the manager),
  data following it (GreedyLB every K steps), and both, at 64, 16 and 4 tiles per rank; the
  stacked cores-over-time picture (Fig. 8). When both beats either alone, and why it mostly
  does not: :func:`dam_break`.
- §6.4: the parameter study, through ``shoal study`` with a small study.

Run: ``python bench/invasive.py [--cores 40] [--repeats 5] [--out DIR]``.
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

from common import Benchmark, add_arguments, repeat
from shoal.cluster import Network
from shoal.invasive import Invasion, start_manager
from shoal.replay import ReplayConfig, replay
from shoal.replay.invasive import InvasiveConfig, ramp_limit, ramp_trace
from shoal.replay.machine import Fit, MachineModel, PhaseModel
from shoal.trace import Trace, aggregate

SHOAL = [sys.executable, "-m", "shoal"]
NODE = Network(latency_s=1e-6, overhead_s=0.0)  # ranks on one host: a barrier through shared memory


def tiny_step(cells: np.ndarray) -> None:
    """A very small step (the paper's 128-cell run): a few passes over 128 values."""
    for _ in range(20):
        np.sqrt(cells + 1.0, out=cells)


def loop(steps: int, invasion: Invasion | None, blocking: bool) -> float:
    """Seconds for ``steps`` tiny steps, each followed by an invade when ``invasion`` is given."""
    cells = np.ones(128)
    tic = time.perf_counter()
    for s in range(steps):
        tiny_step(cells)
        if invasion is not None:
            invasion.invade(workload=128.0 + s % 2, blocking=blocking)  # the workload changes: D is recomputed
    return time.perf_counter() - tic


def overhead(bench: Benchmark, repeats: int, steps: int) -> tuple[float, float]:
    """§6.1; returns the blocking invade's round trip and a non-blocking invade's cost, in seconds."""
    print("\n§6.1 invasive messaging on a tiny step loop "
          f"({steps} steps; the paper: up to 15% blocking, <= 5% non-blocking)")
    with start_manager(cores=2) as handle, Invasion(handle.address, handle.authkey, name="bench") as invasion:
        def once():
            base = loop(steps, None, False)
            return {"base": base, "blocking": loop(steps, invasion, True) / base,
                    "nonblocking": loop(steps, invasion, False) / base}
        stat = repeat(once, repeats)
    trip = max((stat["blocking"].median - 1.0) * stat["base"].median / steps, 0.0)
    send = max((stat["nonblocking"].median - 1.0) * stat["base"].median / steps, 0.0)
    print(f"{'variant':<14}{'time / no manager':>20}")
    print(f"{'no manager':<14}{'1.00':>20}   ({stat['base'].show(1e6 / steps)} us per step)")
    for key in ("blocking", "nonblocking"):
        print(f"{key:<14}{stat[key].show():>20}")
        bench.add(benchmark="6.1", variant=key, ratio=stat[key], step_s=stat["base"])
    print(f"blocking round trip: {trip * 1e6:.1f} us per request; non-blocking: {send * 1e6:.1f} us")
    return trip, send


#: The paper's §6.1 run: a very small SWE scenario, 128 cells (two root blocks of 8 x 8), not refined.
SWE_128 = ["app.blocks=[2,1]", "app.block=8", "app.max_level=0", "app.extent=[2000.0,1000.0]",
           "app.column=[700.0,500.0,200.0,2.0]", "run.tiles=2", "run.frame_every=0"]
SWE_VARIANTS = {"no manager": {}, "non-blocking": {"invasive": "workload", "cores": 1},
                "blocking": {"invasive": "workload", "cores": 1, "invade_blocking": True},
                "non-blocking, every 4": {"invasive": "workload", "cores": 1, "invade_every": 4}}


def swe_overhead(bench: Benchmark, repeats: int, steps: int = 400) -> None:
    """§6.1 as the paper ran it: a real 128-cell SWE run on one worker, with no manager and
    under one (a pool of one core, so the worker count stays one) invading every step without
    blocking, blocking, and every 4 steps; mean step time over the unmanaged run's.

    The overhead is the request plus shoal's step boundary, not the message alone. Profiled here
    (1000 steps of a 0.35 ms step, 2 cores): each invade's socket write took ~0.2 ms, because it
    wakes the manager, which on a 2-core host takes a CPU from the run; a poll ~0.1 ms; and each
    invade ends the executor's run at that boundary, so the next step's run is set up again
    (~0.3 ms of bookkeeping sized for a whole run). The paper's manager had idle cores of a
    40-core node to run on and its steps were not cut. Invading every 4 steps divides all three.
    """
    from shoal.session import run_scenario

    print(f"\n§6.1 on a real 128-cell SWE run ({steps} steps, 1 worker; the paper: up to 15% blocking, "
          "<= 5% non-blocking)")
    with tempfile.TemporaryDirectory() as tmp:
        def once():
            times = {}
            for name, kw in SWE_VARIANTS.items():
                out = Path(tmp) / f"{name.replace(' ', '').replace(',', '-')}-{time.perf_counter_ns()}"
                run = run_scenario("swe-radial-dam-break", steps=steps, nodes=1, workers=1, set=SWE_128, out=out, **kw)
                times[name] = run.summary["step_time_mean_s"]
            return {"base": times["no manager"], **{k: v / times["no manager"] for k, v in times.items()}}
        stat = repeat(once, repeats)
    print(f"{'variant':<24}{'step / no manager':>20}")
    for name in SWE_VARIANTS:
        extra = f"   ({stat['base'].show(1e3)} ms per step)" if name == "no manager" else ""
        print(f"{name:<24}{stat[name].show():>20}{extra}")
        bench.add(benchmark="6.1-swe", variant=name, ratio=stat[name], step_s=stat["base"])


def sqrt_seconds() -> float:
    """Seconds one dependent square root takes on one core here (the ramp's unit of work)."""
    from shoal.apps.synthetic import burn_tile

    burn = np.zeros((64, 64, 1))
    args = (np.zeros(3, np.int64), 0, 1, np.array([128.0, 64.0, 1.0]), np.zeros(3), 1.0, 1.0, 2.0, 0.0, 200.0)
    burn_tile(burn, *args)  # compiled
    tic = time.perf_counter()
    iters = burn_tile(burn, *args)
    return (time.perf_counter() - tic) / max(iters, 1)


def real_ramp(bench: Benchmark, repeats: int) -> None:
    """§6.2, real and tiny: synthetic-ramp on 2 ranks, static against ``--invasive workload``."""
    print("\n§6.2 ramp, real (tiny, this machine): wall time invasive / static")
    with tempfile.TemporaryDirectory() as tmp:
        def wall(extra: list[str], name: str) -> float:
            out = Path(tmp) / f"{name}-{time.perf_counter_ns()}"
            cmd = SHOAL + ["run", "synthetic-ramp", "--steps", "24", "--set", "app.grid=[64,32]", "--out", str(out),
                           *extra]
            done = subprocess.run(cmd, capture_output=True, text=True)
            if done.returncode:
                raise RuntimeError((done.stderr.strip().splitlines() or ["?"])[-1])
            return json.loads((out / "summary.json").read_text())["wall_s"]
        try:
            stat = repeat(lambda: {"ratio": wall(["--invasive", "workload"], "inv") / wall([], "static")}, repeats)
        except RuntimeError as error:
            print(f"not measured: {error}")
            return
    print(f"T = 24: {stat['ratio'].show()} (2 cores: the gain cannot show; the replay carries the scale)")
    bench.add(benchmark="6.2-real", T=24, ratio=stat["ratio"])


def modeled_ramp(bench: Benchmark, cores: int, trip: float, request_s: float, sqrt_s: float) -> None:
    """§6.2 replayed on a modeled node of ``cores`` cores: a non-blocking request per step
    (``request_s``) and a release delay of two blocking round trips (``trip``)."""
    ideal, whole = ramp_limit(cores, 2048)
    delay = 2.0 * trip
    print(f"\n§6.2 ramp, replayed on a modeled {cores}-core node ({sqrt_s * 1e9:.2f} ns per square root, "
          f"request {request_s * 1e6:.1f} us per step, release delay {delay * 1e6:.1f} us)")
    print(f"{'T':>6}{'static s':>12}{'invasive s':>12}{'ratio':>9}{'vs 4/7':>10}")
    ratio = 1.0
    for T in (64, 256, 1024, 2048):
        trace = ramp_trace(T, sqrt_s=sqrt_s, tiles_per_rank=512, cores=cores // 2)  # fine enough to pack
        static = replay(trace, ReplayConfig(placement="geometric", network=NODE)).makespan
        inv = InvasiveConfig(release_delay_s=delay, request_s=request_s)
        invasive = replay(trace, ReplayConfig(placement="geometric", network=NODE, invasive=inv)).makespan
        ratio = invasive / static
        print(f"{T:>6}{static:>12.4g}{invasive:>12.4g}{ratio:>9.4f}{ratio / ideal - 1:>+10.1%}")
        bench.add(benchmark="6.2-model", T=T, cores=cores, static_s=static, invasive_s=invasive, ratio=ratio)
    free = replay(trace, ReplayConfig(placement="geometric", network=NODE, invasive=InvasiveConfig())).makespan
    ratio = free / static  # the limit: no request cost, no release delay
    print(f"{T:>6}{static:>12.4g}{free:>12.4g}{ratio:>9.4f}{ratio / ideal - 1:>+10.1%}  (no request cost, no delay)")
    bench.add(benchmark="6.2-model-limit", T=T, cores=cores, static_s=static, invasive_s=free, ratio=ratio)
    print(f"closed form: 4/7 = {ideal:.4f}; with the manager's whole cores (one core at least) "
          f"{whole:.4f} ({whole / ideal - 1:+.1%}); within 2% of 4/7: {'yes' if ratio / ideal - 1 <= 0.02 else 'no'}")
    rho = whole
    t_star = math.sqrt(6 * cores * request_s / (7 * sqrt_s * (1 - rho))) if request_s > 0 else 0.0
    print(f"break-even T* = sqrt(6 R c / (7 a (1 - rho))) = {t_star:.0f} (the paper: 8192, on 40 cores)")
    bench.add(benchmark="6.2-break-even", T=t_star, request_s=request_s, sqrt_s=sqrt_s)


def compiled(model: MachineModel) -> MachineModel:
    """``model`` as a compiled executor (the paper's C++ ranks) would run the shallow-water app: a
    task costs its cell updates at the flux stage's fitted rate, nothing more. The per-block
    phases (CFL, level balancing) and every phase's fixed cost are the Python executor's
    per-task bookkeeping (about 70 us a block here, as much as a level-2 block's 1024 cell
    updates): kept, they drown the wave's imbalance in work that is the same on every block."""
    phases = {key: PhaseModel(Fit(p.cost.rate if key.endswith("/stage1") else 0.0, 0.0))
              for key, p in model.phases.items()}
    return dataclasses.replace(model, phases=phases)


def dam_break(bench: Benchmark, cores: int, trip: float, request_s: float, out: Path) -> None:
    """§6.3: the radial dam break on 4 ranks owning the quarters split along the diagonals
    (``sectors``), with cores following the wave (Fig. 8), data following it, and both.

    Recorded here at 600 steps on 16 x 16 root blocks of 8 x 8 cells refining twice (the
    paper's Fig. 8 run refines 8 levels deep; one level here leaves a 1 : 4 imbalance that a
    block's fixed costs hide), the column moved from the scenario's (600, 600), which lies on a
    diagonal and so would be split between ranks 2 and 3, into rank 3's triangle, as in Fig. 8;
    the disc of moving water then spreads into ranks 0 and 2 and last into rank 1. Replayed on a
    modeled node of ``cores`` cores as a compiled executor (:func:`compiled`, no interpreter
    lock, 1 us per task) with each task 50 times the recorded cells (a finer grid, the paper's
    step of a few milliseconds), at 64, 16 and 4 tiles per rank (the recorded blocks, and 2 x 2
    and 4 x 4 of them per tile), under: static sectors; cores by workload (the manager, its
    release delay two blocking round trips of §6.1, a non-blocking request per step, the mean
    of the last 4 steps as workload); data by GreedyLB every K steps (tiles migrate); both.
    One row replays the Python tasks as recorded.

    What it showed (40 cores, the §6.2 delays, 2 cores at load 7; ratios to static): compiled,
    64 tiles per rank: cores 0.546, data 0.526 (K = 16) and 0.595 (K = 64), both 0.524 and
    0.523; 16 tiles per rank: cores 0.638, data 0.576 and 0.581, both 0.589 and 0.580; 4 tiles
    per rank: all 1.000-1.002. Both beat the better of the two only at 64 tiles per rank, by
    0.7% (and by 0.4-2% in other runs with K = 16-64), where tiles are plenty: data moves the
    wave's bulk now and then, cores follow its drift between rebalances without migrating. At 16
    tiles per rank both lost to data alone (up to 2-4% in other runs): GreedyLB plans against
    the cores the manager gave the ranks, so once cores have followed the wave the tiles stay
    put, and the manager's whole cores (one at least per rank) and release delays then cost
    more than the moves they save. At 4 tiles per rank nothing helps: the step waits on the
    largest tile. With the Python tasks as recorded every policy is 5-7% slower than static: a
    block's fixed cost makes a refined block cost about twice a coarse one, the imbalance is 6%,
    and the per-step requests and balancing steps cost more than that. So in this model moving
    cores and data together is at best a small win, with many tiles per rank and rare
    rebalancing; no regime showed a clear one. A balancer that plans data against the equal
    split (leaving the drift to the cores) is the variant not tried.
    """
    print(f"\n§6.3 radial dam break, 4 ranks on the quarters split along the diagonals (sectors), "
          f"replayed on a modeled {cores}-core node")
    run = out / "dam-break-sectors"
    if not (run / "summary.json").exists():
        cmd = SHOAL + ["run", "swe-radial-dam-break", "--steps", "600", "--tiles", "256", "--nodes", "4",
                       "--workers", "1", "--placement", "sectors", "--set", "app.block=8", "--set", "app.max_level=2",
                       "--set", "app.column=[1000.0,500.0,250.0,5.0]", "--out", str(run)]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode:
            print(f"not recorded: {(done.stderr.strip().splitlines() or ['?'])[-1]}")
            return
    fine = Trace.read(run / "trace.h5")
    model = MachineModel.from_dict(fine.machine)
    inv = InvasiveConfig(cores=cores, release_delay_s=2.0 * trip, request_s=request_s, window=4)
    periods = (16, 64)
    setups = {"static": dict(placement="sectors", cores=cores // 4),
              "cores": dict(placement="sectors", invasive=inv)}
    for k in periods:
        setups[f"data/{k}"] = dict(placement="greedy", period=k, initial="sectors", cores=cores // 4)
        setups[f"both/{k}"] = dict(placement="greedy", period=k, initial="sectors", invasive=inv)
    print("| tasks | tiles/rank | static s | " + " | ".join(list(setups)[1:]) + " | best both / best single |")
    print("|---|---|---|" + "---|" * len(setups))
    pictures = {}
    for label, factor, machine in (("as recorded", 1, model), ("compiled", 1, compiled(model)),
                                   ("compiled", 2, compiled(model)), ("compiled", 4, compiled(model))):
        trace = fine if factor == 1 else aggregate(fine, fine.tiling.coarsen(factor))
        speed, task_s = (1.0, None) if label == "as recorded" else (1 / 50, 1e-6)
        base = dict(nodes=4, network=NODE, gil="none", machine=machine, speed=speed, task_overhead_s=task_s,
                    wake_s=task_s)
        results = {name: replay(trace, ReplayConfig(**base, **kw)) for name, kw in setups.items()}
        time_s = {name: r.makespan for name, r in results.items()}
        both = min(v for k, v in time_s.items() if k.startswith("both"))
        single = min(v for k, v in time_s.items() if k.startswith(("cores", "data")))
        tiles = trace.tiling.ntiles // 4
        print(f"| {label} | {tiles} | {time_s['static']:.4g} | "
              + " | ".join(f"{v / time_s['static']:.3f}" for k, v in time_s.items() if k != "static")
              + f" | {both / single:.3f} |")
        bench.add(benchmark="6.3", cores=cores, tasks=label, tiles_per_rank=tiles,
                  **{f"{key.replace('/', '_')}_s": v for key, v in time_s.items()})
        pictures[(label, tiles)] = results["cores"]
    print("ratios: time / static; best both / best single < 1 is where moving cores and data beats either alone")
    cores_run = pictures[("compiled", 64)]
    path = draw_ranks(cores_run.trace, cores_run.makespan, cores, out / "dam-break-cores.png")
    print(f"cores over time (compiled, 64 tiles per rank; sim-K is rank K): {path}")


def draw_ranks(trace: Trace, makespan: float, pool: int, path: Path) -> Path:
    """The stacked cores of every rank of an invasive replay over modeled time (Fig. 8), drawn
    by the study's picture."""
    from shoal.study import PolicyRun, StudySimulation, draw_cores

    starts = np.concatenate(([0.0], np.asarray(trace.step_end)[:-1]))
    cores = trace.cores_per_step()
    ranks = [StudySimulation(r, 0.0, path.parent, start=0.0, end=makespan, exit=0,
                             cores=[(float(t), int(c)) for t, c in zip(starts, cores[:, r], strict=True)])
             for r in range(cores.shape[1])]
    return draw_cores([PolicyRun("invasive", ranks)], pool, path)


def study(bench: Benchmark, out: Path) -> None:
    """§6.4: a small parameter study through ``shoal study``."""
    print("\n§6.4 parameter study")
    if not (Path(__file__).resolve().parents[1] / "src" / "shoal" / "study.py").exists():
        print("needs `shoal study` (shoal.study)")
        return
    cmd = SHOAL + ["study", "swe-tsunami", "--vary", "app.max_level=1,2,2", "--arrive", "0,1,2", "--steps", "20",
                   "--out", str(out / f"study-{time.strftime('%Y%m%d-%H%M%S')}")]
    done = subprocess.run(cmd, capture_output=True, text=True)
    print(done.stdout.rstrip() or (done.stderr.strip().splitlines() or ["?"])[-1])
    bench.add(benchmark="6.4", returncode=done.returncode)


def main() -> None:
    """Run the four benchmarks and print their tables."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(ap)
    ap.add_argument("--cores", type=int, default=40, help="the modeled node's cores (default 40, the paper's)")
    ap.add_argument("--steps", type=int, default=2000, help="steps of the §6.1 loop")
    ap.add_argument("--out", type=Path, default=Path("runs/bench-invasive"), help="folder for runs and pictures")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with Benchmark("invasive", args) as bench:
        trip, request_s = overhead(bench, args.repeats, args.steps)
        swe_overhead(bench, args.repeats)
        real_ramp(bench, args.repeats)
        modeled_ramp(bench, args.cores, trip, request_s, sqrt_seconds())
        dam_break(bench, args.cores, trip, request_s, args.out)
        study(bench, args.out)


if __name__ == "__main__":
    main()
