"""3D SPH in fluidanimate's formulation: tiling-invariant, PARSEC input files, physics sanity."""

from pathlib import Path

import numpy as np
import pytest

from shoal.apps import get_app
from shoal.apps.sph.fluidanimate3d import DOMAIN_MAX, DOMAIN_MIN, read_fluid
from shoal.cluster import Cluster
from shoal.errors import ShoalError
from shoal.placement import get_policy
from shoal.runtime import LocalExecutor
from shoal.tiling import Tiling

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "fluidanimate"


def build(**kw):
    spec = get_app("sph3d")
    return spec.build(spec.params(**kw), 10)


def simulate(app, ntiles, steps, nodes=1, workers=1, placement="sfc"):
    tiling = Tiling.from_count(app.grid, ntiles)
    cluster = Cluster.uniform(nodes, workers)
    res = LocalExecutor(app, tiling, cluster, get_policy(placement).place(tiling, cluster, 3)).run(steps)
    return app.gather(res.states, tiling)


@pytest.fixture(scope="module")
def reference():
    return simulate(build(particles=3000), 1, 15)


@pytest.mark.parametrize("ntiles, placement, workers", [(8, "birdshot", 2), (27, "geometric", 1), (64, "sfc", 2)])
def test_bitwise_identical_for_any_tiling_placement_and_workers(reference, ntiles, placement, workers):
    got = simulate(build(particles=3000), ntiles, 15, nodes=2, workers=workers, placement=placement)
    for name in reference:
        assert got[name].tobytes() == reference[name].tobytes(), name


def test_column_falls_and_stays_inside_the_tank(reference):
    app = build(particles=3000)
    x0 = app._initial["x"]
    x = reference["x"]
    assert len(x) == len(x0)  # closed tank: no particle lost
    assert np.all(x >= DOMAIN_MIN) and np.all(x <= DOMAIN_MAX)
    assert x[:, 1].mean() < x0[:, 1].mean()  # gravity pulls the column down
    assert x[:, 0].max() > x0[:, 0].max()  # and it spreads into the empty half


def test_density_of_the_lattice_is_near_rest():
    app = build(particles=20000)
    got = simulate(app, 8, 1, nodes=2)
    interior = np.all(np.abs(got["x"] - got["x"].mean(axis=0)) < 0.01, axis=1)
    assert np.median(got["rho"][interior]) == pytest.approx(1000.0, rel=0.1)


def write_fluid(path, rppm, x, hv, v):
    n = len(x)
    data = np.concatenate([x, hv, v], axis=1).astype("<f4")
    path.write_bytes(np.float32(rppm).astype("<f4").tobytes() + np.int32(n).astype("<i4").tobytes()
                     + data.tobytes())


def test_fluid_file_round_trip_and_start(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.uniform([-0.06, -0.075, -0.06], [0.0, -0.04, 0.06], (500, 3))
    hv, v = rng.normal(0, 0.01, (500, 3)), rng.normal(0, 0.01, (500, 3))
    write_fluid(tmp_path / "t.fluid", 204.0, x, hv, v)
    rppm, rx, rhv, rv = read_fluid(tmp_path / "t.fluid")
    assert rppm == 204.0 and np.allclose(rx, x.astype(np.float32)) and np.allclose(rv, v.astype(np.float32))
    app = build(input=str(tmp_path / "t.fluid"))
    assert app.initial_count() == 500 and app.h == pytest.approx(1.695 / 204.0)


@pytest.mark.skipif(not (DATA / "in_5K.fluid").exists(), reason="PARSEC inputs are not beside the project")
def test_reads_the_parsec_inputs():
    rppm, x, hv, v = read_fluid(DATA / "in_5K.fluid")
    assert rppm == 204.0 and len(x) == 4800
    app = build(input=str(DATA / "in_5K.fluid"))
    assert app.grid == (int(0.13 / app.h), int(0.18 / app.h), int(0.13 / app.h))


def test_bad_fluid_files_are_refused(tmp_path):
    (tmp_path / "short.fluid").write_bytes(b"abc")
    with pytest.raises(ShoalError, match="too short"):
        read_fluid(tmp_path / "short.fluid")
    (tmp_path / "bad.fluid").write_bytes(np.float32(200).tobytes() + np.int32(10).tobytes() + b"\0" * 12)
    with pytest.raises(ShoalError, match="not a .fluid file"):
        read_fluid(tmp_path / "bad.fluid")
    with pytest.raises(ShoalError, match="no .fluid file"):
        build(input=str(tmp_path / "missing.fluid"))
