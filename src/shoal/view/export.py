"""A run's animation for the page's export button: every frame on disk drawn by the app's own
``draw``, in the viewer process, on one colour scale (the run's range, Vertanen §6.2) or on each
frame's own.

The drawing and the writing are :func:`shoal.report.particles.animation`'s, the same movie
``shoal report`` makes, in the format asked for (MP4 needs ffmpeg).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from ..errors import ShoalError
from .playback import Playback

#: The formats and colour scales an export may ask for.
FORMATS = ("gif", "mp4")
SCALES = ("run", "frame")


def export(run: Playback, fmt: str, scale: str, folder: Path) -> Path:
    """Write the animation of ``run``'s frames into a new folder under ``folder``.

    Parameters
    ----------
    run : Playback
        The run folder.
    fmt : {"gif", "mp4"}
        The file's format (MP4 needs ffmpeg).
    scale : {"run", "frame"}
        One colour scale over every frame (their common range), or each frame's own.
    folder : Path
        Where the file's own temporary folder is made.

    Returns
    -------
    Path
        The animation, one picture per frame on disk.

    Raises
    ------
    ShoalError
        For an unknown format or scale, MP4 without ffmpeg, a run without frames, or one whose
        app cannot be rebuilt from its configuration.
    """
    from ..report.particles import animation, axes_limits
    from ..report.run_report import app_of_run, app_scale

    if fmt not in FORMATS:
        raise ShoalError(f"unknown format {fmt!r}; formats: {', '.join(FORMATS)}")
    if scale not in SCALES:
        raise ShoalError(f"unknown scale {scale!r}; scales: {', '.join(SCALES)}")
    frames = [arrays for _, arrays in run.frames()]
    if not frames:
        raise ShoalError("the run wrote no frames (run it with run.frame_every)")
    app = app_of_run(run.config)
    if app is None:
        raise ShoalError("the run's app cannot be rebuilt from its config.toml")
    out = Path(tempfile.mkdtemp(prefix="export-", dir=folder))
    limits = axes_limits(frames) if "x" in frames[0] else None  # particles move: fix the axes
    return animation(app, frames, out, app_scale(app, frames) if scale == "run" else None, limits, fmt=fmt)
