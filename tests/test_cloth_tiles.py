"""The cloth on tiles of a mesh partition: every part moves the vertices it holds, and the
state is bitwise the one-piece model's for any part count, placement, worker count and
executor (the contact-mechanics paper's reproducibility, §III)."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shoal.apps.cloth.app import ClothApp
from shoal.apps.cloth.model import ClothModel, Material
from shoal.apps.cloth.surface import sheet
from shoal.cluster import Cluster
from shoal.errors import ShoalError
from shoal.mesh import MeshPartition
from shoal.placement import get_policy
from shoal.runtime import LocalExecutor
from shoal.runtime.native import NativeExecutor

STEPS, DT = 25, 2e-4


def _cloth():
    model = ClothModel(sheet(13, size=0.4, height=0.3), Material(stretch=60.0, poisson=0.25, bending=5e-4))
    rng = np.random.default_rng(7)
    pinned = np.zeros(len(model.surface.vertices), bool)
    pinned[[0, 12]] = True  # two corners
    velocity = rng.normal(0, 0.05, (len(pinned), 3))
    velocity[pinned] = 0.0
    return model, pinned, velocity


@pytest.fixture(scope="module")
def one_piece():
    model, pinned, velocity = _cloth()
    x, v = model.surface.vertices.copy(), velocity.copy()
    model.run(x, v, DT, STEPS, gravity=(0, 0, -9.81), pinned=pinned, damping=0.5)
    return x, v


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.integers(1, 6), nodes=st.integers(1, 3), workers=st.integers(1, 2),
       placement=st.sampled_from(["birdshot", "sfc", "metis"]), native=st.booleans())
def test_any_partition_placement_workers_and_executor_give_the_one_piece_bits(one_piece, parts, nodes, workers,
                                                                              placement, native):
    model, pinned, velocity = _cloth()
    app = ClothApp(model, DT, gravity=(0, 0, -9.81), pinned=pinned, damping=0.5, velocity=velocity)
    mesh = MeshPartition.from_mesh(model.surface.vertices, model.surface.triangles, parts)
    app.check_tiling(mesh)
    cluster = Cluster.uniform(min(nodes, parts), workers)
    owner = get_policy(placement).place(mesh, cluster, 1)
    with (NativeExecutor if native else LocalExecutor)(app, mesh, cluster, owner) as ex:
        result = ex.run(STEPS)
    got = app.gather(result.states, mesh)
    x, v = one_piece
    assert got["x"].tobytes() == x.tobytes() and got["v"].tobytes() == v.tobytes()


def test_a_grid_tiling_is_refused_in_one_line():
    from shoal.tiling import Tiling

    model, _, _ = _cloth()
    with pytest.raises(ShoalError, match="the cloth runs on a mesh partition of its triangles"):
        ClothApp(model, DT).check_tiling(Tiling.from_count((8, 8), 4))
