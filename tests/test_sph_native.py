"""2D SPH on the native executor: compiled kernels on particles at a capacity, halos of variable
size by compiled packers. The Python executor's bits (particles, clock, counts, work) on any
tiling, placement, node and worker count, over runs resumed one after the other; a run whose
particles or payloads outgrow their room redone bigger with nothing lost; the Python phases'
errors in one line; and what stays in Python (a channel, lazy halos) still runs."""

from __future__ import annotations

import logging
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shoal.apps import get_app
from shoal.apps.sph import capacity
from shoal.cluster import Cluster
from shoal.errors import ShoalError
from shoal.placement import get_policy
from shoal.runtime import LocalExecutor
from shoal.runtime.native import NativeExecutor
from shoal.tiling import Tiling

SPH2D = get_app("sph2d")
# A small dam break: 10 x 10 fluid particles in a 1 m x 0.6 m tank, walls 3 layers thick
TINY = dict(dx=0.05, tank=[1.0, 0.6], fluid=[[0.0, 0.0, 0.5, 0.5]])
STEPS = 30


def _run(executor, counts, nodes=1, workers=1, steps=(STEPS,), params=TINY, states=None, placement="birdshot"):
    """The gathered state and each run's result after runs of ``steps`` steps one after the other."""
    app = SPH2D.build(SPH2D.params(**params), sum(steps))
    tiling = Tiling.from_counts(app.grid, counts)
    cluster = Cluster.uniform(nodes, workers)
    owner = get_policy(placement).place(tiling, cluster, 3)
    states = states(app, tiling) if states else {t: app.init_tile(t, tiling) for t in range(tiling.ntiles)}
    first, results = 0, []
    with executor(app, tiling, cluster, owner) as ex:
        for n in steps:
            result = ex.run(n, states=states, first_step=first, reduced_before=results[-1].reductions if results
                            else {(-1, "rates"): app.initial_reductions()["rates"]})
            states, first = result.states, first + n
            results.append(result)
    return app.gather(states, tiling), results


