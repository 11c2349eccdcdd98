"""Numba kernels of 2D weakly compressible SPH (Monaghan 1992, 1994).

Cubic spline kernel with support 2h; Tait equation of state; continuity equation for the
density; momentum with Monaghan's artificial viscosity; thermal energy. Walls are fixed
particles whose density follows the continuity equation (dynamic boundary particles), so the
fluid feels them through pressure.

Every sum over neighbours runs cell by cell (in a fixed order of the 9 cells around a
particle) and, inside a cell, in increasing particle id: the order is the same for any
tiling, so results are bitwise identical.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

FLUID = 0


@nb.njit(cache=True, nogil=True, inline="always")
def pressure(rho, rho0, B, gamma):
    return B * ((rho / rho0) ** gamma - 1.0)


@nb.njit(cache=True, nogil=True, inline="always")
def sound_speed(rho, rho0, c0, gamma):
    return c0 * (rho / rho0) ** (0.5 * (gamma - 1.0))


@nb.njit(cache=True, nogil=True, inline="always")
def dw_dr(r, h, sigma):
    """Derivative of the cubic spline with support 2h (sigma = 10 / (7 pi h^2))."""
    q = r / h
    if q < 1.0:
        return sigma / h * (-3.0 * q + 2.25 * q * q)
    if q < 2.0:
        t = 2.0 - q
        return -0.75 * sigma / h * t * t
    return 0.0


@nb.njit(cache=True, nogil=True, error_model="numpy")
def equation_of_state(rho, rho0, c0, B, gamma, P, c, p_over_rho2):
    """Pressure, sound speed and P / rho^2 of every particle (once, not once per pair)."""
    for i in range(rho.shape[0]):
        P[i] = pressure(rho[i], rho0, B, gamma)
        c[i] = sound_speed(rho[i], rho0, c0, gamma)
        p_over_rho2[i] = P[i] / (rho[i] * rho[i])


@nb.njit(cache=True, nogil=True, error_model="numpy")
def rates(x, v, rho, m, kind, own, lidx, start, nly, h, rho0, c0, B, gamma, alpha, beta, gx, gy,
          acc, drho, de, mu):
    n = rho.shape[0]
    P = np.empty(n)
    c = np.empty(n)
    pr2 = np.empty(n)
    equation_of_state(rho, rho0, c0, B, gamma, P, c, pr2)
    _rates(x, v, rho, m, kind, own, lidx, start, nly, h, c, pr2, alpha, beta, gx, gy, acc, drho, de, mu)


@nb.njit(cache=True, nogil=True, error_model="numpy")
def _rates(x, v, rho, m, kind, own, lidx, start, nly, h, c, pr2, alpha, beta, gx, gy, acc, drho, de, mu):
    """Time derivatives of the particles listed in ``own`` (indices into the merged arrays).

    ``lidx`` holds each particle's cell in the tile's box widened by one cell, ``start`` the
    first particle of every such cell (particles sorted by cell, then id). Writes ``acc``,
    ``drho``, ``de`` and ``mu`` (one row per entry of ``own``); ``mu`` is the particle's largest
    viscous |mu_ij|, for its time-step limit.
    """
    sigma = 10.0 / (7.0 * math.pi * h * h)
    support2 = 4.0 * h * h
    eta2 = 0.01 * h * h
    for k in range(own.shape[0]):
        mu_max = 0.0
        i = own[k]
        xi, yi = x[i, 0], x[i, 1]
        vxi, vyi = v[i, 0], v[i, 1]
        rhoi = rho[i]
        pri = pr2[i]
        ci = c[i]
        fluid_i = kind[i] == FLUID
        ax = 0.0
        ay = 0.0
        dr = 0.0
        dei = 0.0
        cx, cy = lidx[i, 0], lidx[i, 1]
        for ox in range(-1, 2):
            for oy in range(-1, 2):
                cell = (cx + ox) * nly + (cy + oy)
                for j in range(start[cell], start[cell + 1]):
                    if j == i:
                        continue
                    if not fluid_i and kind[j] != FLUID:
                        continue  # walls do not act on walls
                    rx = xi - x[j, 0]
                    ry = yi - x[j, 1]
                    r2 = rx * rx + ry * ry
                    if r2 >= support2 or r2 == 0.0:
                        continue
                    r = math.sqrt(r2)
                    f = dw_dr(r, h, sigma) / r
                    gwx = f * rx
                    gwy = f * ry
                    vx = vxi - v[j, 0]
                    vy = vyi - v[j, 1]
                    vgw = vx * gwx + vy * gwy
                    dr += m[j] * vgw
                    if fluid_i:
                        vr = vx * rx + vy * ry
                        visc = 0.0
                        if vr < 0.0:
                            mu_ij = h * vr / (r2 + eta2)
                            if -mu_ij > mu_max:
                                mu_max = -mu_ij
                            cbar = 0.5 * (ci + c[j])
                            rbar = 0.5 * (rhoi + rho[j])
                            visc = (-alpha * cbar * mu_ij + beta * mu_ij * mu_ij) / rbar
                        coeff = m[j] * (pri + pr2[j] + visc)
                        ax -= coeff * gwx
                        ay -= coeff * gwy
                        dei += 0.5 * coeff * vgw
        if fluid_i:
            ax += gx
            ay += gy
        acc[k, 0] = ax
        acc[k, 1] = ay
        drho[k] = dr
        de[k] = dei
        mu[k] = mu_max


@nb.njit(cache=True, nogil=True, error_model="numpy")
def time_step(v, rho, acc, kind, mu, h, rho0, c0, gamma, cfl):
    """Largest stable step for these particles: Courant (with viscosity) and force limits."""
    dt = np.inf
    for k in range(kind.shape[0]):
        if kind[k] != FLUID:
            continue
        c = sound_speed(rho[k], rho0, c0, gamma)
        speed = math.sqrt(v[k, 0] * v[k, 0] + v[k, 1] * v[k, 1])
        dt = min(dt, cfl * h / (c + speed + mu[k]))
        a = math.sqrt(acc[k, 0] * acc[k, 0] + acc[k, 1] * acc[k, 1])
        if a > 0.0:
            dt = min(dt, cfl * math.sqrt(h / a))
    return dt


@nb.njit(cache=True, nogil=True, error_model="numpy")
def integrate(x, v, vh, rho, rhoh, e, kind, acc, drho, de, dt, first, rho0):
    """Leapfrog (Monaghan): half-step velocity and density kicked by the rates at step n,
    positions drifted with the half-step velocity, then full-step values predicted for the
    next rate evaluation. Density and velocity stay staggered, so sound waves stay stable.
    """
    kick = 0.5 * dt if first else dt
    for k in range(kind.shape[0]):
        rhoh[k] += kick * drho[k]
        if kind[k] == FLUID:
            vh[k, 0] += kick * acc[k, 0]
            vh[k, 1] += kick * acc[k, 1]
            x[k, 0] += dt * vh[k, 0]
            x[k, 1] += dt * vh[k, 1]
            v[k, 0] = vh[k, 0] + 0.5 * dt * acc[k, 0]
            v[k, 1] = vh[k, 1] + 0.5 * dt * acc[k, 1]
            e[k] += dt * de[k]
        elif rhoh[k] < rho0:
            rhoh[k] = rho0  # walls never pull on the fluid
        rho[k] = rhoh[k] + 0.5 * dt * drho[k]
        if kind[k] != FLUID and rho[k] < rho0:
            rho[k] = rho0
