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
    """

    name = "cloth"
    phases = (Phase("move", reads="app", work="vertices"),)
    grid = (1, 1)

    def __init__(self, model: ClothModel, dt: float, gravity=(0.0, 0.0, 0.0), pinned: np.ndarray | None = None,
                 damping: float = 0.0, velocity: np.ndarray | None = None):
        if not dt > 0:
            raise ShoalError(f"the cloth's time step must be positive, got {dt}")
        self.model, self.dt, self.damping = model, float(dt), float(damping)
        n = len(model.surface.vertices)
        self.gravity = np.asarray(gravity, np.float64)
        self.free = np.ones(n, bool) if pinned is None else ~np.asarray(pinned, bool)
        self.velocity = np.zeros((n, 3)) if velocity is None else np.asarray(velocity, np.float64)
        self._parts: dict[int, dict[str, np.ndarray]] = {}

    def check_tiling(self, tiling) -> None:
        if not isinstance(tiling, MeshPartition):
            raise ShoalError("the cloth runs on a mesh partition of its triangles (MeshPartition)")

    def _needs(self, tiling: MeshPartition) -> dict[tuple[int, int], np.ndarray]:
        """Per (reader, source) part, the vertices the reader's stencils read and the source
        sends: of every vertex a part lacks, its lowest-numbered holder."""
        key = id(tiling)
        if getattr(self, "_needs_of", (None,))[0] != key:
            m, n = self.model, len(self.model.surface.vertices)
            holder = np.full(n, np.iinfo(np.int64).max)
            for part in range(tiling.ntiles):
                held = tiling.vertices_of(part)
                holder[held] = np.minimum(holder[held], part)
            needs = {}
            for part in range(tiling.ntiles):
                mine = np.zeros(n, bool)
                mine[tiling.vertices_of(part)] = True
                touched = np.zeros(n, bool)
                touched[m.surface.triangles[mine[m.surface.triangles].any(axis=1)].ravel()] = True
                if len(m.hinges):
                    touched[m.hinges[mine[m.hinges].any(axis=1)].ravel()] = True
                lacking = np.flatnonzero(touched & ~mine)
                for src in np.unique(holder[lacking]).tolist():
                    needs[(part, src)] = lacking[holder[lacking] == src]
            self._needs_of = (key, needs)
        return self._needs_of[1]

    def reads(self, phase, step: int, decomposition) -> list:
        needs = self._needs(decomposition)
        return [sorted(src for (dst, src) in needs if dst == t) for t in range(decomposition.ntiles)]

    def _part(self, tile: int, tiling: MeshPartition) -> dict[str, np.ndarray]:
        """What tile ``tile`` evaluates: the stencils touching its vertices (in global order) and
        their rows per vertex it holds."""
        got = self._parts.get(tile)
        if got is None:
            m = self.model
            held = tiling.vertices_of(tile)
            mine = np.zeros(len(m.surface.vertices), bool)
            mine[held] = True
            tri = np.flatnonzero(mine[m.surface.triangles].any(axis=1))
            hin = np.flatnonzero(mine[m.hinges].any(axis=1)) if len(m.hinges) else np.zeros(0, np.int64)
            ptr, order = stencil_rows(m.surface.triangles[tri], m.hinges[hin], len(m.surface.vertices))
            got = self._parts[tile] = {
                "held": held, "triangles": np.ascontiguousarray(m.surface.triangles[tri]),
                "dm_inv": np.ascontiguousarray(m.dm_inv[tri]), "area": m.area[tri],
                "hinges": np.ascontiguousarray(m.hinges[hin]), "rest_angle": m.rest_angle[hin],
                "weight": m.weight[hin], "ptr": ptr, "order": order,
                "rows": np.zeros((3 * len(tri) + 4 * len(hin), 3)),
                "inverse": np.where(self.free[held], 1.0 / m.mass[held], 0.0), "free": self.free[held]}
        return got

    def init_tile(self, tile: int, tiling) -> dict[str, Any]:
        held = tiling.vertices_of(tile)
        return {"ids": held, "x": self.model.surface.vertices[held].copy(), "v": self.velocity[held].copy()}

    def pack_halos(self, state, src: int, tiling) -> dict[int, np.ndarray]:
        """Per part reading ``src``, the rows ``(vertex, x, y, z)`` of the vertices it lacks."""
        return {dst: np.column_stack([want.astype(np.float64), state["x"][np.searchsorted(state["ids"], want)]])
                for (dst, s), want in self._needs(tiling).items() if s == src}

    def move(self, tile: int, state, halos: dict, ctx, tiling) -> int:
        part = self._part(tile, tiling)
        x = np.full((len(self.model.surface.vertices), 3), np.nan)  # (what no stencil here reads stays NaN)
        x[state["ids"]] = state["x"]
        for rows in halos.values():
            x[rows[:, 0].astype(np.int64)] = rows[:, 1:]
        mu, lam = self.model.material.lame
        stretch(x, part["triangles"], part["dm_inv"], part["area"], mu, lam, part["rows"], 0)
        if len(part["hinges"]):
            bend(x, part["hinges"], part["rest_angle"], part["weight"], part["rows"], 3 * len(part["triangles"]))
        f = np.zeros_like(x)
        accumulate(part["rows"], part["ptr"], part["order"], part["held"], f)
        kick_drift(state["x"], state["v"], np.ascontiguousarray(f[part["held"]]), part["inverse"], part["free"],
                   self.gravity, self.dt, self.damping)
        return len(part["held"])

    def gather(self, states: dict[int, Any], tiling) -> dict[str, np.ndarray]:
        n = len(self.model.surface.vertices)
        x, v = np.zeros((n, 3)), np.zeros((n, 3))
        for s in states.values():
            x[s["ids"]], v[s["ids"]] = s["x"], s["v"]
        return {"x": x, "v": v}
