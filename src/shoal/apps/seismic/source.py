"""The source's time function and where it enters the staggered grid.

A force adds ``F w(t) / V`` to the momentum equation at the velocity node of each component
nearest the source (``V`` the cell's volume; in 2D its area, so the force is per metre along y).
A moment source adds ``-M w(t) / V`` to the stress rate: the diagonal at the normal-stress node
nearest the source, each off-diagonal component at its own shear node nearest the source, so
``w`` is the shape of the moment *rate*. An explosion is the moment ``amplitude x identity``.
A source put on the nodes it uses (as the verification tests do) keeps the scheme's order.
"""

from __future__ import annotations

import functools
import math

import numpy as np

#: Where each field lives in a cell, in cells from the normal-stress node (x, y, z).
OFFSETS = {"vx": (0.5, 0, 0), "vy": (0, 0.5, 0), "vz": (0, 0, 0.5),
           "sxx": (0, 0, 0), "syy": (0, 0, 0), "szz": (0, 0, 0),
           "sxy": (0.5, 0.5, 0), "sxz": (0.5, 0, 0.5), "syz": (0, 0.5, 0.5)}
#: The moment tensor's components in ``app.moment`` order, by the stress field they enter.
MOMENT_FIELDS = ("sxx", "syy", "szz", "sxy", "sxz", "syz")


def wavelet(kind: str, f0: float, t0: float, t) -> np.ndarray:
    """The source time function at times ``t`` (s), peak value 1 for a Ricker and a Gaussian.

    Parameters
    ----------
    kind : {"ricker", "gaussian", "dgaussian"}
        ``ricker``: ``(1 - 2 a) exp(-a)``; ``gaussian``: ``exp(-a)``; ``dgaussian``: the
        Gaussian's time derivative ``-2 pi^2 f0^2 (t - t0) exp(-a)`` (s^-1), where
        ``a = (pi f0 (t - t0))^2``.
    f0 : float
        Dominant frequency (Hz).
    t0 : float
        Centre (s).
    t : array_like
        Times (s).
    """
    tau = np.asarray(t, dtype=float) - t0
    a = (math.pi * f0 * tau) ** 2
    if kind == "ricker":
        return (1.0 - 2.0 * a) * np.exp(-a)
    if kind == "gaussian":
        return np.exp(-a)
    if kind == "dgaussian":
        return -2.0 * (math.pi * f0) ** 2 * tau * np.exp(-a)
    raise ValueError(f"unknown wavelet {kind!r}")


#: The fraction of its peak a wavelet's amplitude spectrum has fallen to at its highest
#: significant frequency: a Ricker's at 2.5 f0, the usual upper bound of its band (3.3%).
SIGNIFICANT = 2.5**2 * math.exp(1.0 - 2.5**2)


@functools.cache
def highest_frequency(kind: str) -> float:
    """The highest significant frequency of a wavelet, in units of its ``f0``.

    Above it the amplitude spectrum stays below :data:`SIGNIFICANT` of its peak. With
    ``x = f / f0`` the spectra are ``x^2 exp(-x^2)`` (Ricker), ``exp(-x^2)`` (Gaussian) and
    ``x exp(-x^2)`` (its derivative), so the bound is 2.5 for a Ricker, 1.85 for a Gaussian and
    2.25 for its derivative.

    Parameters
    ----------
    kind : {"ricker", "gaussian", "dgaussian"}
        The wavelet.

    Returns
    -------
    float
        ``f_max / f0``.
    """
    power = {"ricker": 2, "gaussian": 0, "dgaussian": 1}[kind]
    x = np.linspace(0.0, 5.0, 500_001)
    spectrum = x**power * np.exp(-x * x)
    return round(float(x[np.nonzero(spectrum >= SIGNIFICANT * spectrum.max())[0][-1]]), 3)


def nearest_node(field: str, position, dx: float, shape) -> tuple[int, int, int]:
    """Interior indices of ``field``'s node nearest ``position`` (x, y, z in metres), clipped
    into the grid ``shape``."""
    off = OFFSETS[field]
    return tuple(int(min(max(math.floor(p / dx - o + 0.5), 0), n - 1))
                 for p, o, n in zip(position, off, shape, strict=True))


def node_position(field: str, index, dx: float) -> tuple[float, float, float]:
    """Position (m) of ``field``'s node at interior ``index``."""
    return tuple((i + o) * dx for i, o in zip(index, OFFSETS[field], strict=True))
