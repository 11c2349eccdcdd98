"""MuJoCo flex on the drape scene: CPU seconds per simulated second and triangle–triangle intersections.

The scene: a 1 m square sheet of ``n x n`` vertices, flat at z = 0.3 m, falls under gravity
(-9.81 m/s² along z) onto a static sphere of radius 0.25 m at the origin. The sheet is one
``flexcomp`` (``dim="2"``, a body with three slide joints per vertex) with the settings every
MuJoCo run of this scene uses: vertex radius 4 mm, mass 0.187 kg, Young's modulus 2e4, Poisson
ratio 0.2, thickness 1 mm, damping 1e-4, ``elastic2d="both"``; contact ``selfcollide="auto"``
(vertex spheres against elements), ``passive="false"``; time step 2 ms, solver CG with 400
iterations, ``integrator="discrete"`` (MuJoCo 4.0.0 refuses ``implicitfast`` with flex
elasticity). Every other option keeps MuJoCo's default.

``--mesh grid`` (the default) is ``flexcomp type="grid"``: ``n x n`` vertices, every quad cut
along the same diagonal. ``--mesh sheet`` gives MuJoCo the sheet the other peers and shoal's
cloth app use, quads cut along alternating diagonals, as ``flexcomp type="direct"``; the
vertices, their order and the masses are the same.

CPU time is :func:`time.process_time` of this process over the steps alone: compiling the
model and the intersection checks are left out. At each check time (``--checks``, and always at
the end) the sheet's triangles are tested for self-intersection: :func:`count_intersections`
counts the pairs of triangles that share no vertex and where an edge of one crosses the other
(a broad phase of triangle boxes swept along one axis, then exact segment–triangle orientation
tests), and ``ipctk.has_intersections`` answers yes or no as an independent oracle (``null``
where ``ipctk`` is not installed).

It prints one JSON line: ``peer``, ``version``, ``mesh``, ``vertices``, ``triangles``,
``timestep_s``, ``simulated_s``, ``steps``, ``cpu_s``, ``cpu_per_simulated_s``, ``checks`` (per
check time: ``t``, ``cpu_s`` so far, ``contacts`` then, ``intersections``, ``has_intersections``,
``z_min``, ``z_max``), ``z_min`` and ``z_max`` at the end, ``max_contacts`` over all steps, and
``warnings`` (MuJoCo's warning counters that are not zero).

MuJoCo (Apache-2.0) is not a dependency of shoal: run this file with the interpreter of an
environment of its own, made outside this repository::

    python3 -m venv mujoco-venv
    mujoco-venv/bin/pip install mujoco==4.0.0 numpy ipctk==1.6.1
    export MUJOCO_PYTHON="$PWD/mujoco-venv/bin/python"

``bench/cloth.py`` runs it through ``MUJOCO_PYTHON``. By hand::

    "$MUJOCO_PYTHON" bench/mujoco_drape.py --n 33 --seconds 2.0 --checks 0.4,1.0,2.0

The intersection counter and the sheet's mesh need NumPy only (MuJoCo is imported when a run
starts), so ``bench/arcsim_drape.py`` imports them from here.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

SIZE = 1.0  # m, side of the sheet
HEIGHT = 0.3  # m, the sheet's starting z
SPHERE_RADIUS = 0.25  # m, the sphere at the origin
GRAVITY = -9.81  # m/s², along z
TIMESTEP = 0.002  # s
PAIRS_PER_BLOCK = 1 << 20  # candidate pairs tested at once by the intersection counter


def sheet_mesh(n: int, size: float = SIZE, height: float = HEIGHT) -> tuple[np.ndarray, np.ndarray]:
    """A flat square sheet of ``n x n`` vertices, its quads cut along alternating diagonals.

    Vertex ``i * n + j`` sits at x = ``-size / 2 + i h``, y = ``-size / 2 + j h`` with
    ``h = size / (n - 1)`` (the order of MuJoCo's ``flexcomp`` grid). The quad of corner ``(i, j)``
    is cut from ``(i, j)`` to ``(i + 1, j + 1)`` where ``i + j`` is even, and across the other
    diagonal where it is odd. Triangles are counter-clockwise seen from +z.

    Parameters
    ----------
    n : int
        Vertices along a side, at least 2.
    size : float
        Side, m.
    height : float
        The sheet's z, m.

    Returns
    -------
    vertices : numpy.ndarray
        ``(n², 3)`` float64 positions, m.
    triangles : numpy.ndarray
        ``(2 (n - 1)², 3)`` int64 vertex indices.
    """
    if n < 2:
        raise ValueError(f"a sheet needs at least 2 vertices along a side, got {n}")
    g = np.linspace(-size / 2, size / 2, n)
    x, y = np.meshgrid(g, g, indexing="ij")
    vertices = np.stack([x.ravel(), y.ravel(), np.full(n * n, float(height))], axis=1)
    ids = np.arange(n * n).reshape(n, n)
    a, b, c, d = ids[:-1, :-1], ids[1:, :-1], ids[1:, 1:], ids[:-1, 1:]
    odd = ((np.arange(n - 1)[:, None] + np.arange(n - 1)[None, :]) % 2 == 1)[..., None]
    first = np.where(odd, np.stack([a, b, d], -1), np.stack([a, b, c], -1))
    second = np.where(odd, np.stack([b, c, d], -1), np.stack([a, c, d], -1))
    return vertices, np.concatenate([first.reshape(-1, 3), second.reshape(-1, 3)])


def _orient(a: np.ndarray, b: np.ndarray, c: np.ndarray, d: np.ndarray) -> np.ndarray:
    """Six times the signed volume of each tetrahedron ``(a, b, c, d)`` (rows of ``(k, 3)`` arrays)."""
    return np.einsum("ij,ij->i", b - a, np.cross(c - a, d - a))


def _segments_cross(p: np.ndarray, q: np.ndarray, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Whether each segment ``pq`` crosses triangle ``abc``: its ends lie strictly on opposite
    sides of the triangle's plane and the line through them meets the closed triangle.

    Parameters
    ----------
    p, q : numpy.ndarray
        ``(k, 3)`` segment ends.
    a, b, c : numpy.ndarray
        ``(k, 3)`` triangle corners.

    Returns
    -------
    numpy.ndarray
        ``(k,)`` booleans.
    """
    sides = _orient(a, b, c, p) * _orient(a, b, c, q) < 0
    t1, t2, t3 = _orient(p, q, a, b), _orient(p, q, b, c), _orient(p, q, c, a)
    inside = ((t1 >= 0) & (t2 >= 0) & (t3 >= 0)) | ((t1 <= 0) & (t2 <= 0) & (t3 <= 0))
    return sides & inside


def _edge_crosses(va: np.ndarray, vb: np.ndarray) -> np.ndarray:
    """Whether an edge of each triangle of ``va`` crosses the matching triangle of ``vb``.

    Parameters
    ----------
    va, vb : numpy.ndarray
        ``(k, 3, 3)`` corners of ``k`` triangle pairs.

    Returns
    -------
    numpy.ndarray
        ``(k,)`` booleans.
    """
    hit = np.zeros(len(va), dtype=bool)
    for i, j in ((0, 1), (1, 2), (2, 0)):
        hit |= _segments_cross(va[:, i], va[:, j], vb[:, 0], vb[:, 1], vb[:, 2])
    return hit


def intersecting_pairs(vertices: np.ndarray, triangles: np.ndarray) -> np.ndarray:
    """The pairs of triangles that share no vertex and where an edge of one crosses the other.

    Broad phase: the triangles' axis-aligned boxes, sorted by their low end along the axis
    where the boxes' low ends spread most, are swept along it; pairs whose boxes overlap along
    all three axes and that share no vertex go on. Narrow phase: each of the six edges of a pair
    is tested against the other triangle with orientation predicates in float64
    (:func:`_segments_cross`); a segment lying in the other triangle's plane does not count.

    Parameters
    ----------
    vertices : numpy.ndarray
        ``(V, 3)`` positions.
    triangles : numpy.ndarray
        ``(T, 3)`` vertex indices.

    Returns
    -------
    numpy.ndarray
        ``(k, 2)`` triangle indices, the lower first, sorted.
    """
    x = np.asarray(vertices, dtype=np.float64)
    f = np.asarray(triangles, dtype=np.int64)
    corners = x[f]
    lo, hi = corners.min(axis=1), corners.max(axis=1)
    axis = int(np.argmax(np.ptp(lo, axis=0)))
    order = np.argsort(lo[:, axis], kind="stable")
    # Sorted triangle s overlaps, along the axis, the sorted triangles s + 1 .. end[s] - 1.
    end = np.searchsorted(lo[order, axis], hi[order, axis], side="right")
    counts = np.maximum(end - np.arange(1, len(f) + 1), 0)
    found = []
    first = 0
    while first < len(f):
        # A block of sorted triangles whose candidate pairs fit in PAIRS_PER_BLOCK (at least one).
        total = np.cumsum(counts[first:])
        last = first + max(int(np.searchsorted(total, PAIRS_PER_BLOCK, side="right")), 1)
        c = counts[first:last]
        if c.sum():
            s = np.repeat(np.arange(first, last), c)
            offset = np.arange(c.sum()) - np.repeat(np.cumsum(c) - c, c)
            a, b = order[s], order[s + 1 + offset]
            keep = np.all((lo[a] <= hi[b]) & (lo[b] <= hi[a]), axis=1)
            keep &= ~(f[a][:, :, None] == f[b][:, None, :]).any(axis=(1, 2))
            a, b = a[keep], b[keep]
            hit = _edge_crosses(corners[a], corners[b]) | _edge_crosses(corners[b], corners[a])
            found.append(np.stack([np.minimum(a, b), np.maximum(a, b)], axis=1)[hit])
        first = last
    pairs = np.concatenate(found) if found else np.empty((0, 2), dtype=np.int64)
    return pairs[np.lexsort((pairs[:, 1], pairs[:, 0]))]


def count_intersections(vertices: np.ndarray, triangles: np.ndarray) -> int:
    """The number of triangle pairs that share no vertex and where an edge of one crosses the other.

    Parameters
    ----------
    vertices : numpy.ndarray
        ``(V, 3)`` positions.
    triangles : numpy.ndarray
        ``(T, 3)`` vertex indices.

    Returns
    -------
    int
        See :func:`intersecting_pairs`.
    """
    return len(intersecting_pairs(vertices, triangles))


def ipc_has_intersections(vertices: np.ndarray, triangles: np.ndarray) -> bool | None:
    """``ipctk.has_intersections`` on the surface: whether it intersects itself.

    Parameters
    ----------
    vertices : numpy.ndarray
        ``(V, 3)`` positions (also taken as the rest positions).
    triangles : numpy.ndarray
        ``(T, 3)`` vertex indices.

    Returns
    -------
    bool or None
        ``None`` where ``ipctk`` is not installed.
    """
    try:
        import ipctk
    except ImportError:
        return None
    x = np.asfortranarray(vertices, dtype=np.float64)
    f = np.asfortranarray(triangles, dtype=np.int32)
    mesh = ipctk.CollisionMesh(x, np.asfortranarray(ipctk.edges(f), dtype=np.int32), f)
    return bool(ipctk.has_intersections(mesh, x))


def drape_mjcf(n: int, mesh: str = "grid") -> str:
    """The MJCF text of the drape scene.

    Parameters
    ----------
    n : int
        Vertices along a side of the sheet.
    mesh : {"grid", "sheet"}
        ``"grid"``: ``flexcomp type="grid"``, every quad cut along one diagonal; ``"sheet"``:
        ``flexcomp type="direct"`` with :func:`sheet_mesh` (alternating diagonals).

    Returns
    -------
    str
        The model, for ``mujoco.MjModel.from_xml_string``.
    """
    if mesh == "grid":
        h = SIZE / (n - 1)
        shape = f'type="grid" count="{n} {n} 1" spacing="{h!r} {h!r} {h!r}" pos="0 0 {HEIGHT!r}"'
    elif mesh == "sheet":
        vertices, triangles = sheet_mesh(n)
        points = " ".join(repr(float(v)) for v in vertices.ravel())
        elements = " ".join(str(int(i)) for i in triangles.ravel())
        shape = f'type="direct" point="{points}" element="{elements}"'
    else:
        raise ValueError(f"unknown mesh {mesh!r}: grid or sheet")
    return f"""<mujoco model="drape">
  <option timestep="{TIMESTEP!r}" gravity="0 0 {GRAVITY!r}" solver="CG" iterations="400" integrator="discrete"/>
  <worldbody>
    <geom name="sphere" type="sphere" size="{SPHERE_RADIUS!r}" pos="0 0 0"/>
    <flexcomp name="sheet" dim="2" {shape} radius="0.004" mass="0.187">
      <contact selfcollide="auto" passive="false"/>
      <elasticity young="2e4" poisson="0.2" thickness="1e-3" damping="1e-4" elastic2d="both"/>
    </flexcomp>
  </worldbody>
</mujoco>
"""


def run(n: int, seconds: float, checks: list[float], mesh: str = "grid") -> dict:
    """Simulate the drape scene and check the sheet for self-intersection along the way.

    Parameters
    ----------
    n : int
        Vertices along a side of the sheet.
    seconds : float
        Simulated time, s (rounded to whole steps).
    checks : list of float
        Simulated times, s, at which to check (rounded to whole steps); the end is always one.
    mesh : {"grid", "sheet"}
        See :func:`drape_mjcf`.

    Returns
    -------
    dict
        The record printed by :func:`main` (see the module's docstring).
    """
    import mujoco

    model = mujoco.MjModel.from_xml_string(drape_mjcf(n, mesh))
    data = mujoco.MjData(model)
    if model.nflex != 1 or int(model.flex_vertnum[0]) != n * n or int(model.flex_elemnum[0]) != 2 * (n - 1) ** 2:
        raise RuntimeError(f"the model's flex is not an {n} x {n} sheet of {2 * (n - 1) ** 2} triangles")
    triangles = np.asarray(model.flex_elem, dtype=np.int64).reshape(-1, 3)
    steps = round(seconds / model.opt.timestep)
    check_steps = sorted({min(max(round(t / model.opt.timestep), 0), steps) for t in checks} | {steps})
    mujoco.mj_forward(model, data)
    records, cpu, max_contacts, done = [], 0.0, 0, 0
    for target in check_steps:
        start = time.process_time()
        for _ in range(target - done):
            mujoco.mj_step(model, data)
            max_contacts = max(max_contacts, int(data.ncon))
        cpu += time.process_time() - start
        done = target
        x = np.array(data.flexvert_xpos, dtype=np.float64)
        records.append({"t": round(done * model.opt.timestep, 9), "cpu_s": cpu, "contacts": int(data.ncon),
                        "intersections": count_intersections(x, triangles),
                        "has_intersections": ipc_has_intersections(x, triangles),
                        "z_min": float(x[:, 2].min()), "z_max": float(x[:, 2].max())})
    simulated = steps * model.opt.timestep
    warnings = {mujoco.mjtWarning(i).name: int(w.number) for i, w in enumerate(data.warning) if w.number}
    return {"peer": "mujoco", "version": mujoco.__version__, "mesh": mesh, "vertices": n * n,
            "triangles": len(triangles), "timestep_s": model.opt.timestep, "simulated_s": simulated,
            "steps": steps, "cpu_s": cpu, "cpu_per_simulated_s": cpu / simulated if simulated else None,
            "checks": records, "z_min": records[-1]["z_min"], "z_max": records[-1]["z_max"],
            "max_contacts": max_contacts, "warnings": warnings}


def parse_times(text: str) -> list[float]:
    """Simulated times from a comma-separated list (``"0.4,1.0,2.0"``); empty for ``""``.

    Parameters
    ----------
    text : str
        The list.

    Returns
    -------
    list of float
    """
    try:
        return [float(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of times: {text!r}") from None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=33, help="vertices along a side of the sheet (default 33)")
    ap.add_argument("--seconds", type=float, default=2.0, help="simulated time, s (default 2.0)")
    ap.add_argument("--checks", type=parse_times, default=[],
                    help="comma-separated simulated times, s, at which to count intersections (the end always)")
    ap.add_argument("--mesh", choices=("grid", "sheet"), default="grid",
                    help="flexcomp grid (one diagonal) or the alternating-diagonal sheet (default grid)")
    args = ap.parse_args()
    if args.n < 2:
        sys.exit(f"mujoco_drape: --n must be at least 2, got {args.n}")
    if not args.seconds > 0:
        sys.exit(f"mujoco_drape: --seconds must be positive, got {args.seconds}")
    if any(not 0 <= t <= args.seconds for t in args.checks):
        sys.exit(f"mujoco_drape: every check time must lie in [0, {args.seconds}], got {args.checks}")
    try:
        import mujoco  # noqa: F401
    except ImportError:
        sys.exit(f"mujoco_drape: this Python ({sys.executable}) has no mujoco; see this file's docstring")
    print(json.dumps(run(args.n, args.seconds, args.checks, args.mesh)))


if __name__ == "__main__":
    main()
