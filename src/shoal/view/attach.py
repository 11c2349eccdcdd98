"""``shoal run --view``: a viewer of this run's own, started as a child process.

The run makes a private directory (mode 0700), starts ``python -m shoal view --attach
DIR/feed.sock`` and reads the one line the viewer prints (its URL, with the token). The
viewer listens on that socket, the run feeds it (:mod:`.feed`), and the viewer exits by
itself once it has shown the run's ``end``; a viewer still there some seconds after the run
ended is terminated, so no process outlives the run. The child runs in its own session: a
Ctrl-C in the terminal stops the run (which then tells the viewer) without killing the view.
"""

from __future__ import annotations

import logging
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

logger = logging.getLogger("shoal")

#: The viewer's command line, the socket's path appended.
COMMAND = (sys.executable, "-m", "shoal", "view", "--attach")
#: What the viewer's first line starts with, before its URL.
PREFIX = "shoal view: "
#: Seconds to wait for the viewer's URL line.
START_TIMEOUT_S = 60.0
#: Seconds a viewer may take to exit by itself once the run has ended.
EXIT_TIMEOUT_S = 5.0


class AttachedViewer:
    """A running viewer child: its socket, its URL and its process (see :func:`start_viewer`)."""

    def __init__(self, process: subprocess.Popen, folder: Path, url: str):
        self.process, self.folder, self.url = process, folder, url
        self.socket = folder / "feed.sock"

    def close(self, timeout: float | None = None) -> None:
        """Wait up to ``timeout`` s (default :data:`EXIT_TIMEOUT_S`) for the viewer to exit after
        the run's end, then end it, and remove its directory."""
        timeout = EXIT_TIMEOUT_S if timeout is None else timeout
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            pass
        finally:  # a Ctrl-C while waiting ends the viewer too
            if self.process.poll() is None:
                self.process.terminate()
                try:
                    self.process.wait(timeout)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait()
            shutil.rmtree(self.folder, ignore_errors=True)


def start_viewer(timeout: float = START_TIMEOUT_S) -> AttachedViewer | None:
    """Start a viewer for this run and read its URL; ``None`` (with a warning: the run goes on
    unviewed) when it does not say it started within ``timeout`` s."""
    folder = Path(tempfile.mkdtemp(prefix="shoal-view-"))  # 0700: only this user reaches the socket
    try:
        process = subprocess.Popen([*COMMAND, str(folder / "feed.sock")], stdout=subprocess.PIPE,
                                   stdin=subprocess.DEVNULL, text=True, start_new_session=True)
    except OSError as exc:
        shutil.rmtree(folder, ignore_errors=True)
        logger.warning("live view: the viewer could not start (%s): the run goes on unviewed", exc.strerror or exc)
        return None
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=_read_lines, args=(process.stdout, lines), name="shoal-view-stdout", daemon=True).start()
    try:
        line = lines.get(timeout=timeout)
        why = "it exited" if line is None else f"it printed {line.strip()!r}"  # None: its output ended
    except queue.Empty:
        line, why = None, f"no URL within {timeout:g} s"
    if line is None or not line.startswith(PREFIX):
        AttachedViewer(process, folder, "").close(timeout=0)
        logger.warning("live view: the viewer did not start (%s): the run goes on unviewed", why)
        return None
    return AttachedViewer(process, folder, line[len(PREFIX):].strip())


def _read_lines(stream, lines: queue.Queue) -> None:
    """Hand on the viewer's lines (the first is its URL), reading the pipe to its end so the
    viewer never blocks on it; ``None`` at the end."""
    for line in stream:
        lines.put(line)
    lines.put(None)
