"""The run side of the live view: what a running simulation sends its viewer, never waiting for it.

Two parts:

:class:`ViewFeed`
    the socket to the viewer. The run thread only hands it frames (a drop-oldest queue of
    two, counting what it drops) and appends load rows and placements to a log it keeps
    whole. One daemon thread owns the socket: it connects (again every second while the
    viewer is not there), sends ``hello`` first after every connection, then the log
    (loads and placements are never dropped: a new connection receives them all again) and
    the frames, encoded there rather than on the run thread. A second thread reads the
    viewer's ``stop`` and asks the run to stop. A viewer that stalls, leaves or comes back
    never holds the run up (Vertanen §6: a slow client could hold up the whole simulation).

:class:`LiveView`
    the simulation's side, on every process of the run (its collective parts run on all;
    only the first process has a :class:`ViewFeed`): a frame every ``every`` steps (the
    frame written to disk at the same step is reused, never gathered twice), every step's
    busy seconds per node from the measured task costs (summed over processes at each frame
    under MPI, where each process measures only its own node), the step's wall time and
    LIF, and a ``placement`` at the start and after every balancing step or resize.
"""

from __future__ import annotations

import collections
import logging
import math
import os
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..errors import ShoalError
from ..imbalance import lif
from ..runtime.simulation import Every, Simulation, StepRecord
from .frames import frame_message
from .protocol import decode, encode, receive, send

if TYPE_CHECKING:
    pass

logger = logging.getLogger("shoal")

#: Frames a run keeps for a viewer that has not taken them yet; older ones are dropped.
QUEUE = 2
#: Seconds between attempts to reach a viewer that is not there.
RETRY_S = 1.0
#: Seconds a finishing run waits for its last frames, and then for its ``end``, to go out.
FINISH_WAIT_S = 2.0
#: Frames over the run on the default schedule (fewer when they would cost too much).
FRAMES_PER_RUN = 100
#: At most this share of the run's wall time goes into the view's frames on their default
#: schedule (gathering the state on the run's thread, encoding it on the feed's): a frame due
#: sooner is skipped.
FRAME_SHARE = 0.03


