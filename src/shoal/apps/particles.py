"""Particles that live in tiles: the per-tile store, halos, and migration (what SPH and FLIP
share).

A tile holds the particles whose cell lies in its box, as a dict of arrays sorted by
(global cell, particle id). That order never depends on the tiling, and the kernels sum
over neighbours cell by cell in that order, so every sum is made in one fixed global order
whatever the tiling, placement or worker count.

Compiled helpers that the apps' kernels also call from their own compiled code (so that a
task makes one call, not one per helper) go by plain names; Python calls them through a
:func:`~shoal.runtime.timing.lock_free` wrapper of the same name with an underscore.
Numba's on-disk cache of a kernel does not notice a change in a helper of another file: after
editing one here, delete the ``__pycache__`` folders of ``shoal/apps/sph`` and ``shoal/apps/flip``
(or touch the kernels' files) so that the kernels that inline it are compiled again.
"""

from __future__ import annotations

import math
import weakref

import numba as nb
import numpy as np
from numba import literal_unroll
from numba.extending import overload

from ..errors import ShoalError
from ..runtime.timing import lock_free
from ..tiling import Tiling

# Per-particle arrays a tile carries (vectors are (n, ndim)). ``v`` and ``rho`` are full-step
# values, ``vh`` and ``rhoh`` the leapfrog's half-step ones. ``cell`` is set from ``x`` whenever
# particles move, so halos and migration never recompute it.
FIELDS = ("id", "kind", "x", "v", "vh", "rho", "rhoh", "e", "m", "cell")
FLUID, WALL = 0, 1


def empty(ndim: int) -> dict[str, np.ndarray]:
    return {
        "id": np.empty(0, np.int64), "kind": np.empty(0, np.int8), "x": np.empty((0, ndim)),
        "v": np.empty((0, ndim)), "vh": np.empty((0, ndim)), "rho": np.empty(0), "rhoh": np.empty(0),
        "e": np.empty(0), "m": np.empty(0),
        "cell": np.empty((0, ndim), np.int64),
    }


def fields_of(p: dict) -> list[str]:
    """The per-particle arrays this store carries (apps may leave some of FIELDS out)."""
    return [k for k in FIELDS if k in p]


def take(p: dict, idx) -> dict:
    return {k: p[k][idx] for k in FIELDS if k in p}


def _nothing(ndim: int) -> dict:
    """A shared, read-only empty store: what most neighbours get from most tiles."""
    out = empty(ndim)
    for a in out.values():
        a.flags.writeable = False
    return out


NOTHING = {2: _nothing(2), 3: _nothing(3)}


def concat(parts: list[dict], ndim: int) -> dict:
    nonempty = [q for q in parts if len(q["id"])]
    if not parts:
        return empty(ndim)
    if not nonempty:  # fresh, writable arrays: compiled code sees one array type, not a read-only one too
        return {k: np.empty((0, *parts[0][k].shape[1:]), parts[0][k].dtype) for k in fields_of(parts[0])}
    return {k: np.concatenate([q[k] for q in nonempty]) for k in fields_of(nonempty[0])}


class CellGrid:
    """The SPH cell grid (cell side >= kernel support) laid over the domain box."""

    def __init__(self, origin, size, support: float, clamp: bool = False):
        self.clamp = clamp
        self.origin = np.asarray(origin, dtype=np.float64)
        self.size = np.asarray(size, dtype=np.float64)
        self.counts = np.maximum((self.size / support).astype(np.int64), 1)
        self.cell = self.size / self.counts  # >= support along every axis
        self.ndim = len(self.counts)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(int(c) for c in self.counts)

    def index(self, x: np.ndarray) -> np.ndarray:
        """Integer cell coordinates (n, ndim) of positions; may lie outside the grid unless
        the grid clamps (fluidanimate keeps particles that poke through a wall in the edge cell)."""
        return _cells_of(np.ascontiguousarray(x, dtype=np.float64), self.origin, self.cell, self.counts, self.clamp)

    def inside(self, idx: np.ndarray) -> np.ndarray:
        """Mask of cell coordinates inside the grid."""
        return in_box({"cell": idx}, np.zeros(self.ndim, np.int64), self.counts)

    def flat(self, idx: np.ndarray) -> np.ndarray:
        return np.ravel_multi_index(tuple(idx.T), self.shape)

    def reach(self) -> tuple[np.ndarray, np.ndarray]:
        """The box a particle may occupy: the grid widened by one cell on every side.

        A particle in the ring of width one cell around a clamping grid sits in the edge cell
        and still finds every neighbour within one cell of it; farther out it has left the
        world (a blow-up, or an input that does not fit the grid).
        """
        return self.origin - self.cell, self.origin + self.size + self.cell


