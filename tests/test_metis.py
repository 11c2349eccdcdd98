"""The METIS placement: balanced parts, little halo traffic cut, few tiles moved, one owner
table per seed, and never a different result."""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shoal.cluster import Cluster
from shoal.compare import compare_runs
from shoal.config import balance_table
from shoal.errors import ShoalError
from shoal.placement import BalanceContext, get_policy
from shoal.placement.metis import (
    DEFAULT_UFACTOR,
    WEIGHT_TOTAL,
    integer_weights,
    keep_most_in_place,
    metis_parts,
    tile_graph,
)
from shoal.session import run_scenario
from shoal.tiling import Tiling
from shoal.trace import Trace


def halo_bytes_cut(tiling: Tiling, owner: np.ndarray, tile_bytes=None) -> float:
    """Halo bytes per step that cross between nodes under ``owner``."""
    xadj, adjncy, halo = tile_graph(tiling, tile_bytes)
    src = np.repeat(np.arange(tiling.ntiles), np.diff(xadj))
    return float(halo[owner[src] != owner[adjncy]].sum() / 2)  # each edge is listed from both ends


def moved_bytes(before: np.ndarray, after: np.ndarray, tile_bytes: np.ndarray) -> int:
    return int(tile_bytes[before != after].sum())


@st.composite
def weighted_grids(draw, tiles_per_node=4):
    """A 2D tile grid of at least ``tiles_per_node`` tiles per node, random tile costs and bytes,
    nodes of 1 to 3 cores."""
    nodes = draw(st.integers(2, 6))
    counts = (draw(st.integers(2, 12)), draw(st.integers(2, 12)))
    if counts[0] * counts[1] < tiles_per_node * nodes:
        counts = (tiles_per_node * nodes, 2)
    tiling = Tiling.from_counts((4 * counts[0], 4 * counts[1]), counts)
    cluster = Cluster(tuple(draw(st.integers(1, 3)) for _ in range(nodes)))
    T = tiling.ntiles
    cost = np.array(draw(st.lists(st.floats(0.1, 1.0), min_size=T, max_size=T)))
    tile_bytes = np.array(draw(st.lists(st.integers(0, 10**6), min_size=T, max_size=T)), dtype=np.int64)
    return tiling, cluster, cost, tile_bytes, draw(st.integers(0, 2**31 - 1))


def test_halo_bytes_are_the_cells_each_tile_reads_from_the_other():
    """Two tiles of 4 x 4 cells side by side, halo 1: each reads a column of 4 of the other's
    cells; at 10 and 30 bytes per cell that is 4 * 10 + 4 * 30 bytes per step."""
    tiling = Tiling.from_counts((8, 4), (2, 1))
    xadj, adjncy, halo = tile_graph(tiling, np.array([160, 480]))
    assert xadj.tolist() == [0, 1, 2] and adjncy.tolist() == [1, 0]
    assert halo.tolist() == [160.0, 160.0]
    # Corners of a 2 x 2 tiling of 3 x 3 cells, halo 1: one cell each way.
    xadj, adjncy, halo = tile_graph(Tiling.from_counts((6, 6), (2, 2)))
    assert dict(zip(adjncy[xadj[0]:xadj[1]].tolist(), halo[xadj[0]:xadj[1]].tolist(), strict=True)) == \
        {1: 6.0, 2: 6.0, 3: 2.0}


def test_integer_weights_keep_ratios_and_stay_positive():
    w = integer_weights(np.array([0.0, 1.0, 3.0]))
    assert w[0] == 1 and w[2] == 3 * w[1] and w.sum() < 2**31
    assert integer_weights(np.zeros(3)).tolist() == [1, 1, 1]


def test_integer_weights_of_subnormal_loads_keep_their_ratios_without_overflow():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an overflow to inf was a RuntimeWarning, then garbage weights
        w = integer_weights(np.array([5e-324, 1e-323, 0.0]))  # so small that 1 / total overflows
    assert abs(int(w[1]) - 2 * int(w[0])) <= 1 and w[2] == 1 and w.sum() <= WEIGHT_TOTAL + 3


@settings(max_examples=15, deadline=None)
@given(case=weighted_grids())
def test_parts_are_balanced_within_the_tolerance(case):
    """Every part weighs at most (1 + ufactor / 1000) times its cores' share, give or take two
    tiles: integer tiles cannot always split a share exactly, and METIS takes ufactor as a
    target its refinement may miss by a vertex on graphs of a few dozen (seen: 20 tiles of
    weights 1, 1/2 and 1/8 on five parts of 1 to 3 cores)."""
    tiling, cluster, cost, tile_bytes, seed = case
    parts = metis_parts(tiling, cluster, cost, tile_bytes, seed)
    weights = integer_weights(cost)
    target = weights.sum() * cluster.core_array / cluster.total_cores
    got = np.bincount(parts, weights=weights, minlength=cluster.nodes)
    assert np.all(got <= (1 + DEFAULT_UFACTOR / 1000) * target + 2 * weights.max())
    assert np.all(np.bincount(parts, minlength=cluster.nodes) >= 1)


