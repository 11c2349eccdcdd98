"""Asynchronous contact mechanics on the parts of a mesh partition: the state, the pairs and their
layers are bitwise the one-piece run's for any part count, placement, job policy, job split and
worker count, through rollbacks, self-contact across parts, friction, an obstacle and pins led by a
motion (the contact-mechanics paper §III: the same forces in the same order on any partition)."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shoal.apps.cloth.acm import ContactCloth
from shoal.apps.cloth.contact_app import LOG, ContactClothApp
from shoal.apps.cloth.crossings import crossings
from shoal.apps.cloth.model import ClothModel, Material
from shoal.apps.cloth.obstacles import sphere
from shoal.apps.cloth.surface import Surface, sheet
from shoal.cluster import Cluster
from shoal.mesh import MeshPartition
from shoal.placement import get_policy
from shoal.runtime import LocalExecutor

ETA, K, DT, WINDOW, WINDOWS = 0.01, 20.0, 2e-4, 4, 14
GRAVITY = (0.0, 0.0, -9.81)


def _scene():
    """Two 5 x 5 sheets 3 cm apart coming at each other at 1.5 m/s, the lower one's first corner
    led sideways by a motion, a still sphere by their far corners, with friction."""
    a, b = sheet(5, size=0.1, height=0.015), sheet(5, size=0.1, height=-0.015, centre=(0.013, 0.007))
    surface = Surface(np.concatenate([a.vertices, b.vertices]), np.concatenate([a.triangles, b.triangles + 25]))
    model = ClothModel(surface, Material(density=0.2, stretch=50.0, bending=1e-4))
    pinned = np.zeros(50, bool)
    pinned[25] = True
    start = surface.vertices[25].copy()

    def motion(t):
        return (start + [0.3 * t, 0.0, -1.5 * t])[None, :]

    cloth = ContactCloth(model, DT, ETA, K, window=WINDOW, obstacles=(sphere((-0.065, -0.065, 0.0), 0.014),),
                         pinned=pinned, motion=motion, damping=0.5, friction=(0.3, 0.4))
    v = np.zeros((50, 3))
    v[:25, 2], v[25:, 2] = -1.5, 1.5
    return cloth, v


@pytest.fixture(scope="module")
def one_piece():
    cloth, v = _scene()
    x = cloth.model.surface.vertices.copy()
    log = cloth.run(x, v, WINDOWS, GRAVITY)
    assert sum(log.rollbacks) > 0 and max(log.pairs) > 0  # the sheets met, and windows ran again
    return x, v, cloth, log


def test_the_scene_meets_itself_across_parts_and_the_obstacle(one_piece):
    """The test below would be weak on a scene without self-contact or obstacle pairs."""
    *_, log = one_piece
    cloth, v = _scene()
    x = cloth.model.surface.vertices.copy()
    seen = set()
    for _ in range(WINDOWS):
        cloth.run(x, v, 1, GRAVITY)
        seen |= set((cloth.keys >> 60).tolist())
    assert {0, 1} <= seen  # vertex-face and edge-edge pairs between the sheets
    assert seen & {2, 3, 4}  # and the sphere's


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.integers(1, 6), nodes=st.integers(1, 3), workers=st.integers(1, 2),
       placement=st.sampled_from(["birdshot", "sfc", "metis"]),
       job_policy=st.sampled_from(["even", "profiled", "locality"]), split=st.sampled_from([0, 1, 7]))
def test_any_partition_placement_job_policy_split_and_workers_give_the_one_piece_bits(one_piece, parts, nodes, workers,
                                                                                      placement, job_policy, split):
    """Jobs cut into ranges of ``split`` items (the paper's Alg. 3; 0: whole) find the same pairs."""
    x, v, cloth, log = one_piece
    fresh, velocity = _scene()
    app = ContactClothApp(fresh, GRAVITY, velocity=velocity, job_split=split)
    mesh = MeshPartition.from_mesh(fresh.model.surface.vertices, fresh.model.surface.triangles, parts)
    app.prepare(mesh)
    cluster = Cluster.uniform(min(nodes, parts), workers)
    owner = get_policy(placement).place(mesh, cluster, 1)
    with LocalExecutor(app, mesh, cluster, owner, job_policy=job_policy) as ex:
        result = ex.run(WINDOWS)
    got = app.gather(result.states, mesh)
    assert got["x"].tobytes() == x.tobytes() and got["v"].tobytes() == v.tobytes()
    assert np.array_equal(got["keys"], cloth.keys) and np.array_equal(got["layers"], cloth.layers)
    assert got["clock"][0] == cloth.time
    for k, name in enumerate(LOG):  # the windows' log, crossings included, as the one piece logged it
        np.testing.assert_array_equal(got["windows"][:, k], getattr(log, name), err_msg=name)
    # Cut into ranges, one per core of the node, where a node has several (each part owns over 30 items).
    assert (result.jobs["first"] > 0).any() == (split > 0 and workers > 1)
    attempts = [int(s["attempts"][0]) for s in result.states.values()]
    assert attempts == [WINDOWS + sum(log.rollbacks)] * len(attempts)  # every part ran every rollback


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), parts=st.integers(1, 5), cuts=st.integers(1, 3))
def test_the_detection_jobs_count_every_crossing_once_over_any_parts_and_cuts(seed, parts, cuts):
    """A crumpled sheet (one the layers would never let form) counted job by job, each job's
    items cut into ``cuts`` ranges as Alg. 3 cuts them, gives the whole cloth's count."""
    surface = sheet(6, size=0.5)
    x = surface.vertices + np.random.default_rng(seed).normal(0.0, 0.15, surface.vertices.shape)
    cloth = ContactCloth(ClothModel(surface, Material(density=0.2, stretch=50.0)), DT, ETA, K, window=1)
    app = ContactClothApp(cloth, positions=x)
    mesh = app.decompose(parts)
    app.prepare(mesh)
    app._owners(mesh)
    inputs = {p: {"track": x[app._held[p]][None]} for p in range(parts)}
    counted = 0
    for a in range(parts):
        for b in (-1, *range(a + 1, parts)):
            job = (a,) if b < 0 else (a, b)
            ids = np.unique(np.concatenate([app._held[p] for p in job]))
            local = np.full(len(x) + 1, -1, np.int64)
            local[ids] = np.arange(len(ids))
            _, ea, ta = app._owned[a]
            for e, t in zip(np.array_split(ea, cuts), np.array_split(ta, cuts), strict=True):
                counted += app._crossings(inputs, job, local, len(ids), e, t)
    whole = crossings(x, surface.edges, surface.triangles)
    assert counted == whole
