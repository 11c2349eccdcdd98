"""Replaying a trace: tiles per core by spatial aggregation, balancing every K steps, the MPI
reference model, and a predicted trace of the common schema."""

from __future__ import annotations

import dataclasses
import itertools
import math
from dataclasses import dataclass, field

import numpy as np

from ..cluster import Cluster, Network
from ..compilation import announce
from ..errors import ShoalError
from ..log import Stages
from ..placement import Balancer, get_policy, policy_params
from ..placement.job_policies import job_policy
from ..placement.proxy import ProxyLoads
from ..placement.registry import check_owner
from ..placement.trigger import parse_period
from ..records import JOB_RUNS
from ..summary import summarize
from ..tiling import Tiling
from ..trace import Trace, aggregate, scaled, with_iterations
from .invasive import InvasiveConfig, InvasiveModel, invasive_cluster
from .jobs import RecordedJobs
from .machine import MachineModel
from .segments import Outcome, Setup, run_segments, segment_cuts

# What ``shoal.replay.calibrate`` measures of the machine the runs use, as ReplayConfig fields.
MACHINE_FIELDS = ("task_overhead_s", "payload_overhead_s", "restart_s", "wake_s", "handoff_s")


@dataclass
class ReplayConfig:
    """A modeled cluster and a placement to replay a trace under.

    Without ``nodes`` and ``cores`` the cluster is the recorded one, every node holding the
    worker threads it held at every step of the run (a resized run is replayed resized, and
    a run resumed on another number of nodes on the nodes each part had: tiles are placed
    anew on those present where they change); with them, ``nodes`` nodes of ``cores`` cores
    each over the whole run. ``balance`` holds the balancing
    policies' parameters by policy name (a scenario's ``[balance]`` table). ``mpi_reference``
    replays the classic MPI code instead: one tile per core, a block (geometric) placement
    and a barrier after every phase.
    """

    nodes: int | None = None
    cores: int | None = None
    placement: str = "sfc"
    period: int | str = 0  # steps between balancing steps, or "adaptive" (shoal.placement.trigger)
    tiles_per_core: int | None = None
    initial: str = "sfc"
    seed: int = 0
    speed: float = 1.0
    network: Network = field(default_factory=Network)
    memcpy_bandwidth: float = float("inf")  # recorded costs already include packing halos
    # Task costs: "model" (work x rate + fixed of the machine model: ``machine``, else the one
    # the trace's run fitted) or "measured" (the trace's own seconds). A trace without a model
    # replays its measured costs.
    costs: str = "model"
    machine: MachineModel | None = None
    # The executor's constants (seconds); None: the machine model's (0 with measured costs).
    task_overhead_s: float | None = None  # the executor's own time per task (dispatch)
    payload_overhead_s: float | None = None  # and per halo payload, spread over the tasks
    restart_s: float | None = None  # what stopping and restarting the executor adds to a balancing step
    wake_s: float | None = None  # how long an idle core's worker takes to wake for a task that became ready
    # Interpreter lock wait per lock-free call of a task, where threads share the lock (each call
    # lets go of it; taking it back waits for the other threads)
    handoff_s: float | None = None
    # Interpreter lock: "process" (one per node, a Python executor per rank), "shared" (all nodes
    # in one process, the local executor) or "none" (a compiled executor); None: as recorded
    # (the machine model's), "none" with measured costs.
    gil: str | None = None
    # How a lock shared by several threads is modeled: "waits" (each lock-free call waits
    # ``handoff_s``, scaled by the threads sharing the lock), "serial" (the Python share of the
    # tasks runs one at a time, no waits: one end of the interval a lock-dominated run gets) or
    # "free" (no lock: the other end).
    lock_model: str = "waits"
    handoff_threads: int | None = None  # threads that shared the lock where handoff_s was measured (None: the model's)
    # CPU seconds per tile-to-tile payload sent or received between nodes, charged to the
    # producing and the reading task (the workers move the messages between their tasks, on
    # the node's cores and, in Python, holding its interpreter lock). None: as measured by the
    # trace's run.
    message_cpu_s: float | None = None
    balance: dict = field(default_factory=dict)
    mpi_reference: bool = False
    iterations: int | None = None  # every loop of every step runs this many iterations (None: as recorded)
    job_policy: str = "locality"  # where the recorded jobs run on the modeled nodes (shoal.placement.job_policies)
    job_split: int = 0  # a job of more items is cut into ranges for its node's cores (0: never)
    proxy: Trace | None = None  # a low-resolution run of the same scenario, for ``speculative``
    invasive: InvasiveConfig | None = None  # cores moved between ranks by a modeled manager (shoal.replay.invasive)


