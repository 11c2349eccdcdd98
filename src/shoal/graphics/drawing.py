"""The default picture of an app's frame: what :meth:`shoal.runtime.app.App.draw` does unless
an app draws itself.

Matplotlib is imported here only, and the caller's backend is left as it is.
"""

from __future__ import annotations

import numpy as np

#: The colour scale of a signed field (a wavefield, a surface) reaches this percentile of its
#: magnitude, not its largest value: a few cells at a source would wash out everything else.
ROBUST_PERCENTILE = 99.5


def frame_values(frame: dict[str, np.ndarray]) -> tuple[np.ndarray, str]:
    """The values the default picture colours by, and their label: particle speed when there
    are positions and velocities, else the first field on a grid."""
    if "x" in frame:
        if "v" in frame:
            return np.linalg.norm(frame["v"], axis=1), "speed (m/s)"
        return np.zeros(len(frame["x"])), ""
    name, field = _first_grid_field(frame)
    return field, name


def draw_arrays(frame: dict[str, np.ndarray], ax, scale: tuple[float, float] | None = None):
    """Draw ``frame`` on the axes ``ax``: points coloured by speed (x-y plane) when the frame
    has positions ``x``; else the first grid field as an image, the middle slice along z of a
    3D one. ``scale`` is the colour range (default the frame's own). Returns the mappable."""
    values, label = frame_values(frame)
    lo, hi = scale if scale is not None else (_finite_min(values), _finite_max(values))
    if "x" in frame:
        x = frame["x"]
        mappable = ax.scatter(x[:, 0], x[:, 1], s=2.0, c=values, cmap="viridis", vmin=lo, vmax=hi, linewidths=0)
        ax.set_aspect("equal")
        ax.set_xlabel("x (m)")
        ax.set_ylabel("y (m)")
    else:
        if values.ndim == 3:
            values = values[:, :, values.shape[2] // 2]
        mappable = ax.imshow(values.T, origin="lower", cmap="magma", vmin=lo, vmax=hi, interpolation="nearest")
        ax.set_xlabel("x cell")
        ax.set_ylabel("y cell")
    ax.set_title(label)
    return mappable


def robust_bound(values) -> float:
    """The bound ``m`` of a symmetric colour scale ``[-m, m]`` that a few extreme cells do not
    set: the :data:`ROBUST_PERCENTILE`-th percentile of ``|values|`` (finite ones).

    Parameters
    ----------
    values : array_like
        The field (any shape; NaN and infinities are left out).

    Returns
    -------
    float
        That percentile; the largest magnitude when the percentile is 0 (a field that is zero
        but in a few cells); 1.0 for a field at rest.
    """
    a = np.abs(np.asarray(values, dtype=float)).ravel()
    a = a[np.isfinite(a)]
    if not a.size:
        return 1.0
    top = float(np.percentile(a, ROBUST_PERCENTILE))
    top = top if top > 0 else float(a.max())
    return top if top > 0 else 1.0


def _first_grid_field(frame: dict[str, np.ndarray]) -> tuple[str, np.ndarray]:
    for name, a in frame.items():
        if a.ndim in (2, 3) and a.dtype.kind == "f":
            return name, a
    raise ValueError(f"the frame holds no positions and no 2D or 3D field (arrays: {', '.join(frame)})")


def _finite_min(values: np.ndarray) -> float:
    finite = values[np.isfinite(values)]
    return float(finite.min()) if finite.size else 0.0


def _finite_max(values: np.ndarray) -> float:
    finite = values[np.isfinite(values)]
    return float(finite.max()) if finite.size else 1.0
