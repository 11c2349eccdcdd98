"""A synthetic app: real work whose cost per cell follows a moving load field.

Two phases per step:

``burn``
    Each cell runs ``base_work + work_per_cell * g(x, step)`` dependent square-root
    iterations (the phase's work: the iterations run), where ``g`` is either a Gaussian hot
    spot travelling across the (periodic) domain or the two-rank ramp of the invasive paper
    §6.2 (left half ``L0(t) = T - t``, right half ``L1(t) = t``, cost ``(L / T) ** exponent``).
    The result is kept in ``burn``.
``diffuse``
    One explicit diffusion step of a field ``u`` with zero-flux walls, reading a one-cell
    halo from the neighbouring tiles (its work: the cells updated).

Every cell's arithmetic is the same whatever the tiling, so the final ``u`` and ``burn`` are
bitwise identical for any tiling, placement and worker count.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass, field

import numba as nb
import numpy as np

from ..errors import ShoalError
from ..runtime.app import App, Phase, StepContext
from ..runtime.native import KERNEL, Native
from ..tiling import Tiling
from .registry import AppSpec, register_app


@dataclass
class SyntheticParams:
    """Parameters of the synthetic app (the ``[app]`` table of a scenario)."""

    grid: list[int] = field(default_factory=lambda: [256, 256])
    load: str = "hotspot"  # "hotspot" or "ramp"
    work_per_cell: float = 60.0  # iterations at the hot spot's peak (or the ramp's top)
    base_work: float = 1.0  # iterations in cold cells
    sigma: float = 0.08  # hot spot width, as a fraction of the largest grid side
    start: list[float] = field(default_factory=lambda: [0.2, 0.3, 0.5])  # fractions of the grid
    velocity: list[float] = field(default_factory=lambda: [2.0, 1.0, 0.5])  # cells per step
    ramp_steps: int = 0  # T of the ramp; 0 means the run's number of steps
    ramp_exponent: float = 2.0
    diffusivity: float = 0.1  # alpha = D dt / dx^2; stable below 1 / (2 ndim)
    fail_at_step: int = -1  # tile 0 raises at this step: a fault to test error handling with

    def validate(self) -> None:
        if len(self.grid) not in (2, 3) or any(int(n) <= 0 for n in self.grid):
            raise ShoalError(f"app.grid must be 2 or 3 positive sizes, got {self.grid}")
        if self.load not in ("hotspot", "ramp"):
            raise ShoalError(f"app.load must be 'hotspot' or 'ramp', got {self.load!r}")
        if self.work_per_cell < 0 or self.base_work < 0:
            raise ShoalError("app.work_per_cell and app.base_work must be >= 0")
        if self.sigma <= 0:
            raise ShoalError(f"app.sigma must be positive, got {self.sigma}")
        limit = 1.0 / (2 * len(self.grid))
        if not 0 <= self.diffusivity <= limit:
            raise ShoalError(f"app.diffusivity must be in [0, {limit:g}] for a stable {len(self.grid)}D step")
        if self.ramp_steps < 0:
            raise ShoalError("app.ramp_steps must be >= 0")
        for name in ("start", "velocity"):
            if len(getattr(self, name)) not in (len(self.grid), 3):
                raise ShoalError(f"app.{name} needs one value per grid axis ({len(self.grid)}), got "
                                 f"{getattr(self, name)}")


def synthetic_memory(params: SyntheticParams) -> int:
    """Bytes of a synthetic run's state: ``u``, ``burn`` and the load, with their halos, in float64."""
    return 3 * 8 * math.prod(n + 2 for n in params.grid)


# ----- kernels ------------------------------------------------------------------------------
@nb.njit(cache=True, nogil=True)
def _axis_factors(lo, n, length, centre, inv_two_sigma2):
    """exp(-d^2 / (2 sigma^2)) along one periodic axis for cells lo..lo+n-1.

    The Gaussian is separable, so a cell's load is the product of three such factors; every
    cell gets the same arithmetic whatever tile holds it.
    """
    out = np.empty(n)
    for i in range(n):
        d = abs(lo + i + 0.5 - centre)
        d = d - length * math.floor(d / length)
        d = min(d, length - d)
        out[i] = math.exp(-d * d * inv_two_sigma2)
    return out


@nb.njit(cache=True, nogil=True)
def _ramp_level(x, step, grid_x, ramp_T, ramp_exp):
    t = min(max(step, 0), ramp_T)
    level = (ramp_T - t) / ramp_T if 2 * x < grid_x else t / ramp_T
    return level**ramp_exp


