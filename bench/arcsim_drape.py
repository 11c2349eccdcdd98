"""ARCSim on the drape scene: CPU seconds per simulated second and triangle–triangle intersections.

The scene: a 1 m square sheet of ``n x n`` vertices, its quads cut along alternating diagonals
(the mesh of ``bench/mujoco_drape.py``'s ``sheet_mesh``), flat at z = 0.3 m, falls under gravity
(-9.81 m/s² along z) onto a static sphere of radius 0.25 m at the origin (an icosphere with its
vertices on the sphere, 642 vertices by default). This driver writes both meshes as OBJ files
and ARCSim's scene configuration into a temporary folder, with the settings every ARCSim run
of this scene uses: material ``gray-interlock`` thickened x 2; ``repulsion_thickness`` 5 mm and
``collision_stiffness`` 1e6; frames of 40 ms in 8 steps (a 5 ms implicit Euler step); remeshing,
strain limiting, the pop filter, plasticity and fracture disabled. Friction keeps ARCSim's
defaults (0.6 cloth-cloth, 0.3 cloth-obstacle). Remeshing sizes (10 to 200 mm) are given even
though remeshing is off: ARCSim bounds every triangle's inverse rest shape by 1000 over the
smallest size, and without one it zeroes them all, leaving the sheet with no elastic force.

It runs ARCSim's headless ``simulate_offline`` mode on ``--threads`` OpenMP threads (default 1)
and takes its CPU time, all threads and the whole run (setup, steps and the frames it saves),
from :func:`resource.getrusage` of the children. ARCSim saves the sheet every frame; every saved
frame is read back and its intersections counted with the counter of ``bench/mujoco_drape.py``
(``count_intersections``: pairs of triangles that share no vertex where an edge of one crosses
the other), and ``ipctk.has_intersections`` answers yes or no where ``ipctk`` is installed
(``null`` otherwise).

It prints one JSON line: ``peer``, ``vertices``, ``triangles``, ``timestep_s``, ``simulated_s``,
``frames``, ``threads``, ``cpu_s``, ``cpu_per_simulated_s``, ``checks`` (per check time, rounded
to a frame: ``t``, ``frame``, ``intersections``, ``has_intersections``, ``z_min``, ``z_max``),
``z_min`` and ``z_max`` at the end, ``frames_checked``, ``frames_with_intersections``,
``max_intersections`` (over every saved frame), ``collision_failures`` (ARCSim's "Collision
resolution failed to converge!" messages) and ``module_wall_s`` (ARCSim's own wall-clock
timers per module, summed over the run).

ARCSim (``jjdunlop/arcsim-cpu``, a fork of ARCSim 0.3.1) is licensed by the Regents of the
University of California for research and non-profit use only: none of its code, and nothing
that builds it, belongs in this repository. Build it outside the repository following its
README (CMake, headless: its CMake file always compiles with ``-DNO_OPENGL``), then::

    export ARCSIM=<ARCSim build folder>/arcsim
    export ARCSIM_HOME=<ARCSim source folder>   # holds materials/gray-interlock.json

Run: ``python bench/arcsim_drape.py --n 33 --seconds 2.0 --checks 0.4,1.0,2.0``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from mujoco_drape import GRAVITY, SPHERE_RADIUS, count_intersections, ipc_has_intersections, parse_times, sheet_mesh

FRAME_TIME = 0.04  # s, one saved frame
FRAME_STEPS = 8  # implicit steps per frame: a 5 ms step
MATERIAL = "materials/gray-interlock.json"  # under ARCSIM_HOME
DISABLED = ["remeshing", "strainlimiting", "popfilter", "plasticity", "fracture"]
MODULES = ["proximity", "physics", "strainlimiting", "collision", "remeshing", "separation", "popfilter",
           "plasticity", "fracture"]  # the columns of ARCSim's timing file, in its order
FAILED = "Collision resolution failed to converge!"
# ARCSim clamps each triangle's inverse rest shape to 1000 / (the smallest remeshing size) even with
# remeshing off; left unset, that size is -inf and every triangle loses its elastic forces.
REMESH_SIZE = (10e-3, 200e-3)  # m


def icosphere(radius: float, subdivisions: int) -> tuple[np.ndarray, np.ndarray]:
    """A sphere of triangles: an icosahedron whose faces are cut in four ``subdivisions`` times,
    every vertex pushed onto the sphere.

    Parameters
    ----------
    radius : float
        The sphere's radius, m; it is centred on the origin.
    subdivisions : int
        Times the faces are cut: ``10 * 4**k + 2`` vertices, ``20 * 4**k`` triangles.

    Returns
    -------
    vertices : numpy.ndarray
        ``(V, 3)`` positions, m.
    triangles : numpy.ndarray
        ``(T, 3)`` vertex indices, counter-clockwise seen from outside.
    """
    p = (1 + 5**0.5) / 2
    vertices = [(-1, p, 0), (1, p, 0), (-1, -p, 0), (1, -p, 0), (0, -1, p), (0, 1, p), (0, -1, -p), (0, 1, -p),
                (p, 0, -1), (p, 0, 1), (-p, 0, -1), (-p, 0, 1)]
    vertices = [np.array(v, dtype=np.float64) / np.linalg.norm(v) for v in vertices]
    faces = [(0, 11, 5), (0, 5, 1), (0, 1, 7), (0, 7, 10), (0, 10, 11), (1, 5, 9), (5, 11, 4), (11, 10, 2),
             (10, 7, 6), (7, 1, 8), (3, 9, 4), (3, 4, 2), (3, 2, 6), (3, 6, 8), (3, 8, 9), (4, 9, 5),
             (2, 4, 11), (6, 2, 10), (8, 6, 7), (9, 8, 1)]
    for _ in range(subdivisions):
        middle: dict[tuple[int, int], int] = {}  # an edge's two ends -> its midpoint's index
        cut = []
        for a, b, c in faces:
            ab, bc, ca = (_midpoint(vertices, middle, i, j) for i, j in ((a, b), (b, c), (c, a)))
            cut += [(a, ab, ca), (b, bc, ab), (c, ca, bc), (ab, bc, ca)]
        faces = cut
    return radius * np.array(vertices), np.array(faces, dtype=np.int64)


def _midpoint(vertices: list[np.ndarray], middle: dict[tuple[int, int], int], i: int, j: int) -> int:
    """The index of the unit vector halfway between unit vectors ``i`` and ``j``, appended to
    ``vertices`` the first time an edge asks (``middle`` remembers the edges)."""
    key = (min(i, j), max(i, j))
    if key not in middle:
        m = vertices[i] + vertices[j]
        vertices.append(m / np.linalg.norm(m))
        middle[key] = len(vertices) - 1
    return middle[key]


def write_obj(path: Path, vertices: np.ndarray, triangles: np.ndarray, material: bool) -> None:
    """Write a triangle mesh as ARCSim reads it.

    Parameters
    ----------
    path : Path
        The file.
    vertices : numpy.ndarray
        ``(V, 3)`` positions, m.
    triangles : numpy.ndarray
        ``(T, 3)`` vertex indices.
    material : bool
        Also write each vertex's rest (material-space) position as a ``vt`` line, its x and y,
        and faces as ``f node/vt`` (a cloth); otherwise faces of plain indices (an obstacle).
    """
    lines = [f"v {x!r} {y!r} {z!r}" for x, y, z in vertices.tolist()]
    if material:
        lines += [f"vt {x!r} {y!r}" for x, y, _ in vertices.tolist()]
        lines += ["f " + " ".join(f"{i}/{i}" for i in tri) for tri in (triangles + 1).tolist()]
    else:
        lines += ["f " + " ".join(str(i) for i in tri) for tri in (triangles + 1).tolist()]
    path.write_text("\n".join(lines) + "\n")


def read_obj(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """The ``v`` positions and triangular ``f`` faces of an OBJ file ARCSim saved.

    Parameters
    ----------
    path : Path
        The file.

    Returns
    -------
    vertices : numpy.ndarray
        ``(V, 3)`` positions.
    triangles : numpy.ndarray
        ``(T, 3)`` vertex indices (from 0).
    """
    vertices, triangles = [], []
    for line in path.read_text().splitlines():
        word, *rest = line.split() or [""]
        if word == "v":
            vertices.append([float(v) for v in rest[:3]])
        elif word == "f":
            if len(rest) != 3:
                raise ValueError(f"{path.name}: a face that is not a triangle: {line!r}")
            triangles.append([int(w.split("/")[0]) - 1 for w in rest])
    return np.array(vertices, dtype=np.float64), np.array(triangles, dtype=np.int64)


def scene(folder: Path, home: Path, n: int, frames: int, sphere_subdivisions: int) -> Path:
    """Write the drape scene's meshes and ARCSim configuration into ``folder``.

    Parameters
    ----------
    folder : Path
        Where the files go.
    home : Path
        ARCSim's source folder (its materials).
    n : int
        Vertices along a side of the sheet.
    frames : int
        Frames to simulate, of ``FRAME_TIME`` each.
    sphere_subdivisions : int
        See :func:`icosphere`.

    Returns
    -------
    Path
        The configuration file.
    """
    write_obj(folder / "sheet.obj", *sheet_mesh(n), material=True)
    write_obj(folder / "sphere.obj", *icosphere(SPHERE_RADIUS, sphere_subdivisions), material=False)
    config = {
        "frame_time": FRAME_TIME,
        "frame_steps": FRAME_STEPS,
        "end_frame": frames,
        "cloths": [{"mesh": str(folder / "sheet.obj"),
                    "materials": [{"data": str(home / MATERIAL), "thicken": 2}],
                    "remeshing": {"size": list(REMESH_SIZE)}}],
        "obstacles": [{"mesh": str(folder / "sphere.obj")}],
        "motions": [],
        "gravity": [0, 0, GRAVITY],
        "disable": DISABLED,
        "magic": {"repulsion_thickness": 5e-3, "collision_stiffness": 1e6},
    }
    path = folder / "drape.json"
    path.write_text(json.dumps(config, indent=1) + "\n")
    return path


def children_cpu() -> float:
    """User and system CPU seconds of every child process waited for so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(binary: str, home: Path, n: int, seconds: float, checks: list[float], threads: int = 1,
        sphere_subdivisions: int = 3, keep: Path | None = None) -> dict:
    """Run ARCSim on the drape scene and count intersections in every frame it saved.

    Parameters
    ----------
    binary : str
        The ARCSim executable.
    home : Path
        ARCSim's source folder.
    n : int
        Vertices along a side of the sheet.
    seconds : float
        Simulated time, s (rounded to whole frames of ``FRAME_TIME``).
    checks : list of float
        Simulated times, s, reported one by one (rounded to frames); the end is always one.
    threads : int
        ``OMP_NUM_THREADS`` for ARCSim.
    sphere_subdivisions : int
        See :func:`icosphere`.
    keep : Path or None
        A folder to write the scene and ARCSim's output into and leave; a temporary one if None.

    Returns
    -------
    dict
        The record printed by :func:`main` (see the module's docstring).
    """
    frames = round(seconds / FRAME_TIME)
    with tempfile.TemporaryDirectory(prefix="arcsim-drape-") as tmp:
        folder = Path(keep).resolve() if keep is not None else Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        if (folder / "out").exists():
            raise RuntimeError(f"{folder} already holds ARCSim output (out/): give --keep a new folder")
        config = scene(folder, home, n, frames, sphere_subdivisions)
        out = folder / "out"
        env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
        cmd = [binary, "simulate_offline", "--no-export-obstacles", str(config), str(out)]
        before = children_cpu()
        with open(folder / "arcsim.log", "w") as log:
            done = subprocess.run(cmd, cwd=folder, env=env, stdout=log, stderr=subprocess.STDOUT)
        cpu = children_cpu() - before
        text = (folder / "arcsim.log").read_text(errors="replace")
        if done.returncode != 0:
            last = text.strip().splitlines()[-1:] or ["no output"]
            raise RuntimeError(f"ARCSim exited with status {done.returncode}: {last[0]}")
        counts, records = [], {}
        check_frames = {min(max(round(t / FRAME_TIME), 0), frames) for t in checks} | {frames}
        triangles0 = sheet_mesh(n)[1]
        for frame in range(frames + 1):
            path = out / f"cloth0_frame{frame}.obj"
            if not path.exists():
                raise RuntimeError(f"ARCSim saved no frame {frame} ({path.name})")
            x, f = read_obj(path)
            if len(x) != n * n or len(f) != len(triangles0):
                raise RuntimeError(f"frame {frame} has {len(x)} vertices and {len(f)} triangles, "
                                   f"not {n * n} and {len(triangles0)}")
            counts.append(count_intersections(x, f))
            if frame in check_frames:
                records[frame] = {"t": round(frame * FRAME_TIME, 9), "frame": frame, "intersections": counts[-1],
                                  "has_intersections": ipc_has_intersections(x, f),
                                  "z_min": float(x[:, 2].min()), "z_max": float(x[:, 2].max())}
        module_wall = np.zeros(len(MODULES))
        timing = out / "timing"
        if timing.exists():
            for line in timing.read_text().splitlines():
                values = [float(v) for v in line.split()]
                if len(values) == len(MODULES):
                    module_wall += values
    simulated = frames * FRAME_TIME
    checked = [records[k] for k in sorted(records)]
    return {"peer": "arcsim", "vertices": n * n, "triangles": len(triangles0), "timestep_s": FRAME_TIME / FRAME_STEPS,
            "simulated_s": simulated, "frames": frames, "threads": threads, "cpu_s": cpu,
            "cpu_per_simulated_s": cpu / simulated if simulated else None, "checks": checked,
            "z_min": checked[-1]["z_min"], "z_max": checked[-1]["z_max"], "frames_checked": len(counts),
            "frames_with_intersections": sum(1 for c in counts if c), "max_intersections": max(counts),
            "collision_failures": len(re.findall(re.escape(FAILED), text)),
            "module_wall_s": {name: float(s) for name, s in zip(MODULES, module_wall, strict=True) if s}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=33, help="vertices along a side of the sheet (default 33)")
    ap.add_argument("--seconds", type=float, default=2.0, help="simulated time, s, whole 40 ms frames (default 2.0)")
    ap.add_argument("--checks", type=parse_times, default=[],
                    help="comma-separated simulated times, s, reported one by one (the end always)")
    ap.add_argument("--threads", type=int, default=1, help="ARCSim's OpenMP threads (default 1)")
    ap.add_argument("--sphere-subdivisions", type=int, default=3,
                    help="the sphere's icosahedron cut k times: 10 * 4**k + 2 vertices (default 3: 642)")
    ap.add_argument("--keep", type=Path, default=None, help="write the scene and ARCSim's output here and keep them")
    args = ap.parse_args()
    binary, home = os.environ.get("ARCSIM"), os.environ.get("ARCSIM_HOME")
    if not binary:
        sys.exit("arcsim_drape: set ARCSIM to the ARCSim executable (see this file's docstring)")
    if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
        sys.exit(f"arcsim_drape: ARCSIM={binary} is not an executable file")
    if not home:
        sys.exit("arcsim_drape: set ARCSIM_HOME to ARCSim's source folder (it holds its materials)")
    if not (Path(home) / MATERIAL).is_file():
        sys.exit(f"arcsim_drape: ARCSIM_HOME={home} has no {MATERIAL}")
    if args.n < 2:
        sys.exit(f"arcsim_drape: --n must be at least 2, got {args.n}")
    if round(args.seconds / FRAME_TIME) < 1:
        sys.exit(f"arcsim_drape: --seconds must be at least one frame ({FRAME_TIME} s), got {args.seconds}")
    if any(not 0 <= t <= args.seconds for t in args.checks):
        sys.exit(f"arcsim_drape: every check time must lie in [0, {args.seconds}], got {args.checks}")
    if args.threads < 1 or args.sphere_subdivisions < 0:
        sys.exit("arcsim_drape: --threads must be at least 1 and --sphere-subdivisions at least 0")
    try:
        record = run(os.path.abspath(binary), Path(home).resolve(), args.n, args.seconds, args.checks,
                     args.threads, args.sphere_subdivisions, args.keep)
    except (RuntimeError, OSError, ValueError) as e:
        sys.exit(f"arcsim_drape: {e}")
    print(json.dumps(record))


if __name__ == "__main__":
    main()
