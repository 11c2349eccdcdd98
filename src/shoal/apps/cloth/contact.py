"""Contact between the cloth's primitives: closest points, and the nested penalty layers.

Asynchronous contact mechanics answers contact with a conceptually unbounded sequence of
nested penalty layers (the contact-mechanics paper §II-A): layer ``l = 1, 2, ...`` has the
thickness ``η_l = η l^(-1/4)``, the stiffness ``k_l = k l³`` and its own step
``Δt_l = Δt l^(-3/2)``, and pushes a pair whose gap ``d`` is below ``η_l`` with the energy
``k_l (η_l - d)² / 2``. The formulas are those of the one public code of the family (the
paper gives none); shoal rounds each step down to ``Δt / n_l`` with ``n_l`` the least power of
two at or above ``l^(3/2)``, so that every layer's clock ticks on every coarser one's.

A pair is a vertex and a triangle, two edges, or a vertex, an edge or a triangle and a
kinematic obstacle (a capsule). Its force acts along the line between its closest points, on
each primitive's vertices by the closest point's barycentric weights. Between two of the
cloth's primitives the forces sum to zero and their moments too (they are equal, opposite and
on one line), so self-contact conserves linear and angular momentum, as the material forces do;
an obstacle, moved as prescribed, takes no reaction.
"""

from __future__ import annotations

import math

import numba as nb

from ...closest import on_segment, on_triangle

# The kinds of contact pair: two primitives of the cloth, or one and an obstacle.
VERTEX_FACE, EDGE_EDGE, VERTEX_OBSTACLE, EDGE_OBSTACLE, FACE_OBSTACLE = 0, 1, 2, 3, 4


@nb.njit(cache=True, nogil=True)
def layer_thickness(eta: float, layer: int) -> float:
    """``η_l = η l^(-1/4)``: layer ``layer``'s thickness, m (``eta``: the first's).

    Parameters
    ----------
    eta : float
        The first layer's thickness, m.
    layer : int
        The layer, from 1.
    """
    return eta * layer ** -0.25


@nb.njit(cache=True, nogil=True)
def layer_stiffness(k: float, layer: int) -> float:
    """``k_l = k l³``: layer ``layer``'s stiffness, N/m (``k``: the first's).

    Parameters
    ----------
    k : float
        The first layer's stiffness, N/m.
    layer : int
        The layer, from 1.
    """
    return k * layer ** 3


@nb.njit(cache=True, nogil=True)
def layer_substeps(layer: int) -> int:
    """``n_l``, the least power of two at or above ``l^(3/2)``: layer ``layer`` ticks every
    ``Δt / n_l``, its step ``Δt l^(-3/2)`` rounded down so that every layer's clock ticks on
    each coarser one's (the ticks of layers ``1..L`` are then ``n_L`` per material step, not the
    union of ``L`` unrelated grids: a window with deep layers has several times fewer events).

    Parameters
    ----------
    layer : int
        The layer, from 1.
    """
    n = 1
    while n < layer ** 1.5 - 1e-12:
        n *= 2
    return n


def layers_to_stop(mass: float, speed: float, eta: float, k: float) -> int:
    """The fewest layers whose energies at contact, ``Σ k_l η_l² / 2``, reach a body's kinetic
    energy ``m v² / 2``: a lower bound of the layers a head-on impact wakes (the gap never
    reaches 0).

    Parameters
    ----------
    mass : float
        The body's mass, kg.
    speed : float
        Its speed towards the obstacle, m/s.
    eta, k : float
        The first layer's thickness (m) and stiffness (N/m).
    """
    need, stored, layer = 0.5 * mass * speed * speed, 0.0, 0
    while stored < need:
        layer += 1
        stored += 0.5 * layer_stiffness(k, layer) * layer_thickness(eta, layer) ** 2
    return max(layer, 1)


@nb.njit(cache=True, nogil=True)
def point_triangle(px, py, pz, ax, ay, az, bx, by, bz, cx, cy, cz):
    """The point of triangle ``abc`` closest to ``p``: its squared distance and barycentric
    weights ``(d², wa, wb, wc)`` (:func:`~shoal.closest.on_triangle`)."""
    qx, qy, qz, wa, wb, wc = on_triangle(px, py, pz, ax, ay, az, bx, by, bz, cx, cy, cz)
    return _gap2(px, py, pz, qx, qy, qz), wa, wb, wc


