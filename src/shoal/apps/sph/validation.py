"""Reference data and measures for checking SPH runs against experiments."""

from __future__ import annotations

import numpy as np
from scipy.spatial import cKDTree

from .particles import FLUID

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
