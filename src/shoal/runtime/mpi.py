"""The MPI executor: one rank per node, a pool of worker threads in each.

Every rank runs the local executor's dependency bookkeeping for its own tiles, and its
workers move the messages themselves, one at a time (``MPI_THREAD_SERIALIZED``): before each
task a worker posts a non-blocking send for the halos packed for tiles on other ranks,
receives whatever has arrived and hands it to the waiting tiles; while the rank has no ready
task, one idle worker polls for messages (without sleeping for a moment, then in short naps)
and the others sleep. No communication thread polls beside the workers: it would take the
interpreter lock from them at every poll, each time paying a wake-up, which on tasks of
0.1 ms costs more than their own bookkeeping. A rank of one worker runs it on its main thread.
Tiles with neighbours on another rank run first, so that their halos leave early. A
reduction gathers every tile's value on every rank (one message per rank and task) and
combines them in tile-id order, so its result is the same on every rank and for every rank
count. The jobs a phase emits are gathered the same way, so every rank places them on the same
nodes and cuts them into the same ranges; as it places them, a rank sends the input of each of
its tiles once to every other rank whose ranges read it, runs its own ranges as their inputs
arrive, and sends each result to the rank of the tile it is for. A rank leaves a run only once
its ranges have run and their results have left.

Between chunks of steps :class:`MPITeam` sums measurements, sends every rank the owner table
that rank 0 planned, sends migrating tiles' states to their new owners (packed by the app as
flat arrays), and gathers states on rank 0, which writes every file. Every wait longer than a
moment sleeps instead of spinning, so ranks that share cores do not steal them from ranks still
computing.

Every message between ranks (halos, reduction values, job inputs and results, tile states,
run results, stop requests) travels as one NumPy byte buffer through mpi4py's buffer API
(:func:`encode`): a JSON header naming the arrays :func:`~shoal.runtime.packing.flatten` made
of the value, then their bytes. A rank reads only JSON and numbers from another: nothing
received is ever unpickled.

A stop requested on any rank (``request_stop``, Ctrl-C) is negotiated by rank 0: it asks every
rank still running for its frontier (the steps some tile of its has started; the rank starts
no further step meanwhile), takes the largest, and every rank runs exactly that many steps.
Each rank tells rank 0 when it leaves a run, so a rank that has finished answers too.

If a rank raises, it prints the rank, the step and the error and aborts the job. If a rank
dies, ``mpiexec`` terminates the others, which say at which step they stopped.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import signal
import struct
import sys
import threading
import time
from pathlib import Path, PurePath
from typing import Any

import mpi4py
import numpy as np

mpi4py.rc.thread_level = "serialized"  # any worker may call MPI, one at a time
from mpi4py import MPI  # noqa: E402  (the thread level must be set before MPI starts)

from ..errors import ShoalError  # noqa: E402
from ..records import JOB_RUNS, MESSAGES, TASKS  # noqa: E402
from .local import ExecutionResult, LocalExecutor, as_worker_thread, reduced_value, sum_present  # noqa: E402
from .packing import LAYOUT, compact_json, flatten, unflatten  # noqa: E402
from .team import Team  # noqa: E402

HALO, REDUCE, AGREE, GATHER, MIGRATE, CONTROL, JOB_INPUT, JOB_RESULT = 1, 2, 3, 4, 5, 6, 7, 8  # message tags
PAYLOADS = (HALO, JOB_INPUT, JOB_RESULT)  # tags whose values are tile payloads (counted as moved)
ASK, FREEZE, FRONTIER, LIMIT, DONE = range(5)  # CONTROL messages of a stop (and a rank's end of a run)
NAP_MIN_S, NAP_MAX_S = 5e-5, 1e-3  # how long a waiting thread sleeps between polls
SPIN_S = 5e-5  # how long the idle worker that moves messages polls before it naps


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
# A message starts with one byte buffer: four little-endian uint64 (a magic number, how many
# routing integers follow, the lengths of the JSON header and of the layout), the integers
# (int64), the header (per array: path, dtype, shape, Fortran order, whether it travels
# inline), the value's layout from flatten, then each small array's bytes at an aligned
# offset. Each large array follows as its own message(s), sent from its own memory and
# received straight into a new array: no copy on either side. Headers repeat from step to
# step (the same halos), so both sides keep the latest ones made and read.
PREFIX = struct.Struct("<4Q")
MAGIC = int.from_bytes(b"shoalmsg", "little")
ALIGN = 16  # the largest alignment a NumPy dtype needs
INLINE_BYTES = 1 << 15  # arrays up to this size travel in the first buffer (one message for a halo)
PART_BYTES = 1 << 30  # longest MPI message (counts are C ints): longer arrays go as several, in order
PADDING = [bytes(n) for n in range(ALIGN)]
_dtype_names: dict[np.dtype, str] = {}  # each dtype's ``str``, as headers name it


def _bytes_of(a: np.ndarray) -> np.ndarray:
    """The bytes of a C-contiguous array, as a flat uint8 view."""
    return a.reshape(-1).view(np.uint8)


@functools.lru_cache(maxsize=4096)
def _header(entries: tuple) -> bytes:
    return compact_json(entries).encode()


@functools.lru_cache(maxsize=4096)
def _entries(header: bytes) -> tuple:
    """A header's arrays as (path, dtype, stored shape, Fortran order, inline), checked."""
    entries = []
    for path, dtype, shape, fortran, small in json.loads(header.decode()):
        dtype, shape = np.dtype(str(dtype)), tuple(int(n) for n in shape)
        if dtype.hasobject or min(shape, default=0) < 0:
            raise ValueError(f"entry {path!r} has dtype {dtype} and shape {shape}")
        n = math.prod(shape)
        entries.append((str(path), dtype, shape[::-1] if fortran else shape, bool(fortran), bool(small), n,
                        n * dtype.itemsize))
    return tuple(entries)


