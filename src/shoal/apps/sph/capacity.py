"""Particle stores at a capacity, as the native executor's kernels work on them (2D and 3D).

A tile's memory holds its particle fields at a capacity of rows (the first ``n`` used), a
``clock`` of scalars (its counts, and what the app keeps between phases) and one inbox per
phase that reads particles from its neighbours (word 0: the words that follow). Before each
run :meth:`CapacityPlan.prepare` grows the states' arrays to their capacity and writes each
tile's descriptor (:data:`I_LO` ...: its cell box, its capacity, where each field starts in
its memory); after it :meth:`CapacityPlan.publish` cuts them back to their counts.

Room is sized from the counts at the start of the run (:class:`Room`); when particles or
payloads outgrow it the executor redoes the run after :meth:`Room.grow`.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ...runtime.native.plan import Across, words
from ..particles import _members, neighbour_boxes

# The integer descriptor of a tile: its cell box [lo, hi), its capacity, then each field's
# offset in words (one more than the fields: the last is the memory's end).
I_LO = 0


def descriptor_slots(ndim: int) -> tuple[int, int, int]:
    """Where the box's upper corner, the capacity and the offsets start in a descriptor."""
    return ndim, 2 * ndim, 2 * ndim + 1


class Room:
    """How much room a run gives: particle rows per tile, rows per payload (grown on overflow).

    A tile gets its particles and half again plus a tile's share of the world's particles
    (water flows into empty tiles); a payload from a tile to a reader gets twice the particles
    near the reader now, plus 16 rows; both times ``factor``, doubled at every overflow.
    """

    def __init__(self):
        self.factor = 1

    def grow(self) -> None:
        """Twice the slack, for the run redone after something overflowed."""
        self.factor *= 2

    def particles(self, n: int, share: float) -> int:
        return int(math.ceil(self.factor * (1.5 * n + max(share, 16.0))))

    def payload(self, near: int) -> int:
        return self.factor * (2 * near + 16)


class CapacityPlan:
    """The Python side of a native particle app: capacities, clocks, inboxes and descriptors.

    Parameters
    ----------
    tiling : Tiling
        The run's tiling.
    particle_fields : tuple of str
        Per-particle arrays, grown to the capacity and cut back to ``n`` (clock slot ``count``).
    rows_fields : tuple of str
        Per-particle arrays whose rows the clock counts apart (slot ``rows_count``): the rates
        a phase left for a later one, as long as they were when made.
    inboxes : dict of str to (str, int)
        Per phase reading particles: its inbox field and the float64 columns of a row.
    clock : callable
        ``clock(state) -> float64 array``: a tile's scalars as its kernels keep them.
    unclock : callable
        ``unclock(state, clock)``: the scalars back into the state.
    count, rows_count : int
        The clock's slots of ``n`` and of the rows of ``rows_fields``.
    work : dict of str to callable, optional
        Work arrays a phase leaves for a later one or for a packer: ``words(tile, capacity,
        inbox rows)`` sizes each; they start filled with -1.0 (read as int64: negative, nothing
        known yet).
    """

    def __init__(self, tiling, particle_fields: tuple[str, ...], rows_fields: tuple[str, ...],
                 inboxes: dict[str, tuple[str, int]], clock: Callable, unclock: Callable, count: int,
                 rows_count: int | None = None, work: dict[str, Callable[[int, int, int], int]] | None = None):
        self.tiling = tiling
        self.particle_fields, self.rows_fields = particle_fields, rows_fields
        self.inboxes, self.clock, self.unclock = inboxes, clock, unclock
        self.count, self.rows_count = count, rows_count
        self.work = dict(work or {})
        self.fields = (*particle_fields, *rows_fields, "clock", *dict.fromkeys(name for name, _ in inboxes.values()),
                       *self.work)
        self.room = Room()
        self._payload: dict[tuple[int, int], int] = {}
        self._descriptors: dict[int, np.ndarray] = {}

    def prepare(self, states: dict, first_step: int, steps: int, across: Across) -> None:
        """Every tile's fields at its capacity, its clock and inboxes, and its descriptor (of
        the tiles in ``states``: on MPI ranks, this rank's; the rooms of payloads from tiles
        elsewhere, and the world's particle count, come ``across`` the ranks)."""
        tiling, room = self.tiling, self.room
        T = tiling.ntiles
        share = across.sum(sum(len(s["id"]) for s in states.values())) / T
        mine = {}
        for src in states:
            los, his, inner, nbrs = neighbour_boxes(tiling, src, 1)
            starts, _ = _members(states[src]["cell"], los, his, np.asarray(inner[0]), np.asarray(inner[1]))
            for k, reader in enumerate(nbrs):
                mine[(src, reader)] = room.payload(int(starts[k + 1] - starts[k]))
        self._payload = across.union(mine)  # every rank sizes every payload alike
        inbound = np.zeros(T, np.int64)
        for (_, reader), rows in self._payload.items():
            inbound[reader] += rows
        for t in states:
            state = states[t]
            clock = self.clock(state)
            cap = room.particles(max([len(state[name]) for name in (*self.particle_fields, *self.rows_fields)]),
                                 share)
            for name in (*self.particle_fields, *self.rows_fields):
                old = state[name]
                grown = np.zeros((cap, *old.shape[1:]), old.dtype)
                grown[:len(old)] = old
                state[name] = grown
            state["clock"] = clock
            for name, columns in self.inboxes.values():
                state[name] = np.zeros(1 + columns * inbound[t])
            for name, words_of in self.work.items():
                state[name] = np.full(words_of(t, cap, int(inbound[t])), -1.0)
            offsets = np.cumsum([0] + [words(state[name]) for name in self.fields])
            self._descriptors[t] = np.concatenate([tiling.lo[t], tiling.hi[t], [cap], offsets]).astype(np.int64)

    def publish(self, states: dict) -> None:
        """The particles cut to their counts, the clock back to the state's scalars."""
        for state in states.values():
            clock = state.pop("clock", None)
            if clock is None:
                continue
            n = int(clock[self.count])
            for name in self.particle_fields:
                state[name] = state[name][:n]
            for name in self.rows_fields:
                state[name] = state[name][:int(clock[self.rows_count])]
            self.unclock(state, clock)
            for name in (*(name for name, _ in self.inboxes.values()), *self.work):
                state.pop(name, None)

    def payload_words(self, phase: str, src: int, reader: int) -> int:
        """Room for one payload of ``phase`` from ``src`` to ``reader``, in words."""
        return self._payload[(src, reader)] * self.inboxes[phase][1]

    def ints(self, tile: int) -> np.ndarray:
        return self._descriptors[tile]

    def reader_ints(self, tile: int) -> np.ndarray:
        """What packers read of a reader another MPI rank holds: its cell box."""
        return np.concatenate([self.tiling.lo[tile], self.tiling.hi[tile]]).astype(np.int64)