@nb.njit(cache=True, nogil=True)
def load_block(out, lo, step, mode, grid, centre, inv_two_sigma2, ramp_T, ramp_exp):
    """The load field g in [0, 1] over a block of cells starting at global cell ``lo``."""
    nx, ny, nz = out.shape
    if mode == 0:
        fx = _axis_factors(lo[0], nx, grid[0], centre[0], inv_two_sigma2)
        fy = _axis_factors(lo[1], ny, grid[1], centre[1], inv_two_sigma2)
        fz = _axis_factors(lo[2], nz, grid[2], centre[2], inv_two_sigma2) if grid[2] > 1 else np.ones(nz)
        for i in range(nx):
            for j in range(ny):
                for k in range(nz):
                    out[i, j, k] = fx[i] * fy[j] * fz[k]
    else:
        for i in range(nx):
            g = _ramp_level(lo[0] + i, step, grid[0], ramp_T, ramp_exp)
            for j in range(ny):
                for k in range(nz):
                    out[i, j, k] = g


@nb.njit(cache=True, nogil=True)
def burn_tile(burn, lo, step, mode, grid, centre, inv_two_sigma2, ramp_T, ramp_exp, base, peak):
    """Run each cell's share of work; return the number of iterations done."""
    g = np.empty(burn.shape)
    load_block(g, lo, step, mode, grid, centre, inv_two_sigma2, ramp_T, ramp_exp)
    nx, ny, nz = burn.shape
    total = 0
    for i in range(nx):
        for j in range(ny):
            for k in range(nz):
                iters = int(base + peak * g[i, j, k] + 0.5)
                v = burn[i, j, k]
                for _ in range(iters):
                    v = math.sqrt(v + 1.0)
                burn[i, j, k] = v
                total += iters
    return total


@nb.njit(cache=True, nogil=True)
def diffuse_tile(u, padded, alpha, ndim):
    """One explicit diffusion step of u from the padded copy (one-cell halo on every side)."""
    nx, ny, nz = u.shape
    centre_weight = 2.0 * ndim
    for i in range(nx):
        for j in range(ny):
            for k in range(nz):
                c = padded[i + 1, j + 1, k + 1]
                s = padded[i, j + 1, k + 1] + padded[i + 2, j + 1, k + 1]
                s += padded[i + 1, j, k + 1] + padded[i + 1, j + 2, k + 1]
                if ndim == 3:
                    s += padded[i + 1, j + 1, k] + padded[i + 1, j + 1, k + 2]
                u[i, j, k] = c + alpha * (s - centre_weight * c)


@nb.njit(cache=True, nogil=True)
def initial_field(u, lo, grid):
    """A smooth, asymmetric initial field defined cell by cell from global indices."""
    nx, ny, nz = u.shape
    for i in range(nx):
        for j in range(ny):
            for k in range(nz):
                x = (lo[0] + i + 0.5) / grid[0]
                y = (lo[1] + j + 0.5) / grid[1]
                z = (lo[2] + k + 0.5) / grid[2]
                r2 = (x - 0.3) ** 2 + (y - 0.6) ** 2 + (z - 0.5) ** 2
                u[i, j, k] = math.exp(-r2 * 40.0) + 0.25 * x


# ----- native kernels (the native executor's; the same arithmetic as the methods below) -------
# consts: mode, grid (3), start (3), velocity (3), 1 / (2 sigma^2), ramp T, ramp exponent, base,
# peak, diffusivity, ndim, fail_at_step. ints: lo (3), shape (3), walls (6: low and high per axis),
# where u, burn and pad start in the tile's memory.
@nb.njit(KERNEL, nogil=True, cache=True)
def native_burn(tile, step, iteration, mem, ints, consts, reduced, out):
    if step == consts[17] and tile == 0:
        raise RuntimeError("injected fault (app.fail_at_step)")
    nx, ny, nz = ints[3], ints[4], ints[5]
    burn = mem[ints[13]:ints[13] + nx * ny * nz].reshape((nx, ny, nz))
    centre = consts[4:7] + consts[7:10] * step
    return burn_tile(burn, ints[0:3], step, int(consts[0]), consts[1:4], centre, consts[10], consts[11], consts[12],
                     consts[13], consts[14])


@nb.njit(KERNEL, nogil=True, cache=True)
def native_diffuse(tile, step, iteration, mem, ints, consts, reduced, out):
    nx, ny, nz = ints[3], ints[4], ints[5]
    u = mem[ints[12]:ints[12] + nx * ny * nz].reshape((nx, ny, nz))
    pad = mem[ints[14]:ints[14] + (nx + 2) * (ny + 2) * (nz + 2)].reshape((nx + 2, ny + 2, nz + 2))
    pad[1:-1, 1:-1, 1:-1] = u  # the neighbours' halos are in the border already (the copy plan's)
    for a in range(3):  # zero-flux walls, in the order of SyntheticApp._padded
        for high in range(2):
            if ints[6 + 2 * a + high]:
                face, inner = (-1, -2) if high else (0, 1)
                if a == 0:
                    pad[face, :, :] = pad[inner, :, :]
                elif a == 1:
                    pad[:, face, :] = pad[:, inner, :]
                else:
                    pad[:, :, face] = pad[:, :, inner]
    diffuse_tile(u, pad, consts[15], int(consts[16]))
    return nx * ny * nz


