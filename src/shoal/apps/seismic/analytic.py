"""Exact solutions of elastodynamics in a homogeneous, unbounded full space, for verification.

A point source at ``source_at`` in a medium of P speed ``vp`` (alpha), S speed ``vs`` (beta)
and density ``rho``; ``r`` is the distance to a receiver and ``gamma`` the unit vector from the
source to it. Sources follow the app's conventions (see ``source.py``):

- a force ``amplitude * w(t)`` along ``direction`` (3D: a point force in N; 2D: a line force per
  metre along y);
- a moment whose *rate* is ``amplitude * m_pq * w(t)`` (N m/s; in 2D per metre along y), so the
  moment itself is ``amplitude * m_pq * W(t)`` with ``W`` the wavelet's integral from -inf.

``w`` is one of the app's wavelets (``source.wavelet``). Every one of them is a derivative of
the Gaussian ``g(s) = exp(-(pi f0 s)^2)`` (``s = t - t0``), whose derivatives and integrals are
known in closed form, so the 3D solutions below are exact to rounding, near field included.

``force_3d``   Stokes' solution (Aki & Richards 2002, eq. 4.23), near, intermediate and far field
``moment_3d``  a moment tensor (Aki & Richards 2002, eq. 4.29); the explosion is ``m = identity``
``force_2d``   a line force (plane strain and its anti-plane part), by a Fourier integral of the
               2D Green's tensor in Hankel functions (Kausel 2006, §2D full space)
``moment_2d``  a line moment tensor: the source-side derivative of the same tensor
``seismograms`` the app's receivers for a homogeneous ``SeismicParams``, each component at its
               own staggered node, as the app records them

Sources: Aki & Richards, "Quantitative Seismology", 2nd ed. (2002), §4.2 and §4.3; Kausel,
"Fundamental Solutions in Elastodynamics" (2006), §2 (two-dimensional full space).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from ...errors import ShoalError
from .source import nearest_node, node_position

QUANTITIES = ("velocity", "displacement")
#: The wavelets as derivatives of the Gaussian: (how many times it is differentiated, factor).
_FAMILY = {"gaussian": (0, 1.0), "dgaussian": (1, 1.0), "ricker": (2, None)}


# ----- the source time function and its derivatives and integrals --------------------------------
def _gaussian_level(m: int, k: float, s: np.ndarray) -> np.ndarray:
    """The ``m``-th derivative (``m < 0``: the ``-m``-fold integral from -inf) of
    ``g(s) = exp(-k^2 s^2)``, in closed form for ``-3 <= m <= 3``."""
    g = np.exp(-((k * s) ** 2))
    c = math.sqrt(math.pi) / (2 * k)
    # 1 + erf(k s), accurate also far on the negative side where erf is -1 to rounding
    step = special.erfc(-k * s)
    if m == 0:
        return g
    if m == 1:
        return -2 * k**2 * s * g
    if m == 2:
        return (4 * k**4 * s**2 - 2 * k**2) * g
    if m == 3:
        return (12 * k**4 * s - 8 * k**6 * s**3) * g
    if m == -1:
        return c * step
    if m == -2:
        return c * (s * step + g / (k * math.sqrt(math.pi)))
    if m == -3:
        return c * (s**2 / 2 * step + s * g / (2 * k * math.sqrt(math.pi)) + step / (4 * k**2))
    raise ValueError(f"no closed form for the Gaussian's level {m}")


def time_function(kind: str, f0: float, t0: float, t, n: int = 0) -> np.ndarray:
    """The app's wavelet (``n = 0``), its time derivative (``n = 1``) or its ``-n``-fold integral
    from ``-inf`` (``n = -1, -2, -3``), at times ``t``.

    With ``k = pi f0`` and ``g = exp(-k^2 (t - t0)^2)``: ``gaussian = g``, ``dgaussian = g'``
    and ``ricker = (1 - 2 k^2 (t - t0)^2) g = -g'' / (2 k^2)``; the integrals of ``g`` are
    ``sqrt(pi)/(2k) (1 + erf(k s))`` and its antiderivatives, so every level is exact.

    Parameters
    ----------
    kind : {"ricker", "gaussian", "dgaussian"}
        The wavelet, as ``source.wavelet``.
    f0 : float
        Dominant frequency (Hz).
    t0 : float
        Centre (s).
    t : array_like
        Times (s).
    n : int
        Level: 1 the derivative, 0 the wavelet, -1 its integral, -2 and -3 repeated integrals.

    Returns
    -------
    numpy.ndarray
        Values at ``t`` (float64), of ``t``'s shape.
    """
    if kind not in _FAMILY:
        raise ShoalError(f"unknown wavelet {kind!r}; expected one of {sorted(_FAMILY)}")
    if not -3 <= n <= 1:
        raise ValueError(f"time_function level must be in -3..1, got {n}")
    k = math.pi * f0
    shift, factor = _FAMILY[kind]
    factor = -1 / (2 * k**2) if factor is None else factor
    return factor * _gaussian_level(shift + n, k, np.asarray(t, dtype=float) - t0)


def _fourier(kind: str, f0: float, t0: float, omega: np.ndarray) -> np.ndarray:
    """The wavelet's Fourier transform ``int w(t) exp(-i omega t) dt``."""
    k = math.pi * f0
    shift, factor = _FAMILY[kind]
    factor = -1 / (2 * k**2) if factor is None else factor
    g = math.sqrt(math.pi) / k * np.exp(-(omega**2) / (4 * k**2) - 1j * omega * t0)
    return factor * (1j * omega) ** shift * g


