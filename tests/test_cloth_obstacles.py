"""Kinematic obstacles and the intersection-free guarantee: a sheet draped on a sphere never
intersects itself (by an independent library, ``ipctk``) nor enters the sphere; a sheet
thrown at a wall at any speed never passes it; a spinning rod turns as its profile says and
lifts a sheet without passing through it; a cloth that starts inside an obstacle, or with a rod
through it, is one line."""

import math

import ipctk
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shoal.apps.cloth.acm import ContactCloth
from shoal.apps.cloth.model import ClothModel, Material
from shoal.apps.cloth.obstacles import Obstacle, Spin, crossed_triangles, sphere
from shoal.apps.cloth.scenes import Twist, Twister
from shoal.apps.cloth.surface import Surface, sheet
from shoal.errors import ShoalError

ETA, K, DT = 0.005, 100.0, 5e-4


def _intersects(surface: Surface, x: np.ndarray) -> bool:
    mesh = ipctk.CollisionMesh(surface.vertices, surface.edges, surface.triangles)
    return ipctk.has_intersections(mesh, np.asfortranarray(x))


def test_a_sheet_draped_on_a_sphere_never_intersects_itself_nor_the_sphere():
    surface = sheet(9, size=0.5, height=0.22)
    model = ClothModel(surface, Material(density=0.2, stretch=100.0, bending=1e-5))
    ball = sphere((0.0, 0.0, 0.0), 0.2)
    acm = ContactCloth(model, DT, ETA, K, window=10, obstacles=(ball,), damping=5.0)
    x, v = surface.vertices.copy(), np.zeros((81, 3))
    for _ in range(120):  # 0.6 s: it lands, wraps the sphere and its corners fall past it
        acm.run(x, v, 1, gravity=(0.0, 0.0, -9.81))
        assert not _intersects(surface, x)
        assert np.linalg.norm(x, axis=1).min() > ball.radius
    assert min(acm.log.min_gap) > 0
    assert max(acm.log.pairs) > 0 and sum(acm.log.rollbacks) > 0
    assert x[:, 2].min() < 0.0  # the corners hang below the sphere's centre


@settings(max_examples=6, deadline=None)
@given(speed=st.floats(0.5, 20.0))
def test_a_sheet_thrown_at_a_wall_never_passes_it(speed):
    """A 4 x 4 sheet thrown down at ``speed`` onto a pinned 6 x 6 sheet (a wall)."""
    wall, thrown = sheet(6, size=0.2), sheet(4, size=0.08, height=0.01, centre=(0.01, 0.02))
    surface = Surface(np.concatenate([wall.vertices, thrown.vertices]),
                      np.concatenate([wall.triangles, thrown.triangles + 36]))
    model = ClothModel(surface, Material(density=0.2, stretch=50.0, bending=1e-5))
    pinned = np.arange(52) < 36
    acm = ContactCloth(model, 2e-4, 0.004, 20.0, window=5, obstacles=(), pinned=pinned)
    x, v = surface.vertices.copy(), np.zeros((52, 3))
    v[36:, 2] = -speed
    windows = math.ceil(0.02 / speed / (5 * 2e-4)) + 15  # until well after it hits
    for _ in range(windows):
        acm.run(x, v, 1)
        assert x[36:, 2].min() > 0.0  # above the wall, every window
    assert min(acm.log.min_gap) > 0
    assert v[36:, 2].mean() > 0  # bounced
    np.testing.assert_array_equal(x[:36], wall.vertices)  # the wall took no kick


def test_a_spin_turns_by_its_profile_and_moves_a_rods_ends():
    spin = Spin(centre=(0.0, 0.0, 0.1), axis=(0.0, 0.0, 2.0), speed=4.0, start=0.5, ramp=1.0, hold=2.0, coast=1.0)
    assert spin.angle(0.5) == 0.0
    assert spin.angle(1.5) == pytest.approx(2.0)  # half the speed over the ramp
    assert spin.angle(10.0) == pytest.approx(4.0 * (0.5 + 2.0 + 0.5))
    rod = Obstacle((-0.1, 0.0, 0.1), (0.1, 0.0, 0.1), 0.01, spin)
    turned = rod.ends(1.5)
    c, s = math.cos(2.0), math.sin(2.0)
    np.testing.assert_allclose(turned, [[-0.1 * c, -0.1 * s, 0.1], [0.1 * c, 0.1 * s, 0.1]], atol=1e-15)


@given(st.floats(0.0, 1.0), st.floats(0.0, 1.0), st.floats(0.0, 1.0), st.floats(0.0, 1.0))
@settings(max_examples=40, deadline=None)
def test_an_unwinding_spin_turns_back_by_the_same_profile_to_where_it_started(start, ramp, hold, coast):
    spin = Spin(speed=3.0, start=start, ramp=ramp, hold=hold, coast=coast, unwind=True)
    turn = ramp + hold + coast
    end = start + 2 * turn
    assert spin.angle(end) == pytest.approx(0.0, abs=1e-12) and spin.angle(end + 1.0) == pytest.approx(0.0, abs=1e-12)
    assert spin.angle(start + turn) == pytest.approx(3.0 * (0.5 * ramp + hold + 0.5 * coast))
    times = np.linspace(0.0, end + 0.5, 4001)  # the angle is the speed's integral, both ways
    speeds = np.array([spin.speed_at(t) for t in times])
    integral = np.concatenate([[0.0], np.cumsum(0.5 * (speeds[1:] + speeds[:-1]) * np.diff(times))])
    np.testing.assert_allclose([spin.angle(t) for t in times], integral, atol=0.02)  # (a jump's trapezoid)
    assert speeds.min() >= -3.0 and speeds.max() <= 3.0
    assert (speeds[times > start + turn] <= 0).all()


