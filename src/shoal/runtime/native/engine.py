"""The compiled worker loop: a step's task graph run by worker threads with no Python.

Each worker thread of a node calls :func:`work`, compiled with Numba ``nogil``: it runs until
the segment of the task sequence it was given is over, and returns why (:data:`DONE`,
:data:`DECIDE`, :data:`FAILED`). Everything a task needs is in arrays the executor built once
per graph (:class:`Graph`) and arrays every worker shares (:class:`Shared`):

- a task is (instance, tile), index ``instance x T + tile``, as in the Python executor;
- ``need[task]`` counts the inputs a task still waits for: its tile's previous task, one per
  halo it reads, one for the reduction it reads. Whoever brings the last one (an atomic
  decrement to zero) makes it ready: the tile's own next task runs at once on the same worker
  (no queue, no wake-up), any other goes to the back of its node's queue;
- a node's queue is a ring of task indices under a spin lock held for a few instructions; an
  idle worker spins on it for :data:`SPIN_NS` (not at all when the node's workers outnumber
  the cores: a spinning thread would take a core from a working one), then sleeps on a futex
  until a task is queued;
- a phase with a reduction writes its values; the last tile in reduces them in tile order
  (the same arithmetic, in the same order, as :func:`~shoal.runtime.app.reduce_in_order`)
  and releases the instance that reads them;
- halos: a tile's memory is one float64 array; after its task a tile copies the blocks its
  readers need into their slot of a staging buffer (a copy plan), and a reader copies them
  into its ghost cells before its task, so a writer never touches memory a reader is using.
  Halos of variable size (particles) are written into the slot by the phase's compiled packer
  (:data:`PACKER`) and land, end to end, in the reader's inbox; a payload, an inbox or a
  kernel's output that does not fit ends the segment with :data:`ERROR_CAPACITY`, and the
  executor redoes the run with more room;
- phases an app leaves in Python run through :func:`~shoal.runtime.native.trampoline.python_task`
  (the rest of a task whose kernel returns :data:`DEFER`, through
  :func:`~shoal.runtime.native.trampoline.python_deferred`): the one place a worker takes the
  interpreter lock.

Times are ``CLOCK_MONOTONIC`` nanoseconds, read where a task becomes ready, starts and ends.
A worker also reads its CPU time when it turns from one step's tasks to another's, when it
runs out of tasks, before it sleeps and when it ends a step, and adds what it used to the
step's row of its node (``Shared.cpu``): what the executor scales the tasks' wall times to,
where threads were kept from their cores.
"""

from __future__ import annotations

import warnings
from collections import namedtuple

import numba as nb
import numpy as np
from numba import types
from numba.core.errors import NumbaExperimentalFeatureWarning

from .primitives import (
    atomic_add,
    atomic_cas,
    atomic_load,
    cpu_relax,
    futex_wait,
    futex_wait_for,
    futex_wake,
    monotonic_ns,
    thread_cpu_ns,
)
from .trampoline import python_deferred, python_pack, python_range, python_task

# The engine calls kernels as first-class functions, which Numba calls "experimental" on every
# call from Python, and warns that a function holding an objmode block holds the lock (only the
# block does).
warnings.filterwarnings("ignore", category=NumbaExperimentalFeatureWarning)
warnings.filterwarnings("ignore", message=".*object mode won't allow parallel execution")

# Why a worker returned (Shared.control[STATUS]; 0 while the segment runs).
RUNNING, DONE, DECIDE, FAILED, EMIT = 0, 1, 2, 3, 4
# Slots of Shared.control.
STATUS, LIMIT, STARTED, STEP_LOCK, ERROR_TASK, ERROR_KIND, STEPS_DONE, SPIN, FROZEN, PARKED, OUT_LOCK, IDLE_CALL, \
    JOB_INSTANCE = range(13)
CONTROL_SLOTS = 13
EMPTY = -1  # no task (a queue's answer when empty; the segment's end, from _idle); a job's range is -2 - its number
# Shared.control[ERROR_KIND]; ERROR_CAPACITY: a kernel, packer or inbox had no room (the run is redone bigger)
ERROR_KERNEL, ERROR_PYTHON, ERROR_HALO, ERROR_CAPACITY = 1, 2, 3, 4
SUM, MIN, MAX = 0, 1, 2  # reduction operations, as Graph.ops holds them
BEFORE, ABSENT = -1, -2  # Graph.ctx_src: a value from before the run; no value (NaN) yet
SPIN_NS = 50_000  # how long an idle worker spins on its queue before it sleeps
#: What a kernel returns when the rest of its task is the app's Python
#: (:attr:`Native.deferred <shoal.runtime.native.Native>`): a step that must read the setup
#: or resize fields, once in many steps.
DEFER = -2

