"""The resource manager as a separate process (the invasive paper, §5.3), serving
:class:`~shoal.invasive.manager.ResourceManager` to applications over a local socket.

It uses the standard library's :mod:`multiprocessing.connection`: a ``Listener`` on an
``AF_UNIX`` socket in a private temporary folder (mode 0700), an authentication key checked
on every connection, and :func:`multiprocessing.connection.wait` over every application's
connection. Nothing beyond the standard library is needed, and a peer that dies — killed,
crashed, ``os._exit`` — shows at once as end-of-file on its connection: its cores return to
the pool in the same turn of the loop. Messages are JSON objects (``send_bytes``), so a peer
never makes the manager unpickle anything.

A connection's first message must be ``register``; the manager numbers applications 1, 2, ...
in arrival order. It then reads ``invade`` (constraints and ``blocking``), ``released``
(cores it has let go) and ``retreat``, and answers as the state machine decides. A message the
manager cannot accept gets an ``error`` message with one line.

The pool is this process's CPUs (``os.sched_getaffinity``) by default; the applications are
told each core's CPU so they can pin a worker to it. A larger logical pool may be declared:
then there are no CPUs to pin to and the pool is reported as oversubscribed. The manager
ignores Ctrl-C (whoever started it stops it with :meth:`ManagerHandle.stop`, after the
applications) and ends by itself when that process ends. It logs one line per decision at
debug level.
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from multiprocessing.connection import Connection, Listener, wait

from ..errors import ShoalError
from .manager import POLICIES, Constraints, Message, ResourceManager

logger = logging.getLogger("shoal.invasive")

FAMILY = "AF_UNIX"
START_TIMEOUT_S = 60.0  # a spawned interpreter on a loaded machine


def encode(message: dict) -> bytes:
    """A message as bytes on the wire (JSON).

    Parameters
    ----------
    message : dict
        JSON-ready message.
    """
    return json.dumps(message, separators=(",", ":")).encode()


def decode(data: bytes) -> dict:
    """The message a peer sent (the inverse of :func:`encode`); ``ValueError`` if it is not one.

    Parameters
    ----------
    data : bytes
        What ``recv_bytes`` returned.
    """
    message = json.loads(data)
    if not isinstance(message, dict):
        raise ValueError("a message is a JSON object")
    return message


def pool(cores: int | None = None) -> tuple[int, list[int] | None]:
    """The pool's size R and each core's CPU, or ``None`` for a logical (oversubscribed) pool.

    Parameters
    ----------
    cores : int, optional
        R; default: the CPUs this process may run on. Up to that many, core ``i`` is the
        ``i``-th of those CPUs; more make a logical pool.
    """
    cpus = sorted(os.sched_getaffinity(0))
    if cores is None:
        return len(cpus), cpus
    if isinstance(cores, bool) or not isinstance(cores, int) or cores < 1:
        raise ShoalError(f"--cores must be a whole number of at least 1, not {cores}")
    return (cores, cpus[:cores]) if cores <= len(cpus) else (cores, None)


class ManagerHandle:
    """A running manager process, as :func:`start_manager` returns it.

    Attributes
    ----------
    address : str
        The socket applications connect to (give it to :class:`~shoal.invasive.client.Invasion`).
    authkey : bytes
        The key every connection must present.
    cores : int
        R, the pool's size.
    cpus : list of int or None
        Each core's CPU, or ``None`` when the pool is logical.
    policy : str
        How it shares the cores out: ``"workload"`` or ``"scalability"``.
    process : subprocess.Popen
        The manager's process.
    """

    def __init__(self, address: str, authkey: bytes, cores: int, cpus: list[int] | None,
                 process: subprocess.Popen, folder: str, policy: str = "workload"):
        self.address, self.authkey, self.cores, self.cpus = address, authkey, cores, cpus
        self.process, self._folder, self.policy = process, folder, policy

    @property
    def oversubscribed(self) -> bool:
        """Whether the pool is logical: more cores than CPUs, threads are not pinned."""
        return self.cpus is None

    @property
    def pid(self) -> int:
        """The manager process's id."""
        return self.process.pid

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the manager and remove its socket's folder (applications still connected keep
        their cores and are told once, see :class:`~shoal.invasive.client.Invasion`).

        Parameters
        ----------
        timeout : float
            Seconds to wait for it to end before terminating it.
        """
        try:
            self.process.stdin.close()  # its end-of-file: the manager ends
        except OSError:
            pass  # already gone
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.terminate()
            self.process.wait(timeout)
        self.process.stdout.close()
        shutil.rmtree(self._folder, ignore_errors=True)

    def __enter__(self) -> ManagerHandle:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def start_manager(cores: int | None = None, policy: str = "workload", *, log_path: str | None = None,
                  log_level: int | str | None = None) -> ManagerHandle:
    """Start the resource manager in its own process and return once it listens.

    The process is a fresh interpreter (``python -m shoal.invasive.server``), so a caller's
    script is never imported again in it; it reads its settings from its standard input and
    ends at that input's end, that is, when :meth:`ManagerHandle.stop` closes it or the
    caller's process ends.

    Parameters
    ----------
    cores : int, optional
        R (``--cores``); default: this machine's cores available to this process. A larger
        pool is logical: applications are told not to pin, and it is logged as oversubscribed.
    policy : str
        ``workload`` or ``scalability`` (see :class:`~shoal.invasive.manager.ResourceManager`).
    log_path : str, optional
        A file that receives every decision (debug level), one time-stamped line each.
    log_level : int or str, optional
        The level of the manager's messages on standard error (default: this process's
        ``shoal`` logger's level).

    Returns
    -------
    ManagerHandle
        Its address, key and pool; ``stop()`` ends it.
    """
    size, cpus = pool(cores)
    if policy not in POLICIES:
        raise ShoalError(f"unknown invasive policy {policy!r}; known: {', '.join(POLICIES)}")
    if log_level is None:
        log_level = logging.getLogger("shoal").getEffectiveLevel()
    folder = tempfile.mkdtemp(prefix="shoal-invasive-")  # mode 0700: only this user reaches the socket
    address, authkey = os.path.join(folder, "manager"), os.urandom(32)
    # -c, not -m: the package imports this module first, and runpy warns about running it again
    process = subprocess.Popen([sys.executable, "-c", "from shoal.invasive.server import main; main()"],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    handle = ManagerHandle(address, authkey, size, cpus, process, folder, policy)
    settings = {"address": address, "authkey": authkey.hex(), "cores": size, "policy": policy, "cpus": cpus,
                "log_path": None if log_path is None else str(log_path), "log_level": log_level}
    try:
        process.stdin.write(encode(settings) + b"\n")  # the key goes through a pipe, never the command line
        process.stdin.flush()
        ready = bool(wait([process.stdout], START_TIMEOUT_S)) and process.stdout.readline() == b"ready\n"
    except OSError:
        ready = False
    if not ready:
        handle.stop()
        raise ShoalError("the resource manager did not start (see its messages above)")
    if cpus is None:
        logger.info("resource manager: a logical pool of %d cores on %d CPUs, oversubscribed (threads not pinned)",
                    size, len(os.sched_getaffinity(0)))
    return handle


def main() -> None:
    """The manager process (run by :func:`start_manager`): settings from the first line
    of standard input, ``ready`` on standard output once listening, and serve until standard
    input ends."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the applications; they stop the manager
    settings = decode(sys.stdin.buffer.readline())
    serve(settings["address"], bytes.fromhex(settings["authkey"]), settings["cores"], settings["policy"],
          settings["cpus"], settings["log_path"], settings["log_level"])


