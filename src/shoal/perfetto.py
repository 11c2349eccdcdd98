"""A trace in the Chrome trace event format, for zooming into a run with Perfetto
(https://ui.perfetto.dev) or ``chrome://tracing``.

The file is one JSON object with a ``traceEvents`` list, gzipped when its name ends in ``.gz``
(Perfetto opens ``.json.gz`` as it is). It is strict JSON: a value that is not a finite number
(the ``NaN`` of a balancing step's trigger columns under a fixed period) is written ``null``.

- every node is a process (``pid`` = node + 1) and every worker thread a thread of it
  (``tid`` = worker + 1), named by metadata events (``ph`` ``"M"``) as ``node N`` and
  ``core N.W``;
- every task is a complete event (``ph`` ``"X"``) on its core's track, named after its phase,
  with ``ts`` and ``dur`` in microseconds since the run began (whole nanoseconds, so the
  events of one track never overlap) and ``args`` holding ``phase``, ``tile``, ``step``,
  ``cost_ms`` and ``work``;
- every halo message is a flow (``cat`` and ``name`` ``"halo"``, ``id`` the message's row in
  the trace): a start event (``ph`` ``"s"``) in the middle of the task that packed it (the
  source tile's task before the reading phase: the previous phase's, or the previous step's
  last), ``args`` holding ``src``, ``dst`` and ``bytes``, and an end event (``ph`` ``"f"``,
  ``bp`` ``"e"``) in the middle of the task that read it. Perfetto draws it as an arrow between
  the two tasks. A message whose packing or reading task is not exported (one read by the
  trace's first step, packed before it; one outside a selection) has no flow;
- every balancing step is a global instant event (``ph`` ``"i"``, ``s`` ``"g"``) on the
  ``balancing`` process (``pid`` 0) at the end of the step before it, its ``args`` the row of
  the trace's ``/balance`` table (or the tiles that changed node, for traces without one).
"""

from __future__ import annotations

import gzip
import io
import json
import math
from pathlib import Path

import numpy as np

from .files import atomic_write
from .trace import Trace, packed_by

BALANCING_PID = 0
FLOW = "halo"  # category and name of the halo messages' flow events


def events(trace: Trace, mask: np.ndarray | None = None) -> list[dict]:
    """The trace's events (tasks where ``mask`` is true, and the flows between them; all by
    default): metadata first, then tasks, flows and balancing steps."""
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
                    "args": {"phase": trace.phases[phase], "tile": tile, "step": step, "cost_ms": _finite(cost_ms),
                             "work": work}})
    middle_ns = (begin_ns + end_ns) // 2  # inside the task: a flow binds to the slice enclosing its time
    out += flow_events(trace, mask, middle_ns, node + 1, worker + 1)
    out += balancing_events(trace)
    return out


def flow_events(trace: Trace, mask: np.ndarray, at_ns: np.ndarray, pid: np.ndarray, tid: np.ndarray) -> list[dict]:
    """A start and an end event for every halo message whose packing and reading tasks are both
    among the tasks where ``mask`` is true; ``at_ns``, ``pid`` and ``tid`` are those tasks' flow
    times and tracks, in task order."""
    t, m = trace.tasks, trace.messages
    if not len(m["step"]):
        return []
    steps, P, T = trace.steps, len(trace.slots()[0]), trace.tiling.ntiles  # a loop's phase: once per iteration

    def key(s_idx, phase, tile):  # a task's (step index, slot, tile) as one number
        return (s_idx.astype(np.int64) * P + phase) * T + tile

    task_key = key(np.searchsorted(steps, t["step"][mask]), trace.slot_of(t)[mask], t["tile"][mask])
    order = np.argsort(task_key, kind="stable")
    sorted_keys = task_key[order]

    def find(k):  # index among the exported tasks, -1 where there is none
        i = np.minimum(np.searchsorted(sorted_keys, k), len(sorted_keys) - 1)
        return np.where((k >= 0) & (len(sorted_keys) > 0) & (sorted_keys[i] == k), order[i], -1)

    s_idx, phase = np.searchsorted(steps, m["step"]), trace.slot_of(m)
    # The payload read by (step, phase) is packed by the source tile's task just before it.
    packer = find(key(*packed_by(s_idx, phase, P), m["src"]))
    reader = find(key(s_idx, phase, m["dst"]))
    out = []
    for k in np.flatnonzero((packer >= 0) & (reader >= 0)).tolist():
        args = {"src": int(m["src"][k]), "dst": int(m["dst"][k]), "bytes": int(m["bytes"][k])}
        a, b = packer[k], reader[k]
        out.append({"name": FLOW, "cat": FLOW, "ph": "s", "id": k, "ts": int(at_ns[a]) / 1e3, "pid": int(pid[a]),
                    "tid": int(tid[a]), "args": args})
        out.append({"name": FLOW, "cat": FLOW, "ph": "f", "bp": "e", "id": k, "ts": int(at_ns[b]) / 1e3,
                    "pid": int(pid[b]), "tid": int(tid[b])})
    return out


def balancing_events(trace: Trace) -> list[dict]:
    """One global instant event per balancing step, at the end of the step before it."""
    steps, ends = trace.steps, np.asarray(trace.step_end)
    if trace.balance is not None and len(trace.balance["step"]):
        rows = [{k: _finite(v.item()) for k, v in zip(trace.balance, row, strict=True)}
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


def _finite(value):
    """``value``, or ``None`` (JSON's ``null``) for a float that is not finite: JSON has no NaN."""
    return None if isinstance(value, float) and not math.isfinite(value) else value


def export(trace: Trace, path: str | Path, mask: np.ndarray | None = None) -> Path:
    """Write ``trace`` (the tasks where ``mask`` is true; all by default) to ``path`` as
    Chrome trace event JSON, gzipped when ``path`` ends in ``.gz``, atomically.

    Open it at https://ui.perfetto.dev (or ``chrome://tracing``). See the module's docstring
    for the events it holds.

    Parameters
    ----------
    trace : Trace
        A run's or a replay's trace.
    path : str or Path
        The file: ``*.json`` or ``*.json.gz``.
    mask : ndarray of bool, optional
        Which of the trace's tasks to export (:func:`shoal.report.timeline.select` makes one).

    Returns
    -------
    Path
        ``path``.
    """
    path = Path(path)
    meta = {"scenario": trace.scenario, "app": trace.app, "predicted": bool(trace.predicted),
            "phases": list(trace.phases)}
    with atomic_write(path, "wb") as raw:
        # mtime 0: the same trace makes the same bytes
        packed = gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) if path.suffix == ".gz" else raw
        fh = io.TextIOWrapper(packed, encoding="utf-8")
        fh.write('{"displayTimeUnit": "ms", "otherData": ' + json.dumps(meta, allow_nan=False) + ', "traceEvents": [\n')
        for k, event in enumerate(events(trace, mask)):
            fh.write((",\n" if k else "") + json.dumps(event, separators=(",", ":"), allow_nan=False))
        fh.write("\n]}\n")
        fh.detach()  # flushes into ``packed`` and leaves it open
        if packed is not raw:
            packed.close()  # gzip's trailer; ``raw`` itself is closed by atomic_write
    return path
