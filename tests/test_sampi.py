"""The SAMPI workflow on a tiny seismic scenario: aggregation matches a real coarse run's work,
the sweep covers every (balancer, period, tiles per core) cell, the command writes its files."""

import json

import numpy as np
import pytest

from shoal.cli import main
from shoal.errors import ShoalError
from shoal.replay.run import coarsening_for
from shoal.sampi import (
    BALANCERS,
    Workflow,
    balancer_sweep,
    check_aggregation,
    column_shape,
    level_traces,
    per_tile_step,
    record,
    sweep_grid,
)
from shoal.trace import Trace, aggregate

# 50 x 35 x 13 cells of 4 km: a load study, 1 point per S wavelength (the waveform does not matter)
TINY = ["app.scale=0.1", "app.absorbing=4", "app.points_per_wavelength=1"]
STEPS = 12


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Fine (10 x 5) and coarse (5 x 5) traces, with and without zero-skipping."""
    base = tmp_path_factory.mktemp("sampi")
    out = {}
    for skip in ("true", "false"):
        sets = [*TINY, f"app.skip_zero={skip}"]
        out[skip] = {name: record("seismic-ligurian", shape, sets, STEPS, base / f"{name}-{skip}").trace
                     for name, shape in (("fine", (5, 7)), ("coarse", (10, 7)))}
    return out


def test_aggregated_work_equals_the_coarse_runs_without_skipping(runs):
    fine, coarse = runs["false"]["fine"], runs["false"]["coarse"]
    check = check_aggregation(fine, coarse)
    assert check["work_equal"] and check["work_excess"] == 0.0
    agg = per_tile_step(aggregate(fine, coarse.tiling), "work")
    assert np.array_equal(agg, per_tile_step(coarse, "work"))
    # Every cell is updated every step: work is the same in every step.
    assert np.all(agg == agg[0])


def test_skipping_changes_the_coarse_work_only_by_the_blocks_the_fine_cuts_split(runs):
    """Skipping goes by blocks of 8 x 8 columns; a fine cut through a block makes its halves wake
    one by one, while the coarse run wakes it whole: per tile and step the two differ either way,
    in total by a few percent here (7.3%), never beyond the work without skipping."""
    fine, coarse = runs["true"]["fine"], runs["true"]["coarse"]
    agg, real = per_tile_step(aggregate(fine, coarse.tiling), "work"), per_tile_step(coarse, "work")
    full = per_tile_step(runs["false"]["coarse"], "work")
    assert np.all(real <= full) and np.all(agg <= full)
    check = check_aggregation(fine, coarse)
    assert not check["work_equal"] and abs(check["work_excess"]) < 0.15
    assert np.all(np.abs(real.sum(axis=1) - agg.sum(axis=1)) <= 0.15 * full.sum(axis=1))
    # Tiles the wave has not reached do nothing in both.
    assert ((real == 0) & (agg == 0)).any()
    assert agg.sum() < full.sum()  # the wave had not reached everything: skipping saved work


def test_sweep_has_every_cell(runs, tmp_path):
    fine = runs["true"]["fine"]
    wf = Workflow("seismic-ligurian", periods=[2, 4], tiles_per_core=[1, 2], nodes=4, jobs=1)
    levels = level_traces(fine, [1, 2], 4, tmp_path)
    for tpc, path in levels.items():  # step 2: a nested coarser trace per level, the same work
        level = Trace.read(path)
        assert level.tiling.counts == coarsening_for(fine.tiling, 4 * tpc).counts
        assert level.tasks["work"].sum() == fine.tasks["work"].sum()
        fine.tiling.fine_to_coarse(level.tiling)
    grid = sweep_grid(balancer_sweep(levels, wf))
    expected = {("sfc", 0, t) for t in (1, 2)} | {(b, p, t) for b in BALANCERS[1:] for p in (2, 4) for t in (1, 2)}
    assert set(grid) == expected
    assert all(v > 0 for v in grid.values())


def test_fine_tiles_must_cut_the_grid_into_whole_columns():
    assert column_shape("seismic-ligurian", TINY, (10, 5)) == [5, 7]
    with pytest.raises(ShoalError, match="do not cut"):
        column_shape("seismic-ligurian", TINY, (8, 8))


def test_the_command_writes_its_tables_and_figures(tmp_path, capsys):
    out = tmp_path / "sampi"
    args = ["sampi", "seismic-ligurian", *[a for s in TINY for a in ("--set", s)], "--steps", "6", "--fine", "10x5",
            "--coarse", "5x5", "--nodes", "4", "--tiles-per-core", "1,2", "--periods", "2,4",
            "--fig6-tiles-per-core", "2", "--fig6-period", "2", "--jobs", "1", "--out", str(out)]
    assert main(args) == 0
    names = {p.name for p in out.iterdir()}
    assert {"results.md", "results.json", "fig3-aggregation.png", "fig7-period-and-decomposition.png",
            "fig6-average-load.png", "fig6-heatmap-none.png", "fig6-heatmap-GreedyLB.png",
            "fig6-heatmap-RefineLB.png"} <= names
    result = json.loads((out / "results.json").read_text())
    assert len(result["sweep"]) == 2 * (1 + 2 * 2)
    assert set(result["ranking"]["order"]) == {"none", "GreedyLB", "RefineLB"}
    assert "Figure 7" in capsys.readouterr().out


# A workflow that runs (as in the test above), each case changing one thing.
GOOD = ["seismic-ligurian", *[a for s in TINY for a in ("--set", s)], "--fine", "10x5", "--coarse", "5x5", "--nodes",
        "4", "--tiles-per-core", "1,2", "--periods", "2,4", "--fig6-tiles-per-core", "2", "--fig6-period", "2"]


@pytest.mark.parametrize("args, match", [
    (["--fine", "3"], "expected NXxNY (e.g. 16x48), got '3'"),
    (["--fig6-period", "15"], "Figure 6's 2 tiles per core and period 15 must be among the sweep's"),
    (["--fig6-tiles-per-core", "4"], "Figure 6's 4 tiles per core and period 2 must be among the sweep's"),
    (["--coarse", "3x5"], "--coarse 3x5 must divide --fine 10x5 along each axis"),
    (["--fine", "8x8", "--coarse", "4x4"], "8 x 8 tiles of whole, equal columns do not cut the 50 x 35 columns"),
    (["--set", "app.nope=1"], "unknown key 'app.nope'"),
    (["--skip-zero", "both", "--set", "app.nope=1"], "unknown key 'app.nope'"),
    (["--tiles-per-core", "0,1", "--fig6-tiles-per-core", "1"], "--tiles-per-core 0: must be at least 1"),
    (["--periods", "2,-4"], "--periods -4: must be at least 1"),
    (["--nodes", "0"], "--nodes 0: must be at least 1"),
    (["--cores", "0"], "--cores 0: must be at least 1"),
    (["--jobs", "-1"], "--jobs -1: must be at least 1"),
    (["--repeats", "0"], "--repeats 0: must be at least 1"),
    (["--steps", "0"], "--steps 0: must be at least 1"),
    (["--nodes", "100"], "2 tiles per core on 100 x 1 cores need 200 tiles; the fine run has 10 x 5 = 50"),
])
def test_bad_input_is_one_line_and_exit_2_before_the_output_folder_is_made(args, match, tmp_path, capsys):
    out = tmp_path / "x"
    assert main(["sampi", *GOOD, *args, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and match in err[0], err
    assert not out.exists()


@pytest.mark.parametrize("scenario, app", [("synthetic-hotspot", "synthetic"), ("swe-ritter", "swe"),
                                           ("sph-dam-break", "sph2d")])
def test_a_scenario_whose_tiles_are_not_seismic_columns_is_refused(scenario, app, tmp_path, capsys):
    out = tmp_path / "x"
    assert main(["sampi", scenario, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: shoal sampi tiles x-y columns of a seismic scenario; {scenario!r} is a {app} one"]
    assert not out.exists()
