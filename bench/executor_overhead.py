"""Executor overhead per task and parallel efficiency on 2 workers, before and after.

For tasks of about 0.1, 1 and 10 ms, the same Numba kernel runs (a) in a plain Python loop
over steps and tiles, (b) under the local executor with 1 worker, (c) with 2 workers (one
node of 2 workers, so the ready queue is shared). Every task reads a halo from its 8
neighbours, so dependency tracking and packing are part of what is measured. A fourth case
runs a kernel that does nothing: what is left is the executor's own time per task.

    overhead per task = (executor 1 worker wall - plain loop wall) / tasks
    efficiency (2 workers) = plain loop wall / (2 x executor 2 workers wall)

The overhead includes the app's own halo packing (8 small copies per task), which the plain
loop does not do; a second plain loop that also packs gives the executor's own share:

    executor's own per task = (executor 1 worker wall - plain loop with packing wall) / tasks

What no executor in one interpreter can beat: two threads that each run half of the tiles'
kernels and packing, with no scheduling and no dependencies (the ceiling; without the
packing, the host's and the interpreter's floor for bare kernels):

    ceiling (2 threads) = plain loop wall / (2 x two such threads wall)

The same cases of 0.1 and 1 ms also run on 2 MPI ranks of 1 worker each (``mpiexec -n 2``,
each rank holding half of the tiles, the halos between the halves sent between processes):
workers that share no interpreter lock, at the price of a message per boundary tile and task:

    efficiency (2 ranks x 1) = plain loop wall / (2 x MPI wall)

The workers share the interpreter lock, and a thread that wants it while the other holds it
sleeps until it is handed over; the table's header says what one such wake-up costs on this
host (two threads on two cores handing a semaphore back and forth, half the round trip).

"Before" is the executor of revision ``--baseline`` (default: the one before the executor
was made leaner), measured by this same script in a subprocess that imports shoal from a
temporary ``git worktree`` of that revision; "after" is the shoal this script imports. Each
of the ``--repeats`` rounds measures before then after, so both see the same machine; every
figure is the median of the rounds with its spread, and the ratio after / before is taken
within each round.

``--profile`` prints, before and after, where the time of a task goes instead (per task,
1 worker, the kernel that does nothing unless said): the app's own kernel call and halo
packing (plain loops), the executor's clock reads (calls counted in a run, each priced by a
loop of the same call), the rest of its loop with no halo phase (the lock, the queue, the
readiness checks, the rows), what halos add to it (message sizes, posting, each neighbour's
readiness), the wall time per task of 2 workers on the same empty tasks (all of it holds the
interpreter lock), and at 0.1 ms tasks the worker time 2 workers lose against 1 (2 x wall on
2 workers - wall on 1, per task: waits for the interpreter lock and for ready tasks).

``--instructions`` counts instead of timing (needs Valgrind, Debian's ``valgrind``): the
machine instructions per task, in user space, of the same parts, before and after, each run
under Callgrind with counting switched on only around the measured loop and taken as the
difference between runs of N and 2N steps. The counts do not move with the host's load, so a
change of a few percent shows; they are blind to system calls (the clock reads) and to waits.

``--native`` measures the native executor (:mod:`shoal.runtime.native`) instead, against the
Python executor of this same tree and a plain loop, on the same 64-tile graph: a compiled kernel
(the same spin) with its 8 halos moved by copy plans. Per case: the wall per task on 1 worker
(with the empty kernel, all of it is the executor's bookkeeping), the 2-worker efficiency against
the plain loop of the kernel, and the Python executor's figures on the same app; with
``--instructions`` too, the instructions per task of the native executor's run, halos or none.

Run: ``python bench/executor_overhead.py [--repeats 5] [--baseline REV] [--profile | --instructions] [--native]
[--json FILE]``.
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numba
import numpy as np

BASELINE = "82be51535ad9e082cb3f4e7f7b5ec449418116b8"  # the executor before its hot loop was trimmed
CASES = ((0.0, 150), (0.1, 150), (1.0, 30), (10.0, 4))  # (task ms, steps); 0: a kernel that does nothing
GRID, COUNTS = (64, 64), (8, 8)  # 64 tiles, 8 neighbours each


@numba.njit(nogil=True, cache=True)
def spin(x, iters):
    v = x
    for _ in range(iters):
        v = np.sqrt(v + 1.0)
    return v


def iterations_for(seconds: float) -> int:
    """Iterations of :func:`spin` that take about ``seconds``."""
    spin(0.0, 1)
    iters = 1000
    while True:
        tic = time.perf_counter()
        spin(0.0, iters)
        elapsed = time.perf_counter() - tic
        if elapsed > 0.01:
            return max(1, int(iters * seconds / elapsed))
        iters *= 2


def make_app(iters: int, halo: bool = True):
    """An app of one phase (with a halo unless ``halo`` is False) whose kernel spins ``iters``
    times (the class comes from the shoal imported: the baseline's or this one's)."""
    from shoal.runtime import App, Phase

    class HaloSpin(App):
        name = "halo-spin"
        phases = (Phase("spin", halo=halo),)
        grid = GRID

        def init_tile(self, tile, tiling):
            return np.zeros(1)

        def pack_halos(self, state, src, tiling):
            return {dst: state[:1].copy() for dst in tiling.neighbours[src].tolist()}

        def spin(self, tile, state, halos, ctx, tiling):
            state[0] = spin(state[0], iters)
            return iters

        def gather(self, states, tiling):
            return {}

    return HaloSpin()


def make_native_app(iters: int, halo: bool = True):
    """The app of :func:`make_app` with a native phase: the calibration's compiled spin (the
    same iterations), its halos one value each copied by a copy plan into the reader's ghost
    for that neighbour; ``spin`` names its phase method, as the plain loop calls it."""
    from shoal.replay.calibrate import NativeSpinApp

    app = NativeSpinApp(iters, halo)
    app.spin = app.run_spin
    return app


def loop(app, tiling, states: dict, tiles: range, steps: int, pack: bool) -> None:
    """``steps`` steps of the app's kernel (and its halo packing) on ``tiles``, in a plain loop."""
    for _ in range(steps):
        for t in tiles:
            app.spin(t, states[t], {}, None, tiling)
            if pack:
                app.pack_halos(states[t], t, tiling)


