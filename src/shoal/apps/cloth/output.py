"""What a cloth run leaves: frames of the mesh, a picture, and its windows over time.

- :func:`write_mesh_frame`: the mesh as VTK poly data (triangles, with each vertex's speed), one
  file per frame listed in a ParaView time series (``series.pvd``);
- :func:`picture`: the mesh and its obstacles drawn in 3D;
- :func:`write_windows` and :func:`plot_windows`: per kept collision window, its rollbacks,
  pairs and layers in contact, least gap and the time spent integrating and detecting, as a
  CSV table and as a report figure (the contact-mechanics paper's Figs. 1, 9 and 10 in kind).
"""

from __future__ import annotations

import csv
from dataclasses import asdict
from pathlib import Path

import numpy as np

from ...files import atomic_write
from ...graphics.canvas import new_figure, save_figure
from ...graphics.vtk import add_to_series, write_frame
from .acm import ContactCloth, WindowLog

SERIES = "series.pvd"


def write_mesh_frame(folder: str | Path, cloth: ContactCloth, x: np.ndarray, v: np.ndarray) -> Path:
    """The cloth at its current time as ``folder/cloth-<window>.vtp``, listed in
    ``folder/series.pvd``; the file written.

    Parameters
    ----------
    folder : str or Path
        Made if missing.
    cloth : ContactCloth
        The cloth (its surface and time).
    x, v : ndarray, shape (n, 3)
        Positions (m) and velocities (m/s).
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    frame = {"x": x, "triangles": cloth.model.surface.triangles, "speed": np.linalg.norm(v, axis=1)}
    path = write_frame(folder / f"cloth-{cloth.windows:07d}", frame, cloth.time)
    add_to_series(folder / SERIES, cloth.time, path)
    return path


def picture(path: str | Path, cloth: ContactCloth, x: np.ndarray, title: str = "", time: float | None = None) -> Path:
    """The mesh (shaded by height) and the obstacles at the cloth's time, drawn in 3D.

    Parameters
    ----------
    path : str or Path
        A PNG file.
    cloth : ContactCloth
        The cloth (its surface, obstacles and time).
    x : ndarray, shape (n, 3)
        Positions, m.
    title : str
        Above the picture (default: the time).
    time : float, optional
        When ``x`` is, s (default: the cloth's own time).
    """
    time = cloth.time if time is None else time
    fig = new_figure(6.0, 5.0)
    ax = fig.add_subplot(projection="3d")
    ax.plot_trisurf(x[:, 0], x[:, 1], x[:, 2], triangles=cloth.model.surface.triangles, cmap="viridis",
                    linewidth=0.1, edgecolor=(0, 0, 0, 0.15), antialiased=True)
    u, w = np.meshgrid(np.linspace(0, 2 * np.pi, 24), np.linspace(0, np.pi, 12))
    for obstacle in cloth.obstacles:
        (a, b) = obstacle.ends(time)
        r = obstacle.radius
        if np.allclose(a, b):
            ax.plot_wireframe(a[0] + r * np.cos(u) * np.sin(w), a[1] + r * np.sin(u) * np.sin(w),
                              a[2] + r * np.cos(w), color="0.5", linewidth=0.4)
        else:
            ax.plot(*np.transpose([a, b]), color="0.4", linewidth=3)
    span = np.ptp(x, axis=0).max() / 2
    middle = (x.max(axis=0) + x.min(axis=0)) / 2
    for set_lim, c in zip((ax.set_xlim, ax.set_ylim, ax.set_zlim), middle, strict=True):
        set_lim(c - span, c + span)
    ax.set_xlabel("x (m)")
    ax.set_ylabel("y (m)")
    ax.set_zlabel("z (m)")
    ax.set_title(title or f"t = {time:.3f} s")
    return save_figure(fig, path)


def write_windows(path: str | Path, log: WindowLog) -> Path:
    """The log as CSV, one row per kept window (columns: the log's fields that it holds).

    Parameters
    ----------
    path : str or Path
        The CSV file, written atomically.
    log : WindowLog
        What the windows saw.
    """
    columns = {name: values for name, values in asdict(log).items() if len(values) == len(log.time)}
    with atomic_write(Path(path), "w") as fh:
        out = csv.writer(fh)
        out.writerow(columns)
        out.writerows(zip(*columns.values(), strict=True))
    return Path(path)


def plot_windows(path: str | Path, log: WindowLog, title: str = "") -> Path:
    """The windows over time: pairs and layers in contact; rollbacks and crossings; least gap; seconds per
    window spent integrating and detecting (when the log has them).

    Parameters
    ----------
    path : str or Path
        A PNG file.
    log : WindowLog
        What the windows saw.
    title : str
        Above the figure.
    """
    t = np.asarray(log.time)
    timed = len(log.forces_s) == len(t) > 0  # (a run on tiles times its phases in the trace instead)
    fig = new_figure(7.0, 8.0 if timed else 6.2)
    axes = fig.subplots(4 if timed else 3, 1, sharex=True)
    axes[0].plot(t, log.pairs, label="pairs in contact")
    axes[0].plot(t, log.layers, label="active layers")
    axes[0].legend(loc="upper left", fontsize="small")
    axes[1].plot(t, log.rollbacks, drawstyle="steps-mid", color="C3", label="rollbacks")
    if len(log.intersections) == len(t):
        axes[1].plot(t, log.intersections, drawstyle="steps-mid", color="k", label="edges crossing a triangle")
        axes[1].legend(loc="upper left", fontsize="small")
    axes[1].set_ylabel("per window")
    gap = np.asarray(log.min_gap) * 1e3
    axes[2].plot(t, np.where(np.isfinite(gap), gap, np.nan), color="C2")
    axes[2].set_ylabel("least gap (mm)")
    if timed:
        axes[3].stackplot(t, np.asarray(log.forces_s) * 1e3, np.asarray(log.detection_s) * 1e3,
                          labels=("integration", "detection"), alpha=0.8)
        axes[3].set_ylabel("ms per window")
        axes[3].legend(loc="upper left", fontsize="small")
    axes[-1].set_xlabel("simulated time (s)")
    if title:
        axes[0].set_title(title)
    return save_figure(fig, path)
