"""The particle store's compiled helpers against plain NumPy definitions, on random particles."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from shoal.apps.particles import (
    CellGrid,
    empty_ring,
    gather_fields,
    in_box,
    in_cell_order,
    merge_order,
    neighbour_boxes,
    ring_keys,
    ring_payloads,
    ring_table,
    settle,
    take,
)
from shoal.apps.sph import kernels2d, kernels3d
from shoal.tiling import Tiling


def random_particles(rng, n, grid_shape, spill=1):
    """Particles with distinct ids on cells of the grid (and ``spill`` cells beyond it)."""
    ndim = len(grid_shape)
    cell = np.stack([rng.integers(-spill, g + spill, n) for g in grid_shape], axis=1)
    return {"id": rng.permutation(10 * n + 1)[:n].astype(np.int64), "x": rng.random((n, ndim)),
            "rho": rng.random(n), "kind": rng.integers(0, 2, n).astype(np.int8), "cell": cell}


def lexorder(cell, ids, lo):
    """(cell row-major, id) order by NumPy's lexsort: the reference for the compiled sorts."""
    keys = [ids] + [cell[:, a] - lo[a] for a in reversed(range(cell.shape[1]))]
    return np.lexsort(keys)


def scene(case):
    """A random generator, the grid, its tiling and cell grid (unit cells), and a random tile."""
    seed, grid_shape, counts = case
    rng = np.random.default_rng(seed)
    tiling = Tiling.from_counts(grid_shape, counts[: len(grid_shape)])
    grid = CellGrid(np.zeros(len(grid_shape)), np.array(grid_shape, float), 1.0)
    return rng, grid_shape, tiling, grid, int(rng.integers(tiling.ntiles))


cases = st.tuples(st.integers(0, 2**32 - 1), st.sampled_from([(7, 5), (4, 6, 5)]),
                  st.tuples(st.integers(1, 3), st.integers(1, 3), st.integers(1, 3)))


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(0, 50), st.integers(0, 20))
def test_gather_fields_is_concatenate_then_take_for_every_field(seed, n_first, n_rest):
    rng = np.random.default_rng(seed)
    kinds = {"a": ((), np.float64), "b": ((3,), np.float64), "c": ((), np.int8), "d": ((2,), np.int64)}
    first = {f: (rng.random((n_first, *shape)) * 100).astype(dtype) for f, (shape, dtype) in kinds.items()}
    rest = {f: (rng.random((n_rest, *shape)) * 100).astype(dtype) for f, (shape, dtype) in kinds.items()}
    rest["a"] = rest["a"].astype(np.float32)  # taken as the first part's dtype
    index = rng.integers(0, max(n_first + n_rest, 1), rng.integers(0, 30)) if n_first + n_rest else []
    index = np.asarray(index, np.int64)
    got = gather_fields(first, rest, index, ("d", "a", "c", "b"))
    assert list(got) == ["d", "a", "c", "b"]
    for f in kinds:
        expected = np.concatenate([first[f], rest[f].astype(first[f].dtype)])[index]
        assert got[f].dtype == first[f].dtype and np.array_equal(got[f], expected)
    assert gather_fields(first, rest, index, ()) == {}


@settings(max_examples=60, deadline=None)
@given(cases, st.booleans(), st.booleans())
def test_box_mask_and_cell_order_check_against_numpy(case, sort, tie):
    rng, grid_shape, tiling, grid, tile = scene(case)
    p = random_particles(rng, int(rng.integers(0, 60)), grid_shape)
    lo, hi = tiling.lo[tile], tiling.hi[tile]
    expected = np.all((p["cell"] >= lo) & (p["cell"] < hi), axis=1)
    assert np.array_equal(in_box(p, lo, hi), expected)
    if sort:
        p = take(p, lexorder(p["cell"], p["id"], p["cell"].min(axis=0, initial=0)))
    if tie and len(p["id"]) > 1:  # a repeated (cell, id) is not in strictly increasing order
        p["cell"][1], p["id"][1] = p["cell"][0], p["id"][0]
    key = np.column_stack([p["cell"], p["id"]])
    increasing = all(tuple(a) < tuple(b) for a, b in zip(key[:-1], key[1:], strict=True))
    assert in_cell_order(p) == increasing


@settings(max_examples=40, deadline=None)
@given(cases)
def test_settle_keeps_the_tiles_particles_in_cell_id_order(case):
    rng, grid_shape, tiling, grid, tile = scene(case)
    allp = random_particles(rng, 200, grid_shape)
    cut = int(rng.integers(0, 200))
    own, arrivals = take(allp, slice(0, cut)), take(allp, slice(cut, 200))
    immigrants = [take(arrivals, slice(0, 5)), take(arrivals, slice(5, None))]
    got = settle(own, grid, tiling, tile, immigrants)
    lo, hi = tiling.lo[tile], tiling.hi[tile]
    mine = take(allp, in_box(allp, lo, hi))
    expected = take(mine, lexorder(mine["cell"], mine["id"], lo))
    for f in ("id", "x", "rho", "kind", "cell"):
        assert got[f].dtype == allp[f].dtype and np.array_equal(got[f], expected[f])


