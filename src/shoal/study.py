"""A parameter study of concurrent simulations under three policies (the invasive paper, §6.4):
``shoal study``.

Each simulation is a ``shoal run`` process with its own run folder, started at its arrival
time (seconds after the policy's start). The policies:

``invasive``
    one resource manager of R cores (``--cores``, workload policy) started by the study; every
    simulation starts at its arrival and joins it (``shoal run --manager FILE``), which gives
    it cores in proportion to its work and waits it until a core is free;
``sequential``
    one simulation at a time with all R cores as workers, in arrival order, each starting no
    earlier than its arrival (the paper's OpenMP sequential);
``all-at-once``
    every simulation at its arrival with R workers, oversubscribed (the paper's TBB baseline).

The policies run one after another, never overlapping, and the table compares their
makespans (first arrival to last finish). The study's folder holds ``study.json`` (the study
and, per policy, each simulation's start, end, wall time, status and cores over time),
``cores.png`` (the stacked cores per simulation over time of Figs. 8 and 10, one panel per
policy), and per policy ``POLICY/sim-K/`` (run folders) with ``POLICY/sim-K.log`` (their
messages); ``invasive/manager.json`` and ``invasive/manager.log`` are the manager's address
and its decision log.

Cores over time: under ``invasive`` they are read from the manager's decision log (a core
counts for a simulation from its grant to the release request, so a core asked back and not
yet handed on shows as idle: the spikes of Fig. 10); under the other policies they come from
the schedule, R worker threads per running simulation (the sum over R is the oversubscription).

Ctrl-C stops the study: every running simulation gets one SIGINT (each runs in its own
process group, so the terminal's Ctrl-C reaches only the study) and stops at its next step
boundary with a checkpoint, ``shoal run --resume RUN`` continues it; simulations not yet
started have no folder. A second Ctrl-C interrupts the simulations at once. The manager stops
after the simulations.
"""

from __future__ import annotations

import contextlib
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .config import load_scenario
from .errors import ShoalError
from .files import write_json
from .lifeline import child_env

POLICIES = ("invasive", "sequential", "all-at-once")
TICK_S = 0.02  # how often the study looks at its simulations
STOPPED = 130  # `shoal run`'s exit code when stopped at a step boundary


@dataclass
class Study:
    """A parameter study: one scenario, simulations that differ by ``vary``, their arrivals.

    Parameters
    ----------
    scenario : str
        A built-in scenario's name or a TOML file.
    vary : dict of str to list of str
        ``key -> values``: simulation K gets every key's K-th value (TOML syntax, as ``--set``).
    arrive : list of float
        Each simulation's arrival, seconds after the policy starts.
    policies : tuple of str
        Which of :data:`POLICIES` to run, in this order.
    cores : int, optional
        R, the cores of the study (default: this machine's).
    steps : int, optional
        Steps of every simulation (default: the scenario's).
    sets : list of str
        ``section.key=value`` overrides of every simulation (before ``vary``'s).
    """

    scenario: str
    vary: dict[str, list[str]]
    arrive: list[float]
    policies: tuple[str, ...] = POLICIES
    cores: int | None = None
    steps: int | None = None
    sets: list[str] = field(default_factory=list)

    @property
    def size(self) -> int:
        """The number of simulations."""
        return len(self.arrive)

    def parameters(self, k: int) -> dict[str, str]:
        """Simulation ``k``'s varied values by key.

        Parameters
        ----------
        k : int
            The simulation (0-based).
        """
        return {key: values[k] for key, values in self.vary.items()}

    def assignments(self, k: int) -> list[str]:
        """Simulation ``k``'s ``--set`` assignments: the study's, then its varied values.

        Parameters
        ----------
        k : int
            The simulation (0-based).
        """
        return list(self.sets) + [f"{key}={value}" for key, value in self.parameters(k).items()]


