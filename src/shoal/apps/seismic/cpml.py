"""C-PML profiles (Komatitsch & Martin 2007, Geophysics 72(5), SM155).

In a layer of width ``L``, at depth ``s`` into it (0 at its inner edge, ``L`` at the outer),

* damping ``d(s) = d0 (s / L)^2`` with ``d0 = -3 vp_max ln(R) / (2 L)`` (quadratic profile, target
  reflection coefficient ``R``, ``app.reflection`` = 1e-3 by default);
* stretch ``kappa(s) = 1 + (kappa_max - 1) (s / L)^2`` (``app.kappa_max``, 1 by default);
* frequency shift ``alpha(s) = alpha_max (1 - s / L)`` with ``alpha_max = pi f0``;

and the memory variable of a derivative ``D`` obeys ``psi <- b psi + a D`` with
``b = exp(-(d / kappa + alpha) dt)``, ``a = d (b - 1) / (kappa (d + kappa alpha))``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Profile:
    """One axis' profiles at its integer and half nodes, by global index (``kinv`` is
    ``1 / kappa - 1``), and the global index ranges of its two layers (empty when absent)."""

    kinv: np.ndarray
    a: np.ndarray
    b: np.ndarray
    kinv_h: np.ndarray
    a_h: np.ndarray
    b_h: np.ndarray
    boxes: tuple[tuple[int, int], ...]


def profile(n: int, lo: int, hi: int, dx: float, dt: float, vp_max: float, f0: float, reflection: float,
            kappa_max: float, dtype) -> Profile:
    """Profiles of an axis of ``n`` nodes with a layer of ``lo`` cells at its start and ``hi``
    at its end (0: none)."""

    def depth(x):
        s = np.zeros_like(x)
        if lo:
            s = np.maximum(s, lo * dx - x)
        if hi:
            s = np.maximum(s, x - (n - 1 - hi) * dx)
        return s

    def arrays(x):
        s = depth(x)
        width = np.where(x < 0.5 * (n - 1) * dx, lo, hi) * dx
        r = np.clip(np.divide(s, width, out=np.zeros_like(s), where=width > 0), 0.0, 1.0)
        d0 = np.divide(-3.0 * vp_max * math.log(reflection), 2.0 * width, out=np.zeros_like(s), where=width > 0)
        d = d0 * r**2
        kappa = 1.0 + (kappa_max - 1.0) * r**2
        alpha = np.where(s > 0, math.pi * f0 * (1.0 - r), 0.0)
        b = np.exp(-(d / kappa + alpha) * dt)
        a = np.divide(d * (b - 1.0), kappa * (d + kappa * alpha), out=np.zeros_like(s), where=d > 0)
        return [np.ascontiguousarray(v, dtype=dtype) for v in (1.0 / kappa - 1.0, a, b)]

    x = np.arange(n) * dx
    boxes = ((0, lo),) * bool(lo) + ((n - 1 - hi, n),) * bool(hi)
    return Profile(*arrays(x), *arrays(x + 0.5 * dx), boxes)
