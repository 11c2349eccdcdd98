"""Sharing a whole number of things out in proportion to weights (largest-remainder rounding):
tiles between nodes by their cores, cores between applications by their workloads. Kept apart
from the placement package so that what needs only the rounding does not import the policies."""

from __future__ import annotations

import numpy as np


def node_quotas(ntiles: int, cores) -> np.ndarray:
    """Tiles per node proportional to cores, rounded so they sum to ``ntiles``.

    Largest-remainder rounding: every node is within one tile of its exact share; of nodes
    with equal remainders the lower index gets the extra tile.

    Parameters
    ----------
    ntiles : int
        The number of tiles to share out.
    cores : sequence of int
        Cores of every node.

    Returns
    -------
    ndarray of int64, shape (len(cores),)
        Tiles of every node, summing to ``ntiles``.
    """
    cores = np.asarray(cores, dtype=np.float64)
    share = ntiles * cores / cores.sum()
    base = np.floor(share).astype(np.int64)
    left = ntiles - int(base.sum())
    # Ties go to the lower node index (stable sort on the negated remainder).
    order = np.argsort(-(share - base), kind="stable")
    base[order[:left]] += 1
    return base
