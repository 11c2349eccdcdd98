"""Grid halos between tiles: which of a tile's cells each neighbour reads, and where they land.

A payload is ``(lo, values)``: the global cell (3 entries) of the first value and the values
of a box of the sender's own cells (leading axes, such as velocity components, whole). The
reader copies it into its patch at ``lo - org``. Boxes are worked out once per tiling.
"""

from __future__ import annotations

import weakref

import numpy as np

from ...tiling import Tiling
from .geometry import pad3

_BOXES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def box3(tiling: Tiling, tile: int) -> tuple[np.ndarray, np.ndarray]:
    """The tile's cells [lo, hi) as 3-vectors (a 2D tile is one cell deep)."""
    return pad3(tiling.lo[tile], 0), pad3(tiling.hi[tile], 1)


def read_boxes(tiling: Tiling, src: int, width: int, stencil: str) -> list[tuple[int, np.ndarray, np.ndarray]]:
    """``(neighbour, lo, hi)`` for every neighbour of ``src`` under ``stencil`` (``"all"`` or
    ``"faces"``) whose cells ``width`` deep around its own box meet ``src``'s box: the part of
    ``src`` it reads."""
    cache = _BOXES.get(tiling)
    if cache is None:
        cache = _BOXES.setdefault(tiling, {})
    key = (src, width, stencil)
    if key not in cache:
        wide = pad3([width] * tiling.ndim, 0)
        lo, hi = box3(tiling, src)
        out = []
        for n in tiling.stencil(stencil)[src]:
            nlo, nhi = box3(tiling, int(n))
            a, b = np.maximum(lo, nlo - wide), np.minimum(hi, nhi + wide)
            if np.all(a < b):
                out.append((int(n), a, b))
        cache[key] = out
    return cache[key]


def pack(arrays: tuple[np.ndarray, ...], tiling: Tiling, src: int, width: int, stencil: str = "all") -> dict:
    """Every neighbour's payload of ``arrays`` (each indexed by ``src``'s own cells on its last
    three axes): ``{neighbour: (lo, *boxes)}``."""
    lo = box3(tiling, src)[0]
    out = {}
    for n, a, b in read_boxes(tiling, src, width, stencil):
        index = (Ellipsis, *(slice(int(s), int(e)) for s, e in zip(a - lo, b - lo, strict=True)))
        out[n] = (a, *(arr[index].copy() for arr in arrays))  # a copy: the sender changes its arrays in place
    return out


def place(patch: np.ndarray, org: np.ndarray, lo: np.ndarray, values: np.ndarray) -> None:
    """Copy a payload's values (first global cell ``lo``) into ``patch`` (first global cell ``org``)."""
    start = lo - org
    patch[(Ellipsis, *(slice(int(s), int(s) + int(n)) for s, n in zip(start, values.shape[-3:], strict=True)))] = values
