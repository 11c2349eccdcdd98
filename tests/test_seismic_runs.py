"""Seismic runs end to end: the same bits for any tiling, placement, worker and rank count and
with zero skipping on or off; the trace sees Ondes3D's spatial imbalance (absorbing layers cost
more) and temporal imbalance (tiles the wave has not reached cost nothing while skipping); bad
input is one line, and a run that goes unstable names the step and the tile."""

from __future__ import annotations

import functools
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import uneven_cuts
from shoal.apps import get_app
from shoal.cli import main
from shoal.cluster import Cluster
from shoal.compare import compare_runs
from shoal.errors import ShoalError
from shoal.runtime import LocalExecutor
from shoal.session import open_run, run_scenario
from shoal.tiling import Tiling

# 24 x 20 x 14 cells of 100 m, a C-PML 4 cells thick, the source off centre, a free surface
SMALL = ["app.cells=[24,20,14]", "app.spacing=100.0", "app.scale=1.0", "app.absorbing=4", "app.f0=6.0",
         "app.t0=0.2", "app.source_at=[900.0,1100.0,600.0]", "app.receivers=[[1500.0,1000.0,0.0]]",
         "run.frame_every=0", "app.points_per_wavelength=2"]  # a short wave, for bits not waveforms
STEPS = 24


def _run(tmp, name="run", tiles=1, nodes=1, workers=1, placement="sfc", period=0, extra=()):
    return run_scenario("seismic-halfspace", steps=STEPS, tiles=tiles, nodes=nodes, workers=workers,
                        placement=placement, period=period, set=[*SMALL, *extra], out=tmp / name)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """One tile on one worker."""
    return _run(tmp_path_factory.mktemp("seismic"), "one-tile")


@pytest.mark.parametrize("tiles, nodes, workers, placement, period, extra", [
    (12, 2, 1, "greedy", 4, ()),
    (20, 1, 2, "birdshot", 0, ()),
    (6, 1, 1, "sfc", 0, ("app.skip_zero=false",)),
])
def test_the_state_is_bitwise_the_same_for_any_tiling_placement_and_skipping(reference, tmp_path, tiles, nodes,
                                                                           workers, placement, period, extra):
    run = _run(tmp_path, tiles=tiles, nodes=nodes, workers=workers, placement=placement, period=period, extra=extra)
    cmp = compare_runs(reference.path, run.path)
    assert cmp.identical, cmp.max_abs_diff
    assert np.abs(reference.state()["vz"]).max() > 0  # the wave is there


_SPEC = get_app("seismic")
_TINY = _SPEC.params(cells=[20, 14, 12], spacing=100.0, absorbing=3, f0=6.0, t0=0.2, source_at=[700.0, 800.0, 500.0],
                     receivers=[[1200.0, 700.0, 0.0]], points_per_wavelength=2.0)


def _in_process(params, tiling, steps=12):
    app = _SPEC.build(params, steps)
    states = {t: app.init_tile(t, tiling) for t in range(tiling.ntiles)}
    with LocalExecutor(app, tiling, Cluster.uniform(1, 1), np.zeros(tiling.ntiles, int)) as ex:
        return app.gather(ex.run(steps, states=states).states, tiling)


@functools.cache
def _tiny_reference():
    return _in_process(_TINY, Tiling.from_count((20, 14), 1))


@settings(max_examples=8, deadline=None)
@given(data=st.data(), skip=st.booleans())
def test_any_uneven_column_tiling_and_skipping_give_the_same_bits(data, skip):
    tiling = Tiling((20, 14), (uneven_cuts(data.draw, 20), uneven_cuts(data.draw, 14)))
    params = _SPEC.params(**{**_TINY.__dict__, "skip_zero": skip})
    got = _in_process(params, tiling)
    for name, ref in _tiny_reference().items():  # bit for bit: signed zeros count
        assert np.array_equal(np.atleast_1d(ref).view(np.uint8), np.atleast_1d(got[name]).view(np.uint8)), name


def test_halos_go_to_face_neighbours_only_four_per_interior_tile_and_halo_phase():
    """The stencils read no diagonal cell: every message of a run goes between face neighbours,
    none is empty, and an interior column receives 4 per halo phase and step."""
    app = _SPEC.build(_TINY, 3)
    tiling = Tiling.from_counts(app.grid, (4, 3))
    with LocalExecutor(app, tiling, Cluster.uniform(1, 2), np.zeros(tiling.ntiles, int)) as ex:
        m = ex.run(3).messages
    faces = sorted((int(s), t) for t in range(tiling.ntiles) for s in tiling.face_neighbours[t])
    interior = [t for t in range(tiling.ntiles)
                if all(0 < i < c - 1 for i, c in zip(tiling.tile_index(t), tiling.counts, strict=True))]
    for step in range(3):
        for k, phase in enumerate(app.phases):
            rows = (m["step"] == step) & (m["phase"] == k)
            if not phase.halo:
                assert not rows.any()
                continue
            assert sorted(zip(m["src"][rows].tolist(), m["dst"][rows].tolist(), strict=True)) == faces
            assert (np.bincount(m["dst"][rows], minlength=tiling.ntiles)[interior] == 4).all()
    assert [p.name for p in app.phases if p.halo] == ["intermediates", "velocity"] and interior
    assert (m["bytes"] > 0).all()


