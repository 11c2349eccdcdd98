"""The resource manager as a separate process (the invasive paper, §5.3), serving
:class:`~shoal.invasive.manager.ResourceManager` to applications over a local socket.

Applications connect with the standard library's :mod:`multiprocessing.connection` (a
``Client`` on an ``AF_UNIX`` socket in a private temporary folder, mode 0700, with an
authentication key); the manager speaks the same wire format. Nothing beyond the standard
library is needed, and a peer that dies — killed, crashed, ``os._exit`` — shows at once as
end-of-file on its connection: its cores return to the pool in the same turn of the loop.
Messages are JSON objects (``send_bytes``), so a peer never makes the manager unpickle anything.

No peer can hold up the others. The key check runs in a thread per connection and a peer that
has not passed it within :data:`HANDSHAKE_TIMEOUT_S` is hung up on. The loop then reads and
writes every connection without waiting (a selector): a message that arrives in pieces is kept
until it is whole, a message longer than :data:`MAX_MESSAGE_BYTES` is refused from its length
(an ``error`` line, then the connection is closed) before any of it is read, and answers a peer
does not read wait for it — beyond :data:`BACKLOG_BYTES` its own messages are left unread,
beyond :data:`MAX_BACKLOG_BYTES` it is hung up on.

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

import contextlib
import json
import logging
import os
import queue
import selectors
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
from multiprocessing import AuthenticationError
from multiprocessing.connection import Connection, answer_challenge, deliver_challenge, wait

from ..errors import ShoalError
from .manager import POLICIES, Constraints, Message, ResourceManager

logger = logging.getLogger("shoal.invasive")

FAMILY = "AF_UNIX"
START_TIMEOUT_S = 60.0  # a spawned interpreter on a loaded machine
#: Seconds a new connection has to pass the key check before the manager hangs up on it.
HANDSHAKE_TIMEOUT_S = 10.0
#: Key checks under way at once; a connection beyond them is closed at once.
MAX_HANDSHAKES = 64
#: The longest message the manager reads (its messages are small JSON objects: a scalability
#: graph of 10 000 cores takes some 200 kB).
MAX_MESSAGE_BYTES = 1 << 20
#: Bytes read from a connection at a time.
READ_BYTES = 1 << 16
#: Answers waiting for an application beyond which its messages are not read until it takes them.
BACKLOG_BYTES = 1 << 20
#: Answers waiting for an application beyond which it is hung up on (it does not read them).
MAX_BACKLOG_BYTES = 16 << 20


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
                  log_level: int | str | None = None, handshake_timeout: float = HANDSHAKE_TIMEOUT_S) -> ManagerHandle:
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
    handshake_timeout : float
        Seconds a new connection has to pass the key check before the manager hangs up on it.

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
                "log_path": None if log_path is None else str(log_path), "log_level": log_level,
                "handshake_timeout": float(handshake_timeout)}
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
          settings["cpus"], settings["log_path"], settings["log_level"], settings["handshake_timeout"])


def serve(address: str, authkey: bytes, cores: int, policy: str, cpus: list[int] | None,
          log_path: str | None = None, log_level: int | str = logging.WARNING,
          handshake_timeout: float = HANDSHAKE_TIMEOUT_S) -> None:
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
    handshake_timeout : float
        Seconds a connection has to pass the key check before it is hung up on.
    """
    _log_to(log_path, log_level)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(address)
    listener.listen(MAX_HANDSHAKES)
    arrivals: queue.SimpleQueue = queue.SimpleQueue()
    wake, waker = os.pipe()
    threading.Thread(target=_accept, args=(listener, authkey, handshake_timeout, arrivals, waker),
                     daemon=True).start()
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    logger.debug("resource manager: %d cores (%s), policy %s", cores, "logical" if cpus is None else "physical",
                 policy)
    try:
        _Server(ResourceManager(cores, policy), cpus).loop(sys.stdin.buffer, wake, arrivals)
    finally:
        listener.close()
        with contextlib.suppress(OSError):
            os.unlink(address)