def encode(value: Any, ints=()) -> tuple[bytes, list[np.ndarray]]:
    """``value`` (anything :func:`~shoal.runtime.packing.flatten` takes) and routing integers
    ``ints`` as a first byte buffer, and the large arrays (C-contiguous) that follow it."""
    arrays = flatten(value)
    layout = arrays.pop(LAYOUT)
    entries, inline, large = [], [], []
    for path, a in arrays.items():
        dtype = a.dtype
        if dtype.kind == "V" and (dtype.fields is not None or dtype.subdtype is not None):
            raise ShoalError(f"message entry {path or '/'} has a structured dtype: send plain arrays")
        if a.flags.c_contiguous:
            c, fortran = a, False
        else:  # a Fortran-ordered array is kept as it was; anything else is copied
            fortran = a.ndim > 1 and a.flags.f_contiguous
            c = a.T if fortran else a.copy()
        small = c.nbytes <= INLINE_BYTES
        name = _dtype_names.get(dtype) or _dtype_names.setdefault(dtype, dtype.str)  # .str is slow to make
        entries.append((path, name, a.shape, fortran, small))
        (inline if small else large).append(c)
    header = _header(tuple(entries))
    lead = PREFIX.pack(MAGIC, len(ints), len(header), len(layout)) + struct.pack(f"<{len(ints)}q", *ints)
    parts = [lead, header, layout]
    at = len(lead) + len(header) + len(layout)
    for c in inline:
        if c.nbytes:
            pad = -at % ALIGN
            parts += [PADDING[pad], c]  # joined through its buffer: no view made
            at += pad + c.nbytes
    return b"".join(parts), large


def decode(first: np.ndarray, take_array) -> tuple[list[int], Any]:
    """The routing integers and the value :func:`encode` made; ``take_array(out)`` receives a
    large array's bytes into the flat uint8 array ``out``. Reads JSON and numbers only: a
    damaged message is a :class:`ShoalError`, never code run."""
    try:
        magic, count, length, layout = PREFIX.unpack_from(first)
        if magic != MAGIC:
            raise ValueError("it does not start like a shoal message")
        ints = list(struct.unpack_from(f"<{count}q", first, PREFIX.size))
        at = PREFIX.size + 8 * count
        arrays = {LAYOUT: first[at + length:at + length + layout]}
        entries, at = _entries(bytes(first[at:at + length])), at + length + layout
        for path, dtype, stored, fortran, small, n, nbytes in entries:
            if not small:
                a = np.empty(stored, dtype)
                take_array(_bytes_of(a))
            elif nbytes == 0:
                a = np.empty(stored, dtype)
            else:
                at += -at % ALIGN
                a = np.frombuffer(first, dtype, n, at)
                if len(stored) != 1:
                    a = a.reshape(stored)
                at += nbytes
            arrays[path] = a.T if fortran else a
    except (UnicodeDecodeError, ValueError, TypeError, struct.error) as exc:
        raise ShoalError(f"an MPI message is damaged: {exc}") from None
    return ints, unflatten(arrays)


