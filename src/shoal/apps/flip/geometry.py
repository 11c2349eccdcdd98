"""Where the water and the walls are: solid cells, the particles a fluid shape or a source
seeds, and their ids.

Every cell is solid when its centre lies in a solid shape, and every cell outside the domain
is solid (the walls). A fluid cell is seeded with ``k**d`` particles on a jittered ``k``-lattice;
particle ``s`` of cell ``c`` has id ``flat(c) * ppc + s`` and its jitter is a hash of that id, so
each tile seeds its own cells alone and the particles are the same for any tiling. A source
seeds its empty cells at each step it is active, with ids above every initial one.
"""

from __future__ import annotations

import math

import numpy as np

from .params import FlipParams


def pad3(values, fill) -> np.ndarray:
    """A per-axis int64 vector of 2 or 3 entries as 3 (2D grids are 3D grids one cell deep)."""
    out = np.full(3, fill, np.int64)
    out[:len(values)] = values
    return out


class Geometry:
    """The static world of a run: the cell grid, the solid cells, fluid shapes and sources.

    Parameters
    ----------
    p : FlipParams
        Validated parameters.
    pad : int
        Cells of wall kept around the domain in :attr:`solid`, at least any halo a tile reads.
    """

    def __init__(self, p: FlipParams, pad: int):
        self.p, self.d, self.h = p, p.dimension, p.h
        self.cells = tuple(int(n) for n in p.cells)
        self.cells3 = pad3(self.cells, 1)
        self.pad = pad
        self.pad3 = pad3([pad] * self.d, 0)
        self.k = p.lattice()
        self.ppc = p.particles_per_cell
        self.solid = self._solid()
        self.first_source_id = int(np.prod(self.cells)) * self.ppc
        self.source_boxes = [self._cell_box(s[:2 * self.d]) for s in p.sources]
        sizes = [int(np.prod(hi - lo)) for lo, hi in self.source_boxes]
        self.source_offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)

    # ----- solids ---------------------------------------------------------------------------
    def _solid(self) -> np.ndarray:
        """Solid cells of the padded grid (3D, one cell deep in 2D): the walls around the domain
        and every cell whose centre lies in a solid shape."""
        shape = self.cells3 + 2 * self.pad3
        solid = np.ones(shape, bool)
        inner = tuple(slice(self.pad3[a], self.pad3[a] + self.cells3[a]) for a in range(3))
        centres = np.stack(np.meshgrid(*[(np.arange(n) + 0.5) * self.h for n in self.cells], indexing="ij"), -1)
        inside = np.zeros(self.cells, bool)
        d = self.d
        for b in self.p.solid_boxes:
            inside |= np.all((centres >= b[:d]) & (centres <= b[d:2 * d]), axis=-1)
        for s in self.p.solid_spheres:
            inside |= np.sum((centres - s[:d]) ** 2, axis=-1) <= s[d] ** 2
        solid[inner] = inside.reshape(tuple(self.cells3))
        return solid

    def solid_patch(self, org3: np.ndarray, shape3) -> np.ndarray:
        """Solid cells of the patch whose first cell is global ``org3`` (3 entries)."""
        start = org3 + self.pad3
        if np.any(start < 0) or np.any(start + np.asarray(shape3) > self.solid.shape):
            raise AssertionError("a patch reaches beyond the padded grid")  # the pad is sized for every patch
        return np.ascontiguousarray(self.solid[tuple(slice(int(s), int(s) + int(n)) for s, n in zip(start, shape3,
                                                                                                     strict=True))])

    # ----- seeding --------------------------------------------------------------------------
    def lattice(self, cells: np.ndarray, ids: np.ndarray) -> np.ndarray:
        """Positions of particles ``ids`` (``flat cell * ppc + s``) in ``cells`` (rows of cell
        coordinates, one per particle): the ``s``-th point of the ``k``-lattice, jittered."""
        s = ids % self.ppc
        sub = np.stack(np.unravel_index(s, (self.k,) * self.d), -1)
        jitter = np.stack([_unit(ids * 4 + a) for a in range(self.d)], -1) * 0.5 - 0.25  # [-0.25, 0.25)
        return (cells + (sub + 0.5 + jitter) / self.k) * self.h

    def initial(self, lo, hi) -> dict[str, np.ndarray]:
        """The initial particles of the cells in the box [lo, hi), in (cell, id) order."""
        d, ppc = self.d, self.ppc
        axes = [np.arange(int(a), int(b)) for a, b in zip(lo, hi, strict=True)]
        cells = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, d)
        flat = np.ravel_multi_index(tuple(cells.T), self.cells)
        cells = np.repeat(cells, ppc, axis=0)
        ids = (np.repeat(flat, ppc) * ppc + np.tile(np.arange(ppc), len(flat))).astype(np.int64)
        x = self.lattice(cells, ids)
        v = np.zeros_like(x)
        taken = np.zeros(len(ids), bool)
        shapes = [(True, s) for s in self.p.fluid] + [(False, s) for s in self.p.fluid_spheres]
        for box, shape in shapes:
            width = 2 * d if box else d + 1
            if box:
                inside = np.all((x >= shape[:d]) & (x <= shape[d:2 * d]), axis=1)
            else:
                inside = np.sum((x - shape[:d]) ** 2, axis=1) <= shape[d] ** 2
            new = inside & ~taken
            if len(shape) > width:
                v[new] = shape[width:width + d]
            taken |= new
        keep = taken & ~self.solid[tuple((cells + self.pad3[:d]).T) + ((0,) if d == 2 else ())]
        return {"id": ids[keep], "x": x[keep], "v": v[keep], "cell": cells[keep].astype(np.int64)}

    def max_initial_speed(self) -> float:
        """The largest velocity component any fluid shape or source gives (m/s)."""
        d = self.d
        speeds = [0.0]
        for shape in self.p.fluid:
            speeds += [abs(c) for c in shape[2 * d:]]
        for shape in self.p.fluid_spheres:
            speeds += [abs(c) for c in shape[d + 1:]]
        for s in self.p.sources:
            speeds += [abs(c) for c in s[2 * d:3 * d]]
        return max(speeds)

    # ----- sources --------------------------------------------------------------------------
    def _cell_box(self, box) -> tuple[np.ndarray, np.ndarray]:
        """The cells whose centres lie in a box, as [lo, hi) cell coordinates."""
        d, h = self.d, self.h
        lo = np.array([math.ceil(box[a] / h - 0.5) for a in range(d)], np.int64)
        hi = np.array([math.floor(box[d + a] / h - 0.5) + 1 for a in range(d)], np.int64)
        return np.clip(lo, 0, self.cells), np.clip(hi, 0, self.cells)

    def pour(self, state: dict, lo, hi, step: int, t: float) -> dict | None:
        """What the sources active at time ``t`` do in the tile's box [lo, hi) at ``step``: the
        particles already in their cells take the source's velocity (in place), and each empty,
        non-solid cell of theirs gets a full cell of new particles, returned (or None)."""
        d, ppc = self.d, self.ppc
        new = []
        lo, hi = np.asarray(lo), np.asarray(hi)
        occupied = None
        for s, (slo, shi), offset in zip(self.p.sources, self.source_boxes, self.source_offsets, strict=False):
            if not s[-2] <= t < s[-1]:
                continue
            a, b = np.maximum(slo, lo), np.minimum(shi, hi)
            if np.any(a >= b):
                continue
            velocity = np.asarray(s[2 * d:3 * d], float)
            cell = state["cell"]
            inside = np.all((cell >= a) & (cell < b), axis=1)
            state["v"][inside] = velocity
            if occupied is None:  # the tile's cells holding a particle
                occupied = np.zeros(tuple(hi - lo), bool)
                occupied[tuple((cell - lo).T)] = True
            axes = [np.arange(int(u), int(w)) for u, w in zip(a, b, strict=True)]
            cells = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, d)
            solid = self.solid[tuple((cells + self.pad3[:d]).T) + ((0,) if d == 2 else ())]
            cells = cells[~solid & ~occupied[tuple((cells - lo).T)]]
            if not len(cells):
                continue
            occupied[tuple((cells - lo).T)] = True  # an overlapping source finds them filled
            index = offset + np.ravel_multi_index(tuple((cells - slo).T), tuple(shi - slo))
            base = self.first_source_id + (step * int(self.source_offsets[-1]) + index) * ppc
            ids = (np.repeat(base, ppc) + np.tile(np.arange(ppc), len(cells))).astype(np.int64)
            cells = np.repeat(cells, ppc, axis=0)
            x = self.lattice(cells, ids)
            new.append({"id": ids, "x": x, "v": np.tile(velocity, (len(ids), 1)), "cell": cells.astype(np.int64)})
        if not new:
            return None
        return {k: np.concatenate([q[k] for q in new]) for k in new[0]}


def _unit(keys: np.ndarray) -> np.ndarray:
    """A hash of integer keys to [0, 1) (splitmix64): the same jitter on every process."""
    z = keys.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)).astype(np.float64) / float(1 << 53)
