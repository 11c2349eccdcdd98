"""A trace in the Chrome trace event format, for zooming into a run with Perfetto
(https://ui.perfetto.dev) or ``chrome://tracing``.

The file is one JSON object with a ``traceEvents`` list:

- every node is a process (``pid`` = node + 1) and every worker thread a thread of it
  (``tid`` = worker + 1), named by metadata events (``ph`` ``"M"``) as ``node N`` and
  ``core N.W``;
- every task is a complete event (``ph`` ``"X"``) on its core's track, named after its phase,
  with ``ts`` and ``dur`` in microseconds since the run began (whole nanoseconds, so the
  events of one track never overlap) and ``args`` holding ``phase``, ``tile``, ``step``,
  ``cost_ms`` and ``work``;
- every balancing step is a global instant event (``ph`` ``"i"``, ``s`` ``"g"``) on the
  ``balancing`` process (``pid`` 0) at the end of the step before it, its ``args`` the row of
  the trace's ``/balance`` table (or the tiles that changed node, for traces without one).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .files import atomic_write
from .trace import Trace

BALANCING_PID = 0


def events(trace: Trace, mask: np.ndarray | None = None) -> list[dict]:
    """The trace's events (tasks where ``mask`` is true; all by default), metadata first."""
    t = trace.tasks
    mask = np.ones(len(t["step"]), bool) if mask is None else np.asarray(mask, bool)
    node, worker = t["node"][mask].astype(np.int64), t["worker"][mask].astype(np.int64)
    out: list[dict] = [{"name": "process_name", "ph": "M", "pid": BALANCING_PID, "tid": 0,
                        "args": {"name": "balancing"}}]
    for n, w in sorted(set(zip(node.tolist(), worker.tolist(), strict=True))):
        out.append({"name": "thread_name", "ph": "M", "pid": n + 1, "tid": w + 1, "args": {"name": f"core {n}.{w}"}})
    for n in sorted(set(node.tolist())):
        out.append({"name": "process_name", "ph": "M", "pid": n + 1, "tid": 0, "args": {"name": f"node {n}"}})
        out.append({"name": "process_sort_index", "ph": "M", "pid": n + 1, "tid": 0, "args": {"sort_index": n + 1}})
    begin_ns = np.round(t["start"][mask] * 1e9).astype(np.int64)
    end_ns = np.maximum(np.round(t["end"][mask] * 1e9).astype(np.int64), begin_ns)
    columns = zip(t["phase"][mask].tolist(), t["tile"][mask].tolist(), t["step"][mask].tolist(), node.tolist(),
                  worker.tolist(), begin_ns.tolist(), end_ns.tolist(), (t["cost"][mask] * 1e3).tolist(),
                  t["work"][mask].tolist(), strict=True)
    for phase, tile, step, n, w, b, e, cost_ms, work in columns:
        out.append({"name": trace.phases[phase], "cat": "task", "ph": "X", "ts": b / 1e3, "dur": (e - b) / 1e3,
                    "pid": n + 1, "tid": w + 1,
                    "args": {"phase": trace.phases[phase], "tile": tile, "step": step, "cost_ms": cost_ms,
                             "work": work}})
    out += balancing_events(trace)
    return out


def balancing_events(trace: Trace) -> list[dict]:
    """One global instant event per balancing step, at the end of the step before it."""
    steps, ends = trace.steps, np.asarray(trace.step_end)
    if trace.balance is not None and len(trace.balance["step"]):
        rows = [{k: v.item() for k, v in zip(trace.balance, row, strict=True)}
                for row in zip(*trace.balance.values(), strict=True)]
    else:  # placements after the first: which tiles changed node
        owners = trace.placement_owners
        rows = [{"step": int(s), "moved": int(np.count_nonzero(owners[k + 1] != owners[k]))}
                for k, s in enumerate(trace.placement_steps[1:])]
    out = []
    for row in rows:
        before = int(np.searchsorted(steps, row["step"])) - 1  # the last step under the old placement
        ts_s = float(ends[before]) if before >= 0 else 0.0
        out.append({"name": "balance", "cat": "balancing", "ph": "i", "s": "g",
                    "ts": round(ts_s * 1e9) / 1e3, "pid": BALANCING_PID, "tid": 0, "args": row})
    return out


def export(trace: Trace, path: str | Path, mask: np.ndarray | None = None) -> Path:
    """Write ``trace`` (the tasks where ``mask`` is true; all by default) to ``path`` as
    Chrome trace event JSON, atomically; returns ``path``.

    Open it at https://ui.perfetto.dev (or ``chrome://tracing``). See the module's docstring
    for the events it holds.
    """
    path = Path(path)
    meta = {"scenario": trace.scenario, "app": trace.app, "predicted": bool(trace.predicted),
            "phases": list(trace.phases)}
    with atomic_write(path, "w") as fh:
        fh.write('{"displayTimeUnit": "ms", "otherData": ' + json.dumps(meta) + ', "traceEvents": [\n')
        for k, event in enumerate(events(trace, mask)):
            fh.write((",\n" if k else "") + json.dumps(event, separators=(",", ":")))
        fh.write("\n]}\n")
    return path
