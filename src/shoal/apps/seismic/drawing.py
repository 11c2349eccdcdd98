"""How a seismic run draws a frame: a slice of the velocity wavefield with depth downwards, the
receivers, the source and the C-PML's inner edge; and its seismograms as a record section.

A frame (:func:`frame`) holds, as float32 (a picture needs no more):

- ``vz_section`` and ``speed_section``: the vertical x-z slice through the source (in 2D the whole
  x-z plane) of ``vz`` and of ``|v|``, indexed ``[i, k]``;
- in 3D also ``vz_surface`` and ``speed_surface``: the horizontal slice ``k = 0``, indexed ``[i, j]``;
- ``seismograms`` ``(nrec, nt, 3)`` (vx, vy, vz in m/s) up to the frame's time and their
  ``seismogram_times`` (s);

and as float64 or int: ``receivers`` ``(nrec, 3)`` and ``source`` ``(3,)`` (x, y, z in metres),
``section_y`` (the slice's y), ``spacing`` (the grid's cell side), ``stride`` (every stride-th
node is kept along each axis), ``shape`` (the grid's ``nx, ny, nz``), ``pml`` (C-PML cells at x-,
x+, y-, y+, top, bottom), ``interfaces`` (the depths of the layers' tops below the surface) and
``time``. ``vz_section`` comes first, so the report's common colour scale over a run's frames is
its: ``vz`` is signed (the app's layout says so), so that scale is symmetric about 0 and reaches
the 99.5th percentile of ``|vz|`` over every frame (:func:`shoal.graphics.drawing.robust_bound`),
not its largest value, which a few cells at the source would set.

Every value is the field at its own staggered node (no interpolation): ``vz`` sits half a cell
below the normal-stress node, and ``|v|`` combines vx, vy and vz of the same indices; the picture
places pixels at the normal-stress nodes, with vz's half-cell shift in depth.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ...graphics.drawing import robust_bound
from .source import OFFSETS, nearest_node

MAX_BYTES = 2 * 2**20  # a frame's size: 2 MB
SEISMOGRAM_BYTES = MAX_BYTES // 4  # at most this much of it for the seismograms (decimated in time beyond)
COMPONENTS = ("vx", "vy", "vz")
FIELDS = {"vz": "vz (m/s)", "speed": "|v| (m/s)"}
PLANES = ("section", "surface")


def frame(app, gathered: dict[str, np.ndarray], max_bytes: int = MAX_BYTES) -> dict[str, np.ndarray]:
    """The arrays a picture of ``gathered`` is drawn from, at most about ``max_bytes``.

    Parameters
    ----------
    app : SeismicApp
        The run's app (its parameters ``app.p``).
    gathered : dict of str to ndarray
        What ``app.gather`` returned (or a ``final.npz`` of it).
    max_bytes : int
        The frame's budget: seismograms take at most a quarter of it (every k-th sample beyond),
        and the slices keep every ``stride``-th node along each axis, ``stride`` the smallest
        that fits the rest.

    Returns
    -------
    dict of str to ndarray
        The slices, seismograms and geometry described in the module's docstring.
    """
    p = app.p
    nx, ny, nz = p.shape
    source = np.array(p.point(p.source_at), dtype=float)
    j = nearest_node("sxx", source, p.dx, p.shape)[1]  # the normal-stress plane nearest the source
    times, seis = seismograms_so_far(gathered)
    keep = max(1, -(-seis.size * 4 // (max_bytes // 4))) if seis.size else 1
    times, seis = times[::keep], seis[:, ::keep].astype(np.float32)
    planes = {"section": np.s_[:, j, :]} | ({"surface": np.s_[:, :, 0]} if p.ndim == 3 else {})
    sizes = [(nx, nz)] + ([(nx, ny)] if p.ndim == 3 else [])
    budget = max(max_bytes - seis.nbytes, 1)
    stride = 1
    while sum(-(-a // stride) * -(-b // stride) for a, b in sizes) * 2 * 4 > budget:
        stride += 1
    out = {}
    for plane, where in planes.items():
        v = [np.asarray(gathered[c][where][::stride, ::stride], dtype=float) for c in COMPONENTS]
        out[f"vz_{plane}"] = v[2].astype(np.float32)
        out[f"speed_{plane}"] = np.sqrt(v[0] ** 2 + v[1] ** 2 + v[2] ** 2).astype(np.float32)
    order = ["vz_section", "speed_section"] + (["vz_surface", "speed_surface"] if p.ndim == 3 else [])
    out = {name: out[name] for name in order}
    return out | {
        "seismograms": seis, "seismogram_times": times,
        "receivers": np.asarray(gathered["receivers"], dtype=float).reshape(-1, 3), "source": source,
        "section_y": np.array(j * p.dx), "spacing": np.array(float(p.dx)), "stride": np.array(stride),
        "shape": np.array(p.shape, dtype=np.int64), "pml": np.array(p.pml_widths(), dtype=np.int64),
        "interfaces": interfaces(p), "time": np.array(float(gathered.get("time", np.nan))),
    }


def interfaces(p) -> np.ndarray:
    """Depths (m) of the layers' tops below the surface and above the grid's bottom."""
    tops = np.array([float(layer[0]) for layer in p.layers[1:]])
    return tops[tops < p.extent[2]]


def is_2d(arrays: dict[str, np.ndarray]) -> bool:
    """Whether a frame, a gathered state or a seismograms file is of a 2D run (the x-z plane)."""
    if "shape" in arrays:
        return int(np.asarray(arrays["shape"])[1]) == 1
    if "vy" in arrays:
        return np.shape(arrays["vy"])[1] == 1
    return int(arrays.get("ndim", 3)) == 2


def offsets(arrays: dict[str, np.ndarray]) -> np.ndarray | None:
    """Each receiver's horizontal offset from the source (m): along x in 2D (signed), the
    distance in 3D; ``None`` without the source's position."""
    if "source" not in arrays:
        return None
    rec = np.asarray(arrays["receivers"], dtype=float).reshape(-1, 3)
    d = rec[:, :2] - np.asarray(arrays["source"], dtype=float)[:2]
    return d[:, 0] if is_2d(arrays) else np.hypot(d[:, 0], d[:, 1])


