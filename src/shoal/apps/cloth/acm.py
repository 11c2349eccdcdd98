"""Asynchronous contact mechanics in one piece: collision windows, nested layers, rollback.

The contact-mechanics paper's integrator (§II-A) on a whole cloth. Time advances in *windows*
of ``window`` material steps. Material forces kick every vertex at the start of each material
step ``Δt``; each contact pair with ``L`` active layers is kicked by layer ``l = 1..L`` on that
layer's own clock, every ``Δt / n_l`` (:func:`~.contact.layer_substeps`), with the impulse of
that layer alone. Between kicks every vertex drifts on a straight line, so a window's
trajectories are piecewise linear between the *events* (the times some layer ticks).

At the window's end comes detection: every pair of primitives that share no vertex
(vertex–face and edge–edge) is tested along each trajectory piece for coming within the
thickness of its first inactive layer, ``η_{L+1}``. The test is conservative: a piece is
halved while the gap at its start, less how far the pair's vertices move in it (the gap moves
by no more), falls below the thickness although the gap itself does not; after
:data:`SPLITS` halvings the pair is called close (a false alarm costs a layer, never a miss).
If any pair came close it gains that layer, the state rolls back to the window's snapshot and
the window runs again; a window with none is kept, and a pair whose gap provably stayed out of
its innermost layer, which therefore pushed nothing, drops it.

Pairs are all of them (no broad phase yet): for small meshes and tests.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

import numba as nb
import numpy as np

from ...errors import ShoalError
from .contact import edge_edge, layer_substeps, point_triangle, segment_segment, vertex_face
from .model import ClothModel

VERTEX_FACE, EDGE_EDGE = 0, 1
SPLITS = 16  # a piece is halved at most this many times before its pair is called close


@dataclass
class WindowLog:
    """Per kept window: its rollbacks, pairs with layers, layers in all, and least gap (at its
    events, m)."""

    rollbacks: list[int] = field(default_factory=list)
    pairs: list[int] = field(default_factory=list)
    layers: list[int] = field(default_factory=list)
    min_gap: list[float] = field(default_factory=list)


def contact_pairs(triangles: np.ndarray, edges: np.ndarray, vertices: int) -> np.ndarray:
    """Every pair of primitives that share no vertex, as its kind and four vertices:
    ``(VERTEX_FACE, p, a, b, c)`` then ``(EDGE_EDGE, p0, p1, q0, q1)``, in a fixed order.

    Parameters
    ----------
    triangles : ndarray, shape (m, 3)
        The faces.
    edges : ndarray, shape (e, 2)
        The edges.
    vertices : int
        How many vertices.
    """
    rows = [(VERTEX_FACE, p, *tri) for tri in triangles.tolist() for p in range(vertices) if p not in tri]
    rows += [(EDGE_EDGE, *edges[a].tolist(), *edges[b].tolist()) for a in range(len(edges))
             for b in range(a + 1, len(edges)) if not set(edges[a].tolist()) & set(edges[b].tolist())]
    return np.array(rows, dtype=np.int64).reshape(-1, 5)


class ContactCloth:
    """A cloth with self-contact by nested penalty layers, stepped in collision windows.

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

    Raises
    ------
    ShoalError
        If a constant is not positive.
    """

    def __init__(self, model: ClothModel, dt: float, eta: float, stiffness: float, window: int = 10,
                 max_layers: int = 24):
        for name, value in (("time step", dt), ("contact thickness", eta), ("contact stiffness", stiffness),
                            ("window", window), ("layer limit", max_layers)):
            if not value > 0:
                raise ShoalError(f"the cloth's {name} must be positive, got {value}")
        self.model, self.dt, self.eta, self.k = model, float(dt), float(eta), float(stiffness)
        self.window, self.max_layers = int(window), int(max_layers)
        s = model.surface
        self.pairs = contact_pairs(s.triangles, s.edges, len(s.vertices))
        self.layers = np.zeros(len(self.pairs), np.int64)  # active layers per pair
        self.log = WindowLog()

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
            If a pair needs more than ``max_layers`` layers (the run cannot keep it apart).
        """
        g = np.asarray(gravity, np.float64)
        for _ in range(windows):
            x0, v0, rollbacks = x.copy(), v.copy(), 0
            while True:
                track = self._simulate(x, v, g)
                next_layer = self.eta * (self.layers + 1.0) ** -0.25  # each pair's first inactive layer's thickness
                bound, least = window_gaps(track, self.pairs, next_layer)
                close = bound < next_layer
                if not close.any():
                    break
                self.layers = self.layers + close
                if self.layers.max() > self.max_layers:
                    k = int(np.argmax(self.layers))
                    raise ShoalError(f"contact pair {self.pairs[k, 1:].tolist()} needs more than {self.max_layers} "
                                     f"layers (gap {least[k]:.3g} m): lower the time step or raise the stiffness")
                x[:], v[:] = x0, v0
                rollbacks += 1
            active = np.flatnonzero(self.layers)
            innermost = self.eta * self.layers[active] ** -0.25
            # (a bound refined against the innermost layer, not the next: those pairs only)
            out, _ = window_gaps(track, self.pairs[active], innermost)
            self.layers[active[out >= innermost]] -= 1
            self.log.rollbacks.append(rollbacks)
            self.log.pairs.append(int((self.layers > 0).sum()))
            self.log.layers.append(int(self.layers.sum()))
            self.log.min_gap.append(float(least.min()) if len(least) else math.inf)
        return self.log

    def _schedule(self) -> tuple[np.ndarray, np.ndarray]:
        """Within a material step: the events' times (fractions of it, from 0) and, per event
        and layer, whether that layer ticks then."""
        top = int(self.layers.max())
        times = sorted({Fraction(j, layer_substeps(n)) for n in range(1, top + 1) for j in range(layer_substeps(n))}
                       | {Fraction(0)})
        ticks = np.zeros((len(times), top + 1), bool)
        for e, t in enumerate(times):
            for n in range(1, top + 1):
                ticks[e, n] = (t * layer_substeps(n)).denominator == 1
        return np.array([float(t) for t in times] + [1.0]), ticks

    def _simulate(self, x: np.ndarray, v: np.ndarray, g: np.ndarray) -> np.ndarray:
        """One window from ``x``, ``v`` (updated): the positions at every event and at the end,
        shape (window × events + 1, n, 3)."""
        times, ticks = self._schedule()
        events = len(times) - 1
        m = self.model
        inverse = 1.0 / m.mass
        f = np.zeros_like(x)
        track = np.empty((self.window * events + 1, *x.shape))
        track[0] = x
        active = np.flatnonzero(self.layers)
        for step in range(self.window):
            m.forces(x, f)
            v += self.dt * (inverse[:, None] * f + g)
            _penalty_window_step(x, v, inverse, self.pairs, self.layers, active, times, ticks, self.eta, self.k,
                                 self.dt, track, step * events)
        return track


