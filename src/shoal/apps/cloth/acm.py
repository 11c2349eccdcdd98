"""Asynchronous contact mechanics in one piece: collision windows, nested layers, rollback.

The contact-mechanics paper's integrator (§II-A) on a whole cloth. Time advances in *windows*
of ``window`` material steps. Material forces kick every vertex at the start of each material
step ``Δt``; each contact pair with ``L`` active layers is kicked by layer ``l = 1..L`` on that
layer's own clock, every ``Δt / n_l`` (:func:`~.contact.layer_substeps`), with the impulse of
that layer alone. Between kicks every vertex drifts on a straight line, so a window's
trajectories are piecewise linear between the *events* (the times some layer ticks).

At the window's end comes detection. The broad phase (:mod:`.broad`) finds the pairs whose
swept boxes come within the first layer's thickness: vertex–face and edge–edge pairs sharing
no vertex, and a vertex, an edge or a face with an obstacle (:mod:`.obstacles`). Each is tested along each trajectory
piece for coming within the thickness of its first inactive layer, ``η_{L+1}``. The test is
conservative: a piece is halved while the gap at its start, less how far the pair's points
move in it (the gap moves by no more), falls below the thickness although the gap itself does
not; after :data:`SPLITS` halvings the pair is called close (a false alarm costs a layer, never
a miss). If any pair came close it gains that layer, the state rolls back to the window's
snapshot and the window runs again; a window with none is kept, and a pair whose gap provably
stayed out of its innermost layer, which therefore pushed nothing, drops it.

Pairs are kept by key (:func:`~.broad.pair_keys`) in sorted order, so the kicks of a window
come in the same order whatever found the pairs.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from fractions import Fraction

import numba as nb
import numpy as np

from ...errors import ShoalError
from .broad import candidate_pairs, obstacle_pairs, pair_keys, split_keys, swept_boxes
from .contact import (
    EDGE_EDGE,
    EDGE_OBSTACLE,
    FACE_OBSTACLE,
    VERTEX_FACE,
    VERTEX_OBSTACLE,
    cloth_obstacle,
    edge_edge,
    friction_kick,
    layer_substeps,
    obstacle_closest,
    point_triangle,
    segment_segment,
    vertex_face,
)
from .crossings import crossings
from .model import ClothModel
from .obstacles import Obstacle, crossed_triangles, ends_at, radii, spins_at

SPLITS = 16  # a piece is halved at most this many times before its pair is called close


@dataclass
class WindowLog:
    """Per kept window: when it ended (s), its rollbacks, pairs with layers, layers in all,
    least gap (at its events, m; infinite when no pair came within the first layer's
    thickness), the pairs its broad phase passed to the narrow one, the edges crossing a
    triangle at its end (:mod:`.crossings`: none, unless the layers failed), and the seconds it
    took integrating (material and penalty forces) and detecting (broad and narrow phases),
    over all its attempts."""

    time: list[float] = field(default_factory=list)
    rollbacks: list[int] = field(default_factory=list)
    pairs: list[int] = field(default_factory=list)
    layers: list[int] = field(default_factory=list)
    min_gap: list[float] = field(default_factory=list)
    candidates: list[int] = field(default_factory=list)
    intersections: list[int] = field(default_factory=list)
    forces_s: list[float] = field(default_factory=list)
    detection_s: list[float] = field(default_factory=list)


class ContactCloth:
    """A cloth with self-contact and obstacles by nested penalty layers, stepped in collision
    windows.

    Parameters
    ----------
    model : ClothModel
        The cloth.
    dt : float
        The material step, s.
    eta : float
        The first layer's thickness, m.
    stiffness : float
        The first layer's stiffness, N/m.
    window : int
        Material steps per collision window.
    max_layers : int
        Layers a pair may gain; a pair that needs more stops the run in one line.
    obstacles : sequence of Obstacle
        Kinematic obstacles, pushed by the same layers.
    pinned : ndarray of bool, optional
        Vertices that take no kick (they drift at their own velocity, or as ``motion`` leads
        them).
    motion : callable, optional
        ``motion(t)``: the pinned vertices' positions at time ``t`` (shape (pinned, 3), m). Each
        material step sets their velocities so that they reach the next step's positions (a
        clamped edge turned, say); without it they drift at their own velocity.
    damping : float
        Velocity a free vertex loses per second, applied at each material kick (1/s; 0: none,
        the motion then conserves momentum and, without contact, energy).
    friction : tuple of float
        Coulomb friction coefficients between the cloth's primitives and against obstacles
        (:func:`~.contact.friction_kick`; 0: frictionless).

    Raises
    ------
    ShoalError
        If a constant is not positive, or the time step is longer than the material allows
        (:meth:`~.model.ClothModel.stable_step`).
    """

    def __init__(self, model: ClothModel, dt: float, eta: float, stiffness: float, window: int = 10,
                 max_layers: int = 24, obstacles: tuple[Obstacle, ...] = (), pinned: np.ndarray | None = None,
                 motion=None,
                 damping: float = 0.0, friction: tuple[float, float] = (0.0, 0.0)):
        for name, value in (("time step", dt), ("contact thickness", eta), ("contact stiffness", stiffness),
                            ("window", window), ("layer limit", max_layers)):
            if not value > 0:
                raise ShoalError(f"the cloth's {name} must be positive, got {value}")
        if dt > model.stable_step():
            raise ShoalError(f"the cloth's time step {dt:g} s is longer than its mesh and material allow "
                             f"({model.stable_step():.3g} s): the kick-drift would blow up")
        if not 0 <= damping * dt < 1:
            raise ShoalError(f"the cloth's damping must be 0 or more and below 1 / time step (1/s), got {damping}")
        self.damping = float(damping)
        self.friction = np.asarray(friction, np.float64).reshape(2)
        if not np.all(self.friction >= 0):
            raise ShoalError(f"the cloth's friction coefficients must be 0 or more, got {tuple(friction)}")
        self.model, self.dt, self.eta, self.k = model, float(dt), float(eta), float(stiffness)
        self.window, self.max_layers = int(window), int(max_layers)
        self.obstacles = tuple(obstacles)
        self.radius = radii(self.obstacles)
        n = len(model.surface.vertices)
        self.free = np.ones(n, bool) if pinned is None else ~np.asarray(pinned, bool)
        self.motion = motion
        self.inverse = np.where(self.free, 1.0 / model.mass, 0.0)
        self.keys = np.zeros(0, np.int64)  # pairs with layers, sorted
        self.layers = np.zeros(0, np.int64)  # their active layers
        self.time = 0.0
        self.windows = 0
        self.log = WindowLog()

    def rows(self, keys: np.ndarray) -> np.ndarray:
        """The pairs of ``keys`` as rows ``(kind, four indices)``: ``(VERTEX_FACE, p, a, b, c)``,
        ``(EDGE_EDGE, p0, p1, q0, q1)``, or the primitive's up to three vertices (then -1) and
        the obstacle: ``(VERTEX_OBSTACLE, p, -1, -1, o)``, ``(EDGE_OBSTACLE, a, b, -1, o)``,
        ``(FACE_OBSTACLE, a, b, c, o)``.

        Parameters
        ----------
        keys : ndarray of int64
            Pair keys (:func:`~.broad.pair_keys`).
        """
        kind, first, second = split_keys(keys)
        s = self.model.surface
        out = np.full((len(keys), 5), -1, np.int64)
        out[:, 0] = kind
        face, edge = kind == VERTEX_FACE, kind == EDGE_EDGE
        out[face, 1], out[face, 2:] = first[face], s.triangles[second[face]]
        out[edge, 1:3], out[edge, 3:] = s.edges[first[edge]], s.edges[second[edge]]
        near = kind >= VERTEX_OBSTACLE
        out[near, 4] = second[near]
        on = kind == VERTEX_OBSTACLE
        out[on, 1] = first[on]
        on = kind == EDGE_OBSTACLE
        out[on, 1:3] = s.edges[first[on]]
        on = kind == FACE_OBSTACLE
        out[on, 1:4] = s.triangles[first[on]]
        return out

    def run(self, x: np.ndarray, v: np.ndarray, windows: int, gravity=(0.0, 0.0, 0.0)) -> WindowLog:
        """``windows`` collision windows on ``x`` and ``v`` in place; what each one saw.

        Parameters
        ----------
        x, v : ndarray, shape (n, 3)
            Positions (m) and velocities (m/s), updated.
        windows : int
            How many windows to keep.
        gravity : sequence of float
            Acceleration, m/s².

        Raises
        ------
        ShoalError
            If a vertex starts inside an obstacle, a pair needs more than ``max_layers`` layers,
            or two primitives touch (the run cannot keep them apart: it stops rather than go
            on with the cloth through itself).
        """
        g = np.asarray(gravity, np.float64)
        if self.windows == 0:
            self.check_start(x)
        s = self.model.surface
        for _ in range(windows):
            x0, v0, rollbacks = x.copy(), v.copy(), 0
            forces = detection = 0.0
            while True:
                start = time.perf_counter()
                track, ends, ticks = self._simulate(x, v, g)
                middle = time.perf_counter()
                forces += middle - start
                low, high = swept_boxes(track)
                found = np.concatenate([candidate_pairs(low, high, s.triangles, s.edges, self.eta),
                                        obstacle_pairs(low, high, s.triangles, s.edges, ends, self.radius, self.eta)])
                keys = np.union1d(found, self.keys)
                layers = np.zeros(len(keys), np.int64)
                layers[np.searchsorted(keys, self.keys)] = self.layers
                rows = self.rows(keys)
                next_layer = self.eta * (layers + 1.0) ** -0.25  # each pair's first inactive layer's thickness
                levels = self.levels(rows, rows[layers > 0], layers[layers > 0])
                bound, least = window_gaps(track, ends, self.radius, rows, next_layer, levels, ticks)
                detection += time.perf_counter() - middle
                close = bound < next_layer
                if not close.any():
                    break
                layers += close
                if layers.max() > self.max_layers:
                    k = int(np.argmax(layers))
                    raise self.overflow(rows[k], least[k], self.windows)
                self.keys, self.layers = keys[layers > 0], layers[layers > 0]
                x[:], v[:] = x0, v0
                rollbacks += 1
            touching = np.flatnonzero(least <= 0)  # impossible in a kept window, unless round-off
            if len(touching):
                raise self.lost(rows[touching[0]], least[touching[0]], self.windows)
            active = np.flatnonzero(layers)
            innermost = self.eta * layers[active] ** -0.25
            # (a bound refined against the innermost layer, not the next: those pairs only)
            out, _ = window_gaps(track, ends, self.radius, rows[active], innermost, levels[active], ticks)
            layers[active[out >= innermost]] -= 1
            self.keys, self.layers = keys[layers > 0], layers[layers > 0]
            self.time += self.window * self.dt
            self.windows += 1
            self.log.time.append(self.time)
            self.log.rollbacks.append(rollbacks)
            self.log.pairs.append(len(self.keys))
            self.log.layers.append(int(self.layers.sum()))
            self.log.min_gap.append(float(least.min()) if len(least) else math.inf)
            self.log.candidates.append(len(keys))
            self.log.intersections.append(crossings(x, s.edges, s.triangles))
            self.log.forces_s.append(forces)
            self.log.detection_s.append(detection)
        return self.log

    def levels(self, rows: np.ndarray, active: np.ndarray, layers: np.ndarray) -> np.ndarray:
        """Per pair of ``rows``, the most layers kicking any of its points while the window ran,
        as its points move linearly between the ticks of layers up to that many
        (:func:`window_gaps`); all layers for a pair with a moving obstacle, whose ends follow a
        curve through every event.

        Parameters
        ----------
        rows : ndarray, shape (pairs, 5)
            The pairs tested (:meth:`rows`).
        active, layers : ndarray
            Every pair with layers in the window (its rows) and how many.
        """
        return self.pair_levels(rows, self.vertex_layers(active, layers), int(layers.max(initial=0)))

    def vertex_layers(self, active: np.ndarray, layers: np.ndarray) -> np.ndarray:
        """Per vertex the most layers of a pair of ``active`` (rows) with ``layers`` that has it,
        and a last entry, 0, for the rows' -1."""
        top = np.zeros(len(self.model.surface.vertices) + 1, np.int64)
        np.maximum.at(top, points_of(active).ravel(), np.repeat(layers, 4))
        top[-1] = 0
        return top

    def pair_levels(self, rows: np.ndarray, top: np.ndarray, most: int) -> np.ndarray:
        """:meth:`levels` of ``rows`` from each vertex's most layers ``top``
        (:meth:`vertex_layers`) and the most of any pair, ``most``."""
        levels = top[points_of(rows)].max(axis=1, initial=0)
        moving = np.array([o.spin is not None for o in self.obstacles] + [False])
        levels[moving[np.where(rows[:, 0] >= VERTEX_OBSTACLE, rows[:, 4], -1)]] = most
        return levels

    def check_start(self, x: np.ndarray) -> None:
        """Refuse a start with the cloth inside an obstacle, or an obstacle through the cloth."""
        if not self.obstacles:
            return
        ends = ends_at(self.obstacles, np.array([self.time]))[0]
        s = self.model.surface
        every = [pair_keys(kind, np.repeat(np.arange(count), len(self.obstacles)),
                           np.tile(np.arange(len(self.obstacles)), count))
                 for kind, count in ((VERTEX_OBSTACLE, len(x)), (EDGE_OBSTACLE, len(s.edges)),
                                     (FACE_OBSTACLE, len(s.triangles)))]
        rows = self.rows(np.concatenate(every))
        gaps = _gaps(x, ends, self.radius, rows)
        inside = np.flatnonzero(gaps <= 0)
        if len(inside):
            raise ShoalError(f"the cloth starts inside obstacle {rows[inside[0], 4]} ({self._name(rows[inside[0]])}, "
                             f"{-gaps[inside[0]]:.3g} m deep): move the obstacle or the cloth apart")
        for o in range(len(self.obstacles)):
            crossed = crossed_triangles(x[s.triangles], ends[o])
            if len(crossed):
                raise ShoalError(f"obstacle {o}'s axis passes through triangle {crossed[0]} at the start: move the "
                                 "obstacle or the cloth apart")

    def _name(self, row: np.ndarray) -> str:
        kind = {VERTEX_FACE: "vertex-face", EDGE_EDGE: "edge-edge", VERTEX_OBSTACLE: "vertex-obstacle",
                EDGE_OBSTACLE: "edge-obstacle", FACE_OBSTACLE: "face-obstacle"}[int(row[0])]
        return f"{kind} {[int(q) for q in row[1:] if q >= 0]}"

    def lost(self, row: np.ndarray, gap: float, window: int) -> ShoalError:
        """The error that stops a run whose pair ``row`` touched in ``window``."""
        return ShoalError(f"window {window}: contact pair {self._name(row)} touched (gap {gap:.3g} m): the cloth "
                          "would pass through; lower the time step or the window, or raise the stiffness")

    def overflow(self, row: np.ndarray, gap: float, window: int) -> ShoalError:
        """The error that stops a run whose pair ``row`` needs more layers than it may have."""
        return ShoalError(f"window {window}: contact pair {self._name(row)} needs more than {self.max_layers} layers "
                          f"(gap {gap:.3g} m): lower the time step or raise the stiffness")

    def schedule(self, top: int, start: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """A window from time ``start`` with ``top`` layers at most on a pair: within a material
        step, the events' times (fractions of it, from 0, then 1) and, per event and layer,
        whether that layer ticks then; the obstacles' ends at every event of the window and at
        its end, shape (window × events + 1, obstacles, 2, 3); their angular velocities and
        pivots at every event."""
        times = sorted({Fraction(j, layer_substeps(n)) for n in range(1, top + 1) for j in range(layer_substeps(n))}
                       | {Fraction(0)})
        ticks = np.zeros((len(times), top + 1), bool)
        for e, t in enumerate(times):
            for n in range(1, top + 1):
                ticks[e, n] = (t * layer_substeps(n)).denominator == 1
        times = np.array([float(t) for t in times] + [1.0])
        at = start + self.dt * (np.arange(self.window)[:, None] + times[None, :-1]).ravel()
        ends = ends_at(self.obstacles, np.append(at, start + self.window * self.dt))
        omega, pivot = spins_at(self.obstacles, at)
        return times, ticks, ends, omega, pivot

    def lead(self, x: np.ndarray, v: np.ndarray, where: np.ndarray, rank: np.ndarray, step: int,
             start: float) -> None:
        """Set the velocities of pinned vertices (rows ``where`` of ``x`` and ``v``, rows ``rank``
        of ``motion``'s positions) to reach, at the end of material step ``step`` of the window
        from time ``start``, where ``motion`` leads them (nothing without ``motion``)."""
        if self.motion is not None and len(where):
            to = self.motion(start + (step + 1) * self.dt)
            v[where] = (to[rank] - x[where]) / self.dt

    def kick(self, v: np.ndarray, f: np.ndarray, inverse: np.ndarray, free: np.ndarray, g: np.ndarray) -> None:
        """A material step's kick of velocities ``v`` by forces ``f`` and gravity ``g``
        (``inverse`` masses, ``free`` vertices: the rows of ``v``), then its damping."""
        v += self.dt * (inverse[:, None] * f + free[:, None] * g)
        if self.damping:
            v[free] *= 1.0 - self.damping * self.dt

    def _simulate(self, x: np.ndarray, v: np.ndarray, g: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """One window from ``x``, ``v`` (updated): the positions at every event and at the end,
        shape (window × events + 1, n, 3), the obstacles' ends then, shape
        (window × events + 1, obstacles, 2, 3), and per event of a material step and layer
        whether it ticks then."""
        times, ticks, ends, omega, pivot = self.schedule(int(self.layers.max(initial=0)), self.time)
        events = len(times) - 1
        f = np.zeros_like(x)
        track = np.empty((self.window * events + 1, *x.shape))
        track[0] = x
        rows = self.rows(self.keys)
        pinned = np.flatnonzero(~self.free)
        for step in range(self.window):
            self.lead(x, v, pinned, np.arange(len(pinned)), step, self.time)
            self.model.forces(x, f)
            self.kick(v, f, self.inverse, self.free, g)
            penalty_step(x, v, self.inverse, rows, self.layers, times, ticks, self.eta, self.k, self.dt,
                         track, ends, self.radius, step * events, self.friction, omega, pivot)
        return track, ends, ticks


@nb.njit(cache=True, nogil=True)
def penalty_step(x, v, inverse, rows, layers, times, ticks, eta, k, dt, track, ends, radius, row, mu, omega,
                         pivot):
    """One material step's events: at each, the ticking layers of every active pair kick its
    points (layer ``l`` alone, with its own step ``dt / n_l``, then its friction: ``mu[0]``
    between the cloth's primitives, ``mu[1]`` against obstacles), then all drift to the next."""
    out = np.zeros((4, 3))
    work = np.zeros(10)
    for e in range(len(times) - 1):
        for i in range(len(rows)):
            p = rows[i]
            for layer in range(1, layers[i] + 1):
                if not ticks[e, layer]:
                    continue
                if p[0] == VERTEX_FACE:
                    vertex_face(x, p[1], p[2], p[3], p[4], eta, k, layer, layer, out)
                elif p[0] == EDGE_EDGE:
                    edge_edge(x, p[1], p[2], p[3], p[4], eta, k, layer, layer, out)
                else:
                    cloth_obstacle(x, p, ends[row + e], radius[p[4]], eta, k, layer, layer, out)
                step = dt / layer_substeps(layer)
                for r in range(4):
                    q = p[1 + r]
                    if q < 0 or (r == 3 and p[0] >= VERTEX_OBSTACLE):
                        continue
                    for axis in range(3):
                        v[q, axis] += step * inverse[q] * out[r, axis]
                friction_kick(x, v, inverse, p, out, step, mu[1 if p[0] >= VERTEX_OBSTACLE else 0], omega[row + e],
                              pivot, work)
        h = dt * (times[e + 1] - times[e])
        for q in range(x.shape[0]):
            for axis in range(3):
                x[q, axis] += h * v[q, axis]
        track[row + e + 1] = x


@nb.njit(cache=True, nogil=True)
def _gap(y, ends, radius, p):
    """Pair ``p``'s gap at positions ``y`` with the obstacles' ends ``ends``, m."""
    if p[0] == VERTEX_FACE:
        d2, _, _, _ = point_triangle(y[p[1], 0], y[p[1], 1], y[p[1], 2], y[p[2], 0], y[p[2], 1], y[p[2], 2],
                                     y[p[3], 0], y[p[3], 1], y[p[3], 2], y[p[4], 0], y[p[4], 1], y[p[4], 2])
    elif p[0] == EDGE_EDGE:
        d2, _, _ = segment_segment(y[p[1], 0], y[p[1], 1], y[p[1], 2], y[p[2], 0], y[p[2], 1], y[p[2], 2],
                                   y[p[3], 0], y[p[3], 1], y[p[3], 2], y[p[4], 0], y[p[4], 1], y[p[4], 2])
    else:
        d2, _, _, _, _, _, _ = obstacle_closest(y, p, ends)
        return math.sqrt(d2) - radius[p[4]]
    return math.sqrt(d2)


@nb.njit(cache=True, nogil=True)
def window_gaps(track, ends, radius, rows, thresholds, levels, ticks):
    """Per pair, a lower bound of its least gap along the window's pieces, refined until it is
    at least ``thresholds[pair]`` or the gap itself falls below it (the pair is then close, and
    the bound is that gap), and its least gap at the instants tested (both m).

    Parameters
    ----------
    track : ndarray, shape (events, n, 3)
        The vertices' positions at the window's events.
    ends : ndarray, shape (events, obstacles, 2, 3)
        The obstacles' ends then.
    radius : ndarray
        The obstacles' radii.
    rows : ndarray, shape (pairs, 5)
        The pairs (:meth:`ContactCloth.rows`).
    thresholds : ndarray
        Per pair, the gap it is tested against.
    levels : ndarray of int
        Per pair, the layers whose ticks bound its pieces: its points move linearly between
        the events where one of layers ``1..level`` ticks (material steps only for level 0).
    ticks : ndarray of bool, shape (events per material step, layers + 1)
        Whether each layer ticks at each event of a material step.
    """
    bound = np.empty(len(rows))
    least = np.empty(len(rows))
    y = np.empty((track.shape[1], 3))
    moved = np.empty(ends.shape[1:])
    stack = np.empty((SPLITS + 2, 3))
    last = track.shape[0] - 1
    events = ticks.shape[0]
    steps = last // events
    marks = np.zeros((ticks.shape[1], events), np.bool_)  # per level, the events that end a piece
    for level in range(ticks.shape[1]):
        marks[level, 0] = True
        for e in range(events):
            for layer in range(1, level + 1):
                marks[level, e] |= ticks[e, layer]
    # How far each point strays from where it was at the window's start, and at each material
    # step's: a pair's gap in a span is at least its gap at the span's start less its points'
    # reach, which rules out most pairs in one test instead of one per piece.
    reach = _reach(track, events)
    ends_reach = _reach(ends.reshape(ends.shape[0], -1, 3), events)
    for i in range(len(rows)):
        p = rows[i]
        low = min(_gap(track[0], ends[0], radius, p), _gap(track[last], ends[last], radius, p))
        b = low - _pair_reach(reach, ends_reach, steps, p)
        if b < thresholds[i]:
            b = np.inf
            for step in range(steps):
                first = step * events
                start = _gap(track[first], ends[first], radius, p)
                low = min(low, start)
                span = start - _pair_reach(reach, ends_reach, step, p)
                if span >= thresholds[i]:
                    b = min(b, span)
                    continue
                piece = first
                while piece < first + events:
                    after = piece + 1
                    while after < first + events and not marks[levels[i], after - first]:
                        after += 1
                    low = min(low, _gap(track[piece], ends[piece], radius, p))
                    b = min(b, _piece_bound(track[piece], track[after], ends[piece], ends[after], radius, p, y,
                                            moved, thresholds[i], stack))
                    if b < thresholds[i]:
                        break
                    piece = after
                if b < thresholds[i]:
                    break
        bound[i], least[i] = b, low
    return bound, least


@nb.njit(cache=True, nogil=True)
def _reach(track, events):
    """Per material step (rows ``0..steps-1``) and over the whole window (row ``steps``), how
    far each point gets from where it was at the span's start."""
    last = track.shape[0] - 1
    steps = last // events
    out = np.zeros((steps + 1, track.shape[1]))
    for q in range(track.shape[1]):
        for e in range(1, last + 1):
            first = ((e - 1) // events) * events
            d = math.sqrt((track[e, q, 0] - track[first, q, 0]) ** 2 + (track[e, q, 1] - track[first, q, 1]) ** 2
                          + (track[e, q, 2] - track[first, q, 2]) ** 2)
            out[(e - 1) // events, q] = max(out[(e - 1) // events, q], d)
            w = math.sqrt((track[e, q, 0] - track[0, q, 0]) ** 2 + (track[e, q, 1] - track[0, q, 1]) ** 2
                          + (track[e, q, 2] - track[0, q, 2]) ** 2)
            out[steps, q] = max(out[steps, q], w)
    return out


@nb.njit(cache=True, nogil=True)
def _pair_reach(reach, ends_reach, span, p):
    """How much pair ``p``'s gap can shrink in ``span`` (a material step, or the window): the
    farthest reach of a point of each of its two primitives, added."""
    if p[0] >= VERTEX_OBSTACLE:
        m1 = 0.0
        for r in range(3):
            if p[1 + r] >= 0:
                m1 = max(m1, reach[span, p[1 + r]])
        return m1 + max(ends_reach[span, 2 * p[4]], ends_reach[span, 2 * p[4] + 1])
    m1 = m2 = 0.0
    for r in range(4):
        d = reach[span, p[1 + r]]
        if (r == 0) if p[0] == VERTEX_FACE else (r < 2):
            m1 = max(m1, d)
        else:
            m2 = max(m2, d)
    return m1 + m2


@nb.njit(cache=True, nogil=True)
def _piece_bound(a, b, ea, eb, radius, p, y, moved, threshold, stack):
    """A lower bound of pair ``p``'s gap while its points move linearly from ``a`` to ``b``
    (obstacle ends from ``ea`` to ``eb``; see :func:`window_gaps`): the piece's parts
    ``[s0, s1]`` are halved depth first, on ``stack`` (no recursion: Numba's cache does not
    keep recursive functions reliably)."""
    best = np.inf
    obstacle = p[0] >= VERTEX_OBSTACLE
    points = 3 if obstacle else 4
    stack[0, 0], stack[0, 1], stack[0, 2] = 0.0, 1.0, 0.0
    top = 1
    while top:
        top -= 1
        s0, s1, depth = stack[top, 0], stack[top, 1], stack[top, 2]
        for r in range(points):
            q = p[1 + r]
            if q < 0:
                continue
            for axis in range(3):
                y[q, axis] = a[q, axis] + s0 * (b[q, axis] - a[q, axis])
        m1 = m2 = 0.0  # the largest move of a point of each primitive: the gap changes by at most m1 + m2
        if obstacle:
            o = p[4]
            for end in range(2):
                for axis in range(3):
                    moved[o, end, axis] = ea[o, end, axis] + s0 * (eb[o, end, axis] - ea[o, end, axis])
                m2 = max(m2, math.sqrt((eb[o, end, 0] - ea[o, end, 0]) ** 2 + (eb[o, end, 1] - ea[o, end, 1]) ** 2
                                       + (eb[o, end, 2] - ea[o, end, 2]) ** 2) * (s1 - s0))
        start = _gap(y, moved, radius, p)
        if start < threshold:
            return start
        for r in range(points):
            q = p[1 + r]
            if q < 0:
                continue
            d = math.sqrt((b[q, 0] - a[q, 0]) ** 2 + (b[q, 1] - a[q, 1]) ** 2 + (b[q, 2] - a[q, 2]) ** 2) * (s1 - s0)
            if obstacle or ((r == 0) if p[0] == VERTEX_FACE else (r < 2)):
                m1 = max(m1, d)
            else:
                m2 = max(m2, d)
        bound = start - (m1 + m2)
        if bound >= threshold or depth >= SPLITS:
            best = min(best, bound)
            continue
        middle = 0.5 * (s0 + s1)
        stack[top, 0], stack[top, 1], stack[top, 2] = middle, s1, depth + 1
        stack[top + 1, 0], stack[top + 1, 1], stack[top + 1, 2] = s0, middle, depth + 1
        top += 2
    return best


def points_of(rows: np.ndarray) -> np.ndarray:
    """Each pair's cloth vertices, shape (pairs, 4), -1 where it has fewer."""
    out = rows[:, 1:].copy()
    out[rows[:, 0] >= VERTEX_OBSTACLE, 3] = -1
    return out


@nb.njit(cache=True, nogil=True)
def _gaps(x, ends, radius, rows):
    """Every pair's gap at positions ``x``, m."""
    out = np.empty(len(rows))
    for i in range(len(rows)):
        out[i] = _gap(x, ends, radius, rows[i])
    return out