@nb.njit(cache=True, nogil=True)
def cells_of(x, origin, side, counts, clamp):
    """floor((x - origin) / side) per axis, clamped into the grid if asked (one pass, no temporaries)."""
    out = np.empty(x.shape, np.int64)
    for i in range(x.shape[0]):
        for a in range(x.shape[1]):
            c = np.int64(math.floor((x[i, a] - origin[a]) / side[a]))
            if clamp:
                c = min(max(c, 0), counts[a] - 1)
            out[i, a] = c
    return out


_cells_of = lock_free(cells_of)


def locate(p: dict, grid: CellGrid) -> dict:
    """Set every particle's cell from its position."""
    p["cell"] = grid.index(p["x"])
    return p


@nb.njit(cache=True, nogil=True)
def cell_order(cell, ids, ncells):
    """Permutation sorting particles by (cell, id), and the first particle of every cell.

    A stable counting sort by cell, then an insertion sort by id inside each cell: O(n) when,
    as usual, each cell's particles already come in id order.
    """
    n = cell.shape[0]
    start = np.zeros(ncells + 1, np.int64)
    for i in range(n):
        start[cell[i] + 1] += 1
    for c in range(ncells):
        start[c + 1] += start[c]
    fill = start[:-1].copy()
    order = np.empty(n, np.int64)
    for i in range(n):
        order[fill[cell[i]]] = i
        fill[cell[i]] += 1
    for c in range(ncells):
        for k in range(start[c] + 1, start[c + 1]):
            item = order[k]
            m = k - 1
            while m >= start[c] and ids[order[m]] > ids[item]:
                order[m + 1] = order[m]
                m -= 1
            order[m + 1] = item
    return order, start


def check_moves(before: np.ndarray, p: dict, grid: CellGrid, remedy: str) -> None:
    """Stop the run when a particle moved more than one cell along an axis in one step, or
    ended more than one cell outside the grid (``before``: the cells before the move, row by
    row with ``p``; ``p["cell"]``: after it).

    A tile is at least one cell wide, so a particle that moves at most one cell lands in its
    own tile or a neighbour's, which the migration reaches in one hop: no particle can then be
    stranded, and the state is the same for any tiling. A longer jump also means it crossed
    a whole kernel support in one step, past particles it never felt: the time step is too
    long for its speed. The test reads the particle only, never the tiling, so every tiling
    stops at the same step; it names the offender with the smallest id (the executor adds the
    step and the tile).
    """
    lo, hi = grid.reach()
    refuse_move(_worst_move(before, p["cell"], p["x"], p["id"], lo, hi), before, p, grid, remedy)


def refuse_move(i: int, before: np.ndarray, p: dict, grid: CellGrid, remedy: str) -> None:
    """Raise :func:`check_moves`'s error for particle row ``i`` of ``p`` (nothing when ``i`` < 0),
    for apps whose compiled move finds the offender itself."""
    if i < 0:
        return
    lo, hi = grid.reach()
    x, pid = tuple(float(f"{c:.4g}") for c in p["x"][i]), int(p["id"][i])
    if np.any(p["x"][i] < lo) or np.any(p["x"][i] > hi):
        raise ShoalError(f"particle {pid} left the world (at {x} m, more than one cell "
                         f"outside the cell grid): the simulation blew up; {remedy}")
    raise ShoalError(f"particle {pid} moved from cell {tuple(map(int, before[i]))} to "
                     f"{tuple(map(int, p['cell'][i]))} in one step, more than one cell (the kernel support): the "
                     f"time step is too long for its speed; {remedy}")


@nb.njit(cache=True, nogil=True, inline="always")
def bad_move(before, after, x, i, lo, hi):
    """Whether particle ``i`` moved more than one cell along an axis or lies outside [lo, hi]."""
    bad = False
    for a in range(after.shape[1]):
        if abs(after[i, a] - before[i, a]) > 1 or not lo[a] <= x[i, a] <= hi[a]:
            bad = True
    return bad


