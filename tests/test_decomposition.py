"""Decompositions: the protocol a Cartesian tiling and a mesh partition share, the mesh partition
itself (neighbours, owners, halos of vertex rings, determinism, storage, nesting), the curves
that order scattered points, every placement policy on a mesh partition, and a mesh
partition's traces (stored, joined, aggregated)."""

import itertools
import json
from dataclasses import replace
from pathlib import Path

import h5py
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial import Delaunay

from shoal.cluster import Cluster
from shoal.curves import hilbert_keys, morton_keys, point_order
from shoal.decomposition import GEOMETRY, Decomposition, decomposition_from_dict, require, same_decomposition
from shoal.errors import ShoalError
from shoal.mesh import MeshPartition, mesh_sha256
from shoal.placement import POLICIES, BalanceContext
from shoal.tiling import Tiling
from shoal.trace import Trace, aggregate, joined


# ----- meshes ----------------------------------------------------------------------------------
def square(n: int) -> tuple[np.ndarray, np.ndarray]:
    """An n x n grid of unit squares, each cut into two triangles along its (i, j)-(i+1, j+1)
    diagonal; vertex (i, j) has id ``i * (n + 1) + j``, the triangles of square (i, j) are
    elements ``2 * (i * n + j)`` and the one after."""
    xs, ys = np.meshgrid(np.arange(n + 1), np.arange(n + 1), indexing="ij")
    vertices = np.stack([xs.ravel(), ys.ravel()], axis=1).astype(np.float64)

    def v(i, j):
        return i * (n + 1) + j

    elements = []
    for i, j in itertools.product(range(n), range(n)):
        elements += [(v(i, j), v(i + 1, j), v(i + 1, j + 1)), (v(i, j), v(i + 1, j + 1), v(i, j + 1))]
    return vertices, np.array(elements, dtype=np.int64)


def square_parts(n: int, rule) -> np.ndarray:
    """The part of every element of :func:`square`, ``rule(i, j)`` of its square."""
    return np.repeat([rule(i, j) for i, j in itertools.product(range(n), range(n))], 2)


