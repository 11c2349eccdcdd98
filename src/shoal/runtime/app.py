"""The app contract: what a physics model provides to the runtime.

An app owns the numerics only. It never knows where a tile lives: the executor hands it one
tile's state and the halo payloads its neighbours packed for it, and the app returns how
much work it did. Tile state is whatever the app wants (usually a dict of NumPy arrays) and
may change size from step to step; the set of tiles is fixed for the whole run.

Read :class:`App` from top to bottom to learn the whole contract: what every app must
provide first, then each optional hook with what it does when an app does not override it.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from ..errors import ShoalError
from ..tiling import Tiling
from .graph import Loop, loop_spans
from .packing import flatten, unflatten
from .timing import call_timed

REDUCTIONS = {"min": min, "max": max, "sum": None}
STENCILS = ("all", "faces", "app")  # whom a phase with halos reads (Phase.reads)


@dataclass(frozen=True)
class Phase:
    """One phase of a step.

    Parameters
    ----------
    name : str
        Shown in traces and timelines; also the name of the app's method that runs the phase,
        unless ``method`` names another.
    halo : bool
        Whether the phase reads its neighbours' halos, packed from their state right after
        their previous task by the app's method named ``pack``.
    emits_jobs : bool
        The phase's method returns ``(work, jobs)``: the jobs this tile wants run at the next
        phase, a list of ``(other tile or -1, size in items, predicted seconds)``, or of
        ``(other tile or -1, size, predicted seconds, kind)`` with kind ``"request"``, ``"reply"`` or
        ``"work"``. The tiles' lists, in tile-id order, are the step's jobs (their ids follow that
        order): a barrier, like a reduction. The next phase must be a job phase.
    jobs : str
        This phase runs jobs first: the app's method named here runs one job, or one range of
        its items, on any core of the node the job policy chose, as ``(job, inputs, first,
        stop, ctx)`` (``job`` a dict of its row, ``inputs`` each tile's payload packed by the
        method ``pack`` names, ``(state, tile) -> payload``) and returns ``(work, results)``,
        one result per tile the job reads. Each tile's task of the phase then runs with the
        results for it in ``halos``, keyed ``(job, first)`` in that order, so the state never
        depends on where the jobs ran.
    node_barrier : bool
        For a job phase: each tile's task also waits for every range its own node runs, not
        only for those that read it (the contact-mechanics paper's node-level phase barrier,
        §VI-B: a node's cores share its ranges before any of them moves on to the next phase).
    reads : {"all", "faces", "app"}
        Whom a phase with ``halo`` reads: every neighbour of its tile (across faces, edges and
        corners: the default), its face neighbours only (a stencil that reads no diagonal
        cell), or the tiles the app's :meth:`App.reads` names for the step (contact
        neighbours that change as the physics moves). No message, payload or wait exists for a
        neighbour the phase does not read. Giving ``reads`` implies ``halo``.
    reduction : {None, "min", "max", "sum"} or tuple of them
        Combine the value every tile returns, in tile-id order, into one global value (for
        example the minimum time step); a tuple of operations reduces a tuple of values, each
        with its own (a conjugate-gradient iteration's ``("sum", "max")``: r.z and max |r|).
        This is a barrier: no tile starts its next phase until every tile has finished this one.
    lagged : bool
        The reduction is read one step later, and is no barrier: the next phase of step s
        reads the value reduced at step s - 1 (in ``ctx.reduced``), so tiles run on while the
        last ones finish this phase. Step 0 reads the app's ``initial_reductions()``. Only
        the phase right after this one may read the value, so the last phase of a step
        cannot be lagged.
    method : str
        The app's method that runs the phase (default: ``name``).
    pack : str
        The app's method that packs the halos this phase reads (default ``pack_halos``).
    work : str
        The unit of the work count the phase's method returns, in a few words (for example
        ``"particle pairs"`` or ``"cell updates"``): the count that best predicts what a task
        costs, so that a trace read with its units is not tied to the machine that recorded
        it (costs are then ``rate x work + overhead``). The count must not depend on timing,
        and where the physics does not depend on the tiling, neither does its total over all
        tiles. Default ``"items"``.
    """

    name: str
    halo: bool = False
    reduction: str | tuple[str, ...] | None = None
    lagged: bool = False
    method: str = ""
    pack: str = "pack_halos"
    work: str = "items"
    reads: str = ""
    emits_jobs: bool = False
    jobs: str = ""
    node_barrier: bool = False

    def __post_init__(self):
        if self.node_barrier and not self.jobs:
            raise ValueError(f"phase {self.name!r}: a node-level barrier holds a job phase's tasks; it runs no jobs")
        if self.jobs and (self.halo or self.reads):
            raise ValueError(f"phase {self.name!r} runs jobs: its inputs are the jobs' results, not halos")
        if self.emits_jobs and self.reduction is not None:
            raise ValueError(f"phase {self.name!r} emits jobs, which is its barrier's value: it cannot reduce too")
        if self.jobs and self.pack == "pack_halos":
            object.__setattr__(self, "pack", "pack_job_input")
        if self.reads and self.reads not in STENCILS:
            raise ValueError(f"phase {self.name!r}: unknown stencil {self.reads!r}; known: {', '.join(STENCILS)}")
        if self.reads:
            object.__setattr__(self, "halo", True)
        elif self.halo:
            object.__setattr__(self, "reads", "all")
        if isinstance(self.reduction, list):
            object.__setattr__(self, "reduction", tuple(self.reduction))
        for op in self.operations:
            if op not in REDUCTIONS:
                raise ValueError(f"unknown reduction {op!r}; known: {', '.join(REDUCTIONS)}")
        if isinstance(self.reduction, tuple) and not self.reduction:
            raise ValueError(f"phase {self.name!r}: a reduction of several values needs at least one operation")
        if self.lagged and self.reduction is None:
            raise ValueError(f"phase {self.name!r} is lagged but has no reduction")
        if not self.method:
            object.__setattr__(self, "method", self.name)
        if not (isinstance(self.work, str) and self.work.strip()):
            raise ValueError(f"phase {self.name!r}: work must name a unit, got {self.work!r}")

    @property
    def operations(self) -> tuple[str, ...]:
        """The operation of every value the phase reduces (none without a reduction)."""
        if self.reduction is None:
            return ()
        return self.reduction if isinstance(self.reduction, tuple) else (self.reduction,)

    @property
    def barrier(self) -> bool:
        """Whether every tile waits for every other at the end of this phase."""
        return (self.reduction is not None and not self.lagged) or self.emits_jobs

    @property
    def gathers(self) -> bool:
        """Whether every tile's task hands the executor a value (to reduce, or jobs to run)."""
        return self.reduction is not None or self.emits_jobs


