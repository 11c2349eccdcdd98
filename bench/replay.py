"""Replay speed: task events per second and the wall time of a large replay.

Builds, in memory, the trace of 1152 cores x 4 tiles per core (a 72 x 64 tiling), 3 phases
per step (halos before the second), a hot spot of cost moving across the grid, and replays
600 steps of it on 64 nodes x 18 cores under Birdshot, then under GreedyLB every 20 steps.
Baseline, measured in the same run: the same replay with the MPI reference model is not a
baseline of speed, so the figure printed next to ours is a plain Python event loop over the
same tasks (heap of completions, FIFO per node), timed on the first steps. Every replay is
repeated (``--repeats``, default 5): medians and spreads, the ratio taken within each repeat.

Run: ``python bench/replay.py [--steps 600] [--repeats 5] [--json FILE]``.
"""

from __future__ import annotations

import argparse
import heapq
import time

import numpy as np

from common import Benchmark, add_arguments, repeat
from shoal.cluster import Cluster
from shoal.replay import ReplayConfig, replay
from shoal.tiling import Tiling
from shoal.trace import Trace


def synthetic_trace(counts=(72, 64), steps=600, seed=0) -> Trace:
    tiling = Tiling.from_counts((counts[0] * 8, counts[1] * 8), counts)
    T, P = tiling.ntiles, 3
    rng = np.random.default_rng(seed)
    ij = np.indices(counts).reshape(2, -1).T / np.array(counts)
    cost = np.empty((steps, P, T))
    for s in range(steps):
        centre = np.array([0.2 + 0.6 * s / steps, 0.5])
        hot = np.exp(-((ij - centre) ** 2).sum(axis=1) / 0.02)
        cost[s] = 1e-4 * (1 + 4 * hot)[None, :] * rng.uniform(0.9, 1.1, (P, T))
    src = np.concatenate([np.full(len(nb), t) for t, nb in enumerate(tiling.neighbours)])
    dst = np.concatenate(tiling.neighbours)
    m = len(src)
    n = steps * P * T
    step = np.repeat(np.arange(steps), P * T)
    return Trace(
        tasks={"step": step, "phase": np.tile(np.repeat(np.arange(P), T), steps),
               "tile": np.tile(np.arange(T), steps * P),
               "node": np.zeros(n), "worker": np.zeros(n), "start": np.zeros(n), "end": np.zeros(n),
               "cost": cost.ravel(), "work": np.ones(n)},
        messages={"step": np.repeat(np.arange(steps), m), "phase": np.ones(steps * m), "src": np.tile(src, steps),
                  "dst": np.tile(dst, steps), "bytes": np.full(steps * m, 8 * 64)},
        phases=["a", "b", "c"], tiling=tiling, cluster=Cluster.uniform(1, 1), placement_steps=np.array([0]),
        placement_owners=np.zeros((1, T), int), step_end=np.zeros(steps), tile_bytes=np.full(T, 64 * 64 * 8),
    )


def python_event_loop(cost: np.ndarray, owner: np.ndarray, cores: int, nodes: int) -> tuple[int, float]:
    """A plain Python discrete-event loop over the same tasks (no messages): the baseline."""
    S, P, T = cost.shape
    t0 = time.perf_counter()
    queues = [list() for _ in range(nodes)]
    for t in range(T):
        queues[owner[t]].append(t)
    free = [cores] * nodes
    heap, events, nxt = [], 0, {}
    for node in range(nodes):
        while free[node] and queues[node]:
            t = queues[node].pop(0)
            free[node] -= 1
            heapq.heappush(heap, (cost[0, 0, t], t, 0))
    while heap:
        now, t, k = heapq.heappop(heap)
        events += 1
        node = owner[t]
        free[node] += 1
        if k + 1 < S * P:
            queues[node].append(t)
            nxt[t] = k + 1
        while free[node] and queues[node]:
            u = queues[node].pop(0)
            free[node] -= 1
            ku = nxt.get(u, 0)
            heapq.heappush(heap, (now + cost[ku // P, ku % P, u], u, ku))
    return events, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=600)
    add_arguments(ap)
    args = ap.parse_args()
    with Benchmark("replay", args) as bench:
        trace = synthetic_trace(steps=args.steps)
        T = trace.tiling.ntiles
        print(f"trace: {T} tiles x 3 phases x {args.steps} steps = {T * 3 * args.steps:,} tasks, "
              f"{len(trace.messages['src']):,} messages; medians ± spread of {args.repeats} replays")
        replay(synthetic_trace(steps=2), ReplayConfig(nodes=64, cores=18, placement="birdshot"))  # compile
        for name, cfg in [("birdshot", ReplayConfig(nodes=64, cores=18, placement="birdshot")),
                          ("greedy/20", ReplayConfig(nodes=64, cores=18, placement="greedy", period=20))]:
            st = repeat(lambda cfg=cfg: timed_replay(trace, cfg), args.repeats)
            wall, engine = st["wall_s"].show(digits=1, unit=" s"), st["engine_s"].show(digits=1, unit=" s")
            print(f"{name:<10} replay wall {wall} (engine {engine}), {st['events'].median:,.0f} events, "
                  f"{st['events_per_s'].show(1e-6, unit=' M events/s')}; "
                  f"predicted step {st['step_s'].median * 1e3:.3f} ms")
            bench.add(case=name, **st)

        st = repeat(lambda: against_python_loop(T), args.repeats)
        python, ours = (st[k].show(1e-6, unit=" M events/s") for k in ("python_events_per_s", "shoal_events_per_s"))
        print(f"baseline: plain Python event loop (tasks only) {python}; shoal engine on the same 20 steps "
              f"(tasks and messages) {ours} -> ratio {st['ratio'].show(digits=1, unit='x')}")
        bench.add(case="baseline", **st)


def against_python_loop(T: int) -> dict:
    """Both event loops on the same 20 steps of ``T`` tiles, one after the other: their rates and ratio."""
    events, base_wall = python_event_loop(np.zeros((20, 3, T)) + 1e-4, np.arange(T) % 64, 18, 64)
    r = replay(synthetic_trace(steps=20), ReplayConfig(nodes=64, cores=18, placement="birdshot"))
    ours, theirs = r.events / r.sim_wall_s, events / base_wall
    return {"python_events_per_s": theirs, "shoal_events_per_s": ours, "ratio": ours / theirs}


def timed_replay(trace: Trace, cfg: ReplayConfig) -> dict:
    """One replay: its wall time, the engine's, its events and rate, and the predicted step."""
    tic = time.perf_counter()
    r = replay(trace, cfg)
    wall = time.perf_counter() - tic
    return {"wall_s": wall, "engine_s": r.sim_wall_s, "events": r.events, "events_per_s": r.events / r.sim_wall_s,
            "step_s": r.summary()["step_time_mean_s"]}


if __name__ == "__main__":
    main()