def _agreeable(obj: Any) -> Any:
    """What :meth:`MPITeam.agree` sends for ``obj``: a path as its text, anything else as it is."""
    if isinstance(obj, PurePath):
        return {"path": str(obj)}
    return {"value": obj}


def _agreed(sent: dict) -> Any:
    (kind, value), = sent.items()
    return Path(value) if kind == "path" else value


def _result_fields(result: ExecutionResult) -> dict:
    """An execution result without its states, reductions keyed by (step, phase) as rows."""
    fields = {f.name: getattr(result, f.name) for f in dataclasses.fields(result) if f.name != "states"}
    fields["reductions"] = [(step, phase, value) for (step, phase), value in result.reductions.items()]
    fields["iterations"] = [(step, loop, n) for (step, loop), n in result.iterations.items()]
    return fields


def _result(fields: dict) -> ExecutionResult:
    fields["reductions"] = {(step, phase): reduced_value(value) for step, phase, value in fields["reductions"]}
    fields["iterations"] = {(step, loop): n for step, loop, n in fields["iterations"]}
    return ExecutionResult(states=None, **fields)


class MPITeam(Team):
    """The ranks of ``MPI.COMM_WORLD``, one per node."""

    def __init__(self, comm: MPI.Comm | None = None):
        super().__init__()
        if MPI.Query_thread() < MPI.THREAD_SERIALIZED:  # MPI was started before shoal asked for it
            raise ShoalError("MPI was started with a thread level below MPI_THREAD_SERIALIZED, which shoal's "
                             "workers need (they call MPI one at a time): set mpi4py.rc.thread_level to "
                             "'serialized' or 'multiple' before importing mpi4py.MPI")
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

    def executor(self, app, tiling, cluster, owner, overlap: bool = True, backend: str = "auto"):
        """The executor of this rank's tiles: the Python one (``backend="python"``), or the
        native one (``"native"``: :mod:`shoal.runtime.native.ranks`, which always overlaps
        halos with work). ``"auto"`` picks the native one where it runs the app on ranks."""
        from .native.ranks import NativeRanksExecutor, runs_on_ranks

        if backend == "native" or (backend == "auto" and overlap and app.native_by_default
                                   and runs_on_ranks(app, tiling) is None):
            if not overlap:
                raise ShoalError("the native executor always overlaps halos with work (run.overlap = false "
                                 "needs --executor python)")
            return NativeRanksExecutor(app, tiling, cluster, owner, self)
        return MPIExecutor(app, tiling, cluster, owner, self, overlap)

    def local_tiles(self, owner: np.ndarray) -> np.ndarray:
        return np.flatnonzero(np.asarray(owner) == self.rank)

    def sum(self, values: np.ndarray) -> np.ndarray:
        values = np.ascontiguousarray(values)
        out = np.empty_like(values)
        wait_quietly(self.comm.Iallreduce(values, out, op=MPI.SUM))
        return out

    def concatenate(self, values: np.ndarray) -> np.ndarray:
        """Every rank's int64 ``values`` end to end, in rank order, on every rank.

        Parameters
        ----------
        values : ndarray
            This rank's (one axis; any length, none too).
        """
        values = np.ascontiguousarray(values, np.int64)
        counts = np.empty(self.size, np.int64)
        wait_quietly(self.comm.Iallgather(np.array([values.size], np.int64), counts))
        out = np.empty(int(counts.sum()), np.int64)
        wait_quietly(self.comm.Iallgatherv(values, [out, counts]))
        return out

    def max(self, value: float) -> float:
        out = np.empty(1)
        wait_quietly(self.comm.Iallreduce(np.array([value], dtype=np.float64), out, op=MPI.MAX))
        return float(out[0])

    # Messages travel point to point, waited for in sleeping loops: a rank whose peer died is
    # then never stuck inside MPI and can still say where it stopped.
    def post(self, value: Any, dest: int, tag: int, ints=()) -> list[MPI.Request]:
        """Start sending ``value`` and routing integers ``ints`` (see :func:`encode`) to rank
        ``dest``: the requests to complete (each keeps its buffer alive)."""
        first, large = encode(value, ints)
        requests = [self.comm.Isend([first, MPI.BYTE], dest=dest, tag=tag)]
        for a in large:
            raw = _bytes_of(a)
            requests += [self.comm.Isend([raw[lo:lo + PART_BYTES], MPI.BYTE], dest=dest, tag=tag)
                         for lo in range(0, len(raw), PART_BYTES)]
        return requests

    def receive(self, message: MPI.Message, status: MPI.Status) -> tuple[list[int], Any]:
        """The routing integers and value of a message matched with ``status`` (its large
        arrays, which follow it in order from the same rank and tag, received too)."""
        source, tag = status.Get_source(), status.Get_tag()
        first = np.empty(status.Get_count(MPI.BYTE), dtype=np.uint8)
        message.Recv([first, MPI.BYTE])
        part = MPI.Status()

        def take_array(out: np.ndarray) -> None:
            for lo in range(0, len(out), PART_BYTES):
                # Sent right behind the first buffer: poll briefly before napping.
                follow = next((m for _ in range(200) if (m := self.comm.Improbe(source, tag, part)) is not None),
                              None) or probe_quietly(self.comm, source, tag, part)
                if part.Get_count(MPI.BYTE) != min(PART_BYTES, len(out) - lo):
                    raise ValueError(f"an array's part from rank {source} has {part.Get_count(MPI.BYTE)} bytes")
                follow.Recv([out[lo:lo + PART_BYTES], MPI.BYTE])

        return decode(first, take_array)

    def _take(self, source: int, tag: int) -> Any:
        status = MPI.Status()
        return self.receive(probe_quietly(self.comm, source, tag, status), status)[1]

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


