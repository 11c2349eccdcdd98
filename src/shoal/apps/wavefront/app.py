"""The wavefront app: Lassen's narrow-band front tracking on a structured grid cut into tiles.

Nodes sit at the zones' corners; a tile owns the nodes at its zones' low corners (and the
grid's last ones on its high sides) and keeps two layers of its neighbours' around them. Each
node carries a state (:data:`~.kernels.UNREACHED`, ``NEARBY``, ``NARROWBAND``, ``REACHED``), a
level (signed distance to the front, positive ahead), an image point (its nearest point on the
front) and its arrival time. One step is one Lassen iteration, three phases:

``front``     (halo: node data of the band within two layers) sources that fire seed the band;
              zones the band touches with levels of both signs are the surface; band nodes
              behind the front and off the surface are reached; the tile's nodes of zones next
              to the surface join as nearby; a facet per surface zone from its corner levels.
              Work: band nodes.
``distances`` (halo: the facets within twice the band's width) nearby nodes take the distance
              to the nearest facet and join the band; the tile's least time of arrival over band
              nodes off the surface, reduced by ``min`` with the band's size (``sum``). Work:
              band and nearby nodes.
``advance``   ``dt = 0.5 min(level / v)``, at most 1.05 times the last; levels fall by ``v dt``,
              image points follow, a node crossing 0 is reached at ``t + level / v``. Work:
              band nodes.

Every node's value is computed by its owner from values that do not depend on the tiling, and
every minimum is exact, so the arrival times are bitwise the same for any tiling, placement,
worker and rank count. Lassen's third exchange (the front sent again after the time integral)
carries nothing this layout needs: the node data already refresh every copy the next phase reads.
"""

from __future__ import annotations

import functools
import logging
import math

import numpy as np

from ...errors import ShoalError
from ...log import FILE_ONLY
from ...runtime.app import App, Phase, StepContext
from ...tiling import Tiling
from .halos import route_facets, route_nodes
from .kernels import (
    MAXV,
    NARROWBAND,
    PAD,
    SHAPE,
    UNREACHED,
    UNSET,
    VERTS,
    advance,
    distances,
    facet_cells,
    fires,
    front,
    geometry,
    search_order,
    time_step,
)
from .params import WavefrontParams

GHOST = 2  # node layers of the neighbours a tile keeps: nearby nodes read surface zones two zones off
TRANSIENT = ("surf", "nearby", "facets")  # what a step's phases hand on to the next
SCRATCH = "fhead"  # the facet lists' heads (kernels.distances), kept all -1 between iterations
NOTHING = np.zeros(0, np.int64)

logger = logging.getLogger("shoal")


