"""Refinement criteria and the moves of a root block one level up or down.

Both moves conserve mass and momentum to round-off and keep a lake at rest at rest:
refining repeats the coarse surface over the finer bed (``h = eta - b``) where every child
stays wet, else the coarse depth; coarsening averages the surface where every child is wet,
else the depth. Momentum is repeated on refining and averaged on coarsening.
"""

from __future__ import annotations

import numpy as np

from .params import SWEParams
from .setups import average4


def flagged(h: np.ndarray, b: np.ndarray, dx: float, p: SWEParams) -> bool:
    """Whether a block's cells ask for its finest level.

    ``surface``: some wet cell's surface is at least ``threshold`` metres from sea level (the
    invasive paper's relative displacement to the horizon); ``gradient``: the surface slope
    between two wet cells of the block is at least ``threshold`` (m/m). Only the block's own
    cells are read, so a block's flag never depends on the tiling.
    """
    wet = h > p.dry
    eta = h + b
    if p.criterion == "surface":
        return bool(np.any(wet & (np.abs(eta - p.sea_level) >= p.threshold)))
    both_x = wet[1:, :] & wet[:-1, :]
    both_y = wet[:, 1:] & wet[:, :-1]
    gx = np.abs(np.diff(eta, axis=0)) / dx
    gy = np.abs(np.diff(eta, axis=1)) / dx
    return bool(np.any(both_x & (gx >= p.threshold)) or np.any(both_y & (gy >= p.threshold)))


def refine(h, hu, hv, b, b_fine, dry):
    """A block's cells (over bed ``b``) one level finer, over the finer bed ``b_fine``."""
    def up(a):
        return np.repeat(np.repeat(a, 2, axis=0), 2, axis=1)

    eta = up(h + b)
    by_surface = eta - b_fine
    wet = up(_all4(by_surface > dry))
    hf = np.where(wet, by_surface, up(h))
    return hf, up(hu), up(hv)


def coarsen(h, hu, hv, b_fine, b_coarse, dry):
    """A block's cells one level coarser, over the coarser bed ``b_coarse``."""
    wet = _all4(h > dry)
    hc = np.where(wet, np.maximum(average4(h + b_fine) - b_coarse, 0.0), average4(h))
    hu_c, hv_c = average4(hu), average4(hv)
    still = hc <= dry
    return hc, np.where(still, 0.0, hu_c), np.where(still, 0.0, hv_c)


def _all4(mask: np.ndarray) -> np.ndarray:
    """For each 2 x 2 group of a fine mask, whether all four are set."""
    return mask[0::2, 0::2] & mask[1::2, 0::2] & mask[0::2, 1::2] & mask[1::2, 1::2]