def plain(app, tiling, steps: int, pack: bool = False) -> float:
    """Wall seconds of ``steps`` steps of the app's kernel (and its halo packing) in a plain loop."""
    states = {t: app.init_tile(t, tiling) for t in range(tiling.ntiles)}
    t0 = time.perf_counter()
    loop(app, tiling, states, range(tiling.ntiles), steps, pack)
    return time.perf_counter() - t0


def ideal_threads(app, tiling, steps: int, pack: bool) -> float:
    """Wall seconds of ``steps`` steps on two threads that each run every other tile's kernel
    (and its halo packing) in a plain loop: an executor sharing the interpreter at no cost."""
    import threading

    from shoal.runtime.local import GIL_SWITCH_S

    states = {t: app.init_tile(t, tiling) for t in range(tiling.ntiles)}
    threads = [threading.Thread(target=loop, args=(app, tiling, states, range(k, tiling.ntiles, 2), steps, pack))
               for k in range(2)]
    switch = sys.getswitchinterval()
    sys.setswitchinterval(GIL_SWITCH_S)  # as the executor sets it
    try:
        t0 = time.perf_counter()
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        return time.perf_counter() - t0
    finally:
        sys.setswitchinterval(switch)


def wakeup_s(rounds: int = 5000) -> float:
    """Seconds a thread sleeping on a semaphore takes to run again once another thread, on
    the other core where it can pin them, releases it (half of a round trip)."""
    import threading

    a, b = threading.Semaphore(0), threading.Semaphore(0)
    pin = getattr(os, "sched_setaffinity", None)
    cpus = sorted(os.sched_getaffinity(0)) if pin else []

    def pong() -> None:
        if len(cpus) > 1:
            pin(0, {cpus[1]})
        for _ in range(rounds):
            a.acquire()
            b.release()

    th = threading.Thread(target=pong)
    before = os.sched_getaffinity(0) if pin else None
    if len(cpus) > 1:
        pin(0, {cpus[0]})
    th.start()
    t0 = time.perf_counter()
    for _ in range(rounds):
        a.release()
        b.acquire()
    elapsed = time.perf_counter() - t0
    th.join()
    if before is not None:
        pin(0, before)
    return elapsed / (2 * rounds)


