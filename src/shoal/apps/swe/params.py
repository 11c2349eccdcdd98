"""Parameters of the shallow-water app (the ``[app]`` table of a scenario), checked up front.

A run is a rectangle of ``blocks`` root blocks of ``block`` x ``block`` cells at level 0; a
root block at level ``L`` holds ``(block * 2**L)**2`` cells. The tiling splits root blocks
between tiles, so ``blocks`` is the app's grid.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from ...errors import ShoalError
from ..checks import choice as _choice
from ..checks import integer as _integer
from ..checks import number as _number
from ..checks import vector as _vector

SETUPS = ("radial-dam-break", "lake-at-rest", "ritter", "thacker", "wave", "vortex", "tsunami")
SOLVERS = ("fwave", "rusanov")
BOUNDARIES = ("reflect", "outflow")
CRITERIA = ("surface", "gradient")
LIMITERS = ("minmod", "vanleer")


@dataclass
class SWEParams:
    """Parameters of the shallow-water app; see the scenario files for what each setup uses.

    Lengths in metres, times in seconds. ``sea_level`` is the surface at rest; bathymetry
    ``b`` is the bed's height (negative below sea level), so the depth is ``h = eta - b``.
    """

    setup: str = "radial-dam-break"
    blocks: list[int] = field(default_factory=lambda: [8, 8])  # root blocks along x and y
    block: int = 16  # cells per side of a root block at level 0
    extent: list[float] = field(default_factory=lambda: [1000.0, 1000.0])  # metres along x and y
    origin: list[float] = field(default_factory=lambda: [0.0, 0.0])
    # numerics
    solver: str = "fwave"  # "fwave" (Einfeldt speeds, as TUM SWE and GeoClaw) or "rusanov" (the paper's)
    order: int = 1  # 1: first order; 2: MUSCL with a limiter and two-stage Runge-Kutta (Heun)
    limiter: str = "minmod"
    cfl: float = 0.45  # dt * (|u| + c + |v| + c) / dx over every cell, at most 0.45
    g: float = 9.81
    dry: float = 1e-6  # depth (m) below which a cell is dry: no velocity, no slope
    boundary: list[str] | str = "reflect"  # one for all sides, or [west, east, south, north]
    # adaptivity
    min_level: int = 0
    max_level: int = 0
    regrid_every: int = 4  # steps between regrids
    criterion: str = "surface"  # "surface": |eta - sea_level| >= threshold (m); "gradient": |grad eta| >= threshold
    threshold: float = 0.05
    freeze_dry: bool = True  # a block holding a dry cell keeps its level unless a neighbour forces it up
    # the water and the bed
    sea_level: float = 0.0
    depth: float = 10.0  # flat bed at sea_level - depth (setups with a flat bed)
    column: list[float] = field(default_factory=lambda: [250.0, 250.0, 100.0, 5.0])  # cx cy radius height
    dam: list[float] = field(default_factory=lambda: [500.0, 1.0])  # ritter: x of the dam, depth upstream
    thacker: list[float] = field(default_factory=lambda: [1.0, 1.0, 0.5])  # h0 (centre depth), a (radius), eta
    hump: list[float] = field(default_factory=lambda: [0.5, 0.5, 0.01, 0.1])  # wave: cx cy amplitude width (m)
    vortex: list[float] = field(default_factory=lambda: [100.0, 0.5, 2.0])  # radius, peak speed, seamount height
    islands: list[list[float]] = field(default_factory=list)  # cx cy radius height (bed above sea level)
    roughness: float = 0.0  # lake-at-rest: amplitude of the bed's ripples (m)
    shelf: list[float] = field(default_factory=lambda: [0.0, 0.0, 100.0])  # tsunami: slope start, end x; shelf depth
    uplift: list[float] = field(default_factory=lambda: [0.0, 0.0, 1.0, 10000.0])  # cx cy amplitude width
    bathymetry_file: str = ""  # .npy of bed heights at one level's cell centres (replaces the setup's bed)

    def validate(self) -> None:
        """Refuse parameters that would run and mean nothing, with one line naming the key."""
        _choice("setup", self.setup, SETUPS)
        _choice("solver", self.solver, SOLVERS)
        _choice("criterion", self.criterion, CRITERIA)
        _choice("limiter", self.limiter, LIMITERS)
        for name in ("block", "order", "min_level", "max_level", "regrid_every"):
            _integer(name, getattr(self, name))
        for name in ("cfl", "g", "dry", "threshold", "sea_level", "depth", "roughness"):
            _number(name, getattr(self, name))
        if not isinstance(self.freeze_dry, bool):
            raise ShoalError(f"app.freeze_dry must be true or false, got {self.freeze_dry!r}")
        if not (isinstance(self.blocks, (list, tuple)) and len(self.blocks) == 2):
            raise ShoalError(f"app.blocks must be two root-block counts [nx, ny], got {self.blocks!r}")
        for n in self.blocks:
            _integer("blocks", n, low=1)
        if self.block < 2 or self.block % 2:
            raise ShoalError(f"app.block must be an even number of cells >= 2, got {self.block}")
        _vector("extent", self.extent, 2)
        _vector("origin", self.origin, 2)
        if min(self.extent) <= 0:
            raise ShoalError(f"app.extent must be positive lengths, got {self.extent}")
        dx = [e / (n * self.block) for e, n in zip(self.extent, self.blocks, strict=True)]
        if not math.isclose(dx[0], dx[1], rel_tol=1e-9):
            raise ShoalError(f"cells must be square: app.extent {self.extent} over {self.blocks} blocks of "
                             f"{self.block} cells gives dx = {dx[0]:g} and dy = {dx[1]:g}")
        if self.order not in (1, 2):
            raise ShoalError(f"app.order must be 1 or 2, got {self.order}")
        if not 0 < self.cfl <= 0.45:
            raise ShoalError(f"app.cfl must be in (0, 0.45], got {self.cfl}")
        if self.g <= 0 or self.dry <= 0:
            raise ShoalError("app.g and app.dry must be positive")
        if self.min_level < 0:
            raise ShoalError(f"app.min_level must be >= 0, got {self.min_level}")
        if self.max_level < self.min_level:
            raise ShoalError(f"app.max_level ({self.max_level}) is below app.min_level ({self.min_level})")
        if self.max_level > 6:
            raise ShoalError(f"app.max_level must be at most 6 (a 64x finer grid), got {self.max_level}")
        if self.regrid_every < 1:
            raise ShoalError(f"app.regrid_every must be >= 1, got {self.regrid_every}")
        if self.threshold < 0:
            raise ShoalError(f"app.threshold must be >= 0, got {self.threshold}")
        if self.depth < 0:
            raise ShoalError(f"app.depth must be >= 0 (negative depth), got {self.depth}")
        sides = self.sides()
        for side in sides:
            _choice("boundary", side, BOUNDARIES)
        for name, width in (("column", 4), ("dam", 2), ("thacker", 3), ("hump", 4), ("vortex", 3), ("shelf", 3),
                            ("uplift", 4)):
            _vector(name, getattr(self, name), width)
        if not isinstance(self.islands, (list, tuple)):
            raise ShoalError(f"app.islands must be a list of [cx, cy, radius, height], got {self.islands!r}")
        for island in self.islands:
            _vector("islands entry", island, 4)
        if self.setup == "radial-dam-break" and (self.column[2] <= 0 or self.column[3] < -self.depth):
            raise ShoalError(f"app.column needs a positive radius and a depth above the bed (negative depth), "
                             f"got {self.column}")
        if self.setup == "ritter" and self.dam[1] <= 0:
            raise ShoalError(f"app.dam's upstream depth must be positive (negative depth), got {self.dam[1]}")
        if self.setup == "thacker" and (self.thacker[0] <= 0 or self.thacker[1] <= 0):
            raise ShoalError(f"app.thacker needs a positive centre depth h0 and radius a, got {self.thacker}")
        if self.setup == "wave" and (self.hump[3] <= 0 or self.hump[2] <= -self.depth):
            raise ShoalError(f"app.hump needs a positive width and a surface above the bed, got {self.hump}")
        if self.setup == "vortex" and self.vortex[0] <= 0:
            raise ShoalError(f"app.vortex needs a positive radius, got {self.vortex}")
        if self.bathymetry_file and not Path(self.bathymetry_file).is_file():
            raise ShoalError(f"app.bathymetry_file {self.bathymetry_file!r} does not exist")

    def sides(self) -> tuple[str, str, str, str]:
        """The boundary of the west, east, south and north sides."""
        if isinstance(self.boundary, str):
            return (self.boundary,) * 4
        if not (isinstance(self.boundary, (list, tuple)) and len(self.boundary) == 4):
            raise ShoalError(f"app.boundary must be one kind or four [west, east, south, north], got {self.boundary!r}")
        return tuple(self.boundary)

    @property
    def dx0(self) -> float:
        """Cell size at level 0 (m)."""
        return self.extent[0] / (self.blocks[0] * self.block)


def swe_memory(p: SWEParams) -> int:
    """Bytes of a run's state if every block refined to ``max_level`` (an upper bound): seven
    float64 fields (state, bed and the Runge-Kutta copy) with two ghost layers per block."""
    n = p.block * 2 ** int(p.max_level)
    return 7 * 8 * int(p.blocks[0]) * int(p.blocks[1]) * (n + 4) ** 2