def default_every(steps: int, frame_every: int = 0) -> int:
    """Steps between the view's frames: about :data:`FRAMES_PER_RUN` frames over ``steps``
    steps (at least one step apart), or the run's ``frame_every`` when that is more often (a
    frame written to disk is gathered anyway). A run's frames on disk are often sparse (every
    200 steps of a dam break): a view that waited for them would show a handful."""
    every = max(1, steps // FRAMES_PER_RUN)
    return min(every, frame_every) if frame_every else every


# ----- the socket ---------------------------------------------------------------------------------
class ViewFeed:
    """The connection of a run to its viewer; see the module docstring.

    Parameters
    ----------
    path : str or Path
        The viewer's Unix socket.
    hello : bytes
        The run's ``hello`` message (:func:`hello_message`), sent first on every connection.
    on_stop : callable
        Called (from the feed's thread) when the viewer sends ``stop``.
    layout : dict, optional
        The app's hints for drawing its grids (:attr:`shoal.apps.AppSpec.layout`).
    """

    def __init__(self, path: str | Path, hello: bytes, on_stop: Callable[[], None], layout: dict | None = None):
        self.path, self.hello, self.on_stop, self.layout = str(path), hello, on_stop, layout
        self.sent = 0  # frames the viewer was sent whole
        self.encode_s = 0.0  # seconds the last frame took to encode
        self.dropped = 0  # frames replaced by newer ones before they went out
        self._frames: collections.deque = collections.deque()
        self._loads: list[tuple[int, np.ndarray, float, float]] = []  # (step, busy s per node, wall s, LIF)
        self._placements: list[bytes] = []
        self._end: bytes | None = None
        self._ended = False  # the end went out
        self._final = False  # the counts are final: nothing more is queued or counted
        self._sending = False  # a frame is on its way
        self._lost = False  # the current connection is gone
        self._closing = False
        self._retry = threading.Event()  # set when closing: stop waiting to try again
        self._sock: socket.socket | None = None
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._serve, name="shoal-view-feed", daemon=True)
        self._thread.start()

    # ----- what the run thread calls (never blocks on the viewer) ------------------------------
    def put_frame(self, frame: dict[str, np.ndarray], step: int, time_s: float) -> None:
        """Queue an app frame (arrays the run no longer writes to) for the viewer, dropping the
        oldest queued one when :data:`QUEUE` are waiting; encoded on the feed's thread.

        Parameters
        ----------
        frame : dict of str to ndarray
            What the app's ``frame()`` returned.
        step : int
            The step it shows.
        time_s : float
            Its simulated time (s).
        """
        with self._cond:
            if self._final:
                return
            if len(self._frames) >= QUEUE:
                self._frames.popleft()
                self.dropped += 1
            self._frames.append((frame, int(step), float(time_s)))
            self._cond.notify_all()

    def put_loads(self, first: int, load: np.ndarray, step_time: np.ndarray, lifs: np.ndarray) -> None:
        """Log consecutive steps' rows, never dropped.

        Parameters
        ----------
        first : int
            The step of row 0.
        load : ndarray
            Busy seconds of each node in each step (k x nodes).
        step_time : ndarray
            Wall seconds of each step (k).
        lifs : ndarray
            Load-imbalance factor of each step (k).
        """
        with self._cond:
            for k in range(len(load)):
                self._loads.append((first + k, np.asarray(load[k], np.float32), float(step_time[k]), float(lifs[k])))
            self._cond.notify_all()

    def put_placement(self, message: bytes) -> None:
        """Log a ``placement`` message."""
        with self._cond:
            self._placements.append(message)
            self._cond.notify_all()

    def drain(self, timeout: float = FINISH_WAIT_S) -> tuple[int, int]:
        """Wait up to ``timeout`` s for the queued frames to go out, count what has not as
        dropped, and queue nothing more: the final ``(sent, dropped)``."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while (self._frames or self._sending) and self._sock is not None and not self._lost \
                    and time.monotonic() < deadline:
                self._cond.wait(deadline - time.monotonic())
            self.dropped += len(self._frames) + self._sending
            self._frames.clear()
            self._final = True
            return self.sent, self.dropped

    def close(self, status: str, step: int, message: str | None = None, summary: dict | None = None,
              timeout: float = FINISH_WAIT_S) -> None:
        """Send ``end`` after what is logged (waiting at most ``timeout`` s, then giving up)
        and end the feed's threads.

        Parameters
        ----------
        status : str
            ``"finished"``, ``"stopped"`` or ``"failed"``.
        step : int
            The last step the run reached.
        message : str, optional
            One line saying why the run failed.
        summary : dict, optional
            summary.json's content, when written.
        timeout : float
            Seconds to wait for the viewer.
        """
        if not self._final:
            self.drain(timeout)
        with self._cond:
            self._end = encode("end", {"status": status, "message": message, "step": int(step), "sent": self.sent,
                                       "dropped": self.dropped, "summary": summary})
            self._cond.notify_all()
            deadline = time.monotonic() + timeout
            while not self._ended and time.monotonic() < deadline:
                self._cond.wait(deadline - time.monotonic())
            self._closing = True
            sock = self._sock
            self._cond.notify_all()
        self._retry.set()
        if sock is not None:
            _shut(sock)  # a send stuck on a viewer that stopped reading returns now
        self._thread.join(timeout)

    # ----- the feed's thread -----------------------------------------------------------------
    def _serve(self) -> None:
        while not self._closing:
            sock = self._connect()
            if sock is None:
                return
            try:
                self._talk(sock)
            except (OSError, ShoalError):
                pass  # the viewer went away: try again
            finally:
                with self._cond:
                    self._sock, self._sending = None, False
                    self._cond.notify_all()
                sock.close()
            if self._ended:
                return

    def _connect(self) -> socket.socket | None:
        """A connection to the viewer, trying every :data:`RETRY_S` s; ``None`` once closing."""
        while True:
            with self._cond:
                if self._closing or self._ended:
                    return None
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.connect(self.path)
            except OSError:
                sock.close()
                self._retry.wait(RETRY_S)
                continue
            with self._cond:
                self._sock, self._lost = sock, False
            threading.Thread(target=self._listen, args=(sock,), name="shoal-view-listen", daemon=True).start()
            return sock

    def _listen(self, sock: socket.socket) -> None:
        """Read the viewer's messages (``stop``) until the connection ends."""
        try:
            while (data := receive(sock)) is not None:
                header, _ = decode(data)
                if header["type"] == "stop":
                    self.on_stop()
        except (OSError, ShoalError):
            pass
        with self._cond:
            if self._sock is sock:
                self._lost = True
                self._cond.notify_all()

    def _talk(self, sock: socket.socket) -> None:
        """Send ``hello``, then everything logged and every frame as it comes, then ``end``."""
        send(sock, self.hello)
        loads = placements = 0  # entries of the logs sent on this connection
        while True:
            with self._cond:
                while not (self._lost or self._closing or len(self._loads) > loads
                           or len(self._placements) > placements or self._frames or self._end is not None):
                    self._cond.wait()
                if self._lost or self._closing:
                    return
                rows, loads = self._loads[loads:], len(self._loads)
                new, placements = self._placements[placements:], len(self._placements)
                frame = self._frames.popleft() if self._frames else None
                self._sending = frame is not None
                end = self._end if frame is None and not rows and not new else None
                sent, dropped = self.sent, self.dropped
            if rows:
                send(sock, loads_message(rows))
            for message in new:
                send(sock, message)
            if frame is not None:
                tic = time.perf_counter()
                try:
                    message = frame_message(*frame, layout=self.layout, sent=sent, dropped=dropped)
                except Exception as exc:  # a frame the view cannot carry never stops the run
                    logger.warning("live view: the frame of step %d was not sent (%s)", frame[1], exc)
                    message = None
                self.encode_s = time.perf_counter() - tic
                if message is not None:
                    send(sock, message)
                with self._cond:
                    if self._sending and not self._final:
                        self.sent += message is not None
                        self.dropped += message is None
                    self._sending = False
                    self._cond.notify_all()
            if end is not None:
                send(sock, end)
                with self._cond:
                    self._ended = True
                    self._cond.notify_all()
                return


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


