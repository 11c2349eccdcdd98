"""How well a replay predicts the machine that recorded the trace, with no flags but the cluster.

For every case a short run is recorded (``shoal run``; under ``mpiexec`` for the MPI case) and
replayed with ``--nodes N --cores W`` only: the trace's own machine model prices its tasks and
brings the executor's constants and the interpreter lock it recorded. Each case runs
``--repeats`` times (default 5); the table gives the median measured and predicted mean step
times with their spread (max - min over median), the error (the median over the runs of each
run's predicted / measured - 1, so that a run on a slower moment is judged by its own replay),
and, where the run is lock-dominated, the interval the replay gives instead of one number.

Cases: the 2D dam break at ``app.dx=0.005`` (about 80k particles) with 16, 64 and 256 tiles on
1 x 1, 1 x 2 and 2 x 1 in-process nodes; the synthetic hot spot on the same three; both on
2 x 1 under ``mpiexec``.

``--executor native`` records the runs with the native executor instead (of the MPI cases the
synthetic one: on ranks the native executor runs apps whose state keeps its size); its traces
carry their own executor constants, which the replay reads.

Run: ``python bench/predict.py [--repeats 5] [--steps 40] [--quick] [--mpi] [--executor python|native] [--json FILE]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from common import Benchmark, add_arguments, median_spread
from shoal.cluster import Network
from shoal.replay import ReplayConfig, replay
from shoal.runtime.launch import ONE_HOST_OPEN_MPI
from shoal.trace import Trace

SPH = ("sph-dam-break", ["app.dx=0.005", "run.frame_every=0"])
SYNTHETIC = ("synthetic-hotspot", ["run.frame_every=0"])
SHAPES = ((1, 1), (1, 2), (2, 1))
NETWORK = Network(latency_s=5e-6, bandwidth_Bps=1.25e9, overhead_s=1e-6)  # shoal replay's defaults
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1", **ONE_HOST_OPEN_MPI}


def cases(quick: bool, mpi: bool = False) -> list[dict]:
    """Every (scenario, tiles, nodes, workers, ranks) to record (``mpi``: the cases under
    ``mpiexec`` only)."""
    out = [dict(scenario=SPH, tiles=t, nodes=n, workers=w, ranks=1) for t in (16, 64, 256) for n, w in SHAPES]
    out += [dict(scenario=SYNTHETIC, tiles=64, nodes=n, workers=w, ranks=1) for n, w in SHAPES]
    out += [dict(scenario=SPH, tiles=64, nodes=2, workers=1, ranks=2),
            dict(scenario=SYNTHETIC, tiles=64, nodes=2, workers=1, ranks=2)]
    return [c for c in out if (c["tiles"] == 64 or not quick) and (c["ranks"] > 1 or not mpi)]


def record(case: dict, steps: int, out: Path, executor: str = "python") -> float:
    """Record one run of ``case`` on ``executor``; its measured mean step time (s)."""
    name, sets = case["scenario"]
    args = ["-m", "shoal", "run", name, "--steps", str(steps), "--tiles", str(case["tiles"]), "--nodes",
            str(case["nodes"]), "--workers", str(case["workers"]), "--placement", "sfc", "--out", str(out),
            "--executor", executor]
    for s in sets:
        args += ["--set", s]
    cmd, env = [sys.executable, *args], dict(os.environ)
    if case["ranks"] > 1:
        mpiexec = Path(sys.executable).parent / "mpiexec"
        cmd = [str(mpiexec) if mpiexec.exists() else "mpiexec", "--oversubscribe", "-n", str(case["ranks"]), *cmd]
        env.update(MPI_ENV)
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if done.returncode:
        raise RuntimeError((done.stderr.strip().splitlines() or ["failed"])[-1])
    return json.loads((out / "summary.json").read_text())["step_time_mean_s"]


def predict(trace: Trace, case: dict) -> tuple[float, list | None, str]:
    """What ``shoal replay TRACE --nodes N --cores W`` predicts: mean step time, the interval of
    a lock-dominated run (or None) and the model's fit line."""
    s = replay(trace, ReplayConfig(nodes=case["nodes"], cores=case["workers"], network=NETWORK)).summary()
    return s["step_time_mean_s"], s["lock_interval_step_s"], s["machine_fit"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--quick", action="store_true", help="only the 64-tile cases")
    ap.add_argument("--mpi", action="store_true", help="only the cases under mpiexec")
    ap.add_argument("--executor", choices=("python", "native"), default="python", help="the backend recording the runs")
    add_arguments(ap)
    args = ap.parse_args()
    errors = []
    with Benchmark("predict", args) as bench, tempfile.TemporaryDirectory() as tmp:
        print(f"{'case':<34} {'measured ms':>16} {'predicted ms':>16} {'error':>7}  lock interval (ms)")
        # (SPH's state changes size: on ranks it runs on the Python executor only)
        runs = [c for c in cases(args.quick, args.mpi)
                if args.executor == "python" or c["ranks"] == 1 or c["scenario"] != SPH]
        for k, case in enumerate(runs):
            measured, predicted, interval = [], [], None
            label = (f"{case['scenario'][0]} {case['tiles']} tiles {case['nodes']}x{case['workers']}"
                     + (" mpi" if case["ranks"] > 1 else ""))
            try:
                for r in range(args.repeats):
                    out = Path(tmp) / f"case{k}-{r}"
                    measured.append(record(case, args.steps, out, args.executor))
                    p, interval, fit = predict(Trace.read(out), case)
                    predicted.append(p)
            except RuntimeError as exc:
                print(f"{label:<34} the run failed: {exc}", flush=True)
                continue
            m, ms = median_spread(measured)
            p, ps = median_spread(predicted)
            error = float(np.median(np.array(predicted) / np.array(measured) - 1))
            errors.append(error)
            lock = f"{interval[0] * 1e3:.1f}..{interval[1] * 1e3:.1f}" if interval else "-"
            print(f"{label:<34} {m * 1e3:>8.2f} ({ms:>4.0%}) {p * 1e3:>8.2f} ({ps:>4.0%}) {error:>+7.1%}  {lock}",
                  flush=True)
            print(f"    {fit}", flush=True)
            bench.add(case=label, measured_s=measured, predicted_s=predicted, error=error, lock_interval_s=interval)
        within = sum(abs(e) <= 0.15 for e in errors)
        print(f"{within} of {len(errors)} cases within 15%")


if __name__ == "__main__":
    main()
