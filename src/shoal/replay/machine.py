"""A machine model: what a task costs on one machine, in seconds per unit of the app's work.

A trace's costs are the wall and CPU seconds of the machine that recorded it; its ``work``
column is the app's own count (particle pairs, cell updates), the same on every machine. The
model turns one into the other (sampi §IV-B: a time-independent trace "not linked to a given
platform anymore"): per app and phase, ``seconds = rate x work + fixed``, fitted by least
squares on every task of a trace and refitted without the worst 1% (a task preempted by the
host or stopped by the collector is not the machine's rate), with the fit's R² and the 10-90%
range of its relative residuals. The Python share of a task (its cost less its lock-free
kernel time) is fitted the same way.

Beside the rates, the executor's own constants, measured from the run's columns:

- ``dispatch_s``: a task that was ready while its worker was still busy with another starts
  ``dispatch_s`` after that one ended (the executor's bookkeeping of one task);
- ``wake_s``: a task that became ready while its worker was idle starts ``wake_s`` later than
  a busy worker would have taken it (the sleeping thread is woken);
- ``handoff_s``: where threads share one interpreter lock, a task's wall time exceeds its CPU
  time by about ``handoff_s`` per lock-free call (each call lets go of the lock; taking it back
  waits for the other threads);
- ``message_cpu_s``: CPU seconds spent moving messages per payload between processes (MPI);
- ``lock``: whether the run's nodes shared one interpreter lock (``shared``: the local
  executor) or had one each (``process``: one per MPI rank), with ``lock_threads``, the
  threads that shared it.

``shoal calibrate`` refines a model with micro-benchmarks for what a run cannot show (a
restart, a wake-up in a run whose workers were never idle, a hand-off on one thread).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from ..errors import ShoalError

SCHEMA = "shoal-machine"
VERSION = 1
TRIM = 0.01  # share of the worst-fitting tasks left out of the refit


@dataclass(frozen=True)
class Fit:
    """``seconds = rate x work + fixed`` over the tasks of one phase, and how well it fits.

    Attributes
    ----------
    rate : float
        Seconds per unit of work.
    fixed : float
        Seconds per task whatever its work.
    r2 : float
        Coefficient of determination on the tasks kept (1 when the line is exact).
    spread : tuple of float
        10th and 90th percentiles of the relative residuals (fit / measured - 1) of the tasks kept.
    tasks : int
        Tasks the fit was made on (after leaving the worst out).
    """

    rate: float
    fixed: float
    r2: float = 1.0
    spread: tuple[float, float] = (0.0, 0.0)
    tasks: int = 0

    def predict(self, work: np.ndarray) -> np.ndarray:
        """Seconds of tasks of ``work`` units (never negative)."""
        return np.maximum(self.rate * np.asarray(work, np.float64) + self.fixed, 0.0)

    def scaled(self, factor: float) -> Fit:
        """The same fit on cores ``factor`` times as fast."""
        return Fit(self.rate / factor, self.fixed / factor, self.r2, self.spread, self.tasks)


def fit_linear(work: np.ndarray, seconds: np.ndarray, trim: float = TRIM) -> Fit:
    """Least-squares ``seconds = rate x work + fixed``, refitted without the ``trim`` share of
    tasks with the largest residuals.

    Where every task did the same work the two cannot be told apart: the seconds are then all
    rate (a task with more work would cost more), unless the work is 0.
    """
    w, y = np.asarray(work, np.float64), np.asarray(seconds, np.float64)
    if len(y) == 0:
        raise ShoalError("cannot fit a machine rate without tasks")
    keep = np.ones(len(y), bool)
    for _ in range(2):
        rate, fixed = _line(w[keep], y[keep])
        residual = np.abs(rate * w + fixed - y)
        drop = math.ceil(trim * len(y)) if len(y) >= 10 else 0
        keep = np.ones(len(y), bool)
        if drop:
            keep[np.argsort(residual)[len(y) - drop:]] = False
    yk, fk = y[keep], rate * w[keep] + fixed
    ss = float(((yk - yk.mean()) ** 2).sum())
    r2 = 1.0 - float(((yk - fk) ** 2).sum()) / ss if ss > 0 else 1.0
    measured = yk > 0
    rel = fk[measured] / yk[measured] - 1.0 if measured.any() else np.zeros(1)
    return Fit(float(rate), float(fixed), r2, (float(np.percentile(rel, 10)), float(np.percentile(rel, 90))),
               int(keep.sum()))


def _line(w: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    if np.ptp(w) == 0:
        return (float(y.mean() / w[0]), 0.0) if w[0] > 0 else (0.0, float(y.mean()))
    (rate, fixed), *_ = np.linalg.lstsq(np.c_[w, np.ones_like(w)], y, rcond=None)
    return float(rate), float(fixed)


@dataclass(frozen=True)
class PhaseModel:
    """A phase's task cost and the Python share of it (None where kernel times are unknown)."""

    cost: Fit
    python: Fit | None = None