def seismograms_so_far(gathered: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The samples a gathered state's seismograms have reached, and their times.

    Parameters
    ----------
    gathered : dict of str to ndarray
        What ``app.gather`` returned: ``seismograms`` ``(nrec, steps + 1, 3)`` (NaN where not
        yet reached), ``time`` and ``dt``; or a frame (``seismograms`` and ``seismogram_times``).

    Returns
    -------
    times : ndarray, shape (nt,)
        ``t_n = n dt`` (s) for ``n = 0 .. time / dt``.
    seismograms : ndarray, shape (nrec, nt, 3)
        vx, vy, vz (m/s) at those times.
    """
    seis = np.asarray(gathered["seismograms"])
    if "seismogram_times" in gathered:
        return np.asarray(gathered["seismogram_times"], dtype=float), seis
    dt = float(gathered["dt"])
    n = min(int(round(float(gathered["time"]) / dt)) + 1, seis.shape[1])
    return np.arange(n) * dt, seis[:, :n]


def draw(frame: dict[str, np.ndarray], ax, scale: tuple[float, float] | None = None, *, field: str = "vz",
         plane: str = "section"):
    """A slice of the wavefield: depth downwards, metres on the axes, receivers (triangles),
    the source (star) and the C-PML's inner edge (dashed) marked.

    Parameters
    ----------
    frame : dict of str to ndarray
        What :func:`frame` returned.
    ax : matplotlib.axes.Axes
        Where to draw.
    scale : (float, float), optional
        The range of the drawn field (m/s; the report's common scale over a run's frames). ``vz``
        is drawn on a diverging map symmetric about 0, plus or minus the larger bound's
        magnitude; ``speed`` from 0 to the upper bound. Default: the frame's own robust range,
        up to the 99.5th percentile of the field's magnitude
        (:func:`shoal.graphics.drawing.robust_bound`): the few cells above it saturate.
    field : {"vz", "speed"}
        The vertical velocity or the speed ``|v|``.
    plane : {"section", "surface"}
        The vertical x-z slice through the source, or (3D) the surface ``z = 0`` seen from above.

    Returns
    -------
    matplotlib.image.AxesImage
        The slice, for a colour bar.
    """
    values = frame[f"{field}_{plane}"]
    top = max(abs(float(scale[0])), abs(float(scale[1]))) if scale is not None else robust_bound(values)
    top = top if top > 0 else 1.0  # a wavefield at rest: any range draws it blank
    dx, stride = float(frame["spacing"]), int(frame["stride"])
    h = dx * stride
    nx, ny, nz = (int(n) for n in frame["shape"])
    # pixels centred on the kept nodes; vz sits half a cell deeper than the normal-stress node
    shift = OFFSETS["vz"][2] * dx if field == "vz" and plane == "section" else 0.0
    n0, n1 = values.shape
    extent = (-h / 2, (n0 - 0.5) * h, shift - h / 2, shift + (n1 - 0.5) * h)
    if field == "vz":
        mappable = ax.imshow(values.T, origin="lower", extent=extent, cmap="RdBu_r", vmin=-top, vmax=top,
                             interpolation="nearest")
    else:
        mappable = ax.imshow(values.T, origin="lower", extent=extent, cmap="magma", vmin=0.0, vmax=top,
                             interpolation="nearest")
    w = frame["pml"]
    lx, ly, lz = ((n - 1) * dx for n in (nx, ny, nz))
    rec, src = frame["receivers"], frame["source"]
    if plane == "section":
        inner = (w[0] * dx, lx - w[1] * dx, w[4] * dx, lz - w[5] * dx)
        across = (rec[:, 0], rec[:, 2]), (src[0], src[2])
        ax.set_ylim(extent[3], extent[2])  # depth increases downwards
        ax.set_ylabel("depth z (m)")
        where = f"x-z slice at y = {float(frame['section_y']):.6g} m" if ny > 1 else "x-z plane"
    else:
        inner = (w[0] * dx, lx - w[1] * dx, w[2] * dx, ly - w[3] * dx)
        across = (rec[:, 0], rec[:, 1]), (src[0], src[1])
        ax.set_ylim(extent[2], extent[3])
        ax.set_ylabel("y (m)")
        where = "surface z = 0"
    x0, x1, z0, z1 = inner
    ax.plot([x0, x1, x1, x0, x0], [z0, z0, z1, z1, z0], ls="--", lw=0.8, color="0.3", label="C-PML inner edge")
    if plane == "section":
        for k, depth in enumerate(np.asarray(frame.get("interfaces", ()), dtype=float)):
            ax.plot([extent[0], extent[1]], [depth, depth], ls=":", lw=0.9, color="0.15",
                    label="layer interfaces" if k == 0 else None)
    (rx, rz), (sx, sz) = across
    if len(rx):
        ax.plot(rx, rz, ls="none", marker="v", ms=6, mfc="white", mec="black", clip_on=False, label="receivers")
    ax.plot([sx], [sz], ls="none", marker="*", ms=12, mfc="gold", mec="black", clip_on=False, label="source")
    ax.set_xlim(extent[0], extent[1])
    ax.set_aspect("equal")
    # coordinates stay in metres; a domain of tens of kilometres is labelled in km
    unit = "km" if max(lx, ly, lz) >= 20e3 else "m"
    if unit == "km":
        from matplotlib.ticker import FuncFormatter

        for axis in (ax.xaxis, ax.yaxis):
            axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v / 1000:g}"))
        ax.set_ylabel(ax.get_ylabel().replace("(m)", "(km)"))
        where = where.replace(f"{float(frame['section_y']):.6g} m", f"{float(frame['section_y']) / 1000:.6g} km")
    ax.set_xlabel(f"x ({unit})")
    t = float(frame["time"]) if "time" in frame else np.nan
    when = f"t = {t:.4g} s, " if np.isfinite(t) else ""
    ax.set_title(f"{when}{FIELDS[field]}, {where}", pad=10)  # clear of the receivers on the surface
    ax.legend(loc="lower right", fontsize="x-small")
    return mappable


def seismogram_figure(gathered_or_frame: dict[str, np.ndarray]):
    """Every receiver's velocity components against time: one panel per component (vx, vy and
    vz; vx and vz in 2D, where vy is zero), one trace per receiver offset by its number
    (receiver 0 on top) and labelled by its horizontal offset from the source, all on one
    amplitude scale so that amplitudes compare across receivers and components.

    Parameters
    ----------
    gathered_or_frame : dict of str to ndarray
        What ``app.gather`` or :func:`frame` returned (the samples reached so far are drawn).

    Returns
    -------
    matplotlib.figure.Figure
        On its own Agg canvas; the title gives the velocity one trace spacing stands for.
    """
    from ...graphics.canvas import new_figure

    times, seis = seismograms_so_far(gathered_or_frame)
    seis = np.asarray(seis, dtype=float)
    nrec = seis.shape[0]
    components = (0, 2) if is_2d(gathered_or_frame) else (0, 1, 2)
    shown = seis[:, :, components]
    peak = float(np.nanmax(np.abs(shown))) if shown.size else 0.0
    gain = 0.45 / peak if peak > 0 else 1.0  # the largest swing spans just under one trace spacing
    fig = new_figure(3.0 * len(components), min(3.0 + 0.3 * nrec, 14.0))
    axes = fig.subplots(1, len(components), sharey=True)
    for ax, c in zip(axes, components, strict=True):
        for r in range(nrec):
            ax.plot(times, r + gain * seis[r, :, c], lw=0.7, color="k")
        ax.set_title(COMPONENTS[c])
        ax.set_xlabel("time (s)")
        if len(times) > 1:
            ax.set_xlim(times[0], times[-1])
    axes[0].set_ylim(max(nrec, 1) - 0.5, -0.5)
    offset = offsets(gathered_or_frame)
    if offset is None:
        axes[0].set_ylabel("receiver")
        axes[0].yaxis.get_major_locator().set_params(integer=True)
    else:
        axes[0].set_yticks(range(nrec), [f"{d / 1000:.3g}" for d in offset])
        axes[0].set_ylabel("offset along x from the source (km)" if is_2d(gathered_or_frame)
                           else "distance from the source (km)")
    fig.suptitle(f"seismograms: one trace spacing = {1 / gain if peak > 0 else 0.0:.3g} m/s")
    return fig


def draw_seismograms(gathered_or_frame: dict[str, np.ndarray], path: str | Path) -> Path:
    """:func:`seismogram_figure` as a PNG.

    Parameters
    ----------
    gathered_or_frame : dict of str to ndarray
        What ``app.gather`` or :func:`frame` returned.
    path : str or Path
        The PNG.

    Returns
    -------
    Path
        ``path``.
    """
    from ...graphics.canvas import save_figure

    return save_figure(seismogram_figure(gathered_or_frame), Path(path), dpi=100)
