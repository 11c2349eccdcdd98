"""An application's side of the resource manager (the invasive paper, §2 and §5.4): register,
invade, answer release requests, retreat.

```python
invasion = Invasion(handle.address, handle.authkey, release=pool.shrink_to)
invasion.register()
cores = invasion.invade(workload=cells)   # blocking: the cores it holds now
...
cores = invasion.poll()                   # between steps: grants and releases applied
invasion.retreat()                        # done: the cores return to the pool
```

The cores an application holds change only inside :meth:`Invasion.register`,
:meth:`Invasion.invade` and :meth:`Invasion.poll`, so an application calls them between its
steps and resizes its worker pool from :attr:`Invasion.cores` after each. A release request
calls the ``release`` callback with the cores to keep: it shrinks the pool and returns once
the threads of the other cores have let them go (they block, they do not spin); only then does
the client acknowledge, and only then may the manager hand those cores to someone else. Grants
need no callback: the application grows its pool to :attr:`Invasion.cores` when it likes.

A rank's MPI messages are moved by its workers between their tasks, on the cores the
manager's distribution gave them: no thread outside the distribution polls for them. The
rank's main thread only reports steps (or, while its one worker is not pinned, is that worker).

If the manager dies, the application keeps the cores it holds and finishes with them: the
next call says so once (a warning) and every later call returns the same cores; nothing
raises in the application's step. Setting up several ranks without deadlock (§5.4) is
:func:`setup`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from multiprocessing import AuthenticationError
from multiprocessing.connection import Client, Connection

from ..errors import ShoalError
from .manager import Constraints
from .server import FAMILY, decode, encode

logger = logging.getLogger("shoal.invasive")


class Invasion:
    """One application's connection to the resource manager.

    Parameters
    ----------
    address : str
        The manager's socket (:attr:`~shoal.invasive.server.ManagerHandle.address`).
    authkey : bytes
        Its key (:attr:`~shoal.invasive.server.ManagerHandle.authkey`).
    release : callable, optional
        ``release(keep)``: shrink the worker pool to the cores of the frozenset ``keep`` and
        return once the threads on the other cores have let them go. Without one, the
        application is taken to use only the cores it reads from :attr:`cores` at each step.
    name : str, optional
        A name for the manager's log (a simulation, a rank).

    Notes
    -----
    One thread uses an invasion (the one that steps the application); the ``release``
    callback runs in that thread, inside :meth:`register`, :meth:`invade` or :meth:`poll`.

    Attributes
    ----------
    cores : frozenset of int
        The cores it holds now (the manager's core numbers).
    app : int or None
        Its number at the manager, once registered.
    pool : int
        R, the manager's pool size, once registered.
    cpus : list of int or None
        Each core's CPU to pin a worker to, or ``None`` when the pool is logical (oversubscribed).
    """

    def __init__(self, address: str, authkey: bytes, *, release: Callable[[frozenset[int]], None] | None = None,
                 name: str | None = None):
        self.address, self.authkey, self.release, self.name = address, authkey, release, name
        self.cores: frozenset[int] = frozenset()
        self.app: int | None = None
        self.pool = 0
        self.cpus: list[int] | None = None
        self._connection: Connection | None = None
        self._lost = False

    @property
    def oversubscribed(self) -> bool:
        """Whether the pool is logical (more cores than CPUs): then workers are not pinned."""
        return self.cpus is None

    @property
    def lost(self) -> bool:
        """Whether the manager is gone (the application keeps :attr:`cores` to the end)."""
        return self._lost

    def cpu(self, core: int) -> int | None:
        """The CPU to pin core ``core``'s worker to, ``None`` in a logical pool.

        Parameters
        ----------
        core : int
            One of :attr:`cores`.
        """
        return None if self.cpus is None else self.cpus[core]

    def register(self) -> frozenset[int]:
        """Connect and register (the handshake); returns the cores granted with the welcome.

        Raises
        ------
        ShoalError
            The manager cannot be reached or refuses the key.
        """
        if self._connection is not None or self._lost:
            return self.poll()  # registered already
        try:
            self._connection = Client(self.address, FAMILY, authkey=self.authkey)
        except (OSError, EOFError, ValueError) as error:
            raise ShoalError(f"cannot reach the resource manager at {self.address}: {error}") from None
        except AuthenticationError as error:
            raise ShoalError(f"the resource manager at {self.address} refused this application: {error}") from None
        self._send({"type": "register", "name": self.name, "pid": os.getpid()})
        self._pump(until="welcome")
        if self._lost:
            raise ShoalError(f"the resource manager at {self.address} ended during registration")
        return self.poll()

    def invade(self, range: tuple[int, int] | None = None, workload: float | None = None,
               graph: Sequence[float] | None = None, blocking: bool = True) -> frozenset[int]:
        """Tell the manager what the application needs now; returns the cores it holds.

        Parameters
        ----------
        range : tuple of int, optional
            The fewest and most cores it can use.
        workload : float, optional
            Its current work (the workload policy).
        graph : sequence of float, optional
            Its scalability graph, ``graph[c - 1] = S(c)`` (the scalability policy).
        blocking : bool
            Wait until the manager has settled this application's share: other applications
            may first have to let cores go. Non-blocking returns at once; :meth:`poll` applies
            the grants and releases later.

        Returns
        -------
        frozenset of int
            The cores held now.

        Raises
        ------
        ShoalError
            Constraints no pool can meet (a bad range, a non-positive workload or graph value).
        """
        self._registered()
        constraints = Constraints(range=tuple(range) if range is not None else None,
                                  workload=float(workload) if workload is not None else None,
                                  graph=tuple(float(s) for s in graph) if graph is not None else None)
        constraints.check(self.pool)
        self._send({"type": "invade", "blocking": blocking, **constraints.to_message()})
        if blocking:
            self._pump(until="invaded")
        return self.poll()

    def poll(self, timeout: float = 0.0) -> frozenset[int]:
        """Apply the grants and release requests that have arrived; returns the cores held.

        Parameters
        ----------
        timeout : float
            Seconds to wait for a first message when none is there yet (0: do not wait).

        Returns
        -------
        frozenset of int
            The cores held now.
        """
        connection = self._connection
        try:
            if connection is not None and not self._lost and connection.poll(timeout):
                self._pump()
        except (EOFError, OSError):
            self._gone()
        return self.cores

    def retreat(self) -> None:
        """Leave: the application has stopped using its cores, which return to the pool."""
        if self._connection is not None:
            self._send({"type": "retreat"})
            self._connection.close()
            self._connection = None
        self.cores = frozenset()

    def close(self) -> None:
        """Retreat if still registered (the manager would also see the end of the connection)."""
        self.retreat()

    def __enter__(self) -> Invasion:
        self.register()
        return self

    def __exit__(self, *exc) -> None:
        self.retreat()

    # ----- messages -------------------------------------------------------------------------------
    def _registered(self) -> None:
        if self._connection is None and not self._lost:
            raise ShoalError("register() with the resource manager first")

    def _send(self, message: dict) -> None:
        if self._lost or self._connection is None:
            return
        try:
            self._connection.send_bytes(encode(message))
        except OSError:
            self._gone()

    def _pump(self, until: str | None = None) -> None:
        """Apply messages: until one of type ``until`` has been applied, or else while any are waiting."""
        connection = self._connection
        try:
            while connection is not None and not self._lost and (until is not None or connection.poll(0)):
                message = decode(connection.recv_bytes())
                self._apply(message)
                if message["type"] == until:
                    return
        except (EOFError, OSError):
            self._gone()

    def _apply(self, message: dict) -> None:
        kind = message["type"]
        if kind == "welcome":
            self.app, self.pool, self.cpus = message["app"], message["pool"], message.get("cpus")
        elif kind == "grant":
            self.cores = self.cores | frozenset(message["cores"])
        elif kind == "release":
            back = frozenset(message["cores"])
            keep = self.cores - back
            if self.release is not None:
                self.release(keep)  # returns when the threads on `back` have let them go
            self.cores = keep
            self._send({"type": "released", "cores": sorted(back)})
        elif kind == "error":
            raise ShoalError(f"resource manager: {message['message']}")
        # "invaded" carries the cores kept, which the grants and releases before it have applied

    def _gone(self) -> None:
        if not self._lost:
            logger.warning("the resource manager is gone; %s keeps its %d cores to the end",
                           self.name or f"application {self.app}", len(self.cores))
        self._lost = True
        if self._connection is not None:
            self._connection.close()
            self._connection = None


def setup(invasion: Invasion, all_ranks: Callable[[bool], bool] | None = None, *, interval: float = 0.01,
          **constraints) -> frozenset[int]:
    """Get every rank at least one core without deadlock (§5.4): non-blocking invades, then
    polling until this rank holds a core, and with ``all_ranks`` until every rank does.

    A blocking setup deadlocks: rank 0 may get every core first and enter a barrier, where it
    cannot answer the release that would give rank 1 its core. Here each rank keeps polling
    (so it answers releases) and asks ``all_ranks(holds_a_core)`` after each poll, a
    reduction every rank calls the same number of times (with mpi4py:
    ``lambda ok: comm.allreduce(ok, op=MPI.LAND)``). Only when it returns true may the ranks
    meet at their first barrier. Without ``all_ranks`` the caller must do the same check
    itself before its first barrier, polling meanwhile.

    Parameters
    ----------
    invasion : Invasion
        The rank's registered connection.
    all_ranks : callable, optional
        The reduction: ``all_ranks(mine) -> bool``, true when every rank's ``mine`` is.
    interval : float
        Seconds each poll waits for a message.
    **constraints
        The first invade's ``range``, ``workload`` and ``graph``.

    Returns
    -------
    frozenset of int
        The cores held (empty only if the manager died before granting any; then the
        application runs on what the system gives it).
    """
    invasion.invade(blocking=False, **constraints)
    while True:
        cores = invasion.poll(interval)
        mine = bool(cores) or invasion.lost
        if all_ranks(mine) if all_ranks is not None else mine:
            return cores
