"""Work units: every phase of every app declares what its work count counts; the counts are
exact on hand-made particles, follow what drives a kernel's cost, and add up to the same total
for any tiling."""

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shoal.apps import all_apps, get_app
from shoal.apps.particles import CellGrid, in_box, locate, merge_order, neighbour_pairs
from shoal.cluster import Cluster
from shoal.placement import get_policy
from shoal.runtime import LocalExecutor
from shoal.runtime.app import Phase
from shoal.tiling import Tiling


@pytest.mark.parametrize("name", sorted(all_apps()))
def test_every_phase_of_every_app_declares_its_unit(name):
    app = all_apps()[name].tiny_app()
    for phase in app.phases:
        assert phase.work != "items" and phase.work.strip() == phase.work, (name, phase.name)


def test_the_apps_page_lists_every_phase_with_its_unit():
    text = (Path(__file__).resolve().parents[1] / "docs" / "reference" / "apps.md").read_text()
    rows = {tuple(c.strip().strip("`") for c in line.split("|")[1:4]) for line in text.splitlines()
            if line.startswith("| `")}
    declared = {(name, phase.name, phase.work) for name, spec in all_apps().items()
                for phase in spec.tiny_app().phases}
    assert rows == declared


def test_a_phase_needs_a_unit():
    assert Phase("a").work == "items"
    assert Phase("a", work="cell updates").work == "cell updates"
    for bad in ("", "  ", None):
        with pytest.raises(ValueError, match="work must name a unit"):
            Phase("a", work=bad)


def occupancy(counts) -> np.ndarray:
    """Cell starts of a local grid whose cells hold ``counts`` particles (row-major)."""
    return np.concatenate([[0], np.cumsum(np.ravel(counts))]).astype(np.int64)


@pytest.mark.parametrize("ndim", [2, 3])
@pytest.mark.parametrize("k", [1, 4])
def test_pairs_of_a_full_lattice_are_exact(ndim, k):
    """k particles a cell in a 3^d block: an own particle of the middle cell has 3^d k - 1
    candidates, one of a corner cell 2^d k - 1; halo particles count for nothing themselves."""
    shape = np.array([3] * ndim)
    start = occupancy(np.full(shape, k))
    middle = (3**ndim) // 2
    own = np.zeros(start[-1], bool)
    own[start[middle]:start[middle + 1]] = True
    assert neighbour_pairs(own, start, shape) == k * (3**ndim * k - 1)
    own[:] = False
    own[start[0]:start[1]] = True
    assert neighbour_pairs(own, start, shape) == k * (2**ndim * k - 1)
    own[:] = True
    every = sum(int(np.prod([2 + (c == 1) for c in np.unravel_index(cell, shape)])) for cell in range(3**ndim))
    assert neighbour_pairs(own, start, shape) == k * (k * every - 3**ndim)


def tile_pairs(own: dict, halo: dict, lo, hi) -> int:
    """The candidate pairs of a tile's own particles (sorted by (cell, id)) among its halo's."""
    lo, hi = np.asarray(lo, np.int64), np.asarray(hi, np.int64)
    _, start, mine, _, shape = merge_order(own["cell"], own["id"], halo["cell"], halo["id"], lo, hi)
    return neighbour_pairs(mine, start, shape)


def brute_pairs(cell: np.ndarray, mine: np.ndarray) -> int:
    """Ordered pairs (i own, j != i) whose cells differ by at most one along every axis."""
    near = np.all(np.abs(cell[:, None, :] - cell[None, :, :]) <= 1, axis=2)
    return int(near[mine].sum() - mine.sum())


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31), n=st.integers(0, 300), box=st.tuples(*[st.integers(0, 7)] * 4))
def test_pairs_of_a_tile_equal_a_brute_force_count(seed, n, box):
    """A tile's own particles and the ring its neighbours would send: the neighbourhood's pair
    count is the brute-force count over every particle of the world."""
    rng = np.random.default_rng(seed)
    grid = CellGrid((0.0, 0.0), (1.0, 1.0), 0.125)  # 8 x 8 cells
    p = locate({"id": rng.permutation(n).astype(np.int64), "x": rng.random((n, 2))}, grid)
    lo = np.array([min(box[0], box[1]), min(box[2], box[3])])
    hi = np.array([max(box[0], box[1]), max(box[2], box[3])]) + 1
    mine = in_box(p, lo, hi)
    ring = in_box(p, lo - 1, hi + 1) & ~mine
    own = {k: a[mine] for k, a in p.items()}
    halo = {k: a[ring] for k, a in p.items()}
    order = np.lexsort((own["id"], own["cell"][:, 1], own["cell"][:, 0]))
    own = {k: a[order] for k, a in own.items()}
    assert tile_pairs(own, halo, lo, hi) == brute_pairs(p["cell"], mine)


