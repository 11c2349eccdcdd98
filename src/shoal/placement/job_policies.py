"""Job placement policies: which node runs each job.

A policy takes a :data:`~shoal.placement.jobs.JOBS` table, the tiles' owners and the cluster
and returns ``job_node``, the node of every job. The policies live in their own registry,
:data:`JOB_POLICIES` (:func:`job_policy`), apart from the tiles'
(:func:`shoal.placement.get_policy`), so ``locality`` here is the contact-mechanics paper's
Algorithm 2 on jobs (§V-B) while the tiles' version is ``tile-locality``:

- ``even``: equal counts per node, the paper's base version;
- ``profiled``: costs predicted from the last window per tile pair (§V-A), largest first onto
  the least loaded node;
- ``locality``: collision tasks on a node of one of their tiles while it stays under the
  average load, the rest greedily (Algorithm 2).

Every policy is deterministic: the same jobs, owners and cluster give the same node to every
job id, whatever the order of the table's rows; ties go by job id and node id, never by timing.
"""

from __future__ import annotations

import abc
import math
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from ..cluster import Cluster
from ..errors import ShoalError
from ..quotas import node_quotas
from .jobs import check_jobs, job_costs, pair_key
from .registry import NoParams


def _check_owner(owner: np.ndarray, cluster: Cluster) -> np.ndarray:
    """``owner`` as int64, refused in one line unless it is one node id in range per tile."""
    owner = np.asarray(owner)
    if owner.ndim != 1 or (owner.size and owner.dtype.kind not in "iu"):
        raise ShoalError(f"owner must be a 1-D array of node ids (one per tile), got shape {owner.shape} of "
                         f"{owner.dtype}")
    if owner.size and (owner.min() < 0 or owner.max() >= cluster.nodes):
        raise ShoalError(f"owner names nodes outside 0..{cluster.nodes - 1}")
    return owner.astype(np.int64)


class JobPolicy(Protocol):
    """What a job placement policy provides.

    A policy is a frozen dataclass registered under its ``name`` in :data:`JOB_POLICIES`.

    Attributes
    ----------
    name : str
        The key of the registry.
    summary : str
        One line saying what the policy does.
    params : type
        The dataclass of its parameters, with a ``validate()`` that raises
        :class:`~shoal.errors.ShoalError` for a bad value.
    """

    name: str
    summary: str
    params: type

    def place(self, jobs: dict[str, np.ndarray], owner: np.ndarray, cluster: Cluster, params=None,
              measured: dict[str, np.ndarray] | None = None) -> np.ndarray:
        """The node of every job.

        Parameters
        ----------
        jobs : dict of arrays
            A :data:`~shoal.placement.jobs.JOBS` table (checked here).
        owner : ndarray of int, shape (tiles,)
            ``owner[tile] -> node``; every tile a job reads must be in it.
        cluster : Cluster
            The nodes and their cores.
        params : the policy's ``params`` dataclass, optional
            Its parameters; the defaults when omitted.
        measured : dict of arrays, optional
            The last window's :data:`~shoal.placement.jobs.MEASURED` rows; policies that balance
            costs predict them from these (:func:`~shoal.placement.jobs.job_costs`), else they take
            the table's ``cost``.

        Returns
        -------
        ndarray of int64, shape (jobs,)
            ``job_node``: the node of the job in each row of ``jobs``, in ``0 .. nodes - 1``.

        Raises
        ------
        ShoalError
            For bad jobs, owners or parameters, in one line.
        """
        ...


JOB_POLICIES: dict[str, JobPolicy] = {}


def register_job_policy(policy: JobPolicy) -> JobPolicy:
    """Add ``policy`` to :data:`JOB_POLICIES` under its ``name`` and return it.

    Raises
    ------
    ValueError
        If a policy of that name is already registered (a programming error, not a user's).
    """
    if policy.name in JOB_POLICIES:
        raise ValueError(f"job placement policy {policy.name!r} registered twice")
    JOB_POLICIES[policy.name] = policy
    return policy


def job_policy(name: str) -> JobPolicy:
    """The job placement policy called ``name``.

    Raises
    ------
    ShoalError
        If no job policy has that name; the message lists the known ones.
    """
    try:
        return JOB_POLICIES[name]
    except KeyError:
        raise ShoalError(f"unknown job placement {name!r}; known: {', '.join(sorted(JOB_POLICIES))}") from None


@dataclass(frozen=True)
class _Policy(abc.ABC):
    """Checks what every policy is given, then hands it to :meth:`assign`."""

    name: str = ""
    summary: str = ""
    params: type = NoParams

    def place(self, jobs: dict[str, np.ndarray], owner: np.ndarray, cluster: Cluster, params=None,
              measured: dict[str, np.ndarray] | None = None) -> np.ndarray:
        """See :class:`JobPolicy`."""
        owner = _check_owner(owner, cluster)
        jobs = check_jobs(jobs, len(owner))
        params = self.params() if params is None else params
        if not isinstance(params, self.params):
            raise ShoalError(f"job placement {self.name!r} takes {self.params.__name__}, got {type(params).__name__}")
        params.validate()
        job_node = self.assign(jobs, owner, cluster, params, measured)
        return job_node.astype(np.int64)

    @abc.abstractmethod
    def assign(self, jobs, owner, cluster, params, measured) -> np.ndarray:
        """The policy itself, on checked input (the same parameters as :meth:`place`)."""


