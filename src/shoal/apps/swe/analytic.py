"""Exact solutions of the shallow-water equations, for verification.

All functions take NumPy arrays (or scalars) of positions and return arrays of the same shape.
The equations they solve, with depth ``h``, velocity ``(u, v)``, bed elevation ``b`` and free
surface ``h + b``::

    h_t + (h u)_x + (h v)_y = 0
    (h u)_t + (h u^2 + g h^2 / 2)_x + (h u v)_y = -g h b_x
    (h v)_t + (h u v)_x + (h v^2 + g h^2 / 2)_y = -g h b_y

``ritter``            dam break over a dry flat bed (1D)
``stoker``            dam break over a wet flat bed: a rarefaction and a bore (1D)
``thacker``           planar surface oscillating in a paraboloid basin: a moving shoreline
``thacker_1d``        tilted surface oscillating in a parabolic trough: two moving shorelines (1D)
``vortex``            a steady vortex over a seamount: smooth, 2D, moving, with bathymetry
``bernoulli_depth``   steady flow of a given discharge over a bed (1D): the subcritical depth

Sources: Delestre et al., "SWASHES: a compilation of shallow water analytic solutions for
hydraulic and environmental studies", Int. J. Numer. Meth. Fluids 72 (2013) 269-300, cited
below by section.
"""

from __future__ import annotations

import math

import numpy as np

from ...errors import ShoalError


def _require_positive(**values: float) -> None:
    """One clear line for the first value that is not a positive finite number."""
    for name, value in values.items():
        if not (math.isfinite(value) and value > 0):
            raise ShoalError(f"{name} must be a positive number, got {value!r}")


def ritter(x, t: float, x0: float, h0: float, g: float = 9.81) -> tuple[np.ndarray, np.ndarray]:
    """Ritter's dam break over a dry, flat, frictionless bed: depth and velocity at ``x``.

    Ritter, "Die Fortpflanzung der Wasserwellen", Z. Ver. Dtsch. Ing. 36 (1892) 947-954;
    SWASHES §4.1.2. With ``c0 = sqrt(g h0)`` and ``s = x - x0``::

        h = h0,                          u = 0                  for s <= -c0 t
        h = (2 c0 - s / t)^2 / (9 g),    u = 2 (s / t + c0) / 3  for -c0 t < s < 2 c0 t
        h = 0,                           u = 0                  for s >= 2 c0 t

    The rarefaction's head moves upstream at ``c0``, the dry front downstream at ``2 c0``. Valid
    while neither has reached a wall; at ``t == 0`` it is the step (``h0`` for ``x < x0``).

    Parameters
    ----------
    x : array_like
        Positions (m).
    t : float
        Time since the dam vanished (s), ``>= 0``.
    x0 : float
        The dam's position (m); water upstream (``x < x0``), dry bed downstream.
    h0 : float
        Depth upstream of the dam (m).
    g : float
        Gravity (m/s²).

    Returns
    -------
    h, u : ndarray
        Depth (m) and velocity (m/s), shaped like ``x``.
    """
    _require_positive(h0=h0, g=g)
    if not (math.isfinite(t) and t >= 0):
        raise ShoalError(f"t must be a non-negative number, got {t!r}")
    s = np.asarray(x, dtype=float) - x0
    if t == 0:
        h = np.where(s < 0, h0, 0.0)
        return h, np.zeros_like(h)
    c0 = math.sqrt(g * h0)
    fan = (s > -c0 * t) & (s < 2 * c0 * t)
    h = np.where(s <= -c0 * t, h0, np.where(fan, (2 * c0 - s / t) ** 2 / (9 * g), 0.0))
    u = np.where(fan, 2 * (s / t + c0) / 3, 0.0)
    return h, u


