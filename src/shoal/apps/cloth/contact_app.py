"""Asynchronous contact mechanics on the parts of a mesh partition, bitwise the one-piece run.

A step is one collision window of :class:`~.acm.ContactCloth`, as a graph of tasks over the
parts of a :class:`~shoal.mesh.MeshPartition` (the contact-mechanics paper §III) and detection
jobs between them (§V):

- ``material{s}``, for each material step ``s`` of the window: each part computes the
  material forces on the vertices it holds, reading the positions of its stencils' other
  vertices (as :class:`~.app.ClothApp` does), and kicks them. The window's first one keeps a
  snapshot of them.
- ``contact{s}``: the penalty layers' kicks and the drift through the step's events. A pair's
  kicks change only its own points' velocities, and its friction reads only theirs, so within
  a material step a vertex moves as the vertices joined to it by chains of pairs with layers
  (its *contact group*) make it move, and no other. Each group is run by one part, the lowest
  holder of its lowest vertex, which reads the group's other vertices from their holders and
  runs the group's pairs in key order (the one-piece run's order, restricted to them); a vertex
  in no group drifts where it is held. Where the paper's partitions exchange impulses at each
  penalty event, here a group travels twice per material step, whatever the number of events.
- ``share{s}``: every part takes its vertices in groups other parts ran (their positions and
  velocities, and their positions at the step's events) from those parts: every copy of a
  vertex then moves bit for bit as in the one-piece run.
- ``bounds``: every part reads every other's swept box of the window and emits a detection
  job for itself (its own primitives, and against the obstacles) and one for each later part
  whose box comes within the first layer's thickness of its own, or with which it shares a pair
  with layers (§V-A).
- ``detect``: the jobs, placed by the run's job policy, each the broad phase
  (:mod:`.broad`) and the conservative narrow phase (:func:`~.acm.window_gaps`) on the pairs
  between its two parts' primitives. A primitive belongs to one part (a triangle to its own,
  an edge to the lowest-numbered part of its triangles, a vertex to its lowest-numbered
  holder), so every pair is tested by exactly one job.
- ``agree``: every part reads every job's findings and updates its copy of the pair table,
  which each part keeps whole and the same: pairs that came close gain a layer, and if any
  did, every part puts its vertices back to the snapshot. Its reduction (whether any came
  close, the least gap, the candidates) decides whether the window runs again: the phases from
  ``material0`` to ``agree`` are a loop.
- ``keep``: the pairs of the kept window that stayed out of their innermost layer drop it.
"""

from __future__ import annotations

import functools
import logging

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from ...log import FILE_ONLY
from ...mesh import MeshPartition
from ...runtime import Phase
from ...runtime.app import check_jobs_order
from ...runtime.graph import Loop, loop_spans
from .acm import ContactCloth, penalty_step, points_of, window_gaps
from .app import ClothApp
from .broad import obstacle_pairs, primitive_pairs, split_keys, swept_boxes
from .contact import EDGE_EDGE, EDGE_OBSTACLE, FACE_OBSTACLE, VERTEX_FACE, VERTEX_OBSTACLE
from .crossings import crossings

ATTEMPTS = 10_000  # a window's attempts at most: each adds a layer to a pair, and a pair may gain only so many
TRANSIENT = ("window_", "found", "drops", "x0", "v0", "tries_")  # what a step keeps between its phases only
# a row of the windows' log per kept window
LOG = ("time", "rollbacks", "pairs", "layers", "min_gap", "candidates", "intersections")

logger = logging.getLogger("shoal")


def _nothing_found() -> dict[str, np.ndarray]:
    return {"keys": np.zeros(0, np.int64), "close": np.zeros(0, bool), "least": np.zeros(0),
            "drop": np.zeros(0, np.int64), "candidates": np.zeros(1, np.int64), "crossings": np.zeros(1, np.int64)}


