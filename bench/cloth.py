"""Cloth against peers (drape: ARCSim, MuJoCo; twist: Newton): CPU s per simulated s, intersections.

The drape (the default, ``--scene drape``; the brief's S1,
:class:`shoal.apps.cloth.scenes.Drape`): a 1 m square sheet of ``n x n`` vertices, flat at
z = 0.3 m, falls under gravity onto a still sphere of radius 0.25 m at the origin. shoal runs
its asynchronous contact mechanics in one piece (one core, no tiles yet); the peers run their
own integrators on the same sheet, sphere and gravity:

- ARCSim (implicit Euler, 5 ms steps, repulsion then impact zones), by ``bench/arcsim_drape.py``
  when ``ARCSIM`` and ``ARCSIM_HOME`` are set (see that file: ARCSim is built outside the
  repository, its licence being non-commercial);
- MuJoCo flex (2 ms steps), by ``bench/mujoco_drape.py`` run with the Python that
  ``MUJOCO_PYTHON`` names (see that file for its virtual environment).

The twist (``--scene twist``; the brief's S2, :class:`shoal.apps.cloth.scenes.Twist`): a sheet
of 50 x 50 vertices whose two clamped edges turn in opposite senses at π/3 rad/s, without
gravity, so that its middle wrings and touches itself more and more. shoal runs the
``cloth-twist`` scenario; its sheet is Newton's, 1.5 m x 1 m (the clamped edges 1.5 m apart).
The peer is Newton's VBD (1.67 ms substeps, 4 iterations) in its own example's settings, by
``bench/newton_twist.py`` run with the Python that ``NEWTON_PYTHON`` names, on the CPU.

Every round runs shoal and each peer once, over the same simulated time (``--seconds``); the
ratio is shoal's CPU time per simulated second over the peer's, in the same round. CPU time is
each program's own (``time.process_time`` here, ``getrusage`` of ARCSim's process, MuJoCo's and
Newton's drivers' steps). Intersections are counted by one counter for all
(``bench/mujoco_drape.py``'s ``count_intersections``: triangle pairs sharing no vertex where an
edge of one crosses the other), untimed, on shoal's state every 0.1 s and on the peers' at
their checks; the drape quotes the most at any check, the twist those at the end and at every
whole second.

Run: ``python bench/cloth.py --n 33 65 --seconds 0.4``, ``python bench/cloth.py --scene twist
--seconds 1``.
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
from shoal.apps.cloth.scenes import Drape, Sheet
from shoal.config import load_scenario

HERE = Path(__file__).resolve().parent
CHECK = 0.1  # s of simulated time between shoal's intersection checks


def shoal_run(scene: Sheet, name: str, seconds: float, out: Path | None = None) -> dict:
    """shoal's run of ``scene`` (a :class:`Drape` or a :class:`Twist`) in one piece.

    Parameters
    ----------
    scene : Sheet
        The scene: its ``build()`` gives the cloth, and ``gravity`` its z acceleration, m/s².
    name : str
        The scene's name in the files written to ``out``.
    seconds : float
        Simulated time, s (rounded to whole collision windows).
    out : Path, optional
        Where to write its frames every 0.1 s, its windows (table and figure) and a picture of
        its end (none of it timed).

    Returns
    -------
    dict
        ``cpu_s``, ``simulated_s``, ``cpu_per_simulated_s``; ``checks`` (per check, every 0.1 s
        and at the end: ``t``, ``cpu_s`` so far, ``intersections``), ``intersections`` (the most at any check)
        and ``final_intersections``; ``rollbacks``, ``max_pairs`` and ``min_gap`` over the
        windows; ``z_min`` and ``z_max`` at the end.
    """
    cloth, x, v = scene.build()
    gravity = (0.0, 0.0, scene.gravity)
    windows = scene.windows(seconds)
    # The windows nearest to every check time, so that checks fall on whole seconds too.
    targets = sorted({scene.windows(t) for t in check_times(seconds)} - {0} | {windows})
    label = f"{name}-{scene.n}"
    cpu, done, checks = 0.0, 0, []
    for target in targets:
        start = time.process_time()
        cloth.run(x, v, target - done, gravity)
        cpu += time.process_time() - start
        done = target
        checks.append({"t": cloth.time, "cpu_s": cpu,
                       "intersections": count_intersections(x, cloth.model.surface.triangles)})
        if out:
            output.write_mesh_frame(out / label, cloth, x, v)
    log, simulated = cloth.log, windows * scene.window * scene.step
    if out:
        title = f"{name}, {len(x)} vertices"
        output.write_windows(out / f"{label}-windows.csv", log)
        output.plot_windows(out / f"{label}-windows.png", log, title)
        output.picture(out / f"{label}.png", cloth, x, f"{title}, t = {cloth.time:.2f} s")
    return {"cpu_s": cpu, "simulated_s": simulated, "cpu_per_simulated_s": cpu / simulated, "checks": checks,
            "intersections": max(c["intersections"] for c in checks),
            "final_intersections": checks[-1]["intersections"], "rollbacks": sum(log.rollbacks),
            "max_pairs": max(log.pairs), "min_gap": min(log.min_gap),
            "z_min": float(x[:, 2].min()), "z_max": float(x[:, 2].max())}


def check_times(seconds: float) -> list[float]:
    """Every 0.1 s of simulated time up to ``seconds`` (the end itself is always checked too)."""
    return [float(f"{k * CHECK:g}") for k in range(1, int(seconds / CHECK + 1e-9) + 1)]


def per_second(checks: list[dict]) -> tuple[list[int], list[float]]:
    """The intersections at every whole second (1 s, 2 s, ...) that the checks reach, and the
    CPU seconds each second took, from the checks nearest to them.

    Parameters
    ----------
    checks : list of dict
        ``t``, ``cpu_s`` so far and ``intersections`` per check, in time order, as
        :func:`shoal_run` and ``bench/newton_twist.py`` give them.
    """
    t = [c["t"] for c in checks]
    at = [checks[min(range(len(t)), key=lambda i: abs(t[i] - s))] for s in range(1, int(t[-1] + 0.05) + 1)]
    cpu = [c["cpu_s"] for c in at]
    return [c["intersections"] for c in at], [b - a for a, b in zip([0.0, *cpu[:-1]], cpu, strict=True)]


def describe(name: str, rec: dict) -> str:
    """One run's CPU time and intersections, with both per whole second when it lasted 2 s or more."""
    end = rec["checks"][-1]["intersections"]
    text = f"{name} {rec['cpu_per_simulated_s']:.1f} CPU s/s, {end} intersections at the end"
    if rec["simulated_s"] >= 2 - 0.05:
        crossings, cpu = per_second(rec["checks"])
        text += (f" (at each whole second {'/'.join(map(str, crossings))}; "
                 f"CPU s per second {' -> '.join(f'{c:.1f}' for c in cpu)})")
    return text