# ----- geometry --------------------------------------------------------------------------------
def _geometry(receivers, source_at) -> tuple[np.ndarray, np.ndarray]:
    """Distances ``r`` (nrec,) and unit vectors ``gamma`` (nrec, 3) from the source."""
    x = np.atleast_2d(np.asarray(receivers, dtype=float)) - np.asarray(source_at, dtype=float)
    r = np.linalg.norm(x, axis=1)
    if np.any(r == 0):
        raise ShoalError("a receiver sits on the source, where the exact solution is singular")
    return r, x / r[:, None]


def _check_medium(vp: float, vs: float, rho: float) -> None:
    if not (vp > 0 and vs > 0 and rho > 0 and vs < vp * math.sqrt(3) / 2):
        raise ShoalError(f"the full space needs vp > 0, 0 < vs < sqrt(3)/2 vp and rho > 0; got "
                         f"vp {vp}, vs {vs}, rho {rho}")


def _tensor(moment) -> np.ndarray:
    """A symmetric 3 x 3 moment tensor from a 3 x 3 array or six values ``xx yy zz xy xz yz``."""
    m = np.asarray(moment, dtype=float)
    if m.shape == (6,):
        xx, yy, zz, xy, xz, yz = m
        m = np.array([[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]])
    if m.shape != (3, 3):
        raise ShoalError(f"a moment tensor needs six values (xx yy zz xy xz yz) or 3 x 3, got shape {m.shape}")
    return m


def _level(quantity: str) -> int:
    if quantity not in QUANTITIES:
        raise ShoalError(f"quantity must be one of {QUANTITIES}, got {quantity!r}")
    return 0 if quantity == "velocity" else -1


# ----- time dependence: exact, or as the leapfrog scheme sees it --------------------------------
class _Exact:
    """Terms of the 3D solutions in the time domain, in closed form: ``at`` the time function
    at level ``n`` delayed by ``delay``; ``near`` the near-field integral
    ``int_a^b tau f_n(t - tau) dtau``, by parts ``a F(t - a) - b F(t - b) + G(t - a) - G(t - b)``
    with ``F``, ``G`` the first and second integrals of ``f_n``. Rows receivers, columns times."""

    def __init__(self, wavelet: str, f0: float, t0: float, t: np.ndarray):
        self.args, self.t = (wavelet, f0, t0), t

    def at(self, delay: np.ndarray, n: int) -> np.ndarray:
        return time_function(*self.args, self.t[None, :] - delay[:, None], n)

    def near(self, a: np.ndarray, b: np.ndarray, n: int) -> np.ndarray:
        return a[:, None] * self.at(a, n - 1) - b[:, None] * self.at(b, n - 1) + self.at(a, n - 2) - self.at(b, n - 2)


