"""What a tile sends its neighbours each iteration, sorted out in one compiled pass.

Node data go to every neighbour whose padded box holds them (the band nodes within ``pad``
layers of a side), facets to every neighbour that may take them (those of zones within the
facets' reach of a side). An item near a side, an edge or a corner belongs to the neighbours
across them: at most 2 x 2 (x 2) directions, looked up in ``slot`` (the neighbour in each
direction, code ``9 (dx + 1) + 3 (dy + 1) + dz + 1``, -1 for none), never a search over all
neighbours.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .kernels import EXT, LO, NDIM, PAD, SHAPE, ZONE, node_coords


@njit(cache=True, nogil=True)
def _sides(c, low, high, out):
    """The directions along one axis in which an item at ``c`` is also a neighbour's: 0, and
    -1 when ``c < low``, +1 when ``c >= high``; written into ``out``, their count returned."""
    out[0] = 0
    m = 1
    if c < low:
        out[m] = -1
        m += 1
    if c >= high:
        out[m] = 1
        m += 1
    return m


@njit(cache=True, nogil=True)
def side_bits(key, lows, highs, ndim):
    """The sides an item at ``key`` lies near, as bits (``2a``: below ``lows[a]``, ``2a + 1``:
    at ``highs[a]`` or above): it belongs to the neighbour of every direction whose
    :func:`direction_bits` it holds (the one-neighbour form of :func:`_route`)."""
    bits = 0
    for a in range(ndim):
        if key[a] < lows[a]:
            bits |= 1 << (2 * a)
        if key[a] >= highs[a]:
            bits |= 1 << (2 * a + 1)
    return bits


@njit(cache=True, nogil=True)
def direction_bits(geo, into):
    """The sides of ``geo``'s box the neighbour ``into`` (its ``geo``) lies across, as
    :func:`side_bits`."""
    bits = 0
    for a in range(geo[NDIM]):
        if into[LO + a] < geo[LO + a]:
            bits |= 1 << (2 * a)
        elif into[LO + a] > geo[LO + a]:
            bits |= 1 << (2 * a + 1)
    return bits


@njit(cache=True, nogil=True)
def index_in(geo, into, key):
    """The flat index in the padded box ``into`` (a neighbour's ``geo``) of the node at local
    ``key`` of the box ``geo``."""
    r = 0
    for a in range(3):
        r = r * into[SHAPE + a] + geo[LO + a] + key[a] - geo[PAD + a] - (into[LO + a] - into[PAD + a])
    return r


@njit(cache=True, nogil=True)
def _route(keys, lows, highs, slot, ndim, count, dest, mark):
    """For every item (its coordinates ``keys[q]``), each neighbour (``slot`` of its direction
    code) whose box holds it: counted into ``count`` (``mark`` 0) or written as item numbers
    into ``dest`` at ``count``'s running offsets (``mark`` 1)."""
    dx = np.empty(3, np.int64)
    dy = np.empty(3, np.int64)
    dz = np.empty(3, np.int64)
    for q in range(keys.shape[0]):
        nx = _sides(keys[q, 0], lows[0], highs[0], dx)
        ny = _sides(keys[q, 1], lows[1], highs[1], dy)
        nz = _sides(keys[q, 2], lows[2], highs[2], dz) if ndim == 3 else 1
        if ndim == 2:
            dz[0] = 0
        for a in range(nx):
            for b in range(ny):
                for c in range(nz):
                    if dx[a] == 0 and dy[b] == 0 and dz[c] == 0:
                        continue
                    t = slot[(dx[a] + 1) * 9 + (dy[b] + 1) * 3 + dz[c] + 1]
                    if t < 0:
                        continue
                    if mark:
                        dest[count[t]] = q
                    count[t] += 1


@njit(cache=True, nogil=True)
def route_nodes(geo, intos, slot, state, level, band, left):
    """The state and level of the tile's band nodes and of those it just reached, for every
    neighbour whose padded box (``intos[i]``, its ``geo``) holds them, at their indices there.
    ``slot`` names the neighbour in each direction (code ``9 (dx + 1) + 3 (dy + 1) + dz + 1``,
    -1 for none).

    Returns
    -------
    idx, st, lv : ndarray
        Neighbour ``i``'s share is ``starts[i]:starts[i + 1]``.
    starts : ndarray of int64
    """
    nn = intos.shape[0]
    total = len(band) + len(left)
    keys = np.empty((total, 3), np.int64)
    for q in range(total):
        n = band[q] if q < len(band) else left[q - len(band)]
        keys[q, 0], keys[q, 1], keys[q, 2] = node_coords(geo, n)
    # a node within `pad` layers of a side lies in the padded box of the neighbour across it
    lows = np.empty(3, np.int64)
    highs = np.empty(3, np.int64)
    for a in range(3):
        lows[a], highs[a] = 2 * geo[PAD + a], geo[EXT + a]
    count = np.zeros(nn + 1, np.int64)
    _route(keys, lows, highs, slot, geo[NDIM], count[1:], keys[:0, 0], 0)
    for t in range(nn):
        count[t + 1] += count[t]
    starts = count.copy()
    items = np.empty(count[nn], np.int64)
    _route(keys, lows, highs, slot, geo[NDIM], count[:nn], items, 1)
    idx = np.empty(len(items), np.int64)
    st = np.empty(len(items), np.int8)
    lv = np.empty(len(items))
    for t in range(nn):
        into = intos[t]
        for m in range(starts[t], starts[t + 1]):
            q = items[m]
            n = band[q] if q < len(band) else left[q - len(band)]
            idx[m], st[m], lv[m] = index_in(geo, into, keys[q]), state[n], level[n]
    return idx, st, lv, starts


@njit(cache=True, nogil=True)
def route_facets(geo, reach, slot, facets):
    """The facets for every neighbour that reads them (those of zones within ``reach`` of its
    side), ``slot`` as :func:`route_nodes`': neighbour ``i``'s are rows ``starts[i]:starts[i +
    1]`` of the first array."""
    nn = 0
    for t in slot:
        nn = max(nn, t + 1)
    keys = np.empty((facets.shape[0], 3), np.int64)
    for f in range(facets.shape[0]):
        for a in range(3):
            keys[f, a] = int(facets[f, ZONE + a]) - geo[LO + a]
    lows = np.empty(3, np.int64)
    highs = np.empty(3, np.int64)
    for a in range(3):
        lows[a], highs[a] = reach, geo[EXT + a] - reach
    count = np.zeros(nn + 1, np.int64)
    _route(keys, lows, highs, slot, geo[NDIM], count[1:], keys[:0, 0], 0)
    for t in range(nn):
        count[t + 1] += count[t]
    starts = count.copy()
    items = np.empty(count[nn], np.int64)
    _route(keys, lows, highs, slot, geo[NDIM], count[:nn], items, 1)
    out = np.empty((len(items), facets.shape[1]))
    for m in range(len(items)):
        out[m] = facets[items[m]]
    return out, starts
