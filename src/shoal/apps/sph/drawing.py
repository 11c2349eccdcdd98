"""How SPH runs draw a frame: the fluid's particles coloured by speed, walls in grey, seen
along z (the x-y plane) in 3D."""

from __future__ import annotations

import numpy as np

from ..particles import FLUID


def speed(frame: dict[str, np.ndarray]) -> np.ndarray:
    """Every particle's speed (m/s)."""
    return np.linalg.norm(frame["v"], axis=1)


def draw_particles(frame: dict[str, np.ndarray], ax, scale: tuple[float, float] | None = None):
    """Fluid coloured by speed on ``scale`` (default: the frame's fluid range), walls grey;
    returns the fluid's scatter for a colour bar."""
    fluid = frame["kind"] == FLUID
    x, v = frame["x"], speed(frame)
    if scale is None:
        scale = (float(v[fluid].min()), float(v[fluid].max())) if fluid.any() else (0.0, 1.0)
    ax.scatter(x[~fluid, 0], x[~fluid, 1], s=1.5, c="0.45", linewidths=0)
    mappable = ax.scatter(x[fluid, 0], x[fluid, 1], s=2.0, c=v[fluid], cmap="viridis", vmin=scale[0],
                          vmax=scale[1], linewidths=0)
    ax.set_aspect("equal")
    ax.set_xlabel("x (m)")
    ax.set_ylabel("y (m)")
    when = f"t = {float(frame['time']):.3f} s, " if "time" in frame else ""
    ax.set_title(f"{when}{len(x)} particles, speed (m/s)")
    return mappable
