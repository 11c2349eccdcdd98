"""The shallow-water app: finite volumes on root blocks that refine and coarsen as the water moves.

Phases of a step:

``cfl``      every tile's largest ``(|u| + c + |v| + c) / dx``, which each block measured at
             the end of the previous step, reduced by ``min`` into the one global time step (at
             the finest level present; no subcycling). Work: blocks.
``stage1``   (halo: the face neighbours' strips) forward Euler, or Heun's first stage at order 2.
             Work: cell updates.
``stage2``   (order 2 only; halo) Heun's second stage. Work: cell updates.
``balance_r`` (with adaptivity: ``r = 1 .. max_level - min_level``; halo: the face neighbours'
             target levels) on a regrid step, each block's target level is raised to at least
             its face neighbours' minus one; the last round moves every block to its target.
             On other steps they do nothing and exchange nothing. Work: blocks.

The tile set never changes: the work of a tile is the cells of its blocks, which follow the
water, and the trace records it step by step.

``app.dry = 0`` (the default) resolves, when the app is built, to
:data:`~.params.DRY_FRACTION` of the depth scale (the deepest initial water, or the depth a
side holds or lets in) and is written back into the parameters, so a run folder's
``config.toml`` records the number the run used.
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path

import numpy as np

from ...errors import ShoalError
from ...runtime.app import App, Phase, StepContext
from ...tiling import Tiling
from .blocks import balanced, topology
from .boundary import DEPTH, INFLOW, KINDS, dry_side_speed
from .kernels import (
    FWAVE,
    MINMOD,
    RUSANOV,
    VANLEER,
    advance,
    balance_round,
    block_flags,
    block_speeds,
    fastest_cell,
    layout,
    pack_faces,
)
from .params import DRY_FRACTION, SWEParams
from .regrid import average4, coarsen, refine
from .setups import Setup

FIELDS = ("h", "hu", "hv", "b")
EMPTY = {"lev": np.empty(0, dtype=np.int64), "data": np.empty(0)}


def _phases(order: int, rounds: int) -> tuple[Phase, ...]:
    # Every halo phase reads face neighbours only. The stages' reconstructions and fluxes run
    # along one axis at a time: a block's ghosts are filled on its faces only, from its face
    # neighbours' strips, and no flux reads a corner ghost; 2:1 balance compares a block's
    # target level with its face neighbours'. A block's face neighbour in another tile lies in
    # a face neighbour of its tile.
    phases = [Phase("cfl", reduction="min", work="blocks"),
              Phase("stage1", reads="faces", pack="pack_strips", work="cell updates")]
    if order == 2:
        phases.append(Phase("stage2", reads="faces", pack="pack_strips", work="cell updates"))
    for r in range(1, rounds + 1):
        phases.append(Phase(f"balance_{r}", reads="faces", pack="pack_targets", work="blocks",
                            method="regrid" if r == rounds else "balance"))
    return tuple(phases)


class SWEApp(App):
    """See the module docstring; the numerics are in :mod:`.kernels`, the blocks in :mod:`.blocks`."""

    name = "swe"
    phases = _phases(2, 2)  # every method a run may name; each run picks its own below
    # (report, strips_in, recv_lev: what the native kernels keep, see .native)
    transient = ("h0", "hu0", "hv0", "target", "report", "strips_in", "recv_lev")

    def __init__(self, params: SWEParams, steps: int):
        params.validate()
        self.p = params
        self.grid = (int(params.blocks[0]), int(params.blocks[1]))
        self.rounds = params.max_level - params.min_level
        self.phases = _phases(params.order, self.rounds)
        self.setup = Setup(params)
        self.sides = params.sides()
        kinds = [KINDS[side] for side in self.sides]
        # what each side prescribes: the discharge of an inflow side, the depth of a depth side
        self.side_values = np.array([q if kind == INFLOW else (d if kind == DEPTH else 0.0) for kind, q, d in
                                     zip(kinds, params.side_values("discharge"), params.side_values("side_depth"),
                                         strict=True)])
        self.side_speed = max(dry_side_speed(kind, value, params.g) for kind, value in
                              zip(kinds, self.side_values, strict=True))
        if params.dry == 0:
            params.dry = DRY_FRACTION * self.depth_scale()
        self.solver = FWAVE if params.solver == "fwave" else RUSANOV
        self.limiter = MINMOD if params.limiter == "minmod" else VANLEER

    def depth_scale(self) -> float:
        """The problem's depth (m): the deepest initial water, the depth a side holds, or the
        critical depth ``(q^2 / g)^(1/3)`` of the water a side lets in, whichever is largest."""
        kinds = [KINDS[side] for side in self.sides]
        sides = [value if kind == DEPTH else (value * value / self.p.g) ** (1 / 3) if kind == INFLOW else 0.0
                 for kind, value in zip(kinds, self.side_values, strict=True)]
        scale = max(self.setup.depth_scale(), *sides)
        if scale <= 0:
            raise ShoalError("app 'swe': no water anywhere at the start and no side lets any in (set app.initial, "
                             "the setup's water, or an inflow or depth side)")
        return scale

    # ----- levels -----------------------------------------------------------------------------
    def regrid_step(self, step: int) -> bool:
        """Whether blocks change level at the end of ``step``."""
        return self.rounds > 0 and (step + 1) % self.p.regrid_every == 0

    @functools.cached_property
    def initial_levels(self) -> np.ndarray:
        """Every root block's level at step 0: the criterion on the initial state at
        ``min_level``, balanced 2:1 (computed once, for the whole domain)."""
        p = self.p
        nbx, nby = self.grid
        target = np.full((nbx, nby), p.min_level, dtype=np.int64)
        if self.rounds == 0:
            return target
        for bx in range(nbx):
            for by in range(nby):
                pools = [np.pad(a, 2).reshape(-1) for a in self._initial_block(bx, by, p.min_level)]
                flagged, shore, _, _ = self._flags(pools, np.array([p.min_level]))
                if flagged[0] or shore[0]:
                    target[bx, by] = p.max_level
        for _ in range(self.rounds):
            padded = np.pad(target, 1, constant_values=-1)
            around = np.stack([padded[:-2, 1:-1], padded[2:, 1:-1], padded[1:-1, :-2], padded[1:-1, 2:]], axis=-1)
            target = balanced(target.reshape(-1), around.reshape(-1, 4)).reshape(nbx, nby)
        return target

    def _flags(self, pools, lev) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Per block of the pools ``h, hu, hv, b``: whether the criterion flags it, whether it
        holds a shoreline that moves (with ``app.shore``: wet and dry cells, and water faster
        than ``sqrt(g dry)``, the celerity of a film at the dry depth: a lake at rest is far
        slower), and whether it holds a dry cell and a wet one."""
        p = self.p
        flags, has_dry, has_wet, moving = block_flags(*pools, lev, p.block, p.dx0, p.criterion == "gradient",
                                                              p.threshold, p.sea_level, p.dry,
                                                              float(np.sqrt(p.g * p.dry)))
        shore = has_dry & has_wet & moving if p.shore else np.zeros_like(flags)
        return flags, shore, has_dry, has_wet

    def _initial_block(self, bx: int, by: int, level: int):
        return (*self.setup.block_water(bx, by, level), self.setup.block_bed(bx, by, level))

    # ----- the contract -----------------------------------------------------------------------
    def check_tiling(self, tiling: Tiling) -> None:
        """The tiling splits root blocks: its grid must be ``app.blocks``."""
        if tuple(tiling.grid) != self.grid:
            raise ShoalError(f"app 'swe': the tiling covers {tiling.grid} root blocks, app.blocks is {list(self.grid)}")

    def init_tile(self, tile: int, tiling: Tiling) -> dict:
        topo = self._topology(tiling, tile)
        lev = np.array([self.initial_levels[bx, by] for bx, by in topo.coords], dtype=np.int64)
        blocks = [self._initial_block(int(bx), int(by), int(lv)) for (bx, by), lv in zip(topo.coords, lev, strict=True)]
        state = {"lev": lev, "t": 0.0}
        for v, name in enumerate(FIELDS):
            state[name] = np.concatenate([np.pad(blk[v], 2).reshape(-1) for blk in blocks])
        self._measure_speeds(state)
        return state

    def _still_tile(self, tile: int, tiling: Tiling) -> dict:
        """A tile at ``min_level`` holding water at sea level (for compiling)."""
        topo = self._topology(tiling, tile)
        lev = np.full(len(topo.gids), self.p.min_level, dtype=np.int64)
        beds = [self.setup.block_bed(int(bx), int(by), self.p.min_level) for bx, by in topo.coords]
        state = {"lev": lev, "t": 0.0, "b": np.concatenate([np.pad(b, 2).reshape(-1) for b in beds])}
        state["h"] = np.maximum(self.p.sea_level - state["b"], 0.0)
        state["hu"], state["hv"] = np.zeros_like(state["h"]), np.zeros_like(state["h"])
        self._measure_speeds(state)
        return state

    def _measure_speeds(self, state: dict) -> None:
        """Each block's fastest ``|u| + |v| + 2c``, which the next ``cfl`` phase reads."""
        state["speed"] = block_speeds(state["h"], state["hu"], state["hv"], state["lev"], self.p.block,
                                              self.p.g, self.p.dry)

    def time(self, step: int, states: dict) -> float:
        """Simulated seconds, kept by every tile."""
        return float(next(iter(states.values()))["t"]) if states else float("nan")

    def proxy(self) -> tuple[SWEParams, float] | None:
        """The same run with root blocks of half the cells: twice the time step, so half a
        proxy step per step."""
        if self.p.block % 4 or self.p.bathymetry_file or self.p.initial:  # files and callables on this grid
            return None
        return dataclasses.replace(self.p, block=self.p.block // 2), 0.5

    def prepare(self, tiling: Tiling) -> None:
        """Compile the kernels on the run's first tile and the neighbours the stages read, filled
        with still water (the code compiled depends on the types alone; a resumed run may not
        have what made its initial state)."""
        stages = [phase for phase in self.phases if phase.name.startswith("stage")]
        state = self._still_tile(0, tiling)
        halos = {int(n): self.pack_strips(self._still_tile(int(n), tiling), int(n), tiling)[0]
                 for n in tiling.stencil(stages[0].reads)[0]}
        ctx = StepContext(0, {"cfl": 0.0})  # a throwaway state: a step of no length compiles the same code
        for phase in stages:
            getattr(self, phase.method)(0, state, halos, ctx, tiling)

    def native(self, tiling: Tiling):
        """The phases as compiled kernels (:mod:`.native`); on a regrid step, what reads the
        setup runs in Python."""
        from .native import native_plan

        return native_plan(self, tiling)

    def halo_wanted(self, phase: Phase, step: int) -> bool:
        """Target levels travel on regrid steps only."""
        return not phase.name.startswith("balance") or self.regrid_step(step)

    # ----- phases -----------------------------------------------------------------------------
    def cfl(self, tile: int, state: dict, halos: dict, ctx: StepContext, tiling: Tiling) -> tuple[int, float]:
        """The largest stable time step of the tile's cells (and of the water an inflow or depth
        side would send into a dry block)."""
        speed = state["speed"]
        if self.side_speed > 0:
            kind = self._topology(tiling, tile).kind
            speed = np.where(((kind == INFLOW) | (kind == DEPTH)).any(axis=1), np.maximum(speed, self.side_speed),
                             speed)
        top = float(np.max(speed * 2.0 ** state["lev"])) / self.p.dx0
        return len(state["lev"]), (self.p.cfl / top if top > 0 else np.inf)

    def stage1(self, tile: int, state: dict, halos: dict, ctx: StepContext, tiling: Tiling) -> int:
        """Forward Euler (order 1) or Heun's first stage (order 2)."""
        return self._stage(tile, state, halos, ctx, tiling, 0 if self.p.order == 1 else 1)

    def stage2(self, tile: int, state: dict, halos: dict, ctx: StepContext, tiling: Tiling) -> int:
        """Heun's second stage: the mean of the saved state and one more Euler step."""
        return self._stage(tile, state, halos, ctx, tiling, 2)

    def _stage(self, tile, state, halos, ctx, tiling, stage) -> int:
        dt = ctx.reduced["cfl"]
        if np.isinf(dt):
            raise ShoalError("no wet cell anywhere, so no time step")
        topo = self._topology(tiling, tile)
        lev = state["lev"]
        recv = topo.receive
        if recv.tiles:
            recv_lev = np.concatenate([halos[t]["lev"] for t in recv.tiles])
            halo = np.concatenate([halos[t]["data"] for t in recv.tiles])
        else:
            recv_lev, halo = EMPTY["lev"], EMPTY["data"]
        if stage == 1:
            for name in ("h0", "hu0", "hv0"):
                state[name] = np.empty_like(state["h"])
        h0, hu0, hv0 = (state[name] if stage else state["h"] for name in ("h0", "hu0", "hv0"))
        courant, bad, i, j, cells = ctx.kernel(
            advance, state["h"], state["hu"], state["hv"], state["b"], h0, hu0, hv0, lev, self.p.block,
            topo.kind, topo.local, recv.k, recv.f, recv_lev, halo, self.side_values, dt, self.p.dx0, self.p.g,
            self.p.dry, self.solver, self.p.order, self.limiter, stage, state["speed"])
        if bad >= 0:
            # the executor names the step, the phase and the tile before this
            raise ShoalError(f"depth negative or not finite at {self._where(topo, lev, bad, i, j)}")
        if courant > 1.0:
            k, i, j, _ = fastest_cell(state["h"], state["hu"], state["hv"], lev, self.p.block, self.p.dx0,
                                              self.p.g, self.p.dry)
            raise ShoalError(f"Courant number {courant:.3g} > 1 (app.cfl {self.p.cfl}): the time step no longer "
                             f"bounds the waves; the fastest now at {self._where(topo, lev, k, i, j)}")
        if stage != 1:
            state["t"] = float(state["t"]) + dt
            if self.regrid_step(ctx.step):
                state["target"] = self._targets(state, lev, topo)
        return cells

    def _where(self, topo, lev, k, i, j) -> str:
        bx, by = (int(c) for c in topo.coords[k])
        n = self.p.block * 2 ** int(lev[k])
        dx = self.p.dx0 / 2 ** int(lev[k])
        x = self.p.origin[0] + (bx * n + i + 0.5) * dx
        y = self.p.origin[1] + (by * n + j + 0.5) * dx
        return f"cell ({i}, {j}) of root block ({bx}, {by}) at level {int(lev[k])} (x = {x:.6g} m, y = {y:.6g} m)"

    def _targets(self, state, lev, topo) -> np.ndarray:
        """Each block's wished level: the finest where the criterion flags a cell (or, with
        ``shore``, where a shoreline moves), else the coarsest; with ``freeze_dry``, a block
        keeps its level if it holds a dry cell (unless ``shore`` moves it: a moving shoreline,
        or no water at all) or if the bed one of its cells hides at finer levels would pierce
        the water (refining or coarsening next to a shore cannot keep both a lake at rest and
        its volume exact: ``shore`` gives up the first where the shoreline moves)."""
        p = self.p
        flags, shore, has_dry, has_wet = self._flags([state[name] for name in FIELDS], lev)
        target = np.where(flags | shore, p.max_level, p.min_level).astype(np.int64)
        if not p.freeze_dry:
            return target
        frozen = has_dry & ~shore
        if p.shore:
            frozen &= has_wet  # a block all dry holds no water to disturb: it moves as asked
        if not has_dry.all():  # and blocks whose water a finer bed would pierce
            nn, off = layout(lev, p.block)
            for k in np.flatnonzero(~has_dry & (target != lev)):
                bx, by = topo.coords[k]
                top = self.setup.block_bed_top(int(bx), int(by), int(lev[k]))
                h, b = (self._interior(state[name], off[k], nn[k]) for name in ("h", "b"))
                frozen[k] = bool(np.any(h + b <= top + p.dry))
        return np.where(frozen, lev, target)

    @staticmethod
    def _interior(pool, start, n):
        m = n + 4
        return pool[start:start + m * m].reshape(m, m)[2:-2, 2:-2]

    def balance(self, tile: int, state: dict, halos: dict, ctx: StepContext, tiling: Tiling) -> int:
        """One round of 2:1 balance of the target levels (on regrid steps)."""
        if not self.regrid_step(ctx.step):
            return 0
        topo = self._topology(tiling, tile)
        recv = topo.receive
        received = np.concatenate([halos[t] for t in recv.tiles]) if recv.tiles else EMPTY["lev"]
        state["target"] = balance_round(state["target"], topo.kind, topo.local, recv.k, recv.f, received)
        return len(state["lev"])

    def regrid(self, tile: int, state: dict, halos: dict, ctx: StepContext, tiling: Tiling) -> int:
        """The last balance round, then every block moves to its target level."""
        if not self.balance(tile, state, halos, ctx, tiling):
            return 0
        return self._move_blocks(state, state.pop("target"), self._topology(tiling, tile))

    def _move_blocks(self, state: dict, target: np.ndarray, topo) -> int:
        """Every block of the tile to its ``target`` level (new pools, levels and speeds); the
        blocks."""
        lev = state["lev"]
        if np.array_equal(lev, target):
            return len(lev)
        nn, off = layout(lev, self.p.block)
        pieces = {name: [] for name in FIELDS}
        for k, (bx, by) in enumerate(topo.coords):
            if lev[k] == target[k]:  # most blocks: their cells as they are, ghosts included
                for name in FIELDS:
                    pieces[name].append(state[name][off[k]:off[k + 1]])
                continue
            h, hu, hv, b = (self._interior(state[name], off[k], nn[k]) for name in FIELDS)
            level = int(lev[k])
            while level != target[k]:
                step = 1 if target[k] > level else -1
                bed = self.setup.block_bed(int(bx), int(by), level + step)
                if step > 0:
                    h, hu, hv = refine(h, hu, hv, b, bed, self.p.dry)
                else:
                    h, hu, hv = coarsen(h, hu, hv, b, bed, self.p.dry)
                b, level = bed, level + step
            for name, a in zip(FIELDS, (h, hu, hv, b), strict=True):
                pieces[name].append(np.pad(a, 2).reshape(-1))
        for name in FIELDS:
            state[name] = np.concatenate(pieces[name])
        state["lev"] = target.astype(np.int64)
        self._measure_speeds(state)
        return len(lev)

    # ----- halos ------------------------------------------------------------------------------
    def pack_strips(self, state: dict, src: int, tiling: Tiling) -> dict[int, dict]:
        """Each face neighbour tile gets the strips of the blocks that touch its own, with their
        levels (the tiles a block's faces touch are the tile's face neighbours, every one of them)."""
        send = self._topology(tiling, src).send
        lev = state["lev"]
        data, ends = pack_faces(state["h"], state["hu"], state["hv"], state["b"], lev, self.p.block, send.k,
                                        send.f)
        sent = lev[send.k]
        cut = ends[send.split]
        out = {}
        for i, t in enumerate(send.tiles):
            a, b = send.split[i], send.split[i + 1]
            out[t] = {"lev": sent[a:b], "data": data[cut[i]:cut[i + 1]]}
        return out

    def pack_targets(self, state: dict, src: int, tiling: Tiling) -> dict[int, np.ndarray]:
        """Each face neighbour tile gets the target levels of the blocks that touch its own."""
        send = self._topology(tiling, src).send
        sent = state["target"][send.k]
        return {t: sent[send.split[i]:send.split[i + 1]] for i, t in enumerate(send.tiles)}

    @functools.lru_cache(maxsize=4096)  # noqa: B019  (one app per run; tilings are few)
    def _topology(self, tiling: Tiling, tile: int):
        return topology(tiling, tile, self.sides)

    # ----- output -----------------------------------------------------------------------------
    def gather(self, states: dict, tiling: Tiling) -> dict[str, np.ndarray]:
        """Every block's level and cells, in root-block order: the same arrays for any tiling."""
        by_gid = {}
        for tile, state in states.items():
            topo = self._topology(tiling, tile)
            nn, off = layout(state["lev"], self.p.block)
            for k, g in enumerate(topo.gids):
                by_gid[int(g)] = (int(state["lev"][k]),
                                  [self._interior(state[name], off[k], nn[k]).reshape(-1) for name in FIELDS])
        order = sorted(by_gid)
        out = {"level": np.array([by_gid[g][0] for g in order], dtype=np.int64)}
        for v, name in enumerate(FIELDS):
            out[name] = np.concatenate([by_gid[g][1][v] for g in order])
        out["time"] = np.array(float(next(iter(states.values()))["t"]))
        return out

    def frame(self, gathered: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The surface on one uniform grid of at most 2 MB, and every root block's level."""
        from .drawing import frame

        return frame(self, gathered)

    def draw(self, frame: dict[str, np.ndarray], ax, scale: tuple[float, float] | None = None):
        """The surface above sea level, land grey, every root block outlined by its level."""
        from .drawing import draw

        return draw(frame, ax, scale)

    def export(self, gathered: dict[str, np.ndarray], frames: Path, step: int) -> Path:
        """Every cell at its level as ``frames/paraview/state-<step>.vthb`` (overlapping AMR),
        listed with its simulated time in ``frames/series.pvd``."""
        from .vtk import export

        return export(self, gathered, frames, step)

    def totals(self, gathered: dict) -> dict[str, float]:
        """Volume (m^3) and momenta (m^4/s) of a gathered state, summed block by block in order."""
        out = {"mass": 0.0, "momentum_x": 0.0, "momentum_y": 0.0}
        start = 0
        for lv in gathered["level"]:
            n = self.p.block * 2 ** int(lv)
            area = (self.p.dx0 / 2 ** int(lv)) ** 2
            for key, name in (("mass", "h"), ("momentum_x", "hu"), ("momentum_y", "hv")):
                out[key] += float(np.sum(gathered[name][start:start + n * n])) * area
            start += n * n
        return out

    def uniform(self, gathered: dict, level: int) -> dict[str, np.ndarray]:
        """``h, hu, hv, b, eta`` on one level's uniform grid (axis 0 along x): cells of coarser
        blocks repeated, finer ones averaged."""
        nbx, nby = self.grid
        n = self.p.block * 2**level
        out = {name: np.empty((nbx * n, nby * n)) for name in FIELDS}
        start = 0
        for g, lv in enumerate(gathered["level"]):
            bx, by = divmod(g, nby)
            nb_ = self.p.block * 2 ** int(lv)
            for name in FIELDS:
                a = gathered[name][start:start + nb_ * nb_].reshape(nb_, nb_)
                for _ in range(int(lv) - level):
                    a = average4(a)
                if lv < level:
                    r = 2 ** (level - int(lv))
                    a = np.repeat(np.repeat(a, r, axis=0), r, axis=1)
                out[name][bx * n:(bx + 1) * n, by * n:(by + 1) * n] = a
            start += nb_ * nb_
        out["eta"] = np.where(out["h"] > self.p.dry, out["h"] + out["b"], np.nan)
        return out
