"""mantaflow's FLIP water (``scenes/flip02_surface.py``): CPU seconds per frame, particles, CG iterations.

The peer of shoal's ``flip`` app (issue 35, brief ``graphical-water.md`` §4). mantaflow's scene
``flip02_surface.py`` is FLIP with a particle level set for the surface, particle resampling
(``adjustNumber``, 8-16 particles per fluid cell in 3D) and a MIC(0)-preconditioned CG pressure
solve with ghost-fluid boundaries; one loop iteration of the scene is one step of 0.8 cell-times,
and one step is what it (and this driver) calls a frame. Setup 0 is a breaking dam, a box of
0.4 x 0.6 x 1 of the domain in one corner; setup 1 is a sphere dropped into a shallow pool.

This driver reads the scene from the mantaflow checkout and writes a modified copy into a
temporary folder: the resolution, the setup and the number of frames set; no GUI, no files
written; every call of the loop timed with :func:`time.process_time` (the CPU time of the
``manta`` process, whose embedded Python runs the scene); ``solvePressure`` split into the three
calls it is made of (``computePressureRhs``, ``solvePressureSystem``, ``correctVelocity``, with
the same arguments) so that the CG solve is timed on its own and the divergence it starts from
is known; and after each frame, outside its timing, the particles, the active particles and the
fluid cells counted. mantaflow prints each solve's CG iterations and final residual at debug
level 2, which the driver sets and reads back. Nothing of the scene's numerics is changed (the
scene keeps its own settings: a FLIP ratio of 0.97, gravity 1e-3 cells per step², RK4 particle
advection, the surface mesh built every frame, which ``phases_s["createMesh"]`` times); the
run is deterministic, so every run gives the same particles, cells and iterations frame by frame.

The particles are resampled to 8-16 per fluid cell and their number grows through the run (at
64³: 412k at the start, 528k at frame 17, 580k at frame 31, about 610k from frame 50 on), so the
medians depend on how many frames are run: a comparison at the same particle count runs the
same frames.

The tolerance is mantaflow's default: CG stops when the **max norm** of the residual falls below
``cgAccuracy`` = 1e-3, an absolute bound (the solve starts from p = 0, so the relative bound it
amounts to is ``cgAccuracy`` over the max norm of the divergence, reported as
``rhs_max_norm``). The solver loops over the whole dense grid, fluid cell or not.

:func:`run` returns the medians over the frames after the ``skip``-th (5, as the brief), and
every frame's values; ``python bench/mantaflow_flip.py`` prints them as one JSON line.

mantaflow (``thunil/mantaflow``, Apache-2.0) is not part of shoal: none of its code belongs in
this repository. Build it in a folder of its own outside the repository, single-threaded::

    git clone https://github.com/thunil/mantaflow "$TMPDIR/peers/mantaflow"   # or any folder
    cd "$TMPDIR/peers/mantaflow" && mkdir build && cd build
    cmake .. -DGUI=OFF -DOPENMP=OFF -DTBB=OFF -DNUMPY=OFF -DCMAKE_BUILD_TYPE=Release   # -O3
    make -j2
    export MANTAFLOW="$TMPDIR/peers/mantaflow"   # the checkout; its executable is build/manta

``MANTAFLOW`` names the checkout (it holds ``scenes/flip02_surface.py`` and, unless
``MANTAFLOW_EXE`` names the executable elsewhere, ``build/manta``); unset, it is
``peers/mantaflow`` under the system's temporary folder (:func:`tempfile.gettempdir`).

Run: ``python bench/mantaflow_flip.py --resolution 64 --frames 30``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

SCENE = "scenes/flip02_surface.py"  # under the checkout
EXECUTABLE = "build/manta"  # under the checkout, unless MANTAFLOW_EXE says otherwise
SKIP = 5  # frames left out of the medians, as the brief
CG_ACCURACY = 1e-3  # solvePressure's default cgAccuracy, which the scene keeps
CG_NORM = "max"  # solvePressure's default (useL2Norm=False): max |r| < cgAccuracy, absolute
SETUPS = {0: "dam", 1: "drop"}
ITERATIONS = re.compile(r"solvePressure done\. Iterations:(\d+), residual:(\S+)")
FRAME_TIMEOUT_S = 120  # per frame, generous: a 128³ frame takes a few seconds

# Runs inside mantaflow's interpreter, right after the scene's ``from manta import *``.
# ``{results}`` is the JSON-lines file it appends one record per frame to.
_PROLOGUE = '''
# --- shoal bench/mantaflow_flip.py: timing and counts, nothing of the numerics changed ---
import json as _json
import time as _time
setDebugLevel(2)  # mantaflow prints each solve's CG iterations at level 2


class _Bench:
    def __init__(self, path):
        self.out = open(path, "w")
        self.phases, self.rhs = {{}}, None

    def timed(self, name, fn):
        def call(*args, **kwargs):
            t0 = _time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                self.phases[name] = self.phases.get(name, 0.0) + _time.process_time() - t0
        return call

    def begin(self):
        self.phases = {{}}
        self.t0 = _time.process_time()

    def end(self):
        cpu = _time.process_time() - self.t0
        self.out.write(_json.dumps({{
            "cpu_s": cpu, "phases_s": self.phases,
            "particles": pp.pySize(), "particles_active": pindex.pySize(),
            "fluid_cells": flags.countCells(FlagFluid),
            "rhs_max_norm": self.rhs.getMaxAbs() if self.rhs is not None else None}}) + "\\n")
        self.out.flush()

    def solve_pressure(self, vel, pressure, flags, **kwargs):
        # solvePressure is exactly these three calls (plugin/pressure.cpp); split to time the CG
        if self.rhs is None:
            self.rhs = s.create(RealGrid)
        self.rhs.setConst(0.)
        self.timed("computePressureRhs", computePressureRhs)(
            rhs=self.rhs, vel=vel, pressure=pressure, flags=flags, **kwargs)
        self.timed("solvePressureSystem", solvePressureSystem)(
            rhs=self.rhs, vel=vel, pressure=pressure, flags=flags, **kwargs)
        self.timed("correctVelocity", correctVelocity)(vel=vel, pressure=pressure, flags=flags, **kwargs)


_bench = _Bench({results!r})
# --- end of shoal's prologue ---
'''

_KEYWORDS = {"if", "elif", "while", "for", "return", "print", "assert", "not", "and", "or", "in"}


class MantaflowMissing(RuntimeError):
    """mantaflow's checkout, scene or executable is not where ``MANTAFLOW`` points."""


