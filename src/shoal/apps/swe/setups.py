"""The beds and initial states of the shallow-water setups, as functions of position.

Everything here is analytic (no download): a setup gives the bed height ``b(x, y)`` and the
initial depth and velocity ``h, u, v`` at any points. A root block's cells at level ``L``
get the initial state at their centres, and a bed that is the 2 x 2 average of the bed one
level finer, down from ``max_level``, so that coarsening a lake at rest leaves it at rest to
the last bit. A user's bed (``app.bathymetry_file``) or water (``app.initial``: a file on one
level's cell centres, or a Python callable) replaces the setup's (:mod:`.inputs`); water
from a file reaches other levels by the moves of a regrid (:mod:`.regrid`).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ...errors import ShoalError
from .analytic import thacker, thacker_1d, thacker_bathymetry, vortex, vortex_bathymetry
from .inputs import PYTHON, FromPython, call_water, level_shapes, read_bed, read_water
from .params import SWEParams
from .regrid import average4, coarsen, refine


class Setup:
    """The bed and initial state of one parameter set (see :class:`SWEParams` for the keys)."""

    def __init__(self, p: SWEParams):
        self.p = p
        shapes = level_shapes(p.blocks, p.block, p.max_level)
        self.file_bed, self.file_level = read_bed(p.bathymetry_file, shapes) if p.bathymetry_file else (None, 0)
        self._file_water: tuple[dict[str, np.ndarray], int] | None = None

    # ----- the bed ----------------------------------------------------------------------------
    def bed(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Bed height (m, negative below sea level) at points ``x, y``."""
        p = self.p
        flat = np.full(np.broadcast(x, y).shape, p.sea_level - p.depth)
        if p.setup in ("ritter", "dam-break"):
            return np.zeros_like(flat)
        if p.setup == "thacker":
            h0, a, _ = p.thacker
            return thacker_bathymetry(x, y, self.centre, h0, a)
        if p.setup == "thacker-1d":
            h0, a, _ = p.thacker
            return thacker_bathymetry(x, self.centre[1], self.centre, h0, a)
        if p.setup == "channel":
            xc, width, height = p.bump
            flat = flat + height * np.exp(-(((x - xc) / width) ** 2))
        if p.setup == "vortex":
            radius, _, bump = p.vortex
            return p.sea_level + vortex_bathymetry(x, y, self.centre, p.depth, radius, bump)
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
    def water(self, x: np.ndarray, y: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The setup's depth and velocity ``h, u, v`` at points ``x, y`` over bed ``b`` at t = 0
        (velocities wherever the formula gives them, dry or not)."""
        p = self.p
        eta = np.full(x.shape, float(p.sea_level))
        u = np.zeros(x.shape)
        v = np.zeros(x.shape)
        if p.setup == "thacker":
            h0, a, amp = p.thacker
            return thacker(x, y, 0.0, self.centre, h0, a, amp, p.g)
        if p.setup == "thacker-1d":
            h0, a, amp = p.thacker
            return (*thacker_1d(x, 0.0, self.centre[0], h0, a, amp, p.g), v)
        if p.setup == "vortex":
            radius, speed, bump = p.vortex
            return vortex(x, y, self.centre, p.depth, radius, speed, bump, p.g)
        if p.setup == "radial-dam-break":
            cx, cy, radius, height = p.column
            eta = np.where((x - cx) ** 2 + (y - cy) ** 2 <= radius**2, eta + height, eta)
        elif p.setup in ("ritter", "dam-break"):
            x0, up = p.dam[:2]
            eta = np.where(x < x0, up, p.dam[2] if len(p.dam) == 3 else 0.0)
        elif p.setup == "wave":
            cx, cy, amp, width = p.hump
            eta = eta + amp * np.exp(-((x - cx) ** 2 + (y - cy) ** 2) / width**2)
        elif p.setup == "tsunami":
            cx, cy, amp, width = p.uplift
            eta = eta + amp * np.exp(-((x - cx) ** 2 + (y - cy) ** 2) / width**2)
        return np.maximum(eta - b, 0.0), u, v

    def block_water(self, bx: int, by: int, level: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Depth and momenta ``h, hu, hv`` of root block ``(bx, by)`` at ``level`` at t = 0, over
        its bed :meth:`block_bed` (no velocity where the depth is at most ``app.dry``)."""
        p = self.p
        if p.initial and not isinstance(p.initial, FromPython):
            return self._water_from_file(bx, by, level)
        h, u, v = self._raw_water(bx, by, level)
        wet = h > p.dry
        return h, np.where(wet, h * u, 0.0), np.where(wet, h * v, 0.0)

    def _raw_water(self, bx: int, by: int, level: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``h, u, v`` of a block from the setup's formula or the user's callable."""
        b = self.block_bed(bx, by, level)
        x, y = self.centres(bx, by, level)
        if isinstance(self.p.initial, FromPython):
            return call_water(self.p.initial, x, y, b, f"root block ({bx}, {by}) at level {level}")
        return self.water(x, y, b)

    def _water_from_file(self, bx: int, by: int, level: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """A block's water from ``app.initial``'s arrays at their level, refined or coarsened to
        ``level`` as a regrid would (conserving volume and momentum, a lake at rest at rest)."""
        h, hu, hv, at = self._file_block(bx, by)
        dry = self.p.dry
        wet = h > dry
        hu, hv = np.where(wet, hu, 0.0), np.where(wet, hv, 0.0)
        while at != level:
            step = 1 if level > at else -1
            b, b_next = self.block_bed(bx, by, at), self.block_bed(bx, by, at + step)
            move = refine if step > 0 else coarsen
            h, hu, hv = move(h, hu, hv, b, b_next, dry)
            at += step
        return h, hu, hv

    def _file_block(self, bx: int, by: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
        """``h, hu, hv`` of a block at the level of ``app.initial``'s arrays, and that level."""
        p = self.p
        if self._file_water is None:
            if p.initial.startswith(PYTHON):
                raise ShoalError(f"app.initial = {p.initial!r} was a Python callable, which a scenario file cannot "
                                 "hold: set app.initial to the callable from Python, or to an .npz file (a resumed "
                                 "run needs neither: its state is in the checkpoint)")
            self._file_water = read_water(p.initial, level_shapes(p.blocks, p.block, p.max_level))
        arrays, level = self._file_water
        n = p.block * 2**level
        cut = (slice(bx * n, (bx + 1) * n), slice(by * n, (by + 1) * n))
        h = arrays["h"][cut] if "h" in arrays else np.maximum(arrays["eta"][cut] - self.block_bed(bx, by, level), 0.0)
        u, v = (arrays[name][cut] if name in arrays else np.zeros((n, n)) for name in ("u", "v"))
        return np.ascontiguousarray(h), h * u, h * v, level

    def depth_scale(self) -> float:
        """The deepest water at t = 0 (m): over the cells of ``app.initial``'s arrays, or of
        every root block at ``min_level``."""
        p = self.p
        deepest = 0.0
        for bx in range(p.blocks[0]):
            for by in range(p.blocks[1]):
                if p.initial and not isinstance(p.initial, FromPython):
                    h = self._file_block(bx, by)[0]
                else:
                    h = self._raw_water(bx, by, p.min_level)[0]
                deepest = max(deepest, float(h.max()))
        return deepest
