"""The invasive resource manager: its state machine on hand-worked message sequences and over
thousands of random message orders and deaths (hypothesis), then the manager as a process
with applications that die, a manager that dies, and ranks that set up without deadlock."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import struct
import subprocess
import sys
import textwrap
import threading
import time
from multiprocessing.connection import Client

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from shoal.errors import ShoalError
from shoal.invasive.client import Invasion, setup
from shoal.invasive.manager import POLICIES, Constraints, ResourceManager
from shoal.invasive.server import MAX_MESSAGE_BYTES, encode, pool, start_manager


def kinds(out):
    return [(app, message["type"], message.get("cores")) for app, message in out]


# ----- hand-worked sequences ------------------------------------------------------------------------
def test_the_first_application_gets_the_whole_pool():
    rm = ResourceManager(4)
    assert kinds(rm.register("a")) == [("a", "welcome", None), ("a", "grant", [0, 1, 2, 3])]
    assert kinds(rm.invade("a", Constraints(workload=5.0))) == [("a", "invaded", [0, 1, 2, 3])]
    rm.check()


def test_a_core_asked_back_is_handed_on_only_after_its_acknowledgement():
    rm = ResourceManager(4)
    rm.register("a")
    out = rm.register("b")  # D = (2, 2): a is asked for two cores, b gets none yet
    assert kinds(out) == [("b", "welcome", None), ("a", "release", [2, 3])]
    assert rm.owner == ["a"] * 4 and rm.waiting == ["b"] and rm.returning("a") == {2, 3}
    assert kinds(rm.invade("b", Constraints(), blocking=True)) == []  # nothing free: b's answer waits
    rm.check()
    assert kinds(rm.released("a", [3])) == [("b", "grant", [3])]  # one core let go: b holds one, wants two
    assert kinds(rm.released("a", [2])) == [("b", "grant", [2]), ("b", "invaded", [2, 3])]
    assert rm.owner == ["a", "a", "b", "b"] and rm.waiting == []
    rm.check()


def test_an_acknowledgement_of_cores_not_asked_back_changes_nothing():
    rm = ResourceManager(3)
    rm.register("a")
    assert rm.released("a", [0, 1]) == [] and rm.owner == ["a"] * 3


def test_a_dead_application_frees_its_cores_at_once_those_asked_back_included():
    rm = ResourceManager(4)
    rm.register("a")
    rm.register("b")  # a is asked for [2, 3] and has not answered
    assert kinds(rm.died("a")) == [("b", "grant", [0, 1, 2, 3])]
    assert rm.died("a") == [] and rm.targets == {"b": 4}
    rm.check()


def test_applications_beyond_the_pool_wait_and_are_served_in_arrival_order():
    rm = ResourceManager(2)
    for app in "abcd":
        rm.register(app)
    for app in "ab":
        rm.released(app, rm.returning(app))
    assert rm.targets == {"a": 1, "b": 1, "c": 0, "d": 0} and rm.waiting == ["c", "d"]
    assert kinds(rm.invade("d", Constraints(), blocking=True)) == []  # d waits, it is not refused
    assert kinds(rm.retreat("b")) == [("c", "grant", [1])]  # c came first
    assert kinds(rm.died("a")) == [("d", "grant", [0]), ("d", "invaded", [0])]
    rm.check()


def test_workload_policy_shares_by_workload():
    rm = ResourceManager(8)
    rm.register("a")
    rm.register("b")
    rm.invade("a", Constraints(workload=3.0), blocking=False)
    rm.invade("b", Constraints(workload=1.0), blocking=False)
    assert rm.targets == {"a": 6, "b": 2}
    rm.check()


def test_scalability_policy_follows_the_largest_gain():
    rm = ResourceManager(5, "scalability")
    rm.register("a")
    rm.register("b")
    rm.invade("a", Constraints(graph=(1.0, 2.0, 3.0, 3.5)), blocking=False)
    rm.invade("b", Constraints(graph=(1.0, 1.6, 2.0)), blocking=False)
    # from (1, 1), three more cores: a's gains are 1, 1, 0.5 and b's 0.6, 0.4, so a, a, then b
    assert rm.targets == {"a": 3, "b": 2}
    rm.check()


def test_a_range_caps_the_share_and_leaves_the_rest_free():
    rm = ResourceManager(6)
    rm.register("a")
    out = rm.invade("a", Constraints(range=(1, 2)), blocking=True)
    assert kinds(out) == [("a", "release", [2, 3, 4, 5]), ("a", "invaded", [0, 1])]
    rm.released("a", [2, 3, 4, 5])
    assert rm.free == [2, 3, 4, 5]
    rm.check()


@pytest.mark.parametrize("constraints, message", [
    (Constraints(range=(0, 2)), "1 <= min <= max"),
    (Constraints(range=(3, 2)), "1 <= min <= max"),
    (Constraints(range=(5, 6)), "the pool has 4"),
    (Constraints(workload=0.0), "positive"),
    (Constraints(graph=(1.0, -2.0)), "not positive"),
    (Constraints(graph=()), "empty"),
])
def test_impossible_constraints_are_refused_in_one_line(constraints, message):
    rm = ResourceManager(4)
    rm.register("a")
    with pytest.raises(ShoalError, match=message):
        rm.invade("a", constraints)


def test_bad_calls_are_refused():
    with pytest.raises(ShoalError, match="at least one core"):
        ResourceManager(0)
    with pytest.raises(ShoalError, match="unknown invasive policy"):
        ResourceManager(2, "fastest")
    rm = ResourceManager(2)
    rm.register("a")
    with pytest.raises(ShoalError, match="already registered"):
        rm.register("a")
    with pytest.raises(ShoalError, match="not registered"):
        rm.invade("z", Constraints())
    with pytest.raises(ShoalError, match="--cores"):
        pool(0)


def test_constraints_cross_the_wire_unchanged():
    c = Constraints(range=(2, 3), workload=7.5, graph=(1.0, 1.9))
    assert Constraints.from_message(c.to_message()) == c
    assert Constraints.from_message({}) == Constraints()


# ----- random message orders and deaths ------------------------------------------------------------
class ManagerMachine(RuleBasedStateMachine):
    """Applications modelled as what they believe they hold: granted cores until they
    acknowledge their release. No core may ever be believed held by two of them."""

    @initialize(cores=st.integers(1, 6), policy=st.sampled_from(POLICIES))
    def start(self, cores, policy):
        self.rm = ResourceManager(cores, policy)
        self.next_app = 0
        self.holds: dict[int, set[int]] = {}  # what each application believes it holds
        self.asked: dict[int, set[int]] = {}  # cores asked back, not yet acknowledged
        self.blocked: set[int] = set()  # inside a blocking invade: they only acknowledge releases

    def deliver(self, out, waiting_before):
        served = []
        for app, message in out:
            kind, cores = message["type"], set(message.get("cores") or ())
            assert app in self.holds, f"message to {app}, which is gone"
            if kind == "grant":
                for other, held in self.holds.items():
                    assert not cores & held, f"cores {cores & held} granted to {app} while {other} holds them"
                if not self.holds[app] and app in waiting_before:
                    served.append(app)
                self.holds[app] |= cores
            elif kind == "release":
                assert cores and cores <= self.holds[app] - self.asked[app]
                self.asked[app] |= cores
            elif kind == "invaded":
                assert app in self.blocked
                self.blocked.discard(app)
                assert cores and cores == self.holds[app] - self.asked[app]
        waiting = [app for app in waiting_before if app in self.holds]
        assert set(served) == set(waiting[:len(served)]), f"served {served} out of arrival order {waiting}"

    def call(self, method, *args):
        waiting = self.rm.waiting
        self.deliver(method(*args), waiting)

    def alive(self, data, free_only=False):
        apps = sorted(a for a in self.holds if not (free_only and a in self.blocked))
        return data.draw(st.sampled_from(apps)) if apps else None

    @rule()
    def register(self):
        app, self.next_app = self.next_app, self.next_app + 1
        self.holds[app], self.asked[app] = set(), set()
        waiting = self.rm.waiting + [app]
        self.deliver(self.rm.register(app), waiting)

    @precondition(lambda self: self.holds)
    @rule(data=st.data(), blocking=st.booleans(),
          workload=st.none() | st.floats(0.1, 100.0),
          graph=st.none() | st.lists(st.floats(0.1, 10.0), min_size=1, max_size=8),
          lo=st.integers(1, 6), span=st.none() | st.integers(0, 6))
    def invade(self, data, blocking, workload, graph, lo, span):
        app = self.alive(data, free_only=True)
        if app is None:
            return
        rng = None if span is None else (min(lo, self.rm.cores), min(lo, self.rm.cores) + span)
        constraints = Constraints(range=rng, workload=workload, graph=tuple(graph) if graph else None)
        if blocking:
            self.blocked.add(app)
        self.call(self.rm.invade, app, constraints, blocking)

    @precondition(lambda self: any(self.asked.values()))
    @rule(data=st.data())
    def acknowledge(self, data):
        app = data.draw(st.sampled_from(sorted(a for a, cores in self.asked.items() if cores)))
        cores = data.draw(st.sets(st.sampled_from(sorted(self.asked[app])), min_size=1))
        self.asked[app] -= cores
        self.holds[app] -= cores
        self.call(self.rm.released, app, sorted(cores))

    def forget(self, app):
        del self.holds[app], self.asked[app]
        self.blocked.discard(app)

    @precondition(lambda self: self.holds)
    @rule(data=st.data())
    def retreat(self, data):
        app = self.alive(data, free_only=True)
        if app is not None:
            self.forget(app)
            self.call(self.rm.retreat, app)

    @precondition(lambda self: self.holds)
    @rule(data=st.data())
    def die(self, data):
        app = self.alive(data)
        self.forget(app)
        self.call(self.rm.died, app)

    @rule(data=st.data())
    def settle(self, data):
        """Every application answers every release: then each holds exactly its target."""
        while any(self.asked.values()):
            app = data.draw(st.sampled_from(sorted(a for a, cores in self.asked.items() if cores)))
            cores = sorted(self.asked[app])
            self.asked[app].clear()
            self.holds[app] -= set(cores)
            self.call(self.rm.released, app, cores)
        for app, held in self.holds.items():
            assert len(held) == self.rm.targets[app]
            if len(self.holds) <= self.rm.cores:
                assert held, f"{app} holds no core once set up, with {self.rm.cores} for {len(self.holds)}"
            assert app not in self.blocked or not held

    @invariant()
    def consistent(self):
        if not hasattr(self, "rm"):
            return
        self.rm.check()
        for app, held in self.holds.items():
            assert held == self.rm.held(app) and self.asked[app] == self.rm.returning(app)
        assert all(owner in self.holds for owner in self.rm.owner if owner is not None)


ManagerMachine.TestCase.settings = settings(max_examples=250, stateful_step_count=40, deadline=None)
TestManagerMessageOrders = ManagerMachine.TestCase


# ----- the manager as a process ---------------------------------------------------------------------
@pytest.fixture
def manager(tmp_path):
    handle = start_manager(cores=4, log_path=tmp_path / "decisions.log")
    yield handle
    handle.stop()


def poll_until(invasion, done, seconds):
    """Poll until ``done(cores)``, for at most ``seconds``; returns the last cores."""
    deadline = time.monotonic() + seconds
    cores = invasion.poll()
    while not done(cores) and time.monotonic() < deadline:
        cores = invasion.poll(0.02)
    return cores


APPLICATION = textwrap.dedent("""
    import os, select, sys
    from shoal.invasive.client import Invasion
    address, key, ending = sys.stdin.readline().split()
    invasion = Invasion(address, bytes.fromhex(key), name="doomed")
    invasion.register()
    print(len(invasion.invade()), flush=True)
    while True:
        invasion.poll(0.02)
        if select.select([sys.stdin], [], [], 0)[0]:
            sys.stdin.readline()
            if ending == "exit":
                os._exit(3)
            os.kill(os.getpid(), signal.SIGKILL)
