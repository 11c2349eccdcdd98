"""Where the load was: per node over steps, per tile over the grid, and which node owned
each tile after every balancing step.

Each function returns a figure (see :mod:`shoal.graphics.canvas`) whose drawn arrays hold every
step, node and tile of the trace; the picture's size stays bounded however many there are.
"""

from __future__ import annotations

import math

import numpy as np
from matplotlib import colormaps, colors
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from ..graphics.canvas import MAX_INCHES, new_figure, node_colors
from ..trace import Trace


def _grey_absent(cmap: colors.Colormap) -> colors.Colormap:
    """``cmap`` drawing masked cells (nodes absent from a step) light grey."""
    return cmap.with_extremes(bad="0.85")


def relative_load(trace: Trace) -> np.ndarray:
    """Per-step, per-node load divided by that step's mean over the nodes present at it: 1 is
    a fair share.

    A step with no load at all is 1 everywhere (nothing is out of balance); a node absent from
    a step (:meth:`~shoal.trace.Trace.present`) is NaN there.
    """
    load, present = trace.node_load(), trace.present()
    if present.all():
        mean = load.mean(axis=1, keepdims=True)
    else:  # absent nodes hold 0 load: the sum is the present ones'
        mean = load.sum(axis=1, keepdims=True) / np.maximum(present.sum(axis=1, keepdims=True), 1)
    out = np.divide(load, mean, out=np.ones_like(load), where=mean > 0)
    return np.where(present, out, np.nan)


def load_heatmap(trace: Trace, absolute: bool = False) -> Figure:
    """Per-node load over steps (sampi Figure 6a): steps across, nodes up.

    By default each step's loads are divided by their mean, on a diverging map centred on 1
    (red above the mean, blue below), so imbalance reads the same in every step whatever
    the physics does to the total; ``absolute`` draws CPU milliseconds per core instead.
    A node absent from some steps (a run resumed on another number of nodes) is grey there.
    """
    steps, nodes = trace.steps, trace.cluster.nodes
    absent = ~trace.present().T
    fig = new_figure(10, 2.4 + 0.12 * nodes)
    ax = fig.add_subplot()
    extent = (steps[0] - 0.5, steps[-1] + 0.5, -0.5, nodes - 0.5)
    kind = "predicted" if trace.predicted else "measured"
    if absolute:
        im = ax.imshow(np.ma.masked_array(trace.node_load().T * 1e3, absent), aspect="auto", origin="lower",
                       cmap=_grey_absent(colormaps["viridis"]), interpolation="nearest", extent=extent)
        ax.set_title(f"{trace.scenario}: {kind} load per node (CPU ms per core per step)")
        fig.colorbar(im, ax=ax, label="CPU ms per core")
    else:
        rel = relative_load(trace)
        spread = float(np.nanmax(np.abs(rel - 1.0), initial=0.0)) or 0.05
        norm = colors.TwoSlopeNorm(vcenter=1.0, vmin=max(0.0, 1.0 - spread), vmax=1.0 + spread)
        im = ax.imshow(np.ma.masked_array(rel.T, absent), aspect="auto", origin="lower",
                       cmap=_grey_absent(colormaps["RdBu_r"]), interpolation="nearest", extent=extent, norm=norm)
        ax.set_title(f"{trace.scenario}: {kind} load per node / the step's mean over nodes")
        fig.colorbar(im, ax=ax, label="load / mean (1 = fair share)")
    if nodes <= 20:
        ax.set_yticks(range(nodes))  # every node by number
    else:
        ax.yaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
    ax.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
    ax.set_xlabel("step")
    ax.set_ylabel("node")
    return fig


def lif_over_steps(trace: Trace) -> Figure:
    """The load-imbalance factor of every step."""
    fig = new_figure(8, 3.2)
    ax = fig.add_subplot()
    ax.plot(trace.steps, trace.step_lif(), lw=1.5)  # over the nodes present at each step
    ax.set_xlabel("step")
    ax.set_ylabel("LIF = max/mean − 1")
    ax.set_title(f"{trace.scenario}: load-imbalance factor per step")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    return fig


