"""The native executor on MPI ranks: compiled workers on each rank, one message per rank pair
and phase.

Each rank runs the compiled graph of its own tiles (:class:`NativeRanksExecutor`). Its
workers never call MPI: a tile that packs halos for tiles on another rank counts itself off
that rank's batch, and the last tile of the rank to pack puts the batch on an outbox ring
(:func:`~shoal.runtime.native.engine._post`). The rank's main thread, which waits for the
workers anyway, moves the messages: it sends each batch as one float64 buffer (every halo of
the phase from this rank to that one, end to end in edge order) through a persistent send made
once per run for its (phase's halos, rank, staging slot), receives the batches of the
other ranks and hands them to the waiting tiles (:func:`~shoal.runtime.native.engine.deliver_batch`),
which a remote batch counts as one more input. While its workers compute it sleeps until
one posts a batch or the last of them goes idle (at most :data:`NAP_BUSY_S`: a message that
arrives meanwhile finds workers busy anyway); while they all wait for other ranks it looks
every :data:`NAP_MIN_S`, since only a message can give them work (it does not spin: a spinning
thread took the cores of busy ranks on a shared machine, and the runs were slower).

A reduction's values travel the same way: once every tile here has given its values, the rank
sends them to every other rank, and each rank reduces all of them in tile order, as in one
process, so every rank holds the same bits.

A stop asked on any rank is negotiated by rank 0, as on the Python MPI executor: it *freezes*
every rank still running (no tile starts a step past the latest one some tile has started;
tasks that would are held), takes the largest frontier (a rank that already left answers
with its steps), and every rank runs exactly that many steps. Every message carries the run's
number: what a run left unread (halos for a step past a stop) is dropped by the next.

Loops: every rank reduces a loop's last values to the same bits, so every rank's app takes
the same decision and grows the same sequence. A rank a decision ahead may send halos or values
of instances this one has not built yet: they wait until it has. A rank frozen by a stop while
its workers wait for a decision waits for the limit agreed before it decides (its run may be
longer than its own frontier).

Halos a phase left in Python packs (payloads of any shape) travel the same way, one message
per rank pair and phase, encoded as the Python MPI executor encodes its messages
(:func:`~shoal.runtime.mpi.encode`: JSON and numbers, never unpickled); the receiving rank puts
them in its tiles' inboxes and counts them in as a batch.

Jobs: every tile here hands its emitted jobs (and what its last ranges measured) to every
other rank, one message per rank pair, so that every rank places the same jobs and cuts the
same ranges. Each rank then sends the input of each tile here once to every rank whose ranges
read it, queues its own ranges as their inputs are all here, and, when one has run, hands the
results for tiles here to them and sends the others to their tiles' ranks (what the range
measured travels with its first tile's result). A rank's steps wait for the ranges it runs, so
it leaves a run only once they have run and their results have left; a rank without tiles
still runs the ranges placed on it.

Apps whose state changes size (particles) run from a copy of their memory, as in one process,
and every rank sizes its payloads alike (:class:`RanksAcross`: each rank sizes those its tiles
send, and all share them). A rank whose tile has no room tells every other rank, which stops
its run; a run ends with every rank saying whether it had room (a rank may finish before
another runs out), and, if any had none, every rank redoes it with more (each attempt a new
run: its messages are not the last one's).
"""

from __future__ import annotations

import time
from collections import deque
from typing import TYPE_CHECKING

import numpy as np
from mpi4py import MPI

from ...errors import ShoalError
from ..jobs import range_tiles
from .engine import (
    DECIDE,
    DONE,
    ERROR_CAPACITY,
    ERROR_KIND,
    FAILED,
    FROZEN,
    HEAD,
    IDLE_CALL,
    JOB_INSTANCE,
    LIMIT,
    RUNNING,
    STATUS,
    STEPS_DONE,
    batch_words,
    count_in,
    count_in_batch,
    deliver_batch,
    deliver_values,
    freeze,
    gather_batch,
    gather_values,
    next_batch,
    out_of_room,
    queue_range,
    thaw,
    wait_for_batches,
    warm_messages,
)
from .executor import NativeExecutor
from .plan import Across, NativeLayout

