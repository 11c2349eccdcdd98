"""Birdshot's Figures 3 and 4 for given model parameters."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..imbalance import expected_lif_exact, lif_distribution, tiles_per_node_for
from .canvas import new_figure, save_figure


def figure3(nodes: int, busy: float, tiles_per_node: int, path: Path) -> Path:
    """Distribution of the LIF for s and 4 s tiles per node (exact, binomial model)."""
    fig = new_figure(7, 4)
    ax = fig.add_subplot()
    for s in (tiles_per_node, 4 * tiles_per_node):
        values, pmf = lif_distribution(nodes, s, busy)
        keep = pmf > 1e-6
        ax.plot(values[keep], pmf[keep], marker="o", ms=3, label=f"{s} tiles per node")
    ax.set_xlabel("load-imbalance factor")
    ax.set_ylabel("probability")
    ax.set_title(f"Distribution of LIF (n = {nodes}, p = {busy})")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    return path


def figure4(busy: float, target: float, path: Path, max_nodes: int = 1024) -> Path:
    """Tiles per node needed to hold E[LIF] at ``target`` as the number of nodes grows."""
    nodes = np.unique(np.round(np.logspace(1, np.log2(max_nodes), 12, base=2)).astype(int))
    need = [tiles_per_node_for(target, int(n), busy) for n in nodes]
    fig = new_figure(7, 4)
    ax = fig.add_subplot()
    ax.plot(nodes, need, marker="o")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("nodes (n)")
    ax.set_ylabel("tiles per node (s)")
    ax.set_title(f"Tiles per node for E[LIF] = {target:.3g} (p = {busy})")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    return path


def draw_lif_figures(nodes: int, busy: float, tiles_per_node: int, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    target = expected_lif_exact(nodes, tiles_per_node, busy)
    if target <= 0:
        target = 0.21  # every node is always fully busy: fall back to the paper's value
    return [figure3(nodes, busy, tiles_per_node, out / "lif-figure3.png"),
            figure4(busy, target, out / "lif-figure4.png")]
