"""Parameters of the shallow-water app (the ``[app]`` table of a scenario), checked up front.

A run is a rectangle of ``blocks`` root blocks of ``block`` x ``block`` cells at level 0; a
root block at level ``L`` holds ``(block * 2**L)**2`` cells. The tiling splits root blocks
between tiles, so ``blocks`` is the app's grid.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ...errors import ShoalError
from ..checks import choice as _choice
from ..checks import integer as _integer
from ..checks import number as _number
from ..checks import vector as _vector
from .inputs import PYTHON, FromPython

SETUPS = ("radial-dam-break", "dam-break", "lake-at-rest", "channel", "ritter", "thacker", "thacker-1d", "wave",
          "vortex", "tsunami")
SOLVERS = ("fwave", "rusanov")
#: ``outflow`` is the older name of ``transmissive``
BOUNDARIES = ("reflect", "transmissive", "outflow", "inflow", "depth")
CRITERIA = ("surface", "gradient")
LIMITERS = ("minmod", "vanleer")
#: ``app.dry = 0`` means this fraction of the depth scale: the deepest initial water, or the
#: depth a side holds or lets in. Against 1e-6 of the depth, Ritter's thin front (depth below 5%
#: of the dam's) carries 1.7 (order 1) and 1.9 (order 2) times less velocity error; 1e-12 would
#: gain another 20% at order 2 but lets films of 1e-13 of the depth run ahead of Thacker's
#: shoreline faster than the water, 34% more time steps (320 x 320 cells).
DRY_FRACTION = 1e-10


@dataclass
class SWEParams:
    """Parameters of the shallow-water app; see the scenario files for what each setup uses.

    Lengths in metres, times in seconds. ``sea_level`` is the surface at rest; bathymetry
    ``b`` is the bed's height (negative below sea level), so the depth is ``h = eta - b``.
    ``initial`` replaces a setup's water, ``bathymetry_file`` its bed (see :mod:`.inputs`).
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
    dry: float = 0.0  # depth (m) below which a cell is dry: no velocity, no slope; 0: DRY_FRACTION of the depth scale
    # the sides
    boundary: list[str] | str = "reflect"  # one for all sides, or [west, east, south, north]
    discharge: list[float] | float = 0.0  # inflow sides: water entering per metre of side (m^2/s); or one per side
    side_depth: list[float] | float = 0.0  # depth sides: the depth held outside (m); or one per side
    # adaptivity
    min_level: int = 0
    max_level: int = 0
    regrid_every: int = 4  # steps between regrids
    criterion: str = "surface"  # "surface": |eta - sea_level| >= threshold (m); "gradient": |grad eta| >= threshold
    threshold: float = 0.05
    freeze_dry: bool = True  # a block holding a dry cell keeps its level unless a neighbour forces it up
    shore: bool = False  # blocks holding wet and dry cells refine to max_level, all-dry ones coarsen
    # the water and the bed
    sea_level: float = 0.0
    depth: float = 10.0  # flat bed at sea_level - depth (setups with a flat bed)
    column: list[float] = field(default_factory=lambda: [250.0, 250.0, 100.0, 5.0])  # cx cy radius height
    dam: list[float] = field(default_factory=lambda: [500.0, 1.0])  # x of the dam, depth upstream [, downstream]
    thacker: list[float] = field(default_factory=lambda: [1.0, 1.0, 0.5])  # h0 (centre depth), a (radius), eta
    bump: list[float] = field(default_factory=lambda: [500.0, 50.0, 0.0])  # channel: x, width, height (m)
    hump: list[float] = field(default_factory=lambda: [0.5, 0.5, 0.01, 0.1])  # wave: cx cy amplitude width (m)
    vortex: list[float] = field(default_factory=lambda: [100.0, 0.5, 2.0])  # radius, peak speed, seamount height
    islands: list[list[float]] = field(default_factory=list)  # cx cy radius height (bed above sea level)
    roughness: float = 0.0  # lake-at-rest: amplitude of the bed's ripples (m)
    shelf: list[float] = field(default_factory=lambda: [0.0, 0.0, 100.0])  # tsunami: slope start, end x; shelf depth
    uplift: list[float] = field(default_factory=lambda: [0.0, 0.0, 1.0, 10000.0])  # cx cy amplitude width
    bathymetry_file: str = ""  # .npy of bed heights at one level's cell centres (replaces the setup's bed)
    initial: str | Callable = ""  # .npz of h or eta, u, v at one level's cell centres, or (Python) f(x, y, b)

    def validate(self) -> None:
        """Refuse parameters that would run and mean nothing, with one line naming the key.

        A callable ``initial`` becomes a :class:`~.inputs.FromPython`, which scenario files
        record by the callable's name."""
        _choice("setup", self.setup, SETUPS)
        _choice("solver", self.solver, SOLVERS)
        _choice("criterion", self.criterion, CRITERIA)
        _choice("limiter", self.limiter, LIMITERS)
        for name in ("block", "order", "min_level", "max_level", "regrid_every"):
            _integer(name, getattr(self, name))
        for name in ("cfl", "g", "dry", "threshold", "sea_level", "depth", "roughness"):
            _number(name, getattr(self, name))
        for name in ("freeze_dry", "shore"):
            if not isinstance(getattr(self, name), bool):
                raise ShoalError(f"app.{name} must be true or false, got {getattr(self, name)!r}")
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
        if self.g <= 0:
            raise ShoalError(f"app.g must be positive, got {self.g}")
        if self.dry < 0:
            raise ShoalError(f"app.dry must be >= 0 (0: a fraction of the depth scale), got {self.dry}")
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
        self._validate_sides()
        for name, width in (("column", 4), ("thacker", 3), ("bump", 3), ("hump", 4), ("vortex", 3), ("shelf", 3),
                            ("uplift", 4)):
            _vector(name, getattr(self, name), width)
        if not (isinstance(self.dam, (list, tuple)) and len(self.dam) in (2, 3)):
            raise ShoalError(f"app.dam must be [x, depth upstream] or [x, depth upstream, depth downstream], got "
                             f"{self.dam!r}")
        for value in self.dam:
            _number("dam", value)
        if not isinstance(self.islands, (list, tuple)):
            raise ShoalError(f"app.islands must be a list of [cx, cy, radius, height], got {self.islands!r}")
        for island in self.islands:
            _vector("islands entry", island, 4)
        self._validate_setup()
        if self.bathymetry_file and not Path(self.bathymetry_file).is_file():
            raise ShoalError(f"app.bathymetry_file {self.bathymetry_file!r} does not exist")
        if callable(self.initial) and not isinstance(self.initial, FromPython):
            self.initial = FromPython(self.initial)
        if not isinstance(self.initial, str) or not (self.initial == "" or self.initial.endswith(".npz")
                                                     or self.initial.startswith(PYTHON)):
            raise ShoalError(f"app.initial must name an .npz file (or, from Python, be a callable f(x, y, b) -> "
                             f"(h, u, v)), got {self.initial!r}")

    def _validate_sides(self) -> None:
        sides = self.sides()
        for side in sides:
            _choice("boundary", side, BOUNDARIES)
        for name, kind in (("discharge", "inflow"), ("side_depth", "depth")):
            values = self.side_values(name)
            for side, value in zip(sides, values, strict=True):
                if side == kind and value <= 0:
                    raise ShoalError(f"app.{name} must be positive on every {kind} side, got {getattr(self, name)}")

    def _validate_setup(self) -> None:
        """The setup's own keys: sizes positive, and its water inside the domain."""
        (x0, y0), (x1, y1) = self.origin, (self.origin[0] + self.extent[0], self.origin[1] + self.extent[1])
        domain = f"the domain [{x0:g}, {x1:g}] x [{y0:g}, {y1:g}] m"
        if self.setup == "radial-dam-break":
            cx, cy, radius, height = self.column
            if radius <= 0 or height < -self.depth:
                raise ShoalError(f"app.column needs a positive radius and a depth above the bed (negative depth), "
                                 f"got {self.column}")
            if math.hypot(cx - min(max(cx, x0), x1), cy - min(max(cy, y0), y1)) >= radius:
                raise ShoalError(f"app.column {self.column} lies outside {domain}: no water would rise")
        if self.setup in ("ritter", "dam-break"):
            x, up = self.dam[:2]
            down = self.dam[2] if len(self.dam) == 3 else 0.0
            if up <= 0 or down < 0:
                raise ShoalError(f"app.dam's depths must be positive upstream and >= 0 downstream (negative depth), "
                                 f"got {self.dam}")
            if self.setup == "ritter" and down:
                raise ShoalError(f"app.dam: Ritter's dam break is dry downstream, got depth {down:g} m there "
                                 "(setup = \"dam-break\" takes water on both sides)")
            if not x0 < x < x1:
                raise ShoalError(f"app.dam's x ({x:g} m) must lie inside {domain}: else nothing breaks")
        if self.setup in ("thacker", "thacker-1d") and (self.thacker[0] <= 0 or self.thacker[1] <= 0):
            raise ShoalError(f"app.thacker needs a positive centre depth h0 and radius a, got {self.thacker}")
        if self.setup == "channel" and self.bump[1] <= 0:
            raise ShoalError(f"app.bump needs a positive width, got {self.bump}")
        for setup, name in (("wave", "hump"), ("tsunami", "uplift")):
            if self.setup != setup:
                continue
            cx, cy, amplitude, width = getattr(self, name)
            if width <= 0 or (setup == "wave" and amplitude <= -self.depth):
                raise ShoalError(f"app.{name} needs a positive width and a surface above the bed, got "
                                 f"{getattr(self, name)}")
            # beyond two widths the Gaussian is below 2% of its amplitude
            if math.hypot(cx - min(max(cx, x0), x1), cy - min(max(cy, y0), y1)) > 2 * width:
                raise ShoalError(f"app.{name}'s centre ({cx:g}, {cy:g}) lies more than two widths ({width:g} m) "
                                 f"outside {domain}: it would raise nothing")
        if self.setup == "vortex" and self.vortex[0] <= 0:
            raise ShoalError(f"app.vortex needs a positive radius, got {self.vortex}")

    def sides(self) -> tuple[str, str, str, str]:
        """The boundary of the west, east, south and north sides."""
        if isinstance(self.boundary, str):
            return (self.boundary,) * 4
        if not (isinstance(self.boundary, (list, tuple)) and len(self.boundary) == 4):
            raise ShoalError(f"app.boundary must be one kind or four [west, east, south, north], got {self.boundary!r}")
        return tuple(self.boundary)

    def side_values(self, name: str) -> tuple[float, float, float, float]:
        """``app.discharge`` or ``app.side_depth`` of the west, east, south and north sides."""
        value = getattr(self, name)
        if isinstance(value, (list, tuple)):
            _vector(name, value, 4)
            return tuple(float(v) for v in value)
        _number(name, value)
        return (float(value),) * 4

    @property
    def dx0(self) -> float:
        """Cell size at level 0 (m)."""
        return self.extent[0] / (self.blocks[0] * self.block)


def swe_memory(p: SWEParams) -> int:
    """Bytes of a run's state if every block refined to ``max_level`` (an upper bound): seven
    float64 fields (state, bed and the Runge-Kutta copy) with two ghost layers per block."""
    n = p.block * 2 ** int(p.max_level)
    return 7 * 8 * int(p.blocks[0]) * int(p.blocks[1]) * (n + 4) ** 2
