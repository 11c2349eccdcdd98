"""Contact between the cloth's primitives: closest points against dense sampling, layered
penalty forces that are the energy's gradient and conserve momentum, and the layers' formulas."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import minus_gradient
from shoal.apps.cloth.contact import (
    edge_edge,
    layer_stiffness,
    layer_substeps,
    layer_thickness,
    layered_push,
    layers_to_stop,
    point_triangle,
    segment_segment,
    vertex_face,
)

coordinates = st.lists(st.floats(-1, 1, allow_nan=False, allow_subnormal=False), min_size=12, max_size=12)


def _sampled_triangle(p, corners, samples=150):
    """The least distance from ``p`` to a dense barycentric sample of the triangle (an upper bound)."""
    u, v = np.meshgrid(np.linspace(0, 1, samples), np.linspace(0, 1, samples), indexing="ij")
    inside = u + v <= 1
    w = np.stack([1 - u[inside] - v[inside], u[inside], v[inside]], axis=1)
    return float(np.min(np.linalg.norm(w @ corners - p, axis=1)))


def _sampled_segments(a, b, samples=400):
    s = np.linspace(0, 1, samples)[:, None]
    pa, pb = a[0] + s * (a[1] - a[0]), b[0] + s * (b[1] - b[0])
    return float(np.min(np.linalg.norm(pa[:, None] - pb[None], axis=2)))


@settings(max_examples=60, deadline=None)
@given(coordinates)
def test_the_closest_point_of_a_triangle_is_on_it_and_no_sample_is_closer(values):
    p, corners = np.array(values[:3]), np.array(values[3:]).reshape(3, 3)
    if np.linalg.norm(np.cross(corners[1] - corners[0], corners[2] - corners[0])) < 1e-3:
        return  # (a sliver: the sampling is too coarse to bound it)
    d2, *w = point_triangle(*p, *corners.ravel())
    w = np.array(w)
    assert np.all(w >= -1e-12) and abs(w.sum() - 1) < 1e-12
    assert np.isclose(np.sqrt(d2), np.linalg.norm(w @ corners - p), rtol=1e-9, atol=1e-12)
    spacing = max(np.linalg.norm(corners[i] - corners[j]) for i, j in ((0, 1), (1, 2), (0, 2))) / 149
    assert np.sqrt(d2) <= _sampled_triangle(p, corners) + 1e-12
    assert np.sqrt(d2) >= _sampled_triangle(p, corners) - spacing


@settings(max_examples=60, deadline=None)
@given(coordinates)
def test_the_closest_points_of_two_segments_are_on_them_and_no_sample_is_closer(values):
    a, b = np.array(values[:6]).reshape(2, 3), np.array(values[6:]).reshape(2, 3)
    if min(np.linalg.norm(a[1] - a[0]), np.linalg.norm(b[1] - b[0])) < 1e-3:
        return
    d2, s, t = segment_segment(*a.ravel(), *b.ravel())
    assert 0 <= s <= 1 and 0 <= t <= 1
    between = np.linalg.norm(a[0] + s * (a[1] - a[0]) - b[0] - t * (b[1] - b[0]))
    assert np.isclose(np.sqrt(d2), between, rtol=1e-9, atol=1e-12)
    spacing = max(np.linalg.norm(a[1] - a[0]), np.linalg.norm(b[1] - b[0])) / 399
    assert np.sqrt(d2) <= _sampled_segments(a, b) + 1e-12
    assert np.sqrt(d2) >= _sampled_segments(a, b) - spacing


@pytest.mark.parametrize("pair", ["vertex-face", "edge-edge"])
@pytest.mark.parametrize("layers", [1, 3])
def test_layered_forces_are_the_energys_gradient_and_conserve_momentum(pair, layers):
    rng = np.random.default_rng(layers)
    eta, k = 0.01, 50.0
    if pair == "vertex-face":
        x = np.array([[0.2, 0.3, 0.004], [0, 0, 0], [1, 0, 0], [0, 1, 0]]) + rng.normal(0, 1e-4, (4, 3))

        def energy(y, out):
            return vertex_face(y, 0, 1, 2, 3, eta, k, 1, layers, out)
    else:
        x = np.array([[-1, 0.1, 0.003], [1, -0.1, 0.003], [0.1, -1, 0], [-0.1, 1, 0]]) + rng.normal(0, 1e-4, (4, 3))

        def energy(y, out):
            return edge_edge(y, 0, 1, 2, 3, eta, k, 1, layers, out)
    f = np.zeros((4, 3))
    assert energy(x, f) > 0
    scratch = np.zeros((4, 3))
    numeric = minus_gradient(lambda y: energy(y, scratch), x, 1e-8)
    assert np.abs(f - numeric).max() <= 1e-5 * np.abs(f).max()
    assert np.abs(f.sum(axis=0)).max() <= 1e-13 * np.abs(f).max()  # no net force
    assert np.abs(np.cross(x, f).sum(axis=0)).max() <= 1e-12 * np.abs(f).max()  # no net moment


def test_a_pair_beyond_the_first_layer_feels_nothing_and_inner_layers_add_up():
    eta, k = 0.01, 10.0
    assert layered_push(0.0101, eta, k, 1, 5) == (0.0, 0.0)
    # at a gap of 0.0085 only layers 1 and 2 reach it: thicknesses 0.01 and 0.0084...
    assert layer_thickness(eta, 2) < 0.0085 < layer_thickness(eta, 1)
    force, energy = layered_push(0.0085, eta, k, 1, 5)
    assert force == pytest.approx(k * (eta - 0.0085)) and energy == pytest.approx(0.5 * k * (eta - 0.0085) ** 2)
    force, _ = layered_push(0.005, eta, k, 1, 5)
    expected = sum(layer_stiffness(k, n) * (layer_thickness(eta, n) - 0.005) for n in range(1, 6)
                   if layer_thickness(eta, n) > 0.005)
    assert force == pytest.approx(expected)
    assert sum(layered_push(0.005, eta, k, n, n)[0] for n in range(1, 6)) == pytest.approx(force)  # layer by layer


def test_the_layers_formulas_and_their_substeps():
    assert [layer_substeps(n) for n in range(1, 11)] == [1, 4, 8, 8, 16, 16, 32, 32, 32, 32]  # 2^⌈log2 l^1.5⌉
    assert layer_thickness(0.01, 16) == pytest.approx(0.005) and layer_stiffness(2.0, 3) == 54.0
    # A faster body needs more layers to stop, never fewer.
    counts = [layers_to_stop(0.01, v, 0.001, 100.0) for v in (0.0, 0.1, 1.0, 10.0, 100.0)]
    assert counts == sorted(counts) and counts[0] == 1 and counts[-1] > counts[1]