@lock_free
@nb.njit(cache=True, nogil=True)
def _worst_move(before, after, x, ids, lo, hi):
    """Row of the smallest-id particle that moved more than one cell or lies outside [lo, hi], or -1."""
    worst = -1
    for i in range(after.shape[0]):
        if bad_move(before, after, x, i, lo, hi) and (worst < 0 or ids[i] < ids[worst]):
            worst = i
    return worst


def check_arrivals(p: dict, leaving: np.ndarray, tiling: Tiling, tile: int, remedy: str) -> None:
    """Stop the run when a particle leaving ``tile`` (rows or mask ``leaving``) lies in none of its
    neighbours' boxes: the migration would lose it. Moves of at most one cell a step never
    strand one (:func:`check_moves`); emigrants held back for several steps can."""
    los, his, _, _ = neighbour_boxes(tiling, tile, 0)
    cell, ids = p["cell"][leaving], p["id"][leaving]
    none = np.zeros(cell.shape[1], np.int64)  # an empty box: skip nobody
    arrives = np.zeros(len(ids), bool)
    arrives[_members(cell, los, his, none, none)[1]] = True  # one pass for every neighbour's box
    if not arrives.all():
        i = int(np.flatnonzero(~arrives)[np.argmin(ids[~arrives])])
        raise ShoalError(f"particle {int(ids[i])} moved to cell {tuple(map(int, cell[i]))}, past every "
                         f"neighbouring tile, since its last migration; {remedy}")


def in_cell_order(p: dict) -> bool:
    """Whether particles are (still) sorted by (global cell, id)."""
    return len(p["id"]) < 2 or _cell_id_increasing(p["cell"], p["id"])


@lock_free
@nb.njit(cache=True, nogil=True)
def _cell_id_increasing(cell, ids):
    """Whether (cell coordinates row-major, id) strictly increase from particle to particle."""
    ndim = cell.shape[1]
    for i in range(1, cell.shape[0]):
        a = 0
        while a < ndim and cell[i, a] == cell[i - 1, a]:
            a += 1
        if a < ndim:
            if cell[i, a] < cell[i - 1, a]:
                return False
        elif ids[i] <= ids[i - 1]:
            return False
    return True


def sort_by_cell(p: dict, grid: CellGrid) -> dict:
    """Particles ordered by (global cell, id): the fixed global summation order."""
    if len(p["id"]) == 0:
        return p
    shifted = p["cell"] - p["cell"].min(axis=0)  # cells just outside the grid sort too
    extent = shifted.max(axis=0) + 1
    flat = shifted[:, 0].astype(np.int64)
    for a in range(1, grid.ndim):
        flat = flat * int(extent[a]) + shifted[:, a]
    order, _ = cell_order(flat, p["id"], int(np.prod(extent)))
    return take(p, order)


def in_box(p: dict, lo, hi) -> np.ndarray:
    """Mask of particles whose cell lies in the half-open cell box [lo, hi)."""
    return _box_mask(p["cell"], np.asarray(lo, np.int64), np.asarray(hi, np.int64))


@nb.njit(cache=True, nogil=True, inline="always")
def _in(cell, i, lo, hi):
    for a in range(cell.shape[1]):
        if cell[i, a] < lo[a] or cell[i, a] >= hi[a]:
            return False
    return True


@lock_free
@nb.njit(cache=True, nogil=True)
def _box_mask(cell, lo, hi):
    mask = np.empty(cell.shape[0], np.bool_)
    for i in range(cell.shape[0]):
        mask[i] = _in(cell, i, lo, hi)
    return mask


@nb.njit(cache=True, nogil=True)
def rows_outside(cell, n, lo, hi, out):
    """The rows ``i < n`` whose cell lies outside the box [lo, hi), in order, into ``out``
    (int64); how many."""
    k = 0
    for i in range(n):
        if not _in(cell, i, lo, hi):
            out[k] = i
            k += 1
    return k


