"""A run's nodes under the resource manager (the invasive paper, §5.4-5.5): every node is one
application of the manager, and its worker threads follow the cores it holds.

```python
with resource_manager(team, policy="workload", cores=6) as manager:   # or manager="manager.json"
    sim = Simulation(...)
    nodes = join(sim, manager, every=1)      # every node holds a core before the first step
    sim.run(steps)                            # between steps: invade, poll, resize, pin
    sim.close()                               # the nodes retreat; then the manager stops
```

The manager is started on the first process (rank 0 under ``mpiexec``) and its address, key
and policy are agreed by every process, or it is one that runs already and is named by a
manager file, JSON ``{"address": ..., "authkey": "<hex>", "policy": ...}``
(:func:`write_manager_file`, :func:`read_manager_file`): a parameter study starts one manager
and many runs that join it. A manager started by rank 0 takes the CPUs rank 0 may run on as its
default pool: under ``mpiexec`` bind nothing (``--bind-to none``) or give ``--cores``. A pool
smaller than the run's nodes is refused: each node needs a core before any can step.

Before the first step every node registers and :func:`~shoal.invasive.client.setup`'s
non-blocking invades run until every node of the run holds a core, checked by a reduction over
the processes (§5.4). Then, at every ``every``-th step boundary, each node invades
(non-blocking) with

- ``workload``: the work of its tiles in the last step, the sum of the task rows' ``work``
  (the app's own units). Not measured busy seconds: those depend on the cores the node holds
  and on everything sharing the machine (an oversubscribed logical pool, other runs, the
  interpreter lock that a process's nodes share), while the work is what the cores must do,
  the same on any machine, which is what the proportional rule shares cores by. A node
  without work counts as one unit (the manager needs a positive workload);
- ``scalability``: its :class:`~shoal.invasive.distribution.MeasuredScalability` graph, fed
  with the wall time of the steps since the last boundary at the cores it held for them and
  their work,

polls, and resizes its worker pool to the cores it holds (at least one worker, never more
workers than cores). A release request arrives inside a poll, that is at a step boundary when
no worker runs: the pool shrinks, the threads of the cores given up have ended, and only then
is the release acknowledged. In a physical pool each worker thread is pinned to its core's
CPU (:meth:`~shoal.runtime.workers.WorkerPool.pin`); a logical pool (``cores`` above this
machine's) pins nothing and the run is marked oversubscribed. The thread that steps the run —
under ``mpiexec`` also the one that carries MPI messages — is not a worker: it holds no core
of the manager's distribution and stays unpinned, as the manager itself does.

Each process tells the others its nodes' counts, and the counts are recorded once per boundary
where they changed, through :meth:`~shoal.runtime.simulation.Simulation.reconfigure` (the
trace's ``worker_cores``). Tiles stay where they are; a dynamic placement policy moves them as
well, from the cores recorded.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import ShoalError
from ..files import write_json
from ..log import FILE_ONLY
from ..runtime.simulation import Every, Simulation, StepRecord
from ..runtime.team import Team
from .client import Invasion, setup
from .distribution import MeasuredScalability
from .manager import POLICIES
from .server import ManagerHandle, pool, start_manager

logger = logging.getLogger("shoal")

SETUP_POLL_S = 0.01  # each setup poll waits this long for the manager's answer


@dataclass(frozen=True)
class ManagerAddress:
    """Where a running manager listens, its key and its policy (what a manager file holds).

    Attributes
    ----------
    address : str
        Its socket.
    authkey : bytes
        Its key.
    policy : str
        ``workload`` or ``scalability``: what the applications tell it with each invade.
    """

    address: str
    authkey: bytes
    policy: str


def write_manager_file(handle: ManagerHandle, path: str | Path, policy: str | None = None) -> Path:
    """Write the manager file that ``shoal run --manager FILE`` joins.

    The file holds the manager's key: it is written readable by its owner only.

    Parameters
    ----------
    handle : ManagerHandle
        A running manager (:func:`~shoal.invasive.server.start_manager`).
    path : str or Path
        The file to write.
    policy : str, optional
        The policy the manager was started with (default: the handle's ``policy``).

    Returns
    -------
    Path
        ``path``.
    """
    policy = policy if policy is not None else getattr(handle, "policy", None)
    if policy not in POLICIES:
        raise ShoalError(f"the manager file needs the manager's policy ({', '.join(POLICIES)}), not {policy!r}")
    path = Path(path)
    write_json(path, {"address": handle.address, "authkey": handle.authkey.hex(), "policy": policy})
    path.chmod(0o600)
    return path


def read_manager_file(path: str | Path) -> ManagerAddress:
    """The manager a manager file names.

    Parameters
    ----------
    path : str or Path
        A file :func:`write_manager_file` wrote.

    Raises
    ------
    ShoalError
        The file is missing, not JSON, or lacks a field (one line).
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise ShoalError(f"--manager {path}: cannot read it ({exc.strerror})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ShoalError(f"--manager {path} is not JSON: {exc}") from None
    if not isinstance(data, dict) or not all(isinstance(data.get(k), str) for k in ("address", "authkey", "policy")):
        raise ShoalError(f"--manager {path} must hold the strings address, authkey and policy")
    try:
        authkey = bytes.fromhex(data["authkey"])
    except ValueError:
        raise ShoalError(f"--manager {path}: authkey is not hexadecimal") from None
    if data["policy"] not in POLICIES:
        raise ShoalError(f"--manager {path}: unknown policy {data['policy']!r}; known: {', '.join(POLICIES)}")
    return ManagerAddress(data["address"], authkey, data["policy"])


def check_invasive(policy: str | None, cores: int | None, manager: str | Path | None, every: int | None) -> None:
    """Refuse flags of a run under the manager that cannot work, before anything starts.

    Parameters
    ----------
    policy : str or None
        ``--invasive``: start a manager with this policy.
    cores : int or None
        ``--cores``: its pool.
    manager : str or Path or None
        ``--manager``: join this manager file's manager instead.
    every : int or None
        ``--invade-every``: steps between invades.
    """
    if policy is not None and manager is not None:
        raise ShoalError("give --invasive POLICY to start a resource manager or --manager FILE to join one, not both")
    if policy is None and manager is None:
        if cores is not None or every is not None:
            raise ShoalError(f"--{'cores' if cores is not None else 'invade-every'} needs --invasive or --manager")
        return
    if policy is not None and policy not in POLICIES:
        raise ShoalError(f"unknown invasive policy {policy!r}; known: {', '.join(POLICIES)}")
    if cores is not None:
        if manager is not None:
            raise ShoalError("--cores sizes a manager this run starts; a joined manager has its own pool")
        pool(cores)  # one line for a count below 1
    if every is not None and (isinstance(every, bool) or not isinstance(every, int) or every < 1):
        raise ShoalError(f"--invade-every must be a whole number of at least 1, not {every}")


@contextlib.contextmanager
def resource_manager(team: Team, policy: str | None = None, cores: int | None = None,
                     manager: str | Path | None = None) -> Iterator[ManagerAddress | None]:
    """The manager a run's processes join: started on the first process (``policy``), or the
    one a manager file names (``manager``, read on the first process); ``None`` without either.

    Every process of ``team`` enters and leaves the block together. A manager started here is
    stopped as the block ends: after every process has left it when the block ends normally
    (their applications have retreated), at once after an error.

    Parameters
    ----------
    team : Team
        The run's processes.
    policy : str, optional
        Start a manager with this policy.
    cores : int, optional
        Its pool (default: this machine's cores this process may use).
    manager : str or Path, optional
        A manager file to join.

    Raises
    ------
    ShoalError
        On every process, when the first one cannot start the manager or read the file.
    """
    if policy is None and manager is None:
        yield None
        return
    handle, found, error = None, None, None
    if team.is_root:
        try:
            if manager is not None:
                found = read_manager_file(manager)
            else:
                handle = start_manager(cores, policy)
                found = ManagerAddress(handle.address, handle.authkey, policy)
        except ShoalError as exc:
            error = str(exc)
    agreed = team.agree((error, None if found is None else (found.address, found.authkey.hex(), found.policy)))
    if agreed[0] is not None:
        raise ShoalError(agreed[0])
    address, key, agreed_policy = agreed[1]
    try:
        yield ManagerAddress(address, bytes.fromhex(key), agreed_policy)
        team.max(0.0)  # every process has retreated
    finally:
        if handle is not None:
            handle.stop()


class InvasiveNodes:
    """The nodes a process runs, each one application of the manager; see the module docstring.

    Parameters
    ----------
    sim : Simulation
        The run, not stepped yet (or between steps).
    manager : ManagerAddress
        The manager to join.
    every : int
        Steps between invades.
    blocking : bool
        Each invade waits for the manager's answer (§6.1's blocking variant); by default it
        does not, and the answer is applied at a later step boundary.

    Attributes
    ----------
    invasions : dict of int to Invasion
        Each node's connection, by node.
    """

    def __init__(self, sim: Simulation, manager: ManagerAddress, every: int = 1, blocking: bool = False):
        self.sim, self.manager, self.every, self.blocking = sim, manager, every, blocking
        team = sim.team
        nodes = [team.rank] if team.distributed else list(range(sim.cluster.nodes))
        self.invasions = {node: Invasion(manager.address, manager.authkey, name=f"node {node}",
                                         release=lambda keep, node=node: self._fit(node, keep))
                          for node in nodes}
        self._work = dict.fromkeys(nodes, 0.0)  # the last step's work
        self._span_work = dict.fromkeys(nodes, 0.0)  # the work since the last invade
        self._graphs = {node: MeasuredScalability() for node in nodes}
        self._since = time.perf_counter()

    @property
    def pool(self) -> int:
        """R, the manager's pool."""
        return next(iter(self.invasions.values())).pool

    @property
    def oversubscribed(self) -> bool:
        """Whether the manager's pool is logical (threads not pinned)."""
        return next(iter(self.invasions.values())).oversubscribed

    def setup(self) -> None:
        """Register every node and invade until every node of the run holds a core (§5.4)."""
        team = self.sim.team
        for invasion in self.invasions.values():
            invasion.register()
        nodes = self.sim.cluster.nodes
        if self.pool < nodes:  # some node would wait for a core the others never give up
            raise ShoalError(f"the resource manager's pool has {self.pool} cores, fewer than the run's {nodes} nodes "
                             "(each needs one): give a larger --cores, or under mpiexec --bind-to none (a rank "
                             "bound to a core starts a manager that sees only that core)")
        everyone = (lambda mine: team.max(0.0 if mine else 1.0) == 0.0) if team.distributed else None
        first = {node: self._constraints(node) for node in self.invasions}
        if len(self.invasions) == 1:
            [(node, invasion)] = self.invasions.items()
            setup(invasion, everyone, interval=SETUP_POLL_S, **first[node])
        else:  # several nodes in one thread: each polls in turn, so each answers its releases
            for node, invasion in self.invasions.items():
                invasion.invade(blocking=False, **first[node])
            while not all([bool(invasion.poll(SETUP_POLL_S)) or invasion.lost
                           for invasion in self.invasions.values()]):
                pass  # a list, not a generator: every node polls each turn
        for node, invasion in self.invasions.items():
            self._fit(node, invasion.cores)
        self._record()
        self._since = time.perf_counter()

    def invade(self, sim: Simulation) -> None:
        """The step-boundary action: each node invades with what it measured, polls, and its
        pool follows the cores it holds; the counts are recorded where they changed."""
        seconds = time.perf_counter() - self._since
        for node, invasion in self.invasions.items():
            if self._span_work[node] > 0:
                self._graphs[node].record(self.sim.cluster.cores[node], seconds, self._span_work[node])
            self._span_work[node] = 0.0
            invasion.invade(blocking=self.blocking, **self._constraints(node))
            self._fit(node, invasion.poll())
        self._record()
        self._since = time.perf_counter()

    def measure(self, record: StepRecord) -> None:
        """A measurement action: each node's work in the step that just finished."""
        t = record.tasks
        work = np.bincount(t["node"].astype(np.int64), weights=t["work"].astype(np.float64),
                           minlength=self.sim.cluster.nodes)
        for node in self.invasions:
            self._work[node] = float(work[node])
            self._span_work[node] += float(work[node])

    def retreat(self) -> None:
        """Every node leaves the manager (after the run's workers have ended)."""
        for invasion in self.invasions.values():
            invasion.retreat()

    def describe(self) -> dict:
        """What the run's summary records of it, with the cores its nodes held: per node on average
        over the steps run (``cores_mean``), and the fewest and most held at once in all."""
        history, end = self.sim.worker_history, self.sim.step_count
        spans = [(max(0, min(nxt, end) - max(start, 0)), cores)
                 for (start, cores), nxt in zip(history, [s for s, _ in history[1:]] + [end], strict=True)]
        steps = sum(n for n, _ in spans) or 1
        mean = [sum(n * c[k] for n, c in spans) / steps for k in range(len(history[-1][1]))]
        totals = [sum(c) for n, c in spans if n] or [sum(history[-1][1])]
        return {"policy": self.manager.policy, "pool": self.pool, "oversubscribed": self.oversubscribed,
                "invade_every": self.every, "blocking": self.blocking,
                "workload": "work of the node's tiles in the last step",
                "manager_lost": any(invasion.lost for invasion in self.invasions.values()),
                "cores_mean": mean, "cores_min": min(totals), "cores_max": max(totals)}

    # ----- the pool follows the cores ----------------------------------------------------------
    def _constraints(self, node: int) -> dict:
        if self.manager.policy == "scalability":
            return {"graph": self._graphs[node].graph(self.pool).tolist()}
        return {"workload": max(self._work[node], 1.0)}

    def _fit(self, node: int, cores: frozenset[int]) -> None:
        """Node ``node``'s pool runs one worker per core of ``cores`` (at least one), each pinned
        to its core's CPU in a physical pool. It is called between runs only (a release arrives
        inside a poll at a step boundary), so threads of cores given up have ended when it returns."""
        executor, invasion = self.sim.executor, self.invasions[node]
        workers = max(1, len(cores))
        if executor.cluster.cores[node] != workers:
            executor.reconfigure(cores={node: workers})  # recorded by _record, once every process's is known
        if not invasion.oversubscribed and cores:
            executor.pin(node, [invasion.cpu(core) for core in sorted(cores)])

    def _record(self) -> None:
        """Every node's count on every process, recorded when it changed."""
        sim = self.sim
        counts = np.zeros(sim.cluster.nodes, dtype=np.int64)
        for node in self.invasions:
            counts[node] = sim.cluster.cores[node]
        counts = sim.team.sum(counts)
        if tuple(int(c) for c in counts) != tuple(sim.worker_history[-1][1]):
            sim.reconfigure(workers={node: int(c) for node, c in enumerate(counts)})


def join(sim: Simulation, manager: ManagerAddress, every: int = 1, blocking: bool = False) -> InvasiveNodes:
    """Join ``sim``'s nodes in this process to ``manager`` before the first step, and have
    them invade every ``every`` steps (waiting for each answer when ``blocking``); they
    retreat when the simulation closes.

    Parameters
    ----------
    sim : Simulation
        The run, between steps.
    manager : ManagerAddress
        The manager (:func:`resource_manager`).
    every : int
        Steps between invades.
    blocking : bool
        Wait for the manager's answer to each invade.

    Returns
    -------
    InvasiveNodes
        The joined nodes.
    """
    nodes = InvasiveNodes(sim, manager, every, blocking)
    sim.at_close(nodes.retreat)
    nodes.setup()
    sim.add_measurement(nodes.measure)
    sim.add_callback(nodes.invade, Every(every))
    if sim.team.is_root:
        kind = "a logical pool, oversubscribed: threads not pinned" if nodes.oversubscribed else \
            "threads pinned to their cores"
        logger.info("resource manager (%s policy): %d cores, %s; each node's worker threads follow its cores, "
                    "invading every %d steps", manager.policy, nodes.pool, kind, every, extra=FILE_ONLY)
    return nodes
