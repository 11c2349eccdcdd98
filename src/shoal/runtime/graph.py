"""The task graph of a step, as data: who reads whom in every phase.

An app declares per phase whom it reads (:attr:`~shoal.runtime.app.Phase.reads`): its face
neighbours, all its neighbours (faces, edges and corners), nobody, or a set the app computes per
step. :class:`StepGraph` turns those declarations and the decomposition into :class:`Links`,
one per phase (per step for the app's own sets), the only place that knows which edges exist: an
edge a phase does not read has no message row, no payload and no dependency, in the executors
and in the trace the replay reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ShoalError

if TYPE_CHECKING:
    from .app import App


@dataclass(frozen=True, eq=False)
class Links:
    """Who reads whom in one phase of one step.

    Attributes
    ----------
    sources : list of list of int
        Per tile, the tiles whose halos it reads (sorted ids): its task waits for each.
    readers : list of list of int
        Per tile, the tiles that read its halos (sorted ids): the order it hands out payloads.
    fanin : list of int
        Per tile, how many halos its task waits for.
    base : list of int
        Per tile, the first of its messages in the phase's (source, reader) message order;
        ``base[-1]`` is the number of messages.
    """

    sources: list[list[int]]
    readers: list[list[int]]
    fanin: list[int]
    base: list[int]

    @classmethod
    def from_sources(cls, sources, ntiles: int) -> Links:
        """The links of a phase in which tile ``t`` reads from every tile of ``sources[t]``.

        Raises
        ------
        ShoalError
            If a tile reads from itself, from a tile out of range, or twice from one tile.
        """
        if len(sources) != ntiles:
            raise ShoalError(f"a stencil must name the sources of all {ntiles} tiles, got {len(sources)}")
        srcs = [sorted(int(s) for s in row) for row in sources]
        readers: list[list[int]] = [[] for _ in range(ntiles)]
        for dst, row in enumerate(srcs):
            for k, src in enumerate(row):
                if not 0 <= src < ntiles or src == dst or (k and row[k - 1] == src):
                    raise ShoalError(f"tile {dst} cannot read from tile {src}: sources must be other tiles "
                                     f"0..{ntiles - 1}, each once")
                readers[src].append(dst)  # dst grows: every reader list stays sorted
        base = [0, *np.cumsum([len(r) for r in readers]).tolist()]
        return cls(srcs, readers, [len(r) for r in srcs], base)

    @property
    def count(self) -> int:
        """Messages of the phase: one per (source, reader) edge."""
        return self.base[-1]

    def edges(self) -> tuple[np.ndarray, np.ndarray]:
        """``(src, dst)`` of every message, in (source, reader) order."""
        src = np.repeat(np.arange(len(self.readers), dtype=np.int64), np.diff(self.base))
        dst = np.fromiter((d for r in self.readers for d in r), dtype=np.int64, count=self.count)
        return src, dst


class StepGraph:
    """The links of every phase of an app on a decomposition, built once and per step where the
    app computes them.

    Parameters
    ----------
    app : App
        Its phases declare whom they read (:attr:`~shoal.runtime.app.Phase.reads`).
    decomposition : Tiling or another decomposition
        Gives the tiles' neighbours under a stencil (``stencil(kind)``).
    """

    def __init__(self, app: App, decomposition: Any):
        self.app, self.decomposition = app, decomposition
        self.phases = tuple(app.phases)
        self.ntiles = int(decomposition.ntiles)
        self._fixed: dict[str, Links] = {}
        self._computed: dict[tuple[int, int], Links] = {}

    def links(self, phase: int, step: int) -> Links | None:
        """Who reads whom in phase ``phase`` (its index) of step ``step``; ``None`` when the
        phase reads no halos that step (it reads nobody, or the app skips the exchange)."""
        p = self.phases[phase]
        if not p.halo or not self.app.halo_wanted(p, step):
            return None
        if p.reads == "app":
            key = (phase, step)
            got = self._computed.get(key)
            if got is None:
                got = self._computed[key] = Links.from_sources(self.app.reads(p, step, self.decomposition),
                                                                self.ntiles)
            return got
        got = self._fixed.get(p.reads)
        if got is None:
            got = self._fixed[p.reads] = Links.from_sources(self.decomposition.stencil(p.reads), self.ntiles)
        return got

    def forget_before(self, step: int) -> None:
        """Drop the app-computed links of steps before ``step`` (they are not read again)."""
        for key in [k for k in self._computed if k[1] < step]:
            del self._computed[key]


@dataclass(frozen=True)
class Loop:
    """Phases ``first`` to ``last`` of a step repeat while the app says so (Canary's While).

    The last phase must end in a barrier reduction: after every iteration the app's
    :meth:`~shoal.runtime.app.App.again` reads its reduced value and says whether to run
    another. Every iteration's tasks are ordinary tasks (timed, traced, balanced).

    Parameters
    ----------
    first, last : str
        Names of the first and the last phase of the group (``first`` may equal ``last``).
    max_iterations : int
        Iterations at most per step; reaching it while the app still asks for more ends the
        loop with a warning, or stops the run when ``required``.
    required : bool
        Whether the loop must converge: reaching ``max_iterations`` is then an error.
    """

    first: str
    last: str
    max_iterations: int
    required: bool = False

    def __post_init__(self):
        if not (isinstance(self.max_iterations, int) and self.max_iterations >= 1):
            raise ValueError(f"loop {self.first}..{self.last}: max_iterations must be a positive integer, "
                             f"got {self.max_iterations!r}")

    @property
    def name(self) -> str:
        """How traces and messages name the loop: its first phase's name."""
        return self.first


def loop_spans(phases, loops) -> list[tuple[int, int, Loop]]:
    """``(first index, last index, loop)`` of every loop, checked against the phases.

    Raises
    ------
    TypeError
        If a loop names a phase the app lacks, runs backwards, overlaps another, holds a lagged
        reduction, or does not end in a barrier reduction.
    """
    names = [p.name for p in phases]
    spans = []
    for loop in loops:
        if loop.first not in names or loop.last not in names:
            raise TypeError(f"loop {loop.first}..{loop.last} names a phase the app lacks; phases: {', '.join(names)}")
        a, b = names.index(loop.first), names.index(loop.last)
        if a > b:
            raise TypeError(f"loop {loop.first}..{loop.last}: its first phase comes after its last")
        if phases[b].reduction is None or phases[b].lagged:
            raise TypeError(f"loop {loop.first}..{loop.last}: its last phase must reduce the value the loop "
                            "decides on (a reduction that is not lagged)")
        if any(phases[i].lagged for i in range(a, b + 1)):
            raise TypeError(f"loop {loop.first}..{loop.last} holds a lagged reduction, which would be read "
                            "by another iteration's phase")
        spans.append((a, b, loop))
    spans.sort(key=lambda s: s[0])
    for (_, b0, l0), (a1, _, l1) in zip(spans, spans[1:], strict=False):
        if a1 <= b0:
            raise TypeError(f"loops {l0.first}..{l0.last} and {l1.first}..{l1.last} overlap")
    return spans


class TaskSequence:
    """The phases a run's tasks go through, in order: one *instance* per phase run (a phase of
    a loop once per iteration), each run by every tile. Without loops it is known in full at
    once; with loops it grows as each iteration's reduction decides whether another follows.

    Attributes
    ----------
    phase, step, iteration : list of int
        Per instance: its phase index, its step (counted from the run's first) and its loop
        iteration (0 outside loops).
    step_first : list of int
        The first instance of every step appended so far.
    pending : tuple or None
        ``(loop, step, iteration)`` of the iteration whose decision the sequence waits for.
    """

    def __init__(self, phases, loops, steps: int):
        self.nphases = len(phases)
        self._spans = loop_spans(phases, loops)
        self._end_of = {b: (a, loop) for a, b, loop in self._spans}
        self._loop_at = {}  # phase index -> its loop's (first, last) span
        for a, b, _ in self._spans:
            for i in range(a, b + 1):
                self._loop_at[i] = (a, b)
        self.phase: list[int] = []
        self.step: list[int] = []
        self.iteration: list[int] = []
        self.step_first: list[int] = []
        self.steps = steps  # steps the run may go through (lowered by a stop)
        self.pending = None
        self._cursor = (0, 0, 0) if steps > 0 else None  # the next instance to append

    def __len__(self) -> int:
        return len(self.phase)

    @property
    def has_loops(self) -> bool:
        """Whether any phase group repeats."""
        return bool(self._spans)

    def extend(self) -> range:
        """Append instances until a loop's decision is needed or the step limit is reached;
        return the new instances' indices."""
        start = len(self.phase)
        while self._cursor is not None and self.pending is None:
            step, phase, it = self._cursor
            if step >= self.steps:
                break
            if phase == 0 and it == 0:
                self.step_first.append(len(self.phase))
            self.phase.append(phase)
            self.step.append(step)
            self.iteration.append(it if phase in self._loop_at else 0)
            if phase in self._end_of:
                self.pending = (self._end_of[phase][1], step, it)
                self._cursor = None
            else:
                self._cursor = self._after(step, phase, it)
        return range(start, len(self.phase))

    def _after(self, step: int, phase: int, it: int = 0) -> tuple[int, int, int]:
        if phase + 1 < self.nphases:
            span = self._loop_at.get(phase + 1)
            return step, phase + 1, it if span and span[0] <= phase else 0
        return step + 1, 0, 0

    def decide(self, again: bool) -> range:
        """Another iteration of the pending loop (``again``), or on past it; return the new
        instances' indices."""
        if self.pending is None:
            raise ShoalError("no loop is waiting for a decision")
        loop, step, it = self.pending
        a, b = next((a, b) for a, b, lp in self._spans if lp is loop)
        self.pending = None
        self._cursor = (step, a, it + 1) if again else self._after(step, b)
        return self.extend()

    def limit(self, steps: int) -> range:
        """Let the run go through ``steps`` steps (fewer or more than before); return the
        instances this appends (a raised limit resumes the sequence)."""
        self.steps = steps
        return self.extend()

    def end(self) -> int:
        """The instances of the steps the run may go through, appended so far: the index the
        first task of step ``steps`` has or would have."""
        if self.steps < len(self.step_first):
            return self.step_first[self.steps]
        return len(self.phase)
