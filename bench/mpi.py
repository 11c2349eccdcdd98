"""MPI: what a message between ranks costs, ranks against threads, overlap, and replay's prediction.

1. Per-payload cost between two ranks (half a round trip), three ways in the same run: the
   halo message pickled with mpi4py's lowercase API (protocol 5, what shoal sent before),
   the same message as one NumPy byte buffer through the buffer API (what the executor sends
   now, :func:`shoal.runtime.mpi.encode`), and the bare array with ``Send``/``Recv`` (the
   floor). Median and spread of the repeats, and the ratio pickle / buffers.
2. Step time of the synthetic hot spot and the 2D dam break on 2 ranks x 1 worker against
   1 rank x 2 workers (and the local executor's 1 node x 2 workers), and on 2 ranks x 2
   workers (more workers than cores on a host of two: ranks whose workers move their messages
   themselves, sharing cores). With ``--baseline REV`` the configurations of 2 ranks also run
   with the shoal of revision REV (a temporary ``git worktree``) in the same round: before and
   after, and their ratio within each round.
3. Idle fraction on 2 ranks with halos sent the moment they are packed (overlap) and held
   until the rank finishes the phase (``run.overlap=false``, which only the Python executor
   runs), and the native executor on 2 ranks against the Python one (``--executor python``).
4. ``shoal replay`` of each 2-rank trace on a model of this machine (ping-pong latency and
   bandwidth, the executor's calibrated per-task overhead, one interpreter lock per rank)
   against the measured step time: without and with the time per message the workers spent
   moving messages, which the run measures and the trace records.

Run: ``python bench/mpi.py [--repeats 5] [--baseline REV] [--json FILE]`` (it starts ``mpiexec`` itself, on this
host's shared memory and loopback only; as root it sets ``OMPI_ALLOW_RUN_AS_ROOT``);
``--payloads`` runs part 1 only. Every measurement is repeated (default 5) and quoted as the
median with its spread; in parts 2-4 each repeat runs every configuration once, one after the
other, so the machine's drift hits each alike, and the ratios are taken within each repeat.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from common import Benchmark, add_arguments, median_spread, repeat

SIZES = [8, 1024, 65536, 1 << 20, 8 << 20]
HALO = 1  # the executor's tag for halos
CASES = {
    "synthetic": ["synthetic-hotspot", "--steps", "60", "--tiles", "32", "--set", "app.grid=[192,192]",
                  "--set", "app.work_per_cell=2000.0"],
    "sph2d": ["sph-dam-break", "--steps", "60", "--tiles", "32", "--set", "app.dx=0.007",
              "--set", "run.frame_every=0"],
}
# The water and the hot spot sit in one part of the domain: a static split would leave one rank
# idle, so the ranks start from a random placement and re-balance greedily every 10 steps.
POLICY = {"placement": "greedy", "period": 10, "initial": "birdshot"}


def sph_halo(particles: int = 64) -> dict:
    """A halo as the 2D SPH packs one: a few fields of the particles near a tile's edge."""
    rng = np.random.default_rng(0)
    return {"x": rng.random((particles, 2)), "v": rng.random((particles, 2)), "rho": rng.random(particles),
            "p": rng.random(particles), "m": np.full(particles, 0.01), "id": np.arange(particles, dtype=np.int64)}


def pickle_round_trip(objects, rank: int, message) -> None:
    """Before: the message pickled (protocol 5, arrays out of band), found with a matched probe.
    Kept here only, to measure what the buffers replaced."""
    from mpi4py import MPI

    if rank == 0:
        objects.isend(message, dest=1, tag=HALO).wait()
    while (incoming := objects.improbe(MPI.ANY_SOURCE, MPI.ANY_TAG)) is None:
        pass
    incoming.recv()
    if rank == 1:
        objects.isend(message, dest=0, tag=HALO).wait()


def buffer_round_trip(team, rank: int, message, status) -> None:
    """Now: the message as NumPy buffers (:meth:`MPITeam.post`: routing integers, then the
    payloads), decoded on arrival."""
    from mpi4py import MPI

    (task, tile, items) = message
    ints, values = (task, tile, *(d for d, _ in items)), [p for _, p in items]
    if rank == 0:
        MPI.Request.Waitall(team.post(values, 1, HALO, ints))
    while (incoming := team.comm.Improbe(MPI.ANY_SOURCE, MPI.ANY_TAG, status)) is None:
        pass
    team.receive(incoming, status)
    if rank == 1:
        MPI.Request.Waitall(team.post(values, 0, HALO, ints))