# ----- the app --------------------------------------------------------------------------------
def _as3(v, fill):
    v = [float(a) for a in v]
    return np.array((v + [fill] * 3)[:3])


class SyntheticApp(App):
    """See the module docstring."""

    name = "synthetic"
    phases = (Phase("burn", work="iterations"), Phase("diffuse", halo=True, work="cell updates"))
    transient = ("pad",)  # the native kernels' ghost cells

    def __init__(self, params: SyntheticParams, steps: int):
        params.validate()
        self.p = params
        self.ndim = len(params.grid)
        self.grid = tuple(int(n) for n in params.grid)
        self.grid3 = np.array((list(params.grid) + [1])[:3], dtype=np.float64)
        self.mode = 0 if params.load == "hotspot" else 1
        sigma = params.sigma * max(params.grid)
        self.inv_two_sigma2 = 1.0 / (2.0 * sigma * sigma)
        self.start = _as3(params.start, 0.5) * self.grid3
        self.velocity = _as3(params.velocity, 0.0)
        self.ramp_T = float(params.ramp_steps or steps)

    def proxy(self) -> tuple[SyntheticParams, float]:
        """The same scenario at half resolution: half the cells, so half the speed in cells
        per step; one proxy step per step."""
        p = dataclasses.replace(self.p, grid=[max(1, n // 2) for n in self.p.grid],
                                velocity=[v / 2 for v in self.p.velocity])
        return p, 1.0

    def _lo3(self, tile: int, tiling: Tiling) -> np.ndarray:
        return np.array((list(tiling.lo[tile]) + [0])[:3], dtype=np.int64)

    def _shape3(self, tile: int, tiling: Tiling) -> tuple[int, int, int]:
        ext = list(tiling.hi[tile] - tiling.lo[tile])
        return tuple((ext + [1])[:3])

    def check_tiling(self, tiling: Tiling) -> None:
        super().check_tiling(tiling)
        if tiling.halo < 1:
            raise ShoalError("the synthetic app needs a halo of at least one cell")

    def prepare(self, tiling: Tiling) -> None:
        """Load (or compile) the kernels once, so the first step's timings are not skewed."""
        state = self.init_tile(0, tiling)
        halos = {int(n): self.pack_halos(self.init_tile(int(n), tiling), int(n), tiling)[0]
                 for n in tiling.neighbours[0]}
        self.burn(0, state, {}, StepContext(0), tiling)
        self.diffuse(0, state, halos, StepContext(0), tiling)

    def init_tile(self, tile: int, tiling: Tiling) -> dict:
        shape = self._shape3(tile, tiling)
        u = np.empty(shape)
        initial_field(u, self._lo3(tile, tiling), self.grid3)
        return {"u": u, "burn": np.zeros(shape)}

    @staticmethod
    @functools.lru_cache(maxsize=65536)
    def _send_slices(tiling: Tiling, src: int, dst: int) -> tuple[slice, ...]:
        """Where, in ``src``'s own arrays, the cells that ``dst`` needs lie."""
        region = tiling.halo_region(dst, src)
        lo = tiling.lo[src]
        local = [slice(r.start - int(lo[a]), r.stop - int(lo[a])) for a, r in enumerate(region)]
        return tuple(local + [slice(None)] * (3 - len(local)))

    @staticmethod
    @functools.lru_cache(maxsize=8192)
    def _receive_plan(tiling: Tiling, tile: int):
        """Where each neighbour's block goes in the padded array, and which walls to mirror."""
        lo, hi = tiling.lo[tile], tiling.hi[tile]
        places = {}
        for src in tiling.neighbours[tile]:
            region = tiling.halo_region(tile, int(src))
            dst = [slice(r.start - int(lo[a]) + 1, r.stop - int(lo[a]) + 1) for a, r in enumerate(region)]
            places[int(src)] = tuple(dst + [slice(1, -1)] * (3 - len(dst)))
        mirrors = []
        for a in range(3):
            for at_wall, face_at, inner_at in ((a >= tiling.ndim or lo[a] == 0, 0, 1),
                                               (a >= tiling.ndim or hi[a] == tiling.grid[a], -1, -2)):
                if at_wall:
                    face, inner = [slice(None)] * 3, [slice(None)] * 3
                    face[a], inner[a] = face_at, inner_at
                    mirrors.append((tuple(face), tuple(inner)))
        return places, mirrors

    def native(self, tiling: Tiling) -> Native:
        """Both phases compiled; ``u``'s halos land in the border of ``pad`` by copy plans."""
        p = self.p
        consts = np.concatenate([[self.mode], self.grid3, self.start, self.velocity,
                                 [self.inv_two_sigma2, self.ramp_T, p.ramp_exponent, p.base_work, p.work_per_cell,
                                  p.diffusivity, self.ndim, p.fail_at_step]])

        def ints(tile):
            lo, shape = self._lo3(tile, tiling), self._shape3(tile, tiling)
            hi = lo + np.array(shape)
            grid = self.grid3.astype(np.int64)
            walls = [w for a in range(3)
                     for w in (a >= tiling.ndim or lo[a] == 0, a >= tiling.ndim or hi[a] == grid[a])]
            cells = int(np.prod(shape))
            return np.array([*lo, *shape, *walls, 0, cells, 2 * cells], np.int64)  # u, burn, pad offsets

        def halos(phase, src, dst):
            places, _ = self._receive_plan(tiling, dst)
            return [("u", self._send_slices(tiling, src, dst), "pad", places[src])]

        def scratch(tile):
            return {"pad": np.zeros(tuple(n + 2 for n in self._shape3(tile, tiling)))}

        return Native(kernels={"burn": native_burn, "diffuse": native_diffuse}, fields=("u", "burn", "pad"),
                      ints=ints, consts=consts, halos=halos, scratch=scratch)

    def pack_halos(self, state: dict, src: int, tiling: Tiling) -> dict[int, np.ndarray]:
        return {int(dst): state["u"][self._send_slices(tiling, src, int(dst))].copy() for dst in tiling.neighbours[src]}

    def burn(self, tile: int, state: dict, halos: dict, ctx: StepContext, tiling: Tiling) -> int:
        """Each cell's share of the moving load: dependent square roots."""
        if ctx.step == self.p.fail_at_step and tile == 0:
            raise ShoalError(f"injected fault (app.fail_at_step = {ctx.step})")
        centre = self.start + self.velocity * ctx.step
        return ctx.kernel(burn_tile, state["burn"], self._lo3(tile, tiling), ctx.step, self.mode, self.grid3,
                          centre, self.inv_two_sigma2, self.ramp_T, self.p.ramp_exponent,
                          self.p.base_work, self.p.work_per_cell)

    def diffuse(self, tile: int, state: dict, halos: dict, ctx: StepContext, tiling: Tiling) -> int:
        """One explicit diffusion step of ``u`` with the neighbours' one-cell halos."""
        u = state["u"]
        padded = self._padded(u, tile, halos, tiling)
        ctx.kernel(diffuse_tile, u, padded, self.p.diffusivity, self.ndim)
        return int(u.size)

    def _padded(self, u: np.ndarray, tile: int, halos: dict, tiling: Tiling) -> np.ndarray:
        """The tile's field with a one-cell border: neighbours' halos, mirrored at walls."""
        places, mirrors = self._receive_plan(tiling, tile)
        nx, ny, nz = u.shape
        pad = np.empty((nx + 2, ny + 2, nz + 2))
        pad[1:-1, 1:-1, 1:-1] = u
        for src, block in halos.items():
            pad[places[src]] = block
        for face, inner in mirrors:  # zero-flux walls
            pad[face] = pad[inner]
        return pad

    def gather(self, states: dict, tiling: Tiling) -> dict[str, np.ndarray]:
        out = {k: np.empty(tiling.grid) for k in ("u", "burn")}
        for t, st in states.items():
            sl = tiling.slices(t)
            for k in out:
                out[k][sl] = st[k].reshape(tuple(s.stop - s.start for s in sl))
        return out

    def load_map(self, step: int) -> np.ndarray:
        """The load field g over the whole grid at a step (for pictures)."""
        out = np.empty(tuple(int(n) for n in self.grid3))
        load_block(out, np.zeros(3, dtype=np.int64), step, self.mode, self.grid3,
                   self.start + self.velocity * step, self.inv_two_sigma2, self.ramp_T, self.p.ramp_exponent)
        return out.reshape(tuple(self.p.grid))


register_app(AppSpec("synthetic", SyntheticParams, SyntheticApp,
                     "moving load field (hot spot or two-rank ramp) over a diffusing field",
                     tiny={"grid": [24, 20], "work_per_cell": 8.0}, memory=synthetic_memory))