@settings(max_examples=40, deadline=None)
@given(cases)
def test_merge_order_is_local_cell_id_order_and_drops_far_halos(case):
    rng, grid_shape, tiling, grid, tile = scene(case)
    lo, hi = tiling.lo[tile], tiling.hi[tile]
    allp = random_particles(rng, 300, grid_shape)
    inside = in_box(allp, lo, hi)
    own = take(allp, inside)
    own = take(own, lexorder(own["cell"], own["id"], lo))
    others = take(allp, ~inside)
    index, start, mine, own_index, shape = merge_order(own["cell"], own["id"], others["cell"], others["id"], lo, hi)

    pool = {f: np.concatenate([own[f], others[f]]) for f in ("id", "cell")}
    near = in_box(pool, lo - 1, hi + 1)
    near[: len(own["id"])] = True
    kept = np.flatnonzero(near)
    expected = kept[lexorder(pool["cell"][kept], pool["id"][kept], lo - 1)]
    assert np.array_equal(index, expected) and np.array_equal(shape, hi - lo + 2)
    assert np.array_equal(mine, expected < len(own["id"]))
    assert np.array_equal(own_index, np.flatnonzero(expected < len(own["id"])))
    # start: the first particle of every local cell of the widened box
    local = pool["cell"][expected] - (lo - 1)
    flat = np.ravel_multi_index(tuple(local.T), tuple(shape))
    assert np.array_equal(start, np.searchsorted(flat, np.arange(np.prod(shape) + 1)))


def pack_ring(p: dict, tiling: Tiling, src: int) -> dict:
    """The ring payloads the app of ``p``'s dimension packs for each neighbour (with motion, in 3D)."""
    los, his, inner, nbrs = neighbour_boxes(tiling, src, 1)
    if p["cell"].shape[1] == 2:
        packed = kernels2d.ring_rows(p["cell"], p["id"], p["x"], p["v"], p["rho"], p["m"], p["kind"], los, his,
                                     *inner)
    else:
        packed = kernels3d.ring_rows(p["cell"], p["id"], p["x"], p["v"], p["rho"], True, los, his, *inner)
    return ring_payloads(packed, nbrs, empty_ring(packed[1].shape[1]))


@settings(max_examples=40, deadline=None)
@given(cases)
def test_ring_halos_are_exactly_the_ring_particles_of_each_neighbour(case):
    """Each neighbour gets the particles in its ring of cells, with what its kernels read, as
    rows of one table (id and cell first, exact); concatenated in any order of neighbours."""
    rng, grid_shape, tiling, _, src = scene(case)
    p = random_particles(rng, 300, grid_shape)
    p = take(p, in_box(p, tiling.lo[src] - 1, tiling.hi[src] + 1))  # some drifted out of the box
    ndim = len(grid_shape)
    p.update(v=rng.random((len(p["id"]), ndim)), m=rng.random(len(p["id"])))
    halos = pack_ring(p, tiling, src)
    assert sorted(halos) == sorted(map(int, tiling.neighbours[src]))
    for n, rows in halos.items():
        mask = in_box(p, tiling.lo[n] - 1, tiling.hi[n] + 1)
        ids, cell = ring_keys(rows, ndim)
        assert np.array_equal(ids, p["id"][mask]) and np.array_equal(cell, p["cell"][mask])
        values = rows[:, 1 + ndim:]
        assert np.array_equal(values[:, :ndim], p["x"][mask]) and np.array_equal(values[:, ndim:2 * ndim], p["v"][mask])
        assert np.array_equal(values[:, 2 * ndim], p["rho"][mask])
        if ndim == 2:
            assert np.array_equal(values[:, 5], p["m"][mask]) and np.array_equal(values[:, 6], p["kind"][mask])
    empty = empty_ring(10 if ndim == 2 else 11)
    table = ring_table(list(halos.values()), empty)
    assert len(table) == sum(len(rows) for rows in halos.values()) and table.flags.writeable


def test_ring_keys_are_exact_up_to_2_to_the_53():
    table = np.array([[2.0**53, -1.0, 7.0], [12345678901.0, 0.0, -3.0]])
    ids, cell = ring_keys(table, 2)
    assert ids.tolist() == [2**53, 12345678901] and cell.tolist() == [[-1, 7], [0, -3]]