#: The one signature of a compiled phase kernel: ``kernel(tile, step, iteration, mem, ints,
#: consts, reduced, out) -> work``. ``mem`` is the tile's memory (its fields and ghost cells),
#: ``ints`` its integer descriptor, ``consts`` the app's constants, ``reduced`` one row per
#: phase of the reductions the task reads (NaN where none), ``out`` where a phase with a
#: reduction writes its values; it returns the work done, in the phase's unit, -1 when what
#: the task made has no room, or :data:`DEFER`.
KERNEL = types.int64(types.int64, types.int64, types.int64, types.float64[::1], types.int64[::1],
                     types.float64[::1], types.float64[:, ::1], types.float64[::1])

#: The one signature of a compiled packer, for halos of variable size (particles):
#: ``packer(source tile, reader tile, mem, ints, reader's ints, consts, slot) -> words``. It
#: writes what ``reader`` reads of the source tile (``mem``, ``ints``) into ``slot`` and returns
#: the words it wrote, or -1 when they do not fit. The engine hands the reader every payload it
#: reads, by source tile id, end to end in its *inbox* (a field of its memory): word 0 the words
#: that follow.
PACKER = types.int64(types.int64, types.int64, types.float64[::1], types.int64[::1], types.int64[::1],
                     types.float64[::1], types.float64[::1])

Graph = namedtuple("Graph", [
    "T", "n", "first", "handle", "stamp_depth",
    # per instance
    "phase", "step", "iteration", "kernel", "nvals", "ops", "links", "pypack", "gates", "decide",
    "first_of_step", "ctx_src", "emits",
    # per links kind: readers of each tile (CSR, edges numbered by position), and each tile's incoming edges
    "rd_ptr", "rd", "in_ptr", "inc", "lk_base",
    # per links kind: its packer (-1: a copy plan), and per tile where its inbox lies in its memory and its words
    "packer", "ib_off", "ib_cap",
    # per instance: its first message row (the rows of an instance: its edges, in order)
    "msg_off",
    # per edge: its staging offset and size; its pack and unpack blocks
    "ed_off", "ed_size", "pk_ptr", "pk", "up_ptr", "up",
    # per tile: its memory and integer descriptor (offsets into mem and ints); its node
    "mem_off", "int_off", "owner",
    # across processes (MPI ranks; one process: ranks 1, every tile here): the ranks, this
    # process's tiles; per links kind and tile, whether it has readers on each rank, and the
    # ranks its sources are on; per links kind and rank, the edges to it and from it (in edge
    # order: a batch's payloads) and the tiles here that read from it
    "ranks", "here", "to_rank", "rin", "bo_ptr", "bo", "bi_ptr", "bi", "bir_ptr", "bir",
])

Shared = namedtuple("Shared", [
    "control", "need", "remaining", "vals", "red", "before", "left", "step_end",
    "r_start", "r_end", "r_ready", "r_node", "r_worker", "r_work", "r_kernel",
    "queue", "q_head", "q_tail", "q_lock", "sleepers", "words",
    "staging", "written", "consumed", "sent", "cpu",
    # across processes: per (instance, rank) the tiles here still to pack its batch; per instance
    # the tiles here still to give their reduced values; the batches ready to leave (a ring:
    # instance x (ranks + 1) + rank, rank = ranks for the values); tasks held by a stop's freeze
    "out_left", "mine_left", "outbox", "o_ends", "parked",
    # the int32 word the thread that moves messages sleeps on (a batch posted bumps it)
    "o_word",
    # the ranges of the job phase in control[JOB_INSTANCE]: per range, the tiles it counts in
    "u_ptr", "u_tiles",
])


@nb.njit(nogil=True, cache=True, inline="always")
def _lock(a, i):
    while atomic_cas(a, i, 0, 1) != 0:
        cpu_relax()


@nb.njit(nogil=True, cache=True, inline="always")
def _unlock(a, i):
    atomic_cas(a, i, 1, 0)


@nb.njit(nogil=True, cache=True, inline="always")
def _push(s, node, task):
    """Queue ``task`` on ``node`` and wake one of its sleeping workers, if any."""
    cap = s.queue.shape[1]
    _lock(s.q_lock, node)
    s.queue[node, s.q_tail[node] % cap] = task
    s.q_tail[node] += 1
    _unlock(s.q_lock, node)
    if atomic_load(s.sleepers, node) > 0:
        atomic_add(s.words, node, 1)
        futex_wake(s.words, node, 1)


@nb.njit(nogil=True, cache=True, inline="always")
def _pop(s, node):
    """The next task queued on ``node``, or :data:`EMPTY`."""
    if atomic_load(s.q_head, node) == atomic_load(s.q_tail, node):
        return EMPTY
    cap = s.queue.shape[1]
    task = EMPTY
    _lock(s.q_lock, node)
    if s.q_head[node] < s.q_tail[node]:
        task = s.queue[node, s.q_head[node] % cap]
        s.q_head[node] += 1
    _unlock(s.q_lock, node)
    return task


@nb.njit(nogil=True, cache=True, inline="always")
def _post(s, code):
    """A batch is ready to leave this process: ``code`` on the outbox ring (the thread that
    moves messages takes it from there)."""
    cap = s.outbox.shape[0]
    _lock(s.control, OUT_LOCK)
    s.outbox[s.o_ends[1] % cap] = code
    s.o_ends[1] += 1
    _unlock(s.control, OUT_LOCK)
    _call_mover(s)