@st.composite
def meshes(draw):
    """Random points triangulated by Delaunay: triangles in 2D, tetrahedra in 3D, or the
    triangles of a 3D convex hull (a surface, like a cloth)."""
    shape = draw(st.sampled_from(["triangles", "tetrahedra", "surface"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    n = draw(st.integers(5, 40))
    points = rng.random((n, 2 if shape == "triangles" else 3))
    tri = Delaunay(points)
    elements = tri.convex_hull if shape == "surface" else tri.simplices
    nparts = draw(st.integers(1, min(12, len(elements))))
    return points, elements, nparts


def ring(vertices: np.ndarray, elements: np.ndarray, inside: set) -> set:
    """Vertices that share an element with one in ``inside`` and are not in it (brute force)."""
    return {int(v) for e in elements if inside & set(e.tolist()) for v in e} - inside


# ----- the protocol ------------------------------------------------------------------------------
def test_a_tiling_and_a_mesh_partition_are_decompositions():
    tiling = Tiling.from_counts((8, 6), (4, 3))
    mesh = MeshPartition.from_mesh(*square(4), 4)
    for d, kind in ((tiling, "cartesian"), (mesh, "mesh")):
        assert isinstance(d, Decomposition)
        assert d.kind == kind
    assert tiling.geometry == {"boxes", "order", "graph", "centroids"}
    assert mesh.geometry == {"centroids", "graph"}


def test_a_tiling_s_centroids_are_its_box_centres_and_its_graph_its_neighbours():
    t = Tiling.from_counts((8, 6), (4, 3), halo=1)
    assert np.array_equal(t.centroids[t.tile_id((1, 2))], [3.0, 5.0])
    xadj, adjncy = t.neighbours_csr()
    assert [adjncy[xadj[i]:xadj[i + 1]].tolist() for i in range(t.ntiles)] == [n.tolist() for n in t.neighbours]
    gx, gj, w = t.graph()
    assert np.array_equal(gx, xadj) and np.array_equal(gj, adjncy)
    # a face neighbour 2 x 2 tiles apart reads a column of 2 cells each way; a corner 1 each way
    a, b, c = t.tile_id((0, 0)), t.tile_id((1, 0)), t.tile_id((1, 1))
    src = np.repeat(np.arange(t.ntiles), np.diff(xadj))
    weight = {(int(s), int(d)): int(x) for s, d, x in zip(src, gj, w, strict=True)}
    assert weight[(a, b)] == weight[(b, a)] == 4 and weight[(a, c)] == 2
    assert np.array_equal(Tiling.from_counts((8, 6), (4, 3), halo=0).graph()[2], np.zeros(len(adjncy)))


def test_a_tiling_s_dict_keeps_its_old_form_and_reads_back_with_or_without_a_kind():
    t = Tiling.from_counts((10, 7, 5), (3, 2, 1), halo=1)
    d = t.to_dict()
    assert set(d) == {"grid", "edges", "halo"}  # what checkpoints and traces already hold
    for stored in (d, {**d, "kind": "cartesian"}, json.loads(json.dumps(d))):
        back = decomposition_from_dict(stored)
        assert isinstance(back, Tiling) and same_decomposition(back, t)
    with pytest.raises(ShoalError, match="unknown kind of decomposition 'voronoi'"):
        decomposition_from_dict({**d, "kind": "voronoi"})


def test_require_names_what_is_missing_and_what_there_is():
    mesh = MeshPartition.from_mesh(*square(2), 2)
    require(frozenset({"graph"}), mesh, "x")
    with pytest.raises(ShoalError, match=r"^policy X needs boxes, order; a mesh partition has centroids, graph$"):
        require(frozenset({"boxes", "order", "graph"}), mesh, "policy X")


# ----- a hand-drawn mesh -----------------------------------------------------------------------
def test_two_halves_of_a_square_read_the_columns_beyond_their_border():
    vertices, elements = square(4)
    m = MeshPartition(vertices, elements, square_parts(4, lambda i, j: int(i >= 2)), halo=1)
    column = [np.arange(5 * i, 5 * i + 5) for i in range(5)]  # vertices (i, 0..4)
    assert m.neighbours[0].tolist() == [1] and m.face_neighbours[1].tolist() == [0]
    assert np.array_equal(m.vertices_of(0), np.concatenate(column[:3]))
    assert np.array_equal(m.shared_vertices(0, 1), column[2])
    assert np.array_equal(m.part_of_vertex, np.repeat([0, 0, 0, 1, 1], 5))  # the border is part 0's
    assert np.array_equal(m.halo_vertices(0, 1), column[3]) and np.array_equal(m.halo_vertices(1, 0), column[1])
    assert np.array_equal(m.graph()[2], [5, 5])
    assert np.array_equal(m.cells, [16, 16]) and np.allclose(m.centroids[:, 1], 2.0)
    wide = MeshPartition(vertices, elements, m.part_of_element, halo=2)
    assert np.array_equal(wide.halo_vertices(0, 1), np.concatenate(column[3:]))
    assert np.array_equal(wide.halo_vertices(1, 0), np.concatenate(column[:2]))
    bare = MeshPartition(vertices, elements, m.part_of_element, halo=0)
    assert len(bare.halo_vertices(0, 1)) == len(bare.halo_vertices(1, 0)) == 0


def test_four_quadrants_meet_at_the_centre_and_read_one_ring_from_the_part_beside_it():
    vertices, elements = square(4)
    m = MeshPartition(vertices, elements, square_parts(4, lambda i, j: 2 * (i >= 2) + (j >= 2)), halo=1)

    def v(i, j):
        return 5 * i + j

    # the centre vertex is all four's; the diagonals cut the squares so that 0 and 3 share only it
    assert [n.tolist() for n in m.neighbours] == [[1, 2, 3], [0, 2, 3], [0, 1, 3], [0, 1, 2]]
    assert [n.tolist() for n in m.stencil("faces")] == [[1, 2], [0, 3], [0, 3], [1, 2]]
    assert m.stencil("all") is m.neighbours
    assert m.shared_vertices(0, 3).tolist() == [v(2, 2)] and m.shared_vertices(1, 2).tolist() == [v(2, 2)]
    assert m.part_of_vertex[v(2, 2)] == 0 and m.part_of_vertex[v(2, 3)] == 1 and m.part_of_vertex[v(3, 2)] == 2
    # part 0 holds (i, j <= 2); ring 1 is x = 3 up to (3, 3), which the diagonal joins to (2, 2), and y = 3
    assert m.halo_vertices(0, 1).tolist() == [v(0, 3), v(1, 3), v(2, 3)]
    assert m.halo_vertices(0, 2).tolist() == [v(3, 0), v(3, 1), v(3, 2)]  # (3, 2): parts 2 and 3 hold it; 2 < 3
    assert m.halo_vertices(0, 3).tolist() == [v(3, 3)]
    # part 3 (i, j >= 2): the diagonal joins (1, 1) to (2, 2); part 0 holds (1, 2) and (2, 1) too
    assert m.halo_vertices(3, 0).tolist() == [v(1, 1), v(1, 2), v(2, 1)]
    assert m.halo_vertices(3, 1).tolist() == [v(1, 3), v(1, 4)]
    assert m.halo_vertices(3, 2).tolist() == [v(3, 1), v(4, 1)]
    with pytest.raises(ShoalError, match="no stencil 'corners'"):
        m.stencil("corners")


def test_a_halo_wider_than_a_part_is_refused_in_one_line():
    vertices, elements = square(4)
    thin = square_parts(4, lambda i, j: 0 if i == 0 else (1 if i == 1 else 2))  # part 1: one column of squares
    MeshPartition(vertices, elements, thin, halo=1)
    with pytest.raises(ShoalError, match=r"^a halo of 2 vertex rings around part 0 reaches vertex \d+, which no part"):
        MeshPartition(vertices, elements, thin, halo=2)


# ----- METIS partitions, any mesh --------------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(meshes())
def test_a_partition_of_any_mesh_keeps_every_promise(mesh):
    vertices, elements, nparts = mesh
    m = MeshPartition.from_mesh(vertices, elements, nparts, halo=1)
    k = m.ntiles
    assert k == nparts and m.cells.sum() == len(elements) and (m.cells > 0).all()
    # part ids are stable: numbered by their lowest element
    firsts = [int(m.elements_of(p)[0]) for p in range(k)]
    assert firsts == sorted(firsts) and firsts[0] == 0
    # neighbours: sorted, symmetric, no self, faces within all
    for p in range(k):
        for table in (m.neighbours, m.face_neighbours):
            assert np.all(np.diff(table[p]) > 0) and p not in table[p]
            assert all(p in table[q] for q in table[p])
        assert set(m.face_neighbours[p]) <= set(m.neighbours[p])
        for q in range(k):
            assert (q in m.neighbours[p]) == (p != q and len(m.shared_vertices(p, q)) > 0)
    # every vertex an element uses is owned once, by the lowest part holding it; others by none
    used = np.unique(elements)
    holders = {int(v): [p for p in range(k) if v in m.vertices_of(p)] for v in used}
    assert all(m.part_of_vertex[v] == min(h) for v, h in holders.items())
    assert (np.delete(m.part_of_vertex, used) == -1).all()
    # the graph weighs the shared vertices, symmetrically
    xadj, adjncy, w = m.graph()
    src = np.repeat(np.arange(k), np.diff(xadj))
    assert all(w[i] == len(m.shared_vertices(src[i], adjncy[i])) for i in range(len(w)))
    # the halo: ring 1, each vertex once, from a neighbour that holds it
    for dst in range(k):
        got = {}
        for s in range(k):
            for vtx in m.halo_vertices(dst, s).tolist():
                assert vtx not in got and s in m.neighbours[dst] and vtx in m.vertices_of(s)
                got[vtx] = s
        assert set(got) == ring(vertices, elements, set(m.vertices_of(dst).tolist()))
    # centroids lie in the mesh's bounding box
    assert (m.centroids >= vertices.min(axis=0) - 1e-12).all() and (m.centroids <= vertices.max(axis=0) + 1e-12).all()
    # the same mesh and count give the same partition, and the dict gives it back
    again = MeshPartition.from_mesh(vertices.copy(), elements.copy(), nparts, halo=1)
    assert np.array_equal(again.part_of_element, m.part_of_element)
    back = decomposition_from_dict(json.loads(json.dumps(m.to_dict())), mesh=(vertices, elements))
    assert np.array_equal(back.part_of_element, m.part_of_element) and back.halo == 1 and same_decomposition(back, m)


def test_as_many_parts_as_elements_leaves_none_empty():
    vertices, elements = square(3)
    m = MeshPartition.from_mesh(vertices, elements, len(elements))
    assert np.array_equal(m.cells, np.ones(len(elements))) and np.array_equal(m.part_of_element, np.arange(18))


def test_the_partition_does_not_depend_on_the_index_types_and_the_seed_is_honoured():
    vertices, elements = square(6)
    a = MeshPartition.from_mesh(vertices, elements, 5)
    b = MeshPartition.from_mesh(vertices.astype(np.float32), elements.astype(np.int32), 5)
    assert np.array_equal(a.part_of_element, b.part_of_element) and a.mesh_sha256 == b.mesh_sha256
    assert a.mesh_sha256 == mesh_sha256(vertices, elements)
    assert all(np.array_equal(MeshPartition.from_mesh(vertices, elements, 5, seed=s).part_of_element,
                              MeshPartition.from_mesh(vertices, elements, 5, seed=s).part_of_element)
               for s in (1, 7))


# ----- storage -----------------------------------------------------------------------------------
def test_the_dict_is_compact_and_another_mesh_is_refused_in_one_line():
    vertices, elements = square(4)
    m = MeshPartition.from_mesh(vertices, elements, 3, halo=1)
    d = m.to_dict()
    assert d["kind"] == "mesh" and d["parts"] == 3 and len(d["part_of_element"]) == len(elements)
    assert d["mesh"] == {"vertices": 25, "elements": 32, "ndim": 2, "nodes_per_element": 3,  # counts and a hash
                         "sha256": mesh_sha256(vertices, elements)}
    moved = vertices.copy()
    moved[3, 0] += 1e-9
    with pytest.raises(ShoalError, match=r"^this mesh \(25 vertices, 32 elements, SHA-256 \w+\) is not the one the "
                                         r"partition was made of \(SHA-256 \w+\)$"):
        MeshPartition.from_dict(d, moved, elements)
    with pytest.raises(ShoalError, match="without its mesh"):
        decomposition_from_dict(d)
    with pytest.raises(ShoalError, match="says 4 parts"):
        MeshPartition.from_dict({**d, "parts": 4}, vertices, elements)


@pytest.mark.parametrize("vertices, elements, nparts, says", [
    (np.zeros((3, 2)), np.array([[0, 1, 2]]), 2, r"cannot split 1 elements into 2 parts"),
    (np.zeros((3, 2)), np.array([[0, 1, 3]]), 1, r"element 0 names vertex 3, outside 0\.\.2"),
    (np.zeros((3, 2)), np.array([[0, 1, -1]]), 1, r"element 0 names vertex -1"),
    (np.zeros((3, 2)), np.array([[0, 1, 1]]), 1, r"element 0 repeats a vertex"),
    (np.zeros((4, 2)), np.array([[0, 1, 2, 3]]), 1, r"tetrahedra need 3D vertices"),
    (np.zeros((3, 4)), np.array([[0, 1, 2]]), 1, r"vertices must have shape"),
    (np.zeros((3, 2)), np.array([[0, 1]]), 1, r"elements must have shape"),
    (np.zeros((3, 2)), np.zeros((0, 3), int), 1, r"no element"),
    (np.zeros((3, 2)), np.array([[0.0, 1.0, 2.0]]), 1, r"vertex indices \(integers\)"),
    (np.array([[0, 0], [1, np.nan], [0, 1]]), np.array([[0, 1, 2]]), 1, r"vertex 1 is not finite"),
    (np.zeros((3, 2)), np.array([[0, 1, 2]]), 0, r"must be positive"),
])
def test_bad_meshes_are_one_line(vertices, elements, nparts, says):
    with pytest.raises(ShoalError, match=says) as error:
        MeshPartition.from_mesh(vertices, elements, nparts)
    assert "\n" not in str(error.value)


def test_a_given_partition_with_an_empty_part_is_one_line():
    vertices, elements = square(2)
    with pytest.raises(ShoalError, match=r"^part 1 of 3 holds no element$"):
        MeshPartition(vertices, elements, np.array([0, 0, 0, 0, 2, 2, 2, 2]))
    with pytest.raises(ShoalError, match="numbered from 0"):
        MeshPartition(vertices, elements, np.array([0, 0, 0, 0, -1, 1, 1, 1]))
    with pytest.raises(ShoalError, match="an integer part per element"):
        MeshPartition(vertices, elements, np.zeros(7, int))
    with pytest.raises(ShoalError, match="halo must be"):
        MeshPartition(vertices, elements, np.zeros(8, int), halo=-1)
    m = MeshPartition(vertices, elements, np.zeros(8, int))
    with pytest.raises(ShoalError, match=r"part 1 is outside 0\.\.0"):
        m.halo_vertices(0, 1)


def test_the_mesh_cannot_be_changed_behind_the_partition_s_back():
    vertices, elements = square(2)
    m = MeshPartition.from_mesh(vertices, elements, 2)
    vertices[0, 0] = 5.0  # the caller's array, not the partition's
    assert m.vertices[0, 0] == 0.0
    with pytest.raises(ValueError):
        m.vertices[0, 0] = 5.0
    with pytest.raises(ValueError):
        m.part_of_element[0] = 1


# ----- nesting ----------------------------------------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(meshes(), st.integers(1, 12))
def test_a_coarsened_partition_nests_the_fine_one(mesh, coarse_parts):
    vertices, elements, nparts = mesh
    fine = MeshPartition.from_mesh(vertices, elements, nparts)
    coarse = fine.coarsen(min(coarse_parts, fine.ntiles))
    assert coarse.ntiles == min(coarse_parts, fine.ntiles) and (coarse.cells > 0).all()
    f2c = fine.fine_to_coarse(coarse)
    assert np.array_equal(f2c[fine.part_of_element], coarse.part_of_element)
    assert np.array_equal(np.bincount(f2c, weights=fine.cells, minlength=coarse.ntiles), coarse.cells)
    assert np.array_equal(fine.coarsen(coarse.ntiles).part_of_element, coarse.part_of_element)  # deterministic


def test_a_partition_that_does_not_nest_is_refused_in_one_line():
    vertices, elements = square(4)
    halves = MeshPartition(vertices, elements, square_parts(4, lambda i, j: int(i >= 2)))
    other = MeshPartition(vertices, elements, square_parts(4, lambda i, j: int(j >= 2)))
    with pytest.raises(ShoalError, match=r"does not nest the fine one: fine part 0 lies in coarse parts 0 and 1"):
        halves.fine_to_coarse(other)
    moved = vertices.copy()
    moved[0] += 0.5
    with pytest.raises(ShoalError, match="of another mesh"):
        halves.fine_to_coarse(MeshPartition(moved, elements, halves.part_of_element))
    with pytest.raises(ShoalError, match="nests only in a mesh partition"):
        halves.fine_to_coarse(Tiling.from_counts((4, 4), (2, 1)))
    with pytest.raises(ShoalError, match=r"coarsens to 1\.\.2 parts, not 3"):
        halves.coarsen(3)


# ----- curves over points ------------------------------------------------------------------------
@pytest.mark.parametrize("ndim, bits", [(2, 1), (2, 3), (2, 5), (3, 1), (3, 2), (3, 3)])
def test_the_hilbert_key_walks_a_cube_one_face_step_at_a_time(ndim, bits):
    cells = np.array(list(itertools.product(range(1 << bits), repeat=ndim)))
    keys = hilbert_keys(cells, bits)
    assert np.array_equal(np.sort(keys), np.arange(len(cells)))  # a bijection onto 0 .. n-1
    walk = cells[np.argsort(keys)]
    assert (np.abs(np.diff(walk, axis=0)).sum(axis=1) == 1).all()


def test_the_morton_key_of_points_is_the_order_of_a_box():
    from shoal.curves import morton_order

    cells = np.array(list(itertools.product(range(8), range(8))))
    assert np.array_equal(np.argsort(morton_keys(cells, 3), kind="stable"), morton_order((8, 8)))


@given(st.integers(0, 2**32 - 1), st.integers(1, 60), st.sampled_from([2, 3]))
def test_point_order_is_a_permutation_and_ties_go_by_index(seed, n, ndim):
    points = np.random.default_rng(seed).random((n, ndim))
    for curve in ("hilbert", "morton"):
        order = point_order(points, curve)
        assert np.array_equal(np.sort(order), np.arange(n))
    assert np.array_equal(point_order(np.zeros((n, ndim))), np.arange(n))  # all in one cell


# ----- placement on a mesh partition -----------------------------------------------------------
@st.composite
def mesh_setups(draw):
    points, elements, _ = draw(meshes())
    nparts = draw(st.integers(1, min(24, len(elements))))
    m = MeshPartition.from_mesh(points, elements, nparts)
    nodes = draw(st.integers(1, min(6, m.ntiles)))
    cores = tuple(draw(st.integers(1, 4)) for _ in range(nodes))
    return m, Cluster(cores), draw(st.integers(0, 2**31 - 1))


MESH_EXACT_SHARE = ["birdshot", "sfc", "strips"]  # the policies that cut an order into node_quotas runs


@pytest.mark.parametrize("name", sorted(POLICIES))
@settings(max_examples=25, deadline=None)
@given(setup=mesh_setups())
def test_every_policy_places_a_mesh_partition_validly_or_refuses_in_one_line(name, setup):
    m, cluster, seed = setup
    policy = POLICIES[name]
    try:
        owner = policy.place(m, cluster, seed)
    except ShoalError as error:
        assert str(error) == f"placement policy {name!r} needs boxes; a mesh partition has centroids, graph"
        assert name == "sectors"
        return
    assert owner.shape == (m.ntiles,) and owner.dtype == np.int64
    assert owner.min() >= 0 and owner.max() < cluster.nodes
    assert np.array_equal(owner, policy.place(m, cluster, seed))
    if len(set(cluster.cores)) == 1 or name in ("geometric", "metis"):  # every node gets a part
        assert np.bincount(owner, minlength=cluster.nodes).min() >= 1
    if policy.dynamic:
        loads = np.random.default_rng(seed).random((2, m.ntiles))
        ctx = BalanceContext(m, cluster, owner, loads, params=policy.params())
        new = policy.rebalance(ctx, {})
        assert new.shape == (m.ntiles,) and new.min() >= 0 and new.max() < cluster.nodes


@pytest.mark.parametrize("name", MESH_EXACT_SHARE)
@settings(max_examples=30, deadline=None)
@given(setup=mesh_setups())
def test_parts_per_node_are_proportional_to_cores_within_one_part(name, setup):
    m, cluster, seed = setup
    got = np.bincount(POLICIES[name].place(m, cluster, seed), minlength=cluster.nodes)
    assert np.all(np.abs(got - m.ntiles * cluster.core_array / cluster.total_cores) < 1.0)


@settings(max_examples=30, deadline=None)
@given(setup=mesh_setups())
def test_sfc_on_a_mesh_runs_along_the_hilbert_curve_of_the_centroids_and_strips_along_the_longest_side(setup):
    m, cluster, seed = setup
    along = POLICIES["sfc"].place(m, cluster, seed)[point_order(m.centroids, "hilbert")]
    assert (np.diff(along) >= 0).all()
    c = m.centroids
    axis = int(np.argmax(c.max(axis=0) - c.min(axis=0)))
    owner = POLICIES["strips"].place(m, cluster, seed)
    for a, b in itertools.combinations(range(cluster.nodes), 2):  # node a's band lies below node b's
        if (owner == a).any() and (owner == b).any():
            assert c[owner == a, axis].max() <= c[owner == b, axis].min()


def test_geometric_on_a_mesh_cuts_across_the_longest_side_in_proportion_to_cores():
    vertices, elements = square(8)
    vertices[:, 0] *= 4  # a long strip along x
    m = MeshPartition.from_mesh(vertices, elements, 32)
    owner = POLICIES["geometric"].place(m, Cluster((1, 3)), 0)
    assert np.bincount(owner).tolist() == [8, 24]
    assert m.centroids[owner == 0, 0].max() <= m.centroids[owner == 1, 0].min()


def test_metis_on_a_mesh_weighs_parts_by_their_elements_and_cuts_few_shared_vertices():
    vertices, elements = square(12)
    m = MeshPartition.from_mesh(vertices, elements, 36)
    owner = POLICIES["metis"].place(m, Cluster.uniform(4, 2), 0)
    per_node = np.bincount(owner, weights=m.cells, minlength=4)
    assert per_node.max() / per_node.mean() < 1.2
    xadj, adjncy, shared = m.graph()
    src = np.repeat(np.arange(m.ntiles), np.diff(xadj))
    cut = shared[owner[src] != owner[adjncy]].sum() / 2
    random = POLICIES["birdshot"].place(m, Cluster.uniform(4, 2), 0)
    assert cut < shared[random[src] != random[adjncy]].sum() / 2


def test_a_policy_refuses_a_decomposition_without_the_geometry_it_needs():
    class Bare:  # tiles and neighbours, no geometry at all
        kind, geometry, ntiles, neighbours = "bare", frozenset(), 4, tuple(np.zeros(0, np.int64) for _ in range(4))

    for name in ("metis", "sfc", "geometric", "strips", "sectors"):
        with pytest.raises(ShoalError, match=rf"^placement policy '{name}' needs \w+; a bare has no geometry$"):
            POLICIES[name].place(Bare(), Cluster.uniform(2, 1), 0)
    assert POLICIES["birdshot"].place(Bare(), Cluster.uniform(2, 1), 0).tolist().count(0) == 2
    ctx = BalanceContext(Bare(), Cluster.uniform(2, 1), np.array([0, 0, 1, 1]), np.ones((1, 4)))
    with pytest.raises(ShoalError, match="placement policy 'metis-periodic' needs graph"):
        POLICIES["metis-periodic"].rebalance(ctx, {})
    assert POLICIES["greedy"].rebalance(ctx, {}).shape == (4,)


def test_every_policy_declares_its_needs():
    for name, policy in POLICIES.items():
        assert isinstance(policy.needs, frozenset) and policy.needs <= GEOMETRY, name
    assert POLICIES["sectors"].needs == {"boxes"} and POLICIES["metis"].needs == {"graph"}
    assert POLICIES["birdshot"].needs == set() and POLICIES["greedy"].needs == set()


# ----- traces of a mesh partition ----------------------------------------------------------------
def mesh_trace(m: MeshPartition, steps: int = 3, seed: int = 0) -> Trace:
    """A synthetic trace of a run on ``m``: two phases, a task per part and phase with a random
    cost and work, the second phase reading its halo from every part it holds vertices of."""
    rng = np.random.default_rng(seed)
    cluster = Cluster((2, 1))
    owner = POLICIES["sfc"].place(m, cluster, 0)
    step, phase, tile = (a.ravel() for a in np.meshgrid(np.arange(steps), np.arange(2), np.arange(m.ntiles),
                                                        indexing="ij"))
    n = len(tile)
    tasks = {"step": step, "phase": phase, "tile": tile, "node": owner[tile], "worker": np.zeros(n, int),
             "start": np.zeros(n), "end": np.zeros(n), "cost": rng.random(n), "work": rng.integers(0, 100, n)}
    pairs = [(s, d) for d in range(m.ntiles) for s in range(m.ntiles) if len(m.halo_vertices(d, s))]
    rows = [(st_, s, d, 24 * len(m.halo_vertices(d, s)) + int(rng.integers(0, 8))) for st_ in range(steps)
            for s, d in pairs]
    messages = {"step": [r[0] for r in rows], "phase": np.ones(len(rows), int), "src": [r[1] for r in rows],
                "dst": [r[2] for r in rows], "bytes": [r[3] for r in rows]}
    return Trace(tasks=tasks, messages=messages, phases=["forces", "update"], tiling=m, cluster=cluster,
                 placement_steps=np.array([0]), placement_owners=owner[None], step_end=np.arange(1.0, steps + 1),
                 app="cloth", tile_bytes=m.cells * 100)


def test_a_mesh_partition_s_trace_writes_and_reads_back_in_its_own_group(tmp_path):
    m = MeshPartition.from_mesh(*square(6), 8, halo=1)
    t = mesh_trace(m)
    path = t.write(tmp_path / "trace.h5")
    with h5py.File(path, "r") as f:
        assert "tiling" not in f and f["decomposition"].attrs["version"] == 1
        assert f["decomposition"].attrs["kind"] == "mesh"
        assert all(ds.attrs["units"] is not None and ds.attrs["description"] for ds in f["decomposition"].values())
    back = Trace.read(path)
    assert isinstance(back.tiling, MeshPartition) and same_decomposition(back.tiling, m)
    assert np.array_equal(back.tiling.vertices, m.vertices) and back.tiling.halo == 1
    assert set(back.tasks) == set(t.tasks) and all(np.array_equal(back.tasks[k], t.tasks[k]) for k in t.tasks)
    assert all(np.array_equal(back.messages[k], t.messages[k]) for k in t.messages)
    assert np.array_equal(back.placement_owners, t.placement_owners)
    assert np.array_equal(back.tile_cost(), t.tile_cost())


def test_a_cartesian_trace_has_no_decomposition_group_and_an_older_one_still_reads(tmp_path):
    old = Trace.read(Path(__file__).parent / "data" / "trace-before-groups.h5")
    assert isinstance(old.tiling, Tiling) and old.tiling.kind == "cartesian"
    path = old.write(tmp_path / "again.h5")
    with h5py.File(path, "r") as f:
        assert "decomposition" not in f and "tiling" in f
    assert same_decomposition(Trace.read(path).tiling, old.tiling)


def test_a_mesh_trace_whose_mesh_was_changed_or_whose_group_is_newer_is_refused_in_one_line(tmp_path):
    m = MeshPartition.from_mesh(*square(4), 4)
    path = mesh_trace(m).write(tmp_path / "trace.h5")
    with h5py.File(path, "r+") as f:
        f["decomposition/vertices"][0, 0] = 0.5
    with pytest.raises(ShoalError, match=r"trace.h5: /decomposition: this mesh \(25 vertices, 32 elements"):
        Trace.read(path)
    path = mesh_trace(m).write(tmp_path / "newer.h5")
    with h5py.File(path, "r+") as f:
        f["decomposition"].attrs["version"] = 2
    with pytest.raises(ShoalError, match="group /decomposition has version 2, newer than this shoal reads"):
        Trace.read(path)
    path = mesh_trace(m).write(tmp_path / "short.h5")
    with h5py.File(path, "r+") as f:
        del f["decomposition/elements"]
    with pytest.raises(ShoalError, match="missing /decomposition/elements"):
        Trace.read(path)


def later(t: Trace, steps: int) -> Trace:
    """``t`` as the part of a run ``steps`` steps further on."""
    return replace(t, tasks={**t.tasks, "step": t.tasks["step"] + steps},
                   messages={**t.messages, "step": t.messages["step"] + steps},
                   placement_steps=t.placement_steps + steps)


def test_parts_of_a_run_on_a_mesh_join_only_if_their_partitions_are_the_same():
    m = MeshPartition.from_mesh(*square(4), 4)
    t = mesh_trace(m, steps=2)
    whole = joined([t, later(mesh_trace(m, steps=2, seed=1), 2)])
    assert whole.steps.tolist() == [0, 1, 2, 3] and same_decomposition(whole.tiling, m)
    for other in (m.coarsen(2), MeshPartition.from_mesh(*square(4), 4, halo=0)):
        with pytest.raises(ShoalError, match="differ in their phases or tiling"):
            joined([t, later(mesh_trace(other, steps=2), 2)])


@settings(max_examples=25, deadline=None)
@given(meshes(), st.integers(1, 6), st.integers(0, 2**32 - 1))
def test_aggregating_a_mesh_trace_conserves_cost_work_and_the_bytes_between_coarse_parts(mesh, coarse_parts, seed):
    vertices, elements, nparts = mesh
    fine = MeshPartition.from_mesh(vertices, elements, max(nparts, 2))
    coarse = fine.coarsen(min(coarse_parts, fine.ntiles), seed=seed % 7)
    t = mesh_trace(fine, seed=seed)
    agg = aggregate(t, coarse)
    assert agg.tiling is coarse and agg.tile_cost().shape == (3, coarse.ntiles)
    assert agg.tasks["cost"].sum() == pytest.approx(t.tasks["cost"].sum(), rel=1e-12)
    assert agg.tasks["work"].sum() == t.tasks["work"].sum()
    f2c = fine.fine_to_coarse(coarse)
    assert np.allclose(agg.tile_cost(), t.tile_cost() @ np.eye(coarse.ntiles)[f2c])  # each coarse part its fine ones
    cross = f2c[t.messages["src"]] != f2c[t.messages["dst"]]
    assert agg.messages["bytes"].sum() == t.messages["bytes"][cross].sum()
    assert (agg.messages["src"] != agg.messages["dst"]).all()  # messages within a coarse part are gone
    assert np.array_equal(agg.tile_bytes, np.bincount(f2c, weights=t.tile_bytes).astype(np.int64))


def test_a_mesh_trace_aggregates_to_a_written_coarse_trace_and_refuses_what_does_not_nest(tmp_path):
    vertices, elements = square(6)
    fine = MeshPartition(vertices, elements, square_parts(6, lambda i, j: 3 * (i // 2) + j // 2))  # 3 x 3 blocks
    coarse = MeshPartition(vertices, elements, square_parts(6, lambda i, j: i // 4))  # two bands: nests
    agg = aggregate(mesh_trace(fine), coarse)
    back = Trace.read(agg.write(tmp_path / "coarse.h5"))
    assert same_decomposition(back.tiling, coarse)
    assert back.tasks["cost"].sum() == pytest.approx(agg.tasks["cost"].sum())
    assert back.placement_owners.shape == (1, 2)
    with pytest.raises(ShoalError, match="does not nest the fine one"):
        aggregate(mesh_trace(fine), MeshPartition(vertices, elements, square_parts(6, lambda i, j: i // 3)))
    with pytest.raises(ShoalError, match="a trace of a mesh partition aggregates to a coarser one, not to a Cartesian"):
        aggregate(mesh_trace(fine), Tiling.from_counts((6, 6), (2, 1)))