class _Leapfrog:
    """The same terms as the staggered leapfrog scheme integrates them in time (exact in space):
    a signal of frequency ``omega`` sampled every ``dt`` obeys the continuous equations at
    ``Omega = (2 / dt) sin(omega dt / 2)`` (``(f(t + dt/2) - f(t - dt/2)) / dt = i Omega f``), so
    each term is ``(i Omega)^n w^(omega) exp(-i Omega delay)`` and the near field's integral is
    ``[exp(-i Omega tau) (1 + i Omega tau) / Omega^2]_a^b``, summed back by ``_inverse``."""

    def __init__(self, wavelet: str, f0: float, t0: float, t: np.ndarray, dt: float, span: float):
        self.t = t
        self.omega = _frequencies(f0, span, dt)
        self.big = 2.0 / dt * np.sin(self.omega * dt / 2.0)
        self.source = _fourier(wavelet, f0, t0, self.omega)

    def _back(self, spectrum: np.ndarray, n: int) -> np.ndarray:
        return _inverse((spectrum * (1j * self.big) ** n * self.source)[..., None], self.omega, self.t)[..., 0]

    def at(self, delay: np.ndarray, n: int) -> np.ndarray:
        return self._back(np.exp(-1j * self.big[None, :] * delay[:, None]), n)

    def near(self, a: np.ndarray, b: np.ndarray, n: int) -> np.ndarray:
        w = self.big[None, :]

        def primitive(tau):
            return np.exp(-1j * w * tau[:, None]) * (1 + 1j * w * tau[:, None]) / w**2

        return self._back(primitive(b) - primitive(a), n)


def _clock(wavelet: str, f0: float, t0: float, t, dt: float | None, r: np.ndarray, vs: float, level: int):
    """The time dependence's evaluator: exact, or the leapfrog's with step ``dt`` (velocity only)."""
    t = np.atleast_1d(np.asarray(t, dtype=float))
    if wavelet not in _FAMILY:
        raise ShoalError(f"unknown wavelet {wavelet!r}; expected one of {sorted(_FAMILY)}")
    if dt is None:
        return _Exact(wavelet, f0, t0, t)
    if level != 0:
        raise ShoalError("the leapfrog's solution (dt given) is a velocity; the scheme has no displacement")
    return _Leapfrog(wavelet, f0, t0, t, dt, _span(t, t0, f0, r, vs))


# ----- three dimensions ------------------------------------------------------------------------
def force_3d(receivers, t, *, source_at, direction, vp: float, vs: float, rho: float, wavelet: str,
             f0: float, t0: float, amplitude: float = 1.0, quantity: str = "velocity",
             dt: float | None = None) -> np.ndarray:
    """Stokes' solution: the motion at ``receivers`` of a point force ``amplitude * w(t)`` along
    ``direction`` in a homogeneous full space.

    Aki & Richards (2002) eq. 4.23, for a force ``X0(t)`` along ``x_j``::

        u_i = (3 g_i g_j - d_ij) / (4 pi rho r^3) int_{r/alpha}^{r/beta} tau X0(t - tau) dtau
            + g_i g_j / (4 pi rho alpha^2 r) X0(t - r/alpha)
            - (g_i g_j - d_ij) / (4 pi rho beta^2 r) X0(t - r/beta)

    (near, intermediate-and-far P, far S). The velocity is the same with ``X0`` replaced by
    ``dX0/dt``; the near-field integral is taken by parts in closed form (``_Exact``). With
    ``dt``, the velocity the staggered leapfrog scheme converges to as the grid is refined at
    that step (``_Leapfrog``): what is left between it and a run is the spatial error alone.

    Parameters
    ----------
    receivers : array_like
        Positions (nrec, 3) in metres, none on the source.
    t : array_like
        Times (nt,) in seconds.
    source_at, direction : array_like
        The force's position (m) and direction (normalised here).
    vp, vs, rho : float
        P and S speeds (m/s) and density (kg/m^3).
    wavelet : {"ricker", "gaussian", "dgaussian"}
        The force's time function ``w``, centred at ``t0`` (s) with dominant frequency ``f0`` (Hz).
    amplitude : float
        The force's magnitude (N).
    quantity : {"velocity", "displacement"}
        What to return.
    dt : float, optional
        The leapfrog's time step (s): its time-discrete solution (a velocity) instead of the exact one.

    Returns
    -------
    numpy.ndarray
        (nrec, nt, 3) float64: x, y and z components.
    """
    _check_medium(vp, vs, rho)
    r, g = _geometry(receivers, source_at)
    d = np.asarray(direction, dtype=float)
    d = d / np.linalg.norm(d)
    level = _level(quantity)
    clock = _clock(wavelet, f0, t0, t, dt, r, vs, level)
    n = level + 1  # the displacement uses X0 itself, the velocity its derivative
    gd = g @ d  # (nrec,)
    near_dir = 3 * g * gd[:, None] - d  # (3 g_i g_j - d_ij) d_j
    p_dir = g * gd[:, None]
    s_dir = p_dir - d
    near = clock.near(r / vp, r / vs, n) / r[:, None] ** 3
    p = clock.at(r / vp, n) / (vp**2 * r[:, None])
    s = clock.at(r / vs, n) / (vs**2 * r[:, None])
    u = near[..., None] * near_dir[:, None, :] + p[..., None] * p_dir[:, None, :] - s[..., None] * s_dir[:, None, :]
    return amplitude / (4 * math.pi * rho) * u


