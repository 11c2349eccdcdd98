"""The cloth on tiles: triangle partitions that each move the vertices they hold.

A tile is a part of a :class:`~shoal.mesh.MeshPartition` of the cloth's triangles (the
contact-mechanics paper §III: METIS partitions, one object each). Each step it evaluates every
stencil that touches a vertex it holds, and kicks and drifts those vertices. A bend stencil
reaches two rings of vertices, whose holders need not share a vertex with the part: the app
names the parts each one reads (``reads="app"``), the lowest-numbered holder of each vertex it
lacks, which sends that vertex's position.
A vertex on a boundary is held by several parts, and each moves it alike: its force is the
same rows added in the same global stencil order (:mod:`.forces`), so every copy, and the
whole state, is bitwise the one-piece model's for any partition, placement, worker count or
executor.

Contact is not here yet: the material, its pins, gravity and damping are.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import ShoalError
from ...mesh import MeshPartition
from ...runtime import App, Phase
from .forces import accumulate, bend, stencil_rows, stretch
from .model import ClothModel, kick_drift


class ClothApp(App):
    """A cloth model stepped on the parts of a mesh partition.

    Parameters
    ----------
    model : ClothModel
        The cloth (its surface at rest is the initial state).
    dt : float
        The material step, s.
    gravity : sequence of float
        Acceleration, m/s².
    pinned : ndarray of bool, optional
        Vertices that take no kick.
    damping : float
        Velocity lost per second by free vertices (see :meth:`ClothModel.run`).
    velocity : ndarray, shape (n, 3), optional
        Initial velocities (default: at rest).
    positions : ndarray, shape (n, 3), optional
        Initial positions (default: the surface at rest).
    """

    name = "cloth-material"
    phases = (Phase("move", reads="app", work="vertices"),)
    grid = (1, 1)

    def __init__(self, model: ClothModel, dt: float, gravity=(0.0, 0.0, 0.0), pinned: np.ndarray | None = None,
                 damping: float = 0.0, velocity: np.ndarray | None = None, positions: np.ndarray | None = None):
        if not dt > 0:
            raise ShoalError(f"the cloth's time step must be positive, got {dt}")
        self.model, self.dt, self.damping = model, float(dt), float(damping)
        n = len(model.surface.vertices)
        self.gravity = np.asarray(gravity, np.float64)
        self.free = np.ones(n, bool) if pinned is None else ~np.asarray(pinned, bool)
        self.velocity = np.zeros((n, 3)) if velocity is None else np.asarray(velocity, np.float64)
        self.positions = model.surface.vertices if positions is None else np.asarray(positions, np.float64)
        self._for = None  # the tiling the plans below are for
        self._sends: dict[tuple[int, int], np.ndarray] = {}
        self._parts: dict[int, dict[str, np.ndarray]] = {}

    def decompose(self, count: int, halo: int = 1) -> MeshPartition:
        """``count`` METIS parts of the cloth's triangles (each reading ``halo`` rings of vertices)."""
        return MeshPartition.from_mesh(self.model.surface.vertices, self.model.surface.triangles, count, halo)

    def check_tiling(self, tiling) -> None:
        if not isinstance(tiling, MeshPartition):
            raise ShoalError("the cloth runs on a mesh partition of its triangles (MeshPartition)")

    def _plan(self, tiling: MeshPartition) -> None:
        """For ``tiling``: per part, the stencils touching its vertices (in global order) on its
        own numbering of the vertices they read (those it holds, then those it lacks, by their
        source part), and per (reader, source) the source's positions of what it sends: of every
        vertex a part lacks, its lowest-numbered holder."""
        if self._for is tiling:
            return
        m, n = self.model, len(self.model.surface.vertices)
        holder = np.full(n, np.iinfo(np.int64).max)
        for part in range(tiling.ntiles):
            held = tiling.vertices_of(part)
            holder[held] = np.minimum(holder[held], part)
        self._sends, self._parts = {}, {}
        local = np.full(n, -1, np.int64)
        for part in range(tiling.ntiles):
            held = tiling.vertices_of(part)
            mine = np.zeros(n, bool)
            mine[held] = True
            tri = np.flatnonzero(mine[m.surface.triangles].any(axis=1))
            hin = np.flatnonzero(mine[m.hinges].any(axis=1))
            touched = np.zeros(n, bool)
            touched[m.surface.triangles[tri].ravel()] = touched[m.hinges[hin].ravel()] = True
            lacking = np.flatnonzero(touched & ~mine)
            lacking = lacking[np.argsort(holder[lacking], kind="stable")]  # grouped by source, as halos land
            reads = np.concatenate([held, lacking])
            local[reads] = np.arange(len(reads))
            slots, at = {}, len(held)
            for src in np.unique(holder[lacking]).tolist():
                want = lacking[holder[lacking] == src]
                self._sends[(part, src)] = np.searchsorted(tiling.vertices_of(src), want)
                slots[src] = slice(at, at + len(want))
                at += len(want)
            triangles, hinges = local[m.surface.triangles[tri]], local[m.hinges[hin]]
            ptr, order = stencil_rows(triangles, hinges, len(reads))
            self._parts[part] = {
                "held": np.arange(len(held)), "reads": len(reads), "slots": slots, "triangles": triangles,
                "dm_inv": np.ascontiguousarray(m.dm_inv[tri]), "area": m.area[tri], "hinges": hinges,
                "rest_angle": m.rest_angle[hin], "weight": m.weight[hin], "ptr": ptr, "order": order,
                "rows": np.zeros((3 * len(tri) + 4 * len(hin), 3)),
                "inverse": np.where(self.free[held], 1.0 / m.mass[held], 0.0), "free": self.free[held]}
            local[reads] = -1
        self._for = tiling

    def reads(self, phase, step: int, decomposition) -> list:
        self._plan(decomposition)
        return [sorted(self._parts[t]["slots"]) for t in range(decomposition.ntiles)]

    def init_tile(self, tile: int, tiling) -> dict[str, Any]:
        held = tiling.vertices_of(tile)
        return {"ids": held, "x": self.positions[held].copy(), "v": self.velocity[held].copy()}

    def pack_halos(self, state, src: int, tiling) -> dict[int, np.ndarray]:
        """Per part reading ``src``, the positions of the vertices it lacks from ``src``."""
        self._plan(tiling)
        return {dst: state["x"][which] for (dst, s), which in self._sends.items() if s == src}

    def move(self, tile: int, state, halos: dict, ctx, tiling) -> int:
        part = self._parts[tile]
        f = self._forces(tile, state, halos, tiling)
        kick_drift(state["x"], state["v"], f, part["inverse"], part["free"], self.gravity, self.dt, self.damping)
        return len(f)

    def _forces(self, tile: int, state, halos: dict, tiling) -> np.ndarray:
        """The material forces on the vertices part ``tile`` holds, from their positions and
        those the parts in ``halos`` sent (:meth:`pack_halos`), each in global stencil order."""
        self._plan(tiling)
        part = self._parts[tile]
        x = np.empty((part["reads"], 3))  # the part's own numbering: what it holds, then what it read
        held = part["held"]
        x[held] = state["x"]
        for src, positions in halos.items():
            x[part["slots"][src]] = positions
        mu, lam = self.model.material.lame
        stretch(x, part["triangles"], part["dm_inv"], part["area"], mu, lam, part["rows"], 0)
        bend(x, part["hinges"], part["rest_angle"], part["weight"], part["rows"], 3 * len(part["triangles"]))
        f = np.empty((len(held), 3))
        accumulate(part["rows"], part["ptr"], part["order"], held, f)
        return f

    def gather(self, states: dict[int, Any], tiling) -> dict[str, np.ndarray]:
        n = len(self.model.surface.vertices)
        x, v = np.zeros((n, 3)), np.zeros((n, 3))
        for s in states.values():
            x[s["ids"]], v[s["ids"]] = s["x"], s["v"]
        return {"x": x, "v": v}
