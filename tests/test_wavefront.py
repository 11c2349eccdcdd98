"""Lassen's wavefront: arrival times against the exact ones, every node reached once, work only
in the band, the same bits for any tiling, placement, worker and rank count, and bad input in
one line."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import assert_same_state
from shoal.apps.wavefront import WavefrontApp, WavefrontParams
from shoal.apps.wavefront.kernels import NARROWBAND, REACHED, UNSET
from shoal.cli import main
from shoal.cluster import Cluster
from shoal.compare import compare_runs
from shoal.errors import ShoalError
from shoal.placement import get_policy
from shoal.runtime import LocalExecutor, Simulation
from shoal.runtime.app import StepContext
from shoal.session import open_run, run_scenario
from shoal.tiling import Tiling


def serial(params: WavefrontParams) -> tuple[WavefrontApp, dict, list[int]]:
    """Lassen's serial driver: one tile, iterations until the sources are spent and the band is
    empty; the app, its gathered state and the band's size per iteration."""
    app = WavefrontApp(params, 1)
    tiling = Tiling.from_count(app.grid, 1, app.reach)
    state = app.init_tile(0, tiling)
    reduced, band = {}, []
    for it in range(10_000):
        app.front(0, state, {}, StepContext(it, reduced), tiling)
        _, value = app.distances(0, state, {}, StepContext(it, reduced), tiling)
        reduced = {"distances": value}
        app.advance(0, state, {}, StepContext(it, reduced), tiling)
        band.append(value[1])
        if state["fired"].all() and not len(state["band"]):
            break
    return app, app.gather({0: state}, tiling), band


def errors_in_zones(app, gathered) -> np.ndarray:
    return np.abs(gathered["arrival"] - app.exact()).ravel() * app.v / app.h


@pytest.mark.parametrize("params", [
    WavefrontParams(cells=[48, 40], extent=[1.2, 1.0], sources=[[0.3, 0.45, 0.0]]),
    WavefrontParams(cells=[40, 40], sources=[[0.2, 0.3, 0.0], [0.8, 0.6, 0.15]], speed=2.0),
    WavefrontParams(cells=[20, 20, 20], extent=[1.0] * 3, origin=[0.0] * 3, sources=[[0.4, 0.5, 0.55, 0.0]]),
    WavefrontParams(cells=[20, 18, 16], extent=[1.0, 0.9, 0.8], origin=[0.0] * 3,
                    sources=[[0.1, 0.1, 0.1, 0.0], [0.9, 0.8, 0.7, 0.1]]),
], ids=["2d-one", "2d-two-delayed", "3d-one", "3d-two-delayed"])
def test_arrival_is_the_distance_over_the_speed_within_lassens_accuracy(params):
    """T = min_i (delay_i + |x - c_i| / v): mean error at most 0.4 of a zone's crossing time,
    the largest at most 1.1 (the reference code's own accuracy); every node reached, once."""
    app, g, _ = serial(params)
    err = errors_in_zones(app, g)
    assert err.mean() <= 0.4 and err.max() <= 1.1, (err.mean(), err.max())
    assert (g["state"] == REACHED).all() and (g["arrival"] < UNSET).all()
    if len(app.delays) == 1:  # one source seeds each node at most once: one write per node
        assert int(g["writes"]) == g["arrival"].size


def test_the_band_holds_the_front_not_the_grid():
    """Twice the zones per side: about twice the band nodes per iteration in 2D (the front's
    length), not four times (the grid's area), and a small part of the grid at any time."""
    means = []
    for n in (32, 64):
        app, g, band = serial(WavefrontParams(cells=[n, n], sources=[[0.5, 0.5, 0.0]]))
        means.append(np.mean(band))
    assert max(band) < 0.2 * g["arrival"].size
    assert 1.5 < means[1] / means[0] < 2.6, means


def test_tiles_the_front_is_far_from_do_no_work():
    app = WavefrontApp(WavefrontParams(cells=[40, 40], sources=[[0.1, 0.1, 0.0]]), 12)
    tiling = Tiling.from_counts(app.grid, (4, 4), app.reach)
    cluster = Cluster.uniform(1, 1)
    with LocalExecutor(app, tiling, cluster, get_policy("sfc").place(tiling, cluster, 0)) as ex:
        tasks = ex.run(12).tasks
    work = np.bincount(tasks["tile"], weights=tasks["work"], minlength=tiling.ntiles)
    near = [t for t in range(tiling.ntiles) if tiling.lo[t].max() < 20]
    assert work[near].sum() > 0 and work[[t for t in range(tiling.ntiles) if t not in near]].sum() == 0


def work_by_step_and_phase(app, tiling, steps: int) -> np.ndarray:
    cluster = Cluster.uniform(min(2, tiling.ntiles), 1)
    with LocalExecutor(app, tiling, cluster, get_policy("birdshot").place(tiling, cluster, 3)) as ex:
        t = ex.run(steps).tasks
    total = np.zeros((steps, len(app.phases)), np.int64)
    np.add.at(total, (t["step"], t["phase"]), t["work"])
    return total


