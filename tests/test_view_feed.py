"""The run side of the live view: what a run sends its viewer, and that no viewer ever holds the
run up or changes its result (a viewer that stalls, leaves, or asks the run to stop)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from shoal.cli import main
from shoal.compare import compare_runs
from shoal.live import feed, protocol
from shoal.session import run_scenario
from shoal.trace import Trace
from shoal.view import attach

SMALL = ["app.grid=[64,64]"]
# Frames of ~2 MB each: a viewer that never reads is stuck after the first.
BIG = ["app.grid=[512,512]", "app.work_per_cell=1.0"]


class FakeViewer:
    """A Unix socket server standing in for ``shoal view``: it records every message of every
    connection, and behaves as ``mode`` says: ``read`` everything, ``stall`` (accept and never
    read), ``close`` (hang up after the first frame, then take the next connection), ``stop``
    (send ``stop`` on the run's hello). Once it has read an ``end`` it takes no more connections
    (a run never connects after its end)."""

    def __init__(self, path: Path, mode: str = "read"):
        self.path, self.mode = path, mode
        self.connections: list[list[tuple[dict, dict]]] = []
        self.hung_up = threading.Event()  # mode close: the first connection is closed
        self.ended = threading.Event()  # an end was read
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(path))
        self.server.listen(2)
        self.held: list[socket.socket] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while not self.ended.is_set():
            try:
                conn, _ = self.server.accept()
            except OSError:
                return  # closed
            self.held.append(conn)
            if self.mode == "stall":
                continue
            messages = []
            self.connections.append(messages)
            try:
                self._read(conn, messages)
            except OSError:
                return  # closed before the run's end

    def _read(self, conn, messages):
        while (data := protocol.receive(conn)) is not None:
            header, arrays = protocol.decode(data)
            messages.append((header, {k: v.copy() for k, v in arrays.items()}))
            if header["type"] == "hello" and self.mode == "stop":
                protocol.send(conn, protocol.encode("stop"))
            if header["type"] == "frame" and self.mode == "close" and len(self.connections) == 1:
                conn.close()
                self.hung_up.set()
                return
            if header["type"] == "end":
                self.ended.set()
                return

    def close(self):
        """Stop, once the run's end has been read (the run hands its end to the socket and
        returns: the end may still be on its way here)."""
        if self.mode != "stall":
            self.ended.wait(60)
        with contextlib.suppress(OSError):
            self.server.shutdown(socket.SHUT_RDWR)  # wakes an accept
        self.server.close()
        for conn in self.held:
            conn.close()
        self.thread.join(60)

    def messages(self, kind: str, connection: int = -1) -> list[tuple[dict, dict]]:
        """The messages of one type received on a connection (the last by default)."""
        return [(h, a) for h, a in self.connections[connection] if h["type"] == kind]


@pytest.fixture
def sock():
    """A socket path short enough for AF_UNIX (pytest's tmp_path may be too long)."""
    folder = tempfile.mkdtemp(prefix="shoal-test-")
    yield Path(folder) / "feed.sock"
    shutil.rmtree(folder, ignore_errors=True)


def load_rows(messages) -> tuple[np.ndarray, np.ndarray]:
    """The steps and per-node loads of a connection's ``loads`` messages, in arrival order."""
    steps = np.concatenate([h["first"] + np.arange(len(a["load"])) for h, a in messages])
    return steps, np.concatenate([a["load"] for _, a in messages])


def trace_loads(trace: Trace) -> np.ndarray:
    """Busy seconds of every node at every step, from the trace's task rows."""
    t, nodes = trace.tasks, trace.cluster.nodes
    steps = len(trace.steps)
    return np.bincount(t["step"] * nodes + t["node"], weights=t["cost"], minlength=steps * nodes).reshape(steps, nodes)


# ----- what a reading viewer receives --------------------------------------------------------------
def test_a_viewer_receives_hello_every_steps_loads_frames_and_placements(sock, tmp_path):
    viewer = FakeViewer(sock)
    rec = run_scenario("synthetic-hotspot", steps=12, tiles=64, nodes=4, placement="greedy", period=3, set=SMALL,
                       out=tmp_path / "run", view=sock, view_every=5)
    viewer.close()
    assert len(viewer.connections) == 1
    got = viewer.connections[0]
    assert [h["type"] for h, _ in got][0] == "hello" and got[-1][0]["type"] == "end"
    hello, arrays = got[0]
    assert hello["run"]["steps"] == 12 and hello["run"]["nodes"] == 4 and hello["view_every"] == 5
    assert hello["run"]["folder"] == str((tmp_path / "run").resolve())
    assert hello["params"]["run"]["placement"] == "greedy"
    trace = rec.trace
    np.testing.assert_array_equal(arrays["tile_lo"], trace.tiling.lo[:, :2])
    np.testing.assert_array_equal(arrays["tile_hi"], trace.tiling.hi[:, :2])

    # Every step's loads once, in order, equal to the trace's task costs of that step.
    steps, load = load_rows(viewer.messages("loads"))
    np.testing.assert_array_equal(steps, np.arange(12))
    np.testing.assert_allclose(load, trace_loads(trace), rtol=1e-6)
    lif = np.concatenate([a["lif"] for _, a in viewer.messages("loads")])
    per_core = trace_loads(trace) / trace.cores_per_step()
    np.testing.assert_allclose(lif, per_core.max(axis=1) / per_core.mean(axis=1) - 1, rtol=1e-5)

    # Frames at the start, every 5 steps and at the end; what was not sent was dropped (counted).
    frames = [h["step"] for h, _ in viewer.messages("frame")]
    view = rec.summary["view"]
    assert view["frames_sent"] == len(frames) and view["frames_sent"] + view["frames_dropped"] == 4
    assert frames == sorted(frames) and set(frames) <= {0, 5, 10, 12} and frames[-1] == 12
    end = got[-1][0]
    assert end["status"] == "finished" and end["step"] == 12 and end["summary"]["view"] == view

    # A placement at the start and after every balancing step, the owners the trace holds.
    placements = viewer.messages("placement")
    assert [h["step"] for h, _ in placements] == trace.placement_steps.tolist() == [0, 3, 6, 9]
    assert [h["reason"] for h, _ in placements] == ["initial", "balance", "balance", "balance"]
    for (h, a), owner, before in zip(placements, trace.placement_owners, [None, *trace.placement_owners], strict=False):
        np.testing.assert_array_equal(a["owner"], owner)
        assert h["migrated"] == (0 if before is None else int(np.count_nonzero(owner != before)))
        np.testing.assert_array_equal(a["cores"], [1, 1, 1, 1])


def test_a_frame_written_to_disk_is_the_frame_sent(sock, tmp_path):
    viewer = FakeViewer(sock)
    run_scenario("synthetic-hotspot", steps=6, tiles=16, nodes=2, set=[*SMALL, "run.frame_every=3"],
                 out=tmp_path / "run", view=sock)
    viewer.close()
    frames = [(h, a) for h, a in viewer.messages("frame") if h["step"] % 3 == 0]
    assert [h["step"] for h, _ in frames] == [0, 3, 6]  # a frame on disk always goes out (others may be skipped)
    for h, a in frames:
        with np.load(tmp_path / "run" / "frames" / f"state-{h['step']:06d}.npz") as disk:
            np.testing.assert_array_equal(a["grid:u"], disk["u"].astype(np.float32))


def test_frames_on_the_default_schedule_are_skipped_rather_than_slow_the_run(sock, tmp_path, monkeypatch):
    monkeypatch.setattr(feed, "FRAME_SHARE", 1e-12)  # no frame is ever cheap enough
    viewer = FakeViewer(sock)
    run_scenario("synthetic-hotspot", steps=8, tiles=16, nodes=2, set=SMALL, out=tmp_path / "run", view=sock)
    viewer.close()
    assert viewer.messages("hello")[0][0]["view_every"] == 1
    assert [h["step"] for h, _ in viewer.messages("frame")] == [0, 8]  # the first and the last only
    np.testing.assert_array_equal(load_rows(viewer.messages("loads"))[0], np.arange(8))  # loads never skipped


# ----- viewers that misbehave -------------------------------------------------------------------------
def test_a_viewer_that_never_reads_drops_frames_and_changes_nothing(sock, tmp_path):
    viewer = FakeViewer(sock, mode="stall")
    run_scenario("synthetic-hotspot", steps=8, tiles=16, nodes=2, set=BIG, out=tmp_path / "viewed", view=sock,
                 view_every=1)
    viewer.close()
    plain = run_scenario("synthetic-hotspot", steps=8, tiles=16, nodes=2, set=BIG, out=tmp_path / "plain")
    saved = json.loads((tmp_path / "viewed" / "summary.json").read_text())["view"]
    assert saved["frames_dropped"] > 0 and saved["frames_sent"] + saved["frames_dropped"] == 9
    assert "view" not in plain.summary
    assert compare_runs(tmp_path / "viewed", tmp_path / "plain").max_abs_diff == 0.0


def test_a_viewer_that_leaves_is_reconnected_and_sent_everything_again(sock, tmp_path):
    viewer = FakeViewer(sock, mode="close")

    def first_step_done(k):  # the run goes on once the viewer has hung up (its end goes to the next connection)
        if k == 0:
            assert viewer.hung_up.wait(60)

    rec = run_scenario("synthetic-hotspot", steps=10, tiles=16, nodes=2, set=SMALL, out=tmp_path / "run", view=sock,
                       view_every=2, on_step=first_step_done)
    viewer.close()
    assert rec.summary is not None and len(viewer.connections) == 2
    assert all(c[0][0]["type"] == "hello" for c in viewer.connections)
    steps, _ = load_rows(viewer.messages("loads"))  # the last connection: every step's loads, from the first
    np.testing.assert_array_equal(steps, np.arange(10))
    assert viewer.messages("placement")[0][0]["reason"] == "initial"
    end = viewer.connections[-1][-1][0]
    assert end["type"] == "end" and end["status"] == "finished" and end["step"] == 10


def test_a_viewer_that_asks_to_stop_leaves_a_resumable_run(sock, tmp_path):
    viewer = FakeViewer(sock, mode="stop")
    args = dict(steps=60, tiles=16, nodes=2, set=SMALL)
    rec = run_scenario("synthetic-hotspot", **args, out=tmp_path / "run", view=sock,
                       on_step=lambda k: time.sleep(0.02))  # the stop arrives long before the end
    viewer.close()
    assert rec.stopped_at is not None and rec.stopped_at < 60
    assert any((tmp_path / "run" / "state").glob("checkpoint-*"))
    end = viewer.connections[0][-1][0]
    assert end["type"] == "end" and end["status"] == "stopped" and end["step"] == rec.stopped_at
    run_scenario("synthetic-hotspot", resume=tmp_path / "run")
    run_scenario("synthetic-hotspot", **args, out=tmp_path / "plain")
    assert compare_runs(tmp_path / "run", tmp_path / "plain").max_abs_diff == 0.0


def test_a_run_without_its_viewer_goes_on(sock, tmp_path):
    rec = run_scenario("synthetic-hotspot", steps=4, tiles=16, nodes=2, set=SMALL, out=tmp_path / "run", view=sock)
    assert rec.summary["view"]["frames_sent"] == 0


# ----- shoal run --view ---------------------------------------------------------------------------
FAKE_VIEWER = """
import json, os, socket, sys, time
from shoal.live import protocol
server = socket.socket(socket.AF_UNIX)
server.bind(sys.argv[1])
server.listen(1)
print("shoal view: http://127.0.0.1:1/?token=t", flush=True)
conn, _ = server.accept()
kinds = []
while (data := protocol.receive(conn)) is not None:
    kinds.append(protocol.decode(data)[0]["type"])
    if kinds[-1] == "end":
        break
with open(os.environ["FAKE_VIEWER_SEEN"], "w") as f:
    json.dump({"pid": os.getpid(), "socket": sys.argv[1], "kinds": kinds}, f)
if os.environ["FAKE_VIEWER_MODE"] == "hang":
    time.sleep(60)
"""


@pytest.mark.parametrize("behaviour", ["exit", "hang"])
def test_run_view_starts_a_viewer_prints_its_url_and_leaves_no_process(behaviour, capsys, tmp_path, monkeypatch):
    script, seen = tmp_path / "viewer.py", tmp_path / "seen.json"
    script.write_text(FAKE_VIEWER)
    monkeypatch.setenv("FAKE_VIEWER_SEEN", str(seen))
    monkeypatch.setenv("FAKE_VIEWER_MODE", behaviour)
    monkeypatch.setattr(attach, "COMMAND", (sys.executable, str(script)))
    monkeypatch.setattr(attach, "EXIT_TIMEOUT_S", 0.5)
    code = main(["run", "synthetic-hotspot", "--steps", "4", "--tiles", "16", "--nodes", "2", "--set", SMALL[0],
                 "--out", str(tmp_path / "run"), "--view"])
    assert code == 0
    assert "live view: http://127.0.0.1:1/?token=t" in capsys.readouterr().out
    got = json.loads(seen.read_text())
    kinds = got["kinds"]
    assert kinds[0] == "hello" and kinds[-1] == "end" and "frame" in kinds and "loads" in kinds
    with pytest.raises(ProcessLookupError):  # exited by itself, or ended after the grace; reaped
        os.kill(got["pid"], 0)
    assert not Path(got["socket"]).parent.exists()  # the private socket folder is gone


def test_run_view_goes_on_unviewed_when_the_viewer_fails(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(attach, "COMMAND", (sys.executable, "-c", "import sys; sys.exit(3)"))
    code = main(["run", "synthetic-hotspot", "--steps", "2", "--tiles", "16", "--nodes", "2", "--set", SMALL[0],
                 "--out", str(tmp_path / "run"), "--view"])
    assert code == 0
    assert "the viewer did not start (it exited)" in capsys.readouterr().err
    assert "view" not in json.loads((tmp_path / "run" / "summary.json").read_text())


# ----- under mpiexec ------------------------------------------------------------------------------------
@pytest.mark.mpi(ranks=(2,))
def test_mpi_ranks_send_every_nodes_loads_through_the_first(ranks, mpirun, sock, tmp_path):
    viewer = FakeViewer(sock)
    mpirun(ranks, "run", "synthetic-hotspot", "--steps", "9", "--tiles", "16", "--set", SMALL[0], "--out",
           tmp_path / "run", "--view-socket", sock, "--view-every", "4")
    viewer.close()
    assert len(viewer.connections) == 1  # only the first rank connects
    steps, load = load_rows(viewer.messages("loads"))
    np.testing.assert_array_equal(steps, np.arange(9))
    assert load.shape == (9, 2) and np.all(load > 0)  # both nodes' loads, though each rank measures its own
    np.testing.assert_allclose(load, trace_loads(Trace.read(tmp_path / "run" / "trace.h5")), rtol=1e-6)
    assert [h["step"] for h, _ in viewer.messages("frame")][-1] == 9
    assert viewer.connections[0][-1][0]["status"] == "finished"
    assert os.path.exists(tmp_path / "run" / "summary.json")