def executor(app, tiling, steps: int, workers: int, backend=None) -> float:
    """Wall seconds of ``steps`` steps under the local executor (or ``backend``, an executor
    class) on one node of ``workers``."""
    from shoal.cluster import Cluster
    from shoal.runtime import LocalExecutor

    owner = np.zeros(tiling.ntiles, dtype=np.int64)
    with (backend or LocalExecutor)(app, tiling, Cluster.uniform(1, workers), owner) as ex:
        ex.run(1)  # threads started, caches warm
        return ex.run(steps).wall_s


MPI_CASES = (0.1, 1.0)  # task ms of the cases also run on 2 ranks x 1 worker under mpiexec


def mpi_round(ms: float, backend: str = "python") -> float | None:
    """Under ``mpiexec -n 2``: wall seconds of the case's steps on 2 ranks of 1 worker, each
    rank holding half of the tiles (rows of them); rank 0 returns it, the other ``None``. The
    native backend runs :func:`make_native_app`'s compiled spin, the Python one
    :func:`make_app`'s."""
    from shoal.cluster import Cluster
    from shoal.runtime.mpi import MPITeam
    from shoal.tiling import Tiling

    team = MPITeam()
    tiling = Tiling.from_counts(GRID, COUNTS)
    spin(0.0, 1)
    app = (make_native_app if backend == "native" else make_app)(iterations_for(ms / 1e3))
    owner = (np.arange(tiling.ntiles) * 2 // tiling.ntiles).astype(np.int64)
    mine = {int(t): app.init_tile(int(t), tiling) for t in np.flatnonzero(owner == team.rank)}
    chosen = {"backend": backend} if backend != "python" else {}  # (a baseline's executor may not take it)
    ex = team.executor(app, tiling, Cluster.uniform(2, 1), owner, **chosen)
    try:
        ex.run(1, states=dict(mine))  # threads started, caches warm
        wall = ex.run(dict(CASES)[ms], states=dict(mine)).wall_s
    finally:
        ex.close()
    return wall if team.is_root else None


def measure_mpi(src: Path | None, cases=MPI_CASES, backend: str = "python") -> dict[str, float] | None:
    """Wall seconds of every case of ``cases`` (task ms) on 2 ranks x 1 worker (shoal from
    ``src``, else the one this script imports); ``None`` without mpi4py and ``mpiexec``."""
    mpiexec = Path(sys.executable).parent / "mpiexec"
    if not mpiexec.exists() or importlib.util.find_spec("mpi4py") is None:
        return None
    from shoal.runtime.launch import ONE_HOST_OPEN_MPI

    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", **ONE_HOST_OPEN_MPI,
               **({"PYTHONPATH": str(src)} if src else {}))
    out = {}
    for ms in cases:
        done = subprocess.run([str(mpiexec), "--oversubscribe", "-n", "2", sys.executable, __file__, "--mpi-round",
                               backend, str(ms)], env=env, capture_output=True, text=True, check=True)
        walls = [line.split()[1] for line in done.stdout.splitlines() if line.startswith("wall ")]
        out[str(ms)] = float(walls[-1])  # mpiexec may add lines of its own
    return out