CONSTANTS = ("dispatch_s", "wake_s", "handoff_s", "message_cpu_s", "restart_s", "payload_overhead_s")


@dataclass
class MachineModel:
    """What tasks and the executor cost on one machine (see the module docstring).

    Attributes
    ----------
    phases : dict of str to PhaseModel
        By ``"app/phase"``.
    dispatch_s, wake_s, handoff_s, message_cpu_s, restart_s, payload_overhead_s : float
        The executor's constants (seconds): per task, per wake-up of an idle worker, per
        lock-free call where threads share a lock, per payload between processes, per
        restart (a balancing step), per halo payload within a process.
    lock : str
        ``shared`` (one interpreter lock for all nodes), ``process`` (one per node) or ``none``.
    lock_threads : int
        Threads that shared a lock where ``handoff_s`` was measured.
    measured_by : dict of str to str
        Where each constant came from: ``run`` (the trace's own columns), ``calibrate`` (a
        micro-benchmark) or ``none``.
    host : dict
        ``cpu`` (model name) and ``cores`` of the machine.
    source : str
        What the model was made from.
    """

    phases: dict[str, PhaseModel] = field(default_factory=dict)
    dispatch_s: float = 0.0
    wake_s: float = 0.0
    handoff_s: float = 0.0
    message_cpu_s: float = 0.0
    restart_s: float = 0.0
    payload_overhead_s: float = 0.0
    lock: str = "none"
    lock_threads: int = 1
    measured_by: dict[str, str] = field(default_factory=dict)
    host: dict = field(default_factory=dict)
    source: str = ""

    def phase(self, app: str, name: str) -> PhaseModel:
        """The model of ``app``'s phase ``name``; a ShoalError if the model has none."""
        key = f"{app}/{name}"
        if key not in self.phases:
            known = ", ".join(sorted(self.phases)) or "none"
            raise ShoalError(f"the machine model has no rates for {key} (it has {known}): fit one from a trace of "
                             f"{app} on that machine (shoal calibrate --from-trace TRACE)")
        return self.phases[key]

    def scaled(self, factor: float) -> MachineModel:
        """This model on cores ``factor`` times as fast: rates, fixed costs, the executor's
        dispatch and the CPU time per message divided by it (lock waits, wake-ups and restarts
        stay: they are the host's scheduler's)."""
        if not (factor > 0 and math.isfinite(factor)):
            raise ShoalError(f"speed factor must be positive, got {factor}")
        phases = {k: PhaseModel(p.cost.scaled(factor), p.python.scaled(factor) if p.python else None)
                  for k, p in self.phases.items()}
        return MachineModel(**{**self.__dict__, "phases": phases, "message_cpu_s": self.message_cpu_s / factor,
                               "dispatch_s": self.dispatch_s / factor})

    def fit_line(self) -> str:
        """One line on how well the rates fit the recorded costs: R² and residual spread per phase."""
        parts = [f"{k.split('/', 1)[1]} R2 {p.cost.r2:.2f}, residuals {p.cost.spread[0]:+.0%}..{p.cost.spread[1]:+.0%}"
                 for k, p in self.phases.items()]
        return "machine model fit: " + ("; ".join(parts) if parts else "no phases")

    def to_dict(self) -> dict:
        """The model as JSON-ready data (schema ``shoal-machine``, with a version)."""
        d = asdict(self)
        d["phases"] = {k: {"cost": _fit_dict(p.cost), "python": _fit_dict(p.python) if p.python else None}
                       for k, p in self.phases.items()}
        return {"schema": SCHEMA, "version": VERSION, **d}

    @classmethod
    def from_dict(cls, data: dict, where: str = "machine model") -> MachineModel:
        """The model ``to_dict`` made (``data``); a ShoalError naming ``where`` if it is not one."""
        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            raise ShoalError(f"{where} is not a shoal machine model (schema {SCHEMA!r})")
        if int(data.get("version", 0)) > VERSION:
            raise ShoalError(f"{where} has machine model version {data.get('version')}; this shoal reads {VERSION}")
        try:
            phases = {k: PhaseModel(_fit(p["cost"]), _fit(p["python"]) if p.get("python") else None)
                      for k, p in data.get("phases", {}).items()}
            out = cls(phases=phases, **{k: float(data.get(k, 0.0)) for k in CONSTANTS},
                      lock=str(data.get("lock", "none")), lock_threads=int(data.get("lock_threads", 1)),
                      measured_by=dict(data.get("measured_by", {})), host=dict(data.get("host", {})),
                      source=str(data.get("source", "")))
        except (KeyError, TypeError, ValueError) as exc:
            raise ShoalError(f"{where} is a damaged machine model: {exc!r}") from None
        bad = [k for k in CONSTANTS if not (math.isfinite(getattr(out, k)) and getattr(out, k) >= 0)]
        if bad or out.lock not in ("shared", "process", "none"):
            raise ShoalError(f"{where}: {', '.join(bad) or 'lock'} out of range")
        return out

    def to_json(self, path: str | Path) -> Path:
        """Write the model to ``path`` (JSON, a file to pass around)."""
        from ..files import write_json

        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json(path, self.to_dict())
        return path

    @classmethod
    def from_json(cls, path: str | Path) -> MachineModel:
        """The model in the JSON file ``path``."""
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, ValueError) as exc:
            raise ShoalError(f"cannot read a machine model from {path}: {exc}") from None
        return cls.from_dict(data, str(path))