class WavefrontApp(App):
    """See the module docstring; the steps are in :mod:`.kernels`, the facets in :mod:`.facets`."""

    name = "wavefront"
    phases = (Phase("front", reads="all", pack="pack_nodes", work="band nodes"),
              Phase("distances", reads="all", pack="pack_facets", reduction=("min", "sum"),
                    work="band and nearby nodes"),
              Phase("advance", work="band nodes"))
    transient = (*TRANSIENT, SCRATCH)
    # The native plan gives the Python executor's bits, but its halo staging holds every link's
    # worst case of facets, 8 copies over: about 560 MB at 64 tiles, no faster than Python here.
    native_by_default = False

    def __init__(self, params: WavefrontParams, steps: int):
        params.validate()
        self.p = params
        self.grid = tuple(int(n) for n in params.cells)
        self.ndim = len(self.grid)
        self.h = params.h
        self.v = float(params.speed)
        # the band's width: a zone's longest edge plus its diagonal
        self.bw = self.h * (1.0 + math.sqrt(self.ndim))
        # zones whose facets a node may take: their centres within 2 bw
        self.reach = int(math.ceil(2.0 * self.bw / self.h))
        self.search = search_order(self.ndim, 2.0 * self.bw / self.h)
        self.origin = np.zeros(3)
        self.origin[:self.ndim] = params.origin
        points = params.points()
        self.centres = np.ascontiguousarray(points[:, :3])
        self.delays = np.ascontiguousarray(points[:, 3])
        self.radius = float(params.radius) * self.h
        self.log = True  # a line per iteration in the run's log (not for the compiling run)

    # ----- tiles ------------------------------------------------------------------------------
    def decompose(self, count: int, halo: int = 1) -> Tiling:
        """About ``count`` tiles, none narrower than the facets' reach (``2 bw`` in zones): the
        nearest count that allows it when ``count`` does not."""
        try:
            return Tiling.from_count(self.grid, count, max(halo, self.reach))
        except ShoalError:
            per_axis = max(1, round(count ** (1 / self.ndim)))
            counts = [max(1, min(per_axis, n // self.reach)) for n in self.grid]
            return Tiling.from_counts(self.grid, counts, max(halo, self.reach))

    def check_tiling(self, tiling: Tiling) -> None:
        """Tiles at least as wide as the facets' reach, so that a tile's facets reach no farther
        than its neighbours."""
        super().check_tiling(tiling)
        narrowest = min(int(np.diff(e).min()) for e in tiling.edges)
        if narrowest < self.reach:
            raise ShoalError(f"app 'wavefront': a tile is {narrowest} zones wide; tiles must be at least {self.reach} "
                             "zones wide (twice the band's width) to take facets from their neighbours only: use "
                             "fewer tiles")

    @functools.lru_cache(maxsize=4096)  # noqa: B019  (one app per run; tilings are few)
    def _geo(self, tiling: Tiling, tile: int) -> np.ndarray:
        return geometry(tiling.lo[tile], tiling.hi[tile], self.grid, GHOST)

    @functools.lru_cache(maxsize=4096)  # noqa: B019
    def _routes(self, tiling: Tiling, tile: int) -> tuple[list[int], np.ndarray, np.ndarray]:
        """The neighbours, their padded boxes (``geo`` rows) and which of them lies in each
        direction (``slot``, see :func:`~.kernels.route_nodes`)."""
        near = [int(n) for n in tiling.neighbours[tile]]
        intos = np.zeros((len(near), len(self._geo(tiling, tile))), np.int64)
        slot = np.full(27, -1, np.int64)
        here = np.array(tiling.tile_index(tile))
        for i, n in enumerate(near):
            intos[i] = self._geo(tiling, n)
            d = np.zeros(3, np.int64)
            d[:self.ndim] = np.array(tiling.tile_index(n)) - here
            slot[(d[0] + 1) * 9 + (d[1] + 1) * 3 + d[2] + 1] = i
        return near, intos, slot

    def init_tile(self, tile: int, tiling: Tiling) -> dict:
        geo = self._geo(tiling, tile)
        size = int(np.prod(geo[SHAPE:SHAPE + 3]))
        return {"state": np.full(size, UNREACHED, np.int8), "level": np.full(size, UNSET),
                "T": np.full(size, UNSET), "img": np.zeros((size, 3)), "band": NOTHING.copy(),
                "left": NOTHING.copy(), "writes": np.zeros(1, np.int64), "clock": np.zeros(2),
                "fired": np.zeros(len(self.delays), np.bool_)}

    def time(self, step: int, states: dict) -> float:
        """Simulated seconds, kept by every tile."""
        return float(next(iter(states.values()))["clock"][0]) if states else float("nan")

    def prepare(self, tiling: Tiling) -> None:
        """Compile the kernels: a small grid of the same dimension, one source in its middle,
        run on two tiles until the front has crossed a tile's edge."""
        n = 2 * self.reach
        cells = [n] * self.ndim
        small = WavefrontApp(WavefrontParams(cells=cells, extent=[1.0] * self.ndim, origin=[0.0] * self.ndim,
                                             sources=[[0.5] * self.ndim + [0.0]]), 1)
        small.log = False
        two = Tiling.from_counts(small.grid, [2] + [1] * (self.ndim - 1), small.reach)
        states = {t: small.init_tile(t, two) for t in range(2)}
        reduced: dict = {}
        for step in range(8):
            for phase in small.phases:
                packed = {t: getattr(small, phase.pack)(states[t], t, two) for t in states} if phase.halo else {}
                values = []
                for t in states:
                    halos = {s: packed[s][t] for s in packed if s != t}
                    got = getattr(small, phase.method)(t, states[t], halos, StepContext(step, reduced), two)
                    if phase.reduction:
                        values.append(got[1])
                if phase.reduction:
                    reduced = {phase.name: (min(v[0] for v in values), sum(v[1] for v in values))}

    # ----- the native executor ----------------------------------------------------------------
    def native(self, tiling: Tiling):
        """The three phases as compiled kernels calling the ones above (:mod:`.native`); node
        and facet halos by compiled packers, the band's lists and the facets at a capacity."""
        from .native import native_plan

        return native_plan(self, tiling)

    # ----- phases -----------------------------------------------------------------------------
    def front(self, tile: int, state: dict, halos: dict, ctx: StepContext, tiling: Tiling) -> int:
        """Sources, the surface zones, reached and nearby nodes, and the tile's facets."""
        t = float(state["clock"][0])
        got = [halos[s] for s in sorted(halos) if len(halos[s][0])]
        if not (len(state["band"]) or got or fires(t, state["fired"], self.delays, self.radius, self.v)):
            state["left"] = NOTHING
            state.update(self._quiet_front())
            return 0
        if got:
            idx, st, lv = (np.concatenate([g[k] for g in got]) for k in range(3))
        else:
            idx, st, lv = NOTHING, np.zeros(0, np.int8), np.zeros(0)
        geo = self._geo(tiling, tile)
        state["band"], state["left"], state["surf"], state["nearby"], state["facets"], work = ctx.kernel(
            front, geo, self.origin, self.h, self.v, self.bw, t, state["state"], state["level"], state["T"],
            state["img"], state["band"], state["writes"], idx, st, lv, self.centres, self.delays, self.radius,
            state["fired"])
        return int(work)

    def _quiet_front(self) -> dict:
        width = 2 if self.ndim == 2 else MAXV
        return {"surf": np.zeros(0, np.int8), "nearby": NOTHING, "facets": np.zeros((0, VERTS + 3 * width))}

    def distances(self, tile: int, state: dict, halos: dict, ctx: StepContext,
                  tiling: Tiling) -> tuple[int, tuple[float, int]]:
        """Nearby nodes to the band at their distance to the front; the tile's least arrival time."""
        if not (len(state["band"]) or len(state["nearby"])):
            return 0, (UNSET, 0)
        parts = [state["facets"], *(halos[s] for s in sorted(halos) if len(halos[s]))]
        facets = np.concatenate(parts) if len(parts) > 1 else parts[0]
        geo = self._geo(tiling, tile)
        if SCRATCH not in state:
            state[SCRATCH] = np.full(facet_cells(geo, self.reach), -1, np.int64)
        band, tmin, work = ctx.kernel(distances, geo, self.reach, *self.search, self.origin, self.h, self.v, self.bw,
                                      state["state"], state["level"], state["img"], state["band"], state["nearby"],
                                      state["surf"], state[SCRATCH], facets)
        state["band"] = band
        return int(work), (float(tmin), len(band))

    def advance(self, tile: int, state: dict, halos: dict, ctx: StepContext, tiling: Tiling) -> int:
        """The time step from the global least arrival time, and the band moved through it."""
        tmin, count = ctx.reduced["distances"]
        clock = state["clock"]
        t, last = float(clock[0]), float(clock[1])
        dt = time_step(tmin, last, self.h, self.v)
        band = state["band"]
        if len(band):
            ctx.kernel(advance, self._geo(tiling, tile), self.origin, self.h, self.v, t, dt, state["level"],
                       state["img"], state["T"], band, state["writes"])
        clock[0], clock[1] = t + dt, dt
        for name in TRANSIENT:
            state.pop(name, None)
        if tile == 0 and self.log:
            logger.info("iteration %d: t = %.6g s, dt = %.4g s, %d band nodes", ctx.step, t + dt, dt, int(count),
                        extra=FILE_ONLY)
        return len(band)

    # ----- halos ------------------------------------------------------------------------------
    def pack_nodes(self, state: dict, src: int, tiling: Tiling) -> dict[int, tuple]:
        """Each neighbour gets the state and level of the band nodes (and of those just reached)
        that lie in its padded box, at their indices there."""
        near, intos, slot = self._routes(tiling, src)
        if not (len(state["band"]) or len(state["left"])):
            empty = (NOTHING, np.zeros(0, np.int8), np.zeros(0))
            return dict.fromkeys(near, empty)
        idx, st, lv, starts = route_nodes(self._geo(tiling, src), intos, slot, state["state"], state["level"],
                                          state["band"], state["left"])
        return {n: (idx[starts[i]:starts[i + 1]], st[starts[i]:starts[i + 1]], lv[starts[i]:starts[i + 1]])
                for i, n in enumerate(near)}

    def pack_facets(self, state: dict, src: int, tiling: Tiling) -> dict[int, np.ndarray]:
        """Each neighbour gets the facets of the tile's zones within its reach."""
        near, _, slot = self._routes(tiling, src)
        facets = state["facets"]
        if not len(facets):
            return dict.fromkeys(near, facets)
        rows, starts = route_facets(self._geo(tiling, src), self.reach, slot, facets)
        return {n: rows[starts[i]:starts[i + 1]] for i, n in enumerate(near)}

    # ----- output -----------------------------------------------------------------------------
    def gather(self, states: dict, tiling: Tiling) -> dict[str, np.ndarray]:
        """Every node's arrival time, level, state and image point on the global node grid (the
        largest float where the front has not been), the arrival times written (summed in tile
        order), the band's nodes and the time."""
        shape = tuple(n + 1 for n in self.grid)
        out = {"arrival": np.empty(shape), "level": np.empty(shape), "state": np.empty(shape, np.int8),
               "image": np.empty((*shape, 3))}
        writes = 0
        for tile in sorted(states):
            state = states[tile]
            geo = self._geo(tiling, tile)
            padded = tuple(int(s) for s in geo[SHAPE:SHAPE + self.ndim])
            local, glob = [], []
            for a in range(self.ndim):
                lo, hi = int(tiling.lo[tile][a]), int(tiling.hi[tile][a])
                last = 1 if hi == self.grid[a] else 0
                local.append(slice(int(geo[PAD + a]), int(geo[PAD + a]) + hi - lo + last))
                glob.append(slice(lo, hi + last))
            local, glob = tuple(local), tuple(glob)
            out["arrival"][glob] = state["T"].reshape(padded)[local]
            out["level"][glob] = state["level"].reshape(padded)[local]
            out["state"][glob] = state["state"].reshape(padded)[local]
            out["image"][glob] = state["img"].reshape(*padded, 3)[local]
            writes += int(state["writes"][0])
        out["writes"] = np.array(writes, np.int64)
        out["time"] = np.array(self.time(0, states))
        out["band"] = np.array(int(np.count_nonzero(out["state"] == NARROWBAND)), np.int64)
        return out

    def exact(self) -> np.ndarray:
        """The arrival time a perfect front gives every node: ``min_i (delay_i + |x - c_i| / v)``."""
        axes = [self.p.origin[a] + self.h * np.arange(n + 1) for a, n in enumerate(self.grid)]
        x = np.meshgrid(*axes, indexing="ij")
        best = np.full(x[0].shape, np.inf)
        for c, delay in zip(self.centres, self.delays, strict=True):
            r = np.sqrt(sum((x[a] - c[a]) ** 2 for a in range(self.ndim)))
            best = np.minimum(best, delay + r / self.v)
        return best

    def frame(self, gathered: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The arrival time (NaN where the front has not been) and the node states on the node
        grid, the domain's extent, the sources and the time."""
        from .drawing import frame

        return frame(self, gathered)

    def draw(self, frame: dict[str, np.ndarray], ax, scale: tuple[float, float] | None = None):
        """The arrival time (in 3D the middle slice across z), its contours, the band and the sources."""
        from .drawing import draw

        return draw(frame, ax, scale)