def moment_3d(receivers, t, *, source_at, moment, vp: float, vs: float, rho: float, wavelet: str,
              f0: float, t0: float, amplitude: float = 1.0, quantity: str = "velocity",
              dt: float | None = None) -> np.ndarray:
    """The motion at ``receivers`` of a point moment tensor whose rate is
    ``amplitude * m * w(t)``, in a homogeneous full space.

    Aki & Richards (2002) eq. 4.29, for a moment ``M_pq(t)``::

        u_n = (15 g_n g_p g_q - 3 g_n d_pq - 3 g_p d_nq - 3 g_q d_np) / (4 pi rho r^4)
                  int_{r/alpha}^{r/beta} tau M_pq(t - tau) dtau
            + (6 g_n g_p g_q - g_n d_pq - g_p d_nq - g_q d_np) / (4 pi rho alpha^2 r^2) M_pq(t - r/alpha)
            - (6 g_n g_p g_q - g_n d_pq - g_p d_nq - 2 g_q d_np) / (4 pi rho beta^2 r^2) M_pq(t - r/beta)
            + g_n g_p g_q / (4 pi rho alpha^3 r) dM_pq/dt(t - r/alpha)
            - (g_n g_p g_q - g_q d_np) / (4 pi rho beta^3 r) dM_pq/dt(t - r/beta)

    with ``M = amplitude m W`` (``W`` the wavelet's integral); the velocity replaces ``M`` by
    its rate. An explosion (``m`` the identity) radiates P only:
    ``u = g / (4 pi rho alpha^2) (M(t - r/alpha) / r^2 + dM/dt(t - r/alpha) / (alpha r))``.
    ``dt`` as in ``force_3d``.

    Parameters
    ----------
    receivers : array_like
        Positions (nrec, 3) in metres, none on the source.
    t : array_like
        Times (nt,) in seconds.
    source_at : array_like
        The source's position (m).
    moment : array_like
        ``m``: six values ``xx yy zz xy xz yz`` (the app's order) or a symmetric 3 x 3 array.
    vp, vs, rho : float
        P and S speeds (m/s) and density (kg/m^3).
    wavelet : {"ricker", "gaussian", "dgaussian"}
        The moment rate's time function, centred at ``t0`` (s) with dominant frequency ``f0`` (Hz).
    amplitude : float
        The moment's scale (N m).
    quantity : {"velocity", "displacement"}
        What to return.
    dt : float, optional
        The leapfrog's time step (s): its time-discrete solution (a velocity) instead of the exact one.

    Returns
    -------
    numpy.ndarray
        (nrec, nt, 3) float64: x, y and z components.
    """
    _check_medium(vp, vs, rho)
    r, g = _geometry(receivers, source_at)
    m = _tensor(moment)
    n = _level(quantity)  # the level standing for M: W (-1) in the displacement, w (0) in the velocity
    clock = _clock(wavelet, f0, t0, t, dt, r, vs, n)

    gmg = np.einsum("rp,pq,rq->r", g, m, g)[:, None] * g  # g_n (g . m g)
    trm = np.trace(m) * g  # g_n m_pp
    mg = g @ m  # (m g)_n
    c_near = 15 * gmg - 3 * trm - 6 * mg
    c_p2 = 6 * gmg - trm - 2 * mg
    c_s2 = 6 * gmg - trm - 3 * mg
    c_p1 = gmg
    c_s1 = gmg - mg
    a, b = r / vp, r / vs
    terms = ((clock.near(a, b, n) / r[:, None] ** 4, c_near),
             (clock.at(a, n) / (vp**2 * r[:, None] ** 2), c_p2),
             (-clock.at(b, n) / (vs**2 * r[:, None] ** 2), c_s2),
             (clock.at(a, n + 1) / (vp**3 * r[:, None]), c_p1),
             (-clock.at(b, n + 1) / (vs**3 * r[:, None]), c_s1))
    u = sum(f[..., None] * c[:, None, :] for f, c in terms)
    return amplitude / (4 * math.pi * rho) * u


