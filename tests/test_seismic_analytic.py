"""The seismic app's exact solutions against independent facts: the wavelets' derivatives and
integrals, Kelvin's static solution, the moment tensor as the source-side derivative of Stokes'
solution, the far-field limit, reciprocity and parity, the explosion's radial P wave, the 2D line
sources as integrals of 3D point sources along y, and the leapfrog's time-discrete solution.
Each test binds a number; the comment beside it says what was measured."""

from __future__ import annotations

import math

import numpy as np
import pytest

from shoal.apps import get_app
from shoal.apps.seismic import analytic
from shoal.apps.seismic.source import node_position, wavelet
from shoal.errors import ShoalError

VP, VS, RHO = 2000.0, 1100.0, 2200.0
F0, T0 = 5.0, 0.3
MEDIUM = dict(vp=VP, vs=VS, rho=RHO, f0=F0, t0=T0)
ORIGIN = [0.0, 0.0, 0.0]
RECEIVERS = np.array([[300.0, 100.0, -200.0], [50.0, 20.0, 10.0], [-120.0, 40.0, 260.0]])
MOMENT = [1.0, -0.5, 0.4, 0.3, -0.2, 0.7]  # xx yy zz xy xz yz
MU = RHO * VS**2
NU = (VP**2 - 2 * VS**2) / (2 * (VP**2 - VS**2))  # Poisson's ratio
K = math.pi * F0


def _kelvin(x, direction) -> np.ndarray:
    """Kelvin's static displacement (nrec, 3) of a unit point force along ``direction`` at the origin:
    ``((3 - 4 nu) d + g (g . d)) / (16 pi mu (1 - nu) r)``."""
    x = np.atleast_2d(x)
    r = np.linalg.norm(x, axis=1)
    g = x / r[:, None]
    d = np.asarray(direction, dtype=float) / np.linalg.norm(direction)
    return ((3 - 4 * NU) * d + g * (g @ d)[:, None]) / (16 * math.pi * MU * (1 - NU) * r[:, None])


@pytest.mark.parametrize("kind", ["ricker", "gaussian", "dgaussian"])
def test_time_function_levels(kind):
    """Level 0 is the app's wavelet to rounding; each level is the derivative of the one below it
    (central differences on a 5e-5 s grid: measured 2e-7 to 9e-7 relative, bound 5e-6) and the
    integrals vanish before the wavelet starts (``3 / f0`` before ``t0``: 1e-40 of their peak,
    bound 1e-15)."""
    t = np.linspace(T0 - 3 / F0, 1.0, 20001)
    assert np.max(np.abs(analytic.time_function(kind, F0, T0, t) - wavelet(kind, F0, T0, t))) <= 1e-15
    for n in (1, 0, -1, -2):
        upper = analytic.time_function(kind, F0, T0, t, n)
        lower = analytic.time_function(kind, F0, T0, t, n - 1)
        assert np.max(np.abs(np.gradient(lower, t) - upper)[1:-1]) <= 5e-6 * np.max(np.abs(upper))
        assert abs(lower[0]) <= 1e-15 * np.max(np.abs(lower))


def test_force_static_limit_is_kelvin():
    """A Gaussian force pulse's displacement integrated over time is Kelvin's static displacement
    times the pulse's area ``sqrt(pi) / (pi f0)``: measured 3e-12 relative, bound 1e-9."""
    t = np.linspace(0.0, 8.0, 80001)
    d = [1.0, 2.0, 3.0]
    u = analytic.force_3d(RECEIVERS, t, source_at=ORIGIN, direction=d, wavelet="gaussian", quantity="displacement",
                          **MEDIUM)
    static = _kelvin(RECEIVERS, d) * math.sqrt(math.pi) / K
    assert np.max(np.abs(np.trapezoid(u, t, axis=1) - static)) <= 1e-9 * np.max(np.abs(static))


def test_velocity_is_the_displacement_rate():
    """The velocity is the displacement's time derivative (central differences on a 1e-4 s grid:
    measured 2e-6 relative, bound 1e-5), for a force and a moment."""
    t = np.linspace(0.0, 1.5, 15001)
    for solve, extra in ((analytic.force_3d, dict(direction=[1, 2, 3])), (analytic.moment_3d, dict(moment=MOMENT))):
        u = solve(RECEIVERS, t, source_at=ORIGIN, wavelet="ricker", quantity="displacement", **extra, **MEDIUM)
        v = solve(RECEIVERS, t, source_at=ORIGIN, wavelet="ricker", **extra, **MEDIUM)
        assert np.max(np.abs(np.gradient(u, t, axis=1) - v)) <= 1e-5 * np.max(np.abs(v))


