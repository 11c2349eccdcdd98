"""The cloth on parts against the cloth in one piece: what splitting costs, what two workers win.

The drape (:class:`shoal.apps.cloth.scenes.Drape`), or with ``--scene twister`` the twister
(:class:`~shoal.apps.cloth.scenes.Twister`), is first run in one piece until it lies on the
sphere or is rolled on the rod (``--settle`` seconds, not timed), so that the windows timed are
contact-heavy. From
that state, in the same round, the same ``--windows`` collision windows run:

- in one piece (:class:`~shoal.apps.cloth.acm.ContactCloth`, one core, no task);
- on ``--parts`` METIS parts (:class:`~shoal.apps.cloth.contact_app.ContactClothApp`, the Python
  executor) with one worker, then with two.

Every run ends in the same bits (checked). Printed: each run's wall and CPU seconds per window,
the parts' overhead (one worker's wall time over the one piece's) and the two workers' parallel
efficiency (one worker's wall time over twice two workers').

Run: ``python bench/cloth_parts.py --n 33 --parts 2 8 --windows 10`` (``--scene twister
--settle 1.2`` for the twister).
"""

from __future__ import annotations

import argparse
import itertools
import time

import numpy as np

from common import Benchmark, add_arguments, repeat
from shoal.apps.cloth.contact_app import ContactClothApp
from shoal.apps.cloth.scenes import Drape, Sheet, Twister
from shoal.cluster import Cluster
from shoal.runtime import LocalExecutor

SCENES = {"drape": Drape, "twister": Twister}


def settled(scene_name: str, n: int, seconds: float):
    """The scene after ``seconds`` in one piece: the scene, its cloth, positions and velocities."""
    scene = SCENES[scene_name](n=n)
    cloth, x, v = scene.build()
    cloth.run(x, v, scene.windows(seconds), gravity=(0.0, 0.0, scene.gravity))
    return scene, cloth, x, v


def resumed(scene: Sheet, cloth):
    """A fresh cloth of ``scene`` holding ``cloth``'s pairs, time and windows."""
    again, _, _ = scene.build()
    again.keys, again.layers, again.time, again.windows = cloth.keys.copy(), cloth.layers.copy(), cloth.time, 1
    return again


def one_round(args, start, k: int) -> dict:
    scene, cloth, x, v = start
    gravity = (0.0, 0.0, scene.gravity)
    out = {}
    piece, px, pv = resumed(scene, cloth), x.copy(), v.copy()
    wall, cpu = time.perf_counter(), time.process_time()
    piece.run(px, pv, args.windows, gravity)
    out["one_piece_wall"], out["one_piece_cpu"] = time.perf_counter() - wall, time.process_time() - cpu
    line = f"round {k}: one piece {out['one_piece_wall'] / args.windows * 1e3:.0f} ms per window"
    for parts in args.parts:
        for workers in (1, 2):
            app = ContactClothApp(resumed(scene, cloth), gravity, velocity=v.copy(), positions=x.copy())
            tiling = app.decompose(parts)
            app.prepare(tiling)
            with LocalExecutor(app, tiling, Cluster.uniform(1, workers), np.zeros(parts, np.int64)) as ex:
                wall, cpu = time.perf_counter(), time.process_time()
                result = ex.run(args.windows)
                wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            got = app.gather(result.states, tiling)
            if got["x"].tobytes() != px.tobytes():
                raise SystemExit(f"{parts} parts, {workers} workers: not the one piece's bits")
            out[f"p{parts}_w{workers}_wall"], out[f"p{parts}_w{workers}_cpu"] = wall, cpu
            line += f"; {parts} parts x {workers} workers {wall / args.windows * 1e3:.0f} ms"
        out[f"p{parts}_overhead"] = out[f"p{parts}_w1_wall"] / out["one_piece_wall"]
        out[f"p{parts}_efficiency"] = out[f"p{parts}_w1_wall"] / (2 * out[f"p{parts}_w2_wall"])
    print(line, flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scene", choices=SCENES, default="drape", help="the scene timed (default drape)")
    ap.add_argument("--n", type=int, default=33, help="vertices along a side (default 33)")
    ap.add_argument("--parts", type=int, nargs="+", default=[2, 8], help="part counts (default 2 8)")
    ap.add_argument("--windows", type=int, default=10, help="windows timed (default 10)")
    ap.add_argument("--settle", type=float, default=0.6, help="simulated seconds before, not timed (default 0.6)")
    add_arguments(ap)
    args = ap.parse_args()
    with Benchmark("cloth_parts", args) as bench:
        start = settled(args.scene, args.n, args.settle)
        print(f"{args.scene}, {args.n * args.n} vertices, {len(start[1].keys)} pairs in contact after {args.settle} s; "
              f"{args.windows} windows; medians ± spread of {args.repeats} rounds")
        rounds = itertools.count(1)
        st = repeat(lambda: one_round(args, start, next(rounds)), args.repeats)
        per = 1e3 / args.windows
        print(f"one piece: {st['one_piece_wall'].show(per, 0)} ms per window")
        for parts in args.parts:
            print(f"{parts} parts: 1 worker {st[f'p{parts}_w1_wall'].show(per, 0)} ms, "
                  f"2 workers {st[f'p{parts}_w2_wall'].show(per, 0)} ms per window; "
                  f"overhead over one piece {st[f'p{parts}_overhead'].show()}, "
                  f"2-worker efficiency {st[f'p{parts}_efficiency'].show()}")
        bench.add(scene=args.scene, n=args.n, parts=args.parts, windows=args.windows, settle=args.settle, **st)


if __name__ == "__main__":
    main()
