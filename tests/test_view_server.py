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
from shoal.live import protocol
from shoal.live.frames import frame_message, live_frame
from shoal.trace import Trace
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
async def serving(root: Path, playback: str | None = None, host: str = "127.0.0.1"):
    """An in-process viewer on a free port of ``host`` (loopback by default), and a client of it."""
    private = Path(tempfile.mkdtemp(prefix="sv-"))  # a short path: Unix socket names are short
    viewer = Viewer(root, private / "feed.sock", host=host, playback=playback)
    await viewer.listen()
    client = TestClient(TestServer(make_app(viewer), host=host))
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


def _machine_address() -> str | None:
    """An address of this machine other than loopback (the one a route out would use), if any."""
    with contextlib.suppress(OSError), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect(("192.0.2.1", 9))  # no packet is sent
        address = s.getsockname()[0]
        return None if address.startswith("127.") else address
    return None


def test_a_viewer_on_every_interface_is_reached_by_this_machines_names_and_no_other(tmp_path):
    address = _machine_address()

    async def go():
        async with serving(tmp_path, host="0.0.0.0") as (viewer, client):
            port, t = client.port, {"token": viewer.token}

            async def status(target: str, host: str) -> int:
                url = URL(f"http://{target}:{port}/api/runs?token={viewer.token}", encoded=True)
                async with client.session.get(url, headers={"Host": host}) as r:
                    return r.status

            got = {"local 0.0.0.0": await status("127.0.0.1", f"0.0.0.0:{port}"),
                   "local loopback": await status("127.0.0.1", f"localhost:{port}"),
                   "host name": await status("127.0.0.1", f"{socket.gethostname().upper()}:{port}"),
                   "rebound": await status("127.0.0.1", f"evil.example:{port}"),
                   "other port": await status("127.0.0.1", f"{socket.gethostname()}:{port + 1}")}
            if address is not None:  # as another machine reaches it: at this machine's address
                got["address"] = await status(address, f"{address}:{port}")
                got["address, rebound"] = await status(address, f"evil.example:{port}")
                r = await client.session.get(URL(f"http://{address}:{port}/api/runs"), params=t,
                                             headers={"Origin": f"http://{address}:{port}"})
                got["address, own origin"] = r.status
            return got

    got = run(go())
    assert got.pop("rebound") == got.pop("other port") == 403
    assert got.pop("address, rebound", 403) == 403
    assert set(got.values()) == {200}, got


def test_a_viewer_on_loopback_accepts_loopback_names_only(tmp_path):
    address = _machine_address()

    async def go():
        async with serving(tmp_path) as (viewer, client):
            t = {"token": viewer.token}
            names = [socket.gethostname(), *([address] if address else [])]
            return [(await client.get("/api/runs", params=t, headers={"Host": f"{n}:{client.port}"})).status
                    for n in names]

    assert set(run(go())) == {403}


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


NESTED = {  # a parameter set nested beyond any parameter, and the line it is refused with
    "tables in a section": ("scenario = 'synthetic-hotspot'\n[run.sub.deeper]\nx = 1\n",
                            "error: unknown key 'run.sub'; "),
    "arrays 2000 deep": ("scenario = 'synthetic-hotspot'\n[app]\ngrid = " + "[" * 2000 + "]" * 2000 + "\n",
                         "error: the parameter set nests values more than 8 deep\n"),
    "inline tables 500 deep": ("scenario = 'synthetic-hotspot'\n[app]\ngrid = " + "{a = " * 500 + "1" + "}" * 500,
                               "error: the parameter set nests values more than 8 deep\n"),
    "arrays 20 deep": ("scenario = 'synthetic-hotspot'\n[app]\ngrid = " + "[" * 20 + "]" * 20 + "\n",
                       "error: app.grid: a value nested more than 8 deep\n"),
}


def test_nested_parameters_are_refused_in_one_line(tmp_path):
    async def go():
        async with serving(tmp_path) as (viewer, client):
            t = {"token": viewer.token}
            got = {}
            for name, (text, _) in NESTED.items():
                r = await client.post("/api/params/load", params=t, data=text)
                got[name] = r.status, await r.text()
            deep = "[" * 5000 + "]" * 5000
            for path, body in (("/api/run", {"scenario": "synthetic-hotspot", "params": {"app.grid": deep}}),
                               ("/api/params/save", {"scenario": "synthetic-hotspot", "params": {"app.grid": deep}})):
                r = await client.post(path, params=t, json=body)
                got[path] = r.status, await r.text()
            r = await client.post("/api/run", params=t, data=deep)  # the body itself
            got["body"] = r.status, await r.text()
            return got

    got = run(go())
    for name, (_, line) in NESTED.items():
        status, text = got.pop(name)
        assert status == 400 and text.startswith(line) and text.count("\n") == 1, (name, text[:200])
    assert got == {"/api/run": (400, "error: app.grid: a value nested more than 8 deep\n"),
                   "/api/params/save": (400, "error: app.grid: a value nested more than 8 deep\n"),
                   "body": (400, "the body is not JSON\n")}


