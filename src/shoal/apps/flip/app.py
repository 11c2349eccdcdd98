"""FLIP water on tiles, with a PCG pressure solve bitwise the same for any tiling.

A tile owns the cells of its box, the velocities on their low faces and the particles in them.
A step, as phases:

``advect``     (halo: the face velocities ``cfl + 2`` cells around the tile) the step's time
               step from the last step's fastest velocity (``cfl`` cells at most); RK2 through
               the grid; particles kept in the domain and out of solids. Work: particles
``migrate``    (halo: the particles that moved into the tile) the tile takes in its
               immigrants, sorted by (cell, id); active sources fill their empty cells. Work:
               particles
``p2g``        (halo: the particles two cells around the tile) face velocities on the tile's
               faces and a ring of one around them, fluid cells, gravity, solid walls, the
               divergence; the pressure system, its bricks' MIC(0) factors, ``z = M^-1 r``.
               Reduces r.z and max |b|. Work: particles
``cg_matvec``  (halo: ``z`` and the last direction one cell across each face) the new
               direction ``s = z + beta s`` and ``A s``. Reduces s.As. Work: fluid cells
``cg_update``  ``x += alpha s``, ``r -= alpha A s``, ``z = M^-1 r``. Reduces r.z, max |r|
               and max |b|: the loop ``cg_matvec``..``cg_update`` runs again until
               max |r| <= cg_tolerance max |b|. Work: fluid cells
``project``    (halo: the pressure two cells around the tile) ``u -= grad q``, the PIC/FLIP
               blend back to the particles, one layer of velocities into the air. Reduces the
               fastest velocity, which sets the next step's time step. Work: particles

Every dot product of the solve is summed brick by brick, each brick in its cells' order, and a
reduction adds the bricks' sums exactly (as fixed-point digits, :data:`~.pcg.DIGITS` values
per sum, rounded once at the end): which tiles hold which bricks, and in which order the
tiles' values are added, cannot change a bit. A tile with no particle within two cells of it
skips every kernel.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import math
import weakref

import numpy as np

from ...errors import ShoalError
from ...log import FILE_ONLY
from ...runtime.app import App, Phase, StepContext
from ...runtime.graph import Loop
from ...runtime.timing import lock_free
from ...tiling import Tiling
from ..particles import (
    CellGrid,
    box_order,
    concat,
    emigrants_for_neighbours,
    gather_fields,
    in_cell_order,
    members,
    neighbour_boxes,
    outside_rows,
    resettle,
    settle,
    take,
)
from .geometry import Geometry, pad3
from .grid import divergence, extrapolate, forces, mirror_walls, subtract_gradient
from .output import draw_cg, frame_of
from .params import MIC_SIGMA, MIC_TAU, FlipParams
from .pcg import (
    DIGITS,
    apply_operator,
    brick_dots,
    cg_update,
    couplings,
    exact_digits,
    mic_factor,
    next_direction,
    operator_diagonal,
    precondition,
)
from .regions import box3, pack, place
from .transfer import advect, grid_to_particles, level_set, particles_to_grid

logger = logging.getLogger("shoal")

_members = lock_free(members)
_box_order = lock_free(box_order)
_p2g = lock_free(particles_to_grid)
_g2p = lock_free(grid_to_particles)
_advect = lock_free(advect)
_forces = lock_free(forces)
_divergence = lock_free(divergence)
_subtract_gradient = lock_free(subtract_gradient)
_extrapolate = lock_free(extrapolate)
_mirror = lock_free(mirror_walls)
_level_set = lock_free(level_set)
_diagonal = lock_free(operator_diagonal)
_mic = lock_free(mic_factor)
_precondition = lock_free(precondition)
_couplings = lock_free(couplings)
_dots = lock_free(brick_dots)
_apply = lock_free(apply_operator)
_update = lock_free(cg_update)
_next_direction = lock_free(next_direction)
_digits = lock_free(exact_digits)

# The level set's r, in cells: about how deep the weighted mean of the particles within a cell
# of a centre lies below a flat surface through it, so that phi = 0 there.
SURFACE = 0.25
RING = 2  # cells of particles (and of pressure) a tile reads around itself for its faces and a ring of one
LOG_COLUMNS = ("time", "dt", "cg_iterations", "cg_residual", "cg_rhs")  # a row per step; cg_rhs: max |b|
# What only one step's phases use: never checkpointed, never migrated.
TRANSIENT = ("outside", "sorted", "dt", "U", "U0", "patch_fluid", "patch_solid", "own_fluid", "fluid_cells",
             "fluid_one", "diag", "prec", "coupling", "cg_x", "cg_r", "cg_z", "cg_s", "cg_q", "rz", "bmax", "cg_it")


SUM = ("sum",) * DIGITS  # an exact global sum: its fixed-point digits, each summed over the tiles


def exact_sum(values) -> float:
    """A reduced sum from its :data:`~.pcg.DIGITS` fixed-point digits, rounded once."""
    return math.fsum(itertools.islice(values, DIGITS))


class FlipApp(App):
    """See the module docstring."""

    name = "flip"
    phases = (
        Phase("advect", halo=True, pack="pack_velocity", work="particles"),
        Phase("migrate", halo=True, pack="pack_emigrants", work="particles"),
        Phase("p2g", halo=True, pack="pack_ring", reduction=(*SUM, "max"), work="particles"),
        Phase("cg_matvec", reads="faces", pack="pack_direction", reduction=SUM, work="fluid cells"),
        Phase("cg_update", reduction=(*SUM, "max", "max"), work="fluid cells"),
        Phase("project", halo=True, pack="pack_pressure", reduction="max", work="particles"),
    )
    # The instance's loop is capped by its parameters.
    loops = (Loop("cg_matvec", "cg_update", 2),)
    transient = TRANSIENT

    def __init__(self, params: FlipParams, steps: int):
        params.validate()
        self.p = p = params
        self.d = p.dimension
        self.grid = tuple(int(n) for n in p.cells)
        self.h = p.h
        self.halo = p.halo()
        self.geometry = Geometry(p, self.halo + 1)
        self.bricks3 = pad3([p.brick] * self.d, 1)
        # The particle store's grid, in cell units: the migration reads only its axes.
        self.cells = CellGrid(np.zeros(self.d), np.asarray(self.grid, float), 1.0)
        self.gravity3 = np.zeros(3)
        self.gravity3[:self.d] = p.gravity
        self.top = np.asarray(p.domain, float)
        self.ring3 = pad3([RING] * self.d, 0)
        # One iteration more than the solve may take: the app, not the runtime, stops at the cap.
        self.loops = (Loop("cg_matvec", "cg_update", p.cg_max_iterations + 1),)
        self._zeros: dict[int, tuple] = {}
        self._quiet_payloads: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._last_sum = None

    # ----- tiling -----------------------------------------------------------------------
    def decompose(self, count: int, halo: int = 1) -> Tiling:
        """About ``count`` tiles made of whole bricks, as close to cubes as the bricks allow; the
        halo is the advection's (``halo`` is ignored)."""
        grid = tuple(n // self.p.brick for n in self.grid)
        try:
            bricks = Tiling.from_count(grid, count, 0)
        except ShoalError as e:
            raise ShoalError(f"cannot cut the {'x'.join(map(str, grid))} bricks of app.brick = {self.p.brick} cells "
                             f"into {count} tiles of whole bricks ({e})") from None
        tiling = Tiling(self.grid, tuple(e * self.p.brick for e in bricks.edges), 0)
        self._check_extent(tiling)
        return Tiling(self.grid, tiling.edges, self.halo)

    def check_tiling(self, tiling: Tiling) -> None:
        """Tiles must be unions of bricks and at least as wide as the advection's halo."""
        super().check_tiling(tiling)
        for axis, edges in enumerate(tiling.edges):
            if np.any(np.asarray(edges) % self.p.brick):
                raise ShoalError(f"app.brick = {self.p.brick} does not divide the tiles: axis {axis} is cut at "
                                 f"{list(map(int, edges))}; use tiles of whole bricks")
        self._check_extent(tiling)

    def _check_extent(self, tiling: Tiling) -> None:
        smallest = min(int(np.diff(e).min()) for e in tiling.edges)
        if self.halo > smallest:
            raise ShoalError(f"app.cfl = {self.p.cfl} needs a halo of {self.halo} cells, wider than the smallest "
                             f"tile ({smallest} cells): lower app.cfl or use fewer tiles")

    # ----- state ------------------------------------------------------------------------
    def init_tile(self, tile: int, tiling: Tiling) -> dict:
        lo, hi = tiling.lo[tile], tiling.hi[tile]
        state = self.geometry.initial(lo, hi)
        n3 = tuple(int(v) for v in box3(tiling, tile)[1] - box3(tiling, tile)[0])
        state.update(u=np.zeros((self.d, *n3)), p=np.zeros(n3), fluid=np.zeros(n3, bool), t=0.0,
                     log=np.zeros((0, len(LOG_COLUMNS))))
        return state

    def time(self, step: int, states: dict) -> float:
        """The tiles' common clock."""
        return float(next(iter(states.values()))["t"]) if states else float("nan")

    def _dt(self, fastest: float) -> float:
        """Time step: ``cfl`` cells at the fastest speed plus the speed gravity gives in
        ``5 h`` (Bridson §3.3), at most ``dt_max``."""
        g = float(np.linalg.norm(self.p.gravity))
        return min(self.p.dt_max, self.p.cfl * self.h / (fastest + math.sqrt(5.0 * self.h * g) + 1e-30))

    @staticmethod
    def _reduced(sums: np.ndarray, extra: tuple) -> tuple:
        """A tile's value of a reduction: the exact digits of its bricks' sums, then ``extra``."""
        return (*_digits(sums).tolist(), *extra)

    def _sum(self, values) -> float:
        """:func:`exact_sum` of a reduced value, once per process: every tile reads the same."""
        last = self._last_sum
        if last is not None and last[0] is values:
            return last[1]
        total = exact_sum(values)
        self._last_sum = (values, total)
        return total

    def _quiet(self, tiling: Tiling, src: int, shape: tuple, count: int, width: int, stencil: str) -> dict:
        """The payloads of a tile with no fluid near it (``count`` arrays of zeros), packed once:
        its neighbours only copy them."""
        known = self._quiet_payloads.get(tiling)
        if known is None:
            known = self._quiet_payloads.setdefault(tiling, {})
        key = (src, count, width, stencil)
        if key not in known:
            known[key] = pack((np.zeros(shape),) * count, tiling, src, width, stencil)
        return known[key]

    def _nothing(self, extra: int) -> tuple:
        """The value of a tile with no fluid: zeros."""
        if extra not in self._zeros:
            self._zeros[extra] = (0.0,) * (DIGITS + extra)
        return self._zeros[extra]

    # ----- advect -----------------------------------------------------------------------
    def pack_velocity(self, state: dict, src: int, tiling: Tiling) -> dict:
        """The tile's face velocities each neighbour's advection reads."""
        return pack((state["u"],), tiling, src, self.halo)

    def advect(self, tile: int, state: dict, halos: dict, ctx: StepContext, tiling: Tiling) -> int:
        """RK2 through the last step's velocities with this step's time step."""
        fastest = ctx.reduced.get("project", self.geometry.max_initial_speed())
        dt = self._dt(fastest)
        state["dt"] = dt
        state["t"] = state["t"] + dt
        n = len(state["id"])
        if n == 0:
            state.update(outside=np.zeros(0, np.int64), sorted=True)
            return 0
        lo, hi = box3(tiling, tile)
        wide = pad3([self.halo] * self.d, 0)
        org = lo - wide
        shape = tuple(int(v) for v in hi - lo + 2 * wide)
        U = np.zeros((3, *shape))
        place(U[:self.d], org, lo, state["u"])
        for k in sorted(halos):
            place(U[:self.d], org, halos[k][0], halos[k][1])
        _mirror(U, org, self.geometry.cells3, self.d)
        cell, bad = _advect(state["x"], U, self.geometry.solid_patch(org, shape), self.h, org, dt, self.top)
        if bad >= 0:
            raise ShoalError(f"particle {int(state['id'][bad])} would cross more than the {self.halo}-cell halo in "
                             f"one step at dt = {dt:.3g} s: lower app.cfl")
        state["cell"] = cell
        state.update(outside=outside_rows(state, tiling, tile), sorted=in_cell_order(state))
        return n

    # ----- migrate ----------------------------------------------------------------------
    def pack_emigrants(self, state: dict, src: int, tiling: Tiling) -> dict:
        """The particles that moved into each neighbour's cells."""
        return emigrants_for_neighbours(state, tiling, src)

    def migrate(self, tile: int, state: dict, halos: dict, ctx: StepContext, tiling: Tiling) -> int:
        """Take in immigrants, then let the active sources fill their empty cells."""
        resettle(state, halos, self.cells, tiling, tile, "lower app.cfl")
        new = self.geometry.pour(state, tiling.lo[tile], tiling.hi[tile], ctx.step, state["t"])
        if new is not None:
            state.update(settle(take(state, slice(None)), self.cells, tiling, tile, [new]))
        return len(state["id"])

    # ----- particles to grid, and the solve's start -------------------------------------------
    def pack_ring(self, state: dict, src: int, tiling: Tiling) -> dict:
        """The particles within two cells of each neighbour."""
        los, his, inner, nbrs = neighbour_boxes(tiling, src, RING)
        starts, rows = _members(state["cell"], los, his, np.asarray(inner[0]), np.asarray(inner[1]))
        out = {}
        for k, n in enumerate(nbrs):
            idx = rows[starts[k]:starts[k + 1]]
            out[n] = {f: state[f][idx] for f in ("id", "x", "v", "cell")}
        return out

    def _patch(self, tiling: Tiling, tile: int):
        """The tile's patch: first global cell, shape, own cells' first index, own shape."""
        lo, hi = box3(tiling, tile)
        return lo - self.ring3, tuple(int(v) for v in hi - lo + 2 * self.ring3), self.ring3, hi - lo

    def p2g(self, tile: int, state: dict, halos: dict, ctx: StepContext, tiling: Tiling) -> tuple[int, tuple]:
        """Face velocities from the particles, gravity, walls, the divergence, and the solve's start."""
        ring = concat([halos[k] for k in sorted(halos) if len(halos[k]["id"])], self.d)
        lo, hi = tiling.lo[tile], tiling.hi[tile]
        order, _ = _box_order(state["cell"], state["id"], ring["cell"], ring["id"], lo - RING, hi + RING)
        n_own = len(state["id"])
        state["cg_it"] = 0
        if len(order) == 0:
            state["U"] = None
            return n_own, self._nothing(1)
        merged = gather_fields(state, ring, order, ("x", "v"))
        org, shape, g, n = self._patch(tiling, tile)
        rlo, rhi = g - 1, g + n + 1
        rlo[2], rhi[2] = (rlo[2], rhi[2]) if self.d == 3 else (0, 1)
        U, W, fluid = _p2g(merged["x"], merged["v"], self.h, org, shape, rlo, rhi)
        _mirror(U, org, self.geometry.cells3, self.d)
        U0 = U.copy()
        solid = self.geometry.solid_patch(org, shape)
        _forces(U, W, fluid, solid, self.gravity3, state["dt"], rlo, rhi, self.d)
        b = _divergence(U, fluid, g, n, self.d)
        diag = _diagonal(fluid, solid, g, n, self.d)
        own = np.ascontiguousarray(fluid[tuple(slice(int(a), int(a + m)) for a, m in zip(g, n, strict=True))])
        prec = _mic(own, diag, self.bricks3, self.d, MIC_TAU, MIC_SIGMA)
        coupling = _couplings(own, prec, self.bricks3, self.d)
        z = _precondition(b, own, prec, coupling, self.bricks3, self.d)
        bmax = float(np.abs(b).max())
        one = pad3([1] * self.d, 0)  # the operator reads the fluid cells one around the tile's
        fluid_one = np.ascontiguousarray(fluid[tuple(slice(int(c - w), int(c + m + w)) for c, m, w in
                                                     zip(g, n, one, strict=True))])
        state.update(U=U, U0=U0, patch_fluid=fluid, patch_solid=solid, own_fluid=own, fluid_cells=int(own.sum()),
                     fluid_one=fluid_one, diag=diag, prec=prec, coupling=coupling, cg_x=np.zeros_like(b), cg_r=b,
                     cg_z=z, cg_s=z.copy(), bmax=bmax)
        return n_own, self._reduced(_dots(b, z, self.bricks3), (bmax,))

    # ----- the conjugate-gradient loop -----------------------------------------------------------
    def pack_direction(self, state: dict, src: int, tiling: Tiling) -> dict:
        """``z`` and the last direction on the layer of cells next to each face neighbour."""
        if state.get("U") is None:
            return self._quiet(tiling, src, state["p"].shape, 2, 1, "faces")
        return pack((state["cg_z"], state["cg_s"]), tiling, src, 1, "faces")

    def cg_matvec(self, tile: int, state: dict, halos: dict, ctx: StepContext, tiling: Tiling) -> tuple[int, tuple]:
        """The new direction and ``A s``; the bricks' ``s . A s``."""
        first = ctx.iteration == 0
        rz = self._sum(ctx.reduced["p2g" if first else "cg_update"])
        beta = 0.0 if first or state["rz"] == 0.0 else rz / state["rz"]
        state["rz"] = rz
        if state.get("U") is None:
            return 0, self._nothing(0)
        s = state["cg_s"]
        if first:
            s[...] = state["cg_z"]
        else:
            _next_direction(s, state["cg_z"], beta)
        org, _, g, n = self._patch(tiling, tile)
        one = pad3([1] * self.d, 0)
        sp = np.zeros(tuple(int(v) for v in n + 2 * one))
        place(sp, org + g - one, org + g, s)
        for k in sorted(halos):
            at, z, last = halos[k]
            ghost = z.copy() if first else last.copy()
            if not first:
                _next_direction(ghost, z, beta)
            place(sp, org + g - one, at, ghost)
        q = _apply(sp, state["fluid_one"], state["diag"], self.d)
        state["cg_q"] = q
        return state["fluid_cells"], self._reduced(_dots(s, q, self.bricks3), ())

    def cg_update(self, tile: int, state: dict, halos: dict, ctx: StepContext, tiling: Tiling) -> tuple[int, tuple]:
        """``x``, ``r`` and ``z`` one iteration on; the bricks' ``r . z``, max |r| and max |b|."""
        state["cg_it"] += 1
        if state.get("U") is None:
            return 0, self._nothing(2)
        sAs = self._sum(ctx.reduced["cg_matvec"])
        alpha = state["rz"] / sAs if sAs != 0.0 else 0.0
        rmax = _update(state["cg_x"], state["cg_r"], state["cg_s"], state["cg_q"], alpha)
        z = _precondition(state["cg_r"], state["own_fluid"], state["prec"], state["coupling"], self.bricks3, self.d)
        state["cg_z"] = z
        return (state["fluid_cells"],
                self._reduced(_dots(state["cg_r"], z, self.bricks3), (rmax, state["bmax"])))

    def again(self, loop: Loop, step: int, iteration: int, value) -> bool:
        """Another iteration while the residual is finite, above the tolerance and under the cap."""
        rmax, bmax = value[-2], value[-1]
        if not (math.isfinite(rmax) and math.isfinite(bmax)) or rmax <= self.p.cg_tolerance * bmax:
            return False
        return iteration + 1 < self.p.cg_max_iterations

    # ----- project and back to the particles ---------------------------------------------------
    def pack_pressure(self, state: dict, src: int, tiling: Tiling) -> dict:
        """The pressure within two cells of each neighbour."""
        if state.get("U") is None:
            return self._quiet(tiling, src, state["p"].shape, 1, RING, "all")
        return pack((state["cg_x"],), tiling, src, RING)

    def project(self, tile: int, state: dict, halos: dict, ctx: StepContext, tiling: Tiling) -> tuple[int, float]:
        """``u -= grad q``, the PIC/FLIP blend, extrapolation; the fastest velocity."""
        residual, iterations = self._check_solve(ctx, state["cg_it"])
        row = [state["t"], state["dt"], iterations, residual, ctx.reduced["cg_update"][-1]]
        state["log"] = np.concatenate([state["log"], [row]])
        if tile == 0:
            logger.info("flip step %d: t = %.4f s, dt = %.3g s, %d CG iterations, residual %.3g", ctx.step,
                        state["t"], state["dt"], iterations, residual, extra=FILE_ONLY)
        n_own = len(state["id"])
        if state.get("U") is None:
            state["u"][...] = 0.0
            state["p"][...] = 0.0
            state["fluid"][...] = False
            return n_own, 0.0
        org, shape, g, n = self._patch(tiling, tile)
        q = np.zeros(shape)
        place(q, org, org + g, state["cg_x"])
        for k in sorted(halos):
            place(q, org, halos[k][0], halos[k][1])
        U, fluid, solid = state["U"], state["patch_fluid"], state["patch_solid"]
        rlo, rhi = g - 1, g + n + 1
        rlo[2], rhi[2] = (rlo[2], rhi[2]) if self.d == 3 else (0, 1)
        _subtract_gradient(U, q, fluid, solid, rlo, rhi, self.d)
        _mirror(U, org, self.geometry.cells3, self.d)
        fastest = _g2p(state["x"], state["v"], U, state["U0"], self.h, org, self.p.flip) if n_own else 0.0
        u, fastest_u = _extrapolate(U, fluid, solid, g, n, self.d)
        state["u"] = u
        state["p"] = state["cg_x"] * (self.p.density * self.h / state["dt"])
        state["fluid"] = state["own_fluid"]
        for key in TRANSIENT[3:]:
            state.pop(key, None)
        return n_own, max(fastest, fastest_u)

    def _check_solve(self, ctx: StepContext, iterations: int) -> tuple[float, int]:
        """The solve's relative residual and iterations; stop the run if it failed."""
        value = ctx.reduced["cg_update"]
        rmax, bmax = value[-2], value[-1]
        residual = rmax / bmax if bmax > 0 else 0.0
        if not math.isfinite(residual):
            raise ShoalError(f"the pressure solve diverged at step {ctx.step}: residual {residual} after "
                             f"{iterations} iterations (lower app.cfl or app.dt_max)")
        if residual > self.p.cg_tolerance:
            raise ShoalError(f"the pressure solve did not converge at step {ctx.step}: relative residual "
                             f"{residual:.3g} > app.cg_tolerance = {self.p.cg_tolerance} after {iterations} "
                             f"iterations (app.cg_max_iterations)")
        return residual, iterations

    # ----- results ----------------------------------------------------------------------
    def gather(self, states: dict, tiling: Tiling) -> dict[str, np.ndarray]:
        parts = concat([take(s, slice(None)) for s in states.values()], self.d)
        order = np.argsort(parts["id"], kind="stable")
        out = {k: parts[k][order] for k in ("id", "x", "v")}
        n3 = tuple(int(v) for v in pad3(self.grid, 1))
        u = np.zeros((self.d, *n3))
        p = np.zeros(n3)
        fluid = np.zeros(n3, bool)
        for t, s in states.items():
            lo, hi = box3(tiling, t)
            index = tuple(slice(int(a), int(b)) for a, b in zip(lo, hi, strict=True))
            u[(slice(None), *index)] = s["u"]
            p[index], fluid[index] = s["p"], s["fluid"]
        squeeze = (lambda a: a[..., 0]) if self.d == 2 else (lambda a: a)
        out.update(u=squeeze(u), p=squeeze(p), fluid=squeeze(fluid), phi=squeeze(self._surface(parts)))
        first = states[min(states)]
        out["time"] = np.array(first["t"])
        out["log"] = first["log"].copy()
        return out

    def _surface(self, parts: dict) -> np.ndarray:
        """The surface as a level set at every cell centre, from all the particles (``parts``):
        for pictures and the water's volume (the solve marks fluid cells from the particles)."""
        lo = np.full(self.d, -RING, np.int64)
        order, start = _box_order(parts["cell"], parts["id"], parts["cell"][:0], parts["id"][:0], lo,
                                  np.asarray(self.grid) + RING)
        return _level_set(np.ascontiguousarray(parts["x"][order]), start, np.asarray(self.grid) + 2 * RING,
                          np.zeros(self.d, np.int64), pad3(self.grid, 1), self.h, self.h, SURFACE * self.h)

    def frame(self, gathered: dict) -> dict:
        return frame_of(gathered)

    def pictures(self, gathered: dict, folder) -> list:
        """The CG iterations and residual of every step."""
        return draw_cg(gathered["log"], self.p.cg_tolerance, folder)

    def prepare(self, tiling: Tiling) -> None:
        """Compile every kernel before the timed run: a few steps of this world on one tile."""
        from ...cluster import Cluster
        from ...runtime.local import LocalExecutor

        p, d = self.p, self.d
        # Two tiles a side, each of whole bricks and at least the halo wide.
        side = 2 * max(p.brick, self.halo + (-self.halo) % p.brick)
        box = [0.0] * d + [side / 2 * self.h] * d
        source = [side / 2 * self.h] * d + [side * self.h] * d + [1.0] * d + [0.0, 1.0]
        small = dataclasses.replace(p, cells=[side] * d, domain=[side * self.h] * d, fluid=[box], fluid_spheres=[],
                                    solid_boxes=[], solid_spheres=[], sources=[source])
        warm = FlipApp(small, 2)
        tiles = warm.decompose(2 ** d)
        executor = LocalExecutor(warm, tiles, Cluster.uniform(1, 1), np.zeros(tiles.ntiles, np.int64))
        executor.run(2)
        state = executor.states[0]
        warm.pack_emigrants({**state, "outside": np.arange(len(state["id"]))}, 0, tiles)
        warm.gather(executor.states, tiles)  # the level set of frames
