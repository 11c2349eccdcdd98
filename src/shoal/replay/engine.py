"""The discrete-event model of the executor on a modeled cluster (compiled with Numba).

One call simulates a *segment*: consecutive steps between two balancing barriers, all tiles
starting together at time ``t0``. The model:

- node ``k`` has ``cores[k]`` cores and one FIFO queue of ready tasks; a free core takes the
  queue's head (the executor's per-node ready queue);
- task (s, p, t) is ready when tile t's previous task has ended, the halo messages it reads
  have arrived and, after a phase that reduces (or every phase in the MPI reference model),
  the barrier is released: the phase's last task end plus an all-reduce of
  ``2 ceil(log2 nodes) (latency + overhead)``; a lagged reduction's barrier holds the
  next phase of the step after instead;
- a message between nodes occupies the sender's network interface for ``overhead +
  bytes / bandwidth``, then after ``latency`` the receiver's interface for
  ``bytes / bandwidth``; it arrives when the receiver is done. Alone, a message therefore
  takes ``overhead + latency + bytes / bandwidth``; messages sharing an interface queue;
- a message between tiles of one node is a memory copy charged to the producing task (the
  executor packs halos in the worker that produced them).
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

TASK_END, MESSAGE, BARRIER = 0, 1, 2


@nb.njit(cache=True, nogil=True)
def _push(ht, hs, hk, ha, hb, n, time, seq, kind, a, b):
    i = n
    ht[i], hs[i], hk[i], ha[i], hb[i] = time, seq, kind, a, b
    while i > 0:
        parent = (i - 1) >> 1
        if ht[parent] < ht[i] or (ht[parent] == ht[i] and hs[parent] < hs[i]):
            break
        ht[i], ht[parent] = ht[parent], ht[i]
        hs[i], hs[parent] = hs[parent], hs[i]
        hk[i], hk[parent] = hk[parent], hk[i]
        ha[i], ha[parent] = ha[parent], ha[i]
        hb[i], hb[parent] = hb[parent], hb[i]
        i = parent
    return n + 1


@nb.njit(cache=True, nogil=True)
def _pop(ht, hs, hk, ha, hb, n):
    time, kind, a, b = ht[0], hk[0], ha[0], hb[0]
    n -= 1
    ht[0], hs[0], hk[0], ha[0], hb[0] = ht[n], hs[n], hk[n], ha[n], hb[n]
    i = 0
    while True:
        left = 2 * i + 1
        if left >= n:
            break
        small = left
        right = left + 1
        if right < n and (ht[right] < ht[left] or (ht[right] == ht[left] and hs[right] < hs[left])):
            small = right
        if ht[i] < ht[small] or (ht[i] == ht[small] and hs[i] < hs[small]):
            break
        ht[i], ht[small] = ht[small], ht[i]
        hs[i], hs[small] = hs[small], hs[i]
        hk[i], hk[small] = hk[small], hk[i]
        ha[i], ha[small] = ha[small], ha[i]
        hb[i], hb[small] = hb[small], hb[i]
        i = small
    return n, time, kind, a, b


@nb.njit(cache=True, nogil=True)
def _enqueue(k, node, head, tail, nxt, dirty, dirty_list, ndirty):
    """Append task k to node's FIFO ready queue and mark the node for dispatch."""
    if tail[node] < 0:
        head[node] = k
    else:
        nxt[tail[node]] = k
    tail[node] = k
    if not dirty[node]:
        dirty[node] = True
        dirty_list[ndirty] = node
        ndirty += 1
    return ndirty


@nb.njit(cache=True, nogil=True)
def _node_of(k, ntask, T, owner, unit_node):
    """The node a task runs on: its tile's owner, or a job range's node."""
    return owner[k % T] if k < ntask else unit_node[k - ntask]


