"""When to balance: every K steps, or once the imbalance has cost more than balancing does.

A balancing step is not free. Every tile stops at one step boundary (the cores that finish
first wait for the last: a barrier), the policy plans, the moved tiles' states travel and the
executor restarts. A fixed period guesses how often that pays. :class:`Adaptive` decides from
measurements instead, as Charm++'s MetaLB does (Menon et al., SC'12): after every step it adds
the time that step lost to imbalance and fires once the sum since the last balancing step
exceeds what that step cost.

The time a step loses to imbalance is counted per segment between barriers (the phases a
barrier separates are balanced separately, as
:meth:`~shoal.placement.balancing.BalanceContext.segment_loads` splits them): the busiest
node's load per core minus the mean load per core of the whole cluster, summed over segments.
Only the part above what the last balancing step left counts (its own plan's imbalance on the
loads it balanced: what balancing again would not remove either), so a load that balancing
cannot even out does not make the trigger fire again and again.

With an imbalance that grows by ``m`` seconds per step every step, the sum reaches the cost
``C`` after ``sqrt(2 C / m)`` steps: the period that minimises ``(C + time lost) / period``,
the optimum MetaLB derives. Before the first balancing step nothing was measured; its cost is
estimated as ``first_cost_steps`` mean steps (the mean load per core of the steps seen so far).

A period is written as a number of steps (``0``: never) or ``"adaptive"``: see
:func:`parse_period`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..cluster import Cluster
from ..errors import ShoalError

ADAPTIVE = "adaptive"


def parse_period(value: int | str) -> int | str:
    """A balancing period: a number of steps ``>= 0`` (an int or its text) or ``"adaptive"``.

    Parameters
    ----------
    value : int or str
        What a user wrote (``--period``, ``run.period``, one entry of ``--periods``).

    Returns
    -------
    int or str
        The steps between balancing steps, or :data:`ADAPTIVE`.

    Raises
    ------
    ShoalError
        For anything else (a negative number, another word, a boolean).
    """
    if isinstance(value, str):
        text = value.strip()
        if text == ADAPTIVE:
            return ADAPTIVE
        if not text.lstrip("-").isdigit():
            raise ShoalError(f"a period is a number of steps or 'adaptive', got {value!r}")
        value = int(text)
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ShoalError(f"a period is a number of steps or 'adaptive', got {value!r}")
    if value < 0:
        raise ShoalError(f"a period must be >= 0 steps, got {value}")
    return int(value)


def segments(loads: np.ndarray, barrier: tuple[bool, ...]) -> np.ndarray:
    """Per-tile loads of shape ``(segments, tiles)``: the phases from one barrier to the next
    summed, wrapping around the end of the step (see ``BalanceContext.segment_loads``).

    Parameters
    ----------
    loads : ndarray, shape (phases, tiles)
        Seconds each tile spent in each phase.
    barrier : tuple of bool
        Per phase: whether it ends in a barrier.

    Returns
    -------
    ndarray, shape (segments, tiles)
    """
    ends = [p for p, b in enumerate(barrier) if b]
    if not ends:
        return loads.sum(axis=0, keepdims=True)
    order = np.roll(np.arange(len(barrier)), -(ends[-1] + 1))  # start after the last barrier
    out, current = [], np.zeros(loads.shape[1])
    for p in order:
        current = current + loads[p]
        if barrier[p]:
            out.append(current)
            current = np.zeros(loads.shape[1])
    return np.array(out)


def imbalance_s(loads: np.ndarray, owner: np.ndarray, cluster: Cluster, barrier: tuple[bool, ...]) -> float:
    """Seconds per core that imbalance costs one step: over the segments between barriers, the
    busiest node's load per core minus the cluster's mean load per core.

    Parameters
    ----------
    loads : ndarray, shape (phases, tiles)
        Seconds each tile spent in each phase of the step.
    owner : ndarray of int, shape (tiles,)
        The node of every tile.
    cluster : Cluster
        The nodes and their cores.
    barrier : tuple of bool
        Per phase: whether it ends in a barrier.

    Returns
    -------
    float
        0 for a load spread in proportion to the cores.
    """
    seg = segments(np.atleast_2d(np.asarray(loads, dtype=np.float64)), barrier)
    owner = np.asarray(owner, dtype=np.int64)
    cores = cluster.core_array
    lost = 0.0
    for s in seg:
        per_core = np.bincount(owner, weights=s, minlength=cluster.nodes) / cores
        lost += float(per_core.max() - s.sum() / cores.sum())
    return max(lost, 0.0)


@dataclass
class Adaptive:
    """Balance once the imbalance since the last balancing step has cost more than that step
    (see the module docstring).

    Feed it every finished step with :meth:`observe`; it says when the boundary after a step is
    due. :meth:`balanced` tells it that a balancing step happened (and what its plan left),
    :meth:`paid` what it cost.

    Parameters
    ----------
    min_interval : int
        Steps at least between two balancing steps (and before the first).
    first_cost_steps : float
        The first balancing step's cost, in mean steps, until one was measured.
    """

    min_interval: int = 2
    first_cost_steps: float = 1.0

    def __post_init__(self):
        if self.min_interval < 1 or not self.first_cost_steps > 0:
            raise ShoalError(f"the adaptive trigger needs min_interval >= 1 and first_cost_steps > 0, got "
                             f"{self.min_interval} and {self.first_cost_steps}")
        self.since = 0  # first step under the current placement
        self.lost_s = 0.0  # time lost to imbalance since then, beyond the residual
        self.residual_s = 0.0  # imbalance per step the last plan left on the loads it balanced
        self.cost_s = math.nan  # what the last balancing step cost (NaN: none measured yet)
        self.load_s = 0.0  # mean load per core summed over the steps seen (for the first estimate)
        self.seen = 0
        self.decided = -1  # first step that should run under a new placement (-1: none yet)

    @property
    def threshold_s(self) -> float:
        """What the lost time is compared with: the last balancing step's cost, or before one
        was measured ``first_cost_steps`` mean steps (infinite before any step was seen)."""
        if not math.isnan(self.cost_s):
            return self.cost_s
        return self.first_cost_steps * self.load_s / self.seen if self.seen else math.inf

    @property
    def pending(self) -> bool:
        """Whether the trigger has fired and no balancing step has happened since."""
        return self.decided >= 0

    def observe(self, step: int, loads: np.ndarray, owner: np.ndarray, cluster: Cluster,
                barrier: tuple[bool, ...]) -> bool:
        """Add step ``step``'s loss; return whether the boundary after it is due (or was already).

        Parameters
        ----------
        step : int
            The step that finished.
        loads : ndarray, shape (phases, tiles)
            Seconds each tile spent in each phase of that step.
        owner : ndarray of int, shape (tiles,)
            The node of every tile during that step.
        cluster : Cluster
            The nodes and their cores during that step.
        barrier : tuple of bool
            Per phase: whether it ends in a barrier.

        Returns
        -------
        bool
            True from the step at which the lost time first reaches the threshold (at least
            ``min_interval`` steps after the last balancing step) until :meth:`balanced`.
        """
        loads = np.atleast_2d(np.asarray(loads, dtype=np.float64))
        self.lost_s += max(imbalance_s(loads, owner, cluster, barrier) - self.residual_s, 0.0)
        self.load_s += float(loads.sum()) / cluster.total_cores
        self.seen += 1
        if not self.pending and step + 1 - self.since >= self.min_interval and self.lost_s >= self.threshold_s:
            self.decided = step + 1
        return self.pending

    def balanced(self, step: int, residual_s: float) -> None:
        """A balancing step re-placed the tiles before step ``step``; its plan leaves
        ``residual_s`` seconds of imbalance per step on the loads it balanced."""
        self.since, self.lost_s, self.residual_s, self.decided = step, 0.0, max(residual_s, 0.0), -1

    def paid(self, cost_s: float) -> None:
        """The latest balancing step cost ``cost_s`` seconds per core: the next one must save more."""
        self.cost_s = float(cost_s)

    def state(self) -> dict:
        """What a checkpoint keeps (numbers only); :meth:`restore` reads it back."""
        return {k: getattr(self, k) for k in ("since", "lost_s", "residual_s", "cost_s", "load_s", "seen", "decided")}

    def restore(self, state: dict) -> None:
        """Continue from :meth:`state` written at a checkpoint."""
        for k, v in state.items():
            setattr(self, k, type(getattr(self, k))(v))
