"""Jobs between tiles, as every executor runs them.

A phase that emits jobs (``Phase(emits_jobs=True)``) returns, per tile, the jobs it starts:
the other tile each reads, its size in items and its predicted cost. Once every tile has
emitted, :func:`plan_ranges` places the jobs on nodes (the run's job policy) and cuts big ones
into item ranges any core of their node takes; the next phase (``Phase(jobs="method")``) then
runs each range (:func:`run_range`) and hands each tile the results of every range that read
it, in (job, first item) order. The executors differ only in where a range runs and how its
results travel; what is computed, and the rows the trace keeps (:func:`job_row`), are these.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ShoalError
from .app import payload_bytes

NEVER_SPLIT = 2**62  # the split threshold of an app whose job_split is 0: no job is that big
NODE_DONE = object()  # what a range hands the other tiles of its node under a node-level barrier


def plan_ranges(app, policy: str, owner: np.ndarray, cluster, node_barrier: bool, listed: list
                ) -> tuple[list[tuple[dict, int, int, int]], list[int]]:
    """The ranges to run for one job phase, and per tile how many results it waits for.

    Parameters
    ----------
    app : App
        The app (its ``job_split``: items above which a job is cut).
    policy : str
        The job policy (:mod:`shoal.placement.job_policies`).
    owner : ndarray
        ``owner[tile] -> node``.
    cluster : Cluster
        The nodes and their cores.
    node_barrier : bool
        Whether every tile of a node waits for all of the node's ranges.
    listed : list
        Per tile, in tile order, ``(jobs, measured)``: the jobs it emitted, ``(other tile,
        items, predicted cost[, kind])`` each, and what the ranges it was the first tile of
        measured in the last window, ``(a, b, seconds, items)`` each.

    Returns
    -------
    units : list of (row, first, stop, node)
        Every range: its job's row, its items ``first:stop`` and its node.
    counts : list of int
        Per tile, the ranges whose results it waits for.
    """
    from ..placement.job_policies import job_policy
    from ..placement.job_split import node_work
    from ..placement.jobs import job_table

    a, b, size, cost, kind, window = [], [], [], [], [], []
    for tile, (jobs, measured) in enumerate(listed):
        window += measured  # the last window's ranges this tile was the first tile of
        for entry in jobs:
            a.append(tile)
            b.append(int(entry[0]))
            size.append(int(entry[1]))
            cost.append(float(entry[2]))
            kind.append(entry[3] if len(entry) > 3 else "work")
    jobs = job_table(np.array(a, np.int64), np.array(b, np.int64), cost=np.array(cost), size=np.array(size),
                     kind=kind)
    # What a profiled policy predicts from: the same rows, in tile order, on every process.
    measured = dict(zip(("a", "b", "seconds", "size"), (np.array(c) for c in zip(*window, strict=True)),
                        strict=True)) if window else None
    job_node = job_policy(policy).place(jobs, owner, cluster, measured=measured)
    tiles_of_node = [np.flatnonzero(np.asarray(owner) == n).tolist() for n in range(cluster.nodes)]
    units, counts = [], [0] * len(owner)
    split = app.job_split or NEVER_SPLIT
    for node, work in enumerate(node_work(jobs, job_node, cluster, split)):
        for job, first, stop in zip(work["job"].tolist(), work["start"].tolist(), work["end"].tolist(), strict=True):
            row = {k: v[job].item() for k, v in jobs.items()}  # job ids are row numbers
            units.append((row, first, stop, node))
            counts[row["a"]] += 1
            if row["b"] >= 0:
                counts[row["b"]] += 1
            if node_barrier:  # and every other tile of the node waits for it too
                for t in tiles_of_node[node]:
                    counts[t] += t != row["a"] and t != row["b"]
    return units, counts


def range_tiles(row: dict) -> list[int]:
    """The tiles a job reads (and hands a result to): its first, and its second if any."""
    return [row["a"]] + ([row["b"]] if row["b"] >= 0 else [])


@dataclass(frozen=True)
class RangeRun:
    """What one range did: its results per tile, the work it reports, when it ran (seconds on
    the clock :func:`run_range` was given), its CPU seconds, the bytes of its inputs and results (two each,
    0 where it read one tile), the input bytes from tiles of other nodes, and what its first
    tile keeps for the next window, ``(a, b, seconds, items)``."""

    results: dict[int, Any]
    work: int
    start: float
    end: float
    cpu: float
    sizes_in: list[int]
    sizes_out: list[int]
    fetched: int
    measured: tuple


def run_range(runner, row: dict, first: int, stop: int, inputs: dict, ctx, node: int, owner_of,
              clock=time.perf_counter) -> RangeRun:
    """Run items ``first:stop`` of job ``row`` with the app's job method ``runner`` on the tiles'
    ``inputs``, on node ``node`` (``owner_of[tile]``: each tile's node); ``clock`` (seconds) is
    the executor's, so the range's times share its rows' origin.

    Raises
    ------
    ShoalError
        If the method returns results for other tiles than the job reads.
    """
    tiles = range_tiles(row)
    t0, c0 = clock(), time.thread_time()
    work, results = runner(row, inputs, first, stop, ctx)
    c1, t1 = time.thread_time(), clock()
    if sorted(results) != tiles:
        raise ShoalError(f"job {row['job']} reads tiles {tiles} and returned results for {sorted(results)}")
    sizes_in = [payload_bytes(inputs[t]) for t in tiles] + [0] * (2 - len(tiles))
    sizes_out = [payload_bytes(results[t]) for t in tiles] + [0] * (2 - len(tiles))
    fetched = sum(size for t, size in zip(tiles, sizes_in, strict=False) if owner_of[t] != node)
    return RangeRun(results, int(work), t0, t1, c1 - c0, sizes_in, sizes_out, fetched,
                    (row["a"], row["b"], c1 - c0, stop - first))


def job_row(step: int, iteration: int, phase: int, row: dict, first: int, stop: int, node: int, worker: int,
            start: float, end: float, ran: RangeRun) -> tuple:
    """A range's row of :data:`~shoal.records.JOB_RUNS` (``start``, ``end``: on the run's clock)."""
    share = (stop - first) / row["size"] if row["size"] else 1.0
    return (step, iteration, phase, row["job"], row["kind"], row["a"], row["b"], first, stop, node, worker,
            start, end, ran.cpu, ran.work, row["cost"] * share, ran.fetched, *ran.sizes_in, *ran.sizes_out)
