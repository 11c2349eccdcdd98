"""The MPI executor: one rank per node, a pool of worker threads in each.

Every rank runs the local executor's dependency bookkeeping for its own tiles. Its main
thread is the only one that calls MPI (``MPI_THREAD_FUNNELED``): it posts a non-blocking send
as soon as a worker has packed halos for a tile on another rank, receives whatever has
arrived, and hands it to the waiting tile, while the workers compute other ready tiles. A
reduction gathers every tile's value on every rank (one message per rank and task) and
combines them in tile-id order, so its result is the same on every rank and for every rank
count.

Between chunks of steps :class:`MPITeam` sums measurements, sends every rank the owner table
that rank 0 planned, sends migrating tiles' states to their new owners (packed by the app as
flat arrays), and gathers states on rank 0, which writes every file. Every wait sleeps
instead of spinning, so ranks that share cores do not steal them from ranks still computing.

Every message between ranks (halos, reduction values, tile states, results, stop requests)
travels as one NumPy byte buffer through mpi4py's buffer API (:func:`encode`): a JSON header
naming the arrays :func:`~shoal.runtime.packing.flatten` made of the value, then their bytes.
A rank reads only JSON and numbers from another: nothing received is ever unpickled.

A stop requested on any rank (``request_stop``, Ctrl-C) is negotiated by rank 0: it asks every
rank still running for its frontier (the steps some tile of its has started; the rank starts
no further step meanwhile), takes the largest, and every rank runs exactly that many steps.
Each rank tells rank 0 when it leaves a run, so a rank that has finished answers too.

If a rank raises, it prints the rank, the step and the error and aborts the job. If a rank
dies, ``mpiexec`` terminates the others, which say at which step they stopped.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import signal
import sys
import threading
import time
from pathlib import Path, PurePath
from typing import Any

import mpi4py
import numpy as np

mpi4py.rc.thread_level = "funneled"  # all MPI calls come from each rank's main thread
from mpi4py import MPI  # noqa: E402  (the thread level must be set before MPI starts)

from ..errors import ShoalError  # noqa: E402
from ..records import MESSAGES, TASKS  # noqa: E402
from .local import ExecutionResult, LocalExecutor, sum_present  # noqa: E402
from .packing import flatten, unflatten  # noqa: E402
from .team import Team  # noqa: E402

HALO, REDUCE, AGREE, GATHER, MIGRATE, CONTROL = 1, 2, 3, 4, 5, 6  # message tags
ASK, FREEZE, FRONTIER, LIMIT, DONE = range(5)  # CONTROL messages of a stop (and a rank's end of a run)
WORKER_NICENESS = 5  # nice value of worker threads (Linux sets it per thread)
NAP_MIN_S, NAP_MAX_S = 5e-5, 1e-3  # how long an idle main thread sleeps between polls


def wait_quietly(request: MPI.Request) -> None:
    """Complete a non-blocking MPI operation, sleeping between tests instead of spinning."""
    nap = NAP_MIN_S
    while not request.Test():
        time.sleep(nap)
        nap = min(2 * nap, NAP_MAX_S)


def probe_quietly(comm: MPI.Comm, source: int, tag: int, status: MPI.Status) -> MPI.Message:
    """The next matching message, sleeping between probes instead of spinning."""
    nap = NAP_MIN_S
    while (message := comm.Improbe(source, tag, status)) is None:
        time.sleep(nap)
        nap = min(2 * nap, NAP_MAX_S)
    return message


# ----- messages as NumPy buffers ---------------------------------------------------------
# A message is one uint8 buffer: two little-endian uint64 (the message's length and its
# header's), the JSON header (per flattened array: path, dtype, shape, offset, Fortran order),
# then every array's bytes at an offset aligned for any dtype, so arrays arrive as views.
PREFIX = np.dtype("<u8")
ALIGN = 64
PART_BYTES = 1 << 30  # longest MPI message (counts are C ints): longer ones go as several parts, in order


def _aligned(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def _array_at(buf: np.ndarray, offset: int, dtype: np.dtype, shape: tuple, fortran: bool) -> np.ndarray:
    """The array of ``dtype`` and ``shape`` whose bytes start at ``buf[offset]``, C or Fortran order."""
    size = math.prod(shape) * dtype.itemsize
    if size == 0:
        return np.empty(shape, dtype, order="F" if fortran else "C")
    flat = buf[offset:offset + size].view(dtype)
    return flat.reshape(shape[::-1]).T if fortran else flat.reshape(shape)


def encode(value: Any) -> np.ndarray:
    """``value`` (anything :func:`~shoal.runtime.packing.flatten` takes) as one byte buffer."""
    arrays = flatten(value)
    entries, offset = [], 0
    for path, a in arrays.items():
        if a.dtype.fields is not None or a.dtype.subdtype is not None:
            raise ShoalError(f"message entry {path or '/'} has a structured dtype: send plain arrays")
        fortran = a.ndim > 1 and a.flags.f_contiguous and not a.flags.c_contiguous  # kept as it was
        entries.append((path, a.dtype.str, a.shape, offset, fortran))
        offset = _aligned(offset + a.nbytes)
    header = json.dumps(entries, separators=(",", ":")).encode()
    start = _aligned(2 * PREFIX.itemsize + len(header))
    buf = np.empty(start + offset, dtype=np.uint8)
    buf[:2 * PREFIX.itemsize] = np.array([len(buf), len(header)], dtype=PREFIX).view(np.uint8)
    buf[2 * PREFIX.itemsize:2 * PREFIX.itemsize + len(header)] = np.frombuffer(header, dtype=np.uint8)
    for (_, _, shape, at, fortran), a in zip(entries, arrays.values(), strict=True):
        if a.nbytes:
            np.copyto(_array_at(buf, start + at, a.dtype, shape, fortran), a)
    return buf


def decode(buf: np.ndarray) -> Any:
    """The value :func:`encode` made ``buf`` from; its arrays are views of ``buf``. Reads JSON
    and numbers only: a damaged buffer is a :class:`ShoalError`, never code run."""
    lead = 2 * PREFIX.itemsize
    if len(buf) < lead:
        raise ShoalError(f"an MPI message of {len(buf)} bytes is too short for its header")
    total, length = (int(n) for n in buf[:lead].view(PREFIX))
    if total != len(buf) or lead + length > total:
        raise ShoalError(f"an MPI message of {len(buf)} bytes says it has {total} (header {length})")
    start = _aligned(lead + length)
    try:
        entries = json.loads(bytes(buf[lead:lead + length]).decode())
        arrays = {}
        for path, dtype, shape, offset, fortran in entries:
            dtype, shape, offset = np.dtype(str(dtype)), tuple(int(n) for n in shape), int(offset)
            size = math.prod(shape) * dtype.itemsize
            inside = 0 <= offset <= total - start - size and offset % ALIGN == 0
            if dtype.hasobject or min(shape, default=0) < 0 or not inside:
                raise ValueError(f"entry {path!r} has dtype {dtype}, shape {shape} at offset {offset}")
            arrays[str(path)] = _array_at(buf, start + offset, dtype, shape, bool(fortran))
    except (UnicodeDecodeError, ValueError, TypeError) as exc:
        raise ShoalError(f"an MPI message has a damaged header: {exc}") from None
    return unflatten(arrays)


def _agreeable(obj: Any) -> Any:
    """What :meth:`MPITeam.agree` sends for ``obj``: a path as its text, a run record as its fields."""
    from ..session import RunRecord

    if isinstance(obj, PurePath):
        return {"path": str(obj)}
    if isinstance(obj, RunRecord):
        return {"run": (str(obj.path), obj.summary, obj.stopped_at)}
    return {"value": obj}


def _agreed(sent: dict) -> Any:
    from ..session import RunRecord

    (kind, value), = sent.items()
    if kind == "path":
        return Path(value)
    if kind == "run":
        path, summary, stopped_at = value
        return RunRecord(Path(path), summary, stopped_at)
    return value


def _result_fields(result: ExecutionResult) -> dict:
    """An execution result without its states, reductions keyed by (step, phase) as rows."""
    fields = {f.name: getattr(result, f.name) for f in dataclasses.fields(result) if f.name != "states"}
    fields["reductions"] = [(step, phase, value) for (step, phase), value in result.reductions.items()]
    return fields


def _result(fields: dict) -> ExecutionResult:
    fields["reductions"] = {(step, phase): value for step, phase, value in fields["reductions"]}
    return ExecutionResult(states=None, **fields)


class MPITeam(Team):
    """The ranks of ``MPI.COMM_WORLD``, one per node."""

    def __init__(self, comm: MPI.Comm | None = None):
        super().__init__()
        self.comm = comm if comm is not None else MPI.COMM_WORLD
        self.rank, self.size = self.comm.Get_rank(), self.comm.Get_size()
        self.is_root = self.rank == 0
        self.distributed = True
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self._terminated)

    def _terminated(self, signum, frame) -> None:
        # mpiexec sends SIGTERM to the other ranks when one dies or aborts.
        sys.stderr.write(f"shoal: rank {self.rank} stopped at step {self.step}: another rank failed "
                         "or the job was cancelled\n")
        sys.stderr.flush()
        os._exit(128 + signal.SIGTERM)

    def abort(self, exc: BaseException) -> None:
        """Say which rank failed where, and stop every rank of the job."""
        where = "" if hasattr(exc, "step") else f" at step {self.step}"  # task errors name their step
        sys.stderr.write(f"error: rank {self.rank} failed{where}: {exc}\n")
        sys.stderr.flush()
        self.comm.Abort(2)

    def barrier(self) -> None:
        wait_quietly(self.comm.Ibarrier())

    def executor(self, app, tiling, cluster, owner, overlap: bool = True):
        return MPIExecutor(app, tiling, cluster, owner, self, overlap)

    def local_tiles(self, owner: np.ndarray) -> np.ndarray:
        return np.flatnonzero(np.asarray(owner) == self.rank)

    def sum(self, values: np.ndarray) -> np.ndarray:
        values = np.ascontiguousarray(values)
        out = np.empty_like(values)
        wait_quietly(self.comm.Iallreduce(values, out, op=MPI.SUM))
        return out

    def max(self, value: float) -> float:
        out = np.empty(1)
        wait_quietly(self.comm.Iallreduce(np.array([value], dtype=np.float64), out, op=MPI.MAX))
        return float(out[0])

    # Messages travel point to point, waited for in sleeping loops: a rank whose peer died is
    # then never stuck inside MPI and can still say where it stopped.
    def post(self, value: Any, dest: int, tag: int) -> list[MPI.Request]:
        """Start sending ``value`` (see :func:`encode`) to rank ``dest``: the requests to complete."""
        buf = encode(value)
        return [self.comm.Isend([buf[lo:lo + PART_BYTES], MPI.BYTE], dest=dest, tag=tag)
                for lo in range(0, len(buf), PART_BYTES)]

    def receive(self, message: MPI.Message, status: MPI.Status) -> Any:
        """The value of a message matched with ``status`` (its further parts received too)."""
        source, tag = status.Get_source(), status.Get_tag()
        first = np.empty(status.Get_count(MPI.BYTE), dtype=np.uint8)
        message.Recv([first, MPI.BYTE])
        total = int(first[:PREFIX.itemsize].view(PREFIX)[0]) if len(first) >= PREFIX.itemsize else 0
        if total <= len(first):
            return decode(first)
        buf = np.empty(total, dtype=np.uint8)
        buf[:len(first)] = first
        got, part = len(first), MPI.Status()
        while got < total:  # the other parts follow in order (MPI does not overtake)
            message = probe_quietly(self.comm, source, tag, part)
            size = part.Get_count(MPI.BYTE)
            if got + size > total:
                raise ShoalError(f"rank {self.rank} received {got + size} bytes of a {total}-byte message")
            message.Recv([buf[got:got + size], MPI.BYTE])
            got += size
        return decode(buf)

    def _take(self, source: int, tag: int) -> Any:
        status = MPI.Status()
        return self.receive(probe_quietly(self.comm, source, tag, status), status)

    @staticmethod
    def _complete(requests) -> None:
        for request in requests:
            wait_quietly(request)

    def _to_root(self, obj: Any, tag: int) -> list[Any] | None:
        """Every rank's ``obj`` on rank 0, in rank order (``None`` elsewhere)."""
        if not self.is_root:
            self._complete(self.post(obj, 0, tag))
            return None
        return [obj] + [self._take(rank, tag) for rank in range(1, self.size)]

    def agree(self, obj: Any) -> Any:
        if self.is_root:
            self._complete([r for rank in range(1, self.size) for r in self.post(_agreeable(obj), rank, AGREE)])
            return obj
        return _agreed(self._take(0, AGREE))

    def to_root(self, states: dict[int, Any], pack, unpack) -> dict[int, Any] | None:
        parts = self._to_root(_packed(states, pack), GATHER)
        if parts is None:
            return None
        merged = {t: arrays for part in parts for t, arrays in part}
        return {t: unpack(dict(merged[t])) for t in sorted(merged)}

    def migrate(self, states: dict[int, Any], old: np.ndarray, new: np.ndarray, pack, unpack) -> dict[int, Any]:
        kept = {t: s for t, s in states.items() if new[t] == self.rank}
        others = [r for r in range(self.size) if r != self.rank]
        sent = [request for r in others
                for request in self.post(_packed({t: s for t, s in states.items() if new[t] == r}, pack), r, MIGRATE)]
        for r in others:
            kept.update({t: unpack(dict(arrays)) for t, arrays in self._take(r, MIGRATE)})
        self._complete(sent)
        return dict(sorted(kept.items()))

    def combine(self, result: ExecutionResult) -> ExecutionResult | None:
        parts = self._to_root(_result_fields(result), GATHER)
        return combine_ranks([_result(p) for p in parts]) if parts is not None else None