def default_root() -> Path:
    """Where the checkout is looked for when ``MANTAFLOW`` is unset: ``peers/mantaflow`` under
    the system's temporary folder."""
    return Path(tempfile.gettempdir()) / "peers" / "mantaflow"


def find_mantaflow(root: str | os.PathLike | None = None) -> tuple[Path, Path]:
    """The mantaflow checkout and its ``manta`` executable.

    Parameters
    ----------
    root : path-like or None
        The checkout; if None, ``MANTAFLOW``, else :func:`default_root`. The executable is
        ``MANTAFLOW_EXE`` if set, else ``build/manta`` in the checkout.

    Returns
    -------
    root : Path
        The checkout (it holds ``scenes/flip02_surface.py``).
    exe : Path
        The executable.

    Raises
    ------
    MantaflowMissing
        With a message saying where it looked and how to build it.
    """
    where = "root" if root is not None else "MANTAFLOW" if os.environ.get("MANTAFLOW") else "the default"
    root = Path(root or os.environ.get("MANTAFLOW") or default_root()).expanduser()
    hint = "build it as this file's docstring says (bench/mantaflow_flip.py) and set MANTAFLOW to the checkout"
    if not (root / SCENE).is_file():
        raise MantaflowMissing(f"no mantaflow checkout at {root} ({where}: no {SCENE}); {hint}")
    exe = Path(os.environ.get("MANTAFLOW_EXE") or root / EXECUTABLE).expanduser()
    if not (exe.is_file() and os.access(exe, os.X_OK)):
        raise MantaflowMissing(f"no mantaflow executable at {exe}; {hint} (or MANTAFLOW_EXE to the executable)")
    return root.resolve(), exe.resolve()


