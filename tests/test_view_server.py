"""The viewer process: its guard (token, Host, Origin, names), the feed to the pages (late
joins, a stalled page), runs started from the page, playback, export and ``shoal view``'s
bad input."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

import numpy as np
import pytest
from aiohttp.test_utils import TestClient, TestServer
from yarl import URL

from shoal.cli import build_parser
from shoal.cli import main as shoal_main
from shoal.config import load_scenario
from shoal.trace import Trace
from shoal.view import protocol
from shoal.view.frames import frame_message, live_frame
from shoal.view.hub import PAGE_FRAMES, PageQueue
from shoal.view.server import Viewer, make_app

TINY = ["run.steps=6", "app.grid=[32,32]", "run.frame_every=2", "run.nodes=2", "run.tiles_per_core=2"]


def _feeds_runs() -> bool:
    """Whether ``shoal run`` can feed a viewer (``--view-socket``)."""
    run = build_parser()._subparsers._group_actions[0].choices["run"]
    return any("--view-socket" in a.option_strings for a in run._actions)


needs_feed = pytest.mark.skipif(not _feeds_runs(), reason="shoal run has no --view-socket yet")


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory) -> Path:
    """A finished tiny synthetic run with 4 frames on disk."""
    root = tmp_path_factory.mktemp("runs")
    sets = [a for s in TINY for a in ("--set", s)]
    assert shoal_main(["-q", "run", "synthetic-hotspot", *sets, "--out", str(root / "tiny")]) == 0
    return root / "tiny"


@contextlib.asynccontextmanager
async def serving(root: Path, playback: str | None = None):
    """An in-process viewer on a free loopback port, and a client of it."""
    private = Path(tempfile.mkdtemp(prefix="sv-"))  # a short path: Unix socket names are short
    viewer = Viewer(root, private / "feed.sock", playback=playback)
    await viewer.listen()
    client = TestClient(TestServer(make_app(viewer), host="127.0.0.1"))
    await client.start_server()
    try:
        yield viewer, client
    finally:
        await viewer.close()
        await client.close()
        shutil.rmtree(private, ignore_errors=True)


def run(coro):
    return asyncio.run(coro)


# ----- the guard -------------------------------------------------------------------------------
def test_token_is_required_and_accepted(tmp_path):
    async def go():
        async with serving(tmp_path) as (viewer, client):
            for path in ("/", "/static/view.js", "/api/runs", "/ws"):
                r = await client.get(path)
                assert r.status == 403, path
                assert (await r.text()).count("\n") == 1
                r = await client.get(path, params={"token": viewer.token + "x"})
                assert r.status == 403
            r = await client.get("/api/runs", params={"token": viewer.token})
            assert r.status == 200 and await r.json() == []
            r = await client.get("/api/runs", headers={"X-Shoal-Token": viewer.token})
            assert r.status == 200
            ws = await client.ws_connect("/ws", params={"token": viewer.token})
            assert protocol.decode((await ws.receive(timeout=5)).data)[0]["type"] == "status"
            await ws.close()

    run(go())


def test_foreign_host_and_origin_are_refused(tmp_path):
    async def go():
        async with serving(tmp_path) as (viewer, client):
            port = client.port
            t = {"token": viewer.token}
            r = await client.get("/api/runs", params=t, headers={"Host": f"evil.example:{port}"})
            assert r.status == 403 and "Host" in await r.text()
            r = await client.get("/api/runs", params=t, headers={"Host": "127.0.0.1:1"})
            assert r.status == 403
            r = await client.get("/api/runs", params=t, headers={"Host": f"localhost:{port}"})
            assert r.status == 200
            r = await client.get("/api/runs", params=t, headers={"Origin": "http://evil.example"})
            assert r.status == 403 and "origin" in await r.text()
            r = await client.get("/api/runs", params=t, headers={"Origin": f"http://127.0.0.1:{port}"})
            assert r.status == 200
            with pytest.raises(Exception, match="403"):
                await client.ws_connect("/ws", params=t, headers={"Origin": "http://evil.example"})

    run(go())


def test_names_outside_the_root_are_not_found(tmp_path, tiny_run):
    root = tmp_path / "root"
    root.mkdir()
    (root / "escape").symlink_to(tiny_run)  # a link out of the root
    (root / "notarun").mkdir()

    async def go():
        async with serving(root) as (viewer, client):
            t = {"token": viewer.token}
            def raw(path):  # sent as written: no client-side normalisation of ".."
                return URL(f"http://127.0.0.1:{client.port}{path}?token={viewer.token}", encoded=True)

            for name in ("escape", "notarun", "..%2F..%2Fetc", "..", "a%00b", "nothing", "%2E%2E"):
                r = await client.session.get(raw(f"/api/runs/{name}"), allow_redirects=False)
                assert r.status == 404, name
                assert (await r.text()).count("\n") == 1
            for path in ("/static/../server.py", "/static/%2E%2E/server.py", "/static/server.py",
                         "/static/..%2Fserver.py", "/static/index.html", "/static/", "/static/../../__init__.py"):
                r = await client.session.get(raw(path), allow_redirects=False)
                assert r.status == 404, path
            r = await client.get("/api/runs", params=t)
            assert await r.json() == []  # the link and the folder without a run are not listed

    run(go())


# ----- the hub ----------------------------------------------------------------------------------
def test_page_queue_drops_the_oldest_frames_only():
    async def go():
        q = PageQueue()
        q.put(b"hello")
        for k in range(5):
            q.put(b"frame%d" % k, frame=True)
            q.put(b"loads%d" % k)
        q.put(b"s1", status=True)
        q.put(b"s2", status=True)  # replaces s1: a status is a snapshot
        assert q.dropped == 5 - PAGE_FRAMES
        got = [await q.get() for _ in range(9)]
        assert got == [b"hello", b"loads0", b"loads1", b"loads2", b"frame3", b"loads3", b"frame4", b"loads4", b"s2"]
        q.close()
        assert await q.get() is None

    run(go())


def _messages(frames: int = 3):
    hello = protocol.encode("hello", {"run": {"folder": "/r", "pid": 7, "scenario": "s"}, "params": {},
                                      "view_every": 1},
                            {"tile_lo": np.zeros((2, 2)), "tile_hi": np.ones((2, 2))})
    loads = [protocol.encode("loads", {"first": k}, {"load": np.full((1, 2), k), "step_time": [k], "lif": [0.0]})
             for k in range(4)]
    placement = protocol.encode("placement", {"step": 0, "migrated": 0, "reason": "initial"},
                                {"owner": np.array([0, 1]), "cores": np.array([1, 1])})
    frame = [frame_message({"u": np.full((8, 8), k, np.float32)}, k, 0.5 * k) for k in range(frames)]
    return hello, loads, placement, frame


def test_a_late_page_gets_status_hello_history_and_the_latest_frame(tmp_path):
    hello, loads, placement, frames = _messages()

    async def go():
        async with serving(tmp_path) as (viewer, client):
            reader, writer = await asyncio.open_unix_connection(str(viewer.feed_path))
            for m in (hello, loads[0], loads[1], placement, frames[0], loads[2], frames[1], loads[3], frames[2]):
                await protocol.write(writer, m)
            while viewer.hub.frames_seen < 3:
                await asyncio.sleep(0.01)
            ws = await client.ws_connect("/ws", params={"token": viewer.token})
            got = [(await ws.receive(timeout=5)).data for _ in range(8)]
            status = protocol.decode(got[0])[0]
            assert status["type"] == "status" and status["running"] and status["run"]["pid"] == 7
            assert got[1:] == [hello, loads[0], loads[1], placement, loads[2], loads[3], frames[2]]
            await ws.send_str(json.dumps({"cmd": "stop"}))  # forwarded to the run
            assert protocol.decode(await protocol.read(reader))[0]["type"] == "stop"
            await ws.close()
            writer.close()

    run(go())


def test_a_run_that_reconnects_is_replayed_to_a_late_page_once():
    from shoal.view.hub import Hub

    hello, loads, placement, frames = _messages()

    async def go():
        hub = Hub()
        for m in (hello, loads[0], placement, frames[0], loads[1]):
            hub.publish(m)
        for m in (hello, loads[0], placement, loads[1], loads[2], frames[1]):  # the feed sends its logs again
            hub.publish(m)
        page = hub.join()
        got = []
        while page._items:
            got.append(await page.get())
        return got

    got = run(go())
    assert protocol.decode(got[0])[0]["type"] == "status"
    assert got[1:] == [hello, loads[0], placement, loads[1], loads[2], frames[1]]


def _stalled_page(port: int, token: str) -> socket.socket:
    """A WebSocket client that completes the handshake and then never reads."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connecting: a small window
    s.connect(("127.0.0.1", port))
    key = base64.b64encode(os.urandom(16)).decode()
    s.sendall((f"GET /ws?token={token} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
               f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
    return s


def test_a_stalled_page_never_holds_up_the_feed(tmp_path):
    big = [frame_message({"u": np.full((400, 400), k, np.float32)}, k, float(k)) for k in range(40)]
    hello, loads, _, _ = _messages()

    async def go():
        async with serving(tmp_path) as (viewer, client):
            stalled = _stalled_page(client.port, viewer.token)
            while not viewer.hub.pages:
                await asyncio.sleep(0.01)
            _, writer = await asyncio.open_unix_connection(str(viewer.feed_path))
            for m in (hello, *big, protocol.encode("end", {"status": "finished"})):
                await protocol.write(writer, m)
            while viewer.hub.end is None:
                await asyncio.sleep(0.01)
            page = next(iter(viewer.hub.pages))
            assert viewer.hub.frames_seen == len(big)  # every frame read from the feed
            assert page.dropped > 0  # ... and the stalled page lost some
            stalled.close()
            writer.close()

    run(go())


# ----- scenarios and parameters -----------------------------------------------------------------
def test_scenarios_list_every_key_set_accepts(tmp_path):
    async def go():
        async with serving(tmp_path) as (viewer, client):
            r = await client.get("/api/scenarios", params={"token": viewer.token})
            return await r.json()

    listed = {s["name"]: s for s in run(go())}
    from shoal.config import builtin_scenarios

    assert set(listed) == set(builtin_scenarios())
    for name, entry in listed.items():
        sc = load_scenario(name)
        assert entry["app"] == sc.app
        keys = {f"run.{k}" for k in sc.to_dict()["run"]} | {f"app.{k}" for k in sc.to_dict()["app"]} - {"app.name"}
        assert set(entry["params"]) == keys
        for key, text in entry["params"].items():  # every value reads back as the scenario's own
            section, field = key.split(".")
            value = sc.to_dict()[section][field]
            assert (tomllib.loads(f"v = {text}")["v"] if text else None) == value, (name, key)
        assigned = [f"{k}={v}" for k, v in entry["params"].items() if v]
        assert load_scenario(name).override(assigned).to_dict() == sc.to_dict()  # --set takes them all back


def test_a_bad_parameter_is_refused_with_shoal_runs_line(tmp_path, capsys):
    for bad in ({"app.nope": "1"}, {"run.steps": "-3"}, {"run.placement": "\"greedy\""}, {"app.grid": "\"big\""}):
        key, value = next(iter(bad.items()))
        code = shoal_main(["run", "synthetic-hotspot", "--set", f"{key}={value}", "--out", str(tmp_path / "x")])
        line = capsys.readouterr().err.strip().splitlines()[-1]
        assert code == 2

        async def go(bad=bad):
            async with serving(tmp_path) as (viewer, client):
                r = await client.post("/api/run", params={"token": viewer.token},
                                      json={"scenario": "synthetic-hotspot", "params": bad})
                return r.status, await r.text()

        assert run(go()) == (400, line + "\n")
    assert not (tmp_path / "x").exists()


def test_parameter_sets_save_and_load_as_toml(tmp_path):
    params = {"run.steps": "12", "app.grid": "[48, 40]", "run.placement": "\"birdshot\""}

    async def go():
        async with serving(tmp_path) as (viewer, client):
            t = {"token": viewer.token}
            r = await client.post("/api/params/save", params=t, json={"scenario": "synthetic-hotspot",
                                                                       "params": params})
            assert r.status == 200
            text = await r.text()
            r = await client.post("/api/params/load", params=t, data=text)
            assert r.status == 200
            back = await r.json()
            r = await client.post("/api/params/load", params=t, data="scenario = 'synthetic-hotspot'\n[run]\nx = 1\n")
            assert r.status == 400 and "unknown key" in await r.text()
            r = await client.post("/api/params/load", params=t, data="import os")
            assert r.status == 400
            return text, back

    text, back = run(go())
    assert tomllib.loads(text) == {"scenario": "synthetic-hotspot", "run": {"steps": 12, "placement": "birdshot"},
                                   "app": {"grid": [48, 40]}}
    assert back == {"scenario": "synthetic-hotspot", "params": params}


# ----- runs from the page -----------------------------------------------------------------------
def _tiny_params() -> dict:
    return {k: v for k, v in (s.split("=", 1) for s in TINY)}


async def _wait_process(viewer: Viewer, timeout: float = 120.0) -> int:
    return await asyncio.wait_for(viewer.launcher.process.wait(), timeout)


@needs_feed
def test_a_run_from_the_page_holds_exactly_its_parameters(tmp_path):
    params = {**_tiny_params(), "app.sigma": "0.1", "run.seed": "3"}

    async def go():
        async with serving(tmp_path) as (viewer, client):
            r = await client.post("/api/run", params={"token": viewer.token},
                                  json={"scenario": "synthetic-hotspot", "params": params})
            assert r.status == 200, await r.text()
            started = await r.json()
            assert await _wait_process(viewer) == 0, viewer.launcher.last_line()
            return started, viewer.hub.end

    started, end = run(go())
    folder = Path(started["folder"])
    assert folder.parent == tmp_path and folder.name == started["name"]
    expected = load_scenario("synthetic-hotspot").override([f"{k}={v}" for k, v in params.items()])
    assert tomllib.loads((folder / "config.toml").read_text()) == expected.to_dict()
    assert end["status"] == "finished"


@needs_feed
def test_a_second_run_is_refused_and_a_stopped_run_is_resumable(tmp_path):
    from shoal.session import resumable

    params = {**_tiny_params(), "run.steps": "100000", "app.grid": "[64,64]"}

    async def go():
        async with serving(tmp_path) as (viewer, client):
            t = {"token": viewer.token}
            r = await client.post("/api/run", params=t, json={"scenario": "synthetic-hotspot", "params": params})
            assert r.status == 200, await r.text()
            first = await r.json()
            r = await client.post("/api/run", params=t, json={"scenario": "synthetic-hotspot", "params": params})
            assert r.status == 409
            while viewer.hub.frames_seen < 2:  # connected and stepping
                assert viewer.launcher.running, viewer.launcher.last_line()
                await asyncio.sleep(0.05)
            r = await client.post("/api/stop", params=t)
            assert r.status == 200
            assert await _wait_process(viewer) == 130
            r = await client.post("/api/stop", params=t)
            assert r.status == 409
            return first

    folder = Path(run(go())["folder"])
    assert not (folder / "summary.json").exists()
    assert resumable(folder).to_dict()["run"]["steps"] == 100000


@needs_feed
@pytest.mark.slow
def test_a_stalled_page_leaves_the_run_bitwise_equal_to_an_unviewed_one(tmp_path):
    from shoal.compare import compare_runs

    # Two fields of 256 KB at every step (of some 20 ms, so the run's sender keeps up): more than the
    # sockets' buffers hold for a page that never reads.
    sets = [*TINY, "run.steps=40", "app.grid=[256,256]", "run.frame_every=0"]
    assert shoal_main(["-q", "run", "synthetic-hotspot", *[a for s in sets for a in ("--set", s)],
                       "--out", str(tmp_path / "plain")]) == 0

    async def go():
        async with serving(tmp_path / "root") as (viewer, client):
            stalled = _stalled_page(client.port, viewer.token)
            while not viewer.hub.pages:
                await asyncio.sleep(0.01)
            page = next(iter(viewer.hub.pages))
            r = await client.post("/api/run", params={"token": viewer.token}, json={
                "scenario": "synthetic-hotspot", "params": dict(s.split("=", 1) for s in sets) | {
                    "run.frame_every": "0"}})
            assert r.status == 200, await r.text()
            started = await r.json()
            assert await _wait_process(viewer) == 0, viewer.launcher.last_line()
            while viewer.hub.end is None:
                await asyncio.sleep(0.01)
            stalled.close()
            return started, page.dropped, viewer.hub.frames_seen

    started, dropped, seen = run(go())
    assert dropped > 0 and seen > dropped
    assert compare_runs(tmp_path / "plain", started["folder"]).identical


# ----- playback ---------------------------------------------------------------------------------
def test_playback_of_a_finished_run(tiny_run):
    trace = Trace.read(tiny_run)

    async def go():
        async with serving(tiny_run.parent, playback="tiny") as (viewer, client):
            t = {"token": viewer.token}
            listing = await (await client.get("/api/runs", params=t)).json()
            index = await (await client.get("/api/runs/tiny", params=t)).json()
            frames = {s: await (await client.get(f"/api/runs/tiny/frame/{s}", params=t)).read()
                      for s in index["frames"]}
            missing = await client.get("/api/runs/tiny/frame/1", params=t)
            loads = await (await client.get("/api/runs/tiny/loads", params=t)).read()
            placements = await (await client.get("/api/runs/tiny/placements", params=t)).read()
            probe = await (await client.get("/api/runs/tiny/probe", params={**t, "grid": "u", "i": 3, "j": 5})).json()
            outside = await client.get("/api/runs/tiny/probe", params={**t, "grid": "u", "i": 99, "j": 0})
            return listing, index, frames, missing.status, loads, placements, probe, outside.status

    listing, index, frames, missing, loads, placements, probe, outside = run(go())
    assert listing == [{"name": "tiny", "scenario": "synthetic-hotspot", "steps": 6, "status": "finished",
                        "frames": 4}]
    assert index["frames"] == [0, 2, 4, 6] and index["status"] == "finished"
    assert index["hello"]["tiles"] == 4 and index["hello"]["nodes"] == 2 and index["hello"]["grid"] == [32, 32]
    assert index["hello"]["folder"] == str(tiny_run.resolve())
    assert missing == 404 and outside == 400
    for step, data in frames.items():
        header, arrays = protocol.decode(data)
        with np.load(tiny_run / "frames" / f"state-{step:06d}.npz") as z:
            on_disk = {k: z[k] for k in z.files}
        assert header["type"] == "frame" and header["step"] == step
        np.testing.assert_array_equal(arrays["grid:u"], on_disk["u"].astype(np.float32))
        assert probe["values"][index["frames"].index(step)] == on_disk["u"][3, 5]
    assert probe["steps"] == [0, 2, 4, 6]
    header, arrays = protocol.decode(loads)
    assert header["first"] == 0
    np.testing.assert_array_equal(arrays["load"], (trace.node_load() * trace.cores_per_step()).astype(np.float32))
    from shoal.imbalance import lif

    np.testing.assert_array_equal(arrays["lif"], lif(trace.node_load()).astype(np.float32))
    np.testing.assert_allclose(arrays["step_time"].sum(), trace.step_end[-1], rtol=1e-5)
    header, arrays = protocol.decode(placements)
    assert header["type"] == "placements"
    np.testing.assert_array_equal(arrays["steps"], trace.placement_steps)
    np.testing.assert_array_equal(arrays["owner"], trace.placement_owners)
    np.testing.assert_array_equal(arrays["migrated"][0], 0)


def test_follow_reads_a_particle_over_the_frames(tmp_path, tiny_run):
    run_dir = tmp_path / "particles"
    run_dir.mkdir()
    shutil.copy(tiny_run / "config.toml", run_dir)  # a stopped run: a trace, no summary
    shutil.copy(tiny_run / "trace.h5", run_dir)
    (run_dir / "frames").mkdir()
    rng = np.random.default_rng(1)
    ids = np.arange(50)
    frames = {}
    for step in (0, 10, 20):
        order = rng.permutation(50)[: 40 if step == 20 else 50]  # particle ids in any order; some leave
        frames[step] = {"x": rng.random((len(order), 2)), "id": ids[order], "v": rng.random((len(order), 2))}
        np.savez(run_dir / "frames" / f"state-{step:06d}.npz", **frames[step])
    gone = next(i for i in ids if i not in frames[20]["id"])

    async def go():
        async with serving(tmp_path) as (viewer, client):
            t = {"token": viewer.token}
            index = await (await client.get("/api/runs/particles", params=t)).json()
            follow = await (await client.get("/api/runs/particles/follow", params={**t, "id": 7})).json()
            lost = await (await client.get("/api/runs/particles/follow", params={**t, "id": int(gone)})).json()
            frame = await (await client.get("/api/runs/particles/frame/10", params=t)).read()
            return index, follow, lost, frame

    index, follow, lost, frame = run(go())
    assert index["status"] == "stopped" and index["frames"] == [0, 10, 20]
    for k, step in enumerate((0, 10, 20)):
        f = frames[step]
        hit = np.flatnonzero(f["id"] == 7)
        if len(hit):
            assert (follow["x"][k], follow["y"][k]) == (f["x"][hit[0], 0], f["x"][hit[0], 1])
    assert lost["x"][2] is None and lost["y"][2] is None
    header, arrays = protocol.decode(frame)
    expected_fields, expected = live_frame(frames[10], 10, float("nan"))
    np.testing.assert_array_equal(arrays["id"], expected["id"])
    np.testing.assert_array_equal(arrays["x"], expected["x"].astype(np.float32))


def test_export_returns_a_gif_with_every_frame(tiny_run):
    from PIL import Image

    async def go():
        async with serving(tiny_run.parent) as (viewer, client):
            t = {"token": viewer.token}
            r = await client.post("/api/runs/tiny/export", params=t, json={"format": "gif", "scale": "run"})
            assert r.status == 200, await r.text()
            body = await r.read()
            bad = await client.post("/api/runs/tiny/export", params=t, json={"format": "avi"})
            return r.headers["Content-Type"], body, bad.status

    kind, body, bad = run(go())
    assert kind == "image/gif" and bad == 400
    with Image.open(__import__("io").BytesIO(body)) as im:
        assert im.n_frames == 4


# ----- the command ------------------------------------------------------------------------------
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, tiny_run):
    (tmp_path / "empty").mkdir()
    assert shoal_main(["view", str(tmp_path / "nothing")]) == 2
    assert capsys.readouterr().err.strip() == f"error: no run folder at {tmp_path / 'nothing'}"
    assert shoal_main(["view", str(tmp_path / "empty")]) == 2
    assert "is not a run folder" in capsys.readouterr().err
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    try:
        assert shoal_main(["view", "--root", str(tmp_path), "--port", str(busy.getsockname()[1])]) == 2
    finally:
        busy.close()
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: cannot serve on 127.0.0.1:") and "\n" not in err


def test_shoal_view_prints_its_url_and_stops_on_sigterm(tmp_path, tiny_run):
    p = subprocess.Popen([sys.executable, "-m", "shoal", "view", str(tiny_run)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline().strip()
        assert line.startswith("shoal view: http://127.0.0.1:") and "?token=" in line and line.endswith("&run=tiny")
        p.send_signal(signal.SIGTERM)
        assert p.wait(20) == 0
        assert p.stdout.read() == ""
    finally:
        p.kill()
        p.wait()


@needs_feed
def test_ctrl_c_stops_the_run_it_started(tmp_path):
    import urllib.request

    p = subprocess.Popen([sys.executable, "-m", "shoal", "view", "--root", str(tmp_path)], stdout=subprocess.PIPE,
                         text=True)
    try:
        url = p.stdout.readline().split(": ", 1)[1].strip()
        base, token = url.split("/?")[0], url.split("token=")[1]
        body = json.dumps({"scenario": "synthetic-hotspot", "params": {**_tiny_params(), "run.steps": "100000"}})
        req = urllib.request.Request(f"{base}/api/run", data=body.encode(), headers={"X-Shoal-Token": token})
        started = json.loads(urllib.request.urlopen(req, timeout=60).read())
        folder = Path(started["folder"])
        deadline = time.time() + 60
        while not (folder / "frames" / "state-000002.npz").exists() and time.time() < deadline:  # stepping
            time.sleep(0.1)
        pid = int((folder / "run.lock").read_text())
        p.send_signal(signal.SIGINT)
        assert p.wait(30) == 0
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)  # no process left behind
        assert not (folder / "summary.json").exists() and list((folder / "state").glob("*"))
    finally:
        p.kill()
        p.wait()