@nb.njit(nogil=True, cache=True, inline="always")
def _call_mover(s):
    """Wake the thread that moves messages (a batch to send, or every worker here idle)."""
    atomic_add(s.o_word, 0, 1)
    futex_wake(s.o_word, 0, 1)


@nb.njit(nogil=True, cache=True)
def wait_for_batches(s, node, ns):
    """Sleep until a batch is posted or every worker of ``node`` has gone idle, at most ``ns``
    nanoseconds (the thread that moves messages, while the workers compute)."""
    word = atomic_load(s.o_word, 0)  # read first: a change after it ends the wait at once
    if (atomic_load(s.o_ends, 0) < atomic_load(s.o_ends, 1)
            or atomic_load(s.sleepers, node) >= s.control[IDLE_CALL]):
        return
    if futex_wait_for(s.o_word, 0, word, ns) < 0 and word == atomic_load(s.o_word, 0):
        cpu_relax()


@nb.njit(nogil=True, cache=True)
def next_batch(s):
    """The next batch ready to leave (see :func:`_post`), or -1."""
    code = -1
    _lock(s.control, OUT_LOCK)
    if s.o_ends[0] < s.o_ends[1]:
        code = s.outbox[s.o_ends[0] % s.outbox.shape[0]]
        s.o_ends[0] += 1
    _unlock(s.control, OUT_LOCK)
    return code


@nb.njit(nogil=True, cache=True, inline="always")
def _packed_for_ranks(g, s, instance, tile):
    """``tile`` has packed its halos of ``instance``: count it off every rank it sends to; a
    rank whose tiles here have all packed gets its batch."""
    R = g.ranks
    L = g.links[instance]
    for r in range(R):
        if g.to_rank[L, tile, r] and atomic_add(s.out_left, instance * R + r, -1) == 1:
            _post(s, instance * (R + 1) + r)


@nb.njit(nogil=True, cache=True)
def wake_all(s):
    """Wake every sleeping worker (the segment's status changed)."""
    for node in range(s.words.shape[0]):
        atomic_add(s.words, node, 1)
        futex_wake(s.words, node, 1 << 30)


@nb.njit(nogil=True, cache=True)
def finish_segment(s, status):
    """End the segment with ``status`` (the first one set wins)."""
    if atomic_cas(s.control, STATUS, RUNNING, status) == RUNNING:
        wake_all(s)
        _call_mover(s)


@nb.njit(nogil=True, cache=True, inline="always")
def _ready(s, task, now):
    """Count one input of ``task`` in; True if it was its last."""
    if atomic_add(s.need, task, -1) == 1:
        s.r_ready[task] = now
        return True
    return False


@nb.njit(nogil=True, cache=True, inline="always")
def _enter_step(s, step, task):
    """Whether a tile may start ``step`` (a stop lowers the limit; see :func:`request_stop`).
    While a stop is negotiated between processes (:func:`freeze`) a task past the limit is
    held, not dropped: the limit agreed may be higher."""
    _lock(s.control, STEP_LOCK)
    ok = step < s.control[LIMIT]
    if ok and step > s.control[STARTED]:
        s.control[STARTED] = step
    elif not ok and s.control[FROZEN]:
        s.parked[s.control[PARKED]] = task
        s.control[PARKED] += 1
    _unlock(s.control, STEP_LOCK)
    return ok


@nb.njit(nogil=True, cache=True)
def request_stop(s):
    """End the run at the next step boundary every tile can reach: no tile starts a step after
    the latest one some tile has started. Returns the new limit (steps of the run)."""
    _lock(s.control, STEP_LOCK)
    limit = min(s.control[LIMIT], s.control[STARTED] + 1)
    s.control[LIMIT] = limit
    _unlock(s.control, STEP_LOCK)
    if atomic_load(s.control, STEPS_DONE) >= limit:
        finish_segment(s, DONE)
    return limit


@nb.njit(nogil=True, cache=True, inline="always")
def _at_limit(s):
    """Whether the run has done its steps: read with the limit and the freeze together, as
    :func:`freeze` and :func:`thaw` write them (a thaw between two reads would end a rank early)."""
    _lock(s.control, STEP_LOCK)
    done = s.control[STEPS_DONE] >= s.control[LIMIT] and not s.control[FROZEN]
    _unlock(s.control, STEP_LOCK)
    return done


@nb.njit(nogil=True, cache=True)
def freeze(s):
    """A stop negotiated between processes, here: no tile starts a step after the latest one
    some tile has started, and tasks that would are held (:func:`thaw` settles them). Returns
    this process's frontier (the steps it would run)."""
    _lock(s.control, STEP_LOCK)
    s.control[FROZEN] = 1
    limit = min(s.control[LIMIT], s.control[STARTED] + 1)
    s.control[LIMIT] = limit
    _unlock(s.control, STEP_LOCK)
    return limit


