"""Over-decomposition: is it free? The mean step time of each app with K tiles per core, as a
ratio to one tile per core, on both executors and on 1 and 2 workers of one node.

For every app, K in 1, 2, 4, 8, 16, 64 tiles per core, ``--workers`` 1 and 2 (``--nodes 1``)
and ``--executor`` python (the reference) and native, one ``shoal run SCENARIO --steps S
--nodes 1 --workers W --tiles-per-core K --executor E --out DIR`` (frames off) in a subprocess.
Its ``summary.json`` gives ``step_time_mean_s`` (the run's wall time over its steps: start-up
left out) and ``wall_s``; the figure the table shows is the mean step time over steps 1 to
S - 1 (its ``trace.h5``'s step ends), which also leaves out step 0: the kernels' first calls,
the native engine's first run, the first halos. The ratio is each run's step time over that of
K = 1 on the same executor and worker count in the same round; its median is quoted.

The apps, at the sizes of the other benchmarks where they have one:

- ``sph2d``: ``sph-dam-break`` at ``app.dx = 0.01`` (about 20k particles);
- ``swe``: ``swe-radial-dam-break`` as ``bench/swe.py`` runs it: TUM SWE's radial dam break on
  a uniform 1000 x 1000 grid in root blocks of 100 x 100 cells, f-wave, first order (a tile
  holds whole blocks, so 100 tiles at most: K = 64 on 2 workers cannot be made);
- ``swe-adaptive``: ``swe-radial-dam-break`` as the scenario has it: 16 x 16 root blocks
  refining from level 0 to 2 where the wave is (a native run ends at every regrid);
- ``seismic``: ``seismic-layered-2d`` (600 x 200 points, order 4), every point computed in
  every step (``app.skip_zero = false``, as ``bench/seismic.py`` does), so the work per step
  depends neither on how far the wave has come nor on how finely the tiles cut the still part;
- ``sph3d``: ``sph3d-dam-break`` (100k particles, the size of ``bench/sph.py``'s input);
- ``synthetic``: ``synthetic-hotspot`` (256 x 256 cells).

Steps are chosen so that a run takes a few seconds. Every figure is the median of
``--repeats`` rounds (default 5) with its spread (max - min over the median). A round runs
every K of one app, and for each K the four configurations one after the other (the executors'
order swapped every other round), so both executors see the same machine. A K that cannot be
run (a tiling too fine for the grid) prints as n/a, with the run's error under the table. The
targets print beside each table: on 1 worker, K = 16 at most 1.10x and K = 64 at most 1.25x
the time of K = 1; on 1 node x 2 workers, every K at most 1.0x.

``--quick``: K in 1, 16, 64 and one round, a sanity run. ``--apps`` picks the apps.

Run: ``python bench/overdecomposition.py [--apps sph2d swe seismic sph3d synthetic] [--quick]
[--repeats 5] [--json FILE]``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from common import Benchmark, add_arguments, repeat
from shoal.trace import Trace
from swe import SCENARIO as SWE_SCENARIO

KS = (1, 2, 4, 8, 16, 64)
QUICK_KS = (1, 16, 64)
WORKERS = (1, 2)
EXECUTORS = ("python", "native")
# The targets: the most K tiles per core may cost against K = 1, per worker count.
TARGETS = {1: {16: 1.10, 64: 1.25}, 2: {k: 1.0 for k in KS if k > 1}}
TIMEOUT_S = 600  # one run; beyond it the configuration counts as failed


@dataclass(frozen=True)
class Case:
    """One app at its benchmark size: a scenario, its size in words, its overrides and the
    steps a run takes."""

    scenario: str
    size: str
    steps: int
    sets: dict = field(default_factory=dict)

    def flags(self) -> list[str]:
        """``--set KEY=VALUE`` for every override (values in TOML, which JSON's are here)."""
        return [arg for key, value in self.sets.items() for arg in ("--set", f"{key}={json.dumps(value)}")]


CASES = {
    "sph2d": Case("sph-dam-break", "dx = 0.01, 20k particles", 150, {"app.dx": 0.01}),
    # bench/swe.py's problem at its default --cells 1000 --block 100.
    "swe": Case("swe-radial-dam-break", "bench/swe.py's: uniform 1000 x 1000 cells in 10 x 10 blocks, f-wave", 50,
                {**{f"app.{k}": v for k, v in SWE_SCENARIO.items()}, "app.blocks": [10, 10], "app.block": 100}),
    "swe-adaptive": Case("swe-radial-dam-break", "the scenario's: 16 x 16 root blocks of 16 x 16 cells, levels 0-2",
                         120),
    "seismic": Case("seismic-layered-2d", "600 x 200 points, order 4, every point every step", 300,
                    {"app.skip_zero": False}),
    "sph3d": Case("sph3d-dam-break", "100k particles", 25),
    "synthetic": Case("synthetic-hotspot", "256 x 256 cells", 60),
}


class RunFailed(Exception):
    """A run that wrote no summary; its message is the run's last line of error."""


def run_once(case: Case, k: int, workers: int, executor: str, out: Path) -> dict:
    """One ``shoal run`` of ``case`` with ``k`` tiles per core on ``workers`` workers of one node.

    Parameters
    ----------
    case : Case
        The app, its size and its steps.
    k : int
        Tiles per core.
    workers : int
        Worker threads of the one node.
    executor : str
        ``python`` or ``native``.
    out : Path
        The run folder (removed once read).

    Returns
    -------
    dict
        ``step_s`` (mean over steps 1 to S - 1, from the trace), ``step_time_mean_s`` and
        ``wall_s`` (the summary's) and ``tiles``.

    Raises
    ------
    RunFailed
        When the run fails or times out, with its last line of error.
    """
    cmd = [sys.executable, "-m", "shoal", "run", case.scenario, "--steps", str(case.steps), "--nodes", "1",
           "--workers", str(workers), "--tiles-per-core", str(k), "--executor", executor, "--out", str(out),
           "--quiet", *case.flags(), "--set", "run.frame_every=0"]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S)
        if done.returncode or not (out / "summary.json").exists():
            lines = (done.stderr + done.stdout).strip().splitlines()
            raise RunFailed(lines[-1].strip() if lines else f"exit code {done.returncode}")
        summary = json.loads((out / "summary.json").read_text())
        ends = np.asarray(Trace.read(out).step_end, dtype=np.float64)
    except subprocess.TimeoutExpired:
        raise RunFailed(f"no end after {TIMEOUT_S} s") from None
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return {"step_s": float((ends[-1] - ends[0]) / (len(ends) - 1)), "step_time_mean_s": summary["step_time_mean_s"],
            "wall_s": summary["wall_s"], "tiles": summary["tiles"]}