def check_jobs_order(phases) -> None:
    """Refuse phases whose jobs come from nowhere: a job phase must follow a phase that emits
    jobs, and a phase that emits jobs must precede one that runs them."""
    for k, phase in enumerate(phases):
        before = phases[k - 1] if k else None
        after = phases[k + 1] if k + 1 < len(phases) else None
        if phase.jobs and not (before is not None and before.emits_jobs):
            raise TypeError(f"phase {phase.name!r} runs jobs but the phase before it does not emit them")
        if phase.emits_jobs and not (after is not None and after.jobs):
            raise TypeError(f"phase {phase.name!r} emits jobs but the phase after it does not run them")


def reduce_in_order(kind: str | tuple[str, ...], values: list) -> float | tuple[float, ...]:
    """Combine per-tile values in tile-id order, so the result never depends on timing.

    Parameters
    ----------
    kind : {"min", "max", "sum"} or tuple of them
        The reduction a :class:`Phase` names; a tuple reduces a tuple of values, each with its
        own operation, into a tuple.
    values : list of float, or of tuples of float
        One value per tile, in tile-id order; a sum adds them left to right.
    """
    if isinstance(kind, tuple):
        for v in values:
            if len(v) != len(kind):
                raise ShoalError(f"a reduction of {len(kind)} values ({', '.join(kind)}) got a tile's value {v!r}")
        return tuple(reduce_in_order(op, [float(v[i]) for v in values]) for i, op in enumerate(kind))
    if kind == "sum":
        total = 0.0
        for v in values:
            total += v
        return total
    return REDUCTIONS[kind](values)