def measure(ceiling: bool = True) -> dict:
    """One round of every case with the shoal imported: wall seconds of the plain loop and of
    the executor on 1 and 2 workers; with ``ceiling`` also the two plain threads and the host's
    wake-up (they do not depend on the shoal imported: measured in this tree's rounds only)."""
    from shoal.tiling import Tiling

    tiling = Tiling.from_counts(GRID, COUNTS)
    spin(0.0, 1)  # compiled (or loaded from the cache) before anything is timed
    out = {}
    for ms, steps in CASES:
        app = make_app(iterations_for(ms / 1e3) if ms else 0)
        out[str(ms)] = {"plain": plain(app, tiling, steps), "packing": plain(app, tiling, steps, pack=True),
                        "exec1": executor(app, tiling, steps, 1), "exec2": executor(app, tiling, steps, 2)}
        if ceiling:
            out[str(ms)].update(ideal=ideal_threads(app, tiling, steps, pack=True),
                                bare=ideal_threads(app, tiling, steps, pack=False))
    if ceiling:
        out["wakeup"] = wakeup_s()
    return out


NATIVE_CASES = ((0.0, 600), (0.02, 300), (0.1, 150), (1.0, 30))  # (task ms, steps)
NATIVE_MPI_CASES = (0.1, 1.0)  # task ms of the native cases also run on 2 ranks x 1 worker


def measure_native() -> dict:
    """One round of the native executor's cases: wall seconds of the plain loop, of the native
    executor on 1 and 2 workers, and of the Python executor on the same app."""
    from shoal.runtime.native import NativeExecutor
    from shoal.tiling import Tiling

    tiling = Tiling.from_counts(GRID, COUNTS)
    spin(0.0, 1)
    out = {}
    for ms, steps in NATIVE_CASES:
        app = make_native_app(iterations_for(ms / 1e3) if ms else 0)
        out[str(ms)] = {"plain": plain(app, tiling, steps),
                        "native1": executor(app, tiling, steps, 1, NativeExecutor),
                        "native2": executor(app, tiling, steps, 2, NativeExecutor),
                        "python1": executor(app, tiling, steps, 1), "python2": executor(app, tiling, steps, 2)}
    mpi = {backend: measure_mpi(None, NATIVE_MPI_CASES, backend) for backend in ("native", "python")}
    for ms in NATIVE_MPI_CASES:  # 2 ranks x 1 worker, each rank half of the tiles
        if mpi["native"] is not None:
            out[str(ms)].update(mpi_native=mpi["native"][str(ms)], mpi_python=mpi["python"][str(ms)])
    return out