def test_a_run_from_the_page_reads_files_under_the_root_only(tmp_path):
    from shoal.view.runs import assignments

    root = tmp_path / "root"
    root.mkdir()
    np.save(root / "bed.npy", np.zeros((8, 8)))
    np.save(tmp_path / "outside.npy", np.zeros((8, 8)))
    (root / "link.npy").symlink_to(tmp_path / "outside.npy")
    here = root.resolve()

    async def go():
        async with serving(root) as (viewer, client):
            got = {}
            for value in ("/etc/hostname", "../outside.npy", str(tmp_path / "outside.npy"), "link.npy"):
                r = await client.post("/api/run", params={"token": viewer.token}, json={
                    "scenario": "swe-lake-at-rest", "params": {"app.bathymetry_file": f'"{value}"'}})
                got[value] = r.status, await r.text()
            return got

    for value, answer in run(go()).items():
        assert answer == (400, f"error: app.bathymetry_file: {value} lies outside the viewer's root {here} (runs "
                               "started from the page read files there only)\n")
    assert sorted(p.name for p in root.iterdir()) == ["bed.npy", "link.npy"]  # no run was started
    for value in ("bed.npy", '"bed.npy"', str(root / "bed.npy")):  # in the root: the run gets its absolute path
        assert assignments("swe-lake-at-rest", {"app.bathymetry_file": value}, root=root) == [
            f'app.bathymetry_file="{here / "bed.npy"}"']


def test_a_run_from_the_page_lands_under_the_root_whatever_the_name(tmp_path):
    from shoal.view.runs import new_name

    root = tmp_path / "root"
    root.mkdir()

    async def go():
        async with serving(root) as (viewer, client):
            got = []
            for name in ("../escape", "/tmp/x.toml", "synthetic-hotspot/../../escape", str(tmp_path / "escape")):
                r = await client.post("/api/run", params={"token": viewer.token}, json={"scenario": name,
                                                                                         "params": {}})
                got.append((r.status, (await r.text()).startswith(f"error: unknown scenario {name!r}; built-in: ")))
            return got

    assert run(go()) == [(400, True)] * 4
    assert list(root.iterdir()) == [] and sorted(p.name for p in tmp_path.iterdir()) == ["root"]
    for label in ("../../escape", "/abs/path", ".hidden", "a b"):  # a name is a label: the folder stays in the root
        assert (root / new_name(root, label)).parent == root and "/" not in new_name(root, label)


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


DAMAGE = {  # what is done to a copy of a finished run, and the line shoal view refuses it with
    "config.toml not TOML": (lambda run: (run / "config.toml").write_text("x = ["),
                             "{run}/config.toml is not valid TOML: Invalid value (at end of document)"),
    "config.toml not a run's": (lambda run: (run / "config.toml").write_text('name = "x"\n'),
                                "{run}/config.toml is not a run's configuration (no [run] table, or no [app] table "
                                "with a name)"),
    "summary.json cut short": (lambda run: (run / "summary.json").write_text('{"app": "synth'),
                               "{run}/summary.json is not a run's summary (not a JSON object)"),
    "trace.h5 not HDF5": (lambda run: (run / "trace.h5").write_bytes(b"\0" * 4096),
                          "{run}/trace.h5 is not a readable trace (truncated or not HDF5): Unable to synchronously "
                          "open file (file signature not found)"),
    "a frame not npz": (lambda run: (run / "frames" / "state-000002.npz").write_text("zz"),
                        "{run}/frames/state-000002.npz is not a readable frame (not a NumPy .npz file)"),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_run_is_refused_in_one_line_before_any_page(damage, tmp_path, tiny_run, capsys):
    run_dir = tmp_path / "run"
    shutil.copytree(tiny_run, run_dir)
    spoil, line = DAMAGE[damage]
    spoil(run_dir)
    assert shoal_main(["view", str(run_dir), "--port=-1"]) == 2  # a served page would be refused otherwise
    out = capsys.readouterr()
    assert out.err == "error: " + line.format(run=run_dir.resolve()) + "\n" and out.out == ""


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