def configurations(round_no: int) -> list[tuple[int, str]]:
    """(workers, executor) in the order round ``round_no`` runs them: the executors swap places
    every other round."""
    executors = EXECUTORS if round_no % 2 else EXECUTORS[::-1]
    return [(w, e) for w in WORKERS for e in executors]


def one_round(case: Case, ks: tuple[int, ...], tmp: Path, errors: dict, round_no: int) -> dict[str, float]:
    """Round ``round_no`` of one app: every K and configuration once; step times, summary
    figures and ratios to K = 1 within the round, NaN where a run failed (its error kept in
    ``errors``, and the configuration not tried again)."""
    out: dict[str, float] = {}
    for k in ks:
        for w, e in configurations(round_no):
            key = f"{e}_{w}_{k}"
            figures = dict.fromkeys(("step_s", "step_time_mean_s", "wall_s", "tiles"), math.nan)
            if key not in errors:
                try:
                    figures = run_once(case, k, w, e, tmp / f"{key}-{round_no}")
                except RunFailed as exc:
                    errors[key] = str(exc)
            out |= {f"{key}.{name}": value for name, value in figures.items()}
            out[f"{key}.ratio"] = out[f"{key}.step_s"] / out.get(f"{e}_{w}_1.step_s", math.nan)
            shown = f"{out[f'{key}.step_s'] * 1e3:.2f} ms" if key not in errors else f"failed: {errors[key]}"
            print(f"  round {round_no}: K={k:<2} {w}w {e:<6} {shown}", flush=True)
    return out