@pytest.mark.mpi(ranks=(2,))
def test_mpi_ranks_give_the_same_bits(ranks, reference, mpirun, tmp_path):
    args = ["run", "seismic-halfspace", "--steps", str(STEPS), "--tiles", "9", "--placement", "refine",
            "--period", "5", "--out", tmp_path / "mpi"]
    for s in SMALL:
        args += ["--set", s]
    mpirun(ranks, *args)
    cmp = compare_runs(reference.path, tmp_path / "mpi")
    assert cmp.identical, cmp.max_abs_diff
    assert open_run(tmp_path / "mpi").summary["ranks"] == ranks


# ----- resuming with another step count -------------------------------------------------------
RESUMED = 150  # past two doublings of the seismograms' first room (64 samples)


@pytest.fixture(scope="module")
def checkpointed(tmp_path_factory):
    """A run of STEPS steps with checkpoints every 10, and one of RESUMED steps that never stopped."""
    base = tmp_path_factory.mktemp("seismic-resume")
    kw = dict(tiles=4, nodes=1, workers=1, placement="sfc", period=0, set=SMALL)
    short = run_scenario("seismic-halfspace", steps=STEPS, checkpoint_every=10, out=base / "short", **kw)
    whole = run_scenario("seismic-halfspace", steps=RESUMED, out=base / "whole", **kw)
    return short, whole


def test_a_run_resumed_with_more_steps_records_every_sample_and_matches_one_that_never_stopped(checkpointed,
                                                                                              tmp_path):
    short, whole = checkpointed
    resumed = run_scenario(None, resume=short.path, steps=RESUMED, out=tmp_path / "resumed")
    assert resumed.summary["resumed_from_step"] == 20
    cmp = compare_runs(whole.path, resumed.path)
    assert cmp.identical, cmp.max_abs_diff
    seis = resumed.state()["seismograms"]
    assert seis.shape == (1, RESUMED + 1, 3) and np.isfinite(seis).all()
    assert np.abs(seis[0, -50:, 2]).max() > 0  # the late samples are the wave's, not a placeholder


@pytest.mark.mpi(ranks=(2,))
def test_a_run_resumed_with_more_steps_under_mpi_matches_one_that_never_stopped(ranks, checkpointed, mpirun,
                                                                               tmp_path):
    short, whole = checkpointed
    mpirun(ranks, "run", "--resume", short.path, "--steps", str(RESUMED), "--nodes", "2", "--out", tmp_path / "mpi")
    cmp = compare_runs(whole.path, tmp_path / "mpi")
    assert cmp.identical, cmp.max_abs_diff
    assert open_run(tmp_path / "mpi").state()["seismograms"].shape == (1, RESUMED + 1, 3)


def test_seismograms_grow_with_the_run_not_with_the_planned_steps():
    """A tile's seismograms hold what was recorded (the first room, then doublings), whatever
    the run plans: ten million planned steps take no more than ten."""
    params = _SPEC.params(**{**_TINY.__dict__})
    tiling = Tiling.from_count((20, 14), 1)
    for planned in (10, 10**7):
        state = _SPEC.build(params, planned).init_tile(0, tiling)
        assert state["seis"].shape == (3, 64)
    got = _in_process(params, tiling, steps=130)
    assert got["seismograms"].shape == (1, 131, 3) and np.isfinite(got["seismograms"]).all()


def _work(run, phase):
    t = run.trace.tasks
    mine = t["phase"] == run.trace.phases.index(phase)
    return t, mine


def test_the_trace_sees_the_absorbing_layers_and_the_wave_front(tmp_path):
    skip = _run(tmp_path, "skip", tiles=16)
    full = _run(tmp_path, "full", tiles=16, extra=("app.skip_zero=false",))
    tiling = Tiling.from_count((24, 20), 16)
    # computing everything: a tile's intermediates are its C-PML cells (every tile touches the
    # bottom layer), and its stress update costs more where side layers add their terms
    t, mine = _work(full, "intermediates")
    first = mine & (t["step"] == 0)
    per_tile = np.bincount(t["tile"][first], weights=t["work"][first], minlength=16)
    cells = np.array([np.prod([hi - lo for lo, hi in tiling.bounds(k)]) for k in range(16)]) * 14
    assert (per_tile > 0).all()
    inner = [k for k in range(16)
             if all(4 <= lo and hi <= n - 4 for (lo, hi), n in zip(tiling.bounds(k), (24, 20), strict=True))]
    outer = [k for k in range(16) if k not in inner]
    assert inner and (per_tile[inner] / cells[inner]).max() < (per_tile[outer] / cells[outer]).min()
    # skipping: the work per step grows as the wave spreads from the source's blocks
    t, mine = _work(skip, "stress")
    per_step = np.bincount(t["step"][mine], weights=t["work"][mine])
    t_full, mine_full = _work(full, "stress")
    everything = np.bincount(t_full["step"][mine_full], weights=t_full["work"][mine_full])
    assert per_step[0] < 0.25 * everything[0]
    assert np.all(np.diff(per_step) >= 0) and per_step[-1] > 2 * per_step[0]


