"""A small measurement of this machine, so that replays can model it.

The executor spends some time of its own on every task (queues, dependency bookkeeping,
waking workers) and on every halo payload it hands from one tile to another; the replay adds
it to every task. It is measured the way the executor benchmark does: a tiny app whose kernel
spins for a known time runs under the executor, once exchanging halos and once not; wall time
less the tasks' own CPU time, per task, is the overhead, and the difference between the two
runs, per payload, the cost of a payload. A re-balancing step stops the executor and starts it
again: short runs of that app, on as many threads as the modeled runs have (each is started
and joined), measure what a restart costs. A worker with nothing to do sleeps
on its node's condition: how long one takes to wake when notified is timed directly.

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

from ..cluster import Cluster
from ..errors import ShoalError
from ..runtime import LocalExecutor, Phase
from ..runtime.local import GIL_SWITCH_S
from ..tiling import Tiling
from .run import MACHINE_FIELDS


@nb.njit(nogil=True, cache=True)
def spin(x, iters):
    v = x
    for _ in range(iters):
        v = math.sqrt(v + 1.0)
    return v


class SpinApp:
    name = "calibration"

    def __init__(self, iters, halo: bool = True):
        self.iters = iters
        self.phases = (Phase("spin", halo=halo),)

    def init_tile(self, tile, tiling):
        return np.zeros(1)

    def pack_halo(self, phase, state, src, dst, tiling):
        return state[:1].copy()

    def run_phase(self, phase, tile, state, halos, ctx, tiling):
        state[0] = spin(state[0], self.iters)
        return self.iters

    def gather(self, states, tiling):
        return {}


def calibrate(tasks: int = 3000, task_s: float = 5e-5, repeats: int = 3, nodes: int = 1, workers: int = 1) -> dict:
    """The executor's overhead per task and per halo payload (s) on one worker, best of a few
    repeats, with tasks of about ``task_s`` seconds; its restart on ``nodes`` x ``workers``
    threads (each has to be started and joined), the shape of the runs it will model."""
    spin(0.0, 10)
    iters = 1000
    while True:
        tic = time.perf_counter()
        spin(0.0, iters)
        if time.perf_counter() - tic > 0.01:
            break
        iters *= 2
    iters = max(1, int(iters * task_s / (time.perf_counter() - tic)))
    tiling = Tiling.from_counts((32, 32), (8, 8))
    steps = max(1, tasks // tiling.ntiles)
    n = steps * tiling.ntiles
    payloads = steps * sum(len(nbrs) for nbrs in tiling.neighbours)  # every task reads one from each neighbour
    per_task = {}
    for halo in (False, True):
        best = np.inf
        for _ in range(repeats):
            res = LocalExecutor(SpinApp(iters, halo), tiling, Cluster.uniform(1, 1),
                                np.zeros(tiling.ntiles, int)).run(steps)
            best = min(best, (res.wall_s - res.task_cost.sum()) / n)
        per_task[halo] = max(0.0, float(best))
    per_payload = max(0.0, (per_task[True] - per_task[False]) * n / payloads) if payloads else 0.0
    return {"task_overhead_s": per_task[False], "payload_overhead_s": per_payload,
            "restart_s": _restart(SpinApp(iters, True), tiling, repeats, Cluster.uniform(nodes, workers)),
            "wake_s": _wake_latency(), "measured_tasks": int(n), "task_s": task_s, "restart_threads": nodes * workers}


def _restart(app, tiling: Tiling, repeats: int, cluster: Cluster) -> float:
    """The fixed cost of one executor run (starting workers, packing the first halos, collecting
    the result), which every re-balancing step pays: a run of 1 step less the extra of a 3-step one."""
    executor = LocalExecutor(app, tiling, cluster, np.arange(tiling.ntiles) % cluster.nodes)

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
    """A calibration written by ``shoal calibrate`` (one measurement), or by ``shoal validate``
    (one per case: the median of each figure)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise ShoalError(f"cannot read a calibration from {path}: {exc}") from None
    entries = data if isinstance(data, list) else [data]
    if not entries or not all(isinstance(e, dict) and "task_overhead_s" in e for e in entries):
        raise ShoalError(f"{path} is not a calibration: expected task_overhead_s, payload_overhead_s, "
                         "restart_s and wake_s (seconds), as written by 'shoal calibrate'")
    model = {k: float(np.median([e.get(k, 0.0) for e in entries])) for k in MACHINE_FIELDS}
    bad = [k for k, v in model.items() if not (math.isfinite(v) and v >= 0)]
    if bad:
        raise ShoalError(f"{path}: {', '.join(bad)} must be finite and >= 0")
    return model
