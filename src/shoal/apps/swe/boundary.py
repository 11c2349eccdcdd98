"""The sides of the domain: the state a block's ghost cells take where it touches one.

``reflect``       a wall: the cells mirrored, the normal momentum negated
``transmissive``  the touching cell repeated, so waves leave (``outflow`` is its older name)
``inflow``        ``app.discharge`` q (m²/s) enters across every metre of the side, normal to it
``depth``         the water outside stands ``app.side_depth`` deep (a lake or a sea the flow runs into)

``inflow`` and ``depth`` prescribe what a subcritical flow lets a side prescribe, one quantity,
and take the other from the characteristic that leaves the domain: its Riemann invariant
``w - 2c`` (``w`` the velocity into the domain, ``c = sqrt(g h)``) is the touching cell's.
Once the flow is steady the ghost equals the touching cell, so the flux across the side is
the prescribed discharge (or the flow at the prescribed depth). What the side prescribes it
holds against waves arriving from inside, so they reflect in part (at Froude 0.5 an inflow
side returns a third of a wave; a depth side holds its depth). A supercritical flow out of a
``depth`` side is let go as through a transmissive one. The ghost's bed is the touching
cell's. Each ghost reads only its own block's cell beside it, so the sides never depend on
the tiling.
"""

from __future__ import annotations

import math

import numba as nb

WALL, OUTFLOW, INFLOW, DEPTH = 0, 1, 2, 3
#: the kind of each ``app.boundary`` name
KINDS = {"reflect": WALL, "transmissive": OUTFLOW, "outflow": OUTFLOW, "inflow": INFLOW, "depth": DEPTH}


@nb.njit(inline="always", error_model="numpy")
def inflow_state(q, h, w, g, dry):
    """The depth and the velocity into the domain of an ``inflow`` ghost: ``q / hb - 2
    sqrt(g hb) = w - 2 sqrt(g h)`` for the touching cell's depth ``h`` and velocity ``w`` into
    the domain (no velocity where it is dry), ``q > 0``.

    The left side decreases and is convex in ``hb``: from a depth below the root (halving
    until the left side exceeds the right) Newton's steps rise to it monotonically."""
    right = (w - 2.0 * math.sqrt(g * h)) if h > dry else 0.0
    hb = max(h, (q * q / g) ** (1.0 / 3.0))
    for _ in range(2100):  # each halving at least doubles q / hb: far fewer than this
        if q / hb - 2.0 * math.sqrt(g * hb) > right:
            break
        hb *= 0.5
    for _ in range(100):
        f = q / hb - 2.0 * math.sqrt(g * hb) - right
        step = f / (q / (hb * hb) + math.sqrt(g / hb))
        hb += step
        if step <= 1e-15 * hb:
            break
    return hb, q / hb


@nb.njit(inline="always", error_model="numpy")
def depth_state(depth, h, w, g, dry):
    """The depth and the velocity into the domain of a ``depth`` ghost: ``depth``, and the
    velocity that keeps the touching cell's outgoing invariant ``w - 2 sqrt(g h)`` (velocity
    ``w`` into the domain, none where dry); a supercritical flow out (``-w >= sqrt(g h)``)
    keeps the touching cell's state."""
    if h <= dry:
        return depth, 2.0 * math.sqrt(g * depth)
    c = math.sqrt(g * h)
    if -w >= c:
        return h, w
    return depth, w - 2.0 * c + 2.0 * math.sqrt(g * depth)


def dry_side_speed(kind: int, value: float, g: float) -> float:
    """``|u| + |v| + 2c`` of a side's ghost beside a dry cell: a floor under the time step of the
    blocks along an ``inflow`` or ``depth`` side, so that water can enter a dry domain."""
    if kind == INFLOW:
        hb, w = inflow_state(value, 0.0, 0.0, g, 0.0)
        return w + 2.0 * math.sqrt(g * hb)
    if kind == DEPTH:
        return 4.0 * math.sqrt(g * value)
    return 0.0