# ----- two dimensions (plane strain and anti-plane) ---------------------------------------------
def _span(t: np.ndarray, t0: float, f0: float, r: np.ndarray, vs: float) -> float:
    """From the source's start to the last time asked for or the S wave's passing (s)."""
    return max(float(np.max(t)), 0.0) + float(np.max(r)) / vs + t0 + 3 / f0


def _frequencies(f0: float, span: float, dt: float | None = None) -> np.ndarray:
    """Angular frequencies of the trapezoid rule for the inverse Fourier integral: up to where
    the wavelet's spectrum is below 1e-16 of its peak (or the step's Nyquist frequency), spaced so
    that the rule's period (its aliasing in time) is 40 times ``span``."""
    k = math.pi * f0
    top = 2 * k * math.sqrt(math.log(1e16)) * 1.3
    if dt is not None:
        top = min(top, math.pi / dt)
    step = 2 * math.pi / (40 * span)
    return np.arange(1, int(top / step) + 1) * step  # omega = 0 adds nothing to a velocity


def _green_2d(omega: np.ndarray, r: np.ndarray, vp: float, vs: float, rho: float):
    """The 2D Green's tensor's radial functions for time dependence ``exp(+i omega t)`` (NumPy's
    convention: outgoing waves are ``H^(2)``): ``G_ij = A d_ij + B g_i g_j`` in the x-z plane,
    ``G_yy = C``, their r-derivatives ``A', B', C'``; rows receivers, columns frequencies."""
    mu = rho * vs**2
    ks, kp = omega[None, :] / vs, omega[None, :] / vp
    zs, zp = ks * r[:, None], kp * r[:, None]
    h = {(n, which): special.hankel2(n, z) for n in (0, 1, 2) for which, z in (("s", zs), ("p", zp))}
    q = (vs / vp) ** 2
    c = -1j / (4 * mu)
    rr = r[:, None]
    a = c * (h[0, "s"] - h[1, "s"] / zs + q * h[1, "p"] / zp)
    b = c * (h[2, "s"] - q * h[2, "p"])
    cc = c * h[0, "s"]
    da = c * (-ks * h[1, "s"] + h[2, "s"] / rr - q * h[2, "p"] / rr)
    db = c * (ks * h[1, "s"] - 2 * h[2, "s"] / rr - q * (kp * h[1, "p"] - 2 * h[2, "p"] / rr))
    dc = -c * ks * h[1, "s"]
    return a, b, cc, da, db, dc


def _inverse(spectrum: np.ndarray, omega: np.ndarray, t: np.ndarray) -> np.ndarray:
    """``(1/pi) Re int_0^inf S(omega) exp(i omega t) domega`` by the trapezoid rule, rows of
    ``spectrum`` (receivers, frequencies, components) to (receivers, times, components)."""
    phase = np.exp(1j * omega[:, None] * t[None, :])  # (nw, nt)
    return (omega[1] - omega[0]) / math.pi * np.einsum("rwc,wt->rtc", spectrum, phase).real


def _spectral(f0: float, t0: float, t: np.ndarray, r: np.ndarray, vs: float, dt: float | None):
    """The frequencies of the inverse transform and where the equations are taken: ``omega``
    itself, or the leapfrog's ``Omega = (2 / dt) sin(omega dt / 2)``."""
    omega = _frequencies(f0, _span(t, t0, f0, r, vs), dt)
    return omega, (omega if dt is None else 2.0 / dt * np.sin(omega * dt / 2.0))


def _plane(receivers, source_at) -> tuple[np.ndarray, np.ndarray]:
    """Distances and unit vectors in the x-z plane (the y coordinates are ignored)."""
    x = np.atleast_2d(np.asarray(receivers, dtype=float)).copy()
    x[:, 1] = 0.0
    s = np.asarray(source_at, dtype=float).copy()
    s[1] = 0.0
    return _geometry(x, s)


