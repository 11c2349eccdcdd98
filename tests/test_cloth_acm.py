"""Asynchronous contact mechanics in one piece: two sheets thrown at each other never touch at
any speed, their momentum is kept to round-off, they bounce back with their energy, and the
faster they come the more layers they wake (the contact-mechanics paper §II-A)."""

import numpy as np
import pytest

from shoal.apps.cloth.acm import ContactCloth
from shoal.apps.cloth.model import ClothModel, Material
from shoal.apps.cloth.surface import Surface, sheet
from shoal.errors import ShoalError

ETA, K, DT = 0.01, 20.0, 2e-4


def _two_sheets(speed):
    """Two 4 x 4 sheets 3 cm apart, a little offset, coming at each other at ``speed`` each."""
    a, b = sheet(4, size=0.1, height=0.015), sheet(4, size=0.1, height=-0.015, centre=(0.013, 0.007))
    surface = Surface(np.concatenate([a.vertices, b.vertices]), np.concatenate([a.triangles, b.triangles + 16]))
    model = ClothModel(surface, Material(density=0.2, stretch=50.0, bending=1e-4))
    v = np.zeros((32, 3))
    v[:16, 2], v[16:, 2] = -speed, speed
    return model, surface.vertices.copy(), v


@pytest.mark.parametrize("speed", [0.5, 4.0])
def test_two_sheets_never_touch_keep_their_momentum_and_bounce_back(speed):
    model, x, v = _two_sheets(speed)
    acm = ContactCloth(model, DT, ETA, K, window=5)
    p0 = np.sum(model.mass[:, None] * v, axis=0)
    energy0 = model.kinetic(v)
    windows = int(np.ceil(0.06 / speed / (5 * DT))) + 20  # until well after they meet
    log = acm.run(x, v, windows)
    assert min(log.min_gap) > 0  # never touched, at any event
    assert max(log.pairs) > 0 and sum(log.rollbacks) > 0  # they did meet
    p1 = np.sum(model.mass[:, None] * v, axis=0)
    assert np.abs(p1 - p0).max() <= 1e-12 * np.sum(model.mass) * speed
    upper = v[:16, 2].mean()
    assert upper > 0.5 * speed  # bounced back up
    elastic = model.forces(x, np.zeros_like(x))
    assert model.kinetic(v) + elastic == pytest.approx(energy0, rel=0.1)


def test_faster_sheets_wake_more_layers():
    most = []
    for speed in (0.5, 4.0):
        model, x, v = _two_sheets(speed)
        acm = ContactCloth(model, DT, ETA, K, window=5)
        log = acm.run(x, v, int(np.ceil(0.06 / speed / (5 * DT))) + 10)
        most.append(max(log.layers))
    assert most[1] > most[0]


def test_bad_contact_constants_are_one_line():
    model, _, _ = _two_sheets(1.0)
    with pytest.raises(ShoalError, match="contact thickness must be positive"):
        ContactCloth(model, DT, 0.0, K)
    with pytest.raises(ShoalError, match="longer than its mesh and material allow"):
        ContactCloth(model, 1.01 * model.stable_step(), ETA, K)