@dataclass
class ReplayResult:
    """What :func:`replay` predicts: the trace of the modeled run, its makespan in seconds of
    modeled time, the discrete events simulated and the seconds of this machine's time that
    took, and the configuration replayed."""

    trace: Trace
    makespan: float
    events: int
    sim_wall_s: float
    config: ReplayConfig
    fit: str = ""  # one line on how well the machine model fit the recorded costs (model costs only)
    # Where the tasks are mostly Python under a shared lock: the makespans with the lock fully
    # serialising the Python share and with no lock at all (None otherwise)
    lock_interval: tuple[float, float] | None = None
    stages: dict[str, float] = field(default_factory=dict)  # seconds of this machine's time per stage

    def summary(self) -> dict:
        """The replay's ``summary.json``: a run's summary fields (marked ``predicted``), the
        makespan and machine model used, how well that model fit, the interval a lock-dominated
        run gets, and the replay's own speed (events per second)."""
        t, cfg = self.trace, self.config
        steps = max(1, len(t.steps))
        return {
            "app": t.app, "scenario": t.scenario, "predicted": True,
            "placement": "mpi-reference" if cfg.mpi_reference else cfg.placement,
            "period": cfg.period, "workers": int(max(t.cluster.cores)),
            **summarize(t, self.makespan, "model"),
            "makespan_s": self.makespan, "message_cpu_s": cfg.message_cpu_s,
            "machine": {k: getattr(cfg, k) for k in MACHINE_FIELDS}, "costs": cfg.costs, "gil": cfg.gil,
            "machine_fit": self.fit, "lock_dominated": self.lock_interval is not None,
            "lock_interval_s": list(self.lock_interval) if self.lock_interval else None,
            "lock_interval_step_s": [v / steps for v in self.lock_interval] if self.lock_interval else None,
            "events": int(self.events), "replay_wall_s": self.sim_wall_s,
            "events_per_s": self.events / self.sim_wall_s if self.sim_wall_s > 0 else 0.0,
            "stages_s": {k: round(v, 6) for k, v in self.stages.items()},
        }


def lock_line(gils) -> str:
    """What a table's header says of the interpreter lock its replays modeled (``gils``: each
    replay's resolved ``gil``)."""
    names = {"none": "none (a compiled executor)", "process": "one per node (MPI ranks)",
             "shared": "one for all nodes (threads in one process)"}
    found = sorted(set(gils))
    return "interpreter lock: " + (", ".join(names.get(g, g) for g in found) if found else "none")


def coarsening_for(tiling: Tiling, target: int) -> Tiling:
    """The nested coarser tiling (integer factor per axis) whose tile count is closest to target;
    for a mesh partition, ``target`` parts merged from its own (:meth:`MeshPartition.coarsen`)."""
    if target > tiling.ntiles:
        raise ShoalError(f"the trace has {tiling.ntiles} tiles; {target} were asked for: record a finer tiling")
    if tiling.kind == "mesh":
        return tiling if target == tiling.ntiles else tiling.coarsen(target)
    best = None
    for factors in itertools.product(*[range(1, c + 1) for c in tiling.counts]):
        counts = [math.ceil(c / f) for c, f in zip(tiling.counts, factors, strict=True)]
        n = int(np.prod(counts))
        shape = max(factors) / min(factors)
        score = (abs(math.log(n / target)), shape, -n)
        if best is None or score < best[0]:
            best = (score, factors)
    return tiling if all(f == 1 for f in best[1]) else tiling.coarsen(best[1])


