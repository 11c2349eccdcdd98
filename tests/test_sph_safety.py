"""SPH is never silently wrong: every particle kept for any tiling at any accepted time step (or
the run stops with one line naming the particle), inputs that mean nothing refused, sizes
estimated before anything is allocated."""

import math
import re

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from shoal.apps import get_app
from shoal.apps.particles import CellGrid, check_arrivals, check_moves, locate
from shoal.apps.sph.fluidanimate3d import CFL_REFUSAL_FACTOR, DOMAIN_MAX, DOMAIN_MIN, cfl_time_step
from shoal.cluster import Cluster
from shoal.errors import ShoalError
from shoal.placement import get_policy
from shoal.runtime import LocalExecutor
from shoal.tiling import Tiling

SPH3D, SPH2D = get_app("sph3d"), get_app("sph2d")
TINY3D = dict(particles=600)
TINY2D = dict(dx=0.05, tank=[1.0, 0.6], fluid=[[0.0, 0.0, 0.25, 0.5]])


def run(spec, params, counts, steps):
    """The gathered state after ``steps`` steps on a tiling of ``counts`` tiles per axis (or
    the ShoalError that stopped the run)."""
    app = spec.build(spec.params(**params), steps)
    tiling = Tiling.from_counts(app.grid, counts)
    cluster = Cluster.uniform(1, 1)
    try:
        res = LocalExecutor(app, tiling, cluster, get_policy("sfc").place(tiling, cluster, 0)).run(steps)
    except ShoalError as err:
        return err
    return app.gather(res.states, tiling)


def stop_step(err: ShoalError) -> int:
    return int(re.match(r"step (\d+),", str(err)).group(1))


def assert_same_or_both_stopped(one, many):
    """Identical with every particle, or both stopped (and no tiling stopped before one tile)."""
    if isinstance(one, ShoalError):
        assert isinstance(many, ShoalError), "one tile stopped, the tiled run went on"
        assert "\n" not in str(many) and re.search(r"particle \d+ (moved|left)", str(many)), str(many)
        assert stop_step(many) >= stop_step(one)
        return
    assert not isinstance(many, ShoalError), str(many)
    assert np.array_equal(np.sort(many["id"]), np.sort(one["id"]))  # every particle kept
    for name in one:
        assert many[name].tobytes() == one[name].tobytes(), name


def tile_counts(grid):
    return st.tuples(*[st.integers(1, n) for n in grid])


GRID3D = SPH3D.build(SPH3D.params(**TINY3D), 1).grid


@settings(max_examples=8, deadline=None)
@given(st.floats(-1.0, math.log10(CFL_REFUSAL_FACTOR)), tile_counts(GRID3D))
@example(0.0, (2, 3, 2))  # at the CFL estimate: runs on
@example(1.0, (1, 2, 1))  # at the refusal bound: stops
def test_3d_any_accepted_time_step_and_tiling_keeps_every_particle_as_one_tile(log_factor, counts):
    params = SPH3D.params(**TINY3D)
    dt = 10**log_factor * cfl_time_step(params.rest_particles_per_metre())
    kw = dict(TINY3D, time_step=dt)
    assert_same_or_both_stopped(run(SPH3D, kw, (1, 1, 1), 8), run(SPH3D, kw, counts, 8))


@settings(max_examples=5, deadline=None)
@given(st.floats(0.05, 0.5), st.integers(1, 3), tile_counts(SPH2D.build(SPH2D.params(**TINY2D), 1).grid))
def test_2d_any_cfl_and_tiling_keeps_every_particle_as_one_tile(cfl, halo_every, counts):
    kw = dict(TINY2D, cfl=cfl)
    one = run(SPH2D, kw, (1, 1), 12)
    assert_same_or_both_stopped(one, run(SPH2D, kw, counts, 12))
    assert not isinstance(one, ShoalError) and int(one["deleted"]) == 0
    lazy = run(SPH2D, dict(kw, halo_every=halo_every), counts, 12)  # stale halos, but no particle lost
    assert np.array_equal(np.sort(lazy["id"]), np.sort(one["id"]))