def test_total_work_is_the_same_for_any_tiling():
    """Band and nearby nodes are counted by their owners: the totals per step and phase do not
    depend on the cut."""
    app = WavefrontApp(WavefrontParams(cells=[30, 30], sources=[[0.3, 0.6, 0.0]]), 40)
    whole = work_by_step_and_phase(app, Tiling.from_count(app.grid, 1, app.reach), 40)
    assert whole[10:].min() > 0
    assert np.array_equal(work_by_step_and_phase(app, Tiling.from_counts(app.grid, (3, 2), app.reach), 40), whole)


@st.composite
def cuts(draw, n: int, reach: int) -> np.ndarray:
    """Tile edges along an axis of ``n`` zones, every tile at least ``reach`` wide."""
    edges = [0]
    while n - edges[-1] >= 2 * reach:
        edges.append(draw(st.integers(edges[-1] + reach, n - reach)))
    return np.array([*edges, n], np.int64)


SCENES = {2: WavefrontParams(cells=[30, 26], extent=[1.5, 1.3], scene="plane", spacing=6, plane=1.3, radius=1.5),
          3: WavefrontParams(cells=[14, 13, 12], extent=[0.7, 0.65, 0.6], origin=[0.0] * 3, scene="plane",
                             spacing=5, plane=0.9, radius=1.5)}
STEPS = 60


@pytest.fixture(scope="module")
def whole():
    """Each scene run to its end on one tile."""
    out = {}
    for ndim, params in SCENES.items():
        app = WavefrontApp(params, STEPS)
        sim = Simulation(app, Tiling.from_count(app.grid, 1, app.reach), Cluster.uniform(1, 1), np.zeros(1, int))
        sim.run(STEPS)
        out[ndim] = sim.gather()
        sim.close()
        assert int(out[ndim]["band"]) == 0 and (out[ndim]["state"] == REACHED).all()
    return out


@settings(max_examples=8, deadline=None)
@given(data=st.data(), ndim=st.sampled_from([2, 3]), workers=st.integers(1, 2), nodes=st.integers(1, 3),
       seed=st.integers(0, 99))
def test_any_tiling_placement_and_worker_count_gives_the_same_bits(whole, data, ndim, workers, nodes, seed):
    app = WavefrontApp(SCENES[ndim], STEPS)
    tiling = Tiling(app.grid, tuple(data.draw(cuts(n, app.reach)) for n in app.grid), app.reach)
    cluster = Cluster.uniform(nodes, workers)
    sim = Simulation(app, tiling, cluster, get_policy("birdshot").place(tiling, cluster, seed))
    sim.run(STEPS)
    assert_same_state(whole[ndim], sim.gather())
    sim.close()


@pytest.mark.parametrize("assignment, expected", [
    ("app.sources=[[1.5,0.5,0.0]]", "lies outside the domain"),
    ("app.sources=[[0.5,0.5,-0.1]]", "delay must be >= 0 s"),
    ("app.speed=0.0", "app.speed must be positive"),
    ("app.speed=-1.0", "app.speed must be positive"),
    ("app.radius=0.0", "app.radius must be a positive"),
    ("app.cells=[64,32]", "zones must be square"),
])
def test_bad_wavefront_input_is_one_line(capsys, tmp_path, assignment, expected):
    out = tmp_path / "run"
    code = main(["run", "wavefront-point", "--steps", "2", "--set", assignment, "--out", str(out)])
    err = [line for line in capsys.readouterr().err.strip().splitlines() if line.startswith("error:")]
    assert code == 2 and len(err) == 1 and expected in err[0], err
    assert not out.exists()


def test_tiles_narrower_than_the_facets_reach_are_refused():
    app = WavefrontApp(WavefrontParams(cells=[20, 20]), 1)
    with pytest.raises(ShoalError, match="tiles must be at least 5 zones wide"):
        app.check_tiling(Tiling.from_counts(app.grid, (5, 1)))
    assert min(np.diff(app.decompose(64).edges[0]).min(), np.diff(app.decompose(64).edges[1]).min()) >= 5


SHRUNK = ["app.cells=[30,30]", "run.frame_every=0"]


@pytest.mark.mpi(ranks=(2,))
def test_two_ranks_give_the_one_process_bits(ranks, mpirun, tmp_path):
    """The native executor on 2 ranks (its compiled phases, packers batched per rank pair) and
    the Python one in one process."""
    one = run_scenario("wavefront-point", steps=40, tiles=9, nodes=1, workers=1, set=SHRUNK, executor="python",
                       out=tmp_path / "one")
    args = ["run", "wavefront-point", "--steps", "40", "--tiles", "9", "--placement", "birdshot", "--executor",
            "native", "--out", tmp_path / "mpi"]
    for s in SHRUNK:
        args += ["--set", s]
    mpirun(ranks, *args)
    cmp = compare_runs(one.path, tmp_path / "mpi")
    assert cmp.identical, cmp.max_abs_diff
    assert (one.state()["state"] == NARROWBAND).any()  # the front is still on its way: halos mattered
    assert one.summary["executor"] == "python" and open_run(tmp_path / "mpi").summary["executor"] == "native"
