"""3D dam break in PARSEC fluidanimate's formulation, on tiles.

Same physics and constants as fluidanimate (Müller et al. 2003 kernels, cell side = support
radius, penalty walls with reflection, 1 ms steps), so speeds and particles compare with it
directly; computed in double precision. Three phases per step, no global reduction (the time
step is fixed):

``density``  (halo: ring particles' positions) poly6 density of own particles
``forces``   (halo: ring particles with their densities) accelerations, walls, leapfrog step
``migrate``  (halo: particles that moved into the tile's cells)

Starts from a generated water column of ``particles`` particles, or from a PARSEC ``.fluid``
file (``input``).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ...errors import ShoalError
from ...runtime.app import App, Phase, StepContext
from ...tiling import Tiling
from . import kernels3d
from .drawing import draw_particles
from .particles import (
    FLUID,
    CellGrid,
    Neighbourhood,
    concat,
    emigrants_for_neighbours,
    halos_for_neighbours,
    in_box,
    locate,
    settle,
    sort_by_cell,
    take,
)

# fluidanimate's constants (fluid.hpp)
DOMAIN_MIN = np.array([-0.065, -0.08, -0.065])
DOMAIN_MAX = np.array([0.065, 0.1, 0.065])
KERNEL_RADIUS_MULTIPLIER = 1.695
DOUBLE_REST_DENSITY = 2000.0
STIFFNESS_PRESSURE = 3.0
STIFFNESS_COLLISIONS = 30000.0
DAMPING = 128.0
VISCOSITY = 0.4
PAR_SIZE = 0.0002
GRAVITY = np.array([0.0, -9.8, 0.0])




@dataclass
class SPH3DParams:
    """Parameters of the fluidanimate-style 3D app (the ``[app]`` table)."""

    particles: int = 100_000  # size of the generated column
    input: str = ""  # a PARSEC .fluid file to start from instead (its particle count wins)
    column: list[float] = field(default_factory=lambda: [-0.065, -0.08, -0.065, 0.0, 0.04, 0.065])
    time_step: float = 0.001

    def validate(self) -> None:
        if not self.input and self.particles < 8:
            raise ShoalError(f"app.particles must be >= 8, got {self.particles}")
        if self.input and not Path(self.input).is_file():
            raise ShoalError(f"app.input: no .fluid file at {self.input}")
        lo, hi = np.array(self.column[:3]), np.array(self.column[3:])
        if len(self.column) != 6 or np.any(hi <= lo) or np.any(lo < DOMAIN_MIN) or np.any(hi > DOMAIN_MAX):
            raise ShoalError(f"app.column must be x0 y0 z0 x1 y1 z1 inside the tank, got {self.column}")
        if self.time_step <= 0:
            raise ShoalError("app.time_step must be positive")


def read_fluid(path: str | Path) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
    """A PARSEC ``.fluid`` file: (rest particles per metre, positions, half-step and full velocities)."""
    raw = Path(path).read_bytes()
    if len(raw) < 8:
        raise ShoalError(f"{path} is too short to be a .fluid file")
    rppm = float(np.frombuffer(raw[:4], "<f4")[0])
    n = int(np.frombuffer(raw[4:8], "<i4")[0])
    if n <= 0 or len(raw) != 8 + 36 * n or not rppm > 0:
        raise ShoalError(f"{path} is not a .fluid file ({len(raw)} bytes for {n} particles)")
    data = np.frombuffer(raw[8:], "<f4").reshape(n, 9).astype(np.float64)
    return rppm, data[:, 0:3], data[:, 3:6], data[:, 6:9]


class FluidAnimate3DApp(App):
    """See the module docstring."""

    name = "sph3d"
    phases = (Phase("density", halo=True, pack="pack_positions"), Phase("forces", halo=True, pack="pack_densities"),
              Phase("migrate", halo=True, pack="pack_emigrants"))
    transient = ("neighbourhood",)  # the density phase's merge order, reused by the forces phase

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
        size = DOMAIN_MAX - DOMAIN_MIN
        # fluidanimate: cells = floor(range / h) per axis, so every cell side is >= h.
        self.cells = CellGrid(DOMAIN_MIN, size, self.h, clamp=True)
        self.grid = self.cells.shape
        n = len(x)
        self._initial = sort_by_cell(locate({
            "id": np.arange(n, dtype=np.int64), "x": x, "v": v, "vh": vh, "rho": np.zeros(n)}, self.cells), self.cells)

    @staticmethod
    def _column(p: SPH3DParams) -> tuple[float, np.ndarray]:
        """A block of ``p.particles`` particles on a lattice at rest spacing 1 / rppm."""
        lo, hi = np.array(p.column[:3]), np.array(p.column[3:])
        rppm = (p.particles / np.prod(hi - lo)) ** (1 / 3)
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
        self.migrate(tile, state, {}, StepContext(0), tiling)

    # ----- phases ---------------------------------------------------------------------------
    # What each phase reads of its neighbours' particles (id and cell order the merge).
    def pack_positions(self, state: dict, src: int, tiling: Tiling) -> dict[int, dict]:
        """The ring particles' positions, for the density phase."""
        return halos_for_neighbours(state, tiling, src, fields=("id", "cell", "x"))

    def pack_densities(self, state: dict, src: int, tiling: Tiling) -> dict[int, dict]:
        """The ring particles with velocities and densities, for the forces phase."""
        return halos_for_neighbours(state, tiling, src, fields=("id", "cell", "x", "v", "rho"))

    def pack_emigrants(self, state: dict, src: int, tiling: Tiling) -> dict[int, dict]:
        """The particles that moved into each neighbour's cells, whole."""
        return emigrants_for_neighbours(state, tiling, src)

    def density(self, tile: int, state: dict, halos: dict, ctx: StepContext, tiling: Tiling) -> int:
        """Poly6 density of the tile's particles."""
        n = len(state["id"])
        if n == 0:
            return 0
        ordered = [halos[k] for k in sorted(halos)]
        nb = state["neighbourhood"] = Neighbourhood(state, ordered, self.cells, tiling.lo[tile], tiling.hi[tile],
                                                    ("x",))
        state["rho"] = ctx.kernel(kernels3d.densities, nb.particles["x"], nb.is_own, nb.start, nb.shape, self.h,
                                  nb.own_index, self.h**6, self.density_coeff)
        return n

    def forces(self, tile: int, state: dict, halos: dict, ctx: StepContext, tiling: Tiling) -> int:
        """Pressure, viscosity and wall accelerations, then the leapfrog step."""
        n = len(state["id"])
        if n == 0:
            return 0
        ordered = [halos[k] for k in sorted(halos)]
        # Same particles at the same places as in the density phase: reuse its order.
        nb = state.pop("neighbourhood")
        merged = nb.remerge(state, ordered, ("x", "v", "rho"))
        a = ctx.kernel(kernels3d.accelerations, merged["x"], merged["v"], merged["rho"], nb.is_own, nb.start,
                       nb.shape, self.h, self.pressure_coeff, self.viscosity_coeff, DOUBLE_REST_DENSITY, GRAVITY)
        finite = ctx.kernel(kernels3d.advance, state["x"], state["v"], state["vh"], a, nb.own_index, self.p.time_step,
                            DOMAIN_MIN, DOMAIN_MAX, PAR_SIZE, STIFFNESS_COLLISIONS, DAMPING)
        if not finite:
            raise ShoalError("particle positions are not finite: the simulation blew up")
        locate(state, self.cells)
        return n

    def migrate(self, tile: int, state: dict, halos: dict, ctx: StepContext, tiling: Tiling) -> int:
        """Keep the tile's own particles and take in its immigrants, sorted by (cell, id)."""
        state.update(settle(take(state, slice(None)), self.cells, tiling, tile, [halos[k] for k in sorted(halos)]))
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