def _uniform(cluster: Cluster) -> bool:
    return len(set(cluster.cores)) == 1


def _least_loaded(load: np.ndarray, cluster: Cluster) -> int:
    """The node with the least load (per core, if the nodes' cores differ); ties: the lowest id."""
    return int(np.argmin(load if _uniform(cluster) else load / cluster.core_array))


@dataclass(frozen=True)
class Even(_Policy):
    """Equal counts of jobs per node, in id order: the contact-mechanics paper's base version.

    The paper's narrow phase at first shares the potential collision pairs "evenly among all
    the cores" (§V-A): here the jobs, taken by id, go in consecutive runs to nodes 0, 1, ...,
    each node's count proportional to its cores (equal counts on equal nodes), rounded by
    largest remainder with the lower node taking an extra job. Costs and tiles are ignored.
    """

    name: str = "even"
    summary: str = "equal counts of jobs per node (per core on unequal nodes), in id order"

    def assign(self, jobs, owner, cluster, params, measured) -> np.ndarray:
        """Consecutive runs of ``jobs`` by id onto the nodes of ``cluster`` (``owner``, ``params`` and
        ``measured`` unused)."""
        ids = jobs["job"]
        job_node = np.empty(len(ids), dtype=np.int64)
        job_node[np.argsort(ids)] = np.repeat(np.arange(cluster.nodes), node_quotas(len(ids), cluster.cores))
        return job_node


@dataclass(frozen=True)
class Profiled(_Policy):
    """Largest predicted cost first, each onto the least loaded node (§V-A, then LPT).

    Costs are those :func:`~shoal.placement.jobs.job_costs` gives: predicted from the last
    window's ``measured`` rows by :class:`~shoal.placement.jobs.CostProfile` (seconds per item
    of each tile pair, the window's mean rate for pairs it did not see), or the table's ``cost``
    without them. Jobs go in decreasing cost, equal costs by increasing job id, each to the
    node with the least load so far (per core, if the nodes' cores differ), equal loads to the
    lowest node id. Tiles are ignored.
    """

    name: str = "profiled"
    summary: str = "costs predicted from the last window per tile pair, largest first onto the least loaded node"

    def assign(self, jobs, owner, cluster, params, measured) -> np.ndarray:
        """Longest processing time first: ``jobs`` by the costs ``measured`` predicts (or their own)
        onto the nodes of ``cluster`` (``owner`` and ``params`` unused)."""
        costs = job_costs(jobs, measured)
        load = np.zeros(cluster.nodes)
        job_node = np.empty(len(costs), dtype=np.int64)
        for i in np.lexsort((jobs["job"], -costs)):
            node = _least_loaded(load, cluster)
            job_node[i] = node
            load[node] += costs[i]
        return job_node


@dataclass
class LocalityParams:
    """``threshold``: a group whose cost exceeds ``threshold`` times the average load per node
    is cut into tasks of about that cost (``inf``: groups are never cut)."""

    threshold: float = 0.5

    def validate(self) -> None:
        """Refuse a ``threshold`` that is not a positive number (``inf`` allowed), in one line."""
        if not self.threshold > 0:
            raise ShoalError(f"locality.threshold must be > 0 (a multiple of the average load per node), "
                             f"got {self.threshold}")


def cut_limit(threshold: float, total: float, nodes: int) -> float:
    """The cost above which :func:`collision_tasks` cuts a group.

    Parameters
    ----------
    threshold : float
        ``locality.threshold``: a multiple of the average load per node (``inf``: never cut).
    total : float
        The jobs' summed cost.
    nodes : int
        Nodes the load is shared by.

    Returns
    -------
    float
        ``threshold * total / nodes``; ``inf`` for an infinite threshold, even with no load.
    """
    return math.inf if math.isinf(threshold) else threshold * float(total) / nodes


