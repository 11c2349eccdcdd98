import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from shoal.errors import ShoalError
from shoal.tiling import Tiling

grids2 = st.tuples(st.integers(1, 40), st.integers(1, 40))
grids3 = st.tuples(st.integers(1, 14), st.integers(1, 14), st.integers(1, 14))


@st.composite
def tilings(draw):
    grid = draw(st.one_of(grids2, grids3))
    how = draw(st.sampled_from(["shape", "counts", "count"]))
    if how == "shape":
        shape = tuple(draw(st.integers(1, n)) for n in grid)
        return Tiling.from_shape(grid, shape, halo=0)
    if how == "counts":
        counts = tuple(draw(st.integers(1, n)) for n in grid)
        return Tiling.from_counts(grid, counts, halo=0)
    cells = int(np.prod(grid))
    n = draw(st.integers(1, min(cells, 64)))
    try:
        return Tiling.from_count(grid, n, halo=0)
    except ShoalError:
        return Tiling.from_counts(grid, (1,) * len(grid), halo=0)


def touching(t: Tiling, a: int, b: int) -> bool:
    """Boxes a and b share a face, an edge or a corner (closed boxes intersect)."""
    return a != b and all(t.lo[a][k] <= t.hi[b][k] and t.lo[b][k] <= t.hi[a][k] for k in range(t.ndim))


@given(tilings())
def test_every_cell_in_exactly_one_tile(t):
    count = np.zeros(t.grid, dtype=np.int64)
    for tile in range(t.ntiles):
        count[t.slices(tile)] += 1
    assert (count == 1).all()
    assert t.cells.sum() == np.prod(t.grid)
    owner = t.owner_map()
    for cell in [tuple(np.zeros(t.ndim, int)), tuple(n - 1 for n in t.grid)]:
        assert owner[cell] == t.tile_of_cell(cell)


@given(tilings())
def test_neighbours_are_exactly_the_touching_tiles_and_symmetric(t):
    for a in range(t.ntiles):
        expected = [b for b in range(t.ntiles) if touching(t, a, b)]
        assert list(t.neighbours[a]) == expected
        for b in t.neighbours[a]:
            assert a in t.neighbours[b]


@given(tilings())
def test_hilbert_is_a_permutation_whose_consecutive_tiles_touch(t):
    order = t.hilbert
    assert sorted(order.tolist()) == list(range(t.ntiles))
    for a, b in itertools.pairwise(order.tolist()):
        assert b in t.neighbours[a]


@given(tilings())
def test_morton_is_a_permutation(t):
    assert sorted(t.morton.tolist()) == list(range(t.ntiles))


def test_hilbert_on_power_of_two_is_the_classic_curve_with_face_steps():
    t = Tiling.from_counts((64, 64), (8, 8))
    idx = np.array([t.tile_index(i) for i in t.hilbert])
    steps = np.abs(np.diff(idx, axis=0)).sum(axis=1)
    assert (steps == 1).all()  # face neighbours only, never a diagonal
    assert tuple(idx[0]) == (0, 0)
    # A Hilbert curve on a square ends at a corner adjacent to its start.
    assert tuple(idx[-1]) in {(7, 0), (0, 7)}


def test_morton_order_interleaves_bits():
    t = Tiling.from_counts((4, 4), (4, 4))
    idx = [t.tile_index(i) for i in t.morton[:4]]
    assert idx == [(0, 0), (1, 0), (0, 1), (1, 1)]


@given(st.one_of(grids2, grids3), st.integers(1, 64))
def test_from_count_gives_exactly_that_many_tiles(grid, n):
    try:
        t = Tiling.from_count(grid, n)
    except ShoalError as exc:
        assert "tiles" in str(exc)
        return
    assert t.ntiles == n
    for e in t.edges:
        sizes = np.diff(e)
        assert sizes.max() - sizes.min() <= 1


@given(tilings(), st.integers(1, 4))
def test_coarsening_nests_and_maps_every_fine_tile_inside_its_coarse_tile(t, f):
    c = t.coarsen(f)
    m = t.fine_to_coarse(c)
    assert c.ntiles <= t.ntiles
    assert sorted(set(m.tolist())) == list(range(c.ntiles))
    for fine, coarse in enumerate(m):
        assert (c.lo[coarse] <= t.lo[fine]).all() and (t.hi[fine] <= c.hi[coarse]).all()
    # Coarse cells are the union of their fine tiles' cells.
    assert np.bincount(m, weights=t.cells, minlength=c.ntiles).tolist() == c.cells.tolist()


def test_fine_to_coarse_rejects_a_tiling_that_does_not_nest():
    fine = Tiling.from_counts((12, 12), (3, 3))
    other = Tiling.from_counts((12, 12), (2, 2))
    with pytest.raises(ShoalError, match="nest"):
        fine.fine_to_coarse(other)


def test_edge_tiles_may_be_smaller():
    t = Tiling.from_shape((10, 7), (4, 3))
    assert t.counts == (3, 3)
    assert t.bounds(t.tile_id((2, 2))) == ((8, 10), (6, 7))


def test_halo_region_is_the_part_of_the_source_inside_the_expanded_destination():
    t = Tiling.from_counts((8, 8), (2, 2), halo=2)
    assert t.halo_region(0, 1) == (slice(0, 4), slice(4, 6))
    assert t.halo_region(0, 3) == (slice(4, 6), slice(4, 6))


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: Tiling.from_shape((0, 4), (1, 1)), "positive"),
        (lambda: Tiling.from_shape((4, 4), (0, 1)), "positive"),
        (lambda: Tiling.from_shape((4, 4), (5, 1)), "larger than the grid"),
        (lambda: Tiling.from_counts((4, 4), (5, 1)), "more tiles than cells"),
        (lambda: Tiling.from_count((4, 4), 17), "more tiles than cells"),
        (lambda: Tiling.from_count((4, 4), 0), "positive"),
        (lambda: Tiling.from_count((3, 3), 5), "cannot split"),
        (lambda: Tiling.from_shape((4,), (1,)), "2 or 3 dimensions"),
        (lambda: Tiling.from_shape((4, 4), (1, 1, 1)), "axes"),
        (lambda: Tiling.from_counts((8, 8), (8, 8), halo=2), "halo width"),
    ],
)
def test_impossible_requests_fail_with_one_clear_line(make, match):
    with pytest.raises(ShoalError, match=match) as info:
        make()
    assert "\n" not in str(info.value)


def test_round_trip_through_dict():
    t = Tiling.from_shape((10, 9, 8), (4, 3, 5), halo=1)
    u = Tiling.from_dict(t.to_dict())
    assert u.grid == t.grid and all((a == b).all() for a, b in zip(u.edges, t.edges, strict=True))
