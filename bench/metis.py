"""METIS against birdshot, sfc and GreedyLB in a replayed dam break: predicted time and bytes moved.

Records ``sph-dam-break`` once per repeat (one node, one worker, 4 tiles per core
of the largest cluster, frames off) into a temporary folder, then replays the trace at 4 tiles
per core on 8 nodes x 8 cores and on 32 nodes x 18 cores (Birdshot's FLIP and Figure 9 setups)
under the static ``birdshot``, ``sfc`` and ``metis``, and under ``greedy`` and
``metis-periodic`` re-placing every ``--period`` steps (both starting from ``sfc``). For each it
prints the predicted time per step and its ratio to ``sfc`` (the baseline, replayed from the same
recording), the load-imbalance factor, and the bytes moved between nodes: halo bytes (messages
whose two tiles sit on different nodes at that step) and migration bytes (tiles' state moved by
balancing steps). The recording is repeated (``--repeats``, default 5) and each recording
replayed under every policy: the medians and spreads are those of the predictions, whose
scatter comes from the recorded costs (sampi §V).

Run: ``python bench/metis.py [--steps 60] [--period 20] [--repeats 5] [--json FILE]``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from common import Benchmark, add_arguments, repeat
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


def label_of(name: str, dynamic: bool, period: int) -> str:
    return f"{name}/{period}" if dynamic else name


def one_repeat(steps: int, period: int) -> dict:
    """A fresh recording replayed under every policy: per (nodes, cores, label, quantity) one value."""
    with tempfile.TemporaryDirectory() as tmp:
        trace = record(steps, Path(tmp) / "dam-break")
    out = {}
    for nodes, cores in CLUSTERS:
        for name, dynamic in POLICIES:
            r = replay(trace, ReplayConfig(nodes=nodes, cores=cores, placement=name, tiles_per_core=TILES_PER_CORE,
                                           period=period if dynamic else 0))
            s = r.summary()
            key = (nodes, cores, label_of(name, dynamic, period))
            out[(*key, "step_s")] = s["step_time_mean_s"]
            out[(*key, "lif")] = s["lif_mean"]
            out[(*key, "halo_B")] = halo_bytes_between_nodes(r.trace)
            out[(*key, "migrated_B")] = s["migrated_bytes"]
            plans = r.trace.balance["plan_s"] if r.trace.balance is not None else []
            out[(*key, "plan_s")] = float(np.mean(plans)) if len(plans) else 0.0
        for name, dynamic in POLICIES:  # the baseline's ratio within the repeat, on the same recording
            label = label_of(name, dynamic, period)
            out[(nodes, cores, label, "vs_sfc")] = out[(nodes, cores, "sfc", "step_s")] / out[(nodes, cores, label,
                                                                                              "step_s")]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--period", type=int, default=20)
    add_arguments(ap)
    args = ap.parse_args()
    with Benchmark("metis", args) as bench:
        stats = repeat(lambda: one_repeat(args.steps, args.period), args.repeats)
        header = (f"{'cluster':<9} {'placement':<18} {'step ms':>12} {'vs sfc':>12} {'LIF':>5} {'halo MB':>8} "
                  f"{'migr. MB':>8} {'total MB':>8} {'plan ms':>11}")
        print(header)
        print("-" * len(header))
        for nodes, cores in CLUSTERS:
            for name, dynamic in POLICIES:
                label = label_of(name, dynamic, args.period)
                row = {q: stats[(nodes, cores, label, q)] for q in ("step_s", "vs_sfc", "lif", "halo_B",
                                                                     "migrated_B", "plan_s")}
                halo, migrated = row["halo_B"].median, row["migrated_B"].median
                print(f"{nodes:>2} x {cores:<4} {label:<18} {row['step_s'].show(1e3, 3):>12} "
                      f"{row['vs_sfc'].show(unit='x'):>12} {row['lif'].median:5.2f} {halo / 1e6:8.2f} "
                      f"{migrated / 1e6:8.2f} {(halo + migrated) / 1e6:8.2f} {row['plan_s'].show(1e3):>11}")
                bench.add(nodes=nodes, cores=cores, placement=label, **row)
        print(f"medians ± spread of {args.repeats} recordings, each replayed under every policy; "
              f"{max(n * c for n, c in CLUSTERS) * TILES_PER_CORE} recorded tiles aggregated to {TILES_PER_CORE} "
              "per core; 'vs sfc': sfc's predicted step over this one's on the same recording (above 1: faster); "
              "MB over the whole replay.")


if __name__ == "__main__":
    main()