@nb.njit(cache=True, nogil=True)
def members(cell, los, his, skip_lo, skip_hi):
    """For each box k, the indices of the particles whose cell lies in [los[k], his[k]).

    The caller vouches that no box meets the box [skip_lo, skip_hi) (the sender's inner cells,
    for halos): particles there are not tested box by box.
    """
    nbox = los.shape[0]
    maybe = np.empty(cell.shape[0], np.int64)
    n = 0
    for i in range(cell.shape[0]):
        if not _in(cell, i, skip_lo, skip_hi):
            maybe[n] = i
            n += 1
    starts = np.zeros(nbox + 1, np.int64)
    for k in range(nbox):
        count = 0
        for q in range(n):
            if _in(cell, maybe[q], los[k], his[k]):
                count += 1
        starts[k + 1] = starts[k] + count
    out = np.empty(starts[nbox], np.int64)
    for k in range(nbox):
        j = starts[k]
        for q in range(n):
            if _in(cell, maybe[q], los[k], his[k]):
                out[j] = maybe[q]
                j += 1
    return starts, out


_members = lock_free(members)


_BOXES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def neighbour_boxes(tiling: Tiling, src: int, width: int):
    """The cell boxes of ``src``'s neighbours widened by ``width`` (lows, highs), and the box
    of ``src``'s cells that none of them reaches, worked out once per tiling: every task that
    packs a halo asks for them."""
    cache = _BOXES.get(tiling)  # (setdefault would make a weak reference at every call)
    if cache is None:
        cache = _BOXES.setdefault(tiling, {})
    key = (src, width)
    if key not in cache:
        nbrs = tiling.neighbours[src]
        # Neighbours' boxes lie outside src's: widened by ``width`` they reach that deep into it.
        cache[key] = (tiling.lo[nbrs] - width, tiling.hi[nbrs] + width,
                      (tiling.lo[src] + width, tiling.hi[src] - width), list(map(int, nbrs)))
    return cache[key]


# A ring halo is one float64 table per neighbour, one row per particle: its id and cell first
# (integers, exact as float64 below 2^53, far beyond any particle count), then what the
# reading kernel needs. One array per payload: one slice to send, one concatenation to read.
def empty_ring(columns: int) -> np.ndarray:
    """A shared, read-only ring payload of no particle: what most tiles send most neighbours."""
    out = np.empty((0, columns))
    out.flags.writeable = False
    return out


def ring_payloads(packed: tuple, nbrs: list[int], empty: np.ndarray) -> dict[int, np.ndarray]:
    """``{neighbour: rows}`` from a compiled ring packer's ``(starts, table)`` (rows
    ``starts[k]:starts[k + 1]`` for neighbour k), ``empty`` for a ring of nobody."""
    starts, table = packed
    starts = starts.tolist()
    return {n: table[a:b] if b > a else empty for n, a, b in zip(nbrs, starts[:-1], starts[1:], strict=True)}


def ring_table(payloads: list, empty: np.ndarray) -> np.ndarray:
    """Ring payloads (in the fixed order: by source tile id) as one table: a fresh, writable
    array, so compiled code sees one array type."""
    return np.concatenate([q for q in payloads if q is not empty] or [empty])  # most neighbours send nobody


@nb.njit(cache=True, nogil=True, inline="always")
def put_keys(table, k, ids, cell, i):
    """Row ``k`` of a ring table starts with particle ``i``'s id and cell."""
    table[k, 0] = ids[i]
    for a in range(cell.shape[1]):
        table[k, 1 + a] = cell[i, a]


@nb.njit(cache=True, nogil=True)
def ring_keys(table, ndim):
    """The ids and cells of a ring table's rows, as integers."""
    n = table.shape[0]
    ids = np.empty(n, np.int64)
    cell = np.empty((n, ndim), np.int64)
    for k in range(n):
        ids[k] = np.int64(table[k, 0])
        for a in range(ndim):
            cell[k, a] = np.int64(table[k, 1 + a])
    return ids, cell


def emigrants_for_neighbours(p: dict, tiling: Tiling, src: int) -> dict[int, dict]:
    """The particles of ``src`` that now lie in each neighbour's cells.

    Uses ``p["outside"]`` (the rows of the particles outside the tile's box, set when they
    moved) when the store has it.
    """
    los, his, _, nbrs = neighbour_boxes(tiling, src, 0)
    out = p["outside"] if "outside" in p else outside_rows(p, tiling, src)
    nothing = NOTHING[los.shape[1]]
    if not len(out):
        return dict.fromkeys(nbrs, nothing)
    none = np.zeros(los.shape[1], np.int64)  # an empty box: skip nobody
    starts, idx = _members(p["cell"][out], los, his, none, none)
    # One gather of every field for all neighbours; each gets a slice of it.
    rows = gather_fields(p, p, out[idx], fields_of(p))
    starts = starts.tolist()
    return {n: {f: v[a:b] for f, v in rows.items()} if b > a else nothing
            for n, a, b in zip(nbrs, starts[:-1], starts[1:], strict=True)}


