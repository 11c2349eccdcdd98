"""Every built-in scenario runs a few steps, leaves a complete run folder, and stays finite."""

import json

import numpy as np
import pytest

from shoal.config import builtin_scenarios
from shoal.session import run_scenario

# Shrink the big worlds so a smoke run takes seconds; the physics settings stay as shipped.
SHRINK = {
    "sph3d-dam-break": ["app.particles=4000"],
    "sph-dam-break": ["app.dx=0.05"],
    "sph-cylinder": ["app.dx=0.06"],
    "sph-cylinders-5": ["app.dx=0.06"],
    "sph-cylinders-10": ["app.dx=0.06"],
    "cloth-drape": ["app.n=17"],
    "flip-dam-2d": ["app.cells=[64,40]"],
    "flip-two-way-dam": ["app.cells=[16,16,16]"],
    "flip-two-sources": ["app.cells=[16,16,16]"],
    "flip-sphere-drop": ["app.cells=[32,32,32]"],
    "cloth-twist": ["app.n=17"],
    "wavefront-plane": ["app.cells=[24,24,24]"],
    "wavefront-point": ["app.cells=[32,32]"],
    "cloth-twister": ["app.n=17"],
}


@pytest.mark.parametrize("name", sorted(builtin_scenarios()))
def test_every_scenario_runs_a_few_steps(name, tmp_path):
    rec = run_scenario(name, steps=3, nodes=2, workers=1, tiles=8, out=tmp_path / name,
                       set=SHRINK.get(name, []) + (["run.frame_every=0"] if name.startswith("sph") else []))
    summary = json.loads((rec.path / "summary.json").read_text())
    assert summary["steps"] == 3 and summary["scenario"] == name
    for arr in rec.state().values():
        if arr.dtype.kind == "f":
            assert np.isfinite(arr).all()
