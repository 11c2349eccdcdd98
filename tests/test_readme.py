"""The README's example app is complete: it registers, runs and is bitwise identical on any
tiling (what the README promises a new app gets)."""

import re
from pathlib import Path

import numpy as np

from conftest import assert_same_state, tiny_run
from shoal.apps import APPS
from shoal.compare import compare_runs

README = Path(__file__).resolve().parents[1] / "README.md"


def test_the_add_a_physics_model_example_runs_balances_and_matches_across_tilings(tmp_path):
    section = README.read_text().split("### Add a physics model", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    exec(compile(code, "README.md", "exec"), {})
    try:
        assert "heat" in APPS
        one = tiny_run(tmp_path / "one", app="heat", steps=12, tiles=1, nodes=1)
        many = tiny_run(tmp_path / "many", app="heat", steps=12, tiles=8, nodes=3, workers=2, placement="greedy",
                        period=4, checkpoint_every=5)
        assert compare_runs(one.path, many.path).identical
        assert_same_state(one.state(), many.state())
        assert many.trace.balance["step"].tolist() == [4, 8]  # balanced every 4 steps before the end
        first = tiny_run(tmp_path / "first", app="heat", steps=1, tiles=1, nodes=1).state()["u"]
        assert np.isclose(one.state()["u"].sum(), first.sum(), rtol=1e-12)  # zero-flux walls keep the heat
    finally:
        APPS.pop("heat", None)