def outside_rows(p: dict, tiling: Tiling, tile: int) -> np.ndarray:
    """Rows of the particles whose cell lies outside ``tile``'s box (emigrants to be)."""
    return np.flatnonzero(~in_box(p, tiling.lo[tile], tiling.hi[tile]))


def resettle(p: dict, halos: dict, grid: CellGrid, tiling: Tiling, tile: int, remedy: str) -> None:
    """A migrate phase: ``settle`` tile ``tile``'s particles ``p`` in place with the emigrant
    payloads ``halos`` its neighbours sent, unless nobody came, nobody left and nobody changed
    cell.

    Reads (and removes) ``p["outside"]``, the rows outside the tile's box, and ``p["sorted"]``,
    whether the particles are still in (cell, id) order, when the move set them. Vertanen
    deletes a particle that jumped past every neighbour: the run stops instead, saying
    ``remedy``.
    """
    incoming = [halos[k] for k in sorted(halos) if len(halos[k]["id"])]
    out, ordered = p.pop("outside", None), p.pop("sorted", None)
    if out is None:  # no move before this task (a check's run on a fresh state)
        out, ordered = outside_rows(p, tiling, tile), in_cell_order(p)
    if not incoming and not len(out) and ordered:
        return
    if len(out):
        check_arrivals(p, out, tiling, tile, remedy)
    p.update(settle(take(p, slice(None)), grid, tiling, tile, incoming))


def settle(p: dict, grid: CellGrid, tiling: Tiling, tile: int, immigrants: list[dict]) -> dict:
    """Keep the tile's own particles, take in immigrants, restore the (cell, id) order.

    One compiled pass orders the kept particles (every one lies in the tile's box, so a
    counting sort over the box's cells does it) and one gather per field builds the store.
    """
    rest = concat(immigrants, grid.ndim)
    index, _ = _box_order(p["cell"], p["id"], rest["cell"], rest["id"], tiling.lo[tile], tiling.hi[tile])
    return gather_fields(p, rest, index, fields_of(p))


@nb.njit(cache=True, nogil=True)
def box_order(cell_a, id_a, cell_b, id_b, lo, hi):
    """The particles of a and b (indices into a then b) whose cell lies in [lo, hi), in
    (cell, id) order, and the first of them in every cell of the box (row-major)."""
    na = cell_a.shape[0]
    n = na + cell_b.shape[0]
    ndim = lo.shape[0]
    flat = np.empty(n, np.int64)
    ids = np.empty(n, np.int64)
    chosen = np.empty(n, np.int64)
    m = 0
    for i in range(n):
        cell = cell_a[i] if i < na else cell_b[i - na]
        key = 0
        inside = True
        for a in range(ndim):
            if cell[a] < lo[a] or cell[a] >= hi[a]:
                inside = False
                break
            key = key * (hi[a] - lo[a]) + (cell[a] - lo[a])
        if inside:
            flat[m] = key
            ids[m] = id_a[i] if i < na else id_b[i - na]
            chosen[m] = i
            m += 1
    ncells = 1
    for a in range(ndim):
        ncells *= hi[a] - lo[a]
    order, start = cell_order(flat[:m], ids[:m], ncells)
    return chosen[:m][order], start


_box_order = lock_free(box_order)


def _gather_rows(first, rest, index, out):
    """``out[k] = concatenate([first, rest])[index[k]]`` for one field (compiled code only)."""


@overload(_gather_rows, inline="always")
def _gather_rows_for(first, rest, index, out):
    # Fields of one or two dimensions: the loop is chosen by the field's type when compiling.
    if out.ndim == 1:
        def rows(first, rest, index, out):
            nf = first.shape[0]
            for k in range(index.shape[0]):
                i = index[k]
                out[k] = first[i] if i < nf else rest[i - nf]
    else:
        def rows(first, rest, index, out):
            nf = first.shape[0]
            for k in range(index.shape[0]):
                i = index[k]
                if i < nf:
                    for a in range(out.shape[1]):
                        out[k, a] = first[i, a]
                else:
                    for a in range(out.shape[1]):
                        out[k, a] = rest[i - nf, a]
    return rows