def raw_round_trip(comm, rank: int, payload: np.ndarray, buf: np.ndarray) -> None:
    """The bare array with blocking ``Send``/``Recv``: the floor."""
    if rank == 0:
        comm.Send(payload, dest=1)
        comm.Recv(buf, source=1)
    else:
        comm.Recv(buf, source=0)
        comm.Send(payload, dest=0)


def _busy_worker(stop) -> None:
    """A worker thread as in a run: compiled kernels without the GIL."""
    from shoal.replay.calibrate import spin

    while not stop.is_set():
        spin(0.0, 20000)


def pingpong(loaded: bool, repeats: int) -> None:
    """Rank 0 and 1 bounce messages; rank 0 prints one JSON line per payload with each of the
    ``repeats`` half round trips per path. ``loaded``: while a worker thread computes on each
    rank, as during a run, so the thread moving messages competes for a core."""
    import threading

    from mpi4py import MPI
    from mpi4py.util import pkl5

    from shoal.runtime.mpi import MPITeam

    team = MPITeam()
    comm, rank, status = team.comm, team.rank, MPI.Status()
    objects = pkl5.Intracomm(comm)
    stop = threading.Event()
    if loaded:
        threading.Thread(target=_busy_worker, args=(stop,), daemon=True).start()
    payloads = [(f"{size} B array", np.ones(max(size // 8, 1))) for size in SIZES]
    payloads.insert(2, ("SPH halo, 64 particles", sph_halo()))
    for label, payload in payloads[:1] if loaded else payloads:
        message = (3, 17, [(18, payload)])  # (task, source tile, [(destination tile, payload)])
        nbytes = sum(a.nbytes for a in payload.values()) if isinstance(payload, dict) else payload.nbytes
        flat = payload if isinstance(payload, np.ndarray) else np.concatenate([a.ravel().view(np.uint8)
                                                                              for a in payload.values()])
        buf = np.empty_like(flat)
        reps = max(20, min(2000, int(2e8 // nbytes // 8)))
        paths = {"pickle": lambda m=message: pickle_round_trip(objects, rank, m),
                 "buffers": lambda m=message: buffer_round_trip(team, rank, m, status),
                 "raw": lambda p=flat, b=buf: raw_round_trip(comm, rank, p, b)}
        times: dict[str, list[float]] = {name: [] for name in paths}
        for _ in range(repeats):  # the paths interleaved, so drift of the machine hits each alike
            for name, fn in paths.items():
                for _ in range(5):
                    fn()
                comm.Barrier()
                tic = time.perf_counter()
                for _ in range(reps):
                    fn()
                times[name].append((time.perf_counter() - tic) / reps / 2)
        if rank == 0:
            print(json.dumps({"payload": label, "bytes": nbytes, **times}), flush=True)
    stop.set()


def mpi_env() -> dict:
    from shoal.runtime.launch import ONE_HOST_OPEN_MPI

    return {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1", **ONE_HOST_OPEN_MPI}


def mpiexec(ranks: int, *args) -> list[str]:
    exe = Path(sys.executable).parent / "mpiexec"
    return [str(exe if exe.exists() else "mpiexec"), "--oversubscribe", "-n", str(ranks), sys.executable, *args]


def run(ranks: int | None, argv: list[str], workers: int, out: Path, *extra: str, src: Path | None = None) -> dict:
    """One run (``ranks=None``: the local executor on one node), with the shoal in ``src`` if
    given; its summary."""
    cmd = ["run", *argv, "--workers", str(workers), "--placement", POLICY["placement"], "--period",
           str(POLICY["period"]), "--initial", POLICY["initial"], "--out", str(out), *extra]
    if ranks is None:
        full = [sys.executable, "-m", "shoal", *cmd, "--nodes", "1"]
    else:
        full = mpiexec(ranks, "-m", "shoal", *cmd)
    env = mpi_env() if src is None else dict(mpi_env(), PYTHONPATH=str(src))
    subprocess.run(full, check=True, env=env, capture_output=True)
    return json.loads((out / "summary.json").read_text())


def _line(row: dict, note: str = "") -> str:
    (pickled, p_spread), (buffers, b_spread), (raw, r_spread) = (median_spread(row[k])
                                                                 for k in ("pickle", "buffers", "raw"))
    return (f"{row['payload']:<24} {row['bytes']:>9} {pickled * 1e6:>9.1f} ±{p_spread:>4.0%} {buffers * 1e6:>9.1f} "
            f"±{b_spread:>4.0%} {raw * 1e6:>9.1f} ±{r_spread:>4.0%} {pickled / buffers:>7.2f} {buffers / raw:>7.2f}"
            f" {row['bytes'] / buffers / 1e9:>7.2f}{note}")


def payload_costs(repeats: int) -> tuple[list[dict], dict]:
    """Part 1: every payload's costs by path, printed (and the smallest's under load); the rows,
    and the loaded one."""
    def bounce(flag: str) -> list[dict]:
        done = subprocess.run(mpiexec(2, __file__, flag, "--repeats", str(repeats)), check=True, env=mpi_env(),
                              capture_output=True, text=True)
        return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]

    print(f"1. cost of one message between 2 ranks (half round trip, us; median ± spread of {repeats})")
    print(f"{'payload':<24} {'bytes':>9} {'pickle':>15} {'buffers':>15} {'raw':>15} {'pickle/':>7} {'buffers/':>7}"
          f" {'buffers':>7}")
    print(f"{'':<24} {'':>9} {'(before)':>15} {'(now)':>15} {'Send/Recv':>15} {'buffers':>7} {'raw':>7} {'GB/s':>7}")
    rows = bounce("--pingpong")
    for row in rows:
        print(_line(row))
    loaded = bounce("--pingpong-loaded")[0]
    print(_line(loaded, "  while a worker computes on every rank"))
    return rows, loaded


CONFIGS = [("local 1x2", None, 2, ()), ("1 rank x 2", 1, 2, ()), ("2 ranks x 1", 2, 1, ()),
           ("2 ranks x 1, python", 2, 1, ("--executor", "python")),
           ("2 ranks x 1, no overlap", 2, 1, ("--set", "run.overlap=false")), ("2 ranks x 2", 2, 2, ())]
MODELS = {"no message CPU": 0.0, "message CPU": None}  # None: the time per message the trace measured


def one_round(argv: list[str], folder: Path, model: dict, before: Path | None = None) -> dict:
    """Every configuration run once, one after the other: per (configuration, quantity) one
    value, the 2-rank ones replayed under each of ``MODELS`` (and run with the shoal in
    ``before`` too, if given), and the ratios between them."""
    from shoal.replay import ReplayConfig, replay
    from shoal.trace import Trace

    out = {}
    for label, ranks, workers, extra in CONFIGS:
        run_folder = folder / label.replace(" ", "_").replace(",", "")
        s = run(ranks, argv, workers, run_folder, *extra)
        step = s["wall_s"] / s["steps"]
        out[label, "step_s"], out[label, "idle"] = step, 1 - s["efficiency"]
        out[label, "message_cpu_s"] = s.get("message_cpu_s", 0.0)
        trace = Trace.read(run_folder / "trace.h5")
        # The replay models a core per worker: a run with more workers than this host has
        # cores measures the host's scheduler too, and is not predicted.
        for name, message_cpu in MODELS.items() if ranks == 2 and not s["oversubscribed"] else ():
            cfg = ReplayConfig(nodes=2, cores=workers, gil="process", message_cpu_s=message_cpu, **model, **POLICY)
            predicted = replay(trace, cfg).makespan / s["steps"]
            out[label, f"predicted, {name}"], out[label, f"error, {name}"] = predicted, predicted / step - 1
        shutil.rmtree(run_folder)
        if before is not None and ranks == 2:
            b = run(ranks, argv, workers, run_folder, *extra, src=before / "src")
            out[label, "before_step_s"] = b["wall_s"] / b["steps"]
            out[label, "after / before"] = step / out[label, "before_step_s"]
            shutil.rmtree(run_folder)
    out["ranks vs threads"] = out["1 rank x 2", "step_s"] / out["2 ranks x 1", "step_s"]
    out["local vs ranks"] = out["local 1x2", "step_s"] / out["2 ranks x 1", "step_s"]
    out["overlap"] = out["2 ranks x 1, no overlap", "step_s"] / out["2 ranks x 1", "step_s"]
    out["native vs python"] = out["2 ranks x 1, python", "step_s"] / out["2 ranks x 1", "step_s"]
    return out


def runs(repeats: int, model: dict, bench: Benchmark, before: Path | None = None, baseline: str = "") -> None:
    """Parts 2-4 for each app: ``repeats`` rounds of :func:`one_round`, printed (with the
    2-rank configurations' step times of the shoal in ``before``, revision ``baseline``)."""
    with tempfile.TemporaryDirectory() as tmp:
        folders = (Path(tmp) / f"round-{k}" for k in itertools.count())
        for app, argv in CASES.items():
            print(f"\n2-4. {app}: {' '.join(argv)}; medians ± spread of {repeats} rounds")
            print(f"{'configuration':<26} {'step (ms)':>12} {'idle':>6} {'msg CPU':>8}"
                  + "".join(f"  {'predicted, ' + m + ' (ms)':>31} {'error':>12}" for m in MODELS))
            st = repeat(lambda argv=argv: one_round(argv, next(folders), model, before), repeats)
            for label, ranks, _, _ in CONFIGS:
                pred = "".join(f"  {st[label, f'predicted, {m}'].show(1e3):>31} "
                               f"{st[label, f'error, {m}'].median:>+12.1%}" for m in MODELS
                               if (label, f"predicted, {m}") in st)
                if ranks == 2 and not pred:
                    pred = f"  {'not predicted: more workers than cores':>44}"
                cpu = f"{st[label, 'message_cpu_s'].median * 1e6:>6.1f}us" if ranks else f"{'-':>8}"
                print(f"{label:<26} {st[label, 'step_s'].show(1e3):>12} {st[label, 'idle'].median:>6.1%} {cpu}{pred}")
                bench.add(app=app, configuration=label,
                          **{k[1]: v for k, v in st.items() if isinstance(k, tuple) and k[0] == label})
            print(f"2 ranks x 1 worker vs 1 rank x 2 workers: {st['ranks vs threads'].show(unit='x')} "
                  f"(local executor 1x2: {st['local vs ranks'].show(unit='x')})")
            print(f"overlap vs none: {st['overlap'].show(unit='x')}")
            print(f"2 ranks x 1, the native executor vs the Python one: {st['native vs python'].show(unit='x')}")
            for label, ranks, _, _ in CONFIGS if before is not None else ():
                if ranks == 2:
                    print(f"{label}: before ({baseline[:10]}) {st[label, 'before_step_s'].show(1e3)} ms, "
                          f"after / before {st[label, 'after / before'].show(unit='x')}")
            bench.add(app=app, **{k: v for k, v in st.items() if isinstance(k, str)})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--payloads", action="store_true", help="part 1 only: the cost of one message")
    ap.add_argument("--pingpong", action="store_true", help=argparse.SUPPRESS)  # run under mpiexec by part 1
    ap.add_argument("--pingpong-loaded", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--baseline", metavar="REV", help="also run the 2-rank configurations with this revision's shoal")
    add_arguments(ap)
    args = ap.parse_args()
    if args.pingpong or args.pingpong_loaded:
        pingpong(args.pingpong_loaded, args.repeats)
        return
    with Benchmark("mpi", args) as bench:
        rows, loaded = payload_costs(args.repeats)
        for row in rows:
            bench.add(**row)
        bench.add(**loaded, loaded=True)
        if args.payloads:
            return
        from shoal.cluster import Network
        from shoal.replay.calibrate import calibrate, machine_model

        latency = median_spread(rows[0]["buffers"])[0]
        bandwidth = rows[-1]["bytes"] / median_spread(rows[-1]["buffers"])[0]
        calibration = calibrate()
        print(f"model of this machine: latency {latency * 1e6:.0f} us, bandwidth {bandwidth / 1e9:.2f} GB/s, "
              f"executor overhead {calibration['task_overhead_s'] * 1e6:.1f} us per task and "
              f"{calibration['payload_overhead_s'] * 1e6:.2f} us per payload")
        model = {"network": Network(latency_s=latency, bandwidth_Bps=bandwidth, overhead_s=0.0),
                 **machine_model(calibration)}
        if args.baseline is None:
            runs(args.repeats, model, bench)
            return
        from common import baseline_tree

        with baseline_tree(args.baseline) as before:
            runs(args.repeats, model, bench, before, args.baseline)


if __name__ == "__main__":
    main()