def _packed(states: dict[int, Any], pack) -> list[tuple[int, list]]:
    """Tile states as (tile, [(path, array), ...]) of their packed arrays: what a message holds."""
    return [(int(t), list(pack(s).items())) for t, s in states.items()]


def combine_ranks(parts: list[ExecutionResult]) -> ExecutionResult:
    """One result from every rank's: each task row comes from the rank that ran it, each
    message from the rank that sent it."""
    base = parts[0]
    tasks = dict(base.tasks)
    for name in TASKS.names:
        if name in ("step", "phase", "tile") or name not in tasks:
            continue
        col = tasks[name].copy()
        for p in parts[1:]:
            ran = p.tasks["node"] >= 0
            col[ran] = p.tasks[name][ran]
        tasks[name] = col
    msg = MESSAGES.concat([p.messages for p in parts])
    order = np.lexsort((msg["dst"], msg["src"], msg["phase"], msg["step"]))
    return ExecutionResult(
        states=None, first_step=base.first_step, steps=base.steps, tasks=tasks, messages=MESSAGES.select(msg, order),
        reductions=base.reductions, wall_s=max(p.wall_s for p in parts),
        step_end=np.max([p.step_end for p in parts], axis=0), oversubscribed=any(p.oversubscribed for p in parts),
        comm_cpu_s=sum_present([p.comm_cpu_s for p in parts]),
        comm_messages=sum_present([p.comm_messages for p in parts]),
    )


