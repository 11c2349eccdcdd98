"""A small measurement of this machine, so that replays can model it.

The executor spends some time of its own on every task (queues, dependency bookkeeping,
waking workers) and on every halo payload it hands from one tile to another; the replay adds
it to every task. It is measured the way the executor benchmark does: a tiny app whose kernel
spins for a known time runs under the executor, once exchanging halos and once not; wall time
less the tasks' own CPU time, per task, is the overhead, and the difference between the two
runs, per payload, the cost of a payload. A re-balancing step stops the executor and starts it
again: short runs of that app, on as many threads as the modeled runs have (the threads sleep
between runs and are woken for the next), measure what a restart costs. A worker with nothing to do sleeps
on its node's condition: how long one takes to wake when notified is timed directly.

Threads of one process share its interpreter lock. Every lock-free call lets go of it and takes
it back, and when another thread wants it the task waits: its wall time exceeds its CPU time.
On as many threads as the modeled runs have, the app runs tasks that alternate Python and
lock-free calls; the hand-off is that wait per call, as a run measures it of its own tasks.

A run records most of these itself (:mod:`shoal.replay.machine`); :func:`refine` fills in
what it could not show: a restart, a wake-up where its workers never sat idle, a hand-off
where it ran on one thread.

The host's speed drifts over minutes, and the overhead with it: measure close to the runs
that the calibration will model, at about their task length.
"""

from __future__ import annotations

import json
import math
import sys
import threading
import time
from pathlib import Path

import numba as nb
import numpy as np

from ..cluster import Cluster, Network
from ..compilation import announce
from ..errors import ShoalError
from ..runtime import App, LocalExecutor, Phase
from ..runtime.local import GIL_SWITCH_S
from ..runtime.native import KERNEL, Native, NativeExecutor
from ..tiling import Tiling
from .machine import MachineModel, lock_wait_per_call, this_host
from .run import MACHINE_FIELDS


@nb.njit(nogil=True, cache=True)
def spin(x, iters):
    v = x
    for _ in range(iters):
        v = math.sqrt(v + 1.0)
    return v


def python_work(iters: int) -> int:
    """Interpreted work that holds the interpreter lock."""
    total = 0
    for i in range(iters):
        total += i
    return total


