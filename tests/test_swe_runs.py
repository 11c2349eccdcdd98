"""Shallow-water runs end to end: refinement is a property of the physics alone (the same bits
for any tiling, placement, worker count, balancer and rank count), the trace sees the work
move, bad input is one line, and a run that goes wrong names the step, the tile and the cell."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import assert_same_state
from shoal.apps import get_app
from shoal.apps.swe.regrid import average4
from shoal.cli import main
from shoal.cluster import Cluster
from shoal.compare import compare_runs
from shoal.config import load_scenario
from shoal.errors import ShoalError
from shoal.runtime import LocalExecutor
from shoal.runtime.app import StepContext
from shoal.session import open_run, run_scenario
from shoal.tiling import Tiling

# 16 x 16 root blocks of 4 cells, levels 0-2, second order: regrids every 2 steps
ADAPTIVE = ["app.blocks=[16,16]", "app.block=4", "app.extent=[640.0,640.0]", "app.column=[250.0,250.0,90.0,3.0]",
            "app.max_level=2", "app.order=2", "app.solver=fwave", "app.regrid_every=2", "app.threshold=0.02",
            "run.frame_every=0"]
STEPS = 14


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """One tile on one worker."""
    out = tmp_path_factory.mktemp("swe") / "one-tile"
    return run_scenario("swe-radial-dam-break", steps=STEPS, tiles=1, nodes=1, workers=1, placement="sfc", period=0,
                        set=ADAPTIVE, out=out)


@pytest.mark.parametrize("tiles, nodes, workers, placement, period", [
    (256, 2, 2, "birdshot", 0),
    (64, 4, 1, "greedy", 3),
    (12, 1, 2, "sfc", 0),
    (30, 2, 1, "refine", 4),
])
def test_the_state_is_bitwise_the_same_for_any_tiling_and_placement(reference, tmp_path, tiles, nodes, workers,
                                                                    placement, period):
    run = run_scenario("swe-radial-dam-break", steps=STEPS, tiles=tiles, nodes=nodes, workers=workers,
                       placement=placement, period=period, set=ADAPTIVE, out=tmp_path / "run")
    cmp = compare_runs(reference.path, run.path)
    assert cmp.identical, cmp.max_abs_diff
    if placement == "greedy":  # the work moves with the wave: a dynamic balancer moves tiles after it
        assert run.trace.balance["moved"].sum() > 0


# water entering at the west and south sides and held at the east and north while blocks refine
# where it rises; and Thacker's lake refining where its shoreline moves
SIDES = ["app.blocks=[8,8]", "app.block=4", "app.extent=[25.0,25.0]",
         "app.boundary=[\"inflow\",\"depth\",\"inflow\",\"depth\"]", "app.discharge=[4.42,0.0,2.0,0.0]",
         "app.side_depth=[0.0,2.0,0.0,1.9]", "app.max_level=1", "app.threshold=0.01", "app.regrid_every=2",
         "run.frame_every=0"]
SHORE = ["app.blocks=[10,10]", "app.block=4", "app.max_level=1", "app.threshold=0.0", "app.shore=true",
         "app.regrid_every=2", "run.frame_every=0"]


@pytest.mark.parametrize("scenario, assignments", [("swe-channel", SIDES), ("swe-oscillating-lake", SHORE)],
                         ids=["sides", "shore"])
def test_sides_and_shoreline_refinement_give_the_same_bits_for_any_tiling(tmp_path, scenario, assignments):
    one = run_scenario(scenario, steps=STEPS, tiles=1, nodes=1, workers=1, placement="sfc", period=0, set=assignments,
                       out=tmp_path / "one")
    levels = one.state()["level"]
    assert 0 < (levels == 1).sum() < len(levels)  # some blocks refined, some not
    for tiles, nodes, workers, placement, period in [(64, 2, 2, "birdshot", 0), (10, 2, 1, "greedy", 3)]:
        run = run_scenario(scenario, steps=STEPS, tiles=tiles, nodes=nodes, workers=workers, placement=placement,
                           period=period, set=assignments, out=tmp_path / f"{tiles}")
        cmp = compare_runs(one.path, run.path)
        assert cmp.identical, cmp.max_abs_diff


def _app_of(run):
    """The app a run folder's resolved scenario builds."""
    sc = load_scenario(str(run.path / "config.toml"))
    return get_app(sc.app).build(sc.params, sc.run.steps)


