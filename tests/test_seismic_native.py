"""The seismic app on the native executor: its compiled phases give the Python executor's bits
(wavefields, seismograms, signed zeros), its work and its messages, for 2D and 3D runs, any
tiling and worker count, skipping on or off, a source of either kind; runs resumed with more
steps than the samples had room for; and a wavefield that stops being finite stops the run
with one line naming step, phase and tile."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import uneven_cuts
from shoal.apps import get_app
from shoal.cluster import Cluster
from shoal.errors import ShoalError
from shoal.runtime import LocalExecutor
from shoal.runtime.native import NativeExecutor
from shoal.tiling import Tiling

SPEC = get_app("seismic")
# 3D: 20 x 14 x 12 cells (float32, 16 padded levels), a C-PML 3 cells thick, a receiver
TINY = dict(cells=[20, 14, 12], spacing=100.0, absorbing=3, f0=6.0, t0=0.2, source_at=[700.0, 800.0, 500.0],
            receivers=[[1200.0, 700.0, 0.0], [300.0, 300.0, 400.0]], points_per_wavelength=2.0)
# 2D (the x-z plane): 40 x 12 cells in float64, two receivers
FLAT = dict(cells=[40, 12], spacing=100.0, absorbing=4, f0=6.0, t0=0.2, source_at=[1500.0, 500.0], dtype="float64",
            receivers=[[800.0, 0.0], [2600.0, 300.0]], points_per_wavelength=2.0)
STEPS = 24


def _run(executor, params: dict, tiling: Tiling, workers: int = 1, nodes: int = 1, steps=(STEPS,)):
    """The gathered state after runs of ``steps`` steps one after the other, and the last result."""
    app = SPEC.build(SPEC.params(**params), sum(steps))
    states = {t: app.init_tile(t, tiling) for t in range(tiling.ntiles)}
    owner = np.arange(tiling.ntiles) % nodes
    first = 0
    with executor(app, tiling, Cluster.uniform(nodes, workers), owner) as ex:
        for n in steps:
            result = ex.run(n, states=states, first_step=first)
            states, first = result.states, first + n
    return app.gather(states, tiling), result


def _same_bits(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for name in a:  # bit for bit: signed zeros and NaN placeholders count
        x, y = np.atleast_1d(a[name]), np.atleast_1d(b[name])
        assert x.shape == y.shape and np.array_equal(x.view(np.uint8), y.view(np.uint8)), name


@pytest.mark.parametrize("params, counts, nodes, workers", [
    (TINY, (1, 1), 1, 1),
    (TINY, (2, 2), 1, 2),
    (TINY, (5, 3), 2, 2),
    (TINY, (10, 7), 1, 3),
    (FLAT, (1, 1), 1, 1),
    (FLAT, (4, 1), 1, 2),
    (FLAT, (20, 1), 2, 2),
])
def test_native_runs_give_the_python_executors_bits_work_and_messages(params, counts, nodes, workers):
    tiling = Tiling.from_counts(SPEC.build(SPEC.params(**params), STEPS).grid, counts)
    want, py = _run(LocalExecutor, params, tiling)
    got, nat = _run(NativeExecutor, params, tiling, workers=workers, nodes=nodes)
    _same_bits(want, got)
    assert np.abs(want["vz"]).max() > 0 and np.isfinite(want["seismograms"]).all()
    key = lambda t: np.lexsort((t["tile"], t["phase"], t["step"]))  # noqa: E731
    assert np.array_equal(py.tasks["work"][key(py.tasks)], nat.tasks["work"][key(nat.tasks)])
    order = lambda m: np.lexsort((m["dst"], m["src"], m["phase"], m["step"]))  # noqa: E731
    for column in ("step", "phase", "src", "dst", "bytes"):
        assert np.array_equal(py.messages[column][order(py.messages)], nat.messages[column][order(nat.messages)])


@settings(max_examples=12, deadline=None)
@given(data=st.data(), skip=st.booleans(), workers=st.integers(1, 3), explosion=st.booleans())
def test_any_uneven_tiling_worker_count_skipping_and_source_give_the_same_bits(data, skip, workers, explosion):
    params = {**TINY, "skip_zero": skip, "source": "explosion" if explosion else "force",
              "top": data.draw(st.sampled_from(["free", "absorbing"]))}
    tiling = Tiling((20, 14), (uneven_cuts(data.draw, 20), uneven_cuts(data.draw, 14)))
    _same_bits(_run(LocalExecutor, params, tiling)[0], _run(NativeExecutor, params, tiling, workers=workers)[0])


def test_runs_one_after_another_past_the_samples_first_room_give_one_runs_bits():
    """Three native runs (the seismograms' room made before each, past 64 samples) give the
    bits of one Python run, and the states carry the step count between them."""
    tiling = Tiling.from_counts((40, 1), (4, 1))
    want, _ = _run(LocalExecutor, FLAT, tiling, steps=(100,))
    got, _ = _run(NativeExecutor, FLAT, tiling, workers=2, steps=(30, 50, 20))
    _same_bits(want, got)
    assert got["seismograms"].shape == (2, 101, 3)


def test_a_float32_column_of_odd_depth_runs_its_phases_in_python_with_the_same_bits():
    """A copy plan moves whole float64 words: 13 + 4 float32 levels are not, so the app leaves
    its phases to the trampoline, and the run is still the Python executor's."""
    params = {**TINY, "cells": [20, 14, 13]}
    app = SPEC.build(SPEC.params(**params), STEPS)
    tiling = Tiling.from_counts(app.grid, (2, 2))
    assert app.native(tiling) is None
    _same_bits(_run(LocalExecutor, params, tiling)[0], _run(NativeExecutor, params, tiling, workers=2)[0])


def test_a_wavefield_that_stops_being_finite_stops_the_native_run_naming_step_phase_and_tile():
    app = SPEC.build(SPEC.params(**SPEC.tiny), 30)
    tiling = Tiling.from_count(app.grid, 4)
    states = {t: app.init_tile(t, tiling) for t in range(tiling.ntiles)}
    states[2]["v"][1, 3, 3, 5] = np.inf  # as if the scheme had blown up there
    with pytest.raises(ShoalError) as err, \
            NativeExecutor(app, tiling, Cluster.uniform(1, 2), np.zeros(tiling.ntiles, int)) as ex:
        ex.run(30, states=states)
    text = str(err.value)
    # checked every 10 steps: by then the infinity has spread, and the first tile to check names it
    assert re.fullmatch(r"step 9, phase velocity, tile \d+: the wavefield is no longer finite \(unstable\).*", text), \
        text
    assert "\n" not in text and err.value.step == 9
