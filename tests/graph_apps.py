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
