"""Pictures of particle runs: frames, contour views on the run's global scale, an animation,
VTK files, and the dam-break front against Martin & Moyce."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.animation import PillowWriter  # noqa: E402
from scipy.interpolate import griddata  # noqa: E402
from scipy.spatial import cKDTree  # noqa: E402

from .vtk import write_particles_vtk  # noqa: E402

FLUID = 0
QUANTITIES = {"speed": "speed (m/s)", "rho": "density (kg/m³)", "p": "pressure (Pa)"}


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


def global_ranges(frames: list[dict]) -> dict[str, tuple[float, float]]:
    """Colour scale per quantity fixed to the run's global min/max over fluid (Vertanen §6.2)."""
    out = {}
    for q in QUANTITIES:
        vals = [_value(f, q)[f["kind"] == FLUID] for f in frames]
        vals = np.concatenate([v for v in vals if len(v)])
        out[q] = (float(vals.min()), float(vals.max()))
    return out


def _axes_limits(frames):
    x = np.concatenate([f["x"] for f in frames])
    pad = 0.02 * np.ptp(x, axis=0)
    return x.min(axis=0) - pad, x.max(axis=0) + pad


def draw_frame(app, frame, scale, limits, ax):
    """The app's picture of a frame, on the run's colour scale and axes."""
    ax.clear()
    mappable = app.draw(frame, ax, scale)
    ax.set_xlim(limits[0][0], limits[1][0])
    ax.set_ylim(limits[0][1], limits[1][1])
    return mappable


def frame_pngs(app, frames, out: Path, ranges, every=1) -> list[Path]:
    limits = _axes_limits(frames)
    paths = []
    fig, ax = plt.subplots(figsize=(8, 5))
    for k, frame in enumerate(frames):
        if k % every and k != len(frames) - 1:
            continue
        sc = draw_frame(app, frame, ranges["speed"], limits, ax)
        if k == 0:
            fig.colorbar(sc, ax=ax, label=QUANTITIES["speed"])
        p = out / f"{frame['path'].stem.replace('state', 'speed')}.png"
        fig.savefig(p, dpi=90)
        paths.append(p)
    plt.close(fig)
    return paths


def animation(app, frames, path: Path, ranges) -> Path:
    limits = _axes_limits(frames)
    fig, ax = plt.subplots(figsize=(7, 4.4))
    sc = draw_frame(app, frames[0], ranges["speed"], limits, ax)
    fig.colorbar(sc, ax=ax, label=QUANTITIES["speed"])
    writer = PillowWriter(fps=8)
    with writer.saving(fig, str(path), dpi=70):
        for frame in frames:
            draw_frame(app, frame, ranges["speed"], limits, ax)
            writer.grab_frame()
    plt.close(fig)
    return path


def contour_views(frame, path: Path, ranges, spacing: float) -> Path:
    """Density, pressure and speed interpolated onto a grid, each on the run's global scale."""
    fluid = frame["kind"] == FLUID
    x = frame["x"][fluid]
    lo, hi = x.min(axis=0), x.max(axis=0)
    gx, gy = np.meshgrid(np.arange(lo[0], hi[0], spacing), np.arange(lo[1], hi[1], spacing), indexing="ij")
    grid_pts = np.stack([gx.ravel(), gy.ravel()], axis=1)
    empty = cKDTree(x).query(grid_pts, k=1)[0] > 1.5 * spacing  # no fluid here: leave blank
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    for ax, q in zip(axes, ("rho", "p", "speed"), strict=True):
        val = griddata(x, _value(frame, q)[fluid], grid_pts, method="linear")
        val[empty] = np.nan
        cs = ax.contourf(gx, gy, val.reshape(gx.shape), levels=np.linspace(*ranges[q], 16), cmap="viridis",
                         extend="both")
        ax.set_aspect("equal")
        ax.set_title(QUANTITIES[q])
        fig.colorbar(cs, ax=ax, shrink=0.8)
    fig.suptitle(f"t = {float(frame['time']):.3f} s (colour scales: the run's global min/max)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def vtk_frames(frames, out: Path) -> list[Path]:
    out.mkdir(exist_ok=True)
    paths = []
    for f in frames:
        fields = {"id": f["id"], "kind": f["kind"].astype(np.int32), "velocity": f["v"], "density": f["rho"],
                  "pressure": f["p"], "speed": _value(f, "speed")}
        paths.append(write_particles_vtk(out / f"{f['path'].stem}.vtk", f["x"], fields))
    return paths


def dam_break_front(frames, path: Path, width: float, dx: float) -> Path:
    from ..apps.sph.validation import MARTIN_MOYCE, surge_front

    T = [float(f["time"]) * np.sqrt(2 * 9.81 / width) for f in frames]
    Z = [surge_front(f["x"], f["kind"], dx) / width for f in frames]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(T, Z, "-", label="shoal SPH")
    ref_T, ref_Z = MARTIN_MOYCE.T
    ax.errorbar(ref_T, ref_Z, yerr=0.1 * ref_Z, fmt="o", capsize=2, label="Martin & Moyce (1952), ±10%")
    ax.set_xlabel("T = t √(2g/a)")
    ax.set_ylabel("Z = front / a")
    ax.set_title("Dam-break surge front")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def report_particles(run: Path, config: dict, app) -> list[Path]:
    """The pictures of a 2D particle run: frames and an animation drawn by the app, contour
    views, VTK files and, for Martin & Moyce's column, the surge front."""
    frames = load_frames(run / "frames")
    if not frames:
        return []
    out = run / "frames"
    ranges = global_ranges(frames)
    params = config.get("app", {})
    dx = float(params.get("dx", 0.02))
    paths = frame_pngs(app, frames, out, ranges, every=max(1, len(frames) // 12))
    paths.append(contour_views(frames[-1], run / "contours-final.png", ranges, 1.5 * dx))
    paths.append(contour_views(frames[len(frames) // 2], run / "contours-middle.png", ranges, 1.5 * dx))
    paths.append(animation(app, frames, run / "animation.gif", ranges))
    paths += vtk_frames(frames, out / "vtk")
    blocks = params.get("fluid", [])
    if params.get("layout") == "tank" and len(blocks) == 1 and blocks[0][0] == 0 and blocks[0][1] == 0:
        width, height = blocks[0][2], blocks[0][3]
        if abs(height - 2 * width) < 1e-9:  # Martin & Moyce's column, n^2 = 2
            paths.append(dam_break_front(frames, run / "surge-front.png", width, dx))
    return paths
