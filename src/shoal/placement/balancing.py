"""The one balancing step, shared by real runs and replays.

Every ``period`` steps a dynamic policy re-places the tiles from what the last period cost.
:class:`Balancer` is that step, written once: it gathers the period's loads, hands them to the
policy in a :class:`BalanceContext`, prices the migration it asks for (the bytes of the tiles
that change node) and records a ``/balance`` row. A real run (``shoal.runtime.simulation``)
feeds it measured task costs and moves the tiles' states; a replay (``shoal.replay.run``)
feeds it modeled costs and sends the bytes over its network model.

What a policy sees:

- ``loads`` of shape ``(phases, tiles)``: seconds per step each tile spent in each phase;
- ``barrier``: which phases end in a barrier (a reduction that is not lagged), so a policy can
  balance the phases a barrier separates instead of their sum;
- ``background`` per node: seconds per step its cores spent on work no tile owns. In an MPI
  run that is the CPU time of the rank's message thread (measured with ``thread_time`` over
  the period); in one process there is none; in a replay it is the message CPU time the model
  charged on that node. Charm++ calls it the processors' background load.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..cluster import Cluster
from ..imbalance import lif
from ..records import BALANCE
from ..tiling import Tiling
from .registry import PlacementPolicy, check_owner


@dataclass
class BalanceContext:
    """What a balancing policy may look at.

    Attributes
    ----------
    loads : ndarray, shape (phases, tiles)
        Load per tile and phase over the last period (seconds per step).
    owner : ndarray
        Current owner of every tile.
    barrier : tuple of bool
        Per phase: whether it ends in a barrier (default: none does).
    background : ndarray or None
        Per node, seconds per step of work no tile owns (default: none).
    future_loads : ndarray or None
        True per-tile loads of the coming period (only the ``oracle`` may use them).
    proxy_loads : ndarray or None
        Per-tile loads of the coming period as a low-resolution proxy predicts them (``speculative``).
    tile_bytes : ndarray or None
        Bytes of state per tile (what a migration moves).
    params : object
        The policy's typed parameters (its ``params`` dataclass).
    """

    tiling: Tiling
    cluster: Cluster
    owner: np.ndarray
    loads: np.ndarray
    step: int = 0
    barrier: tuple[bool, ...] | None = None
    background: np.ndarray | None = None
    future_loads: np.ndarray | None = None
    proxy_loads: np.ndarray | None = None
    tile_bytes: np.ndarray | None = None
    params: Any = None

    def __post_init__(self):
        self.loads = np.atleast_2d(np.asarray(self.loads, dtype=np.float64))
        if self.barrier is None:
            self.barrier = (False,) * self.loads.shape[0]
        if self.background is None:
            self.background = np.zeros(self.cluster.nodes)

    @property
    def tile_loads(self) -> np.ndarray:
        """Load per tile, every phase summed (seconds per step)."""
        return self.loads.sum(axis=0)

    def segment_loads(self) -> np.ndarray:
        """Loads of shape ``(segments, tiles)``: the phases from one barrier to the next
        summed, wrapping around the end of the step (tiles run into the next step until they
        meet a barrier there). In steady state a step lasts at least, segment by segment, as
        long as the busiest node's share of it. Without barriers there is one segment."""
        ends = [p for p, b in enumerate(self.barrier) if b]
        if not ends:
            return self.loads.sum(axis=0, keepdims=True)
        order = np.roll(np.arange(len(self.barrier)), -(ends[-1] + 1))  # start after the last barrier
        segments, current = [], np.zeros(self.loads.shape[1])
        for p in order:
            current = current + self.loads[p]
            if self.barrier[p]:
                segments.append(current)
                current = np.zeros(self.loads.shape[1])
        return np.array(segments)


def node_loads(owner: np.ndarray, loads: np.ndarray, cluster: Cluster) -> np.ndarray:
    """Load per core of every node: the per-tile ``loads`` summed by ``owner[tile] -> node``,
    divided by the node's cores (the unit of ``loads`` per core)."""
    return np.bincount(owner, weights=loads, minlength=cluster.nodes) / cluster.core_array