class SpinApp(App):
    """Tasks that spin in compiled code for ``iters`` iterations, in ``calls`` lock-free calls
    (none: one plain call), each after ``python_iters`` / ``calls`` iterations of Python; with
    ``halo`` every task reads one small payload from each neighbour."""

    name = "calibration"

    def __init__(self, iters, halo: bool = True, calls: int = 0, python_iters: int = 0):
        self.iters = iters
        self.calls = calls
        self.python_iters = python_iters
        self.phases = (Phase("spin", halo=halo, method="run_spin"),)

    def init_tile(self, tile, tiling):
        return np.zeros(1)

    def pack_halos(self, state, src, tiling):
        return {int(dst): state[:1].copy() for dst in tiling.neighbours[src]}

    def run_spin(self, tile, state, halos, ctx, tiling):
        """The one phase: spin ``state[0]`` as the constructor said and return ``iters``, the work
        done. ``tile``, ``halos`` and ``tiling`` are not read (the executor delivers the
        halos all the same: that is the payload overhead measured); ``ctx`` times the lock-free calls."""
        if not self.calls:
            state[0] = spin(state[0], self.iters)
        for _ in range(self.calls):
            python_work(self.python_iters // self.calls)
            state[0] = ctx.kernel(spin, state[0], self.iters // self.calls)
        return self.iters

    def gather(self, states, tiling):
        return {}


def calibrate(tasks: int = 3000, task_s: float = 5e-5, repeats: int = 3, nodes: int = 1, workers: int = 1,
              executor: str = "python") -> dict:
    """The executor's overhead per task and per halo payload (s) on one worker, best of a few
    repeats, with tasks of about ``task_s`` seconds; its restart on ``nodes`` x ``workers``
    threads (each woken for the run and waited for), the shape of the runs it will model.

    Parameters
    ----------
    tasks : int
        Tasks each measuring run executes (on a tiling of 64 tiles): more tasks, less scatter.
    task_s : float
        Seconds of compiled work in each task.
    repeats : int
        Runs of each measurement; the best (or, for the hand-off, the median) is kept.
    nodes, workers : int
        The in-process nodes and worker threads per node of the runs to model.
    executor : {"python", "native"}
        The executor of the runs to model (the native one runs the spin compiled; its lock
        hand-off is measured on phases left in Python, through its trampoline).

    Returns
    -------
    dict
        ``task_overhead_s``, ``payload_overhead_s``, ``restart_s``, ``wake_s`` and
        ``handoff_s`` (seconds; :func:`machine_model` turns them into a replay's
        configuration), with ``measured_tasks``, ``task_s`` and ``restart_threads`` saying
        what was measured.
    """
    announce("calibration")
    backend, spinning = EXECUTORS[executor]
    iters = iterations_for(lambda n: spin(0.0, n), task_s)
    tiling = Tiling.from_counts((32, 32), (8, 8))
    steps = max(1, tasks // tiling.ntiles)
    n = steps * tiling.ntiles
    payloads = steps * sum(len(nbrs) for nbrs in tiling.neighbours)  # every task reads one from each neighbour
    per_task = {}
    for halo in (False, True):
        best = np.inf
        for _ in range(repeats):
            with backend(spinning(iters, halo), tiling, Cluster.uniform(1, 1),
                         np.zeros(tiling.ntiles, int)) as executor:
                res = executor.run(steps)
            best = min(best, (res.wall_s - res.tasks["cost"].sum()) / n)
        per_task[halo] = max(0.0, float(best))
    per_payload = max(0.0, (per_task[True] - per_task[False]) * n / payloads) if payloads else 0.0
    cal = {"task_overhead_s": per_task[False], "payload_overhead_s": per_payload,
           "restart_s": _restart(backend, spinning(iters, True), tiling, repeats, Cluster.uniform(nodes, workers)),
           "wake_s": _wake_latency(), "measured_tasks": int(n), "task_s": task_s, "restart_threads": nodes * workers,
           "executor": backend.__name__}
    cal["handoff_s"] = _handoff(backend, iters, iterations_for(python_work, task_s / 2), tiling, steps, repeats,
                                nodes, workers)
    return cal


@nb.njit(KERNEL, nogil=True, cache=True)
def native_spin(tile, step, iteration, mem, ints, consts, reduced, out):
    """:func:`spin` as a native phase kernel: ``consts[0]`` iterations on the tile's value."""
    iters = int(consts[0])
    mem[0] = spin(mem[0], iters)
    return iters


class NativeSpinApp(SpinApp):
    """:class:`SpinApp` whose phase the native executor runs compiled: the state is one float64
    array (the value, then a ghost per neighbour) and each halo, one value, is copied by a copy
    plan into the reader's ghost for that neighbour. (``calls`` and ``python_iters`` do not
    apply: no Python runs in its tasks.)"""

    def init_tile(self, tile, tiling):
        return {"x": np.zeros(1 + len(tiling.neighbours[tile]))}

    def pack_halos(self, state, src, tiling):
        return {int(dst): state["x"][:1].copy() for dst in tiling.neighbours[src]}

    def run_spin(self, tile, state, halos, ctx, tiling):
        state["x"][0] = spin(state["x"][0], self.iters)
        return self.iters

    def native(self, tiling):
        neighbours = tiling.neighbours

        def halos(phase, src, dst):
            k = int(np.flatnonzero(neighbours[dst] == src)[0])
            return [("x", (slice(0, 1),), "x", (slice(1 + k, 2 + k),))]

        return Native(kernels={"spin": native_spin}, fields=("x",), consts=np.array([float(self.iters)]),
                      halos=halos)


EXECUTORS = {"python": (LocalExecutor, SpinApp), "native": (NativeExecutor, NativeSpinApp)}


def iterations_for(fn, seconds: float) -> int:
    """How many iterations ``fn(iters)`` has to run to take about ``seconds``."""
    fn(1)  # compiled once, not while timed
    iters = 1000
    while True:
        tic = time.perf_counter()
        fn(iters)
        elapsed = time.perf_counter() - tic
        if elapsed > 0.01:
            return max(1, int(iters * seconds / elapsed))
        iters *= 2


IN_PROCESS = Network(latency_s=1e-6, bandwidth_Bps=5e9, overhead_s=0.0)  # nodes in one process: memory
HANDOFF_CALLS = 4  # lock-free calls per task of the hand-off measurement


def _handoff(backend, iters: int, python_iters: int, tiling: Tiling, steps: int, repeats: int, nodes: int,
             workers: int) -> float:
    """Interpreter lock wait per lock-free call on ``nodes`` x ``workers`` threads of one
    process (0 on one thread: nothing to wait for), the median over ``repeats`` runs of
    :func:`~shoal.replay.machine.lock_wait_per_call`. Its tasks spend about a third of their
    time in Python, in :data:`HANDOFF_CALLS` pieces between lock-free calls."""
    if nodes * workers == 1:
        return 0.0
    from ..placement import get_policy
    from ..trace import Trace

    cluster = Cluster.uniform(nodes, workers)
    owner = get_policy("strips").place(tiling, cluster, 0)
    app = SpinApp(iters, halo=False, calls=HANDOFF_CALLS, python_iters=python_iters)
    waits = []
    for _ in range(repeats):
        with backend(app, tiling, cluster, owner) as executor:
            result = executor.run(steps)
        waits.append(lock_wait_per_call(Trace.of_run(result, app.phases, tiling, cluster, placements=[(0, owner)]))
                     or 0.0)
    return float(np.median(waits))


def refine(model: MachineModel, calibration: dict, threads: int) -> MachineModel:
    """``model`` with what :func:`calibrate` measured (``calibration``) on ``threads`` threads where the run
    behind the model could not measure it (restarts always; a wake-up, a dispatch, a lock wait
    or a payload's cost the model has no measurement of). Its ``measured_by`` says which."""
    out = MachineModel(**model.__dict__)
    out.measured_by = dict(model.measured_by)
    out.host = model.host or this_host()
    for key, name in (("restart_s", "restart_s"), ("wake_s", "wake_s"), ("dispatch_s", "task_overhead_s"),
                      ("handoff_s", "handoff_s"), ("payload_overhead_s", "payload_overhead_s")):
        if out.measured_by.get(key) != "run":
            setattr(out, key, float(calibration.get(name, 0.0)))
            out.measured_by[key] = "calibrate"
    if model.measured_by.get("handoff_s") != "run":
        out.lock_threads = threads
    if out.lock == "none" and threads > 1:
        out.lock = "shared"  # the calibration's threads shared one lock
    return out


def _restart(backend, app, tiling: Tiling, repeats: int, cluster: Cluster) -> float:
    """The fixed cost of one executor run (waking the workers, packing the first halos,
    collecting the result), which every re-balancing step pays: a run of 1 step less the extra
    of a 3-step one."""
    with backend(app, tiling, cluster, np.arange(tiling.ntiles) % cluster.nodes) as executor:

        def run(steps):
            tic = time.perf_counter()
            executor.run(steps)
            return time.perf_counter() - tic

        one = min(run(1) for _ in range(5 * repeats))
        three = min(run(3) for _ in range(5 * repeats))
    return max(0.0, one - (three - one) / 2)


def _wake_latency(samples: int = 300) -> float:
    """Median time from notifying a condition to the sleeping thread running again, with the
    executor's interpreter switch interval (how a worker is handed a ready task)."""
    cond = threading.Condition(threading.Lock())
    sent: list[float] = []
    woke: list[float] = []
    pending = [False]

    def sleeper():
        for _ in range(samples):
            with cond:
                while not pending[0]:
                    cond.wait()
                woke.append(time.perf_counter())
                pending[0] = False

    switch = sys.getswitchinterval()
    sys.setswitchinterval(GIL_SWITCH_S)
    thread = threading.Thread(target=sleeper, daemon=True)
    thread.start()
    try:
        for _ in range(samples):
            time.sleep(2e-4)  # let it fall asleep
            with cond:
                sent.append(time.perf_counter())
                pending[0] = True
                cond.notify()
            while pending[0]:
                time.sleep(0)
        thread.join()
    finally:
        sys.setswitchinterval(switch)
    return float(np.median(np.array(woke) - np.array(sent)))


def machine_model(calibration: dict) -> dict:
    """The ``ReplayConfig`` fields that model the calibrated machine (absent figures are 0)."""
    return {k: float(calibration.get(k, 0.0)) for k in MACHINE_FIELDS}


def read_calibration(path: str | Path) -> dict:
    """The executor's constants as ``ReplayConfig`` fields, from a machine model written by
    ``shoal calibrate``, a calibration (one measurement of :func:`calibrate`), or
    ``shoal validate``'s calibrations (one per case: the median of each figure)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise ShoalError(f"cannot read a calibration from {path}: {exc}") from None
    if isinstance(data, dict) and data.get("schema") == "shoal-machine":  # a machine model (shoal calibrate)
        m = MachineModel.from_dict(data, str(path))
        return {"task_overhead_s": m.dispatch_s, "payload_overhead_s": m.payload_overhead_s, "restart_s": m.restart_s,
                "wake_s": m.wake_s, "handoff_s": m.handoff_s}
    entries = data if isinstance(data, list) else [data]
    if not entries or not all(isinstance(e, dict) and "task_overhead_s" in e for e in entries):
        raise ShoalError(f"{path} is not a calibration: expected task_overhead_s, payload_overhead_s, "
                         "restart_s and wake_s (seconds), as written by 'shoal calibrate'")
    model = {k: float(np.median([e.get(k, 0.0) for e in entries])) for k in MACHINE_FIELDS}
    bad = [k for k, v in model.items() if not (math.isfinite(v) and v >= 0)]
    if bad:
        raise ShoalError(f"{path}: {', '.join(bad)} must be finite and >= 0")
    return model