if TYPE_CHECKING:
    from ..mpi import MPITeam

HALO, VALUES, CONTROL, PYTHON_HALO = 21, 22, 23, 24  # message tags (apart from the Python MPI executor's)
JOBS, JOB_INPUT, JOB_RESULT = 25, 26, 27
ENCODED = (PYTHON_HALO, JOBS, JOB_INPUT, JOB_RESULT)  # tags of messages encoded as the Python executor's
ASK, FREEZE, FRONTIER, AGREED, LEFT, NO_ROOM = range(6)  # CONTROL messages: [run, kind, value]
NAP_MIN_S, NAP_MAX_S = 2e-5, 1e-3  # how long the main thread sleeps between polls when nothing moves
NAP_BUSY_S = 2e-3  # at most, while the workers compute (they wake it when they post a batch or all go idle)


def runs_on_ranks(app, tiling) -> str | None:
    """Why the native executor cannot run ``app`` on MPI ranks, or ``None`` when it can."""
    layout = NativeLayout.of(app, tiling)
    if layout is None:
        return "the app runs no phase natively on this tiling"
    return None


class RanksAcross(Across):
    """What :attr:`Native.prepare <shoal.runtime.native.Native>` shares between MPI ranks:
    sums, and tables keyed by pairs of tiles (each rank gives the entries of its tiles, every
    rank gets all), as numbers only."""

    def __init__(self, team: MPITeam):
        self.team = team

    def sum(self, value: float) -> float:
        return float(self.team.sum(np.array([float(value)]))[0])

    def union(self, values: dict[tuple[int, int], int]) -> dict[tuple[int, int], int]:
        rows = self.team.concatenate(np.array([[a, b, v] for (a, b), v in values.items()], np.int64).reshape(-1))
        return {(int(a), int(b)): int(v) for a, b, v in rows.reshape(-1, 3).tolist()}


