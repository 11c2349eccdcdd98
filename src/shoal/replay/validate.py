"""``shoal validate`` (sampi §V): predictions of the replay against real runs on this machine.

Records real runs with the local executor (1 and 2 workers, several placements and policies,
the synthetic and the SPH apps), replays each trace on a model of this machine — its nodes
and cores, an in-memory "network", one interpreter lock for the process, and the executor's
overhead per task and per payload measured by :func:`~shoal.replay.calibrate.calibrate` just
before each case's runs (this host's speed drifts over minutes; every calibration is kept in
the folder) — and sets predicted against measured makespan, with the error and whether the
ranking of policies is preserved.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..files import write_json
from ..session import run_scenario
from .calibrate import IN_PROCESS, calibrate, machine_model
from .run import ReplayConfig, replay

# (app group, scenario, overrides, nodes, workers, placement, period)
CASES = [
    ("synthetic", "synthetic-hotspot", ["app.grid=[128,128]", "app.work_per_cell=400.0"], 1, 1, "sfc", 0),
    ("synthetic", "synthetic-hotspot", ["app.grid=[128,128]", "app.work_per_cell=400.0"], 1, 2, "sfc", 0),
    ("synthetic", "synthetic-hotspot", ["app.grid=[128,128]", "app.work_per_cell=400.0"], 2, 1, "geometric", 0),
    ("synthetic", "synthetic-hotspot", ["app.grid=[128,128]", "app.work_per_cell=400.0"], 2, 1, "birdshot", 0),
    ("synthetic", "synthetic-hotspot", ["app.grid=[128,128]", "app.work_per_cell=400.0"], 2, 1, "greedy", 5),
    ("sph", "sph-dam-break", ["app.dx=0.04", "run.frame_every=0"], 1, 1, "sfc", 0),
    ("sph", "sph-dam-break", ["app.dx=0.04", "run.frame_every=0"], 2, 1, "strips", 0),
    ("sph", "sph-dam-break", ["app.dx=0.04", "run.frame_every=0"], 2, 1, "refine", 20),
]
STEPS = {"synthetic": 120, "sph": 300}


@dataclass
class Validation:
    """Predicted against measured makespans of every validation case.

    Parameters
    ----------
    rows : list of dict
        One per case: ``group`` (``"synthetic"`` or ``"sph"``), ``scenario``, ``nodes``,
        ``workers``, ``label`` (placement, and ``/period`` for a dynamic policy), the medians
        ``measured_s`` and ``predicted_s`` (s), ``error`` (predicted / measured - 1), ``runs``,
        ``measured_spread`` (range of the measured makespans over their median) and the
        case's ``calibration``.
    calibration : dict
        The first case's calibration (:func:`~shoal.replay.calibrate.calibrate`).
    """

    rows: list[dict]
    calibration: dict  # the first case's; every case's is in its row

    def ranking_preserved(self, group: str, workers: int = 1) -> bool:
        """Whether the predictions order the multi-node cases of ``group`` run with ``workers``
        threads per node as the measurements do.

        Two cases whose measured makespans differ by less than their runs scatter (and at
        least 1%) are a tie: the measurement does not rank them, so any predicted order will do.
        """
        rows = [r for r in self.rows if r["group"] == group and r["workers"] == workers and r["nodes"] > 1]
        for a in rows:
            for b in rows:
                tie = max(a["measured_spread"], b["measured_spread"], 0.01)
                if a["measured_s"] < b["measured_s"] * (1 - tie) and not a["predicted_s"] < b["predicted_s"]:
                    return False
        return True


def validate(out: Path, quick: bool = False, repeats: int = 3,
             on_case: Callable[[str], None] | None = None) -> Validation:
    """Record every case ``repeats`` times; compare the medians of measured and predicted
    makespans (this machine is shared: single runs scatter by several percent).

    Parameters
    ----------
    out : Path
        Folder for the run folders of every case, ``calibration.json`` and ``validation.json``
        (created if needed).
    quick : bool
        A quarter of the steps and half the calibration tasks: a rough check in less time.
    repeats : int
        Runs of each case, at least 1.
    on_case : callable, optional
        Called with a one-line label of each case (scenario, nodes x workers, policy) before
        it runs: progress for the command line.

    Returns
    -------
    Validation
        One row per case, as written to ``validation.json``.
    """
    out.mkdir(parents=True, exist_ok=True)
    rows, calibrations = [], []
    for k, (group, scenario, overrides, nodes, workers, placement, period) in enumerate(CASES):
        label = placement + (f"/{period}" if period else "")
        if on_case:
            on_case(f"{scenario} {nodes}x{workers} {label}")
        cal = calibrate(tasks=1500 if quick else 3000, nodes=nodes, workers=workers)
        calibrations.append(cal)
        steps = STEPS[group] // (4 if quick else 1)
        measured, predicted = [], []
        for r in range(repeats):
            rec = run_scenario(scenario, steps=steps, tiles=16 if group == "sph" else 64, nodes=nodes,
                               workers=workers, placement=placement, period=period or None, set=overrides,
                               out=out / f"{k:02d}-{scenario}-{nodes}x{workers}-{label.replace('/', '-')}-{r}")
            cfg = ReplayConfig(nodes=nodes, cores=workers, placement=placement, period=period, network=IN_PROCESS,
                               gil="shared", **machine_model(cal))
            predicted.append(replay(rec.trace, cfg).makespan)
            measured.append(rec.summary["wall_s"])
        m, p = float(np.median(measured)), float(np.median(predicted))
        rows.append({"group": group, "scenario": scenario, "nodes": nodes, "workers": workers, "label": label,
                     "measured_s": m, "predicted_s": p, "error": p / m - 1, "runs": repeats,
                     "measured_spread": float(np.ptp(measured) / m), "calibration": cal})
    write_json(out / "calibration.json", calibrations)
    result = Validation(rows, calibrations[0])
    write_json(out / "validation.json", {"rows": rows, "calibration": calibrations})
    return result
