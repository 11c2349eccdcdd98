"""One run from scenario to run folder, in timed stages: resolve → build → simulate → write.

:mod:`~.resolving`
    the scenario with the caller's overrides, the placement policy and, when resuming, the
    checkpoint to continue from;
:mod:`~.building`
    the app, the cluster, the tiling, the first owner table, the run folder and the
    :class:`~shoal.runtime.simulation.Simulation` with its callbacks (frames, balancing,
    checkpoints, worker resizes, the live view, the resource manager);
``simulate``
    the steps;
:mod:`~.writing`
    the final state, the trace's machine model and the summary.

Each stage, and each part of one, is timed: ``run.log`` ends with a line of them all and
``summary.json`` keeps them (``stages_s``). What a run takes besides its scenario is declared
once in :mod:`~.options`, with the ``[run]`` table's fields (:class:`shoal.config.RunParams`):
the command line's flags, :func:`run_scenario`'s and :func:`simulation`'s keywords, their
signatures and their docstrings are made from those declarations.

A run folder holds ``config.toml`` (the resolved scenario), ``trace.h5``, ``state/final.npz``
(the gathered global state), ``frames/`` for the app's frames, ``summary.json`` and
``run.lock``. The summary is written last: a folder without it is an interrupted run, never
mistaken for a complete one. A run stopped on request (Ctrl-C, ``request_stop``) leaves a
checkpoint and no summary, and ``--resume`` continues it. A run folder belongs to one run:
:func:`shoal.rundir.claim_folder` refuses one it may not write into, before anything is
written, and locks it for the run's life.
"""

from __future__ import annotations

import logging
from typing import Any

from ..config import RunParams, Scenario
from ..errors import ShoalError
from ..log import FILE_ONLY, Stages
from ..options import declared, document, keywords, parameters_section
from ..resources import check_threads
from ..runtime.launch import current_team
from ..runtime.simulation import Simulation
from .building import TRACE_CHUNK_STEPS, Built, build
from .options import RunOptions, SimulationOptions, split
from .record import RunRecord, open_run
from .resolving import LOOKAHEAD, Resolved, resolve, resumable
from .writing import simulate, write

__all__ = ["LOOKAHEAD", "TRACE_CHUNK_STEPS", "Built", "Resolved", "RunOptions", "RunRecord", "SimulationOptions",
           "build", "open_run", "resolve", "resumable", "run_scenario", "simulate", "simulation", "write"]

logger = logging.getLogger("shoal")


def run_scenario(scenario: str | Scenario, **options: Any) -> RunRecord:
    """Run a scenario and write its run folder.

    Keywords of the ``[run]`` table override the scenario's, then ``set`` applies
    ``section.key=value`` assignments and ``lb`` ``policy.key=value`` ones to the balancing
    policies' parameters. ``resume`` continues the run in that folder from its latest
    checkpoint (``scenario`` is then ignored; nodes, workers and placement may change).

    Under MPI (``team``, or a program started by ``mpiexec``) the nodes are the ranks; rank 0
    writes the run folder and every rank returns the same record. Under the invasive resource
    manager (``invasive`` starts one, ``manager`` joins a running one) every node is an
    application of it and its worker threads follow the cores it holds
    (:mod:`shoal.invasive.join`); the scenario's worker count only sizes the tiling.

    {parameters}

    Returns
    -------
    RunRecord
        The run folder and its summary (``summary`` is ``None`` for a stopped run).

    Raises
    ------
    ShoalError
        For any invalid scenario, keyword, override, folder or checkpoint, before anything is
        written.
    """
    from ..invasive.join import check_invasive, resource_manager

    overrides, opts = split(options, RunOptions)
    team = opts.team if opts.team is not None else current_team()
    stage = Stages()
    with stage("resolve"):
        check_invasive(opts.invasive, opts.cores, opts.manager, opts.invade_every)
        if opts.invasive is not None and opts.cores is not None:
            check_threads(opts.cores, opts.allow_large)  # the worker threads follow the pool's cores
        plan = resolve(scenario, overrides, opts, team, opts.resume)
        if (opts.invasive or opts.manager) and plan.scenario.run.resize:
            raise ShoalError("run.resize and the resource manager would both set the worker threads: give one")
        view, view_every = team.agree((str(opts.view) if opts.view is not None else None, opts.view_every))
    with resource_manager(team, opts.invasive, opts.cores, opts.manager) as address:
        with stage("build"):
            built = build(plan, team, manager=address, invade_every=opts.invade_every or 1,
                          invade_blocking=opts.invade_blocking, view=view, view_every=view_every, stages=stage)
        try:
            if opts.on_step is not None:
                on_step = opts.on_step
                built.sim.add_measurement(lambda record: on_step(record.step))
            with stage("simulate"):
                simulate(built.sim, plan.scenario.run.steps)
            with stage("write"):
                record = write(plan, built, team, stages=stage)
            if team.is_root:
                logger.info("stages: %s", stage.line(), extra=FILE_ONLY)
            return record
        except BaseException as exc:
            built.end_view("failed", str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)
            raise
        finally:
            built.close()


def simulation(scenario: str | Scenario, **options: Any) -> Simulation:
    """A :class:`~shoal.runtime.simulation.Simulation` of a scenario, ready to step.

    Its run folder holds the configuration, and the frames and checkpoints the scenario asks for
    as the steps go; call ``close()`` when done (its trace, ``run.log`` and folder lock end
    with it).

    {parameters}

    Returns
    -------
    Simulation
        At the scenario's first step.

    Raises
    ------
    ShoalError
        For any invalid scenario, keyword, override or folder, before anything is written.
    """
    overrides, opts = split(options, SimulationOptions)
    team = opts.team if opts.team is not None else current_team()
    built = build(resolve(scenario, overrides, opts, team), team)
    built.sim.at_close(built.release)
    return built.sim


def _keywords(cls: type) -> tuple[list, str]:
    """The keyword parameters and the docstring's *Parameters* section of a function taking the
    ``[run]`` fields with a flag and ``cls``'s options."""
    unflagged = [f.name for f, opt in declared(RunParams) if not opt.flag]
    params = keywords(RunParams, exclude=unflagged) + keywords(cls)
    first = ("scenario : str or Scenario\n"
             "    A built-in scenario's name, a TOML file, or a loaded scenario.")
    section = parameters_section(RunParams, exclude=unflagged, first=first) + "\n" + "\n".join(
        parameters_section(cls).splitlines()[2:])
    return params, section


document(run_scenario, *_keywords(RunOptions))
document(simulation, *_keywords(SimulationOptions))
