"""The layered medium as per-level coefficients of the scheme, the time step, and whether the
grid resolves the source's shortest waves.

The medium varies with depth only, so every material coefficient is one value per z level,
already multiplied by ``dt / dx``: normal stresses and buoyancy of vx and vy at integer levels,
shear stresses sxz and syz and buoyancy of vz at half levels (the harmonic mean of the two
shear moduli, the arithmetic mean of the two densities). Levels run over the padded z axis.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...errors import ShoalError
from .kernels import C1, C2
from .params import SeismicParams
from .source import highest_frequency

#: Grid points per shortest wavelength a scheme needs to keep its dispersion small: about 5 for
#: the 4th-order staggered scheme (Levander 1988, Geophysics 53, 1425) and about 10 at 2nd
#: order (Alford, Kelly & Boore 1974, Geophysics 39, 834).
POINTS_NEEDED = {4: 5.0, 2: 10.0}


def stability_limit(p: SeismicParams) -> float:
    """The largest stable time step (s): ``dx / (vp_max sqrt(ndim) (|c1| + |c2|))``, the
    von Neumann limit of the staggered leapfrog scheme in the fastest layer."""
    vp, _, _ = p.medium(p.depths())
    stencil = abs(C1) + abs(C2) if p.order == 4 else 1.0
    return p.dx / (float(vp.max()) * math.sqrt(p.ndim) * stencil)


def time_step(p: SeismicParams) -> float:
    """``app.dt`` if given (refused above the stability limit), else ``app.cfl`` times the limit."""
    limit = stability_limit(p)
    if p.dt > 0:
        if p.dt > limit:
            raise ShoalError(f"app.dt = {p.dt:g} s is above the stability (CFL) limit {limit:.6g} s of the fastest "
                             f"layer at dx = {p.dx:g} m")
        return float(p.dt)
    return p.cfl * limit


def points_per_wavelength(p: SeismicParams) -> tuple[float, float, str, float, float]:
    """How many grid points the shortest wave of the run spans.

    The shortest wave is the slowest one of the medium (S; P where a layer is a fluid, ``vs = 0``)
    at the source's highest significant frequency (:func:`.source.highest_frequency`).

    Parameters
    ----------
    p : SeismicParams
        The run's parameters.

    Returns
    -------
    points : float
        ``v_min / (f_max dx)``.
    speed : float
        ``v_min`` (m/s).
    wave : str
        ``"S"`` or ``"P"``: which wave that speed is.
    depth : float
        Where the medium is slowest (m).
    f_max : float
        The highest significant frequency (Hz).
    """
    depth = p.depths()
    vp, vs, _ = p.medium(depth)
    slow = np.where(vs > 0, vs, vp)
    k = int(np.argmin(slow))
    f_max = highest_frequency(p.wavelet) * p.f0
    return float(slow[k]) / (f_max * p.dx), float(slow[k]), "S" if vs[k] > 0 else "P", float(depth[k]), f_max


def check_resolution(p: SeismicParams) -> float:
    """Refuse a source whose shortest waves the grid cannot resolve, in one line that says how
    many points per wavelength the grid gives, how many the scheme needs and what would do.

    Parameters
    ----------
    p : SeismicParams
        The run's parameters; ``app.points_per_wavelength`` (> 0) replaces the scheme's need
        (:data:`POINTS_NEEDED`).

    Returns
    -------
    float
        The points per wavelength the grid gives.
    """
    points, speed, wave, depth, f_max = points_per_wavelength(p)
    needed = p.points_per_wavelength or POINTS_NEEDED[p.order]
    if points < needed:
        ratio = highest_frequency(p.wavelet)
        raise ShoalError(
            f"app.f0 = {p.f0:g} Hz is too high for cells of {p.dx:g} m: the {p.wavelet} wavelet reaches "
            f"{f_max:.3g} Hz ({ratio:g} f0), where the slowest wave ({wave}, {speed:g} m/s at depth {depth:g} m) "
            f"spans {points:.2f} grid points per wavelength and the order-{p.order} scheme needs {needed:g}: "
            f"use app.f0 <= {speed / (needed * ratio * p.dx):.3g} Hz or cells of at most "
            f"{speed / (needed * f_max):.3g} m (app.scale >= {p.scale * needed / points:.3g}), "
            "or accept fewer with app.points_per_wavelength")
    return points


@dataclass(frozen=True)
class Coefficients:
    """Per-level coefficients (padded z levels), times ``dt / dx``; see the module docstring."""

    ca: np.ndarray  # (lambda + 2 mu): a normal stress from its own axis' derivative
    cb: np.ndarray  # lambda: from the other horizontal axis
    cc: np.ndarray  # lambda: sxx and syy from dvz/dz
    zh: np.ndarray  # lambda: szz from the horizontal derivatives
    zz: np.ndarray  # lambda + 2 mu: szz from dvz/dz
    m: np.ndarray  # mu at integer levels (sxy)
    mh: np.ndarray  # mu at half levels (sxz, syz)
    bx: np.ndarray  # 1 / rho at integer levels (vx, vy)
    bz: np.ndarray  # 1 / rho at half levels (vz)
    c1z: np.ndarray  # the stress update's z differences, by level
    c2z: np.ndarray
    c1: np.ndarray  # the constant coefficients, by level (for terms along x and y, and velocity's z)
    c2: np.ndarray
    rho: np.ndarray  # density at integer levels (kg/m^3)
    lam: np.ndarray  # Lame's lambda at integer levels (Pa)
    mu: np.ndarray  # shear modulus at integer levels (Pa)
    muh: np.ndarray  # shear modulus at half levels (Pa)


def coefficients(p: SeismicParams, dt: float, dtype) -> Coefficients:
    """The run's per-level coefficients. With a free surface (stress imaging at the first
    level of normal stresses), that level's normal stresses use the zero-traction condition
    (``szz = 0``, so ``dvz/dz = -lambda / (lambda + 2 mu) (dvx/dx + dvy/dy)``) and the
    z differences of the stress update fall back to second order in the two rows whose
    fourth-order stencil would reach above the surface."""
    g = p.order // 2
    nz = p.shape[2]
    z = (np.arange(nz + 2 * g) - g) * p.dx
    vp, vs, rho = p.medium(np.clip(z, 0.0, (nz - 1) * p.dx))
    mu = rho * vs**2
    lam = rho * vp**2 - 2.0 * mu
    lam2mu = lam + 2.0 * mu
    nxt = np.append(mu[1:], mu[-1])
    muh = np.where((mu > 0) & (nxt > 0), 2.0 * mu * nxt / np.where(mu + nxt > 0, mu + nxt, 1.0), 0.0)
    rho_h = 0.5 * (rho + np.append(rho[1:], rho[-1]))
    s = dt / p.dx
    ca, cb, cc, zh, zz = s * lam2mu, s * lam, s * lam, s * lam, s * lam2mu
    c1 = np.full(nz + 2 * g, C1 if p.order == 4 else 1.0)
    c2 = np.full(nz + 2 * g, C2 if p.order == 4 else 0.0)
    c1z, c2z = c1.copy(), c2.copy()
    if p.top == "free":
        ca, cb, cc, zh, zz = ca.copy(), cb.copy(), cc.copy(), zh.copy(), zz.copy()
        ca[g] = s * (lam2mu[g] - lam[g] ** 2 / lam2mu[g])
        cb[g] = s * (lam[g] - lam[g] ** 2 / lam2mu[g])
        cc[g] = zh[g] = zz[g] = 0.0
        if p.order == 4:
            c1z[g:g + 2], c2z[g:g + 2] = 1.0, 0.0
    cast = {name: np.ascontiguousarray(a, dtype=dtype) for name, a in
            dict(ca=ca, cb=cb, cc=cc, zh=zh, zz=zz, m=s * mu, mh=s * muh, bx=s / rho, bz=s / rho_h,
                 c1z=c1z, c2z=c2z, c1=c1, c2=c2).items()}
    return Coefficients(**cast, rho=rho, lam=lam, mu=mu, muh=muh)
