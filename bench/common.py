"""What every benchmark shares: the measurement protocol and where it ran.

The protocol (after sampi §V, which validates on several runs per configuration): every
measurement is repeated (``--repeats``, default 5) and quoted as the median with its spread
(max - min over the median); a ratio against a baseline is taken within each repeat, both
measured in the same run, and its median quoted. A benchmark runs inside :class:`Benchmark`,
which prints the host's provenance (:mod:`shoal.provenance`) at the start and the load at
the end, warns when the host was busy before or after, and with ``--json FILE`` writes the
rows it printed and the provenance into one JSON record.

A benchmark reads::

    ap = argparse.ArgumentParser()
    add_arguments(ap)
    args = ap.parse_args()
    with Benchmark("name", args) as bench:
        stat = repeat(lambda: measure_once(), args.repeats)
        print(f"step {stat.show(1e3)} ms")
        bench.add(case="...", step_s=stat)
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from shoal import provenance
from shoal.files import write_text

REPEATS = 5


def median_spread(values) -> tuple[float, float]:
    """Median and relative spread (max - min over median) of repeated measurements."""
    v = np.asarray(values, dtype=np.float64)
    med = float(np.median(v))
    return med, float(np.ptp(v) / med) if med else 0.0


@dataclass(frozen=True)
class Stat:
    """Repeated measurements of one quantity: their median and spread."""

    values: tuple[float, ...]

    @property
    def median(self) -> float:
        """The median of the repeats."""
        return median_spread(self.values)[0]

    @property
    def spread(self) -> float:
        """Max - min of the repeats over their median (0 for a zero median)."""
        return median_spread(self.values)[1]

    def show(self, scale: float = 1.0, digits: int = 2, unit: str = "") -> str:
        """``median ±spread``, the median multiplied by ``scale`` with ``digits`` decimals and
        followed by ``unit``."""
        return f"{self.median * scale:.{digits}f}{unit} ±{self.spread:.0%}"

    def as_json(self) -> dict:
        """The median, the spread and every repeat."""
        return {"median": self.median, "spread": self.spread, "values": list(self.values)}


def repeat(fn: Callable[[], float | Mapping], n: int = REPEATS) -> Stat | dict:
    """Call ``fn`` ``n`` times; the median and spread of what it returned.

    ``fn`` returns one number, or a mapping of numbers (several quantities measured together,
    such as a time and its baseline's, or their ratio within the repeat); the result is then a
    :class:`Stat` per key.
    """
    results = [fn() for _ in range(max(n, 1))]
    if isinstance(results[0], Mapping):
        return {k: Stat(tuple(float(r[k]) for r in results)) for k in results[0]}
    return Stat(tuple(float(r) for r in results))


def add_arguments(ap: argparse.ArgumentParser, repeats: int = REPEATS) -> None:
    """The protocol's flags: ``--repeats N`` and ``--json FILE``."""
    ap.add_argument("--repeats", type=int, default=repeats, help=f"repeats of each measurement (default {repeats})")
    ap.add_argument("--json", type=Path, metavar="FILE", help="write the rows and the provenance to FILE")


@contextlib.contextmanager
def baseline_tree(revision: str) -> Iterator[Path]:
    """A temporary ``git worktree`` of the project at ``revision`` (removed on exit): the
    shoal of a "before" measured in the same run as this tree's "after"."""
    repo = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "baseline"
        subprocess.run(["git", "worktree", "add", "--detach", "--quiet", str(tree), revision], cwd=repo, check=True)
        try:
            yield tree
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=repo, check=True)


def run_with(tree: Path, script: str, *args: str):
    """Run the benchmark ``script`` with ``args`` in a subprocess that imports shoal from
    ``tree`` (see :func:`baseline_tree`); its last line of output, read as JSON."""
    env = dict(os.environ, PYTHONPATH=str(tree / "src"))
    done = subprocess.run([sys.executable, script, *args], env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.splitlines()[-1])


class Benchmark:
    """One benchmark's run: its provenance before and after, its rows, its JSON record.

    Parameters
    ----------
    name : str
        The benchmark's name, recorded in the JSON.
    args : argparse.Namespace, optional
        Its arguments: recorded, and ``args.json`` (``--json FILE``) says where to write.
    """

    def __init__(self, name: str, args: argparse.Namespace | None = None):
        self.name, self.args = name, args
        self.rows: list[dict] = []
        self.start: dict | None = None

    def __enter__(self) -> Benchmark:
        self.start = provenance.record()
        print(provenance.describe(self.start))
        _warn(self.start)
        return self

    def add(self, **row) -> None:
        """Keep one printed row for the JSON record (:class:`Stat` values keep every repeat)."""
        self.rows.append(row)

    def __exit__(self, *exc) -> None:
        end = provenance.finish(self.start)
        load = ", ".join(f"{x:.2f}" for x in end["load_after"]) if end["load_after"] else "unknown"
        print(f"load after: {load} ({end['own_cores']:.2f} cores of it this benchmark's, {end['wall_s']:.0f} s)")
        if end["busy_after"]:
            _warn(end)
        path = getattr(self.args, "json", None)
        if path is not None and exc[0] is None:
            record = {"benchmark": self.name, "arguments": vars(self.args), "rows": self.rows, "provenance": end}
            write_text(path, json.dumps(record, indent=1, default=_jsonable) + "\n")
            print(f"wrote {path}")


def _warn(rec: dict) -> None:
    warning = provenance.busy_warning(rec)
    if warning:
        print(f"WARNING: {warning}")


def _jsonable(obj):
    if isinstance(obj, Stat):
        return obj.as_json()
    if isinstance(obj, np.generic | np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON serialisable")


@dataclass(frozen=True)
class Stamped:
    """A peer program's per-step lines with the moment each arrived (see :func:`stamp_steps`)."""

    stamps: list[float]
    matches: list[re.Match]
    tail: list[str]
    returncode: int | None


def stamp_steps(cmd: list[str], step_line: re.Pattern, count: int, env: dict, cwd: str | None = None) -> Stamped:
    """Run ``cmd``, stamp each output line matching ``step_line`` as it arrives, and stop the
    program once ``count`` have: a peer's steps are timed from outside, without its set-up and
    without the output it writes at its end. ``tail`` keeps its last other lines, for an error."""
    stamps, matches, tail = [], [], collections.deque(maxlen=20)
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                          cwd=cwd) as proc:
        for line in proc.stdout:
            found = step_line.search(line)
            if not found:
                tail.append(line.rstrip())
                continue
            stamps.append(time.perf_counter())
            matches.append(found)
            if len(stamps) == count:
                break
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
    return Stamped(stamps, matches, list(tail), proc.returncode)
