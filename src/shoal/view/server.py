"""The viewer's web server: the page, its WebSocket, the API, and the feed a run writes into.

Built on aiohttp: one asyncio process serves HTTP, WebSockets and the run's Unix socket
together, with no framework between the handlers and the bytes (the WebSocket forwards the
run's messages as they arrived). Every request passes :func:`guard` first: the random token
(query ``token`` or header ``X-Shoal-Token``), a ``Host`` naming this server (a page of another
site that rebinds its DNS name to this machine's address sends its own name) and, when sent, an
``Origin`` of this server. A server on a loopback interface is named only by loopback names; one
on another interface (``0.0.0.0``: all of them) also by this machine's host names and by the
address the request reached it at, so that another machine can use it. Only the package's page
files and the run folders under the root are ever read; nothing a request holds is evaluated.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import re
import secrets
import shutil
import socket
import tempfile
from importlib import resources
from pathlib import Path

from aiohttp import WSMsgType, web

from ..errors import ShoalError
from ..live import protocol
from .hub import Hub

#: The page's files, by the name they are served under, with their content type.
STATIC = {"index.html": "text/html", "view.js": "text/javascript", "view.css": "text/css"}
#: Host names that always mean this machine's loopback interface.
LOOPBACK = ("127.0.0.1", "localhost", "[::1]")
#: What a run folder's name may be.
RUN_NAME = re.compile(r"[A-Za-z0-9._-]+")
#: The largest request body the API reads (parameter sets, commands).
MAX_BODY = 1 << 20

VIEWER = web.AppKey("viewer", object)


def _refuse(status: int, line: str) -> web.Response:
    return web.Response(status=status, text=line + "\n", content_type="text/plain")


def _machine_names() -> set[str]:
    """This machine's host names (short and fully qualified), lower case."""
    names = {socket.gethostname()}
    with contextlib.suppress(OSError):
        names.add(socket.getfqdn())
    return {n.lower() for n in names if n}


