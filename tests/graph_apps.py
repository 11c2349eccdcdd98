"""Small apps built to exercise the step's task graph: loops and reductions of several values.

``CGHeat`` takes implicit heat-equation steps on the unit square, ``(I - dt Lap_h) u' = u`` with
zero Dirichlet sides, each solved by conjugate gradients on the tiles: a loop of two phases
(``matvec`` reads its face neighbours' halos and reduces p.Ap; ``update`` reduces r.r and
max |r| at once) that repeats until max |r| is below a tolerance. Started from the discrete
eigenmode ``sin(pi x) sin(pi y)``, each step divides it by ``1 + dt lambda_h`` exactly, which the
tests compare with.
"""

from __future__ import annotations

import numpy as np

from shoal.runtime import App, Loop, Phase


class CGHeat(App):
    """Implicit heat steps solved by conjugate gradients (see the module docstring)."""

    name = "cg-heat-test"
    phases = (
        Phase("start", reduction=("sum", "max"), work="cells"),
        Phase("matvec", reads="faces", reduction="sum", work="cells"),
        Phase("update", reduction=("sum", "max"), work="cells"),
        Phase("finish", work="cells"),
    )

    def __init__(self, n=24, dt=2e-3, tol=1e-11, max_iterations=200, required=False, initial="bump"):
        self.grid = (n, n)
        self.initial = initial
        self.n, self.dt, self.tol = n, dt, tol
        self.h = 1.0 / (n + 1)
        self.loops = (Loop("matvec", "update", max_iterations, required),)

    def eigenvalue(self) -> float:
        """lambda_h of the (1, 1) mode of the 5-point -Laplacian."""
        return 2 * (4 / self.h**2) * np.sin(np.pi * self.h / 2) ** 2

    def first_state(self, tiling, tile):
        """The (1, 1) eigenmode (``initial="mode"``) or a bump off the centre (``"bump"``) on a tile."""
        lo, hi = tiling.lo[tile], tiling.hi[tile]
        x = (np.arange(lo[0], hi[0]) + 1) * self.h
        y = (np.arange(lo[1], hi[1]) + 1) * self.h
        if self.initial == "mode":
            return np.outer(np.sin(np.pi * x), np.sin(np.pi * y))
        return np.exp(-((x[:, None] - 0.3) ** 2 + (y[None, :] - 0.6) ** 2) / 0.02)

    def matrix(self):
        """The system matrix ``I - dt Lap_h`` (SciPy sparse), for a direct solve to compare with."""
        import scipy.sparse as sp

        one = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(self.n, self.n))
        eye = sp.identity(self.n)
        lap = (sp.kron(one, eye) + sp.kron(eye, one)) / self.h**2
        return (sp.identity(self.n * self.n) + self.dt * lap).tocsr()

    def init_tile(self, tile, tiling):
        u = self.first_state(tiling, tile)
        zero = np.zeros_like(u)
        return {"u": u, "x": zero, "r": zero.copy(), "p": zero.copy(), "q": zero.copy(), "rr": 0.0, "pq": 0.0,
                "iterations": []}

    def pack_halos(self, state, src, tiling):
        out = {}
        for dst in tiling.face_neighbours[src]:
            side = self._side(tiling, src, int(dst))
            out[int(dst)] = np.stack([state["r"][side], state["p"][side]])
        return out

    @staticmethod
    def _side(tiling, src, dst):
        """The cells of ``src`` next to ``dst`` (a row or a column)."""
        a, b = tiling.lo[src], tiling.lo[dst]
        if b[0] > a[0]:
            return (-1, slice(None))
        if b[0] < a[0]:
            return (0, slice(None))
        if b[1] > a[1]:
            return (slice(None), -1)
        return (slice(None), 0)

    # ----- phases ---------------------------------------------------------------------------
    def start(self, tile, state, halos, ctx, tiling):
        state["x"] = np.zeros_like(state["u"])  # x0 = 0: r = b = u, p = 0 (the first beta is 0)
        state["r"] = state["u"].copy()
        state["p"] = np.zeros_like(state["u"])
        r = state["r"]
        return r.size, (float(np.sum(r * r)), float(np.abs(r).max()))

    def matvec(self, tile, state, halos, ctx, tiling):
        if ctx.iteration == 0:
            beta, state["rr"] = 0.0, ctx.reduced["start"][0]
        else:  # r.r of the last update over the one before
            rr = ctx.reduced["update"][0]
            beta, state["rr"] = rr / state["rr"], rr
        p = state["r"] + beta * state["p"]
        nx, ny = p.shape
        padded = np.zeros((nx + 2, ny + 2))
        padded[1:-1, 1:-1] = p
        for src, payload in halos.items():  # the neighbour's new p, formed from its r and old p alike
            side = self._side(tiling, tile, src)
            edge = payload[0] + beta * payload[1]
            if side == (-1, slice(None)):
                padded[-1, 1:-1] = edge
            elif side == (0, slice(None)):
                padded[0, 1:-1] = edge
            elif side == (slice(None), -1):
                padded[1:-1, -1] = edge
            else:
                padded[1:-1, 0] = edge
        lap = 4 * p - padded[:-2, 1:-1] - padded[2:, 1:-1] - padded[1:-1, :-2] - padded[1:-1, 2:]
        state["p"] = p
        state["q"] = p + self.dt / self.h**2 * lap
        return p.size, float(np.sum(p * state["q"]))

    def update(self, tile, state, halos, ctx, tiling):
        alpha = state["rr"] / ctx.reduced["matvec"]
        state["x"] = state["x"] + alpha * state["p"]
        state["r"] = state["r"] - alpha * state["q"]
        r = state["r"]
        return r.size, (float(np.sum(r * r)), float(np.abs(r).max()))

    def again(self, loop, step, iteration, value):
        return value[1] > self.tol

    def finish(self, tile, state, halos, ctx, tiling):
        state["u"] = state["x"]
        return state["u"].size

    def gather(self, states, tiling):
        u = np.zeros(self.grid)
        for t, s in states.items():
            u[tiling.slices(t)] = s["u"]
        return {"u": u}


