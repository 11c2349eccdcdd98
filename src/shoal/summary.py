"""The headline numbers of a run, measured or predicted, computed from its trace.

One function for both, so a prediction and a measurement are summed up the same way. The
efficiency is busy core time over the core time the run held: wall time (or, for a replay,
the modeled makespan) step by step times the worker threads every node held at that step.
When the run had more threads than the machine has cores, wall time means little and the
basis is the tasks' own CPU costs instead (``task-cost``: the busiest node's load per step).
A node absent from some steps (0 worker threads there: a run resumed on another number of
nodes) holds no core time and counts in no LIF over those steps.
"""

from __future__ import annotations

import numpy as np

from .trace import Trace

BASES = ("wall", "task-cost", "model")


def summarize(trace: Trace, wall_s: float, basis: str) -> dict:
    """Summary fields of ``trace`` run (or predicted) in ``wall_s`` seconds; ``basis`` is
    ``wall`` (measured), ``task-cost`` (measured, oversubscribed) or ``model`` (predicted)."""
    if basis not in BASES:
        raise ValueError(f"unknown efficiency basis {basis!r}")
    load = trace.node_load()  # (steps, nodes): CPU seconds per core
    cores = trace.cores_per_step()  # (steps, nodes)
    held = cores.sum(axis=1)
    steps = load.shape[0]
    busy = float(trace.tasks["cost"].sum())
    lifs = trace.step_lif()  # over the nodes present at each step
    modelled_step = load.max(axis=1)  # perfect packing inside a node, no waiting
    if basis == "task-cost":
        core_s = float((modelled_step * held).sum())
    else:
        # Each step's share of the wall time, the last one up to its end (restarts included).
        ends = np.asarray(trace.step_end, dtype=np.float64)
        spans = np.diff(np.concatenate([[0.0], ends[:-1], [max(wall_s, ends[-1])]])) if len(ends) else np.zeros(0)
        core_s = float((spans * held).sum()) if len(spans) == steps else wall_s * float(held.mean())
    efficiency = busy / core_s if core_s > 0 else 0.0
    owner = trace.owner_at(int(trace.steps[0]))
    out = {
        "steps": int(steps),
        "tiles": int(trace.tiling.ntiles),
        "nodes": int(trace.cluster.nodes),
        "cores": list(trace.cluster.cores),
        "tiles_per_core": trace.tiling.ntiles / trace.cluster.total_cores,
        "wall_s": float(wall_s),
        "step_time_mean_s": float(wall_s / steps),
        "step_time_model_s": float(modelled_step.mean()),
        "busy_s": busy,
        "core_s": core_s,
        "lif_mean": float(np.mean(lifs)),
        "lif_max": float(np.max(lifs)),
        "efficiency": float(efficiency),
        "efficiency_basis": basis,
        "idle_fraction": float(1.0 - efficiency),
        "oversubscribed": basis == "task-cost",
        "tiles_per_node": np.bincount(owner, minlength=trace.cluster.nodes).tolist(),
        "messages": int(len(trace.messages["src"])),
        "message_bytes": int(trace.messages["bytes"].sum()),
        "balance_steps": 0, "migrated_tiles": 0, "migrated_bytes": 0,
    }
    if trace.resized:
        out["workers_over_steps"] = [[int(s), [int(c) for c in cs]]
                                     for s, cs in zip(trace.worker_steps, trace.worker_cores, strict=True)]
    if trace.balance is not None:
        out.update(balance_steps=int(len(trace.balance["step"])), migrated_tiles=int(trace.balance["moved"].sum()),
                   migrated_bytes=int(trace.balance["bytes"].sum()))
    if trace.communication is not None:
        out.update(comm_cpu_s=[float(c) for c in trace.communication["cpu_s"]], message_cpu_s=trace.message_cpu_s)
    return out