def _log_to(path: str | None, level: int | str) -> None:
    from ..log import configure

    configure(level)
    if path is not None:
        handler = logging.FileHandler(path, encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(asctime)s.%(msecs)03d %(message)s", "%H:%M:%S"))
        handler.setLevel(logging.DEBUG)
        logging.getLogger("shoal").addHandler(handler)
        logging.getLogger("shoal").setLevel(logging.DEBUG)


# ----- connections: the key check off the loop, with a deadline -------------------------------
def _accept(listener: socket.socket, authkey: bytes, timeout: float, arrivals: queue.SimpleQueue,
            waker: int) -> None:
    """Accept connections and check each one's key in a thread of its own: a peer that stalls
    in the handshake holds up only itself, and only for ``timeout`` seconds."""
    slots = threading.BoundedSemaphore(MAX_HANDSHAKES)
    while True:
        try:
            sock, _ = listener.accept()
        except OSError:
            return  # the listener is closed: the manager is ending
        if not slots.acquire(blocking=False):
            logger.warning("resource manager: %d handshakes under way; a new connection is refused", MAX_HANDSHAKES)
            sock.close()
            continue
        threading.Thread(target=_handshake, args=(sock, authkey, timeout, arrivals, waker, slots),
                         daemon=True).start()


def _handshake(sock: socket.socket, authkey: bytes, timeout: float, arrivals: queue.SimpleQueue, waker: int,
               slots: threading.BoundedSemaphore) -> None:
    """The key check of :mod:`multiprocessing.connection` (both ways, as ``Listener.accept``
    does it); a peer that has not passed it within ``timeout`` seconds is hung up on."""
    deadline = threading.Timer(timeout, _shut, (sock,))
    deadline.start()
    try:
        with Connection(os.dup(sock.fileno())) as connection:  # the check's own handle; the socket stays
            deliver_challenge(connection, authkey)
            answer_challenge(connection, authkey)
        passed = True
    except (AuthenticationError, EOFError, OSError):
        passed = False  # a peer without the key, one that hung up, or one too slow
    finally:
        deadline.cancel()
        slots.release()
    if not passed:
        logger.debug("a connection failed the handshake and was closed")
        sock.close()
        return
    sock.setblocking(False)  # from here the loop reads and writes it when it is ready, never waiting
    arrivals.put(sock)
    os.write(waker, b"\0")


def _shut(sock: socket.socket) -> None:
    """Wake whatever waits on ``sock`` (a read returns end-of-file)."""
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


class _Peer:
    """One application's connection: its socket, its number once registered, the bytes read of
    a message not yet whole and the bytes of answers it has not taken yet."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.app: int | None = None
        self.inbox = bytearray()
        self.outbox = bytearray()
        self.closed = False


def _frame(data: bytes) -> bytes:
    """``data`` as ``Connection.send_bytes`` frames it: a signed 32-bit big-endian length first."""
    return struct.pack("!i", len(data)) + data


def _next_message(inbox: bytearray) -> tuple[int, int] | None:
    """The (header length, body length) of the first message framed in ``inbox``, as
    ``Connection.send_bytes`` frames it; ``None`` until its length has arrived."""
    if len(inbox) < 4:
        return None
    (size,) = struct.unpack_from("!i", inbox)
    if size != -1:  # messages of 2 GiB and more carry -1, then a 64-bit length
        return 4, size
    if len(inbox) < 12:
        return None
    return 12, struct.unpack_from("!Q", inbox, 4)[0]


class _Server:
    """The loop: wait until some connection is readable (or, with answers waiting, writable),
    feed each whole message to the state machine, queue its answers. Nothing in it waits for a
    peer: a message arrives in pieces, answers leave as the peer takes them."""

    def __init__(self, manager: ResourceManager, cpus: list[int] | None):
        self.manager, self.cpus = manager, cpus
        self.peers: dict[int, _Peer] = {}  # application -> its connection, once registered
        self.next_app = 1
        self.selector = selectors.DefaultSelector()

    def loop(self, control, wake: int, arrivals: queue.SimpleQueue) -> None:
        self.selector.register(control.fileno(), selectors.EVENT_READ, "control")
        self.selector.register(wake, selectors.EVENT_READ, "wake")
        while True:
            for key, events in self.selector.select():
                if key.data == "control":
                    if not os.read(control.fileno(), 4096):
                        return  # end of input: stopped, or the starter is gone
                elif key.data == "wake":
                    os.read(wake, 4096)
                    while not arrivals.empty():
                        peer = _Peer(arrivals.get())
                        self.selector.register(peer.sock, selectors.EVENT_READ, peer)
                else:
                    peer = key.data
                    if events & selectors.EVENT_WRITE and not peer.closed:
                        self.flush(peer)
                    if events & selectors.EVENT_READ and not peer.closed:
                        self.receive(peer)

    # ----- reading ---------------------------------------------------------------------------
    def receive(self, peer: _Peer) -> None:
        """Read what ``peer`` sent and act on every whole message in it."""
        try:
            data = peer.sock.recv(READ_BYTES)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self.drop(peer)
            return
        peer.inbox += data
        while not peer.closed and (found := _next_message(peer.inbox)) is not None:
            head, size = found
            if size > MAX_MESSAGE_BYTES:
                self.refuse(peer, f"a message of {size} bytes (at most {MAX_MESSAGE_BYTES}); connection closed")
                return
            if len(peer.inbox) < head + size:
                return  # the rest is on its way
            message = bytes(peer.inbox[head:head + size])
            del peer.inbox[:head + size]
            self.read(peer, message)

    def read(self, peer: _Peer, data: bytes) -> None:
        """Act on one message of ``peer``."""
        app = peer.app
        try:
            message = decode(data)
            kind = message.get("type")
            if app is None and kind != "register":
                raise ShoalError(f"the first message must be register, not {kind!r}")
            if kind == "register":
                out = self.register(peer, message)
            elif kind == "invade":
                out = self.manager.invade(app, Constraints.from_message(message), bool(message.get("blocking", True)))
            elif kind == "released":
                out = self.manager.released(app, [int(core) for core in message["cores"]])
            elif kind == "retreat":
                logger.debug("app %s retreats: cores %s free", app, sorted(self.manager.held(app)))
                out = self.manager.retreat(app)
                self.forget(peer)
            else:
                raise ShoalError(f"unknown message type {kind!r}")
        except (ShoalError, ValueError, TypeError, KeyError) as error:
            self.send_to(peer, {"type": "error", "message": str(error) or type(error).__name__})
            return
        self.send(out)

    def register(self, peer: _Peer, message: dict) -> list[Message]:
        if peer.app is not None:
            raise ShoalError("this application is already registered")
        app, self.next_app = self.next_app, self.next_app + 1
        peer.app, self.peers[app] = app, peer
        logger.debug("app %d registers (%s, pid %s)", app, message.get("name"), message.get("pid"))
        out = self.manager.register(app)
        out[0][1].update(cpus=self.cpus, oversubscribed=self.cpus is None)  # the welcome
        return out

    def refuse(self, peer: _Peer, line: str) -> None:
        """Tell ``peer`` why in one line, then hang up on it (its cores return to the pool)."""
        logger.warning("resource manager: app %s: %s", peer.app, line)
        self.send_to(peer, {"type": "error", "message": line})
        self.drop(peer)

    # ----- writing ---------------------------------------------------------------------------
    def send(self, out: list[Message]) -> None:
        """Queue the state machine's messages for their applications."""
        for app, message in out:
            peer = self.peers.get(app)
            if peer is None:
                continue
            if message["type"] != "welcome":
                logger.debug("%s %s -> app %s (D = %s)", message["type"], message.get("cores"), app,
                             self.manager.targets)
            self.send_to(peer, message)

    def send_to(self, peer: _Peer, message: dict) -> None:
        """Queue ``message`` for ``peer`` and write what its socket takes now; a peer that has
        left more than :data:`MAX_BACKLOG_BYTES` unread is hung up on (it does not read)."""
        if peer.closed:
            return
        peer.outbox += _frame(encode(message))
        if len(peer.outbox) > MAX_BACKLOG_BYTES:
            logger.warning("resource manager: app %s leaves its messages unread (%d bytes); hung up on", peer.app,
                           len(peer.outbox))
            self.drop(peer)
            return
        self.flush(peer)

    def flush(self, peer: _Peer) -> None:
        """Write as much of ``peer``'s waiting answers as its socket takes, and watch the socket
        for what is left: while more than :data:`BACKLOG_BYTES` wait, its messages are not read."""
        try:
            while peer.outbox:
                del peer.outbox[:peer.sock.send(peer.outbox)]
        except BlockingIOError:
            pass
        except OSError:
            self.drop(peer)  # it has died: the end of its connection shows
            return
        events = (selectors.EVENT_READ if len(peer.outbox) <= BACKLOG_BYTES else 0) | \
            (selectors.EVENT_WRITE if peer.outbox else 0)
        self.selector.modify(peer.sock, events, peer)

    # ----- ends --------------------------------------------------------------------------------
    def drop(self, peer: _Peer) -> None:
        """End of a connection: its application died (or left without a retreat)."""
        app = self.forget(peer)
        if app is not None and app in self.manager.constraints:
            logger.debug("app %s gone (end of connection): cores %s free", app, sorted(self.manager.held(app)))
            self.send(self.manager.died(app))

    def forget(self, peer: _Peer) -> int | None:
        if peer.closed:
            return None
        peer.closed = True
        self.peers.pop(peer.app, None)
        self.selector.unregister(peer.sock)
        peer.sock.close()
        return peer.app


if __name__ == "__main__":
    main()
