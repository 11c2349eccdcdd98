"""How close a replay on a model of this machine comes to the run it replays.

One worker, so a run's measured task costs and its wall time come from the same run and the
model adds only the executor's overhead, measured just before by ``shoal calibrate``'s
measurement. Five rounds (a run, a calibration, the replay), each judged by its own ratio
predicted / measured; the median and the spread are printed, with the share of each round's
wall time the process spent on a CPU (a busy host lowers it: the run waited, the model did not).

Run: ``python bench/predict_self.py [--repeat 5]``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from common import REPEATS, host, median_spread
from shoal.cluster import Network
from shoal.replay import ReplayConfig, replay
from shoal.replay.calibrate import calibrate, machine_model
from shoal.session import run_scenario

SCENARIO = dict(scenario="synthetic-ramp", steps=30, tiles=16, nodes=1, workers=1, set=["app.grid=[128,64]"])


def round_trip(out: Path) -> tuple[float, float, float]:
    """Measured and predicted wall time of one run, and the share of it spent on a CPU."""
    cpu, wall = time.process_time(), time.perf_counter()
    rec = run_scenario(SCENARIO["scenario"], out=out, **{k: v for k, v in SCENARIO.items() if k != "scenario"})
    model = machine_model(calibrate(tasks=1000))
    on_cpu = (time.process_time() - cpu) / (time.perf_counter() - wall)
    predicted = replay(rec.trace, ReplayConfig(nodes=1, cores=1, placement="sfc", network=Network(1e-6, 5e9, 0.0),
                                               **model))
    return rec.summary["wall_s"], predicted.makespan, on_cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=REPEATS)
    args = ap.parse_args()
    print(host())
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(args.repeat):
            rows.append(round_trip(Path(tmp) / f"run-{k}"))
            m, p, c = rows[-1]
            print(f"round {k + 1}: measured {m:.3f} s, predicted {p:.3f} s, ratio {p / m:.3f}, on CPU {c:.0%}")
    ratio, spread = median_spread([p / m for m, p, _ in rows])
    print(f"predicted / measured: median {ratio:.3f} (spread {spread:.1%}) over {args.repeat} rounds of "
          f"{SCENARIO['scenario']}, {SCENARIO['tiles']} tiles, 1 x 1")


if __name__ == "__main__":
    main()
