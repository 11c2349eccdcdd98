"""2D weakly compressible SPH on tiles (Vertanen §2.2; Monaghan's breaking dam).

Three phases per step:

``rates``   (halo: the particles in the ring of cells around the tile) density, velocity
            and thermal-energy rates; each tile proposes a time step, reduced by ``min``
            one step late (a lagged reduction: no barrier in the step). Work: the candidate
            particle pairs weighed (own particle, any other in its 3 x 3 cells)
``move``    leapfrog with the global step, the smallest of the steps proposed by the
            previous step's rates (at step 0, of the initial state's); inflow particles are
            created and outflow particles deleted here. Work: the particles moved
``migrate`` (halo: the particles that moved into the tile's cells) the tile keeps its own
            particles and takes in its immigrants, sorted by (cell, id). Work: the particles
            the tile holds after it
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from dataclasses import dataclass, field

import numpy as np

from ...errors import ShoalError
from ...runtime.app import App, Phase, StepContext
from ...runtime.timing import lock_free
from ...tiling import Tiling
from ..particles import (
    FLUID,
    CellGrid,
    concat,
    emigrants_for_neighbours,
    empty_ring,
    fields_of,
    in_box,
    in_cell_order,
    locate,
    neighbour_boxes,
    outside_rows,
    refuse_move,
    resettle,
    ring_payloads,
    ring_table,
    settle,
    sort_by_cell,
    take,
)
from .drawing import draw_particles
from .geometry import assemble, channel_walls, cylinder, lattice_block, line, remove_overlaps, tank_walls
from .kernels2d import RING_COLUMNS, move_tile, rates_tile, ring_rows


@dataclass
class SPH2DParams:
    """Parameters of the 2D SPH app (the ``[app]`` table)."""

    layout: str = "tank"  # "tank": closed-bottom tank; "channel": open channel with inflow/outflow
    tank: list[float] = field(default_factory=lambda: [4.0, 2.4])  # width (length), height in m
    fluid: list[list[float]] = field(default_factory=lambda: [[0.0, 0.0, 1.0, 2.0]])  # x0 y0 x1 y1
    cylinders: list[list[float]] = field(default_factory=list)  # cx cy radius
    lines: list[list[float]] = field(default_factory=list)  # x0 y0 x1 y1
    dx: float = 0.02  # particle spacing (m)
    h_factor: float = 1.3  # smoothing length h = h_factor * dx; support 2h
    rho0: float = 1000.0
    gamma: float = 7.0
    c0_factor: float = 10.0  # c0 = factor * max(sqrt(g H), inflow speed)
    alpha: float = 0.1  # artificial viscosity
    beta: float = 0.0
    gravity: list[float] = field(default_factory=lambda: [0.0, -9.81])
    wall_layers: int = 3
    cfl: float = 0.2
    hydrostatic: bool = True  # start the fluid at hydrostatic density
    gravity_ramp: float = 0.0  # seconds over which gravity is switched on smoothly (Adami et al. 2012)
    inflow_velocity: float = 0.0  # channel: speed of the fluid pumped in at x = 0
    halo_every: int = 1  # lazy updates (Vertanen 5.4.6): exchange halos and migrants every k steps

    def validate(self) -> None:
        """Refuse parameters that would run and mean nothing: every number finite, sizes and
        material constants positive, vectors of two components, shapes inside the tank."""
        if self.layout not in ("tank", "channel"):
            raise ShoalError(f"app.layout must be 'tank' or 'channel', got {self.layout!r}")
        for name in ("dx", "h_factor", "rho0", "gamma", "c0_factor", "alpha", "beta", "cfl", "gravity_ramp",
                     "inflow_velocity"):
            value = getattr(self, name)
            if not _number(value):
                raise ShoalError(f"app.{name} must be a finite number, got {value!r}")
        for name in ("dx", "h_factor", "rho0", "gamma", "c0_factor"):
            if getattr(self, name) <= 0:
                raise ShoalError(f"app.{name} must be positive, got {getattr(self, name)}")
        for name in ("alpha", "beta", "gravity_ramp", "inflow_velocity"):
            if getattr(self, name) < 0:
                raise ShoalError(f"app.{name} must be >= 0, got {getattr(self, name)}")
        for name in ("wall_layers", "halo_every"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
                raise ShoalError(f"app.{name} must be an integer >= 1, got {value!r}")
        for name in ("tank", "gravity"):
            value = getattr(self, name)
            if not (isinstance(value, (list, tuple)) and len(value) == 2 and all(map(_number, value))):
                raise ShoalError(f"app.{name} must be two finite numbers (x, y), got {value!r}")
        if min(self.tank) <= 0:
            raise ShoalError(f"app.tank must be [width, height] > 0, got {self.tank}")
        if self.dx >= min(self.tank):
            raise ShoalError(f"app.dx = {self.dx} m must be smaller than the tank {self.tank}")
        for name, width in (("fluid", 4), ("cylinders", 3), ("lines", 4)):
            items = getattr(self, name)
            if not isinstance(items, (list, tuple)):
                raise ShoalError(f"app.{name} must be a list of [{width} numbers], got {items!r}")
            for item in items:
                if not (isinstance(item, (list, tuple)) and len(item) == width and all(map(_number, item))):
                    raise ShoalError(f"every app.{name} entry needs {width} finite numbers, got {item!r}")
        if not self.fluid:
            raise ShoalError("app.fluid needs at least one block")
        width, height = self.tank
        for x0, y0, x1, y1 in self.fluid:
            if not (0 <= x0 < x1 <= width and 0 <= y0 < y1 <= height):
                raise ShoalError(f"every app.fluid block x0 y0 x1 y1 must be non-empty and inside the tank "
                                 f"[0, {width}] x [0, {height}], got {[x0, y0, x1, y1]}")
        for cx, cy, r in self.cylinders:
            if r <= 0 or not (0 <= cx <= width and 0 <= cy <= height):
                raise ShoalError(f"every app.cylinders entry needs a radius > 0 and a centre inside the tank, "
                                 f"got {[cx, cy, r]}")
        for x0, y0, x1, y1 in self.lines:
            if x0 == x1 and y0 == y1:
                raise ShoalError(f"every app.lines entry needs two distinct ends, got {[x0, y0, x1, y1]}")
        if not 0 < self.cfl <= 0.5:
            raise ShoalError(f"app.cfl must be in (0, 0.5], got {self.cfl}")
        if self.layout == "channel" and self.inflow_velocity <= 0:
            raise ShoalError("a channel needs app.inflow_velocity > 0")

    def particle_count(self) -> int:
        """About how many particles the run holds: fluid blocks on the lattice, the walls'
        layers along the tank, cylinders and lines (capped at 2^62, so absurd spacings stay numbers)."""
        dx, layers = self.dx, self.wall_layers
        width, height = self.tank
        fluid = sum((x1 - x0) * (y1 - y0) for x0, y0, x1, y1 in self.fluid) / dx**2
        walls = layers * ((width + 2 * height) if self.layout == "tank" else 2 * width) / dx
        walls += sum(layers * 2 * math.pi * r / dx for _, _, r in self.cylinders)
        walls += sum(layers * (math.hypot(x1 - x0, y1 - y0) / dx + 1) for x0, y0, x1, y1 in self.lines)
        return int(min(fluid + walls, 2.0**62))


def _number(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


# Bytes a particle costs: its stored fields (id, kind, x, v, vh, cell, acc; rho, rhoh, e, m, drho,
# de), the copy of the initial state the app keeps (without the rates), and the rates kernel's
# arrays of a step (the merged fields and indices, eight per-pair sums, the own particles' rates).
BYTES_PER_PARTICLE = (8 + 1 + 5 * 16 + 6 * 8) + (8 + 1 + 4 * 16 + 4 * 8) + (2 * 16 + 2 * 8 + 1 + 2 * 8 + 1 + 7 * 8 + 48)


def sph2d_memory(params: SPH2DParams) -> int:
    """Bytes of a 2D run's state, from the particle count its parameters imply."""
    return params.particle_count() * BYTES_PER_PARTICLE


