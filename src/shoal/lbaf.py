"""A trace as vt's ``LBDatafile`` JSON, the input of the LB Analysis Framework (LBAF) and vt-tv.

One file per node, ``data.<rank>.json`` (LBAF's ``data_stem`` is then ``<folder>/data``), with
shoal's words mapped onto vt's:

- a vt *rank* is a shoal node, and a vt *phase* (the span between two load balancing
  calls) is a shoal step: phase ``id`` is the step number;
- a vt *task* is a tile's work in a step: its entity is the tile (``id`` and ``seq_id`` both
  the tile id, in collection 0; ``index`` the tile's position in the tile grid, ``home`` its
  node at the first recorded step, ``migratable``), ``node`` the node that ran it, ``time`` its
  CPU seconds summed over the step's phases, and each of shoal's phases a ``subphases`` entry;
- a vt *communication* is the halo traffic from one tile to another read in a step (summed
  ``bytes``, ``messages`` counted), listed once, in the file of the node that ran the sender;
  its ``from`` and ``to`` are the two tiles' entities.

Both ids, because the readers differ: vt's schema takes either, vt-tv reads ``seq_id`` with
``collection_id``, and LBAF's only PyPI release (1.0.1) reads ``id`` alone, for tasks and for
both ends of a communication. Every file lists every phase, even with no tasks, because LBAF
reads each phase on every rank.

``shoal export-lbaf TRACE --out DIR`` is :func:`export_trace`.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from .errors import ShoalError
from .files import write_json
from .trace import Trace

COLLECTION = 0  # vt collection id of the tiles


def export(trace: Trace, path: str | Path) -> Path:
    """Write ``trace`` as LBDatafile JSON files, one per node.

    Parameters
    ----------
    trace : Trace
        A run's trace.
    path : str or Path
        The folder to write ``data.<rank>.json`` into (made if missing).

    Returns
    -------
    Path
        The folder.

    Raises
    ------
    ShoalError
        ``path`` is a file, or the trace holds no tasks.
    """
    out = Path(path)
    if out.exists() and not out.is_dir():
        raise ShoalError(f"{out}: is a file; LBAF's data files need a folder")
    tasks, messages = trace.tasks, trace.messages
    if len(tasks["step"]) == 0:
        raise ShoalError("the trace holds no tasks: nothing to export for LBAF")
    out.mkdir(parents=True, exist_ok=True)
    steps = [int(s) for s in trace.steps]
    home = trace.owner_at(steps[0])
    endpoint = [_entity(t, int(home[t])) for t in range(trace.tiling.ntiles)]

    # (step, tile) -> node, CPU seconds and per-phase seconds
    node: dict[tuple[int, int], int] = {}
    per_phase: dict[tuple[int, int], dict[int, float]] = defaultdict(lambda: defaultdict(float))
    for s, p, t, n, c in zip(tasks["step"], tasks["phase"], tasks["tile"], tasks["node"], tasks["cost"], strict=True):
        key = (int(s), int(t))
        node.setdefault(key, int(n))
        per_phase[key][int(p)] += float(c)
    # (step, src, dst) -> bytes and messages
    traffic: dict[tuple[int, int, int], list] = {}
    for s, src, dst, b in zip(messages["step"], messages["src"], messages["dst"], messages["bytes"], strict=True):
        entry = traffic.setdefault((int(s), int(src), int(dst)), [0, 0])
        entry[0] += int(b)
        entry[1] += 1

    ranks = trace.cluster.nodes
    phases = [[{"id": s, "tasks": [], "communications": []} for s in steps] for _ in range(ranks)]
    index = {s: i for i, s in enumerate(steps)}
    for (s, t), n in sorted(node.items()):
        subphases = [{"id": p, "time": c} for p, c in sorted(per_phase[(s, t)].items())]
        phases[n][index[s]]["tasks"].append({"entity": {**endpoint[t], "index": list(trace.tiling.tile_index(t))},
                                             "node": n, "resource": "cpu", "time": sum(c["time"] for c in subphases),
                                             "subphases": subphases})
    for (s, src, dst), (nbytes, count) in sorted(traffic.items()):
        sender = node.get((s, src), int(trace.owner_at(s)[src]))
        phases[sender][index[s]]["communications"].append(
            {"type": "SendRecv", "from": endpoint[src], "to": endpoint[dst], "messages": count, "bytes": float(nbytes)})
    for r in range(ranks):
        write_json(out / f"data.{r}.json", {"type": "LBDatafile", "metadata": {"type": "LBDatafile", "rank": r},
                                            "phases": phases[r]})
    return out


def export_trace(source: str | Path, out: str | Path) -> list[Path]:
    """Read a trace and write it as LBDatafile JSON: what ``shoal export-lbaf`` does.

    Parameters
    ----------
    source : str or Path
        A ``trace.h5``, or a run folder holding one.
    out : str or Path
        The folder to write ``data.<rank>.json`` into (made if missing).

    Returns
    -------
    list of Path
        The files written, rank by rank.

    Raises
    ------
    ShoalError
        The trace cannot be read, ``out`` is a file, or the trace holds no tasks.
    """
    trace = Trace.read(source)
    folder = export(trace, out)
    return [folder / f"data.{r}.json" for r in range(trace.cluster.nodes)]


def _entity(tile: int, home: int) -> dict:
    """vt's description of a tile: a migratable object of collection 0, under both of vt's ids."""
    return {"type": "object", "id": tile, "seq_id": tile, "collection_id": COLLECTION, "migratable": True,
            "home": home}
