"""How many cores each application should hold: the target distribution D of the invasive
paper's resource manager (§5.3.3), as pure functions of what the applications told it.

Two global rules share out a pool of ``R`` cores among ``N`` applications:

- :func:`proportional` — cores in proportion to each application's workload,
  ``D_i = ceil(R W_i / sum_j W_j) - alpha_i`` with the ``alpha`` correction that keeps
  ``sum D <= R`` (Eq. 2);
- :func:`steepest_ascent` — every application starts with one core and each further core goes
  to the largest throughput gain ``S_i(B_i + 1) - S_i(B_i)`` of its scalability graph
  (Eqs. 5-6), which maximises ``sum_i S_i(D_i)`` when the graphs are non-decreasing and concave.

A scalability graph is given by the application or measured online from its own step times
(:class:`MeasuredScalability`); :func:`concave_majorant` makes measured points monotone and
concave before use and says what counts never held are taken to give.

Both rules honour each application's core range ``[lo, hi]`` (a local constraint, §5.3.3) and
share the same rules at the edges:

- ``R < N``: the first ``R`` applications in the mapping's order get one core, the others none
  (they wait for one, §6.4);
- ``R >= N``: every application gets at least one core (it needs one to continue, §5.3.3);
  a range's ``lo`` below 1 counts as 1 and its ``hi`` above ``R`` as ``R``;
- the lower ends together exceed ``R``: no range can be met, so each application is capped at
  its lower end and the rule shares ``R`` within ``[1, lo]``;
- the upper ends together fall below ``R``: every application gets its upper end and the rest
  of the pool stays free.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Hashable, Mapping, Sequence

import numpy as np

from ..errors import ShoalError

__all__ = ["proportional", "steepest_ascent", "concave_majorant", "MeasuredScalability"]


# ----- shared checks and edges -----------------------------------------------------------------
def _count(value, what: str, least: int) -> int:
    """An integer of at least ``least`` (bools and floats refused: a core count is whole)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ShoalError(f"{what} must be a whole number, got {value!r}")
    if value < least:
        raise ShoalError(f"{what} must be >= {least}, got {value}")
    return int(value)


