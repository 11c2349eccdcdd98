"""The jobs of a replayed run: every job the trace recorded, placed again by a job policy on the
modeled nodes, cut into ranges for their cores, priced from what the recorded ranges cost.

A job's inputs travel from the tasks that packed them (its tiles' tasks before the job phase)
to its node, and each range's results back to its tiles' tasks of the job phase, as messages of
the recorded sizes; the engine (:mod:`.engine`) runs the ranges on any core of their node.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..cluster import Cluster
from ..placement.job_policies import job_policy
from ..placement.job_split import node_work
from ..placement.jobs import job_table
from ..trace import Trace


@dataclass
class RecordedJobs:
    """The trace's jobs, one row per job (its ranges summed), with the step index and slot of
    the phase that ran them."""

    s_idx: np.ndarray
    slot: np.ndarray
    table: dict[str, np.ndarray]  # job, kind, a, b, size, cost (measured), predicted, in_a, in_b, out_a, out_b

    @classmethod
    def of(cls, trace: Trace, speed: float = 1.0) -> RecordedJobs | None:
        """The jobs of ``trace`` (``None`` if it ran none); costs divided by ``speed``."""
        j = trace.jobs
        if j is None or not len(j["job"]):
            return None
        s_idx = np.searchsorted(trace.steps, j["step"])
        slot = trace.slot_of(j)
        key = np.stack([s_idx, slot, j["job"]], axis=1)
        keys, first, inverse = np.unique(key, axis=0, return_index=True, return_inverse=True)
        inverse = inverse.reshape(-1)
        n = len(keys)

        def summed(column):
            return np.bincount(inverse, weights=j[column], minlength=n)

        size = np.zeros(n, np.int64)
        np.maximum.at(size, inverse, j["stop"].astype(np.int64))  # the last range ends at the job's size
        table = {"job": keys[:, 2], "kind": j["kind"][first], "a": j["a"][first], "b": j["b"][first], "size": size,
                 "cost": summed("cost") / speed, "predicted": summed("predicted"),
                 "in_a": j["in_a"][first], "in_b": j["in_b"][first],
                 "out_a": summed("out_a"), "out_b": summed("out_b")}
        return cls(keys[:, 0], keys[:, 1], table)

    def window_before(self, s: int, slot: int) -> dict[str, np.ndarray] | None:
        """The jobs of the job phase run last before slot ``slot`` of step index ``s``, as the
        measured rows a ``profiled`` job policy predicts costs from (``None``: the first)."""
        earlier = (self.s_idx < s) | ((self.s_idx == s) & (self.slot < slot))
        if not earlier.any():
            return None
        key = self.s_idx * (int(self.slot.max()) + 1) + self.slot
        rows = np.flatnonzero(earlier & (key == key[earlier].max()))
        t = self.table
        return {"a": t["a"][rows], "b": t["b"][rows], "seconds": t["cost"][rows], "size": t["size"][rows]}

    def between(self, s0: int, s1: int) -> np.ndarray:
        """The rows of the jobs run by steps ``[s0, s1)``."""
        return np.flatnonzero((self.s_idx >= s0) & (self.s_idx < s1))


@dataclass
class SegmentJobs:
    """The ranges of a segment's jobs and the messages they move, ready for the engine."""

    unit_cost: np.ndarray
    unit_node: np.ndarray
    unit_slot: np.ndarray  # the slot of each range's job phase in the segment (s * P + p)
    producer: np.ndarray  # per message: the task that sends it
    consumer: np.ndarray  # and the task that reads it
    nbytes: np.ndarray
    rows: list[tuple]  # per range: (row of RecordedJobs, first, stop, node)