class MPIExecutor(LocalExecutor):
    """The local executor's bookkeeping for this rank's tiles, with halos and reduction values
    to and from other ranks carried by the main thread.

    With ``overlap=False`` halos for other ranks are held back until every tile of this rank
    has finished the task that packed them, as in a bulk-synchronous code: the comparison
    that shows what overlapping communication with other tiles' work buys.
    """

    def __init__(self, app, tiling, cluster, owner, team: MPITeam, overlap: bool = True):
        if cluster.nodes != team.size:
            raise ShoalError(f"an MPI run has one node per rank: {cluster.nodes} nodes but {team.size} ranks")
        self.team, self.comm, self.rank = team, team.comm, team.rank
        self.overlap = overlap
        self._run_id = 0  # every rank runs the same sequence of runs: CONTROL messages name theirs
        super().__init__(app, tiling, cluster, owner)

    def run(self, *args, **kwargs) -> ExecutionResult:
        self._run_id += 1
        result = super().run(*args, **kwargs)
        # What the communication thread cost: the replay charges it per message.
        result.comm_cpu_s = np.zeros(self.cluster.nodes)
        result.comm_messages = np.zeros(self.cluster.nodes, np.int64)
        result.comm_cpu_s[self.rank], result.comm_messages[self.rank] = self._comm_cpu, self._comm_count
        return result

    def _nodes_here(self) -> list[int]:
        return [self.rank]

    def _tiles_here(self) -> np.ndarray:
        return self.owner == self.rank

    def _setup(self, steps, states, first_step):
        super()._setup(steps, states, first_step)
        self._outbox: list[tuple[int, int, Any]] = []  # (rank, tag, message) for the main thread
        self._mine: dict[int, dict[int, float]] = {}  # this rank's reduction values per task
        self._n_here = int(self._here.sum())
        self._local_done = self._n_here == 0
        self._wake = threading.Event()
        self._held: list[tuple[int, int, Any]] = []  # halos waiting for the phase's end (no overlap)
        self._comm_cpu, self._comm_count = 0.0, 0  # the main thread's CPU time; payloads it moved
        self._sending: list = []  # messages this rank's main thread has sent and not seen complete
        self._asked = False  # this rank has passed on a stop request
        self._frozen = False  # this rank stopped at its frontier and waits for rank 0's limit
        self._answers: dict[int, int] | None = None  # rank 0, while negotiating a stop: steps per rank
        self._left: dict[int, int] = {}  # rank 0: the ranks that have left this run, and their steps

    def _worker_started(self) -> None:
        # Workers yield to the main thread when it wakes: halos then leave sooner instead of
        # waiting for a worker's time slice to end on a node whose cores are all busy.
        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), WORKER_NICENESS)
        except (AttributeError, OSError):
            pass

    def _start_clock(self) -> float:
        self.team.barrier()  # every rank is set up before the first message is sent
        return time.perf_counter()

    def _wall(self) -> float:
        return self.team.max(time.perf_counter() - self._t0)

    def _post_halos(self, tile, task, halo_out) -> None:
        remote: dict[int, list] = {}
        for dst, payload in halo_out:
            if self._here[dst]:
                self._inbox[dst].setdefault(task, {})[tile] = payload
            else:
                remote.setdefault(int(self.owner[dst]), []).append((dst, payload))
        for rank, items in remote.items():
            self._outbox.append((rank, HALO, (task, tile, items)))
        if remote:
            self._wake.set()
        for dst, _ in halo_out:
            self._try_ready(dst)

    def _contribute(self, tile, task, value) -> None:
        mine = self._mine.setdefault(task, {})
        mine[tile] = value
        if len(mine) == self._n_here:
            del self._mine[task]
            message = (task, list(mine), list(mine.values()))
            for rank in range(self.team.size):
                if rank != self.rank:
                    self._outbox.append((rank, REDUCE, message))
            self._wake.set()
        self._collect({tile: value}, task)

    def _all_done(self) -> None:
        self._local_done = True
        self._wake.set()

    def _limit_steps(self, steps: int) -> None:
        super()._limit_steps(steps)
        # A limit raised again (rank 0's, above this rank's frontier) has steps left to run here.
        self._local_done = self._n_here == 0 or self._steps_done >= self._limit // len(self.phases)

    def _receive(self, tag: int, message) -> None:
        if tag == HALO:
            task, src, items = message
            for dst, payload in items:
                self._inbox[dst].setdefault(task, {})[src] = payload
            for dst, _ in items:
                self._try_ready(dst)
        elif tag == REDUCE:
            task, tiles, values = message
            self._collect(dict(zip(tiles, values, strict=True)), task)
        else:
            raise ShoalError(f"rank {self.rank} received a message with unknown tag {tag}")

    def _release(self, out: list) -> list:
        """Without overlap: the messages whose producing task every local tile has finished."""
        self._held.extend(out)
        finished = int(np.asarray(self._next)[self._here].min()) if self._n_here else self._ntasks
        ready = [m for m in self._held if m[1] != HALO or m[2][0] <= finished]
        self._held = [m for m in self._held if m[1] == HALO and m[2][0] > finished]
        return ready

    def _wait(self, on_step, stop) -> int:
        """The communication loop: send, receive, report, until this rank has nothing left."""
        comm, status = self.comm, MPI.Status()
        cpu0 = time.thread_time()
        try:
            return self._communicate(on_step, comm, status, stop)
        finally:
            self._comm_cpu = time.thread_time() - cpu0

    def _communicate(self, on_step, comm, status, stop) -> int:
        sending = self._sending
        reported, nap = 0, NAP_MIN_S
        while True:
            self._wake.clear()
            if stop is not None and stop.is_set() and not self._asked:
                self._asked = True
                if self.team.is_root:
                    self._negotiate()
                else:
                    self._control(0, ASK)
            with self._lock:
                out, self._outbox = self._outbox, []
                if not self.overlap:
                    out = self._release(out)
            for rank, tag, message in out:
                sending.extend(self.team.post(message, rank, tag))
                self._comm_count += len(message[2]) if tag == HALO else 0
            received = 0
            while (incoming := comm.Improbe(MPI.ANY_SOURCE, MPI.ANY_TAG, status)) is not None:
                source, tag = status.Get_source(), status.Get_tag()
                message = self.team.receive(incoming, status)
                if tag == CONTROL:
                    self._on_control(source, *message)
                else:
                    self._comm_count += len(message[2]) if tag == HALO else 0
                    with self._lock:
                        self._receive(tag, message)
                received += 1
            sending[:] = [r for r in sending if not r.Test()]
            self.team.step = self.first_step + self._steps_done
            reported = self._report(on_step, reported)
            if self._error is not None:
                return reported
            with self._lock:
                finished = (self._local_done and self._reductions_left == 0 and not self._outbox and not sending
                            and not self._held and not self._frozen)
            if finished and self.team.is_root and self._answers is None and len(self._left) == self.team.size - 1:
                with self._lock:
                    self._stop()
                return reported
            if finished and not self.team.is_root:
                self._control(0, DONE, self._limit // len(self.phases))
                self.team._complete(sending)
                with self._lock:
                    self._stop()
                return reported
            if out or received:
                nap = NAP_MIN_S
                continue
            self._wake.wait(nap)
            # Poll often while a worker here waits for work (what it needs may be arriving);
            # back off while every worker is busy.
            nap = NAP_MIN_S if self._waiting[self.rank] else min(2 * nap, NAP_MAX_S)

    # ----- stopping at a step boundary every rank agrees on --------------------------------
    def _control(self, rank: int, kind: int, value: int = 0) -> None:
        self._sending.extend(self.team.post((self._run_id, kind, value), rank, CONTROL))

    def _on_control(self, source: int, run_id: int, kind: int, value: int) -> None:
        if run_id != self._run_id:
            return  # meant for a run this rank had already left
        if kind == ASK:
            self._negotiate()
        elif kind == FREEZE:
            with self._lock:
                frontier = self._frontier()
                self._limit_steps(frontier)
                self._frozen = True
            self._control(0, FRONTIER, frontier)
        elif kind == LIMIT:
            with self._lock:
                self._limit_steps(value)
                self._frozen = False
        elif kind in (FRONTIER, DONE):
            if kind == DONE:
                self._left[source] = value
            if self._answers is not None:
                self._answers[source] = value
                self._settle_limit()

    def _negotiate(self) -> None:
        """Rank 0: stop here at the frontier, and ask every rank still running for its own."""
        if self._stopping:
            return  # once per run
        self._stopping = True
        with self._lock:
            frontier = self._frontier()
            self._limit_steps(frontier)
        self._answers = {0: frontier, **self._left}
        for rank in range(1, self.team.size):
            if rank not in self._left:
                self._control(rank, FREEZE)
        self._settle_limit()

    def _settle_limit(self) -> None:
        """Rank 0, once every rank has answered: every rank runs the largest frontier's steps."""
        if len(self._answers) < self.team.size:
            return
        steps = max(self._answers.values())
        with self._lock:
            self._limit_steps(steps)
        for rank in range(1, self.team.size):
            if rank not in self._left:
                self._control(rank, LIMIT, steps)
        self._answers = None
