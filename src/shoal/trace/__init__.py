"""The trace: what a run (or a replay) did, in one HDF5 file.

Schema ``shoal-trace`` version 1. Root attributes: ``schema``, ``version``, ``predicted``
(true for replays), ``app``, ``scenario``, ``phases`` (JSON list of phase names), ``config``
(JSON of the resolved configuration), ``shoal_version``.

``/tasks`` — one row per (step, phase, tile), the columns of :data:`shoal.records.TASKS`:
    ``step`` i4, ``phase`` i2, ``tile`` i4, ``node`` i4, ``worker`` i4 (worker within the node),
    ``start`` f8 and ``end`` f8 (seconds of wall time since the run began), ``cost`` f8
    (seconds of CPU time of the kernel and of packing the task's halos), ``work`` i8 (the
    app's own count: cells, particles, iterations), and, optional, ``kernel`` f8 (the part of
    ``cost`` spent in compiled kernels without the interpreter lock; absent means unknown) and
    ``kernel_calls`` i4 (how many such calls the task made: each lets go of the lock and
    takes it back), and ``ready`` f8 (seconds since the run began at which the task's last
    input arrived: ``start - ready`` is its wait for a worker). Every dataset carries
    ``units`` and ``description`` attributes.
``/messages`` — one row per halo payload from one tile to another, the columns of
    :data:`shoal.records.MESSAGES`: ``step`` i4 and ``phase`` i2 (of the task that reads it),
    ``src`` i4, ``dst`` i4, ``bytes`` i8. Messages between tiles of one node are listed too;
    a replay prices them as memory copies.
``/tiling`` — attributes ``grid``, ``halo``; datasets ``edges0``, ``edges1``[, ``edges2``]. A
    trace of a mesh partition has ``/decomposition`` instead (below).
``/cluster`` — dataset ``cores`` (per node, the worker threads at the first step it ran: the
    run's first step but for nodes that joined a resumed run later); attributes
    ``latency_s``, ``bandwidth_Bps``, ``overhead_s``. The nodes are the most the run had.
``/placement`` — ``from_step`` i4 (n,), ``owner`` i4 (n, tiles): owner table in force from
    each step on.
``/steps`` — ``step`` i4, ``end`` f8 (wall time at which the step's last task ended).

Optional groups, each with its own ``version`` attribute (absent: 1), so that a later shoal
adds groups without changing the schema's version, and older traces still read:

``/phases`` — ``barrier`` bool per phase: phases followed by a global barrier; ``lagged``
    bool per phase: the barrier holds the next phase of the step after; attribute ``work``, a
    JSON list of what each phase's ``work`` counts (its ``Phase.work``: "particle pairs", ...).
    Version 2 (written only when the app has loops): ``loop`` i4 per phase, the index of the
    loop the phase repeats in (-1 outside loops); the task and message rows then carry their
    ``iteration``, and a step's tasks are laid out in slots (``Trace.slots``).
``/tiles`` — ``state_bytes`` i8 per tile: bytes a migration of the tile moves.
``/balance`` — one row per balancing step, the columns of :data:`shoal.records.BALANCE`.
``/communication`` (runs across processes) — per node, ``cpu_s`` f8 (CPU seconds of the
    thread that moved messages between processes) and ``messages`` i8 (tile-to-tile payloads
    it sent or received), over the whole run: what a replay charges per message sent or
    received.
``/workers`` — ``from_step`` i4 (n,) and ``cores`` i4 (n, nodes): the worker threads of
    every node from each step on (older traces have it only when they changed). Version 2:
    a node that was not part of the run over some steps (a run resumed on fewer nodes, or
    before it was resumed on more) holds 0 there, and is absent: no task runs on it, and
    loads, the LIF and the efficiency leave it out (:meth:`Trace.present`). A trace without
    such a row is written as version 1, which older readers take.
``/machine`` — ``model``: the machine model the run fitted from its own tasks when it ended
    (finished or stopped), as JSON (:class:`shoal.replay.machine.MachineModel`: per app and phase the
    seconds per unit of work and per task with the fit's R² and residual spread, the Python
    share likewise, the executor's dispatch, wake-up, lock wait per lock-free call and message
    CPU time, whether the nodes shared one interpreter lock, the host's CPU and cores). A
    replay prices the tasks' work with it (older traces without it replay measured costs).
``/decomposition`` (a mesh partition's run, in place of ``/tiling``) — attributes ``kind``
    (``"mesh"``) and ``spec`` (JSON of :meth:`MeshPartition.to_dict <shoal.mesh.MeshPartition.to_dict>`
    but for the partition vector: parts, halo rings, the mesh's counts and SHA-256); datasets
    ``part_of_element`` i4, ``vertices`` f8 (vertices, 2 or 3) and ``elements`` i8 (elements, 3
    or 4): the mesh, so that the trace alone rebuilds the partition (its hash is checked).
    Traces of Cartesian tilings do not have it, and read as before; a shoal older than the
    group refuses a mesh partition's trace as missing ``/tiling``.
``/committed`` — i8 (6,): how many rows of ``tasks``, ``messages``, ``steps``, ``placement``,
    ``workers`` and ``balance`` are complete. Rows past them belong to a chunk whose writer
    was killed, and are ignored (absent: every row is complete).

Every dataset carries ``units`` and ``description`` attributes. The tables that grow (all but
``/tiling``, ``/cluster``, ``/phases``, ``/tiles``, ``/communication``) are resizable, so a
run appends to its trace as it goes (:class:`TraceWriter`): a chunk of steps at a time,
flushed, then committed. A run killed at any moment leaves a trace of every completed chunk;
a resumed run carries its trace on from the checkpoint's step, on any number of nodes (the
steps before joined to its own: :func:`joined`). A whole trace (a replay's) is written to a
temporary name and renamed. Older shoal started a new ``trace.h5`` when a run was resumed on
another number of nodes and kept the earlier one beside it as ``trace-to-step-NNNNNN.h5``:
:meth:`Trace.read` of such a run folder joins them.

The writer keeps the file in HDF5's single-writer/multiple-reader (SWMR) mode, so the trace
can be read while the run goes, but only on a local file system: SWMR relies on POSIX write
ordering, which NFS and parallel file systems (Lustre, GPFS) do not give, and a reader there
may see torn metadata. On those, read the trace once the run has ended. A writer that was
killed leaves its file marked "open for write": :meth:`Trace.read` reads it anyway (in SWMR
read mode), and :func:`mark_closed` clears the mark so that any HDF5 reader opens it, as
``h5clear -s --increment=0`` does.

:meth:`Trace.read` checks what it reads, cheaply (vectorised, whatever the rows): the tiling's
edges against its grid, a grid of at most :data:`MAX_CELLS` cells, every index in range,
times and costs finite with costs, work and bytes not negative, and ``/committed`` counts no
larger than the rows stored. Each fault is one :class:`~shoal.errors.ShoalError` naming the
file, the dataset and the row.
"""

from .model import Trace, packed_by
from .parts import aggregate, joined, scaled, with_iterations
from .reading import PART_PREFIX, mark_closed
from .schema import COMMITTED, DATASETS, GROUP_VERSIONS, LIBVER, MAX_CELLS, SCHEMA, VERSION
from .writing import TraceWriter, store_machine

__all__ = ["COMMITTED", "DATASETS", "GROUP_VERSIONS", "LIBVER", "MAX_CELLS", "PART_PREFIX", "SCHEMA", "VERSION",
           "Trace", "TraceWriter", "aggregate", "joined", "mark_closed", "packed_by", "scaled", "with_iterations",
           "store_machine"]