def _positive(value, what: str) -> float:
    """A finite number above zero."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ShoalError(f"{what} must be a number, got {value!r}") from None
    if not math.isfinite(number) or number <= 0.0:
        raise ShoalError(f"{what} must be positive and finite, got {value!r}")
    return number


def _limits(keys: list, ranges: Mapping | None, cores: int) -> tuple[np.ndarray, np.ndarray]:
    """Each application's range ``[max(lo, 1), min(hi, R)]``; without one, ``[1, R]``.

    When the lower ends together exceed ``R`` none can be met: each application is then capped
    at its lower end instead, ``[1, lo]``.
    """
    ranges = ranges or {}
    unknown = [k for k in ranges if k not in set(keys)]
    if unknown:
        raise ShoalError(f"core range given for an unknown application {unknown[0]!r}")
    lo = np.ones(len(keys), dtype=np.int64)
    hi = np.full(len(keys), cores, dtype=np.int64)
    for i, key in enumerate(keys):
        if key not in ranges:
            continue
        try:
            low, high = ranges[key]
        except (TypeError, ValueError):
            raise ShoalError(f"core range of {key!r} must be a pair (lo, hi), got {ranges[key]!r}") from None
        low = _count(low, f"lower end of the core range of {key!r}", 0)
        high = _count(high, f"upper end of the core range of {key!r}", 1)
        if low > high:
            raise ShoalError(f"core range of {key!r} is empty: lo = {low} > hi = {high}")
        lo[i], hi[i] = max(low, 1), min(high, cores)
    lo = np.minimum(lo, hi)  # a lower end above R: the whole pool is the most it can get
    if lo.sum() > cores:
        return np.ones_like(lo), lo
    return lo, hi


def _waiting(keys: list, cores: int) -> dict[Hashable, int]:
    """Fewer cores than applications: one core each to the first ``R``, the others wait."""
    return {key: int(i < cores) for i, key in enumerate(keys)}


# ----- workload-proportional ------------------------------------------------------------------
def proportional(workloads: Mapping[Hashable, float], cores: int,
                 ranges: Mapping[Hashable, tuple[int, int]] | None = None) -> dict[Hashable, int]:
    """Cores in proportion to workload (§5.3.3): ``D_i = ceil(R W_i / sum_j W_j) - alpha_i``.

    ``alpha_i`` is 1 for the ``sum_i ceil(q_i) - R`` applications, among those whose exact share
    ``q_i = R W_i / sum_j W_j`` is not whole, whose giving a core back raises their work per
    core least (the smallest ``W_i / (ceil(q_i) - 1)``; ties: the later in the mapping's order)
    and 0 for all others, so ``sum D = R`` exactly (Eq. 2 holds), every ``D_i`` is ``q_i``
    rounded down or up, and the largest work per core ``max W_i / D_i`` - what ranks meeting at
    a barrier wait for - is as small as that rounding allows. (The paper leaves the choice of
    ``alpha`` open; largest-remainder rounding, the obvious other, leaves the ramp of §6.2 3.7%
    above its ideal 4/7 on 40 cores.) An exact integer share is never rounded down.

    Ranges: an application whose share falls outside its range ``[lo, hi]`` is pinned to the
    end it crosses, and the formula shares what is left of ``R`` among the others by their
    workloads (water-filling): a capped application's cores go to the rest instead of lying
    idle. Every application gets at least one core while ``R >= N``; with ``R < N`` the first
    ``R`` applications in the mapping's order get one and the others none (they wait). The
    module docstring gives the rules when the ranges cannot all be met.

    Parameters
    ----------
    workloads : Mapping
        ``W_i`` of every application, in any unit shared by all, each positive. The mapping's
        order breaks ties.
    cores : int
        ``R``, the cores of the pool, at least 1.
    ranges : Mapping, optional
        ``(lo, hi)`` core range of some applications, ``0 <= lo <= hi``, ``hi >= 1``; the
        others may take from 1 to ``R`` cores.

    Returns
    -------
    dict
        ``D_i`` of every application, in the workloads' order; ``sum D <= R``.

    Raises
    ------
    ShoalError
        A non-positive or non-finite workload, ``R < 1``, or a bad range.

    Examples
    --------
    >>> proportional({"a": 1, "b": 1, "c": 2}, 8)
    {'a': 2, 'b': 2, 'c': 4}
    """
    keys = list(workloads)
    w = np.array([_positive(workloads[k], f"workload of {k!r}") for k in keys], dtype=np.float64)
    cores = _count(cores, "the number of cores R", 1)
    lo, hi = _limits(keys, ranges, cores)
    if len(keys) > cores:
        return _waiting(keys, cores)
    return dict(zip(keys, _water_fill(w, lo, hi, cores).tolist(), strict=True))


def _water_fill(w: np.ndarray, lo: np.ndarray, hi: np.ndarray, cores: int) -> np.ndarray:
    """Integer shares within ``[lo, hi]`` summing to ``min(R, sum hi)``, proportional to ``w``
    for the applications no range binds (``sum lo <= R`` is given).

    The real shares are ``clip(lam w_i, lo_i, hi_i)`` with the level ``lam`` at which they sum
    to ``R``; their total is piecewise linear in ``lam`` with breaks at ``lo_i / w_i`` and
    ``hi_i / w_i``, so the segment holding ``R`` tells which applications are pinned, and the
    others share the rest by the paper's formula with largest-remainder rounding.
    """
    if hi.sum() <= cores:
        return hi.copy()
    levels = np.unique(np.concatenate(([0.0], lo / w, hi / w)))
    filled = np.clip(np.outer(levels, w), lo, hi).sum(axis=1)
    k = int(np.argmax(filled >= cores))  # exists: the last level fills sum(hi) > R
    if k == 0:  # sum(lo) == R
        return lo.copy()
    middle = 0.5 * (levels[k - 1] + levels[k]) * w
    low, high = middle <= lo, middle >= hi
    share = np.where(high, hi, lo)
    free = ~(low | high)  # not empty: the total still grows on this segment
    share[free] = _bottleneck_rounding(cores - int(share[~free].sum()), w[free])
    return share


def _bottleneck_rounding(cores: int, w: np.ndarray) -> np.ndarray:
    """``ceil(q_i) - alpha_i`` with ``q_i = R w_i / sum w`` summing to ``R``: ``alpha_i = 1`` for
    the shares rounded up whose giving one core back raises the work per core least, the
    smallest ``w_i / (ceil(q_i) - 1)`` (ties: the later), so the largest work per core, which
    ranks meeting at a barrier wait for, is as small as the rounding allows. Only shares with a
    fractional part give a core back, so every ``D_i`` is ``q_i`` rounded down or up."""
    q = cores * w / w.sum()
    d = np.ceil(q - 1e-12 * np.maximum(q, 1.0)).astype(np.int64)
    excess = int(d.sum()) - cores
    if excess <= 0:
        return d
    cost = np.where(d > q, w / np.maximum(d - 1, 1e-300), np.inf)
    order = np.lexsort((-np.arange(len(w)), cost))  # cheapest first; of equals, the later
    d[order[:excess]] -= 1
    return d


# ----- scalability graphs: steepest ascent ------------------------------------------------------
def steepest_ascent(graphs: Mapping[Hashable, Sequence[float]], cores: int,
                    ranges: Mapping[Hashable, tuple[int, int]] | None = None) -> dict[Hashable, int]:
    """Cores by scalability graph (§5.3.3, Eqs. 5-6): start every application with one core and
    give each further core to the largest throughput gain.

    With ``B^(0) = (1, ..., 1)`` (or each range's lower end), iterate
    ``Delta S_i = S_i(B_i + 1) - S_i(B_i)`` (Eq. 5) and ``B^(k+1) = B^(k) + delta_{i,n}`` for the
    application ``n`` of the largest gain (Eq. 6; ties: the first in the mapping's order). Stop
    when all ``R`` cores are given or no application can take one more within its range. Beyond
    a graph's end the gain is 0, so such cores still go out, to the first applications that
    can take them. When every graph is non-decreasing and concave (pass measured ones through
    :func:`concave_majorant`), the result maximises ``sum_i S_i(D_i)`` subject to
    ``sum D <= R`` and the ranges; for other graphs it is the greedy's answer only.

    With ``R < N`` the first ``R`` applications in the mapping's order get one core and the
    others none (they wait); the module docstring gives the rules when the ranges cannot all be
    met.

    Parameters
    ----------
    graphs : Mapping
        The scalability graph of every application: ``graphs[a][c - 1] = S_a(c)`` for
        ``c = 1 .. len(graphs[a])``, every value positive (normalised ``S(1) = 1`` by the paper's
        convention, so that graphs of different applications compare). The mapping's order
        breaks ties.
    cores : int
        ``R``, the cores of the pool, at least 1.
    ranges : Mapping, optional
        ``(lo, hi)`` core range of some applications, ``0 <= lo <= hi``, ``hi >= 1``; the
        others may take from 1 to ``R`` cores.

    Returns
    -------
    dict
        ``D_i`` of every application, in the graphs' order; ``sum D <= R``.

    Raises
    ------
    ShoalError
        An empty graph, a scalability graph with a non-positive or non-finite value, ``R < 1``,
        or a bad range.

    Examples
    --------
    >>> steepest_ascent({"a": [1.0, 2.0, 3.0, 3.5], "b": [1.0, 1.6, 2.0]}, 5)
    {'a': 3, 'b': 2}
    """
    keys = list(graphs)
    curves = [_graph(key, graphs[key]) for key in keys]
    cores = _count(cores, "the number of cores R", 1)
    held, hi = _limits(keys, ranges, cores)
    if len(keys) > cores:
        return _waiting(keys, cores)

    def gain(i: int) -> float:
        b, s = int(held[i]), curves[i]
        return float(s[b] - s[b - 1]) if b < len(s) else 0.0

    # A heap of (-gain, index): the largest gain first, ties to the earlier application.
    heap = [(-gain(i), i) for i in range(len(keys)) if held[i] < hi[i]]
    heapq.heapify(heap)
    left = cores - int(held.sum())
    while left > 0 and heap:
        _, i = heapq.heappop(heap)
        held[i] += 1
        left -= 1
        if held[i] < hi[i]:
            heapq.heappush(heap, (-gain(i), i))
    return dict(zip(keys, held.tolist(), strict=True))


def _graph(key, graph) -> np.ndarray:
    """A scalability graph as floats, refused if empty or any value is not positive."""
    try:
        values = np.asarray(graph, dtype=np.float64)
    except (TypeError, ValueError):
        raise ShoalError(f"scalability graph of {key!r} must be a sequence of numbers") from None
    if values.ndim != 1 or values.size == 0:
        raise ShoalError(f"scalability graph of {key!r} must be a non-empty sequence of numbers")
    bad = np.flatnonzero(~np.isfinite(values) | (values <= 0.0))
    if bad.size:
        raise ShoalError(f"scalability graph of {key!r} has a non-positive value {float(values[bad[0]])!r} "
                         f"at {bad[0] + 1} cores")
    return values


# ----- measured graphs ---------------------------------------------------------------------------
def concave_majorant(counts: Sequence[int], values: Sequence[float], up_to: int) -> np.ndarray:
    """``S(1 .. up_to)`` from points ``(c, S(c))``: their least concave majorant made
    non-decreasing, linear between the points, as the paper demands of a graph (§5.3.3:
    ``S(c) - S(c - 1) >= 0`` and ``S(c + 1) - S(c) <= S(c) - S(c - 1)``).

    Counts never held:

    - below the smallest held count, the line from ``S(0) = 0``: no cores, no throughput, the one
      value known without measuring. The origin is a point of the majorant, so points that look
      super-linear against it (``S(c) / c`` growing) lift the smaller counts: a concave graph
      through the origin cannot scale super-linearly (the paper's assumption);
    - beyond the largest held count, the last segment's slope continues (0 if the majorant has
      flattened). It is the largest value any concave graph above the points can take there, an
      optimistic guess on purpose: an application that has only held a few cores keeps a gain
      from one more, so the steepest ascent offers it more, and its graph is measured there next
      instead of being written off. An application that held one count only is assumed to
      scale perfectly.

    Repeated counts: the largest of their values (the majorant lies above every point).

    Parameters
    ----------
    counts : sequence of int
        Core counts ``c >= 1`` of the points, in any order, repeats allowed.
    values : sequence of float
        ``S(c)`` (or any throughput, e.g. steps per second) of each point, positive.
    up_to : int
        The largest core count to return, at least 1.

    Returns
    -------
    ndarray of float64, shape (up_to,)
        ``S(c)`` for ``c = 1 .. up_to``: positive, non-decreasing, concave, ``>=`` every point and
        the least such function through ``S(0) = 0`` up to the largest held count.

    Raises
    ------
    ShoalError
        No points, lengths that differ, a count below 1, a non-positive value or ``up_to < 1``.
    """
    up_to = _count(up_to, "up_to", 1)
    if len(counts) != len(values):
        raise ShoalError(f"{len(counts)} core counts but {len(values)} values")
    if len(counts) == 0:
        raise ShoalError("a scalability graph needs at least one point")
    c = np.array([_count(n, "a core count", 1) for n in counts], dtype=np.int64)
    v = np.array([_positive(s, f"the value at {n} cores") for n, s in zip(c, values, strict=True)], dtype=np.float64)
    x, which = np.unique(c, return_inverse=True)
    y = np.full(len(x), -np.inf)
    np.maximum.at(y, which, v)
    hx, hy = _upper_hull(np.concatenate(([0], x)), np.concatenate(([0.0], y)))
    top = int(x[-1])
    inside = np.maximum.accumulate(np.interp(np.arange(1, top + 1), hx, hy))
    slope = max(0.0, (hy[-1] - hy[-2]) / (hx[-1] - hx[-2]))
    beyond = inside[-1] + slope * np.arange(1, max(up_to - top, 0) + 1)
    return np.concatenate((inside, beyond))[:up_to]


def _upper_hull(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Vertices of the upper convex hull of points with strictly increasing ``x`` (monotone chain)."""
    hull: list[int] = []
    for i in range(len(x)):
        # Drop the last vertex while it lies on or below the chord from the one before it to i.
        while len(hull) >= 2:
            a, b = hull[-2], hull[-1]
            if (y[b] - y[a]) * (x[i] - x[a]) > (y[i] - y[a]) * (x[b] - x[a]):
                break
            hull.pop()
        hull.append(i)
    return x[hull].astype(np.float64), y[hull]


class MeasuredScalability:
    """A scalability graph measured online from an application's own step times at the core
    counts it has held (§5.3.3: ``S(c) = T(1) / T(c)``).

    Each :meth:`record` adds one step's time at the cores the application held for it; per
    count the throughput is the median of the last ``window`` steps' ``work / seconds``, robust
    to a step disturbed by a resize or a neighbour, and recent enough to follow a workload that
    changes. :meth:`graph` passes the throughputs through :func:`concave_majorant` and
    normalises ``S(1) = 1`` by the majorant's value at one core: the measured single-core
    throughput when one core was held (and the speedups stay sub-linear); otherwise the line
    from the origin to the smallest count held, that is, perfect scaling up to it is assumed.
    Before any step is recorded the graph is perfect scaling, so a new application is offered
    cores as if it used them all.

    Parameters
    ----------
    window : int
        How many of the latest steps at each core count the median takes, at least 1.
    """

    def __init__(self, window: int = 5):
        self.window = _count(window, "window", 1)
        self._rates: dict[int, deque[float]] = {}

    def record(self, cores: int, seconds: float, work: float = 1.0) -> None:
        """Add one step: it took ``seconds`` on ``cores`` cores.

        Parameters
        ----------
        cores : int
            The cores the application held for the whole step, at least 1.
        seconds : float
            The step's wall time, positive.
        work : float
            The step's work in the application's own units, positive; steps of different
            sizes (an adaptive grid that refines) then compare by throughput. The default 1
            compares step times alone.

        Raises
        ------
        ShoalError
            A count below 1, or a non-positive time or work.
        """
        cores = _count(cores, "cores", 1)
        rate = _positive(work, "work") / _positive(seconds, "step time")
        self._rates.setdefault(cores, deque(maxlen=self.window)).append(rate)

    def graph(self, up_to: int) -> np.ndarray:
        """``S(1 .. up_to)``, non-decreasing and concave with ``S(1) = 1``.

        Parameters
        ----------
        up_to : int
            The largest core count to return, at least 1.

        Returns
        -------
        ndarray of float64, shape (up_to,)
            ``S(c)`` for ``c = 1 .. up_to``; perfect scaling ``S(c) = c`` before any step.
        """
        up_to = _count(up_to, "up_to", 1)
        if not self._rates:
            return np.arange(1.0, up_to + 1.0)
        counts = sorted(self._rates)
        s = concave_majorant(counts, [float(np.median(self._rates[c])) for c in counts], up_to)
        return s / s[0]