def replay(trace: Trace, cfg: ReplayConfig) -> ReplayResult:
    """Replay ``trace`` on ``cfg``'s modeled cluster; returns a predicted trace and its makespan.

    With model costs (the default) every task costs its work at the machine model's rate
    (``cfg.machine``, else the model the trace's run fitted; measured costs for a trace without
    one), the executor's constants and the interpreter lock are the model's unless ``cfg`` sets
    them, and ``cfg.speed`` divides the model's rates. Where the tasks are mostly Python under a
    lock several threads share, the result also holds the interval between the lock fully
    serialising their Python share and no lock at all.

    It runs in timed stages (the result's ``stages``): ``check`` the configuration, ``model``
    the cluster and the machine, the lock ``interval``, ``aggregate`` the tiles to the tiles per
    core asked for, ``price`` the tasks, ``place`` the tiles and set the event loop up,
    ``simulate`` the steps (:func:`~shoal.replay.segments.run_segments`) and ``record`` the
    predicted trace.
    """
    stage = Stages()
    with stage("check"):
        _check(cfg)
    with stage("model"):
        cfg, model = resolved(trace, cfg)
        _check_resolved(cfg)
        cluster, schedule = _modeled_cluster(trace, cfg)
        announce("replay")  # the input is good: a pause from here on is compilation, not a hang
        if cfg.invasive is not None:
            cluster, inv_cfg = invasive_cluster(cfg.invasive, cluster.nodes, trace.cluster, cfg.network)
            cfg = dataclasses.replace(cfg, invasive=inv_cfg)  # its defaults resolved, for the records
    with stage("interval"):
        interval = None
        if cfg.lock_model == "waits" and lock_dominated(trace) and _lock_threads(cfg, cluster) > 1:
            interval = tuple(sorted(replay(trace, dataclasses.replace(cfg, lock_model=m)).makespan
                                    for m in ("serial", "free")))
    with stage("aggregate"):
        if cfg.iterations is not None:
            trace = with_iterations(trace, cfg.iterations)
        tpc = 1 if cfg.mpi_reference else cfg.tiles_per_core
        if tpc:
            coarse = coarsening_for(trace.tiling, tpc * cluster.total_cores)
            if coarse is not trace.tiling:
                trace = aggregate(trace, coarse)
    with stage("price"):
        # Priced after aggregating: a coarse task pays the model's fixed cost per task once, not
        # once for every fine task it holds
        if model is not None:
            trace = modelled(trace, model)
        elif cfg.speed != 1.0:
            trace = scaled(trace, cfg.speed)
        if cfg.message_cpu_s is None:  # the result says what was charged
            cfg = dataclasses.replace(cfg, message_cpu_s=trace.message_cpu_s)
        if cfg.message_cpu_s < 0:
            raise ShoalError(f"message CPU time must be >= 0, got {cfg.message_cpu_s}")
    with stage("place"):
        setup = _setup(trace, cfg, cluster, schedule, model)
    with stage("simulate"):
        outcome = run_segments(trace, setup)
    with stage("record"):
        predicted = _predicted(trace, cfg, setup, outcome)
    ends = predicted.tasks["end"]  # the tasks run (a slot a step did not run holds no task)
    return ReplayResult(predicted, float(ends.max()) if len(ends) else 0.0, outcome.events,
                        outcome.wall_s, cfg, model.fit_line() if model is not None else "", interval,
                        dict(stage.seconds))


def _check(cfg: ReplayConfig) -> None:
    """Refuse a configuration that cannot be replayed, before anything is read or priced."""
    if (cfg.nodes is not None and cfg.nodes < 1) or (cfg.cores is not None and cfg.cores < 1):
        raise ShoalError("replay needs at least one node with one core")
    parse_period(cfg.period)
    job_policy(cfg.job_policy)  # an unknown name, in one line, before anything is read
    if not isinstance(cfg.job_split, int) or cfg.job_split < 0:
        raise ShoalError(f"job split must be a whole number of items >= 0, got {cfg.job_split!r}")
    if cfg.lock_model not in ("waits", "serial", "free"):
        raise ShoalError(f"lock model must be 'waits', 'serial' or 'free', got {cfg.lock_model!r}")


