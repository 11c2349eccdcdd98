"""Face stencils against all neighbours: messages and wall time per step of the seismic and
shallow-water apps on many small tiles, with their halo phases reading face neighbours only
(after) and every neighbour (before).

Neither app reads a diagonal cell, so before the port each tile sent its neighbours across
edges and corners an empty payload: 4 of the 8 messages of an interior tile per halo phase.
"Before" is the same app with every halo phase forced back to ``reads="all"``
(``dataclasses.replace``) and packers that give those neighbours an empty payload as the apps
did (``dict.fromkeys`` over every neighbour, then the face neighbours' payloads: one dict
merge per packing call more than they did, well under a microsecond); "after" is the app as it
is. Both give the same bits, which the first round checks.

The cases, each on ``--tiles`` tiles (default 64 and 256) of one node of ``--workers``
workers (default 2), ``--steps`` steps (default 30) of which the first ``SKIP`` are left out
of the time (the kernels' first calls, the first halos):

``seismic-3d``  ``seismic-halfspace`` on 48 x 48 x 16 cells (x-y columns of 6 x 6 or 3 x 3):
                2 halo phases a step;
``seismic-2d``  ``seismic-layered-2d`` on 512 x 48 cells (columns of 8 or 2): one row of
                tiles, so no tile has a diagonal neighbour and nothing changes (the control);
``swe``         ``swe-radial-dam-break`` on 16 x 16 root blocks of 4 cells, levels 0-2 (tiles
                of 2 x 2 blocks or 1): 1 halo phase a step, 2 more on the regrid steps (every 4).

Messages per step are the message rows of the run over its steps (the empty ones in
brackets); the wall time per step is the mean over the steps counted; the CPU time per step is
the process's (every thread's) over the whole run, less sensitive than the wall time to other
programs on a shared host (the host's load is printed at the start and at the end). Every round
runs before and
after on every case, alternating which goes first; every figure is the median of
``--repeats`` rounds (default 5) with its spread, and the ratio after / before is taken within
each round.

Run: ``python bench/stencils.py [--tiles 64 256] [--workers 2] [--steps 30] [--cases seismic-3d
seismic-2d swe] [--repeats 5] [--json FILE]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import numpy as np

from common import Benchmark, Stat, add_arguments
from shoal.apps import get_app
from shoal.apps.seismic.app import SeismicApp
from shoal.apps.swe.app import EMPTY, SWEApp
from shoal.cluster import Cluster
from shoal.config import load_scenario
from shoal.placement import get_policy
from shoal.runtime import LocalExecutor, Phase
from shoal.tiling import Tiling

CASES = {
    "seismic-3d": ("seismic-halfspace", ["app.cells=[48,48,16]", "app.absorbing=4", "app.f0=6.0", "app.t0=0.2",
                                         "app.points_per_wavelength=2", "app.source_at=[2400.0,2400.0,800.0]",
                                         "app.receivers=[]"]),
    "seismic-2d": ("seismic-layered-2d", ["app.cells=[512,48]", "app.absorbing=5", "app.source_at=[6400.0,200.0]",
                                          "app.receivers=[]"]),
    "swe": ("swe-radial-dam-break", ["app.block=4"]),
}
SKIP = 3  # first steps left out of the time


def every_neighbour(phases: tuple[Phase, ...]) -> tuple[Phase, ...]:
    """The phases with every halo phase reading all neighbours: faces, edges and corners."""
    return tuple(dataclasses.replace(p, reads="all") if p.halo else p for p in phases)


class SeismicBefore(SeismicApp):
    """The seismic app as it ran before its port: halos from every neighbour, an empty array
    from those across corners."""

    def __init__(self, params, steps: int):
        super().__init__(params, steps)
        self.phases = every_neighbour(self.phases)

    def _pack(self, fields, src, tiling):
        out = dict.fromkeys(map(int, tiling.neighbours[src]), np.empty(0, dtype=self.dtype))
        out.update(super()._pack(fields, src, tiling))
        return out


class SWEBefore(SWEApp):
    """The shallow-water app as it ran before its port: halos from every neighbour, empty
    strips and target levels from those across corners."""

    def __init__(self, params, steps: int):
        super().__init__(params, steps)
        self.phases = every_neighbour(self.phases)

    def pack_strips(self, state, src, tiling):
        out = dict.fromkeys((int(t) for t in tiling.neighbours[src]), EMPTY)
        out.update(super().pack_strips(state, src, tiling))
        return out

    def pack_targets(self, state, src, tiling):
        out = dict.fromkeys((int(t) for t in tiling.neighbours[src]), EMPTY["lev"])
        out.update(super().pack_targets(state, src, tiling))
        return out


BEFORE = {"seismic": SeismicBefore, "swe": SWEBefore}


def apps(case: str, ntiles: int, steps: int):
    """The case's app before and after, and its tiling, kernels compiled."""
    scenario, assignments = CASES[case]
    sc = load_scenario(scenario).override(assignments)
    after = get_app(sc.app).build(sc.params, steps)
    before = BEFORE[sc.app](sc.params, steps)
    tiling = Tiling.from_count(after.grid, ntiles)
    for app in (before, after):
        app.check_tiling(tiling)
        app.prepare(tiling)
    return before, after, tiling


