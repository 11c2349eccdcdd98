"""What a run takes besides its scenario, declared once (:mod:`shoal.options`).

:class:`SimulationOptions` are those of :func:`shoal.simulation` (a simulation the caller steps),
:class:`RunOptions` add those of a whole run (:func:`shoal.run`, ``shoal run``). With the
``[run]`` table's fields that have a flag (:class:`shoal.config.RunParams`) they are the flags of
``shoal run`` and the keywords of both functions, whose signatures and docstrings are made from
these declarations.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import RunParams
from ..errors import ShoalError
from ..options import assign, at_least, check, declared, option


@dataclass
class SimulationOptions:
    """The options of a simulation besides its scenario's ``[run]`` table."""

    set: tuple[str, ...] = option((), "override any scenario field, e.g. app.grid=[128,128] (repeatable)",
                                  metavar="KEY=VALUE")
    lb: tuple[str, ...] = option((), "a balancing policy's parameter, e.g. refine.tolerance=1.02 (repeatable; wins "
                                     "over the scenario's [balance] table)", metavar="POLICY.KEY=VALUE")
    out: str | Path | None = option(None, "the run folder; refused when it is a file, in use, or holds anything",
                                    unset="a new folder runs/<scenario>-<placement>-<time>")
    allow_large: bool = option(False, "run even when the estimated memory or worker threads exceed this machine's")
    team: Any = option(None, "the processes running it", flag=False,
                       unset="one process, or one MPI rank per node under mpiexec")


@dataclass
class RunOptions(SimulationOptions):
    """The options of a whole run besides its scenario's ``[run]`` table."""

    resume: str | Path | None = option(None, "continue that run folder from its latest checkpoint (nodes, workers "
                                             "and placement may change)", metavar="RUN_DIR")
    invasive: str | None = option(None, "start a resource manager (workload or scalability) and let each node's "
                                        "worker threads follow the cores it gives the node", metavar="POLICY")
    cores: int | None = option(None, "the started manager's pool (more than this machine's: a logical pool, threads "
                                     "not pinned, the run marked oversubscribed)", metavar="R", check=at_least(1),
                               unset="this machine's cores")
    manager: str | Path | None = option(None, "join the running resource manager this JSON file names (address, "
                                              "authkey, policy)", metavar="FILE")
    invade_every: int | None = option(None, "steps between a node's invades", metavar="K", check=at_least(1),
                                      unset="1")
    invade_blocking: bool = option(False, "each invade waits for the manager's answer (the blocking variant) "
                                          "instead of polling for it at the next step boundary", flag=False)
    view: str | Path | None = option(None, "feed the running viewer listening on this Unix socket (shoal view)",
                                     flag="--view-socket", metavar="PATH", group="view")
    view_every: int | None = option(None, "steps between the live view's frames", metavar="K", check=at_least(1),
                                    unset="run.frame_every, else about 100 frames, fewer when they would take "
                                          "over 3% of the run's time")
    on_step: Callable[[int], None] | None = option(None, "called with k as step k finishes", flag=False)


def keyword_names(cls: type) -> list[str]:
    """The keywords a function taking ``cls``'s options accepts: the ``[run]`` fields with a flag,
    then ``cls``'s fields."""
    return [f.name for f, opt in declared(RunParams) if opt.flag] + [f.name for f, _ in declared(cls)]


def split(keywords: dict[str, Any], cls: type) -> tuple[dict[str, Any], Any]:
    """``keywords`` as the ``[run]`` table's overrides (those not None) and an instance of the
    options class ``cls``, each value checked against its declared type and check.

    Raises
    ------
    ShoalError
        For a keyword ``cls`` does not take (the message lists those it takes), or a value of
        the wrong type or range.
    """
    run_fields = {f.name for f, opt in declared(RunParams) if opt.flag}
    own = {f.name for f in dataclasses.fields(cls)}
    unknown = set(keywords) - run_fields - own
    if unknown:
        raise ShoalError(f"unknown option(s) {', '.join(sorted(unknown))}; known: "
                         f"{', '.join(keyword_names(cls))}")
    overrides = {k: v for k, v in keywords.items() if k in run_fields and v is not None}
    options = cls()
    for name in own & set(keywords):
        value = keywords[name]
        if name in ("set", "lb") and isinstance(value, str):
            value = (value,)  # one assignment given as a string
        assign(options, name, value, name)
    check(options)
    return overrides, options
