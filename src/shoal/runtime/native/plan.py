"""What an app declares to run natively, and the arrays the engine reads it from.

An app's :meth:`~shoal.runtime.app.App.native` returns a :class:`Native`: compiled phase
kernels of the one signature :data:`~shoal.runtime.native.engine.KERNEL`, the float64 fields of
a tile's state they work on, and, per phase that reads halos, a copy plan: which boxes of a
source tile's fields land in which boxes of its reader's (strided block copies, no payload).

:class:`NativeLayout` lays every tile's fields end to end in one float64 array (the tile's
*memory*, ``mem[mem_off[t]:mem_off[t + 1]]``) and puts views of it back in the tile states, so
the Python side (gather, frames, checkpoints, migration) reads what the kernels wrote.
:func:`copy_plans` turns the copy plans into the blocks the engine runs.
"""

from __future__ import annotations

import math
from collections import namedtuple
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numba as nb
import numpy as np

from ...errors import ShoalError
from .engine import KERNEL, PACKER

Box = tuple[slice, ...]
#: One copy of a plan: ``(source field, box of it, reader's field, box of it)``, the boxes of equal
#: sizes (slices with step 1, one per axis of the field).
Copy = tuple[str, Box, str, Box]


@nb.njit(KERNEL, nogil=True, cache=True)
def noop_kernel(tile, step, iteration, mem, ints, consts, reduced, out):
    """A kernel that does nothing (the engine's kernel table is never empty)."""
    return 0


@nb.njit(PACKER, nogil=True, cache=True)
def noop_packer(src, reader, mem, ints, reader_ints, consts, slot):
    """A packer that sends nothing (the engine's packer table is never empty)."""
    return 0


class Across:
    """What the processes of a run share before it starts, for :attr:`Native.prepare`: in one
    process, nothing (the MPI ranks' version: :mod:`~shoal.runtime.native.ranks`)."""

    def sum(self, value: float) -> float:
        """``value`` summed over the processes.

        Parameters
        ----------
        value : float
            This process's part.
        """
        return float(value)

    def union(self, values: dict[tuple[int, int], int]) -> dict[tuple[int, int], int]:
        """Every process's ``values`` in one table (each keyed by pairs of tiles its own tiles
        lead: no key is given twice).

        Parameters
        ----------
        values : dict of (int, int) to int
            This process's entries.
        """
        return dict(values)


