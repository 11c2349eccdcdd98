"""The contact-mechanics paper's balancing results in miniature, from a recorded cloth run.

1. **Record.** The ``cloth-twister`` scenario (the paper's twister in miniature: a sheet rolled
   onto a spinning rod and unrolled again, so contact rises from none and falls back; or
   ``--scene twist``, the brief's S2, a sheet wrung by its two clamped edges) at ``--n``
   vertices a side on ``--parts`` METIS parts, for ``--seconds`` of simulated time, two
   workers, the ``locality`` job policy.
2. **Fig. 10.** Per window, the CPU seconds of the force phases (``material``, ``contact``,
   ``share``) and of detection (``bounds``, the jobs, ``agree``), beside the pairs in contact:
   whether detection's share grows with the contacts, as the paper's does when contacts are
   many.
3. **Figs. 3 and 5.** The trace replayed on modeled clusters (``--clusters`` nodes x cores, at
   most one part per core) under the job policies ``even``, ``profiled`` and ``locality``: per
   window, the detection jobs' busiest node over the mean node (from the predicted trace's job
   rows), and the predicted time per window (a replay of measured costs is deterministic: run
   once per setup). The paper's numbers (−5x with profiling at 96
   cores, a further −70 % with locality and the node level) were measured on 12–192 cores of a
   100k-vertex twister: a few dozen parts of a few thousand vertices can show the direction, not
   the size.
4. **What the paper left for later (§VIII): penalty load balanced across nodes by migrating
   parts.** The same replays with the parts placed by METIS once (static) against Charm++'s
   ``greedy`` and ``refine`` every ``--period`` windows, under the ``locality`` job policy.
   (The paper's Alg. 4, which shares a node's penalty work among its cores, is not in shoal:
   a contact group runs in key order on one part, which is what keeps the bits.)
5. **Alg. 2's decision cost.** The ``locality`` policy placing the recorded windows' jobs, timed
   per call (the paper: 1.5 ms at 192 cores).

Run: ``python bench/cloth_balance.py --n 17 --parts 24`` (the twister, 3 s), or
``--scene twist --n 25 --seconds 1.6``.
"""

from __future__ import annotations

import argparse
import re
import tempfile
import time
from pathlib import Path

import numpy as np

from common import Benchmark, add_arguments, median_spread
from shoal.cluster import Cluster
from shoal.graphics.canvas import new_figure, save_figure
from shoal.placement.job_policies import job_policy
from shoal.placement.jobs import job_table
from shoal.replay import ReplayConfig, replay
from shoal.session import run_scenario
from shoal.trace import Trace

SCENES = {"twister": (0.5, 3.0), "twist": (1.0, 1.6)}  # the sheet's side (m) and the seconds recorded
FORCES = re.compile(r"(material|contact|share)\d+")
DETECTION = ("bounds", "detect", "agree")


