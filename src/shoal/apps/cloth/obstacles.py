"""Kinematic obstacles: capsules that move as prescribed and push the cloth with the same layers.

An obstacle is the set of points within ``radius`` of a segment (a sphere when its two ends
coincide, a rod otherwise). Its ends follow a prescribed motion: still, or spun about an axis
with a speed that ramps up, holds, then coasts down (the twister's rod, §VII-C of the
contact-mechanics paper, kept kinematic as the brief advises). Within a collision window the
ends are taken at the window's events and move linearly between them, as the cloth's vertices
do. A vertex and an obstacle form a contact pair with its own nested layers; the obstacle
takes no reaction (its motion is imposed), so a scene with one does not conserve momentum.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ...errors import ShoalError
from .crossings import segments_cross


@dataclass(frozen=True)
class Spin:
    """Rotation about the axis through ``centre`` along ``axis``: the angular speed rises
    linearly to ``speed`` over ``ramp`` seconds from ``start``, holds for ``hold`` seconds,
    then falls linearly to rest over ``coast`` seconds; with ``unwind``, the same profile then
    runs backwards, back to the starting angle.

    Parameters
    ----------
    centre : sequence of float
        A point of the axis, m.
    axis : sequence of float
        The axis's direction (normalised here); the rotation is right-handed about it.
    speed : float
        The held angular speed, rad/s.
    start, ramp, hold, coast : float
        When the ramp begins and how long each part lasts, s.
    unwind : bool
        Turn back by as much, with the same profile, once the coast ends (the hold must then be
        finite).
    """

    centre: tuple[float, float, float] = (0.0, 0.0, 0.0)
    axis: tuple[float, float, float] = (0.0, 0.0, 1.0)
    speed: float = 0.0
    start: float = 0.0
    ramp: float = 0.0
    hold: float = math.inf
    coast: float = 0.0
    unwind: bool = False

    def __post_init__(self):
        if not np.linalg.norm(self.axis) > 0:
            raise ShoalError("a spin's axis must not be zero")
        for name in ("start", "ramp", "hold", "coast"):
            if not getattr(self, name) >= 0:
                raise ShoalError(f"a spin's {name} must be 0 or more (s), got {getattr(self, name)}")
        if self.unwind and not math.isfinite(self.hold):
            raise ShoalError("a spin that unwinds must hold for a finite time")

    @property
    def _turn(self) -> float:
        """How long the profile lasts one way, s."""
        return self.ramp + self.hold + self.coast

    def angle(self, t: float) -> float:
        """The angle turned by time ``t``, rad (the integral of the speed's profile).

        Parameters
        ----------
        t : float
            Time, s.
        """
        s = max(t - self.start, 0.0)
        if self.unwind and s > self._turn:
            return self._forward(self._turn) - self._forward(min(s - self._turn, self._turn))
        return self._forward(s)

    def _forward(self, s: float) -> float:
        """The angle turned ``s`` seconds into the profile's first way, rad."""
        w = self.speed
        turned = 0.0
        for length, a, b in ((self.ramp, 0.0, w), (self.hold, w, w), (self.coast, w, 0.0)):
            part = min(s, length)
            if part > 0:  # speed linear from a to b over length: the area up to `part`
                turned += part * (a + 0.5 * (b - a) * part / length)
            s -= part
            if s <= 0:
                break
        return turned

    def speed_at(self, t: float) -> float:
        """The angular speed at time ``t``, rad/s.

        Parameters
        ----------
        t : float
            Time, s.
        """
        s = t - self.start
        if s <= 0:
            return 0.0
        if self.unwind and s > self._turn:
            return -self.speed_at(self.start + s - self._turn) if s < 2 * self._turn else 0.0
        if s < self.ramp:
            return self.speed * s / self.ramp
        s -= self.ramp
        if s < self.hold:
            return self.speed
        s -= self.hold
        return self.speed * (1.0 - s / self.coast) if s < self.coast else 0.0

    def rotate(self, points: np.ndarray, t: float) -> np.ndarray:
        """``points`` (shape (..., 3)) rotated by :meth:`angle` at ``t`` (Rodrigues).

        Parameters
        ----------
        points : ndarray, shape (..., 3)
            Points at time 0, m.
        t : float
            Time, s.
        """
        k = np.asarray(self.axis, np.float64) / np.linalg.norm(self.axis)
        c = np.asarray(self.centre, np.float64)
        theta = self.angle(t)
        r = np.asarray(points, np.float64) - c
        return c + r * math.cos(theta) + np.cross(k, r) * math.sin(theta) + np.outer(r @ k, k).reshape(r.shape) \
            * (1.0 - math.cos(theta))


@dataclass(frozen=True)
class Obstacle:
    """A capsule of ``radius`` around the segment from ``a`` to ``b`` (a sphere when they
    coincide), moved by ``spin``.

    Parameters
    ----------
    a, b : sequence of float
        The segment's ends at time 0, m.
    radius : float
        m.
    spin : Spin, optional
        Its motion (default: still).

    Raises
    ------
    ShoalError
        If the radius is not positive.
    """

    a: tuple[float, float, float]
    b: tuple[float, float, float]
    radius: float
    spin: Spin | None = field(default=None)

    def __post_init__(self):
        if not self.radius > 0:
            raise ShoalError(f"an obstacle's radius must be positive (m), got {self.radius}")

    def ends(self, t: float) -> np.ndarray:
        """The segment's ends at time ``t``, shape (2, 3), m.

        Parameters
        ----------
        t : float
            Time, s.
        """
        ends = np.array([self.a, self.b], np.float64)
        return ends if self.spin is None else self.spin.rotate(ends, t)


def sphere(centre, radius: float) -> Obstacle:
    """A still sphere.

    Parameters
    ----------
    centre : sequence of float
        m.
    radius : float
        m.
    """
    return Obstacle(tuple(centre), tuple(centre), radius)


def ends_at(obstacles, times: np.ndarray) -> np.ndarray:
    """Every obstacle's ends at each of ``times``, shape (len(times), obstacles, 2, 3).

    Parameters
    ----------
    obstacles : sequence of Obstacle
        The obstacles.
    times : ndarray
        Times, s.
    """
    out = np.zeros((len(times), len(obstacles), 2, 3))
    for o, obstacle in enumerate(obstacles):
        if obstacle.spin is None:
            out[:, o] = obstacle.ends(0.0)
        else:
            for e, t in enumerate(times):
                out[e, o] = obstacle.ends(float(t))
    return out


def spins_at(obstacles, times: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every obstacle's angular velocity at each of ``times`` (shape (len(times), obstacles, 3),
    rad/s; zero when still) and a point of its axis of rotation (shape (obstacles, 3), m): its
    surface moves at ``omega × (X - pivot)``.

    Parameters
    ----------
    obstacles : sequence of Obstacle
        The obstacles.
    times : ndarray
        Times, s.
    """
    omega = np.zeros((len(times), len(obstacles), 3))
    pivot = np.zeros((len(obstacles), 3))
    for o, obstacle in enumerate(obstacles):
        if obstacle.spin is not None:
            axis = np.asarray(obstacle.spin.axis, np.float64)
            omega[:, o] = np.outer([obstacle.spin.speed_at(float(t)) for t in times], axis / np.linalg.norm(axis))
            pivot[o] = obstacle.spin.centre
    return omega, pivot


def radii(obstacles) -> np.ndarray:
    """The obstacles' radii, m.

    Parameters
    ----------
    obstacles : sequence of Obstacle
        The obstacles.
    """
    return np.array([o.radius for o in obstacles], np.float64)


def crossed_triangles(corners: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The triangles that the segment ``ends`` passes through (Möller–Trumbore on the whole
    segment), in order.

    Parameters
    ----------
    corners : ndarray, shape (m, 3, 3)
        Each triangle's corners, m.
    ends : ndarray, shape (2, 3)
        The segment's ends, m.
    """
    a, b = ends
    if not (b - a).any():
        return np.zeros(0, np.int64)
    return np.flatnonzero(segments_cross(corners, a, b))
