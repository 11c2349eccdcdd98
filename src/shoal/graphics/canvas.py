"""Figures drawn without pyplot: each on its own Agg canvas, saved atomically.

Nothing here selects a matplotlib backend, so importing or calling the report leaves the
caller's backend (a notebook's, a GUI's) as it was, and no figure is left registered with
pyplot. Every picture is bounded to :data:`MAX_PIXELS` on each side whatever the number of
steps, nodes or cores it shows.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib import colors
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from ..files import atomic_write

DPI = 110
MAX_PIXELS = 3600  # every picture stays below 4000 px on each side
MAX_INCHES = MAX_PIXELS / DPI


def new_figure(width_in: float, height_in: float) -> Figure:
    """A figure on its own Agg canvas, ``width_in`` by ``height_in`` inches, each side clamped
    to :data:`MAX_INCHES`."""
    fig = Figure(figsize=(min(width_in, MAX_INCHES), min(height_in, MAX_INCHES)), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def save_figure(fig: Figure, path: str | Path, dpi: int = DPI) -> Path:
    """Write ``fig`` to ``path`` as PNG at ``dpi`` dots per inch, atomically; returns ``path``."""
    path = Path(path)
    with atomic_write(path) as fh:
        fig.savefig(fh, format="png", dpi=dpi)
    return path


def node_colors(nodes: int) -> colors.ListedColormap:
    """One distinct colour per node for any node count.

    Up to 10 nodes ``tab10``, up to 20 ``tab20`` (qualitative maps). Beyond, hues step
    around the colour wheel by the golden ratio, so consecutive nodes (neighbours under
    most placements) get far-apart hues and no two nodes share a colour, in three
    lightness bands.
    """
    if nodes <= 10:
        from matplotlib import colormaps

        return colors.ListedColormap(colormaps["tab10"].colors[:max(nodes, 1)])
    if nodes <= 20:
        from matplotlib import colormaps

        return colors.ListedColormap(colormaps["tab20"].colors[:nodes])
    i = np.arange(nodes)
    hue = (i * 0.6180339887498949) % 1.0
    value = np.array([0.95, 0.75, 0.55])[i % 3]
    saturation = np.array([0.55, 0.85, 0.95])[(i // 3) % 3]
    return colors.ListedColormap(colors.hsv_to_rgb(np.stack([hue, saturation, value], axis=1)))
