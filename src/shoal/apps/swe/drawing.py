"""How a shallow-water run draws a frame: the surface above sea level on one uniform grid,
land grey, and every root block outlined by its level.

A frame holds ``eta`` (the surface on the uniform grid of the finest level present, or of a
coarser one so that it keeps at most :data:`MAX_CELLS` cells: 2 MB), ``level`` (one per root
block, indexed ``[bx, by]``), ``extent`` (``x0, x1, y0, y1`` in metres), ``sea_level`` and
``time``. ``eta`` comes first, so the report's common colour scale is the surface's range.
"""

from __future__ import annotations

import numpy as np

from .regrid import average4

MAX_CELLS = 2**18  # 512 x 512 float64 values: 2 MB a frame, finer than a 7-inch frame at 100 dpi
LAND = "0.6"  # dry cells


def frame(app, gathered: dict[str, np.ndarray], max_cells: int = MAX_CELLS) -> dict[str, np.ndarray]:
    """The arrays a picture of ``gathered`` is drawn from.

    Parameters
    ----------
    app : SWEApp
        The run's app.
    gathered : dict of str to ndarray
        What ``app.gather`` returned (or a ``final.npz`` of it).
    max_cells : int
        The most cells ``eta`` may hold: the grid is the finest level present, halved (``eta`` of
        :meth:`~shoal.apps.swe.app.SWEApp.uniform` at a coarser level) until it fits; below
        level 0, depth and bed are averaged 2 x 2 and a cell is dry when its mean depth is.

    Returns
    -------
    dict of str to ndarray
        ``eta`` (NaN where dry, axis 0 along x), ``level`` (``(nbx, nby)``), ``extent``,
        ``sea_level`` and ``time`` (NaN when ``gathered`` holds none).
    """
    p = app.p
    nbx, nby = app.grid
    level = int(gathered["level"].max())
    while level > 0 and nbx * nby * (p.block * 2**level) ** 2 > max_cells:
        level -= 1
    grid = app.uniform(gathered, level)
    eta = grid["eta"]
    h, b = grid["h"], grid["b"]
    while h.size > max_cells and h.shape[0] % 2 == 0 and h.shape[1] % 2 == 0:
        h, b = average4(h), average4(b)
        eta = np.where(h > p.dry, h + b, np.nan)
    x0, y0 = (float(o) for o in p.origin)
    return {"eta": eta, "level": gathered["level"].reshape(nbx, nby).copy(),
            "extent": np.array([x0, x0 + p.extent[0], y0, y0 + p.extent[1]], dtype=float),
            "sea_level": np.array(float(p.sea_level)), "time": np.array(float(gathered.get("time", np.nan)))}


def draw(frame: dict[str, np.ndarray], ax, scale: tuple[float, float] | None = None):
    """The surface above sea level on a diverging colour map centred on sea level, dry cells
    grey, and each root block outlined: finer levels darker and thicker.

    Parameters
    ----------
    frame : dict of str to ndarray
        What :func:`frame` returned.
    ax : matplotlib.axes.Axes
        Where to draw.
    scale : (float, float), optional
        The range of ``eta`` (metres, as the report's common scale over a run's frames); the
        colours span sea level plus or minus the larger distance from it. Default: the frame's own.

    Returns
    -------
    matplotlib.image.AxesImage
        The surface, for a colour bar.
    """
    from matplotlib import colormaps
    from matplotlib.collections import PolyCollection
    from matplotlib.lines import Line2D

    sea = float(frame["sea_level"])
    above = frame["eta"] - sea
    if scale is not None:
        top = max(abs(scale[0] - sea), abs(scale[1] - sea))
    else:
        finite = np.abs(above[np.isfinite(above)])
        top = float(finite.max()) if finite.size else 0.0
    top = top if top > 0 else 1.0  # a flat sea: any symmetric range draws it white
    x0, x1, y0, y1 = (float(e) for e in frame["extent"])
    cmap = colormaps["RdBu_r"].with_extremes(bad=LAND)
    mappable = ax.imshow(np.ma.masked_invalid(above).T, origin="lower", extent=(x0, x1, y0, y1), cmap=cmap,
                         vmin=-top, vmax=top, interpolation="nearest")

    level = frame["level"]
    nbx, nby = level.shape
    wx, wy = (x1 - x0) / nbx, (y1 - y0) / nby
    levels = np.unique(level)
    rank = np.searchsorted(levels, level)  # 0 for the coarsest level present
    shade = np.linspace(0.55, 0.0, len(levels)) if len(levels) > 1 else np.full(1, 0.55)  # grey to black
    width = np.linspace(0.6, 3.0, len(levels))
    order = np.argsort(level, axis=None, kind="stable")  # finer outlines drawn last, on top
    bx, by = np.unravel_index(order, level.shape)
    corners = np.array([[0, 0], [1, 0], [1, 1], [0, 1]], dtype=float)
    boxes = [(corners + [i, j]) * [wx, wy] + [x0, y0] for i, j in zip(bx, by, strict=True)]
    r = rank[bx, by]
    ax.add_collection(PolyCollection(boxes, facecolors="none", edgecolors=[str(s) for s in shade[r]],
                                     linewidths=width[r]))
    ax.legend(handles=[Line2D([], [], color=str(shade[k]), lw=width[k], label=f"level {lv}")
                       for k, lv in enumerate(levels)], loc="upper right", fontsize="small", title="root blocks",
              title_fontsize="small")
    ax.set_xlim(x0, x1)
    ax.set_ylim(y0, y1)
    ax.set_aspect("equal")
    ax.set_xlabel("x (m)")
    ax.set_ylabel("y (m)")
    t = float(frame["time"]) if "time" in frame else np.nan
    when = f"t = {t:.4g} s, " if np.isfinite(t) else ""
    ax.set_title(f"{when}surface above sea level (m), land grey")
    return mappable
