"""The resource manager's state machine (the invasive paper, §5.3): which application holds
which core, how many each should hold, and the messages that move cores between them.

It is pure: no sockets, no clocks, no logging. Each method takes one message from one
application and returns the messages to send, as ``(application, message)`` pairs whose
messages are plain JSON-ready dicts. :mod:`shoal.invasive.server` runs it in a process;
the tests drive it directly through thousands of message orders.

The state, in the paper's symbols:

- **C** (:attr:`ResourceManager.owner`): core -> the application holding it, or ``None`` (free);
- **D** (:attr:`ResourceManager.targets`): application -> the cores it should hold, Σ D ≤ R;
- **P** (:attr:`ResourceManager.constraints`): each application's last :class:`Constraints`;
- the cores asked back and not yet acknowledged (:meth:`ResourceManager.returning`): they
  stay in C under their application, so nobody else gets them before it has let them go
  (§5.3.2: a core taken from an application is not free until that application says so);
- the waiting list (:attr:`ResourceManager.waiting`): registered applications holding no
  core, in arrival order.

D is recomputed on every register, invade, retreat and death; acknowledgements only free
cores and hand them on. When R < N the first R applications in arrival order get one core
each and the others wait (§6.4: an application that arrives when every core is held waits
until it gets one, it is not refused); when R ≥ N the policy's distribution
(:mod:`shoal.invasive.distribution`) gives every application at least one.

Messages sent (``type`` key): ``welcome`` (``app``, ``pool``: R), ``grant`` (``cores``:
added), ``release`` (``cores``: to let go, then answer with :meth:`~ResourceManager.released`),
``invaded`` (the answer to a blocking invade, sent once the application holds its target:
``cores``, every core it keeps).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable
from dataclasses import dataclass

from ..errors import ShoalError
from .distribution import proportional, steepest_ascent

POLICIES = ("workload", "scalability")

Message = tuple[Hashable, dict]


@dataclass(frozen=True)
class Constraints:
    """What an application tells the manager with an invade (P_i of §5.3.1).

    Parameters
    ----------
    range : tuple of int, optional
        The fewest and most cores it can use (``None``: 1 to the whole pool).
    workload : float, optional
        Its current work, in any unit shared by the applications (the workload policy; ``None``: 1).
    graph : sequence of float, optional
        Its scalability graph, ``graph[c - 1] = S(c)`` for c = 1, 2, ... cores (the
        scalability policy; ``None``: perfect scaling). Core counts past its end gain nothing.
    """

    range: tuple[int, int] | None = None
    workload: float | None = None
    graph: tuple[float, ...] | None = None

    def check(self, pool: int | None = None) -> None:
        """Raise :class:`~shoal.errors.ShoalError` for constraints no pool can meet.

        Parameters
        ----------
        pool : int, optional
            The pool's size R; a range asking for more than R cores at least is refused.
        """
        if self.range is not None:
            lo, hi = self.range
            if not (isinstance(lo, int) and isinstance(hi, int)) or lo < 1 or hi < lo:
                raise ShoalError(f"invade: core range {lo}..{hi} must be whole numbers with 1 <= min <= max")
            if pool is not None and lo > pool:
                raise ShoalError(f"invade: core range {lo}..{hi} asks for at least {lo} cores; the pool has {pool}")
        if self.workload is not None and not (math.isfinite(self.workload) and self.workload > 0):
            raise ShoalError(f"invade: workload {self.workload} must be a positive number")
        if self.graph is not None:
            if len(self.graph) == 0:
                raise ShoalError("invade: the scalability graph is empty")
            bad = [s for s in self.graph if not (math.isfinite(s) and s > 0)]
            if bad:
                raise ShoalError(f"invade: scalability graph value {bad[0]} is not positive")

    def to_message(self) -> dict:
        """The constraints as a JSON-ready dict (what the client sends)."""
        return {"range": list(self.range) if self.range is not None else None, "workload": self.workload,
                "graph": list(self.graph) if self.graph is not None else None}

    @classmethod
    def from_message(cls, message: dict) -> Constraints:
        """The constraints of an invade message (the inverse of :meth:`to_message`).

        Parameters
        ----------
        message : dict
            Holds ``range``, ``workload`` and ``graph`` (each may be missing or ``None``).
        """
        rng, workload, graph = message.get("range"), message.get("workload"), message.get("graph")
        return cls(range=tuple(rng) if rng is not None else None,
                   workload=float(workload) if workload is not None else None,
                   graph=tuple(float(s) for s in graph) if graph is not None else None)


class ResourceManager:
    """The manager's state and its optimisation loop (§5.3.2), one message at a time.

    Parameters
    ----------
    cores : int
        R, the cores of the pool (numbered 0 .. R - 1).
    policy : str
        How D is computed: ``workload`` (proportional to each application's workload, §5.3.3)
        or ``scalability`` (steepest ascent over the scalability graphs).
    """

    def __init__(self, cores: int, policy: str = "workload"):
        if not isinstance(cores, int) or cores < 1:
            raise ShoalError(f"the resource manager needs at least one core, not {cores}")
        if policy not in POLICIES:
            raise ShoalError(f"unknown invasive policy {policy!r}; known: {', '.join(POLICIES)}")
        self.cores, self.policy = cores, policy
        self.owner: list[Hashable | None] = [None] * cores
        self.targets: dict[Hashable, int] = {}
        self.constraints: dict[Hashable, Constraints] = {}  # insertion order = arrival order
        self._returning: dict[Hashable, set[int]] = {}
        self._blocked: list[Hashable] = []  # blocking invades not yet answered

    # ----- the messages --------------------------------------------------------------------------
    def register(self, app: Hashable) -> list[Message]:
        """The handshake: ``app`` joins with default constraints and gets its share.

        Parameters
        ----------
        app : hashable
            The application's id (the server numbers connections).

        Returns
        -------
        list of (app, dict)
            The ``welcome`` to ``app`` first, then the releases and grants D's change causes.
        """
        if app in self.constraints:
            raise ShoalError(f"application {app} is already registered")
        self.constraints[app] = Constraints()
        self._returning[app] = set()
        return [(app, {"type": "welcome", "app": app, "pool": self.cores})] + self._rebalance()

    def invade(self, app: Hashable, constraints: Constraints, blocking: bool = True) -> list[Message]:
        """New constraints from ``app``: recompute D and move cores towards it.

        Parameters
        ----------
        app : hashable
            A registered application.
        constraints : Constraints
            Its range, workload and scalability graph (replacing the previous ones).
        blocking : bool
            Answer with an ``invaded`` message once ``app`` holds its target (and at least
            one core); a non-blocking invade gets only the grants and releases.

        Returns
        -------
        list of (app, dict)
            The messages to send.
        """
        self._known(app)
        constraints.check(self.cores)
        self.constraints[app] = constraints
        if blocking and app not in self._blocked:
            self._blocked.append(app)
        return self._rebalance()

    def released(self, app: Hashable, cores: Iterable[int]) -> list[Message]:
        """``app`` acknowledges that its threads have let ``cores`` go: they are free now.

        Cores it was not asked to give back are ignored (it keeps them). D is not recomputed;
        the freed cores go to the applications below their targets.

        Parameters
        ----------
        app : hashable
            A registered application.
        cores : iterable of int
            Cores named in earlier ``release`` messages to it.

        Returns
        -------
        list of (app, dict)
            The grants (and blocking answers) the freed cores allow.
        """
        self._known(app)
        for core in cores:
            if core in self._returning[app]:
                self._returning[app].discard(core)
                self.owner[core] = None
        return self._redistribute()

    def retreat(self, app: Hashable) -> list[Message]:
        """``app`` leaves: every core it holds is free at once (it has stopped using them).

        Parameters
        ----------
        app : hashable
            A registered application.

        Returns
        -------
        list of (app, dict)
            The messages D's change causes for the others.
        """
        self._known(app)
        return self._leave(app)

    def died(self, app: Hashable) -> list[Message]:
        """``app``'s connection ended: as :meth:`retreat`, and a no-op for an unknown one.

        Parameters
        ----------
        app : hashable
            The application (registered or not).

        Returns
        -------
        list of (app, dict)
            The messages D's change causes for the others.
        """
        return self._leave(app) if app in self.constraints else []

    # ----- views ------------------------------------------------------------------------------
    @property
    def applications(self) -> list[Hashable]:
        """The registered applications, in arrival order (A of §5.3.1)."""
        return list(self.constraints)

    def held(self, app: Hashable) -> set[int]:
        """The cores C gives to ``app``, those asked back but not yet acknowledged included.

        Parameters
        ----------
        app : hashable
            An application.
        """
        return {core for core, owner in enumerate(self.owner) if owner == app}

    def returning(self, app: Hashable) -> set[int]:
        """The cores asked back from ``app`` and not yet acknowledged.

        Parameters
        ----------
        app : hashable
            An application.
        """
        return set(self._returning.get(app, ()))

    def kept(self, app: Hashable) -> set[int]:
        """The cores ``app`` holds and has not been asked to give back.

        Parameters
        ----------
        app : hashable
            An application.
        """
        return self.held(app) - self._returning.get(app, set())

    @property
    def free(self) -> list[int]:
        """The free cores (F of §5.3.2), in ascending order."""
        return [core for core, owner in enumerate(self.owner) if owner is None]

    @property
    def waiting(self) -> list[Hashable]:
        """Registered applications holding no core, in arrival order."""
        return [app for app in self.constraints if not self.kept(app)]

    # ----- the optimisation loop (§5.3.2) -----------------------------------------------------
    def _rebalance(self) -> list[Message]:
        self.targets = self._distribution()
        return self._redistribute()

    def _distribution(self) -> dict[Hashable, int]:
        apps, pool = self.applications, self.cores
        if len(apps) > pool:  # one core each for the first R arrivals; the others wait
            return {app: int(i < pool) for i, app in enumerate(apps)}
        ranges = {app: _clip(self.constraints[app].range, pool) for app in apps}
        if self.policy == "workload":
            workloads = {app: self.constraints[app].workload or 1.0 for app in apps}
            targets = proportional(workloads, pool, ranges)
        else:
            # no graph: perfect scaling; past a graph's end a core gains nothing
            graphs = {app: self.constraints[app].graph or range(1, pool + 1) for app in apps}
            targets = steepest_ascent(graphs, pool, ranges)
        return {app: int(targets[app]) for app in apps}

    def _redistribute(self) -> list[Message]:
        """Release what exceeds D, grant free cores up to D, answer settled blocking invades."""
        out: list[Message] = []
        for app in self.constraints:
            kept = sorted(self.kept(app))
            surplus = len(kept) - self.targets[app]
            if surplus > 0:
                back = kept[-surplus:]
                self._returning[app].update(back)  # C unchanged until acknowledged
                out.append((app, {"type": "release", "cores": back}))
        free = self.free
        grants: dict[Hashable, list[int]] = {}
        # the waiting first, in arrival order, one core each; then everyone up to its target
        first = [(app, 1) for app in self.waiting if self.targets[app] >= 1]
        for app, want in first + [(app, None) for app in self.constraints]:
            want = self.targets[app] - len(self.kept(app)) if want is None else want
            for _ in range(min(max(want, 0), len(free))):
                core = free.pop(0)
                self.owner[core] = app
                grants.setdefault(app, []).append(core)
        out += [(app, {"type": "grant", "cores": cores}) for app, cores in grants.items()]
        for app in list(self._blocked):
            kept = self.kept(app)
            if kept and len(kept) == self.targets[app]:
                self._blocked.remove(app)
                out.append((app, {"type": "invaded", "cores": sorted(kept)}))
        return out

    def _leave(self, app: Hashable) -> list[Message]:
        for core in self.held(app):
            self.owner[core] = None
        del self.constraints[app], self._returning[app]
        self.targets.pop(app, None)
        if app in self._blocked:
            self._blocked.remove(app)
        return self._rebalance()

    def _known(self, app: Hashable) -> None:
        if app not in self.constraints:
            raise ShoalError(f"application {app} is not registered with the resource manager")

    # ----- invariants -------------------------------------------------------------------------
    def check(self) -> None:
        """Raise ``AssertionError`` naming the first broken invariant of the manager's state.

        C names only registered applications; asked-back cores are still held by their
        application; D covers exactly the registered applications, Σ D ≤ R, each D_i within
        the application's range; with R ≥ N every D_i ≥ 1, with R < N the first R arrivals
        get one core and the others none; no application keeps more than D_i; no core is
        free while an application is below its target; a blocking invade is unanswered only
        while its application is not settled.
        """
        apps = self.applications
        _require(len(self.owner) == self.cores, "C has one entry per core")
        _require(all(owner is None or owner in self.constraints for owner in self.owner),
                 "C names only registered applications")
        for app in apps:
            _require(self._returning[app] <= self.held(app), f"cores asked back from {app} are still its own in C")
        _require(set(self.targets) == set(apps), "D covers the registered applications")
        total = sum(self.targets.values())
        _require(total <= self.cores, f"sum of D = {total} <= R = {self.cores}")
        for i, app in enumerate(apps):
            target, rng = self.targets[app], _clip(self.constraints[app].range, self.cores)
            if len(apps) <= self.cores:
                _require(1 <= target <= rng[1], f"1 <= D[{app}] = {target} <= its range's max {rng[1]}")
            else:
                _require(target == int(i < self.cores), f"D[{app}] = {target}: one core for the first R arrivals")
            _require(len(self.kept(app)) <= target, f"{app} keeps no more than D[{app}] = {target}")
        if self.free:
            short = [app for app in apps if len(self.kept(app)) < self.targets[app]]
            _require(not short, f"a core is free while {short} are below their targets")
        for app in self._blocked:
            _require(app in self.constraints, "blocked invades belong to registered applications")
            kept = self.kept(app)
            _require(not kept or len(kept) != self.targets[app], f"the settled blocking invade of {app} is answered")


def _require(condition: bool, what: str) -> None:
    if not condition:
        raise AssertionError(f"resource manager invariant broken: {what}")


def _clip(rng: tuple[int, int] | None, pool: int) -> tuple[int, int]:
    """A core range within the pool: ``None`` is the whole pool, a max past R is R."""
    if rng is None:
        return (1, pool)
    return (min(rng[0], pool), min(rng[1], pool))

