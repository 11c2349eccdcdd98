"""When to balance: fixed periods against the adaptive trigger, on a trace of the synthetic hot spot.

Records a short trace of ``synthetic-hotspot`` (one node, one worker: every tile's cost, no
placement in it), then replays it under two or three balancing policies, on two cluster sizes
and with two prices of a balancing step:

- ``cheap``: the tiles' recorded state over a fast network (10 GB/s, 1 us), no restart cost;
- ``dear``: 100 times the state over a slow one (100 MB/s, 100 us), and the executor's
  restart at 2 ms.

For each it replays every fixed period of ``--periods`` and ``adaptive``, prints the best
fixed period's makespan beside the adaptive one, and says which wins. Replays use the
trace's measured costs (``costs="measured"``): a replay is deterministic, so the protocol's
median of 5 does not apply to it; the one thing measured on this machine inside it is the
policy's planning time (microseconds, charged to each balancing step), which can move a
decision by a step when the lost time crosses the threshold within that margin. The
recording itself is one run (its costs are the input, not the result).

Run: ``python bench/trigger.py [--steps 80] [--grid 128] [--tiles 256] [--json FILE]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
from pathlib import Path

from common import Benchmark, add_arguments
from shoal.cluster import Network
from shoal.placement.trigger import ADAPTIVE, parse_period
from shoal.replay import ReplayConfig, replay
from shoal.session import run_scenario
from shoal.trace import Trace

PRICES = {
    "cheap": dict(bytes=1, network=Network(latency_s=1e-6, bandwidth_Bps=1e10, overhead_s=1e-6), restart_s=0.0),
    "dear": dict(bytes=100, network=Network(latency_s=1e-4, bandwidth_Bps=1e8, overhead_s=1e-5), restart_s=2e-3),
}


def record(steps: int, grid: int, tiles: int, out: Path) -> Trace:
    """A trace of the synthetic hot spot on one node, one worker."""
    run = run_scenario("synthetic-hotspot", steps=steps, tiles=tiles, nodes=1, workers=1, placement="sfc",
                       set=[f"app.grid=[{grid},{grid}]"], out=out)
    return Trace.read(run.path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=80)
    ap.add_argument("--grid", type=int, default=128, help="cells per axis of the synthetic field")
    ap.add_argument("--tiles", type=int, default=256)
    ap.add_argument("--nodes", default="4,16", help="comma-separated cluster sizes (1 core per node)")
    ap.add_argument("--policies", default="greedy,refine,greedy-refine")
    ap.add_argument("--periods", default="2,5,10,20,40,80")
    add_arguments(ap, repeats=1)
    args = ap.parse_args()
    periods = [parse_period(p) for p in args.periods.split(",")]
    with Benchmark("trigger", args) as bench, tempfile.TemporaryDirectory() as tmp:
        trace = record(args.steps, args.grid, args.tiles, Path(tmp) / "run")
        print(f"trace: {args.steps} steps, {trace.tiling.ntiles} tiles, recorded step "
              f"{trace.step_end[-1] / len(trace.steps) * 1e3:.1f} ms on one core")
        print(f"{'policy':<14}{'nodes':>6}{'price':>7}{'none (s)':>10}{'best fixed':>16}{'adaptive (s)':>14}"
              f"{'balances':>10}{'adaptive/best':>15}  verdict")
        for price, p in PRICES.items():
            priced = dataclasses.replace(trace, tile_bytes=trace.tile_bytes * p["bytes"])
            for nodes in (int(n) for n in args.nodes.split(",")):
                base = dict(nodes=nodes, cores=1, network=p["network"], restart_s=p["restart_s"], costs="measured",
                            initial="sfc")
                static = replay(priced, ReplayConfig(placement="sfc", **base)).makespan
                for policy in args.policies.split(","):
                    runs = {k: replay(priced, ReplayConfig(placement=policy, period=k, **base))
                            for k in [*periods, ADAPTIVE]}
                    fixed = {k: r.makespan for k, r in runs.items() if k != ADAPTIVE}
                    best = min(fixed, key=fixed.get)
                    ada = runs[ADAPTIVE]
                    ratio = ada.makespan / fixed[best]
                    beaten = [k for k, v in fixed.items() if v < ada.makespan]
                    verdict = "adaptive beats every fixed period" if not beaten else \
                        f"fixed {','.join(map(str, beaten))} beat(s) adaptive"
                    balances = len(ada.trace.balance["step"])
                    print(f"{policy:<14}{nodes:>6}{price:>7}{static:>10.3f}{f'{best}: {fixed[best]:.3f}':>16}"
                          f"{ada.makespan:>14.3f}{balances:>10}{ratio:>15.3f}  {verdict}")
                    bench.add(policy=policy, nodes=nodes, price=price, static_s=static, fixed_s=fixed,
                              adaptive_s=ada.makespan, adaptive_balances=balances,
                              adaptive_steps=ada.trace.balance["step"].tolist())


if __name__ == "__main__":
    main()