def test_moment_is_the_source_derivative_of_the_force():
    """Aki & Richards eq. 3.23: ``u_n = -m_pq d/dx_q u_n[force along p]`` with the force's time
    function the moment's. Central differences of Stokes' displacement (h = 1 mm) against eq. 4.29:
    measured 1e-10 relative, bound 1e-7 (near, intermediate and far field together)."""
    t = np.linspace(0.0, 1.5, 1501)
    m = analytic._tensor(MOMENT)
    v = analytic.moment_3d(RECEIVERS, t, source_at=ORIGIN, moment=MOMENT, wavelet="ricker", **MEDIUM)
    h = 1e-3
    total = np.zeros_like(v)
    for p in range(3):
        for q in range(3):
            step = h * np.eye(3)[q]
            u = [analytic.force_3d(RECEIVERS + s * step, t, source_at=ORIGIN, direction=np.eye(3)[p], wavelet="ricker",
                                   quantity="displacement", **MEDIUM) for s in (1, -1)]
            total -= m[p, q] * (u[0] - u[1]) / (2 * h)
    assert np.max(np.abs(total - v)) <= 1e-7 * np.max(np.abs(v))


def test_moment_static_limit():
    """A Gaussian moment rate is a step moment: the velocity integrated over time is the static
    displacement ``-m_pq d/dx_q`` of Kelvin's solution times ``sqrt(pi) / (pi f0)`` (central
    differences, h = 1 mm): measured 1e-9 relative, bound 1e-7."""
    t = np.linspace(0.0, 6.0, 60001)
    v = analytic.moment_3d(RECEIVERS, t, source_at=ORIGIN, moment=MOMENT, wavelet="gaussian", **MEDIUM)
    m = analytic._tensor(MOMENT)
    h = 1e-3
    static = np.zeros((len(RECEIVERS), 3))
    for p in range(3):
        for q in range(3):
            step, d = h * np.eye(3)[q], np.eye(3)[p]
            static -= m[p, q] * (_kelvin(RECEIVERS + step, d) - _kelvin(RECEIVERS - step, d)) / (2 * h)
    static *= math.sqrt(math.pi) / K
    assert np.max(np.abs(np.trapezoid(v, t, axis=1) - static)) <= 1e-7 * np.max(np.abs(static))


def test_explosion_is_radial_p_only():
    """An explosion moves receivers along the ray only (transverse motion 0 to 1e-15 of the radial)
    and only from the P arrival on (before ``r/vp + t0 - 2/f0``: 1e-18 of the peak, bound 1e-15);
    its static displacement is ``M / (4 pi rho vp^2 r^2)`` outward (measured 1e-12, bound 1e-9)."""
    t = np.linspace(0.0, 6.0, 60001)
    v = analytic.moment_3d(RECEIVERS, t, source_at=ORIGIN, moment=np.eye(3), wavelet="gaussian", **MEDIUM)
    r = np.linalg.norm(RECEIVERS, axis=1)
    g = RECEIVERS / r[:, None]
    radial = np.einsum("rtc,rc->rt", v, g)
    transverse = v - radial[..., None] * g[:, None, :]
    assert np.max(np.abs(transverse)) <= 1e-15 * np.max(np.abs(radial)) + 1e-300
    early = t[None, :] < (r / VP)[:, None] + T0 - 2 / F0
    assert np.max(np.abs(np.where(early, radial, 0.0))) <= 1e-15 * np.max(np.abs(radial))
    static = math.sqrt(math.pi) / K / (4 * math.pi * RHO * VP**2 * r**2)
    assert np.allclose(np.trapezoid(radial, t, axis=1), static, rtol=1e-9, atol=0)


def test_far_field_limit():
    """Far from the source Stokes' solution tends to its 1/r terms; what the near and intermediate
    fields add falls as 1/r (doubling r from 20 to 40 S wavelengths halves it: measured ratio
    2.00, bound 1.9 to 2.1) and is 1.8% of the motion at 40 wavelengths (bound 2.5%)."""
    d = np.array([1.0, 0.0, 2.0]) / math.sqrt(5)
    g = np.array([[2.0, 1.0, 2.0]]) / 3.0
    wavelength = VS / F0
    errors = []
    for r in (20 * wavelength, 40 * wavelength):
        t = np.linspace(r / VP, r / VS + 2 * T0, 4001)
        v = analytic.force_3d(g * r, t, source_at=ORIGIN, direction=d, wavelet="ricker", **MEDIUM)[0]
        rate = [analytic.time_function("ricker", F0, T0, t - r / c, 1) for c in (VP, VS)]
        gd = g[0] @ d
        far = np.outer(rate[0], g[0] * gd) / VP**2 - np.outer(rate[1], g[0] * gd - d) / VS**2
        far /= 4 * math.pi * RHO * r
        errors.append(np.max(np.abs(v - far)) / np.max(np.abs(v)))
    assert 1.9 <= errors[0] / errors[1] <= 2.1
    assert errors[1] <= 0.025