@dataclass
class StudySimulation:
    """One simulation of one policy: where it runs and when it started and ended.

    Attributes
    ----------
    index : int
        K (0-based), as in ``sim-K``.
    arrival : float
        Seconds after the policy's start.
    run : Path
        Its run folder.
    start, end : float or None
        Seconds after the policy's start (``None``: not started, not ended).
    exit : int or None
        Its process's exit code.
    cores : list of (float, int)
        Cores (or worker threads) it held from each time on.
    """

    index: int
    arrival: float
    run: Path
    start: float | None = None
    end: float | None = None
    exit: int | None = None
    cores: list[tuple[float, int]] = field(default_factory=list)
    process: subprocess.Popen | None = field(default=None, repr=False)

    @property
    def status(self) -> str:
        """``finished``, ``stopped`` (resumable), ``interrupted`` (stopped before a checkpoint),
        ``failed``, ``running`` or ``not started``."""
        if self.start is None:
            return "not started"
        if self.exit is None:
            return "running"
        if self.exit == 0:
            return "finished"
        if self.exit == STOPPED:
            return "stopped" if any((self.run / "state").glob("checkpoint-*")) else "interrupted"
        return "failed"

    @property
    def wall(self) -> float | None:
        """Seconds from its start to its end."""
        return None if self.start is None or self.end is None else self.end - self.start

    def to_json(self, study: Study) -> dict:
        """The simulation as a JSON-ready dict.

        Parameters
        ----------
        study : Study
            Its study (for its parameters).
        """
        return {"sim": self.index, "parameters": study.parameters(self.index), "arrival_s": self.arrival,
                "start_s": self.start, "end_s": self.end, "wall_s": self.wall, "status": self.status,
                "exit": self.exit, "run": str(self.run), "cores": [list(c) for c in self.cores]}


@dataclass
class PolicyRun:
    """One policy's simulations.

    Attributes
    ----------
    policy : str
        One of :data:`POLICIES`.
    simulations : list of StudySimulation
        In study order.
    """

    policy: str
    simulations: list[StudySimulation]

    @property
    def makespan(self) -> float | None:
        """Seconds from the first arrival to the last finish (``None`` unless every one finished)."""
        if any(s.status != "finished" for s in self.simulations):
            return None
        return max(s.end for s in self.simulations) - min(s.arrival for s in self.simulations)


# ----- the command's input ----------------------------------------------------------------------
def split_values(text: str) -> list[str]:
    """A comma-separated list of TOML values, commas inside brackets or quotes kept
    (``4,[1,2],"a,b"`` is three values).

    Parameters
    ----------
    text : str
        What follows ``KEY=`` in ``--vary``.
    """
    values, depth, quote, current = [], 0, None, ""
    for ch in text:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        elif ch == "," and depth == 0:
            values.append(current.strip())
            current = ""
            continue
        current += ch
    return values + [current.strip()]


def parse_vary(texts: list[str]) -> dict[str, list[str]]:
    """``--vary KEY=V1,V2,...`` flags as ``key -> values``, every list as long as the others.

    Parameters
    ----------
    texts : list of str
        The flags' values.

    Raises
    ------
    ShoalError
        A flag without ``=`` or with an empty value, a key given twice, lists of different lengths.
    """
    vary: dict[str, list[str]] = {}
    for text in texts:
        key, eq, rest = text.partition("=")
        key = key.strip()
        values = split_values(rest)
        if not eq or not key or any(v == "" for v in values):
            raise ShoalError(f"--vary expects KEY=V1,V2,... with no empty value, got {text!r}")
        if key in vary:
            raise ShoalError(f"--vary {key} is given twice")
        vary[key] = values
    lengths = {key: len(values) for key, values in vary.items()}
    if len(set(lengths.values())) > 1:
        raise ShoalError("every --vary list must be as long as the others: "
                         + ", ".join(f"{key} has {n}" for key, n in lengths.items()))
    return vary


def parse_arrivals(text: str) -> list[float]:
    """``--arrive T1,T2,...``: seconds, each finite and not negative.

    Parameters
    ----------
    text : str
        The flag's value.
    """
    out = []
    for item in text.split(","):
        try:
            t = float(item)
        except ValueError:
            raise ShoalError(f"--arrive expects seconds separated by commas, got {item.strip()!r}") from None
        if not np.isfinite(t) or t < 0:
            raise ShoalError(f"--arrive time {item.strip()} must be a number of seconds >= 0")
        out.append(t)
    return out