# ----- the messages -------------------------------------------------------------------------------
def loads_message(rows: list[tuple[int, np.ndarray, float, float]]) -> bytes:
    """One ``loads`` message of consecutive steps' rows ``(step, busy s per node, wall s, LIF)``."""
    return encode("loads", {"first": rows[0][0]},
                  {"load": np.array([r[1] for r in rows], np.float32),
                   "step_time": np.array([r[2] for r in rows], np.float32),
                   "lif": np.array([r[3] for r in rows], np.float32)})


def placement_message(step: int, owner: np.ndarray, cores, previous: np.ndarray | None, reason: str) -> bytes:
    """The ``placement`` message of the owners and worker threads that hold from ``step``.

    Parameters
    ----------
    step : int
        The first step they hold for.
    owner : ndarray
        The node of every tile.
    cores : sequence of int
        Worker threads per node.
    previous : ndarray or None
        The owners before (to count the tiles that moved); ``None`` for the first placement.
    reason : {"initial", "balance", "resize"}
        Why the placement changed.
    """
    migrated = 0 if previous is None else int(np.count_nonzero(np.asarray(owner) != np.asarray(previous)))
    return encode("placement", {"step": int(step), "migrated": migrated, "reason": reason},
                  {"owner": np.asarray(owner, np.int32), "cores": np.asarray(cores, np.int32)})


def hello_message(sim: Simulation, scenario: dict, settings: dict[str, str], folder: Path, every: int) -> bytes:
    """The ``hello`` of the run simulated by ``sim`` into ``folder``, which sends a frame every
    ``every`` steps.

    Parameters
    ----------
    sim : Simulation
        The run.
    scenario : dict
        Its resolved scenario as plain values (:meth:`shoal.config.Scenario.to_dict`).
    settings : dict of str to str
        Every key ``--set`` accepts with its value as TOML text (:func:`shoal.config.scenario_params`).
    folder : Path
        The run folder.
    every : int
        Steps between frames.
    """
    tiling, cluster = sim.tiling, sim.cluster
    boxes = tiling.kind == "cartesian"  # (the parts of a mesh have no boxes of cells to draw)
    run = {"scenario": scenario["name"], "app": scenario["app"]["name"], "folder": str(Path(folder).resolve()),
           "first_step": sim.step_count, "steps": scenario["run"]["steps"], "nodes": cluster.nodes,
           "cores": list(cluster.cores), "tiles": tiling.ntiles, "grid": list(tiling.grid) if boxes else None,
           "extent": None, "ranks": sim.team.size, "pid": os.getpid()}
    lo, hi = (tiling.lo[:, :2], tiling.hi[:, :2]) if boxes else (np.zeros((0, 2), np.int32),) * 2
    return encode("hello", {"run": run, "params": scenario, "settings": settings, "view_every": every},
                  {"tile_lo": lo, "tile_hi": hi})