def _check_resolved(cfg: ReplayConfig) -> None:
    """Refuse negative overheads, the machine model's filled in."""
    if min(cfg.task_overhead_s, cfg.payload_overhead_s, cfg.restart_s, cfg.wake_s, cfg.handoff_s) < 0:
        raise ShoalError(f"overheads must be >= 0, got {cfg.task_overhead_s} per task, {cfg.payload_overhead_s} per "
                         f"payload, {cfg.restart_s} per restart, {cfg.wake_s} per wake-up and {cfg.handoff_s} "
                         "per lock hand-off")


def _setup(trace: Trace, cfg: ReplayConfig, cluster: Cluster, schedule: tuple[np.ndarray, np.ndarray],
           model: MachineModel | None) -> Setup:
    """The first owners, the phases' barriers, every task's duration on a core (its cost, the
    executor's share and its waits for a shared lock), the lock, the balancer and the cuts."""
    tiling = trace.tiling
    T = tiling.ntiles
    slot_phase, _ = trace.slots()
    present = trace.slot_present()  # (steps, slots): a step that ran fewer iterations leaves slots empty
    policy = get_policy("geometric" if cfg.mpi_reference else cfg.placement)

    def place(cores: np.ndarray) -> np.ndarray:
        """The policy's placement on the nodes that hold threads (``cores`` per node), by node
        of ``cluster``: the first one, and where nodes join or leave the run."""
        present = np.flatnonzero(cores > 0)
        on = Cluster(tuple(int(c) for c in cores[present]), cluster.network)
        if policy.dynamic:
            owner = policy.place(tiling, on, cfg.seed, initial=cfg.initial)
        else:
            owner = policy.place(tiling, on, cfg.seed)
        return present[check_owner(owner, tiling, on)]

    first = cluster.core_array if cfg.invasive is not None else schedule[1][_row(schedule, trace.steps[0])]
    owner = place(first)
    J = len(slot_phase)
    barrier = np.array([True] * J if cfg.mpi_reference else np.asarray(trace.barrier_phases)[slot_phase],
                       dtype=np.bool_)
    lag = np.zeros(J, np.int64) if cfg.mpi_reference else np.asarray(trace.lagged_phases, np.int64)[slot_phase]
    cost = trace.phase_table()
    overhead = executor_overhead(cfg, int(present.sum()) * T, len(trace.messages["src"]))
    calls = trace.phase_table("kernel_calls") if "kernel_calls" in trace.tasks else None
    duration = (cost + overhead + lock_waits(cfg, calls, cluster)) * present[:, :, None]
    gil, process_of = _interpreter_lock(cfg, cost, trace.phase_table("kernel") if "kernel" in trace.tasks else None,
                                        cluster, overhead)
    gil = gil * present[:, :, None]
    S = cost.shape[0]
    period = parse_period(cfg.period) if policy.dynamic else 0
    balancer = None
    if period:
        ends_barrier = tuple(bool(b and not lg) for b, lg in zip(barrier, lag, strict=True))
        balancer = Balancer(policy, period, tiling, ends_barrier, policy_params(policy, cfg.balance),
                            _proxy_loads(cfg.proxy, model, tiling, S) if cfg.proxy is not None else None)
    invasive = InvasiveModel(cfg.invasive, S) if cfg.invasive is not None else None
    fixed, cuts = segment_cuts(period, S, trace.steps, schedule, invasive is not None)
    tile_bytes = trace.tile_bytes if trace.tile_bytes is not None else np.zeros(T, np.int64)
    barrier_at = barrier[None, :] & present  # no barrier after a slot a step did not run
    lag_at = np.broadcast_to(lag, present.shape).copy()
    slot_iteration = trace.slots()[1]
    return Setup(cluster, schedule, owner, barrier_at, lag_at, cost, duration, gil, process_of, balancer, fixed, cuts,
                 invasive, tile_bytes, cfg.message_cpu_s, cfg.gil, cfg.memcpy_bandwidth, cfg.wake_s, cfg.restart_s,
                 place, RecordedJobs.of(trace, cfg.speed), cfg.job_policy, cfg.job_split, slot_phase, slot_iteration,
                 np.asarray(trace.node_barrier_phases, bool)[slot_phase])


