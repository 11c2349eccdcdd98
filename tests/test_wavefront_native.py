"""The wavefront on the native executor: its compiled phases and packers give the Python
executor's bits (arrival times, levels, states, image points, writes) and work, over uneven
tilings, workers and nodes, in runs cut anywhere; no phase or halo goes through Python; and a
run whose facets outgrow their room is redone with more, to the same bits."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import assert_same_state
from shoal.apps.wavefront import WavefrontApp
from shoal.apps.wavefront.kernels import NARROWBAND
from shoal.apps.wavefront.native import Room
from shoal.cluster import Cluster
from shoal.runtime import LocalExecutor
from shoal.runtime.native import NativeExecutor
from shoal.tiling import Tiling
from test_wavefront import SCENES, cuts

STEPS = {2: 20, 3: 12}  # the fronts are still on their way: halos of both kinds matter


def _run(executor, ndim: int, tiling_of, workers: int = 1, nodes: int = 1, steps=None):
    """The gathered state and the task rows (in (step, phase, tile) order) after runs of
    ``steps`` steps one after the other (all of the scene's at once by default)."""
    steps = steps or (STEPS[ndim],)
    app = WavefrontApp(SCENES[ndim], sum(steps))
    tiling = tiling_of(app)
    states = {t: app.init_tile(t, tiling) for t in range(tiling.ntiles)}
    first, rows = 0, []
    with executor(app, tiling, Cluster.uniform(nodes, workers), np.arange(tiling.ntiles) % nodes) as ex:
        for n in steps:
            result = ex.run(n, states=states, first_step=first)
            states, first = result.states, first + n
            t = result.tasks
            rows.append(np.stack([t["step"], t["phase"], t["tile"], t["work"]])[:, np.lexsort((t["tile"], t["phase"],
                                                                                             t["step"]))])
    return app.gather(states, tiling), np.concatenate(rows, axis=1)


@pytest.fixture(scope="module")
def python_runs():
    """Each scene on the Python executor, 2 x 2 (x 2) tiles: the bits every native run must give."""
    out = {}
    for ndim in SCENES:
        out[ndim] = _run(LocalExecutor, ndim, lambda app: Tiling.from_counts(app.grid, [2] * app.ndim, app.reach))
        assert (out[ndim][0]["state"] == NARROWBAND).any()
    return out


def _no_python(app: WavefrontApp) -> None:
    """Make every Python phase and packer of ``app`` fail: what runs must be compiled."""
    def refuse(*args, **kwargs):
        raise AssertionError("a wavefront phase or packer ran in Python")

    for phase in app.phases:
        setattr(app, phase.method, refuse)
        if phase.pack:
            setattr(app, phase.pack, refuse)


@pytest.mark.parametrize("ndim", [2, 3])
def test_every_phase_and_halo_runs_compiled_with_the_python_executors_bits_and_work(python_runs, ndim):
    app = WavefrontApp(SCENES[ndim], STEPS[ndim])
    tiling = Tiling.from_counts(app.grid, [2] * ndim, app.reach)
    native = app.native(tiling)
    assert set(native.kernels) == {p.name for p in app.phases} == {"front", "distances", "advance"}
    assert set(native.packers) == {p.name for p in app.phases if p.halo}
    _no_python(app)
    states = {t: app.init_tile(t, tiling) for t in range(tiling.ntiles)}
    with NativeExecutor(app, tiling, Cluster.uniform(2, 2), np.arange(tiling.ntiles) % 2) as ex:
        result = ex.run(STEPS[ndim], states=states)
    want, rows = python_runs[ndim]
    assert_same_state(want, app.gather(result.states, tiling))
    t = result.tasks
    order = np.lexsort((t["tile"], t["phase"], t["step"]))
    assert np.array_equal(t["work"][order], rows[3])
    assert all(len(s["band"]) == np.count_nonzero(s["state"][s["band"]] == NARROWBAND) for s in result.states.values())


@settings(max_examples=12, deadline=None)
@given(data=st.data(), ndim=st.sampled_from([2, 3]), workers=st.integers(1, 2), nodes=st.integers(1, 2),
       cut=st.integers(1, min(STEPS.values()) - 1))
def test_any_tiling_worker_count_and_runs_cut_anywhere_give_the_python_bits(python_runs, data, ndim, workers, nodes,
                                                                          cut):
    def tiling_of(app):
        return Tiling(app.grid, tuple(data.draw(cuts(n, app.reach)) for n in app.grid), app.reach)

    got, rows = _run(NativeExecutor, ndim, tiling_of, workers, nodes, steps=(cut, STEPS[ndim] - cut))
    want, py_rows = python_runs[ndim]
    assert_same_state(want, got)
    # the total work of each step and phase does not depend on the tiling
    totals = [np.bincount(r[0] * 3 + r[1], weights=r[3], minlength=3 * STEPS[ndim]) for r in (rows, py_rows)]
    assert np.array_equal(*totals)


def test_facets_that_outgrow_their_room_are_run_again_with_more(python_runs, monkeypatch, caplog):
    """Room for 32 facets per tile and 512 words per payload at first: runs redone with twice
    the room until they fit, and the same bits."""
    monkeypatch.setattr(Room, "own", lambda self, extents: 32 * self.factor)
    monkeypatch.setattr(Room, "sent", lambda self, slab: 512 * self.factor)
    with caplog.at_level("INFO", logger="shoal"):
        got, _ = _run(NativeExecutor, 3, lambda app: Tiling.from_counts(app.grid, [2, 2, 2], app.reach), workers=2)
    assert "outgrew their room" in caplog.text
    assert_same_state(python_runs[3][0], got)


def test_auto_runs_the_plan_only_on_request_while_its_staging_costs_more_than_it_saves():
    from shoal.runtime.native import compiles
    from shoal.runtime.team import Team

    app = WavefrontApp(SCENES[2], 3)
    tiling = app.decompose(4)
    assert app.native(tiling) is not None and not compiles(app, tiling)
    owner = np.zeros(tiling.ntiles, np.int64)
    team = Team()
    assert isinstance(team.executor(app, tiling, Cluster.uniform(1, 1), owner), LocalExecutor)
    assert isinstance(team.executor(app, tiling, Cluster.uniform(1, 1), owner, backend="native"), NativeExecutor)


def test_halo_staging_beyond_the_free_memory_is_one_line_before_anything_runs(monkeypatch):
    from shoal.errors import ShoalError
    from shoal.runtime.native import executor as native_executor

    app = WavefrontApp(SCENES[2], 3)
    tiling = app.decompose(4)
    monkeypatch.setattr(native_executor, "machine_memory", lambda: 1024)
    with NativeExecutor(app, tiling, Cluster.uniform(1, 1), np.zeros(tiling.ntiles, np.int64)) as ex:
        with pytest.raises(ShoalError, match=r"would stage .* GiB of halos for \d+ tiles, more than .* free"):
            ex.run(1)