def phase_seconds(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """Per step (window), the CPU seconds of the force phases' tasks and of detection's (its
    phases' tasks and its jobs), over all attempts."""
    steps = int(trace.tasks["step"].max()) + 1
    names = np.array(trace.phases)
    phase = trace.tasks["phase"]
    forces = np.array([bool(FORCES.fullmatch(name)) for name in names])[phase]
    detect = np.isin(names, DETECTION)[phase]
    cost, step = trace.tasks["cost"], trace.tasks["step"]
    f = np.bincount(step[forces], cost[forces], minlength=steps)
    d = np.bincount(step[detect], cost[detect], minlength=steps)
    if trace.jobs is not None and len(trace.jobs["step"]):
        d += np.bincount(trace.jobs["step"], trace.jobs["cost"], minlength=steps)
    return f, d


def job_imbalance(trace: Trace) -> float:
    """The detection jobs' busiest node over the mean node, per window and attempt, medianed."""
    jobs = trace.jobs
    nodes = trace.cluster.nodes
    ratios = []
    for key in np.unique(np.stack([jobs["step"], jobs["iteration"]]), axis=1).T:
        on = (jobs["step"] == key[0]) & (jobs["iteration"] == key[1])
        load = np.bincount(jobs["node"][on], jobs["end"][on] - jobs["start"][on], minlength=nodes)
        if load.mean() > 0:
            ratios.append(load.max() / load.mean())
    return float(np.median(ratios)) if ratios else float("nan")


def decision_cost(trace: Trace, nodes: int, cores: int, repeats: int) -> tuple[float, float]:
    """Seconds per call of the ``locality`` policy placing one recorded window's jobs on
    ``nodes`` x ``cores`` (the window with the most jobs; the tiles placed round-robin): the
    median of ``repeats`` timings of 20 calls each, and their spread."""
    jobs = trace.jobs
    first = jobs["first"] == 0
    keys = np.stack([jobs["step"][first], jobs["iteration"][first]])
    counts = {tuple(k): int(((keys[0] == k[0]) & (keys[1] == k[1])).sum()) for k in np.unique(keys, axis=1).T}
    step, iteration = max(counts, key=counts.get)
    on = first & (jobs["step"] == step) & (jobs["iteration"] == iteration)
    table = job_table(jobs["a"][on], jobs["b"][on], cost=jobs["predicted"][on], size=jobs["stop"][on],
                      job=jobs["job"][on])
    cluster = Cluster.uniform(nodes, cores)
    owner = np.arange(trace.tiling.ntiles) % nodes
    policy = job_policy("locality")
    per_call = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(20):
            policy.place(table, owner, cluster)
        per_call.append((time.perf_counter() - start) / 20)
    return median_spread(per_call)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scene", choices=SCENES, default="twister", help="the scenario recorded (default twister)")
    ap.add_argument("--n", type=int, default=17, help="vertices along a side (default 17)")
    ap.add_argument("--parts", type=int, default=24, help="METIS parts (default 24)")
    ap.add_argument("--seconds", type=float, help="simulated seconds recorded (default: the twister's 3, up and "
                                                   "down; the twist's 1.6, past the onset of self-contact)")
    ap.add_argument("--clusters", nargs="+", default=["2x4", "4x4", "4x6"],
                    help="modeled nodes x cores (default 2x4 4x4 4x6)")
    ap.add_argument("--task-overhead", type=float, default=None,
                    help="the modeled executor's own seconds per task, e.g. 1e-6 for Charm++'s (default: none beyond "
                         "the measured costs)")
    ap.add_argument("--period", type=int, default=20, help="windows between the dynamic policies' balancing steps "
                                                            "(default 20)")
    ap.add_argument("--trace", type=Path, help="replay this recorded run instead of recording one")
    ap.add_argument("--figure", type=Path, help="write the per-window figure (Fig. 10's) here")
    add_arguments(ap)
    args = ap.parse_args()
    with Benchmark("cloth_balance", args) as bench, tempfile.TemporaryDirectory(prefix="shoal-cloth-") as scratch:
        if args.trace is None:
            size, seconds = SCENES[args.scene]
            seconds = args.seconds or seconds
            dt = 0.016 * size / (args.n - 1)  # the scenarios' step at this spacing
            steps = round(seconds / (10 * dt))
            start = time.perf_counter()
            rec = run_scenario(f"cloth-{args.scene}", steps=steps, nodes=1, workers=2, tiles=args.parts,
                               out=Path(scratch) / args.scene,
                               set=[f"app.n={args.n}", f"app.dt={dt!r}", "run.frame_every=0"])
            print(f"recorded cloth-{args.scene}, {args.n * args.n} vertices on {args.parts} parts, {steps} windows "
                  f"({seconds} s) in {time.perf_counter() - start:.0f} s", flush=True)
            path = rec.path
            log = rec.state()["windows"]
        else:
            path, log = args.trace, np.load(Path(args.trace) / "state" / "final.npz")["windows"]
        trace = Trace.read(path)
        forces, detection = phase_seconds(trace)
        pairs = log[:, 2]
        share = detection / np.maximum(forces + detection, 1e-300)
        order = np.argsort(pairs, kind="stable")
        few, many = order[:len(order) // 3], order[-max(len(order) // 10, 1):]  # the fewest third, the most tenth
        print(f"Fig. 10: detection's share of a window's CPU time {np.median(share[few]):.0%} over the third of the "
              f"windows with the fewest pairs in contact (median {np.median(pairs[few]):.0f}), "
              f"{np.median(share[many]):.0%} over the tenth with the most (median {np.median(pairs[many]):.0f}; "
              f"detection {np.median(detection[many] / np.maximum(detection[few].mean(), 1e-300)):.1f}x and forces "
              f"{np.median(forces[many] / np.maximum(forces[few].mean(), 1e-300)):.1f}x their cost without contact); "
              "the paper: detection overtakes forces when contacts are many")
        if args.figure:
            fig = new_figure(7.0, 4.5)
            ax, right = fig.subplots(2, 1, sharex=True)
            t = log[:, 0]
            ax.plot(t, forces * 1e3, label="forces (material, contact, share)")
            ax.plot(t, detection * 1e3, label="detection (bounds, jobs, agree)")
            ax.set_ylabel("CPU ms per window")
            ax.legend(fontsize="small")
            right.plot(t, pairs, color="C2")
            right.set_ylabel("pairs in contact")
            right.set_xlabel("simulated time (s)")
            save_figure(fig, args.figure)
        results = {"share_few": float(np.median(share[few])), "share_many": float(np.median(share[many]))}
        for spec in args.clusters:
            nodes, cores = map(int, spec.split("x"))
            row = []
            for policy in ("even", "profiled", "locality"):  # (a replay of measured costs is deterministic: once)
                out = replay(trace, ReplayConfig(nodes=nodes, cores=cores, placement="metis", job_policy=policy,
                                                 costs="measured", task_overhead_s=args.task_overhead))
                imbalance = job_imbalance(out.trace)
                results[f"{spec}_{policy}_window_ms"] = out.makespan / len(log) * 1e3
                results[f"{spec}_{policy}_job_imbalance"] = imbalance
                row.append(f"{policy} {out.makespan / len(log) * 1e3:.1f} ms per window, jobs' busiest node "
                           f"{imbalance:.2f}x the mean")
            print(f"{spec} modeled cores: " + "; ".join(row), flush=True)
            row = []
            for placement, period in (("metis", 0), ("greedy", args.period), ("refine", args.period)):
                out = replay(trace, ReplayConfig(nodes=nodes, cores=cores, placement=placement, period=period,
                                                 initial="metis", job_policy="locality", costs="measured",
                                                 task_overhead_s=args.task_overhead))
                results[f"{spec}_{placement}_window_ms"] = out.makespan / len(log) * 1e3
                row.append(f"{placement}{f'/{period}' if period else ''} {out.makespan / len(log) * 1e3:.1f} ms")
            print("  parts migrated by Charm++'s balancers (locality jobs): " + ", ".join(row) + " per window",
                  flush=True)
        for nodes, cores in ((16, 12), (1, 24)):
            cost, spread = decision_cost(trace, nodes, cores, args.repeats)
            results[f"decision_{nodes * cores}_ms"] = cost * 1e3
            print(f"Alg. 2 placing one window's jobs ({trace.tiling.ntiles} parts) on {nodes} x {cores} modeled cores: "
                  f"{cost * 1e3:.2f} ms per call ±{spread:.0%} (the paper: 1.5 ms at 192 cores, 100k vertices)")
        bench.add(scene=args.scene, n=args.n, parts=args.parts, seconds=args.seconds, clusters=args.clusters, **results)


if __name__ == "__main__":
    main()
