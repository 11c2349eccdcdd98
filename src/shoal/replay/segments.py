"""The replay's event loop: the steps in segments between balancing steps and changes of worker
threads, each simulated by the engine (:mod:`.engine`), then the balancer's plan and the tiles'
migration over the modeled network before the next segment.

A node with 0 worker threads over a segment is absent from it (a run resumed on another number
of nodes, replayed on the recorded cluster): no tile is placed there. Where nodes join or
leave, the tiles are placed anew on those present, as the resumed run placed them, and the
balancer plans on the nodes present only."""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..cluster import Cluster
from ..placement import Balancer
from ..placement.trigger import ADAPTIVE
from ..tiling import Tiling
from ..trace import Trace, packed_by
from .engine import simulate
from .invasive import InvasiveModel
from .jobs import RecordedJobs, SegmentJobs, predicted_rows, segment_jobs


@dataclass
class Setup:
    """What the event loop runs: the modeled cluster and its worker threads over steps, the
    first owners, the barrier and lag after each slot of each step (steps x slots), every task's
    duration and share under a serialising lock (steps x slots x tiles), the lock of each node, the balancer, the
    steps where segments must end and the placement on a set of nodes (``place(cores)``: by
    node of ``cluster``, on those whose ``cores`` are not 0)."""

    cluster: Cluster
    schedule: tuple[np.ndarray, np.ndarray]
    owner: np.ndarray
    barrier: np.ndarray
    lag: np.ndarray
    cost: np.ndarray
    duration: np.ndarray
    gil: np.ndarray
    process_of: np.ndarray
    balancer: Balancer | None
    fixed: set[int]
    cuts: list[int]
    invasive: InvasiveModel | None
    tile_bytes: np.ndarray
    message_cpu_s: float
    gil_kind: str
    memcpy_bandwidth: float
    wake_s: float
    restart_s: float
    place: Callable[[np.ndarray], np.ndarray]
    jobs: RecordedJobs | None = None
    job_policy: str = "locality"
    job_split: int = 0
    slot_phase: np.ndarray | None = None
    slot_iteration: np.ndarray | None = None
    node_barrier: np.ndarray | None = None  # per slot: a job phase whose tiles wait for their node's ranges


@dataclass
class Outcome:
    """What the event loop predicts: every task's start, end, core and node in step, phase,
    tile order, the owner tables from the steps they took effect, the worker threads over
    steps, the events simulated and this machine's seconds spent simulating them."""

    start: np.ndarray
    end: np.ndarray
    core: np.ndarray
    node: np.ndarray
    owners: list[np.ndarray] = field(default_factory=list)
    owner_steps: list[int] = field(default_factory=list)
    schedule: tuple[np.ndarray, np.ndarray] | None = None
    events: int = 0
    wall_s: float = 0.0
    jobs: list[tuple] = field(default_factory=list)  # JOB_RUNS rows of the jobs' ranges