# ----- the simulation's side ------------------------------------------------------------------
class LiveView:
    """What a simulation sends its viewer; see the module docstring. Every process of the run
    makes one (with ``feed`` only on the first) and calls :meth:`start`, :meth:`keep` and
    :meth:`finish` at the same points.

    Parameters
    ----------
    sim : Simulation
        The run.
    every : int
        Steps between frames.
    feed : ViewFeed or None
        The connection to the viewer (first process only).
    share : float, optional
        Skip a due frame when the frames so far would take more than this share of the run's
        wall time (:data:`FRAME_SHARE` for the default schedule); ``None``: every due frame.
        A frame the run writes to disk at the same step is always sent (it is gathered anyway).
    """

    def __init__(self, sim: Simulation, every: int, feed: ViewFeed | None, share: float | None = None):
        if every < 1:
            raise ShoalError(f"--view-every must be >= 1, got {every}")
        self.sim, self.every, self.feed, self.share = sim, every, feed, share
        self._frame_s = 0.0  # what the last frame cost (gathering it, then encoding it)
        self._frame_end = time.perf_counter()
        self._first: int | None = None  # the step of the first row not yet handed on
        self._rows: list[np.ndarray] = []  # this process's busy seconds per node of each step since
        self._walls: list[float] = []
        self._cores: list[tuple[int, ...]] = []
        self._tick = time.perf_counter()
        self._kept: tuple[int, dict | None] | None = None  # the disk's frame of a step, to reuse
        self._framed = -1  # the last step a frame was offered
        self._owners = self._workers = 0  # entries of the run's placements and worker changes sent
        self._owner: np.ndarray | None = None  # the owners last sent
        sim.add_measurement(self._measure)
        self._post_placements()

    def start(self) -> None:
        """Send the frame of the step the run starts at and add the frame callback (after every
        other callback: it then sees this boundary's balancing)."""
        self._offer_frame()
        self.sim.add_callback(lambda sim: self._at_boundary(), Every(self.every))

    # ----- each step, from the loop's thread -------------------------------------------------
    def _measure(self, record: StepRecord) -> None:
        now = time.perf_counter()
        sim = self.sim
        if self._first is None:
            self._first = record.step
        t = record.tasks
        self._rows.append(np.bincount(t["node"].astype(np.int64), weights=t["cost"], minlength=sim.cluster.nodes))
        self._walls.append(now - self._tick)
        self._cores.append(tuple(sim.cluster.cores))
        self._tick = now
        if not sim.team.distributed:  # every node's loads are here: hand them on at once
            self._hand_loads()
            self._post_placements()

    # ----- at step boundaries, on every process ---------------------------------------------
    def keep(self, step: int, frame: dict | None) -> None:
        """The frame written to disk at ``step`` (``None`` on other processes): the view's frame
        of that step, if it takes one, is this."""
        self._kept = (step, frame)

    def _at_boundary(self) -> None:
        if self._due():
            self._offer_frame()
        self._hand_loads()
        self._post_placements()

    def finish(self) -> None:
        """At the run's end, on every process: the last loads and placements, and a frame of the
        last step when the schedule gave none."""
        if self._framed != self.sim.step_count:
            self._offer_frame()
        self._hand_loads()
        self._post_placements()

    def _due(self) -> bool:
        """Whether the frame of this boundary goes out (the first process decides, for all)."""
        if self.share is None or (self._kept is not None and self._kept[0] == self.sim.step_count):
            return True
        cost = self._frame_s + (self.feed.encode_s if self.feed is not None else 0.0)
        due = self.feed is not None and time.perf_counter() - self._frame_end >= cost * (1 / self.share - 1)
        return self.sim.team.max(float(due)) > 0 if self.sim.team.distributed else due

    def _offer_frame(self) -> None:
        tic = time.perf_counter()
        sim = self.sim
        step = sim.step_count
        if self._kept is not None and self._kept[0] == step:
            frame = self._kept[1]
        else:
            gathered = sim.gather()
            frame = sim.app.frame(gathered) if gathered is not None else None
        t = sim.time
        if sim.team.distributed:  # only processes holding a tile know the clock
            t = sim.team.max(t if math.isfinite(t) else -math.inf)
        self._framed = step
        if self.feed is not None and frame is not None:
            self.feed.put_frame(frame, step, t)
        self._frame_end = time.perf_counter()
        self._frame_s = self._frame_end - tic

    def _hand_loads(self) -> None:
        """Hand the rows measured since the last call to the feed (summed over processes)."""
        if not self._rows:
            return
        load = np.array(self._rows)
        if self.sim.team.distributed:
            load = self.sim.team.sum(load)  # each process measured only its own node
        if self.feed is not None:
            per_core = load / np.maximum(np.array(self._cores, dtype=np.float64), 1)
            lifs = np.atleast_1d(lif(per_core))
            self.feed.put_loads(self._first, load, np.array(self._walls), lifs)
        self._first = self._first + len(self._rows)
        self._rows, self._walls, self._cores = [], [], []

    def _post_placements(self) -> None:
        """A ``placement`` for every step since the last at which the owners or the worker
        threads changed (the first one: the initial placement)."""
        if self.feed is None:
            return
        owners, workers = self.sim.placements, self.sim.worker_history  # (from step, value), appended in order
        while self._owners < len(owners) or self._workers < len(workers):
            step = min(h[i][0] for h, i in ((owners, self._owners), (workers, self._workers)) if i < len(h))
            moved = False
            while self._owners < len(owners) and owners[self._owners][0] == step:
                self._owners, moved = self._owners + 1, True
            while self._workers < len(workers) and workers[self._workers][0] == step:
                self._workers += 1
            owner = owners[self._owners - 1][1]
            reason = "initial" if self._owner is None else "balance" if moved else "resize"
            self.feed.put_placement(placement_message(step, owner, workers[self._workers - 1][1], self._owner,
                                                      reason))
            self._owner = owner