def make_study(scenario: str, vary: list[str], arrive: str, policies: str = ",".join(POLICIES),
               cores: int | None = None, steps: int | None = None, sets: list[str] | None = None) -> Study:
    """A :class:`Study` from the command's flags, checked (one clear line for bad input).

    Without ``--vary`` the study runs the scenario once per arrival.

    Parameters
    ----------
    scenario : str
        The scenario.
    vary : list of str
        ``--vary`` flags.
    arrive : str
        ``--arrive``.
    policies : str
        Comma-separated names of :data:`POLICIES`.
    cores, steps : int, optional
        ``--cores``, ``--steps``.
    sets : list of str, optional
        ``--set`` flags.

    Raises
    ------
    ShoalError
        Bad flags: see :func:`parse_vary`, :func:`parse_arrivals`, :func:`check`.
    """
    by_key = parse_vary(vary)
    times = parse_arrivals(arrive)
    size = len(next(iter(by_key.values()))) if by_key else len(times)
    if len(times) != size:
        raise ShoalError(f"--arrive gives {len(times)} times for {size} simulations: give one per simulation")
    names = tuple(p.strip() for p in policies.split(","))
    unknown = [p for p in names if p not in POLICIES]
    if unknown or len(set(names)) != len(names):
        raise ShoalError(f"--policies {policies!r}: name each of {', '.join(POLICIES)} at most once")
    study = Study(scenario, by_key, times, names, cores, steps, list(sets or []))
    check(study)
    return study


def pool_size(study: Study) -> int:
    """R: ``--cores``, or this machine's cores available to this process.

    Parameters
    ----------
    study : Study
        The study.
    """
    from .invasive.server import pool

    return pool(study.cores)[0]


def check(study: Study) -> list[list[str]]:
    """Build every simulation's scenario with its overrides, before anything starts; returns
    each simulation's ``shoal run`` arguments (scenario and flags, without ``--out``).

    Every simulation runs on one node with R workers and the tile count its scenario gives
    (so the policies change the cores, never the tiles).

    Parameters
    ----------
    study : Study
        The study.

    Raises
    ------
    ShoalError
        An unknown scenario or key, a bad value, ``--cores`` below 1, a run too large for the machine.
    """
    from .apps import get_app
    from .cluster import Cluster
    from .resources import check_run, thread_budget
    from .session.building import build_tiling

    cores = pool_size(study)
    if cores > thread_budget():
        raise ShoalError(f"--cores {cores}: every simulation starts that many worker threads; a run may start "
                         f"{thread_budget()} on this machine")
    out = []
    for k in range(study.size):
        sc = load_scenario(study.scenario)
        steps = [f"run.steps={study.steps}"] if study.steps is not None else []
        try:
            sc.override(steps + study.assignments(k))
        except ShoalError as exc:
            raise ShoalError(f"simulation {k} ({_label(study, k)}): {exc}") from None
        count = None if sc.run.tile_shape else sc.run.tiles or sc.run.tiles_per_core * sum(sc.run.workers_at(0))
        tiles = [] if count is None else ["--tiles", str(count)]
        sc.override(["run.nodes=1", f"run.workers={cores}"] + ([f"run.tiles={count}"] if count else []))
        spec = get_app(sc.app)
        check_run(spec, sc.params, cores)
        try:  # a tiling the app cannot run on stops the study here, not every simulation later
            app = spec.build(sc.params, sc.run.steps)
            app.check_tiling(build_tiling(sc, app, Cluster.uniform(1, cores)))
        except ShoalError as exc:
            raise ShoalError(f"simulation {k} ({_label(study, k)}): {exc}") from None
        flags = ["--nodes", "1", "--workers", str(cores), *tiles]
        flags += ["--steps", str(study.steps)] if study.steps is not None else []
        for assignment in study.assignments(k):
            flags += ["--set", assignment]
        out.append([study.scenario, *flags])
    return out


def _label(study: Study, k: int) -> str:
    return ", ".join(f"{key}={value}" for key, value in study.parameters(k).items()) or f"sim-{k}"


