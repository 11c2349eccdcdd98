"""Shallow water on the native executor: compiled cfl, stage and balance phases and strips and
target levels packed by compiled packers give the Python executor's bits (pools, levels,
time), work and ring of messages on any tiling, worker and node count, at order 1 and 2, both
solvers, every kind of side, and with blocks that change level (the regrid's Python deferred
to, the run ended after it); errors are the Python stages' one line."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shoal.apps import get_app
from shoal.cluster import Cluster
from shoal.errors import ShoalError
from shoal.placement import get_policy
from shoal.runtime import LocalExecutor
from shoal.runtime.native import NativeExecutor
from shoal.tiling import Tiling

SWE = get_app("swe")
SWE_TARGETS = type(SWE.build(SWE.params(**SWE.tiny), 1))._targets
UNIFORM = dict(SWE.tiny, max_level=SWE.tiny.get("min_level", 0), min_level=SWE.tiny.get("min_level", 0))
SIDES = dict(UNIFORM, order=1, solver="rusanov", boundary=["inflow", "outflow", "depth", "reflect"],
             discharge=[0.5, 0.0, 0.0, 0.0], side_depth=[0.0, 0.0, 1.5, 0.0])


def _run(executor, params, tiles, nodes=1, workers=1, steps=(6,), states=None):
    """The gathered state after runs of ``steps`` steps each (a native run that ends at a regrid
    goes on from there), and every executor run's result."""
    app = SWE.build(SWE.params(**params), sum(steps))
    tiling = Tiling.from_count(app.grid, tiles)
    cluster = Cluster.uniform(nodes, workers)
    owner = get_policy("birdshot").place(tiling, cluster, 2)
    states = states(app, tiling) if states else {t: app.init_tile(t, tiling) for t in range(tiling.ntiles)}
    first, results = 0, []
    with executor(app, tiling, cluster, owner) as ex:
        for n in steps:
            end = first + n
            while first < end:
                result = ex.run(end - first, states=states, first_step=first,
                                reduced_before=results[-1].reductions if results else None)
                states, first = result.states, first + result.steps
                results.append(result)
    return app.gather(states, tiling), results


def _same_bits(a, b):
    assert a.keys() == b.keys()
    for name in a:
        x, y = np.atleast_1d(a[name]), np.atleast_1d(b[name])
        assert x.shape == y.shape and np.array_equal(x.view(np.uint8), y.view(np.uint8)), name


ADAPTIVE = dict(SWE.tiny, min_level=0, max_level=2, regrid_every=3)


def test_a_native_run_ends_after_a_regrid_step_and_every_phase_is_compiled():
    app = SWE.build(SWE.params(**ADAPTIVE), 10)
    native = app.native(Tiling.from_count(app.grid, 4))
    assert set(native.kernels) == {p.name for p in app.phases}
    _, results = _run(NativeExecutor, ADAPTIVE, 4, steps=(10,))
    assert [r.steps for r in results] == [3, 3, 3, 1]  # regrids at the ends of steps 2, 5 and 8
    assert [r.first_step for r in results] == [0, 3, 6, 9]


