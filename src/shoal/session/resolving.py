"""The first stage of a run: the scenario with the caller's overrides, its placement policy and,
when resuming, the checkpoint to continue from: everything checked, nothing written yet."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..apps import get_app
from ..config import Scenario, load_scenario, parse_toml, scenario_from_dict
from ..errors import ShoalError
from ..placement import PlacementPolicy, get_policy
from ..resources import check_run
from ..runtime.checkpoint import Checkpoint
from ..runtime.team import Team
from .options import SimulationOptions

LOOKAHEAD = {"oracle"}  # needs the true loads of the future: replay only


@dataclass
class Resolved:
    """What :func:`resolve` settles: the scenario, its policy and where the run starts and writes."""

    scenario: Scenario
    policy: PlacementPolicy
    checkpoint: Checkpoint | None
    resume: Path | None
    out: Path | None


def resolve(scenario: str | Scenario, overrides: dict[str, Any], options: SimulationOptions, team: Team,
            resume: str | Path | None = None) -> Resolved:
    """The scenario with every override applied and checked, and where the run starts.

    Parameters
    ----------
    scenario : str or Scenario
        The scenario's name or file, or a loaded one (ignored when ``resume`` is given).
    overrides : dict
        Typed values of ``[run]`` fields (``steps``, ``nodes``, ``period``, ...).
    options : SimulationOptions
        ``set`` and ``lb`` assignments, the folder ``out`` (``resume``'s own by default when
        resuming) and ``allow_large``.
    team : Team
        The processes of the run; under MPI the nodes are its ranks.
    resume : str or Path, optional
        A run folder to continue from its latest checkpoint.

    Raises
    ------
    ShoalError
        For an invalid override, a policy that cannot run live, a dynamic policy without a
        period, a checkpoint past the last step, or a run too large for the machine.
    """
    checkpoint, out = None, options.out
    if resume is not None:
        resume = Path(resume)
        scenario = resumable(resume)
        checkpoint = Checkpoint.latest(resume / "state")
        out = resume if out is None else out
    sc = load_scenario(scenario) if isinstance(scenario, str) else copy.deepcopy(scenario)
    overrides = dict(overrides)
    if "tiles_per_core" in overrides and "tiles" not in overrides:
        overrides["tiles"] = 0  # a count of tiles per core means: derive the count
    if team.distributed:
        if overrides.get("nodes", team.size) != team.size:
            raise ShoalError(f"under mpiexec there is one node per rank: --nodes {overrides['nodes']} but "
                             f"{team.size} ranks")
        overrides["nodes"] = team.size
    sc.override_run(overrides)
    sc.override(options.set)  # after the flags (a --set wins), then every field is validated
    sc.override_balance(options.lb)
    policy = get_policy(sc.run.placement)
    if policy.name in LOOKAHEAD:
        raise ShoalError(f"placement {policy.name!r} needs the loads of steps not yet run: use it in `shoal replay` "
                         "(or pick another dynamic policy)")
    if policy.dynamic and sc.run.period == 0:
        raise ShoalError(f"placement {policy.name!r} is dynamic: give --period (steps between rebalancing)")
    if checkpoint is not None and checkpoint.step >= sc.run.steps:
        raise ShoalError(f"the checkpoint is at step {checkpoint.step}, the run has only {sc.run.steps} steps")
    check_run(get_app(sc.app), sc.params, _worker_threads(sc, team), allow_large=options.allow_large)
    return Resolved(sc, policy, checkpoint, resume, Path(out) if out is not None else None)


def _worker_threads(sc: Scenario, team: Team) -> int:
    """The most worker threads this process runs at once over the run's resize schedule (under
    MPI, its own node's; else every in-process node's)."""
    r = sc.run
    steps = [0] + [s for s, _, _ in r.resize]
    per_step = [r.workers_at(s) for s in steps]
    return max(cores[team.rank] if team.distributed else sum(cores) for cores in per_step)


def resumable(run: Path) -> Scenario:
    """The scenario of a run folder that can be resumed (it has a checkpoint)."""
    if not (run / "config.toml").exists():
        raise ShoalError(f"{run} is not a run folder (no config.toml)")
    Checkpoint.latest_path(run / "state")
    try:
        text = (run / "config.toml").read_text()
    except (UnicodeDecodeError, OSError) as exc:
        raise ShoalError(f"{run / 'config.toml'} cannot be read: {exc}") from None
    return scenario_from_dict(parse_toml(text, str(run / "config.toml")), str(run))
