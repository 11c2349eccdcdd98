"""3D dam break in PARSEC fluidanimate's formulation, on tiles.

Same physics and constants as fluidanimate (Müller et al. 2003 kernels, cell side = support
radius, penalty walls with reflection, 1 ms steps), so speeds and particles compare with it
directly; computed in double precision. Three phases per step, no global reduction (the time
step is fixed):

``density``  (halo: ring particles' positions) poly6 density of own particles
``forces``   (halo: ring particles with their densities) accelerations, walls, leapfrog step
``migrate``  (halo: particles that moved into the tile's cells)

The work of ``density`` and ``forces`` is the candidate particle pairs they weigh (an own
particle and any other in its 3 x 3 x 3 cells), of ``migrate`` the particles the tile holds.

Starts from a generated water column of ``particles`` particles, or from a PARSEC ``.fluid``
file (``input``).
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from dataclasses import dataclass, field
from pathlib import Path

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
    in_box,
    locate,
    neighbour_boxes,
    refuse_move,
    resettle,
    ring_payloads,
    ring_table,
    settle,
    sort_by_cell,
    take,
)
from .drawing import draw_particles
from .kernels3d import (
    DAMPING,
    DOMAIN_MAX,
    DOMAIN_MIN,
    DOUBLE_REST_DENSITY,
    GRAVITY,
    KERNEL_RADIUS_MULTIPLIER,
    MOTION_COLUMNS,
    PAR_SIZE,
    POSITION_COLUMNS,
    STIFFNESS_COLLISIONS,
    STIFFNESS_PRESSURE,
    VISCOSITY,
    density_tile,
    forces_tile,
    ring_rows,
)

# Refused above this many times the CFL estimate (cfl_time_step): far beyond any stable step,
# yet every PARSEC input runs at fluidanimate's 1 ms (in_100K's estimate is 0.85 ms).
CFL_REFUSAL_FACTOR = 10.0
# Bytes a particle costs: its six stored fields (id, cell, x, v, vh, rho), the copy of the
# initial state the app keeps, and the neighbourhood and accelerations of a step.
BYTES_PER_PARTICLE = 2 * (8 + 3 * 8 + 3 * 8 + 3 * 8 + 3 * 8 + 8) + (3 * 8 + 3 * 8 + 8 + 3 * 8 + 8 + 1)
FLUID_HEADER, FLUID_RECORD = 8, 36  # bytes: rest particles per metre and count; 9 float32 per particle
NO_POSITIONS = empty_ring(POSITION_COLUMNS)
NO_MOTION = empty_ring(MOTION_COLUMNS)
_ring_rows = lock_free(ring_rows)
_density_tile = lock_free(density_tile)
_forces_tile = lock_free(forces_tile)


@dataclass
class SPH3DParams:
    """Parameters of the fluidanimate-style 3D app (the ``[app]`` table)."""

    particles: int = 100_000  # size of the generated column
    input: str = ""  # a PARSEC .fluid file to start from instead (its particle count wins)
    column: list[float] = field(default_factory=lambda: [-0.065, -0.08, -0.065, 0.0, 0.04, 0.065])
    time_step: float = 0.001

    def validate(self) -> None:
        """Refuse parameters that would run and mean nothing (reads a ``.fluid`` file's header only)."""
        if not isinstance(self.input, str):
            raise ShoalError(f"app.input must be the path of a .fluid file, got {self.input!r}")
        if self.input:
            fluid_header(self.input)
        elif isinstance(self.particles, bool) or not isinstance(self.particles, numbers.Integral) or self.particles < 8:
            raise ShoalError(f"app.particles must be an integer >= 8, got {self.particles!r}")
        if not (_numbers(self.column) and len(self.column) == 6):
            raise ShoalError(f"app.column must be 6 finite numbers x0 y0 z0 x1 y1 z1, got {self.column}")
        lo, hi = np.array(self.column[:3], float), np.array(self.column[3:], float)
        if np.any(hi <= lo) or np.any(lo < DOMAIN_MIN) or np.any(hi > DOMAIN_MAX):
            raise ShoalError(f"app.column must be x0 y0 z0 x1 y1 z1 inside the tank {DOMAIN_MIN.tolist()} to "
                             f"{DOMAIN_MAX.tolist()}, got {self.column}")
        if not (_number(self.time_step) and self.time_step > 0):
            raise ShoalError(f"app.time_step must be a positive finite number of seconds, got {self.time_step!r}")
        limit = cfl_time_step(self.rest_particles_per_metre())
        if self.time_step > CFL_REFUSAL_FACTOR * limit:
            raise ShoalError(f"app.time_step = {self.time_step:g} s is {self.time_step / limit:.3g} times the CFL "
                             f"estimate {limit:.3g} s (0.4 h / c); at most {CFL_REFUSAL_FACTOR:g} times is accepted")

    def rest_particles_per_metre(self) -> float:
        """fluidanimate's resolution: the input file's, or the generated column's lattice."""
        if self.input:
            return fluid_header(self.input)[0]
        lo, hi = np.array(self.column[:3]), np.array(self.column[3:])
        return float((self.particles / np.prod(hi - lo)) ** (1 / 3))

    def particle_count(self) -> int:
        """Particles the run starts with (the input file's, or about ``particles``)."""
        return fluid_header(self.input)[1] if self.input else int(self.particles)


def _number(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


def _numbers(values) -> bool:
    return isinstance(values, (list, tuple)) and all(map(_number, values))


def cfl_time_step(rest_particles_per_metre: float) -> float:
    """The CFL estimate of the time step, 0.4 h / c, from the parameters alone.

    ``h`` is the support radius; ``c`` the faster of the pressure's sound speed,
    sqrt(STIFFNESS_PRESSURE) (fluidanimate's pressure is k (rho - rho0)), and water falling
    the tank's whole height, sqrt(2 g H).
    """
    h = KERNEL_RADIUS_MULTIPLIER / rest_particles_per_metre
    fall = math.sqrt(2.0 * abs(GRAVITY[1]) * (DOMAIN_MAX[1] - DOMAIN_MIN[1]))
    return 0.4 * h / max(math.sqrt(STIFFNESS_PRESSURE), fall)


def sph3d_memory(params: SPH3DParams) -> int:
    """Bytes of a 3D run's state, from the particle count alone (a ``.fluid`` file's header)."""
    return params.particle_count() * BYTES_PER_PARTICLE


def fluid_header(path: str | Path) -> tuple[float, int]:
    """(rest particles per metre, particle count) of a PARSEC ``.fluid`` file, checked against
    the file's size before anything is read beyond the header."""
    path = Path(path)
    if not path.is_file():
        raise ShoalError(f"app.input: no .fluid file at {path}")
    size = path.stat().st_size
    if size < FLUID_HEADER:
        raise ShoalError(f"{path} is too short to be a .fluid file ({size} bytes)")
    with open(path, "rb") as fh:
        head = fh.read(FLUID_HEADER)
    rppm = float(np.frombuffer(head[:4], "<f4")[0])
    n = int(np.frombuffer(head[4:8], "<i4")[0])
    if n <= 0 or size != FLUID_HEADER + FLUID_RECORD * n:
        raise ShoalError(f"{path} is not a .fluid file: its header claims {n} particles, which take "
                         f"{FLUID_HEADER + FLUID_RECORD * max(n, 0)} bytes, and it has {size}")
    if not (math.isfinite(rppm) and rppm > 0):
        raise ShoalError(f"{path} is not a .fluid file: rest particles per metre is {rppm}")
    return rppm, n


def read_fluid(path: str | Path) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
    """A PARSEC ``.fluid`` file: (rest particles per metre, positions, half-step and full velocities)."""
    rppm, n = fluid_header(path)
    raw = Path(path).read_bytes()[FLUID_HEADER:]
    data = np.frombuffer(raw, "<f4").reshape(n, 9).astype(np.float64)
    finite = np.isfinite(data).all(axis=1)
    if not finite.all():
        raise ShoalError(f"{path}: particle {int(np.argmin(finite))} has a position or velocity that is not finite")
    return rppm, data[:, 0:3], data[:, 3:6], data[:, 6:9]


class FluidAnimate3DApp(App):
    """See the module docstring."""

    name = "sph3d"
    phases = (Phase("density", halo=True, pack="pack_positions", work="particle pairs"),
              Phase("forces", halo=True, pack="pack_densities", work="particle pairs"),
              Phase("migrate", halo=True, pack="pack_emigrants", work="particles"))
    # The density phase's merge order, reused by the forces phase; set by the forces phase for
    # the migration: the rows that left the tile's box, and whether they are still in (cell, id) order.
    transient = ("neighbourhood", "outside", "sorted")

    def __init__(self, params: SPH3DParams, steps: int):
        params.validate()
        self.p = params
        if params.input:
            rppm, x, vh, v = read_fluid(params.input)
        else:
            rppm, x = self._column(params)
            vh, v = np.zeros_like(x), np.zeros_like(x)
        self.rppm = rppm
        self.h = KERNEL_RADIUS_MULTIPLIER / rppm
        self.mass = 0.5 * DOUBLE_REST_DENSITY / rppm**3
        self.density_coeff = self.mass * 315.0 / (64.0 * math.pi * self.h**9)
        self.pressure_coeff = 3.0 * 15.0 / (math.pi * self.h**6) * 0.5 * STIFFNESS_PRESSURE * self.mass
        self.viscosity_coeff = VISCOSITY * 45.0 / (math.pi * self.h**6) * self.mass
        self._remedy = f"lower app.time_step (now {params.time_step:g} s; CFL estimate {cfl_time_step(rppm):.3g} s)"
        size = DOMAIN_MAX - DOMAIN_MIN
        # fluidanimate: cells = floor(range / h) per axis, so every cell side is >= h.
        self.cells = CellGrid(DOMAIN_MIN, size, self.h, clamp=True)
        self.grid = self.cells.shape
        self.reach = self.cells.reach()
        self._refuse_outside(x)
        n = len(x)
        self._initial = sort_by_cell(locate({
            "id": np.arange(n, dtype=np.int64), "x": x, "v": v, "vh": vh, "rho": np.zeros(n)}, self.cells), self.cells)

    def _refuse_outside(self, x: np.ndarray) -> None:
        """Refuse particles that start outside the cell grid: more than one cell beyond the tank.

        Within one cell of a wall a particle sits in the edge cell (fluidanimate clamps cells)
        and the wall pushes it back: PARSEC's own inputs start up to 0.8 h beyond the walls
        (``in_35K``), a cell being at least h. Farther out it has left the world.
        """
        lo, hi = self.cells.reach()
        out = np.flatnonzero(np.any((x < lo) | (x > hi), axis=1))
        if len(out):
            where = self.p.input or "the generated column"
            raise ShoalError(f"{where}: {len(out)} particles start outside the cell grid, e.g. particle {out[0]} at "
                             f"{tuple(float(f'{c:.4g}') for c in x[out[0]])} m, more than one cell "
                             f"({self.cells.cell.max():.3g} m) beyond the tank {DOMAIN_MIN.tolist()} to "
                             f"{DOMAIN_MAX.tolist()}")

    @staticmethod
    def _column(p: SPH3DParams) -> tuple[float, np.ndarray]:
        """A block of ``p.particles`` particles on a lattice at rest spacing 1 / rppm."""
        lo, hi = np.array(p.column[:3]), np.array(p.column[3:])
        rppm = p.rest_particles_per_metre()
        axes = [np.arange(a + 0.5 / rppm, b, 1 / rppm) for a, b in zip(lo, hi, strict=True)]
        pts = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, 3)
        return float(rppm), pts

    def proxy(self) -> tuple[SPH3DParams, float]:
        """The same column with an eighth of the particles (twice the spacing); fluidanimate's
        time step is fixed, so one proxy step per step."""
        n = len(self._initial["id"])
        return dataclasses.replace(self.p, input="", particles=max(8, n // 8)), 1.0

    def time(self, step: int, states: dict) -> float:
        """fluidanimate's fixed time step times the steps done."""
        return step * self.p.time_step

    def init_tile(self, tile: int, tiling: Tiling) -> dict:
        return {**take(self._initial, in_box(self._initial, tiling.lo[tile], tiling.hi[tile])), "step": 0}

    def initial_count(self) -> int:
        return len(self._initial["id"])

    def prepare(self, tiling: Tiling) -> None:
        """Compile the kernels on a copy of one tile before the timed run."""
        tile = int(np.argmax([len(self.init_tile(t, tiling)["id"]) for t in range(tiling.ntiles)]))
        state = self.init_tile(tile, tiling)
        neighbours = {int(n): self.init_tile(int(n), tiling) for n in tiling.neighbours[tile]}
        for nb in neighbours.values():
            nb["rho"][:] = 0.5 * DOUBLE_REST_DENSITY  # stand-in densities for the compile run
        for pack, run in ((self.pack_positions, self.density), (self.pack_densities, self.forces)):
            halos = {n: pack(st, n, tiling)[tile] for n, st in neighbours.items()}
            run(tile, state, halos, StepContext(0), tiling)
        # The migration, and what only migrants need: packing them, settling (a still tile skips both).
        self.migrate(tile, state, {}, StepContext(0), tiling)
        self.pack_emigrants({**state, "outside": np.arange(len(state["id"]))}, tile, tiling)
        settle(take(state, slice(None)), self.cells, tiling, tile, [])

    def native(self, tiling: Tiling):
        """The three phases as compiled kernels on particles at a capacity, halos by compiled
        packers (:mod:`.native3d`)."""
        from .native3d import native_plan

        return native_plan(self, tiling)

    # ----- phases ---------------------------------------------------------------------------
    # What each phase reads of its neighbours' particles (id and cell order the merge).
    def pack_positions(self, state: dict, src: int, tiling: Tiling) -> dict[int, np.ndarray]:
        """The ring particles' positions, for the density phase."""
        return self._pack_ring(state, src, tiling, False)

    def pack_densities(self, state: dict, src: int, tiling: Tiling) -> dict[int, np.ndarray]:
        """The ring particles with velocities and densities, for the forces phase."""
        return self._pack_ring(state, src, tiling, True)

    def _pack_ring(self, state, src, tiling, motion):
        """Rows of :func:`~shoal.apps.sph.kernels3d.ring_rows` for each neighbour."""
        los, his, inner, nbrs = neighbour_boxes(tiling, src, 1)
        empty = NO_MOTION if motion else NO_POSITIONS
        if len(state["id"]) == 0:
            return dict.fromkeys(nbrs, empty)
        return ring_payloads(_ring_rows(state["cell"], state["id"], state["x"], state["v"], state["rho"], motion, los,
                                        his, inner[0], inner[1]), nbrs, empty)

    def pack_emigrants(self, state: dict, src: int, tiling: Tiling) -> dict[int, dict]:
        """The particles that moved into each neighbour's cells, whole."""
        return emigrants_for_neighbours(state, tiling, src)

    def density(self, tile: int, state: dict, halos: dict, ctx: StepContext, tiling: Tiling) -> int:
        """Poly6 density of the tile's particles."""
        n = len(state["id"])
        if n == 0:
            return 0
        ring = ring_table([halos[k] for k in sorted(halos)], NO_POSITIONS)
        state["rho"], *merge, pairs = _density_tile(state["cell"], state["id"], state["x"], ring, tiling.lo[tile],
                                                     tiling.hi[tile], self.h, self.h**6, self.density_coeff)
        state["neighbourhood"] = (merge, n + len(ring), pairs)
        return pairs

    def forces(self, tile: int, state: dict, halos: dict, ctx: StepContext, tiling: Tiling) -> int:
        """Pressure, viscosity and wall accelerations, then the leapfrog step."""
        n = len(state["id"])
        if n == 0:
            state.update(outside=np.zeros(0, np.int64), sorted=True)
            return 0
        ring = ring_table([halos[k] for k in sorted(halos)], NO_MOTION)
        # Same particles at the same places as in the density phase: reuse its order.
        (index, start, own, own_index, shape), size, pairs = state.pop("neighbourhood")
        if n + len(ring) != size:
            raise RuntimeError("halo particles changed between phases of one step")
        before, cells = state["cell"], self.cells
        finite, cell, worst, outside, ordered = _forces_tile(
            state["x"], state["v"], state["vh"], state["rho"], state["id"], before, ring, index, start, own,
            own_index, shape, self.h, self.pressure_coeff, self.viscosity_coeff, DOUBLE_REST_DENSITY, GRAVITY,
            self.p.time_step, DOMAIN_MIN, DOMAIN_MAX, PAR_SIZE, STIFFNESS_COLLISIONS, DAMPING, cells.origin,
            cells.cell, cells.counts, *self.reach, tiling.lo[tile], tiling.hi[tile])
        if not finite:
            raise ShoalError(f"particle positions are not finite: the simulation blew up; {self._remedy}")
        state["cell"] = cell
        refuse_move(worst, before, state, cells, self._remedy)
        state.update(outside=outside, sorted=ordered)
        return pairs  # counted by the density phase, on the same neighbourhood

    def migrate(self, tile: int, state: dict, halos: dict, ctx: StepContext, tiling: Tiling) -> int:
        """Keep the tile's own particles and take in its immigrants, sorted by (cell, id)."""
        resettle(state, halos, self.cells, tiling, tile, self._remedy)
        state["step"] = ctx.step + 1
        return len(state["id"])

    # ----- results ----------------------------------------------------------------------------
    def draw(self, frame: dict, ax, scale: tuple[float, float] | None = None):
        """The fluid's particles coloured by speed, walls grey (x-y plane)."""
        return draw_particles(frame, ax, scale)

    def gather(self, states: dict, tiling: Tiling) -> dict[str, np.ndarray]:
        allp = concat([take(s, slice(None)) for s in states.values()], 3)
        out = take(allp, np.argsort(allp["id"], kind="stable"))
        # Every particle is fluid of one mass: tiles do not carry these two fields.
        out["kind"] = np.full(len(out["id"]), FLUID, np.int8)
        out["m"] = np.full(len(out["id"]), self.mass)
        out["p"] = 0.5 * STIFFNESS_PRESSURE * (out["rho"] - 0.5 * DOUBLE_REST_DENSITY) * 2.0
        step = next(iter(states.values()))["step"]
        out["time"] = np.array(step * self.p.time_step)
        out["created"] = np.array(0)
        out["deleted"] = np.array(0)
        return out
