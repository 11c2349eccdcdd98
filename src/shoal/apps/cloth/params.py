"""The cloth app's ``[app]`` keys: which scene, its sheet, material, contact layers and steps.

Every number of a cloth scenario is here or in its file: :mod:`.scenes` holds the defaults the
brief's scenes use, and these keys override them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from ...errors import ShoalError
from ..checks import choice, integer, number
from .scenes import Drape, Sheet, Twist, Twister

SCENES = {"drape": Drape, "twist": Twist, "twister": Twister}


@dataclass
class ClothParams:
    """Parameters of the cloth app (SI units: m, s, kg, N).

    ``scene`` is ``"drape"`` (a square sheet dropped onto a sphere at the origin), ``"twist"``
    (a sheet wrung by its two clamped edges, turned in opposite senses about x) or
    ``"twister"`` (a sheet hanging from a rod by its top row, rolled onto the rod as it spins,
    then unrolled).
    """

    scene: str = "drape"
    n: int = 33  # vertices along a side of the square sheet
    size: float = 1.0  # the sheet's side
    density: float = 0.187  # kg/m²
    stretch: float = 100.0  # N/m: Young's modulus times thickness
    poisson: float = 0.2
    bending: float = 1e-5  # J: the discrete shells' bending stiffness
    eta: float = 0.005  # the first contact layer's thickness
    stiffness: float = 10.0  # the first contact layer's stiffness, N/m
    dt: float = 0.0  # the material step; 0: 0.5 ms at a spacing of 1/32 m, in proportion to the spacing
    window: int = 10  # material steps per collision window (a step of the run)
    damping: float = 1.0  # velocity lost per second by free vertices, 1/s
    max_layers: int = 24  # layers a pair may gain before the run stops
    friction: list[float] = field(default_factory=lambda: [0.6, 0.3])  # Coulomb: cloth-cloth, cloth-obstacle
    gravity: float = -9.81  # along z, m/s²
    height: float = 0.3  # drape: the sheet's starting height; twister: its held top row's
    radius: float = 0.25  # drape: the sphere's radius; twister: the rod's
    sheets: int = 1  # drape: 1, or 2 (a second sheet gap above the first, turned 45° about z)
    gap: float = 0.05  # drape: between the two sheets
    mesh: str = ""  # drape: a Wavefront OBJ file, the cloth as it places it, instead of the generated sheet
    width: float = 0.0  # twist: the sheet's side along its clamped edges (size: between them); 0: square
    speed: float = math.pi / 3  # twist: each clamped edge's angular speed; twister: the rod's held speed, rad/s
    spin: list[float] = field(default_factory=lambda: [0.5, 0.5, 0.5])  # twister: the rod's ramp, hold, coast, s
    job_split: int = 0  # a detection job of more primitives is cut into ranges its node's cores share; 0: never

    def validate(self) -> None:
        """Refuse parameters that would run and mean nothing, with one line naming the key."""
        choice("scene", self.scene, tuple(SCENES))
        integer("n", self.n, low=2)
        integer("window", self.window, low=1)
        integer("max_layers", self.max_layers, low=1)
        integer("job_split", self.job_split, low=0)
        choice("sheets", self.sheets, (1, 2))
        for name in ("size", "density", "stretch", "poisson", "bending", "eta", "stiffness", "dt", "damping",
                     "gravity", "height", "radius", "speed", "gap", "width"):
            number(name, getattr(self, name))
        for name in ("size", "density", "stretch", "eta", "stiffness", "radius", "gap"):
            if not getattr(self, name) > 0:
                raise ShoalError(f"app.{name} must be positive, got {getattr(self, name)}")
        if not 0 <= self.poisson < 0.5:
            raise ShoalError(f"app.poisson must be at least 0 and below 0.5, got {self.poisson}")
        for name in ("bending", "dt", "damping", "width"):
            if getattr(self, name) < 0:
                raise ShoalError(f"app.{name} must be 0 or more, got {getattr(self, name)}")
        if not (isinstance(self.friction, (list, tuple)) and len(self.friction) == 2):
            raise ShoalError(f"app.friction must be two coefficients [cloth-cloth, cloth-obstacle], got "
                             f"{self.friction!r}")
        for mu in self.friction:
            number("friction", mu)
        if not (isinstance(self.spin, (list, tuple)) and len(self.spin) == 3):
            raise ShoalError(f"app.spin must be three durations [ramp, hold, coast] (s), got {self.spin!r}")
        for part in self.spin:
            number("spin", part)
            if part < 0:
                raise ShoalError(f"app.spin's durations must be 0 or more (s), got {self.spin!r}")
        if self.mesh and self.scene != "drape":
            raise ShoalError(f"app.mesh is read by the drape scene only, not {self.scene!r}")
        if self.mesh and self.sheets != 1:
            raise ShoalError("app.sheets = 2 doubles the generated sheet, not app.mesh")
        if self.mesh and not Path(self.mesh).is_file():
            raise ShoalError(f"app.mesh {self.mesh!r} does not exist")

    def sheet(self) -> Sheet:
        """The scene these parameters describe (:mod:`.scenes`)."""
        common = dict(n=self.n, size=self.size, density=self.density, stretch=self.stretch, poisson=self.poisson,
                      bending=self.bending, eta=self.eta, stiffness=self.stiffness, dt=self.dt or None,
                      window=self.window, damping=self.damping, max_layers=self.max_layers, mesh=self.mesh)
        if self.scene == "drape":
            return Drape(**common, height=self.height, radius=self.radius, friction=tuple(self.friction),
                         gravity=self.gravity, sheets=self.sheets, gap=self.gap)
        if self.scene == "twister":
            return Twister(**common, height=self.height, radius=self.radius, speed=self.speed, spin=tuple(self.spin),
                           friction=tuple(self.friction), gravity=self.gravity)
        return Twist(**common, width=self.width or None, speed=self.speed, friction=self.friction[0],
                     gravity=self.gravity)


def build_cloth(params: ClothParams, steps: int):
    """The cloth app of ``params`` (a step is a collision window)."""
    from .contact_app import ContactClothApp

    params.validate()
    scene = params.sheet()
    cloth, _, v = scene.build()
    return ContactClothApp(cloth, (0.0, 0.0, params.gravity), velocity=v, job_split=params.job_split)


def cloth_memory(params: ClothParams) -> int:
    """Bytes the cloth's state and its windows' trajectories take, about."""
    vertices = params.n * params.n
    return vertices * 8 * 3 * (2 + 2 + 32 * params.window) + 200 * vertices * 8