# ----- running ----------------------------------------------------------------------------------
def run_study(study: Study, out: str | Path, say: Callable[[str], None] = print) -> list[PolicyRun]:
    """Run every policy of ``study`` one after the other into ``out``; write ``study.json`` and
    ``cores.png``.

    Parameters
    ----------
    study : Study
        The study (checked by :func:`make_study`).
    out : str or Path
        A new folder (or an empty one).
    say : callable
        Receives a line as each policy starts and ends.

    Returns
    -------
    list of PolicyRun
        One per policy, in the study's order.

    Raises
    ------
    KeyboardInterrupt
        After Ctrl-C, once every simulation has stopped (see the module's notes); ``study.json``
        says which run folders are finished and which resumable.
    ShoalError
        A folder that holds files already, a simulation that failed.
    """
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ShoalError(f"{out} exists and is not an empty folder: give a new --out")
    arguments = check(study)
    out.mkdir(parents=True, exist_ok=True)
    runs: list[PolicyRun] = []
    try:
        with _terminate_interrupts():
            for policy in study.policies:
                say(f"{policy}: {study.size} simulations on {pool_size(study)} cores")
                runs.append(run_policy(study, policy, arguments, out / policy, runs.append))
                say(f"{policy}: makespan {_seconds(runs[-1].makespan)}")
    except KeyboardInterrupt:
        say("study stopped: finished run folders are complete" + (", continue the others with:" if resumable(runs)
                                                                   else ""))
        for line in resumable(runs):
            say(f"  {line}")
        raise
    finally:
        write_json(out / "study.json", to_json(study, runs))
        if runs:
            draw_cores(runs, pool_size(study), out / "cores.png")
    failed = [(r.policy, s) for r in runs for s in r.simulations if s.status == "failed"]
    if failed:
        policy, sim = failed[0]
        raise ShoalError(f"{len(failed)} simulation(s) failed, first {policy}/sim-{sim.index} (exit {sim.exit}): "
                         f"see {sim.run.parent / f'sim-{sim.index}.log'}")
    return runs


