"""FLIP throughput: the 3D dam break at 64³ on 1 and 2 workers, against mantaflow's
``flip02_surface`` dam in the same run.

shoal runs mantaflow's setup 0: a box of 0.4 x 0.6 x 1 of the unit domain in one corner,
64³ cells, 8 particles per fluid cell (mantaflow resamples to 8-16), PIC/FLIP 0.6, CFL 1, the
pressure solve to a relative max-norm residual ``--tolerance`` (mantaflow's is 1e-3 absolute,
printed as the relative tolerance it amounts to) with MIC(0) on ``--brick``-cell bricks
(mantaflow: one global MIC(0)). A frame is one step for both. Frames after the ``--skip``-th
are timed: shoal's CPU time from its process's (the timed frames' share of its tasks' CPU time),
mantaflow's from its process CPU time (``bench/mantaflow_flip.py``); the 2-worker efficiency
from shoal's wall times per frame.

Reported, medians of ``--repeats`` rounds with their spread (each round: shoal on 1 worker,
shoal on 2 workers, mantaflow; ratios within the round): CPU s per frame, particles per second
per core, CG fluid-cell-iterations per second per core (shoal: fluid cells x iterations over
the CPU time of its ``cg_matvec`` and ``cg_update`` tasks; mantaflow: over ``solvePressureSystem``),
CG iterations per frame, and shoal's 2-worker efficiency (1-worker time / (2 x 2-worker time)).
mantaflow is run when ``bench/mantaflow_flip.py`` finds it (``MANTAFLOW``); else shoal alone.

The default tiling is 8 tiles of 32³ cells: the Python executor's cost per task (two CG phases
per tile per iteration) makes 64 tiles of 16³ about 1.6 times slower per frame (``--tiles 64``).

Run: ``python bench/flip.py [--cells 64] [--frames 15] [--skip 5] [--tiles 8] [--brick 16]
[--tolerance 1e-2] [--repeats 5] [--json FILE]``.
"""

from __future__ import annotations

import argparse
import itertools
import time

import numpy as np

import mantaflow_flip
from common import Benchmark, add_arguments, repeat
from shoal.apps import get_app
from shoal.cluster import Cluster
from shoal.runtime import LocalExecutor


def dam(cells: int, brick: int, tolerance: float, frames: int):
    """mantaflow's dam (flip02_surface setup 0) as a shoal ``flip`` app."""
    spec = get_app("flip")
    params = spec.params(dimension=3, cells=[cells] * 3, domain=[1.0] * 3, particles_per_cell=8, flip=0.6, cfl=1.0,
                         dt_max=0.01, gravity=[0.0, -9.81, 0.0], fluid=[[0.0, 0.0, 0.0, 0.4, 0.6, 1.0]],
                         cg_tolerance=tolerance, cg_max_iterations=2000, brick=brick)
    return spec.build(params, frames)


