"""Coulomb friction on the contact layers: a sheet sliding on a still one stops where
``u² / (2 μ g)`` says; two sheets rubbing against each other keep their momentum to round-off;
without friction the sliding sheet does not slow."""

import numpy as np
import pytest

from shoal.apps.cloth.acm import ContactCloth
from shoal.apps.cloth.model import ClothModel, Material
from shoal.apps.cloth.surface import Surface, sheet
from shoal.errors import ShoalError

ETA, K, DT, G = 0.004, 20.0, 2e-4, 9.81


def _sliding(mu: float, speed: float):
    """A 3 x 3 sheet resting on a pinned 8 x 8 one (the floor), sliding along x at ``speed``."""
    floor, top = sheet(8, size=0.4), sheet(3, size=0.04, height=0.0, centre=(-0.1, 0.013))
    mass = ClothModel(top, Material(density=0.2, stretch=50.0)).mass
    rest = ETA - mass.max() * G / K  # the first layer holds the heaviest vertex's weight there
    top = Surface(top.vertices + [0.0, 0.0, rest], top.triangles)
    surface = Surface(np.concatenate([floor.vertices, top.vertices]), np.concatenate([floor.triangles,
                                                                                      top.triangles + 64]))
    model = ClothModel(surface, Material(density=0.2, stretch=50.0, bending=0.0))
    cloth = ContactCloth(model, DT, ETA, K, window=5, pinned=np.arange(73) < 64, friction=(mu, 0.0))
    v = np.zeros((73, 3))
    v[64:, 0] = speed
    return cloth, surface.vertices.copy(), v


def test_a_sliding_sheet_stops_where_coulomb_says():
    mu, speed = 0.5, 0.3
    cloth, x, v = _sliding(mu, speed)
    start = x[64:, 0].mean()
    cloth.run(x, v, 80, gravity=(0.0, 0.0, -G))  # 80 ms, well after it stops (61 ms)
    travelled = x[64:, 0].mean() - start
    assert abs(v[64:, 0].mean()) < 0.02 * speed  # stopped (its vertices still shiver in stick and slip)
    assert travelled == pytest.approx(speed ** 2 / (2 * mu * G), rel=0.05)


def test_without_friction_it_slides_on():
    cloth, x, v = _sliding(0.0, 0.3)
    cloth.run(x, v, 40, gravity=(0.0, 0.0, -G))
    assert v[64:, 0].mean() == pytest.approx(0.3, rel=1e-3)


def test_two_sheets_rubbing_keep_their_momentum():
    a, b = sheet(4, size=0.1, height=0.003), sheet(4, size=0.1, height=-0.003, centre=(0.013, 0.007))
    surface = Surface(np.concatenate([a.vertices, b.vertices]), np.concatenate([a.triangles, b.triangles + 16]))
    model = ClothModel(surface, Material(density=0.2, stretch=50.0, bending=1e-4))
    cloth = ContactCloth(model, DT, ETA, K, window=5, friction=(0.8, 0.0))
    x, v = surface.vertices.copy(), np.zeros((32, 3))
    v[:16] = [0.4, 0.1, -0.2]
    v[16:] = [-0.4, 0.0, 0.2]
    p0 = model.mass @ v
    log = cloth.run(x, v, 40)
    assert max(log.pairs) > 0 and min(log.min_gap) > 0
    np.testing.assert_allclose(model.mass @ v, p0, rtol=0, atol=1e-12 * model.mass.sum())
    slide = v[:16, 0].mean() - v[16:, 0].mean()
    assert slide < 0.8 * 0.8  # friction slowed the sliding


def test_negative_friction_is_one_line():
    cloth, _, _ = _sliding(0.0, 0.0)
    with pytest.raises(ShoalError, match="friction coefficients must be 0 or more"):
        ContactCloth(cloth.model, DT, ETA, K, friction=(-0.1, 0.0))
