"""A run's animation for the page's export button: every frame on disk drawn by the app's own
``draw``, in the viewer process, on one colour scale (the run's range, Vertanen §6.2) or on each
frame's own.

The drawing and the writing are :func:`shoal.report.particles.animation`'s, the same movie
``shoal report`` makes: MP4 when ffmpeg is at hand, else GIF. A GIF asked for where ffmpeg
is at hand is that MP4 converted by ffmpeg, frame for frame.
"""

from __future__ import annotations

import subprocess
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
    from ..report.particles import _axes_limits, animation, ffmpeg
    from ..report.run_report import _common_scale, app_of_run

    if fmt not in FORMATS:
        raise ShoalError(f"unknown format {fmt!r}; formats: {', '.join(FORMATS)}")
    if scale not in SCALES:
        raise ShoalError(f"unknown scale {scale!r}; scales: {', '.join(SCALES)}")
    exe = ffmpeg()
    if fmt == "mp4" and exe is None:
        raise ShoalError("MP4 needs ffmpeg, which is not installed here: export a GIF (or pip install imageio-ffmpeg)")
    frames = [arrays for _, arrays in run.frames()]
    if not frames:
        raise ShoalError("the run wrote no frames (run it with run.frame_every)")
    app = app_of_run(run.config)
    if app is None:
        raise ShoalError("the run's app cannot be rebuilt from its config.toml")
    out = Path(tempfile.mkdtemp(prefix="export-", dir=folder))
    limits = _axes_limits(frames) if "x" in frames[0] else None  # particles move: fix the axes
    path = animation(app, frames, out, _common_scale(frames) if scale == "run" else None, limits)
    if path.suffix == f".{fmt}":
        return path
    gif = path.with_suffix(".gif")
    done = subprocess.run([exe, "-v", "error", "-y", "-i", str(path), "-vf",
                           "split[a][b];[a]palettegen[p];[b][p]paletteuse", str(gif)], capture_output=True, text=True)
    if done.returncode != 0:
        raise ShoalError(f"ffmpeg could not make the GIF: {(done.stderr.strip().splitlines() or ['?'])[-1]}")
    return gif
