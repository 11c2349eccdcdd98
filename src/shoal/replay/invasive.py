"""The invasive resource manager in a replay: cores move between the ranks of a host, step by
step, as the manager decides from each rank's workload (the invasive paper, §5.3 and §6).

The modeled machine is ``hosts`` hosts, each running ``ranks_per_host`` ranks (the replay's
nodes, host-major: ranks ``h * ranks_per_host ...`` live on host ``h``) and owning a pool of
``cores`` cores that one :class:`~shoal.invasive.manager.ResourceManager` per host shares out:
the manager's own state machine, driven with the messages the ranks would send. Tiles stay on
their ranks (a dynamic placement still moves them, at its own period).

At the boundary before every step (all ranks are between steps: each step ends in a barrier or a
reduction, or the replay cuts it there), in modeled time ``t``:

1. acknowledgements due by ``t`` reach the manager, and the cores they free are granted: the
   receiving ranks take them now (a rank grows its pool between steps, when it polls);
2. every rank sends a non-blocking invade with its workload: the mean cost of its tiles over
   the last ``window`` steps (step 0: the first step's, what an application knows of its grid
   before it starts), or, with the ``scalability`` policy, its scalability graph measured from
   its own modeled step times (:class:`~shoal.invasive.distribution.MeasuredScalability`);
3. a rank asked to give cores back lets them go at once (it is between steps) and its
   acknowledgement reaches the manager ``release_delay_s`` later (the request → acknowledgement
   → grant time measured on this machine); the core idles meanwhile and its new rank takes it
   at the first boundary after that (Fig. 8's white gaps). With no delay a core moves at once;
4. the step starts ``request_s`` later (what each step's request costs a rank: a blocking
   invade's round trip, or a non-blocking one's send and poll).

Each rank holds at least one core (the manager's rule while the pool is at least as large as its
ranks); the cores a rank holds for each step are the replay's worker history, so ``shoal
report`` and the summary show them.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

import numpy as np

from ..cluster import Cluster, Network
from ..errors import ShoalError
from ..invasive.distribution import MeasuredScalability
from ..invasive.manager import POLICIES, Constraints, ResourceManager
from ..quotas import node_quotas
from ..tiling import Tiling
from ..trace import Trace

__all__ = ["InvasiveConfig", "InvasiveModel", "invasive_cluster", "ramp_limit", "ramp_trace"]


@dataclass(frozen=True)
class InvasiveConfig:
    """The modeled manager: its policy, the hosts and ranks it serves, and what it costs.

    Parameters
    ----------
    policy : str
        ``workload`` (cores in proportion to each rank's workload) or ``scalability`` (steepest
        ascent over each rank's measured scalability graph).
    hosts : int
        Hosts, each with its own pool and manager.
    ranks_per_host : int, optional
        Ranks on each host (default: the replay's nodes over ``hosts``).
    cores : int, optional
        Each host's pool R (default: the recorded cores of its ranks, summed).
    release_delay_s : float
        Seconds from a release request to the manager's grant of the freed core.
    request_s : float
        Seconds every step's request adds before the step starts.
    window : int
        Steps whose mean cost is a rank's workload.
    """

    policy: str = "workload"
    hosts: int = 1
    ranks_per_host: int | None = None
    cores: int | None = None
    release_delay_s: float = 0.0
    request_s: float = 0.0
    window: int = 1

    def check(self) -> None:
        """Raise :class:`~shoal.errors.ShoalError` with one line for a configuration no run can have."""
        if self.policy not in POLICIES:
            raise ShoalError(f"unknown invasive policy {self.policy!r}; known: {', '.join(POLICIES)}")
        for name in ("hosts", "ranks_per_host", "cores", "window"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ShoalError(f"invasive {name.replace('_', ' ')} must be a whole number >= 1, got {value!r}")
        for name in ("release_delay_s", "request_s"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ShoalError(f"invasive {name[:-2].replace('_', ' ')} must be >= 0 seconds, got {value!r}")


def invasive_cluster(cfg: InvasiveConfig, ranks: int, recorded: Cluster, network) -> tuple[Cluster, InvasiveConfig]:
    """The replay's cluster under the manager: one node per rank, holding the equal static split
    of its host's pool (the baseline the paper compares with), and ``cfg`` with its defaults
    resolved.

    Parameters
    ----------
    cfg : InvasiveConfig
        The modeled manager.
    ranks : int
        The replay's nodes (ranks), ``hosts x ranks_per_host``.
    recorded : Cluster
        The trace's cluster: its cores give the default pools.
    network : Network
        The network between the hosts.
    """
    cfg.check()
    per_host = cfg.ranks_per_host or ranks // cfg.hosts
    if per_host * cfg.hosts != ranks:
        raise ShoalError(f"{ranks} ranks do not fill {cfg.hosts} hosts x {cfg.ranks_per_host or '?'} ranks per host")
    if cfg.cores is None:
        cores = recorded.core_array if recorded.nodes == ranks else np.full(ranks, max(recorded.cores))
        pool = int(cores.reshape(cfg.hosts, per_host).sum(axis=1).max())
    else:
        pool = cfg.cores
    if pool < per_host:
        raise ShoalError(f"a pool of {pool} cores cannot give each of {per_host} ranks per host a core")
    split = np.tile(node_quotas(pool, np.ones(per_host)), cfg.hosts)
    cfg = InvasiveConfig(cfg.policy, cfg.hosts, per_host, pool, cfg.release_delay_s, cfg.request_s, cfg.window)
    return Cluster(tuple(int(c) for c in split), network), cfg


class InvasiveModel:
    """One manager per host, driven step by step by the replay (see the module docstring).

    Parameters
    ----------
    cfg : InvasiveConfig
        The manager, with ``ranks_per_host`` and ``cores`` resolved (:func:`invasive_cluster`).
    steps : int
        Steps of the replay.
    """

    def __init__(self, cfg: InvasiveConfig, steps: int):
        self.cfg = cfg
        self.ranks = cfg.hosts * cfg.ranks_per_host
        self.managers = [ResourceManager(cfg.cores, cfg.policy) for _ in range(cfg.hosts)]
        self.kept: list[set[int]] = [set() for _ in range(self.ranks)]
        self.graphs = [MeasuredScalability() for _ in range(self.ranks)]
        self.history = np.zeros((steps, self.ranks), np.int64)
        self._acks: list[tuple[float, int, int, tuple[int, ...]]] = []  # (due, sequence, rank, cores)
        self._sequence = 0
        self._workload = np.zeros(self.ranks)

    def boundary(self, s: int, t: float, owner: np.ndarray, cost: np.ndarray) -> tuple[np.ndarray, float]:
        """The cores each rank holds for step ``s`` starting at ``t``, and when the step starts.

        Parameters
        ----------
        s : int
            The step's index in the replay.
        t : float
            Modeled time at the boundary (every rank is between steps).
        owner : ndarray of int
            The rank of every tile.
        cost : ndarray, shape (steps, phases, tiles)
            Every task's modeled cost.

        Returns
        -------
        cores : ndarray of int64, shape (ranks,)
            The cores each rank runs step ``s`` with, each at least 1.
        start : float
            When step ``s`` starts: ``t`` plus the request's cost (none before the first step).
        """
        recent = cost[max(0, s - self.cfg.window):max(s, 1)].sum(axis=1).mean(axis=0)
        self._workload = np.bincount(owner, weights=recent, minlength=self.ranks)
        if s == 0:
            for rank in range(self.ranks):
                self._apply(rank, self._manager(rank).register(rank), t)
        while self._acks and self._acks[0][0] <= t:
            _, _, rank, back = heapq.heappop(self._acks)
            self._apply(rank, self._manager(rank).released(rank, back), t)
        floor = max(float(self._workload.max()), 1.0) * 1e-12  # a rank with no work still invades
        for rank in range(self.ranks):
            graph = self.graphs[rank].graph(self.cfg.cores) if self.cfg.policy == "scalability" else None
            asked = Constraints(workload=max(float(self._workload[rank]), floor),
                                graph=tuple(graph) if graph is not None else None)
            self._apply(rank, self._manager(rank).invade(rank, asked, blocking=False), t)
        # No delay: the cores move at this boundary. Before the first step every ack is in: the
        # ranks poll until each holds a core (§5.4), and that set-up precedes the modeled time.
        while self._acks and (self._acks[0][0] <= t or s == 0):
            _, _, rank, back = heapq.heappop(self._acks)
            self._apply(rank, self._manager(rank).released(rank, back), t)
        cores = np.array([len(k) for k in self.kept], np.int64)
        if cores.min() < 1:
            raise ShoalError("invasive replay: a rank was left without a core")  # the manager guarantees one
        self.history[s] = cores
        return cores, t + (self.cfg.request_s if s else 0.0)

    def finished(self, s: int, begin: float, end: np.ndarray, node: np.ndarray) -> None:
        """Record step ``s``'s modeled time on each rank (its measured scalability graph).

        Parameters
        ----------
        s : int
            The step that ran.
        begin : float
            When it started.
        end : ndarray
            Each of its tasks' end.
        node : ndarray of int
            Each of its tasks' rank.
        """
        last = np.full(self.ranks, begin)
        np.maximum.at(last, node, end)
        for rank in range(self.ranks):
            if last[rank] > begin and self._workload[rank] > 0:
                self.graphs[rank].record(int(self.history[s, rank]), last[rank] - begin, self._workload[rank])

    def schedule(self, steps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The worker history: the steps where a rank's cores changed and the cores from each.

        Parameters
        ----------
        steps : ndarray of int
            The replay's step numbers.
        """
        changed = np.concatenate(([True], np.any(self.history[1:] != self.history[:-1], axis=1)))
        return np.asarray(steps)[changed].astype(np.int64), self.history[changed]

    def _manager(self, rank: int) -> ResourceManager:
        return self.managers[rank // self.cfg.ranks_per_host]

    def _apply(self, sender: int, messages: list, t: float) -> None:
        """Deliver the manager's messages: grants are taken now, releases let go now and
        acknowledged after the release delay."""
        for rank, message in messages:
            kind = message["type"]
            if kind == "grant":
                self.kept[rank] |= set(message["cores"])
            elif kind == "release":
                back = tuple(message["cores"])
                self.kept[rank] -= set(back)
                heapq.heappush(self._acks, (t + self.cfg.release_delay_s, self._sequence, rank, back))
                self._sequence += 1


def ramp_limit(cores: int, steps: int = 4096) -> tuple[float, float]:
    """The §6.2 ramp's invasive/static time ratio with perfect scaling on a pool of ``cores``
    shared by two ranks: ``(ideal, integer)``.

    Step ``t`` of ``T`` gives rank 0 the work ``L0^2 = (T - t)^2`` and rank 1 ``L1^2 = t^2``, and a
    barrier ends it. The equal static split runs it in ``max(L0^2, L1^2) / (R / 2)``; cores in
    proportion to the work finish both ranks together, in ``(L0^2 + L1^2) / R``. With
    ``x = t / T`` and ``T`` large the ratio of the sums is the ratio of the integrals::

        int_0^1 ((1 - x)^2 + x^2) dx = 2/3
        2 int_0^1 max((1 - x)^2, x^2) dx = 4 int_{1/2}^1 x^2 dx = 7/6
        ratio = (2/3) / (7/6) = 4/7

    The integer answer takes the manager's own distribution (whole cores, at least one each) and
    ``steps`` steps instead: each step lasts ``max(L_r^2 / D_r)``.

    Parameters
    ----------
    cores : int
        R, the pool (at least 2).
    steps : int
        T for the integer answer.

    Returns
    -------
    tuple of float
        4/7, and the ratio the manager's whole-core shares give.
    """
    from ..invasive.distribution import proportional

    t = np.arange(steps, dtype=np.float64)
    work = np.stack(((steps - t) ** 2, t**2), axis=1)
    invasive = 0.0
    for w in work:
        d = proportional({0: max(w[0], 1e-12), 1: max(w[1], 1e-12)}, cores)
        invasive += max(w[0] / d[0], w[1] / d[1])
    static = float(work.max(axis=1).sum()) / (cores / 2)
    return 4.0 / 7.0, invasive / static


def ramp_trace(steps: int, sqrt_s: float = 1e-8, tiles_per_rank: int = 128, cores: int = 2) -> Trace:
    """A modeled trace of the §6.2 ramp: two ranks, ``steps`` steps of one phase and a barrier;
    at step ``t`` rank 0 computes ``(T - t)^2`` square roots and rank 1 ``t^2``.

    Each rank's work is cut into ``tiles_per_rank`` tiles of decreasing size (in the ratio
    ``n : n - 1 : ... : 1``): the executor's queue takes them largest first, so any number of
    cores finishes a rank's step within its smallest tile of the perfect split (perfect
    scaling, as the paper's closed form assumes). Costs are the trace's measured seconds (no
    machine model): replay it with ``costs="measured"`` or as it is.

    Parameters
    ----------
    steps : int
        T.
    sqrt_s : float
        Seconds one square root takes on one core.
    tiles_per_rank : int
        Tiles of each rank (the tiles ``0 .. n - 1`` are rank 0's, geometric placement).
    cores : int
        The recorded cores per rank (a replay's default pool is both ranks' together).
    """
    if steps < 1 or tiles_per_rank < 1 or not sqrt_s > 0:
        raise ShoalError("a ramp needs at least one step, one tile per rank and a positive time per square root")
    n, t = tiles_per_rank, np.arange(steps, dtype=np.float64)
    share = np.arange(n, 0, -1, dtype=np.float64)
    share /= share.sum()
    roots = np.stack(((steps - t) ** 2, t**2), axis=1)  # (steps, ranks)
    work = (roots[:, :, None] * share[None, None, :]).reshape(steps, 2 * n)
    tiling = Tiling.from_counts((2 * n, 1), (2 * n, 1))
    owner = np.repeat(np.arange(2), n)
    tasks = {"step": np.repeat(np.arange(steps), 2 * n), "phase": np.zeros(steps * 2 * n),
             "tile": np.tile(np.arange(2 * n), steps), "node": np.tile(owner, steps),
             "worker": np.zeros(steps * 2 * n), "start": np.zeros(steps * 2 * n), "end": np.zeros(steps * 2 * n),
             "cost": work.reshape(-1) * sqrt_s, "work": np.rint(work).reshape(-1)}
    empty = {k: np.zeros(0) for k in ("step", "phase", "src", "dst", "bytes")}
    return Trace(tasks=tasks, messages=empty, phases=["burn"], tiling=tiling,
                 cluster=Cluster((cores, cores), Network()), placement_steps=np.array([0]),
                 placement_owners=owner[None, :], step_end=np.zeros(steps), app="synthetic",
                 scenario="ramp-model", barrier_phases=[True], work_units=["square roots"])
