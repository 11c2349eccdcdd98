"""When each core was busy: a timeline of tasks, or, past a few dozen cores, each core's
utilisation over time (as Charm++ Projections' Overview draws it).

Cores are numbered across the cluster, node by node: core ``offsets[node] + worker`` (see
:func:`core_offsets`). A view covers a :class:`Selection` of steps and cores, by default the
whole run, so a large run's overview can be followed by a detail of a few steps and cores.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

import numpy as np
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from ..errors import ShoalError
from ..graphics.canvas import new_figure
from ..trace import Trace

DETAIL_CORES = 32  # up to this many cores a timeline draws every task; beyond, utilisation
DETAIL_TASKS = 20_000  # and up to this many tasks
BINS = 600  # time bins of a utilisation overview


@dataclass(frozen=True)
class Selection:
    """Steps ``steps[0] <= step < steps[1]`` on cores ``cores[0] <= core < cores[1]``."""

    steps: tuple[int, int]
    cores: tuple[int, int]

    def label(self) -> str:
        """The selection in words, last step and core included (``steps 4–5, cores 18–35``)."""
        (a, b), (c, d) = self.steps, self.cores
        return f"steps {a}–{b - 1}, cores {c}–{d - 1}"


def core_offsets(trace: Trace) -> np.ndarray:
    """The first cluster-wide core number of every node, and the total after the last:
    shape ``(nodes + 1,)``. A node counts the most worker threads it ever held."""
    width = np.asarray(trace.worker_cores).max(axis=0)
    t = trace.tasks
    if len(t["node"]):
        used = np.zeros(trace.cluster.nodes, np.int64)
        np.maximum.at(used, t["node"], t["worker"] + 1)
        width = np.maximum(width, used)
    return np.concatenate([[0], np.cumsum(width)]).astype(np.int64)


def task_cores(trace: Trace) -> np.ndarray:
    """The cluster-wide core of every task."""
    return core_offsets(trace)[trace.tasks["node"]] + trace.tasks["worker"]


def select(trace: Trace, steps: tuple[int | None, int | None] | None = None,
           cores: tuple[int | None, int | None] | None = None) -> tuple[Selection, np.ndarray]:
    """The selection (whole run where not given) and the mask of the tasks it holds.

    Parameters
    ----------
    trace : Trace
        The trace whose tasks are selected.
    steps, cores : (int or None, int or None), optional
        ``(start, end)``, end excluded, ``None`` for an open end; cores numbered across the
        cluster (:func:`core_offsets`).

    Returns
    -------
    Selection, numpy.ndarray
        The ranges, and a boolean mask over ``trace.tasks``.

    Raises
    ------
    ShoalError
        If a range is empty or reversed, or holds no task of the trace.
    """
    all_steps = trace.steps
    total = int(core_offsets(trace)[-1])
    if not len(all_steps):
        raise ShoalError("the trace holds no tasks: nothing to draw")
    sel = Selection(_range("steps", steps, (int(all_steps[0]), int(all_steps[-1]) + 1)),
                    _range("cores", cores, (0, total)))
    step, core = trace.tasks["step"], task_cores(trace)
    mask = (step >= sel.steps[0]) & (step < sel.steps[1]) & (core >= sel.cores[0]) & (core < sel.cores[1])
    if not mask.any():
        raise ShoalError(f"{sel.label()} holds no task: the trace has steps {all_steps[0]}–{all_steps[-1]} "
                         f"on cores 0–{total - 1}")
    return sel, mask


def _range(name: str, given: tuple[int | None, int | None] | None, whole: tuple[int, int]) -> tuple[int, int]:
    if given is None:
        return whole
    a, b = (w if v is None else int(v) for v, w in zip(given, whole, strict=True))
    if b <= a:
        raise ShoalError(f"{name} {a}:{b} is empty: the end must be after the start (ranges are start:end, "
                         "end excluded)")
    return a, b


def parse_range(text: str, name: str = "range") -> tuple[int | None, int | None]:
    """``"A:B"`` (``A`` up to ``B``, ``B`` excluded), ``"A:"``, ``":B"`` or ``"A"`` (``A`` alone)
    as ``(start, end)``, ``None`` for an open end: what ``shoal report --steps/--cores`` take.
    ``name`` names the flag in the error.

    Raises
    ------
    ShoalError
        If ``text`` is not of one of those forms with whole numbers >= 0.
    """
    parts = text.strip().split(":")
    try:
        if len(parts) == 1:
            start = int(parts[0])
            bounds = (start, start + 1)
        elif len(parts) == 2:
            bounds = tuple(int(p) if p.strip() else None for p in parts)
        else:
            raise ValueError
    except ValueError:
        raise ShoalError(f"{name} {text!r} is not a range: give START:END (END excluded), START:, :END or one "
                         "number") from None
    if any(v is not None and v < 0 for v in bounds):
        raise ShoalError(f"{name} {text!r} holds a negative number: steps and cores count from 0")
    return bounds


def utilisation(start: np.ndarray, end: np.ndarray, row: np.ndarray, rows: int,
                edges: np.ndarray) -> np.ndarray:
    """Busy seconds of each row (core) in each time bin between ``edges``.

    Parameters
    ----------
    start, end : numpy.ndarray
        Each task's start and end (seconds); the tasks of one row must not overlap.
    row : numpy.ndarray
        Each task's row, ``0 <= row < rows``.
    rows : int
        How many rows.
    edges : numpy.ndarray
        Increasing bin edges (seconds).

    Returns
    -------
    numpy.ndarray
        Shape ``(rows, len(edges) - 1)``. A task's time is split exactly between the bins it
        spans, so a row's sum is the total duration of its tasks inside the edges.
    """
    B = len(edges) - 1
    start = np.clip(start, edges[0], edges[-1])
    end = np.clip(end, edges[0], edges[-1])
    first = np.clip(np.searchsorted(edges, start, side="right") - 1, 0, B - 1)
    last = np.clip(np.searchsorted(edges, end, side="right") - 1, 0, B - 1)
    busy = np.zeros((rows, B))
    one = first == last
    np.add.at(busy, (row[one], first[one]), end[one] - start[one])
    many = ~one
    r, f, lst = row[many], first[many], last[many]
    np.add.at(busy, (r, f), edges[f + 1] - start[many])
    np.add.at(busy, (r, lst), end[many] - edges[lst])
    whole = np.zeros((rows, B + 1))  # bins strictly between a task's first and last: fully busy
    np.add.at(whole, (r, f + 1), 1.0)
    np.add.at(whole, (r, lst), -1.0)
    return busy + np.cumsum(whole, axis=1)[:, :B] * np.diff(edges)


def timeline(trace: Trace, steps: tuple[int, int] | None = None, cores: tuple[int, int] | None = None) -> Figure:
    """The timeline of ``trace``'s ``steps`` on its ``cores`` (see :func:`select`): every task on
    its core when they hold at most :data:`DETAIL_CORES` cores and :data:`DETAIL_TASKS` tasks,
    else the utilisation overview."""
    sel, mask = select(trace, steps, cores)
    ncores = sel.cores[1] - sel.cores[0]
    if ncores <= DETAIL_CORES and mask.sum() <= DETAIL_TASKS:
        return task_bars(trace, sel, mask)
    return utilisation_overview(trace, sel, mask)


def phase_families(names: list[str]) -> list[tuple[str, list[int]]]:
    """The phases drawn in one colour each: a phase alone, or every phase of a numbered family
    of three or more (a cloth window's ``material0`` to ``material9``, as ``material*``), at its
    first member's place; with the indices of the phases in it."""
    stems = [re.fullmatch(r"(.*?)\d+", name) for name in names]
    count = Counter(m.group(1) for m in stems if m)
    families: dict[str, tuple[str, list[int]]] = {}
    for k, (name, m) in enumerate(zip(names, stems, strict=True)):
        key = m.group(1) + "*" if m and count[m.group(1)] >= 3 else name
        families.setdefault(key, (key, []))[1].append(k)
    return list(families.values())


def task_bars(trace: Trace, sel: Selection, mask: np.ndarray) -> Figure:
    """Every task of ``trace`` in the selection ``sel`` (its tasks where ``mask`` is true, as
    :func:`select` returns them) as a bar on its core's row, coloured by phase."""
    t = trace.tasks
    c0, c1 = sel.cores
    row = task_cores(trace)[mask] - c0
    start, end, phase = t["start"][mask] * 1e3, t["end"][mask] * 1e3, t["phase"][mask]
    fig = new_figure(11, 1.8 + 0.3 * (c1 - c0))
    ax = fig.add_subplot()
    handles = []
    for p, (name, members) in enumerate(phase_families(trace.phases)):
        m = np.isin(phase, members)
        if not m.any():
            continue
        s, e, r = start[m], end[m], row[m]
        boxes = np.stack([np.stack([s, r - 0.4], 1), np.stack([s, r + 0.4], 1),
                          np.stack([e, r + 0.4], 1), np.stack([e, r - 0.4], 1)], axis=1)
        color = f"C{p % 10}"
        # Thin white edges part back-to-back tasks while there are few enough to see them.
        ax.add_collection(PolyCollection(boxes, facecolors=color, edgecolors="w" if len(row) <= 2000 else "none",
                                         linewidths=0.3))
        handles.append(Patch(color=color, label=name))
    ax.set_xlim(start.min(), max(end.max(), start.min() + 1e-6))
    ax.set_ylim(c1 - c0 - 0.5, -0.5)
    offsets = core_offsets(trace)
    names = [f"n{n}.w{c - offsets[n]}" for c in range(c0, c1)
             for n in [int(np.searchsorted(offsets, c, side="right") - 1)]]
    ax.set_yticks(range(c1 - c0))
    ax.set_yticklabels(names, fontsize=8 if c1 - c0 <= 16 else 6)
    ax.set_xlabel("wall time since the run began (ms)")
    ax.set_ylabel("core (node.worker)")
    kind = "predicted" if trace.predicted else "measured"
    ax.set_title(f"{trace.scenario}: {kind} tasks per core, {sel.label()}")
    ax.legend(handles=handles, loc="upper right", fontsize=8)
    return fig


def utilisation_overview(trace: Trace, sel: Selection, mask: np.ndarray, bins: int = BINS) -> Figure:
    """Each core's busy fraction over time in the selection ``sel`` (its tasks where ``mask``
    is true, as :func:`select` returns them), in ``bins`` time bins: an image, cores down,
    under the mean over those cores, step ends marked when there are few enough to see."""
    t = trace.tasks
    c0, c1 = sel.cores
    start, end = t["start"][mask], t["end"][mask]
    t0, t1 = float(start.min()), float(end.max())
    edges = np.linspace(t0, t1 if t1 > t0 else t0 + 1e-9, bins + 1)
    busy = utilisation(start, end, task_cores(trace)[mask] - c0, c1 - c0, edges)
    fraction = np.clip(busy / np.diff(edges), 0.0, 1.0)
    unit, scale = ("s", 1.0) if t1 - t0 > 5.0 else ("ms", 1e3)
    x0, x1 = edges[0] * scale, edges[-1] * scale
    fig = new_figure(12, 3.2 + 0.012 * (c1 - c0))
    top, ax = fig.subplots(2, 1, sharex=True, height_ratios=[1, 4])
    top.plot((edges[:-1] + edges[1:]) / 2 * scale, fraction.mean(axis=0), lw=1, color="k")
    top.set_ylim(0, 1.02)
    top.set_ylabel("mean")
    ends = np.asarray(trace.step_end)[(trace.steps >= sel.steps[0]) & (trace.steps < sel.steps[1])]
    if len(ends) <= 100:
        for e in ends:
            top.axvline(e * scale, color="0.6", lw=0.5)
    kind = "predicted" if trace.predicted else "measured"
    top.set_title(f"{trace.scenario}: {kind} core utilisation, {sel.label()} "
                  f"(detail: shoal report --steps A:B --cores C:D)")
    im = ax.imshow(fraction, aspect="auto", origin="upper", cmap="magma", vmin=0, vmax=1, interpolation="nearest",
                   extent=(x0, x1, c1 - 0.5, c0 - 0.5))
    offsets = core_offsets(trace)
    inner = offsets[(offsets > c0) & (offsets < c1)]
    if len(inner) <= 64:
        for o in inner:  # node boundaries
            ax.axhline(o - 0.5, color="w", lw=0.3)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel(f"wall time since the run began ({unit})")
    ax.set_ylabel("core (node by node)")
    fig.colorbar(im, ax=[top, ax], label="busy fraction", fraction=0.03)
    return fig
