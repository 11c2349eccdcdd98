"""Pictures of particle runs: frames, contour views on the run's colour scales, an animation,
a ParaView time series, and the dam-break front against Martin & Moyce.

Figures are drawn on their own Agg canvases: importing or calling this module leaves the
caller's matplotlib backend alone. Colour scales are robust: pressure from 0 to the column's
hydrostatic ``rho0 g H`` when known, other quantities between the 1st and 99th percentiles
of the whole run, so one splash does not wash out every frame.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import matplotlib as mpl
import numpy as np
from matplotlib.animation import FFMpegWriter, PillowWriter
from scipy.interpolate import griddata
from scipy.spatial import cKDTree

from ..errors import ShoalError
from ..graphics.canvas import new_figure, save_figure

FLUID = 0
QUANTITIES = {"speed": "speed (m/s)", "rho": "density (kg/m³)", "p": "pressure (Pa)"}
MOVIE_WIDTH_PX = 960
MOVIE_FPS = 15


def load_frames(folder: Path) -> list[dict]:
    frames = []
    for path in sorted(folder.glob("state-*.npz")):
        with np.load(path) as z:
            frames.append({k: z[k] for k in z.files} | {"path": path})
    return frames


def _value(frame: dict, name: str) -> np.ndarray:
    if name == "speed":
        return np.linalg.norm(frame["v"], axis=1)
    return frame[name]


def global_ranges(frames: list[dict], pressure_top: float | None = None) -> dict[str, tuple[float, float]]:
    """One colour scale per quantity for the whole run (Vertanen §6.2), robust to outliers.

    Parameters
    ----------
    frames : list of dict
        The run's frames.
    pressure_top : float, optional
        The top of the pressure scale (the hydrostatic pressure at the column's foot, ``rho0 g H``);
        pressure then runs from 0 to it. Without it, the 1st to 99th percentile.
    """
    out = {}
    for q in QUANTITIES:
        vals = [_value(f, q)[f["kind"] == FLUID] for f in frames]
        vals = np.concatenate([v for v in vals if len(v)])
        lo, hi = np.percentile(vals, [1.0, 99.0])
        if q == "speed":
            lo = 0.0
        if q == "p" and pressure_top:
            lo, hi = 0.0, pressure_top
        out[q] = (float(lo), float(hi) if hi > lo else float(lo) + 1.0)
    return out


def axes_limits(frames):
    """Axes limits (lower corner, upper corner) that hold every particle of every frame, padded
    by 2%: particles move, so an animation's axes must not follow each frame."""
    x = np.concatenate([f["x"] for f in frames])
    pad = 0.02 * np.ptp(x, axis=0)
    return x.min(axis=0) - pad, x.max(axis=0) + pad


def draw_frame(app, frame, scale, limits, ax):
    """The app's picture of a frame, on the run's colour scale and, if given, axes limits."""
    ax.clear()
    mappable = app.draw(frame, ax, scale)
    if limits is not None:
        ax.set_xlim(limits[0][0], limits[1][0])
        ax.set_ylim(limits[0][1], limits[1][1])
    return mappable


def frame_pngs(app, frames, out: Path, ranges, every=1) -> list[Path]:
    limits = axes_limits(frames)
    paths = []
    fig = new_figure(8, 5)
    ax = fig.add_subplot()
    for k, frame in enumerate(frames):
        if k % every and k != len(frames) - 1:
            continue
        sc = draw_frame(app, frame, ranges["speed"], limits, ax)
        if k == 0:
            fig.colorbar(sc, ax=ax, label=QUANTITIES["speed"])
        p = out / f"{frame['path'].stem.replace('state', 'speed')}.png"
        save_figure(fig, p, dpi=90)
        paths.append(p)
    return paths


def ffmpeg() -> str | None:
    """An ffmpeg executable: the system's, or the one the ``imageio-ffmpeg`` wheel ships."""
    found = shutil.which("ffmpeg")
    if found:
        return found
    try:
        import imageio_ffmpeg
    except ImportError:
        return None
    return imageio_ffmpeg.get_ffmpeg_exe()


def animation(app, frames, folder: Path, scale, limits=None, label: str = "",
              width_px: int = MOVIE_WIDTH_PX, fmt: str | None = None) -> Path:
    """Every frame drawn by the app on one colour ``scale``, ``width_px`` wide:
    ``animation.mp4`` (H.264) when ffmpeg is at hand, else ``animation.gif``; ``fmt`` ("gif" or
    "mp4") chooses instead. ``limits`` fixes the axes (particles move; default: what the first
    frame's picture spans)."""
    width_in, dpi = 10.0, width_px / 10.0
    fig = new_figure(width_in, 6.0)
    ax = fig.add_subplot()
    sc = draw_frame(app, frames[0], scale, limits, ax)
    (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
    height_px = 2 * round(dpi * max(3.0, width_in * 0.85 * abs(y1 - y0) / abs(x1 - x0) + 0.8) / 2)  # H.264: even
    fig.set_size_inches(width_in, height_px / dpi)
    fig.colorbar(sc, ax=ax, label=label)
    exe = ffmpeg()
    if fmt == "mp4" and exe is None:
        raise ShoalError("an MP4 needs ffmpeg, which is not installed here (pip install imageio-ffmpeg)")
    if exe is not None and fmt != "gif":
        path, writer = folder / "animation.mp4", FFMpegWriter(fps=MOVIE_FPS, codec="libx264",
                                                              extra_args=["-pix_fmt", "yuv420p"])
    else:
        path, writer = folder / "animation.gif", PillowWriter(fps=MOVIE_FPS)
    with mpl.rc_context({"animation.ffmpeg_path": exe or "ffmpeg"}), writer.saving(fig, str(path), dpi=dpi):
        for frame in frames:
            draw_frame(app, frame, scale, limits, ax)
            writer.grab_frame()
    return path


def contour_views(frame, path: Path, ranges, spacing: float) -> Path:
    """Density, pressure and speed interpolated onto a grid, each on the run's global scale."""
    fluid = frame["kind"] == FLUID
    x = frame["x"][fluid]
    lo, hi = x.min(axis=0), x.max(axis=0)
    gx, gy = np.meshgrid(np.arange(lo[0], hi[0], spacing), np.arange(lo[1], hi[1], spacing), indexing="ij")
    grid_pts = np.stack([gx.ravel(), gy.ravel()], axis=1)
    empty = cKDTree(x).query(grid_pts, k=1)[0] > 1.5 * spacing  # no fluid here: leave blank
    fig = new_figure(15, 4.2)
    axes = fig.subplots(1, 3)
    for ax, q in zip(axes, ("rho", "p", "speed"), strict=True):
        val = griddata(x, _value(frame, q)[fluid], grid_pts, method="linear")
        val[empty] = np.nan
        cs = ax.contourf(gx, gy, val.reshape(gx.shape), levels=np.linspace(*ranges[q], 16), cmap="viridis",
                         extend="both")
        ax.set_aspect("equal")
        ax.set_title(QUANTITIES[q])
        ax.set_xlabel("x (m)")
        ax.set_ylabel("y (m)")
        fig.colorbar(cs, ax=ax, shrink=0.8, label=QUANTITIES[q])
    fig.suptitle(f"t = {float(frame['time']):.3f} s (colour scales: the whole run's)")
    save_figure(fig, path, dpi=90)
    return path


def dam_break_front(frames, path: Path, width: float, dx: float, tank: float) -> Path:
    """The surge front against time, with Martin & Moyce's points and the far wall."""
    from ..apps.sph.validation import MARTIN_MOYCE, front_history, martin_moyce_agreement

    T, Z = front_history(frames, width, dx)
    agreement = martin_moyce_agreement(T, Z, tank, width)
    fig = new_figure(6.5, 4.2)
    ax = fig.add_subplot()
    ax.plot(T, Z, "-", label="shoal SPH")
    ref_T, ref_Z = MARTIN_MOYCE.T
    ax.errorbar(ref_T, ref_Z, yerr=0.1 * ref_Z, fmt="o", capsize=2, label="Martin & Moyce (1952), ±10%")
    ax.axhline(agreement.wall, color="0.5", lw=1, ls="--", label="far wall")
    ax.set_xlabel("T = t √(2g/a)  (dimensionless time)")
    ax.set_ylabel("Z = front / a  (dimensionless)")
    worst = f"; largest difference {agreement.worst:.0%}" if agreement.reached else ""
    ax.set_title(f"Dam-break surge front: {agreement.reached} of {agreement.points} points reached{worst}",
                 fontsize=10)
    ax.legend()
    ax.grid(alpha=0.3)
    save_figure(fig, path, dpi=110)
    return path


def report_particles(run: Path, config: dict, app) -> list[Path]:
    """The pictures of a 2D particle run: frames and an animation drawn by the app, contour
    views and, for Martin & Moyce's column, the surge front."""
    frames = load_frames(run / "frames")
    if not frames:
        return []
    out = run / "frames"
    params = config.get("app", {})
    dx = float(params.get("dx", 0.02))
    ranges = global_ranges(frames, _hydrostatic(params))
    paths = frame_pngs(app, frames, out, ranges, every=max(1, len(frames) // 12))
    paths.append(contour_views(frames[-1], run / "contours-final.png", ranges, 1.5 * dx))
    paths.append(contour_views(frames[len(frames) // 2], run / "contours-middle.png", ranges, 1.5 * dx))
    paths.append(animation(app, frames, run, ranges["speed"], axes_limits(frames), QUANTITIES["speed"]))
    blocks = params.get("fluid", [])
    if params.get("layout") == "tank" and len(blocks) == 1 and blocks[0][0] == 0 and blocks[0][1] == 0:
        width, height = blocks[0][2], blocks[0][3]
        if abs(height - 2 * width) < 1e-9:  # Martin & Moyce's column, n^2 = 2
            paths.append(dam_break_front(frames, run / "surge-front.png", width, dx, float(params["tank"][0])))
    return paths


def _hydrostatic(params: dict) -> float | None:
    """``rho0 g H`` of the tallest fluid block (the foot of the dam), or ``None`` without one."""
    blocks = params.get("fluid") or []
    if not blocks or "rho0" not in params or "gravity" not in params:
        return None
    height = max(b[3] - b[1] for b in blocks)
    return float(params["rho0"]) * abs(float(params["gravity"][-1])) * height
