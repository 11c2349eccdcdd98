import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from shoal.cluster import Cluster
from shoal.errors import ShoalError
from shoal.placement import POLICIES, get_policy, node_quotas
from shoal.tiling import Tiling

STATIC = sorted(name for name, p in POLICIES.items() if not p.dynamic)
# Policies that hand each node exactly its share of tiles (geometric only as far as boxes allow;
# metis balances cells within METIS's tolerance, not tile counts; sectors splits by angle).
EXACT_SHARE = [n for n in STATIC if n not in ("geometric", "metis", "sectors")]


@st.composite
def setups(draw):
    ndim = draw(st.sampled_from([2, 3]))
    counts = tuple(draw(st.integers(1, 9 if ndim == 2 else 5)) for _ in range(ndim))
    tiling = Tiling.from_counts(tuple(4 * c for c in counts), counts)
    nodes = draw(st.integers(1, min(8, tiling.ntiles)))
    cores = tuple(draw(st.integers(1, 4)) for _ in range(nodes))
    return tiling, Cluster(cores), draw(st.integers(0, 2**31 - 1))


@pytest.mark.parametrize("name", STATIC)
@given(setup=setups())
def test_every_tile_owned_once_by_a_real_node_and_deterministic(name, setup):
    tiling, cluster, seed = setup
    try:
        owner = get_policy(name).place(tiling, cluster, seed)
    except ShoalError as error:  # sectors refuses a tiling whose sectors leave a node without a tile
        assert name == "sectors" and "without a tile" in str(error)
        return
    assert owner.shape == (tiling.ntiles,)
    assert owner.min() >= 0 and owner.max() < cluster.nodes
    if len(set(cluster.cores)) == 1:  # equal nodes all get work (unequal ones may round to 0)
        assert np.bincount(owner, minlength=cluster.nodes).min() >= 1
    assert np.array_equal(owner, get_policy(name).place(tiling, cluster, seed))


@pytest.mark.parametrize("name", EXACT_SHARE)
@given(setup=setups())
def test_tiles_per_node_proportional_to_cores_within_one_tile(name, setup):
    tiling, cluster, seed = setup
    owner = get_policy(name).place(tiling, cluster, seed)
    got = np.bincount(owner, minlength=cluster.nodes)
    share = tiling.ntiles * cluster.core_array / cluster.total_cores
    assert np.all(np.abs(got - share) < 1.0)
    assert got.sum() == tiling.ntiles


@given(setup=setups())
def test_geometric_gives_every_node_one_box(setup):
    tiling, cluster, seed = setup
    owner = get_policy("geometric").place(tiling, cluster, seed).reshape(tiling.counts)
    for node in range(cluster.nodes):
        idx = np.argwhere(owner == node)
        lo, hi = idx.min(axis=0), idx.max(axis=0) + 1
        box = owner[tuple(slice(a, b) for a, b in zip(lo, hi, strict=True))]
        assert (box == node).all(), "a node's tiles do not fill their bounding box"


def test_geometric_is_proportional_when_the_grid_allows():
    tiling = Tiling.from_counts((64, 64), (8, 8))
    owner = get_policy("geometric").place(tiling, Cluster((2, 2, 4)), 0)
    assert np.bincount(owner).tolist() == [16, 16, 32]


@given(setup=setups())
def test_sfc_chunks_are_contiguous_along_the_hilbert_curve(setup):
    tiling, cluster, seed = setup
    owner = get_policy("sfc").place(tiling, cluster, seed)
    along = owner[tiling.hilbert]
    assert (np.diff(along) >= 0).all()


def test_strips_are_horizontal_bands():
    tiling = Tiling.from_counts((32, 32), (4, 8))
    owner = get_policy("strips").place(tiling, Cluster.uniform(4, 1), 0).reshape(tiling.counts)
    # 8 rows of 4 tiles over 4 nodes: each node owns two whole rows (constant along x).
    assert (owner == owner[:1, :]).all()
    assert owner[0].tolist() == [0, 0, 1, 1, 2, 2, 3, 3]


def test_birdshot_depends_on_the_seed_and_spreads_tiles():
    tiling = Tiling.from_counts((64, 64), (16, 16))
    cluster = Cluster.uniform(4, 2)
    a = get_policy("birdshot").place(tiling, cluster, 1)
    b = get_policy("birdshot").place(tiling, cluster, 2)
    assert not np.array_equal(a, b)
    # Random placement: a node's tiles are not one box: the first row holds several owners.
    assert len(set(a.reshape(16, 16)[0].tolist())) > 1


@given(st.integers(1, 500), st.lists(st.integers(1, 64), min_size=1, max_size=20))
def test_quotas_sum_exactly_and_stay_within_one_tile(ntiles, cores):
    q = node_quotas(ntiles, cores)
    assert q.sum() == ntiles
    share = ntiles * np.array(cores) / sum(cores)
    assert np.all(np.abs(q - share) < 1.0)


def test_unknown_policy_names_the_known_ones():
    with pytest.raises(ShoalError, match="birdshot"):
        get_policy("nope")


@pytest.mark.parametrize("name", STATIC)
def test_fewer_tiles_than_nodes_is_an_error(name):
    with pytest.raises(ShoalError, match="tile"):
        get_policy(name).place(Tiling.from_counts((4, 4), (1, 2)), Cluster.uniform(3, 1), 0)


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_every_policy_follows_the_contract_and_static_ones_refuse_to_rebalance(name):
    from shoal.placement.registry import PlacementPolicy

    policy = POLICIES[name]
    assert PlacementPolicy in type(policy).__mro__
    if not policy.dynamic:
        with pytest.raises(NotImplementedError, match="static"):
            policy.rebalance(None, {})
