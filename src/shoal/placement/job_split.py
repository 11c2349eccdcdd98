"""How a node's cores share its jobs: big jobs cut into item ranges, all taken in priority order.

The contact-mechanics paper keeps a node's cores busy in three ways this module follows.
Algorithm 3: a collision task holding more than ``THRESHOLD`` potential collision pairs is
decomposed into subtasks, each a ``(start index, end index)`` range of the task, pushed on the
node-level queue for any core of the node to take; and the messages are taken in a strict order,
data requests before data replies before work. Algorithm 4: an overloaded core cuts its penalty
work into units of ``n`` primitives at least (``worksize = min(left, n)``) and pushes them on the
same queue. §VI-B: a node-level phase barrier, so that no core starts other work while the
pieces are still being pushed.

Here a job of ``size`` items above ``threshold`` is cut into one range per core of its node, as
equal as whole items allow and none smaller than ``min_items`` (:func:`split_job`), and a node's
work list (:func:`node_work`) holds every range of every job it runs, ordered by priority
(the job's kind: 0 request, 1 reply, 2 work), then job id, then start. The list is whole before
any core takes from it, which is the barrier: a core that finds the queue empty has nothing
left to wait for.
"""

from __future__ import annotations

import operator

import numpy as np

from ..cluster import Cluster
from ..errors import ShoalError
from ..records import Column, Schema
from .jobs import check_jobs

WORK = Schema("work", (
    Column("job", np.int64, "", "global id of the job the range is part of"),
    Column("start", np.int64, "item", "first item of the range"),
    Column("end", np.int64, "item", "one past the range's last item"),
    Column("priority", np.int8, "", "the job's kind: lower first (0 data request, 1 data reply, 2 work)"),
))


def _whole(value, name: str, least: int) -> int:
    """``value`` as an int, refused in one line unless it is a whole number >= ``least``."""
    try:
        value = operator.index(value)
    except TypeError:
        raise ShoalError(f"{name} must be a whole number, got {value!r}") from None
    if value < least:
        raise ShoalError(f"{name} must be >= {least}, got {value}")
    return value


def split_count(size: int, threshold: int, cores: int, min_items: int = 1) -> int:
    """How many ranges a job of ``size`` items becomes on a node of ``cores`` cores.

    One if ``size <= threshold`` (Algorithm 3 splits a task only above its threshold); else one
    per core, but fewer if that would leave a range below ``min_items`` items (Algorithm 4's
    smallest work unit): ``max(1, min(cores, size // min_items))``.

    Raises
    ------
    ShoalError
        If ``size`` or ``cores`` is below 1, ``threshold`` below 0 or ``min_items`` below 1, or
        any is not a whole number.
    """
    size = _whole(size, "job size", 1)
    threshold = _whole(threshold, "split threshold", 0)
    cores = _whole(cores, "cores of the node", 1)
    min_items = _whole(min_items, "min_items", 1)
    if size <= threshold:
        return 1
    return max(1, min(cores, size // min_items))


def split_job(size: int, threshold: int, cores: int, min_items: int = 1) -> list[tuple[int, int]]:
    """The ``(start, end)`` item ranges a job of ``size`` items is cut into on its node.

    :func:`split_count` ranges, in order, covering ``[0, size)`` exactly without overlap; the
    first ``size % count`` hold one item more than the others.

    Parameters
    ----------
    size : int
        Items of the job, >= 1.
    threshold : int
        The most items a job may hold and stay whole, >= 0.
    cores : int
        Cores of the job's node, >= 1.
    min_items : int, default 1
        The fewest items a range may hold, >= 1 (a job too small for two such ranges stays whole).

    Raises
    ------
    ShoalError
        As :func:`split_count`.
    """
    count = split_count(size, threshold, cores, min_items)
    base, extra = divmod(size, count)
    starts = [i * base + min(i, extra) for i in range(count + 1)]
    return list(zip(starts[:-1], starts[1:], strict=True))


def node_work(jobs: dict[str, np.ndarray], job_node: np.ndarray, cluster: Cluster, threshold: int,
              min_items: int = 1) -> list[dict[str, np.ndarray]]:
    """Every node's work list: the ranges of the jobs it runs, in the order its cores take them.

    Parameters
    ----------
    jobs : dict of arrays
        A :data:`~shoal.placement.jobs.JOBS` table.
    job_node : ndarray of int, shape (jobs,)
        The node of the job in each row (what a job placement policy returns).
    cluster : Cluster
        The nodes; a job is cut into as many ranges as its node has cores (:func:`split_job`).
    threshold : int
        The most items a job may hold and stay whole.
    min_items : int, default 1
        The fewest items a range may hold.

    Returns
    -------
    list of dict of arrays
        One :data:`WORK` table per node, rows ordered by priority, then job id, then start.

    Raises
    ------
    ShoalError
        For bad jobs, a ``job_node`` not one node in range per job, or bad split parameters.
    """
    jobs = check_jobs(jobs)
    job_node = np.asarray(job_node)
    if job_node.shape != jobs["job"].shape or (job_node.size and job_node.dtype.kind not in "iu"):
        raise ShoalError(f"job_node must hold one node id per job ({len(jobs['job'])}), got shape {job_node.shape} "
                         f"of {job_node.dtype}")
    if job_node.size and (job_node.min() < 0 or job_node.max() >= cluster.nodes):
        raise ShoalError(f"job_node names nodes outside 0..{cluster.nodes - 1}")
    _whole(threshold, "split threshold", 0)
    _whole(min_items, "min_items", 1)
    out = []
    for node, cores in enumerate(cluster.cores):
        rows = np.flatnonzero(job_node == node)
        rows = rows[np.lexsort((jobs["job"][rows], jobs["kind"][rows]))]
        items = []
        for r in rows.tolist():
            job, kind = int(jobs["job"][r]), int(jobs["kind"][r])
            items += [(job, start, end, kind) for start, end in
                      split_job(int(jobs["size"][r]), threshold, cores, min_items)]
        out.append(WORK.from_rows(items))
    return out
