"""Reference data and measures for checking SPH runs against experiments."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.spatial import cKDTree

from ..particles import FLUID

GRAVITY = 9.81  # m/s^2

# Martin & Moyce (1952), collapse of a water column of width a and height 2a (n^2 = 2):
# surge-front position Z = z / a against T = t sqrt(2 g / a).
MARTIN_MOYCE = np.array([
    [0.41, 1.11], [0.84, 1.22], [1.19, 1.44], [1.43, 1.67], [1.63, 1.89], [1.83, 2.11],
    [1.98, 2.33], [2.20, 2.56], [2.32, 2.78], [2.51, 3.00], [2.65, 3.22], [2.83, 3.44],
    [2.98, 3.67], [3.11, 3.89], [3.33, 4.11],
])


def surge_front(x: np.ndarray, kind: np.ndarray, dx: float, floor: float = 0.0) -> float:
    """Leading edge of the fluid along the floor, ignoring droplets ahead of it.

    The front is the farthest fluid particle within 5 dx of the floor that has at least six
    fluid neighbours within 2 dx: the body of the surge, not a lone particle.
    """
    fluid = x[kind == FLUID]
    near_floor = fluid[fluid[:, 1] < floor + 5 * dx]
    if len(near_floor) == 0:
        return float("nan")
    counts = cKDTree(fluid).query_ball_point(near_floor, 2 * dx, return_length=True) - 1
    body = near_floor[counts >= 6]
    return float(body[:, 0].max()) if len(body) else float("nan")


@dataclass
class FrontAgreement:
    """How a dam break's surge front compares with Martin & Moyce's points.

    Attributes
    ----------
    points : int
        Martin & Moyce's points.
    reached : int
        Those the run reaches: inside its simulated time and in front of the far wall.
    worst : float
        Largest ``|Z_run - Z_experiment| / Z_experiment`` over the points reached (NaN if none).
    wall : float
        The far wall's position, ``Z = tank / a``.
    """

    points: int
    reached: int
    worst: float
    wall: float


def front_history(frames, width: float, dx: float) -> tuple[np.ndarray, np.ndarray]:
    """``(T, Z)``: the surge front of each frame (dicts with ``time``, ``x``, ``kind``) in
    Martin & Moyce's units, ``T = t sqrt(2 g / a)`` and ``Z = front / a`` for a column of width ``a``."""
    T = np.array([float(f["time"]) * np.sqrt(2 * GRAVITY / width) for f in frames])
    Z = np.array([surge_front(f["x"], f["kind"], dx) / width for f in frames])
    return T, Z


def martin_moyce_agreement(T: np.ndarray, Z: np.ndarray, tank: float, width: float = 1.0) -> FrontAgreement:
    """Compare a front history with every one of Martin & Moyce's points the run reaches."""
    wall = tank / width
    ref_T, ref_Z = MARTIN_MOYCE.T
    ok = np.isfinite(Z)
    T, Z = T[ok], Z[ok]
    reach = (ref_T >= T.min()) & (ref_T <= T.max()) & (ref_Z < wall) if len(T) else np.zeros(len(ref_T), bool)
    if not reach.any():
        return FrontAgreement(len(ref_T), 0, float("nan"), wall)
    run_Z = np.interp(ref_T[reach], T, Z)
    worst = float(np.max(np.abs(run_Z - ref_Z[reach]) / ref_Z[reach]))
    return FrontAgreement(len(ref_T), int(reach.sum()), worst, wall)
