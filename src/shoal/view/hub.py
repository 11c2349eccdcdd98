"""What the viewer knows of the run it shows, and one queue per page that never holds up the run.

The hub keeps the current run's ``hello``, every ``loads`` and ``placement`` message (they are
small, and a page that connects late needs all of them to draw the heatmap and the tiles'
history), the latest ``frame`` and the ``end``. Each page connection owns a :class:`PageQueue`:
frames in it are dropped oldest first beyond two (Vertanen §6: a slow client must not hold up
the simulation, so the viewer forgets frames instead of waiting), and every other message is
kept. Putting into a queue never waits, so the feed is read at the run's pace whatever the
pages do.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable

from ..live.protocol import decode, encode

#: Frames a page's queue holds before the oldest is dropped.
PAGE_FRAMES = 2


class PageQueue:
    """The messages waiting for one page connection: at most :data:`PAGE_FRAMES` frames (older
    ones dropped and counted), every other message kept in order."""

    def __init__(self):
        # (kind, box): kind True for a frame, None for a status, False otherwise; box holds the
        # message, or None once dropped. A frame is dropped by emptying its box, so a page that
        # stops reading costs the feed no scan of its backlog.
        self._items: deque[tuple[bool | None, list]] = deque()
        self._frames: deque[list] = deque()  # the boxes of the frames still waiting, oldest first
        self._ready = asyncio.Event()
        self.dropped = 0
        self.closed = False

    def put(self, message: bytes, frame: bool = False, status: bool = False) -> None:
        """Queue ``message`` (never waits); ``frame``: it may be dropped for a newer frame;
        ``status``: it replaces a status still waiting (a status is a snapshot: the newest says all)."""
        if status:  # rare (a run starts or ends, an error): a pass over the backlog is fine
            for kind, box in self._items:
                if kind is None:
                    box[0] = None
        box = [message]
        if frame:
            if len(self._frames) >= PAGE_FRAMES:
                self._frames.popleft()[0] = None
                self.dropped += 1
            self._frames.append(box)
        self._items.append((None if status else frame, box))
        self._ready.set()

    async def get(self) -> bytes | None:
        """The next message, waiting for one; ``None`` once the queue is closed."""
        while True:
            while not self._items:
                if self.closed:
                    return None
                self._ready.clear()
                await self._ready.wait()
            kind, box = self._items.popleft()
            if kind and self._frames and self._frames[0] is box:
                self._frames.popleft()
            if box[0] is not None:
                return box[0]

    def close(self) -> None:
        """Wake the reader with ``None``: the page goes away."""
        self.closed = True
        self._ready.set()


class Hub:
    """The current run as far as the feed told it, and the pages watching it."""

    def __init__(self):
        self.pages: set[PageQueue] = set()
        self.error: str | None = None
        self.runs: Callable[[], list[str]] = list  # the run folders' names, newest first (set by the server)
        self.playback: str | None = None  # the run folder the viewer was opened on
        self._reset()

    def _reset(self) -> None:
        self.hello: bytes | None = None
        self.run: dict | None = None
        self.history: list[bytes] = []  # loads and placement messages, in order
        self.frame: bytes | None = None
        self.end: dict | None = None
        self._end_message: bytes | None = None
        self.frames_seen = 0

    @property
    def running(self) -> bool:
        """Whether a run said hello and has not ended yet."""
        return self.run is not None and self.end is None

    def publish(self, message: bytes) -> dict:
        """Take one message from a run: remember what a late page needs and queue it for every
        page. Returns its header (a ``hello`` starts a new run and forgets the previous one)."""
        header, _ = decode(message)
        kind = header["type"]
        if kind == "hello":
            run = header.get("run") or {}
            again = self.run is not None and self.end is None and all(
                run.get(k) == self.run.get(k) for k in ("folder", "pid"))
            if not again:  # a new run
                self._reset()
            else:  # the same run reconnecting sends every loads and placement again: keep them once
                self.history = []
            self.error = None
            self.hello, self.run = message, run
        elif kind in ("loads", "placement"):
            self.history.append(message)
        elif kind == "frame":
            self.frame = message
            self.frames_seen += 1
        elif kind == "end":
            self.end, self._end_message = header, message
        for page in self.pages:
            page.put(message, frame=kind == "frame")
        if kind in ("hello", "end"):
            self.broadcast_status()
        return header

    def status(self, page: PageQueue | None = None) -> bytes:
        """A ``status`` message (for ``page``: with the frames its connection lost so far)."""
        return encode("status", {"running": self.running, "run": self.run, "runs": self.runs(),
                                 "error": self.error, "dropped": page.dropped if page is not None else 0,
                                 "playback": self.playback})

    def broadcast_status(self) -> None:
        """Queue a fresh ``status`` for every page."""
        for page in self.pages:
            page.put(self.status(page), status=True)

    def fail(self, error: str | None) -> None:
        """Show ``error`` (one line) as the status of every page."""
        self.error = error
        self.broadcast_status()

    def join(self) -> PageQueue:
        """A new page's queue, holding what it missed: status, hello, every loads and placement
        message, the latest frame (and the end, when the run is over)."""
        page = PageQueue()
        page.put(self.status(page), status=True)
        for message in (self.hello, *self.history, self.frame, self._end_message):
            if message is not None:
                page.put(message, frame=message is self.frame)
        self.pages.add(page)
        return page

    def leave(self, page: PageQueue) -> None:
        """Forget a page that went away."""
        self.pages.discard(page)
        page.close()