def print_native(bench, rounds: list[dict], counts: dict | None) -> None:
    """The native executor's table, its targets, and one ``--json`` line of the key figures."""
    from common import Stat

    tasks_of = {ms: steps * COUNTS[0] * COUNTS[1] for ms, steps in NATIVE_CASES}
    print(f"native executor, {COUNTS[0] * COUNTS[1]} tiles, 8 neighbours each (8 halos a task, copy plans); "
          f"median of {len(rounds)} rounds ±spread; efficiency = plain loop / (2 x wall on 2 workers)")
    print(f"{'task':>6} {'plain us/task':>14} {'native 1w us/task':>18} {'native eff 2w':>14} "
          f"{'python 1w us/task':>18} {'python eff 2w':>14} {'1w: python / native':>20}")
    key = {}
    for ms, _ in NATIVE_CASES:
        n = tasks_of[ms]
        per = [{"plain": r[str(ms)]["plain"] / n, "native1": r[str(ms)]["native1"] / n,
                "native_eff": r[str(ms)]["plain"] / (2 * r[str(ms)]["native2"]),
                "python1": r[str(ms)]["python1"] / n,
                "python_eff": r[str(ms)]["plain"] / (2 * r[str(ms)]["python2"]),
                "speedup": r[str(ms)]["python1"] / r[str(ms)]["native1"]} for r in rounds]
        st = {k: Stat(tuple(p[k] for p in per)) for k in per[0]}
        name = f"{ms:g}ms" if ms else "empty"
        print(f"{name:>6} {st['plain'].show(1e6, 2):>14} {st['native1'].show(1e6, 2):>18} "
              f"{st['native_eff'].show(1, 3):>14} {st['python1'].show(1e6, 2):>18} {st['python_eff'].show(1, 3):>14} "
              f"{st['speedup'].show(1, 1):>20}")
        bench.add(native_task_ms=ms, tasks=n, **st)
        key[name] = st
    if all("mpi_native" in r.get(str(ms), {}) for r in rounds for ms in NATIVE_MPI_CASES):
        print("2 MPI ranks x 1 worker, half of the tiles each: efficiency = plain loop / (2 x wall)")
        print(f"{'task':>6} {'native eff':>14} {'python eff':>14}")
        key["mpi"] = {}
        for ms in NATIVE_MPI_CASES:
            st = {b: Stat(tuple(r[str(ms)]["plain"] / (2 * r[str(ms)][f"mpi_{b}"]) for r in rounds))
                  for b in ("native", "python")}
            print(f"{ms:>4g}ms {st['native'].show(1, 3):>14} {st['python'].show(1, 3):>14}")
            bench.add(mpi_task_ms=ms, **{f"mpi_{b}_eff": v for b, v in st.items()})
            key["mpi"][str(ms)] = st
    print("targets: bookkeeping <= 1 us a task (empty kernel, 1 worker): "
          f"{key['empty']['native1'].median * 1e6:.2f} us; efficiency >= 0.95 at 0.1 ms: "
          f"{key['0.1ms']['native_eff'].median:.3f}; >= 0.85 at 20 us: {key['0.02ms']['native_eff'].median:.3f}; "
          + (f"MPI 2 ranks x 1 >= 0.85 at 0.1 ms: {key['mpi']['0.1']['native'].median:.3f}" if key.get("mpi")
             else "MPI 2 ranks x 1: n/a (no mpiexec)"))
    figures = {"bookkeeping_us_per_task": key["empty"]["native1"].median * 1e6,
               "efficiency_2w_0.1ms": key["0.1ms"]["native_eff"].median,
               "efficiency_2w_20us": key["0.02ms"]["native_eff"].median,
               "python_over_native_empty": key["empty"]["speedup"].median}
    if key.get("mpi"):
        figures.update({f"mpi_2x1_{b}_{ms}ms": st.median for ms, per in key["mpi"].items() for b, st in per.items()})
    if counts:
        print("instructions per task (Callgrind, user space, empty kernel, 1 worker): "
              + ", ".join(f"{part} {n:.0f}" for part, n in counts.items()))
        figures.update({f"instructions_{part.replace(' ', '_').replace(',', '')}": n for part, n in counts.items()})
    print("json " + json.dumps(figures))
    bench.add(native_figures=figures)


CLOCKS = ("perf_counter", "perf_counter_ns", "thread_time", "thread_time_ns")


def clock_calls(run) -> collections.Counter:
    """How many times ``run()`` read each clock of :data:`CLOCKS` (the ``time`` module's
    functions replaced by counting ones while it runs)."""
    counts = collections.Counter()
    originals = {name: getattr(time, name) for name in CLOCKS}

    def counting(name, fn):
        def read():
            counts[name] += 1
            return fn()
        return read

    for name, fn in originals.items():
        setattr(time, name, counting(name, fn))
    try:
        run()
    finally:
        for name, fn in originals.items():
            setattr(time, name, fn)
    return counts


def clock_price(name: str, n: int = 200_000) -> float:
    """Seconds one call of ``time.<name>()`` takes on this thread."""
    fn = getattr(time, name)
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n


