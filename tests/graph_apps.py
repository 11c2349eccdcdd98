"""Small apps built to exercise the step's task graph: loops and reductions of several values.

``CGHeat`` takes implicit heat-equation steps on the unit square, ``(I - dt Lap_h) u' = u`` with
zero Dirichlet sides, each solved by conjugate gradients on the tiles: a loop of two phases
(``matvec`` reads its face neighbours' halos and reduces p.Ap; ``update`` reduces r.r and
max |r| at once) that repeats until max |r| is below a tolerance. Started from the discrete
eigenmode ``sin(pi x) sin(pi y)``, each step divides it by ``1 + dt lambda_h`` exactly, which the
tests compare with.

``JacobiHeat`` takes the same implicit steps by Jacobi sweeps, a loop of one phase compiled for
the native executor (halos by copy plans into a ghost ring) or left in Python (halos as
payloads), bitwise alike.

``MeshContact`` pushes a mesh's vertices apart by penalty contacts found by jobs between its
parts; ``DampedMeshContact`` adds a compiled phase that damps their velocities, so that a run
with jobs also runs natively (on MPI ranks too).
"""

from __future__ import annotations

import numba as nb
import numpy as np

from shoal.runtime import App, Loop, Phase
from shoal.runtime.native import KERNEL, Native


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


@nb.njit(nogil=True, cache=True)
def jacobi(u, b, un, c):
    """One Jacobi sweep of ``(1 + 4c) u - c (its four neighbours) = b`` on the interior of the
    padded ``u`` (its ghost ring read, not written); the largest change (a maximum: the same
    bits in any order)."""
    nx, ny = b.shape
    top = 0.0
    for i in range(nx):
        for j in range(ny):
            un[i, j] = (b[i, j] + c * (u[i, j + 1] + u[i + 2, j + 1] + u[i + 1, j] + u[i + 1, j + 2])) / (1 + 4 * c)
            top = max(top, abs(un[i, j] - u[i + 1, j + 1]))
    for i in range(nx):
        for j in range(ny):
            u[i + 1, j + 1] = un[i, j]
    return top


@nb.njit(nogil=True, cache=True, inline="always")
def _jacobi_fields(mem, ints):
    nx, ny = ints[0], ints[1]
    m = (nx + 2) * (ny + 2)
    return (mem[:m].reshape((nx + 2, ny + 2)), mem[m:m + nx * ny].reshape((nx, ny)),
            mem[m + nx * ny:m + 2 * nx * ny].reshape((nx, ny)))


@nb.njit(KERNEL, nogil=True, cache=True)
def jacobi_start(tile, step, iteration, mem, ints, consts, reduced, out):
    u, b, _ = _jacobi_fields(mem, ints)
    b[:, :] = u[1:-1, 1:-1]
    return b.size


@nb.njit(KERNEL, nogil=True, cache=True)
def jacobi_sweep(tile, step, iteration, mem, ints, consts, reduced, out):
    u, b, un = _jacobi_fields(mem, ints)
    out[0] = jacobi(u, b, un, consts[0])
    return b.size