def test_blocks_refine_where_the_wave_is_and_the_trace_sees_the_work_move(reference):
    app = _app_of(reference)
    final = reference.state()
    start = app.initial_levels.reshape(-1)
    assert start.max() == 2 and final["level"].max() == 2
    assert not np.array_equal(start, final["level"])  # the ring moved out: blocks changed level
    trace = reference.trace
    t = trace.tasks
    stage1 = t["phase"] == trace.phases.index("stage1")
    per_step = np.bincount(t["step"][stage1], weights=t["work"][stage1])
    # the cells updated each step are the blocks' cells at their levels, whatever the tiling
    assert per_step[0] == ((4 * 2**start) ** 2).sum()
    assert per_step[-1] == ((4 * 2 ** final["level"]) ** 2).sum()
    assert len(np.unique(per_step)) > 1  # the work changes as blocks refine and coarsen


def test_per_tile_work_follows_the_refinement(tmp_path):
    run = run_scenario("swe-radial-dam-break", steps=STEPS, tiles=16, nodes=2, workers=1, placement="sfc", period=0,
                       set=ADAPTIVE, out=tmp_path / "run")
    trace = run.trace
    t = trace.tasks
    first = (t["phase"] == trace.phases.index("stage1")) & (t["step"] == 0)
    # the column sits in the lower-left quarter: its tiles do most of the first step's work
    work = np.zeros(16)
    work[t["tile"][first]] = t["work"][first]
    tiling = Tiling.from_count((16, 16), 16)
    lower_left = [k for k in range(16) if tiling.lo[k][0] < 8 and tiling.lo[k][1] < 8]
    assert work[lower_left].sum() > 0.5 * work.sum()


def test_halos_go_to_face_neighbours_only_four_per_interior_tile_and_halo_phase():
    """No phase reads a diagonal tile: every message of a run goes between face neighbours,
    none is empty, and an interior tile receives 4 per halo phase that exchanges (the stages
    every step, the balance rounds on regrid steps)."""
    spec = get_app("swe")
    app = spec.build(spec.params(**spec.tiny), 4)  # order 2, one balance round, regrids every 2 steps
    tiling = Tiling.from_counts(app.grid, (3, 3))
    with LocalExecutor(app, tiling, Cluster.uniform(1, 2), np.zeros(tiling.ntiles, int)) as ex:
        m = ex.run(4).messages
    faces = sorted((int(s), t) for t in range(tiling.ntiles) for s in tiling.face_neighbours[t])
    exchanged = []
    for step in range(4):
        for k, phase in enumerate(app.phases):
            rows = (m["step"] == step) & (m["phase"] == k)
            if not (phase.halo and app.halo_wanted(phase, step)):
                assert not rows.any()
                continue
            assert sorted(zip(m["src"][rows].tolist(), m["dst"][rows].tolist(), strict=True)) == faces
            assert np.bincount(m["dst"][rows], minlength=tiling.ntiles)[4] == 4  # the middle tile
            exchanged.append(phase.name)
    assert exchanged == ["stage1", "stage2", "stage1", "stage2", "balance_1"] * 2  # steps 0-3
    assert (m["bytes"] > 0).all()


@pytest.mark.mpi(ranks=(3,))  # (2 ranks: natively, in test_mpi_native)
def test_mpi_ranks_give_the_same_bits(ranks, reference, mpirun, tmp_path):
    args = ["run", "swe-radial-dam-break", "--steps", str(STEPS), "--tiles", "24", "--placement", "greedy",
            "--period", "4", "--out", tmp_path / "mpi"]
    for s in ADAPTIVE:
        args += ["--set", s]
    mpirun(ranks, *args)
    cmp = compare_runs(reference.path, tmp_path / "mpi")
    assert cmp.identical, cmp.max_abs_diff
    assert open_run(tmp_path / "mpi").summary["ranks"] == ranks


# ----- bad input and runs that go wrong -------------------------------------------------------
@pytest.mark.parametrize("assignment, expected", [
    ("app.depth=-1.0", "app.depth must be >= 0 (negative depth)"),
    ("app.max_level=-1", "app.max_level (-1) is below app.min_level (0)"),
    ("app.threshold=\"high\"", "app.threshold expects float"),
    ("app.threshold=nan", "app.threshold must be a finite number"),
    ("app.cfl=0.9", "app.cfl must be in (0, 0.45]"),
    ("app.solver=\"roe\"", "app.solver must be one of fwave, rusanov"),
    ("app.boundary=[\"reflect\",\"outflow\"]", "app.boundary must be one kind or four"),
    ("app.column=[1.0,2.0,-3.0,1.0]", "app.column needs a positive radius"),
    ("app.block=5", "app.block must be an even number"),
    ("app.extent=[1000.0,500.0]", "cells must be square"),
])
def test_bad_shallow_water_input_is_one_line(capsys, tmp_path, assignment, expected):
    out = tmp_path / "run"
    code = main(["run", "swe-radial-dam-break", "--steps", "2", "--set", assignment, "--out", str(out)])
    err = [line for line in capsys.readouterr().err.strip().splitlines() if line.startswith("error:")]
    assert code == 2 and len(err) == 1 and expected in err[0], err
    assert not out.exists()


