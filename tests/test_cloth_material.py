"""The cloth's surface and material (no contact yet): forces are the energy's gradient, sums
run in stencil order whatever subset of vertices is asked for, kick–drift conserves momentum
and does not drift in energy, a hanging strip stretches as the analytic solution says, and bad
meshes and constants are one clear line."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import minus_gradient
from shoal.apps.cloth.model import ClothModel, Material
from shoal.apps.cloth.surface import Surface, read_obj, sheet
from shoal.errors import ShoalError


def _crumpled(n=6, seed=0, amplitude=0.02):
    """A sheet with every vertex moved a little: no force is zero by symmetry."""
    model = ClothModel(sheet(n, size=0.3), Material(stretch=80.0, poisson=0.3, bending=2e-3))
    rng = np.random.default_rng(seed)
    return model, model.surface.vertices + rng.normal(0, amplitude, model.surface.vertices.shape)


def _energy(model, x):
    return model.forces(x, np.zeros_like(x))


def test_the_forces_are_minus_the_energys_gradient():
    model, x = _crumpled()
    f = np.zeros_like(x)
    model.forces(x, f)
    numeric = minus_gradient(lambda y: _energy(model, y), x, 1e-7)
    assert np.abs(f - numeric).max() <= 1e-5 * np.abs(f).max()


def test_a_sheet_at_rest_or_moved_rigidly_feels_no_force_and_a_folded_one_does():
    model = ClothModel(sheet(5), Material(poisson=0.2, bending=1e-3))
    x = model.surface.vertices
    f = np.zeros_like(x)
    assert model.forces(x, f) < 1e-25 and np.abs(f).max() < 1e-12  # (rest frames to round-off)
    c, s = np.cos(0.7), np.sin(0.7)
    turned = x @ np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]]).T @ np.array([[1, 0, 0], [0, c, -s], [0, s, c]]).T
    assert model.forces(turned + [0.3, -1.0, 2.0], f) < 1e-20 and np.abs(f).max() < 1e-9
    folded = x.copy()
    folded[:, 2] = 0.3 * np.abs(folded[:, 0])  # a crease along x = 0, no stretch across it
    assert model.forces(folded, f) > 0 and np.abs(f).max() > 1e-4


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 10_000), st.lists(st.integers(0, 35), min_size=1, max_size=36, unique=True))
def test_any_subset_of_vertices_gets_the_same_bits_as_all_of_them(seed, chosen):
    """A tile asks for its own vertices only: their sums are the same additions in the same order."""
    model, x = _crumpled(seed=seed)
    every, some = np.zeros_like(x), np.full_like(x, np.nan)
    model.forces(x, every)
    vertices = np.array(sorted(chosen), dtype=np.int64)
    model.forces(x, some, vertices)
    assert every[vertices].tobytes() == some[vertices].tobytes()


def test_kick_drift_conserves_linear_and_angular_momentum_to_round_off():
    model, x = _crumpled(n=7, seed=3, amplitude=0.005)
    rng = np.random.default_rng(4)
    v = rng.normal(0, 0.05, x.shape) + [0.1, -0.2, 0.05]
    m = model.mass[:, None]

    def momenta():
        return np.sum(m * v, axis=0), np.sum(np.cross(x, m * v), axis=0)

    p0, l0 = momenta()
    scale_p = np.sum(m * np.abs(v))
    scale_l = np.sum(np.linalg.norm(x, axis=1)[:, None] * m * np.abs(v))
    model.run(x, v, 2e-4, 20_000)
    p1, l1 = momenta()
    assert np.abs(p1 - p0).max() <= 1e-12 * scale_p
    assert np.abs(l1 - l0).max() <= 1e-12 * scale_l


def test_undamped_energy_oscillates_without_drifting():
    model, x = _crumpled(n=7, seed=5, amplitude=0.005)
    v = np.zeros_like(x)
    elastic = _energy(model, x)
    x1 = x.copy()
    total = []
    for _ in range(200):
        e = model.run(x1, v, 1e-4, 50)
        total.append(e[-1] + model.kinetic(v))  # (the kinetic energy lags the elastic by half a step)
    total = np.array(total)
    assert elastic > 0
    assert np.abs(total - elastic).max() < 0.05 * elastic  # bounded
    assert abs(total[-40:].mean() - total[:40].mean()) < 0.01 * elastic  # no drift


def test_a_hanging_strip_stretches_as_the_analytic_solution_at_small_strain():
    """With no Poisson contraction a strip of length L hanging from its top edge stretches by
    δ = ρ g L² / (2 k): each height carries the weight below it."""
    length, width, rows, density, stiffness, g = 0.5, 0.05, 21, 0.2, 100.0, 9.81
    flat = sheet(rows, size=length)  # a square, then cut to three columns and stood up
    keep = np.abs(flat.vertices[:, 1] + length / 2) <= width + 1e-9
    index = np.cumsum(keep) - 1
    tris = flat.triangles[keep[flat.triangles].all(axis=1)]
    v = flat.vertices[keep]
    upright = np.stack([v[:, 1], np.zeros(len(v)), -v[:, 0]], axis=1)  # x along the width, hanging along -z
    model = ClothModel(Surface(upright, index[tris]), Material(density=density, stretch=stiffness, bending=0.0))
    x, vel = model.surface.vertices.copy(), np.zeros_like(upright)
    top = upright[:, 2] >= upright[:, 2].max() - 1e-12
    bottom = upright[:, 2] <= upright[:, 2].min() + 1e-12
    model.run(x, vel, 2e-4, 15_000, gravity=(0, 0, -g), pinned=top, damping=30.0)
    stretched = (upright[bottom, 2] - x[bottom, 2]).mean()
    expected = density * g * length ** 2 / (2 * stiffness)
    assert model.kinetic(vel) < 1e-12
    assert abs(stretched / expected - 1) < 0.03, (stretched, expected)


def test_a_sheet_has_its_stencils_and_an_obj_file_reads_back_the_same(tmp_path):
    s = sheet(4)
    assert len(s.vertices) == 16 and len(s.triangles) == 18
    assert len(s.hinges) == len(s.edges) - 4 * 3  # every edge but the border's
    assert s.stencils == 18 + len(s.hinges)
    for (x0, x1, x2, x3), (a, b) in zip(s.hinges.tolist(), s.hinge_triangles.tolist(), strict=True):
        assert set(s.triangles[a].tolist()) == {x0, x1, x2} and set(s.triangles[b].tolist()) == {x0, x1, x3}
    normals = np.cross(*(s.vertices[s.triangles[:, k]] - s.vertices[s.triangles[:, 0]] for k in (1, 2)))
    assert (normals[:, 2] > 0).all()
    lines = [f"v {a} {b} {c}" for a, b, c in s.vertices] + [f"f {a + 1}/1 {b + 1} {c + 1}" for a, b, c in s.triangles]
    (tmp_path / "sheet.obj").write_text("# a sheet\n" + "\n".join(lines) + "\n")
    back = read_obj(tmp_path / "sheet.obj")
    assert np.array_equal(back.vertices, s.vertices) and np.array_equal(back.triangles, s.triangles)
    (tmp_path / "quad.obj").write_text("v 0 0 0\nv 1 0 0\nv 1 1 0\nv 0 1 0\nf -4 -3 -2 -1\n")
    assert read_obj(tmp_path / "quad.obj").triangles.tolist() == [[0, 1, 2], [0, 2, 3]]


@pytest.mark.parametrize(("triangles", "vertices", "message"), [
    ([[0, 1, 2], [0, 1, 3], [0, 1, 4]], None, "not a manifold: edge [0, 1] has 3 triangles"),
    ([[0, 1, 2], [0, 1, 3]], None, "not consistently oriented: triangles 0 and 1"),
    ([[0, 1, 2]], [[0, 0, 0], [1, 0, 0], [2, 0, 0]], "triangle 0 ([0, 1, 2]) is degenerate"),
    ([[0, 1, 1]], None, "triangle 0 repeats a vertex"),
    ([[0, 1, 7]], None, "triangle 0 names a vertex outside 0..4"),
])
def test_a_bad_mesh_is_one_line(triangles, vertices, message):
    v = vertices or [[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, -1, 0], [0, 0, 1]]
    with pytest.raises(ShoalError, match=message.replace("[", r"\[").replace("]", r"\]").replace("(", r"\(")
                       .replace(")", r"\)")):
        Surface(np.array(v, float), np.array(triangles))


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"density": 0.0}, "density must be positive"), ({"stretch": -1.0}, "stretch stiffness must be positive"),
    ({"bending": -1e-3}, "bending stiffness must be 0 or more"), ({"poisson": 0.5}, "Poisson ratio must be in"),
])
def test_bad_constants_are_one_line(kwargs, message):
    with pytest.raises(ShoalError, match=message):
        Material(**kwargs)


def test_a_bad_obj_file_is_one_line_with_its_line(tmp_path):
    bad = tmp_path / "bad.obj"
    bad.write_text("v 0 0 0\nv 1 0\n")
    with pytest.raises(ShoalError, match=r"bad.obj, line 2: a vertex needs x, y and z"):
        read_obj(bad)
    with pytest.raises(ShoalError, match="cannot read the mesh"):
        read_obj(tmp_path / "missing.obj")
