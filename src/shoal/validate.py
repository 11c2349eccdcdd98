"""``shoal validate`` (sampi §V): predictions of the replay against real runs on this machine.

Records real runs with the local executor (1 and 2 workers, several placements and policies,
the synthetic and the SPH apps), replays each trace on a model of this machine — its nodes
and cores, an in-memory "network", one interpreter lock for the process, and the executor's
overhead per task and per payload measured by :func:`~shoal.replay.calibrate.calibrate` just
before each case's runs (this host's speed drifts over minutes; every calibration is kept in
the folder) — and sets predicted against measured makespan, with the error and whether the
ranking of policies is preserved.

The protocol is the benchmarks' (sampi §V runs every configuration several times): each case
runs ``repeats`` times (default 5) and is quoted as the medians of its measured and predicted
makespans with their spreads (max - min over the median); ``validation.json`` keeps every run's
figures and the provenance of the whole validation (:mod:`shoal.provenance`: the host, its
load before and after, the versions), whose ``busy`` says whether other programs loaded the
host meanwhile.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .errors import ShoalError
from .files import write_json
from .provenance import finish, record
from .replay.calibrate import IN_PROCESS, calibrate, machine_model
from .replay.run import ReplayConfig, replay
from .session import run_scenario
from .trace import Trace

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
REPEATS = 5
# The recorded nodes are threads of one process: one interpreter lock for all of them.
LOCK = "shared"
COLUMNS = ("scenario", "nodes x workers", "placement", "predicted (s)", "measured (s)", "error",
           "rank meas. / pred.", "ranking held")


@dataclass
class Validation:
    """Predicted against measured makespans of every validation case.

    Parameters
    ----------
    rows : list of dict
        One per case: ``group`` (``"synthetic"`` or ``"sph"``), ``scenario``, ``nodes``,
        ``workers``, ``label`` (placement, and ``/period`` for a dynamic policy), the medians
        ``measured_s`` and ``predicted_s`` (s), ``error`` (predicted / measured - 1), ``runs``,
        ``measured_spread`` and ``predicted_spread`` (range of the makespans over their
        median), every run's ``measured_runs_s`` and ``predicted_runs_s``, and the case's
        ``calibration``.
    calibration : dict
        The first case's calibration (:func:`~shoal.replay.calibrate.calibrate`).
    provenance : dict, optional
        Where and when the validation ran (:func:`shoal.provenance.finish`).
    """

    rows: list[dict]
    calibration: dict  # the first case's; every case's is in its row
    provenance: dict | None = None

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

    def ranked_sets(self) -> list[tuple[str, int]]:
        """The ``(group, workers)`` pairs :meth:`ranking_preserved` judges: those with two or
        more multi-node cases, in the order of the rows."""
        keys = [(r["group"], r["workers"]) for r in self.rows if r["nodes"] > 1]
        return [k for k in dict.fromkeys(keys) if keys.count(k) > 1]

    def ranks(self, row: dict) -> tuple[int, int] | None:
        """``row``'s place among the cases it is ranked with, by measured and by predicted
        makespan (1: the fastest); None for a case :meth:`ranking_preserved` does not rank.

        Parameters
        ----------
        row : dict
            One of :attr:`rows`.
        """
        if row["nodes"] == 1 or (row["group"], row["workers"]) not in self.ranked_sets():
            return None
        peers = [r for r in self.rows if r["group"] == row["group"] and r["workers"] == row["workers"]
                 and r["nodes"] > 1]
        return tuple(1 + sum(r[key] < row[key] for r in peers) for key in ("measured_s", "predicted_s"))


def table(result: Validation) -> list[tuple[str, ...]]:
    """The rows of the validation's table, one per case, under :data:`COLUMNS`: predicted and
    measured medians with their spreads, the error, the case's rank by measured and by
    predicted makespan among the cases it is ranked with, and whether that ranking held.

    Parameters
    ----------
    result : Validation
        What :func:`validate` returned (or read back from ``validation.json``).
    """
    out = []
    for r in result.rows:
        ranks = result.ranks(r)
        held = "-" if ranks is None else "yes" if result.ranking_preserved(r["group"], r["workers"]) else "no"
        out.append((r["scenario"], f"{r['nodes']}x{r['workers']}", r["label"],
                    f"{r['predicted_s']:.3f} ±{r['predicted_spread']:.0%}",
                    f"{r['measured_s']:.3f} ±{r['measured_spread']:.0%}", f"{r['error']:+.1%}",
                    "-" if ranks is None else f"{ranks[0]} / {ranks[1]}", held))
    return out


def predict(trace: Trace, nodes: int, workers: int, placement: str, period: int, calibration: dict) -> float:
    """The replay's makespan (s) of ``trace`` on the machine that recorded it, modeled from
    ``calibration``: ``nodes`` x ``workers`` in one process (an in-memory network, one
    interpreter lock) under ``placement`` re-placing every ``period`` steps (0: never).

    Parameters
    ----------
    trace : Trace
        The recorded run.
    nodes, workers : int
        The cluster it ran on.
    placement : str
        Its placement policy.
    period : int
        Its balancing period.
    calibration : dict
        This machine's executor overheads (:func:`~shoal.replay.calibrate.calibrate`).
    """
    cfg = ReplayConfig(nodes=nodes, cores=workers, placement=placement, period=period, network=IN_PROCESS,
                       gil=LOCK, **machine_model(calibration))
    return replay(trace, cfg).makespan


def validate(out: Path, quick: bool = False, repeats: int = REPEATS,
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
        One row per case and the validation's provenance, as written to ``validation.json``.
    """
    if repeats < 1:
        raise ShoalError(f"--repeats {repeats}: each case needs at least 1 run")
    out.mkdir(parents=True, exist_ok=True)
    start = record()
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
            predicted.append(predict(rec.trace, nodes, workers, placement, period, cal))
            measured.append(rec.summary["wall_s"])
        m, p = float(np.median(measured)), float(np.median(predicted))
        rows.append({"group": group, "scenario": scenario, "nodes": nodes, "workers": workers, "label": label,
                     "measured_s": m, "predicted_s": p, "error": p / m - 1, "runs": repeats,
                     "measured_spread": float(np.ptp(measured) / m), "predicted_spread": float(np.ptp(predicted) / p),
                     "measured_runs_s": measured, "predicted_runs_s": predicted, "calibration": cal})
    write_json(out / "calibration.json", calibrations)
    result = Validation(rows, calibrations[0], finish(start))
    write_json(out / "validation.json", {"rows": rows, "calibration": calibrations, "provenance": result.provenance})
    return result
