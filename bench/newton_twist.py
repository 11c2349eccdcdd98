"""Newton's VBD cloth twist on the CPU: CPU seconds per simulated second and triangle–triangle intersections.

The scene is Newton's own example ``newton/examples/cloth/example_cloth_twist.py``, built by its
``Example`` class with every setting it has (Newton 1.8.0): the sheet of Warp's asset
``square_cloth.usd`` scaled by 0.01, a 1.5 m x 1.0 m rectangle of 50 x 50 vertices and 4,802
triangles in the plane x = 0; its two 1.0 m edges (y = ±0.75 m, 100 vertices, made inactive)
turned in opposite senses about the y axis at π/3 rad/s; no gravity. Material: density
0.2 kg/m² (0.3 kg in all), ``tri_ke`` = ``tri_ka`` = 1e3, ``tri_kd`` 2e-4, bending ``edge_ke``
1e-3 and ``edge_kd`` 1e-2. Self-contact on: ``particle_self_contact_margin`` 2 mm (the distance
at which pairs start to push) plus ``particle_self_contact_gap`` 1.5 mm of detection reach,
vertex and edge contact buffers of 64 and 128 pairs, contact stiffness ``soft_contact_ke`` 1e3,
damping 0.1 and friction 0.2; self-contact detection before and after each step's
initialisation, the BVH rebuilt every frame. Steps: frames of 1/60 s in 10 substeps of
1.667 ms, 4 VBD iterations each, the frame replayed from Warp's captured graph as the example
does. Everything runs on Warp's ``cpu`` device.

shoal's ``cloth-twist`` (:class:`shoal.apps.cloth.scenes.Twist`) has the same sheet (1.5 m
between the clamped edges, 1 m along them), vertex count, turning speed, absence of gravity and
clamped edges, with explicit kick–drift steps of 0.327 ms, windows of 10 steps, nested penalty layers from 5 mm
at 10 N/m, a membrane stiffness of 100 N/m, 0.187 kg/m² and friction 0.6.

CPU time is :func:`time.process_time` of this process over the frames alone. Building the
example (compiling or loading Warp's kernels, capturing the frame's graph) is left out, and
so is a warm-up: ``--warmup`` frames of a first example, thrown away, before the measured one
is built, so that nothing compiled lazily is charged to the run. At each check time
(``--checks``, rounded to a frame, and always at the end) the sheet is tested for
self-intersection with ``bench/mujoco_drape.py``'s counter (``count_intersections``: pairs of
triangles that share no vertex where an edge of one crosses the other) and
``ipctk.has_intersections`` (``null`` where ``ipctk`` is not installed).

It prints one JSON line: ``peer``, ``version``, ``warp_version``, ``device``, ``vertices``,
``triangles``, ``size_m`` (the sheet's sides), ``timestep_s`` (a substep), ``substeps``,
``iterations``, ``simulated_s``, ``frames``, ``cpu_s``, ``cpu_per_simulated_s``, ``build_cpu_s``,
``checks`` (per check time: ``t``, ``cpu_s`` so far, ``cpu_per_simulated_s`` since the last
check, ``intersections``, ``has_intersections``), ``intersections`` at the end and
``max_intersections`` over the checks.

Newton (Apache-2.0) is not a dependency of shoal: run this file with the interpreter of an
environment of its own, made outside this repository::

    python3 -m venv newton-venv
    newton-venv/bin/pip install newton==1.8.0 usd-core ipctk==1.6.1
    export NEWTON_PYTHON="$PWD/newton-venv/bin/python"

The first run compiles Warp's kernels (about a minute) into Warp's cache. ``bench/cloth.py
--scene twist`` runs this file through ``NEWTON_PYTHON``. By hand::

    "$NEWTON_PYTHON" bench/newton_twist.py --seconds 4.0 --checks 1,2,3,4
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

from mujoco_drape import count_intersections, ipc_has_intersections, parse_times

WARMUP_FRAMES = 2


def example():
    """Newton's cloth-twist ``Example`` on Warp's CPU device, without a viewer that draws."""
    import newton.viewer
    import warp as wp
    from newton.examples.cloth import example_cloth_twist

    wp.set_device("cpu")
    # The example applies the viewer's forces (none here) every substep; its args are unused.
    return example_cloth_twist.Example(newton.viewer.ViewerNull(), None)


def run(seconds: float, checks: list[float], warmup: int = WARMUP_FRAMES) -> dict:
    """Simulate Newton's twist and check the sheet for self-intersection along the way.

    Parameters
    ----------
    seconds : float
        Simulated time, s (rounded to whole frames of 1/60 s).
    checks : list of float
        Simulated times, s, at which to check (rounded to frames); the end is always one.
    warmup : int
        Frames of a first example, thrown away, before the measured one is built.

    Returns
    -------
    dict
        The record printed by :func:`main` (see the module's docstring).
    """
    import newton
    import warp as wp

    if warmup > 0:
        first = example()
        for _ in range(warmup):
            first.step()
        del first
    start = time.process_time()
    sim = example()
    build = time.process_time() - start
    triangles = np.asarray(sim.faces, dtype=np.int64)
    x = sim.state_0.particle_q.numpy().astype(np.float64)
    frames = round(seconds / sim.frame_dt)
    check_frames = sorted({min(max(round(t / sim.frame_dt), 0), frames) for t in checks} | {frames})
    records, cpu, done = [], 0.0, 0
    for target in check_frames:
        start = time.process_time()
        for _ in range(target - done):
            sim.step()
        wp.synchronize_device("cpu")
        elapsed = time.process_time() - start
        cpu += elapsed
        span = (target - done) * sim.frame_dt
        done = target
        x = sim.state_0.particle_q.numpy().astype(np.float64)
        records.append({"t": round(done * sim.frame_dt, 9), "cpu_s": cpu,
                        "cpu_per_simulated_s": elapsed / span if span else None,
                        "intersections": count_intersections(x, triangles),
                        "has_intersections": ipc_has_intersections(x, triangles)})
    simulated = frames * sim.frame_dt
    rest = sim.model.particle_q.numpy()
    return {"peer": "newton", "version": newton.__version__, "warp_version": wp.__version__, "device": "cpu",
            "vertices": len(x), "triangles": len(triangles),
            "size_m": sorted((round(float(s), 6) for s in np.ptp(rest, axis=0) if s > 1e-6), reverse=True),
            "timestep_s": sim.sim_dt, "substeps": sim.sim_substeps, "iterations": sim.iterations,
            "simulated_s": simulated, "frames": frames, "cpu_s": cpu,
            "cpu_per_simulated_s": cpu / simulated if simulated else None, "build_cpu_s": build,
            "checks": records, "intersections": records[-1]["intersections"],
            "max_intersections": max(r["intersections"] for r in records)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=4.0, help="simulated time, s (default 4.0)")
    ap.add_argument("--checks", type=parse_times, default=[],
                    help="comma-separated simulated times, s, at which to count intersections (the end always)")
    ap.add_argument("--warmup", type=int, default=WARMUP_FRAMES,
                    help=f"frames of a thrown-away example before the measured one (default {WARMUP_FRAMES})")
    args = ap.parse_args()
    if not args.seconds > 0:
        sys.exit(f"newton_twist: --seconds must be positive, got {args.seconds}")
    if any(not 0 <= t <= args.seconds for t in args.checks):
        sys.exit(f"newton_twist: every check time must lie in [0, {args.seconds}], got {args.checks}")
    if args.warmup < 0:
        sys.exit(f"newton_twist: --warmup must be 0 or more, got {args.warmup}")
    try:
        import warp

        warp.config.log_level = warp.LOG_WARNING  # before Newton's import starts Warp: no banner, no module loads
        import newton  # noqa: F401
        import pxr  # noqa: F401  (the example reads its sheet from a USD file)
    except ImportError as e:
        sys.exit(f"newton_twist: this Python ({sys.executable}) lacks {e.name}; see this file's docstring")
    print(json.dumps(run(args.seconds, args.checks, args.warmup)))


if __name__ == "__main__":
    main()