@pytest.mark.parametrize("counts, nodes", [((12, 20), 6), ((10, 10), 5), ((24, 16), 12)])
def test_metis_cuts_less_halo_traffic_than_sfc_and_birdshot_on_a_grid(counts, nodes):
    tiling = Tiling.from_counts((4 * counts[0], 4 * counts[1]), counts)
    cluster = Cluster.uniform(nodes, 2)
    cut = {name: halo_bytes_cut(tiling, get_policy(name).place(tiling, cluster, 0))
           for name in ("metis", "sfc", "birdshot")}
    assert cut["metis"] < cut["sfc"] < cut["birdshot"]
    # With equal cells per tile, every node gets its share of tiles within the tolerance.
    got = np.bincount(get_policy("metis").place(tiling, cluster, 0), minlength=nodes)
    assert got.max() <= (1 + DEFAULT_UFACTOR / 1000) * tiling.ntiles / nodes


@settings(max_examples=10, deadline=None)
@given(case=weighted_grids())
def test_matching_parts_to_nodes_moves_no_more_bytes_than_taking_them_as_numbered(case):
    tiling, cluster, cost, tile_bytes, seed = case
    before = metis_parts(tiling, cluster, cost[::-1].copy(), tile_bytes, seed)
    parts = metis_parts(tiling, cluster, cost, tile_bytes, seed + 1)
    after = keep_most_in_place(parts, before, cluster, tile_bytes)
    assert moved_bytes(before, after, tile_bytes) <= moved_bytes(before, parts, tile_bytes)
    # A node still gets a part sized for its cores: the same tiles grouped, relabelled among equal nodes.
    cores = cluster.core_array
    assert np.array_equal(cores[after], cores[parts])
    assert len({(p, a) for p, a in zip(parts.tolist(), after.tolist(), strict=True)}) == cluster.nodes


def test_the_periodic_policy_keeps_an_unchanged_partition_where_it_is():
    """Measured loads that give the same parts move nothing, however METIS numbers them."""
    tiling, cluster = Tiling.from_counts((48, 32), (12, 8)), Cluster.uniform(4, 2)
    loads = np.ones(tiling.ntiles)
    owner = get_policy("metis").place(tiling, cluster, 0)
    shuffled = np.array([2, 0, 3, 1])[owner]
    tile_bytes = np.full(tiling.ntiles, 1000)
    policy = get_policy("metis-periodic")
    ctx = BalanceContext(tiling, cluster, shuffled, loads[None, :] * tiling.cells, tile_bytes=tile_bytes,
                         params=policy.params())
    assert np.array_equal(policy.rebalance(ctx, {}), shuffled)


def test_same_seed_same_owner_table():
    tiling = Tiling.from_counts((40, 36), (10, 9))
    cluster = Cluster((2, 1, 3, 2, 2))
    static = get_policy("metis")
    assert np.array_equal(static.place(tiling, cluster, 7), static.place(tiling, cluster, 7))
    rng = np.random.default_rng(3)
    loads = rng.uniform(0.5, 2.0, (2, tiling.ntiles))
    owner = get_policy("birdshot").place(tiling, cluster, 1)
    periodic = get_policy("metis-periodic")
    ctx = BalanceContext(tiling, cluster, owner, loads, tile_bytes=rng.integers(1, 10**5, tiling.ntiles),
                         params=periodic.params(seed=7))
    assert np.array_equal(periodic.rebalance(ctx, {}), periodic.rebalance(ctx, {}))


@pytest.mark.parametrize("assignment, message", [
    ("metis-periodic.ufactor=0", "metis-periodic.ufactor must be from 1 to 1000"),
    ("metis-periodic.ufactor=1.5", "expects int"),
    ("metis-periodic.seed=-1", "metis-periodic.seed must be >= 0"),
    ("metis.seed=1", "unknown parameter of 'metis'"),
])
def test_bad_metis_parameters_are_one_line(assignment, message):
    with pytest.raises(ShoalError, match=message):
        balance_table({}, [assignment])


def test_a_dam_break_under_metis_is_bitwise_the_same_as_under_sfc(tmp_path):
    small = ["app.dx=0.05", "app.tank=[2.0, 1.2]", "app.fluid=[[0.0, 0.0, 0.5, 1.0]]", "run.frame_every=0"]
    reference = run_scenario("sph-dam-break", steps=12, tiles=16, nodes=1, placement="sfc", set=small,
                             out=tmp_path / "sfc").path
    for name, period in (("metis", None), ("metis-periodic", 4)):
        run = run_scenario("sph-dam-break", steps=12, tiles=16, nodes=3, placement=name, period=period, set=small,
                           out=tmp_path / name).path
        assert compare_runs(reference, run).identical, name
    assert Trace.read(run).balance["step"].tolist() == [4, 8]  # the periodic one re-placed twice