class NativeRanksExecutor(NativeExecutor):
    """:class:`~shoal.runtime.native.NativeExecutor` for this rank's tiles, halos and reduced
    values to and from the other ranks moved by the main thread (see the module doc).

    Raises
    ------
    ShoalError
        If the app cannot run natively on MPI ranks (:func:`runs_on_ranks` says why), or the
        cluster's nodes are not the ranks.
    """

    def __init__(self, app, tiling, cluster, owner, team: MPITeam, job_policy: str = "locality"):
        if cluster.nodes != team.size:
            raise ShoalError(f"an MPI run has one node per rank: {cluster.nodes} nodes but {team.size} ranks")
        why = runs_on_ranks(app, tiling)
        if why is not None:
            raise ShoalError(f"app {app.name!r}: the native executor cannot run it on MPI ranks: {why}; "
                             "run it with --executor python")
        self.team, self.comm, self.rank = team, team.comm, team.rank
        self._run_id = 0
        self._early: list[tuple[int, int, np.ndarray, int]] = []  # (run, tag, buffer, source) of a later run
        super().__init__(app, tiling, cluster, owner, job_policy=job_policy)
        warm_messages()

    def _nodes_here(self) -> list[int]:
        return [self.rank]

    def _rank_of(self) -> tuple[int, int, np.ndarray]:
        return self.team.size, self.rank, self.owner

    def run(self, *args, **kwargs):
        result = super().run(*args, **kwargs)
        # What moving messages cost: the replay charges it per message.
        result.comm_cpu_s = np.zeros(self.cluster.nodes)
        result.comm_messages = np.zeros(self.cluster.nodes, np.int64)
        result.comm_cpu_s[self.rank], result.comm_messages[self.rank] = self._comm_s, self._comm_count
        return result

    def _run(self, *args):
        """One attempt of the run (a redo with more room is a new run: messages of the last
        attempt are dropped)."""
        self._run_id += 1
        self._finished = self._redo = False  # the end of the run reached; another rank had no room
        self._sending: list = []  # (request, buffer) of messages not yet seen complete
        self._persistent: dict[tuple, tuple] = {}  # (tag, links kind, rank, slot) -> (persistent send, buffer)
        self._waiting: list = []  # (instance, rank, buffer) of batches whose slots are still being read
        self._held: list[int] = []  # batches for steps past a frozen limit: sent if the limit agreed is higher
        self._future: list = []  # (tag, buffer, source) for instances not built here yet (a loop's next iteration)
        self._asked = self._negotiated = False
        self._answers: dict[int, int] | None = None  # rank 0, while it negotiates a stop: steps per rank
        self._left: dict[int, int] = {}  # rank 0: the ranks that have left this run, and their steps
        self._frozen_by: list[int] = []  # rank 0: the ranks it froze and that answered with a frontier
        self._comm_s, self._comm_count = 0.0, 0
        # Jobs: per job phase's instance, the emitted jobs of tiles elsewhere and the inputs
        # fetched from their ranks (kept from their arrival, which may come before this rank has
        # placed the jobs); per (instance, range here) how many inputs it lacks, and per
        # (instance, tile elsewhere) the ranges waiting for it; results for tiles here that came
        # before the placement; results for other ranks that ranges here made.
        self._emitted_at: dict[int, dict] = {}
        self._fetched: dict[int, dict] = {}
        self._lacking: dict[tuple[int, int], int] = {}
        self._awaiting: dict[tuple[int, int], list[int]] = {}
        self._placed = -1  # the last job phase's instance placed here
        self._results_early: dict[int, list] = {}
        self._outgoing: deque = deque()  # (rank, ints, values), appended by workers, sent by the main thread
        return super()._run(*args)

    def _sharing(self) -> Across:
        return RanksAcross(self.team)

    # ----- no room: every rank redoes the run ---------------------------------------------------
    def _no_room(self):
        """A tile here had no room, or another rank said one of its had: tell the others (once),
        end the run with them, and redo it."""
        if not self._redo:
            for rank in range(self._ranks):
                if rank != self.rank:
                    self._control(rank, NO_ROOM)
        self._redo = True
        self._finish(int(self._shared.control[STEPS_DONE]), aborted=True)
        self.team.max(1.0)  # (as every rank that finished the run asks: see _ended)
        super()._no_room()

    def _ended(self) -> None:
        """The run's steps are done here: for an app whose state changes size, end it with every
        rank and redo it if one had no room (before the states are published)."""
        if self.layout is None or self.layout.native.publish is None:
            return
        self._finish(int(self._shared.control[STEPS_DONE]))
        if self.team.max(float(self._redo)) > 0:
            super()._no_room()

    # ----- the run's waits: messages move meanwhile ------------------------------------------
    def _segment(self, on_step, stop, reported: int) -> int:
        sh = self._shared
        if self._redo:  # another rank had no room while this one was between segments: no more of this run
            sh.control[ERROR_KIND], sh.control[STATUS] = ERROR_CAPACITY, FAILED
            return reported
        sh.control[STATUS] = RUNNING if sh.control[STEPS_DONE] < sh.control[LIMIT] else DONE  # (no tile here: done)
        for run, tag, buf, source in self._take_early():
            self._on_message(tag, buf, run, source)
        sh.control[IDLE_CALL] = self._pools[self.rank].size  # the last worker to go idle wakes this thread
        ended = self._start_workers()
        try:
            while not ended.is_set():
                moved = self._progress()
                done = int(sh.control[STEPS_DONE])
                if on_step is not None:
                    for k in range(reported, done):
                        on_step(k)
                    reported = done
                if stop is not None and stop.is_set() and not self._asked:
                    self._asked = True
                    if self.rank != 0:
                        self._control(0, ASK)
                    elif not self._negotiated and self._answers is None:  # (one negotiation a run)
                        self._negotiate()
                if moved:
                    continue
                if self._workers_wait():  # for messages: poll often (spinning measured slower on shared cores)
                    time.sleep(NAP_MIN_S)
                else:  # working: until they post a batch or all go idle (stops and reports a little later)
                    wait_for_batches(sh, self.rank, int(NAP_BUSY_S * 1e9))
        except BaseException:
            self._stop_workers()
            raise
        self._join_workers()
        return reported

    def _result(self, done: int, wall: float):
        """The run's result, once every batch it owes has left and every rank has ended it."""
        self._finish(done)
        result = super()._result(done, wall)
        owner = self.owner
        mine = owner[result.messages["src"]] == self.rank  # a payload's row is its sender's
        result.messages = {k: v[mine] for k, v in result.messages.items()}
        return result

    def _finish(self, done: int, aborted: bool = False) -> None:
        """Send what this rank's tiles owe the steps run, take in every other rank's values of
        them (a reduction nothing in the run waits for: the last step's, a lagged one; not in
        a run ``aborted`` for room), tell rank 0 this rank has left, and wait for every rank to
        do as much (messages still move meanwhile: rank 0 may be negotiating a stop). Once a run."""
        if self._finished:
            return
        self._finished = True
        seq, sh = self._seq, self._shared
        if sh.control[STATUS] == DECIDE:  # the last decision ended the run
            sh.control[STATUS] = DONE
        self._progress()
        end = seq.step_first[done] if done < len(seq.step_first) else len(seq)
        gathering = np.flatnonzero(self._g.nvals[:end]) if not aborted else []  # (a last step's keeps none open)
        while self._sending or self._outgoing or (sh.remaining[gathering] > 0).any():
            if not self._progress():
                time.sleep(NAP_MIN_S)
        if self.rank != 0:
            self._control(0, LEFT, done)
        barrier = self.comm.Ibarrier()
        nap = NAP_MIN_S
        while not barrier.Test() or self._sending or self._answers is not None:
            if self._progress():
                nap = NAP_MIN_S
            else:
                time.sleep(nap)
                nap = min(2 * nap, NAP_MAX_S)
        for request, _ in self._persistent.values():  # every send complete: the next run plans anew
            request.Free()
        self._persistent = {}

    # ----- moving messages ---------------------------------------------------------------------
    def _progress(self) -> bool:
        """Send the batches ready, receive what has come, retire sends complete; whether
        anything moved."""
        t0 = time.thread_time()
        moved = False
        sh = self._shared
        while (code := int(next_batch(sh))) >= 0:
            moved = True
            self._leave(code)
        while self._outgoing:  # job results for tiles on other ranks
            moved = True
            rank, ints, values = self._outgoing.popleft()
            self._sending.extend((request, None) for request in self.team.post(values, rank, JOB_RESULT, ints))
        moved = self._receive() or moved
        if self._waiting:
            waiting, self._waiting = self._waiting, []
            for instance, rank, buf in waiting:
                self._halos(instance, rank, buf)
        if self._sending:
            self._sending = [(req, buf) for req, buf in self._sending if not req.Test()]
        if moved:  # what moving them cost (polls that found nothing are the price of waiting, not of messages)
            self._comm_s += time.thread_time() - t0
        return moved

    def _receive(self, control: bool = True) -> bool:
        """Take in every message of this executor's that has come (control messages too, with
        ``control``); whether any had."""
        status, got = MPI.Status(), False
        for tag in (HALO, VALUES, *ENCODED, CONTROL) if control else (HALO, VALUES, *ENCODED):
            # (the team's own messages wait for it)
            while (message := self.comm.Improbe(MPI.ANY_SOURCE, tag, status)) is not None:
                got = True
                if tag in ENCODED:
                    ints, values = self.team.receive(message, status)
                    self._on_message(tag, (ints, values), ints[0], status.Get_source())
                    continue
                buf = np.empty(status.Get_count(MPI.DOUBLE))
                message.Recv([buf, MPI.DOUBLE])
                self._on_message(tag, buf, int(buf[0]), status.Get_source())
        return got

    def _leave(self, code: int) -> None:
        """Send batch ``code`` of the outbox (see :func:`~shoal.runtime.native.engine._post`)."""
        g, sh, R = self._g, self._shared, self._ranks
        instance, rank = divmod(code, R + 1)
        if int(g.step[instance]) >= int(sh.control[LIMIT]):  # for a step past the run's end (a stop)
            if sh.control[FROZEN]:
                self._held.append(code)  # the limit agreed may be higher
            return
        slot = instance % g.stamp_depth
        if rank == R and g.emits[instance]:
            self._send_emitted(instance)
            return
        if rank == R:  # one buffer for every other rank's request
            others = [r for r in range(R) if r != self.rank]
            requests = [self._request(VALUES, -1, r, slot, HEAD + self._T * self._width) for r in others]
            buf = requests[0][1]
            gather_values(g, sh, instance, buf)
        elif not self._plans.native[int(g.links[instance])]:  # payloads packed in Python
            self._send_python_halos(instance, rank)
            return
        else:
            L = int(g.links[instance])
            requests = [self._request(HALO, L, rank, slot, int(batch_words(g, instance, rank, False)))]
            buf = requests[0][1]
            gather_batch(g, sh, instance, rank, buf)
            self._comm_count += int(g.bo_ptr[L, rank + 1] - g.bo_ptr[L, rank])
        buf[0], buf[1] = self._run_id, instance
        for request, _ in requests:
            request.Start()
            self._sending.append((request, buf))

    def _send_python_halos(self, instance: int, rank: int) -> None:
        """The payloads tiles here packed in Python for tiles on ``rank`` (kept in those tiles'
        inboxes here by the packing), as one message routed by (run, instance, then each
        payload's source and reader)."""
        g, L = self._g, int(self._g.links[instance])
        src_of, _ = self._edges_of(self._links[L][1])
        ints, values = [self._run_id, instance], []
        for i in range(g.bo_ptr[L, rank], g.bo_ptr[L, rank + 1]):
            e = int(g.bo[i])
            src, reader = int(src_of[e - g.lk_base[L]]), int(g.rd[e])
            held = self._inbox[reader]
            values.append(held[instance].pop(src))
            if not held[instance]:
                del held[instance]
            ints += [src, reader]
        self._sending.extend((request, None) for request in self.team.post(values, rank, PYTHON_HALO, ints))
        self._comm_count += len(values)

    def _python_halos(self, instance: int, rank: int, ints: list[int], values: list) -> None:
        """Payloads packed in Python on ``rank``: into the readers' inboxes, then counted in as
        the batch of (``instance``, ``rank``) (no words to copy)."""
        for (src, reader), payload in zip(zip(ints[2::2], ints[3::2], strict=True), values, strict=True):
            if self._owner_list[reader] != self.rank:
                raise ShoalError(f"rank {self.rank} received halos for tile {reader}, which it does not hold")
            self._inbox[reader].setdefault(instance, {})[src] = payload
        count_in_batch(self._g, self._shared, instance, rank)
        self._comm_count += len(values)

    # ----- jobs: emitted to every rank, inputs to the ranks of the ranges, results back -------
    def _send_emitted(self, instance: int) -> None:
        """The jobs every tile here emitted (with what its last ranges measured), to every other
        rank: routed by (run, instance, then the tiles)."""
        tiles = np.flatnonzero(self._here).tolist()
        ints, values = [self._run_id, instance, *tiles], [self._emitted[t] for t in tiles]
        for rank in range(self._ranks):
            if rank != self.rank:
                self._sending.extend((request, None) for request in self.team.post(values, rank, JOBS, ints))
        self._comm_count += len(tiles) * (self._ranks - 1)

    def _held_by(self, rank: int, ints: list[int], values: list, what: str) -> list[int]:
        """The tiles a message from ``rank`` routes its ``values`` to (after its run and
        instance), each one ``rank``'s; counted as payloads moved."""
        tiles = ints[2:]
        if len(tiles) != len(values) or any(self._owner_list[t] != rank for t in tiles):
            raise ShoalError(f"rank {self.rank} received {what} of tiles {tiles} from rank {rank}, "
                             "which does not hold them")
        self._comm_count += len(tiles)
        return tiles

    def _emitted_elsewhere(self, instance: int, rank: int, ints: list[int], values: list) -> None:
        """The jobs ``rank``'s tiles emitted: kept for the placement, then counted in as that
        rank's values (the last rank's in ends the segment: see :meth:`_emit`)."""
        tiles = self._held_by(rank, ints, values, "jobs")
        self._emitted_at.setdefault(instance, {}).update(zip(tiles, values, strict=True))
        deliver_values(self._g, self._shared, instance, rank, np.zeros(HEAD))

    def _emit(self) -> None:
        """Place the jobs as every rank does, then send the inputs of tiles here to every rank
        whose ranges read them (once per rank; each tile here packed its input before it
        emitted), and hand in the results that came before this placement."""
        self._progress()  # this rank's jobs leave first (the last tile's post may still be on the outbox)
        instance = int(self._shared.control[JOB_INSTANCE])
        self._emitted.update(self._emitted_at.pop(instance - 1, {}))  # (emitted by the phase before)
        self._fetched = {k: v for k, v in self._fetched.items() if k >= instance}  # (earlier ranges have run)
        self._placed = instance
        super()._emit()
        here, wanted = self._here, {}
        for row, _, _, node in self._units:
            if node != self.rank:
                for t in range_tiles(row):
                    if here[t]:
                        wanted.setdefault(node, set()).add(t)
        for node in sorted(wanted):
            tiles = sorted(wanted[node])
            self._sending.extend((request, None) for request in self.team.post(
                [self._job_inputs[t] for t in tiles], node, JOB_INPUT, [self._run_id, instance, *tiles]))
            self._comm_count += len(tiles)
        for ints, values in self._results_early.pop(instance, []):
            self._results_arrived(instance, ints, values)

    def _range_ready(self, instance: int, unit: int) -> bool:
        """Whether range ``unit`` here has every input; if not, it waits for those it lacks."""
        fetched = self._fetched.get(instance, {})
        lacking = [t for t in range_tiles(self._units[unit][0]) if not self._here[t] and t not in fetched]
        if lacking:
            self._lacking[(instance, unit)] = len(lacking)
            for t in lacking:
                self._awaiting.setdefault((instance, t), []).append(unit)
        return not lacking

    def _inputs_arrived(self, instance: int, rank: int, ints: list[int], values: list) -> None:
        """Inputs of ``rank``'s tiles for ranges here: kept; a range placed already that lacked
        only them is queued."""
        tiles = self._held_by(rank, ints, values, "job inputs")
        self._fetched.setdefault(instance, {}).update(zip(tiles, values, strict=True))
        for t in tiles:
            for unit in self._awaiting.pop((instance, t), ()):
                self._lacking[(instance, unit)] -= 1
                if not self._lacking[(instance, unit)]:
                    del self._lacking[(instance, unit)]
                    queue_range(self._shared, self.rank, unit)

    def _range_inputs(self, instance: int, tiles: list[int]) -> dict:
        fetched = self._fetched.get(instance, {})
        return {t: self._job_inputs[t] if self._here[t] else fetched[t] for t in tiles}

    def _hand_results(self, instance: int, key: tuple[int, int], tiles: list[int], ran) -> None:
        """Results for tiles here into their inboxes; the others, one message per rank, for the
        main thread to send (routed by run, instance, the range's job and first item, whether
        it carries what the range measured, and the tiles)."""
        by_rank: dict[int, list[int]] = {}
        for t in tiles:
            by_rank.setdefault(self._owner_list[t], []).append(t)
        for rank, theirs in by_rank.items():
            carries = theirs[0] == tiles[0]
            if rank == self.rank:
                if carries:
                    self._window.setdefault(tiles[0], []).append(ran.measured)
                for t in theirs:
                    self._inbox[t].setdefault(instance, {})[key] = ran.results[t]
                continue
            values = [ran.results[t] for t in theirs] + ([np.array(ran.measured, np.float64)] if carries else [])
            self._outgoing.append((rank, [self._run_id, instance, *key, int(carries), *theirs], values))

    def _results_arrived(self, instance: int, ints: list[int], values: list) -> None:
        """A range's results for tiles here, from the rank that ran it: into their inboxes, then
        counted in (held until this rank has placed the jobs: their counts are set then)."""
        if instance > self._placed:
            self._results_early.setdefault(instance, []).append((ints, values))
            return
        key, carries, tiles = (ints[2], ints[3]), ints[4], ints[5:]
        values = list(values)
        if carries:  # what the range measured, for its first tile (the first here)
            a, b, seconds, items = np.asarray(values.pop()).tolist()
            self._window.setdefault(tiles[0], []).append((int(a), int(b), seconds, int(items)))
        if len(tiles) != len(values) or not all(self._here[t] for t in tiles):
            raise ShoalError(f"rank {self.rank} received job results for tiles it does not hold: {tiles}")
        for t, value in zip(tiles, values, strict=True):
            self._inbox[t].setdefault(instance, {})[key] = value
        self._comm_count += len(tiles)
        count_in(self._g, self._shared, np.asarray(tiles, np.int64) + instance * self._T)

    def _request(self, tag: int, links: int, rank: int, slot: int, words: int) -> tuple:
        """The persistent send of (``tag``, links kind, ``rank``, staging ``slot``) and its buffer,
        made at its first use in a run; free to fill again (its last send waited for). Batches
        of halos are sent whole: a packer's payloads fill their edges' room or less, and the
        receiver reads each edge's length."""
        key = (tag, links, rank, slot)
        got = self._persistent.get(key)
        if got is None:
            buf = next((b for (t, _, _, s), (_, b) in self._persistent.items() if t == VALUES == tag and s == slot),
                       None) if tag == VALUES else None  # the values of a slot: one buffer, a request per rank
            buf = np.zeros(words) if buf is None else buf
            got = self._persistent[key] = (self.comm.Send_init([buf, MPI.DOUBLE], dest=rank, tag=tag), buf)
        if tag == VALUES:  # the buffer is shared: every rank's send of it must be over
            for (t, _, _, s), (request, _) in list(self._persistent.items()):
                if t == VALUES and s == slot:
                    self._complete(request)
        else:
            self._complete(got[0])
        return got

    def _complete(self, request) -> None:
        """Wait for ``request`` (inactive: at once), taking halos and values in meanwhile: the
        rank it goes to may be waiting for this one's. Control messages wait: handling one could
        send a batch from the buffer being filled."""
        while not request.Test():
            if not self._receive(control=False):
                time.sleep(NAP_MIN_S)

    def _on_message(self, tag: int, buf: np.ndarray, run: int, source: int) -> None:
        """A message of run ``run``: dropped if from an earlier run, kept for a later one."""
        if run < self._run_id:
            return
        if run > self._run_id:
            self._early.append((run, tag, buf, source))
            return
        if tag == CONTROL:
            self._on_control(source, int(buf[1]), int(buf[2]))
            return
        instance = int(buf[0][1]) if tag in ENCODED else int(buf[1])
        if instance >= self._g.n:  # a rank a loop decision ahead: wait until this one has decided
            self._future.append((tag, buf, source))
        elif tag == VALUES:
            deliver_values(self._g, self._shared, instance, source, buf)
        elif tag == PYTHON_HALO:
            self._python_halos(instance, source, *buf)
        elif tag == JOBS:
            self._emitted_elsewhere(instance, source, *buf)
        elif tag == JOB_INPUT:
            self._inputs_arrived(instance, source, *buf)
        elif tag == JOB_RESULT:
            self._results_arrived(instance, *buf)
        else:
            self._halos(instance, source, buf)

    def _start_segment(self, instance: int) -> None:
        super()._start_segment(instance)
        future, self._future = self._future, []  # those of instances built now, counted in after the opening
        for tag, buf, source in future:
            self._on_message(tag, buf, self._run_id, source)

    def _decide(self) -> bool:
        """Decide on the loop once no stop is being negotiated: a frozen rank takes the limit
        agreed first (the steps it runs may be more than its frontier)."""
        while self._shared.control[FROZEN]:
            if not self._progress():
                time.sleep(NAP_MIN_S)
        return super()._decide()

    def _take_early(self) -> list:
        """The messages of this run that came while the last one ended."""
        now = [m for m in self._early if m[0] == self._run_id]
        self._early = [m for m in self._early if m[0] > self._run_id]
        return now

    def _halos(self, instance: int, rank: int, buf: np.ndarray) -> None:
        if deliver_batch(self._g, self._shared, instance, rank, buf):
            L = self._g.links[instance]
            self._comm_count += int(self._g.bi_ptr[L, rank + 1] - self._g.bi_ptr[L, rank])
        else:
            self._waiting.append((instance, rank, buf))

    # ----- a stop, negotiated by rank 0 ----------------------------------------------------------
    def _control(self, rank: int, kind: int, value: int = 0) -> None:
        buf = np.array([self._run_id, kind, value], np.float64)
        self._sending.append((self.comm.Isend([buf, MPI.DOUBLE], dest=rank, tag=CONTROL), buf))

    def _on_control(self, source: int, kind: int, value: int) -> None:
        if kind == NO_ROOM:
            self._redo = True
            if self._workers_running():
                out_of_room(self._shared)
        elif kind == ASK and not self._negotiated and self._answers is None:
            self._negotiate()
        elif kind == FREEZE:
            if self._workers_running():
                self._control(0, FRONTIER, int(freeze(self._shared)))
            # a rank that has ended the run has sent LEFT: rank 0 takes that for its answer
        elif kind == AGREED:
            self._agreed(value)
        elif kind in (FRONTIER, LEFT):
            if kind == LEFT:
                self._left[source] = value
            if self._answers is not None and source not in self._answers:
                self._answers[source] = value
                if kind == FRONTIER:
                    self._frozen_by.append(source)
                self._settle()

    def _negotiate(self) -> None:
        """Rank 0: freeze every rank still in the run and collect the steps each would run."""
        self._answers = dict(self._left)
        self._answers[0] = int(freeze(self._shared)) if self._workers_running() else int(
            self._shared.control[STEPS_DONE])
        for r in range(1, self._ranks):
            if r not in self._answers:
                self._control(r, FREEZE)
        self._settle()

    def _settle(self) -> None:
        """Rank 0, once every rank has answered: the run's steps, to every rank frozen."""
        if self._answers is None or len(self._answers) < self._ranks:
            return
        limit = max(self._answers.values())
        self._answers, self._negotiated = None, True
        for r in self._frozen_by:
            self._control(r, AGREED, limit)
        self._agreed(limit)

    def _agreed(self, limit: int) -> None:
        if self._workers_running():
            self._seq.limit(limit)
            thaw(self._g, self._shared, limit)
        held, self._held = self._held, []
        for code in held:
            self._leave(code)

    def _workers_wait(self) -> bool:
        """Whether every worker here sleeps (they wait for halos or values from other ranks)."""
        return int(self._shared.sleepers[self.rank]) >= self._pools[self.rank].size

    def _workers_running(self) -> bool:
        """Whether this rank is still in the run: its workers run, or wait for a loop's decision."""
        return int(self._shared.control[STATUS]) in (RUNNING, DECIDE)
