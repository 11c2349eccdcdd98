"""`shoal study`: three tiny simulations under each policy end with their solo runs' states; the
table names every simulation; the decision log gives each simulation's cores; bad input is one
line and exit 2 before anything starts; Ctrl-C leaves resumable run folders."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from shoal.cli import main
from shoal.compare import compare_runs
from shoal.errors import ShoalError
from shoal.session import resumable, run_scenario
from shoal.study import (
    POLICIES,
    PolicyRun,
    StudySimulation,
    cores_from_log,
    make_study,
    parse_vary,
    run_study,
    split_values,
    table,
)

SCENARIO = "synthetic-hotspot"
GRIDS = "app.grid=[32,32],[40,40],[48,48]"
ARRIVE = "0,0.2,0.4"
STEPS = 5
CORES = 2


def policies() -> list[str]:
    """Every policy whose runs can start here: invasive needs `shoal run --manager`."""
    try:
        import shoal.invasive.join  # noqa: F401
    except ImportError:
        return [p for p in POLICIES if p != "invasive"]
    return list(POLICIES)


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """The study run once under every policy, and each simulation's solo run."""
    base = tmp_path_factory.mktemp("study")
    plan = make_study(SCENARIO, [GRIDS], ARRIVE, ",".join(policies()), CORES, STEPS)
    runs = run_study(plan, base / "study", say=lambda line: None)
    solo = [run_scenario(SCENARIO, steps=STEPS, nodes=1, workers=1, set=plan.assignments(k), out=base / f"solo-{k}")
            for k in range(plan.size)]
    return plan, runs, solo, base / "study"


@pytest.mark.xdist_group("study")  # one test worker builds the study, not each
def test_every_simulation_ends_with_its_solo_runs_state(study):
    plan, runs, solo, _ = study
    assert [r.policy for r in runs] == policies()
    for run in runs:
        assert [s.status for s in run.simulations] == ["finished"] * 3, run.policy
        for sim in run.simulations:
            assert compare_runs(sim.run, solo[sim.index].path).identical, (run.policy, sim.index)


@pytest.mark.xdist_group("study")  # one test worker builds the study, not each
def test_the_schedule_keeps_each_policys_rule(study):
    plan, runs, _, _ = study
    by = {r.policy: r.simulations for r in runs}
    for sims in by.values():
        assert all(s.start >= s.arrival for s in sims)  # nobody starts before it arrives
    seq = by["sequential"]
    assert all(later.start >= earlier.end for earlier, later in zip(seq, seq[1:], strict=False))  # one at a time
    for sims in by.values():
        assert all(len(s.cores) >= 2 and s.cores[-1][1] == 0 for s in sims)  # cores held, then given back
    assert all(s.cores[0] == (s.start, CORES) for s in by["all-at-once"] + seq)  # every one with all R workers
    if "invasive" in by:
        for sim in by["invasive"]:
            assert 1 <= max(c for _, c in sim.cores) <= CORES


@pytest.mark.xdist_group("study")  # one test worker builds the study, not each
def test_the_table_and_json_name_every_simulation(study):
    plan, runs, _, out = study
    spans, rows = table(plan, runs)
    assert [row[0] for row in spans] == policies()
    assert {(row[0], row[1]) for row in rows} == {(p, f"sim-{k}") for p in policies() for k in range(3)}
    assert all(row[-1] == "finished" and row[2].startswith("app.grid=[") for row in rows)
    saved = json.loads((out / "study.json").read_text())
    assert list(saved["policies"]) == policies()
    for run in runs:
        span = saved["policies"][run.policy]["makespan_s"]
        assert span == pytest.approx(max(s.end for s in run.simulations) - 0.0)
    assert (out / "cores.png").stat().st_size > 0


def test_values_split_at_top_level_commas():
    assert split_values('4,[1,2],"a,b", x') == ["4", "[1,2]", '"a,b"', "x"]
    assert parse_vary([GRIDS, "app.sigma=0.1,0.2,0.3"])["app.grid"] == ["[32,32]", "[40,40]", "[48,48]"]


def test_the_decision_log_gives_each_simulation_its_cores(tmp_path):
    log = tmp_path / "manager.log"
    log.write_text("\n".join([
        "10:00:00.000 resource manager: 2 cores (physical), policy workload",
        "10:00:00.500 app 1 registers (run, pid 111)",
        "10:00:00.500 grant [0, 1] -> app 1 (D = {1: 2})",
        "10:00:01.000 app 2 registers (run, pid 222)",
        "10:00:01.000 release [1] -> app 1 (D = {1: 1, 2: 1})",
        "10:00:01.250 grant [1] -> app 2 (D = {1: 1, 2: 1})",
        "10:00:02.000 app 1 retreats: cores [0] free",
        "10:00:02.000 grant [0] -> app 2 (D = {2: 2})",
        "10:00:03.000 app 2 gone (end of connection): cores [0, 1] free",
    ]) + "\n")
    sims = {pid: StudySimulation(k, 0.0, tmp_path / f"sim-{k}") for k, pid in enumerate((111, 222))}
    local = time.mktime((2026, 1, 1, 10, 0, 0, 0, 0, -1))  # 10:00:00 local time: the policy's start
    cores_from_log(log, local, sims)
    assert sims[111].cores == [(0.5, 2), (1.0, 1), (2.0, 0)]
    assert sims[222].cores == [(1.25, 1), (2.0, 2), (3.0, 0)]


