"""The trace file's schema: its name and version, the versions of its optional groups, its
growing tables and the units and descriptions of its datasets, shared by the writer and the reader."""

from __future__ import annotations

SCHEMA = "shoal-trace"

VERSION = 1

# The version of each optional group this shoal writes and reads (absent attribute: 1).
# 2 for /workers: a node absent over some steps holds 0 worker threads there.
GROUP_VERSIONS = {"phases": 2, "tiles": 1, "balance": 1, "communication": 1, "workers": 2, "machine": 1,
                  "decomposition": 1, "jobs": 1, "reductions": 1}

# The largest grid a trace may describe: 1024^3 cells. A run gathers its whole final state in
# one process and `shoal report` paints maps of one value per cell (a tile id and a load: 16 GiB
# at this size), so a larger grid is a damaged or crafted file, not a run.
MAX_CELLS = 2**30

LIBVER = ("v110", "latest")  # the oldest file format that SWMR appending needs

# Growing tables, in the order of the ``/committed`` row counts.
COMMITTED = ("tasks", "messages", "steps", "placement", "workers", "balance")

# Units and descriptions of the datasets that are not table columns.
DATASETS = {
    "steps/step": ("", "step"),
    "steps/end": ("s", "wall time since the run began at which the step's last task ended"),
    "placement/from_step": ("", "first step of the owner table"),
    "placement/owner": ("", "node of every tile (rows: owner tables, columns: tiles)"),
    "workers/from_step": ("", "first step of the worker threads"),
    "workers/cores": ("", "worker threads of every node (rows: changes, columns: nodes)"),
    "tiling/edges": ("cells", "cell index where each tile slab begins along the axis, and the grid's end"),
    "cluster/cores": ("", "worker threads per node at the first step"),
    "phases/barrier": ("", "whether the phase is followed by a global barrier"),
    "phases/lagged": ("", "whether the barrier holds the next phase of the step after"),
    "jobs/committed": ("", "complete rows of the group's job runs"),
    "reductions/committed": ("", "complete rows of the group's reduced values"),
    "phases/node_barrier": ("", "whether the job phase's tasks wait for every range of their node"),
    "phases/loop": ("", "the loop the phase repeats in (an index; -1 outside loops)"),
    "tiles/state_bytes": ("B", "bytes of state a migration of the tile moves"),
    "communication/cpu_s": ("s", "CPU time of the thread that moved messages between processes, per node"),
    "communication/messages": ("", "tile-to-tile payloads that thread sent or received, per node"),
    "machine/model": ("", "the machine model the run fitted from its tasks, JSON (shoal.replay.machine)"),
    "decomposition/part_of_element": ("", "the part (tile) of every mesh element"),
    "decomposition/vertices": ("", "mesh vertex coordinates (rows: vertices, columns: axes)"),
    "decomposition/elements": ("", "mesh elements as vertex indices (rows: triangles or tetrahedra)"),
    "committed": ("", "complete rows of tasks, messages, steps, placement, workers, balance"),
}

def _dataset(group, name: str, data, key: str | None = None, **options):
    ds = group.create_dataset(name, data=data, **options)
    ds.attrs.update(zip(("units", "description"), DATASETS[key or ds.name.lstrip("/")], strict=True))
    return ds

def _optional_group(f, name: str, version: int | None = None):
    """A new optional group of ``version`` (by default the one this shoal reads: the oldest
    that holds what is written, where that is older, lets older shoal read it too)."""
    g = f.create_group(name)
    g.attrs["version"] = GROUP_VERSIONS[name] if version is None else version
    return g

def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