@dataclass
class Balancer:
    """The balancing step of one run or replay (see the module docstring).

    ``measure`` adds a real run's task costs; ``plan`` calls the policy on per-step loads and
    records the row; what the policy remembers between calls lives in ``memory``.
    """

    policy: PlacementPolicy
    period: int
    tiling: Tiling
    barrier: tuple[bool, ...]
    params: Any = None
    proxy: Any = None  # ProxyLoads of a low-resolution run (speculative)
    memory: dict = field(default_factory=dict)
    rows: list[tuple] = field(default_factory=list)

    def __post_init__(self):
        if self.params is None:
            self.params = self.policy.params()
        self._reset()

    def _reset(self) -> None:
        self.cost = np.zeros((len(self.barrier), self.tiling.ntiles))
        self.background: np.ndarray | None = None
        self.steps = 0

    # ----- a real run's measurements ---------------------------------------------------------
    def measure(self, part) -> None:
        """Add the CPU costs of the tasks an executor run measured here (an ``ExecutionResult``;
        tasks that ran elsewhere cost nothing here) and its message thread's time."""
        t = part.tasks
        P, T = self.cost.shape
        self.cost += np.bincount(t["phase"].astype(np.int64) * T + t["tile"], weights=t["cost"],
                                 minlength=P * T).reshape(P, T)
        if part.comm_cpu_s is not None:
            self.background = part.comm_cpu_s + (0.0 if self.background is None else self.background)
        self.steps += part.steps

    def take_measurements(self) -> tuple[np.ndarray, np.ndarray, int]:
        """The period's summed costs ``(phases, tiles)``, background per node and steps; resets them."""
        out = (self.cost, self.background if self.background is not None else np.zeros(0), self.steps)
        self._reset()
        return out

    def checkpoint_state(self, team) -> dict:
        """What a checkpoint keeps: the policy's memory and the period's costs so far (summed
        over processes; the first process carries them on resume)."""
        bg = self.background if self.background is not None else np.zeros(0)
        return {"memory": self.memory, "cost": team.sum(self.cost), "background": team.sum(bg), "steps": self.steps}

    def restore(self, state: dict, carry_costs: bool, nodes: int) -> None:
        """Continue from a checkpoint.

        Parameters
        ----------
        state : dict
            What :meth:`checkpoint_state` returned when the checkpoint was written.
        carry_costs : bool
            Whether to keep the period's costs so far (the first process does; the others start
            from zero so that the sum over processes stays right). Costs of another number of
            phases or tiles are dropped.
        nodes : int
            Nodes of the resumed run; the background load is kept only if it has as many.
        """
        self.memory = state["memory"]
        if carry_costs and state["cost"].shape == self.cost.shape:
            self.cost = state["cost"]
            self.background = state["background"] if len(state["background"]) == nodes else None
        self.steps = state["steps"]

    # ----- the step itself ---------------------------------------------------------------------
    def plan(self, step: int, owner: np.ndarray, cluster: Cluster, loads: np.ndarray, background: np.ndarray,
             tile_bytes: np.ndarray, future_loads: np.ndarray | None = None,
             proxy_loads: np.ndarray | None = None) -> np.ndarray:
        """The policy's new owner table; records the balancing step as a ``/balance`` row (plan
        time, tiles and bytes moved, LIF of the period's loads before and after).

        Parameters
        ----------
        step : int
            The step at which the tiles are re-placed.
        owner : ndarray of int64, shape (tiles,)
            The current node of every tile.
        cluster : Cluster
            The nodes the tiles run on.
        loads : ndarray, shape (phases, tiles)
            Seconds per step each tile spent in each phase over the period.
        background : ndarray, shape (nodes,) or (0,)
            Seconds per step of every node's work no tile owns; empty for none.
        tile_bytes : ndarray, shape (tiles,)
            Bytes of every tile's state: what moving it costs.
        future_loads : ndarray, shape (tiles,), optional
            The true loads of the coming period (a replay's, for ``oracle``).
        proxy_loads : ndarray, shape (tiles,), optional
            The coming period's loads a low-resolution proxy predicts (``speculative``); taken
            from the balancer's ``proxy`` when not given.

        Returns
        -------
        ndarray of int64, shape (tiles,)
            The new ``owner[tile] -> node``.

        Raises
        ------
        ShoalError
            If the policy returns an owner table of the wrong shape or with unknown nodes.
        """
        if proxy_loads is None and self.proxy is not None:
            proxy_loads = self.proxy.loads(step, step + self.period)
        ctx = BalanceContext(self.tiling, cluster, owner, loads, step=step, barrier=self.barrier,
                             background=background if len(background) else None, future_loads=future_loads,
                             proxy_loads=proxy_loads, tile_bytes=tile_bytes, params=self.params)
        tic = time.perf_counter()
        new = check_owner(self.policy.rebalance(ctx, self.memory), self.tiling, cluster)
        plan_s = time.perf_counter() - tic
        moved = new != owner
        before, after = (float(lif(node_loads(o, ctx.tile_loads, cluster))) for o in (owner, new))
        self.rows.append((step, plan_s, int(moved.sum()), int(np.asarray(tile_bytes)[moved].sum()), before, after))
        return new

    @property
    def last_plan_s(self) -> float:
        """How long the policy took to plan the latest balancing step."""
        return self.rows[-1][1]

    def records(self) -> dict[str, np.ndarray]:
        """The ``/balance`` table of every balancing step so far."""
        return BALANCE.from_rows(self.rows)