@nb.njit(cache=True, nogil=True, inline="always")
def _gap2(px, py, pz, qx, qy, qz):
    return (px - qx) ** 2 + (py - qy) ** 2 + (pz - qz) ** 2


@nb.njit(cache=True, nogil=True)
def segment_segment(p0x, p0y, p0z, p1x, p1y, p1z, q0x, q0y, q0z, q1x, q1y, q1z):
    """The closest points of segments ``p0 p1`` and ``q0 q1``: their squared distance and
    parameters ``(d², s, t)``, the points ``p0 + s (p1 - p0)`` and ``q0 + t (q1 - q0)``
    (Ericson §5.1.9; parallel segments take ``s`` at its clamped projection)."""
    d1x, d1y, d1z = p1x - p0x, p1y - p0y, p1z - p0z
    d2x, d2y, d2z = q1x - q0x, q1y - q0y, q1z - q0z
    rx, ry, rz = p0x - q0x, p0y - q0y, p0z - q0z
    a = d1x * d1x + d1y * d1y + d1z * d1z
    e = d2x * d2x + d2y * d2y + d2z * d2z
    f = d2x * rx + d2y * ry + d2z * rz
    c = d1x * rx + d1y * ry + d1z * rz
    b = d1x * d2x + d1y * d2y + d1z * d2z
    denom = a * e - b * b
    s = min(max((b * f - c * e) / denom, 0.0), 1.0) if denom > 1e-14 * a * e else 0.0
    t = (b * s + f) / e
    if t < 0.0:
        t, s = 0.0, min(max(-c / a, 0.0), 1.0)
    elif t > 1.0:
        t, s = 1.0, min(max((b - c) / a, 0.0), 1.0)
    return (_gap2(p0x + s * d1x, p0y + s * d1y, p0z + s * d1z, q0x + t * d2x, q0y + t * d2y, q0z + t * d2z),
            s, t)


@nb.njit(cache=True, nogil=True)
def layered_push(gap, eta, k, first, last):
    """The force (N, pushing the pair apart) and energy (J) of layers ``first..last`` at ``gap``."""
    force = energy = 0.0
    for layer in range(first, last + 1):
        thickness = layer_thickness(eta, layer)
        if gap < thickness:
            stiffness = layer_stiffness(k, layer)
            force += stiffness * (thickness - gap)
            energy += 0.5 * stiffness * (thickness - gap) ** 2
    return force, energy


@nb.njit(cache=True, nogil=True)
def vertex_face(x, p, a, b, c, eta, k, first, last, out):
    """The forces of layers ``first..last`` between vertex ``p`` and triangle ``abc`` into
    ``out`` (rows: p, a, b, c); returns their energy (J)."""
    d2, wa, wb, wc = point_triangle(x[p, 0], x[p, 1], x[p, 2], x[a, 0], x[a, 1], x[a, 2],
                                    x[b, 0], x[b, 1], x[b, 2], x[c, 0], x[c, 1], x[c, 2])
    gap = math.sqrt(d2)
    force, energy = layered_push(gap, eta, k, first, last)
    out[:, :] = 0.0
    if force == 0.0 or gap == 0.0:
        return energy
    for axis in range(3):
        n = (x[p, axis] - (wa * x[a, axis] + wb * x[b, axis] + wc * x[c, axis])) / gap
        out[0, axis] = force * n
        out[1, axis] = -wa * force * n
        out[2, axis] = -wb * force * n
        out[3, axis] = -wc * force * n
    return energy


