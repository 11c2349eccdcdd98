"""What a FLIP run shows: frames of its particles, and the pressure solve step by step."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def frame_of(gathered: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The particles (positions and velocities, drawn coloured by speed), the fluid cells, the
    surface's level set (m, negative inside) and the pressure (Pa), with the time."""
    return {k: gathered[k] for k in ("x", "v", "time", "fluid", "phi", "p")}


def draw_cg(log: np.ndarray, tolerance: float, folder: Path) -> list[Path]:
    """``cg.png``: the CG iterations and the relative residual of every step against time."""
    if not len(log):
        return []
    from ...graphics.canvas import new_figure, save_figure

    fig = new_figure(6.0, 5.0)
    top, bottom = fig.subplots(2, 1, sharex=True)
    top.plot(log[:, 0], log[:, 2], ".-", ms=3)
    top.set_ylabel("CG iterations")
    bottom.semilogy(log[:, 0], np.maximum(log[:, 3], 1e-300), ".", ms=3, label="relative residual max|r| / max|b|")
    bottom.axhline(tolerance, color="0.5", ls="--", label="app.cg_tolerance")
    bottom.set_xlabel("time (s)")
    bottom.legend(fontsize="small")
    top.set_title("pressure solve: PCG with MIC(0) on bricks")
    return [save_figure(fig, Path(folder) / "cg.png")]
