"""The one balancing step, shared by real runs and replays.

Every ``period`` steps, or when the adaptive trigger of :mod:`shoal.placement.trigger` says
the imbalance has cost more than balancing does, a dynamic policy re-places the tiles from what
the steps since the last balancing step cost. :class:`Balancer` is that step, written once: it
gathers the loads, hands them to the policy in a :class:`BalanceContext`, prices the migration
it asks for (the bytes of the tiles that change node) and records a ``/balance`` row, which
says why it ran and, once :meth:`Balancer.paid` is told, what it cost. A real run (``shoal.runtime.simulation``)
feeds it measured task costs and moves the tiles' states; a replay (``shoal.replay.run``)
feeds it modeled costs and sends the bytes over its network model.

What a policy sees:

- ``loads`` of shape ``(phases, tiles)``: seconds per step each tile spent in each phase;
- ``barrier``: which phases end in a barrier (a reduction that is not lagged), so a policy can
  balance the phases a barrier separates instead of their sum;
- ``background`` per node: seconds per step its cores spent on work no tile owns. In an MPI
  run that is the time the rank's workers spent moving messages (before their tasks and
  while waiting for one); in one process there is none; in a replay it is the message CPU time
  the model charged on that node. Charm++ calls it the processors' background load.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..cluster import Cluster
from ..decomposition import Decomposition
from ..imbalance import lif
from ..records import BALANCE
from .registry import PlacementPolicy, check_owner
from .trigger import ADAPTIVE, Adaptive, imbalance_s, parse_period, segments


@dataclass
class BalanceContext:
    """What a balancing policy may look at.

    Attributes
    ----------
    tiling : Decomposition
        The tiles: a Cartesian tiling or a mesh partition (:mod:`shoal.decomposition`).
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

    tiling: Decomposition
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
        return segments(self.loads, self.barrier)


def node_loads(owner: np.ndarray, loads: np.ndarray, cluster: Cluster) -> np.ndarray:
    """Load per core of every node: the per-tile ``loads`` summed by ``owner[tile] -> node``,
    divided by the node's cores (the unit of ``loads`` per core)."""
    return np.bincount(owner, weights=loads, minlength=cluster.nodes) / cluster.core_array


@dataclass
class Balancer:
    """The balancing step of one run or replay (see the module docstring).

    ``measure`` adds a real run's task costs; ``plan`` calls the policy on per-step loads and
    records the row; ``paid`` adds what the step cost; what the policy remembers between calls
    lives in ``memory``. ``period`` is the steps between balancing steps or ``"adaptive"``: then
    ``trigger`` (an :class:`~shoal.placement.trigger.Adaptive`, default parameters unless given)
    decides from every step's loads, fed through :meth:`observe`.
    """

    policy: PlacementPolicy
    period: int | str
    tiling: Decomposition
    barrier: tuple[bool, ...]
    params: Any = None
    proxy: Any = None  # ProxyLoads of a low-resolution run (speculative)
    memory: dict = field(default_factory=dict)
    rows: list[tuple] = field(default_factory=list)
    trigger: Adaptive | None = None

    def __post_init__(self):
        self.period = parse_period(self.period)
        if self.period == ADAPTIVE and self.trigger is None:
            self.trigger = Adaptive()
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
        state = {"memory": self.memory, "cost": team.sum(self.cost), "background": team.sum(bg), "steps": self.steps}
        return state | ({"trigger": self.trigger.state()} if self.trigger is not None else {})

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
        if self.trigger is not None and "trigger" in state:
            self.trigger.restore(state["trigger"])

    # ----- when ------------------------------------------------------------------------------
    def observe(self, step: int, loads: np.ndarray, owner: np.ndarray, cluster: Cluster) -> bool:
        """Feed the adaptive trigger one finished step; whether a balancing step is due after it.

        Parameters
        ----------
        step : int
            The step that finished.
        loads : ndarray, shape (phases, tiles)
            Seconds each tile spent in each phase of that step.
        owner : ndarray of int64, shape (tiles,)
            The node of every tile during that step.
        cluster : Cluster
            The nodes and their cores during that step.

        Returns
        -------
        bool
            Always False without an adaptive trigger (a fixed period is a schedule).
        """
        return self.trigger is not None and self.trigger.observe(step, loads, owner, cluster, self.barrier)

    @property
    def due(self) -> bool:
        """Whether the adaptive trigger has fired since the last balancing step."""
        return self.trigger is not None and self.trigger.pending

    def horizon(self, step: int) -> int:
        """Steps the placement planned at ``step`` is expected to last: the period, or for the
        adaptive trigger as long as the one before it (at least its minimum interval)."""
        if self.trigger is None:
            return int(self.period)
        return max(step - self.trigger.since, self.trigger.min_interval)

    # ----- the step itself ---------------------------------------------------------------------
    def plan(self, step: int, owner: np.ndarray, cluster: Cluster, loads: np.ndarray, background: np.ndarray,
             tile_bytes: np.ndarray, future_loads: np.ndarray | None = None,
             proxy_loads: np.ndarray | None = None) -> np.ndarray:
        """The policy's new owner table; records the balancing step as a ``/balance`` row (plan
        time, tiles and bytes moved, LIF of the period's loads before and after, and why it ran:
        the step the trigger asked for, the time imbalance had cost and the cost it passed; NaN
        for a fixed period) and restarts the trigger's count.

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
            proxy_loads = self.proxy.loads(step, step + self.horizon(step))
        ctx = BalanceContext(self.tiling, cluster, owner, loads, step=step, barrier=self.barrier,
                             background=background if len(background) else None, future_loads=future_loads,
                             proxy_loads=proxy_loads, tile_bytes=tile_bytes, params=self.params)
        tic = time.perf_counter()
        new = check_owner(self.policy.rebalance(ctx, self.memory), self.tiling, cluster)
        plan_s = time.perf_counter() - tic
        moved = new != owner
        before, after = (float(lif(node_loads(o, ctx.tile_loads, cluster))) for o in (owner, new))
        why = (step, math.nan, math.nan)
        if self.trigger is not None:
            t = self.trigger
            why = (t.decided if t.pending else step, t.lost_s, t.threshold_s)
            t.balanced(step, imbalance_s(ctx.loads, new, cluster, self.barrier))
        self.rows.append((step, plan_s, int(moved.sum()), int(np.asarray(tile_bytes)[moved].sum()), before, after,
                          *why, math.nan))
        return new

    def paid(self, cost_s: float) -> None:
        """What the latest balancing step cost, in seconds per core (the cores' wait for the
        last task before it, the barrier, planning, migration, the executor's restart as far as
        they are seen): recorded in its row and, for the adaptive trigger, what the next one
        must be worth."""
        if self.rows:  # only the process that plans keeps rows (the first, under MPI)
            self.rows[-1] = (*self.rows[-1][:-1], float(cost_s))
        if self.trigger is not None:
            self.trigger.paid(cost_s)

    @property
    def last_plan_s(self) -> float:
        """How long the policy took to plan the latest balancing step."""
        return self.rows[-1][1]

    def records(self) -> dict[str, np.ndarray]:
        """The ``/balance`` table of every balancing step so far."""
        return BALANCE.from_rows(self.rows)