@nb.njit(cache=True, nogil=True)
def edge_edge(x, p0, p1, q0, q1, eta, k, first, last, out):
    """The forces of layers ``first..last`` between edges ``p0 p1`` and ``q0 q1`` into ``out``
    (rows: p0, p1, q0, q1); returns their energy (J)."""
    d2, s, t = segment_segment(x[p0, 0], x[p0, 1], x[p0, 2], x[p1, 0], x[p1, 1], x[p1, 2],
                               x[q0, 0], x[q0, 1], x[q0, 2], x[q1, 0], x[q1, 1], x[q1, 2])
    gap = math.sqrt(d2)
    force, energy = layered_push(gap, eta, k, first, last)
    out[:, :] = 0.0
    if force == 0.0 or gap == 0.0:
        return energy
    for axis in range(3):
        n = ((1.0 - s) * x[p0, axis] + s * x[p1, axis] - (1.0 - t) * x[q0, axis] - t * x[q1, axis]) / gap
        out[0, axis] = (1.0 - s) * force * n
        out[1, axis] = s * force * n
        out[2, axis] = -(1.0 - t) * force * n
        out[3, axis] = -t * force * n
    return energy



@nb.njit(cache=True, nogil=True)
def point_segment(px, py, pz, ax, ay, az, bx, by, bz):
    """The closest point of segment ``a b`` to ``p``: the squared distance and the parameter
    ``t`` of the point ``a + t (b - a)`` (:func:`~shoal.closest.on_segment`)."""
    t = on_segment(px, py, pz, ax, ay, az, bx, by, bz)
    return _gap2(px, py, pz, ax + t * (bx - ax), ay + t * (by - ay), az + t * (bz - az)), t


@nb.njit(cache=True, nogil=True)
def obstacle_closest(x, p, ends):
    """The closest points of a cloth primitive and an obstacle's axis (pair ``p``, a row
    ``(kind, q0, q1, q2, obstacle)`` of kind :data:`VERTEX_OBSTACLE`, :data:`EDGE_OBSTACLE` or
    :data:`FACE_OBSTACLE`, its unused points -1; ``ends`` every obstacle's axis ends): the
    squared distance, the primitive's point's weights on ``q0, q1, q2``, and the axis point.

    A face's closest approach to a segment is at one of the segment's ends, unless the segment
    nears one of the face's edges first (an edge–obstacle pair) or crosses it (which a
    conservative detection never lets happen): the face pair takes the nearer end."""
    o = p[4]
    ax, ay, az = ends[o, 0, 0], ends[o, 0, 1], ends[o, 0, 2]
    bx, by, bz = ends[o, 1, 0], ends[o, 1, 1], ends[o, 1, 2]
    q0, q1, q2 = p[1], p[2], p[3]
    if p[0] == VERTEX_OBSTACLE:
        d2, t = point_segment(x[q0, 0], x[q0, 1], x[q0, 2], ax, ay, az, bx, by, bz)
        return d2, 1.0, 0.0, 0.0, ax + t * (bx - ax), ay + t * (by - ay), az + t * (bz - az)
    if p[0] == EDGE_OBSTACLE:
        if ax == bx and ay == by and az == bz:  # a sphere: its centre against the edge
            d2, s = point_segment(ax, ay, az, x[q0, 0], x[q0, 1], x[q0, 2], x[q1, 0], x[q1, 1], x[q1, 2])
            return d2, 1.0 - s, s, 0.0, ax, ay, az
        d2, s, t = segment_segment(x[q0, 0], x[q0, 1], x[q0, 2], x[q1, 0], x[q1, 1], x[q1, 2], ax, ay, az, bx, by, bz)
        return d2, 1.0 - s, s, 0.0, ax + t * (bx - ax), ay + t * (by - ay), az + t * (bz - az)
    da, wa0, wa1, wa2 = point_triangle(ax, ay, az, x[q0, 0], x[q0, 1], x[q0, 2], x[q1, 0], x[q1, 1], x[q1, 2],
                                       x[q2, 0], x[q2, 1], x[q2, 2])
    db, wb0, wb1, wb2 = point_triangle(bx, by, bz, x[q0, 0], x[q0, 1], x[q0, 2], x[q1, 0], x[q1, 1], x[q1, 2],
                                       x[q2, 0], x[q2, 1], x[q2, 2])
    if db < da:
        return db, wb0, wb1, wb2, bx, by, bz
    return da, wa0, wa1, wa2, ax, ay, az


