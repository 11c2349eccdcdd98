"""Parameters of the wavefront app (the ``[app]`` table of a scenario), checked up front."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ...errors import ShoalError
from ..checks import choice as _choice
from ..checks import integer as _integer
from ..checks import number as _number
from ..checks import vector as _vector

SCENES = ("points", "plane")


@dataclass
class WavefrontParams:
    """Parameters of Lassen's wavefront on a grid of square (cubic) zones.

    ``scene = "points"`` takes the sources as listed, ``[x, y(, z), delay]`` each (metres and
    seconds); ``scene = "plane"`` puts the Birdshot paper's: one every ``spacing`` zones on the
    plane ``x + y (+ z) = plane``, all firing at once. A source fires when a sphere of
    ``radius`` zones about it would have grown from nothing at ``speed``.
    """

    cells: list[int] = field(default_factory=lambda: [32, 32])  # zones along x, y (and z)
    extent: list[float] = field(default_factory=lambda: [1.0, 1.0])  # metres along each axis
    origin: list[float] = field(default_factory=lambda: [0.0, 0.0])
    speed: float = 1.0  # m/s, in every zone
    scene: str = "points"
    sources: list[list[float]] = field(default_factory=lambda: [[0.5, 0.5, 0.0]])  # x, y(, z), delay (s)
    radius: float = 2.0  # zones: a source's sphere when it fires
    spacing: int = 20  # plane: zones between sources along x and y
    plane: float = 1.0  # plane: x + y (+ z) of every source (m)

    def validate(self) -> None:
        """Refuse parameters that would run and mean nothing, with one line naming the key."""
        if not (isinstance(self.cells, (list, tuple)) and len(self.cells) in (2, 3)):
            raise ShoalError(f"app.cells must be 2 or 3 zone counts, got {self.cells!r}")
        for n in self.cells:
            _integer("cells", n, low=2)
        nd = len(self.cells)
        _vector("extent", self.extent, nd)
        _vector("origin", self.origin, nd)
        if min(self.extent) <= 0:
            raise ShoalError(f"app.extent must be positive lengths, got {self.extent}")
        h = [e / n for e, n in zip(self.extent, self.cells, strict=True)]
        if not all(math.isclose(h[0], x, rel_tol=1e-9) for x in h):
            raise ShoalError(f"zones must be square: app.extent {self.extent} over app.cells {self.cells} gives sides "
                             f"{', '.join(f'{x:g}' for x in h)}")
        for name in ("speed", "radius", "plane"):
            _number(name, getattr(self, name))
        if self.speed <= 0:
            raise ShoalError(f"app.speed must be positive, got {self.speed}")
        if self.radius <= 0:
            raise ShoalError(f"app.radius must be a positive number of zones, got {self.radius}")
        _choice("scene", self.scene, SCENES)
        _integer("spacing", self.spacing, low=1)
        if not isinstance(self.sources, (list, tuple)):
            raise ShoalError(f"app.sources must be a list of [x, y(, z), delay], got {self.sources!r}")
        for s in self.sources if self.scene == "points" else ():
            _vector("sources entry", s, nd + 1)
        points = self.points()
        if not len(points):
            raise ShoalError("app.sources: no source" if self.scene == "points" else
                             f"app.plane = {self.plane:g} m meets no source point inside the domain")
        lo, hi = np.array(self.origin, float), np.array(self.origin, float) + np.array(self.extent, float)
        for p in points:
            where, delay = p[:nd], p[3]
            if np.any(where < lo) or np.any(where > hi):
                box = " x ".join(f"[{a:g}, {b:g}]" for a, b in zip(lo, hi, strict=True))
                raise ShoalError(f"app.sources: a source at ({', '.join(f'{c:g}' for c in where)}) lies outside the "
                                 f"domain {box} m")
            if delay < 0:
                raise ShoalError(f"app.sources: a source's delay must be >= 0 s, got {delay:g}")

    @property
    def h(self) -> float:
        """The side of a zone (m)."""
        return self.extent[0] / self.cells[0]

    def points(self) -> np.ndarray:
        """Every source as ``[x, y, z, delay]`` rows (z = 0 in 2D), in the scene's order."""
        nd = len(self.cells)
        if self.scene == "points":
            rows = [list(s[:nd]) + [0.0] * (3 - nd) + [s[nd]] for s in self.sources]
            return np.array(rows, float).reshape(-1, 4)
        # the Birdshot problem: (x, y, plane - x - y) for x, y on a lattice `spacing` zones apart
        step = self.spacing * self.h
        rows = []
        top = np.array(self.origin, float) + np.array(self.extent, float)
        for a in range(int(self.cells[0] // self.spacing) + 1):
            for b in range(int(self.cells[1] // self.spacing) + 1 if nd == 3 else 1):
                x = self.origin[0] + a * step
                if nd == 2:
                    y = self.plane - x
                    if self.origin[1] <= y <= top[1]:
                        rows.append([x, y, 0.0, 0.0])
                    continue
                y = self.origin[1] + b * step
                z = self.plane - x - y
                if self.origin[2] <= z <= top[2]:
                    rows.append([x, y, z, 0.0])
        return np.array(rows, float).reshape(-1, 4)


def wavefront_memory(p: WavefrontParams) -> int:
    """Bytes of a run's node data: a state byte, level, arrival time and a 3-vector image point
    per node, with a tile's padding (about a quarter more)."""
    nodes = int(np.prod([n + 1 for n in p.cells]))
    return int(1.25 * nodes * (1 + 8 + 8 + 24))
