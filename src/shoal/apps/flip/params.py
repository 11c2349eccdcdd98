"""Parameters of the FLIP app (the ``[app]`` table of a scenario), checked up front.

The domain is a box from the origin, ``domain`` metres along each axis, cut into ``cells``
cubic cells (``domain[a] / cells[a]`` the same along every axis) and surrounded by solid walls.
Shapes are lists of numbers: a box is its low corner then its high corner, a sphere its centre
then its radius; fluid shapes may add an initial velocity, a source adds its velocity and the
times it pours from and until.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ...errors import ShoalError
from ..checks import integer as _integer
from ..checks import number as _number
from ..checks import vector as _vector

#: Bridson's MIC(0) constants: the modification's weight and the safety fraction of the diagonal.
MIC_TAU, MIC_SIGMA = 0.97, 0.25


@dataclass
class FlipParams:
    """Parameters of the FLIP app; lengths in metres, times in seconds, SI units throughout."""

    dimension: int = 2
    cells: list[int] = field(default_factory=lambda: [64, 40])  # cells along each axis
    domain: list[float] = field(default_factory=lambda: [4.0, 2.5])  # metres along each axis
    particles_per_cell: int = 4  # k**dimension particles seeded on a jittered k-lattice per fluid cell
    flip: float = 0.6  # PIC/FLIP blend: v = flip (v + du) + (1 - flip) u
    cfl: float = 1.0  # cells a particle may cross in a step
    dt_max: float = 0.01  # the longest step, whatever the speeds (s)
    gravity: list[float] = field(default_factory=lambda: [0.0, -9.81])
    density: float = 1000.0  # kg/m^3, only to report pressures in Pa
    fluid: list[list[float]] = field(default_factory=lambda: [[0.0, 0.0, 1.0, 2.0]])  # boxes [lo, hi, (v)]
    fluid_spheres: list[list[float]] = field(default_factory=list)  # [centre, radius, (v)]
    solid_boxes: list[list[float]] = field(default_factory=list)  # [lo, hi]
    solid_spheres: list[list[float]] = field(default_factory=list)  # [centre, radius]
    sources: list[list[float]] = field(default_factory=list)  # [lo, hi, v, start, stop]
    cg_tolerance: float = 1e-6  # max |r| / max |b| at which the pressure solve stops
    cg_max_iterations: int = 500
    brick: int = 8  # cells per side of the preconditioner's blocks; tiles are unions of bricks

    def validate(self) -> None:
        """Refuse parameters that would run and mean nothing, with one line naming the key."""
        _integer("dimension", self.dimension)
        if self.dimension not in (2, 3):
            raise ShoalError(f"app.dimension must be 2 or 3, got {self.dimension}")
        d = self.dimension
        if not (isinstance(self.cells, (list, tuple)) and len(self.cells) == d):
            raise ShoalError(f"app.cells must be {d} integers (one per axis), got {self.cells!r}")
        for n in self.cells:
            _integer("cells", n, 1)
        _vector("domain", self.domain, d)
        if min(self.domain) <= 0:
            raise ShoalError(f"app.domain must be positive lengths, got {self.domain}")
        sides = [L / n for L, n in zip(self.domain, self.cells, strict=True)]
        if max(sides) - min(sides) > 1e-9 * max(sides):
            raise ShoalError(f"app.domain / app.cells must give cubic cells, got sides {sides} m")
        _integer("particles_per_cell", self.particles_per_cell, 1)
        if self.lattice() ** d != self.particles_per_cell:
            raise ShoalError(f"app.particles_per_cell must be a {'square' if d == 2 else 'cube'} "
                             f"(k**{d}), got {self.particles_per_cell}")
        for name in ("flip", "cfl", "dt_max", "density", "cg_tolerance"):
            _number(name, getattr(self, name))
        if not 0.0 <= self.flip <= 1.0:
            raise ShoalError(f"app.flip must be in [0, 1] (0: PIC, 1: FLIP), got {self.flip}")
        for name in ("cfl", "dt_max", "density"):
            if getattr(self, name) <= 0:
                raise ShoalError(f"app.{name} must be positive, got {getattr(self, name)}")
        if self.cg_tolerance <= 0:
            raise ShoalError(f"app.cg_tolerance must be positive, got {self.cg_tolerance}")
        _integer("cg_max_iterations", self.cg_max_iterations, 1)
        _integer("brick", self.brick, 1)
        for n in self.cells:
            if n % self.brick:
                raise ShoalError(f"app.brick = {self.brick} must divide app.cells {self.cells}: tiles are unions "
                                 "of bricks")
        _vector("gravity", self.gravity, d)
        if self.halo() > min(self.cells):
            raise ShoalError(f"app.cfl = {self.cfl} needs a halo of {self.halo()} cells, wider than the grid "
                             f"{self.cells}: lower app.cfl")
        self._shapes()

    def _shapes(self) -> None:
        d = self.dimension
        box, ball = 2 * d, d + 1
        checks = (("fluid", (box, box + d)), ("fluid_spheres", (ball, ball + d)), ("solid_boxes", (box,)),
                  ("solid_spheres", (ball,)), ("sources", (box + d + 2,)))
        for name, widths in checks:
            items = getattr(self, name)
            if not isinstance(items, (list, tuple)):
                raise ShoalError(f"app.{name} must be a list of shapes, got {items!r}")
            for item in items:
                if not (isinstance(item, (list, tuple)) and len(item) in widths):
                    raise ShoalError(f"every app.{name} entry needs {' or '.join(map(str, widths))} numbers, "
                                     f"got {item!r}")
                for v in item:
                    _number(name, v)
                self._inside(name, item, box if "sphere" not in name else ball)
        for item in self.sources:
            start, stop = item[-2], item[-1]
            if start < 0:
                raise ShoalError(f"every app.sources entry must start at a time >= 0 (no negative delay), got {start}")
            if stop <= start:
                raise ShoalError(f"every app.sources entry must stop after it starts, got start {start}, stop {stop}")
        if not self.fluid and not self.fluid_spheres and not self.sources:
            raise ShoalError("app.fluid, app.fluid_spheres and app.sources are all empty: there is no water")

    def _inside(self, name: str, item, width: int) -> None:
        """A shape must lie in the domain (a sphere's centre and its radius > 0, a box non-empty)."""
        d, L = self.dimension, self.domain
        if width == 2 * d:
            lo, hi = item[:d], item[d:2 * d]
            if not all(0 <= a < b <= s for a, b, s in zip(lo, hi, L, strict=True)):
                raise ShoalError(f"every app.{name} box lo, hi must be non-empty and inside the domain "
                                 f"[0, {L}], got {list(item[:2 * d])}")
        else:
            c, r = item[:d], item[d]
            if r <= 0 or not all(0 <= a <= s for a, s in zip(c, L, strict=True)):
                raise ShoalError(f"every app.{name} sphere needs a radius > 0 and a centre inside the domain "
                                 f"[0, {L}], got {list(item[:d + 1])}")

    # ----- derived -----------------------------------------------------------------------
    @property
    def h(self) -> float:
        """The cells' side (m)."""
        return self.domain[0] / self.cells[0]

    def lattice(self) -> int:
        """Particles per cell along each axis."""
        return max(1, round(self.particles_per_cell ** (1.0 / self.dimension)))

    def halo(self) -> int:
        """Cells of face velocities a tile reads around itself to advect its particles: a step
        moves a particle at most ``cfl`` cells, and interpolation reads one cell on either side."""
        return math.ceil(self.cfl) + 2


def flip_memory(params: FlipParams) -> int:
    """Bytes of a run's state: the particles (id, position, velocity, cell, and a step's
    copies) and the grid's fields (about thirty doubles a cell over a step's phases)."""
    cells = math.prod(int(n) for n in params.cells)
    fluid = sum(math.prod(b[params.dimension + a] - b[a] for a in range(params.dimension)) for b in params.fluid)
    particles = fluid / params.h ** params.dimension * params.particles_per_cell
    return int(particles * (8 + 5 * 8 * params.dimension) * 2 + cells * 30 * 8)