@pytest.mark.parametrize(("argv", "expected"), [
    (["--vary", "app.nope=1,2", "--arrive", "0,1"], "unknown key 'app.nope'"),
    (["--vary", "app.sigma=0.1,0.2", "--vary", "app.work_per_cell=1,2,3", "--arrive", "0,1"], "as long as"),
    (["--vary", "app.sigma=0.1,0.2", "--arrive", "0,-1"], "must be a number of seconds >= 0"),
    (["--vary", "app.sigma=0.1,0.2", "--arrive", "0"], "1 times for 2 simulations"),
    (["--vary", "app.sigma=0.1,0.2", "--arrive", "0,1", "--cores", "0"], "--cores must be"),
    (["--vary", "app.sigma=0.1,0.2", "--arrive", "0,1", "--policies", "invasive,fifo"], "--policies"),
    (["--vary", "app.sigma=0.1,0.2", "--arrive", "0,1", "--set", "app.grid=[4,4]", "--set", "run.tiles=64"],
     "simulation 0 (app.sigma=0.1): more tiles than cells: 64 tiles for 16 cells"),
])
def test_bad_input_is_one_line_and_exit_2_before_anything_starts(capsys, tmp_path, argv, expected):
    out = tmp_path / "study"
    assert main(["study", SCENARIO, *argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and expected in err, err
    assert not out.exists()


def test_a_folder_in_use_is_refused(tmp_path):
    (tmp_path / "study").mkdir()
    (tmp_path / "study" / "x").write_text("")
    plan = make_study(SCENARIO, [], "0", "sequential", CORES, STEPS)
    with pytest.raises(ShoalError, match="not an empty folder"):
        run_study(plan, tmp_path / "study")


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_stops_every_simulation_at_a_step_boundary_and_they_resume(tmp_path, signum):
    """A study too long to finish is interrupted (Ctrl-C, or SIGTERM as a batch system sends) once
    its two simulations step; each stops with a checkpoint that ``shoal run --resume`` accepts
    (resuming equals an uninterrupted run: the checkpoint tests show that for every app)."""
    out = tmp_path / "study"
    cmd = [sys.executable, "-m", "shoal", "study", SCENARIO, "--vary", "app.grid=[32,32],[40,40]", "--arrive", "0,0",
           "--policies", "all-at-once", "--cores", "1", "--steps", "20000", "--out", str(out)]
    # Ctrl-C as a terminal sends it: SIGINT at its default (a parallel test worker ignores it, and a
    # child inherits an ignored signal)
    study = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    logs = [out / "all-at-once" / f"sim-{k}.log" for k in range(2)]
    while not all(log.exists() and "step " in log.read_text() for log in logs):  # both past their first 100 steps
        assert study.poll() is None, study.communicate()
        time.sleep(0.05)
    study.send_signal(signum)
    _, err = study.communicate(timeout=300)
    assert study.returncode == 130, err
    saved = json.loads((out / "study.json").read_text())["policies"]["all-at-once"]["simulations"]
    assert [s["status"] for s in saved] == ["stopped", "stopped"], err
    for sim in saved:
        assert f"shoal run --resume {sim['run']}" in err
        assert not (Path(sim["run"]) / "summary.json").exists()
        assert resumable(Path(sim["run"])).run.steps == 20000  # its checkpoint and configuration are there
    assert not [p for p in os.listdir(out) if p not in ("all-at-once", "study.json", "cores.png")]


def test_a_policy_run_without_simulations_finished_has_no_makespan(tmp_path):
    sims = [StudySimulation(0, 0.0, tmp_path / "sim-0", start=0.0, end=1.0, exit=0),
            StudySimulation(1, 0.5, tmp_path / "sim-1", start=0.5, end=0.7, exit=2)]
    assert PolicyRun("sequential", sims).makespan is None
    assert PolicyRun("sequential", sims[:1]).makespan == 1.0


@pytest.mark.slow
def test_a_killed_study_leaves_no_simulation_running_and_each_resumable(tmp_path):
    """SIGKILL gives the study no chance to stop its simulations: they see their parent gone and
    stop themselves at a step boundary, with a checkpoint (shoal.lifeline)."""
    out = tmp_path / "study"
    cmd = [sys.executable, "-m", "shoal", "study", SCENARIO, "--vary", "app.grid=[32,32]", "--arrive", "0",
           "--policies", "all-at-once", "--cores", "1", "--steps", "20000", "--out", str(out)]
    study = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    log, run = out / "all-at-once" / "sim-0.log", out / "all-at-once" / "sim-0"
    while not (log.exists() and "step " in log.read_text()):
        assert study.poll() is None
        time.sleep(0.05)
    children = [int(pid) for pid in subprocess.run(["ps", "-o", "pid=", "--ppid", str(study.pid)],
                                                   capture_output=True, text=True).stdout.split()]
    study.kill()
    study.wait()
    deadline = time.monotonic() + 120
    while any(_alive(pid) for pid in children) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert children and not any(_alive(pid) for pid in children)
    assert not (run / "summary.json").exists()
    assert resumable(run).run.steps == 20000


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie left for init to reap counts as ended)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False