def segment_jobs(jobs: RecordedJobs | None, s0: int, s1: int, P: int, T: int, owner: np.ndarray,
                 cluster: Cluster, present: np.ndarray, policy: str, split: int,
                 node_barrier: np.ndarray | None = None) -> SegmentJobs:
    """Place and cut the jobs of steps ``[s0, s1)`` (``P`` slots of ``T`` tiles a step) with the
    job policy ``policy`` and the split threshold ``split`` (items; 0: never), on the nodes
    holding threads: ``cluster`` has their cores, ``owner`` numbers the tiles' nodes among them
    and ``present`` gives each one's node of the modeled cluster. Where ``node_barrier`` (per
    slot) holds, every tile of a range's node waits for it, as for a result of no bytes."""
    empty = np.zeros(0, np.int64)
    out = SegmentJobs(np.zeros(0), empty, empty, empty, empty, np.zeros(0), [])
    if jobs is None:
        return out
    rows = jobs.between(s0, s1)
    if not len(rows):
        return out
    ntask = (s1 - s0) * P * T
    cost, node_of, slots, producer, consumer, nbytes, units = [], [], [], [], [], [], []
    t = jobs.table
    for s, slot in sorted({(int(a), int(b)) for a, b in zip(jobs.s_idx[rows], jobs.slot[rows], strict=True)}):
        these = rows[(jobs.s_idx[rows] == s) & (jobs.slot[rows] == slot)]
        these = these[np.argsort(t["job"][these])]
        table = job_table(t["a"][these], t["b"][these], cost=np.maximum(t["predicted"][these], 0.0),
                          size=t["size"][these], kind=t["kind"][these].tolist())
        job_node = job_policy(policy).place(table, owner, cluster, measured=jobs.window_before(s, slot))
        before = ((s - s0) * P + slot - 1) * T  # the tiles' tasks that packed the jobs' inputs
        at = ((s - s0) * P + slot) * T  # and those that read the results
        for node, work in enumerate(node_work(table, job_node, cluster, split or 2**62)):  # 0: never
            for job, first, stop in zip(work["job"].tolist(), work["start"].tolist(), work["end"].tolist(),
                                        strict=True):
                row = these[job]
                share = (stop - first) / t["size"][row]
                u = ntask + len(units)
                units.append((int(row), first, stop, int(present[node])))
                cost.append(t["cost"][row] * share)
                node_of.append(int(present[node]))
                slots.append((s - s0) * P + slot)
                if node_barrier is not None and node_barrier[slot]:
                    for tile in np.flatnonzero(owner == node):
                        if tile != t["a"][row] and tile != t["b"][row]:
                            producer.append(u)
                            consumer.append(at + int(tile))
                            nbytes.append(0.0)
                for tile, size_in, size_out in ((t["a"][row], t["in_a"][row], t["out_a"][row]),
                                                (t["b"][row], t["in_b"][row], t["out_b"][row])):
                    if tile < 0:
                        continue
                    producer += [before + tile, u]
                    consumer += [u, at + tile]
                    nbytes += [size_in, size_out * share]
    return SegmentJobs(np.array(cost, float), np.array(node_of, np.int64), np.array(slots, np.int64),
                       np.array(producer, np.int64),
                       np.array(consumer, np.int64), np.array(nbytes, float), units)


def predicted_rows(jobs: RecordedJobs, seg: SegmentJobs, steps: np.ndarray, slot_phase: np.ndarray,
                   slot_iteration: np.ndarray, start: np.ndarray, end: np.ndarray, core: np.ndarray,
                   owner: np.ndarray) -> list[tuple]:
    """The :data:`~shoal.records.JOB_RUNS` rows of a segment's ranges as the engine ran them
    (``start``, ``end``, ``core``: per range)."""
    t, out = jobs.table, []
    for k, (row, first, stop, node) in enumerate(seg.rows):
        share = (stop - first) / t["size"][row]
        a, b = int(t["a"][row]), int(t["b"][row])
        fetched = (t["in_a"][row] if owner[a] != node else 0) + (t["in_b"][row] if b >= 0 and owner[b] != node else 0)
        slot = int(jobs.slot[row])
        out.append((int(steps[jobs.s_idx[row]]), int(slot_iteration[slot]), int(slot_phase[slot]), int(t["job"][row]),
                    int(t["kind"][row]), a, b, first, stop, node, int(core[k]), float(start[k]), float(end[k]),
                    float(t["cost"][row] * share), 0, float(t["predicted"][row] * share), int(fetched),
                    int(t["in_a"][row]), int(t["in_b"][row]), int(t["out_a"][row] * share),
                    int(t["out_b"][row] * share)))
    return out