def cell_map(trace: Trace, per_tile: np.ndarray) -> np.ndarray:
    """``per_tile`` (one value per tile of ``trace``'s tiling) painted on each tile's cells:
    the grid of a 2D tiling, the middle z slice of a 3D one (cells indexed ``[x, y]``)."""
    tiling = trace.tiling
    cells = np.asarray(per_tile)[tiling.owner_map()]
    if tiling.ndim == 3:
        cells = cells[:, :, tiling.grid[2] // 2]
    return cells


def tile_load_map(trace: Trace) -> Figure | None:
    """Mean CPU time per step of every tile, over the grid (``None`` for 1D tilings and mesh
    partitions)."""
    tiling = trace.tiling
    if tiling.kind != "cartesian" or tiling.ndim not in (2, 3):
        return None
    per_tile = trace.tile_cost().mean(axis=0) * 1e3
    fig = new_figure(*_grid_inches(tiling.grid[:2], 6.5))
    ax = fig.add_subplot()
    im = ax.imshow(cell_map(trace, per_tile).T, origin="lower", cmap="viridis", interpolation="nearest")
    _tile_edges(ax, trace)
    ax.set_xlabel("x cell")
    ax.set_ylabel("y cell")
    where = "" if tiling.ndim == 2 else f", z slice {tiling.grid[2] // 2}"
    ax.set_title(f"load per tile: mean over {len(trace.steps)} steps ({tiling.ntiles} tiles{where})")
    fig.colorbar(im, ax=ax, label="CPU ms per step")
    return fig


def placements(trace: Trace) -> Figure | None:
    """The owner of every tile after every placement the run had (the first one, then one
    per balancing step), as small multiples on one colour per node (``None`` for 1D tilings and
    mesh partitions)."""
    tiling = trace.tiling
    if tiling.kind != "cartesian" or tiling.ndim not in (2, 3):
        return None
    n, nodes = len(trace.placement_steps), trace.cluster.nodes
    cols = math.ceil(math.sqrt(n))
    rows = math.ceil(n / cols)
    panel_w, panel_h = _grid_inches(tiling.grid[:2], 3.0)
    scale = min(1.0, (MAX_INCHES - 1.5) / (cols * panel_w), (MAX_INCHES - 0.8) / (rows * panel_h))
    fig = new_figure(cols * panel_w * scale + 1.5, rows * panel_h * scale + 0.8)
    cmap = node_colors(nodes)
    norm = colors.BoundaryNorm(np.arange(nodes + 1) - 0.5, nodes)
    axes = fig.subplots(rows, cols, squeeze=False)
    for k, ax in enumerate(axes.flat):
        ax.set_xticks([])
        ax.set_yticks([])
        if k >= n:
            ax.set_axis_off()
            continue
        im = ax.imshow(cell_map(trace, trace.placement_owners[k]).T, origin="lower", cmap=cmap, norm=norm,
                       interpolation="nearest")
        if n <= 16:
            _tile_edges(ax, trace)
        ax.set_title(f"from step {int(trace.placement_steps[k])}", fontsize=8 if n <= 16 else 6)
    policy = trace.config.get("run", {}).get("placement") or trace.config.get("replay", {}).get("placement", "?")
    fig.suptitle(f"placement: {policy} ({tiling.ntiles} tiles on {nodes} nodes, {n} placements)")
    bar = fig.colorbar(im, ax=axes, label="node", fraction=0.03)
    bar.locator = MaxNLocator(integer=True, nbins=min(nodes, 20))
    bar.update_ticks()
    return fig


def _grid_inches(grid, longest: float) -> tuple[float, float]:
    """A panel's width and height in inches for a grid, its longer side ``longest``."""
    w, h = grid
    return (longest, max(longest * h / w, 1.0)) if w >= h else (max(longest * w / h, 1.0), longest)


def _tile_edges(ax, trace: Trace) -> None:
    for axis, edges in enumerate(trace.tiling.edges[:2]):
        for x in edges[1:-1]:
            (ax.axvline if axis == 0 else ax.axhline)(x - 0.5, color="k", lw=0.3)
