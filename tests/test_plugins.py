"""Users' own apps and placement policies without editing the package: ``--import MODULE`` and
the ``shoal.apps`` / ``shoal.placements`` entry points. Each case runs ``shoal`` in a process of
its own, so the registries of this one stay as shoal ships them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np

from shoal.trace import Trace

POLICY = textwrap.dedent('''
    """A placement of a user's own: tile k on node k mod n (round robin)."""
    from dataclasses import dataclass

    import numpy as np

    from shoal.placement import register
    from shoal.placement.registry import NoParams


    @dataclass(frozen=True)
    class RoundRobin:
        name: str = "round-robin"
        dynamic: bool = False
        summary: str = "tile k on node k mod n"
        params: type = NoParams

        def place(self, tiling, cluster, seed=0):
            return np.arange(tiling.ntiles) % cluster.nodes


    register(RoundRobin())
''')

APP = textwrap.dedent('''
    """An app of a user's own: the synthetic app under another name."""
    from shoal.apps.registry import AppSpec, register_app
    from shoal.apps.synthetic import SyntheticApp, SyntheticParams

    register_app(AppSpec("my-synthetic", SyntheticParams, SyntheticApp, "the synthetic app, registered by a user"))
''')

SCENARIO = textwrap.dedent('''
    name = "mine"
    [run]
    steps = 3
    tiles = 8
    nodes = 3
    placement = "round-robin"
    [app]
    name = "my-synthetic"
    grid = [32, 32]
''')


def shoal(cwd, *args, pythonpath=()):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*map(str, pythonpath), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "shoal", *args], cwd=cwd, capture_output=True, text=True, env=env,
                          timeout=600)


def test_import_brings_a_users_app_and_placement_into_a_run(tmp_path):
    (tmp_path / "my_policies.py").write_text(POLICY)
    (tmp_path / "my_app.py").write_text(APP)
    (tmp_path / "mine.toml").write_text(SCENARIO)
    done = shoal(tmp_path, "run", "mine.toml", "--import", "my_policies", "--import", "my_app", "--out", "r")
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["app"] == "my-synthetic" and summary["placement"] == "round-robin"
    owner = Trace.read(tmp_path / "r").placement_owners[0]
    assert owner.tolist() == (np.arange(8) % 3).tolist()
    # without the import the names are unknown: one line, exit 2, nothing written
    done = shoal(tmp_path, "run", "mine.toml", "--import", "my_app", "--out", "s")
    assert done.returncode == 2 and "unknown placement 'round-robin'" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not (tmp_path / "s").exists()


def test_an_import_that_fails_is_one_line(tmp_path):
    (tmp_path / "broken.py").write_text("raise RuntimeError('half-written module')\n")
    done = shoal(tmp_path, "scenarios", "--import", "broken")
    assert done.returncode == 2
    assert done.stderr.strip() == "error: --import broken: RuntimeError: half-written module"


def plugin_distribution(site, placements: str, apps: str = ""):
    """An installed distribution ``myplug`` whose entry points name ``placements`` and ``apps``."""
    info = site / "myplug-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: myplug\nVersion: 0.1\n")
    points = f"[shoal.placements]\n{placements}\n"
    if apps:
        points += f"[shoal.apps]\n{apps}\n"
    (info / "entry_points.txt").write_text(points)


def test_entry_points_register_without_any_flag(tmp_path):
    site = tmp_path / "site"
    plugin_distribution(site, "round-robin = my_policies", "my-synthetic = my_app")
    (site / "my_policies.py").write_text(POLICY)
    (site / "my_app.py").write_text(APP)
    (tmp_path / "mine.toml").write_text(SCENARIO)
    done = shoal(tmp_path, "run", "mine.toml", "--out", "r", pythonpath=[site])
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "r" / "summary.json").read_text())["placement"] == "round-robin"


def test_a_broken_entry_point_names_itself(tmp_path):
    site = tmp_path / "site"
    plugin_distribution(site, "gone = no_such_module")
    done = shoal(tmp_path, "run", "synthetic-hotspot", "--placement", "gone", "--out", "r", pythonpath=[site])
    assert done.returncode == 2
    assert "placement plugin 'gone' (no_such_module) failed to load" in done.stderr
    assert not (tmp_path / "r").exists()