def profile() -> dict:
    """One round of the profile with the shoal imported: seconds per task of each part."""
    from shoal.tiling import Tiling

    tiling = Tiling.from_counts(GRID, COUNTS)
    spin(0.0, 1)
    steps = dict(CASES)[0.0]
    tasks = steps * tiling.ntiles
    empty, bare = make_app(0), make_app(0, halo=False)
    counts = clock_calls(lambda: executor(empty, tiling, steps, 1))
    run_clocks = counts.copy()
    run_clocks.subtract(clock_calls(lambda: executor(empty, tiling, 1, 1)))  # the run(1) before
    clocks = sum(n * clock_price(name) for name, n in run_clocks.items()) / tasks
    call, packing = plain(empty, tiling, steps), plain(empty, tiling, steps, pack=True)
    no_halo, halo = executor(bare, tiling, steps, 1), executor(empty, tiling, steps, 1)
    two = executor(empty, tiling, steps, 2)
    ms, busy_steps = 0.1, dict(CASES)[0.1]
    busy = make_app(iterations_for(ms / 1e3))
    busy1, busy2 = executor(busy, tiling, busy_steps, 1), executor(busy, tiling, busy_steps, 2)
    return {"kernel call": call / tasks, "app packing": (packing - call) / tasks, "clock reads": clocks,
            "loop w/o halos": (no_halo - call) / tasks - clocks, "halos": (halo - no_halo - packing + call) / tasks,
            "1 worker total": halo / tasks, "2 workers, wall": two / tasks,
            "lost on 2 workers @0.1ms": (2 * busy2 - busy1) / (busy_steps * tiling.ntiles),
            "reads/task": " ".join(f"{name} {n / tasks:.1f}" for name, n in sorted(run_clocks.items()) if n)}


COUNTED = ("kernel call", "app packing", "executor, no halo", "executor, halo")  # the parts counted
NATIVE_COUNTED = ("native, no halo", "native, halo")  # the native executor's parts (this tree only)
COUNT_STEPS = 10  # counted runs have this many steps and twice as many; the difference is per task


def counted_loop(part: str, steps: int) -> None:
    """Run ``steps`` steps of ``part`` (one of :data:`COUNTED`, empty kernel, 1 worker) with
    Callgrind's counting on around it only (this process runs under Callgrind)."""
    from shoal.cluster import Cluster
    from shoal.runtime import LocalExecutor
    from shoal.tiling import Tiling

    tiling = Tiling.from_counts(GRID, COUNTS)
    spin(0.0, 1)

    def counting(on: bool) -> None:
        subprocess.run(["callgrind_control", "--instr=" + ("on" if on else "off"), str(os.getpid())],
                       capture_output=True, check=True)

    if part in ("kernel call", "app packing"):
        app = make_app(0)
        plain(app, tiling, 2, pack=part == "app packing")  # warm
        counting(True)
        plain(app, tiling, steps, pack=part == "app packing")
        counting(False)
        return
    if part in NATIVE_COUNTED:
        from shoal.runtime.native import NativeExecutor

        backend, app = NativeExecutor, make_native_app(0, halo=part == "native, halo")
    else:
        backend, app = LocalExecutor, make_app(0, halo=part == "executor, halo")
    with backend(app, tiling, Cluster.uniform(1, 1), np.zeros(tiling.ntiles, dtype=np.int64)) as ex:
        ex.run(2)
        counting(True)
        ex.run(steps)
        counting(False)


def count_instructions(part: str, steps: int, src: Path | None) -> int:
    """User-space instructions Callgrind counted in :func:`counted_loop` (shoal from ``src``,
    else the one this script imports)."""
    env = dict(os.environ, **({"PYTHONPATH": str(src)} if src else {}))
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        subprocess.run(["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}",
                        sys.executable, __file__, "--count-loop", part, str(steps)], env=env,
                       capture_output=True, check=True)
        totals = [line for line in out.read_text().splitlines() if line.startswith("totals:")]
    return int(totals[0].split()[1])


def instructions(src: Path | None, parts: tuple[str, ...] = COUNTED) -> dict[str, float]:
    """Instructions per task of every part of ``parts`` (for :data:`COUNTED`, also the
    executor's own: the halo run less the app's call and packing)."""
    import concurrent.futures

    jobs = [(part, n) for part in parts for n in (COUNT_STEPS, 2 * COUNT_STEPS)]
    with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        got = dict(zip(jobs, pool.map(lambda job: count_instructions(*job, src), jobs), strict=True))
    tasks = COUNT_STEPS * COUNTS[0] * COUNTS[1]
    per = {part: (got[(part, 2 * COUNT_STEPS)] - got[(part, COUNT_STEPS)]) / tasks for part in parts}
    if parts != COUNTED:
        return per
    per["executor's own, halo"] = per["executor, halo"] - per["app packing"]
    per["executor's own, no halo"] = per["executor, no halo"] - per["kernel call"]
    return per