@dataclass
class StepContext:
    """What a kernel may know besides its tile: the step and the global reductions so far.

    Apps call their compiled kernels through :meth:`kernel` (or wrap them in
    :func:`~shoal.runtime.timing.lock_free`), which times them: the rest of a task is Python
    holding the interpreter lock, which the replay models as such.

    Attributes
    ----------
    step : int
        The step the task belongs to, counted from the run's step 0.
    reduced : dict of str to float
        The global values a task may read, by the name of the phase that reduced them: the
        previous phase's reduction (for a step's first phase, the last phase's of the step
        before; none at step 0), or a lagged one of the step before. The same values whether
        or not the run stopped in between (to balance, or to resume from a checkpoint). A
        reduction of several values is a tuple.
    iteration : int
        The iteration of the loop the task's phase repeats in, from 0 (0 outside loops).
    """

    step: int
    reduced: dict[str, float] = field(default_factory=dict)
    iteration: int = 0

    def kernel(self, fn, *args):
        """Call a compiled kernel that runs without the interpreter lock, timing it."""
        return call_timed(fn, args)


class App(abc.ABC):
    """Base class of every physics model.

    **Required.** A subclass sets ``name`` and ``phases`` (class attributes), ``grid`` (the
    global cell grid, set by its constructor) and provides :meth:`init_tile`, :meth:`gather`,
    one method per phase and, when a phase reads halos, the packer it names. A phase method
    has the signature ``(tile, state, halos, ctx, tiling)`` and returns the work done (an
    int, in the unit its :class:`Phase` declares as ``work``) or, for a phase with a
    reduction, ``(work, value)``; it may change ``state`` in place. ``halos`` maps each
    neighbour's tile id to what it packed.

    **Optional.** Every other method has a default that does nothing harmful; an app
    overrides it when the sentence under its name applies.
    """

    name: ClassVar[str]
    phases: ClassVar[tuple[Phase, ...]]
    #: Groups of phases that repeat while :meth:`again` says so (an iterative solve).
    loops: ClassVar[tuple[Loop, ...]] = ()
    grid: tuple[int, ...]
    #: A job of more items than this is cut into ranges the cores of its node share (contact
    #: mechanics, Algorithms 3 and 4); 0: never.
    job_split: ClassVar[int] = 0
    #: State keys the next task recomputes: never checkpointed, never migrated.
    transient: ClassVar[tuple[str, ...]] = ()
    #: Whether ``--executor auto`` runs the app's native plan (:meth:`native`) where it has one;
    #: an app whose plan is right but not yet worth its cost says no, and runs it on request.
    native_by_default: ClassVar[bool] = True

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for phase in getattr(cls, "phases", ()):
            for method in (phase.method, *((phase.pack,) if phase.halo or phase.jobs else ()),
                           *((phase.jobs,) if phase.jobs else ())):
                if getattr(cls, method, None) in (None, getattr(App, method, None)):
                    raise TypeError(f"app {cls.__name__}: phase {phase.name!r} needs method {method!r}, "
                                    "which the class does not define")
            if phase.reads == "app" and getattr(cls, "reads", None) is App.reads:
                raise TypeError(f"app {cls.__name__}: phase {phase.name!r} reads the tiles the app names, "
                                "and the class does not define reads()")
        if isinstance(getattr(cls, "phases", None), tuple):
            loop_spans(cls.phases, cls.loops)
            check_jobs_order(cls.phases)
            if cls.loops and getattr(cls, "again", None) is App.again:
                raise TypeError(f"app {cls.__name__}: it declares loops and does not define again()")
        if getattr(cls, "phases", None) and cls.phases[-1].lagged:
            # Its reader would be the first phase two steps on: keep "the next phase, one step
            # later" within a step.
            raise TypeError(f"app {cls.__name__}: the last phase of a step cannot have a lagged reduction")

    # ----- required ---------------------------------------------------------------------------
    @abc.abstractmethod
    def init_tile(self, tile: int, tiling: Tiling) -> Any:
        """The initial state of tile ``tile`` of ``tiling``: whatever the phase methods read
        (usually a dict of NumPy arrays). It depends on the tile alone, never on where it runs."""

    @abc.abstractmethod
    def gather(self, states: dict[int, Any], tiling: Tiling) -> dict[str, np.ndarray]:
        """Global arrays of the whole state, independent of the tiling (compared bitwise by
        ``shoal compare``).

        Parameters
        ----------
        states : dict of int to state
            Every tile's state, by tile id.
        tiling : Tiling
            The tiling the states belong to.
        """

    def pack_halos(self, state: Any, src: int, tiling: Tiling) -> dict[int, Any]:
        """What tile ``src`` sends each neighbour for a phase with ``halo=True``.

        Required when a phase reads halos and names no other packer. One call per tile, so
        that an app can find all its neighbours' data in one pass. (A subclass whose phases
        read halos with this packer is refused unless it overrides it.)

        Parameters
        ----------
        state : state
            Tile ``src``'s state right after its previous task; the packer must not change it.
        src : int
            The sending tile's id.
        tiling : Tiling
            The run's tiling.

        Returns
        -------
        dict of int to payload
            ``{neighbour: payload}`` for every neighbour in ``tiling.neighbours[src]``; a payload
            is an array or a dict, tuple or list of arrays.
        """
        return {}

    # ----- optional hooks ---------------------------------------------------------------------
    def decompose(self, count: int, halo: int = 1):
        """The app's domain cut into about ``count`` tiles: by default a Cartesian
        :class:`~shoal.tiling.Tiling` of its cell grid (``halo`` cells wide); an app on a mesh
        returns a :class:`~shoal.mesh.MeshPartition` of it.

        Parameters
        ----------
        count : int
            Tiles wanted.
        halo : int
            Halo width in cells (of a Cartesian tiling).
        """
        return Tiling.from_count(self.grid, count, halo)

    def check_tiling(self, tiling: Tiling) -> None:
        """Refuse a tiling the app cannot run on. Default: the tiling must cover ``grid``."""
        if tuple(tiling.grid) != tuple(self.grid):
            raise ShoalError(f"app {self.name!r}: the tiling covers {tiling.grid}, the app's grid is {self.grid}")

    def prepare(self, tiling: Tiling) -> None:
        """Compile or load kernels before the timed run, so the first tasks' costs are not
        skewed. Default: nothing to prepare."""
        return None

    def native(self, tiling: Tiling):
        """How the native executor runs this app's phases with no Python: a
        :class:`~shoal.runtime.native.Native` (compiled kernels of one signature, the state
        fields they work on, copy plans for their halos), or ``None``. Phases it does not name
        run in Python through the executor's trampoline. Default: ``None``."""
        return None

    def proxy(self) -> tuple[Any, float] | None:
        """A low-resolution version of this run for speculative balancing: ``(parameters,
        proxy steps per step)``. Default: none (``speculative`` then refuses the app)."""
        return None

    def initial_reductions(self) -> dict[str, float]:
        """The values of lagged reductions that step 0 reads, by phase name. Default: none
        (an app with a lagged reduction must override this)."""
        return {}

    def halo_wanted(self, phase: Phase, step: int) -> bool:
        """Whether ``phase`` of ``step`` exchanges halos (lazy updates skip some steps).
        Default: always."""
        return True

    def reads(self, phase: Phase, step: int, decomposition: Any) -> list:
        """The tiles every tile reads from in ``phase`` of ``step``, for a phase declared with
        ``reads="app"`` (contact neighbours found from the state): one list of tile ids per tile,
        in tile-id order, the same on every process (computed from what every process knows, such
        as the previous step's reductions). Default: every neighbour of the decomposition."""
        return list(decomposition.neighbours)

    def again(self, loop: Loop, step: int, iteration: int, value) -> bool:
        """Whether ``loop`` runs another iteration in ``step`` after ``iteration`` (from 0), given
        the value its last phase reduced (a tuple for a reduction of several values). Called once
        per iteration, on every process alike. Required when the app declares :attr:`loops`.
        Default: no further iteration."""
        return False

    def time(self, step: int, states: dict[int, Any]) -> float:
        """Simulated time in seconds after ``step`` steps, read from ``states`` (every tile's
        state by tile id; any one is enough). Default: the step count (apps without a physical
        clock)."""
        return float(step)

    def portable(self, state: Any) -> Any:
        """A tile's state without its :attr:`transient` keys: what a checkpoint keeps and a
        migration moves. Default: drops ``transient`` from a dict state."""
        if not self.transient or not isinstance(state, dict):
            return state
        return {k: v for k, v in state.items() if k not in self.transient}

    def pack_state(self, state: Any) -> dict[str, np.ndarray]:
        """A tile's portable state as flat arrays (to send or store without pickling).
        Default: :func:`~shoal.runtime.packing.flatten` of :meth:`portable`, which handles
        dicts, lists, arrays and numbers."""
        return flatten(self.portable(state))

    def unpack_state(self, arrays: dict[str, np.ndarray]) -> Any:
        """The tile state :meth:`pack_state` packed. Default: :func:`~shoal.runtime.packing.unflatten`."""
        return unflatten(arrays)

    def frame(self, gathered: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The arrays a picture of a gathered state is drawn from: what frames on disk and a
        live view hold. Default: every gathered array."""
        return gathered

    def draw(self, frame: dict[str, np.ndarray], ax, scale: tuple[float, float] | None = None):
        """Draw a frame on a matplotlib axes; return the mappable for a colour bar. Default:
        points coloured by speed when the frame has positions ``x``, else the first grid field
        as an image (a middle slice in 3D).

        Parameters
        ----------
        frame : dict of str to ndarray
            What :meth:`frame` returned.
        ax : matplotlib.axes.Axes
            Where to draw.
        scale : (float, float), optional
            Lower and upper colour limits, in the drawn field's units; default the frame's own
            range (pass one scale to every frame of an animation so colours mean the same).
        """
        from ..graphics.drawing import draw_arrays

        return draw_arrays(frame, ax, scale)

    def pictures(self, gathered: dict[str, np.ndarray], folder: Path) -> list[Path]:
        """Pictures of a run's final gathered state that only this app knows how to draw (a
        seismic app's seismograms), written into the run ``folder`` by ``shoal report``; return
        the files. Default: none (the frames are drawn with :meth:`draw`)."""
        return []

    def export(self, gathered: dict[str, np.ndarray], frames: Path, step: int) -> Path | None:
        """Write the gathered state of ``step`` into a run folder's ``frames`` folder in a form
        other programs open (ParaView's VTK), beside each frame a run writes; return the file to
        open. An app overrides it when its frames are too coarse for that (an adaptive grid's).
        Default: nothing (``shoal report`` converts the frames: :func:`shoal.graphics.vtk.write_series`)."""
        return None


def payload_bytes(payload: Any) -> int:
    """Bytes a halo payload would take on the wire (arrays, or dicts/tuples of arrays)."""
    if payload is None:
        return 0
    if isinstance(payload, np.ndarray):
        return int(payload.nbytes)
    if isinstance(payload, dict):
        payload = payload.values()
    elif not isinstance(payload, (tuple, list)):
        return 8
    total = 0
    for v in payload:  # a store of arrays, packed for every neighbour of every task: no call per array
        total += v.nbytes if type(v) is np.ndarray else payload_bytes(v)
    return total