def _fit_dict(fit: Fit) -> dict:
    return {**asdict(fit), "spread": list(fit.spread)}  # as JSON reads it back


def _fit(d: dict) -> Fit:
    return Fit(float(d["rate"]), float(d["fixed"]), float(d.get("r2", 1.0)), tuple(d.get("spread", (0.0, 0.0))),
               int(d.get("tasks", 0)))


def this_host() -> dict:
    """The CPU model and core count of this machine."""
    from ..provenance import cpu_model

    return {"cpu": cpu_model(), "cores": os.cpu_count() or 1}


# ----- fitting a trace ---------------------------------------------------------------------
def fit_trace(trace, host: dict | None = None) -> MachineModel:
    """The machine model of the run that recorded ``trace`` (a :class:`shoal.trace.Trace`),
    on ``host`` (default: this machine, where a run fits its own trace as it finishes)."""
    t = trace.tasks
    phases = {}
    for p, name in enumerate(trace.phases):
        rows = t["phase"] == p
        if not rows.any():
            continue
        python = None
        if "kernel" in t and t["kernel"][rows].any():
            python = fit_linear(t["work"][rows], np.clip(t["cost"][rows] - t["kernel"][rows], 0.0, None))
        phases[f"{trace.app}/{name}"] = PhaseModel(fit_linear(t["work"][rows], t["cost"][rows]), python)
    lock = "process" if trace.communication is not None else "shared"
    threads = int(trace.worker_cores.max()) if lock == "process" else int(trace.worker_cores.sum(axis=1).max())
    dispatch, wake = executor_delays(trace)
    measured = {"dispatch_s": "run" if dispatch is not None else "none",
                "wake_s": "run" if wake is not None else "none",
                "message_cpu_s": "run" if trace.communication is not None else "none"}
    handoff = lock_wait_per_call(trace) if threads > 1 else None
    measured["handoff_s"] = "run" if handoff is not None else "none"
    return MachineModel(phases=phases, dispatch_s=dispatch or 0.0, wake_s=wake or 0.0, handoff_s=handoff or 0.0,
                        message_cpu_s=trace.message_cpu_s, lock=lock, lock_threads=threads, measured_by=measured,
                        host=host if host is not None else this_host(),
                        source=f"trace of {trace.scenario or trace.app}")


