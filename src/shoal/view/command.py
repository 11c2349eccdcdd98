"""``shoal view``: serve the live view, or play back a run folder, until Ctrl-C.

Prints one line on stdout, ``shoal view: http://HOST:PORT/?token=TOKEN`` (flushed: a run that
started the viewer reads it), then serves. Ctrl-C or SIGTERM stops the server, asks a run it
started to stop (the run writes its checkpoint), waits up to 10 s for it, then terminates it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import signal
import sys
import tempfile
from pathlib import Path

from ..errors import ShoalError

#: Seconds an attached viewer keeps serving after its run ended (the pages get the end).
ATTACH_GRACE_S = 2.0


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``view`` on the ``shoal`` command's ``subparsers``."""
    p = subparsers.add_parser("view", help="watch runs live in a browser, start them there, play back run folders")
    p.add_argument("run_dir", nargs="?", metavar="RUN_DIR", help="a run folder to play back")
    p.add_argument("--root", help="folder of the runs started from the page and of those played back "
                                  "(default: RUN_DIR's parent, else ./runs)")
    p.add_argument("--host", default="127.0.0.1",
                   help="interface to serve on; anything but loopback exposes the runs to the network")
    p.add_argument("--port", type=int, default=0, help="port (0: a free one)")
    p.add_argument("--attach", metavar="PATH", help=argparse.SUPPRESS)  # shoal run --view: one run's own viewer
    p.set_defaults(func=main)
    return p


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def main(args: argparse.Namespace) -> int:
    """Run ``shoal view`` with the parsed ``args``; 0 once stopped.

    Raises
    ------
    ShoalError
        For a RUN_DIR that does not exist, is not a run or is damaged, or a port in use.
    """
    from .playback import Playback

    playback = None
    if args.run_dir:
        run = Path(args.run_dir)
        Playback(run).check()
        root = Path(args.root) if args.root else run.resolve().parent
        if run.resolve().parent != root.resolve():
            raise ShoalError(f"{run} does not lie in --root {root}")
        playback = run.resolve().name
    else:
        root = Path(args.root) if args.root else Path("runs")
    if root.exists() and not root.is_dir():
        raise ShoalError(f"--root {root} is not a folder")
    if not 0 <= args.port < 65536:
        raise ShoalError(f"--port must lie in 0..65535, got {args.port}")
    if not _loopback(args.host):
        print(f"warning: serving on {args.host}: anyone who can reach it and has the URL's token sees and starts "
              "runs (pages name it by this machine's host name or address)", file=sys.stderr, flush=True)
    with tempfile.TemporaryDirectory(prefix="shoal-view-") as private:  # mode 0700
        feed = Path(args.attach) if args.attach else Path(private) / "feed.sock"
        return asyncio.run(_serve(root, feed, args.host, args.port, playback, attach=bool(args.attach)))


async def _serve(root: Path, feed: Path, host: str, port: int, playback: str | None, attach: bool) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):  # from here on, a signal stops the viewer cleanly
        loop.add_signal_handler(sig, stop.set)
    try:
        return await _serve_until(stop, root, feed, host, port, playback, attach)
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


async def _serve_until(stop: asyncio.Event, root: Path, feed: Path, host: str, port: int, playback: str | None,
                       attach: bool) -> int:
    from aiohttp import web

    from .server import Viewer, make_app, url_host

    viewer = Viewer(root, feed, host, playback=playback, attach=attach)
    runner = web.AppRunner(make_app(viewer), access_log=None, handle_signals=False)
    await runner.setup()
    try:
        try:
            await viewer.listen()
        except OSError as exc:
            raise ShoalError(f"cannot listen for runs at {feed}: {exc.strerror}") from None
        try:
            await web.TCPSite(runner, host, port).start()
        except OSError as exc:
            raise ShoalError(f"cannot serve on {host}:{port}: {exc.strerror or exc}") from None
        query = f"?token={viewer.token}" + (f"&run={playback}" if playback else "")
        print(f"shoal view: http://{url_host(host)}:{runner.addresses[0][1]}/{query}", flush=True)
        waits = [asyncio.create_task(stop.wait())]
        if attach:
            waits.append(asyncio.create_task(viewer.finished()))
        done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        if attach and waits[1] in done:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), ATTACH_GRACE_S)  # the pages get the end
        for task in waits:
            task.cancel()
    finally:
        await viewer.close()
        await runner.cleanup()
    return 0
