"""The invasive paper's four benchmarks (§6.1-6.4), runnable on any core count.

- §6.1: what talking to the resource manager costs a very small step loop: no manager, a
  blocking invade per step, a non-blocking invade and poll per step (real, here). A non-blocking
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
- §6.3: the radial dam break (app swe) on 4 ranks owning fixed quarters, replayed on a modeled
  node with the manager; the stacked cores-over-time picture (Fig. 8).
- §6.4: the parameter study, through ``shoal study`` with a small study.

Run: ``python bench/invasive.py [--cores 40] [--repeats 5] [--out DIR]``.
"""

from __future__ import annotations

import argparse
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
from shoal.trace import Trace

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


def dam_break(bench: Benchmark, cores: int, trip: float, request_s: float, out: Path) -> None:
    """§6.3: the radial dam break on 4 ranks owning fixed quarters, cores following the wave.

    Replayed as a compiled executor (no interpreter lock: the paper's C++ ranks), so that the
    comparison is the manager's, not Python's threads'."""
    print(f"\n§6.3 radial dam break, 4 ranks on quarters, replayed on a modeled {cores}-core node")
    run = out / "dam-break-run"
    if not (run / "summary.json").exists():
        cmd = SHOAL + ["run", "swe-radial-dam-break", "--steps", "120", "--nodes", "4", "--placement", "geometric",
                       "--tiles-per-core", "16", "--out", str(run)]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode:
            print(f"not recorded: {(done.stderr.strip().splitlines() or ['?'])[-1]}")
            return
    trace = Trace.read(run / "trace.h5")
    # workload: the mean of the last 4 steps (the scenario regrids every 4), so the shares do not chase
    # one step's noise with cores that idle in transit
    inv = InvasiveConfig(cores=cores, release_delay_s=2.0 * trip, request_s=request_s, window=4)
    # Cores only (the paper), data only (GreedyLB every 4 steps, tiles migrate), both (shoal's), each
    # against the static quarters; on the recorded run, on one whose every task costs 50 times as
    # much (a finer grid), where the manager's latency matters less, and on that one again where
    # moving bytes between ranks is 1000 times dearer (halos and migrations: a slow interconnect).
    setups = {"static": dict(placement="geometric", cores=cores // 4),
              "cores (invasive)": dict(placement="geometric", invasive=inv),
              "data (greedy/4)": dict(placement="greedy", period=4, initial="geometric", cores=cores // 4),
              "cores and data": dict(placement="greedy", period=4, initial="geometric", invasive=inv)}
    print("| tasks cost | " + " | ".join(setups) + " |")
    print("|---|" + "---|" * len(setups))
    pictures = {}
    dear = Network(latency_s=NODE.latency_s, overhead_s=NODE.overhead_s, bandwidth_Bps=NODE.bandwidth_Bps / 1000)
    for label, speed, network in (("as recorded", 1.0, NODE), ("x 50", 1 / 50, NODE),
                                  ("x 50, bytes 1000x dearer", 1 / 50, dear)):
        results = {name: replay(trace, ReplayConfig(nodes=4, network=network, gil="none", speed=speed, **kw))
                   for name, kw in setups.items()}
        static = results["static"].makespan
        cells = [f"{r.makespan:.4g} s ({r.makespan / static:.3f})" for r in results.values()]
        print(f"| {label} | " + " | ".join(cells) + " |")
        keys = ("static_s", "cores_only_s", "data_only_s", "both_s")
        bench.add(benchmark="6.3", cores=cores, speed=speed, bandwidth=network.bandwidth_Bps,
                  **{key: r.makespan for key, r in zip(keys, results.values(), strict=True)})
        pictures[label] = results["cores (invasive)"]
    picture = draw_cores(pictures["x 50"].trace, out / "dam-break-cores.png", cores)
    print(f"cores over time (tasks x 50): {picture}")


def draw_cores(trace: Trace, path: Path, pool: int) -> Path:
    """The stacked cores of every rank over modeled time (Fig. 8)."""
    from shoal.report.canvas import new_figure, node_colors, save_figure

    cores = trace.cores_per_step()
    ends = np.asarray(trace.step_end)
    fig = new_figure(8, 3.5)
    ax = fig.add_subplot()
    colours = node_colors(cores.shape[1])
    ax.stackplot(np.concatenate(([0.0], ends)), *np.vstack((cores[:1], cores)).T, step="pre",
                 labels=[f"rank {r}" for r in range(cores.shape[1])],
                 colors=[colours(r) for r in range(cores.shape[1])])
    ax.set(xlabel="modeled time (s)", ylabel="cores", ylim=(0, pool), title="cores per rank (invasive replay)")
    ax.legend(loc="upper right", fontsize="small")
    return save_figure(fig, path)


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
        real_ramp(bench, args.repeats)
        modeled_ramp(bench, args.cores, trip, request_s, sqrt_seconds())
        dam_break(bench, args.cores, trip, request_s, args.out)
        study(bench, args.out)


if __name__ == "__main__":
    main()