class JacobiHeat(App):
    """Implicit heat steps ``(I - dt Lap_h) u' = u`` with zero Dirichlet sides, each solved by
    Jacobi sweeps until the largest change is below ``tol``: a loop of one phase that reads its
    face neighbours and reduces a maximum, compiled (halos by copy plans into ``u``'s ghost
    ring) or in Python (the same sweep, halos as payloads): ``compiled`` names the phases compiled."""

    name = "jacobi-heat-test"
    phases = (
        Phase("start", work="cells"),
        Phase("sweep", reads="faces", reduction="max", work="cells"),
    )

    def __init__(self, n=24, c=0.5, tol=1e-9, max_iterations=400, compiled=("start", "sweep")):
        self.grid = (n, n)
        self.c, self.tol, self.compiled = c, tol, tuple(compiled)
        self.loops = (Loop("sweep", "sweep", max_iterations, required=True),)

    def init_tile(self, tile, tiling):
        lo, hi = tiling.lo[tile], tiling.hi[tile]
        x = (np.arange(lo[0], hi[0]) + 0.5) / self.grid[0]
        y = (np.arange(lo[1], hi[1]) + 0.5) / self.grid[1]
        u = np.zeros((len(x) + 2, len(y) + 2))
        u[1:-1, 1:-1] = np.exp(-((x[:, None] - 0.3) ** 2 + (y[None, :] - 0.6) ** 2) / 0.02)
        return {"u": u, "b": np.zeros((len(x), len(y))), "un": np.zeros((len(x), len(y)))}

    @staticmethod
    def _edges(tiling, src, dst):
        """The interior row or column of ``src`` next to ``dst``, and where ``dst`` keeps it in
        its ghost ring (boxes of padded arrays)."""
        a, b = tiling.lo[src], tiling.lo[dst]
        (nx, ny), (mx, my) = (tiling.hi[src] - a), (tiling.hi[dst] - b)
        if b[0] > a[0]:
            return (slice(nx, nx + 1), slice(1, ny + 1)), (slice(0, 1), slice(1, my + 1))
        if b[0] < a[0]:
            return (slice(1, 2), slice(1, ny + 1)), (slice(mx + 1, mx + 2), slice(1, my + 1))
        if b[1] > a[1]:
            return (slice(1, nx + 1), slice(ny, ny + 1)), (slice(1, mx + 1), slice(0, 1))
        return (slice(1, nx + 1), slice(1, 2)), (slice(1, mx + 1), slice(my + 1, my + 2))

    def pack_halos(self, state, src, tiling):
        return {int(dst): state["u"][self._edges(tiling, src, int(dst))[0]].copy()
                for dst in tiling.face_neighbours[src]}

    def start(self, tile, state, halos, ctx, tiling):
        state["b"][...] = state["u"][1:-1, 1:-1]
        return state["b"].size

    def sweep(self, tile, state, halos, ctx, tiling):
        for src, edge in halos.items():
            state["u"][self._edges(tiling, src, tile)[1]] = edge
        return state["b"].size, jacobi(state["u"], state["b"], state["un"], self.c)

    def again(self, loop, step, iteration, value):
        return value > self.tol

    def native(self, tiling):
        if not self.compiled:
            return None

        def ints(tile):
            return np.asarray(tiling.hi[tile] - tiling.lo[tile], np.int64)

        def halos(phase, src, dst):
            send, receive = self._edges(tiling, src, dst)
            return [("u", send, "u", receive)]

        kernels = {"start": jacobi_start, "sweep": jacobi_sweep}
        return Native(kernels={name: kernels[name] for name in self.compiled}, fields=("u", "b", "un"), ints=ints,
                      consts=np.array([self.c]), halos=halos)

    def gather(self, states, tiling):
        u = np.zeros(self.grid)
        for t, s in states.items():
            u[tiling.slices(t)] = s["u"][1:-1, 1:-1]
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
        state["v"] += self.dt * force  # (in place: a native executor's fields are views of its memory)
        state["x"] += self.dt * state["v"]
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


@nb.njit(KERNEL, nogil=True, cache=True)
def damp_kernel(tile, step, iteration, mem, ints, consts, reduced, out):
    v = mem[:2 * ints[0]]
    for i in range(v.size):
        v[i] *= consts[0]
    return ints[0]


class DampedMeshContact(MeshContact):
    """:class:`MeshContact` whose velocities are multiplied by ``keep`` after every contact step,
    by a compiled kernel (natively) or by NumPy (the same product, the same bits)."""

    name = "damped-mesh-contact-test"
    phases = (*MeshContact.phases, Phase("damp", work="vertices"))

    def __init__(self, partition, vertices, keep=0.98, **kwargs):
        super().__init__(partition, vertices, **kwargs)
        self.keep = keep

    def damp(self, tile, state, halos, ctx, tiling):
        state["v"] *= self.keep
        return len(state["ids"])

    def native(self, tiling):
        return Native(kernels={"damp": damp_kernel}, fields=("v",), consts=np.array([self.keep]),
                      ints=lambda tile: np.array([len(self.owned[tile])], np.int64))