@nb.njit(nogil=True, cache=True)
def thaw(g, s, limit):
    """The stop agreed: run ``limit`` steps (at least this process's frontier); the tasks held
    before it go on, those at or after it are dropped."""
    _lock(s.control, STEP_LOCK)
    s.control[LIMIT] = limit
    s.control[FROZEN] = 0
    held = s.control[PARKED]
    s.control[PARKED] = 0
    _unlock(s.control, STEP_LOCK)
    for k in range(held):
        task = s.parked[k]
        if g.step[task // g.T] < limit:
            _push(s, g.owner[task % g.T], task)
    if atomic_load(s.control, STEPS_DONE) >= limit:
        finish_segment(s, DONE)


@nb.njit(nogil=True, cache=True, inline="always")
def _copy(src, src_base, dst, dst_base, blocks, first, last, to_flat):
    """Run blocks ``first:last`` of a copy plan: each ``(offset, flat offset, n0, n1, n2, s0,
    s1, s2)`` is a strided box of a tile's memory, copied to consecutive elements of a flat
    buffer (``to_flat``) or back."""
    for b in range(first, last):
        off, flat, n0, n1, n2, s0, s1, s2 = (blocks[b, 0], blocks[b, 1], blocks[b, 2], blocks[b, 3], blocks[b, 4],
                                             blocks[b, 5], blocks[b, 6], blocks[b, 7])
        if n0 == 1 and n1 == 1 and s2 == 1:  # one contiguous run (most halo rows)
            a, b = (src_base + off, dst_base + flat) if to_flat else (src_base + flat, dst_base + off)
            for i in range(n2):
                dst[b + i] = src[a + i]
            continue
        k = flat
        for i0 in range(n0):
            for i1 in range(n1):
                at = off + i0 * s0 + i1 * s1
                if to_flat:
                    for i2 in range(n2):
                        dst[dst_base + k] = src[src_base + at + i2 * s2]
                        k += 1
                else:
                    for i2 in range(n2):
                        dst[dst_base + at + i2 * s2] = src[src_base + k]
                        k += 1


@nb.njit(nogil=True, cache=True, inline="always")
def _pack(g, s, mem, ints, consts, packers, instance, tile):
    """Copy ``tile``'s halos for ``instance`` into its readers' staging slots (a copy plan, or
    the phase's packer). 0, :data:`ERROR_HALO` if a slot still holds halos its reader has not
    read (the staging is too shallow), :data:`ERROR_CAPACITY` if a payload did not fit."""
    L = g.links[instance]
    base = g.lk_base[L]
    nedges = g.ed_off.shape[0]
    slot = instance % g.stamp_depth
    packer = g.packer[L]
    for e in range(base + g.rd_ptr[L, tile], base + g.rd_ptr[L, tile + 1]):
        at = slot * nedges + e
        if s.written[at] >= 0 and s.consumed[at] != s.written[at]:
            return ERROR_HALO
        b = slot * s.staging.shape[0] // g.stamp_depth + g.ed_off[e]
        if packer < 0:
            _copy(mem, g.mem_off[tile], s.staging, b, g.pk, g.pk_ptr[e], g.pk_ptr[e + 1], True)
        else:
            reader = g.rd[e]
            used = packers[packer](tile, reader, mem[g.mem_off[tile]:g.mem_off[tile + 1]],
                                   ints[g.int_off[tile]:g.int_off[tile + 1]],
                                   ints[g.int_off[reader]:g.int_off[reader + 1]], consts,
                                   s.staging[b + 1:b + g.ed_size[e]])
            if used < 0 or used > g.ed_size[e] - 1:
                return ERROR_CAPACITY
            s.staging[b] = used
            s.sent[g.msg_off[instance] + e - base] = used
        s.written[at] = instance
    return 0


@nb.njit(nogil=True, cache=True)
def open_segment(g, s, mem, ints, consts, packers, instance):
    """Every tile is about to run ``instance``: copy its native halos (nobody packed them: the
    run's start, or a loop's decision; its Python halos the executor packed), count each tile
    off its batches to other processes, then queue every tile's task, in tile order. 0, or
    what :func:`_pack` failed with."""
    T = g.T
    L = g.links[instance]
    if L >= 0:
        for t in range(T):
            if g.here[t]:
                if not g.pypack[instance]:  # (Python halos: packed by the executor before this)
                    status = _pack(g, s, mem, ints, consts, packers, instance, t)
                    if status != 0:
                        return status
                if g.ranks > 1:
                    _packed_for_ranks(g, s, instance, t)
    now = monotonic_ns()
    cap = s.queue.shape[1]
    for t in range(T):
        if not g.here[t]:
            continue
        task = instance * T + t
        s.need[task] = g.rin[L, t] if L >= 0 else 0  # halos from other processes still to come
        s.r_ready[task] = now
        if s.need[task] == 0:
            node = g.owner[t]
            s.queue[node, s.q_tail[node] % cap] = task
            s.q_tail[node] += 1
    return 0


@nb.njit(nogil=True, cache=True, inline="always")
def _unpack(g, s, mem, instance, tile):
    """Copy the halos ``tile`` reads in ``instance`` from the staging into its ghost cells (a
    copy plan) or its inbox (a packer's payloads, end to end). False if the inbox is too small."""
    L = g.links[instance]
    nedges = g.ed_off.shape[0]
    slot = instance % g.stamp_depth
    inbox = g.mem_off[tile] + g.ib_off[L, tile]
    total = 0
    for k in range(g.in_ptr[L, tile], g.in_ptr[L, tile + 1]):
        e = g.inc[g.lk_base[L] + k]
        at = slot * nedges + e
        b = slot * s.staging.shape[0] // g.stamp_depth + g.ed_off[e]
        if g.packer[L] < 0:
            _copy(s.staging, b, mem, g.mem_off[tile], g.up, g.up_ptr[e], g.up_ptr[e + 1], False)
        else:
            used = np.int64(s.staging[b])
            if 1 + total + used > g.ib_cap[L, tile]:
                return False
            for i in range(used):
                mem[inbox + 1 + total + i] = s.staging[b + 1 + i]
            total += used
        s.consumed[at] = instance
    if g.packer[L] >= 0:
        mem[inbox] = total
    return True


@nb.njit(nogil=True, cache=True)
def _reduce(g, s, instance):
    """Combine the tiles' values of ``instance`` in tile order (as reduce_in_order does)."""
    T = g.T
    for k in range(g.nvals[instance]):
        op = g.ops[instance, k]
        acc = 0.0 if op == SUM else s.vals[instance * T, k]
        for t in range(T):
            v = s.vals[instance * T + t, k]
            if op == SUM:
                acc += v
            elif op == MIN:
                if v < acc:
                    acc = v
            elif v > acc:
                acc = v
        s.red[instance, k] = acc


@nb.njit(nogil=True, cache=True, inline="always")
def fill_context(g, s, instance, reduced):
    """Fill ``reduced`` with what ``instance`` reads: row p holds phase p's latest value."""
    for p in range(reduced.shape[0]):
        src = g.ctx_src[instance, p]
        for k in range(reduced.shape[1]):
            reduced[p, k] = s.red[src, k] if src >= 0 else s.before[p, k] if src == BEFORE else np.nan


@nb.njit(nogil=True, cache=True)
def _release(g, s, instance, now):
    """Hand every tile the reduction ``instance`` gates; queue those it made ready."""
    T = g.T
    for t in range(T):
        task = instance * T + t
        if g.here[t] and _ready(s, task, now):
            _push(s, g.owner[t], task)


@nb.njit(nogil=True, cache=True)
def _gathered(g, s, instance, now):
    """Every tile's values of ``instance`` are in: reduce them, then let the app decide on its
    loop, or release the instance the reduction gates; a phase that emits jobs hands them to
    the executor, which places them and starts the next segment with their ranges."""
    if g.emits[instance]:
        s.control[JOB_INSTANCE] = instance + 1
        finish_segment(s, EMIT)
        return
    _reduce(g, s, instance)
    if g.decide[instance]:
        finish_segment(s, DECIDE)  # the app decides whether the loop goes on (the sequence grows)
    elif g.gates[instance] >= 0 and g.gates[instance] < g.n:
        _release(g, s, g.gates[instance], now)


@nb.njit(nogil=True, cache=True)
def _fail(s, task, kind):
    if atomic_cas(s.control, ERROR_KIND, 0, kind) == 0:
        s.control[ERROR_TASK] = task
    finish_segment(s, FAILED)


@nb.njit(nogil=True, cache=True, inline="always")
def _count_cpu(s, node, clock):
    """Add the CPU time since ``clock[1]`` to step ``clock[0]``'s row of ``node`` (if any)."""
    now = thread_cpu_ns()
    if clock[0] >= 0:
        atomic_add(s.cpu, clock[0] * s.words.shape[0] + node, now - clock[1])
    clock[1] = now


@nb.njit(nogil=True, cache=True)
def _idle(s, node, clock):
    """Wait for a task on ``node``'s queue: spin a while, then sleep (the CPU time used so far
    counted on the way in and before sleeping). :data:`EMPTY` once the segment ends."""
    _count_cpu(s, node, clock)
    t0 = monotonic_ns()
    while True:
        if atomic_load(s.control, STATUS) != RUNNING:
            return EMPTY
        task = _pop(s, node)
        if task != EMPTY:
            return task
        if monotonic_ns() - t0 < s.control[SPIN]:
            cpu_relax()
            continue
        _count_cpu(s, node, clock)
        if atomic_add(s.sleepers, node, 1) + 1 == s.control[IDLE_CALL]:  # the last awake: only messages bring work
            _call_mover(s)
        word = atomic_load(s.words, node)
        if (atomic_load(s.control, STATUS) == RUNNING
                and atomic_load(s.q_head, node) == atomic_load(s.q_tail, node)):
            if futex_wait(s.words, node, word) < 0 and word == atomic_load(s.words, node):
                cpu_relax()  # no futex here (or interrupted): spin
        atomic_add(s.sleepers, node, -1)


@nb.njit(nogil=True, cache=True, inline="always")
def _leave_step(s, node, clock, step, now):
    """A task or job range of ``step`` here has ended: the last one ends the step (and the
    segment, at the run's limit)."""
    if atomic_add(s.left, step, -1) == 1:
        _count_cpu(s, node, clock)  # the step's CPU counted before anyone reads it as done
        s.step_end[step] = now
        if atomic_add(s.control, STEPS_DONE, 1) + 1 >= atomic_load(s.control, LIMIT) and _at_limit(s):
            finish_segment(s, DONE)


@nb.njit(nogil=True, cache=True)
def work(g, s, kernels, packers, mem, ints, consts, node, worker, nphases, width):
    """One worker's share of the segment: run tasks of ``node`` until the segment ends; return
    the status it ended with."""
    T = g.T
    reduced = np.empty((nphases, width))
    out = np.zeros(max(width, 1))
    own = -1
    clock = np.empty(2, np.int64)  # the step this worker's CPU time goes to, and since when
    clock[0], clock[1] = -1, thread_cpu_ns()
    while True:
        if own >= 0:
            task, own = own, -1
        else:
            task = _idle(s, node, clock)
            if task == EMPTY:
                _count_cpu(s, node, clock)
                return atomic_load(s.control, STATUS)
        if task < EMPTY:  # a range of a job, run in Python; then its tiles here count its results in
            unit = -2 - task
            instance = s.control[JOB_INSTANCE]
            step = g.step[instance]
            if step != clock[0]:
                _count_cpu(s, node, clock)
                clock[0] = step
            if python_range(g.handle, worker, unit) != 0:
                _fail(s, 0, ERROR_PYTHON)
                return FAILED
            now = monotonic_ns()
            for k in range(s.u_ptr[unit], s.u_ptr[unit + 1]):
                reader = s.u_tiles[k]
                if _ready(s, instance * T + reader, now):
                    _push(s, g.owner[reader], instance * T + reader)
            if g.ranks > 1:
                _call_mover(s)  # results for tiles on other processes wait to be sent
            _leave_step(s, node, clock, step, now)
            continue
        instance, tile = task // T, task % T
        step = g.step[instance]
        if step != clock[0]:
            _count_cpu(s, node, clock)
            clock[0] = step
        if g.first_of_step[instance] and not _enter_step(s, step, task):
            continue  # the run stops before this step (or waits for the stop agreed: see freeze)
        t0 = monotonic_ns()
        if g.links[instance] >= 0 and not g.pypack[instance] and not _unpack(g, s, mem, instance, tile):
            _fail(s, task, ERROR_CAPACITY)
            return FAILED
        kernel = g.kernel[instance]
        nxt = instance + 1
        packs = nxt < g.n and g.links[nxt] >= 0
        kernel_ns = 0
        if kernel >= 0:
            fill_context(g, s, instance, reduced)
            tile_mem = mem[g.mem_off[tile]:g.mem_off[tile + 1]]
            tile_ints = ints[g.int_off[tile]:g.int_off[tile + 1]]
            try:
                done = kernels[kernel](tile, step + g.first, g.iteration[instance], tile_mem, tile_ints, consts,
                                       reduced, out)
            except Exception:  # noqa: BLE001 (the executor finds what it was: see NativeExecutor)
                _fail(s, task, ERROR_KERNEL)
                return FAILED
            if done == DEFER:  # the rest of the task in Python, under the lock
                done = python_deferred(g.handle, worker, task)
                if done < 0:
                    _fail(s, task, ERROR_PYTHON)
                    return FAILED
            elif done < 0:  # no room for what the task made (particles that came in)
                _fail(s, task, ERROR_CAPACITY)
                return FAILED
            for k in range(g.nvals[instance]):
                s.vals[task, k] = out[k]
            s.r_work[task] = done
            if packs and g.pypack[nxt] and python_pack(g.handle, task) != 0:
                _fail(s, task, ERROR_PYTHON)
                return FAILED
        else:
            kernel_ns = python_task(g.handle, worker, task)
            if kernel_ns < 0:
                _fail(s, task, ERROR_PYTHON)
                return FAILED
        if packs and not g.pypack[nxt]:
            status = _pack(g, s, mem, ints, consts, packers, nxt, tile)
            if status != 0:
                _fail(s, task, status)
                return FAILED
        t1 = monotonic_ns()
        s.r_start[task], s.r_end[task], s.r_node[task], s.r_worker[task] = t0, t1, node, worker
        s.r_kernel[task] = t1 - t0 if kernel >= 0 else kernel_ns
        # Readers of the halos just packed: each may now be ready (those on other processes
        # once their batch has left).
        if packs:
            L = g.links[nxt]
            base = g.lk_base[L]
            for e in range(base + g.rd_ptr[L, tile], base + g.rd_ptr[L, tile + 1]):
                reader = g.rd[e]
                if g.here[reader] and _ready(s, nxt * T + reader, t1):
                    _push(s, g.owner[reader], nxt * T + reader)
            if g.ranks > 1:
                _packed_for_ranks(g, s, nxt, tile)
        if g.nvals[instance] > 0 or g.emits[instance]:
            if g.ranks > 1 and atomic_add(s.mine_left, instance, -1) == 1:
                _post(s, instance * (g.ranks + 1) + g.ranks)  # this process's values, to every other
            if atomic_add(s.remaining, instance, -1) == 1:
                _gathered(g, s, instance, t1)  # the last value in
        _leave_step(s, node, clock, step, t1)
        if nxt < g.n and _ready(s, nxt * T + tile, t1):
            own = nxt * T + tile


# ----- across processes: what the thread that moves messages calls ----------------------------
HEAD = 2  # words before a batch's payloads: the run's number and the instance


@nb.njit(nogil=True, cache=True)
def batch_words(g, instance, rank, incoming):
    """Room for the batch of ``instance``'s halos to (from, with ``incoming``) ``rank``."""
    L = g.links[instance]
    ptr, edges = (g.bi_ptr, g.bi) if incoming else (g.bo_ptr, g.bo)
    total = HEAD
    for k in range(ptr[L, rank], ptr[L, rank + 1]):
        total += g.ed_size[edges[k]]
    return total


@nb.njit(nogil=True, cache=True)
def gather_batch(g, s, instance, rank, buf):
    """Copy the halos of ``instance`` that tiles here packed for tiles on ``rank`` into
    ``buf`` after its head, edge by edge (a packer's payload: its length word and its words);
    returns the words written."""
    L = g.links[instance]
    nedges = g.ed_off.shape[0]
    slot = instance % g.stamp_depth
    k = HEAD
    for i in range(g.bo_ptr[L, rank], g.bo_ptr[L, rank + 1]):
        e = g.bo[i]
        b = slot * s.staging.shape[0] // g.stamp_depth + g.ed_off[e]
        w = g.ed_size[e] if g.packer[L] < 0 else 1 + np.int64(s.staging[b])
        for j in range(w):
            buf[k + j] = s.staging[b + j]
        k += w
        s.consumed[slot * nedges + e] = instance
    return k


@nb.njit(nogil=True, cache=True)
def count_in_batch(g, s, instance, rank):
    """Count in the batch of ``instance`` from ``rank``, its payloads where its readers here
    read them (their staging slots, or their inboxes for payloads packed in Python): each
    reader may now be ready."""
    L = g.links[instance]
    now = monotonic_ns()
    T = g.T
    for i in range(g.bir_ptr[L, rank], g.bir_ptr[L, rank + 1]):
        reader = g.bir[i]
        if _ready(s, instance * T + reader, now):
            _push(s, g.owner[reader], instance * T + reader)


@nb.njit(nogil=True, cache=True)
def count_in(g, s, tasks):
    """Count one input of each of ``tasks`` in (job results from another process); queue those
    made ready."""
    now = monotonic_ns()
    for task in tasks:
        if _ready(s, task, now):
            _push(s, g.owner[task % g.T], task)


@nb.njit(nogil=True, cache=True)
def out_of_room(s):
    """End the segment as a task here with no room would (another process's had none: every
    process redoes the run)."""
    _fail(s, 0, ERROR_CAPACITY)


@nb.njit(nogil=True, cache=True)
def queue_range(s, node, unit):
    """Queue range ``unit`` of the current job phase on ``node`` (its last input from another
    process has come)."""
    _push(s, node, -2 - unit)


@nb.njit(nogil=True, cache=True)
def deliver_batch(g, s, instance, rank, buf):
    """Hand the tiles here the halos of ``instance`` that ``rank`` sent in ``buf``: into their
    staging slots, then count them in (tasks made ready are queued). False, and nothing
    done, while a slot still holds halos its reader has not read (try again later)."""
    L = g.links[instance]
    nedges = g.ed_off.shape[0]
    slot = instance % g.stamp_depth
    for i in range(g.bi_ptr[L, rank], g.bi_ptr[L, rank + 1]):
        at = slot * nedges + g.bi[i]
        if s.written[at] >= 0 and s.consumed[at] != s.written[at]:
            return False
    k = HEAD
    for i in range(g.bi_ptr[L, rank], g.bi_ptr[L, rank + 1]):
        e = g.bi[i]
        b = slot * s.staging.shape[0] // g.stamp_depth + g.ed_off[e]
        w = g.ed_size[e] if g.packer[L] < 0 else 1 + np.int64(buf[k])
        for j in range(w):
            s.staging[b + j] = buf[k + j]
        k += w
        s.written[slot * nedges + e] = instance
    count_in_batch(g, s, instance, rank)
    return True


@nb.njit(nogil=True, cache=True)
def gather_values(g, s, instance, buf):
    """The values of ``instance`` the tiles here gave, in tile order, after the head; returns
    the words written."""
    T, k = g.T, HEAD
    for t in range(T):
        if g.here[t]:
            for j in range(g.nvals[instance]):
                buf[k] = s.vals[instance * T + t, j]
                k += 1
    return k


@nb.njit(nogil=True, cache=True)
def deliver_values(g, s, instance, rank, buf):
    """The values of ``instance`` from ``rank``'s tiles; the last ones in reduce them."""
    T, k = g.T, HEAD
    for t in range(T):
        if g.owner[t] == rank:
            for j in range(g.nvals[instance]):
                s.vals[instance * T + t, j] = buf[k]
                k += 1
    if atomic_add(s.remaining, instance, -1) == 1:
        _gathered(g, s, instance, monotonic_ns())


_SCALARS = ("T", "n", "first", "handle", "stamp_depth", "ranks")
_MATRICES = ("ops", "ctx_src", "rd_ptr", "in_ptr", "pk", "up", "vals", "red", "before", "queue", "ib_off", "ib_cap",
             "rin", "bo_ptr", "bi_ptr", "bir_ptr")
_CUBES = ("to_rank",)
_FLOATS = ("vals", "red", "before", "staging")


def _placeholder(name: str):
    if name in _SCALARS:
        return 0
    shape = (1, 1, 1) if name in _CUBES else (1, 1) if name in _MATRICES else (1,)
    dtype = np.float64 if name in _FLOATS else np.int32 if name in ("words", "o_word") else np.int64
    return np.zeros(shape, dtype)


def placeholders() -> tuple[Graph, Shared]:
    """A graph and shared arrays of the run's types, with the segment already over: what a
    compiled function is called on to compile it (or load it from the cache) before a run."""
    g = Graph(*(_placeholder(name) for name in Graph._fields))
    s = Shared(*(_placeholder(name) for name in Shared._fields))
    return g, s._replace(control=np.array([DONE] + [0] * (CONTROL_SLOTS - 1), np.int64))


def _types_key(a):
    """What decides the Numba type of ``a`` among the arguments the executor passes, read
    cheaply: an array's dtype, dimensions, layout and whether it is writeable; a tuple's
    items; a compiled function's identity; a scalar's Python type."""
    if isinstance(a, np.ndarray):
        return a.dtype.num, a.ndim, a.flags.c_contiguous, a.flags.f_contiguous, a.flags.writeable, a.flags.aligned
    if isinstance(a, tuple):
        return tuple(_types_key(x) for x in a)
    if isinstance(a, (int, float, np.integer, np.floating)):
        return type(a)
    return id(a)


class Typed:
    """A compiled function called from Python again and again with arguments of the same
    types: typed once per distinct types. Numba types the arguments of every call, and a tuple
    of compiled functions (a kernel table) takes it about a third of a millisecond, each time a
    worker starts a segment."""

    def __init__(self, dispatcher):
        self.dispatcher = dispatcher
        self._entries: dict = {}

    def __call__(self, *args):
        key = tuple(_types_key(a) for a in args)
        entry = self._entries.get(key)
        if entry is None:  # (compiled or loaded from the cache when first met)
            entry = self._entries[key] = self.dispatcher.compile(tuple(self.dispatcher.typeof_pyval(a) for a in args))
        return entry(*args)


def warm(kernels, packers, nphases: int, width: int) -> None:
    """Compile (or load from the cache) :func:`work` for this kernel table before a timed run."""
    g, s = placeholders()
    with warnings.catch_warnings():
        # First-class kernels are an "experimental" Numba feature; the trampoline's objmode
        # block holds the lock only inside it (Numba warns for the whole function).
        warnings.simplefilter("ignore", NumbaExperimentalFeatureWarning)
        warnings.filterwarnings("ignore", message=".*object mode won't allow parallel execution")
        work(g, s, kernels, packers, np.zeros(1), np.zeros(1, np.int64), np.zeros(1), 0, 0, nphases, width)


def warm_messages() -> None:
    """Compile (or load from the cache) what the thread that moves messages between processes
    calls (:mod:`~shoal.runtime.native.ranks`), before a timed run: one call of each on
    placeholder arrays."""
    g, s = placeholders()
    none = np.zeros((1, 2), np.int64)  # one links kind, one rank, no edge
    g = g._replace(stamp_depth=1, bo_ptr=none, bi_ptr=none, bir_ptr=none)
    s = s._replace(o_ends=np.zeros(2, np.int64))
    buf = np.zeros(HEAD + 1)
    next_batch(s)
    batch_words(g, 0, 0, False)
    gather_batch(g, s, 0, 0, buf)
    deliver_batch(g, s, 0, 0, buf)
    count_in_batch(g, s, 0, 0)
    count_in(g, s, np.zeros(0, np.int64))
    queue_range(s, 0, 0)
    out_of_room(s)
    gather_values(g, s, 0, buf)
    deliver_values(g, s, 0, 0, buf)
    freeze(s)
    thaw(g, s, 0)
    wait_for_batches(s, 0, 0)
