"""Birdshot's Figures 3 and 4 for given model parameters."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..graphics.canvas import new_figure, save_figure
from ..imbalance import expected_lif_exact, lif_distribution, tiles_per_node_for

PAPER_TARGET = 0.21  # the E[LIF] of Birdshot's Figure 4


def draw_lif_figures(nodes: int, busy: float, tiles_per_node: int, out: Path,
                     target: float | None = None) -> list[Path]:
    """Figures 3 and 4 into ``out`` (made if need be): ``lif-figure3.png`` and ``lif-figure4.png``.

    Parameters
    ----------
    nodes, tiles_per_node : int
        ``n`` and ``s`` of Figure 3 (it draws ``s`` and ``4 s``).
    busy : float
        ``p``, the probability that a tile is busy.
    out : Path
        The folder of the figures.
    target : float, optional
        The E[LIF] Figure 4 holds (and Figure 3 marks). Default: the exact E[LIF] of ``n``
        nodes of ``s`` tiles, or the paper's 0.21 when that is 0 (every tile always busy).

    Returns
    -------
    list of Path
        The two figures.

    Raises
    ------
    ShoalError
        If a parameter is out of range or ``target`` is out of reach, before anything is written.
    """
    held = target
    if held is None:
        held = expected_lif_exact(nodes, tiles_per_node, busy)
        if held <= 0:
            held = PAPER_TARGET  # every node is always fully busy: fall back to the paper's value
    curves, (counts, need) = _curves3(nodes, busy, tiles_per_node), _curve4(busy, held)  # computed, then drawn
    out.mkdir(parents=True, exist_ok=True)
    return [_draw3(curves, nodes, busy, target, out / "lif-figure3.png"),
            _draw4(counts, need, busy, held, out / "lif-figure4.png")]


def _curves3(nodes: int, busy: float, tiles_per_node: int) -> list[tuple[int, np.ndarray, np.ndarray]]:
    """Figure 3's distributions: ``(s, values, probabilities)`` for s and 4 s tiles per node."""
    return [(s, *lif_distribution(nodes, s, busy)) for s in (tiles_per_node, 4 * tiles_per_node)]


def _curve4(busy: float, target: float, max_nodes: int = 1024) -> tuple[np.ndarray, list[int]]:
    """Figure 4's points: node counts from 2 to ``max_nodes`` and the tiles per node each needs."""
    nodes = np.unique(np.round(np.logspace(1, np.log2(max_nodes), 12, base=2)).astype(int))
    return nodes, [tiles_per_node_for(target, int(n), busy) for n in nodes]


def _draw3(curves, nodes: int, busy: float, target: float | None, path: Path) -> Path:
    fig = new_figure(7, 4)
    ax = fig.add_subplot()
    for s, values, pmf in curves:
        keep = pmf > 1e-6
        ax.plot(values[keep], pmf[keep], marker="o", ms=3, label=f"{s} tiles per node")
    if target is not None:
        ax.axvline(target, color="0.3", ls="--", lw=1, label=f"target E[LIF] = {target:.3g}")
    ax.set_xlabel("load-imbalance factor")
    ax.set_ylabel("probability")
    ax.set_title(f"Distribution of LIF (n = {nodes}, p = {busy})")
    ax.legend()
    ax.grid(alpha=0.3)
    save_figure(fig, path, dpi=110)
    return path


def _draw4(nodes: np.ndarray, need: list[int], busy: float, target: float, path: Path) -> Path:
    fig = new_figure(7, 4)
    ax = fig.add_subplot()
    ax.plot(nodes, need, marker="o")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("nodes (n)")
    ax.set_ylabel("tiles per node (s)")
    ax.set_title(f"Tiles per node for E[LIF] = {target:.3g} (p = {busy})")
    ax.grid(alpha=0.3)
    save_figure(fig, path, dpi=110)
    return path