@dataclass(frozen=True)
class Native:
    """How an app's phases run with no Python (see :meth:`~shoal.runtime.app.App.native`).

    Parameters
    ----------
    kernels : mapping of str to compiled function
        Per phase name, its kernel: compiled with Numba as ``numba.njit(KERNEL, nogil=True)``
        (:data:`~shoal.runtime.native.engine.KERNEL`). Phases not named run in Python.
    fields : tuple of str
        The keys of a tile's state that are the kernels' memory: C-contiguous arrays (ghost
        cells included), laid end to end in this order, each from a float64 boundary. Float64
        usually; a field of another dtype (float32 physics, bool flags) takes whole float64
        words, and a kernel views it back (``mem[a:b].view(np.uint8)[:nbytes].view(dtype)``).
    ints : callable, optional
        ``ints(tile) -> int64 array``: what a kernel knows of its tile (its shape, its place in
        the grid, where each field starts in its memory).
    consts : ndarray, optional
        The app's constants every kernel reads (float64).
    halos : callable, optional
        ``halos(phase name, source tile, reader tile) -> list of Copy``: the copy plan of a
        native phase that reads halos, per edge. Required for such a phase.
    scratch : callable, optional
        ``scratch(tile) -> {field: array}``: fields of ``fields`` a state may lack (ghost cells,
        work arrays a run makes afresh; list them in the app's ``transient``), made when it does.
    prepare : callable, optional
        ``prepare(states, first_step, steps, across)``: called at the start of every run, before
        the states are laid out, to size what the run's steps fill (room for samples recorded
        each step, room for particles) or make per-run tables. ``ints`` is called after it, on
        the same run. On MPI ranks ``states`` holds this rank's tiles only; :class:`Across`
        shares what the sizes need from the others (every rank calls it alike).
    packers : mapping of str to compiled function, optional
        Per native phase whose halos vary in size (particles), its packer
        (:data:`~shoal.runtime.native.engine.PACKER`) instead of a copy plan; the reader finds
        the payloads in the field ``inboxes[phase]`` of its memory.
    inboxes : mapping of str to str, optional
        Per phase of ``packers``, the float64 field its payloads land in (word 0: the words
        that follow).
    payload_words : callable, optional
        ``payload_words(phase, source, reader) -> int``: room for one payload of a packer's
        phase, read when a run's plans are made (after ``prepare``).
    publish : callable, optional
        ``publish(states)``: the states back in their Python form after a run (particle arrays
        cut to their counts, scalars out of the memory). Given by apps whose state changes size:
        every phase of such an app runs natively. Their run is redone with more room when a
        payload, inbox or kernel output does not fit: ``grow()`` then raises every capacity,
        and the next ``prepare`` sees it.
    grow : callable, optional
        See ``publish``.
    explain : callable, optional
        ``explain(phase, tile, state)``: called with a copy of a tile's state as its kernel left
        it when the kernel raised; raises the error the app's Python phase would have raised
        there (compiled code keeps no message). Without it, the kernel runs again from Python on
        a copy of the memory.
    deferred : mapping of str to callable, optional
        Per native phase whose kernel may return :data:`~shoal.runtime.native.engine.DEFER`,
        ``deferred[phase](tile, state, step) -> work``: the rest of the task, in Python, under
        the interpreter lock (what needs the app's Python objects, once in many steps). It sees
        the tile's state as the kernel left it, its fields views of the memory: it writes into
        them, or replaces fields of another size only on a step of ``relayout``.
    relayout : callable, optional
        ``relayout(step) -> bool``: whether a deferred part may resize fields at ``step``. A run
        then ends after that step (fewer steps than asked: the caller runs the rest), and the
        next one lays the memory out anew.
    reader_ints : callable, optional
        ``reader_ints(tile) -> int64 array``: on MPI ranks, the descriptor of a tile held by
        another rank, as far as packers read it of their reader (its box, say); default none.
    """

    kernels: Mapping[str, Any]
    fields: tuple[str, ...]
    ints: Callable[[int], np.ndarray] | None = None
    consts: np.ndarray = field(default_factory=lambda: np.zeros(0))
    halos: Callable[[str, int, int], list[Copy]] | None = None
    scratch: Callable[[int], dict[str, np.ndarray]] | None = None
    prepare: Callable[[dict, int, int, Across], None] | None = None
    packers: Mapping[str, Any] = field(default_factory=dict)
    inboxes: Mapping[str, str] = field(default_factory=dict)
    payload_words: Callable[[str, int, int], int] | None = None
    publish: Callable[[dict], None] | None = None
    grow: Callable[[], None] | None = None
    explain: Callable[[str, int, dict], None] | None = None
    deferred: Mapping[str, Callable[[int, dict, int], int]] = field(default_factory=dict)
    relayout: Callable[[int], bool] | None = None
    reader_ints: Callable[[int], np.ndarray] | None = None


