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