def force_2d(receivers, t, *, source_at, direction, vp: float, vs: float, rho: float, wavelet: str,
             f0: float, t0: float, amplitude: float = 1.0, dt: float | None = None) -> np.ndarray:
    """The velocity at ``receivers`` of a line force (per metre along y) ``amplitude * w(t)``
    along ``direction``, in a homogeneous full space in plane strain (nothing varies along y).

    In the frequency domain (time dependence ``exp(i omega t)``, ``k = omega / c``), with
    ``G_ij = A d_ij + B g_i g_j`` for in-plane ``i, j`` (Kausel 2006, §2; from
    ``G = (k_s^2 d phi_s + grad grad (phi_s - phi_p)) / (rho omega^2)``,
    ``phi = -i/4 H0^(2)(k r)``)::

        A = -i/(4 mu) [H0(k_s r) - H1(k_s r)/(k_s r) + (beta/alpha)^2 H1(k_p r)/(k_p r)]
        B = -i/(4 mu) [H2(k_s r) - (beta/alpha)^2 H2(k_p r)]
        G_yy = -i/(4 mu) H0(k_s r)  (anti-plane, SH)

    and ``v(t) = (1/pi) Re int_0^inf i omega F w^(omega) G(omega) exp(i omega t) domega``,
    evaluated by the trapezoid rule (``_frequencies`` says how finely). With ``dt``, the
    leapfrog's time-discrete solution: ``G`` and ``i omega`` taken at
    ``Omega = (2 / dt) sin(omega dt / 2)`` (see ``_Leapfrog``).

    Parameters
    ----------
    receivers : array_like
        Positions (nrec, 3) in metres (y ignored), none on the source.
    t : array_like
        Times (nt,) in seconds.
    source_at, direction : array_like
        The force's position (m, y ignored) and direction (3 components, normalised here).
    vp, vs, rho : float
        P and S speeds (m/s) and density (kg/m^3).
    wavelet : {"ricker", "gaussian", "dgaussian"}
        The force's time function, centred at ``t0`` (s) with dominant frequency ``f0`` (Hz).
    amplitude : float
        The force per metre (N/m).
    dt : float, optional
        The leapfrog's time step (s): its time-discrete solution instead of the exact one.

    Returns
    -------
    numpy.ndarray
        (nrec, nt, 3) float64 velocities: x, y and z components.
    """
    _check_medium(vp, vs, rho)
    r, g = _plane(receivers, source_at)
    d = np.asarray(direction, dtype=float)
    d = d / np.linalg.norm(d)
    t = np.atleast_1d(np.asarray(t, dtype=float))
    omega, big = _spectral(f0, t0, t, r, vs, dt)
    a, b, c, *_ = _green_2d(big, r, vp, vs, rho)
    inplane = d * np.array([1.0, 0.0, 1.0])
    gd = g @ inplane
    gy = np.zeros_like(g)
    gy[:, 1] = d[1]
    spec = a[..., None] * inplane + (b * gd[:, None])[..., None] * g[:, None, :] + c[..., None] * gy[:, None, :]
    spec = spec * (1j * big * amplitude * _fourier(wavelet, f0, t0, omega))[None, :, None]
    return _inverse(spec, omega, t)