def measure(app, tiling: Tiling, workers: int, steps: int):
    """One run: messages per step, empty messages per step, wall seconds per step (steps
    ``SKIP``+), CPU seconds per step (the whole run), and the final states."""
    cluster = Cluster.uniform(1, workers)
    with LocalExecutor(app, tiling, cluster, get_policy("sfc").place(tiling, cluster, 0)) as ex:
        cpu = time.process_time()
        res = ex.run(steps)
        cpu = time.process_time() - cpu
    m = res.messages
    return (len(m["src"]) / steps, int((m["bytes"] == 0).sum()) / steps,
            float(np.diff(res.step_end[SKIP - 1:]).mean()), cpu / steps, res.states)


def same_bits(a: dict, b: dict) -> bool:
    """Whether two gathered states are the same bits."""
    return a.keys() == b.keys() and all(np.array_equal(np.atleast_1d(a[k]).view(np.uint8),
                                                       np.atleast_1d(b[k]).view(np.uint8)) for k in a)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tiles", type=int, nargs="+", default=[64, 256])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--cases", nargs="+", choices=sorted(CASES), default=list(CASES))
    add_arguments(ap)
    args = ap.parse_args()
    with Benchmark("stencils", args) as bench:
        runs = {(case, n): apps(case, n, args.steps) for case in args.cases for n in args.tiles}
        got = {key: [] for key in runs}  # per round: (before, after) of (messages, empty, wall, CPU)
        for k in range(max(args.repeats, 1)):
            for key, (before, after, tiling) in runs.items():
                order = (("before", before), ("after", after)) if k % 2 == 0 else (("after", after), ("before", before))
                done = {name: measure(app, tiling, args.workers, args.steps) for name, app in order}
                if k == 0 and not same_bits(before.gather(done["before"][-1], tiling),
                                            after.gather(done["after"][-1], tiling)):
                    raise SystemExit(f"stencils: {key[0]} on {key[1]} tiles gives other bits before and after")
                got[key].append((done["before"][:-1], done["after"][:-1]))
            print(f"round {k + 1} done", flush=True)
        print(f"1 node x {args.workers} workers, {args.steps} steps (time: steps {SKIP}+); before = every halo "
              f"phase reads all neighbours, after = face neighbours only; median of {args.repeats} rounds ±spread")
        print(f"{'case':11s} {'tiles':>5s} {'msgs/step: before':>18s} {'(empty)':>8s} {'after':>6s} "
              f"{'wall ms/step: before':>21s} {'after':>12s} {'after / before':>15s} "
              f"{'CPU ms/step: before':>20s} {'after':>12s} {'after / before':>15s}")
        for (case, ntiles), rounds in got.items():
            st = {"messages_before": Stat(tuple(b[0] for b, _ in rounds)),
                  "empty_before": Stat(tuple(b[1] for b, _ in rounds)),
                  "messages_after": Stat(tuple(a[0] for _, a in rounds)),
                  "step_s_before": Stat(tuple(b[2] for b, _ in rounds)),
                  "step_s_after": Stat(tuple(a[2] for _, a in rounds)),
                  "ratio": Stat(tuple(a[2] / b[2] for b, a in rounds)),
                  "cpu_s_before": Stat(tuple(b[3] for b, _ in rounds)),
                  "cpu_s_after": Stat(tuple(a[3] for _, a in rounds)),
                  "cpu_ratio": Stat(tuple(a[3] / b[3] for b, a in rounds))}
            print(f"{case:11s} {ntiles:5d} {st['messages_before'].median:18.0f} {st['empty_before'].median:8.0f} "
                  f"{st['messages_after'].median:6.0f} {st['step_s_before'].show(1e3, 2):>21s} "
                  f"{st['step_s_after'].show(1e3, 2):>12s} {st['ratio'].show(1, 2):>15s} "
                  f"{st['cpu_s_before'].show(1e3, 2):>20s} {st['cpu_s_after'].show(1e3, 2):>12s} "
                  f"{st['cpu_ratio'].show(1, 2):>15s}")
            bench.add(case=case, tiles=ntiles, workers=args.workers, steps=args.steps, **st)


if __name__ == "__main__":
    main()