def _instances(tasks: dict, messages: dict) -> np.ndarray:
    """The place of every message's reading task in the run's sequence of phases (the task rows
    are in that order, every rank's alike): (step, phase) without loops, a loop's iteration too."""
    keys = ["step", "iteration", "phase"] if "iteration" in tasks else ["step", "phase"]
    seen, first = np.unique(np.stack([tasks[k] for k in keys], axis=1), axis=0, return_index=True)
    where = {tuple(row): int(rank) for row, rank in zip(seen.tolist(), np.argsort(np.argsort(first)), strict=True)}
    return np.array([where[row] for row in zip(*(messages[k].tolist() for k in keys), strict=True)], dtype=np.int64)


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
    order = np.lexsort((msg["dst"], msg["src"], _instances(tasks, msg)))
    return ExecutionResult(
        states=None, first_step=base.first_step, steps=base.steps, tasks=tasks, messages=MESSAGES.select(msg, order),
        reductions=base.reductions, iterations=base.iterations, wall_s=max(p.wall_s for p in parts),
        step_end=np.max([p.step_end for p in parts], axis=0), oversubscribed=any(p.oversubscribed for p in parts),
        comm_cpu_s=sum_present([p.comm_cpu_s for p in parts]),
        comm_messages=sum_present([p.comm_messages for p in parts]),
        jobs=_combined_jobs(parts),
    )


def _combined_jobs(parts: list[ExecutionResult]) -> dict[str, np.ndarray] | None:
    """Every rank's job rows (each range's from the rank that ran it), by step, iteration,
    phase, job and first item; ``None`` if no rank ran a range."""
    tables = [p.jobs for p in parts if p.jobs is not None]
    if not tables:
        return None
    jobs = JOB_RUNS.concat(tables)
    order = np.lexsort((jobs["first"], jobs["job"], jobs["phase"], jobs["iteration"], jobs["step"]))
    return JOB_RUNS.select(jobs, order)