def test_the_time_step_that_lost_particles_now_stops_every_tiling_at_the_same_step():
    """time_step = 0.01 s on 8,112 particles (5.5 times the CFL estimate): 16 tiles kept 1,168
    of them and one tile all, with speeds of 1e32 m/s. Now both stop at step 0, naming one."""
    kw = dict(particles=8112, time_step=0.01)
    one, many = run(SPH3D, kw, (1, 1, 1), 3), run(SPH3D, kw, (2, 4, 2), 3)
    assert isinstance(one, ShoalError) and isinstance(many, ShoalError)
    assert stop_step(one) == stop_step(many) == 0
    assert "lower app.time_step (now 0.01 s; CFL estimate" in str(many)


def write_fluid(path, x, rppm=204.0, count=None):
    n = len(x) if count is None else count
    data = np.concatenate([x, np.zeros_like(x), np.zeros_like(x)], axis=1).astype("<f4")
    path.write_bytes(np.float32(rppm).tobytes() + np.int32(n).tobytes() + data.tobytes())
    return str(path)


def fluid_block(n, lo, hi, seed=0):
    return np.random.default_rng(seed).uniform(lo, hi, (n, 3))


def test_a_fluid_file_poking_through_the_walls_by_under_a_cell_runs_identically_on_any_tiling(tmp_path):
    """What PARSEC's inputs do (in_35K: up to 0.8 h beyond the walls): within one cell the
    particle sits in the edge cell and the wall pushes it back."""
    h = 1.695 / 204.0
    x = fluid_block(1500, DOMAIN_MIN - 0.5 * h, [DOMAIN_MAX[0] + 0.5 * h, -0.04, DOMAIN_MAX[2] + 0.5 * h])
    kw = dict(input=write_fluid(tmp_path / "poke.fluid", x))
    one = run(SPH3D, kw, (1, 1, 1), 6)
    assert_same_or_both_stopped(one, run(SPH3D, kw, (3, 4, 3), 6))
    assert len(one["id"]) == 1500 and np.all(one["x"] >= DOMAIN_MIN) and np.all(one["x"] <= DOMAIN_MAX)


# ----- refused inputs: one line naming what is wrong -------------------------------------------
def header_only(path, n, rppm=204.0):
    path.write_bytes(np.float32(rppm).tobytes() + np.int32(n).tobytes() + b"\0" * 36)
    return str(path)


FLUID_CASES = {
    "above the tank": (lambda p: write_fluid(p, fluid_block(50, [-0.05, 0.15, -0.05], [0.05, 0.2, 0.05])),
                       r"50 particles start outside the cell grid, e\.g\. particle 0 at"),
    "billions claimed": (lambda p: header_only(p, 2_000_000_000), "claims 2000000000 particles"),
    "more than the size holds": (lambda p: header_only(p, 5),
                                 "claims 5 particles, which take 188 bytes, and it has 44"),
    "not finite": (lambda p: write_fluid(p, np.array([[0.0, 0.0, 0.0], [np.nan, 0.0, 0.0]])),
                   "particle 1 has a position or velocity that is not finite"),
    "zero resolution": (lambda p: write_fluid(p, np.zeros((2, 3)), rppm=0.0), "rest particles per metre is 0"),
}


@pytest.mark.parametrize("case", list(FLUID_CASES))
def test_bad_fluid_files_are_refused_in_one_line_before_allocating(tmp_path, case):
    make, message = FLUID_CASES[case]
    path = make(tmp_path / "bad.fluid")
    with pytest.raises(ShoalError, match=message) as err:
        SPH3D.build(SPH3D.params(input=path), 1)
    assert "\n" not in str(err.value)


