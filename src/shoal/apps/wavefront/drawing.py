"""How a wavefront run draws a frame: the arrival time over the domain, its contours, the band
and the sources.

A frame (:func:`frame`) holds ``arrival`` (seconds, NaN where the front has not been) and
``state`` (the node states) on the node grid, axis 0 along x; ``extent`` (``x0, x1, y0, y1``
in metres); ``sources`` (``x, y, z`` of each in turn, m: flat, so that the grids are the
frame's only arrays of two or three axes, as ParaView's conversion wants) and ``time``. A 3D run's frame keeps the whole
grid (what ParaView opens); the picture is its middle slice across z.
"""

from __future__ import annotations

import numpy as np

from .kernels import NARROWBAND, UNSET


def frame(app, gathered: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The arrays a picture of ``gathered`` is drawn from.

    Parameters
    ----------
    app : WavefrontApp
        The run's app.
    gathered : dict of str to ndarray
        What ``app.gather`` returned (or a ``final.npz`` of it).
    """
    arrival = np.where(gathered["arrival"] < UNSET, gathered["arrival"], np.nan).astype(np.float32)
    p = app.p
    x0, y0 = (float(o) for o in p.origin[:2])
    return {"arrival": arrival, "state": gathered["state"].astype(np.int8),
            "extent": np.array([x0, x0 + p.extent[0], y0, y0 + p.extent[1]], dtype=float),
            "sources": app.centres.ravel().copy(), "time": np.array(float(gathered.get("time", np.nan)))}


def draw(frame: dict[str, np.ndarray], ax, scale: tuple[float, float] | None = None):
    """The arrival time on a sequential colour map (white where the front has not been), its
    contours, the band's nodes in black and the sources as crosses.

    Parameters
    ----------
    frame : dict of str to ndarray
        What :func:`frame` returned.
    ax : matplotlib.axes.Axes
        Where to draw.
    scale : (float, float), optional
        The range of arrival times (s) the colours span; default the frame's own.

    Returns
    -------
    matplotlib.image.AxesImage
        The arrival time, for a colour bar.
    """
    from matplotlib import colormaps

    arrival, state = frame["arrival"], frame["state"]
    title = "arrival time (s)"
    if arrival.ndim == 3:
        k = arrival.shape[2] // 2
        arrival, state = arrival[:, :, k], state[:, :, k]
        title += f", middle slice (node {k} along z)"
    finite = arrival[np.isfinite(arrival)]
    lo, hi = scale if scale is not None else ((float(finite.min()), float(finite.max())) if finite.size else (0, 1))
    hi = hi if hi > lo else lo + 1.0
    x0, x1, y0, y1 = (float(e) for e in frame["extent"])
    cmap = colormaps["viridis"].with_extremes(bad="white")
    mappable = ax.imshow(np.ma.masked_invalid(arrival).T, origin="lower", extent=(x0, x1, y0, y1), cmap=cmap,
                         vmin=lo, vmax=hi, interpolation="nearest")
    nx, ny = arrival.shape
    xs, ys = np.linspace(x0, x1, nx), np.linspace(y0, y1, ny)
    if finite.size and np.ptp(finite) > 0 and min(nx, ny) > 2:
        ax.contour(xs, ys, np.ma.masked_invalid(arrival).T, levels=np.linspace(lo, hi, 9)[1:-1], colors="white",
                   linewidths=0.6)
    bi, bj = np.nonzero(state == NARROWBAND)
    if len(bi):
        ax.plot(xs[bi], ys[bj], ",", color="black")
    src = frame["sources"].reshape(-1, 3)
    ax.plot(src[:, 0], src[:, 1], "x", color="red", markersize=6)
    ax.set_xlim(x0, x1)
    ax.set_ylim(y0, y1)
    ax.set_aspect("equal")
    ax.set_xlabel("x (m)")
    ax.set_ylabel("y (m)")
    t = float(frame["time"]) if "time" in frame else np.nan
    ax.set_title((f"t = {t:.4g} s, " if np.isfinite(t) else "") + title)
    return mappable