def run_segments(trace: Trace, setup: Setup) -> Outcome:
    """Simulate every step of ``trace`` under ``setup``, segment by segment.

    Segments end at balancing steps and where a node's worker threads change: all tiles stop
    there and start again together. A fixed period's balancing steps are known ahead; the
    adaptive trigger's are found segment by segment, from the costs of the steps ahead under the
    current owners.
    """
    cluster, balancer, invasive, cost = setup.cluster, setup.balancer, setup.invasive, setup.cost
    tiling, steps = trace.tiling, trace.steps
    S, P, T = cost.shape
    net = cluster.network
    tx_free, rx_free, gil_free = np.zeros(cluster.nodes), np.zeros(cluster.nodes), np.zeros(cluster.nodes)
    owner, schedule = setup.owner, setup.schedule
    out = Outcome(np.zeros(S * P * T), np.zeros(S * P * T), np.zeros(S * P * T, np.int64),
                  np.zeros(S * P * T, np.int64), [owner.copy()], [int(steps[0])])
    messages = _MessagesByStep(trace)
    t0, s0, last = 0.0, 0, 0
    background = np.zeros(cluster.nodes)  # message CPU time per node since the last balancing step
    log_nodes = math.ceil(math.log2(cluster.nodes)) if cluster.nodes > 1 else 0
    present = None  # the nodes holding threads in the segment (the first owners are for the first's)
    while s0 < S:
        cores = schedule[1][np.searchsorted(schedule[0], steps[s0], side="right") - 1]
        if invasive is not None:
            cores, t0 = invasive.boundary(s0, t0, owner, cost)
        here = np.flatnonzero(cores > 0)
        if present is not None and not np.array_equal(here, present):  # nodes joined or left the run
            owner = setup.place(cores)
            out.owners.append(owner.copy())
            out.owner_steps.append(int(steps[s0]))
        present = here
        at, local = _on_present(cluster, cores, owner)
        s1 = next(c for c in setup.cuts if c > s0)
        if balancer is not None and balancer.trigger is not None:
            s1 = _adaptive_cut(balancer, cost, steps, s0, s1, local, at)
        jobs = segment_jobs(setup.jobs, s0, s1, P, T, local, at, present, setup.job_policy, setup.job_split,
                            setup.node_barrier)
        csr, mtask, mbytes, fsrc, fdst, fbytes = _segment_messages(messages, s0, s1, P, T, jobs)
        seg_duration, seg_gil = setup.duration[s0:s1], setup.gil[s0:s1]
        if setup.message_cpu_s:
            comm = _communication_cpu(messages, s0, s1, P, T, owner, setup.message_cpu_s)
            seg_duration = seg_duration + comm
            background += np.bincount(owner, weights=comm.sum(axis=(0, 1)), minlength=cluster.nodes)
            if setup.gil_kind != "none":  # moving messages holds the interpreter lock
                seg_gil = seg_gil + comm
        tic = time.perf_counter()
        start, end, core, n_events = simulate(np.ascontiguousarray(seg_duration), owner, cores,
                                              setup.barrier[s0:s1].reshape(-1), setup.lag[s0:s1].reshape(-1), csr,
                                              mtask, mbytes, fsrc, fdst, fbytes, net.latency_s,
                                              net.bandwidth_Bps, net.overhead_s, setup.memcpy_bandwidth, t0, tx_free,
                                              rx_free, np.ascontiguousarray(seg_gil), setup.process_of, gil_free,
                                              setup.wake_s, jobs.unit_cost, np.zeros_like(jobs.unit_cost),
                                              jobs.unit_node, jobs.unit_slot)
        ntask = (s1 - s0) * P * T
        if jobs.rows:
            out.jobs += predicted_rows(setup.jobs, jobs, steps, setup.slot_phase, setup.slot_iteration,
                                       start[ntask:], end[ntask:], core[ntask:], owner)
        start, end, core = start[:ntask], end[:ntask], core[:ntask]
        out.wall_s += time.perf_counter() - tic
        out.events += n_events
        sl = slice(s0 * P * T, s1 * P * T)
        out.start[sl], out.end[sl], out.core[sl] = start, end, core
        out.node[sl] = np.tile(owner, (s1 - s0) * P)
        if invasive is not None:
            invasive.finished(s0, t0, end, out.node[sl])
        t0 = float(end.max())
        if s1 >= S:
            break
        # Every tile stops; a barrier across the nodes, then the executors restart.
        t0 += 2.0 * log_nodes * (net.latency_s + net.overhead_s) + setup.restart_s
        if balancer is not None and (s1 in setup.fixed or balancer.due):
            future = cost[s1:min(S, s1 + balancer.horizon(int(steps[s1])))].sum(axis=1).mean(axis=0)
            ahead = None if balancer.proxy is not None else _smoothed(future, tiling)
            new = present[balancer.plan(int(steps[s1]), local, at, cost[last:s1].mean(axis=0),  # on the nodes present
                                        background[present] / (s1 - last), setup.tile_bytes, future_loads=future,
                                        proxy_loads=ahead)]
            background = np.zeros(cluster.nodes)
            t0 = _migrate(owner, new, setup.tile_bytes, cluster, t0 + balancer.last_plan_s, tx_free, rx_free)
            # What it cost per core: the wait for the last tile, the barrier, restarting, planning, moving.
            balancer.paid(t0 - _last_ends(end, out.node[sl], core, int(cores.max())).mean())
            owner, last = new, s1
            out.owners.append(owner.copy())
            out.owner_steps.append(int(steps[s1]))
        s0 = s1
    # each rank's cores over the steps, as a resized run records them
    out.schedule = invasive.schedule(steps) if invasive is not None else schedule
    return out


def segment_cuts(period: int | str, S: int, steps: np.ndarray, schedule: tuple[np.ndarray, np.ndarray],
                 invasive: bool) -> tuple[set[int], list[int]]:
    """A fixed period's balancing steps, and where segments must end: there, where a node's
    worker threads change, at the end, and at every step under a modeled resource manager."""
    fixed = set(range(period, S, period)) if period != ADAPTIVE and period else set()
    cuts = sorted(fixed | {int(i) for i in np.searchsorted(steps, schedule[0]) if 0 < i < S} | {S})
    return fixed, list(range(1, S + 1)) if invasive else cuts


class _MessagesByStep:
    """The trace's messages sorted by step once, so each segment takes a slice."""

    def __init__(self, trace: Trace):
        m = trace.messages
        s_idx = np.searchsorted(trace.steps, m["step"])
        order = np.argsort(s_idx, kind="stable")
        self.step = s_idx[order]
        self.phase = trace.slot_of(m)[order]  # the reader's slot (its phase, without loops)
        self.src, self.dst, self.bytes = (m[k][order] for k in ("src", "dst", "bytes"))

    def between(self, s0: int, s1: int):
        a, b = np.searchsorted(self.step, [s0, s1])
        return self.step[a:b], self.phase[a:b], self.src[a:b], self.dst[a:b], self.bytes[a:b]