@nb.njit(cache=True, nogil=True)
def _penalty_window_step(x, v, inverse, pairs, layers, active, times, ticks, eta, k, dt, track, row):
    """One material step's events: at each, the ticking layers of every active pair kick its
    vertices (layer ``l`` alone, with its own step ``dt / n_l``), then all drift to the next."""
    out = np.zeros((4, 3))
    for e in range(len(times) - 1):
        for i in active:
            p = pairs[i]
            for layer in range(1, layers[i] + 1):
                if not ticks[e, layer]:
                    continue
                if p[0] == VERTEX_FACE:
                    vertex_face(x, p[1], p[2], p[3], p[4], eta, k, layer, layer, out)
                else:
                    edge_edge(x, p[1], p[2], p[3], p[4], eta, k, layer, layer, out)
                step = dt / layer_substeps(layer)
                for r in range(4):
                    q = p[1 + r]
                    for axis in range(3):
                        v[q, axis] += step * inverse[q] * out[r, axis]
        h = dt * (times[e + 1] - times[e])
        for q in range(x.shape[0]):
            for axis in range(3):
                x[q, axis] += h * v[q, axis]
        track[row + e + 1] = x


@nb.njit(cache=True, nogil=True)
def _gap(y, p):
    if p[0] == VERTEX_FACE:
        d2, _, _, _ = point_triangle(y[p[1], 0], y[p[1], 1], y[p[1], 2], y[p[2], 0], y[p[2], 1], y[p[2], 2],
                                     y[p[3], 0], y[p[3], 1], y[p[3], 2], y[p[4], 0], y[p[4], 1], y[p[4], 2])
    else:
        d2, _, _ = segment_segment(y[p[1], 0], y[p[1], 1], y[p[1], 2], y[p[2], 0], y[p[2], 1], y[p[2], 2],
                                   y[p[3], 0], y[p[3], 1], y[p[3], 2], y[p[4], 0], y[p[4], 1], y[p[4], 2])
    return math.sqrt(d2)


@nb.njit(cache=True, nogil=True)
def window_gaps(track, pairs, thresholds):
    """Per pair, a lower bound of its least gap along the window's pieces, refined until it is
    at least ``thresholds[pair]`` or the gap itself falls below it, and its least gap at the
    events (both m)."""
    bound = np.empty(len(pairs))
    least = np.empty(len(pairs))
    y = np.empty((track.shape[1], 3))
    stack = np.empty((SPLITS + 2, 3))
    for i in range(len(pairs)):
        p = pairs[i]
        b = low = np.inf
        for piece in range(track.shape[0] - 1):
            b = min(b, _piece_bound(track[piece], track[piece + 1], p, y, thresholds[i], stack))
            low = min(low, _gap(track[piece], p))
        bound[i], least[i] = b, min(low, _gap(track[track.shape[0] - 1], p))
    return bound, least


@nb.njit(cache=True, nogil=True)
def _piece_bound(a, b, p, y, threshold, stack):
    """A lower bound of pair ``p``'s gap while its vertices move linearly from ``a`` to ``b``
    (see :func:`window_gaps`): the piece's parts ``[s0, s1]`` are halved depth first, on
    ``stack`` (no recursion: Numba's cache does not keep recursive functions reliably)."""
    best = np.inf
    stack[0, 0], stack[0, 1], stack[0, 2] = 0.0, 1.0, 0.0
    top = 1
    while top:
        top -= 1
        s0, s1, depth = stack[top, 0], stack[top, 1], stack[top, 2]
        for r in range(4):
            q = p[1 + r]
            for axis in range(3):
                y[q, axis] = a[q, axis] + s0 * (b[q, axis] - a[q, axis])
        start = _gap(y, p)
        if start < threshold:
            return start
        m1 = m2 = 0.0  # the largest move of a vertex of each primitive: the gap changes by at most m1 + m2
        for r in range(4):
            q = p[1 + r]
            d = math.sqrt((b[q, 0] - a[q, 0]) ** 2 + (b[q, 1] - a[q, 1]) ** 2 + (b[q, 2] - a[q, 2]) ** 2) * (s1 - s0)
            if (r == 0) if p[0] == VERTEX_FACE else (r < 2):
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