def _row(schedule: tuple[np.ndarray, np.ndarray], step: int) -> int:
    """The row of ``schedule`` (from steps, cores per node) in force at ``step``."""
    return max(int(np.searchsorted(schedule[0], step, side="right")) - 1, 0)


def _predicted(trace: Trace, cfg: ReplayConfig, setup: Setup, outcome: Outcome) -> Trace:
    """The predicted run's trace, in the schema of a measured one."""
    steps, T = trace.steps, trace.tiling.ntiles
    slot_phase, slot_iteration = trace.slots()
    S, P = len(steps), len(slot_phase)
    cluster = setup.cluster
    ran = np.repeat(trace.slot_present().reshape(-1), T)  # the tasks of slots a step ran
    tasks = {"step": np.repeat(steps, P * T), "phase": np.tile(np.repeat(slot_phase, T), S),
             "iteration": np.tile(np.repeat(slot_iteration, T), S),
             "tile": np.tile(np.arange(T), S * P), "node": outcome.node, "worker": outcome.core,
             "start": outcome.start, "end": outcome.end, "cost": setup.cost.reshape(-1),
             "work": _work(trace), **({"kernel": trace.phase_table("kernel").reshape(-1)}
                                      if "kernel" in trace.tasks else {})}
    return Trace(
        tasks={k: v[ran] for k, v in tasks.items()},
        messages=trace.messages, phases=trace.phases, tiling=trace.tiling, cluster=cluster,
        placement_steps=np.array(outcome.owner_steps), placement_owners=np.stack(outcome.owners),
        step_end=np.where(ran, outcome.end, -np.inf).reshape(S, P * T).max(axis=1), app=trace.app,
        scenario=trace.scenario, predicted=True,
        config={**trace.config, "replay": {k: v for k, v in cfg.__dict__.items()
                                           if k not in ("network", "proxy", "machine")}
                | {"network": cluster.to_dict(), "proxy": cfg.proxy.scenario if cfg.proxy else None,
                   "invasive": dataclasses.asdict(cfg.invasive) if cfg.invasive else None}},
        barrier_phases=[True] * len(trace.phases) if cfg.mpi_reference else trace.barrier_phases,
        lagged_phases=[False] * len(trace.phases) if cfg.mpi_reference else trace.lagged_phases,
        loop_phases=trace.loop_phases, node_barrier_phases=trace.node_barrier_phases, tile_bytes=setup.tile_bytes,
        work_units=trace.work_units,
        jobs=JOB_RUNS.from_rows(outcome.jobs) if outcome.jobs else None,
        balance=setup.balancer.records() if setup.balancer is not None else None,
        worker_steps=outcome.schedule[0], worker_cores=outcome.schedule[1],
    )


def resolved(trace: Trace, cfg: ReplayConfig) -> tuple[ReplayConfig, MachineModel | None]:
    """``cfg`` with every field left to the machine model filled in, and the model whose rates
    price the tasks (None: measured costs, for ``costs="measured"`` or a trace without a model).

    With model costs, the model is ``cfg.machine``, else the one the trace's run fitted; with
    measured costs, only ``cfg.machine``. The executor's constants the configuration leaves
    unset come from that model (0 without one), as do the interpreter lock it recorded ("none"
    without one; one lock per node, "process", where in-process nodes that shared one are
    replayed on another number of nodes: a cluster runs a rank per node) and its CPU time per
    message between processes. ``cfg.speed`` divides a
    pricing model's rates, fixed costs, dispatch and message CPU time."""
    if cfg.costs not in ("model", "measured"):
        raise ShoalError(f"costs must be 'model' or 'measured', got {cfg.costs!r}")
    model = cfg.machine
    if model is None and cfg.costs == "model" and trace.machine is not None:
        model = MachineModel.from_dict(trace.machine, "the trace's machine model")
    if model is not None and cfg.costs == "model" and cfg.speed != 1.0:
        model = model.scaled(cfg.speed)
    fill = {}
    for name, key in (("task_overhead_s", "dispatch_s"), ("payload_overhead_s", "payload_overhead_s"),
                      ("restart_s", "restart_s"), ("wake_s", "wake_s"), ("handoff_s", "handoff_s")):
        if getattr(cfg, name) is None:
            fill[name] = float(getattr(model, key)) if model is not None else 0.0
    if cfg.handoff_threads is None:
        fill["handoff_threads"] = model.lock_threads if model is not None else 2
    if cfg.gil is None:
        fill["gil"] = model.lock if model is not None else "none"
        if fill["gil"] == "shared" and cfg.nodes not in (None, trace.cluster.nodes):
            # The recorded nodes shared one process; a cluster of other nodes runs a rank per node.
            fill["gil"] = "process"
    if cfg.message_cpu_s is None and model is not None:
        fill["message_cpu_s"] = model.message_cpu_s
    return dataclasses.replace(cfg, **fill), model if cfg.costs == "model" else None


