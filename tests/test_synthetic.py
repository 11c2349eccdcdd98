"""Physics and load-field checks of the synthetic app."""

import numpy as np
import pytest

from shoal.apps import get_app
from shoal.cluster import Cluster
from shoal.errors import ShoalError
from shoal.runtime import LocalExecutor
from shoal.tiling import Tiling


def make(steps=10, **kw):
    spec = get_app("synthetic")
    return spec.build(spec.params(**kw), steps)


def run(app, tiling, steps):
    with LocalExecutor(app, tiling, Cluster.uniform(2, 1), np.arange(tiling.ntiles) % 2) as executor:
        res = executor.run(steps)
    return res, app.gather(res.states, tiling)


@pytest.mark.parametrize("grid", [(32, 24), (12, 10, 8)])
def test_zero_flux_diffusion_conserves_total_heat(grid):
    app = make(grid=list(grid), work_per_cell=0.0, base_work=0.0)
    tiling = Tiling.from_count(grid, 4)
    before = app.gather({t: app.init_tile(t, tiling) for t in range(tiling.ntiles)}, tiling)["u"]
    _, after = run(app, tiling, 25)
    assert after["u"].sum() == pytest.approx(before.sum(), rel=1e-13)
    assert np.ptp(after["u"]) < np.ptp(before)  # and smooths the field


def test_diffusion_step_matches_a_direct_numpy_stencil():
    grid = (20, 16)
    app = make(grid=list(grid), work_per_cell=0.0, base_work=0.0, diffusivity=0.2)
    tiling = Tiling.from_count(grid, 6)
    u0 = app.gather({t: app.init_tile(t, tiling) for t in range(tiling.ntiles)}, tiling)["u"]
    _, got = run(app, tiling, 1)
    p = np.pad(u0, 1, mode="edge")  # zero-flux walls
    lap = p[:-2, 1:-1] + p[2:, 1:-1] + p[1:-1, :-2] + p[1:-1, 2:] - 4 * u0
    assert np.allclose(got["u"], u0 + 0.2 * lap, rtol=0, atol=1e-14)


def test_hot_spot_travels_with_its_velocity():
    app = make(grid=[64, 64], sigma=0.05, start=[0.25, 0.25], velocity=[2.0, 1.0])
    peak0 = np.unravel_index(np.argmax(app.load_map(0)), (64, 64))
    peak10 = np.unravel_index(np.argmax(app.load_map(10)), (64, 64))
    assert (peak10[0] - peak0[0], peak10[1] - peak0[1]) == (20, 10)
    # It wraps around the periodic domain.
    assert np.unravel_index(np.argmax(app.load_map(40)), (64, 64))[0] == (peak0[0] + 80) % 64


def test_ramp_follows_the_two_rank_workload_of_the_invasive_paper():
    steps = 10
    app = make(steps=steps, grid=[32, 8], load="ramp", work_per_cell=100.0, base_work=0.0, ramp_exponent=1.0)
    tiling = Tiling.from_counts((32, 8), (2, 1))  # tile 0 = left half (rank 0), tile 1 = right half
    res, _ = run(app, tiling, steps)
    work = res.tasks["work"].reshape(steps, 2, 2)[:, 0, :]  # burn phase, per tile
    cells = 16 * 8
    t = np.arange(steps)
    assert np.array_equal(work[:, 0], cells * np.floor(100 * (steps - t) / steps + 0.5).astype(int))
    assert np.array_equal(work[:, 1], cells * np.floor(100 * t / steps + 0.5).astype(int))


def test_measured_cost_follows_the_work():
    app = make(grid=[64, 64], work_per_cell=3000.0, base_work=0.0, sigma=0.05, velocity=[0.0, 0.0],
               start=[0.25, 0.25])
    tiling = Tiling.from_counts((64, 64), (2, 2))
    app.prepare(tiling)  # kernels loaded before timing
    res, _ = run(app, tiling, 4)
    t = res.tasks
    burn = t["phase"] == 0
    hot = t["tile"][burn] == 0
    # The tile under the hot spot costs far more than the others.
    assert np.median(t["cost"][burn][hot]) > 5 * np.median(t["cost"][burn][~hot])


@pytest.mark.parametrize("field, value, match", [
    ("grid", [0, 4], "grid"), ("load", "wave", "load"), ("sigma", 0.0, "sigma"),
    ("diffusivity", 0.3, "diffusivity"), ("work_per_cell", -1.0, "work"),
])
def test_bad_parameters_are_clear_errors(field, value, match):
    with pytest.raises(ShoalError, match=match):
        make(**{field: value})