def url_host(host: str) -> str:
    """``host`` as a URL and a Host header spell it (an IPv6 address in brackets)."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


class Viewer:
    """One viewer process: its token, its root of run folders, the hub, the feed socket and
    the run it started.

    Parameters
    ----------
    root : Path
        The folder of the runs started from the page and of those that may be played back.
    feed_path : Path
        The Unix socket runs write into (created by :meth:`listen`).
    host : str
        The interface the server binds (see :meth:`host_names` for the names a Host header may give).
    playback : str, optional
        The run folder's name (under ``root``) the page opens on.
    attach : bool
        Serve one attached run: :meth:`finished` completes once it ended.
    """

    def __init__(self, root: Path, feed_path: Path, host: str = "127.0.0.1", playback: str | None = None,
                 attach: bool = False):
        from .runs import Launcher

        self.root = Path(root)
        self.feed_path = Path(feed_path)
        self.token = secrets.token_urlsafe(24)
        self.loopback = host in ("127.0.0.1", "localhost", "::1")
        self.hosts = {url_host(host).lower(), *(LOOPBACK if self.loopback else _machine_names())}
        self.hub = Hub()
        self.hub.runs = self.run_names
        self.hub.playback = playback
        self.attach = attach
        self.launcher = Launcher(self.root, self.feed_path, self.hub)
        self._feed_server: asyncio.AbstractServer | None = None
        self._feed_writer: asyncio.StreamWriter | None = None
        self._feeds: set[asyncio.Task] = set()
        self._ended = asyncio.Event()
        self.scratch = Path(tempfile.mkdtemp(prefix="shoal-view-"))  # exported animations, removed at the end

    def host_names(self, local: str | None) -> set[str]:
        """The names a request's ``Host`` may give this server (without the port), for a request
        that reached it at the local address ``local``: the bound host and loopback names on a
        loopback interface; else the bound host, this machine's host names and ``local`` (with
        loopback names when ``local`` is loopback). Never a name another site chose."""
        if self.loopback or not local:
            return self.hosts
        try:
            address = ipaddress.ip_address(local.split("%")[0])
        except ValueError:
            return self.hosts
        if address.version == 6 and address.ipv4_mapped is not None:
            address = address.ipv4_mapped  # an IPv4 client of a server on "::"
        return self.hosts | {url_host(str(address))} | (set(LOOPBACK) if address.is_loopback else set())

    # ----- run folders -----------------------------------------------------------------------
    def run_folder(self, name: str) -> Path:
        """The folder of the run ``name`` under the root.

        Raises
        ------
        web.HTTPNotFound
            For a name that is not a plain folder name, or that leads outside the root (by a
            symbolic link, say), or to nothing.
        """
        if not RUN_NAME.fullmatch(name) or name in (".", ".."):
            raise web.HTTPNotFound(text=f"no run named {name!r}\n")
        root = self.root.resolve()
        path = (root / name).resolve()
        if path.parent != root or not path.is_dir():
            raise web.HTTPNotFound(text=f"no run named {name!r}\n")
        return path

    def run_names(self) -> list[str]:
        """Names of the run folders under the root (those with a ``config.toml``), newest first."""
        if not self.root.is_dir():
            return []
        root = self.root.resolve()
        found = []
        for p in self.root.iterdir():
            with contextlib.suppress(OSError):
                if RUN_NAME.fullmatch(p.name) and p.resolve().parent == root and (p / "config.toml").is_file():
                    found.append((p.stat().st_mtime, p.name))
        return [name for _, name in sorted(found, reverse=True)]

    # ----- the feed --------------------------------------------------------------------------
    async def listen(self) -> None:
        """Listen for runs on the feed socket (owner-only permissions)."""
        self._feed_server = await asyncio.start_unix_server(self._feed, path=str(self.feed_path))
        self.feed_path.chmod(0o600)

    async def _feed(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One run's connection: every message to the hub, at the pace the run sends them."""
        self._feed_writer = writer
        task = asyncio.current_task()
        self._feeds.add(task)
        try:
            while (message := await protocol.read(reader)) is not None:
                if self._feed_writer is not writer:
                    continue  # a newer run took over: this one is on its way out
                header = self.hub.publish(message)
                if header["type"] == "end":
                    self._ended.set()
        except (ShoalError, ConnectionError) as exc:
            self.hub.fail(f"the run's feed broke: {exc}")
        except asyncio.CancelledError:
            pass  # the viewer shuts down
        finally:
            self._feeds.discard(task)
            if self._feed_writer is writer:
                self._feed_writer = None
                if self.attach:
                    self._ended.set()  # the attached run is gone, with or without its end
            writer.close()

    async def stop_run(self) -> bool:
        """Ask the current run to stop (it writes a checkpoint); False when none is going."""
        writer = self._feed_writer
        if writer is not None and self.hub.running:
            with contextlib.suppress(ConnectionError, OSError):
                await protocol.write(writer, protocol.encode("stop"))
                return True
        return await self.launcher.stop()

    async def finished(self) -> None:
        """Wait until the attached run ended (its end pushed, or its connection closed)."""
        await self._ended.wait()

    async def close(self) -> None:
        """Stop listening, stop a run this viewer started (waiting for its checkpoint), and let
        every page go."""
        if self._feed_server is not None:
            self._feed_server.close()
        if self.launcher.running:
            await self.stop_run()
        await self.launcher.shutdown()
        for page in list(self.hub.pages):
            self.hub.leave(page)
        for task in list(self._feeds):
            task.cancel()
        with contextlib.suppress(OSError):
            self.feed_path.unlink()
        shutil.rmtree(self.scratch, ignore_errors=True)


# ----- the guard ---------------------------------------------------------------------------------
@web.middleware
async def guard(request: web.Request, handler):
    """Refuse (403, one line) a ``request`` without the token, naming another host, or sent
    from another origin; else pass it to ``handler`` and mark its answer not to be cached,
    sniffed or referred."""
    viewer: Viewer = request.app[VIEWER]
    sock = request.transport.get_extra_info("sockname") if request.transport is not None else None
    local, port = (sock[0], sock[1]) if sock else (None, None)
    allowed = {f"{h}:{port}" for h in viewer.host_names(local)}
    if request.headers.get("Host", "").lower() not in allowed:
        return _refuse(403, "refused: the Host header does not name this viewer")
    origin = request.headers.get("Origin")
    if origin is not None and origin.lower() not in {f"http://{h}" for h in allowed}:
        return _refuse(403, "refused: a request from another origin")
    token = request.query.get("token") or request.headers.get("X-Shoal-Token", "")
    if not secrets.compare_digest(token.encode(), viewer.token.encode()):
        return _refuse(403, "refused: a wrong or missing token (use the URL shoal view printed)")
    try:
        response = await handler(request)
    except web.HTTPException as exc:
        if exc.status >= 400 and not exc.text:
            exc.text = f"{exc.reason}\n"
        raise
    if not isinstance(response, web.WebSocketResponse):
        response.headers["Cache-Control"] = "no-store"
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "no-referrer"
    return response


# ----- the page --------------------------------------------------------------------------------
def _static(name: str) -> web.Response:
    kind = STATIC.get(name)
    if kind is None:
        raise web.HTTPNotFound(text=f"no file {name!r}\n")
    path = resources.files("shoal.view") / "static" / name
    try:
        body = path.read_bytes()
    except OSError:
        return _refuse(500, f"the page's file {name} is missing from the package")
    return web.Response(body=body, content_type=kind, charset="utf-8")


