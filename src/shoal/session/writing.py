"""The last stages of a run: its steps, then the final state, the trace's machine model and the
summary, written last: a run folder without ``summary.json`` is an interrupted run, never
mistaken for a complete one."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..errors import ShoalError
from ..files import save_npz, write_json
from ..log import FILE_ONLY, Stages
from ..provenance import busy_warning, finish
from ..runtime.simulation import Simulation
from ..runtime.team import Team
from ..summary import summarize
from ..trace import Trace, store_machine
from .frames import check_finite, write_frame
from .record import RunRecord, shared
from .resolving import Resolved

if TYPE_CHECKING:
    from .building import Built

logger = logging.getLogger("shoal")


def simulate(sim: Simulation, steps: int) -> None:
    """Run ``sim`` to step ``steps`` counted from 0 (or until it is stopped)."""
    sim.run(steps - sim.step_count)


def write(plan: Resolved, built: Built, team: Team, stages: Stages | None = None) -> RunRecord:
    """The trace's last chunk, the final state and the summary of ``plan``'s run ``built``
    (on the first process of ``team``), in timed stages (``frames``, ``trace``, ``state``,
    ``fit``; the summary holds the times of every stage before it); a stopped run has its trace
    and checkpoint already, and stays resumable."""
    stage = stages if stages is not None else Stages()
    sc, sim, path = plan.scenario, built.sim, built.path
    with stage("frames"):
        if sc.run.frame_every and sim.stopped_at is None and sim.step_count % sc.run.frame_every:
            write_frame(sim, path / "frames", built.view)  # the last step's, when the schedule did not write it
        if built.view is not None:
            built.view.finish()
    with stage("trace"):
        sim.flush_trace()
    with stage("state"):
        final = sim.all_states() if sim.stopped_at is None else None
    if not team.is_root:
        return shared(team, None)
    built.trace.close()
    with stage("fit"):
        fit_machine(path / "trace.h5")
    if sim.stopped_at is not None:
        built.end_view("stopped")
        return shared(team, RunRecord(path, None, sim.stopped_at))
    with stage("state"):
        gathered = sim.app.gather(final, sim.tiling)
        check_finite(gathered, sim.step_count)
        save_npz(path / "state" / "final.npz", gathered)
    trace = Trace.read(path / "trace.h5")  # every step from 0, a resumed run's too
    invasive = built.invasive() if built.invasive is not None else None
    oversubscribed = built.trace.oversubscribed or (invasive is not None and invasive["oversubscribed"])
    basis = "task-cost" if oversubscribed else "wall"
    measured = finish(built.provenance)  # this part's, for a resumed run
    if measured["busy_after"]:
        logger.warning(busy_warning(measured), extra=FILE_ONLY)
    summary = {"app": sc.app, "scenario": sc.name, "placement": sc.run.placement, "period": sc.run.period,
               "workers": sc.run.workers, "executor": sim.executor.backend, "seed": sc.run.seed, "predicted": False,
               "ranks": team.size,
               "resumed_from_step": plan.checkpoint.step if plan.checkpoint else None,
               **summarize(trace, built.trace.clock, basis), "provenance": measured,
               "stages_s": {k: round(v, 6) for k, v in stage.seconds.items()}}
    if invasive is not None:
        summary["invasive"] = invasive
    if (view := built.view_counts()) is not None:
        summary["view"] = view
    write_json(path / "summary.json", summary)
    built.end_view("finished", summary=summary)
    return shared(team, RunRecord(path, summary))


def fit_machine(trace_file: Path) -> None:
    """Fit this machine's model to the tasks of a run's closed trace and store it there
    (``/machine``), for replays to price work with; a trace without tasks, or one the fit
    cannot use, keeps none (replays then use its measured costs)."""
    from ..replay.machine import fit_trace

    try:
        trace = Trace.read(trace_file)
        if not len(trace.tasks["step"]):
            return
        model = fit_trace(trace).to_dict()
    except (ShoalError, ValueError, np.linalg.LinAlgError):
        return
    store_machine(trace_file, model)