def print_instructions(bench, before: dict, after: dict, baseline: str) -> None:
    """The instruction counts' table: per part, before, after and their ratio."""
    print(f"instructions per task (Callgrind, user space), empty kernel on 1 worker; before = {baseline[:10]}, "
          f"after = this tree")
    print(f"{'part':28s} {'before':>10s} {'after':>10s} {'ratio':>6s}")
    for part in before:
        print(f"{part:28s} {before[part]:>10.0f} {after[part]:>10.0f} {after[part] / before[part]:>6.2f}")
        bench.add(part=part, before_instructions=before[part], after_instructions=after[part])


def figures(r: dict, ms: float, steps: int) -> dict:
    """Overhead per task (s) and 2-worker efficiency of one round's case."""
    c = r[str(ms)]
    tasks = steps * COUNTS[0] * COUNTS[1]
    fig = {"overhead": (c["exec1"] - c["plain"]) / tasks, "own": (c["exec1"] - c["packing"]) / tasks,
           "efficiency": c["plain"] / (2 * c["exec2"]), "plain": c["plain"], "exec1": c["exec1"],
           "exec2": c["exec2"]}
    if "ideal" in c:  # this tree's rounds only
        fig.update(ceiling=c["plain"] / (2 * c["ideal"]), floor=c["plain"] / (2 * c["bare"]))
    if r.get("mpi") and str(ms) in r["mpi"]:
        fig["mpi"] = c["plain"] / (2 * r["mpi"][str(ms)])
    return fig


