"""The shallow-water exact solutions solve the equations: finite-difference residuals of mass and
momentum (with the bed's source) shrink at second order inside the wet region, mass is
conserved, fronts, bores and shorelines are where the formulas say, and Bernoulli's steady
depth keeps the energy and the discharge."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from shoal.apps.swe.analytic import (
    bernoulli_depth,
    ritter,
    ritter_front,
    stoker,
    stoker_celerity,
    thacker,
    thacker_1d,
    thacker_bathymetry,
    thacker_frequency,
    thacker_period,
    thacker_shoreline,
    vortex,
    vortex_bathymetry,
)
from shoal.errors import ShoalError

G = 9.81


def residuals(state, bed, x, y, t, dx, dt, g=G) -> np.ndarray:
    """Central-difference residuals (3 equations x points) of the conservative equations

    q_t + F(q)_x + G(q)_y = (0, -g h b_x, -g h b_y),  q = (h, hu, hv),

    for ``state(x, y, t) -> (h, u, v)`` over ``bed(x, y)``, spacing ``dx`` in space, ``dt`` in time."""
    def q(x, y, t):
        h, u, v = state(x, y, t)
        return np.array([h, h * u, h * v])

    def f(x, y, t):
        h, u, v = state(x, y, t)
        return np.array([h * u, h * u * u + g * h * h / 2, h * u * v])

    def gy(x, y, t):
        h, u, v = state(x, y, t)
        return np.array([h * v, h * u * v, h * v * v + g * h * h / 2])

    h = state(x, y, t)[0]
    bx = (bed(x + dx, y) - bed(x - dx, y)) / (2 * dx)
    by = (bed(x, y + dx) - bed(x, y - dx)) / (2 * dx)
    source = np.array([np.zeros_like(h), -g * h * bx, -g * h * by])
    return ((q(x, y, t + dt) - q(x, y, t - dt)) / (2 * dt) + (f(x + dx, y, t) - f(x - dx, y, t)) / (2 * dx)
            + (gy(x, y + dx, t) - gy(x, y - dx, t)) / (2 * dx) - source)


def residual_order(state, bed, x, y, t, length, duration, g=G) -> float:
    """Slope of log(max residual) against log(spacing) for spacings of 4e-3, 2e-3 and 1e-3 times
    ``length`` in space and ``duration`` in time."""
    deltas = np.array([4e-3, 2e-3, 1e-3])
    worst = [np.abs(residuals(state, bed, x, y, t, d * length, d * duration, g)).max() for d in deltas]
    return float(np.polyfit(np.log(deltas), np.log(worst), 1)[0])


# ----- Ritter ------------------------------------------------------------------------------------
ritter_cases = dict(h0=st.floats(0.01, 20.0), t=st.floats(0.05, 50.0), x0=st.floats(-100.0, 100.0),
                    g=st.sampled_from([G, 1.0]))


# Points spread over the wet region: at some single points (the dam's, a vortex's centre) the
# residual vanishes by symmetry and says nothing of the order.
SPREAD = np.linspace(0.1, 0.9, 9)


@given(**ritter_cases)
def test_ritter_solves_the_equations_inside_the_rarefaction(h0, t, x0, g):
    c0 = math.sqrt(g * h0)
    x = x0 + c0 * t * (3 * SPREAD - 1)  # the fan spans -c0 t < x - x0 < 2 c0 t

    def state(x, y, t):
        h, u = ritter(x, t, x0, h0, g)
        return h, u, np.zeros_like(h)

    def flat(x, y):
        return np.zeros_like(x)

    order = residual_order(state, flat, x, np.zeros_like(x), t, c0 * t, t, g)
    assert 1.9 < order < 2.1


@given(**ritter_cases)
def test_ritter_conserves_mass_and_its_front_runs_at_twice_the_wave_speed(h0, t, x0, g):
    c0 = math.sqrt(g * h0)
    upstream, downstream = 1.5 * c0 * t, 3.0 * c0 * t
    x = np.linspace(x0 - upstream, x0 + downstream, 30_001)
    h, u = ritter(x, t, x0, h0, g)
    assert np.trapezoid(h, x) == pytest.approx(h0 * upstream, rel=1e-7)
    front = ritter_front(t, x0, h0, g)
    assert front == pytest.approx(x0 + 2 * c0 * t, rel=1e-15, abs=1e-12)
    assert h[x >= front].max() == 0 and u[x >= front].max() == 0
    eps = 1e-6 * c0 * t
    h_behind, u_behind = ritter(np.array([front - eps]), t, x0, h0, g)
    assert 0 < h_behind[0] < 1e-10 * h0 and u_behind[0] == pytest.approx(2 * c0, rel=1e-6)
    # the head of the rarefaction leaves the still water at -c0 t, continuously
    head = x0 - c0 * t
    assert ritter(np.array([head - eps, head + eps]), t, x0, h0, g)[0] == pytest.approx([h0, h0], rel=1e-5)
    assert h.min() >= 0 and h.max() == h0


def test_ritter_at_the_dam_is_four_ninths_of_the_depth_and_at_time_zero_the_step():
    h, u = ritter(np.array([2.0]), 3.0, 2.0, 1.5)
    assert h[0] == pytest.approx(4 / 9 * 1.5, rel=1e-14) and u[0] == pytest.approx(2 / 3 * math.sqrt(G * 1.5))
    h, u = ritter(np.array([-1.0, 1.999, 2.001, 5.0]), 0.0, 2.0, 1.5)
    assert h.tolist() == [1.5, 1.5, 0.0, 0.0] and u.tolist() == [0.0] * 4


# ----- Stoker --------------------------------------------------------------------------------------
stoker_cases = dict(hl=st.floats(0.01, 20.0), ratio=st.floats(1e-3, 0.9), t=st.floats(0.05, 50.0),
                    x0=st.floats(-100.0, 100.0), g=st.sampled_from([G, 1.0]))


def _stoker_waves(hl, hr, g):
    """Speeds of the rarefaction's head and tail and of the bore, and the middle state's depth."""
    cl, cm = math.sqrt(g * hl), stoker_celerity(hl, hr, g)
    return -cl, 2 * cl - 3 * cm, 2 * cm * cm * (cl - cm) / (cm * cm - g * hr), cm * cm / g


@given(**stoker_cases)
def test_stoker_solves_the_equations_in_its_rarefaction_and_its_bore_keeps_mass_and_momentum(hl, ratio, t, x0, g):
    hr = ratio * hl
    head, tail, bore, hm = _stoker_waves(hl, hr, g)
    assert head < tail < bore and hr < hm < hl
    x = x0 + t * (head + (tail - head) * SPREAD)  # inside the fan

    def state(x, y, t):
        h, u = stoker(x, t, x0, hl, hr, g)
        return h, u, np.zeros_like(h)

    order = residual_order(state, lambda x, y: np.zeros_like(x), x, np.zeros_like(x), t, (tail - head) * t, t, g)
    assert 1.9 < order < 2.1
    # Rankine-Hugoniot across the bore: the jumps of mass and momentum flux are the bore's speed
    # times the jumps of depth and momentum
    eps = 1e-9 * max(bore * t, 1.0)
    (hb, ha), (ub, ua) = stoker(np.array([x0 + bore * t - eps, x0 + bore * t + eps]), t, x0, hl, hr, g)
    assert ha == hr and ua == 0 and hb == pytest.approx(hm, rel=1e-12)
    assert hb * ub - ha * ua == pytest.approx(bore * (hb - ha), rel=1e-9)
    assert hb * ub**2 + g * hb**2 / 2 - g * ha**2 / 2 == pytest.approx(bore * hb * ub, rel=1e-9)


@given(**stoker_cases)
def test_stoker_conserves_mass_and_is_ritter_on_a_dry_bed(hl, ratio, t, x0, g):
    hr = ratio * hl
    head, _, bore, _ = _stoker_waves(hl, hr, g)
    x = np.linspace(x0 + 1.5 * head * t, x0 + 1.5 * bore * t, 60_001)
    h, _ = stoker(x, t, x0, hl, hr, g)
    # the trapezoids straddling the bore miss at most its jump times a spacing
    assert np.trapezoid(h, x) == pytest.approx(hl * (x0 - x[0]) + hr * (x[-1] - x0), abs=hl * (x[1] - x[0]))
    dry, ritter_h = stoker(x, t, x0, hl, 0.0, g), ritter(x, t, x0, hl, g)
    assert np.array_equal(dry[0], ritter_h[0]) and np.array_equal(dry[1], ritter_h[1])


def test_stoker_joins_its_rarefaction_to_the_middle_state_and_starts_as_the_step():
    hl, hr, t = 2.0, 0.5, 3.0
    _, tail, _, hm = _stoker_waves(hl, hr, G)
    eps = 1e-9
    h, u = stoker(np.array([tail * t - eps, tail * t + eps]), t, 0.0, hl, hr)
    assert h == pytest.approx([hm, hm], rel=1e-8) and u[0] == pytest.approx(u[1], rel=1e-8)
    # the invariant u + 2c carried from the still water upstream
    assert u[1] + 2 * math.sqrt(G * h[1]) == pytest.approx(2 * math.sqrt(G * hl), rel=1e-14)
    h, u = stoker(np.array([-1.0, 0.5]), 0.0, 0.0, hl, hr)
    assert h.tolist() == [hl, hr] and u.tolist() == [0.0, 0.0]


# ----- Bernoulli's steady depth --------------------------------------------------------------------
@given(q=st.floats(0.01, 10.0), depth=st.floats(0.5, 10.0), rise=st.floats(0.01, 0.9))
def test_bernoulli_depth_keeps_the_energy_and_is_subcritical(q, depth, rise):
    # a downstream depth at least twice the critical one keeps the flow subcritical; the bed rises
    # by a share of what the energy line allows over the critical depth's 1.5
    critical = (q * q / G) ** (1 / 3)
    h_out = max(depth, 2 * critical)
    energy = h_out + q * q / (2 * G * h_out**2)
    b = np.linspace(0.0, rise * (energy - 1.5 * critical), 11)
    h = bernoulli_depth(b, q, energy)
    np.testing.assert_allclose(h + q * q / (2 * G * h * h) + b, energy, rtol=1e-14)
    assert (h > critical).all() and h[0] == pytest.approx(h_out, rel=1e-14)
    assert (np.diff(h) < 0).all()  # subcritical water gets shallower over a rising bed
    with pytest.raises(ShoalError, match="no subcritical flow"):
        bernoulli_depth(np.array([energy - 1.4 * critical]), q, energy)


# ----- Thacker ------------------------------------------------------------------------------------
thacker_cases = dict(h0=st.floats(0.05, 10.0), a=st.floats(0.5, 100.0), eta_over_a=st.floats(0.05, 0.9),
                     phase=st.floats(0.0, 1.0), centre=st.tuples(st.floats(-50, 50), st.floats(-50, 50)))


def moving_centre(t, centre, h0, a, eta):
    omega = thacker_frequency(h0, a)
    return centre[0] + eta * math.cos(omega * t), centre[1] + eta * math.sin(omega * t)


@given(**thacker_cases)
def test_thacker_solves_the_equations_with_the_bed_source_in_the_wet_region(h0, a, eta_over_a, phase, centre):
    eta, period = eta_over_a * a, thacker_period(h0, a)
    t = phase * period
    cx, cy = moving_centre(t, centre, h0, a, eta)
    x, y = cx + 0.8 * a * SPREAD * np.cos(7 * SPREAD), cy + 0.8 * a * SPREAD * np.sin(7 * SPREAD)

    def state(x, y, t):
        return thacker(x, y, t, centre, h0, a, eta)

    def bed(x, y):
        return thacker_bathymetry(x, y, centre, h0, a)

    order = residual_order(state, bed, x, y, t, a, period)
    assert 1.9 < order < 2.1


def test_thacker_needs_the_bed_source_with_its_sign():
    centre, h0, a, eta = (2.0, 2.0), 0.1, 1.0, 0.5  # SWASHES' case

    def state(x, y, t):
        return thacker(x, y, t, centre, h0, a, eta)

    x, y, t = np.array([1.9, 2.3]), np.array([2.1, 1.8]), 0.4
    right = residuals(state, lambda x, y: thacker_bathymetry(x, y, centre, h0, a), x, y, t, 1e-4, 1e-4)
    wrong = residuals(state, lambda x, y: -thacker_bathymetry(x, y, centre, h0, a), x, y, t, 1e-4, 1e-4)
    assert np.abs(right).max() < 1e-6 < 1e-2 < np.abs(wrong[1:]).max()


@given(**thacker_cases)
def test_thacker_conserves_the_volume_of_water(h0, a, eta_over_a, phase, centre):
    eta = eta_over_a * a
    t = phase * thacker_period(h0, a)
    half = 1.02 * (a + eta)
    side = np.linspace(-half, half, 401)
    cell = (side[1] - side[0]) ** 2
    h = thacker(centre[0] + side[:, None], centre[1] + side[None, :], t, centre, h0, a, eta)[0]
    assert h.sum() * cell == pytest.approx(math.pi * h0 * a * a / 2, rel=1e-5)


@given(**thacker_cases, angles=st.lists(st.floats(0.0, 2 * math.pi), min_size=1, max_size=16))
def test_thacker_shoreline_points_are_dry_and_just_inside_is_wet(h0, a, eta_over_a, phase, centre, angles):
    eta = eta_over_a * a
    t = phase * thacker_period(h0, a)
    xs, ys = thacker_shoreline(t, centre, h0, a, eta, G, angles)
    assert np.abs(thacker(xs, ys, t, centre, h0, a, eta)[0]).max() <= 1e-12 * h0
    cx, cy = moving_centre(t, centre, h0, a, eta)
    for scale, wet in [(1 - 1e-6, True), (1 + 1e-6, False)]:
        h, u, v = thacker(cx + scale * (xs - cx), cy + scale * (ys - cy), t, centre, h0, a, eta)
        assert ((h > 0) == wet).all() and ((np.hypot(u, v) > 0) == wet).all()


def test_thacker_at_time_zero_and_after_one_period():
    centre, h0, a, eta = (2.0, 2.0), 0.1, 1.0, 0.5
    omega = math.sqrt(2 * G * h0) / a
    assert thacker_period(h0, a) == pytest.approx(2 * math.pi / omega, rel=1e-15)
    x, y = np.meshgrid(np.linspace(0, 4, 41), np.linspace(0, 4, 41), indexing="ij")
    h, u, v = thacker(x, y, 0.0, centre, h0, a, eta)
    wet = h > 0
    # surface = h + b = eta h0 / a^2 (2 (x - 2) - eta) over the wet disc about (2.5, 2)
    expected = eta * h0 / a**2 * (2 * (x - 2) - eta)
    np.testing.assert_allclose((h + thacker_bathymetry(x, y, centre, h0, a))[wet], expected[wet], atol=1e-15)
    assert wet.sum() == ((x - 2.5) ** 2 + (y - 2) ** 2 < 1).sum()
    assert np.all(u[wet] == 0) and np.allclose(v[wet], eta * omega, rtol=1e-15)
    later = thacker(x, y, thacker_period(h0, a), centre, h0, a, eta)
    np.testing.assert_allclose(later[0], h, atol=1e-14)


@given(h0=st.floats(0.05, 10.0), a=st.floats(0.5, 100.0), d_over_a=st.floats(0.05, 0.9), phase=st.floats(0.0, 1.0),
       xc=st.floats(-50, 50))
def test_thacker_1d_solves_the_equations_keeps_its_volume_and_a_planar_surface(h0, a, d_over_a, phase, xc):
    d, period = d_over_a * a, thacker_period(h0, a)
    t = phase * period
    centre = xc + d * math.cos(2 * math.pi * phase)  # the wet interval's centre at t
    x = centre + 0.8 * a * (2 * SPREAD - 1)

    def state(x, y, t):
        h, u = thacker_1d(x, t, xc, h0, a, d)
        return h, u, np.zeros_like(h)

    def bed(x, y):
        return thacker_bathymetry(x, 0.0, (xc, 0.0), h0, a)

    assert 1.9 < residual_order(state, bed, x, np.zeros_like(x), t, a, period) < 2.1
    grid = np.linspace(xc - 1.02 * (a + d), xc + 1.02 * (a + d), 20_001)
    h, _ = thacker_1d(grid, t, xc, h0, a, d)
    assert np.trapezoid(h, grid) == pytest.approx(4 * h0 * a / 3, rel=1e-6)
    wet = h > 0
    surface = h[wet] + bed(grid[wet], 0.0)
    slope = np.polyfit(grid[wet], surface, 1)
    np.testing.assert_allclose(surface, np.polyval(slope, grid[wet]), atol=1e-12 * h0)
    assert slope[0] == pytest.approx(2 * h0 * d / a**2 * math.cos(2 * math.pi * phase), abs=1e-9 * h0 / a)


# ----- the steady vortex over a seamount ---------------------------------------------------------
@given(depth=st.floats(1.0, 100.0), radius=st.floats(0.1, 100.0), speed_share=st.floats(0.2, 0.9),
       spin=st.sampled_from([1, -1]), bump_share=st.floats(-0.5, 0.5))
def test_the_vortex_is_a_steady_solution_over_its_seamount(depth, radius, speed_share, spin, bump_share):
    # the speed is a share of the largest that keeps the seamount under water
    bump = bump_share * depth
    speed = spin * speed_share * math.sqrt(2 * G * (depth - bump) / math.e)
    x, y = 3 * radius * SPREAD * np.cos(7 * SPREAD), 3 * radius * SPREAD * np.sin(7 * SPREAD)

    def state(x, y, t):
        return vortex(x, y, (0.0, 0.0), depth, radius, speed, bump)

    def bed(x, y):
        return vortex_bathymetry(x, y, (0.0, 0.0), depth, radius, bump)

    assert state(x, y, 0.0)[0].min() > 0
    order = residual_order(state, bed, x, y, 0.0, radius, 1.0)
    assert 1.9 < order < 2.1


def test_the_vortex_peaks_at_its_radius_and_vanishes_far_away():
    h, u, v = vortex(np.array([0.0, 2.0, 16.0]), np.zeros(3), (0.0, 0.0), 10.0, 2.0, 1.5, 3.0)
    assert u.tolist() == [0.0, 0.0, 0.0] and v[0] == 0 and v[1] == pytest.approx(1.5, rel=1e-15)
    assert 0 < v[2] < 1e-12 * 1.5
    assert h[2] == pytest.approx(10.0, rel=1e-14)
    with pytest.raises(ShoalError, match="dries the seamount"):
        vortex(0.0, 0.0, (0.0, 0.0), 1.0, 1.0, 3.0, 0.0)


@pytest.mark.parametrize("call", [lambda: ritter(0.0, -1.0, 0.0, 1.0), lambda: ritter(0.0, 1.0, 0.0, -1.0),
                                  lambda: thacker(0.0, 0.0, 0.0, (0, 0), 0.1, 0.0, 0.5),
                                  lambda: stoker(0.0, 1.0, 0.0, -1.0, 0.5), lambda: stoker(0.0, 1.0, 0.0, 1.0, 2.0),
                                  lambda: thacker_bathymetry(0.0, 0.0, (0, 0), float("nan"), 1.0)])
def test_bad_parameters_are_one_clear_error(call):
    with pytest.raises(ShoalError, match="must be a"):
        call()
