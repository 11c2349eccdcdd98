"""Devito's elastic velocity-stress operator on a homogeneous cube: grid-point updates per second.

Run by ``bench/seismic.py`` with the interpreter of an environment that has Devito (and SciPy
and pytest, which its ``examples`` package imports); it never imports shoal. The operator is
the one of Devito's ``examples/seismic/elastic`` (``ElasticWaveSolver``): a staggered grid,
``space_order`` in space, first order in time (leapfrog of velocity and stress), float32, on
its ``constant-elastic`` model (vp 1.5 km/s, vs = vp / 2, unit density) with no absorbing layer
(``nbl=0``), a Ricker source and two receiver lines as the example places them. Devito takes
its threads from ``OMP_NUM_THREADS`` under ``DEVITO_LANGUAGE=openmp``.

The operator runs twice: the first run compiles it and warms the caches; the second is timed
by Devito's own timer of its first section, the stencils that update every grid point in the
time loop. Its other sections inject the source and interpolate the example's receivers (two
sets of 160 x 160 on a plane below the top, more than most runs record), and are reported apart.
It prints one JSON line: ``points``, ``steps``, ``seconds`` (the stencils), ``rate`` (grid-point
updates per second over them) and ``sparse_seconds`` (the other sections).

Run: ``python bench/devito_elastic.py [--n 160] [--order 4] [--steps 50]``.
"""

import argparse
import json

from examples.seismic.elastic.elastic_example import elastic_setup


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=160, help="grid points per side (default 160)")
    ap.add_argument("--order", type=int, default=4, help="space order (default 4)")
    ap.add_argument("--steps", type=int, default=50, help="time steps timed (default 50)")
    args = ap.parse_args()
    spacing = 10.0  # metres: the example's 3D spacing
    probe = elastic_setup(shape=(args.n,) * 3, spacing=(spacing,) * 3, nbl=0, constant=True,
                          space_order=args.order, tn=1.0)
    # tn (ms) that gives exactly ``steps`` steps of the solver's dt (the time loop runs nt - 1 steps
    # over nt = tn / dt + 1 samples).
    tn = args.steps * float(probe.dt)
    solver = elastic_setup(shape=(args.n,) * 3, spacing=(spacing,) * 3, nbl=0, constant=True,
                           space_order=args.order, tn=tn)
    solver.forward()
    *_, summary = solver.forward()
    steps = solver.geometry.nt - 1
    stencils, *sparse = summary.values()  # sections in the order they run: the stencils first
    points = args.n**3
    rate = points * steps / stencils.time
    print(json.dumps({"points": points, "steps": steps, "seconds": stencils.time, "rate": rate,
                      "sparse_seconds": sum(entry.time for entry in sparse)}))


if __name__ == "__main__":
    main()