def serve(address: str, authkey: bytes, cores: int, policy: str, cpus: list[int] | None,
          log_path: str | None = None, log_level: int | str = logging.WARNING) -> None:
    """Listen at ``address`` and serve applications until standard input ends.

    Parameters
    ----------
    address : str
        The ``AF_UNIX`` socket's path.
    authkey : bytes
        The key connections must present.
    cores : int
        R.
    policy : str
        The distribution policy.
    cpus : list of int or None
        Each core's CPU (sent to applications at registration), ``None`` for a logical pool.
    log_path : str, optional
        A file for every decision.
    log_level : int or str
        The level of messages on standard error.
    """
    _log_to(log_path, log_level)
    listener = Listener(address, FAMILY, authkey=authkey)
    arrivals: queue.SimpleQueue = queue.SimpleQueue()
    wake, waker = multiprocessing.Pipe(duplex=False)
    threading.Thread(target=_accept, args=(listener, arrivals, waker), daemon=True).start()
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    logger.debug("resource manager: %d cores (%s), policy %s", cores, "logical" if cpus is None else "physical",
                 policy)
    try:
        _Server(ResourceManager(cores, policy), cpus).loop(sys.stdin.buffer, wake, arrivals)
    finally:
        listener.close()


def _log_to(path: str | None, level: int | str) -> None:
    from ..log import configure

    configure(level)
    if path is not None:
        handler = logging.FileHandler(path, encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(asctime)s.%(msecs)03d %(message)s", "%H:%M:%S"))
        handler.setLevel(logging.DEBUG)
        logging.getLogger("shoal").addHandler(handler)
        logging.getLogger("shoal").setLevel(logging.DEBUG)


def _accept(listener: Listener, arrivals: queue.SimpleQueue, waker: Connection) -> None:
    """Accept connections (and check their key) off the main loop, which a slow handshake would stall."""
    while True:
        try:
            connection = listener.accept()
        except (multiprocessing.AuthenticationError, EOFError, ConnectionError):
            continue  # a peer without the key, or one that hung up during the handshake
        except OSError:
            return  # the listener is closed: the manager is ending
        arrivals.put(connection)
        waker.send_bytes(b"")


class _Server:
    """The loop: wait on every connection, feed each message to the state machine, send its answers."""

    def __init__(self, manager: ResourceManager, cpus: list[int] | None):
        self.manager, self.cpus = manager, cpus
        self.apps: dict[Connection, int | None] = {}  # connection -> application (None until registered)
        self.connections: dict[int, Connection] = {}
        self.next_app = 1

    def loop(self, control, wake: Connection, arrivals: queue.SimpleQueue) -> None:
        while True:
            for ready in wait([control, wake, *self.apps]):
                if ready is control:
                    if not os.read(control.fileno(), 4096):
                        return  # end of input: stopped, or the starter is gone
                elif ready is wake:
                    wake.recv_bytes()
                    while not arrivals.empty():
                        self.apps[arrivals.get()] = None
                elif ready in self.apps:  # not dropped earlier in this turn
                    self.read(ready)

    def read(self, connection: Connection) -> None:
        try:
            data = connection.recv_bytes()
        except (EOFError, OSError):
            self.drop(connection)
            return
        app = self.apps[connection]
        try:
            message = decode(data)
            kind = message.get("type")
            if app is None and kind != "register":
                raise ShoalError(f"the first message must be register, not {kind!r}")
            if kind == "register":
                out = self.register(connection, message)
            elif kind == "invade":
                out = self.manager.invade(app, Constraints.from_message(message), bool(message.get("blocking", True)))
            elif kind == "released":
                out = self.manager.released(app, [int(core) for core in message["cores"]])
            elif kind == "retreat":
                logger.debug("app %s retreats: cores %s free", app, sorted(self.manager.held(app)))
                out = self.manager.retreat(app)
                self.forget(connection)
            else:
                raise ShoalError(f"unknown message type {kind!r}")
        except (ShoalError, ValueError, TypeError, KeyError) as error:
            self.send_to(connection, {"type": "error", "message": str(error) or type(error).__name__})
            return
        self.send(out)

    def register(self, connection: Connection, message: dict) -> list[Message]:
        if self.apps[connection] is not None:
            raise ShoalError("this application is already registered")
        app, self.next_app = self.next_app, self.next_app + 1
        self.apps[connection], self.connections[app] = app, connection
        logger.debug("app %d registers (%s, pid %s)", app, message.get("name"), message.get("pid"))
        out = self.manager.register(app)
        out[0][1].update(cpus=self.cpus, oversubscribed=self.cpus is None)  # the welcome
        return out

    def send(self, out: list[Message]) -> None:
        """Send the state machine's messages; an application that cannot be reached has died."""
        dead = []
        for app, message in out:
            connection = self.connections.get(app)
            if connection is None:
                continue
            if message["type"] != "welcome":
                logger.debug("%s %s -> app %s (D = %s)", message["type"], message.get("cores"), app,
                             self.manager.targets)
            if not self.send_to(connection, message):
                dead.append(connection)
        for connection in dead:
            self.drop(connection)

    def send_to(self, connection: Connection, message: dict) -> bool:
        try:
            connection.send_bytes(encode(message))
            return True
        except OSError:
            return False

    def drop(self, connection: Connection) -> None:
        """End of a connection: its application died (or left without a retreat)."""
        app = self.forget(connection)
        if app is not None and app in self.manager.constraints:
            logger.debug("app %s gone (end of connection): cores %s free", app, sorted(self.manager.held(app)))
            self.send(self.manager.died(app))

    def forget(self, connection: Connection) -> int | None:
        app = self.apps.pop(connection, None)
        self.connections.pop(app, None)
        connection.close()
        return app


if __name__ == "__main__":
    main()