@nb.njit(cache=True, nogil=True)
def cloth_obstacle(x, p, ends, radius, eta, k, first, last, out):
    """The forces of layers ``first..last`` on a cloth primitive from an obstacle (pair ``p``,
    see :func:`obstacle_closest`; the obstacle a capsule of ``radius`` around its axis) into
    ``out``'s rows ``0..2`` (the primitive's points; the obstacle, moved kinematically, takes no
    reaction); returns their energy (J)."""
    d2, w0, w1, w2, cx, cy, cz = obstacle_closest(x, p, ends)
    centre = math.sqrt(d2)
    force, energy = layered_push(centre - radius, eta, k, first, last)
    out[:, :] = 0.0
    if force == 0.0 or centre == 0.0:
        return energy
    c = (cx, cy, cz)
    for axis in range(3):
        point = w0 * x[p[1], axis]
        if p[2] >= 0:
            point += w1 * x[p[2], axis]
        if p[3] >= 0:
            point += w2 * x[p[3], axis]
        n = (point - c[axis]) / centre
        out[0, axis] = w0 * force * n
        out[1, axis] = w1 * force * n
        out[2, axis] = w2 * force * n
    return energy


@nb.njit(cache=True, nogil=True)
def friction_kick(x, v, inverse, p, out, step, mu, omega, pivot, work):
    """Coulomb friction with the normal kick just given (``out``, the forces of
    :func:`vertex_face`, :func:`edge_edge` or :func:`cloth_obstacle` for pair ``p``, over
    ``step`` seconds): an impulse against the pair's sliding velocity at its closest points, at
    most ``mu`` times the normal impulse, and no more than stops the sliding.

    The normal force ``f n`` is the sum of the first primitive's rows (their weights add up to
    one); each point's weight is its row along ``n`` over ``f``. The impulse acts on the points
    by their weights, like the normal one: between two of the cloth's primitives it conserves
    linear momentum. An obstacle's surface moves with its spin: ``omega[o] × (X - pivot[o])``
    at the cloth's closest point ``X``. ``work`` is scratch space of 10 numbers.
    """
    last = 1 if p[0] == VERTEX_FACE else (2 if p[0] == EDGE_EDGE else 3)
    fx = fy = fz = 0.0
    for r in range(last):
        if p[1 + r] >= 0:
            fx += out[r, 0]
            fy += out[r, 1]
            fz += out[r, 2]
    f = math.sqrt(fx * fx + fy * fy + fz * fz)
    if f == 0.0 or mu == 0.0:
        return
    nx, ny, nz = fx / f, fy / f, fz / f
    work[:] = 0.0
    weight, vr, closest = work[:4], work[4:7], work[7:10]
    reach = 0.0  # the inverse mass the impulse sees
    for r in range(4):
        q = p[1 + r]
        if q < 0 or (r == 3 and p[0] >= VERTEX_OBSTACLE):
            continue
        weight[r] = (out[r, 0] * nx + out[r, 1] * ny + out[r, 2] * nz) / f
        reach += weight[r] * weight[r] * inverse[q]
        for axis in range(3):
            vr[axis] += weight[r] * v[q, axis]
            if r < last:
                closest[axis] += weight[r] * x[q, axis]
    if p[0] >= VERTEX_OBSTACLE:  # less the obstacle's surface velocity there
        o = p[4]
        dx, dy, dz = closest[0] - pivot[o, 0], closest[1] - pivot[o, 1], closest[2] - pivot[o, 2]
        vr[0] -= omega[o, 1] * dz - omega[o, 2] * dy
        vr[1] -= omega[o, 2] * dx - omega[o, 0] * dz
        vr[2] -= omega[o, 0] * dy - omega[o, 1] * dx
    along = vr[0] * nx + vr[1] * ny + vr[2] * nz
    tx, ty, tz = vr[0] - along * nx, vr[1] - along * ny, vr[2] - along * nz
    slide = math.sqrt(tx * tx + ty * ty + tz * tz)
    if slide == 0.0 or reach == 0.0:
        return
    impulse = min(mu * f * step, slide / reach)
    for r in range(4):
        q = p[1 + r]
        if weight[r] == 0.0:
            continue
        scale = weight[r] * inverse[q] * impulse / slide
        v[q, 0] -= scale * tx
        v[q, 1] -= scale * ty
        v[q, 2] -= scale * tz