def sheet(n=14, seed=3):
    """A jittered ``n x n`` grid of vertices over the unit square, two triangles per quad, its
    vertices pushed together near the centre so that contacts happen: (vertices, elements)."""
    rng = np.random.default_rng(seed)
    g = np.linspace(0.0, 1.0, n)
    x, y = np.meshgrid(g, g, indexing="ij")
    vertices = np.stack([x.ravel(), y.ravel()], axis=1) + rng.normal(0.0, 0.15 / n, (n * n, 2))
    centre = vertices - 0.5
    vertices = 0.5 + centre * (0.55 + 0.45 * np.linalg.norm(centre, axis=1, keepdims=True) / 0.71)
    ids = np.arange(n * n).reshape(n, n)
    a, b, c, d = ids[:-1, :-1].ravel(), ids[1:, :-1].ravel(), ids[1:, 1:].ravel(), ids[:-1, 1:].ravel()
    elements = np.concatenate([np.stack([a, b, c], axis=1), np.stack([a, c, d], axis=1)])
    return vertices, elements


class MeshContact(App):
    """Vertices of a triangle mesh, split into METIS parts, pushed apart by penalty contacts.

    Each step, every part reads every other part's box (``reads="app"``) and emits a job for its
    own vertices and one for each later part whose box, widened by the contact radius, meets
    its own (``broad``, ``emits_jobs``); a job finds the vertex pairs of its two parts closer
    than the radius, over a range of its first part's vertices, and returns one record
    ``(u, w, fx, fy)`` per pair and side (``collide``); each part then sums the forces on its
    vertices in the global order of ``(u, w)`` and moves them (``contact``). The forces of a
    pair are equal and opposite bit for bit, and sums run in an order no split of the mesh,
    placement or job policy changes, so the state does not depend on them (charm contact
    mechanics, §III).
    """

    name = "mesh-contact-test"
    grid = (1, 1)
    phases = (
        Phase("broad", reads="app", emits_jobs=True, work="parts"),
        Phase("contact", jobs="collide", work="vertices"),
    )

    def __init__(self, partition, vertices, radius=0.06, stiffness=40.0, dt=2e-3, job_split=0):
        self.partition, self.x0 = partition, np.asarray(vertices, float)
        self.radius, self.stiffness, self.dt = radius, stiffness, dt
        self.job_split = job_split
        self.owned = [np.flatnonzero(partition.part_of_vertex == p) for p in range(partition.ntiles)]

    def check_tiling(self, tiling):
        return None

    def init_tile(self, tile, tiling):
        ids = self.owned[tile]
        return {"ids": ids, "x": self.x0[ids].copy(), "v": np.zeros((len(ids), 2))}

    def reads(self, phase, step, decomposition):
        T = decomposition.ntiles
        return [[s for s in range(T) if s != t] for t in range(T)]

    def _box(self, state):
        x = state["x"]
        return np.concatenate([x.min(axis=0) - self.radius, x.max(axis=0) + self.radius]) if len(x) else None

    def pack_halos(self, state, src, tiling):
        box = self._box(state)
        return {t: box for t in range(tiling.ntiles) if t != src}

    def broad(self, tile, state, halos, ctx, tiling):
        mine = self._box(state)
        n = len(state["ids"])
        jobs = [(-1, n, 1e-6 * n * n)] if n else []
        for other in sorted(halos):
            box = halos[other]
            if other > tile and n and box is not None and np.all(mine[:2] <= box[2:]) and np.all(box[:2] <= mine[2:]):
                jobs.append((other, n, 1e-6 * n * len(self.owned[other])))
        return len(halos), jobs

    def pack_job_input(self, state, tile):
        return {"ids": state["ids"], "x": state["x"].copy()}

    def _forces(self, u_ids, xu, w_ids, xw, same):
        d = xu[:, None, :] - xw[None, :, :]
        dist = np.sqrt(d[..., 0] ** 2 + d[..., 1] ** 2)
        close = dist < self.radius
        if same:
            close &= u_ids[:, None] < w_ids[None, :]  # each pair of one part once
        i, j = np.nonzero(close)
        f = self.stiffness * ((self.radius - dist[i, j]) / dist[i, j])[:, None] * d[i, j]
        mine = np.column_stack([u_ids[i], w_ids[j], f])
        theirs = np.column_stack([w_ids[j], u_ids[i], -f])
        return mine, theirs

    def collide(self, job, inputs, first, stop, ctx):
        a, b = job["a"], job["b"]
        u = inputs[a]
        if b < 0:
            mine, theirs = self._forces(u["ids"][first:stop], u["x"][first:stop], u["ids"], u["x"], same=True)
            return stop - first, {a: np.concatenate([mine, theirs])}
        w = inputs[b]
        mine, theirs = self._forces(u["ids"][first:stop], u["x"][first:stop], w["ids"], w["x"], same=False)
        return stop - first, {a: mine, b: theirs}

    def contact(self, tile, state, halos, ctx, tiling):
        records = np.concatenate([np.zeros((0, 4)), *halos.values()])
        order = np.lexsort((records[:, 1], records[:, 0]))  # by vertex, then by the vertex it meets
        records = records[order]
        force = np.zeros_like(state["x"])
        where = np.searchsorted(state["ids"], records[:, 0].astype(np.int64))
        np.add.at(force, where, records[:, 2:])  # in that order, one addition after another
        state["v"] = state["v"] + self.dt * force
        state["x"] = state["x"] + self.dt * state["v"]
        state["force"] = force
        return len(state["ids"])

    def gather(self, states, tiling):
        n = len(self.x0)
        x, v, f = np.zeros((n, 2)), np.zeros((n, 2)), np.zeros((n, 2))
        for s in states.values():
            x[s["ids"]], v[s["ids"]] = s["x"], s["v"]
            if "force" in s:
                f[s["ids"]] = s["force"]
        return {"x": x, "v": v, "force": f}