def _same_bits(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for name in a:
        x, y = np.atleast_1d(a[name]), np.atleast_1d(b[name])
        assert x.shape == y.shape and np.array_equal(x.view(np.uint8), y.view(np.uint8)), name


def _same_rows(a, b) -> None:
    """The same tasks with the same work, and the same ring messages (rates) with the same sizes."""
    for ra, rb in zip(a, b, strict=True):
        for key in ("step", "phase", "tile", "work"):
            assert np.array_equal(ra.tasks[key], rb.tasks[key]), key
        ring_a = {(s, d): n for s, d, n, p in zip(*(ra.messages[k] for k in ("src", "dst", "bytes", "phase")),
                                                   strict=True) if p == 0}
        ring_b = {(s, d): n for s, d, n, p in zip(*(rb.messages[k] for k in ("src", "dst", "bytes", "phase")),
                                                   strict=True) if p == 0}
        assert ring_a == ring_b


@pytest.mark.parametrize("counts, nodes, workers, placement", [
    ((1, 1), 1, 1, "sfc"),
    ((2, 2), 1, 2, "birdshot"),
    ((4, 3), 2, 2, "birdshot"),
    ((7, 1), 1, 3, "strips"),
])
def test_the_compiled_phases_give_the_python_executors_bits_and_rows(counts, nodes, workers, placement):
    want, rows_py = _run(LocalExecutor, counts, nodes, workers, steps=(12, 18), placement=placement)
    got, rows_nat = _run(NativeExecutor, counts, nodes, workers, steps=(12, 18), placement=placement)
    _same_bits(want, got)
    _same_rows(rows_py, rows_nat)
    assert got["time"] > 0 and len(got["id"]) == len(want["id"])


@settings(max_examples=6, deadline=None)
@given(st.integers(1, 6), st.integers(1, 4), st.integers(1, 2), st.integers(1, 3))
def test_any_tiling_and_worker_count_gives_one_tiles_bits(nx, ny, nodes, workers):
    one, _ = _run(LocalExecutor, (1, 1), steps=(16,))
    many, _ = _run(NativeExecutor, (nx, ny), min(nodes, nx * ny), workers, steps=(16,))
    _same_bits(one, many)


def test_a_run_that_outgrows_its_room_is_redone_bigger_and_loses_nothing(monkeypatch):
    """Capacities of one row over the particles and payloads of one row: the water spreads into
    tiles that had none, so runs overflow and are redone with more room, to the same bits; the
    log says each time."""
    made = []

    class Tight(capacity.Room):
        def __init__(self):
            super().__init__()
            made.append(self)

        def particles(self, n, share):
            return n + self.factor

        def payload(self, near):
            return self.factor

    monkeypatch.setattr(capacity, "Room", Tight)
    want, _ = _run(LocalExecutor, (4, 3), steps=(10, 10))
    logged = []
    handler = logging.Handler(logging.INFO)
    handler.emit = lambda record: logged.append(record.getMessage())
    shoal_log = logging.getLogger("shoal")
    level = shoal_log.level
    shoal_log.addHandler(handler)
    shoal_log.setLevel(logging.INFO)
    try:
        got, results = _run(NativeExecutor, (4, 3), 1, 2, steps=(10, 10))
    finally:
        shoal_log.removeHandler(handler)
        shoal_log.setLevel(level)
    _same_bits(want, got)
    assert made and made[0].factor > 1  # it did overflow
    assert [r.steps for r in results] == [10, 10]
    redone = [m for m in logged if "outgrew their room" in m]
    assert len(redone) == sum(m.factor.bit_length() - 1 for m in made)  # one line per doubling


def test_every_step_is_reported_once_even_when_the_run_is_redone(monkeypatch):
    monkeypatch.setattr(capacity.Room, "payload", lambda self, near: self.factor)
    app = SPH2D.build(SPH2D.params(**TINY), 10)
    tiling = Tiling.from_counts(app.grid, (3, 2))
    seen = []
    with NativeExecutor(app, tiling, Cluster.uniform(1, 2), np.zeros(6, np.int64)) as ex:
        ex.run(10, on_step=seen.append)
    assert seen == list(range(10))


def _kick(row_of, what):
    """Initial states with one particle's field changed (``row_of(state) -> row or None``)."""
    def states(app, tiling):
        out = {t: app.init_tile(t, tiling) for t in range(tiling.ntiles)}
        for state in out.values():
            row = row_of(state)
            if row is not None:
                what(state, row)
                break
        return out
    return states


def _fluid_row(state):
    rows = np.flatnonzero(state["kind"] == 0)
    return int(rows[np.argmin(state["id"][rows])]) if len(rows) else None


@pytest.mark.parametrize("what, message", [
    (lambda s, i: s["vh"].__setitem__(i, (400.0, 0.0)), r"phase move, tile \d+: particle \d+ (moved|left)"),
    (lambda s, i: s["rho"].__setitem__(i, np.nan), r"phase rates, tile \d+: SPH rates are not finite"),
])
def test_an_error_in_a_kernel_is_the_python_phases_line(what, message):
    errors = []
    for executor in (LocalExecutor, NativeExecutor):
        with pytest.raises(ShoalError, match=message) as err:
            _run(executor, (3, 2), 1, 2, steps=(4,), states=_kick(_fluid_row, what))
        errors.append(str(err.value))
    assert errors[0] == errors[1] and "\n" not in errors[1]


def test_a_channel_and_lazy_halos_stay_in_python_and_still_match():
    app = SPH2D.build(SPH2D.params(**dict(TINY, halo_every=2)), 1)
    assert app.native(Tiling.from_counts(app.grid, (2, 1))) is None
    channel = dict(dx=0.05, layout="channel", tank=[1.0, 0.4], fluid=[[0.0, 0.0, 1.0, 0.2]], inflow_velocity=0.5)
    assert SPH2D.build(SPH2D.params(**channel), 1).native(Tiling.from_counts(app.grid, (2, 1))) is None
    want, _ = _run(LocalExecutor, (3, 1), steps=(8,), params=channel)
    got, _ = _run(NativeExecutor, (3, 1), 1, 2, steps=(8,), params=channel)
    _same_bits(want, got)


# ----- 3D (fluidanimate) ---------------------------------------------------------------------
SPH3D = get_app("sph3d")
TINY3D = dict(particles=1500)


def _run3d(executor, counts, nodes=1, workers=1, steps=(12,), params=TINY3D, states=None):
    app = SPH3D.build(SPH3D.params(**params), sum(steps))
    tiling = Tiling.from_counts(app.grid, counts)
    cluster = Cluster.uniform(nodes, workers)
    owner = get_policy("birdshot").place(tiling, cluster, 5)
    states = states(app, tiling) if states else {t: app.init_tile(t, tiling) for t in range(tiling.ntiles)}
    first, results = 0, []
    with executor(app, tiling, cluster, owner) as ex:
        for n in steps:
            result = ex.run(n, states=states, first_step=first)
            states, first = result.states, first + n
            results.append(result)
    return app.gather(states, tiling), results


@pytest.mark.parametrize("counts, nodes, workers", [((1, 1, 1), 1, 1), ((2, 3, 2), 1, 2), ((4, 2, 3), 2, 2)])
def test_3d_compiled_phases_give_the_python_executors_bits_and_work(counts, nodes, workers):
    want, rows_py = _run3d(LocalExecutor, counts, nodes, workers, steps=(5, 9))
    got, rows_nat = _run3d(NativeExecutor, counts, nodes, workers, steps=(5, 9))
    _same_bits(want, got)
    for a, b in zip(rows_py, rows_nat, strict=True):
        for key in ("step", "phase", "tile", "work"):
            assert np.array_equal(a.tasks[key], b.tasks[key]), key
    assert got["time"] > 0


def test_3d_a_run_that_outgrows_its_room_is_redone_and_loses_nothing(monkeypatch):
    monkeypatch.setattr(capacity.Room, "payload", lambda self, near: self.factor * (near // 4 + 1))
    grown = []
    monkeypatch.setattr(capacity.Room, "grow", lambda self: grown.append(setattr(self, "factor", 2 * self.factor)))
    want, _ = _run3d(LocalExecutor, (3, 3, 1), steps=(10,))
    got, _ = _run3d(NativeExecutor, (3, 3, 1), 1, 2, steps=(10,))
    _same_bits(want, got)
    assert 1 <= len(grown) <= 3  # a quarter of the ring's room: doubled twice at most


def test_3d_a_particle_thrown_out_of_the_world_stops_both_backends_with_one_line():
    def throw(app, tiling):
        states = {t: app.init_tile(t, tiling) for t in range(tiling.ntiles)}
        state = next(s for s in states.values() if len(s["id"]))
        state["vh"][0] = (0.0, 50.0, 0.0)  # 5 cm in a 1 ms step: several cells
        return states

    errors = []
    for executor in (LocalExecutor, NativeExecutor):
        with pytest.raises(ShoalError, match=r"^step 0, phase forces, tile \d+: particle \d+ (moved|left)") as err:
            _run3d(executor, (2, 2, 2), 1, 2, steps=(3,), states=throw)
        errors.append(str(err.value))
    assert errors[0] == errors[1]


def test_a_stop_asked_before_a_redo_ends_after_every_step_already_reported(monkeypatch):
    """A stop is asked as a run overflows (the emigrants have no room): the redo still runs as
    far as the steps already reported, so each step is reported once and every one reported is
    in the result."""
    words = capacity.CapacityPlan.payload_words
    monkeypatch.setattr(capacity.CapacityPlan, "payload_words",  # room for as many emigrants as growths
                        lambda self, phase, src, reader: words(self, phase, src, reader) if phase == "rates"
                        else self.inboxes[phase][1] * (self.room.factor - 1))
    stop, seen, grown = threading.Event(), [], []
    grow = capacity.Room.grow

    def grow_and_stop(room):
        grown.append(len(seen))
        stop.set()
        grow(room)

    monkeypatch.setattr(capacity.Room, "grow", grow_and_stop)
    app = SPH2D.build(SPH2D.params(**TINY), 300)
    tiling = Tiling.from_counts(app.grid, (4, 3))
    with NativeExecutor(app, tiling, Cluster.uniform(1, 2), np.zeros(12, np.int64)) as ex:
        before = {(-1, "rates"): app.initial_reductions()["rates"]}
        result = ex.run(300, on_step=seen.append, stop=stop, reduced_before=before)
    assert grown and grown[0] > 0  # steps were reported before the overflow
    assert seen == list(range(result.steps)) and result.steps >= grown[0]
