"""Traces made from traces: the parts of a run resumed on other nodes joined, a fine trace
aggregated to a coarser nested tiling or mesh partition, costs scaled to faster cores."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from ..cluster import Cluster
from ..decomposition import Decomposition, describe, same_decomposition
from ..errors import ShoalError
from ..records import BALANCE, JOB_RUNS, MESSAGES, TASKS

if TYPE_CHECKING:

    from .model import Trace


def joined(parts: list[Trace]) -> Trace:
    """One trace of a run recorded in ``parts``, in step order (a run and its resumed parts).

    The nodes are the most any part had; a node that a part lacks holds 0 worker threads over
    that part's steps (it is absent there: :meth:`Trace.present`), and ``/cluster/cores``
    holds each node's threads in the first part it was in. Task, message, step, placement,
    worker and balancing rows follow each other unchanged but for their times: each part's
    are counted from its own start, and shifted by the last step end of the parts before (a
    part with no steps shifts nothing). A part's first placement or worker row equal to the
    row in force before it is dropped: nothing changed there. The CPU time and payloads of
    message threads are summed per node; the setup (app, phases, tiling, configuration,
    tiles' sizes) is the first part's, the machine model the last one's that has one.

    Parameters
    ----------
    parts : list of Trace
        The run's parts in step order, each as its own trace held it (a part may have no
        steps yet: a resumed run's start, whose first ``/workers`` row gives its nodes).

    Returns
    -------
    Trace
        The run as one trace.

    Raises
    ------
    ShoalError
        If the parts differ in tiling or phases, or a part's steps do not all come after the
        steps of the parts before it.
    """
    first = parts[0]
    nodes = max(p.cluster.nodes for p in parts)
    for p in parts[1:]:
        if p.phases != first.phases or not same_decomposition(p.tiling, first.tiling):
            raise ShoalError("the parts of a run differ in their phases or tiling: they are not one run")

    def widen(rows: np.ndarray) -> np.ndarray:
        rows = np.asarray(rows, np.int64)
        rows = rows.reshape(len(rows), rows.size // len(rows) if len(rows) else nodes)  # a part may hold no row
        return np.pad(rows, ((0, 0), (0, nodes - rows.shape[1])))

    tasks, messages, step_end, jobs = [], [], [], []
    history = {"placement": ([], []), "workers": ([], [])}  # (from steps, rows) of each part
    in_force = {"placement": None, "workers": None}  # the row in force at the end of the parts so far
    clock, last_step = 0.0, -1
    for p in parts:
        if len(p.steps) and p.steps[0] <= last_step:
            raise ShoalError(f"a part of the run starts at step {int(p.steps[0])}, not after step {last_step} "
                             "of the part before")
        shift = {c: p.tasks[c] + clock for c in ("start", "end", "ready") if c in p.tasks} if clock else {}
        tasks.append({**p.tasks, **shift})
        messages.append(p.messages)
        if p.jobs is not None:
            jobs.append({**p.jobs, **({c: p.jobs[c] + clock for c in ("start", "end")} if clock else {})})
        step_end.append(np.asarray(p.step_end, np.float64) + clock if clock else np.asarray(p.step_end, np.float64))
        for name, p_steps, p_rows in (("placement", p.placement_steps, np.asarray(p.placement_owners, np.int64)),
                                      ("workers", p.worker_steps, widen(p.worker_cores))):
            same = len(p_steps) and in_force[name] is not None and np.array_equal(p_rows[0], in_force[name])
            history[name][0].append(p_steps[1:] if same else p_steps)
            history[name][1].append(p_rows[1:] if same else p_rows)
            if len(p_steps):
                in_force[name] = p_rows[-1]
        if len(p.steps):
            clock, last_step = float(step_end[-1][-1]), int(p.steps[-1])
    (owner_steps, owners), (worker_steps, workers) = history["placement"], history["workers"]
    cores = [next(p.cluster.cores[n] for p in parts if n < p.cluster.nodes) for n in range(nodes)]
    balances = [p.balance for p in parts if p.balance is not None]
    comms = [p.communication for p in parts if p.communication is not None]
    return replace(
        first, tasks=TASKS.concat(tasks), messages=MESSAGES.concat(messages), step_end=np.concatenate(step_end),
        cluster=Cluster(tuple(cores), first.cluster.network),
        placement_steps=np.concatenate(owner_steps), placement_owners=np.concatenate(owners),
        worker_steps=np.concatenate(worker_steps), worker_cores=np.concatenate(workers),
        balance=BALANCE.concat(balances) if balances else None,
        communication={k: sum(np.pad(np.asarray(c[k]), (0, nodes - len(c[k]))) for c in comms)
                       for k in ("cpu_s", "messages")} if comms else None,
        machine=next((p.machine for p in reversed(parts) if p.machine is not None), None),
        work_units=next((p.work_units for p in parts if p.work_units is not None), None),
        jobs=JOB_RUNS.concat(jobs) if jobs else None)

# ----- transformations ---------------------------------------------------------------------
def aggregate(trace: Trace, coarse: Decomposition) -> Trace:
    """The trace of a coarser decomposition nesting this one (sampi §II-C): a tiling whose cuts
    are some of the fine one's, or a mesh partition whose parts are unions of the fine parts
    (:meth:`~shoal.mesh.MeshPartition.coarsen`).

    A coarse tile's cost per (step, phase) is the sum of its fine tiles' costs (its work too);
    messages between fine tiles of one coarse tile are dropped, the others summed per
    (step, phase, coarse source, coarse destination). A phase of a loop counts once per
    iteration (per slot: :meth:`Trace.slots`). Timing columns are kept from the fine
    trace only where they still mean something (none: ``start``/``end`` become 0, ``ready`` goes).

    Raises
    ------
    ShoalError
        If ``coarse`` is of another kind than the trace's decomposition, or does not nest it.
    """
    if coarse.kind != trace.tiling.kind:
        raise ShoalError(f"a trace of {describe(trace.tiling)} aggregates to a coarser one, not to {describe(coarse)}")
    fine_to_coarse = trace.tiling.fine_to_coarse(coarse)
    t = trace.tasks
    slot_phase, slot_iteration = trace.slots()
    steps, P, C = trace.steps, len(slot_phase), coarse.ntiles
    s_idx = np.searchsorted(steps, t["step"])
    key = (s_idx * P + trace.slot_of(t)) * C + fine_to_coarse[t["tile"]]
    n = len(steps) * P * C
    cost = np.bincount(key, weights=t["cost"], minlength=n)
    work = np.bincount(key, weights=t["work"], minlength=n).astype(np.int64)
    extra = {c.name: np.bincount(key, weights=t[c.name], minlength=n).astype(c.dtype)
             for c in TASKS.columns if c.optional and c.name in t and c.name not in ("ready", "iteration")}
    grid_s, grid_p, grid_t = np.unravel_index(np.arange(n), (len(steps), P, C))
    ran = np.repeat(trace.slot_present().reshape(-1), C)  # a slot a step did not run has no tasks
    m = trace.messages
    src, dst = fine_to_coarse[m["src"]], fine_to_coarse[m["dst"]]
    cross = src != dst
    ms = np.searchsorted(steps, m["step"][cross])
    mkey = ((ms * P + trace.slot_of(m)[cross]) * C + src[cross]) * C + dst[cross]
    ukey, inverse = np.unique(mkey, return_inverse=True)
    mbytes = np.bincount(inverse, weights=m["bytes"][cross]).astype(np.int64)
    u_s, u_p, u_src, u_dst = np.unravel_index(ukey, (len(steps), P, C, C))
    cluster_owner = np.stack([_coarse_owner(o, fine_to_coarse, C) for o in trace.placement_owners])
    return replace(
        trace,
        tasks={k: v[ran] for k, v in {
            "step": steps[grid_s], "phase": slot_phase[grid_p], "iteration": slot_iteration[grid_p], "tile": grid_t,
            "node": np.zeros(n, np.int32), "worker": np.zeros(n, np.int32), "start": np.zeros(n), "end": np.zeros(n),
            "cost": cost, "work": work, **extra}.items()},
        messages={"step": steps[u_s], "phase": slot_phase[u_p], "iteration": slot_iteration[u_p], "src": u_src,
                  "dst": u_dst, "bytes": mbytes},
        tiling=coarse, placement_owners=cluster_owner, jobs=_coarse_jobs(trace.jobs, fine_to_coarse),
        tile_bytes=np.bincount(fine_to_coarse, weights=trace.tile_bytes, minlength=C).astype(np.int64)
        if trace.tile_bytes is not None else None,
    )

def _coarse_jobs(jobs: dict[str, np.ndarray] | None, fine_to_coarse: np.ndarray) -> dict[str, np.ndarray] | None:
    """Job rows read by coarse tiles: a job's tiles become the coarse tiles holding them (one
    tile, where both are in one)."""
    if jobs is None:
        return None
    a = fine_to_coarse[jobs["a"]]
    b = np.where(jobs["b"] >= 0, fine_to_coarse[np.maximum(jobs["b"], 0)], -1)
    return {**jobs, "a": a, "b": np.where(b == a, -1, b), "node": np.zeros_like(jobs["node"]),
            "worker": np.zeros_like(jobs["worker"]), "start": np.zeros_like(jobs["start"]),
            "end": np.zeros_like(jobs["end"])}


def _coarse_owner(owner: np.ndarray, fine_to_coarse: np.ndarray, ncoarse: int) -> np.ndarray:
    """Owner of each coarse tile: the node owning most of its fine tiles (lowest on ties)."""
    counts = np.zeros((ncoarse, int(owner.max()) + 1), dtype=np.int64)
    np.add.at(counts, (fine_to_coarse, owner), 1)
    return counts.argmax(axis=1)

def scaled(trace: Trace, speed: float) -> Trace:
    """The trace as it would be on cores ``speed`` times as fast (costs divided by ``speed``)."""
    if speed <= 0:
        raise ShoalError(f"core speed factor must be positive, got {speed}")
    faster = {k: trace.tasks[k] / speed for k in ("cost", "kernel") if k in trace.tasks}
    return replace(trace.with_tasks(**faster),
                   communication=None if trace.communication is None else
                   {"cpu_s": trace.communication["cpu_s"] / speed, "messages": trace.communication["messages"]})

def with_iterations(trace: Trace, iterations: int) -> Trace:
    """The trace as if every loop of every step had run ``iterations`` iterations: later
    iterations than that dropped, missing ones repeating the step's last recorded iteration
    (its tasks and messages, costs and work alike: the convergence rate is not modeled, only
    the count). The replay's answer to "and with n iterations?"."""
    if not isinstance(iterations, int) or iterations < 1:
        raise ShoalError(f"iterations must be a positive integer, got {iterations!r}")
    if not trace.has_loops:
        raise ShoalError(f"the trace of {trace.scenario or trace.app or 'this run'} has no loop to run "
                         f"{iterations} iterations of")
    in_loop = np.asarray(trace.loop_phases) >= 0

    def redone(table: dict[str, np.ndarray], schema) -> dict[str, np.ndarray]:
        looped = in_loop[table["phase"].astype(np.int64)]
        kept = ~looped | (table["iteration"] < iterations)
        parts = [schema.select(table, kept)]
        # the last iteration of every step's loops, repeated up to ``iterations``
        rows = np.flatnonzero(looped)
        if len(rows):
            loop = np.asarray(trace.loop_phases)[table["phase"][rows].astype(np.int64)]
            key = table["step"][rows].astype(np.int64) * len(trace.phases) + loop
            last = np.zeros(int(key.max()) + 1, np.int64)
            np.maximum.at(last, key, table["iteration"][rows].astype(np.int64))
            tail = rows[table["iteration"][rows] == last[key]]
            for it in range(int(last[key].min()) + 1, iterations):
                copy = tail[table["iteration"][tail] < it]
                if len(copy):
                    extra = schema.select(table, copy)
                    extra["iteration"] = np.full(len(copy), it, dtype=extra["iteration"].dtype)
                    parts.append(extra)
        out = schema.concat(parts)
        return schema.select(out, np.argsort(out["step"], kind="stable"))

    return replace(trace, tasks=redone(trace.tasks, TASKS), messages=redone(trace.messages, MESSAGES))