def print_profile(bench, rounds: list[tuple[dict, dict]], baseline: str) -> None:
    """The profile's table: per part, us per task before and after (median of the rounds)."""
    from common import Stat

    print(f"where a task's time goes: us per task, empty kernel on 1 worker unless said; before = {baseline[:10]}, "
          f"after = this tree; median of {len(rounds)} rounds ±spread")
    print(f"{'part':28s} {'before':>14s} {'after':>14s}")
    for part in rounds[0][1]:
        if part == "reads/task":
            print(f"{'clock reads per task':28s} before: {rounds[0][0][part]}; after: {rounds[0][1][part]}")
            continue
        before, after = Stat(tuple(b[part] for b, _ in rounds)), Stat(tuple(a[part] for _, a in rounds))
        print(f"{part:28s} {before.show(1e6, 1):>14s} {after.show(1e6, 1):>14s}")
        bench.add(part=part, before=before, after=after)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)  # one round, as JSON
    ap.add_argument("--profile-round", action="store_true", help=argparse.SUPPRESS)  # one profile, as JSON
    ap.add_argument("--baseline", default=BASELINE, help=f"revision of the executor before (default {BASELINE[:10]})")
    ap.add_argument("--profile", action="store_true", help="where a task's time goes, before and after")
    ap.add_argument("--instructions", action="store_true",
                    help="instructions per task of each part, before and after (needs valgrind)")
    ap.add_argument("--native", action="store_true",
                    help="the native executor against the Python one and the plain loop (this tree only)")
    if "--count-loop" in sys.argv:  # under Callgrind: one counted loop
        counted_loop(sys.argv[-2], int(sys.argv[-1]))
        return
    if "--mpi-round" in sys.argv:  # under mpiexec: rank 0 prints the wall time
        wall = mpi_round(float(sys.argv[-1]), sys.argv[-2])
        if wall is not None:
            print(f"wall {wall!r}")
        return
    if "--measure" in sys.argv:
        print(json.dumps(measure(ceiling=False)))  # a baseline's round: its executor only
        return
    if "--profile-round" in sys.argv:
        print(json.dumps(profile()))
        return
    from common import Benchmark, Stat, add_arguments, baseline_tree, run_with

    add_arguments(ap)
    args = ap.parse_args()
    if args.instructions and not (shutil.which("valgrind") and shutil.which("callgrind_control")):
        sys.exit("executor_overhead: --instructions needs Valgrind (Debian: apt-get install valgrind)")
    if args.native:
        with Benchmark("executor_overhead", args) as bench:
            rounds = [measure_native() for _ in range(max(args.repeats, 1))]
            print_native(bench, rounds, instructions(None, NATIVE_COUNTED) if args.instructions else None)
        return
    with Benchmark("executor_overhead", args) as bench, baseline_tree(args.baseline) as worktree:
        if args.instructions:  # deterministic: one round
            print_instructions(bench, instructions(worktree / "src"), instructions(None), args.baseline)
            return
        if args.profile:
            rounds = [(run_with(worktree, __file__, "--profile-round"), profile()) for _ in range(max(args.repeats, 1))]
        else:
            rounds = []
            for _ in range(max(args.repeats, 1)):
                before, after = run_with(worktree, __file__, "--measure"), measure()
                before["mpi"], after["mpi"] = measure_mpi(worktree / "src"), measure_mpi(None)
                rounds.append((before, after))
        if args.profile:
            print_profile(bench, rounds, args.baseline)
            return
        wake = Stat(tuple(a["wakeup"] for _, a in rounds))
        print(f"{COUNTS[0] * COUNTS[1]} tiles, 8 neighbours each (a halo every task); before = {args.baseline[:10]}, "
              f"after = this tree; median of {len(rounds)} rounds ±spread; a sleeping thread wakes on the other core "
              f"in {wake.show(1e6, 1)} us on this host")
        print(f"{'task':>6} {'tasks':>6} {'plain ms':>11} {'1 worker ms: before':>20} {'after':>11} "
              f"{'overhead us/task: before':>25} {'after':>10} {'ratio':>5} {'own us/task: before':>20} "
              f"{'after':>10} {'ratio':>5} {'efficiency 2w: before':>22} {'after':>10} "
              f"{'ceiling: 2 threads':>19} {'bare kernels':>13} {'efficiency 2 ranks x 1: before':>31} {'after':>10}")
        for ms, steps in CASES:
            per_round = []
            for b, a in rounds:
                before, after = figures(b, ms, steps), figures(a, ms, steps)
                per_round.append({**{f"{k}_before": v for k, v in before.items()},
                                  **{f"{k}_after": v for k, v in after.items()},
                                  "ratio": after["overhead"] / before["overhead"],
                                  "own_ratio": after["own"] / before["own"]})
            stats = {k: Stat(tuple(r[k] for r in per_round)) for k in per_round[0]}
            name = f"{ms:.1f}ms" if ms else "empty"
            print(f"{name:>6} {steps * COUNTS[0] * COUNTS[1]:>6} {stats['plain_after'].show(1e3, 1):>11} "
                  f"{stats['exec1_before'].show(1e3, 1):>20} {stats['exec1_after'].show(1e3, 1):>11} "
                  f"{stats['overhead_before'].show(1e6, 1):>25} {stats['overhead_after'].show(1e6, 1):>10} "
                  f"{stats['ratio'].median:>5.2f} {stats['own_before'].show(1e6, 1):>20} "
                  f"{stats['own_after'].show(1e6, 1):>10} {stats['own_ratio'].median:>5.2f} "
                  f"{stats['efficiency_before'].show(1, 2):>22} {stats['efficiency_after'].show(1, 2):>10} "
                  f"{stats['ceiling_after'].show(1, 2):>19} {stats['floor_after'].show(1, 2):>13} "
                  f"{stats['mpi_before'].show(1, 2) if 'mpi_before' in stats else '-':>31} "
                  f"{stats['mpi_after'].show(1, 2) if 'mpi_after' in stats else '-':>10}")
            bench.add(task_ms=ms, tasks=steps * COUNTS[0] * COUNTS[1], **stats)
        bench.add(wakeup_s=wake)


if __name__ == "__main__":
    main()