def modelled(trace: Trace, model: MachineModel) -> Trace:
    """``trace`` with every task's cost (and kernel time) priced by ``model``: its phase's
    ``rate x work + fixed``, and the kernel time the cost less the modeled Python share."""
    t = trace.tasks
    cost, kernel = np.zeros(len(t["work"])), np.zeros(len(t["work"]))
    for p, name in enumerate(trace.phases):
        rows = t["phase"] == p
        if not rows.any():
            continue
        pm = model.phase(trace.app, name)
        cost[rows] = pm.cost.predict(t["work"][rows])
        python = pm.python.predict(t["work"][rows]) if pm.python is not None else cost[rows]
        kernel[rows] = cost[rows] - np.minimum(python, cost[rows])
    return trace.with_tasks(cost=cost, kernel=kernel)


def _proxy_loads(proxy: Trace, model: MachineModel | None, tiling: Tiling, steps: int) -> ProxyLoads:
    """The proxy's loads on ``tiling``, priced like the replayed trace: its work at the model's
    rates, spread over this replay's tiles, and each phase's fixed cost once per tile (as the
    replayed trace, priced after aggregation, pays it), not once per proxy tile."""
    if model is None:
        return ProxyLoads(proxy, tiling, steps)
    t = proxy.tasks
    cost = np.zeros(len(t["work"]))
    fixed = 0.0
    for p, name in enumerate(proxy.phases):
        fit = model.phase(proxy.app, name).cost
        rows = t["phase"] == p
        cost[rows] = fit.rate * t["work"][rows]
        fixed += fit.fixed
    return ProxyLoads(proxy.with_tasks(cost=cost), tiling, steps, fixed)


def lock_dominated(trace: Trace) -> bool:
    """Whether the trace's tasks spent less than half their time in lock-free kernels (from its
    own ``kernel`` and ``cost`` columns; False where it has no kernel times)."""
    t = trace.tasks
    if "kernel" not in t or not t["kernel"].any():
        return False
    return float(t["kernel"].sum()) < 0.5 * float(t["cost"].sum())


def _lock_threads(cfg: ReplayConfig, cluster: Cluster) -> int:
    """Worker threads that share one interpreter lock in the modeled cluster (1 without a lock)."""
    if cfg.gil == "shared":
        return cluster.total_cores
    return int(cluster.core_array.max()) if cfg.gil == "process" else 1


def _modeled_cluster(trace: Trace, cfg: ReplayConfig) -> tuple[Cluster, tuple[np.ndarray, np.ndarray]]:
    """The cluster to replay on and its worker threads over steps: ``(from steps, cores per node)``,
    0 for a node absent from the run over some steps (a run resumed on other nodes)."""
    if cfg.nodes is None and cfg.cores is None:
        cluster = Cluster(trace.cluster.cores, cfg.network)
        return cluster, (trace.worker_steps, trace.worker_cores)
    nodes = cfg.nodes if cfg.nodes is not None else trace.cluster.nodes
    cores = cfg.cores if cfg.cores is not None else max(trace.cluster.cores)
    cluster = Cluster.uniform(nodes, cores, cfg.network)
    return cluster, (trace.steps[:1].astype(np.int64), cluster.core_array[None, :])