@pytest.mark.parametrize("params, tiles, nodes, workers", [
    (UNIFORM, 1, 1, 1),
    (UNIFORM, 6, 1, 2),
    (dict(UNIFORM, order=1), 9, 2, 2),
    (SIDES, 12, 2, 1),
    (dict(SIDES, order=2, solver="fwave", limiter="vanleer"), 5, 1, 3),
    (ADAPTIVE, 1, 1, 1),
    (ADAPTIVE, 6, 2, 2),
    (dict(ADAPTIVE, order=1, max_level=1, regrid_every=2), 9, 1, 2),
    (dict(ADAPTIVE, freeze_dry=True, shore=True, criterion="gradient"), 12, 1, 3),
])
def test_the_compiled_phases_give_the_python_executors_bits_work_and_messages(params, tiles, nodes, workers):
    want, py = _run(LocalExecutor, params, tiles, nodes, workers, steps=(3, 5))
    got, nat = _run(NativeExecutor, params, tiles, nodes, workers, steps=(3, 5))
    _same_bits(want, got)
    a, b = ({key: np.concatenate([r.tasks[key] for r in results]) for key in ("step", "phase", "tile", "work")}
            for results in (py, nat))
    for key in a:
        assert np.array_equal(a[key], b[key]), key
    (a, b) = ({key: np.concatenate([r.messages[key] for r in results]) for key in ("step", "phase", "src", "dst",
                                                                                     "bytes")} for results in (py, nat))
    for key in ("step", "phase", "src", "dst"):
        assert np.array_equal(a[key], b[key]), key
    # the same levels and strips (a balance round's target levels travel on regrid steps only in Python)
    strips = np.isin(a["phase"], [k for k, p in enumerate(SWE.build(SWE.params(**params), 1).phases)
                                  if p.name.startswith("stage")])
    assert np.array_equal(a["bytes"][strips], b["bytes"][strips]) and np.all(b["bytes"] > 0)
    assert float(got["time"]) > 0
    if params is not UNIFORM and params["max_level"] > params["min_level"]:
        assert len(set(want["level"].tolist())) > 1  # blocks did change level


@settings(max_examples=5, deadline=None)
@given(st.sampled_from([2, 3, 4, 6, 9, 12, 18, 27, 54]), st.integers(1, 3))
def test_any_tiling_gives_one_tiles_bits(tiles, workers):
    one, _ = _run(LocalExecutor, UNIFORM, 1, steps=(5,))
    many, _ = _run(NativeExecutor, UNIFORM, tiles, 1, workers, steps=(5,))
    _same_bits(one, many)


def test_a_nan_depth_and_a_courant_number_above_one_are_the_python_stages_lines():
    def poisoned(app, tiling):
        states = {t: app.init_tile(t, tiling) for t in range(tiling.ntiles)}
        states[2]["h"][3 * 8 + 3] = np.nan  # cell (1, 1) of the tile's first block (4 cells, 2 ghosts a side)
        return states

    errors = []
    for executor in (LocalExecutor, NativeExecutor):
        with pytest.raises(ShoalError, match=r"^step 0, phase stage1, tile 2: depth negative or not finite at cell") \
                as err:
            _run(executor, UNIFORM, 6, 1, 2, steps=(3,), states=poisoned)
        errors.append(str(err.value))
    assert errors[0] == errors[1]

    def slow(app, tiling):  # blocks that say their water is 10x slower than it is: 10x the time step
        states = {t: app.init_tile(t, tiling) for t in range(tiling.ntiles)}
        for state in states.values():
            state["speed"] = state["speed"] / 10
        return states

    errors = []
    for executor in (LocalExecutor, NativeExecutor):
        with pytest.raises(ShoalError, match=r"^step 0, phase stage1, tile 0: Courant number .* > 1 .* fastest now "
                                             r"at cell") as err:
            _run(executor, UNIFORM, 1, steps=(3,), states=slow)  # one tile: which fails first is certain
        errors.append(str(err.value))
    assert errors[0] == errors[1]


def test_an_error_in_the_python_a_kernel_defers_to_is_the_python_executors_line():
    """The regrid step's target levels are the app's Python on both executors: an error there
    names the same step, phase and tile."""
    def failing(app, tiling):
        def targets(state, lev, topo):
            if 10 in topo.gids:
                raise ShoalError("the criterion failed")
            return SWE_TARGETS(app, state, lev, topo)

        app._targets = targets
        return {t: app.init_tile(t, tiling) for t in range(tiling.ntiles)}

    errors = []
    for executor in (LocalExecutor, NativeExecutor):
        with pytest.raises(ShoalError, match=r"^step 2, phase stage2, tile \d+: the criterion failed$") as err:
            _run(executor, ADAPTIVE, 6, 1, 2, steps=(6,), states=failing)
        errors.append(str(err.value))
    assert errors[0] == errors[1]