def collision_tasks(jobs: dict[str, np.ndarray], costs: np.ndarray, limit: float) -> list[np.ndarray]:
    """The contact-mechanics paper's collision tasks (§V-B, Fig. 4): jobs grouped, big groups cut.

    A group holds the jobs of one ``group`` id, or, for ``group = -1``, of one unordered tile
    pair (the paper groups the potential collision pairs by the pair of partitions they
    belong to). A group whose cost ``C`` exceeds ``limit`` is cut into ``k = min(m,
    ceil(C / limit))`` tasks of consecutive jobs by id (``m`` jobs): a job goes to task
    ``floor(k * mid / C)``, ``mid`` the middle of its stretch of the group's cumulative cost,
    so tasks of equal-cost jobs differ by one job at most (where the arithmetic is exact: whole
    numbers, say); a task left empty by a job much larger than the others is dropped. A job is
    never cut: one above ``limit`` is a task alone.

    Parameters
    ----------
    jobs : dict of arrays
        A checked :data:`~shoal.placement.jobs.JOBS` table.
    costs : ndarray, shape (jobs,)
        Cost of the job in each row.
    limit : float
        The most cost a group may have and stay one task.

    Returns
    -------
    list of ndarray of int
        Every task's rows of ``jobs``, by increasing job id; tasks in the order of their
        group's lowest job id, then in group order (the list ``L`` of Algorithm 2).
    """
    ids = jobs["job"]
    group = jobs["group"] if "group" in jobs else np.full(len(ids), -1)
    groups: dict[tuple, list[int]] = {}
    for i in np.argsort(ids).tolist():
        key = ("group", int(group[i])) if group[i] >= 0 else ("pair", *pair_key(int(jobs["a"][i]), int(jobs["b"][i])))
        groups.setdefault(key, []).append(i)
    tasks = []
    for members in groups.values():
        rows = np.asarray(members, dtype=np.int64)
        c = costs[rows]
        total = float(c.sum())
        if not total > limit:
            tasks.append(rows)
            continue
        k = len(rows) if limit <= 0 else min(len(rows), int(np.ceil(total / limit)))  # a limit of 0: every job alone
        mid = np.cumsum(c) - c / 2
        piece = np.minimum(np.floor(k * mid / total), k - 1).astype(np.int64)
        cuts = np.flatnonzero(np.diff(piece)) + 1
        tasks.extend(np.split(rows, cuts))
    return tasks


@dataclass(frozen=True)
class Locality(_Policy):
    """The contact-mechanics paper's locality-aware balancer (§V-B, Algorithm 2) on jobs.

    1. The jobs form collision tasks (:func:`collision_tasks`): grouped by tile pair (or
       ``group``), a group above ``threshold`` times the average load per node cut into tasks;
       a task's load is its jobs' summed cost (:func:`~shoal.placement.jobs.job_costs`).
    2. ``avgLoad`` is the total load over the number of nodes. Tasks go in the order of the
       list ``L``; a task's home nodes ``P1, P2`` hold the first and second tile of its job of
       lowest id. It goes to ``P1`` if ``Load[P1] + load < avgLoad``, else to ``P2`` if
       ``Load[P2] + load < avgLoad`` (strictly less, as the paper writes it: a node never fills
       up to the average in this round), else to the pending list. A job of one tile has one
       home.
    3. Pending tasks go largest load first, equal loads in the order of ``L``, each to the node
       with the least load, equal loads to the lowest node id.

    Every job of a task gets the task's node. Where the paper is silent, shoal chooses: the
    order of ``L`` (groups by their lowest job id), how a group is cut and its threshold
    (relative to ``avgLoad``; the paper's is "pre-defined"), the ties, and nodes of unequal
    cores, where ``avgLoad`` becomes each node's share of the total by its cores and "least
    loaded" means least load per core (on equal nodes this is the paper's algorithm exactly).
    """

    name: str = "locality"
    summary: str = "collision tasks on a node of one of their tiles while under the average, the rest greedy"
    params: type = LocalityParams

    def assign(self, jobs, owner, cluster, params, measured) -> np.ndarray:
        """Algorithm 2 on the collision tasks of ``jobs``: costs from ``measured`` (or their own),
        homes from ``owner``, nodes and cores from ``cluster``, groups cut at ``params.threshold``."""
        costs = job_costs(jobs, measured)
        total = float(costs[np.argsort(jobs["job"])].sum())  # in id order, whatever the rows' order
        if _uniform(cluster):
            share = np.full(cluster.nodes, total / cluster.nodes)
        else:
            share = total * cluster.core_array / cluster.total_cores
        tasks = collision_tasks(jobs, costs, cut_limit(params.threshold, total, cluster.nodes))
        loads = [float(costs[rows].sum()) for rows in tasks]
        load = np.zeros(cluster.nodes)
        job_node = np.full(len(costs), -1, dtype=np.int64)
        pending = []
        for t, rows in enumerate(tasks):
            first = rows[0]
            homes = [int(owner[jobs["a"][first]])]
            if jobs["b"][first] >= 0:
                homes.append(int(owner[jobs["b"][first]]))
            for node in homes:
                if load[node] + loads[t] < share[node]:
                    load[node] += loads[t]
                    job_node[rows] = node
                    break
            else:
                pending.append(t)
        for t in sorted(pending, key=lambda t: (-loads[t], t)):
            node = _least_loaded(load, cluster)
            load[node] += loads[t]
            job_node[tasks[t]] = node
        return job_node


for _policy in (Even(), Profiled(), Locality()):
    register_job_policy(_policy)