def test_a_two_dimensional_run_is_the_same_for_any_tiling(tmp_path):
    small2d = ["app.cells=[60,24]", "app.spacing=25.0", "app.absorbing=5", "app.source_at=[700.0,200.0]",
               "app.receivers=[[1000.0,0.0]]", "run.frame_every=0"]
    runs = [run_scenario("seismic-layered-2d", steps=30, tiles=tiles, nodes=1, workers=workers, placement="sfc",
                         period=0, set=small2d, out=tmp_path / f"r{tiles}") for tiles, workers in ((1, 1), (7, 2))]
    cmp = compare_runs(runs[0].path, runs[1].path)
    assert cmp.identical, cmp.max_abs_diff
    state = runs[0].state()
    assert state["vz"].shape == (60, 1, 24) and np.abs(state["vx"]).max() > 0


# ----- bad input and runs that go wrong -------------------------------------------------------
@pytest.mark.parametrize("assignment, expected", [
    ("app.layers=[[0.0,6000.0,5300.0,2700.0]]", "an S speed of at least sqrt(3)/2 of its P speed"),
    ("app.layers=[[0.0,6000.0,3464.0,-2700.0]]", "a negative or zero density"),
    ("app.layers=[[0.0,6000.0,3464.0,2700.0],[100.0,5600.0,3200.0,2600.0]]", ""),  # fine: two layers
    # 3464 / (2.5 x 8 Hz x 100 m) = 1.73; 5 needs f0 <= 3464 / (5 x 2.5 x 100) = 2.77 Hz
    ("app.f0=8.0", "app.f0 = 8 Hz is too high for cells of 100 m: the ricker wavelet reaches 20 Hz (2.5 f0), where "
                   "the slowest wave (S, 3464 m/s at depth 0 m) spans 1.73 grid points per wavelength and the "
                   "order-4 scheme needs 5: use app.f0 <= 2.77 Hz"),
    ("app.order=2", "spans 5.54 grid points per wavelength and the order-2 scheme needs 10"),
    ("app.points_per_wavelength=-1.0", "app.dt, app.t0 and app.points_per_wavelength must be >= 0"),
    ("app.absorbing=12", "app.absorbing (12 cells) leaves no interior along x: the domain has 24 cells"),
    ("app.source_at=[20000.0,6000.0,2000.0]", "app.source_at [20000.0, 6000.0, 2000.0] is outside the domain"),
    ("app.dt=0.05", "above the stability (CFL) limit"),
    ("app.order=3", "app.order must be one of 2, 4"),
    ("app.wavelet=\"sinc\"", "app.wavelet must be one of ricker, gaussian, dgaussian"),
    ("app.receivers=[[1.0,2.0]]", "app.receivers entry must be 3 numbers"),
    ("app.gradients=[[0.1,0.1]]", "app.gradients entry must be 3 numbers"),
])
def test_bad_seismic_input_is_one_line(capsys, tmp_path, assignment, expected):
    out = tmp_path / "run"
    code = main(["run", "seismic-halfspace", "--steps", "2", "--set", "app.cells=[24,20,14]", "--set",
                 "app.absorbing=4", "--set", "app.source_at=[900.0,1100.0,600.0]", "--set", "app.receivers=[]",
                 "--set", assignment, "--out", str(out)])
    err = [line for line in capsys.readouterr().err.strip().splitlines() if line.startswith("error:")]
    if not expected:
        assert code == 0 and not err, err
        return
    assert code == 2 and len(err) == 1 and expected in err[0], err
    assert not out.exists()


def test_a_wavefield_that_stops_being_finite_stops_the_run_naming_step_and_tile():
    spec = get_app("seismic")
    app = spec.build(spec.params(**spec.tiny), 30)
    tiling = Tiling.from_count(app.grid, 4)
    states = {t: app.init_tile(t, tiling) for t in range(tiling.ntiles)}
    states[2]["v"][1, 3, 3, 5] = np.inf  # as if the scheme had blown up there
    with pytest.raises(ShoalError) as err, \
            LocalExecutor(app, tiling, Cluster.uniform(1, 1), np.zeros(tiling.ntiles, int)) as ex:
        ex.run(30, states=states)
    text = str(err.value)
    # checked every 10 steps: by then the infinity has spread, and the first tile to check names it
    assert re.match(r"step 9, phase velocity, tile \d+: the wavefield is no longer finite \(unstable\)", text), text
