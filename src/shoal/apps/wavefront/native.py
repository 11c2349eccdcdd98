"""The wavefront's phases as native kernels: node data in memory, the band's lists and the
facets at a capacity, halos packed by compiled packers (see :class:`~shoal.runtime.native.Native`).

A tile's memory holds its node data (``state``, ``level``, ``T``, ``img``: the padded box, as
the Python phases keep them), its ``clock``, ``writes`` and ``fired``, the node lists ``band``,
``left`` and ``nearby`` at the tile's owned nodes (none can hold more), their lengths and the
facets' in ``counts``, the surface flags ``surf``, the facet lists' heads ``fhead``, its own
``facets`` at a capacity of rows, ``edge`` and ``fedge`` (the band and reached nodes, and the
facets, near a side, with the sides they are near: found once per iteration, by the first
packer and by the front, for every reader's packer) and two inboxes: the node data its neighbours
send the front (``idx, state, level`` per node) and the facets they send the distances (rows
cut to their vertices). The kernels call the Python phases' compiled functions (``front``,
``distances``, ``advance``, ``time_step``) on the same values in the same order, so a run is
bitwise the Python executor's.

Node lists and node halos have room for every node that could be in them; facets, and the
facets a tile sends, have room for a few sheets of front across the tile (:class:`Room`): when
they overflow the executor redoes the run with twice the room.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from ...runtime.native import KERNEL, Native
from ...runtime.native.engine import PACKER
from ...runtime.native.plan import words
from .facets import MAXF, MAXV
from .halos import direction_bits, index_in, side_bits
from .kernels import (
    COUNT,
    EXT,
    LO,
    NDIM,
    PAD,
    SHAPE,
    UNSET,
    VERTS,
    ZONE,
    advance,
    distances,
    facet_cells,
    fires,
    front,
    node_coords,
    time_step,
)

FIELDS = ("state", "level", "T", "img", "clock", "writes", "fired", "band", "left", "nearby", "counts", "surf",
          "fhead", "facets", "edge", "fedge", "nodes_in", "facets_in")
(K_STATE, K_LEVEL, K_T, K_IMG, K_CLOCK, K_WRITES, K_FIRED, K_BAND, K_LEFT, K_NEARBY, K_COUNTS, K_SURF, K_FHEAD,
 K_FACETS, K_EDGE, K_FEDGE, K_NODES_IN, K_FACETS_IN) = range(len(FIELDS))
WORK = ("counts", "nearby", "surf", "facets", "edge", "fedge", "nodes_in", "facets_in")  # the run's, not the state's
N_BAND, N_LEFT, N_NEARBY, N_FACETS = range(4)  # slots of ``counts``
# The descriptor: the tile's geo (kernels.geometry), the node lists' room, the facets' room, the
# zones of reach, the search's zones, where their offsets start, each field's offset in words
# (one more than the fields: the last is the memory's end), then the search's offsets (rows of 3).
NGEO = 16
I_NODES, I_FACETS, I_REACH, I_NSEARCH, I_SEARCH, I_OFF = range(NGEO, NGEO + 6)
# The constants: origin (3), h, v, the band's width, a source's radius, the sources, then their
# centres (3 each), delays and the search's least distances.
C_ORIGIN, C_H, C_V, C_BW, C_RADIUS, C_NSRC, C_CENTRES = 0, 3, 4, 5, 6, 7, 8
DISTANCES = 1  # the phase whose reduction advance reads (its row of ``reduced``)
NODE_WORDS = 3  # a node sent to a neighbour: its index there, state and level


@nb.njit(nogil=True, cache=True, inline="always")
def _field(mem, ints, k):
    return mem[ints[I_OFF + k]:ints[I_OFF + k + 1]]


@nb.njit(nogil=True, cache=True, inline="always")
def _list(mem, ints, k):
    return _field(mem, ints, k).view(np.int64)


@nb.njit(nogil=True, cache=True, inline="always")
def _bytes(mem, ints, k, n):
    return _field(mem, ints, k).view(np.uint8)[:n]


@nb.njit(nogil=True, cache=True)
def _nodes(mem, ints):
    """Views of the node data (the padded box): state, level, arrival time, image point."""
    size = ints[SHAPE] * ints[SHAPE + 1] * ints[SHAPE + 2]
    state = _bytes(mem, ints, K_STATE, size).view(np.int8)
    img = _field(mem, ints, K_IMG).reshape((size, 3))
    return state, _field(mem, ints, K_LEVEL), _field(mem, ints, K_T), img


@nb.njit(nogil=True, cache=True, inline="always")
def _zones(ints):
    """Zones of the padded box (the surface flags')."""
    return max(ints[SHAPE] - 1, 1) * max(ints[SHAPE + 1] - 1, 1) * max(ints[SHAPE + 2] - 1, 1)


@nb.njit(nogil=True, cache=True)
def facet_row(ndim):
    """The words of a facet's row (:func:`~.kernels.front`'s)."""
    return VERTS + 3 * (2 if ndim == 2 else MAXV)


@nb.njit(nogil=True, cache=True)
def _facets(mem, ints):
    """The tile's facets at their room (rows of :func:`facet_row` words)."""
    return _field(mem, ints, K_FACETS).reshape((ints[I_FACETS], facet_row(ints[NDIM])))


@nb.njit(nogil=True, cache=True)
def _sources(consts):
    ns = np.int64(consts[C_NSRC])
    centres = consts[C_CENTRES:C_CENTRES + 3 * ns].reshape((ns, 3))
    return centres, consts[C_CENTRES + 3 * ns:C_CENTRES + 4 * ns]


@nb.njit(nogil=True, cache=True)
def _near_sides(ints, facets, fedge):
    """The facets of zones within reach of a side, and the sides' bits (:func:`~.halos.side_bits`),
    into ``fedge`` (their count, then pairs): what the packer sends each reader from."""
    geo, reach = ints[:NGEO], ints[I_REACH]
    lows, highs, key = np.empty(3, np.int64), np.empty(3, np.int64), np.empty(3, np.int64)
    for a in range(3):
        lows[a], highs[a] = reach, geo[EXT + a] - reach
    k = 0
    for f in range(facets.shape[0]):
        for a in range(3):
            key[a] = np.int64(facets[f, ZONE + a]) - geo[LO + a]
        bits = side_bits(key, lows, highs, geo[NDIM])
        if bits:
            fedge[1 + 2 * k], fedge[2 + 2 * k] = f, bits
            k += 1
    fedge[0] = k


@nb.njit(KERNEL, nogil=True, cache=True)
def front_kernel(tile, step, iteration, mem, ints, consts, reduced, out):
    """:meth:`WavefrontApp.front <shoal.apps.wavefront.app.WavefrontApp.front>`."""
    geo = ints[:NGEO]
    counts = _list(mem, ints, K_COUNTS)
    centres, delays = _sources(consts)
    fired = _bytes(mem, ints, K_FIRED, delays.shape[0]).view(np.bool_)
    clock = _field(mem, ints, K_CLOCK)
    t, h, v, radius = clock[0], consts[C_H], consts[C_V], consts[C_RADIUS]
    inbox = _field(mem, ints, K_NODES_IN)
    got = np.int64(inbox[0]) // NODE_WORDS
    nb_ = counts[N_BAND]
    if nb_ == 0 and got == 0 and not fires(t, fired, delays, radius, v):
        counts[N_LEFT] = counts[N_NEARBY] = counts[N_FACETS] = 0
        _list(mem, ints, K_FEDGE)[0] = 0
        return 0
    idx, st, lv = np.empty(got, np.int64), np.empty(got, np.int8), np.empty(got)
    for m in range(got):  # the payloads by source tile, as the Python phase concatenates them
        idx[m], st[m], lv[m] = np.int64(inbox[1 + 3 * m]), np.int8(inbox[2 + 3 * m]), inbox[3 + 3 * m]
    state, level, T, img = _nodes(mem, ints)
    band = _list(mem, ints, K_BAND)
    new, left, surf, nearby, facets, work = front(
        geo, consts[C_ORIGIN:C_ORIGIN + 3], h, v, consts[C_BW], t, state, level, T, img, band[:nb_],
        _list(mem, ints, K_WRITES), idx, st, lv, centres, delays, radius, fired)
    room = _facets(mem, ints)
    nf = facets.shape[0]
    if nf > room.shape[0]:
        return -1
    room[:nf] = facets
    _near_sides(ints, facets, _list(mem, ints, K_FEDGE))
    band[:new.shape[0]] = new
    _list(mem, ints, K_LEFT)[:left.shape[0]] = left
    _list(mem, ints, K_NEARBY)[:nearby.shape[0]] = nearby
    _bytes(mem, ints, K_SURF, surf.shape[0]).view(np.int8)[:] = surf
    counts[N_BAND], counts[N_LEFT], counts[N_NEARBY], counts[N_FACETS] = (new.shape[0], left.shape[0],
                                                                          nearby.shape[0], nf)
    return work


@nb.njit(KERNEL, nogil=True, cache=True)
def distances_kernel(tile, step, iteration, mem, ints, consts, reduced, out):
    """:meth:`WavefrontApp.distances <shoal.apps.wavefront.app.WavefrontApp.distances>`: the
    tile's least arrival time and band size into ``out``."""
    counts = _list(mem, ints, K_COUNTS)
    nb_, nn = counts[N_BAND], counts[N_NEARBY]
    if nb_ == 0 and nn == 0:
        out[0], out[1] = UNSET, 0.0
        return 0
    own = _facets(mem, ints)[:counts[N_FACETS]]
    inbox = _field(mem, ints, K_FACETS_IN)
    end = 1 + np.int64(inbox[0])
    rows, at = 0, 1
    while at < end:  # rows cut to their vertices, end to end
        rows += 1
        at += VERTS + 3 * np.int64(inbox[at + COUNT])
    facets = np.empty((own.shape[0] + rows, own.shape[1]))
    facets[:own.shape[0]] = own
    at = 1
    for r in range(own.shape[0], own.shape[0] + rows):
        n = VERTS + 3 * np.int64(inbox[at + COUNT])
        facets[r, :n] = inbox[at:at + n]
        at += n
    state, level, T, img = _nodes(mem, ints)
    band = _list(mem, ints, K_BAND)
    nsearch = ints[I_NSEARCH]
    offsets = ints[ints[I_SEARCH]:ints[I_SEARCH] + 3 * nsearch].reshape((nsearch, 3))
    ns = np.int64(consts[C_NSRC])
    bounds = consts[C_CENTRES + 4 * ns:C_CENTRES + 4 * ns + nsearch]
    new, tmin, work = distances(
        ints[:NGEO], ints[I_REACH], offsets, bounds, consts[C_ORIGIN:C_ORIGIN + 3], consts[C_H], consts[C_V],
        consts[C_BW], state, level, img, band[:nb_], _list(mem, ints, K_NEARBY)[:nn],
        _bytes(mem, ints, K_SURF, _zones(ints)).view(np.int8), _list(mem, ints, K_FHEAD),
        facets)
    band[:new.shape[0]] = new
    counts[N_BAND] = new.shape[0]
    out[0], out[1] = tmin, new.shape[0]
    return work


@nb.njit(KERNEL, nogil=True, cache=True)
def advance_kernel(tile, step, iteration, mem, ints, consts, reduced, out):
    """:meth:`WavefrontApp.advance <shoal.apps.wavefront.app.WavefrontApp.advance>`."""
    counts = _list(mem, ints, K_COUNTS)
    clock = _field(mem, ints, K_CLOCK)
    t, h, v = clock[0], consts[C_H], consts[C_V]
    dt = time_step(reduced[DISTANCES, 0], clock[1], h, v)
    nb_ = counts[N_BAND]
    if nb_:
        state, level, T, img = _nodes(mem, ints)
        advance(ints[:NGEO], consts[C_ORIGIN:C_ORIGIN + 3], h, v, t, dt, level, img, T,
                _list(mem, ints, K_BAND)[:nb_], _list(mem, ints, K_WRITES))
    clock[0], clock[1] = t + dt, dt
    counts[N_NEARBY] = counts[N_FACETS] = 0  # the transient lists, as the Python phase drops them
    _list(mem, ints, K_EDGE)[0] = -1  # the nodes the neighbours read: found again by the next packer
    return nb_


@nb.njit(PACKER, nogil=True, cache=True)
def nodes_packer(src, reader, mem, ints, reader_ints, consts, slot):
    """:meth:`WavefrontApp.pack_nodes <shoal.apps.wavefront.app.WavefrontApp.pack_nodes>` for
    one reader: the band nodes and those just reached in its padded box, in their order."""
    geo, into = ints[:NGEO], reader_ints[:NGEO]
    edge = _list(mem, ints, K_EDGE)
    key = np.empty(3, np.int64)
    if edge[0] < 0:  # once per tile and iteration, for all its readers: those near a side, and which
        counts = _list(mem, ints, K_COUNTS)
        band, left = _list(mem, ints, K_BAND), _list(mem, ints, K_LEFT)
        lows, highs = np.empty(3, np.int64), np.empty(3, np.int64)
        for a in range(3):
            lows[a], highs[a] = 2 * geo[PAD + a], geo[EXT + a]
        nb_, k = counts[N_BAND], 0
        for q in range(nb_ + counts[N_LEFT]):
            n = band[q] if q < nb_ else left[q - nb_]
            key[0], key[1], key[2] = node_coords(geo, n)
            bits = side_bits(key, lows, highs, geo[NDIM])
            if bits:
                edge[1 + 2 * k], edge[2 + 2 * k] = n, bits
                k += 1
        edge[0] = k
    state, level, T, img = _nodes(mem, ints)
    need = direction_bits(geo, into)
    k = 0
    for q in range(edge[0]):
        if (edge[2 + 2 * q] & need) == need:
            n = edge[1 + 2 * q]
            if k + NODE_WORDS > slot.shape[0]:
                return -1
            key[0], key[1], key[2] = node_coords(geo, n)
            slot[k], slot[k + 1], slot[k + 2] = index_in(geo, into, key), state[n], level[n]
            k += NODE_WORDS
    return k


@nb.njit(PACKER, nogil=True, cache=True)
def facets_packer(src, reader, mem, ints, reader_ints, consts, slot):
    """:meth:`WavefrontApp.pack_facets <shoal.apps.wavefront.app.WavefrontApp.pack_facets>`
    for one reader: the facets of zones within its reach, in their order, each cut to its
    vertices."""
    facets = _facets(mem, ints)
    fedge = _list(mem, ints, K_FEDGE)
    need = direction_bits(ints[:NGEO], reader_ints[:NGEO])
    k = 0
    for q in range(fedge[0]):
        if (fedge[2 + 2 * q] & need) == need:
            f = fedge[1 + 2 * q]
            n = VERTS + 3 * np.int64(facets[f, COUNT])
            if k + n > slot.shape[0]:
                return -1
            slot[k:k + n] = facets[f, :n]
            k += n
    return k


class Room:
    """Room for facets: a tile's own rows, and the words it sends each neighbour.

    A sheet of front crosses about as many zones of a box as its largest face has, and a
    tile may hold two sheets where fronts meet: a tile gets room for five such sheets. What
    it sends a neighbour, the facets of the slab within its reach, took at most 26 words per
    zone of the slab's half surface on the Birdshot plane; a payload gets 32 and 64 words
    more. Both times ``factor``, doubled at every overflow (the run is redone).
    """

    def __init__(self):
        self.factor = 1

    def grow(self) -> None:
        """Twice the room, for the run redone after something overflowed."""
        self.factor *= 2

    def own(self, extents: list[int]) -> int:
        """Rows for the facets of a tile of ``extents`` zones."""
        largest = math.prod(sorted(extents)[1:])
        return min(MAXF * math.prod(extents), self.factor * (5 * largest + 16))

    def sent(self, slab: list[int]) -> int:
        """Words for the facets of a slab of ``extents`` zones, cut to their vertices."""
        half_surface = sum(math.prod(slab) // e for e in slab)
        return self.factor * (32 * half_surface + 64)


def native_plan(app, tiling) -> Native:
    """The three phases as native kernels, halos by the packers above."""
    ndim = app.ndim
    row = facet_row(ndim)
    offsets, bounds = app.search
    centres, delays = app.centres, app.delays
    consts = np.concatenate([app.origin, [app.h, app.v, app.bw, app.radius, len(delays)], centres.ravel(), delays,
                             bounds]).astype(np.float64)
    room = Room()
    geo = lambda t: app._geo(tiling, t)  # noqa: E731
    extents = lambda t: [int(e) for e in geo(t)[EXT:EXT + ndim]]  # noqa: E731

    def owned_nodes(t: int) -> int:
        """The nodes a tile owns: no node list holds more."""
        return math.prod(int(tiling.hi[t][a] - tiling.lo[t][a]) + (tiling.hi[t][a] == app.grid[a])
                         for a in range(ndim))

    def node_words(src: int, reader: int) -> int:
        """Room for the nodes ``src`` owns in ``reader``'s padded box (all it may send)."""
        n, pad = 1, int(geo(reader)[PAD])
        for a in range(ndim):
            last = int(tiling.hi[src][a]) + (tiling.hi[src][a] == app.grid[a])  # past its last owned node
            lo = max(int(tiling.lo[src][a]), int(tiling.lo[reader][a]) - pad)
            hi = min(last, int(tiling.hi[reader][a]) + pad + 1)
            n *= max(0, hi - lo)
        return NODE_WORDS * n

    def facet_words(src: int, reader: int) -> int:
        """Room for the facets ``src`` sends ``reader``: those of the slab of its zones within
        reach (never more than all of its own)."""
        mine = extents(src)
        slab = [mine[a] if tiling.lo[reader][a] == tiling.lo[src][a] else min(app.reach, mine[a])
                for a in range(ndim)]
        return min(row * room.own(mine), room.sent(slab))

    def payload_words(phase: str, src: int, reader: int) -> int:
        return node_words(src, reader) if phase == "front" else facet_words(src, reader)

    descriptors: dict[int, np.ndarray] = {}

    def prepare(states, first_step, steps, across):
        """The node lists, facets and inboxes at their room, and each tile's descriptor."""
        for t, state in states.items():
            g = geo(t)
            nodes, facets = owned_nodes(t), room.own(extents(t))
            band, left = state["band"], state["left"]
            for name, values in (("band", band), ("left", left), ("nearby", ())):
                state[name] = np.zeros(nodes, np.int64)
                state[name][:len(values)] = values
            state["counts"] = np.array([len(band), len(left), 0, 0], np.int64)
            state["surf"] = np.zeros(_zones(g), np.int8)
            if "fhead" not in state:
                state["fhead"] = np.full(facet_cells(g, app.reach), -1, np.int64)
            state["facets"] = np.zeros((facets, row))
            state["edge"] = np.full(1 + 2 * nodes, -1, np.int64)
            state["fedge"] = np.zeros(1 + 2 * facets, np.int64)
            sources = tiling.neighbours[t]
            state["nodes_in"] = np.zeros(1 + sum(node_words(int(s), t) for s in sources))
            # neighbours' slabs do not all hold their most facets at once: half their room
            state["facets_in"] = np.zeros(1 + sum(facet_words(int(s), t) for s in sources) // 2)
            head = np.zeros(I_OFF + len(FIELDS) + 1, np.int64)
            head[:NGEO] = g
            head[[I_NODES, I_FACETS, I_REACH, I_NSEARCH, I_SEARCH]] = (nodes, facets, app.reach, len(offsets),
                                                                       len(head))
            head[I_OFF:] = np.cumsum([0] + [words(np.asarray(state[name])) for name in FIELDS])
            descriptors[t] = np.concatenate([head, offsets.ravel()]).astype(np.int64)

    def publish(states):
        """The node lists cut to their lengths; the run's work fields dropped."""
        for state in states.values():
            counts = state.get("counts")
            if counts is None:
                continue
            state["band"] = state["band"][:int(counts[N_BAND])].copy()
            state["left"] = state["left"][:int(counts[N_LEFT])].copy()
            for name in WORK:
                state.pop(name, None)

    return Native(kernels={"front": front_kernel, "distances": distances_kernel, "advance": advance_kernel},
                  fields=FIELDS, ints=lambda t: descriptors[t], reader_ints=lambda t: geo(t).astype(np.int64),
                  consts=consts, prepare=prepare, packers={"front": nodes_packer, "distances": facets_packer},
                  inboxes={"front": "nodes_in", "distances": "facets_in"}, payload_words=payload_words,
                  publish=publish, grow=room.grow)