class ContactClothApp(ClothApp):
    """A :class:`~.acm.ContactCloth` stepped window by window on the parts of a mesh partition.

    Parameters
    ----------
    cloth : ContactCloth
        The cloth, its contact layers, obstacles, pins and friction; its pairs with layers
        (none at first), time and windows run are where the app starts.
    gravity : sequence of float
        Acceleration, m/s².
    velocity : ndarray, shape (n, 3), optional
        Initial velocities (default: at rest).
    positions : ndarray, shape (n, 3), optional
        Initial positions (default: the surface at rest).
    job_split : int
        A detection job of more items (its first part's primitives) is cut into ranges its
        node's cores share (the paper's Alg. 3); 0: never.

    Raises
    ------
    ShoalError
        If the cloth starts inside an obstacle or an obstacle through it.
    """

    name = "cloth"
    phases = (
        Phase("material0", reads="app", method="material", work="vertices"),
        Phase("contact0", reads="app", method="contact", pack="pack_groups", work="vertices"),
        Phase("share0", reads="app", method="share", pack="pack_shared", work="vertices"),
        Phase("bounds", reads="app", pack="pack_box", emits_jobs=True, work="parts"),
        Phase("detect", jobs="narrow", work="pairs"),
        Phase("agree", reads="app", pack="pack_found", reduction=("max", "min", "sum", "sum"), work="pairs"),
        Phase("keep", reduction=("max", "max"), work="pairs"),
    )
    loops = (Loop("material0", "agree", ATTEMPTS, required=True),)
    transient = TRANSIENT

    def __init__(self, cloth: ContactCloth, gravity=(0.0, 0.0, 0.0), velocity: np.ndarray | None = None,
                 positions: np.ndarray | None = None, job_split: int = 0):
        super().__init__(cloth.model, cloth.dt, gravity, pinned=~cloth.free, damping=cloth.damping, velocity=velocity,
                         positions=positions)
        if cloth.windows == 0:
            cloth.check_start(self.positions)
        self.cloth = cloth
        self.job_split = int(job_split)
        steps = [Phase(f"{kind}{s}", **options) for s in range(cloth.window)
                 for kind, options in (("material", dict(reads="app", method="material", work="vertices")),
                                       ("contact", dict(reads="app", method="contact", pack="pack_groups",
                                                        work="vertices")),
                                       ("share", dict(reads="app", method="share", pack="pack_shared",
                                                      work="vertices")))]
        self.phases = (*steps, *type(self).phases[3:])  # a window's material steps, then its detection
        loop_spans(self.phases, self.loops)
        check_jobs_order(self.phases)
        self._owners_for = None

    # ----- who holds and who owns what ------------------------------------------------------------
    def prepare(self, tiling: MeshPartition) -> None:
        """Plan the parts' stencils and owners, and compile every kernel a window calls (on a
        tiny cloth: a run's first tasks would otherwise pay for it)."""
        self._plan(tiling)
        self._owners(tiling)
        warm_kernels()

    def _owners(self, tiling: MeshPartition) -> None:
        """Per primitive the part that owns it: a triangle its part, an edge the lowest part of
        its triangles, a vertex its lowest holder; per part what it holds and owns."""
        if self._owners_for is tiling:
            return
        s = self.model.surface
        n = len(s.vertices)
        triangle = np.asarray(tiling.part_of_element, np.int64)
        sides = np.sort(s.triangles[:, [0, 1, 1, 2, 2, 0]].reshape(-1, 2), axis=1)
        which = np.searchsorted(s.edges[:, 0] * n + s.edges[:, 1], sides[:, 0] * n + sides[:, 1])
        edge = np.full(len(s.edges), np.iinfo(np.int64).max)
        np.minimum.at(edge, which, np.repeat(triangle, 3))
        vertex = np.asarray(tiling.part_of_vertex, np.int64)
        self._owner = {VERTEX_FACE: (vertex, triangle), EDGE_EDGE: (edge, edge), VERTEX_OBSTACLE: (vertex, None),
                       EDGE_OBSTACLE: (edge, None), FACE_OBSTACLE: (triangle, None)}
        self._holder = vertex
        self._held = [tiling.vertices_of(p) for p in range(tiling.ntiles)]
        self._owned = [(np.flatnonzero(vertex == p), np.flatnonzero(edge == p), np.flatnonzero(triangle == p))
                       for p in range(tiling.ntiles)]
        self._pinned = np.flatnonzero(~self.free)
        self._owners_for = tiling

    def _jobs_of(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The job that tests each pair of ``keys``: its parts ``(a, b)``, ``b`` -1 for a part's
        own job."""
        kind, first, second = split_keys(keys)
        p, q = np.empty(len(keys), np.int64), np.empty(len(keys), np.int64)
        for k, (own_first, own_second) in self._owner.items():
            on = kind == k
            p[on] = own_first[first[on]]
            q[on] = p[on] if own_second is None else own_second[second[on]]
        a, b = np.minimum(p, q), np.maximum(p, q)
        return a, np.where(a == b, -1, b)

    def _items(self, keys: np.ndarray, a: int) -> np.ndarray:
        """The item of part ``a``'s detection job that each pair of ``keys`` (of that job) belongs
        to (:meth:`narrow`)."""
        kind, first, second = split_keys(keys)
        va, ea, ta = self._owned[a]
        vertex, edge = self._owner[VERTEX_FACE][0], self._owner[EDGE_EDGE][0]
        nv, ne = len(va), len(ea)
        item = np.empty(len(keys), np.int64)
        on = np.flatnonzero(kind == VERTEX_FACE)  # its vertex if a's, else its triangle
        mine = vertex[first[on]] == a
        item[on[mine]] = np.searchsorted(va, first[on[mine]])
        item[on[~mine]] = nv + ne + np.searchsorted(ta, second[on[~mine]])
        on = np.flatnonzero(kind == EDGE_EDGE)  # its edge of a's, the lower one within a
        mine = edge[first[on]] == a
        item[on] = nv + np.searchsorted(ea, np.where(mine, first[on], second[on]))
        on = kind == VERTEX_OBSTACLE
        item[on] = np.searchsorted(va, first[on])
        on = kind == EDGE_OBSTACLE
        item[on] = nv + np.searchsorted(ea, first[on])
        on = kind == FACE_OBSTACLE
        item[on] = nv + ne + np.searchsorted(ta, first[on])
        return item

    def _groups(self, rows: np.ndarray) -> np.ndarray:
        """Per vertex its contact group: the vertices joined to it by chains of the pairs
        ``rows``."""
        n = len(self.model.surface.vertices)
        points = points_of(rows)
        first = np.repeat(points[:, :1], 3, axis=1)
        link = points[:, 1:] >= 0
        graph = coo_matrix((np.ones(int(link.sum())), (first[link], points[:, 1:][link])), shape=(n, n))
        return connected_components(graph, directed=False)[1]

    # ----- a window's phases ---------------------------------------------------------------------
    def init_tile(self, tile: int, tiling) -> dict:
        state = super().init_tile(tile, tiling)
        c = self.cloth
        state.update(keys=c.keys.copy(), layers=c.layers.copy(), clock=np.array([c.time]),
                     kept=np.array([c.windows], np.int64), attempts=np.zeros(1, np.int64), log=np.zeros((0, len(LOG))))
        return state

    def reads(self, phase, step: int, decomposition) -> list:
        if phase.method == "material":
            return super().reads(phase, step, decomposition)
        every = range(decomposition.ntiles)  # (groups and boxes change within the step)
        return [[u for u in every if u != t] for t in every]

    def _begin(self, tile: int, state: dict, tiling) -> None:
        """An attempt at the window: its schedule, the contact groups the part computes (those
        whose lowest vertex it is the lowest holder of), the vertices it reads for them, and
        what it sends for other parts' groups and receives of theirs."""
        self._owners(tiling)
        c, n = self.cloth, len(self.model.surface.vertices)
        rows = c.rows(state["keys"])
        start = float(state["clock"][0])
        times, ticks, ends, omega, pivot = c.schedule(int(state["layers"].max(initial=0)), start)
        group = self._groups(rows)
        lowest = np.full(group.max(initial=0) + 1, n)
        np.minimum.at(lowest, group, np.arange(n))
        paired = np.bincount(group)[group] > 1  # in a group of two or more
        owner = np.where(paired, self._holder[np.minimum(lowest[group], n - 1)], -1)  # who computes its group
        held = self._held[tile]
        holds = np.zeros(n, bool)
        holds[held] = True
        ghosts = np.flatnonzero((owner == tile) & ~holds)
        ghosts = ghosts[np.argsort(self._holder[ghosts], kind="stable")]  # grouped by source, as they arrive
        slots, at = {}, len(held)
        for src in np.unique(self._holder[ghosts]).tolist():
            k = int(np.count_nonzero(self._holder[ghosts] == src))
            slots[src], at = slice(at, at + k), at + k
        ids = np.concatenate([held, ghosts])
        local = np.full(n + 1, -1, np.int64)  # (the last: the rows' -1)
        local[ids] = np.arange(len(ids))
        mine = np.flatnonzero(owner[rows[:, 1]] == tile) if len(rows) else np.zeros(0, np.int64)
        pairs = rows[mine].copy()
        pairs[:, 1:4] = local[pairs[:, 1:4]]
        cloth = pairs[:, 0] < VERTEX_OBSTACLE
        pairs[cloth, 4] = local[pairs[cloth, 4]]
        sends, shares, foreign = {}, {}, {}
        for dst in range(tiling.ntiles):
            if dst == tile:
                continue
            theirs = np.zeros(n, bool)
            theirs[self._held[dst]] = True
            # (every other part reads every part: each gets a payload, most of them empty)
            sends[dst] = np.searchsorted(held, np.flatnonzero((owner == dst) & ~theirs & (self._holder == tile)))
            shares[dst] = local[np.flatnonzero((owner == tile) & theirs)]  # dst's vertices in groups computed here
            got = np.flatnonzero((owner == dst) & holds)  # the part's vertices in dst's groups
            if len(got):
                foreign[dst] = np.searchsorted(held, got)
        free = self.free[held]
        events = len(times) - 1
        track = np.empty((c.window * events + 1, len(held), 3))
        track[0] = state["x"]
        state["attempts"] += 1
        state["tries_"] = state.get("tries_", 0) + 1
        state["window_"] = {
            "sub": 0, "start": start, "times": times, "ticks": ticks, "ends": ends, "omega": omega, "pivot": pivot,
            "top": c.vertex_layers(rows, state["layers"]),  # for the jobs' pieces (§V)
            "rows": pairs, "layers": state["layers"][mine], "slots": slots, "sends": sends, "shares": shares,
            "foreign": foreign, "held": len(held), "inverse": c.inverse[ids], "track": track,
            "x": np.empty((len(ids), 3)), "v": np.empty((len(ids), 3)), "scratch": np.empty((events + 1, len(ids), 3)),
            "pinned": np.flatnonzero(~free), "rank": np.searchsorted(self._pinned, held[~free])}

    def material(self, tile: int, state: dict, halos: dict, ctx, tiling) -> int:
        """Material step ``s`` of the window: the material forces' and gravity's kick (the
        window's first also keeps a snapshot, or starts its next attempt)."""
        c = self.cloth
        if "window_" not in state or state["window_"]["sub"] == c.window:
            if ctx.iteration == 0:
                state["x0"], state["v0"], state["tries_"] = state["x"].copy(), state["v"].copy(), 0
            self._begin(tile, state, tiling)
        w = state["window_"]
        c.lead(state["x"], state["v"], w["pinned"], w["rank"], w["sub"], w["start"])
        f = self._forces(tile, state, halos, tiling)
        part = self._parts[tile]
        c.kick(state["v"], f, part["inverse"], part["free"], self.gravity)
        return len(f)

    def pack_groups(self, state: dict, src: int, tiling) -> dict[int, np.ndarray]:
        """Per part computing contact groups ``src`` holds vertices of (as their lowest holder),
        those vertices' positions and velocities."""
        x, v = state["x"], state["v"]
        return {dst: np.concatenate([x[which], v[which]], axis=1) for dst, which in state["window_"]["sends"].items()}

    def contact(self, tile: int, state: dict, halos: dict, ctx, tiling) -> int:
        """Material step ``s`` of the window: its penalty kicks and drifts, event by event, on
        the contact groups the part computes and on its vertices in no group (its vertices in
        other parts' groups come from them next)."""
        c, w = self.cloth, state["window_"]
        held, s = w["held"], w["sub"]
        x, v = w["x"], w["v"]
        x[:held], v[:held] = state["x"], state["v"]
        for src, where in w["slots"].items():
            x[where], v[where] = halos[src][:, :3], halos[src][:, 3:]
        events = len(w["times"]) - 1
        first = s * events
        ctx.kernel(penalty_step, x, v, w["inverse"], w["rows"], w["layers"], w["times"], w["ticks"], c.eta, c.k,
                   c.dt, w["scratch"], w["ends"][first:], c.radius, 0, c.friction, w["omega"][first:], w["pivot"])
        state["x"][:], state["v"][:] = x[:held], v[:held]
        w["track"][first + 1:first + events + 1] = w["scratch"][1:, :held]
        return len(x)

    def pack_shared(self, state: dict, src: int, tiling) -> dict[int, dict]:
        """Per part holding vertices of the groups ``src`` computed, their positions,
        velocities and positions at the step's events."""
        w = state["window_"]
        return {dst: {"xv": np.concatenate([w["x"][which], w["v"][which]], axis=1),
                      "track": w["scratch"][1:, which]} for dst, which in w["shares"].items()}

    def share(self, tile: int, state: dict, halos: dict, ctx, tiling) -> int:
        """Material step ``s`` of the window: the part's vertices in other parts' contact
        groups, as those parts moved them."""
        w = state["window_"]
        events = len(w["times"]) - 1
        first = w["sub"] * events
        count = 0
        for src, where in w["foreign"].items():
            got = halos[src]
            state["x"][where], state["v"][where] = got["xv"][:, :3], got["xv"][:, 3:]
            w["track"][first + 1:first + events + 1, where] = got["track"]
            count += len(where)
        w["sub"] += 1
        return count

    def _box(self, state: dict) -> np.ndarray:
        """The part's swept box of the window, grown by half the first layer's thickness (and,
        kept for its jobs, each vertex's swept box)."""
        w = state["window_"]
        if "box" not in w:
            w["low"], w["high"] = swept_boxes(w["track"])
            half = 0.5 * self.cloth.eta
            w["box"] = np.concatenate([w["low"].min(axis=0) - half, w["high"].max(axis=0) + half])
        return w["box"]

    def pack_box(self, state: dict, src: int, tiling) -> dict[int, np.ndarray]:
        box = self._box(state)
        return {dst: box for dst in range(tiling.ntiles) if dst != src}

    def bounds(self, tile: int, state: dict, halos: dict, ctx, tiling):
        """The part's detection jobs (§V-A): its own, and one with each later part whose box
        meets its own or with which it shares a pair with layers."""
        self._owners(tiling)
        mine = self._box(state)
        a, b = self._jobs_of(state["keys"])
        partners = set(b[(a == tile) & (b >= 0)].tolist())
        size = sum(len(owned) for owned in self._owned[tile])
        jobs = [(-1, size, 1e-6 * size)]
        for other in sorted(halos):
            box = halos[other]
            if other > tile and (other in partners or (np.all(mine[:3] <= box[3:]) and np.all(box[:3] <= mine[3:]))):
                jobs.append((other, size, 1e-6 * (size + sum(len(o) for o in self._owned[other]))))
        return len(halos), jobs

    def pack_job_input(self, state: dict, tile: int) -> dict[str, np.ndarray]:
        w = state["window_"]
        return {"track": w["track"], "low": w["low"], "high": w["high"], "keys": state["keys"],
                "layers": state["layers"], "top": w["top"], "ticks": w["ticks"], "ends": w["ends"]}

    def narrow(self, job: dict, inputs: dict, first: int, stop: int, ctx):
        """Items ``first:stop`` of a detection job: the candidate pairs between parts ``a`` and
        ``b`` (or within ``a`` and against the obstacles), with the pairs with layers it tests,
        each tested along the window for coming within its next layer, and those with layers for
        staying out of their innermost.

        A job's items are part ``a``'s own vertices, edges and triangles, in that order; a pair
        belongs to the item of ``a`` it holds (within ``a``: its vertex, its lower edge, or its
        primitive against an obstacle), so the ranges a big job is cut into (the paper's Alg. 3)
        test every pair once, whatever the cut."""
        c, s = self.cloth, self.model.surface
        a, b = int(job["a"]), int(job["b"])
        parts = (a,) if b < 0 else (a, b)
        mine = inputs[a]
        ids = self._held[a] if b < 0 else np.union1d(self._held[a], self._held[b])
        local = np.full(len(s.vertices) + 1, -1, np.int64)
        local[ids] = np.arange(len(ids))
        low, high = np.empty((len(ids), 3)), np.empty((len(ids), 3))
        for part in parts:
            low[local[self._held[part]]], high[local[self._held[part]]] = inputs[part]["low"], inputs[part]["high"]
        va, ea, ta = self._owned[a]
        nv, ne = len(va), len(ea)
        v, e, t = (va[max(first, 0):max(stop, 0)], ea[max(first - nv, 0):max(stop - nv, 0)],
                   ta[max(first - nv - ne, 0):max(stop - nv - ne, 0)])  # the range's items
        if b < 0:
            tail = ea[ea >= e[0]] if len(e) else e  # an edge pair within a part: from its lower edge
            found = [primitive_pairs(VERTEX_FACE, low, high, local[v], v, local[s.triangles[ta]], ta, c.eta),
                     np.unique(primitive_pairs(EDGE_EDGE, low, high, local[s.edges[e]], e, local[s.edges[tail]],
                                               tail, c.eta)),
                     obstacle_pairs(low, high, local[s.triangles[t]], local[s.edges[e]], mine["ends"], c.radius,
                                    c.eta, ids=(local[v], v, e, t))]
        else:
            vb, eb, tb = self._owned[b]
            found = [primitive_pairs(VERTEX_FACE, low, high, local[v], v, local[s.triangles[tb]], tb, c.eta),
                     primitive_pairs(VERTEX_FACE, low, high, local[vb], vb, local[s.triangles[t]], t, c.eta),
                     primitive_pairs(EDGE_EDGE, low, high, local[s.edges[e]], e, local[s.edges[eb]], eb, c.eta)]
        ja, jb = self._jobs_of(mine["keys"])
        held = np.flatnonzero((ja == a) & (jb == b))  # the pairs with layers this range tests
        item = self._items(mine["keys"][held], a)
        held = held[(first <= item) & (item < stop)]
        keys = np.union1d(np.concatenate(found), mine["keys"][held])
        layers = np.zeros(len(keys), np.int64)
        layers[np.searchsorted(keys, mine["keys"][held])] = mine["layers"][held]
        rows = c.rows(keys)
        levels = c.pair_levels(rows, mine["top"], int(mine["layers"].max(initial=0)))
        # The pairs' points only, on a track of their own: its reach is what the test reads.
        points = points_of(rows)
        used = np.unique(points[points >= 0])
        compact = np.full(len(s.vertices) + 1, -1, np.int64)
        compact[used] = np.arange(len(used))
        track = np.empty((mine["track"].shape[0], len(used), 3))
        for part in reversed(parts):  # (a shared vertex: the same positions from either part)
            on = np.flatnonzero(compact[self._held[part]] >= 0)
            track[:, compact[self._held[part][on]]] = inputs[part]["track"][:, on]
        pairs = rows.copy()
        pairs[:, 1:4] = compact[rows[:, 1:4]]
        cloth = rows[:, 0] < VERTEX_OBSTACLE
        pairs[cloth, 4] = compact[rows[cloth, 4]]
        next_layer = c.eta * (layers + 1.0) ** -0.25
        bound, least = ctx.kernel(window_gaps, track, mine["ends"], c.radius, pairs, next_layer, levels, mine["ticks"])
        active = np.flatnonzero(layers)
        innermost = c.eta * layers[active] ** -0.25
        out, _ = ctx.kernel(window_gaps, track, mine["ends"], c.radius, pairs[active], innermost, levels[active],
                            mine["ticks"])
        close = bound < next_layer
        # (an attempt with a close pair is rolled back: its crossings are never read)
        crossed = 0 if close.any() else self._crossings(inputs, parts, local, len(ids), e, t)
        result = {"keys": keys, "close": close, "least": least, "drop": keys[active[out >= innermost]],
                  "candidates": np.array([len(keys)], np.int64), "crossings": np.array([crossed], np.int64)}
        return len(keys), ({a: result} if b < 0 else {a: result, b: _nothing_found()})

    def _crossings(self, inputs: dict, parts: tuple, local: np.ndarray, count: int, e: np.ndarray,
                   t: np.ndarray) -> int:
        """The edges crossing a triangle at the window's end among a job's range: its items' edges
        against part ``b``'s triangles, and ``b``'s edges against its items' triangles (within a
        part, its items' edges against all its triangles), so every (edge, triangle) pair is met
        once over the jobs (:mod:`.crossings`)."""
        s, a = self.model.surface, parts[0]
        x = np.empty((count, 3))
        for part in parts:
            x[local[self._held[part]]] = inputs[part]["track"][-1]
        if len(parts) == 1:
            return crossings(x, local[s.edges[e]], local[s.triangles[self._owned[a][2]]])
        _, eb, tb = self._owned[parts[1]]
        return (crossings(x, local[s.edges[e]], local[s.triangles[tb]])
                + crossings(x, local[s.edges[eb]], local[s.triangles[t]]))

    def detect(self, tile: int, state: dict, halos: dict, ctx, tiling) -> int:
        """What the jobs found for the part (as their first part)."""
        every = [_nothing_found(), *(halos[k] for k in sorted(halos))]
        state["found"] = {name: np.concatenate([f[name] for f in every]) for name in ("keys", "close", "least", "drop")}
        for name in ("candidates", "crossings"):
            state["found"][name] = np.array([sum(int(f[name][0]) for f in every)], np.int64)
        return len(state["found"]["keys"])

    def pack_found(self, state: dict, src: int, tiling) -> dict[int, dict]:
        return {dst: state["found"] for dst in range(tiling.ntiles) if dst != src}

    def agree(self, tile: int, state: dict, halos: dict, ctx, tiling):
        """Every job's findings into the part's copy of the pair table; back to the snapshot if
        a pair came close."""
        c = self.cloth
        every = [state["found"], *(halos[u] for u in sorted(halos))]
        keys = np.concatenate([f["keys"] for f in every])
        order = np.argsort(keys)
        keys = keys[order]
        close = np.concatenate([f["close"] for f in every])[order]
        least = np.concatenate([f["least"] for f in every])[order]
        layers = np.zeros(len(keys), np.int64)
        if not np.isin(state["keys"], keys).all():
            raise RuntimeError("a pair with layers was tested by no job")  # (a defect, not the user's)
        layers[np.searchsorted(keys, state["keys"])] = state["layers"]
        layers += close
        if layers.max(initial=0) > c.max_layers:
            k = int(np.argmax(layers))
            raise c.overflow(c.rows(keys[k:k + 1])[0], least[k], int(state["kept"][0]))
        state["keys"], state["layers"] = keys[layers > 0], layers[layers > 0]
        state["drops"] = np.concatenate([f["drop"] for f in every])
        if close.any():
            state["x"][:], state["v"][:] = state["x0"], state["v0"]
        own = state["found"]
        return len(own["keys"]), (float(own["close"].any()), float(own["least"].min(initial=np.inf)),
                                   float(own["candidates"][0]), float(own["crossings"][0]))

    def again(self, loop, step: int, iteration: int, value) -> bool:
        return value[0] > 0

    def keep(self, tile: int, state: dict, halos: dict, ctx, tiling):
        """The window is kept: its pairs that stayed out of their innermost layer drop it. Every
        part reduces the pairs and layers in contact (its copy of the table: all the same), so
        that the trace holds the window's log: these, the loop's iterations (one more than the
        rollbacks) and ``agree``'s least gap, candidates and crossings."""
        c, own = self.cloth, state["found"]
        touching = np.flatnonzero(own["least"] <= 0)  # impossible in a kept window, unless round-off
        if len(touching):
            k = touching[0]
            raise c.lost(c.rows(own["keys"][k:k + 1])[0], own["least"][k], int(state["kept"][0]))
        keys, layers = state["keys"], state["layers"].copy()
        layers[np.searchsorted(keys, state["drops"])] -= 1
        state["keys"], state["layers"] = keys[layers > 0], layers[layers > 0]
        state["clock"][0] += c.window * c.dt
        state["kept"] += 1
        _, least, candidates, crossed = ctx.reduced["agree"]
        row = (state["clock"][0], state["tries_"] - 1, len(state["keys"]), state["layers"].sum(), least, candidates,
               crossed)
        state["log"] = np.concatenate([state["log"], np.array([row], np.float64)])
        if tile == 0:
            logger.info("window %d ends at %.4f s: %d rollbacks, %d pairs in contact with %d layers, least gap %.3g m, "
                        "%d candidates, %d edges crossing a triangle", state["kept"][0] - 1, *row, extra=FILE_ONLY)
        for name in TRANSIENT:
            state.pop(name, None)
        return len(keys), (float(len(state["keys"])), float(state["layers"].sum()))

    def gather(self, states: dict, tiling) -> dict[str, np.ndarray]:
        out = super().gather(states, tiling)
        first = states[min(states)]
        out.update(keys=first["keys"].copy(), layers=first["layers"].copy(), clock=first["clock"].copy(),
                   windows=first["log"].copy())
        return out

    # ----- what a run shows -----------------------------------------------------------------------
    def time(self, step: int, states: dict) -> float:
        return float(states[min(states)]["clock"][0])

    def frame(self, gathered: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The mesh: positions, velocities and triangles (a ParaView mesh; drawn from above,
        coloured by speed, its edges in the live view)."""
        return {"x": gathered["x"], "v": gathered["v"], "triangles": self.model.surface.triangles}

    def pictures(self, gathered: dict[str, np.ndarray], folder) -> list:
        """The cloth and its obstacles in 3D at the run's end, and its windows over time
        (pairs and layers in contact, rollbacks, least gap), as a figure and a table."""
        from .acm import WindowLog
        from .output import picture, plot_windows, write_windows

        log = WindowLog(**{name: (gathered["windows"][:, k] if name in ("time", "min_gap") else
                                  gathered["windows"][:, k].astype(np.int64)).tolist() for k, name in enumerate(LOG)})
        return [picture(folder / "cloth.png", self.cloth, gathered["x"], time=float(gathered["clock"][0])),
                plot_windows(folder / "windows.png", log), write_windows(folder / "windows.csv", log)]


@functools.cache
def warm_kernels() -> None:
    """Run two windows of a tiny cloth on two parts, with self-contact, an obstacle, friction
    and a led pin, so that every kernel a window calls is compiled (or loaded from Numba's
    cache) with the types a run gives it; once per process."""
    from ...cluster import Cluster
    from ...runtime.local import LocalExecutor
    from .model import ClothModel, Material
    from .obstacles import sphere
    from .surface import Surface, sheet

    a, b = sheet(3, size=0.1, height=0.004), sheet(3, size=0.1, height=-0.004, centre=(0.01, 0.01))
    surface = Surface(np.concatenate([a.vertices, b.vertices]), np.concatenate([a.triangles, b.triangles + 9]))
    pinned = np.zeros(18, bool)
    pinned[0] = True
    cloth = ContactCloth(ClothModel(surface, Material(density=0.2, stretch=50.0)), 2e-4, 0.01, 20.0, window=1,
                         obstacles=(sphere((0.0, 0.0, 0.03), 0.02),), pinned=pinned, friction=(0.3, 0.3),
                         motion=lambda t: surface.vertices[:1])
    app = ContactClothApp(cloth)
    tiling = app.decompose(2)
    app._plan(tiling)
    app._owners(tiling)
    with LocalExecutor(app, tiling, Cluster.uniform(1, 1), np.zeros(2, np.int64), job_policy="even") as ex:
        ex.run(1)
