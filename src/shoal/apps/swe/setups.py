"""The beds and initial states of the shallow-water setups, as functions of position.

Everything here is analytic (no download): a setup gives the bed height ``b(x, y)`` and the
initial surface and velocity ``eta, u, v`` at any points. A root block's cells at level
``L`` get the initial state at their centres, and a bed that is the 2 x 2 average of the
bed one level finer, down from ``max_level``, so that coarsening a lake at rest leaves it at
rest to the last bit.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ...errors import ShoalError
from . import analytic
from .params import SWEParams


class Setup:
    """The bed and initial state of one parameter set (see :class:`SWEParams` for the keys)."""

    def __init__(self, p: SWEParams):
        self.p = p
        self.file_bed, self.file_level = self._read_bed_file() if p.bathymetry_file else (None, 0)

    # ----- the bed ----------------------------------------------------------------------------
    def bed(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Bed height (m, negative below sea level) at points ``x, y``."""
        p = self.p
        flat = np.full(np.broadcast(x, y).shape, p.sea_level - p.depth)
        if p.setup == "ritter":
            return np.zeros_like(flat)
        if p.setup == "thacker":
            h0, a, _ = p.thacker
            return analytic.thacker_bathymetry(x, y, self.centre, h0, a)
        if p.setup == "vortex":
            radius, _, bump = p.vortex
            return p.sea_level + analytic.vortex_bathymetry(x, y, self.centre, p.depth, radius, bump)
        if p.setup == "lake-at-rest" and p.roughness:
            k = 2 * math.pi / (8 * p.dx0)
            flat = flat + p.roughness * np.sin(k * x + 0.3) * np.cos(0.7 * k * y + 1.1)
        if p.setup == "tsunami":
            x0, x1, shelf = p.shelf
            ramp = np.clip((x - x0) / max(x1 - x0, 1e-300), 0.0, 1.0)
            flat = p.sea_level - (p.depth + (shelf - p.depth) * ramp)
        for cx, cy, radius, height in p.islands:
            # a Gaussian mount whose top stands `height` above sea level
            rise = (p.sea_level + height - flat) * np.exp(-((x - cx) ** 2 + (y - cy) ** 2) / radius**2)
            flat = np.maximum(flat, flat + rise)
        return flat

    @property
    def centre(self) -> tuple[float, float]:
        """The domain's centre."""
        p = self.p
        return (p.origin[0] + p.extent[0] / 2, p.origin[1] + p.extent[1] / 2)

    @functools.cache  # noqa: B019  (one setup per app; a regrid asks again and again)
    def block_bed(self, bx: int, by: int, level: int) -> np.ndarray:
        """The bed of root block ``(bx, by)`` at ``level``: ``n x n`` cells, axis 0 along x
        (cached: never write into it)."""
        p = self.p
        finest = max(p.max_level, level) if self.file_bed is None else max(self.file_level, level)
        if self.file_bed is None:
            x, y = self.centres(bx, by, finest)
            b = self.bed(x, y)
        else:
            n = p.block * 2**self.file_level
            b = self.file_bed[bx * n:(bx + 1) * n, by * n:(by + 1) * n]
            if level > self.file_level:  # finer than the file: each value covers its sub-cells
                r = 2 ** (level - self.file_level)
                return np.repeat(np.repeat(b, r, axis=0), r, axis=1)
        for _ in range(finest - level):
            b = average4(b)
        return np.ascontiguousarray(b)

    @functools.cache  # noqa: B019  (as block_bed)
    def block_bed_top(self, bx: int, by: int, level: int) -> np.ndarray:
        """The highest bed under each cell of root block ``(bx, by)`` at ``level``, among its
        sub-cells at the finest level the bed is known at: water above it in every cell stays
        wet however far the block refines (cached: never write into it)."""
        finest = self.p.max_level if self.file_bed is None else self.file_level
        if level >= finest:
            return self.block_bed(bx, by, level)
        b = self.block_bed(bx, by, finest)
        for _ in range(finest - level):
            b = np.maximum(np.maximum(b[0::2, 0::2], b[1::2, 0::2]), np.maximum(b[0::2, 1::2], b[1::2, 1::2]))
        return b

    def centres(self, bx: int, by: int, level: int) -> tuple[np.ndarray, np.ndarray]:
        """Cell centres of root block ``(bx, by)`` at ``level`` (two ``n x n`` arrays)."""
        p = self.p
        n = p.block * 2**level
        dx = p.dx0 / 2**level
        i = np.arange(n)
        x = p.origin[0] + (bx * n + i + 0.5) * dx
        y = p.origin[1] + (by * n + i + 0.5) * dx
        return np.meshgrid(x, y, indexing="ij")

    # ----- the water --------------------------------------------------------------------------
    def initial(self, x: np.ndarray, y: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Depth and momenta ``h, hu, hv`` at points ``x, y`` over bed ``b`` at t = 0."""
        p = self.p
        eta = np.full(x.shape, float(p.sea_level))
        u = np.zeros(x.shape)
        v = np.zeros(x.shape)
        if p.setup == "radial-dam-break":
            cx, cy, radius, height = p.column
            eta = np.where((x - cx) ** 2 + (y - cy) ** 2 <= radius**2, eta + height, eta)
        elif p.setup == "ritter":
            x0, h0 = p.dam
            eta = np.where(x < x0, h0, 0.0)
        elif p.setup == "thacker":
            h0, a, amp = p.thacker
            h, u, v = analytic.thacker(x, y, 0.0, self.centre, h0, a, amp, p.g)
            eta = h + b
        elif p.setup == "vortex":
            radius, speed, bump = p.vortex
            h, u, v = analytic.vortex(x, y, self.centre, p.depth, radius, speed, bump, p.g)
            eta = h + b
        elif p.setup == "wave":
            cx, cy, amp, width = p.hump
            eta = eta + amp * np.exp(-((x - cx) ** 2 + (y - cy) ** 2) / width**2)
        elif p.setup == "tsunami":
            cx, cy, amp, width = p.uplift
            eta = eta + amp * np.exp(-((x - cx) ** 2 + (y - cy) ** 2) / width**2)
        h = np.maximum(eta - b, 0.0)
        wet = h > p.dry
        return h, np.where(wet, h * u, 0.0), np.where(wet, h * v, 0.0)

    # ----- a bed from a file ------------------------------------------------------------------
    def _read_bed_file(self) -> tuple[np.ndarray, int]:
        """The file's bed and the level whose cell centres it gives."""
        p = self.p
        try:
            bed = np.load(p.bathymetry_file, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise ShoalError(f"app.bathymetry_file {p.bathymetry_file!r}: not a NumPy array file ({exc})") from None
        shapes = {(p.blocks[0] * p.block * 2**lv, p.blocks[1] * p.block * 2**lv): lv
                  for lv in range(p.max_level + 1)}
        if bed.ndim != 2 or tuple(bed.shape) not in shapes:
            raise ShoalError(f"app.bathymetry_file has shape {bed.shape}; it must give one level's cell "
                             f"centres: one of {', '.join(str(s) for s in shapes)}")
        bed = np.asarray(bed, dtype=np.float64)
        if not np.isfinite(bed).all():
            raise ShoalError("app.bathymetry_file holds values that are not finite")
        return bed, shapes[tuple(bed.shape)]


def average4(a: np.ndarray) -> np.ndarray:
    """The 2 x 2 averages of an array with even sides (one level coarser), summed in a fixed order."""
    return ((a[0::2, 0::2] + a[1::2, 0::2]) + (a[0::2, 1::2] + a[1::2, 1::2])) * 0.25