def _producer(step: np.ndarray, phase: np.ndarray, src: np.ndarray, P: int, T: int) -> np.ndarray:
    """Index in the segment of the task that packs a message read by phase ``phase`` of step
    ``step`` (the source tile's previous task; negative before the segment's first step)."""
    ps, pp = packed_by(step, phase, P)
    return (ps * P + pp) * T + src


def _segment_messages(messages: _MessagesByStep, s0: int, s1: int, P: int, T: int, jobs: SegmentJobs):
    """Messages read by steps [s0, s1) — halos, then the jobs' inputs and results — as a CSR
    over producing tasks (tiles' tasks, then the jobs' ranges) giving the task that reads each
    one, plus the segment's first ones."""
    s_idx, phase, src, dst, nbytes = messages.between(s0, s1)
    step, phase = s_idx - s0, phase.astype(np.int64)
    producer = _producer(step, phase, src, P, T)
    reader = (step * P + phase) * T + dst
    first = producer < 0
    inner = ~first
    producers = np.concatenate([producer[inner], jobs.producer])
    readers = np.concatenate([reader[inner], jobs.consumer])
    sizes = np.concatenate([nbytes[inner].astype(np.float64), jobs.nbytes])
    order = np.argsort(producers, kind="stable")
    total = (s1 - s0) * P * T + len(jobs.unit_cost)
    csr = np.searchsorted(producers[order], np.arange(total + 1)).astype(np.int64)
    return (csr, readers[order].astype(np.int64), sizes[order],
            src[first].astype(np.int64), dst[first].astype(np.int64), nbytes[first].astype(np.float64))


def _communication_cpu(messages: _MessagesByStep, s0: int, s1: int, P: int, T: int, owner: np.ndarray,
                       per_message: float) -> np.ndarray:
    """CPU time (steps, phases, tiles) that payloads between nodes add to the tasks that
    produce and read them over steps [s0, s1)."""
    s_idx, phase, src, dst, _ = messages.between(s0, s1)
    remote = owner[src] != owner[dst]
    step, phase, src, dst = s_idx[remote] - s0, phase[remote].astype(np.int64), src[remote], dst[remote]
    producer = _producer(step, phase, src, P, T)
    reader = (step * P + phase) * T + dst
    n = (s1 - s0) * P * T
    extra = np.bincount(reader, minlength=n) + np.bincount(producer[producer >= 0], minlength=n)
    return (per_message * extra).reshape(s1 - s0, P, T)


def _migrate(old: np.ndarray, new: np.ndarray, tile_bytes: np.ndarray, cluster: Cluster, t0: float,
             tx_free: np.ndarray, rx_free: np.ndarray) -> float:
    """Send every moved tile's state over the network model; when the last one has arrived."""
    net = cluster.network
    done = t0
    for t in np.flatnonzero(old != new):
        a, b = int(old[t]), int(new[t])
        send = max(t0, tx_free[a])
        tx_free[a] = send + net.overhead_s + tile_bytes[t] / net.bandwidth_Bps
        recv = max(send + net.overhead_s + net.latency_s, rx_free[b])
        rx_free[b] = recv + tile_bytes[t] / net.bandwidth_Bps
        done = max(done, rx_free[b])
    return done


def _smoothed(loads: np.ndarray, tiling) -> np.ndarray:
    """Without a proxy run: each 2^d block of tiles shares its mean (what half resolution sees);
    a mesh partition, which has no coarser level, as it is."""
    if not isinstance(tiling, Tiling) or all(c == 1 for c in tiling.counts):
        return loads
    coarse = tiling.coarsen(2)
    f2c = tiling.fine_to_coarse(coarse)
    mean = np.bincount(f2c, weights=loads, minlength=coarse.ntiles) / np.bincount(f2c, minlength=coarse.ntiles)
    return mean[f2c]


def _adaptive_cut(balancer: Balancer, cost: np.ndarray, steps: np.ndarray, s0: int, s1: int, owner: np.ndarray,
                  cluster: Cluster) -> int:
    """Where the segment from ``s0`` ends, at ``s1`` at the latest: after the first step whose
    costs (under ``owner``) make the adaptive trigger fire. Steps past it are not fed."""
    for s in range(s0, s1):
        if balancer.observe(int(steps[s]), cost[s], owner, cluster):
            return s + 1
    return s1


def _on_present(cluster: Cluster, cores: np.ndarray, owner: np.ndarray) -> tuple[Cluster, np.ndarray]:
    """The cluster of the nodes holding threads (``cores`` per node; all of them, mostly) and
    the tiles' owners numbered among those nodes: what the balancer and its trigger see."""
    present = cores > 0
    at = dataclasses.replace(cluster, cores=tuple(int(c) for c in cores[present]))
    if present.all():
        return at, owner
    return at, (np.cumsum(present) - 1)[owner]


def _last_ends(end: np.ndarray, node: np.ndarray, core: np.ndarray, cores: int) -> np.ndarray:
    """When each core that ran a task of a segment finished its last one."""
    key = node.astype(np.int64) * cores + core
    last = np.full(int(key.max()) + 1, -np.inf)
    np.maximum.at(last, key, end)
    return last[np.isfinite(last)]