def ritter_front(t: float, x0: float, h0: float, g: float = 9.81) -> float:
    """Position of Ritter's dry front at time ``t``: ``x0 + 2 sqrt(g h0) t`` (see ``ritter`` for
    the dam's position ``x0``, upstream depth ``h0`` and gravity ``g``)."""
    _require_positive(h0=h0, g=g)
    return x0 + 2 * math.sqrt(g * h0) * t


def stoker(x, t: float, x0: float, hl: float, hr: float, g: float = 9.81) -> tuple[np.ndarray, np.ndarray]:
    """Stoker's dam break over a wet, flat, frictionless bed: depth and velocity at ``x``.

    Stoker, "Water Waves", Interscience (1957); SWASHES §4.1.1. With ``cl = sqrt(g hl)``,
    ``cr = sqrt(g hr)``, ``s = x - x0`` and ``cm`` the root in ``(cr, cl)`` of
    ``-8 g hr cm^2 (cl - cm)^2 + (cm^2 - g hr)^2 (cm^2 + g hr) = 0``::

        h = hl,                         u = 0                  for s <= -cl t
        h = (2 cl - s / t)^2 / (9 g),   u = 2 (s / t + cl) / 3  for -cl t < s <= (2 cl - 3 cm) t
        h = cm^2 / g,                   u = 2 (cl - cm)         for (2 cl - 3 cm) t < s <= S t
        h = hr,                         u = 0                  for s > S t

    a rarefaction upstream and a bore moving downstream at ``S = 2 cm^2 (cl - cm) / (cm^2 -
    cr^2)``. ``hr = 0`` is Ritter's dry bed (:func:`ritter`). Valid while neither wave has
    reached a wall; at ``t == 0`` it is the step.

    Parameters
    ----------
    x : array_like
        Positions (m).
    t : float
        Time since the dam vanished (s), ``>= 0``.
    x0 : float
        The dam's position (m).
    hl, hr : float
        Depths upstream (``x < x0``) and downstream (m), ``hl > hr >= 0``.
    g : float
        Gravity (m/s²).

    Returns
    -------
    h, u : ndarray
        Depth (m) and velocity (m/s), shaped like ``x``.
    """
    _require_positive(hl=hl, g=g)
    if not (math.isfinite(hr) and 0 <= hr < hl):
        raise ShoalError(f"hr must be a number in [0, hl = {hl!r}), got {hr!r}")
    if hr == 0:
        return ritter(x, t, x0, hl, g)
    if not (math.isfinite(t) and t >= 0):
        raise ShoalError(f"t must be a non-negative number, got {t!r}")
    s = np.asarray(x, dtype=float) - x0
    if t == 0:
        h = np.where(s < 0, hl, hr)
        return h, np.zeros_like(h)
    cl, cm = math.sqrt(g * hl), stoker_celerity(hl, hr, g)
    bore = 2 * cm * cm * (cl - cm) / (cm * cm - g * hr)
    fan = (s > -cl * t) & (s <= (2 * cl - 3 * cm) * t)
    middle = (s > (2 * cl - 3 * cm) * t) & (s <= bore * t)
    h = np.where(s <= -cl * t, hl, np.where(fan, (2 * cl - s / t) ** 2 / (9 * g), np.where(middle, cm * cm / g, hr)))
    u = np.where(fan, 2 * (s / t + cl) / 3, np.where(middle, 2 * (cl - cm), 0.0))
    return h, u


def stoker_celerity(hl: float, hr: float, g: float = 9.81) -> float:
    """``cm = sqrt(g hm)`` of the state between Stoker's rarefaction and bore (see :func:`stoker`
    for the depths ``hl > hr > 0`` and gravity ``g``)."""
    _require_positive(hl=hl, hr=hr, g=g)
    cl, cr = math.sqrt(g * hl), math.sqrt(g * hr)

    def f(c: float) -> float:
        return -8 * g * hr * c * c * (cl - c) ** 2 + (c * c - g * hr) ** 2 * (c * c + g * hr)

    from scipy.optimize import brentq  # here, not on import: every run imports the app, few ask this

    return float(brentq(f, cr, cl, xtol=1e-15 * cl, rtol=4 * np.finfo(float).eps))