def words(a: np.ndarray) -> int:
    """The float64 words a field takes in a tile's memory."""
    return -(-a.nbytes // 8)


class NativeLayout:
    """Where each tile's fields live in the native memory of a run (see the module doc)."""

    def __init__(self, native: Native, ntiles: int):
        self.native = native
        self.kernels = dict(native.kernels)
        self.ntiles = ntiles
        # per tile: field -> (offset in words, shape, dtype)
        self.fields: list[dict[str, tuple[int, tuple[int, ...], np.dtype]]] = []
        self._memory: tuple[np.ndarray, np.ndarray] | None = None  # the last memory and its offsets

    @classmethod
    def of(cls, app, tiling) -> NativeLayout | None:
        """The app's layout on ``tiling``, or ``None`` when every phase stays in Python."""
        native = app.native(tiling)
        if native is None:
            return None
        names = {p.name for p in app.phases}
        unknown = sorted(set(native.kernels) - names)
        if unknown:
            raise ShoalError(f"app {app.name!r}: native kernels for phases it lacks: {', '.join(unknown)}")
        for p in app.phases:
            if p.name in native.kernels and (p.jobs or p.emits_jobs):
                raise ShoalError(f"app {app.name!r}: phase {p.name!r} emits or runs jobs: it runs in Python, not "
                                 "compiled (its values are jobs and their results)")
            if p.name in native.packers and (p.name not in native.inboxes or native.payload_words is None):
                raise ShoalError(f"app {app.name!r}: native phase {p.name!r} has a packer, no inbox or payload size")
            if p.name in native.kernels and p.halo and native.halos is None and p.name not in native.packers:
                raise ShoalError(f"app {app.name!r}: native phase {p.name!r} reads halos, no copy plan given")
        if native.publish is not None and names - set(native.kernels):
            raise ShoalError(f"app {app.name!r}: a state that changes size needs every phase native, not "
                             f"{', '.join(sorted(names - set(native.kernels)))}")
        return cls(native, tiling.ntiles)

    def memory(self, states: dict[int, Any]) -> tuple[np.ndarray, np.ndarray]:
        """Every tile's fields end to end, and each tile's start (``T + 1`` offsets); the
        states then hold views of it. States that already do (the run before's, not moved nor
        resized since) keep their memory: nothing is copied. A tile whose state another process
        holds (an MPI rank's) takes no memory here."""
        if self._in_place(states):
            return self._memory
        sizes, self.fields = [], []
        for t in range(self.ntiles):
            at, where = 0, {}
            if t not in states:
                self.fields.append(where)
                sizes.append(at)
                continue
            missing = [name for name in self.native.fields if name not in states[t]]
            if missing and self.native.scratch is not None:
                made = self.native.scratch(t)
                states[t].update({name: made[name] for name in missing if name in made})
            for name in self.native.fields:
                if name not in states[t]:
                    raise ShoalError(f"tile {t}: the state has no native field {name!r}")
                a = states[t][name]
                if not (isinstance(a, np.ndarray) and a.dtype.kind in "fiub"):
                    raise ShoalError(f"tile {t}: native field {name!r} must be an array of numbers, got "
                                     f"{getattr(a, 'dtype', type(a).__name__)}")
                where[name] = (at, a.shape, a.dtype)
                at += words(a)
            self.fields.append(where)
            sizes.append(at)
        offsets = np.zeros(self.ntiles + 1, np.int64)
        np.cumsum(sizes, out=offsets[1:])
        mem = np.empty(int(offsets[-1]))
        for t in range(self.ntiles):
            state = states.get(t)
            for name, (at, shape, dtype) in self.fields[t].items():
                n = math.prod(shape)
                if dtype == np.float64:
                    view = mem[offsets[t] + at:offsets[t] + at + n].reshape(shape)
                else:
                    chunk = mem[offsets[t] + at:offsets[t] + at + -(-n * dtype.itemsize // 8)]
                    view = chunk.view(np.uint8)[:n * dtype.itemsize].view(dtype).reshape(shape)
                view[...] = state[name]
                state[name] = view
        self._memory = mem, offsets
        return mem, offsets

    def _in_place(self, states: dict[int, Any]) -> bool:
        """Whether every native field of ``states`` is still the view the last memory put there."""
        if self._memory is None:
            return False
        mem, offsets = self._memory
        start = mem.ctypes.data
        for t in range(self.ntiles):
            state = states.get(t)
            if (state is None) != (not self.fields[t]):  # a tile that came or left
                return False
            for name, (at, shape, dtype) in self.fields[t].items():
                a = state.get(name)  # the memory is alive (held here): a view at its address is one of it
                if (not isinstance(a, np.ndarray) or a.shape != shape or a.dtype != dtype
                        or a.ctypes.data != start + 8 * (int(offsets[t]) + at)):
                    return False
        return True

    def descriptors(self, tiling) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every tile's integer descriptor end to end, their offsets, and the constants (of a
        tile another process holds, what packers read of it: ``reader_ints``)."""
        native = self.native
        rows = [np.asarray(native.ints(t), np.int64) if native.ints and self.fields[t]
                else np.asarray(native.reader_ints(t), np.int64) if native.reader_ints and not self.fields[t]
                else np.zeros(0, np.int64) for t in range(self.ntiles)]
        offsets = np.zeros(self.ntiles + 1, np.int64)
        np.cumsum([len(r) for r in rows], out=offsets[1:])
        ints = np.concatenate(rows) if rows else np.zeros(0, np.int64)
        return ints, offsets, np.ascontiguousarray(self.native.consts, np.float64)

    def block(self, tile: int, name: str, box: Box) -> tuple[list[int], int]:
        """A box of a tile's field as ``[offset, n0, n1, n2, s0, s1, s2]`` in float64 words,
        and its words. Axes the box spans one element of are folded into the offset (at most
        three may be left); a field of a narrower dtype needs boxes whose rows are whole words."""
        at, shape, dtype = self.fields[tile][name]
        if len(box) != len(shape):
            raise ShoalError(f"copy plan: field {name!r} has {len(shape)} axes, the box {box} has {len(box)}")
        strides = [math.prod(shape[k + 1:]) for k in range(len(shape))]
        counts, kept, offset = [], [], 0
        for sl, n, stride in zip(box, shape, strides, strict=True):
            start, stop, step = sl.indices(n)
            if step != 1:
                raise ShoalError(f"copy plan: field {name!r}: boxes are slices of step 1, got {sl}")
            offset += start * stride
            if stop - start != 1:
                counts.append(max(0, stop - start))
                kept.append(stride)
        if len(counts) > 3:
            raise ShoalError(f"copy plan: field {name!r}: a box {box} spans more than three axes")
        pad = 3 - len(counts)
        counts, strides = [1] * pad + counts, [0] * pad + kept
        per = 8 // dtype.itemsize if dtype.itemsize < 8 else 1  # elements in a float64 word
        if per > 1 and math.prod(counts):
            if strides[2] not in (0, 1) or any(v % per for v in (offset, counts[2], strides[0], strides[1])):
                raise ShoalError(f"copy plan: field {name!r} ({dtype}): the box {box} does not cover whole "
                                 "float64 words")
            offset, counts[2], strides = offset // per, counts[2] // per, [strides[0] // per, strides[1] // per, 1]
        return [at + offset, *counts, *strides], math.prod(counts)


NO_BLOCK = [0, 0, 0, 0, 0, 0, 0]  # a box of no cells: the side of a copy whose tile another process holds
Plans = namedtuple("Plans", ["native", "depth", "staging", "rd_ptr", "rd", "in_ptr", "inc", "lk_base", "ed_off",
                             "ed_size", "pk_ptr", "pk", "up_ptr", "up", "packer", "ib_off", "ib_cap"])


def copy_plans(keys: list, layout: NativeLayout | None, phases, ntiles: int) -> Plans:
    """The edges of every distinct ``(phase index, Links)`` of a run, numbered per key in
    (source, reader) order, and the blocks of the native ones' copies.

    Staging holds ``depth`` slots per edge (instance modulo depth): a writer may run that many
    instances ahead of a reader before it would overwrite halos not yet read (the engine checks).
    A packer's edge has a slot of the app's ``payload_words`` plus its length word.
    """
    T = ntiles
    native = np.zeros(max(len(keys), 1), bool)
    packer = np.full(max(len(keys), 1), -1, np.int64)
    ib_off = np.zeros((max(len(keys), 1), T), np.int64)
    ib_cap = np.zeros((max(len(keys), 1), T), np.int64)
    packers = list(layout.native.packers) if layout is not None else []
    rd_ptr = np.zeros((max(len(keys), 1), T + 1), np.int64)
    in_ptr = np.zeros((max(len(keys), 1), T + 1), np.int64)
    rd, inc, lk_base, ed_size = [], [], [], []
    pk, up, pk_ptr, up_ptr = [], [], [0], [0]
    for k, (p, links) in enumerate(keys):
        phase = phases[p]
        base = len(ed_size)
        lk_base.append(base)
        rd_ptr[k] = links.base
        is_native = layout is not None and phase.name in layout.kernels
        native[k] = is_native
        variable = is_native and phase.name in packers
        if variable:
            packer[k] = packers.index(phase.name)
            inbox = layout.native.inboxes[phase.name]
            for t in range(T):
                if not layout.fields[t]:
                    continue  # held by another process
                at, shape, dtype = layout.fields[t][inbox]
                if dtype != np.float64:
                    raise ShoalError(f"phase {phase.name!r}: its inbox {inbox!r} must be float64, got {dtype}")
                ib_off[k, t], ib_cap[k, t] = at, math.prod(shape)
        edge_of = {}
        for src in range(T):
            for reader in links.readers[src]:
                e = len(ed_size)
                edge_of[(src, reader)] = e
                rd.append(reader)
                size = 0
                if variable:
                    size = 1 + int(layout.native.payload_words(phase.name, src, reader))
                elif is_native:
                    for src_field, src_box, dst_field, dst_box in layout.native.halos(phase.name, src, reader):
                        # each side's blocks where its tile is here (an MPI rank holds some tiles)
                        a, na = layout.block(src, src_field, src_box) if layout.fields[src] else (NO_BLOCK, -1)
                        b, nb_ = layout.block(reader, dst_field, dst_box) if layout.fields[reader] else (NO_BLOCK, -1)
                        if min(na, nb_) >= 0 and na != nb_:
                            raise ShoalError(f"copy plan of phase {phase.name!r}, tile {src} -> {reader}: boxes of "
                                             f"{na} and {nb_} cells")
                        pk.append([a[0], size, *a[1:]])
                        up.append([b[0], size, *b[1:]])
                        size += max(na, nb_, 0)
                pk_ptr.append(len(pk))
                up_ptr.append(len(up))
                ed_size.append(size)
        for reader in range(T):
            in_ptr[k, reader + 1] = in_ptr[k, reader] + len(links.sources[reader])
            inc.extend(edge_of[(src, reader)] for src in links.sources[reader])
    ed_size = np.asarray(ed_size, np.int64)
    ed_off = np.zeros(len(ed_size), np.int64)
    if len(ed_size):
        np.cumsum(ed_size[:-1], out=ed_off[1:])
    blocks = lambda rows: np.asarray(rows, np.int64).reshape(-1, 8)  # noqa: E731
    return Plans(native=native, depth=2 * len(phases) + 2, staging=int(ed_size.sum()), rd_ptr=rd_ptr,
                 rd=np.asarray(rd, np.int64), in_ptr=in_ptr, inc=np.asarray(inc, np.int64),
                 lk_base=np.asarray(lk_base or [0], np.int64), ed_off=ed_off, ed_size=ed_size,
                 pk_ptr=np.asarray(pk_ptr, np.int64), pk=blocks(pk), up_ptr=np.asarray(up_ptr, np.int64),
                 up=blocks(up), packer=packer, ib_off=ib_off, ib_cap=ib_cap)