def peer(command: list[str], env: dict | None = None) -> dict:
    """Run a peer's driver; the JSON record it printed last."""
    out = subprocess.run(command, check=True, capture_output=True, text=True, env=env, cwd=HERE)
    return json.loads(out.stdout.strip().splitlines()[-1])


def drape_round(args, k: int, peers: dict) -> dict:
    """One round of the drape: shoal, then each peer set in ``peers``, at every ``--n``."""
    out = {}
    for n in args.n:
        ours = shoal_run(Drape(n=n), "drape", args.seconds, args.out if k == 1 else None)
        out[f"shoal_{n}"], out[f"shoal_x_{n}"] = ours["cpu_per_simulated_s"], ours["intersections"]
        line = (f"round {k}, {n * n} vertices: shoal {ours['cpu_per_simulated_s']:.1f} CPU s/s, "
                f"{ours['intersections']} intersections, {ours['rollbacks']} rollbacks, "
                f"least gap {ours['min_gap'] * 1e3:.2f} mm")
        common = ["--n", str(n), "--seconds", str(args.seconds)]
        if peers["arcsim"]:
            rec = peer([sys.executable, "arcsim_drape.py", *common])
            out[f"arcsim_{n}"], out[f"arcsim_x_{n}"] = rec["cpu_per_simulated_s"], rec["max_intersections"]
            out[f"ratio_arcsim_{n}"] = out[f"shoal_{n}"] / out[f"arcsim_{n}"]
            line += f"; ARCSim {rec['cpu_per_simulated_s']:.1f}, {rec['max_intersections']} intersections"
        if peers["mujoco"]:
            rec = peer([peers["mujoco"], "mujoco_drape.py", *common, "--mesh", "sheet"])
            out[f"mujoco_{n}"] = rec["cpu_per_simulated_s"]
            out[f"mujoco_x_{n}"] = max(c["intersections"] for c in rec["checks"])
            out[f"ratio_mujoco_{n}"] = out[f"shoal_{n}"] / out[f"mujoco_{n}"]
            line += f"; MuJoCo {rec['cpu_per_simulated_s']:.1f}, {out[f'mujoco_x_{n}']} intersections"
        print(line, flush=True)
    return out


