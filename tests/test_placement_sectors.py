"""The ``sectors`` placement: equal angular sectors about the grid's centre, with 4 nodes the
quarters split along the diagonals (the invasive paper's §6.3)."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from shoal.apps import get_app
from shoal.cluster import Cluster
from shoal.errors import ShoalError
from shoal.placement import get_policy
from shoal.runtime import LocalExecutor
from shoal.tiling import Tiling


def sectors(tiling: Tiling, nodes: int) -> np.ndarray:
    return get_policy("sectors").place(tiling, Cluster.uniform(nodes, 1))


@pytest.mark.parametrize("n", [2, 4, 6, 10])
def test_four_nodes_on_a_square_tiling_are_four_congruent_triangles(n):
    owner = sectors(Tiling.from_counts((4 * n, 4 * n), (n, n)), 4).reshape(n, n)
    assert np.array_equal(np.bincount(owner.reshape(-1)), [n * n // 4] * 4)
    # A quarter turn counter-clockwise, (i, j) -> (n - 1 - j, i), carries node k's triangle onto k + 1's
    i, j = np.indices((n, n))
    assert np.array_equal(owner[n - 1 - j, i], (owner + 1) % 4)
    # Node 0 is the right triangle: every tile strictly inside it, between the two diagonals on the right
    assert np.all(owner[(i > j) & (i + j > n - 1)] == 0)


def test_each_tile_from_its_centres_angle_on_a_three_by_three_tiling():
    owner = sectors(Tiling.from_counts((9, 9), (3, 3)), 4).reshape(3, 3)
    # owner[i, j], i along x: the centre (angle 0 by convention) and the right middle are node 0;
    # a corner on a diagonal opens the next sector counter-clockwise (45 deg -> 1, 135 -> 2, 225 -> 3, 315 -> 0)
    assert owner.tolist() == [[3, 2, 2],
                              [3, 0, 1],
                              [0, 0, 1]]


def test_two_nodes_split_left_and_right():
    assert sectors(Tiling.from_counts((8, 2), (4, 1)), 2).tolist() == [1, 1, 0, 0]


def test_the_diagonals_are_the_grids_on_a_long_grid():
    # grid 40 x 10, tiles 10 x 5: tile (2, 1)'s centre (25, 7.5) is 26.6 deg above +x in cells, but
    # above the grid's diagonal (63.4 deg with each axis scaled to its length): node 1, the top
    owner = sectors(Tiling.from_counts((40, 10), (4, 2)), 4).reshape(4, 2)
    assert owner[2, 1] == 1 and owner[3, 1] == 0 and owner[3, 0] == 0 and owner[1, 0] == 3


def test_a_3d_tiling_is_split_by_its_first_two_axes():
    flat = sectors(Tiling.from_counts((16, 16), (4, 4)), 4).reshape(4, 4)
    deep = sectors(Tiling.from_counts((16, 16, 6), (4, 4, 3)), 4).reshape(4, 4, 3)
    assert np.array_equal(deep, np.repeat(flat[:, :, None], 3, axis=2))


@given(nodes=st.integers(1, 8), nx=st.integers(8, 14), ny=st.integers(8, 14))
def test_n_nodes_cover_every_tile_once_each_in_its_own_sector(nodes, nx, ny):
    tiling = Tiling.from_counts((3 * nx, 2 * ny), (nx, ny))
    owner = sectors(tiling, nodes)
    assert owner.shape == (tiling.ntiles,) and np.bincount(owner, minlength=nodes).min() >= 1
    assert owner.max() < nodes
    centre = (tiling.lo[:, :2] + tiling.hi[:, :2]) / 2 / np.array(tiling.grid) - 0.5
    angle = np.arctan2(centre[:, 1], centre[:, 0])
    middle = 2 * np.pi * owner / nodes  # each node's sector is centred on k / N of a turn
    off = np.angle(np.exp(1j * (angle - middle)))  # wrapped to (-pi, pi]
    inside = np.hypot(*centre.T) > 0
    assert np.all(np.abs(off[inside]) <= np.pi / nodes + 1e-9)


def test_a_node_left_without_a_tile_is_refused_in_one_line():
    # one row of 4 tiles: every centre is on the x axis, the top and bottom sectors are empty
    with pytest.raises(ShoalError, match="node 1 of 4 without a tile") as err:
        sectors(Tiling.from_counts((8, 2), (4, 1)), 4)
    assert "\n" not in str(err.value)


def test_placement_never_changes_the_physics():
    spec = get_app("synthetic")
    grid, steps = (24, 24), 4
    tiling = Tiling.from_counts(grid, (4, 4))
    states = {}
    for name in ("geometric", "sectors"):
        app = spec.build(spec.params(grid=list(grid)), steps)
        cluster = Cluster.uniform(4, 2)
        owner = get_policy(name).place(tiling, cluster)
        with LocalExecutor(app, tiling, cluster, owner) as executor:
            states[name] = app.gather(executor.run(steps).states, tiling)
    assert not np.array_equal(get_policy("sectors").place(tiling, Cluster.uniform(4, 2)),
                              get_policy("geometric").place(tiling, Cluster.uniform(4, 2)))
    for key in ("u", "burn"):
        assert states["sectors"][key].tobytes() == states["geometric"][key].tobytes(), key
