"""``shoal sweep``: many replays of one trace, in parallel processes, ranked and drawn."""

from __future__ import annotations

import itertools
import os
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..cluster import Network
from ..compilation import announce
from ..errors import ShoalError
from ..placement import all_policies, get_policy
from ..placement.trigger import parse_period
from ..trace import Trace
from .run import ReplayConfig, replay

_TRACE: Trace | None = None
_PROXY: Trace | None = None


def _load(path: str, proxy: str | None) -> None:
    global _TRACE, _PROXY
    _TRACE = Trace.read(path)
    _PROXY = Trace.read(proxy) if proxy else None


def _one(case: dict) -> dict:
    cfg = ReplayConfig(**case, proxy=_PROXY)
    r = replay(_TRACE, cfg)
    out = r.summary() | {"case": case | {"network": None}}
    t = r.trace
    out["step_times"] = np.diff(np.concatenate([[0.0], t.step_end])).tolist()
    return out


@dataclass
class SweepResult:
    """A sweep's summaries, one row per case sorted by makespan, and birdshot's predicted mean
    step time in seconds for each extra seed."""

    rows: list[dict]
    seeds: list[float]  # predicted step time of birdshot over many seeds (Figure 13)


def cases(placements, tiles_per_core, periods, nodes, cores, seed, network, model: dict | None = None) -> list[dict]:
    """One ReplayConfig's fields per case: every combination of ``placements`` (names),
    ``tiles_per_core`` and ``nodes`` counts, each dynamic policy once per rebalancing period of
    ``periods`` (steps, or ``"adaptive"``; a static one with period 0), all with ``cores`` worker threads per node, the
    placement ``seed`` and the ``network`` model. ``model`` adds the fields every case shares
    (the balancing parameters, the interpreter lock, the message CPU time, a calibrated model
    of the machine from ``shoal.replay.calibrate.machine_model``)."""
    out = []
    for name, tpc, n in itertools.product(placements, tiles_per_core, nodes):
        policy = get_policy(name)
        for period in (periods if policy.dynamic else [0]):
            out.append(dict(nodes=n, cores=cores, placement=name, period=period, tiles_per_core=tpc, seed=seed,
                            network=network, **(model or {})))
    return out


def sweep(trace_path: str | Path, placements: list[str], tiles_per_core: list[int], periods: list[int | str],
          nodes: list[int], cores: int, seed: int = 0, birdshot_seeds: int = 0, jobs: int | None = None,
          network: Network | None = None, model: dict | None = None, on_done=None,
          proxy: str | Path | None = None) -> SweepResult:
    """Replay the trace at ``trace_path`` for every combination, in ``jobs`` processes.

    Parameters
    ----------
    trace_path : str or Path
        The recorded trace.
    placements : list of str
        Placement policies' names.
    tiles_per_core, periods, nodes : list
        Tiles per worker thread, rebalancing periods (steps or ``"adaptive"``, for dynamic
        policies only) and node counts to combine (see :func:`cases`).
    cores : int
        Worker threads per modeled node.
    seed : int
        Seed of the placements.
    birdshot_seeds : int
        Also replay birdshot with seeds ``0 .. birdshot_seeds-1`` on the largest node count
        and the middle tiles per core, for the spread of its predicted step time.
    jobs : int, optional
        Processes replaying at once, at least 1 (by default one per case, at most one per CPU).
    network : Network, optional
        The modeled network (``Network()``'s defaults if omitted).
    model : dict, optional
        ``ReplayConfig`` fields every case shares.
    on_done : callable, optional
        Called with the index of each case as it finishes.
    proxy : str or Path, optional
        A trace whose loads stand in for the tiles' future loads (lookahead policies).

    Returns
    -------
    SweepResult

    Raises
    ------
    ShoalError
        For an unknown placement or period, fewer than one job, an unreadable trace, or a
        replay process that died.
    """
    if jobs is not None and jobs < 1:
        raise ShoalError(f"jobs (replay processes at once) must be at least 1, got {jobs}")
    for name in placements:
        get_policy(name)
    periods = [parse_period(p) for p in periods]
    # Read here first: a damaged trace is one line naming it, not a crash in every worker.
    Trace.read(trace_path)
    if proxy:
        Trace.read(proxy)
    todo = cases(placements, tiles_per_core, periods, nodes, cores, seed, network or Network(), model)
    extra = []
    if birdshot_seeds:
        n0, t0 = nodes[-1], tiles_per_core[len(tiles_per_core) // 2]
        extra = [dict(nodes=n0, cores=cores, placement="birdshot", period=0, tiles_per_core=t0, seed=k,
                      network=network or Network(), **(model or {})) for k in range(birdshot_seeds)]
    jobs = jobs or max(1, min(len(todo) + len(extra), os.cpu_count() or 1))
    announce("replay")  # here, once: the processes would race for the notice
    rows, seeds = [], []
    init = (str(trace_path), str(proxy) if proxy else None)
    with ProcessPoolExecutor(jobs, initializer=_load, initargs=init) as pool:
        try:
            for k, row in enumerate(pool.map(_one, todo + extra, chunksize=1)):
                if k < len(todo):
                    rows.append(row)
                else:
                    seeds.append(row["step_time_mean_s"])
                if on_done:
                    on_done(k)
        except BrokenProcessPool:
            raise ShoalError(f"a replay process of the sweep of {trace_path} died (out of memory?)") from None
    rows.sort(key=lambda r: r["makespan_s"])
    return SweepResult(rows, seeds)


def parse_list(text: str, kind=int) -> list:
    """The comma-separated values of ``text`` converted by ``kind``; an empty or malformed list
    is a ShoalError."""
    try:
        values = [kind(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ShoalError(f"expected a comma-separated list, got {text!r}") from None
    if not values:
        raise ShoalError("empty list")
    return values


def known_placements(text: str) -> list[str]:
    """The placement policies named in the comma-separated ``text`` (``all``: every registered
    one); an unknown name is a ShoalError."""
    names = [v.strip() for v in text.split(",") if v.strip()]
    if names == ["all"]:
        return sorted(all_policies())
    for n in names:
        get_policy(n)
    return names