def twist_round(args, k: int, peers: dict) -> dict:
    """One round of the twist: shoal, then Newton if ``peers`` names its Python."""
    ours = shoal_run(load_scenario("cloth-twist").params.sheet(), "twist", args.seconds, args.out if k == 1 else None)
    out = {"shoal": ours["cpu_per_simulated_s"], "shoal_x": ours["final_intersections"],
           "shoal_x_max": ours["intersections"]}
    line = (f"round {k}: {describe('shoal', ours)}, {ours['rollbacks']} rollbacks, "
            f"least gap {ours['min_gap'] * 1e3:.2f} mm")
    if peers["newton"]:
        checks = ",".join(f"{t:g}" for t in check_times(args.seconds))
        rec = peer([peers["newton"], "newton_twist.py", "--seconds", str(args.seconds), "--checks", checks])
        out.update(newton=rec["cpu_per_simulated_s"], newton_x=rec["intersections"],
                   newton_x_max=rec["max_intersections"], ratio_newton=out["shoal"] / rec["cpu_per_simulated_s"])
        line += f"; {describe('Newton', rec)}"
    print(line, flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scene", choices=("drape", "twist"), default="drape",
                    help="the drape against ARCSim and MuJoCo, or the twist against Newton (default drape)")
    ap.add_argument("--n", type=int, nargs="+", help="the drape's vertices along a side (default 33)")
    ap.add_argument("--seconds", type=float, help="simulated time, s (default 0.4 for the drape, 1.0 for the twist)")
    ap.add_argument("--out", type=Path, help="write shoal's first round's frames, windows and picture here")
    add_arguments(ap)
    args = ap.parse_args()
    if args.seconds is not None and not args.seconds > 0:
        ap.error(f"--seconds must be positive, got {args.seconds}")
    if args.scene == "twist" and args.n:
        ap.error("--n is the drape's: the twist is Newton's 50 x 50 sheet")
    args.n = args.n or [33]
    args.seconds = args.seconds or (0.4 if args.scene == "drape" else 1.0)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
    peers = {"mujoco": os.environ.get("MUJOCO_PYTHON"), "newton": os.environ.get("NEWTON_PYTHON"),
             "arcsim": os.environ.get("ARCSIM") if os.environ.get("ARCSIM_HOME") else None}
    with Benchmark("cloth", args) as bench:
        print(f"{args.scene}, {args.seconds} s simulated; CPU s per simulated s, medians ± spread of "
              f"{args.repeats} rounds")
        rounds = itertools.count(1)
        if args.scene == "twist":
            if not peers["newton"]:
                print("Newton: set NEWTON_PYTHON (see bench/newton_twist.py) to compare in this run")
            st = repeat(lambda: twist_round(args, next(rounds), peers), args.repeats)
            line = (f"2,500 vertices: shoal {st['shoal'].show(1, 1)} (intersections at the end "
                    f"{st['shoal_x'].median:.0f}, most {st['shoal_x_max'].median:.0f})")
            if "newton" in st:
                line += (f"; Newton {st['newton'].show(1, 1)} (intersections at the end {st['newton_x'].median:.0f}, "
                         f"most {st['newton_x_max'].median:.0f}), shoal / Newton {st['ratio_newton'].show()}")
            print(line)
            bench.add(scene="twist", seconds=args.seconds, **st)
            return
        if not peers["arcsim"]:
            print("ARCSim: set ARCSIM and ARCSIM_HOME (see bench/arcsim_drape.py) to compare in this run")
        if not peers["mujoco"]:
            print("MuJoCo: set MUJOCO_PYTHON (see bench/mujoco_drape.py) to compare in this run")
        st = repeat(lambda: drape_round(args, next(rounds), peers), args.repeats)
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