def test_a_bathymetry_file_of_the_wrong_shape_is_one_line(capsys, tmp_path):
    bed = tmp_path / "bed.npy"
    np.save(bed, np.zeros((100, 100)))
    out = tmp_path / "run"
    code = main(["run", "swe-lake-at-rest", "--steps", "2", "--set", f"app.bathymetry_file=\"{bed}\"",
                 "--out", str(out)])
    err = [line for line in capsys.readouterr().err.strip().splitlines() if line.startswith("error:")]
    assert code == 2 and len(err) == 1 and "has shape (100, 100)" in err[0] and "(128, 128)" in err[0], err
    assert not out.exists()


def test_a_bathymetry_file_replaces_the_bed_and_keeps_the_lake_at_rest(tmp_path):
    spec = get_app("swe")
    params = spec.params(setup="lake-at-rest", blocks=[4, 4], block=8, extent=[320.0, 320.0], depth=3.0,
                         max_level=1)
    x = (np.arange(64) + 0.5) * 5.0  # level 1 cell centres
    bed = -3.0 + 2.0 * np.sin(x[:, None] / 40.0) * np.cos(x[None, :] / 55.0)
    np.save(tmp_path / "bed.npy", bed)
    params.bathymetry_file = str(tmp_path / "bed.npy")
    app = spec.build(params, 10)
    g = app.gather(*_run(app, 4, 10))
    # every block sits at level 0: the bed is the file's, averaged 2 x 2
    assert g["level"].max() == 0
    np.testing.assert_array_equal(app.uniform(g, 0)["b"], average4(bed))
    speed = np.hypot(g["hu"], g["hv"]) / np.maximum(g["h"], 1e-300)
    assert speed.max() <= 1e-12 * np.sqrt(9.81 * 5.0)  # deepest water: 5 m


def _run(app, ntiles, steps):
    tiling = Tiling.from_count(app.grid, ntiles)
    states = {t: app.init_tile(t, tiling) for t in range(tiling.ntiles)}
    with LocalExecutor(app, tiling, Cluster.uniform(1, 1), np.zeros(tiling.ntiles, int)) as ex:
        res = ex.run(steps, states=states)
    return res.states, tiling


def test_a_negative_or_nan_depth_stops_the_run_naming_step_tile_and_cell():
    spec = get_app("swe")
    app = spec.build(spec.params(**spec.tiny), 4)
    tiling = Tiling.from_count(app.grid, 6)
    states = {t: app.init_tile(t, tiling) for t in range(tiling.ntiles)}
    n = app.p.block * 2 ** int(states[4]["lev"][1])
    m = n + 4
    start = int(((app.p.block * 2 ** states[4]["lev"][:1] + 4) ** 2).sum())  # block 1 of tile 4
    states[4]["h"][start + 3 * m + 5] = np.nan  # cell (1, 3) of that block
    with pytest.raises(ShoalError) as err, \
            LocalExecutor(app, tiling, Cluster.uniform(1, 1), np.zeros(tiling.ntiles, int)) as ex:
        ex.run(4, states=states)
    text = str(err.value)
    assert "step 0" in text and "tile 4" in text and "depth negative or not finite" in text
    bx, by = app._topology(tiling, 4).coords[1]
    # the first cell the NaN reached in scan order: the poisoned one's west neighbour
    assert f"cell (0, 3) of root block ({bx}, {by}) at level" in text


def test_a_courant_number_above_one_stops_the_run():
    spec = get_app("swe")
    app = spec.build(spec.params(**spec.tiny), 4)
    tiling = Tiling.from_count(app.grid, 1)
    state = app.init_tile(0, tiling)
    _, dt = app.cfl(0, state, {}, StepContext(0), tiling)  # dt = cfl / the fastest (|u| + |v| + 2c) / dx
    with pytest.raises(ShoalError, match=r"Courant number .* > 1 .* fastest now at cell \(\d+, \d+\) of root block"):
        app.stage1(0, state, {}, StepContext(3, {"cfl": 4 * dt / app.p.cfl}), tiling)


def test_a_step_of_a_single_worker_run_equals_one_of_many_tiles():
    """The executor's halos and in-tile neighbours feed a block the same ghosts."""
    spec = get_app("swe")
    app = spec.build(spec.params(**spec.tiny), 6)
    one, t1 = _run(app, 1, 6)
    many, t2 = _run(app, 27, 6)
    assert_same_state(app.gather(one, t1), app.gather(many, t2))