def test_a_spin_that_unwinds_must_end_its_hold():
    with pytest.raises(ShoalError, match="finite"):
        Spin(speed=1.0, unwind=True)


def test_a_rod_swung_up_into_a_sheet_lifts_it_without_passing_through():
    """A rod along y under a sheet, swung about a parallel axis, rises through the sheet's plane."""
    surface = sheet(5, size=0.1, height=0.0)
    model = ClothModel(surface, Material(density=0.2, stretch=50.0, bending=1e-5))
    pinned = np.zeros(25, bool)
    pinned[[0, 4, 20, 24]] = True  # the corners hold
    spin = Spin(centre=(0.02, 0.0, -0.02), axis=(0.0, 1.0, 0.0), speed=30.0, ramp=0.01)
    rod = Obstacle((0.0, -0.1, -0.02), (0.0, 0.1, -0.02), 0.004, spin)  # at its top (0.02, y, 0) after 0.057 s
    acm = ContactCloth(model, 2e-4, 0.003, 20.0, window=5, obstacles=(rod,), pinned=pinned)
    x, v = surface.vertices.copy(), np.zeros((25, 3))
    for _ in range(80):
        acm.run(x, v, 1)
        a, b = rod.ends(acm.time)
        # every vertex is outside the rod, whose axis crosses no triangle
        assert len(crossed_triangles(x[surface.triangles], np.array([a, b]))) == 0
        assert np.linalg.norm(np.cross(x - a, b - a), axis=1).min() / np.linalg.norm(b - a) > rod.radius
    assert max(acm.log.pairs) > 0 and min(acm.log.min_gap) > 0
    assert x[:, 2].max() > rod.radius  # lifted


@pytest.mark.parametrize("where, message", [
    ((0.0, 0.0, 0.0), "starts inside obstacle 0"),  # a sphere around the sheet's centre vertex
    ((0.018, 0.004, 0.0), "passes through triangle"),  # a rod through a face, clear of its edges
])
def test_a_cloth_starting_inside_or_pierced_by_an_obstacle_is_one_line(where, message):
    model = ClothModel(sheet(5, size=0.1), Material(density=0.2, stretch=50.0))
    x0, y0, _ = where
    obstacle = sphere(where, 0.003) if message.startswith("starts") else \
        Obstacle((x0, y0, -0.05), (x0, y0, 0.05), 0.001)
    acm = ContactCloth(model, 2e-4, 0.003, 20.0, window=5, obstacles=(obstacle,))
    with pytest.raises(ShoalError, match=message):
        acm.run(model.surface.vertices.copy(), np.zeros((25, 3)), 1)


def test_a_twisted_sheet_wrings_without_intersecting_and_its_ends_follow_the_turn():
    scene = Twist(n=12)
    cloth, x, v = scene.build()
    ends = ~cloth.free
    start = x[ends].copy()
    for _ in range(scene.windows(1.6) // 4):  # past 1.2 s the middle touches itself
        cloth.run(x, v, 4)
        assert not _intersects(cloth.model.surface, x)
    assert max(cloth.log.pairs) > 0 and min(cloth.log.min_gap) > 0
    turned = scene.speed * cloth.time  # each end by this much, in opposite senses about x
    left = start[:, 0] < 0
    for side, sign in ((left, 1.0), (~left, -1.0)):
        c, s = np.cos(sign * turned), np.sin(sign * turned)
        y, z = start[side, 1], start[side, 2]
        np.testing.assert_allclose(x[ends][side][:, 1:], np.stack([c * y - s * z, s * y + c * z], 1), atol=1e-12)


def test_newtons_twist_sheet_is_longer_between_its_clamped_edges_than_along_them():
    scene = Twist(n=12, size=1.5, width=1.0)
    cloth, x, _ = scene.build()
    np.testing.assert_allclose(np.ptp(x, axis=0), [1.5, 1.0, 0.0])
    clamped = x[~cloth.free]
    assert len(clamped) == 24
    np.testing.assert_allclose(np.abs(clamped[:, 0]), 0.75)
    assert scene.step == pytest.approx(0.016 / 11)  # the step of the shorter spacing, 1 m / 11


def test_the_twister_rolls_the_sheet_onto_its_rod_and_off_again_without_intersecting():
    """Contact rises from none as the sheet rolls on, each turn over the last, and falls back
    to none as it unrolls and hangs free: the shape of the paper's Figs. 1 and 9."""
    scene = Twister(n=9, spin=(0.3, 0.4, 0.3))
    cloth, x, v = scene.build()
    held = ~cloth.free
    start, bottom = x[held].copy(), x[:, 2].min()
    windows = scene.windows(2 * sum(scene.spin) + 0.3)
    for w in range(windows):
        cloth.run(x, v, 1, gravity=(0.0, 0.0, scene.gravity))
        if w % 10 == 0:
            assert not _intersects(cloth.model.surface, x)
        if w == windows // 2 - 15:
            assert x[:, 2].min() > bottom + 0.15  # rolled up on the rod
    pairs = np.array(cloth.log.pairs)
    rolled = (np.array(cloth.log.time) > 0.6) & (np.array(cloth.log.time) < 1.4)
    assert pairs[:10].max() == 0 and pairs[-10:].max() == 0  # hanging free at the start and the end
    assert pairs[rolled].min() > 0 and pairs.max() > 100
    assert min(cloth.log.min_gap) > 0
    np.testing.assert_allclose(x[held], start, atol=1e-12)  # the held row is back where it began
    assert abs(x[:, 2].min() - bottom) < 0.05  # and the sheet hangs down again