def bernoulli_depth(b, q: float, energy: float, g: float = 9.81) -> np.ndarray:
    """The subcritical depth of a steady 1D flow of discharge ``q`` (m²/s) over the bed ``b``:
    the root ``h > (q^2 / g)^(1/3)`` of Bernoulli's relation ``h + q^2 / (2 g h^2) + b =
    energy`` (SWASHES §3.1.1 with a bed of its own; ``energy`` in metres, ``g`` gravity).

    Newton's iteration from ``energy - b`` decreases to the root (the relation is convex and
    increasing above the critical depth), to round-off.

    Raises
    ------
    ShoalError
        Where ``energy - b`` is at most 1.5 times the critical depth: no subcritical flow passes
        there (the bed chokes it).
    """
    _require_positive(g=g)
    b = np.asarray(b, dtype=float)
    critical = (q * q / g) ** (1 / 3)
    head = energy - b
    if (head <= 1.5 * critical).any():
        raise ShoalError(f"no subcritical flow of {q:g} m^2/s passes a bed {float(head.min()):g} m below the energy "
                         f"line: it needs more than 1.5 times the critical depth ({1.5 * critical:g} m)")
    h = head.copy()
    for _ in range(100):
        f = h + q * q / (2 * g * h * h) + b - energy
        step = f / (1 - q * q / (g * h**3))
        h = h - step
        if (np.abs(step) <= 4 * np.finfo(float).eps * h).all():
            break
    return h


def thacker_frequency(h0: float, a: float, g: float = 9.81) -> float:
    """Angular frequency ``omega = sqrt(2 g h0) / a`` (rad/s) of Thacker's planar oscillation in
    the basin of depth ``h0`` and rim radius ``a`` (see ``thacker_bathymetry``), gravity ``g``."""
    _require_positive(h0=h0, a=a, g=g)
    return math.sqrt(2 * g * h0) / a


def thacker_period(h0: float, a: float, g: float = 9.81) -> float:
    """Period ``2 pi a / sqrt(2 g h0)`` (s) of Thacker's planar oscillation in the basin of depth
    ``h0`` and rim radius ``a`` (see ``thacker_bathymetry``), gravity ``g``."""
    return 2 * math.pi / thacker_frequency(h0, a, g)


def thacker_bathymetry(x, y, centre: tuple[float, float], h0: float, a: float) -> np.ndarray:
    """The paraboloid basin of Thacker's solutions: ``b = -h0 (1 - r^2 / a^2)``.

    ``r`` is the distance from ``centre``; the bed's lowest point is ``-h0`` at the centre and
    it crosses the still-water level 0 at ``r = a`` (SWASHES §4.2.2, there ``z`` with the
    centre at ``(L/2, L/2)``).

    Parameters
    ----------
    x, y : array_like
        Positions (m), broadcast together.
    centre : (float, float)
        The basin's centre (m).
    h0 : float
        Depth of the basin's lowest point below level 0 (m).
    a : float
        Radius at which the bed reaches level 0 (m).

    Returns
    -------
    ndarray
        Bed elevation (m).
    """
    _require_positive(h0=h0, a=a)
    dx, dy = np.asarray(x, dtype=float) - centre[0], np.asarray(y, dtype=float) - centre[1]
    return -h0 * (1 - (dx * dx + dy * dy) / (a * a))