async def page(request: web.Request) -> web.Response:
    """``GET /``: the page."""
    return _static("index.html")


async def static(request: web.Request) -> web.Response:
    """``GET /static/{name}``: the page's script and style sheet, nothing else."""
    name = request.match_info["name"]
    if name == "index.html":
        raise web.HTTPNotFound(text=f"no file {name!r}\n")
    return _static(name)


async def websocket(request: web.Request) -> web.WebSocketResponse:
    """``GET /ws``: every message of the current run, binary, as the run sent it (after what a
    late page missed); the page's text commands (``{"cmd": "stop"}``) the other way."""
    viewer: Viewer = request.app[VIEWER]
    ws = web.WebSocketResponse(max_msg_size=MAX_BODY)
    await ws.prepare(request)
    queue = viewer.hub.join()

    async def pump() -> None:
        while (message := await queue.get()) is not None:
            await ws.send_bytes(message)  # waits for a slow page: only this page's queue grows

    sender = asyncio.create_task(pump())
    try:
        async for msg in ws:
            if msg.type != WSMsgType.TEXT:
                continue
            try:
                cmd = json.loads(msg.data).get("cmd")
            except (ValueError, AttributeError):
                continue
            if cmd == "stop":
                await viewer.stop_run()
    finally:
        viewer.hub.leave(queue)
        sender.cancel()
        with contextlib.suppress(asyncio.CancelledError, ConnectionError):
            await sender
    return ws


# ----- the API -----------------------------------------------------------------------------------
async def _json_body(request: web.Request):
    try:
        return json.loads(await request.text())
    except (ValueError, UnicodeDecodeError, RecursionError):  # a body of thousands of brackets exhausts the stack
        raise web.HTTPBadRequest(text="the body is not JSON\n") from None


def _bad(exc: ShoalError) -> web.HTTPBadRequest:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return web.HTTPBadRequest(text=f"error: {text}\n")


async def api_scenarios(request: web.Request) -> web.Response:
    """``GET /api/scenarios``: every built-in scenario with every key ``--set`` accepts."""
    from .runs import scenarios

    return web.json_response(await asyncio.to_thread(scenarios))


async def api_run(request: web.Request) -> web.Response:
    """``POST /api/run``: start a run of a built-in scenario with the page's parameters."""
    viewer: Viewer = request.app[VIEWER]
    body = await _json_body(request)
    if not isinstance(body, dict):
        raise web.HTTPBadRequest(text="the body must be a JSON object\n")
    try:
        started = await viewer.launcher.start(body.get("scenario"), body.get("params") or {},
                                              force=body.get("force") is True)
    except ShoalError as exc:
        raise _bad(exc) from None
    except RuntimeError as exc:
        raise web.HTTPConflict(text=f"{exc}\n") from None
    return web.json_response(started)


async def api_stop(request: web.Request) -> web.Response:
    """``POST /api/stop``: ask the current run to stop (it writes a checkpoint)."""
    if not await request.app[VIEWER].stop_run():
        raise web.HTTPConflict(text="no run is going\n")
    return web.json_response({"stopping": True})


async def api_params_save(request: web.Request) -> web.Response:
    """``POST /api/params/save``: a parameter set as a TOML download."""
    from .runs import params_toml

    body = await _json_body(request)
    try:
        text = params_toml(body)
    except ShoalError as exc:
        raise _bad(exc) from None
    name = body["scenario"] if RUN_NAME.fullmatch(str(body["scenario"])) else "params"
    return web.Response(text=text, content_type="application/toml",
                        headers={"Content-Disposition": f'attachment; filename="{name}.toml"'})


async def api_params_load(request: web.Request) -> web.Response:
    """``POST /api/params/load``: a TOML parameter set read back (nothing in it is evaluated)."""
    from .runs import params_from_toml

    try:
        return web.json_response(params_from_toml(await request.text()))
    except ShoalError as exc:
        raise _bad(exc) from None
    except UnicodeDecodeError:
        raise web.HTTPBadRequest(text="error: the parameter set is not UTF-8 text\n") from None


def _playback(request: web.Request):
    from .playback import Playback

    viewer: Viewer = request.app[VIEWER]
    name = request.match_info["name"]
    try:
        return name, Playback(viewer.run_folder(name))
    except ShoalError as exc:
        raise web.HTTPNotFound(text=f"{name}: {exc}\n") from None


def _binary(message: bytes) -> web.Response:
    return web.Response(body=message, content_type="application/octet-stream")


