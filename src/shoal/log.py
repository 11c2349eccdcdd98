"""Logging: what a run says as it goes, on a terminal, in a batch job's output and in its folder.

Everything shoal says goes through the standard ``logging`` module under the ``shoal``
logger, so a program embedding shoal configures it like any other library. The command line
sets it up with :func:`configure`: rich's handler on a terminal, plain time-stamped lines
otherwise (batch jobs, pipes). :func:`run_log` adds the run folder's ``run.log`` for the
run's life. :class:`ProgressLog` is the batch job's progress bar: a line every so many steps
or seconds, with the simulated time, the wall time and an estimate of the time left.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

logger = logging.getLogger("shoal")

LEVELS = ("debug", "info", "warning", "error")
LINE_FORMAT = "%(asctime)s %(levelname)-7s %(message)s"
FILE_ONLY = {"console": False}  # logger.info(..., extra=FILE_ONLY): for run.log, not the terminal


def configure(level: str | int = "info", *, stream=None) -> None:
    """Send the ``shoal`` logger's records to ``stream`` (standard error by default).

    Parameters
    ----------
    level : str or int
        One of ``debug``, ``info``, ``warning``, ``error`` (or a ``logging`` level number).
    stream : file object, optional
        Where to write; a terminal gets rich's handler, anything else one plain line per record.
    """
    for handler in list(logger.handlers):
        if getattr(handler, "_shoal_console", False):
            logger.removeHandler(handler)
    if is_terminal(stream if stream is not None else sys.stderr):
        from rich.console import Console
        from rich.logging import RichHandler

        console = Console(file=stream) if stream is not None else Console(stderr=True)
        handler: logging.Handler = RichHandler(console=console, show_path=False, markup=False)
        handler.setFormatter(logging.Formatter("%(message)s"))
    else:
        handler = logging.StreamHandler(stream) if stream is not None else _StandardError()
        handler.setFormatter(logging.Formatter(LINE_FORMAT, "%H:%M:%S"))
    handler._shoal_console = True  # type: ignore[attr-defined]
    handler.addFilter(lambda record: getattr(record, "console", True))  # FILE_ONLY records stay in run.log
    handler.setLevel(_level(level))
    logger.addHandler(handler)
    logger.setLevel(min(_level(level), logging.INFO))  # run.log always gets info
    logger.propagate = False


class _StandardError(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is at the time (it may be replaced after configuring)."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value):
        pass


def _level(level: str | int) -> int:
    if isinstance(level, int):
        return level
    return getattr(logging, level.upper())


def is_terminal(stream) -> bool:
    """Whether ``stream`` is an interactive terminal (progress bars) or not (log lines)."""
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


@contextmanager
def run_log(folder: str | Path) -> Iterator[Path]:
    """Copy the ``shoal`` logger's records at info and above to ``folder/run.log`` (appended,
    so a resumed run's log continues the first part's)."""
    path = Path(folder) / "run.log"
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)-7s %(message)s"))
    handler.setLevel(logging.INFO)
    if logger.level == logging.NOTSET or logger.level > logging.INFO:
        logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    try:
        yield path
    finally:
        logger.removeHandler(handler)
        handler.close()


class ProgressLog:
    """A progress line every ``every_steps`` steps or ``every_s`` seconds, whichever comes first.

    Parameters
    ----------
    name : str
        What is running (the scenario).
    total : int
        The step the run ends at.
    first : int
        The step it starts from (a resumed run's checkpoint).
    every_steps, every_s : int, float
        How often to speak: after this many steps, or this many seconds of wall time.
    """

    def __init__(self, name: str, total: int, first: int = 0, every_steps: int = 100, every_s: float = 30.0):
        self.name, self.total, self.first = name, total, first
        self.every_steps, self.every_s = max(1, every_steps), every_s
        self.start = self.last_time = time.perf_counter()
        self.last_step = first

    def step(self, done: int, sim_time: float | None = None) -> None:
        """Record that the run has reached step ``done``; log a line when one is due (always at the end).

        ``sim_time`` is the simulated time reached, in seconds, when the app has one.
        """
        now = time.perf_counter()
        if done < self.total and done - self.last_step < self.every_steps and now - self.last_time < self.every_s:
            return
        self.last_step, self.last_time = done, now
        logger.info(self.line(done, now - self.start, sim_time))

    def line(self, done: int, wall_s: float, sim_time: float | None = None) -> str:
        """The progress line at step ``done``, ``wall_s`` seconds after the start.

        It names the step and the fraction of the run done, the simulated time ``sim_time`` (s)
        when given, the wall time and the ETA (``?`` before any step has run).
        """
        ran = done - self.first
        left = (self.total - done) * wall_s / ran if ran > 0 else float("nan")
        sim = f", t = {sim_time:.4g} s" if sim_time is not None else ""
        return (f"{self.name}: step {done}/{self.total} ({100.0 * done / max(self.total, 1):.0f}%){sim}, "
                f"wall {_duration(wall_s)}, ETA {_duration(left)}")


def _duration(seconds: float) -> str:
    if seconds != seconds:  # NaN: nothing measured yet
        return "?"
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else f"{m}m{s:02d}s" if m else f"{s}s"


class Stages:
    """Named stages of a piece of work, each timed (as Devito times the passes of an operator).

    ``with stages("build"):`` times a stage; stages entered inside it are its parts, named
    ``build.app`` and so on. A stage entered twice adds up. :meth:`line` says them all in one
    line for a log, :attr:`seconds` keeps them for a summary.
    """

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._open: list[str] = []

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        key = ".".join([*self._open, name])
        self._open.append(name)
        start = time.perf_counter()
        try:
            yield
        finally:
            self._open.pop()
            self.seconds[key] = self.seconds.get(key, 0.0) + time.perf_counter() - start

    def line(self) -> str:
        """``resolve 0.004 s, build 0.91 s (app 0.42, tiling 0.001, ...), ...``: every stage with its parts."""
        parts = []
        for key, seconds in self.seconds.items():
            if "." in key:
                continue
            inner = [f"{k.split('.', 1)[1]} {_short(s)}" for k, s in self.seconds.items()
                     if k.startswith(key + ".") and k.count(".") == 1]
            parts.append(f"{key} {_short(seconds)} s" + (f" ({', '.join(inner)})" if inner else ""))
        return ", ".join(parts)


def _short(seconds: float) -> str:
    return f"{seconds:.3g}" if seconds >= 0.001 else f"{seconds:.1e}"
