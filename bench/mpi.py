"""MPI: halo exchange between two ranks, ranks against threads, overlap, and replay's prediction.

1. Ping-pong between two ranks with the message path the MPI executor uses (a pickled halo
   sent with ``isend`` and found with ``Iprobe``), against raw MPI buffers (``Send``/``Recv``)
   in the same run: half round-trip latency and bandwidth, and their ratio.
2. Step time of the synthetic hot spot and the 2D dam break on 2 ranks x 1 worker against
   1 rank x 2 workers (and the local executor's 1 node x 2 workers).
3. Idle fraction on 2 ranks with halos sent the moment they are packed (overlap) and held
   until the rank finishes the phase (``run.overlap=false``).
4. ``shoal replay`` of each 2-rank trace on a model of this machine (ping-pong latency and
   bandwidth, the executor's calibrated per-task overhead, one interpreter lock per rank)
   against the measured step time: without and with the communication thread's CPU time per
   message, which the run measures and the trace records.

Run: ``python bench/mpi.py`` (it starts ``mpiexec`` itself; as root it sets
``OMPI_ALLOW_RUN_AS_ROOT``). Each configuration runs 3 times and the median is kept: this
machine is shared and noisy.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

SIZES = [8, 1024, 65536, 1 << 20, 8 << 20]
REPEATS = 3
CASES = {
    "synthetic": ["synthetic-hotspot", "--steps", "60", "--tiles", "32", "--set", "app.grid=[192,192]",
                  "--set", "app.work_per_cell=2000.0"],
    "sph2d": ["sph-dam-break", "--steps", "60", "--tiles", "32", "--set", "app.dx=0.007",
              "--set", "run.frame_every=0"],
}
# The water and the hot spot sit in one part of the domain: a static split would leave one rank
# idle, so the ranks start from a random placement and re-balance greedily every 10 steps.
POLICY = {"placement": "greedy", "period": 10, "initial": "birdshot"}


def _shoal_path(objects, rank: int, payload: np.ndarray) -> None:
    """One round trip the way MPIExecutor moves a halo: pickled (protocol 5), matched probe."""
    from mpi4py import MPI

    if rank == 0:
        objects.isend((1, 0, [(1, payload)]), dest=1, tag=1).wait()
    while (message := objects.improbe(MPI.ANY_SOURCE, MPI.ANY_TAG)) is None:
        pass
    message.recv()
    if rank == 1:
        objects.isend((1, 0, [(1, payload)]), dest=0, tag=1).wait()


def _raw_path(comm, rank: int, payload: np.ndarray, buf: np.ndarray) -> None:
    """One round trip of raw buffers: the baseline."""
    if rank == 0:
        comm.Send(payload, dest=1)
        comm.Recv(buf, source=1)
    else:
        comm.Recv(buf, source=0)
        comm.Send(payload, dest=0)


def _busy_worker(stop) -> None:
    """A worker thread as in a run: compiled kernels without the GIL, at the workers' nice value."""
    import threading

    from shoal.replay.calibrate import spin
    from shoal.runtime.mpi import WORKER_NICENESS

    os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), WORKER_NICENESS)
    while not stop.is_set():
        spin(0.0, 20000)


