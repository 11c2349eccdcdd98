"""Face stencils against all neighbours: messages and wall time per step of the seismic and
shallow-water apps on many small tiles, with their halo phases reading face neighbours only
(after) and every neighbour (before).

Neither app reads a diagonal cell, so before the port each tile sent its neighbours across
edges and corners an empty payload: 4 of the 8 messages of an interior tile per halo phase.
"Before" is the same app with every halo phase forced back to ``reads="all"``
(``dataclasses.replace``) and its packers' code of before the port, verbatim (an empty payload
for every neighbour across an edge or a corner); "after" is the app as it is. Both give the
same bits, which the first round checks.

The cases, each on ``--tiles`` tiles (default 64 and 256) of one node of ``--workers``
workers (default 2), ``--steps`` steps (default 30) of which the first ``SKIP`` are left out
of the time (the kernels' first calls, the first halos):

``seismic-3d``  ``seismic-halfspace`` on 48 x 48 x 16 cells (x-y columns of 6 x 6 or 3 x 3):
                2 halo phases a step;
``seismic-2d``  ``seismic-layered-2d`` on 512 x 48 cells (columns of 8 or 2): one row of
                tiles, so no tile has a diagonal neighbour and the messages stay the same;
                only the packer's work changes (it no longer builds an empty array and a dict
                entry for every neighbour, face or not);
``swe``         ``swe-radial-dam-break`` on 16 x 16 root blocks of 4 cells, levels 0-2 (tiles
                of 2 x 2 blocks or 1): 1 halo phase a step, 2 more on the regrid steps (every 4).

Messages per step are the message rows of the run over its steps (the empty ones in
brackets); the wall time per step is the mean over the steps counted; the CPU time per step is
the process's (every thread's) over the whole run. Every round runs every case before, after,
after, before (a drift of the host's speed within the round weighs on both alike) and takes
each one's mean; every figure is the median of ``--repeats`` rounds (default 5) with its
spread, and the ratio after / before is taken within each round.

``--instructions`` counts instead of timing (needs Valgrind, Debian's ``valgrind``): the
machine instructions per step, in user space, before and after, on one worker (Valgrind runs
one thread at a time), each run under Callgrind with counting switched on only around the
measured steps and taken as the difference between runs of ``COUNT_STEPS`` and twice as many
steps, after ``WARM_STEPS`` uncounted ones (every kernel called once). The counts do not move
with the host's load, so a change of a few percent shows where the wall time cannot; printed
with the instructions saved per message no longer sent.

Run: ``python bench/stencils.py [--tiles 64 256] [--workers 2] [--steps 30] [--cases seismic-3d
seismic-2d swe] [--instructions] [--repeats 5] [--json FILE]``.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import itertools
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from common import Benchmark, Stat, add_arguments
from shoal.apps import get_app
from shoal.apps.seismic.app import SeismicApp
from shoal.apps.swe.app import EMPTY, SWEApp
from shoal.apps.swe.kernels import pack_faces
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
COUNT_STEPS = 4  # counted runs have this many steps and twice as many; the difference is per step
WARM_STEPS = 10  # steps before counting: every kernel called once (seismic checks the wavefield at step 9)


def every_neighbour(phases: tuple[Phase, ...]) -> tuple[Phase, ...]:
    """The phases with every halo phase reading all neighbours: faces, edges and corners."""
    return tuple(dataclasses.replace(p, reads="all") if p.halo else p for p in phases)


class SeismicBefore(SeismicApp):
    """The seismic app as it ran before its port: halos from every neighbour, and its packer's
    code of then, verbatim: an empty array for every neighbour across a corner."""

    def __init__(self, params, steps: int):
        super().__init__(params, steps)
        self.phases = every_neighbour(self.phases)

    def _pack(self, fields, src, tiling):
        lay = self._layout(tiling, src)
        out = dict.fromkeys(map(int, tiling.neighbours[src]), np.empty(0, dtype=self.dtype))
        for n, face in lay["faces"].items():
            xs, ys = self._slabs(lay, face)
            out[n] = fields[:, xs, ys].copy()
        return out


class SWEBefore(SWEApp):
    """The shallow-water app as it ran before its port: halos from every neighbour, and its
    packers' code of then, verbatim: empty strips and target levels for every neighbour across a
    corner."""

    def __init__(self, params, steps: int):
        super().__init__(params, steps)
        self.phases = every_neighbour(self.phases)

    def pack_strips(self, state, src, tiling):
        send = self._topology(tiling, src).send
        lev = state["lev"]
        data, ends = pack_faces(state["h"], state["hu"], state["hv"], state["b"], lev, self.p.block, send.k,
                                send.f)
        sent = lev[send.k]
        cut = ends[send.split]
        out = dict.fromkeys((int(t) for t in tiling.neighbours[src]), EMPTY)
        for i, t in enumerate(send.tiles):
            a, b = send.split[i], send.split[i + 1]
            out[t] = {"lev": sent[a:b], "data": data[cut[i]:cut[i + 1]]}
        return out

    def pack_targets(self, state, src, tiling):
        send = self._topology(tiling, src).send
        sent = state["target"][send.k]
        out = dict.fromkeys((int(t) for t in tiling.neighbours[src]), EMPTY["lev"])
        for i, t in enumerate(send.tiles):
            out[t] = sent[send.split[i]:send.split[i + 1]]
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


def one_round(before, after, tiling: Tiling, workers: int, steps: int, check: bool):
    """Before, after, after, before: each one's (messages, empty messages, wall, CPU) per step,
    the means of its two runs; with ``check``, refuse other bits before and after."""
    figures, final = {id(before): [], id(after): []}, {}
    for app in (before, after, after, before):
        *got, states = measure(app, tiling, workers, steps)
        figures[id(app)].append(got)
        final.setdefault(id(app), states)
    if check and not same_bits(before.gather(final[id(before)], tiling), after.gather(final[id(after)], tiling)):
        raise SystemExit(f"stencils: {before.name} on {tiling.ntiles} tiles gives other bits before and after")
    return tuple(tuple(np.mean(figures[id(app)], axis=0)) for app in (before, after))


def same_bits(a: dict, b: dict) -> bool:
    """Whether two gathered states are the same bits."""
    return a.keys() == b.keys() and all(np.array_equal(np.atleast_1d(a[k]).view(np.uint8),
                                                       np.atleast_1d(b[k]).view(np.uint8)) for k in a)


def counted_run(case: str, ntiles: int, variant: str, steps: int) -> None:
    """Run ``steps`` steps of the case's app ``variant`` (``before`` or ``after``) on one
    worker after ``WARM_STEPS``, with Callgrind's counting on around them only (this process
    runs under Callgrind)."""

    def counting(on: bool) -> None:
        subprocess.run(["callgrind_control", "--instr=" + ("on" if on else "off"), str(os.getpid())],
                       capture_output=True, check=True)

    before, after, tiling = apps(case, ntiles, WARM_STEPS + steps)
    app = before if variant == "before" else after
    with LocalExecutor(app, tiling, Cluster.uniform(1, 1), np.zeros(tiling.ntiles, dtype=np.int64)) as ex:
        states = ex.run(WARM_STEPS).states
        counting(True)
        ex.run(steps, states=states, first_step=WARM_STEPS)
        counting(False)


def count_instructions(case: str, ntiles: int, variant: str, steps: int) -> int:
    """User-space instructions Callgrind counted in :func:`counted_run`."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        subprocess.run(["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}",
                        sys.executable, __file__, "--count-run", case, str(ntiles), variant, str(steps)],
                       capture_output=True, check=True)
        totals = [line for line in out.read_text().splitlines() if line.startswith("totals:")]
    return int(totals[0].split()[1])