def shoal_round(app, tiling, workers: int, frames: int, skip: int) -> dict:
    """One run of ``frames`` steps; the figures of the steps after the ``skip``-th."""
    states = {t: app.init_tile(t, tiling) for t in range(tiling.ntiles)}
    with LocalExecutor(app, tiling, Cluster.uniform(1, workers), np.zeros(tiling.ntiles, np.int64)) as ex:
        cpu = time.process_time()
        res = ex.run(frames, states=states)
        cpu = time.process_time() - cpu
        final = app.gather(ex.states, tiling)
    tasks = res.tasks
    kept = tasks["step"] >= skip
    names = [p.name for p in app.phases]
    cg = kept & np.isin(tasks["phase"], [names.index("cg_matvec"), names.index("cg_update")])
    matvec = kept & (tasks["phase"] == names.index("cg_matvec"))
    # The process's CPU time, the share of it the timed frames' tasks took (the rest is the
    # executor's, spread alike): robust to other programs on the host, unlike wall time.
    cpu_per_frame = cpu * float(tasks["cost"][kept].sum()) / float(tasks["cost"].sum()) / (frames - skip)
    particles = len(final["id"])
    return {"cpu_s_per_frame": cpu_per_frame, "wall_s_per_frame": (res.step_end[-1] - res.step_end[skip - 1]) /
            (frames - skip), "particles": particles, "particles_per_s": particles / cpu_per_frame,
            "cell_its_per_s": float(tasks["work"][matvec].sum()) / float(tasks["cost"][cg].sum()),
            "cg_iterations": float(np.median(final["log"][skip:, 2]))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", type=int, default=64, help="cells along a side (default 64)")
    ap.add_argument("--frames", type=int, default=15, help="frames (steps) per run (default 15)")
    ap.add_argument("--skip", type=int, default=5, help="frames left out at the start (default 5, as the brief)")
    ap.add_argument("--tiles", type=int, default=8, help="tiles (default 8: 32³ cells each at 64³)")
    ap.add_argument("--brick", type=int, default=16, help="cells per side of a MIC(0) brick (default 16)")
    ap.add_argument("--tolerance", type=float, default=1e-2,
                    help="shoal's relative CG tolerance (default 1e-2: mantaflow's 1e-3 absolute amounts to ~1.2e-2)")
    add_arguments(ap)
    args = ap.parse_args()
    app = dam(args.cells, args.brick, args.tolerance, args.frames)
    tiling = app.decompose(args.tiles)
    app.check_tiling(tiling)
    app.prepare(tiling)

    with Benchmark("flip", args) as bench:
        print(f"3D dam {args.cells}³ (mantaflow flip02_surface setup 0), {tiling.ntiles} tiles {tiling.counts}, "
              f"bricks {args.brick}³, relative tolerance {args.tolerance:g}; frames {args.skip + 1}-{args.frames}; "
              f"medians ± spread of {args.repeats} rounds")
        rounds = itertools.count(1)
        peer_missing: list[str] = []

        def one_round() -> dict:
            k = next(rounds)
            out = {}
            for w in (1, 2):
                r = shoal_round(app, tiling, w, args.frames, args.skip)
                out.update({f"{key}_{w}": v for key, v in r.items()})
                print(f"round {k}: shoal, {w} worker(s): {r['cpu_s_per_frame']:.3f} CPU s/frame "
                      f"({r['wall_s_per_frame']:.3f} s wall), {r['particles']} particles, "
                      f"{r['cg_iterations']:.0f} CG iterations, {r['cell_its_per_s'] / 1e6:.1f} M cell-its/s",
                      flush=True)
            out["efficiency"] = out["wall_s_per_frame_1"] / (2 * out["wall_s_per_frame_2"])
            if peer_missing:
                return out
            try:
                m = mantaflow_flip.run(args.cells, args.frames, 0, args.skip)
            except mantaflow_flip.MantaflowMissing as e:
                peer_missing.append(str(e))
                return out
            out.update(manta_s_per_frame=m["cpu_s_per_frame"], manta_particles=m["particles"],
                       manta_particles_per_s=m["particles_per_s"],
                       manta_cell_its_per_s=m["fluid_cell_iterations_per_s"], manta_cg_iterations=m["cg_iterations"],
                       manta_relative_tolerance=m["cg_relative_tolerance"],
                       frame_ratio=m["cpu_s_per_frame"] / out["cpu_s_per_frame_1"],
                       particle_ratio=out["particles_per_s_1"] / m["particles_per_s"],
                       cg_ratio=out["cell_its_per_s_1"] / m["fluid_cell_iterations_per_s"])
            print(f"round {k}: mantaflow: {m['cpu_s_per_frame']:.3f} CPU s/frame, {m['particles']:.0f} particles, "
                  f"{m['cg_iterations']:.0f} CG iterations (relative tolerance {m['cg_relative_tolerance']:.2g})",
                  flush=True)
            return out

        st = repeat(one_round, args.repeats)
        print(f"shoal, 1 worker: {st['cpu_s_per_frame_1'].show(digits=3, unit=' s')} CPU per frame, "
              f"{st['particles_per_s_1'].show(1e-6, unit=' M')} particles/s/core, "
              f"{st['cell_its_per_s_1'].show(1e-6, digits=1, unit=' M')} CG fluid-cell-iterations/s/core, "
              f"{st['cg_iterations_1'].show(digits=0)} CG iterations per frame")
        print(f"shoal, 2 workers: {st['wall_s_per_frame_2'].show(digits=3, unit=' s')} wall per frame "
              f"(1 worker: {st['wall_s_per_frame_1'].show(digits=3, unit=' s')}); 2-worker efficiency "
              f"{st['efficiency'].show()} (wall times: distorted when the host is busy)")
        if peer_missing:
            print(f"mantaflow not run ({peer_missing[0]}): shoal's figures only")
        else:
            print(f"mantaflow: {st['manta_s_per_frame'].show(digits=3, unit=' s')} CPU per frame, "
                  f"{st['manta_particles_per_s'].show(1e-6, unit=' M')} particles/s, "
                  f"{st['manta_cell_its_per_s'].show(1e-6, digits=1, unit=' M')} CG fluid-cell-iterations/s, "
                  f"{st['manta_cg_iterations'].show(digits=0)} CG iterations (relative tolerance "
                  f"{st['manta_relative_tolerance'].median:.2g})")
            print(f"ratios (above 1: shoal ahead), per core: per frame {st['frame_ratio'].show()}, per particle "
                  f"{st['particle_ratio'].show()}, per CG fluid-cell-iteration {st['cg_ratio'].show()}")
        bench.add(**st)


if __name__ == "__main__":
    main()