class MPIExecutor(LocalExecutor):
    """The local executor's bookkeeping for this rank's tiles, with halos, reduction values and
    jobs' inputs and results to and from other ranks moved by the workers between their tasks.

    With ``overlap=False`` halos for other ranks are held back until every tile of this rank
    has finished the task that packed them, as in a bulk-synchronous code: the comparison
    that shows what overlapping communication with other tiles' work buys.
    """

    def __init__(self, app, tiling, cluster, owner, team: MPITeam, overlap: bool = True,
                 job_policy: str = "locality"):
        if cluster.nodes != team.size:
            raise ShoalError(f"an MPI run has one node per rank: {cluster.nodes} nodes but {team.size} ranks")
        self.team, self.comm, self.rank = team, team.comm, team.rank
        self.overlap = overlap
        self._run_id = 0  # every rank runs the same sequence of runs: CONTROL messages name theirs
        super().__init__(app, tiling, cluster, owner, job_policy=job_policy)

    def run(self, *args, **kwargs) -> ExecutionResult:
        self._run_id += 1
        result = super().run(*args, **kwargs)
        # What moving messages cost the workers: the replay charges it per message.
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
        self._outbox: list[tuple[int, int, tuple]] = []  # (rank, tag, (ints, values)) to send
        self._mine: dict[int, dict[int, float]] = {}  # this rank's reduction values per task
        self._n_here = int(self._here.sum())
        self._local_done = self._n_here == 0
        self._held: list[tuple[int, int, Any]] = []  # halos waiting for the phase's end (no overlap)
        # Ranges of jobs this rank runs: the inputs of tiles elsewhere, per job phase's task and
        # tile (kept from their arrival, which may come before this rank's emission); per
        # (task, range) how many of those it still lacks, and per (task, tile) the ranges
        # waiting for it; per task, its ranges here not yet run (the rank stays until none is).
        self._fetched: dict[int, dict[int, Any]] = {}
        self._lacking: dict[tuple[int, int], int] = {}
        self._awaiting: dict[tuple[int, int], list[int]] = {}
        self._units_open: dict[int, int] = {}
        self._comm_cpu, self._comm_count = 0.0, 0  # time spent moving messages; payloads moved
        self._comm = threading.Lock()  # held by the worker moving messages: one MPI call at a time
        self._on_step, self._stop_asked, self._reported = None, None, 0  # set by _wait
        self._sending: list = []  # messages this rank has sent and not seen complete
        self._asked = False  # this rank has passed on a stop request
        self._frozen = False  # this rank stopped at its frontier and waits for rank 0's limit
        self._answers: dict[int, int] | None = None  # rank 0, while negotiating a stop: steps per rank
        self._left: dict[int, int] = {}  # rank 0: the ranks that have left this run, and their steps
        self._status = MPI.Status()
        self._splits = {}  # per distinct links of the run's tasks, made when first posted (see _split_of)
        # Tiles here with a neighbour on another rank in any phase: they go first (see _enqueue).
        owner = self.owner
        self._remote = [bool(self._here[t]) and any(owner[n] != self.rank for n in nb)
                        for t, nb in enumerate(self.tiling.neighbours)]
        self._pump, self._idle_wait = self._between_tasks, self._wait_for_work
        pool = self._pools[self.rank]
        if pool.size == 1 and not pool.pinned:  # one worker: the main thread is it (see _run_inline)
            self._inline = self.rank

    def _start_clock(self) -> float:
        self.team.barrier()  # every rank is set up before the first message is sent
        return time.perf_counter()

    def _wall(self) -> float:
        return self.team.max(time.perf_counter() - self._t0)

    def _post_halos(self, tile, task, payloads) -> None:
        links = self._links[task]
        split = self._split_of(links)[tile]
        readers = links.readers[tile]
        if split is None:  # every reader is here
            self._deliver(tile, task, readers, payloads)
            return
        here, there = split
        for rank, dsts, picks in there:  # routing: the task, this tile, each payload's tile
            self._outbox.append((rank, HALO, ((task, tile, *dsts), [payloads[k] for k in picks])))
        if here:
            self._deliver(tile, task, [readers[k] for k in here], [payloads[k] for k in here])

    def _enqueue(self, node: int, tile: int, task: int) -> None:
        super()._enqueue(node, tile, task)
        if tile >= 0 and self._remote[tile]:  # (ranges of jobs, tile < -1, keep their order)
            # A tile with neighbours on other ranks goes first (the lock is held: the task just
            # queued is still last): its halos then leave while this rank computes its inner
            # tiles, and the other ranks wait less for them.
            self._queues[node].rotate(1)

    def _split_of(self, links) -> list:
        """Per tile here whose halos of ``links`` go to another rank: (the indices of its readers
        here, [(rank, those readers there, their indices), ...]); ``None`` where all are here."""
        split = self._splits.get(id(links))
        if split is None:
            split = self._splits[id(links)] = self._split_readers(links)
        return split

    def _split_readers(self, links) -> list:
        split = [None] * self.tiling.ntiles
        for tile in np.flatnonzero(self._here):
            nb = links.readers[tile]
            ranks = [int(self.owner[d]) for d in nb]
            if all(r == self.rank for r in ranks):
                continue
            there = {}
            for k, (d, r) in enumerate(zip(nb, ranks, strict=True)):
                if r != self.rank:
                    there.setdefault(r, ([], []))
                    there[r][0].append(d)
                    there[r][1].append(k)
            split[tile] = ([k for k, r in enumerate(ranks) if r == self.rank],
                           [(r, tuple(d), p) for r, (d, p) in there.items()])
        return split

    def _contribute(self, tile, task, value) -> None:
        mine = self._mine.setdefault(task, {})
        mine[tile] = value
        if len(mine) == self._n_here:
            del self._mine[task]
            message = ((task, *mine), list(mine.values()))  # routing: the task and the tiles
            for rank in range(self.team.size):
                if rank != self.rank:
                    self._outbox.append((rank, REDUCE, message))
        self._collect({tile: value}, task)

    # ----- jobs: inputs to the ranks that run ranges reading them, results back ---------------
    def _queue_units(self, task: int, units: list) -> None:
        """Every rank placed the same ranges (the same jobs, in tile order, the same policy):
        send the inputs of tiles here to every other rank whose ranges read them, once per rank
        (each tile here packed its input before handing in its jobs, so all are packed now),
        and queue the ranges this rank runs whose inputs are all here (the others once their
        last input arrives: see :meth:`_input_arrived`)."""
        rank, owner = self.rank, self._owner_of
        wanted: dict[int, set[int]] = {}  # per other rank, the tiles here its ranges read
        fetched = self._fetched.get(task, {})
        ready, open_here = [], 0
        for u, (row, _, _, node) in enumerate(units):
            tiles = (row["a"],) if row["b"] < 0 else (row["a"], row["b"])
            if node != rank:
                for t in tiles:
                    if owner[t] == rank:
                        wanted.setdefault(node, set()).add(t)
                continue
            open_here += 1
            lacking = [t for t in tiles if owner[t] != rank and t not in fetched]
            if not lacking:
                ready.append(u)
                continue
            self._lacking[(task, u)] = len(lacking)
            for t in lacking:
                self._awaiting.setdefault((task, t), []).append(u)
        for node in sorted(wanted):  # routing: the task, then each input's tile
            tiles = sorted(wanted[node])
            self._outbox.append((node, JOB_INPUT, ((task, *tiles), [self._job_inputs[t] for t in tiles])))
        if open_here:
            self._units_open[task] = open_here
        for u in ready:
            self._enqueue(rank, -2 - u, task)

    def _input_arrived(self, task: int, tile: int, payload) -> None:
        """A tile's input for the job phase ``task``, from its rank: kept until this rank's
        ranges reading it have run; each range it was the last missing input of is queued
        (caller holds the lock)."""
        self._fetched.setdefault(task, {})[tile] = payload
        for u in self._awaiting.pop((task, tile), ()):
            self._lacking[(task, u)] -= 1
            if not self._lacking[(task, u)]:
                del self._lacking[(task, u)]
                self._enqueue(self.rank, -2 - u, task)

    def _unit_inputs(self, task: int, tiles: list) -> dict:
        """Inputs packed here for tiles here, fetched from their ranks for the others."""
        fetched = self._fetched.get(task)
        return {t: self._job_inputs[t] if self._here[t] else fetched[t] for t in tiles}

    def _post_results(self, key: tuple[int, int], task: int, tiles: list, results: list, measured: tuple) -> None:
        """Results for tiles here are delivered, the others sent to their ranks (one message
        per rank, routed by the task, the range's job and first item, whether it carries what
        the range measured, and the tiles); what the range measured goes with the result for
        its first tile, whose rank hands it in with that tile's next jobs."""
        by_rank: dict[int, list[int]] = {}  # the results' places, per rank of their tiles
        for k, t in enumerate(tiles):
            by_rank.setdefault(self._owner_of[t], []).append(k)
        here = by_rank.pop(self.rank, None)
        for rank, picks in by_rank.items():
            carries = int(picks[0] == 0)
            values = [results[k] for k in picks] + ([np.array(measured, dtype=np.float64)] if carries else [])
            self._outbox.append((rank, JOB_RESULT, ((task, *key, carries, *(tiles[k] for k in picks)), values)))
        if here:
            self._deliver(key, task, [tiles[k] for k in here], [results[k] for k in here])
            if here[0] == 0:
                self._window.setdefault(tiles[0], []).append(measured)
        self._units_open[task] -= 1
        if not self._units_open[task]:  # every range here has run: the inputs fetched are done with
            del self._units_open[task]
            self._fetched.pop(task, None)

    def _all_done(self) -> None:
        self._local_done = True

    def _limit_steps(self, steps: int) -> None:
        super()._limit_steps(steps)
        # A limit raised again (rank 0's, above this rank's frontier) has steps left to run here.
        self._local_done = self._n_here == 0 or self._steps_done >= self._seq.steps

    def _receive(self, tag: int, ints: list[int], values: list) -> None:
        if tag == HALO:
            task, src, dsts = ints[0], ints[1], ints[2:]
            if len(dsts) != len(values) or not all(self._here[d] for d in dsts):
                raise ShoalError(f"rank {self.rank} received halos for tiles it does not hold: {dsts}")
            self._deliver(src, task, dsts, values)
        elif tag == REDUCE:
            task, tiles = ints[0], ints[1:]
            self._collect(dict(zip(tiles, values, strict=True)), task)
        elif tag == JOB_INPUT:
            task, tiles = ints[0], ints[1:]
            if len(tiles) != len(values) or any(self._here[t] for t in tiles):
                raise ShoalError(f"rank {self.rank} received job inputs of tiles it holds itself: {tiles}")
            for tile, payload in zip(tiles, values, strict=True):
                self._input_arrived(task, tile, payload)
        elif tag == JOB_RESULT:
            task, key, carries, tiles = ints[0], (ints[1], ints[2]), ints[3], ints[4:]
            if carries:  # what the range measured, for its first tile (the first here)
                a, b, seconds, items = values.pop().tolist()
                self._window.setdefault(tiles[0], []).append((int(a), int(b), seconds, int(items)))
            if len(tiles) != len(values) or not all(self._here[t] for t in tiles):
                raise ShoalError(f"rank {self.rank} received job results for tiles it does not hold: {tiles}")
            # This rank has placed the jobs: the range read its tiles' inputs, sent from here then.
            self._deliver(key, task, tiles, values)
        else:
            raise ShoalError(f"rank {self.rank} received a message with unknown tag {tag}")

    def _release(self, out: list) -> list:
        """Without overlap: the messages whose producing task every local tile has finished."""
        self._held.extend(out)
        finished = int(np.asarray(self._next)[self._here].min()) if self._n_here else len(self._seq)
        ready = [m for m in self._held if m[1] != HALO or m[2][0][0] <= finished]  # a halo's task
        self._held = [m for m in self._held if m[1] == HALO and m[2][0][0] > finished]
        return ready

    def _wait(self, on_step, stop) -> int:
        """Run this rank's one worker on this thread, or report steps while the workers run;
        the workers move the messages (see :meth:`_between_tasks`, :meth:`_wait_for_work`)."""
        self._on_step, self._stop_asked = on_step, stop
        if self._inline is not None:
            return self._run_inline()
        # A stop request is passed on by the workers as they move messages (to rank 0, which
        # negotiates the step every rank stops at), not acted on here.
        return super()._wait(on_step, None)

    def _run_inline(self) -> int:
        """This thread is the rank's one worker: it runs the tasks and, between them, moves
        messages (no second thread takes the interpreter lock from it, and no halo waits for
        a thread to wake)."""
        with as_worker_thread():
            self._guarded(self.rank, 0)
        return self._reported

    def _between_tasks(self) -> None:
        """Before each task, a worker sends what has been posted and takes in what has arrived,
        unless another worker is doing so. Its time here is the communication's CPU."""
        if not self._comm.acquire(blocking=False):
            return
        try:
            t0 = time.perf_counter()
            self._exchange()
            self._comm_cpu += time.perf_counter() - t0
        finally:
            self._comm.release()

    def _wait_for_work(self) -> None:
        """No task is queued (one worker at a time is here): move messages until one is, or
        the run is over. Poll without sleeping for a moment (a halo is usually on its way),
        then in short naps."""
        perf, queue, finished = time.perf_counter, self._queues[self.rank], self._finished
        since = perf()
        while True:
            with self._comm:
                t0 = perf()
                moved = self._exchange()
                if moved:
                    self._comm_cpu += perf() - t0
                over = self._leave()
            if over or queue or finished.is_set():
                return
            if not moved and perf() - since > SPIN_S:
                time.sleep(NAP_MIN_S)

    def _exchange(self) -> int:
        """One pass of the communication (the caller holds ``_comm``): pass on a stop request,
        send what workers posted, receive what has arrived, and, on a rank whose main thread is
        its worker, report finished steps. How many messages it moved."""
        comm, status, sending, stop = self.comm, self._status, self._sending, self._stop_asked
        if stop is not None and stop.is_set() and not self._asked:
            self._asked = True
            if self.team.is_root:
                self._negotiate()
            else:
                self._control(0, ASK)
        out = []
        if self._outbox or self._held:
            with self._lock:
                out, self._outbox = self._outbox, []
                if not self.overlap:
                    out = self._release(out)
        for rank, tag, (ints, values) in out:
            sending.extend(self.team.post(values, rank, tag, ints))
            self._comm_count += len(values) if tag in PAYLOADS else 0
        received = 0
        while (incoming := comm.Improbe(MPI.ANY_SOURCE, MPI.ANY_TAG, status)) is not None:
            source, tag = status.Get_source(), status.Get_tag()
            ints, values = self.team.receive(incoming, status)
            if tag == CONTROL:
                self._on_control(source, *ints)
            else:
                self._comm_count += len(values) if tag in PAYLOADS else 0
                with self._lock:
                    self._receive(tag, ints, values)
            received += 1
        if sending:
            sending[:] = [r for r in sending if not r.Test()]
        self.team.step = self.first_step + self._steps_done
        if self._inline is not None:  # the main thread reports steps (it does, in _wait, otherwise)
            self._reported = self._report(self._on_step, self._reported)
        return len(out) + received

    def _leave(self) -> bool:
        """Whether this rank's part of the run is over, and if so stop it here: the rank
        failed; or, on rank 0, every rank has finished; or, on another rank, it has finished
        and has told rank 0 so."""
        if self._error is not None or self._finished.is_set():
            return True
        with self._lock:
            finished = (self._local_done and self._reductions_left == 0 and not self._units_open and not self._outbox
                        and not self._sending and not self._held and not self._frozen)
        if finished and self.team.is_root and self._answers is None and len(self._left) == self.team.size - 1:
            with self._lock:
                self._stop()
            return True
        if finished and not self.team.is_root:
            self._control(0, DONE, self._seq.steps)
            self.team._complete(self._sending)
            with self._lock:
                self._stop()
            return True
        return False

    # ----- stopping at a step boundary every rank agrees on --------------------------------
    def _control(self, rank: int, kind: int, value: int = 0) -> None:
        self._sending.extend(self.team.post(None, rank, CONTROL, (self._run_id, kind, value)))

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