def thacker(x, y, t: float, centre: tuple[float, float], h0: float, a: float, eta: float,
            g: float = 9.81) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Thacker's planar surface oscillating without friction in the paraboloid basin.

    Thacker, "Some exact solutions to the nonlinear shallow-water wave equations", J. Fluid
    Mech. 107 (1981) 499-508; SWASHES §4.2.2. With ``omega = sqrt(2 g h0) / a`` and
    ``(X, Y)`` the position relative to ``centre``, the free surface is the tilted plane::

        h + b = (eta h0 / a^2) (2 X cos(omega t) + 2 Y sin(omega t) - eta)

    over the bed ``b`` of ``thacker_bathymetry``, so that where the water is wet::

        h = (h0 / a^2) (a^2 - (X - eta cos(omega t))^2 - (Y - eta sin(omega t))^2)
        u = -eta omega sin(omega t),    v = eta omega cos(omega t)

    The wet region is a disc of radius ``a`` whose centre circles the basin's centre at
    distance ``eta`` with the velocity of the water; outside it ``h = u = v = 0``. The volume
    ``pi h0 a^2 / 2`` is constant.

    Parameters
    ----------
    x, y : array_like
        Positions (m), broadcast together.
    t : float
        Time (s).
    centre : (float, float)
        The basin's centre (m).
    h0 : float
        Depth of the basin's lowest point below level 0 (m).
    a : float
        Radius at which the bed reaches level 0 (m).
    eta : float
        Amplitude (m): the distance between the wet disc's centre and the basin's.
    g : float
        Gravity (m/s²).

    Returns
    -------
    h, u, v : ndarray
        Depth (m) and velocity (m/s), broadcast shape of ``x`` and ``y``.
    """
    omega = thacker_frequency(h0, a, g)
    cos, sin = math.cos(omega * t), math.sin(omega * t)
    dx, dy = np.asarray(x, dtype=float) - centre[0], np.asarray(y, dtype=float) - centre[1]
    surface = eta * h0 / (a * a) * (2 * dx * cos + 2 * dy * sin - eta)
    h = np.maximum(surface - thacker_bathymetry(x, y, centre, h0, a), 0.0)
    wet = h > 0
    return h, np.where(wet, -eta * omega * sin, 0.0), np.where(wet, eta * omega * cos, 0.0)


def thacker_shoreline(t: float, centre: tuple[float, float], h0: float, a: float, eta: float, g: float,
                      angles) -> tuple[np.ndarray, np.ndarray]:
    """Points of the exact wet/dry boundary of ``thacker`` at time ``t``.

    The shoreline is the circle of radius ``a`` about ``centre + eta (cos(omega t),
    sin(omega t))``; the points are on it at the given polar ``angles`` (rad) about that moving
    centre. ``h0`` (basin depth), ``eta`` (amplitude) and ``g`` (gravity) are those of
    ``thacker``.

    Returns
    -------
    xs, ys : ndarray
        Coordinates (m), shaped like ``angles``.
    """
    omega = thacker_frequency(h0, a, g)
    angles = np.asarray(angles, dtype=float)
    xs = centre[0] + eta * math.cos(omega * t) + a * np.cos(angles)
    ys = centre[1] + eta * math.sin(omega * t) + a * np.sin(angles)
    return xs, ys


def thacker_1d(x, t: float, xc: float, h0: float, a: float, d: float,
               g: float = 9.81) -> tuple[np.ndarray, np.ndarray]:
    """Thacker's tilted surface oscillating without friction in the parabolic trough
    ``b = -h0 (1 - (x - xc)^2 / a^2)`` (:func:`thacker_bathymetry` along x).

    Thacker, J. Fluid Mech. 107 (1981) 499-508; SWASHES §4.2.1 (there ``B = d omega`` and the
    trough's axis at ``L/2``). With ``omega = sqrt(2 g h0) / a``, the wet interval ``|x - xc -
    d cos(omega t)| < a`` moves with the water::

        h = h0 (1 - (x - xc - d cos(omega t))^2 / a^2),    u = -d omega sin(omega t)

    and the surface ``h + b = (h0 d / a^2) (2 (x - xc) cos(omega t) - d cos^2(omega t))`` is a
    plane through the wet interval; outside it ``h = u = 0``.

    Parameters
    ----------
    x : array_like
        Positions (m).
    t : float
        Time (s).
    xc : float
        The trough's axis (m).
    h0 : float
        Depth of the trough's lowest point below level 0 (m).
    a : float
        Half width of the trough at level 0 (m).
    d : float
        Amplitude (m): the wet interval's centre swings between ``xc - d`` and ``xc + d``.
    g : float
        Gravity (m/s²).

    Returns
    -------
    h, u : ndarray
        Depth (m) and velocity (m/s), shaped like ``x``.
    """
    omega = thacker_frequency(h0, a, g)
    s = np.asarray(x, dtype=float) - xc - d * math.cos(omega * t)
    h = np.maximum(h0 * (1 - s * s / (a * a)), 0.0)
    return h, np.where(h > 0, -d * omega * math.sin(omega * t), 0.0)


def vortex_bathymetry(x, y, centre: tuple[float, float], depth: float, radius: float, bump: float) -> np.ndarray:
    """The bed under ``vortex``: a Gaussian seamount ``b = -depth + bump exp(-r^2 / radius^2)``
    about ``centre`` (``r`` the distance from it, ``x`` and ``y`` positions broadcast together),
    in metres like ``depth``, ``radius`` and ``bump``."""
    _require_positive(depth=depth, radius=radius)
    dx, dy = np.asarray(x, dtype=float) - centre[0], np.asarray(y, dtype=float) - centre[1]
    return -depth + bump * np.exp(-(dx * dx + dy * dy) / (radius * radius))


def vortex(x, y, centre: tuple[float, float], depth: float, radius: float, speed: float, bump: float,
           g: float = 9.81) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A steady vortex in cyclostrophic balance over the seamount of ``vortex_bathymetry``.

    A circular flow of azimuthal speed ``V(r)`` is steady over any radially symmetric bed when
    the surface's slope balances the centripetal acceleration, ``g d(h + b)/dr = V^2 / r``
    (the balance behind the vortex tests of Ricchiuto & Bollermann, J. Comput. Phys. 228 (2009)
    1071-1115, at rest here and over a bed). With ``rho = r / radius``::

        V = speed rho exp((1 - rho^2) / 2)
        h + b = -(speed^2 / (2 g)) exp(1 - rho^2)

    counter-clockwise, fastest (``speed``) at ``r = radius``. The speed decays like
    ``rho exp(-rho^2 / 2)``: at ``r = 8 radius`` it is below ``1e-12`` of its peak. Every
    field is smooth, the flow is 2D, moving, and over bathymetry: its discrete steadiness
    tests fluxes and bed source terms together, and its error converges at the scheme's order.

    Parameters
    ----------
    x, y : array_like
        Positions (m), broadcast together.
    centre : (float, float)
        The vortex's and the seamount's centre (m).
    depth : float
        Depth of the bed far away below level 0 (m).
    radius : float
        Radius of fastest flow and the seamount's width (m).
    speed : float
        Peak azimuthal speed (m/s); negative turns clockwise.
    bump : float
        The seamount's height (m).
    g : float
        Gravity (m/s²).

    Returns
    -------
    h, u, v : ndarray
        Depth (m) and velocity (m/s), broadcast shape of ``x`` and ``y``.
    """
    _require_positive(g=g)
    if depth - bump - speed * speed * math.e / (2 * g) <= 0:
        raise ShoalError(f"the vortex dries the seamount: need depth - bump > speed^2 e / (2 g) = "
                         f"{speed * speed * math.e / (2 * g):.6g} m, got {depth - bump:.6g} m")
    dx, dy = np.asarray(x, dtype=float) - centre[0], np.asarray(y, dtype=float) - centre[1]
    rho2 = (dx * dx + dy * dy) / (radius * radius)
    surface = -speed * speed / (2 * g) * np.exp(1 - rho2)
    h = surface - vortex_bathymetry(x, y, centre, depth, radius, bump)
    # V(r) / r = (speed / radius) exp((1 - rho^2) / 2): smooth at the centre
    spin = speed / radius * np.exp((1 - rho2) / 2)
    return h, -spin * dy, spin * dx