@contextlib.contextmanager
def _terminate_interrupts():
    """SIGTERM stops a study as Ctrl-C does (each simulation at its next step boundary), not
    at once with its simulations left running (main thread only: elsewhere nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_policy(study: Study, policy: str, arguments: list[list[str]], folder: Path,
               on_interrupt: Callable[[PolicyRun], None] = lambda run: None) -> PolicyRun:
    """Run the simulations under one policy into ``folder``.

    Parameters
    ----------
    study : Study
        The study.
    policy : str
        One of :data:`POLICIES`.
    arguments : list of list of str
        Each simulation's ``shoal run`` arguments (:func:`check`).
    folder : Path
        The policy's folder (created).
    on_interrupt : callable
        Receives the policy's simulations so far when Ctrl-C stops it (before it re-raises).

    Returns
    -------
    PolicyRun
        Its simulations, each with its start, end, exit code and cores over time.
    """
    folder.mkdir(parents=True, exist_ok=False)
    cores = pool_size(study)
    sims = [StudySimulation(k, t, folder / f"sim-{k}") for k, t in enumerate(study.arrive)]
    run = PolicyRun(policy, sims)
    order = sorted(range(study.size), key=lambda k: (study.arrive[k], k))
    extra: list[str] = []
    manager = None
    if policy == "invasive":
        from .invasive import start_manager
        from .invasive.join import write_manager_file

        manager = start_manager(cores, "workload", log_path=folder / "manager.log")
        write_manager_file(manager, folder / "manager.json", "workload")
        extra = ["--manager", str(folder / "manager.json")]
    wall0, t0 = time.time(), time.monotonic()
    try:
        _schedule(policy, sims, order, arguments, extra, t0)
    except KeyboardInterrupt:
        _stop(sims, t0)
        on_interrupt(run)
        raise
    finally:
        if manager is not None:
            manager.stop()
    for sim in sims:
        if policy == "invasive":
            continue
        sim.cores = [(sim.start, cores), (sim.end, 0)]
    if policy == "invasive":
        cores_from_log(folder / "manager.log", wall0, {s.process.pid: s for s in sims if s.process is not None})
    return run


def _schedule(policy: str, sims: list[StudySimulation], order: list[int], arguments: list[list[str]],
              extra: list[str], t0: float) -> None:
    """Start each simulation when the policy lets it, until every one has ended."""
    pending, running = list(order), []
    while pending or running:
        now = time.monotonic() - t0
        for sim in list(running):
            if sim.process.poll() is not None:
                sim.end, sim.exit = now, sim.process.returncode
                running.remove(sim)
        while pending and sims[pending[0]].arrival <= now and (policy != "sequential" or not running):
            sim = sims[pending.pop(0)]
            _start(sim, arguments[sim.index] + extra, now)
            running.append(sim)
        time.sleep(TICK_S)


def _start(sim: StudySimulation, arguments: list[str], now: float) -> None:
    log = open(sim.run.parent / f"{sim.run.name}.log", "w", encoding="utf-8")  # noqa: SIM115  (the child holds it)
    with log:
        # its own process group: the terminal's Ctrl-C reaches the study only, which passes on one SIGINT
        sim.process = subprocess.Popen([sys.executable, "-m", "shoal", "run", *arguments, "--out", str(sim.run)],
                                       stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                       process_group=0, env=child_env())
    sim.start = now


def _stop(sims: list[StudySimulation], t0: float) -> None:
    """One SIGINT to every running simulation (stop at the next step boundary), then wait; a
    second Ctrl-C passes a second SIGINT on (stop at once)."""
    running = [s for s in sims if s.process is not None and s.exit is None]
    for sim in running:
        sim.process.send_signal(signal.SIGINT)
    while running:
        try:
            for sim in list(running):
                sim.exit = sim.process.wait()
                sim.end = time.monotonic() - t0
                running.remove(sim)
        except KeyboardInterrupt:
            for sim in running:
                sim.process.send_signal(signal.SIGINT)


# ----- cores over time --------------------------------------------------------------------------
_LINE = re.compile(r"^(\d\d):(\d\d):(\d\d(?:\.\d+)?) (.*)$")
_REGISTER = re.compile(r"^app (\d+) registers \(.*pid (\d+)\)$")
_MOVE = re.compile(r"^(grant|release) \[([\d, ]*)\] -> app (\d+) ")
_LEAVE = re.compile(r"^app (\d+) (?:retreats|gone)")


def cores_from_log(path: Path, wall0: float, by_pid: dict[int, StudySimulation]) -> None:
    """Fill each simulation's :attr:`StudySimulation.cores` from the manager's decision log.

    A core counts from its grant to its release request (or the application's retreat or
    death). The log's times of day are local; ``wall0`` is the policy's start (``time.time()``).

    Parameters
    ----------
    path : Path
        The manager's ``log_path``.
    wall0 : float
        The policy's start, seconds since the epoch.
    by_pid : dict of int to StudySimulation
        Each simulation by its process id (applications register with theirs).
    """
    local = time.localtime(wall0)
    day0 = local.tm_hour * 3600 + local.tm_min * 60 + local.tm_sec + wall0 % 1
    app_sim: dict[int, StudySimulation] = {}
    held: dict[int, set[int]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        m = _LINE.match(line)
        if m is None:
            continue
        day = int(m[1]) * 3600 + int(m[2]) * 60 + float(m[3])
        t = (day - day0 + 43200) % 86400 - 43200  # a study that runs past midnight
        text = m[4]
        if r := _REGISTER.match(text):
            if (sim := by_pid.get(int(r[2]))) is not None:
                app_sim[int(r[1])] = sim
            continue
        if r := _MOVE.match(text):
            app, moved = int(r[3]), {int(c) for c in r[2].split(",") if c.strip()}
            cores = held.setdefault(app, set())
            cores |= moved if r[1] == "grant" else set()
            cores -= moved if r[1] == "release" else set()
        elif r := _LEAVE.match(text):
            app = int(r[1])
            held[app] = set()
        else:
            continue
        if app in app_sim:
            app_sim[app].cores.append((max(t, 0.0), len(held[app])))


def draw_cores(runs: list[PolicyRun], cores: int, path: Path) -> Path:
    """The stacked cores per simulation over time, one panel per policy (Figs. 8 and 10).

    Parameters
    ----------
    runs : list of PolicyRun
        The policies' simulations with their cores over time.
    cores : int
        R (a dashed line).
    path : Path
        The PNG to write.
    """
    from .graphics.canvas import new_figure, node_colors, save_figure

    fig = new_figure(8.0, 2.2 * len(runs) + 0.6)
    axes = fig.subplots(len(runs), 1, sharex=True, squeeze=False)[:, 0]
    palette = node_colors(max(len(r.simulations) for r in runs))
    for ax, run in zip(axes, runs, strict=True):
        times = sorted({t for s in run.simulations for t, _ in s.cores} | {0.0})
        bottom = np.zeros(len(times))
        for sim in run.simulations:
            top = bottom + _steps(sim.cores, times)
            ax.fill_between(times, bottom, top, step="post", color=palette(sim.index), linewidth=0,
                            label=f"sim-{sim.index}")
            bottom = top
        ax.axhline(cores, color="black", linestyle="--", linewidth=1)
        ax.set_ylabel("cores" if run.policy == "invasive" else "worker threads")
        ax.set_title(f"{run.policy}: makespan {_seconds(run.makespan)}", fontsize=10)
    axes[-1].set_xlabel("seconds after the policy's start")
    axes[0].legend(loc="upper right", fontsize=8, ncols=min(len(runs[0].simulations), 5))
    return save_figure(fig, path)


def _steps(points: list[tuple[float, int]], times: list[float]) -> np.ndarray:
    """A step function given by ``(time, value from then on)`` points, at ``times`` (0 before the first)."""
    out = np.zeros(len(times))
    for t, value in sorted(points):
        out[np.searchsorted(times, t):] = value
    return out


# ----- results ----------------------------------------------------------------------------------
def to_json(study: Study, runs: list[PolicyRun]) -> dict:
    """The study and its policies' simulations as written to ``study.json``.

    Parameters
    ----------
    study : Study
        The study.
    runs : list of PolicyRun
        The policies run so far.
    """
    return {"scenario": study.scenario, "vary": study.vary, "arrive": study.arrive, "cores": pool_size(study),
            "steps": study.steps, "sets": study.sets,
            "policies": {r.policy: {"makespan_s": r.makespan, "simulations": [s.to_json(study) for s in r.simulations]}
                         for r in runs}}


def table(study: Study, runs: list[PolicyRun]) -> tuple[list[list[str]], list[list[str]]]:
    """The makespans (per policy, and as a ratio to sequential's) and every simulation's row.

    Parameters
    ----------
    study : Study
        The study.
    runs : list of PolicyRun
        The policies.

    Returns
    -------
    tuple of (list of rows, list of rows)
        ``[policy, makespan, ratio]`` rows, and ``[policy, sim, parameters, arrival, start,
        end, wall, status]`` rows, all text (seconds; ``-`` where there is no value).
    """
    base = {r.policy: r.makespan for r in runs}.get("sequential")
    spans = [[r.policy, _number(r.makespan),
              f"{r.makespan / base:.2f}" if base and r.makespan is not None else "-"] for r in runs]
    rows = [[r.policy, f"sim-{s.index}", _label(study, s.index), f"{s.arrival:.2f}", _number(s.start),
             _number(s.end), _number(s.wall), s.status] for r in runs for s in r.simulations]
    return spans, rows


def resumable(runs: list[PolicyRun]) -> list[str]:
    """One line per simulation a Ctrl-C left unfinished: how to continue it.

    Parameters
    ----------
    runs : list of PolicyRun
        The policies run so far.
    """
    out = []
    for run in runs:
        for sim in run.simulations:
            if sim.status == "stopped":
                out.append(f"{run.policy}/sim-{sim.index}: shoal run --resume {sim.run}")
            elif sim.status == "interrupted":
                out.append(f"{run.policy}/sim-{sim.index}: stopped before its first checkpoint, run it again "
                           f"(its folder {sim.run} is not resumable)")
    return out


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} s"


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"

