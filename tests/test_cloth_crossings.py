"""The crossings count (edges through triangles) agrees with an independent library's check."""

import ipctk
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from shoal.apps.cloth.crossings import crossings
from shoal.apps.cloth.surface import Surface, sheet


def _ipc_says(surface: Surface, x: np.ndarray) -> bool:
    mesh = ipctk.CollisionMesh(surface.vertices, surface.edges, surface.triangles)
    return ipctk.has_intersections(mesh, np.asfortranarray(x))


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_two_triangles_cross_exactly_when_ipctk_finds_them_intersecting(seed):
    """In general position (coplanar triangles are the documented exception)."""
    corners = np.random.default_rng(seed).uniform(-1.0, 1.0, (6, 3))
    areas = np.linalg.norm(np.cross(corners[[1, 4]] - corners[[0, 3]], corners[[2, 5]] - corners[[0, 3]]), axis=1)
    if areas.min() < 1e-3:
        return  # (a sliver: no mesh to test)
    surface = Surface(corners, np.array([[0, 1, 2], [3, 4, 5]]))
    assert (crossings(corners, surface.edges, surface.triangles) > 0) == _ipc_says(surface, corners)


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32 - 1), st.floats(0.0, 0.3))
def test_a_crumpled_sheet_crosses_itself_exactly_when_ipctk_says_so(seed, amount):
    surface = sheet(6, size=0.5)
    x = surface.vertices + np.random.default_rng(seed).normal(0.0, amount, surface.vertices.shape)
    count = crossings(x, surface.edges, surface.triangles)
    assert (count > 0) == _ipc_says(surface, x)
    assert crossings(surface.vertices, surface.edges, surface.triangles) == 0  # flat: none


def test_two_triangles_through_each_other_cross_at_both_ends_of_their_meeting_and_subsets_add_up():
    x = np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0],  # a triangle in z = 0
                  [0.2, 0.2, -0.5], [0.2, 0.2, 0.5], [2.0, 2.0, 0.5]])  # one through it, in the plane x = y
    surface = Surface(x, np.array([[0, 1, 2], [3, 4, 5]]))
    edges, triangles = surface.edges, surface.triangles
    assert crossings(x, edges, triangles) == 2  # edge 3-4 through the first, edge 1-2 through the second
    first = np.flatnonzero(edges.max(axis=1) <= 2)
    assert crossings(x, edges[first], triangles[1:]) == 1 and crossings(x, edges[~np.isin(np.arange(6), first)],
                                                                        triangles[:1]) == 1
    x[3:, 2] -= 0.6  # lowered: the second now lies below the first's plane
    assert crossings(x, edges, triangles) == 0