def scene_script(source: str, resolution: int, frames: int, setup: int, results: str) -> str:
    """The scene ``flip02_surface.py`` modified for timing (see the module's docstring).

    Parameters
    ----------
    source : str
        The scene's text, as in mantaflow's ``scenes/flip02_surface.py``.
    resolution : int
        Cells along each side of the cubic domain.
    frames : int
        Loop iterations (steps) to run.
    setup : int
        0 the breaking dam, 1 the drop into a pool.
    results : str
        The file the script appends one JSON record per frame to.

    Returns
    -------
    str
        The modified script.

    Raises
    ------
    ValueError
        If the scene does not have the lines this driver changes (another mantaflow version).
    """
    def sub(pattern: str, repl: str, text: str) -> str:
        out, n = re.subn(pattern, repl, text, flags=re.M)
        if n != 1:
            raise ValueError(f"{SCENE}: expected one line matching {pattern!r}, found {n}")
        return out

    text = sub(r"^from manta import \*[ \t]*$", lambda m: m.group(0) + _PROLOGUE.format(results=results), source)
    text = sub(r"^res\s*=\s*\d+[ \t]*$", f"res = {int(resolution)}", text)
    text = sub(r"^dim\s*=\s*\d+[ \t]*$", "dim = 3", text)
    text = sub(r"^setup\s*=\s*\d+[ \t]*$", f"setup = {int(setup)}", text)
    text = sub(r"^saveParts\s*=\s*\w+[ \t]*$", "saveParts = False", text)
    text = sub(r"^if 1 and \(GUI\):", "if 0 and (GUI):", text)
    head, loop = re.split(r"(?m)^(?=for t in range\(\d+\):)", text, maxsplit=1)
    loop = sub(r"^for t in range\(\d+\):[ \t]*$", f"for t in range({int(frames)}):\n\t_bench.begin()", loop)
    loop = sub(r"^\ts\.step\(\)[ \t]*$", "\ts.step()\n\t_bench.end()", loop)
    loop = sub(r"^(\t+)solvePressure\(", r"\1_bench.solve_pressure(", loop)

    def timed(m: re.Match) -> str:
        indent, name = m.group(1), m.group(2)
        if name in _KEYWORDS or name.startswith("_bench"):
            return m.group(0)
        return f"{indent}_bench.timed({name.rsplit('.', 1)[-1]!r}, {name})("

    loop = re.sub(r"^(\t+)([A-Za-z_][\w.]*)\(", timed, loop, flags=re.M)
    return head + loop