def ready_times(trace) -> np.ndarray:
    """When every task (rows of ``trace.tasks``) became ready: the trace's ``ready`` column, or
    where it has none the latest end of what the task waited for (its tile's previous task, the
    tasks that packed the halos it reads, the reduction before it); NaN where unknown."""
    t = trace.tasks
    if "ready" in t and np.any(t["ready"] > 0):
        return t["ready"].astype(np.float64)
    slot_phase, _ = trace.slots()  # a loop's phases once per iteration
    steps, P, T = trace.steps, len(slot_phase), trace.tiling.ntiles
    S = len(steps)
    s_idx = np.searchsorted(steps, t["step"])
    row = (s_idx * P + trace.slot_of(t)) * T + t["tile"]
    end = np.full(S * P * T, np.nan)
    end[row] = t["end"]
    ready = np.full(S * P * T, -np.inf)
    ready[T:] = end[:-T]  # the tile's previous task (one task per tile per phase)
    m = trace.messages
    ms, mp = np.searchsorted(steps, m["step"]), trace.slot_of(m)
    producer = np.where(mp > 0, (ms * P + mp - 1) * T + m["src"], ((ms - 1) * P + P - 1) * T + m["src"])
    reader = (ms * P + mp) * T + m["dst"]
    ok = producer >= 0
    np.fmax.at(ready, reader[ok], end[producer[ok]])
    grid = end.reshape(S, P, T)
    for p in range(P):
        if not trace.barrier_phases[slot_phase[p]]:
            continue
        lag = int(bool(trace.lagged_phases[slot_phase[p]]))
        release = np.max(grid[:, p], axis=1)  # (S,)
        nxt = (np.arange(S) * P + p + 1 + lag * P) * T
        for s in np.flatnonzero(nxt < S * P * T):
            sl = slice(nxt[s], nxt[s] + T)
            ready[sl] = np.fmax(ready[sl], release[s])
    out = ready[row]
    return np.where(np.isfinite(out), out, np.nan)


def executor_delays(trace) -> tuple[float | None, float | None]:
    """The executor's ``(dispatch_s, wake_s)`` from a trace's task times (None: no such task).

    Tasks are taken in the order each worker ran them. One that was ready before its worker's
    previous task ended waited for the worker: its start less that end is the dispatch. One
    that became ready while the worker was idle started ``wake_s`` after the dispatch a busy
    worker would have taken (its start less its ready time, less the dispatch, where readiness
    is inferred from the ends of what it waited for; the executor's ``ready`` column already
    leaves the producer's bookkeeping out). Both are means, not medians (the replay adds these
    delays up, long ones included), without the longest 1% (the executor stopped between the
    run's chunks, which a restart models)."""
    t = trace.tasks
    if len(t["start"]) < 2 or not np.any(t["end"] > 0):
        return None, None
    ready = ready_times(trace)
    inferred = "ready" not in t or not np.any(t["ready"] > 0)
    order = np.lexsort((t["start"], t["worker"], t["node"]))
    node, worker, start, end, rdy = (a[order] for a in (t["node"], t["worker"], t["start"], t["end"], ready))
    same = (node[1:] == node[:-1]) & (worker[1:] == worker[:-1])
    prev_end, start, rdy = end[:-1][same], start[1:][same], rdy[1:][same]
    known = np.isfinite(rdy)
    busy = known & (rdy <= prev_end)
    idle = known & (rdy > prev_end)
    dispatch = trimmed_mean(start[busy] - prev_end[busy]) if busy.any() else None
    wake = None
    if idle.any():
        delay = trimmed_mean(start[idle] - rdy[idle])
        wake = max(0.0, delay - (dispatch or 0.0) if inferred else delay)
    return (max(0.0, dispatch) if dispatch is not None else None), wake


def trimmed_mean(values: np.ndarray, trim: float = TRIM) -> float:
    """Mean of ``values`` without the largest ``trim`` share of them."""
    v = np.sort(np.asarray(values, np.float64))
    return float(v[:max(1, len(v) - math.ceil(trim * len(v)))].mean())


def lock_wait_per_call(trace) -> float | None:
    """Seconds a task's wall time exceeds its CPU time per lock-free call (the waits for the
    interpreter lock where threads share it: a mean, since a few tasks wait long while most do
    not); None without kernel calls recorded."""
    t = trace.tasks
    if "kernel_calls" not in t or not t["kernel_calls"].any():
        return None
    wait = np.clip(t["end"] - t["start"] - t["cost"], 0.0, None)
    return float(wait.sum() / t["kernel_calls"].sum())
