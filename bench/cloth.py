"""The cloth drape against ARCSim and MuJoCo: CPU seconds per simulated second, intersections.

The scene (the brief's S1, :class:`shoal.apps.cloth.scenes.Drape`): a 1 m square sheet of
``n x n`` vertices, flat at z = 0.3 m, falls under gravity onto a still sphere of radius 0.25 m
at the origin. shoal runs its asynchronous contact mechanics in one piece (one core, no tiles
yet); the peers run their own integrators on the same sheet, sphere and gravity:

- ARCSim (implicit Euler, 5 ms steps, repulsion then impact zones), by ``bench/arcsim_drape.py``
  when ``ARCSIM`` and ``ARCSIM_HOME`` are set (see that file: ARCSim is built outside the
  repository, its licence being non-commercial);
- MuJoCo flex (2 ms steps), by ``bench/mujoco_drape.py`` run with the Python that
  ``MUJOCO_PYTHON`` names (see that file for its virtual environment).

Every round runs shoal and each peer once, over the same simulated time (``--seconds``); the
ratio is shoal's CPU time per simulated second over the peer's, in the same round. CPU time is
each program's own (``time.process_time`` here, ``getrusage`` of ARCSim's process, MuJoCo's
driver's steps). Intersections are counted on the final state by one counter for all
(``bench/mujoco_drape.py``'s ``count_intersections``: triangle pairs sharing no vertex where an
edge of one crosses the other); shoal's are also checked at every 0.1 s.

Run: ``python bench/cloth.py --n 33 65 --seconds 0.4``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from common import Benchmark, add_arguments, repeat
from mujoco_drape import count_intersections
from shoal.apps.cloth import output
from shoal.apps.cloth.scenes import Drape

HERE = Path(__file__).resolve().parent


def shoal_drape(n: int, seconds: float, out: Path | None = None) -> dict:
    """shoal's drape: CPU seconds, the most intersections at any 0.1 s check, and what the
    windows saw; with ``out``, its frames every 0.1 s, its windows (table and figure) and a
    picture of its end there (none of it timed)."""
    scene = Drape(n=n)
    cloth, x, v = scene.build()
    gravity = (0.0, 0.0, scene.gravity)
    windows, per_check = scene.windows(seconds), max(scene.windows(0.1), 1)
    cpu, worst, done = 0.0, 0, 0
    while done < windows:
        start = time.process_time()
        cloth.run(x, v, min(per_check, windows - done), gravity)
        cpu += time.process_time() - start
        done += min(per_check, windows - done)
        worst = max(worst, count_intersections(x, cloth.model.surface.triangles))
        if out:
            output.write_mesh_frame(out / f"drape-{n}", cloth, x, v)
    log = cloth.log
    if out:
        output.write_windows(out / f"drape-{n}-windows.csv", log)
        output.plot_windows(out / f"drape-{n}-windows.png", log, f"drape, {n * n} vertices")
        output.picture(out / f"drape-{n}.png", cloth, x, f"drape, {n * n} vertices, t = {cloth.time:.2f} s")
    return {"cpu_s": cpu, "cpu_per_simulated_s": cpu / seconds, "intersections": worst,
            "rollbacks": sum(log.rollbacks), "max_pairs": max(log.pairs), "min_gap": min(log.min_gap),
            "z_min": float(x[:, 2].min()), "z_max": float(x[:, 2].max())}


def peer(command: list[str], env: dict | None = None) -> dict:
    """Run a peer's driver; the JSON record it printed last."""
    out = subprocess.run(command, check=True, capture_output=True, text=True, env=env, cwd=HERE)
    return json.loads(out.stdout.strip().splitlines()[-1])


def one_round(args, k: int, mujoco: str | None, arcsim: str | None) -> dict:
    out = {}
    for n in args.n:
        ours = shoal_drape(n, args.seconds, args.out if k == 1 else None)
        out[f"shoal_{n}"], out[f"shoal_x_{n}"] = ours["cpu_per_simulated_s"], ours["intersections"]
        line = (f"round {k}, {n * n} vertices: shoal {ours['cpu_per_simulated_s']:.1f} CPU s/s, "
                f"{ours['intersections']} intersections, {ours['rollbacks']} rollbacks, "
                f"least gap {ours['min_gap'] * 1e3:.2f} mm")
        common = ["--n", str(n), "--seconds", str(args.seconds)]
        if arcsim:
            rec = peer([sys.executable, "arcsim_drape.py", *common])
            out[f"arcsim_{n}"], out[f"arcsim_x_{n}"] = rec["cpu_per_simulated_s"], rec["max_intersections"]
            out[f"ratio_arcsim_{n}"] = out[f"shoal_{n}"] / out[f"arcsim_{n}"]
            line += f"; ARCSim {rec['cpu_per_simulated_s']:.1f}, {rec['max_intersections']} intersections"
        if mujoco:
            rec = peer([mujoco, "mujoco_drape.py", *common, "--mesh", "sheet"])
            out[f"mujoco_{n}"] = rec["cpu_per_simulated_s"]
            out[f"mujoco_x_{n}"] = max(c["intersections"] for c in rec["checks"])
            out[f"ratio_mujoco_{n}"] = out[f"shoal_{n}"] / out[f"mujoco_{n}"]
            line += f"; MuJoCo {rec['cpu_per_simulated_s']:.1f}, {out[f'mujoco_x_{n}']} intersections"
        print(line, flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, nargs="+", default=[33], help="vertices along a side (default 33)")
    ap.add_argument("--seconds", type=float, default=0.4, help="simulated time, s (default 0.4)")
    ap.add_argument("--out", type=Path, help="write shoal's first round's frames, windows and picture here")
    add_arguments(ap)
    args = ap.parse_args()
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
    mujoco = os.environ.get("MUJOCO_PYTHON")
    arcsim = os.environ.get("ARCSIM") if os.environ.get("ARCSIM_HOME") else None
    with Benchmark("cloth", args) as bench:
        print(f"drape, {args.seconds} s simulated; CPU s per simulated s, medians ± spread of {args.repeats} rounds")
        if not arcsim:
            print("ARCSim: set ARCSIM and ARCSIM_HOME (see bench/arcsim_drape.py) to compare in this run")
        if not mujoco:
            print("MuJoCo: set MUJOCO_PYTHON (see bench/mujoco_drape.py) to compare in this run")
        rounds = itertools.count(1)
        st = repeat(lambda: one_round(args, next(rounds), mujoco, arcsim), args.repeats)
        for n in args.n:
            line = (f"{n * n} vertices: shoal {st[f'shoal_{n}'].show(1, 1)} "
                    f"(intersections {st[f'shoal_x_{n}'].median:.0f})")
            for name, key in (("ARCSim", "arcsim"), ("MuJoCo", "mujoco")):
                if f"{key}_{n}" in st:
                    line += (f"; {name} {st[f'{key}_{n}'].show(1, 1)} (intersections {st[f'{key}_x_{n}'].median:.0f}),"
                             f" shoal / {name} {st[f'ratio_{key}_{n}'].show()}")
            print(line)
        bench.add(seconds=args.seconds, n=args.n, **st)


if __name__ == "__main__":
    main()
