"""METIS against birdshot, sfc and GreedyLB in a replayed dam break: predicted time and bytes moved.

Records ``sph-dam-break`` once per run of the benchmark (one node, one worker, 4 tiles per core
of the largest cluster, frames off) into a temporary folder, then replays the trace at 4 tiles
per core on 8 nodes x 8 cores and on 32 nodes x 18 cores (Birdshot's FLIP and Figure 9 setups)
under the static ``birdshot``, ``sfc`` and ``metis``, and under ``greedy`` and
``metis-periodic`` re-placing every ``--period`` steps (both starting from ``sfc``). For each it
prints the predicted time per step and its ratio to ``sfc`` (the baseline, replayed in the same
run), the load-imbalance factor, and the bytes moved between nodes: halo bytes (messages whose
two tiles sit on different nodes at that step) and migration bytes (tiles' state moved by
balancing steps).

Run: ``python bench/metis.py [--steps 60] [--period 20]``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from common import host
from shoal.replay import ReplayConfig, replay
from shoal.session import run_scenario
from shoal.trace import Trace

CLUSTERS = [(8, 8), (32, 18)]
TILES_PER_CORE = 4
POLICIES = [("birdshot", False), ("sfc", False), ("metis", False), ("greedy", True), ("metis-periodic", True)]


def halo_bytes_between_nodes(trace: Trace) -> int:
    """Bytes of the halo messages whose sender and reader were on different nodes at that step."""
    m = trace.messages
    which = np.searchsorted(trace.placement_steps, m["step"], side="right") - 1
    owners = trace.placement_owners
    remote = owners[which, m["src"]] != owners[which, m["dst"]]
    return int(m["bytes"][remote].sum())


def record(steps: int, folder: Path) -> Trace:
    tiles = max(n * c for n, c in CLUSTERS) * TILES_PER_CORE
    tic = time.perf_counter()
    rec = run_scenario("sph-dam-break", steps=steps, tiles=tiles, nodes=1, workers=1, out=folder,
                       set=["run.frame_every=0"])
    print(f"recorded {steps} steps of sph-dam-break on {tiles} tiles in {time.perf_counter() - tic:.0f} s")
    return rec.trace


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--period", type=int, default=20)
    args = ap.parse_args()
    print(host())
    with tempfile.TemporaryDirectory() as tmp:
        trace = record(args.steps, Path(tmp) / "dam-break")
    header = (f"{'cluster':<9} {'placement':<18} {'step ms':>8} {'vs sfc':>7} {'LIF':>5} {'halo MB':>8} "
              f"{'migr. MB':>8} {'total MB':>8} {'plan ms':>8}")
    print(header)
    print("-" * len(header))
    for nodes, cores in CLUSTERS:
        rows = []
        for name, dynamic in POLICIES:
            r = replay(trace, ReplayConfig(nodes=nodes, cores=cores, placement=name, tiles_per_core=TILES_PER_CORE,
                                           period=args.period if dynamic else 0))
            s = r.summary()
            halo = halo_bytes_between_nodes(r.trace)
            plan = r.trace.balance["plan_s"].mean() * 1e3 if r.trace.balance is not None else 0.0
            label = f"{name}/{args.period}" if dynamic else name
            rows.append((label, s["step_time_mean_s"], s["lif_mean"], halo, s["migrated_bytes"], plan))
        base = next(row[1] for row in rows if row[0] == "sfc")
        for label, step, lif, halo, migrated, plan in rows:
            print(f"{nodes:>2} x {cores:<4} {label:<18} {step * 1e3:8.3f} {base / step:6.2f}x {lif:5.2f} "
                  f"{halo / 1e6:8.2f} {migrated / 1e6:8.2f} {(halo + migrated) / 1e6:8.2f} {plan:8.2f}")
    print(f"{trace.tiling.ntiles} recorded tiles aggregated to {TILES_PER_CORE} per core; 'vs sfc': sfc's predicted "
          "step over this one's (above 1: faster); MB over the whole replay.")


if __name__ == "__main__":
    main()