BAD_3D = [
    (dict(time_step=float("nan")), "app.time_step must be a positive finite number"),
    (dict(time_step=float("inf")), "app.time_step must be a positive finite number"),
    (dict(time_step=0.0), "app.time_step must be a positive finite number"),
    (dict(time_step=-0.001), "app.time_step must be a positive finite number"),
    (dict(time_step=1.0), r"app.time_step = 1 s is 1.28e\+03 times the CFL estimate 0.000781 s .* at most 10 times"),
    (dict(particles=0), "app.particles must be an integer >= 8"),
    (dict(particles=2.5), "app.particles must be an integer >= 8"),
    (dict(column=[-0.06, -0.08, 0.0, 0.04]), "app.column must be 6 finite numbers"),
    (dict(column=[-0.06, -0.08, -0.06, 0.0, float("nan"), 0.06]), "app.column must be 6 finite numbers"),
    (dict(column=[-0.06, -0.08, -0.06, 0.0, 0.5, 0.06]), "app.column must be x0 y0 z0 x1 y1 z1 inside the tank"),
]

BAD_2D = [
    (dict(dx=float("nan")), "app.dx must be a finite number"),
    (dict(dx=float("inf")), "app.dx must be a finite number"),
    (dict(dx=0.0), "app.dx must be positive"),
    (dict(dx=-0.02), "app.dx must be positive"),
    (dict(dx=5.0), r"app.dx = 5.0 m must be smaller than the tank"),
    (dict(h_factor=0.0), "app.h_factor must be positive"),
    (dict(rho0=-1000.0), "app.rho0 must be positive"),
    (dict(gamma=0.0), "app.gamma must be positive"),
    (dict(c0_factor=float("nan")), "app.c0_factor must be a finite number"),
    (dict(alpha=-0.1), "app.alpha must be >= 0"),
    (dict(cfl=0.9), r"app.cfl must be in \(0, 0.5\]"),
    (dict(tank=[4.0]), "app.tank must be two finite numbers"),
    (dict(tank=[4.0, 2.4, 1.0]), "app.tank must be two finite numbers"),
    (dict(gravity=[0.0, -9.81, 0.0]), "app.gravity must be two finite numbers"),
    (dict(gravity=[float("nan"), -9.81]), "app.gravity must be two finite numbers"),
    (dict(fluid=[[0.0, 0.0, 1.0]]), "every app.fluid entry needs 4 finite numbers"),
    (dict(fluid=[[0.0, 0.0, 1.0, float("inf")]]), "every app.fluid entry needs 4 finite numbers"),
    (dict(fluid=[[0.0, 0.0, 9.0, 1.0]]), "every app.fluid block x0 y0 x1 y1 must be non-empty and inside the tank"),
    (dict(fluid=[[0.5, 0.0, 0.2, 1.0]]), "every app.fluid block x0 y0 x1 y1 must be non-empty and inside the tank"),
    (dict(fluid=[]), "app.fluid needs at least one block"),
    (dict(cylinders=[[1.0, 1.0, 0.0]]), "every app.cylinders entry needs a radius > 0"),
    (dict(lines=[[1.0, 1.0, 1.0, 1.0]]), "every app.lines entry needs two distinct ends"),
    (dict(lines=[[1.0, 1.0, 9.0, 1.0]]), r"initial particles lie outside the cell grid .* wall particle"),
    (dict(fluid=[[0.0, 0.0, 0.01, 0.01]]), "app.fluid holds no particle at app.dx"),
    (dict(wall_layers=0), "app.wall_layers must be an integer >= 1"),
    (dict(halo_every=1.5), "app.halo_every must be an integer >= 1"),
    (dict(layout="channel", inflow_velocity=0.0), "a channel needs app.inflow_velocity > 0"),
]


@pytest.mark.parametrize("spec, overrides, message", [
    pytest.param(spec, kw, m, id=f"{spec.name}-{kw}") for spec, cases in ((SPH3D, BAD_3D), (SPH2D, BAD_2D))
    for kw, m in cases])
def test_parameters_that_mean_nothing_are_refused_in_one_line(spec, overrides, message):
    with pytest.raises(ShoalError, match=message) as err:
        spec.build(spec.params(**overrides), 1)
    assert "\n" not in str(err.value)