def _int(request: web.Request, key: str, text: str | None = None) -> int:
    raw = text if text is not None else request.query.get(key, "")
    try:
        return int(raw)
    except ValueError:
        raise web.HTTPBadRequest(text=f"{key} must be an integer, got {raw!r}\n") from None


async def _in_thread(fn, *args):
    """``fn(*args)`` off the event loop (disk and HDF5 reads); a ShoalError is a 400."""
    try:
        return await asyncio.to_thread(fn, *args)
    except ShoalError as exc:
        raise _bad(exc) from None


async def api_runs(request: web.Request) -> web.Response:
    """``GET /api/runs``: the run folders under the root, newest first."""
    from .playback import Playback

    viewer: Viewer = request.app[VIEWER]

    def rows():
        out = []
        for name in viewer.run_names():
            try:
                out.append(Playback(viewer.run_folder(name)).listing(name))
            except (ShoalError, web.HTTPNotFound):
                continue  # a folder being made, or not a run
        return out

    return web.json_response(await asyncio.to_thread(rows))


async def api_run_index(request: web.Request) -> web.Response:
    """``GET /api/runs/{name}``: the playback index."""
    name, run = _playback(request)
    return web.json_response(await _in_thread(run.index, name))


async def api_run_frame(request: web.Request) -> web.Response:
    """``GET /api/runs/{name}/frame/{step}``: one frame on disk as a ``frame`` message."""
    _, run = _playback(request)
    step = _int(request, "step", request.match_info["step"])
    if step not in run.frame_paths:
        raise web.HTTPNotFound(text=f"no frame of step {step}\n")
    return _binary(await _in_thread(run.frame, step))


async def api_run_loads(request: web.Request) -> web.Response:
    """``GET /api/runs/{name}/loads``: one ``loads`` message of every step."""
    _, run = _playback(request)
    return _binary(await _in_thread(run.loads))


async def api_run_placements(request: web.Request) -> web.Response:
    """``GET /api/runs/{name}/placements``: one ``placements`` message."""
    _, run = _playback(request)
    return _binary(await _in_thread(run.placements))


async def api_run_probe(request: web.Request) -> web.Response:
    """``GET /api/runs/{name}/probe?grid=&i=&j=``: a grid point's value over the frames."""
    _, run = _playback(request)
    return web.json_response(await _in_thread(run.probe, request.query.get("grid", ""), _int(request, "i"),
                                              _int(request, "j")))


async def api_run_follow(request: web.Request) -> web.Response:
    """``GET /api/runs/{name}/follow?id=``: a particle's x-y over the frames."""
    _, run = _playback(request)
    return web.json_response(await _in_thread(run.follow, _int(request, "id")))


async def api_run_export(request: web.Request) -> web.FileResponse:
    """``POST /api/runs/{name}/export``: the run's animation (GIF or MP4) as a download."""
    from .export import export

    name, run = _playback(request)
    body = await _json_body(request)
    if not isinstance(body, dict):
        raise web.HTTPBadRequest(text="the body must be a JSON object\n")
    fmt, scale = body.get("format", "gif"), body.get("scale", "run")
    path = await _in_thread(export, run, fmt, scale, request.app[VIEWER].scratch)
    return web.FileResponse(path, headers={"Content-Disposition": f'attachment; filename="{name}{path.suffix}"',
                                           "Content-Type": "image/gif" if path.suffix == ".gif" else "video/mp4"})


def make_app(viewer: Viewer) -> web.Application:
    """The aiohttp application of ``viewer``: the guard, the page, the WebSocket and the API."""
    app = web.Application(middlewares=[guard], client_max_size=MAX_BODY)
    app[VIEWER] = viewer
    app.router.add_get("/", page)
    app.router.add_get("/static/{name}", static)
    app.router.add_get("/ws", websocket)
    app.router.add_get("/api/scenarios", api_scenarios)
    app.router.add_post("/api/run", api_run)
    app.router.add_post("/api/stop", api_stop)
    app.router.add_post("/api/params/save", api_params_save)
    app.router.add_post("/api/params/load", api_params_load)
    app.router.add_get("/api/runs", api_runs)
    app.router.add_get("/api/runs/{name}", api_run_index)
    app.router.add_get("/api/runs/{name}/frame/{step}", api_run_frame)
    app.router.add_get("/api/runs/{name}/loads", api_run_loads)
    app.router.add_get("/api/runs/{name}/placements", api_run_placements)
    app.router.add_get("/api/runs/{name}/probe", api_run_probe)
    app.router.add_get("/api/runs/{name}/follow", api_run_follow)
    app.router.add_post("/api/runs/{name}/export", api_run_export)
    return app
