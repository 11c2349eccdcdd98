"""The cloth's broad phase never misses a pair that comes close: over random trajectories, every
vertex–face, edge–edge and vertex–obstacle pair whose gap at some event falls below the margin
is among the candidates, once each and in the canonical order."""

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from shoal.apps.cloth.broad import candidate_pairs, obstacle_pairs, pair_keys, split_keys, swept_boxes
from shoal.apps.cloth.contact import (
    EDGE_EDGE,
    EDGE_OBSTACLE,
    FACE_OBSTACLE,
    VERTEX_FACE,
    VERTEX_OBSTACLE,
    point_segment,
    point_triangle,
    segment_segment,
)
from shoal.apps.cloth.surface import Surface, sheet


def _crumpled(seed: int, events: int):
    """Two 4 x 4 sheets, their vertices jittered along random walks of ``events`` events."""
    a, b = sheet(4, size=0.1, height=0.01), sheet(4, size=0.1, height=-0.01, centre=(0.02, 0.0))
    surface = Surface(np.concatenate([a.vertices, b.vertices]), np.concatenate([a.triangles, b.triangles + 16]))
    rng = np.random.default_rng(seed)
    steps = rng.normal(scale=0.01, size=(events, len(surface.vertices), 3))
    track = surface.vertices + np.concatenate([np.zeros((1, *steps.shape[1:])), np.cumsum(steps, axis=0)])
    return surface, track


def _least(distance, *args):
    """The least of ``distance(*args, event)`` (a squared distance and more) over the events."""
    events = len(args[0])
    return min(math.sqrt(distance(*args, e)) for e in range(events))


def _vertex_face(track, p, a, b, c, e):
    return point_triangle(*track[e, p], *track[e, a], *track[e, b], *track[e, c])[0]


def _edge_edge(track, p0, p1, q0, q1, e):
    return segment_segment(*track[e, p0], *track[e, p1], *track[e, q0], *track[e, q1])[0]


def _brute_force(surface, track, margin):
    """Keys of the pairs sharing no vertex whose gap at some event is below ``margin``."""
    tri, edges = surface.triangles, surface.edges
    keys = []
    for p in range(len(surface.vertices)):
        for t, (a, b, c) in enumerate(tri.tolist()):
            if p not in (a, b, c) and _least(_vertex_face, track, p, a, b, c) < margin:
                keys.append(pair_keys(VERTEX_FACE, p, t))
    for e in range(len(edges)):
        for f in range(e + 1, len(edges)):
            (p0, p1), (q0, q1) = edges[e], edges[f]
            if not {p0, p1} & {q0, q1} and _least(_edge_edge, track, p0, p1, q0, q1) < margin:
                keys.append(pair_keys(EDGE_EDGE, e, f))
    return np.array(keys, np.int64)


def _vertex_rod(track, ends, p, o, e):
    return point_segment(*track[e, p], *ends[e, o, 0], *ends[e, o, 1])[0]


def _edge_rod(track, ends, a, b, o, e):
    return segment_segment(*track[e, a], *track[e, b], *ends[e, o, 0], *ends[e, o, 1])[0]


def _face_rod(track, ends, a, b, c, o, e):
    return min(point_triangle(*ends[e, o, end], *track[e, a], *track[e, b], *track[e, c])[0] for end in range(2))


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), events=st.integers(1, 4), margin=st.floats(0.001, 0.03))
def test_every_pair_that_comes_close_is_a_candidate_once_in_order(seed, events, margin):
    surface, track = _crumpled(seed, events)
    found = candidate_pairs(*swept_boxes(track), surface.triangles, surface.edges, margin)
    assert np.all(np.diff(found) > 0)  # sorted, each once
    kind, first, second = split_keys(found)
    assert np.all(np.diff(kind) >= 0)  # vertex-face pairs first
    assert np.isin(_brute_force(surface, track, margin), found).all()
    # and no pair of neighbours: a vertex is never paired with its own triangle
    face = kind == VERTEX_FACE
    assert not (surface.triangles[second[face]] == first[face][:, None]).any()


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), events=st.integers(1, 4), margin=st.floats(0.001, 0.03))
def test_boxes_spread_too_far_for_a_dense_grid_find_the_same_pairs(seed, events, margin):
    """A third sheet a kilometre off makes the grid's block of cells too big to hold: the search
    lists its cells by key instead, and finds the two near sheets' pairs as before."""
    surface, track = _crumpled(seed, events)
    near = candidate_pairs(*swept_boxes(track), surface.triangles, surface.edges, margin)
    far = sheet(4, size=0.1, height=1000.0)
    n, m = len(surface.vertices), len(surface.triangles)
    both = Surface(np.concatenate([surface.vertices, far.vertices]),
                   np.concatenate([surface.triangles, far.triangles + n]))
    moved = np.concatenate([track, np.broadcast_to(far.vertices, (len(track), *far.vertices.shape))], axis=1)
    found = candidate_pairs(*swept_boxes(moved), both.triangles, both.edges, margin)
    kind, first, second = split_keys(found)
    near_edges = len(surface.edges)  # (the far sheet's edges come after the near ones')
    assert np.array_equal(both.edges[:near_edges], surface.edges)
    mine = np.where(kind == VERTEX_FACE, (first < n) & (second < m), (first < near_edges) & (second < near_edges))
    assert np.array_equal(found[mine], near)
    assert (~mine).any()  # the far sheet's own pairs were found too


def test_the_broad_phase_culls_far_pairs():
    surface, track = _crumpled(1, 2)
    found = candidate_pairs(*swept_boxes(track), surface.triangles, surface.edges, 0.002)
    every = len(surface.vertices) * len(surface.triangles) + len(surface.edges) ** 2 // 2
    assert 0 < len(found) < every / 4


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), events=st.integers(1, 4), margin=st.floats(0.001, 0.03))
def test_every_primitive_near_a_moving_obstacle_is_a_candidate(seed, events, margin):
    surface, track = _crumpled(seed, events)
    rng = np.random.default_rng(seed)
    ends = np.cumsum(rng.normal(scale=0.02, size=(events + 1, 2, 2, 3)), axis=0)  # two rods moving
    radius = np.array([0.01, 0.003])
    found = obstacle_pairs(*swept_boxes(track), surface.triangles, surface.edges, ends, radius, margin)
    tri, edges = surface.triangles, surface.edges
    near = []
    for o in range(2):
        near += [pair_keys(VERTEX_OBSTACLE, p, o) for p in range(len(track[0]))
                 if _least(_vertex_rod, track, ends, p, o) - radius[o] < margin]
        near += [pair_keys(EDGE_OBSTACLE, k, o) for k, (a, b) in enumerate(edges.tolist())
                 if _least(_edge_rod, track, ends, a, b, o) - radius[o] < margin]
        near += [pair_keys(FACE_OBSTACLE, k, o) for k, (a, b, c) in enumerate(tri.tolist())
                 if _least(_face_rod, track, ends, a, b, c, o) - radius[o] < margin]
    assert len(near) > 0
    assert np.isin(np.array(near, np.int64), found).all()
    assert np.all(np.diff(found) > 0)


@given(kind=st.sampled_from([VERTEX_FACE, EDGE_EDGE, VERTEX_OBSTACLE, EDGE_OBSTACLE, FACE_OBSTACLE]),
       first=st.integers(0, 2**30 - 1),
       second=st.integers(0, 2**30 - 1))
def test_a_pair_key_splits_back_into_its_pair(kind, first, second):
    key = pair_keys(kind, np.array([first]), np.array([second]))
    assert key[0] >= 0
    assert [int(a[0]) for a in split_keys(key)] == [kind, first, second]
