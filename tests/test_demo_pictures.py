"""The demo's pictures: a readable animation, robust colour scales, and the surge front
against every Martin & Moyce point the run reaches."""

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from shoal.apps import get_app
from shoal.apps.sph.validation import MARTIN_MOYCE, martin_moyce_agreement
from shoal.report import particles


def fake_frames(n: int, particles_per_frame: int = 300, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    frames = []
    for k in range(n):
        x = rng.uniform([0.0, 0.0], [4.0, 2.0], size=(particles_per_frame, 2))
        v = rng.normal(0.0, 1.0, size=(particles_per_frame, 2))
        kind = np.zeros(particles_per_frame, dtype=np.int8)
        kind[:20] = 1  # some wall
        rho = 1000.0 + rng.normal(0, 5, particles_per_frame)
        p = rng.uniform(0, 19620.0, particles_per_frame)
        frames.append({"x": x, "v": v, "kind": kind, "rho": rho, "p": p, "id": np.arange(particles_per_frame),
                       "time": np.float64(0.01 * k), "path": Path(f"state-{k:06d}.npz")})
    return frames


@pytest.fixture(scope="module")
def app():
    return get_app("sph2d").tiny_app()


@pytest.mark.parametrize("with_ffmpeg", [True, False])
def test_the_animation_is_wide_and_holds_every_frame(tmp_path, monkeypatch, app, with_ffmpeg):
    frames = fake_frames(12)
    if not with_ffmpeg:
        monkeypatch.setattr(particles, "ffmpeg", lambda: None)
    else:  # the dev extra installs imageio-ffmpeg, so ffmpeg is always at hand in the suite
        assert particles.ffmpeg() is not None
    path = particles.animation(app, frames, tmp_path, particles.global_ranges(frames)["speed"])
    if with_ffmpeg:
        import imageio_ffmpeg

        assert path.name == "animation.mp4"
        reader = imageio_ffmpeg.read_frames(str(path))
        meta = next(reader)
        count = sum(1 for _ in reader)
        assert meta["size"][0] >= 800 and count == len(frames)
    else:
        assert path.name == "animation.gif"
        with Image.open(path) as gif:
            assert gif.size[0] >= 800 and gif.n_frames == len(frames)


def test_colour_scales_are_robust_and_pressure_runs_to_the_hydrostatic_head():
    frames = fake_frames(3)
    frames[1]["v"][50] = [1000.0, 0.0]  # one splash particle
    ranges = particles.global_ranges(frames, pressure_top=1000.0 * 9.81 * 2.0)
    assert ranges["p"] == (0.0, 19620.0)
    assert ranges["speed"][0] == 0.0 and ranges["speed"][1] < 5.0  # the outlier does not set the scale
    lo, hi = ranges["rho"]
    assert 980.0 < lo < 1000.0 < hi < 1020.0
    assert particles._hydrostatic({"fluid": [[0, 0, 1, 2]], "rho0": 1000.0, "gravity": [0, -9.81]}) == 19620.0


def test_martin_moyce_agreement_counts_the_points_in_front_of_the_wall():
    T, Z = MARTIN_MOYCE.T
    same = martin_moyce_agreement(T, Z, tank=4.0)
    assert same.points == 15 and same.reached == int(np.sum(Z < 4.0)) == 14 and same.worst == pytest.approx(0.0)
    ahead = martin_moyce_agreement(T, Z * 1.05, tank=4.0)
    assert ahead.worst == pytest.approx(0.05)
    early = martin_moyce_agreement(np.array([0.0, 1.0]), np.array([1.0, 1.3]), tank=4.0)
    assert early.reached == 2  # T = 0.41 and 0.84 only
    assert martin_moyce_agreement(np.array([0.0, 0.2]), np.array([1.0, 1.0]), tank=4.0).reached == 0