def lattice_pairs(x0, x1, spacing) -> tuple[int, int]:
    """(particles, candidate pairs) of a square lattice block seen as one tile."""
    grid = CellGrid((0.0, 0.0), (1.0, 1.0), 0.1)
    axis = np.arange(x0 + spacing / 2, x1, spacing)
    x = np.stack(np.meshgrid(axis, axis, indexing="ij"), -1).reshape(-1, 2)
    p = locate({"id": np.arange(len(x), dtype=np.int64), "x": x}, grid)
    order = np.lexsort((p["id"], p["cell"][:, 1], p["cell"][:, 0]))
    p = {k: a[order] for k, a in p.items()}
    none = {"id": np.empty(0, np.int64), "cell": np.empty((0, 2), np.int64)}
    return len(x), tile_pairs(p, none, (0, 0), (10, 10))


def test_pairs_follow_the_neighbours_a_kernel_weighs_not_the_particle_count():
    """A block of m x m cells holding k particles each has k^2 (3m - 2)^2 - k m^2 pairs. Four
    times the particles at the same spacing: about four times the pairs (a kernel's cost per
    particle stays). The same particles packed four times as densely: as many particles, yet
    each weighs four times the neighbours, and the pairs grow with them."""
    def block(m, k):
        return k * k * (3 * m - 2) ** 2 - k * m * m

    n, pairs = lattice_pairs(0.0, 0.5, 0.0125)
    n4, pairs4 = lattice_pairs(0.0, 1.0, 0.0125)
    assert (n, pairs, n4, pairs4) == (1600, block(5, 64), 6400, block(10, 64))
    dense_n, dense = lattice_pairs(0.2, 0.6, 0.0125)
    sparse_n, sparse = lattice_pairs(0.0, 0.8, 0.025)
    assert (dense_n, dense, sparse_n, sparse) == (1024, block(4, 64), 1024, block(8, 16))
    assert dense > 3 * sparse


def work_by_step_and_phase(name, params, ntiles, steps, workers=1):
    spec = get_app(name)
    app = spec.build(spec.params(**params), steps)
    tiling = Tiling.from_count(app.grid, ntiles)
    cluster = Cluster.uniform(2 if ntiles > 1 else 1, workers)
    res = LocalExecutor(app, tiling, cluster, get_policy("birdshot").place(tiling, cluster, 1)).run(steps)
    t = res.tasks
    total = np.zeros((steps, len(app.phases)), np.int64)
    np.add.at(total, (t["step"], t["phase"]), t["work"])
    return total


@pytest.mark.parametrize("name, params, steps, tilings", [
    ("sph2d", dict(dx=0.03, tank=[2.0, 1.2], fluid=[[0.0, 0.0, 0.5, 1.0]]), 20, (16, 64)),
    ("sph2d", dict(layout="channel", tank=[2.0, 0.8], fluid=[[0.0, 0.0, 2.0, 0.8]], cylinders=[[0.7, 0.4, 0.12]],
                   gravity=[0.0, 0.0], inflow_velocity=1.0, dx=0.04, alpha=0.2), 20, (9,)),
    ("sph3d", dict(particles=3000), 6, (8, 27)),
    ("synthetic", dict(grid=[24, 20], work_per_cell=8.0), 5, (6, 12)),
    # computing every block: with skipping on, a block is a tile's, so what is skipped follows the cut
    ("seismic", dict(cells=[20, 16, 12], absorbing=3, source_at=[1000.0, 800.0, 600.0], skip_zero=False), 4, (4, 12)),
])
def test_total_work_is_the_same_for_any_tiling(name, params, steps, tilings):
    """Work counts what the physics does, not how it was cut: summed over tiles, every step's
    and phase's work is the one-tile run's, and it does not depend on timing (two workers)."""
    whole = work_by_step_and_phase(name, params, 1, steps)
    assert whole.min() > 0
    for ntiles in tilings:
        assert np.array_equal(work_by_step_and_phase(name, params, ntiles, steps, workers=2), whole), ntiles
