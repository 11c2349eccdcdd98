"""Water and beds users give the shallow-water app: an initial state from an .npz on one level's
cells (its depth or surface, its velocity) or from a Python callable, recorded in the run
folder by the callable's name and resumed from a checkpoint without it; and every bad input
(files of the wrong kind, shape or content, water placed outside the domain, sides without
their numbers) stops with one line before anything is written."""

from __future__ import annotations

import math
import tomllib

import numpy as np
import pytest

from shoal.apps import get_app
from shoal.apps.swe import analytic
from shoal.cli import main
from shoal.compare import compare_runs
from shoal.config import load_scenario
from shoal.errors import ShoalError
from shoal.session import run_scenario
from test_swe_physics import _advance, _centres, _fastest, _start

SPEC = get_app("swe")
G = 9.81
THACKER_1D = dict(setup="thacker-1d", blocks=[10, 1], block=4, extent=[4.0, 0.4], thacker=[0.5, 1.0, 0.5])


def _thacker_1d_water(x, y, b, t=0.0):
    """Thacker's trough at ``t`` (at 0: the thacker-1d setup's water, at rest), from Python."""
    h, u = analytic.thacker_1d(x, t, 2.0, 0.5, 1.0, 0.5)
    return h, u, 0.0


def _quarter(x, y, b):
    """Thacker's trough a quarter period on: the water at its fastest."""
    return _thacker_1d_water(x, y, b, analytic.thacker_period(0.5, 1.0) / 4)


# ----- water from Python ---------------------------------------------------------------------------
def test_a_callable_gives_the_same_state_as_the_setup_it_imitates():
    setup, _, states = _start(tiles=3, **THACKER_1D)
    mine, tiling, mine_states = _start(tiles=3, initial=_thacker_1d_water, **THACKER_1D)
    a, b = setup.gather(states, tiling), mine.gather(mine_states, tiling)
    assert (a["h"] == 0).any() and (a["h"] > 0).any()  # two shorelines
    for name in ("h", "hu", "hv", "b"):
        np.testing.assert_array_equal(a[name], b[name])
    assert mine.p.dry == setup.p.dry == 1e-10 * a["h"].max()  # of the deepest water


