"""The moves of a root block one level up or down (the criteria are :func:`.kernels.block_flags`).

Both moves conserve mass and momentum to round-off and keep a lake at rest at rest:
refining repeats the coarse surface over the finer bed (``h = eta - b``) where every child
stays wet, else the coarse depth; coarsening averages the surface where every child is wet,
else the depth. Momentum is repeated on refining and averaged on coarsening.
"""

from __future__ import annotations

import numpy as np


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


def average4(a: np.ndarray) -> np.ndarray:
    """The 2 x 2 averages of an array with even sides (one level coarser), summed in a fixed order."""
    return ((a[0::2, 0::2] + a[1::2, 0::2]) + (a[0::2, 1::2] + a[1::2, 1::2])) * 0.25
