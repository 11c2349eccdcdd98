"""Checkpoints: a run resumed from its latest checkpoint ends bitwise identical to one that
never stopped, with another node/worker count or placement if asked, even after a kill."""

import json
import signal
import subprocess
import sys
import time

import pytest

from shoal.cli import main
from shoal.compare import compare_runs
from shoal.session import run_scenario

SPH = ["app.dx=0.05", "app.tank=[2.0, 1.2]", "app.fluid=[[0.0, 0.0, 0.5, 1.0]]", "run.frame_every=0"]


@pytest.mark.parametrize("scenario, overrides, resume_as", [
    ("synthetic-hotspot", ["app.grid=[64,64]"], dict(nodes=3, workers=1, placement="birdshot")),
    ("sph-dam-break", SPH, dict(nodes=1, workers=2, placement="geometric")),
    ("sph-dam-break", SPH + ["app.halo_every=3"], dict(nodes=2, workers=1, placement="strips")),
])
def test_resume_from_a_checkpoint_ends_identical(scenario, overrides, resume_as, tmp_path):
    full = run_scenario(scenario, steps=24, tiles=16, nodes=2, checkpoint_every=9, set=overrides,
                        out=tmp_path / "full")
    kept = sorted(p.name for p in (full.path / "state").glob("checkpoint-*.h5"))
    assert kept == ["checkpoint-000009.h5", "checkpoint-000018.h5"]
    resumed = run_scenario(None, resume=full.path, out=tmp_path / "resumed", **resume_as)
    # The trace (and the summary from it) carries on from step 0 on the same nodes; on other nodes
    # its per-node tables start afresh at the checkpoint (the old trace kept beside it).
    carried = resume_as["nodes"] == 2
    assert resumed.summary["resumed_from_step"] == 18 and resumed.summary["steps"] == (24 if carried else 6)
    assert compare_runs(full.path, resumed.path).identical


def test_resume_with_dynamic_balancing_keeps_the_balancer_memory(tmp_path):
    kw = dict(steps=20, tiles=64, nodes=4, placement="swap", period=2, set=["app.grid=[64,64]"])
    full = run_scenario("synthetic-hotspot", checkpoint_every=10, out=tmp_path / "full", **kw)
    resumed = run_scenario(None, resume=full.path, out=tmp_path / "resumed")
    assert compare_runs(full.path, resumed.path).identical


def test_a_killed_run_resumes_in_place_and_matches_an_uninterrupted_one(tmp_path):
    args = ["synthetic-hotspot", "--steps", "300", "--tiles", "16", "--nodes", "1",
            "--set", "app.grid=[96,96]", "--set", "app.work_per_cell=3000.0"]
    run = tmp_path / "killed"
    proc = subprocess.Popen([sys.executable, "-m", "shoal", "run", *args, "--checkpoint-every", "20",
                             "--out", str(run)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while not list((run / "state").glob("checkpoint-*.h5")) and time.time() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    # 300 steps against a checkpoint every 20: the kill lands long before the end.
    assert not (run / "summary.json").exists(), "the run finished before it was killed"
    assert not (run / "state" / "final.npz").exists()  # nothing that looks complete
    assert main(["run", "--resume", str(run)]) == 0
    assert json.loads((run / "summary.json").read_text())["resumed_from_step"] >= 20
    assert main(["run", *args, "--out", str(tmp_path / "whole")]) == 0
    assert compare_runs(run, tmp_path / "whole").identical


def test_resume_errors_are_clear(tmp_path, capsys):
    plain = run_scenario("synthetic-hotspot", steps=3, tiles=4, nodes=1, set=["app.grid=[32,32]"],
                         out=tmp_path / "plain")
    assert main(["run", "--resume", str(plain.path), "--out", str(tmp_path / "x")]) == 2
    assert "no checkpoint" in capsys.readouterr().err
    assert main(["run", "--resume", str(tmp_path / "nowhere")]) == 2
    assert "not a run folder" in capsys.readouterr().err
    assert main(["run"]) == 2
    assert "--resume" in capsys.readouterr().err