def executor_overhead(cfg: ReplayConfig, tasks: int, payloads: int) -> float:
    """The executor's time in seconds charged to every task of a (replayed) trace of ``tasks``
    tasks that moved ``payloads`` halo payloads: the time per task of ``cfg`` plus the
    payloads' share (unset figures count 0)."""
    per_payload = cfg.payload_overhead_s or 0.0
    return (cfg.task_overhead_s or 0.0) + (per_payload * payloads / tasks if tasks else 0.0)


def lock_waits(cfg: ReplayConfig, calls: np.ndarray | None, cluster: Cluster) -> np.ndarray | float:
    """Seconds each task waits for an interpreter lock other threads share (``lock_model``
    ``waits``): ``cfg.handoff_s`` per lock-free call (``calls``: per task, None where the trace
    did not count them), measured where ``cfg.handoff_threads`` threads shared the lock, and
    scaled by the other threads that share it in ``cluster`` (none on one thread)."""
    threads = _lock_threads(cfg, cluster)
    if cfg.lock_model != "waits" or calls is None or threads < 2 or not cfg.handoff_s:
        return 0.0
    return calls * cfg.handoff_s * (threads - 1) / max(1, cfg.handoff_threads - 1)


def _interpreter_lock(cfg: ReplayConfig, cost: np.ndarray, kernel: np.ndarray | None, cluster: Cluster,
                      overhead: float) -> tuple[np.ndarray, np.ndarray]:
    """The share of each task that holds a Python lock the engine serialises (``lock_model``
    ``serial``; none otherwise), and which lock each node's tasks take.

    A task's Python share is its cost less the time its compiled kernels ran (recorded by real
    runs), plus the executor's own overhead. Traces without kernel times fall back on the
    cost of the cheapest tasks of each phase (the 5th percentile: nearly all Python).
    """
    nodes = cluster.nodes
    if cfg.gil not in ("none", "process", "shared"):
        raise ShoalError(f"gil must be 'none', 'process' or 'shared', got {cfg.gil!r}")
    if cfg.gil == "none" or cfg.lock_model != "serial":
        return np.zeros_like(cost), np.arange(nodes)
    if kernel is not None and kernel.any():
        python = np.clip(cost - kernel, 0.0, None)
    else:
        python = np.minimum(cost, np.percentile(cost, 5, axis=(0, 2))[None, :, None])
    process_of = np.zeros(nodes, np.int64) if cfg.gil == "shared" else np.arange(nodes)
    return python + overhead, process_of


def _work(trace: Trace) -> np.ndarray:
    steps, P, T = trace.steps, len(trace.slots()[0]), trace.tiling.ntiles
    work = np.zeros(len(steps) * P * T, np.int64)
    s_idx = np.searchsorted(steps, trace.tasks["step"])
    np.add.at(work, (s_idx * P + trace.slot_of(trace.tasks)) * T + trace.tasks["tile"], trace.tasks["work"])
    return work


def write_replay(result: ReplayResult, out) -> dict:
    """Write the replay ``result`` as the run folder ``out``: same layout as a real run's
    (``config.toml``, ``trace.h5``, ``summary.json``), marked as predicted; returns the summary.
    The folder is claimed as a run's is (:func:`shoal.rundir.claim_folder`): one that holds
    anything, or that another run is writing, is refused before anything is written."""
    from pathlib import Path

    import tomli_w

    from ..files import write_json, write_text
    from ..rundir import claim_folder

    out = Path(out)
    cfg = {k: v for k, v in result.config.__dict__.items()
           if k not in ("network", "tiles_per_core", "proxy", "nodes", "cores", "machine") and v is not None}
    if result.config.machine is not None:
        cfg["machine"] = result.config.machine.source or "given"
    cfg["tiles_per_core"] = result.config.tiles_per_core or 0
    if result.config.invasive is not None:
        cfg["invasive"] = dataclasses.asdict(result.config.invasive)
    cfg["network"] = result.trace.cluster.to_dict()
    summary = result.summary()
    lock = claim_folder(out)
    try:
        write_text(out / "config.toml", tomli_w.dumps({"replay": cfg}))
        result.trace.write(out / "trace.h5")
        write_json(out / "summary.json", summary)  # last: a folder without it is unfinished
    finally:
        lock.release()
    return summary