def counted_messages(app, tiling: Tiling) -> float:
    """Messages per step of the steps :func:`count_instructions` takes the difference over."""
    with LocalExecutor(app, tiling, Cluster.uniform(1, 1), np.zeros(tiling.ntiles, dtype=np.int64)) as ex:
        step = ex.run(WARM_STEPS + 2 * COUNT_STEPS).messages["step"]
    return float((step >= WARM_STEPS + COUNT_STEPS).sum()) / COUNT_STEPS


def instructions(bench, args) -> None:
    """The instruction counts' table: per case and tile count, instructions per step before and
    after, their ratio, and the instructions saved per message no longer sent."""
    keys = list(itertools.product(args.cases, args.tiles, ("before", "after")))
    jobs = [(*key, n) for key in keys for n in (COUNT_STEPS, 2 * COUNT_STEPS)]
    with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        got = dict(zip(jobs, pool.map(lambda job: count_instructions(*job), jobs), strict=True))
    per = {key: (got[(*key, 2 * COUNT_STEPS)] - got[(*key, COUNT_STEPS)]) / COUNT_STEPS for key in keys}
    print(f"instructions per step (Callgrind, user space), 1 worker, steps {WARM_STEPS + COUNT_STEPS}-"
          f"{WARM_STEPS + 2 * COUNT_STEPS - 1}; before = every halo phase reads all neighbours, after = face "
          f"neighbours only")
    print(f"{'case':11s} {'tiles':>5s} {'msgs/step: before':>18s} {'after':>6s} {'Minstr/step: before':>20s} "
          f"{'after':>8s} {'ratio':>6s} {'instr saved/message':>20s}")
    for case, ntiles in itertools.product(args.cases, args.tiles):
        before, after, tiling = apps(case, ntiles, WARM_STEPS + 2 * COUNT_STEPS)
        msgs = {"before": counted_messages(before, tiling), "after": counted_messages(after, tiling)}
        b, a = per[(case, ntiles, "before")], per[(case, ntiles, "after")]
        dropped = msgs["before"] - msgs["after"]
        saved = f"{(b - a) / dropped:20.0f}" if dropped else f"{'-':>20s}"
        print(f"{case:11s} {ntiles:5d} {msgs['before']:18.0f} {msgs['after']:6.0f} {b / 1e6:20.1f} {a / 1e6:8.1f} "
              f"{a / b:6.3f} {saved}")
        bench.add(case=case, tiles=ntiles, messages_before=msgs["before"], messages_after=msgs["after"],
                  instructions_before=b, instructions_after=a)


def main() -> None:
    if "--count-run" in sys.argv:  # under Callgrind: one counted run
        case, ntiles, variant, steps = sys.argv[-4:]
        counted_run(case, int(ntiles), variant, int(steps))
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tiles", type=int, nargs="+", default=[64, 256])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--cases", nargs="+", choices=sorted(CASES), default=list(CASES))
    ap.add_argument("--instructions", action="store_true",
                    help="instructions per step before and after instead of times (needs valgrind)")
    add_arguments(ap)
    args = ap.parse_args()
    if args.instructions and not (shutil.which("valgrind") and shutil.which("callgrind_control")):
        sys.exit("stencils: --instructions needs Valgrind (Debian: apt-get install valgrind)")
    with Benchmark("stencils", args) as bench:
        if args.instructions:
            instructions(bench, args)
            return
        runs = {(case, n): apps(case, n, args.steps) for case in args.cases for n in args.tiles}
        got = {key: [] for key in runs}  # per round: (before, after) of (messages, empty, wall, CPU)
        for k in range(max(args.repeats, 1)):
            for key, (before, after, tiling) in runs.items():
                got[key].append(one_round(before, after, tiling, args.workers, args.steps, check=k == 0))
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
