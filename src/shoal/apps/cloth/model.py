"""The cloth's material and its motion: lumped masses, material forces, kick–drift.

:class:`Material` holds the cloth's constants in SI units; :class:`ClothModel` is a surface
made of it, with what its kernels read precomputed (rest frames and areas, hinge weights and
rest angles, each vertex's contribution rows in stencil order, lumped masses).

Motion is the contact-mechanics paper's kick–drift (§II-A): material forces are computed on a
fixed interval and applied as impulses (kicks), between which vertices drift on straight lines.
With no damping it is symplectic, and internal forces, which a rigid motion leaves unchanged,
conserve linear and angular momentum to round-off. Pinned vertices take no kick: they drift
at their own velocity (at rest, or moved kinematically).
"""

from __future__ import annotations

from dataclasses import dataclass

import numba as nb
import numpy as np

from ...errors import ShoalError
from .forces import accumulate, bend, dihedral, rest_frames, stencil_rows, stretch
from .surface import Surface


@dataclass(frozen=True)
class Material:
    """A cloth's constants.

    Parameters
    ----------
    density : float
        Mass per area, kg/m².
    stretch : float
        Membrane stiffness ``E t`` (Young's modulus times thickness), N/m.
    poisson : float
        Poisson's ratio, in [0, 0.5).
    bending : float
        Bending stiffness of the discrete shells, J (0: none).

    Raises
    ------
    ShoalError
        If the density or the stretch stiffness is not positive, the bending stiffness is
        negative, or Poisson's ratio is outside [0, 0.5).
    """

    density: float = 0.2
    stretch: float = 100.0
    poisson: float = 0.0
    bending: float = 1e-5

    def __post_init__(self):
        if not self.density > 0:
            raise ShoalError(f"the cloth's density must be positive (kg/m²), got {self.density}")
        if not self.stretch > 0:
            raise ShoalError(f"the cloth's stretch stiffness must be positive (N/m), got {self.stretch}")
        if not self.bending >= 0:
            raise ShoalError(f"the cloth's bending stiffness must be 0 or more (J), got {self.bending}")
        if not 0 <= self.poisson < 0.5:
            raise ShoalError(f"the cloth's Poisson ratio must be in [0, 0.5), got {self.poisson}")

    @property
    def lame(self) -> tuple[float, float]:
        """The membrane's Lamé moduli (μ, λ), N/m, of plane stress."""
        k, nu = self.stretch, self.poisson
        return k / (2 * (1 + nu)), k * nu / (1 - nu * nu)


class ClothModel:
    """A surface of one material: its masses, forces and energy, and its steps.

    Parameters
    ----------
    surface : Surface
        The mesh at rest (its positions are the rest shape).
    material : Material
        The cloth's constants.
    """

    def __init__(self, surface: Surface, material: Material):
        self.surface, self.material = surface, material
        v, t, hinges = surface.vertices, surface.triangles, surface.hinges
        self.dm_inv, self.area = rest_frames(v, t)
        self.hinges = hinges
        self.rest_angle = np.array([dihedral(v, *h) for h in hinges.tolist()], dtype=np.float64).reshape(-1)
        shared = self.area[surface.hinge_triangles].sum(axis=1)
        edge2 = np.sum((v[hinges[:, 1]] - v[hinges[:, 0]]) ** 2, axis=1)
        self.weight = material.bending * 3 * edge2 / shared
        self.ptr, self.order = stencil_rows(t, hinges, len(v))
        self.rows = np.zeros((3 * len(t) + 4 * len(hinges), 3))
        self.mass = np.bincount(t.ravel(), weights=np.repeat(material.density * self.area / 3, 3), minlength=len(v))
        self.all_vertices = np.arange(len(v), dtype=np.int64)

    def stable_step(self) -> float:
        """The longest material step the explicit kick–drift can take on this mesh, s: the
        shortest altitude of a triangle at rest over the membrane's fastest wave speed,
        ``sqrt(E t / ((1 - ν²) ρ))`` (a CFL bound: the drape runs at half of it, and blew up at
        1.07 times it)."""
        v, t = self.surface.vertices, self.surface.triangles
        longest = np.max([np.linalg.norm(v[t[:, (i + 1) % 3]] - v[t[:, i]], axis=1) for i in range(3)], axis=0)
        altitude = float(np.min(2 * self.area / longest))
        m = self.material
        return altitude / float(np.sqrt(m.stretch / ((1 - m.poisson ** 2) * m.density)))

    def forces(self, x: np.ndarray, out: np.ndarray, vertices: np.ndarray | None = None) -> float:
        """The material forces at positions ``x`` into ``out`` (of ``vertices``, default all),
        each vertex's in global stencil order; the elastic energy (J)."""
        mu, lam = self.material.lame
        energy = stretch(x, self.surface.triangles, self.dm_inv, self.area, mu, lam, self.rows, 0)
        if len(self.hinges):
            energy += bend(x, self.hinges, self.rest_angle, self.weight, self.rows, 3 * len(self.surface.triangles))
        accumulate(self.rows, self.ptr, self.order, self.all_vertices if vertices is None else vertices, out)
        return energy

    def kinetic(self, v: np.ndarray) -> float:
        """The kinetic energy of velocities ``v`` (J)."""
        return 0.5 * float(np.sum(self.mass * np.sum(v * v, axis=1)))

    def run(self, x: np.ndarray, v: np.ndarray, dt: float, steps: int, gravity=(0.0, 0.0, 0.0),
            pinned: np.ndarray | None = None, damping: float = 0.0) -> np.ndarray:
        """``steps`` kick–drift steps of ``dt`` seconds on ``x`` and ``v`` in place: each kicks the
        free vertices with the material forces and gravity, then every vertex drifts. Returns
        the elastic energy before each step.

        Parameters
        ----------
        x, v : ndarray, shape (n, 3)
            Positions (m) and velocities (m/s), updated.
        dt : float
            The material step, s.
        steps : int
            How many.
        gravity : sequence of float
            Acceleration, m/s².
        pinned : ndarray of bool, optional
            Vertices that take no kick.
        damping : float
            A free vertex's velocity loses ``damping dt`` of itself each step (1/s; 0: none, the
            motion then conserves momentum).

        Raises
        ------
        ShoalError
            If ``dt`` is not positive or the damping is negative.
        """
        if not dt > 0:
            raise ShoalError(f"the cloth's time step must be positive, got {dt}")
        if not damping >= 0:
            raise ShoalError(f"the cloth's damping must be 0 or more (1/s), got {damping}")
        free = np.ones(len(x), bool) if pinned is None else ~np.asarray(pinned, bool)
        inverse = np.where(free, 1.0 / self.mass, 0.0)
        g = np.asarray(gravity, np.float64)
        f = np.zeros_like(x)
        energies = np.empty(steps)
        for k in range(steps):
            energies[k] = self.forces(x, f)
            kick_drift(x, v, f, inverse, free, g, dt, damping)
        return energies


@nb.njit(cache=True, nogil=True)
def kick_drift(x, v, f, inverse, free, g, dt, damping):
    """One kick of the free vertices (forces ``f`` times their inverse masses, and gravity
    ``g``; the velocity then loses ``damping dt`` of itself), then every vertex's drift."""
    keep = 1.0 - damping * dt
    for i in range(x.shape[0]):
        if free[i]:
            for k in range(3):
                v[i, k] = (v[i, k] + dt * (f[i, k] * inverse[i] + g[k])) * keep
        for k in range(3):
            x[i, k] += dt * v[i, k]