def test_a_callable_is_recorded_by_name_and_a_resumed_run_needs_only_its_checkpoint(tmp_path, capsys):
    sc = load_scenario("swe-thacker-1d")
    sc.params.initial = _thacker_1d_water
    full = run_scenario(sc, steps=12, tiles=5, checkpoint_every=8, set=["run.frame_every=0"], out=tmp_path / "full")
    config = tomllib.loads((full.path / "config.toml").read_text())
    assert config["app"]["initial"] == "python:test_swe_inputs._thacker_1d_water"
    plain = load_scenario("swe-thacker-1d")
    SPEC.build(plain.params, 1)
    assert config["app"]["dry"] == plain.params.dry > 0  # the dry depth the run resolved
    resumed = run_scenario(None, resume=full.path, out=tmp_path / "resumed")
    assert resumed.summary["resumed_from_step"] == 8 and compare_runs(full.path, resumed.path).identical
    # the same water straight from the setup: the same run
    plain = run_scenario("swe-thacker-1d", steps=12, tiles=5, set=["run.frame_every=0"], out=tmp_path / "plain")
    assert compare_runs(full.path, plain.path).identical
    # a fresh run from the recorded file has no callable: one line, nothing written
    out = tmp_path / "again"
    assert main(["run", str(full.path / "config.toml"), "--out", str(out)]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert len(err) == 1 and "was a Python callable" in err[0] and not out.exists()


@pytest.mark.parametrize("water, expected", [
    (lambda x, y, b: (x, x), "must return three values (h, u, v), got 2 values"),
    (lambda x, y, b: (-b, 0.0, 0.0), "returned a negative depth h"),
    (lambda x, y, b: (np.zeros(3), 0.0, 0.0), "returned h that is not numbers broadcasting to the cells' shape (4, 4)"),
    (lambda x, y, b: (np.full(x.shape, np.nan), 0.0, 0.0), "returned h not finite"),
    (lambda x, y, b: 1 / 0, "failed on root block (0, 0) at level 0: ZeroDivisionError"),
])
def test_a_callable_giving_bad_water_is_one_line_before_anything_is_written(water, expected, tmp_path):
    sc = load_scenario("swe-thacker-1d")
    sc.params.initial = water
    with pytest.raises(ShoalError) as err:
        run_scenario(sc, steps=2, tiles=2, out=tmp_path / "run")
    assert expected in str(err.value) and "\n" not in str(err.value)
    assert not (tmp_path / "run").exists()


# ----- water from a file ---------------------------------------------------------------------------
def test_an_npz_at_the_grids_cells_gives_the_same_state_as_the_callable(tmp_path):
    app, tiling, states = _start(tiles=2, initial=_quarter, **THACKER_1D)
    x, y = _centres(app)
    h, u, _ = _quarter(x, y, None)
    np.savez(tmp_path / "start.npz", h=h, u=u)
    mine, _, mine_states = _start(tiles=2, initial=str(tmp_path / "start.npz"), **THACKER_1D)
    a, b = app.gather(states, tiling), mine.gather(mine_states, tiling)
    assert (a["hu"] != 0).any()
    for name in ("h", "hu", "hv"):
        np.testing.assert_array_equal(a[name], b[name])


def test_a_surface_from_a_finer_level_reaches_coarser_blocks_with_its_volume_and_a_lake_at_rest(tmp_path):
    # eta = 0 over the rough lake's bed, given at level 1; blocks start at levels 0 and 1
    lake = dict(setup="lake-at-rest", blocks=[4, 4], block=8, extent=[400.0, 400.0], depth=5.0, roughness=1.0,
                max_level=1, threshold=1e9)
    np.savez(tmp_path / "eta.npz", eta=np.zeros((64, 64)))
    app, tiling, states = _start(8, tiles=3, levels=[[0, 1, 1, 0]] * 4, initial=str(tmp_path / "eta.npz"), **lake)
    g = app.gather(states, tiling)
    fine = app.uniform(g, 1)
    volume = app.totals(g)["mass"]
    exact = float(np.sum(0.0 - fine["b"])) * (app.p.dx0 / 2) ** 2
    # coarsening averages the surface over the mean bed: measured 0.0 for both
    assert abs(volume / exact - 1) <= 1e-14
    np.testing.assert_allclose(app.uniform(g, 0)["eta"], 0.0, atol=1e-14)
    states = _advance(app, tiling, states, 8)
    assert _fastest(app, states, tiling) <= 1e-12 * math.sqrt(G * 6.0)  # measured 1.1e-15 m/s


# ----- bad input ------------------------------------------------------------------------------------
def _one_line(capsys, scenario: str, assignment: str, out) -> str:
    code = main(["run", scenario, "--steps", "2", "--set", assignment, "--out", str(out)])
    err = [line for line in capsys.readouterr().err.strip().splitlines() if line.startswith("error:")]
    assert code == 2 and len(err) == 1 and not out.exists(), err
    return err[0]


@pytest.mark.parametrize("scenario, assignment, expected", [
    ("swe-radial-dam-break", "app.column=[2600.0,600.0,500.0,5.0]",
     "app.column [2600.0, 600.0, 500.0, 5.0] lies outside the domain [0, 2000] x [0, 2000] m"),
    ("swe-ritter", "app.dam=[1500.0,1.0]", "app.dam's x (1500 m) must lie inside the domain [0, 1000] x [0, 25] m"),
    ("swe-ritter", "app.dam=[500.0,1.0,0.5]", "Ritter's dam break is dry downstream"),
    ("swe-dam-break", "app.dam=[500.0,1.0,-0.5]", "app.dam's depths must be positive upstream and >= 0 downstream"),
    ("swe-tsunami", "app.uplift=[500000.0,100000.0,2.0,20000.0]", "app.uplift's centre (500000, 100000) lies more "
                                                                  "than two widths (20000 m) outside the domain"),
    ("swe-channel", "app.discharge=0.0", "app.discharge must be positive on every inflow side"),
    ("swe-channel", "app.side_depth=[0.0,-1.0,0.0,0.0]", "app.side_depth must be positive on every depth side"),
    ("swe-channel", "app.boundary=\"open\"",
     "app.boundary must be one of reflect, transmissive, outflow, inflow, depth"),
    ("swe-channel", "app.initial=\"start.txt\"", "app.initial must name an .npz file"),
    ("swe-channel", "app.initial=\"nowhere.npz\"", "app.initial 'nowhere.npz' does not exist"),
])
def test_bad_setups_and_sides_are_one_line(capsys, tmp_path, scenario, assignment, expected):
    assert expected in _one_line(capsys, scenario, assignment, tmp_path / "run")


def _bed_files(folder):
    """Bathymetry files that are not what app.bathymetry_file takes, with what the line says."""
    strings, packed, empty, text = (folder / name for name in ("strings.npy", "bed.npz", "empty.npy", "bed.txt"))
    np.save(strings, np.full((128, 128), "deep"))
    np.savez(packed, b=np.zeros((128, 128)))
    empty.write_bytes(b"")
    text.write_text("1 2 3\n4 5 6\n")
    return [(strings, "its array holds <U4 values, not real numbers"), (packed, "is an .npz archive"),
            (empty, "is empty"), (text, "is not a NumPy .npy file")]


def test_a_bathymetry_file_of_strings_an_npz_or_nothing_is_one_line(capsys, tmp_path):
    for path, expected in _bed_files(tmp_path):
        line = _one_line(capsys, "swe-lake-at-rest", f"app.bathymetry_file=\"{path}\"", tmp_path / "run")
        assert f"app.bathymetry_file '{path}'" in line or "app.bathymetry_file:" in line
        assert expected in line, line


def _water_files(folder):
    """Initial-state archives that are not what app.initial takes, with what the line says."""
    n = 100  # swe-channel's cells along x at level 0: 25 blocks of 4
    cases = {
        "one.npz": (None, "is one array (.npy)"),
        "none.npz": ({"u": np.zeros((n, 4))}, "must hold exactly one of h (the depth) and eta"),
        "both.npz": ({"h": np.ones((n, 4)), "eta": np.zeros((n, 4))}, "must hold exactly one of h"),
        "shape.npz": ({"h": np.ones((n, 8))}, "h has shape (100, 8); it must give one level's cell centres: one of "
                                              "(100, 4)"),
        "negative.npz": ({"h": -np.ones((n, 4))}, "h is negative somewhere"),
        "nan.npz": ({"h": np.full((n, 4), np.nan)}, "h holds values that are not finite"),
        "extra.npz": ({"h": np.ones((n, 4)), "w": np.ones((n, 4))}, "holds w; it may hold h or eta, u and v"),
        "mixed.npz": ({"h": np.ones((n, 4)), "u": np.ones((n // 2, 2))}, "u has shape (50, 2)"),
    }
    out = []
    for name, (arrays, expected) in cases.items():
        path = folder / name
        if arrays is None:
            with open(path, "wb") as f:
                np.save(f, np.ones((n, 4)))
        else:
            np.savez(path, **arrays)
        out.append((path, expected))
    return out


def test_an_initial_state_file_that_is_not_water_on_the_grid_is_one_line(capsys, tmp_path):
    for path, expected in _water_files(tmp_path):
        line = _one_line(capsys, "swe-channel", f"app.initial=\"{path}\"", tmp_path / "run")
        assert expected in line, line