def moment_2d(receivers, t, *, source_at, moment, vp: float, vs: float, rho: float, wavelet: str,
              f0: float, t0: float, amplitude: float = 1.0, dt: float | None = None) -> np.ndarray:
    """The velocity at ``receivers`` of a line moment tensor (per metre along y) whose rate is
    ``amplitude * m * w(t)``, in a homogeneous full space with nothing varying along y.

    ``u_n = M_pq dG_np/dxi_q = -M_pq dG_np/dx_q`` (Aki & Richards 2002, eq. 3.23) with the 2D
    tensor of ``force_2d``; only ``q`` in the x-z plane contributes (nothing varies along y), so
    ``m_yy`` radiates nothing and ``m_xy``, ``m_yz`` radiate SH. With ``g_n`` the in-plane
    direction, ``dG_np/dx_q = A' g_q d_np + B' g_n g_p g_q + B ((d_nq - g_n g_q) g_p
    + g_n (d_pq - g_p g_q)) / r`` and ``dG_yy/dx_q = C' g_q``. ``dt`` as in ``force_2d``.

    Parameters
    ----------
    receivers : array_like
        Positions (nrec, 3) in metres (y ignored), none on the source.
    t : array_like
        Times (nt,) in seconds.
    source_at : array_like
        The source's position (m, y ignored).
    moment : array_like
        ``m``: six values ``xx yy zz xy xz yz`` or a symmetric 3 x 3 array.
    vp, vs, rho : float
        P and S speeds (m/s) and density (kg/m^3).
    wavelet : {"ricker", "gaussian", "dgaussian"}
        The moment rate's time function, centred at ``t0`` (s) with dominant frequency ``f0`` (Hz).
    amplitude : float
        The moment's scale per metre (N m/m).
    dt : float, optional
        The leapfrog's time step (s): its time-discrete solution instead of the exact one.

    Returns
    -------
    numpy.ndarray
        (nrec, nt, 3) float64 velocities: x, y and z components.
    """
    _check_medium(vp, vs, rho)
    r, g = _plane(receivers, source_at)
    m = _tensor(moment)
    t = np.atleast_1d(np.asarray(t, dtype=float))
    omega, big = _spectral(f0, t0, t, r, vs, dt)
    a, b, c, da, db, dc = _green_2d(big, r, vp, vs, rho)
    plane = np.diag([1.0, 0.0, 1.0])
    mp = plane @ m @ plane  # in-plane p, q
    gmg = np.einsum("rp,pq,rq->r", g, mp, g)
    mg = g @ mp  # (m g)_n over in-plane q
    tr = np.trace(mp)
    # -M_pq dG_np/dx_q for in-plane n, p, q (the d_np, g_n g_p g_q and B/r terms in turn)
    inplane = (da[..., None] * mg[:, None, :] + (db * gmg[:, None])[..., None] * g[:, None, :]
               + (b / r[:, None])[..., None] * (mg - 2 * gmg[:, None] * g + tr * g)[:, None, :])
    # anti-plane: n = p = y, q in the plane: M_yq dG_yy/dx_q
    sh = dc * (g @ m[1])[:, None]
    spec = -inplane
    spec[..., 1] -= sh
    # the moment is amplitude m W(t), so the velocity's spectrum takes the rate's: amplitude w^
    spec = spec * (amplitude * _fourier(wavelet, f0, t0, omega))[None, :, None]
    return _inverse(spec, omega, t)


# ----- the app's receivers ---------------------------------------------------------------------
def seismograms(params, t, at_nodes: bool = True, dt: float | None = None) -> np.ndarray:
    """The exact velocities the app's receivers should record for homogeneous ``params``.

    The source sits at ``source_at``: put it on the node(s) the app injects it at (a force's
    component's velocity node; an explosion's normal-stress node) for the two to agree to the
    scheme's order. A general moment's shear components enter the app at their own shear nodes,
    half a cell away from the diagonal's.

    Parameters
    ----------
    params : SeismicParams
        A homogeneous medium (one layer, no gradient); its source, wavelet and receivers.
    t : array_like
        Times (nt,) in seconds.
    at_nodes : bool
        Evaluate each component at its own staggered node nearest the receiver, as the app
        samples it (else at the receiver's position).
    dt : float, optional
        The leapfrog's time step (s): its time-discrete solution instead of the exact one.

    Returns
    -------
    numpy.ndarray
        (nrec, nt, 3) float64 velocities (x, y, z).
    """
    if len(params.layers) != 1 or any(any(g) for g in params.gradients):
        raise ShoalError("the exact solution needs a homogeneous medium: one layer and no gradient")
    _, vp, vs, rho = map(float, params.layers[0])
    medium = dict(vp=vp, vs=vs, rho=rho, wavelet=params.wavelet, f0=params.f0, t0=params.delay,
                  amplitude=params.amplitude, source_at=params.point(params.source_at), dt=dt)
    three = params.ndim == 3
    if params.source == "force":
        solve, extra = (force_3d if three else force_2d), dict(direction=params.direction)
    else:
        moment = np.eye(3) if params.source == "explosion" else params.moment
        solve, extra = (moment_3d if three else moment_2d), dict(moment=moment)
    points = np.array([params.point(p) for p in params.receivers], dtype=float).reshape(-1, 3)
    if not at_nodes:
        return solve(points, t, **medium, **extra)
    out = np.empty((len(points), np.size(t), 3))
    for c, name in enumerate(("vx", "vy", "vz")):
        nodes = [node_position(name, nearest_node(name, p, params.dx, params.shape), params.dx) for p in points]
        out[..., c] = solve(np.array(nodes).reshape(-1, 3), t, **medium, **extra)[..., c]
    return out