def test_reciprocity_and_parity():
    """Reciprocity ``d2 . v(B; force d1 at A) = d1 . v(A; force d2 at B)`` (measured 1e-16
    relative, bound 1e-12); a force's field is even about the source, a moment's odd (bound 1e-13)."""
    t = np.linspace(0.0, 1.0, 1001)
    a, b = np.array([10.0, -20.0, 30.0]), np.array([230.0, 90.0, -140.0])
    d1, d2 = np.array([1.0, 2.0, -1.0]) / math.sqrt(6), np.array([0.0, 3.0, 4.0]) / 5.0
    ab = analytic.force_3d([b], t, source_at=a, direction=d1, wavelet="ricker", **MEDIUM)[0] @ d2
    ba = analytic.force_3d([a], t, source_at=b, direction=d2, wavelet="ricker", **MEDIUM)[0] @ d1
    assert np.max(np.abs(ab - ba)) <= 1e-12 * np.max(np.abs(ab))
    for solve, extra, sign in ((analytic.force_3d, dict(direction=d1), 1),
                               (analytic.moment_3d, dict(moment=MOMENT), -1)):
        plus = solve(RECEIVERS, t, source_at=ORIGIN, wavelet="ricker", **extra, **MEDIUM)
        minus = solve(-RECEIVERS, t, source_at=ORIGIN, wavelet="ricker", **extra, **MEDIUM)
        assert np.max(np.abs(plus - sign * minus)) <= 1e-13 * np.max(np.abs(plus))


@pytest.mark.parametrize("solve3, solve2, extra", [
    (analytic.force_3d, analytic.force_2d, dict(direction=[1.0, 0.5, 2.0])),
    (analytic.moment_3d, analytic.moment_2d, dict(moment=MOMENT)),
])
def test_line_source_is_the_integral_of_point_sources(solve3, solve2, extra):
    """A 2D line source is the 3D point sources along y summed: the Hankel-function solutions
    against the trapezoid rule over y (2 m apart, |y| <= 3 km, beyond the P front at 1.2 s):
    measured 1e-12 (force) and 1e-14 (moment) relative, bound 1e-8."""
    receivers = np.array([[400.0, 0.0, 300.0], [150.0, 0.0, -100.0]])
    t = np.linspace(0.0, 1.2, 121)
    two = solve2(receivers, t, source_at=ORIGIN, wavelet="ricker", **extra, **MEDIUM)
    ys = np.linspace(-3000.0, 3000.0, 3001)
    weights = np.full(len(ys), ys[1] - ys[0])
    weights[[0, -1]] /= 2
    total = np.zeros_like(two)
    for y, w in zip(ys, weights, strict=True):
        at = receivers.copy()
        at[:, 1] = y
        total += w * solve3(at, t, source_at=ORIGIN, wavelet="ricker", **extra, **MEDIUM)
    assert np.max(np.abs(total - two)) <= 1e-8 * np.max(np.abs(two))


@pytest.mark.parametrize("solve, extra", [(analytic.force_3d, dict(direction=[1, 2, 3])),
                                          (analytic.moment_3d, dict(moment=MOMENT)),
                                          (analytic.force_2d, dict(direction=[1, 0.5, 2]))])
def test_leapfrog_solution(solve, extra):
    """The leapfrog's time-discrete solution tends to the exact one as ``dt`` falls (1e-7 s: 3e-12
    relative, bound 1e-9) and its difference from it is second order (halving dt from 4 ms
    divides it by 4.0, bound 3.9 to 4.1)."""
    t = np.linspace(0.0, 1.0, 501)
    args = dict(source_at=ORIGIN, wavelet="ricker", **extra, **MEDIUM)
    exact = solve(RECEIVERS, t, **args)
    scale = np.max(np.abs(exact))
    assert np.max(np.abs(solve(RECEIVERS, t, dt=1e-7, **args) - exact)) <= 1e-9 * scale
    e = [np.max(np.abs(solve(RECEIVERS, t, dt=dt, **args) - exact)) for dt in (4e-3, 2e-3)]
    assert 3.9 <= e[0] / e[1] <= 4.1


def test_seismograms_of_the_app_params():
    """``seismograms`` reads each component at its own staggered node, as the app records, and
    refuses a layered medium."""
    spec = get_app("seismic")
    p = spec.params(cells=[20, 20, 20], spacing=10.0, layers=[[0.0, VP, VS, RHO]], f0=F0, t0=T0, source="force",
                    direction=[0.0, 0.0, 1.0], source_at=[100.0, 100.0, 105.0], receivers=[[133.0, 101.0, 140.0]],
                    amplitude=1e6)
    t = np.linspace(0.0, 0.5, 51)
    got = analytic.seismograms(p, t)
    node = node_position("vx", (13, 10, 14), p.dx)
    want = analytic.force_3d([node], t, source_at=[100.0, 100.0, 105.0], direction=[0, 0, 1], amplitude=1e6,
                             wavelet="ricker", **MEDIUM)[0, :, 0]
    assert np.array_equal(got[0, :, 0], want)
    with pytest.raises(ShoalError, match="homogeneous"):
        analytic.seismograms(spec.params(layers=[[0.0, VP, VS, RHO], [500.0, 3000.0, 1700.0, 2500.0]]), t)