NO_RING = empty_ring(RING_COLUMNS)
_ring_rows = lock_free(ring_rows)
_rates_tile = lock_free(rates_tile)
_move_tile = lock_free(move_tile)

RATES, MOVE, MIGRATE = (
    # The time step is reduced over all tiles one step late: a step's moves need not wait for
    # the slowest tile's rates, only for the previous step's, long done by then.
    Phase("rates", halo=True, reduction="min", lagged=True, pack="pack_ring", work="particle pairs"),
    Phase("move", work="particles"),
    Phase("migrate", halo=True, pack="pack_emigrants", work="particles"),
)


class SPH2DApp(App):
    """See the module docstring."""

    name = "sph2d"
    phases = (RATES, MOVE, MIGRATE)
    # Set by move, read by migrate: the rows of the particles that left the tile's box, and
    # whether the particles are still in (cell, id) order.
    transient = ("outside", "sorted")

    def __init__(self, params: SPH2DParams, steps: int):
        params.validate()
        self.p = p = params
        self.ndim = 2
        self.h = p.h_factor * p.dx
        g = math.hypot(*p.gravity)
        depth = max(b[3] for b in p.fluid) - min(b[1] for b in p.fluid)
        self.c0 = p.c0_factor * max(math.sqrt(g * depth) if g > 0 else 0.0, p.inflow_velocity, 1e-3)
        self.B = self.c0**2 * p.rho0 / p.gamma
        self.mass = p.rho0 * p.dx * p.dx
        margin = (p.wall_layers + 1) * p.dx
        width, height = p.tank
        if p.layout == "tank":
            origin, size = (-margin, -margin), (width + 2 * margin, height + margin)
        else:
            origin, size = (0.0, -margin), (width, height + 2 * margin)
        self.cells = CellGrid(origin, size, 2 * self.h)
        self.grid = self.cells.shape
        self.reach = self.cells.reach()
        # A channel deletes the particles that reach its last cells (the outflow).
        self.outflow_x = p.tank[0] - self.cells.cell[0] if p.layout == "channel" else math.inf
        self._initial = self._build_initial()
        self.first_inflow_id = int(self._initial["id"].max()) + 1 if len(self._initial["id"]) else 0
        self.inflow_rows = self._inflow_rows()

    # ----- initial state ------------------------------------------------------------------
    def _build_initial(self) -> dict:
        """Fluid blocks, walls and shapes, ids in one global order. The 2D grid (the tank and
        its wall layers) does not clamp: a particle starting outside it is refused, and one
        leaving it later is deleted (an outflow)."""
        p = self.p
        width, height = p.tank
        if p.layout == "tank":
            walls = [tank_walls(width, height, p.dx, p.wall_layers)]
        else:
            walls = [channel_walls(width, height, p.dx, p.wall_layers)]
        walls += [cylinder(*c, p.dx, p.wall_layers) for c in p.cylinders]
        walls += [line(*ln, p.dx, p.wall_layers) for ln in p.lines]
        walls = np.concatenate(walls)
        fluid = np.concatenate([lattice_block(*b, p.dx) for b in p.fluid])
        fluid = remove_overlaps(fluid, walls, 0.75 * p.dx)
        ids, kind, x = assemble(fluid, walls)
        n = len(ids)
        rho = np.full(n, p.rho0)
        v = np.zeros((n, 2))
        if p.layout == "channel":
            v[kind == FLUID, 0] = p.inflow_velocity
        elif p.hydrostatic:
            top = max(b[3] for b in p.fluid)
            depth = np.clip(top - x[:, 1], 0.0, None)
            rho = p.rho0 * (1.0 + p.rho0 * abs(p.gravity[1]) * depth / self.B) ** (1.0 / p.gamma)
        allp = locate({"id": ids, "kind": kind, "x": x, "v": v, "vh": v.copy(), "rho": rho, "rhoh": rho.copy(),
                       "e": np.zeros(n), "m": np.full(n, self.mass)}, self.cells)
        outside = np.flatnonzero(~self.cells.inside(allp["cell"]))
        if len(outside):
            i = outside[0]
            what = "fluid" if allp["kind"][i] == FLUID else "wall"
            raise ShoalError(f"{len(outside)} initial particles lie outside the cell grid (the tank and its walls), "
                             f"e.g. {what} particle {i} at {tuple(float(f'{c:.4g}') for c in allp['x'][i])} m: keep "
                             "app.cylinders and app.lines inside the tank")
        if not (kind == FLUID).any():
            raise ShoalError(f"app.fluid holds no particle at app.dx = {p.dx} m (blocks smaller than a spacing, or "
                             "inside the walls and shapes)")
        return sort_by_cell(allp, self.cells)

    def _inflow_rows(self) -> np.ndarray:
        if self.p.layout != "channel":
            return np.empty(0)
        return np.arange(self.p.dx / 2, self.p.tank[1] - 1e-12, self.p.dx)

    def initial_reductions(self) -> dict[str, float]:
        """The time step of step 0: the one the initial state's rates propose, computed on the
        whole world at once (the same for any tiling)."""
        whole = Tiling.from_count(self.grid, 1)
        _, dt = self.rates(0, self.init_tile(0, whole), {}, StepContext(0), whole)
        return {"rates": dt}

    def proxy(self) -> tuple[SPH2DParams, float]:
        """The same world at twice the particle spacing: a quarter of the particles, and time
        steps twice as long (they scale with h), so half as many steps."""
        return dataclasses.replace(self.p, dx=2 * self.p.dx), 0.5

    def time(self, step: int, states: dict) -> float:
        """The tiles' common clock (the sum of the time steps so far)."""
        return float(next(iter(states.values()))["t"]) if states else float("nan")

    def init_tile(self, tile: int, tiling: Tiling) -> dict:
        mine = take(self._initial, in_box(self._initial, tiling.lo[tile], tiling.hi[tile]))
        n = len(mine["id"])
        return {**mine, "acc": np.zeros((n, 2)), "drho": np.zeros(n), "de": np.zeros(n),
                "t": 0.0, "created": 0, "deleted": 0}

    def prepare(self, tiling: Tiling) -> None:
        """Compile the kernels before the timed run, on a copy of the fullest tile."""
        sizes = [int(in_box(self._initial, tiling.lo[t], tiling.hi[t]).sum())
                 for t in range(tiling.ntiles)]
        tile = int(np.argmax(sizes))
        state = self.init_tile(tile, tiling)
        halos = {int(n): self.pack_ring(self.init_tile(int(n), tiling), int(n), tiling)[tile]
                 for n in tiling.neighbours[tile]}
        _, dt = self.rates(tile, state, halos, StepContext(0), tiling)
        self.move(tile, state, {}, StepContext(0, {"rates": dt}), tiling)
        self.pack_ring(state, tile, tiling)  # compile the packers too
        # The migration, and what only migrants need: packing them, settling (a still tile skips both).
        self.migrate(tile, state, {}, StepContext(0), tiling)
        self.pack_emigrants({**state, "outside": np.arange(len(state["id"]))}, tile, tiling)
        settle(take(state, slice(None)), self.cells, tiling, tile, [])

    def native(self, tiling: Tiling):
        """The three phases as compiled kernels on particles at a capacity, halos by compiled
        packers (:mod:`.native2d`); a channel and lazy halos stay in Python."""
        from .native2d import native_plan

        return native_plan(self, tiling)

    # ----- phases ---------------------------------------------------------------------------
    def halo_wanted(self, phase: Phase, step: int) -> bool:
        """Lazy updates: halos every k-th step, migrants on the step before (held until then)."""
        k = self.p.halo_every
        return step % k == 0 if phase is RATES else (step + 1) % k == 0

    def pack_ring(self, state: dict, src: int, tiling: Tiling) -> dict[int, np.ndarray]:
        """The particles in the ring of cells around each neighbour, with what the rates read:
        rows of :func:`~shoal.apps.sph.kernels2d.ring_rows`."""
        los, his, inner, nbrs = neighbour_boxes(tiling, src, 1)
        if len(state["id"]) == 0:
            return dict.fromkeys(nbrs, NO_RING)
        return ring_payloads(_ring_rows(state["cell"], state["id"], state["x"], state["v"], state["rho"], state["m"],
                                        state["kind"], los, his, inner[0], inner[1]), nbrs, NO_RING)

    def pack_emigrants(self, state: dict, src: int, tiling: Tiling) -> dict[int, dict]:
        """The particles that moved into each neighbour's cells, whole."""
        return emigrants_for_neighbours(state, tiling, src)

    def rates(self, tile: int, state: dict, halos: dict, ctx: StepContext, tiling: Tiling) -> tuple[int, float]:
        """Density, velocity and energy rates of the tile's particles; the time step they allow."""
        p = self.p
        n = len(state["id"])
        if n == 0:
            state.update(acc=np.zeros((0, 2)), drho=np.zeros(0), de=np.zeros(0))
            return 0, np.inf
        # The fixed global order: halos sorted by source tile id before merging. Between lazy
        # updates the tile reuses the halos of the last exchange.
        if self.halo_wanted(RATES, ctx.step):
            state["halo_cache"] = [halos[k] for k in sorted(halos)]
        ordered = state.get("halo_cache", [])
        ramp = self._gravity_factor(state["t"])
        gx, gy = ramp * p.gravity[0], ramp * p.gravity[1]
        # own particles come out in their (cell, id) order: the state's order
        acc, drho, de, finite, dt, pairs = _rates_tile(
            state["cell"], state["id"], state["x"], state["v"], state["rho"], state["m"], state["kind"],
            ring_table(ordered, NO_RING), tiling.lo[tile], tiling.hi[tile], self.h, p.rho0, self.c0, self.B, p.gamma,
            p.alpha, p.beta, gx, gy, p.cfl)
        if not finite:
            raise ShoalError("SPH rates are not finite: the simulation blew up (lower app.cfl or app.dx)")
        state.update(acc=acc, drho=drho, de=de)
        return int(pairs), float(dt)

    def _gravity_factor(self, t: float) -> float:
        """Smooth switch-on of gravity: 0.5 (sin((t / T - 0.5) pi) + 1) for t < T."""
        T = self.p.gravity_ramp
        if T <= 0 or t >= T:
            return 1.0
        return 0.5 * (math.sin((t / T - 0.5) * math.pi) + 1.0)

    def move(self, tile: int, state: dict, halos: dict, ctx: StepContext, tiling: Tiling) -> int:
        """Leapfrog with the global time step; inflow particles created, outflow ones deleted."""
        p = self.p
        dt = ctx.reduced["rates"]
        if not math.isfinite(dt) or dt <= 0:
            raise ShoalError(f"time step {dt} is not positive and finite")
        t0 = state["t"]
        before = state["cell"]
        n = len(before)
        if n == 0 and p.layout != "channel":
            state["t"] = t0 + dt  # an empty tile keeps time with the others
            state.update(outside=np.zeros(0, np.int64), sorted=True)
            return 0
        if p.layout == "channel":
            self._drive_inflow(state)
        cells = self.cells
        state["cell"], keep, kept, worst, outside, ordered = _move_tile(
            state["x"], state["v"], state["vh"], state["rho"], state["rhoh"], state["e"], state["kind"], state["acc"],
            state["drho"], state["de"], state["id"], before, dt, t0 == 0.0, p.rho0, cells.origin, cells.cell,
            cells.counts, self.outflow_x, *self.reach, tiling.lo[tile], tiling.hi[tile])
        state["t"] = t0 + dt
        if kept < n:  # out of the grid, or through the outflow
            state["deleted"] += n - kept
            self._keep(state, keep)
            before = before[keep]
        refuse_move(worst, before, state, cells, "lower app.cfl")
        if p.layout == "channel" and self._create_inflow(tile, state, t0, state["t"], tiling):
            outside, ordered = outside_rows(state, tiling, tile), in_cell_order(state)
        state.update(outside=outside, sorted=ordered)
        return n

    def _keep(self, state, mask):
        for k in (*fields_of(state), "acc", "drho", "de"):
            state[k] = state[k][mask]

    def _drive_inflow(self, state):
        """Particles in the inflow zone move at the pumped speed, whatever the forces say."""
        zone = (state["kind"] == FLUID) & (state["x"][:, 0] < 2 * self.h)
        state["v"][zone] = (self.p.inflow_velocity, 0.0)
        state["vh"][zone] = (self.p.inflow_velocity, 0.0)
        state["acc"][zone] = 0.0

    def _create_inflow(self, tile, state, t0, t1, tiling) -> bool:
        """Column k enters at x = 0 at time k dx / U; ids follow (k, row): tiling-independent.
        Whether any particle entered the tile."""
        p = self.p
        U, rows = p.inflow_velocity, self.inflow_rows
        k0 = math.floor(t0 * U / p.dx) + 1
        k1 = math.floor(t1 * U / p.dx)
        if k1 < k0:
            return False
        ks = np.arange(k0, k1 + 1)
        xs = 0.5 * p.dx + U * (t1 - ks * p.dx / U)  # enters at dx/2, then travels with U
        X = np.repeat(xs, len(rows))
        Y = np.tile(rows, len(ks))
        ids = self.first_inflow_id + (np.repeat(ks, len(rows)) - 1) * len(rows) + np.tile(np.arange(len(rows)),
                                                                                            len(ks))
        n = len(ids)
        new = {"id": ids.astype(np.int64), "kind": np.zeros(n, np.int8), "x": np.stack([X, Y], 1),
               "v": np.tile([U, 0.0], (n, 1)), "vh": np.tile([U, 0.0], (n, 1)), "rho": np.full(n, p.rho0),
               "rhoh": np.full(n, p.rho0), "e": np.zeros(n), "m": np.full(n, self.mass)}
        locate(new, self.cells)
        mine = in_box(new, tiling.lo[tile], tiling.hi[tile])
        if not mine.any():
            return False
        new = take(new, mine)
        n = len(new["id"])
        state["created"] += n
        for k in fields_of(state):
            state[k] = np.concatenate([state[k], new[k]])
        state["acc"] = np.concatenate([state["acc"], np.zeros((n, 2))])
        state["drho"] = np.concatenate([state["drho"], np.zeros(n)])
        state["de"] = np.concatenate([state["de"], np.zeros(n)])
        return True

    def migrate(self, tile: int, state: dict, halos: dict, ctx: StepContext, tiling: Tiling) -> int:
        """Keep the tile's own particles, take in its immigrants, sorted by (cell, id)."""
        if self.halo_wanted(MIGRATE, ctx.step):
            resettle(state, halos, self.cells, tiling, tile, "exchange migrants more often (a smaller app.halo_every)")
        else:
            # Lazy updates: emigrants wait in place for the next exchange; the order the
            # kernels rely on, (cell, id), is restored all the same.
            state.pop("outside", None)
            if not state.pop("sorted", False):
                state.update(sort_by_cell(take(state, slice(None)), self.cells))
        return len(state["id"])

    # ----- results ----------------------------------------------------------------------------
    def draw(self, frame: dict, ax, scale: tuple[float, float] | None = None):
        """The fluid's particles coloured by speed, walls grey (x-y plane)."""
        return draw_particles(frame, ax, scale)

    def gather(self, states: dict, tiling: Tiling) -> dict[str, np.ndarray]:
        allp = concat([take(s, slice(None)) for s in states.values()], 2)
        out = take(allp, np.argsort(allp["id"], kind="stable"))
        out["p"] = self.B * ((out["rho"] / self.p.rho0) ** self.p.gamma - 1.0)
        any_state = next(iter(states.values()))
        out["time"] = np.array(any_state["t"])
        out["created"] = np.array(sum(s["created"] for s in states.values()))
        out["deleted"] = np.array(sum(s["deleted"] for s in states.values()))
        return out

    def initial_count(self) -> int:
        return len(self._initial["id"])