""").replace("import os,", "import signal, os,")


@pytest.mark.parametrize("ending", ["exit", "kill"])
def test_cores_of_a_dead_application_are_free_within_a_second(manager, ending):
    doomed = subprocess.Popen([sys.executable, "-c", APPLICATION], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    doomed.stdin.write(f"{manager.address} {manager.authkey.hex()} {ending}\n")
    doomed.stdin.flush()
    assert doomed.stdout.readline().strip() == "4"  # it holds the whole pool
    with Invasion(manager.address, manager.authkey, name="survivor") as survivor:
        survivor.invade(blocking=True)  # half the pool, once the doomed one has let two cores go
        assert len(survivor.cores) == 2
        doomed.stdin.write("end\n")
        doomed.stdin.flush()
        doomed.wait(30)
        cores = poll_until(survivor, lambda cores: len(cores) == 4, 1.0)
    assert cores == {0, 1, 2, 3}
    assert doomed.returncode == (3 if ending == "exit" else -signal.SIGKILL)


def test_without_its_manager_an_application_keeps_its_cores_and_says_so_once(manager, caplog):
    invasion = Invasion(manager.address, manager.authkey, name="orphan")
    invasion.register()
    assert invasion.invade(workload=2.0) == {0, 1, 2, 3}
    os.kill(manager.pid, signal.SIGKILL)
    manager.process.wait(30)
    with caplog.at_level(logging.WARNING, logger="shoal"):
        cores = poll_until(invasion, lambda cores: invasion.lost, 5.0)
        again = invasion.poll(0.05), invasion.invade(workload=1.0), invasion.invade(blocking=False)
        invasion.retreat()
    assert invasion.lost and cores == {0, 1, 2, 3} and all(c == cores for c in again)
    gone = [r for r in caplog.records if "resource manager is gone" in r.getMessage()]
    assert len(gone) == 1 and "orphan keeps its 4 cores" in gone[0].getMessage()


def test_a_blocking_invade_gets_the_cores_only_after_their_release_is_acknowledged(manager, tmp_path):
    let_go = threading.Event()

    def shrink(keep):
        time.sleep(0.3)  # the threads of the other cores take their time to block
        let_go.set()

    first = Invasion(manager.address, manager.authkey, release=shrink, name="first")
    first.register()
    assert first.invade() == {0, 1, 2, 3}
    stop = threading.Event()
    answering = threading.Thread(target=lambda: [first.poll(0.02) for _ in iter(stop.is_set, True)])
    answering.start()
    try:
        with Invasion(manager.address, manager.authkey, name="second") as second:
            cores = second.invade(blocking=True)
            assert let_go.is_set(), "cores granted before the first application let them go"
            assert cores == {2, 3} and first.cores == {0, 1}
    finally:
        stop.set()
        answering.join()
    assert poll_until(first, lambda cores: len(cores) == 4, 5.0) == {0, 1, 2, 3}  # the second retreated
    first.retreat()
    log = (tmp_path / "decisions.log").read_text()
    assert log.index("release [2, 3] -> app 1") < log.index("grant [2, 3] -> app 2") < log.index("app 2 retreats")


def test_ranks_set_up_without_deadlock_when_one_holds_every_core(manager):
    """Rank 0 holds the whole pool before rank 1 arrives; both get a core before their barrier."""
    barrier = threading.Barrier(2, timeout=30)
    votes = [False, False]
    got = {}

    def all_ranks(rank, mine):  # what comm.allreduce(mine, op=MPI.LAND) does for two ranks
        votes[rank] = mine
        barrier.wait()
        result = all(votes)
        barrier.wait()
        return result

    ranks = [Invasion(manager.address, manager.authkey, name=f"rank {r}") for r in range(2)]
    ranks[0].register()
    assert ranks[0].invade() == {0, 1, 2, 3}

    def rank(r):
        if r == 1:
            ranks[1].register()
        got[r] = setup(ranks[r], lambda mine: all_ranks(r, mine), workload=1.0)

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert got[0] and got[1] and not got[0] & got[1]
    for invasion in ranks:
        invasion.retreat()


def test_a_wrong_key_is_refused_in_one_line(manager):
    with pytest.raises(ShoalError, match="refused"):
        Invasion(manager.address, b"not the key").register()


def test_the_default_pool_is_this_process_cpus_and_a_larger_one_is_logical():
    cpus = sorted(os.sched_getaffinity(0))
    assert pool() == (len(cpus), cpus)
    assert pool(len(cpus) + 4) == (len(cpus) + 4, None)


# ----- peers that misbehave ---------------------------------------------------------------------------
def registered(address, authkey, name):
    """An invasion registered from a thread, or ``None`` if that took more than a minute."""
    invasion = Invasion(address, authkey, name=name)
    done = threading.Thread(target=invasion.register, daemon=True)
    done.start()
    done.join(60)
    return None if done.is_alive() else invasion


def raw_peer(handle):
    """A connection to the manager that passed the key check, spoken to byte by byte."""
    connection = Client(handle.address, "AF_UNIX", authkey=handle.authkey)
    return connection, socket.socket(fileno=os.dup(connection.fileno()))


def test_peers_stalled_in_the_handshake_or_inside_a_message_hold_up_no_one(manager):
    connection, partial = raw_peer(manager)
    partial.sendall(struct.pack("!i", 100) + b'{"type": "reg')  # a message's first bytes, never the rest
    stalled = [socket.socket(socket.AF_UNIX) for _ in range(3)]
    for s in stalled:
        s.connect(manager.address)  # and never answers the key check
    invasion = registered(manager.address, manager.authkey, "served")
    assert invasion is not None, "an application could not register beside peers that stall"
    assert invasion.invade(workload=1.0) == {0, 1, 2, 3}
    invasion.retreat()
    for s in (*stalled, partial):
        s.close()
    connection.close()


def test_a_peer_stalled_in_the_handshake_is_hung_up_on(tmp_path):
    with start_manager(cores=2, handshake_timeout=0.5) as handle:
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(60)
        s.connect(handle.address)
        challenge = s.recv(1024)
        assert b"#CHALLENGE#" in challenge
        assert s.recv(1024) == b""  # never answered: the manager hung up
        s.close()


def test_a_message_over_the_bound_is_refused_in_one_line_and_the_manager_goes_on(manager):
    connection, sock = raw_peer(manager)
    sock.sendall(struct.pack("!i", 400 * 2**20) + b"{" * 1000)  # a 400 MB message's length and first bytes
    assert connection.poll(60), "no answer to a message over the bound"
    assert json.loads(connection.recv_bytes()) == {
        "type": "error", "message": f"a message of {400 * 2**20} bytes (at most {MAX_MESSAGE_BYTES}); connection "
                                    "closed"}
    with pytest.raises(EOFError):
        connection.recv_bytes()
    sock.close()
    connection.close()
    with Invasion(manager.address, manager.authkey, name="next") as invasion:
        assert invasion.invade(workload=1.0) == {0, 1, 2, 3}


def test_a_peer_that_floods_without_reading_holds_up_no_one(manager):
    connection, sock = raw_peer(manager)
    connection.send_bytes(encode({"type": "register", "name": "flood", "pid": 0}))
    invade = encode({"type": "invade", "blocking": True, "workload": 1.0})
    flood = b"".join(struct.pack("!i", len(invade)) + invade for _ in range(100_000))  # 5 MB of answers
    threading.Thread(target=send_all, args=(sock, flood), daemon=True).start()  # blocks once the manager stops reading
    waiting, before = 0, -1
    deadline = time.monotonic() + 120
    while (not waiting or waiting != before) and time.monotonic() < deadline:  # until its answers stop coming
        time.sleep(0.5)
        before, waiting = waiting, unread(sock)
    assert waiting > 0
    other = registered(manager.address, manager.authkey, "served")
    assert other is not None, "an application could not register beside a peer that does not read"
    assert other.app == 2 and other.pool == 4
    sock.shutdown(socket.SHUT_RDWR)  # the flooder goes: its cores return to the other
    assert poll_until(other, lambda cores: len(cores) == 4, 30.0) == {0, 1, 2, 3}
    other.retreat()
    sock.close()
    connection.close()


def send_all(sock: socket.socket, data: bytes) -> None:
    with contextlib.suppress(OSError):  # the test hung up
        sock.sendall(data)


def unread(sock: socket.socket) -> int:
    """Bytes waiting in ``sock``'s receive queue."""
    import fcntl
    import termios

    return struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0" * 4))[0]