def _median(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return float(statistics.median(values)) if values else None


def run(resolution: int = 64, frames: int = 30, setup: int = 0, skip: int = SKIP,
        root: str | os.PathLike | None = None, keep: str | os.PathLike | None = None) -> dict:
    """Run mantaflow's ``flip02_surface`` scene single-threaded and time every frame.

    Parameters
    ----------
    resolution : int
        Cells along each side of the cubic domain (the brief: 64 and 128).
    frames : int
        Frames (steps of the scene's loop) to run; must exceed ``skip``.
    setup : int
        0 the breaking dam (the benchmark), 1 the drop into a pool.
    skip : int
        Frames left out of the medians at the start.
    root : path-like or None
        The mantaflow checkout (see :func:`find_mantaflow`).
    keep : path-like or None
        A folder to write the modified scene, mantaflow's log and the per-frame records into
        and leave; a temporary one if None.

    Returns
    -------
    dict
        ``peer`` ("mantaflow"), ``scene``, ``setup``, ``resolution``, ``frames``, ``skip``,
        ``threads`` (1), ``cg_accuracy`` and ``cg_norm`` (the tolerance: max |r| < 1e-3,
        absolute), ``cg_preconditioner`` ("MIC(0), tau 0.97");
        the medians over the frames after the ``skip``-th:
        ``cpu_s_per_frame``, ``particles`` (the particle system's size after the frame, deleted
        particles not yet compacted included, at most 5 %), ``particles_active`` (those indexed
        in the frame's level-set pass), ``fluid_cells``, ``cg_iterations``, ``cg_residual``
        (final max |r|), ``rhs_max_norm`` (max |divergence|, the initial residual),
        ``cg_relative_tolerance`` (``cg_accuracy / rhs_max_norm``), ``cg_solve_s`` (the CPU time
        of ``solvePressureSystem``: matrix, MIC(0) factorisation and iterations),
        ``cg_s_per_iteration`` (``cg_solve_s`` over the iterations, set-up included),
        ``fluid_cell_iterations_per_s`` (fluid cells x iterations over ``cg_solve_s``),
        ``particles_per_s`` (``particles`` over the frame's CPU time), ``phases_s`` (CPU s per
        frame of each call in the scene's loop, ``solvePressure``'s three parts by name);
        ``cpu_s_range`` (min, max) and ``cg_iterations_range``; ``per_frame``, every frame's
        record (``cpu_s``, ``phases_s``, ``particles``, ``particles_active``, ``fluid_cells``,
        ``rhs_max_norm``, ``cg_iterations``, ``cg_residual``).

    Raises
    ------
    MantaflowMissing
        If mantaflow is not found.
    RuntimeError
        If mantaflow fails or its output is not the expected one.
    ValueError
        For a bad argument, or a scene this driver cannot modify.
    """
    if resolution < 8:
        raise ValueError(f"resolution must be at least 8, got {resolution}")
    if setup not in SETUPS:
        raise ValueError(f"setup must be 0 (dam) or 1 (drop), got {setup}")
    if skip < 0 or frames <= skip:
        raise ValueError(f"frames ({frames}) must exceed skip ({skip}), and skip be at least 0")
    root, exe = find_mantaflow(root)
    source = (root / SCENE).read_text()
    with tempfile.TemporaryDirectory(prefix="mantaflow-flip-") as tmp:
        folder = Path(keep).resolve() if keep is not None else Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        results = folder / "frames.jsonl"
        script = folder / "flip02_surface_bench.py"
        script.write_text(scene_script(source, resolution, frames, setup, str(results)))
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        with open(folder / "mantaflow.log", "w") as log:
            try:
                done = subprocess.run([str(exe), str(script)], cwd=folder, env=env, stdout=log,
                                      stderr=subprocess.STDOUT, timeout=FRAME_TIMEOUT_S * frames)
            except subprocess.TimeoutExpired as e:
                raise RuntimeError(f"mantaflow took more than {e.timeout:.0f} s") from None
        text = (folder / "mantaflow.log").read_text(errors="replace")
        records = [json.loads(line) for line in results.read_text().splitlines()] if results.exists() else []
    solves = ITERATIONS.findall(text)
    if done.returncode != 0 or len(records) != frames:
        last = [ln for ln in text.strip().splitlines() if ln.strip()][-3:] or ["no output"]
        raise RuntimeError(f"mantaflow exited with status {done.returncode} after {len(records)} of {frames} "
                           f"frames: {' | '.join(last)}")
    if len(solves) != frames:
        raise RuntimeError(f"found {len(solves)} pressure solves in mantaflow's output for {frames} frames")
    for rec, (iters, residual) in zip(records, solves, strict=True):
        rec["cg_iterations"], rec["cg_residual"] = int(iters), float(residual)

    kept = records[skip:]

    def med(key: str) -> float | None:
        return _median([r[key] for r in kept])

    for r in kept:
        cg = r["phases_s"].get("solvePressureSystem", 0.0)
        r["_cg_per_it"] = cg / r["cg_iterations"] if r["cg_iterations"] else None
        r["_cell_its"] = r["fluid_cells"] * r["cg_iterations"] / cg if cg else None
        r["_pps"] = r["particles"] / r["cpu_s"] if r["cpu_s"] else None
        r["_rel"] = CG_ACCURACY / r["rhs_max_norm"] if r["rhs_max_norm"] else None
    phases = sorted({k for r in kept for k in r["phases_s"]})
    summary = {
        "peer": "mantaflow", "scene": f"flip02_surface setup {setup} ({SETUPS[setup]})", "setup": setup,
        "resolution": resolution, "frames": frames, "skip": skip, "threads": 1,
        "cg_accuracy": CG_ACCURACY, "cg_norm": CG_NORM, "cg_preconditioner": "MIC(0), tau 0.97",
        "cpu_s_per_frame": med("cpu_s"), "particles": med("particles"), "particles_active": med("particles_active"),
        "fluid_cells": med("fluid_cells"), "cg_iterations": med("cg_iterations"), "cg_residual": med("cg_residual"),
        "rhs_max_norm": med("rhs_max_norm"), "cg_relative_tolerance": med("_rel"),
        "cg_solve_s": _median([r["phases_s"].get("solvePressureSystem") for r in kept]),
        "cg_s_per_iteration": med("_cg_per_it"), "fluid_cell_iterations_per_s": med("_cell_its"),
        "particles_per_s": med("_pps"),
        "phases_s": {k: _median([r["phases_s"].get(k, 0.0) for r in kept]) for k in phases},
        "cpu_s_range": [min(r["cpu_s"] for r in kept), max(r["cpu_s"] for r in kept)],
        "cg_iterations_range": [min(r["cg_iterations"] for r in kept), max(r["cg_iterations"] for r in kept)],
    }
    for r in kept:
        for k in ("_cg_per_it", "_cell_its", "_pps", "_rel"):
            del r[k]
    summary["per_frame"] = records
    return summary


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--resolution", type=int, default=64, help="cells along a side (default 64)")
    ap.add_argument("--frames", type=int, default=30, help="frames to run (default 30)")
    ap.add_argument("--setup", type=int, default=0, choices=sorted(SETUPS), help="0 dam (default), 1 drop into a pool")
    ap.add_argument("--skip", type=int, default=SKIP, help=f"frames left out of the medians (default {SKIP})")
    ap.add_argument("--keep", type=Path, default=None, help="write the script, log and records here and keep them")
    ap.add_argument("--per-frame", action="store_true", help="also print every frame's record")
    args = ap.parse_args()
    try:
        record = run(args.resolution, args.frames, args.setup, args.skip, keep=args.keep)
    except (RuntimeError, OSError, ValueError) as e:
        sys.exit(f"mantaflow_flip: {e}")
    if not args.per_frame:
        del record["per_frame"]
    print(json.dumps(record))


if __name__ == "__main__":
    main()