def test_fluidanimates_1_ms_step_is_accepted_for_every_parsec_input_and_the_scenario():
    """The refusal bound leaves fluidanimate's 1 ms for the four PARSEC inputs (their rest
    particles per metre: 204, 292, 392, 425) and the built-in 100,000-particle column."""
    for rppm in (204.0, 292.0, 392.0, 425.0):
        assert 0.001 <= CFL_REFUSAL_FACTOR * cfl_time_step(rppm)
    assert 0.001 > cfl_time_step(425.0)  # in_100K's 1 ms is above its own estimate: the bound is not tight
    SPH3D.params(particles=100_000, time_step=0.001).validate()


# ----- sizes before allocation --------------------------------------------------------------
@pytest.mark.parametrize("spec, params", [
    (SPH2D, dict(TINY2D)),
    (SPH2D, dict(dx=0.04, layout="channel", tank=[2.0, 0.8], fluid=[[0.0, 0.0, 2.0, 0.8]],
                 cylinders=[[0.7, 0.4, 0.12]], lines=[[1.2, 0.2, 1.5, 0.5]], gravity=[0.0, 0.0],
                 inflow_velocity=1.0)),
    (SPH2D, dict(dx=0.02)),
    (SPH3D, dict(particles=3000)),
])
def test_the_particle_count_estimate_is_close_to_what_the_app_builds(spec, params):
    p = spec.params(**params)
    built = spec.build(p, 1).initial_count()
    assert p.particle_count() == pytest.approx(built, rel=0.1)
    assert spec.memory(p) >= 300 * built  # hundreds of bytes a particle: fields, the initial copy, kernels


def test_absurd_sizes_are_estimated_without_allocating(tmp_path):
    assert SPH2D.memory(SPH2D.params(dx=1e-7)) > 1e16  # tens of PB: refused by the run's check
    path = header_only(tmp_path / "claim.fluid", 3)
    with pytest.raises(ShoalError, match="claims 3 particles"):
        SPH3D.memory(SPH3D.params(input=path))


# ----- the two guards on their own ------------------------------------------------------------
def test_check_moves_names_the_smallest_id_that_jumped_a_cell_or_left_the_world():
    grid = CellGrid(np.zeros(2), np.array([6.0, 4.0]), 1.0)
    p = locate({"id": np.array([7, 3, 5]), "x": np.array([[0.5, 0.5], [2.5, 2.5], [4.5, 0.5]])}, grid)
    before = p["cell"]
    p["x"] = p["x"] + [[1.0, 1.0], [1.0, -1.0], [0.0, 0.0]]  # one cell along each axis: fine
    check_moves(before, locate(p, grid), grid, "lower it")
    p["x"][0, 0] += 1.0
    p["x"][2, 0] += 2.0
    with pytest.raises(ShoalError, match=r"^particle 5 moved from cell \(4, 0\) to \(6, 0\) in one step.*lower it$"):
        check_moves(before, locate(p, grid), grid, "lower it")
    p["x"][2, 0] = 4.5
    p["x"][1] = [2.5, -1.5]  # more than a cell below the grid
    with pytest.raises(ShoalError, match=r"^particle 3 left the world \(at \(2.5, -1.5\) m"):
        check_moves(before, locate(p, grid), grid, "lower it")


def test_check_arrivals_stops_a_migrant_that_no_neighbour_holds():
    tiling = Tiling.from_counts((9, 3), (3, 1))  # three tiles of three cells along x
    grid = CellGrid(np.zeros(2), np.array([9.0, 3.0]), 1.0)
    p = locate({"id": np.array([1, 2]), "x": np.array([[3.5, 1.5], [7.5, 1.5]])}, grid)  # in tiles 1 and 2
    check_arrivals(p, np.array([True, False]), Tiling.from_counts((9, 3), (3, 1)), 0, "do less")  # tile 1 neighbours 0
    with pytest.raises(ShoalError, match=r"^particle 2 moved to cell \(7, 1\), past every neighbouring tile.*do less$"):
        check_arrivals(p, np.array([False, True]), tiling, 0, "do less")
