"""The cloth's scenes, every number in SI units in one place.

:class:`Drape` is the drape of the contact-mechanics paper's family and of the peers' runs (the
brief's S1): a 1 m square sheet, flat at 0.3 m, falls under gravity onto a still sphere of
radius 0.25 m at the origin. Its sheet, sphere and gravity are the peers' (ARCSim's and
MuJoCo's runs of the same scene); its material, layers and steps are shoal's own.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from .acm import ContactCloth
from .model import ClothModel, Material
from .obstacles import Obstacle, Spin, sphere
from .surface import Surface, read_obj, sheet


@dataclass(frozen=True)
class Sheet:
    """What every scene's square sheet shares: its mesh, material, contact layers and steps.

    Parameters
    ----------
    n : int
        Vertices along a side.
    size : float
        The sheet's side, m.
    density, stretch, poisson, bending : float
        The material (:class:`~.model.Material`): kg/m² (MuJoCo's drape: 0.187 kg on 1 m²),
        N/m, 1, J.
    eta, stiffness : float
        The first contact layer's thickness (m; ARCSim's repulsion thickness) and stiffness
        (N/m).
    dt : float, optional
        The material step, s (default: 0.5 ms at a spacing of 1/32 m, in proportion to the
        spacing: about half the mesh's :meth:`~.model.ClothModel.stable_step`).
    window : int
        Material steps per collision window.
    damping : float
        Velocity lost per second by every free vertex, 1/s.
    max_layers : int
        Layers a contact pair may gain before the run stops.
    mesh : str
        A Wavefront OBJ file: the cloth as the file places it (m), instead of the generated
        sheet (``n``, ``size`` and the scene's height then unused).
    """

    n: int = 33
    size: float = 1.0
    density: float = 0.187
    stretch: float = 100.0
    poisson: float = 0.2
    bending: float = 1e-5
    eta: float = 0.005
    stiffness: float = 10.0
    dt: float | None = None
    window: int = 10
    damping: float = 1.0
    max_layers: int = 24
    mesh: str = ""

    def windows(self, seconds: float) -> int:
        """The collision windows in ``seconds`` of simulated time (rounded).

        Parameters
        ----------
        seconds : float
            Simulated time, s.
        """
        return round(seconds / (self.step * self.window))

    @property
    def step(self) -> float:
        """The material step, s (by default 0.5 ms at a spacing of 1/32 m, in proportion to the
        spacing: the sheet's, or a mesh's shortest edge)."""
        if self.dt is not None:
            return self.dt
        if self.mesh:
            x, edges = self._read.vertices, self._read.edges
            return 0.016 * float(np.linalg.norm(x[edges[:, 0]] - x[edges[:, 1]], axis=1).min())
        return 0.016 * self.size / (self.n - 1)

    def surface(self, height: float = 0.0) -> Surface:
        """The sheet flat at ``height`` (m), centred on the z axis, or the mesh's file.

        Parameters
        ----------
        height : float
            Its z, m.
        """
        return self._read if self.mesh else sheet(self.n, self.size, height)

    @cached_property
    def _read(self) -> Surface:
        """The mesh's file, read once."""
        return read_obj(self.mesh)

    def model(self, height: float = 0.0) -> ClothModel:
        """:meth:`surface` made of the material.

        Parameters
        ----------
        height : float
            The sheet's z, m.
        """
        return ClothModel(self.surface(height), Material(self.density, self.stretch, self.poisson, self.bending))

    def cloth(self, model: ClothModel, **options) -> ContactCloth:
        """``model`` with the sheet's layers, steps and damping, and ``options`` (obstacles,
        friction, pins) for :class:`~.acm.ContactCloth`.

        Parameters
        ----------
        model : ClothModel
            The sheet (:meth:`model`).
        **options
            More arguments of :class:`~.acm.ContactCloth`.
        """
        return ContactCloth(model, self.step, self.eta, self.stiffness, self.window, self.max_layers,
                            damping=self.damping, **options)


@dataclass(frozen=True)
class Drape(Sheet):
    """A sheet dropped onto a sphere (and the parameters of :class:`Sheet`).

    Parameters
    ----------
    height : float
        The sheet's starting z, m.
    radius : float
        The sphere's radius, m (at the origin).
    friction : tuple of float
        Coulomb coefficients between the cloth's own primitives and against the sphere
        (ARCSim's defaults).
    gravity : float
        Along z, m/s².
    sheets : int
        1, or 2: a second sheet ``gap`` above the first, turned 45° about z (the paper's two
        cloths draped).
    gap : float
        Between the two sheets, m.
    """

    height: float = 0.3
    radius: float = 0.25
    friction: tuple[float, float] = (0.6, 0.3)
    gravity: float = -9.81
    sheets: int = 1
    gap: float = 0.05

    def surface(self, height: float = 0.0) -> Surface:
        """One sheet at ``height``, or two (the second above it, turned 45° about z)."""
        first = super().surface(height)
        if self.sheets == 1:
            return first
        turn = np.array([[np.sqrt(0.5), -np.sqrt(0.5), 0.0], [np.sqrt(0.5), np.sqrt(0.5), 0.0], [0.0, 0.0, 1.0]])
        second = first.vertices @ turn.T + [0.0, 0.0, self.gap]
        return Surface(np.concatenate([first.vertices, second]),
                       np.concatenate([first.triangles, first.triangles + len(first.vertices)]))

    def build(self) -> tuple[ContactCloth, np.ndarray, np.ndarray]:
        """The cloth, its positions and its velocities at the start."""
        model = self.model(self.height)
        cloth = self.cloth(model, friction=self.friction, obstacles=(sphere((0.0, 0.0, 0.0), self.radius),))
        x = model.surface.vertices
        return cloth, x.copy(), np.zeros_like(x)


@dataclass(frozen=True)
class Twist(Sheet):
    """A sheet twisted by its clamped ends (the brief's S2, Newton's cloth-twist setup): its
    two edges across x are turned in opposite senses about the x axis, without gravity, so the
    middle wrings and touches itself more and more (and the parameters of :class:`Sheet`).

    Parameters
    ----------
    n : int
        Vertices along a side (50: 2,500 vertices).
    size : float
        The sheet's length between its clamped edges, m.
    width : float, optional
        Its side along the clamped edges, m (default: ``size``, a square; Newton's sheet is 1.5 m
        by 1 m).
    speed : float
        Each clamped edge's angular speed, rad/s (π/3: 120° between them after a second).
    friction : float
        Coulomb coefficient between the cloth's primitives.
    gravity : float
        Along z, m/s² (none in the brief's scene).
    """

    n: int = 50
    width: float | None = None
    speed: float = float(np.pi / 3)
    friction: float = 0.6
    gravity: float = 0.0

    @property
    def step(self) -> float:
        """As :class:`Sheet`'s, at the shorter of the sheet's two spacings."""
        if self.dt is not None or self.width is None:
            return super().step
        return 0.016 * min(self.size, self.width) / (self.n - 1)

    def surface(self, height: float = 0.0) -> Surface:
        """The sheet, ``size`` along x between the clamped edges and ``width`` along y."""
        square = super().surface(height)
        if self.width is None:
            return square
        return Surface(square.vertices * [1.0, self.width / self.size, 1.0], square.triangles)

    def build(self) -> tuple[ContactCloth, np.ndarray, np.ndarray]:
        """The cloth, its positions and its velocities at the start (flat in z = 0, at rest)."""
        model = self.model()
        x0 = model.surface.vertices
        ends = np.isclose(np.abs(x0[:, 0]), self.size / 2)
        left = Spin(axis=(1.0, 0.0, 0.0), speed=self.speed)
        right = Spin(axis=(-1.0, 0.0, 0.0), speed=self.speed)
        clamped = x0[ends]
        on_left = clamped[:, 0] < 0

        def motion(t: float) -> np.ndarray:
            return np.where(on_left[:, None], left.rotate(clamped, t), right.rotate(clamped, t))

        cloth = self.cloth(model, friction=(self.friction, 0.0), pinned=ends, motion=motion)
        return cloth, x0.copy(), np.zeros_like(x0)


@dataclass(frozen=True)
class Twister(Sheet):
    """A sheet wound onto a spinning rod, then unwound (the brief's S3, the contact-mechanics
    paper's twister in miniature; and the parameters of :class:`Sheet`).

    The sheet hangs at rest under a horizontal rod (along y, through the origin), its top row
    held to the rod: the rod's spin carries that row round, so the sheet rolls onto the rod, each
    turn over the last, like a roller blind. The spin ramps up, holds, coasts to rest, then runs
    the same profile backwards: contact between the turns rises, then falls as the sheet
    unrolls and hangs free again. The paper's rod takes a torque and falls out under the cloth's
    pull; this one is kinematic (its motion imposed), as the brief advises, so it unwinds by
    turning back.

    Parameters
    ----------
    n : int
        Vertices along a side.
    size : float
        The sheet's side, m.
    height : float
        The held row's z (m): below the rod's bottom by more than the first layer.
    radius : float
        The rod's radius, m.
    speed : float
        The rod's held angular speed, rad/s.
    spin : tuple of float
        The spin's ramp, hold and coast, s; the unwinding takes as long again.
    friction : tuple of float
        Coulomb coefficients between the cloth's own primitives and against the rod.
    gravity : float
        Along z, m/s².
    """

    n: int = 33
    size: float = 0.5
    height: float = -0.03
    radius: float = 0.02
    speed: float = float(4 * np.pi)
    spin: tuple[float, float, float] = (0.5, 0.5, 0.5)
    friction: tuple[float, float] = (0.6, 0.3)
    gravity: float = -9.81

    def surface(self, height: float = 0.0) -> Surface:
        """The sheet hanging in the plane x = 0, its top row at ``height`` (m)."""
        flat = super().surface()
        u, v = flat.vertices[:, 0], flat.vertices[:, 1]
        hanging = np.stack([np.zeros_like(u), v, height - (u - u.min())], axis=1)
        return Surface(hanging, flat.triangles)

    def build(self) -> tuple[ContactCloth, np.ndarray, np.ndarray]:
        """The cloth, its positions and its velocities at the start (hanging, at rest)."""
        model = self.model(self.height)
        x0 = model.surface.vertices
        ramp, hold, coast = self.spin
        turn = Spin(axis=(0.0, 1.0, 0.0), speed=self.speed, ramp=ramp, hold=hold, coast=coast, unwind=True)
        half = 0.6 * self.size
        rod = Obstacle((0.0, -half, 0.0), (0.0, half, 0.0), self.radius, turn)
        held = np.isclose(x0[:, 2], self.height)
        start = x0[held]

        def motion(t: float) -> np.ndarray:
            return turn.rotate(start, t)

        cloth = self.cloth(model, friction=self.friction, obstacles=(rod,), pinned=held, motion=motion)
        return cloth, x0.copy(), np.zeros_like(x0)