@lock_free
@nb.njit(cache=True, nogil=True)
def _gather_all(triples, index):
    """Every (first, rest, out) of a tuple, whatever their dtypes: one call for all fields."""
    for t in literal_unroll(triples):
        _gather_rows(t[0], t[1], index, t[2])


def gather_fields(first: dict, rest: dict, index: np.ndarray, fields) -> dict:
    """``concatenate([first[f], rest[f]])[index]`` for every field ``f``, without building the
    concatenations, in one compiled call (a call per field costs more than a small tile's gather).
    With indices below ``len(first)`` only, ``rest`` is never read: ``first[f][index]``."""
    out, triples = {}, []
    n = len(index)
    for f in fields:
        a, r = first[f], rest[f]
        o = out[f] = np.empty((n, *a.shape[1:]), a.dtype)
        if r.dtype != a.dtype:
            r = r.astype(a.dtype)
        triples.append((a, r, o))
    if triples:
        _gather_all(tuple(triples), index)
    return out


@nb.njit(cache=True, nogil=True)
def overhang(cell, lo, hi):
    """How many cells the particles reach beyond the box [lo, hi) at most (0 when all inside)."""
    most = 0
    for i in range(cell.shape[0]):
        for a in range(cell.shape[1]):
            if lo[a] - cell[i, a] > most:
                most = lo[a] - cell[i, a]
            elif cell[i, a] - (hi[a] - 1) > most:
                most = cell[i, a] - (hi[a] - 1)
    return most


@nb.njit(cache=True, nogil=True)
def merge_order(cell, ids, ring_cell, ring_ids, lo, hi):
    """A tile's own particles (``cell``, ``ids``) and halo ones (``ring_cell``, ``ring_ids``)
    merged in (local cell, id) order, for the kernels that walk them.

    The local box is the tile's box [lo, hi) widened so that every own particle's 3^d
    neighbour cells lie inside it (one cell, or more when own particles have drifted out of
    the box between lazy migrations); halo particles beyond it cannot be anyone's neighbour
    and are dropped. So every own particle lies inside the local box less its outer ring,
    which the kernels rely on to skip the ring's halo-halo pairs.

    Returns ``index`` (into own then halo particles), the cell starts, whether each merged
    particle is own, the merged rows of the own particles (in their order) and the local
    grid's shape.
    """
    width = 1 + overhang(cell, lo, hi)
    box_lo, box_hi = lo - width, hi + width
    index, start = box_order(cell, ids, ring_cell, ring_ids, box_lo, box_hi)
    n_own = ids.shape[0]
    own = np.empty(index.shape[0], np.bool_)
    own_index = np.empty(n_own, np.int64)
    k_own = 0
    for k in range(index.shape[0]):
        own[k] = index[k] < n_own
        if own[k]:
            own_index[k_own] = k
            k_own += 1
    return index, start, own, own_index[:k_own], box_hi - box_lo


@nb.njit(cache=True, nogil=True)
def neighbour_pairs(own, start, shape):
    """Ordered pairs (i, j), i an own particle and j any other particle in the 3^d cells
    around i's: the candidate pairs a kernel's neighbour search weighs, counted from cell
    occupancy (``start``, row-major over the local grid of ``shape``) without a distance.

    Summed over tiles this counts every particle's candidates once, whatever the tiling.
    """
    ndim = shape.shape[0]
    total = 0
    coords = np.empty(ndim, np.int64)
    for c in range(start.shape[0] - 1):
        mine = 0
        for i in range(start[c], start[c + 1]):
            if own[i]:
                mine += 1
        if mine == 0:
            continue
        rest = c
        for a in range(ndim - 1, -1, -1):
            coords[a] = rest % shape[a]
            rest //= shape[a]
        near = 0
        for o in range(3**ndim):
            flat, code, inside = 0, o, True
            for a in range(ndim):
                q = coords[a] + code % 3 - 1
                code //= 3
                if q < 0 or q >= shape[a]:
                    inside = False
                flat = flat * shape[a] + q
            if inside:
                near += start[flat + 1] - start[flat]
        total += mine * (near - 1)
    return total