def pingpong(loaded: bool) -> None:
    """Rank 0 and 1 bounce messages; rank 0 prints one JSON line per size. ``loaded``: while a
    worker thread computes on each rank, as during a run, so the main thread competes for a core."""
    import threading

    from shoal.runtime.mpi import MPITeam

    team = MPITeam()
    comm, objects, rank = team.comm, team.objects, team.rank
    stop = threading.Event()
    if loaded:
        threading.Thread(target=_busy_worker, args=(stop,), daemon=True).start()
    for size in SIZES if not loaded else SIZES[:1]:
        payload = np.ones(size // 8 + (size < 8), dtype=np.float64)
        buf = np.empty_like(payload)
        reps = max(20, min(2000, int(2e8 // max(size, 1) // 8)))
        paths = {"raw": lambda p=payload, b=buf: _raw_path(comm, rank, p, b),
                 "shoal": lambda p=payload: _shoal_path(objects, rank, p)}
        times = {}
        for name, fn in paths.items():
            for _ in range(5):
                fn()
            comm.Barrier()
            tic = time.perf_counter()
            for _ in range(reps):
                fn()
            times[name] = (time.perf_counter() - tic) / reps / 2
        if rank == 0:
            print(json.dumps({"bytes": payload.nbytes, **times}), flush=True)
    stop.set()


def mpi_env() -> dict:
    return {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


def mpiexec(ranks: int, *args) -> list[str]:
    exe = Path(sys.executable).parent / "mpiexec"
    return [str(exe if exe.exists() else "mpiexec"), "--oversubscribe", "-n", str(ranks), sys.executable, *args]


def run(ranks: int | None, argv: list[str], workers: int, out: Path, *extra: str) -> dict:
    """One run (``ranks=None``: the local executor on one node); its summary."""
    cmd = ["run", *argv, "--workers", str(workers), "--placement", POLICY["placement"], "--period",
           str(POLICY["period"]), "--initial", POLICY["initial"], "--out", str(out), *extra]
    if ranks is None:
        full = [sys.executable, "-m", "shoal", *cmd, "--nodes", "1"]
    else:
        full = mpiexec(ranks, "-m", "shoal", *cmd)
    subprocess.run(full, check=True, env=mpi_env(), capture_output=True)
    return json.loads((out / "summary.json").read_text())


def main() -> None:
    from shoal.cluster import Network
    from shoal.replay import ReplayConfig, replay
    from shoal.replay.calibrate import calibrate, machine_model
    from shoal.trace import Trace

    print("1. halo exchange between 2 ranks (half round trip)")
    done = subprocess.run(mpiexec(2, __file__, "--pingpong"), check=True, env=mpi_env(), capture_output=True,
                          text=True)
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    print(f"{'bytes':>10} {'raw MPI':>12} {'shoal path':>12} {'ratio':>7} {'raw GB/s':>9} {'shoal GB/s':>11}")
    for r in rows:
        print(f"{r['bytes']:>10} {r['raw'] * 1e6:>10.1f}us {r['shoal'] * 1e6:>10.1f}us {r['shoal'] / r['raw']:>7.2f}"
              f" {r['bytes'] / r['raw'] / 1e9:>9.2f} {r['bytes'] / r['shoal'] / 1e9:>11.2f}")
    done = subprocess.run(mpiexec(2, __file__, "--pingpong-loaded"), check=True, env=mpi_env(),
                          capture_output=True, text=True)
    loaded = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")][0]
    print(f"{loaded['bytes']:>10} {loaded['raw'] * 1e6:>10.1f}us {loaded['shoal'] * 1e6:>10.1f}us "
          f"{loaded['shoal'] / loaded['raw']:>7.2f}   while a worker computes on every rank")
    bandwidth = rows[-1]["bytes"] / rows[-1]["shoal"]
    calibration = calibrate()
    latency = rows[0]["shoal"]
    models = {"no message CPU": 0.0, "message CPU": None}  # None: as the trace measured it
    print(f"model of this machine: latency {latency * 1e6:.0f} us, bandwidth {bandwidth / 1e9:.2f} GB/s, "
          f"executor overhead {calibration['task_overhead_s'] * 1e6:.1f} us per task and "
          f"{calibration['payload_overhead_s'] * 1e6:.2f} us per payload")

    configs = [("local 1x2", None, 2, ()), ("1 rank x 2", 1, 2, ()), ("2 ranks x 1", 2, 1, ()),
               ("2 ranks x 1, no overlap", 2, 1, ("--set", "run.overlap=false"))]
    with tempfile.TemporaryDirectory() as tmp:
        for app, argv in CASES.items():
            print(f"\n2-4. {app}: {' '.join(argv)}")
            print(f"{'configuration':<26} {'step (ms)':>10} {'idle':>6} {'msg CPU':>8}"
                  + "".join(f"  {'predicted, ' + m:>26} {'error':>7}" for m in models))
            steps = {}
            for label, ranks, workers, extra in configs:
                measured, idle, msg_cpu, predicted = [], [], [], {m: [] for m in models}
                for k in range(REPEATS):
                    out = Path(tmp) / f"{app}-{label.replace(' ', '_')}-{k}"
                    s = run(ranks, argv, workers, out, *extra)
                    measured.append(s["wall_s"] / s["steps"])
                    idle.append(1 - s["efficiency"])
                    msg_cpu.append(s.get("message_cpu_s", 0.0))
                    trace = Trace.read(out / "trace.h5")
                    for model, message_cpu in models.items() if ranks == 2 else ():
                        network = Network(latency_s=latency, bandwidth_Bps=bandwidth, overhead_s=0.0)
                        cfg = ReplayConfig(nodes=2, cores=1, network=network, gil="process",
                                           message_cpu_s=message_cpu, **machine_model(calibration), **POLICY)
                        predicted[model].append(replay(trace, cfg).makespan / s["steps"])
                m = float(np.median(measured))
                steps[label] = m
                pred = "".join(f"  {np.median(p) * 1e3:>26.2f} {np.median(p) / m - 1:>+7.1%}"
                               for p in predicted.values() if p)
                cpu = f"{np.median(msg_cpu) * 1e6:>6.1f}us" if ranks else f"{'-':>8}"
                print(f"{label:<26} {m * 1e3:>10.2f} {np.median(idle):>6.1%} {cpu}{pred}")
            print(f"2 ranks x 1 worker vs 1 rank x 2 workers: {steps['1 rank x 2'] / steps['2 ranks x 1']:.2f}x "
                  f"(local executor 1x2: {steps['local 1x2'] / steps['2 ranks x 1']:.2f}x)")
            print(f"overlap vs none: {steps['2 ranks x 1, no overlap'] / steps['2 ranks x 1']:.2f}x")


if __name__ == "__main__":
    if "--pingpong" in sys.argv or "--pingpong-loaded" in sys.argv:
        pingpong(loaded="--pingpong-loaded" in sys.argv)
    else:
        main()