def measure(case: Case, ks: tuple[int, ...], tmp: Path, repeats: int) -> tuple[dict, dict[str, str]]:
    """``repeats`` rounds of :func:`one_round`: a :class:`~common.Stat` per figure, and the
    error of every configuration that failed (keyed ``executor_workers_K``)."""
    errors: dict[str, str] = {}
    rounds = itertools.count(1)
    return repeat(lambda: one_round(case, ks, tmp, errors, next(rounds)), repeats), errors


def cell(stats: dict, key: str, errors: dict) -> str:
    """A table cell: ms per step ±spread and the ratio to K = 1 ±spread, or n/a."""
    if key in errors or math.isnan(stats[f"{key}.step_s"].median):
        return "n/a"
    ratio = stats[f"{key}.ratio"]
    shown = f"{ratio.median:.2f}x ±{ratio.spread:.0%}" if not math.isnan(ratio.median) else "n/a"
    return f"{stats[f'{key}.step_s'].show(1e3)} {shown}"


def targets(stats: dict, ks: tuple[int, ...], errors: dict) -> list[str]:
    """One line per worker count: each target's K, its ratio per executor, met or missed."""
    lines = []
    for w, limits in TARGETS.items():
        parts = []
        for e in EXECUTORS:
            checks = []
            for k, limit in limits.items():
                key = f"{e}_{w}_{k}"
                if k not in ks:
                    continue
                ratio = math.nan if key in errors else stats[f"{key}.ratio"].median
                verdict = "n/a" if math.isnan(ratio) else f"{ratio:.2f}x {'met' if ratio <= limit else 'MISSED'}"
                checks.append(f"K={k} <= {limit:.2f}x: {verdict}")
            parts.append(f"{e}: " + ", ".join(checks))
        lines.append(f"  target, 1 x {w} worker{'s' if w > 1 else ''}: " + "; ".join(parts))
    return lines


def table(name: str, case: Case, ks: tuple[int, ...], stats: dict, errors: dict, repeats: int) -> None:
    """Print one app's table, its targets and the errors of the configurations that failed."""
    print(f"\n{name}: {case.scenario} ({case.size}), {case.steps} steps, steps 1-{case.steps - 1} timed; "
          f"ms per step and ratio to K = 1, medians ± spread of {repeats} round(s)")
    columns = [(w, e) for w in WORKERS for e in EXECUTORS]
    print(f"{'K':>3} " + " ".join(f"{f'{e} {w}w':>26}" for w, e in columns))
    for k in ks:
        print(f"{k:>3} " + " ".join(f"{cell(stats, f'{e}_{w}_{k}', errors):>26}" for w, e in columns))
    for line in targets(stats, ks, errors):
        print(line)
    for key, error in errors.items():
        e, w, k = key.split("_")
        print(f"  n/a: K={k}, {w}w, {e}: {error}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--apps", nargs="+", choices=list(CASES), default=list(CASES), help="the apps (default all)")
    ap.add_argument("--quick", action="store_true", help=f"K in {', '.join(map(str, QUICK_KS))} and one round")
    add_arguments(ap)
    args = ap.parse_args()
    if args.quick:
        args.repeats = 1
    ks = QUICK_KS if args.quick else KS
    with Benchmark("overdecomposition", args) as bench, tempfile.TemporaryDirectory(prefix="overdecomp-") as tmp:
        print(f"K tiles per core in {', '.join(map(str, ks))}; 1 node x 1 and 2 workers; executors "
              f"{' and '.join(EXECUTORS)}; {args.repeats} round(s)")
        for name in args.apps:
            case = CASES[name]
            print(f"-- {name}", flush=True)
            stats, errors = measure(case, ks, Path(tmp), args.repeats)
            table(name, case, ks, stats, errors, args.repeats)
            for k, (w, e) in itertools.product(ks, configurations(1)):
                key = f"{e}_{w}_{k}"
                figures = {} if key in errors else {
                    what: stats[f"{key}.{what}"] for what in ("step_s", "ratio", "step_time_mean_s", "wall_s")
                    if not math.isnan(stats[f"{key}.{what}"].median)}
                tiles = None if key in errors else int(stats[f"{key}.tiles"].median)
                bench.add(app=name, scenario=case.scenario, sets=case.sets, steps=case.steps, tiles_per_core=k,
                          workers=w, executor=e, tiles=tiles, error=errors.get(key), **figures)


if __name__ == "__main__":
    main()