@nb.njit(cache=True, nogil=True)
def simulate(cost, owner, cores, barrier_after, barrier_lag, msg_start, msg_task, msg_bytes, first_msgs_src,
             first_msgs_dst, first_msgs_bytes, latency, bandwidth, overhead, memcpy_bandwidth, t0, tx_free, rx_free,
             gil, process_of, gil_free, wake, unit_cost, unit_gil, unit_node, unit_slot):
    """Simulate one segment; returns (start, end, core) per task and the number of events.

    Tasks are the tiles' (``(s*P + p)*T + t``, ``ntask = S*P*T`` of them), then the ranges of
    jobs (``ntask + u``): a range runs on any core of its node, once the inputs it reads have
    arrived, and the tile tasks that read its results wait for them.

    Parameters
    ----------
    cost : (S, P, T) float64
        Compute seconds of every tile task; ``P`` counts a step's slots (its phases, a loop's
        once per iteration: see :meth:`shoal.trace.Trace.slots`).
    barrier_after : (S * P,) bool
        The slots of every step followed by a global barrier (a slot a step did not run has
        none, nor any cost: its zero-length tasks just pass the tile on).
    barrier_lag : (S * P,) int64
        Steps later the barrier holds the next slot (1 for a lagged reduction, else 0).
    msg_start, msg_task, msg_bytes
        CSR of the messages each task *produces* (over all tasks, ranges included): the task
        that reads each one, and its size. A halo goes to the task after its producer on the
        reading tile; a job's input goes from the tile's task before the job slot to the range;
        a range's result goes to the tile's task of the job slot.
    first_msgs_*
        Messages read by the segment's first tasks (step 0, phase 0), sent at ``t0``.
    tx_free, rx_free : (N,) float64
        When each node's interface is next free (carried across segments; updated in place).
    gil : (S, P, T) float64
        The share of each task's duration that holds its process's interpreter lock (Python
        around the kernels); a task starts with it, waiting while another task of the same
        process holds the lock. Zeros model compiled executors.
    process_of, gil_free
        The process each node's tasks run in, and when each process's lock is next free.
    wake : float
        Seconds a core that sat idle takes to start a task that became ready (its worker
        slept and must be woken); a core that has just finished a task takes the next at once.
    unit_cost, unit_gil, unit_node, unit_slot : (U,) arrays
        Every job range's seconds, its share under the interpreter lock, its node and the slot
        (``s*P + p``) of its job phase: it waits for the barrier before it (its jobs are known
        only once every tile has emitted its own).
    """
    S, P, T = cost.shape
    ntask = S * P * T
    U = unit_cost.shape[0]
    total = ntask + U
    flat_cost = np.concatenate((cost.reshape(-1), unit_cost))
    flat_gil = np.concatenate((gil.reshape(-1), unit_gil))
    N = cores.shape[0]
    deps = np.zeros(total, np.int64)
    start = np.zeros(total)
    end = np.zeros(total)
    core_of = np.zeros(total, np.int64)
    # Dependencies: previous task of the tile, incoming messages, barrier token.
    for k in range(T, ntask):
        deps[k] += 1
    for m in range(msg_task.shape[0]):
        if msg_task[m] < total:
            deps[msg_task[m]] += 1
    for m in range(first_msgs_dst.shape[0]):
        deps[first_msgs_dst[m]] += 1
    for u in range(U):
        if unit_slot[u] > 0 and barrier_after[unit_slot[u] - 1] and barrier_lag[unit_slot[u] - 1] == 0:
            deps[ntask + u] += 1
    for s in range(S):
        for p in range(P):
            if barrier_after[s * P + p]:
                base = (s * P + p + 1 + barrier_lag[s * P + p] * P) * T
                if base < ntask:
                    for t in range(T):
                        deps[base + t] += 1
    log_nodes = math.ceil(math.log2(N)) if N > 1 else 0
    barrier_cost = 2.0 * log_nodes * (latency + overhead)
    # Ready queues: one FIFO linked list per node.
    nxt = np.full(total, -1, np.int64)
    head = np.full(N, -1, np.int64)
    tail = np.full(N, -1, np.int64)
    free = cores.copy()
    free_core = np.zeros((N, cores.max()), np.int64)
    for k in range(N):
        for c in range(cores[k]):
            free_core[k, c] = cores[k] - 1 - c
    freed_at = np.full((N, cores.max()), t0)  # when each core last finished a task
    done_in_phase = np.zeros(S * P, np.int64)
    phase_end = np.zeros(S * P)
    cap = total + msg_task.shape[0] + first_msgs_dst.shape[0] + S * P + 16
    ht = np.empty(cap)
    hs = np.empty(cap, np.int64)
    hk = np.empty(cap, np.int64)
    ha = np.empty(cap, np.int64)
    hb = np.empty(cap, np.int64)
    n = 0
    seq = 0
    events = 0

    # Messages read by the first tasks leave at t0.
    for m in range(first_msgs_dst.shape[0]):
        src_node = owner[first_msgs_src[m]]
        dst_task = first_msgs_dst[m]
        dst_node = owner[dst_task % T]
        if src_node == dst_node:
            arrive = t0 + first_msgs_bytes[m] / memcpy_bandwidth
        else:
            send = max(t0, tx_free[src_node])
            tx_free[src_node] = send + overhead + first_msgs_bytes[m] / bandwidth
            recv = max(send + overhead + latency, rx_free[dst_node])
            rx_free[dst_node] = recv + first_msgs_bytes[m] / bandwidth
            arrive = rx_free[dst_node]
        n = _push(ht, hs, hk, ha, hb, n, arrive, seq, MESSAGE, dst_task, 0)
        seq += 1
    # Tasks with no dependencies are ready at t0, in tile order.
    for k in range(T):
        if deps[k] == 0:
            node = owner[k]
            if tail[node] < 0:
                head[node] = k
            else:
                nxt[tail[node]] = k
            tail[node] = k
    now = t0
    dirty = np.ones(N, np.bool_)  # nodes whose queue or cores changed since they last started tasks
    dirty_list = np.arange(N)
    ndirty = N
    while True:
        for d in range(ndirty):
            node = dirty_list[d]
            dirty[node] = False
            while free[node] > 0 and head[node] >= 0:
                k = head[node]
                head[node] = nxt[k]
                if head[node] < 0:
                    tail[node] = -1
                free[node] -= 1
                c = free_core[node, free[node]]
                copy = 0.0
                for m in range(msg_start[k], msg_start[k + 1]):
                    if msg_task[m] < total and _node_of(msg_task[m], ntask, T, owner, unit_node) == node:
                        copy += msg_bytes[m] / memcpy_bandwidth
                begin = now if freed_at[node, c] >= now else now + wake
                start[k] = begin
                # Python share first, under the process's lock; the rest runs without it.
                lock = process_of[node]
                held = min(flat_gil[k], flat_cost[k])
                got = max(begin, gil_free[lock]) if held > 0 else begin
                gil_free[lock] = max(gil_free[lock], got + held)
                end[k] = got + flat_cost[k] + copy
                core_of[k] = c
                n = _push(ht, hs, hk, ha, hb, n, end[k], seq, TASK_END, k, node)
                seq += 1
        ndirty = 0
        if n == 0:
            break
        n, now, kind, a, b = _pop(ht, hs, hk, ha, hb, n)
        events += 1
        released_from = -1
        if kind == TASK_END:
            k, node = a, b
            free_core[node, free[node]] = core_of[k]
            freed_at[node, core_of[k]] = now
            free[node] += 1
            if not dirty[node]:
                dirty[node] = True
                dirty_list[ndirty] = node
                ndirty += 1
            # Messages this task produced.
            for m in range(msg_start[k], msg_start[k + 1]):
                consumer = msg_task[m]
                if consumer >= total:
                    continue
                dst_node = _node_of(consumer, ntask, T, owner, unit_node)
                if dst_node == node:
                    deps[consumer] -= 1
                    if deps[consumer] == 0:
                        ndirty = _enqueue(consumer, dst_node, head, tail, nxt, dirty, dirty_list, ndirty)
                else:
                    send = max(now, tx_free[node])
                    tx_free[node] = send + overhead + msg_bytes[m] / bandwidth
                    recv = max(send + overhead + latency, rx_free[dst_node])
                    rx_free[dst_node] = recv + msg_bytes[m] / bandwidth
                    n = _push(ht, hs, hk, ha, hb, n, rx_free[dst_node], seq, MESSAGE, consumer, 0)
                    seq += 1
            if k >= ntask:
                continue  # a job's range: no tile to move on, no barrier
            t = k % T
            sp = k // T
            # The tile's next task.
            successor = k + T
            if successor < ntask:
                deps[successor] -= 1
                if deps[successor] == 0:
                    dn = owner[t]
                    ndirty = _enqueue(successor, dn, head, tail, nxt, dirty, dirty_list, ndirty)
            if barrier_after[sp]:
                done_in_phase[sp] += 1
                phase_end[sp] = max(phase_end[sp], now)
                if done_in_phase[sp] == T and (sp + 1 + barrier_lag[sp] * P) * T < ntask:
                    n = _push(ht, hs, hk, ha, hb, n, now + barrier_cost, seq, BARRIER, sp, 0)
                    seq += 1
        elif kind == MESSAGE:
            consumer = a
            deps[consumer] -= 1
            if deps[consumer] == 0:
                dn = _node_of(consumer, ntask, T, owner, unit_node)
                ndirty = _enqueue(consumer, dn, head, tail, nxt, dirty, dirty_list, ndirty)
        else:
            released_from = (a + 1 + barrier_lag[a] * P) * T
            if barrier_lag[a] == 0:
                for u in range(U):
                    if unit_slot[u] == a + 1:
                        deps[ntask + u] -= 1
                        if deps[ntask + u] == 0:
                            ndirty = _enqueue(ntask + u, unit_node[u], head, tail, nxt, dirty, dirty_list, ndirty)
            for t in range(T):
                consumer = released_from + t
                deps[consumer] -= 1
                if deps[consumer] == 0:
                    dn = owner[t]
                    ndirty = _enqueue(consumer, dn, head, tail, nxt, dirty, dirty_list, ndirty)
    return start, end, core_of, events
