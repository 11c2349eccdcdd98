"""Bad input at the command line: one line on standard error, exit 2, nothing written.

Each case is something a new user typed or a file they had; the expected text is the part of
the line that tells them what to fix.
"""

import logging
import shutil
from pathlib import Path

import h5py
import numpy as np
import pytest

from conftest import edit_dataset as _set
from shoal.cli import main
from shoal.compilation import cache_folder_override
from shoal.files import save_npz
from shoal.log import ProgressLog
from shoal.session import run_scenario

SMALL = ["--steps", "3", "--set", "app.grid=[24,20]"]


def one_error_line(capsys, argv, expect_code=2):
    code = main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == expect_code, err
    lines = [line for line in err if line.startswith("error:") or line == "interrupted"]
    assert len(lines) == 1 and "Traceback" not in "\n".join(err), err
    return lines[0]


@pytest.mark.parametrize("assignment, expected", [
    ('app.grid=[64,"x"]', "app.grid[1] expects int, got 'x'"),
    ("app.grid=[64.5,64]", "app.grid[0] expects int, got 64.5"),
    ("app.grid=[64,64,64,64]", "app.grid must be 2 or 3 positive sizes"),
    ("app.grid=5", "app.grid expects list"),
    ("app.sigma=nan", "app.sigma must be a finite number, got nan"),
    ("app.sigma=inf", "app.sigma must be a finite number, got inf"),
    ("app.sigma=-inf", "app.sigma must be a finite number"),
    ("app.work_per_cell=true", "app.work_per_cell expects float, got True"),
    ("app.start=[0.5]", "app.start needs one value per grid axis (2)"),
    ("app.velocity=[1,2,3,4]", "app.velocity needs one value per grid axis"),
    ("app.diffusivity=0.9", "app.diffusivity must be in [0, 0.25]"),
    ("run.seed=-1", "run.seed must be >= 0, got -1"),
    ("run.steps=0", "run.steps must be positive"),
    ("run.resize=[[1,0]]", "every run.resize entry is [step, node, workers]"),
    ("run.tile_shape=[4,\"a\"]", "run.tile_shape[1] expects int"),
    ("nonsense", "--set expects key=value"),
    ("app.nope=1", "unknown key 'app.nope'"),
])
def test_a_bad_override_is_one_line_and_exit_2(capsys, tmp_path, assignment, expected):
    out = tmp_path / "run"
    line = one_error_line(capsys, ["run", "synthetic-hotspot", *SMALL, "--set", assignment, "--out", str(out)])
    assert expected in line
    assert not out.exists()  # refused before anything was written


@pytest.mark.parametrize("content, expected", [
    (b"\x00\x01\x89PNG\xff\xfe garbage", "not a TOML scenario (the file is not UTF-8 text)"),
    (b"run = 3\n[app]\nname = 'synthetic'\n", "[run] must be a table of keys and values, got run = 3"),
    (b"app = 'synthetic'\n", "[app] must be a table of keys and values"),
    (b"[app]\ngrid = [8, 8]\n", "[app] needs a name"),
    (b"[run\n", "invalid TOML"),
    (b"[app]\nname = 'sph9d'\n", "unknown app 'sph9d'"),
    (b"colour = 'red'\n[app]\nname = 'synthetic'\n", "unknown top-level keys ['colour']"),
])
def test_a_bad_scenario_file_is_one_line_and_exit_2(capsys, tmp_path, content, expected):
    scenario = tmp_path / "bad.toml"
    scenario.write_bytes(content)
    line = one_error_line(capsys, ["run", str(scenario), "--out", str(tmp_path / "run")])
    assert expected in line
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("argv, expected", [
    (["run", "no-such-scenario"], "unknown scenario 'no-such-scenario'"),
    (["run", "synthetic-hotspot", "--placement", "nope"], "unknown placement"),
    (["run", "synthetic-hotspot", "--placement", "greedy"], "give --period"),
    (["run", "synthetic-hotspot", "--lb", "refine.tolerance=nan", "--placement", "refine", "--period", "2"],
     "refine.tolerance must be a finite number"),
    (["run", "synthetic-hotspot", "--lb", "tolerance"], "--lb expects policy.key=value"),
    (["run"], "give a SCENARIO to run, or --resume RUN_DIR"),
])
def test_bad_flags_are_one_line_and_exit_2(capsys, argv, expected):
    assert expected in one_error_line(capsys, argv)


LIF = ["lif", "--nodes", "8", "--busy", "0.5", "--tiles-per-node", "4"]


@pytest.mark.parametrize("flags, expected", [
    (["--nodes", "0"], "nodes must be between 1 and 1,000,000, got 0"),
    (["--nodes", "1000000000"], "nodes must be between 1 and 1,000,000, got 1,000,000,000"),
    (["--nodes", "10000000000000000000000"], "nodes must be between 1 and 1,000,000"),
    (["--tiles-per-node", "0"], "tiles per node must be between 1 and 1,048,576, got 0"),
    (["--tiles-per-node", "100000000000"], "tiles per node must be between 1 and 1,048,576"),
    (["--busy", "1.5"], "busy fraction must be in (0, 1], got 1.5"),
    (["--busy", "nan"], "busy fraction must be in (0, 1], got nan"),
    (["--trials", "0"], "Monte Carlo needs at least 2 trials, got 0"),
    (["--trials", "-3"], "Monte Carlo needs at least 2 trials, got -3"),
    (["--seed", "-1"], "the seed must be >= 0, got -1"),
    (["--target", "0"], "target LIF must be a positive number, got 0.0"),
    (["--target", "nan"], "target LIF must be a positive number, got nan"),
    (["--target", "1e-9"], "no tiles-per-node up to 1048576 reaches E[LIF] <= 1e-09"),
])
def test_lif_refuses_bad_model_parameters_before_drawing_anything(capsys, tmp_path, flags, expected):
    figures = tmp_path / "figures"
    line = one_error_line(capsys, [*LIF, *flags, "--plot", "--out", str(figures)])
    assert expected in line
    assert capsys.readouterr().out == ""  # no estimate printed before the error
    assert not figures.exists()


def test_lif_of_a_large_cluster_answers_from_the_model_and_skips_the_monte_carlo(capsys):
    """A hundred thousand nodes are a cluster: the model answers, the Monte Carlo (6.4e10 tile
    draws) is skipped, saying why."""
    assert main(["lif", "--nodes", "100000", "--busy", "0.5", "--tiles-per-node", "32"]) == 0
    out = capsys.readouterr().out
    assert "E[LIF] Monte Carlo: skipped (Monte Carlo of 20000 trials x 100000 nodes x 32 tiles is 6.4e+10" in out
    assert "lower the trials" in out


def test_an_unexpected_error_is_one_line_with_a_hint_and_debug_shows_the_traceback(capsys, monkeypatch):
    import shoal.cli.scenarios as command

    def broken(args):
        raise RuntimeError("a bug\nover two lines")

    monkeypatch.setattr(command, "main", broken)
    assert main(["scenarios"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: unexpected RuntimeError: a bug (run with --debug for the traceback)"]
    assert main(["scenarios", "--debug"]) == 1
    assert "Traceback" in capsys.readouterr().err


def test_ctrl_c_outside_a_run_is_one_line_and_exit_130(capsys, monkeypatch):
    import shoal.cli.scenarios as command

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(command, "main", interrupted)
    assert one_error_line(capsys, ["scenarios"], expect_code=130) == "interrupted"


def test_help_shows_defaults_and_version_prints(capsys):
    with pytest.raises(SystemExit):
        main(["replay", "--help"])
    out = capsys.readouterr().out
    assert "(default: sfc)" in out and "(default: 5e-06)" in out and "--debug" in out
    with pytest.raises(SystemExit):
        main(["export-tit", "--help"])
    assert "--overhead" not in capsys.readouterr().out  # SimGrid's traces have no use for it
    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0 and capsys.readouterr().out.startswith("shoal ")


def test_progress_lines_say_step_time_and_eta():
    log = ProgressLog("dam", total=200, first=50, every_steps=10, every_s=1e9)
    assert log.line(100, 30.0, sim_time=0.25) == "dam: step 100/200 (50%), t = 0.25 s, wall 30s, ETA 1m00s"
    assert log.line(50, 0.0).endswith("ETA ?")


def test_progress_speaks_every_n_steps_and_at_the_end():
    said = []
    handler = logging.Handler()
    handler.emit = lambda record: said.append(record.getMessage().split(",")[0])
    logger = logging.getLogger("shoal")
    logger.addHandler(handler)
    level, logger.level = logger.level, logging.INFO
    try:
        log = ProgressLog("x", total=25, every_steps=10, every_s=1e9)
        for k in range(1, 26):
            log.step(k)
    finally:
        logger.removeHandler(handler)
        logger.level = level
    assert said == ["x: step 10/25 (40%)", "x: step 20/25 (80%)", "x: step 25/25 (100%)"]


def test_numba_cache_falls_back_when_the_install_folder_is_read_only(tmp_path, monkeypatch):
    package, home = tmp_path / "pkg", tmp_path / "home"
    package.mkdir()
    writable = {str(package): False}
    monkeypatch.setattr("os.access", lambda p, mode: writable.get(str(p), True))
    assert cache_folder_override(str(package), str(home), environ={}) is None  # Numba's user cache works
    assert (home / "numba").is_dir()
    writable[str(home / "numba")] = False
    fallback = cache_folder_override(str(package), str(home), environ={})
    assert fallback is not None and "shoal-numba-" in fallback
    assert cache_folder_override(str(package), str(home), environ={"NUMBA_CACHE_DIR": "/x"}) is None


@pytest.mark.parametrize("argv, expected", [
    (["--workers", "100000"], "the run asks for 200000 worker threads"),
    (["--set", "run.resize=[[1,0,5000]]"], "worker threads"),
    (["--set", "app.grid=[1000000,1000000]"], "this run needs about"),
])
def test_absurd_sizes_are_refused_with_the_estimate_before_allocating(capsys, tmp_path, argv, expected):
    out = tmp_path / "run"
    line = one_error_line(capsys, ["run", "synthetic-hotspot", "--steps", "3", "--nodes", "2", *argv,
                                   "--out", str(out)])
    assert expected in line and "--allow-large" in line
    assert not out.exists()


def test_the_estimates_scale_with_the_run_and_allow_large_lifts_them():
    from shoal.apps import get_app
    from shoal.apps.synthetic import SyntheticParams
    from shoal.errors import ShoalError
    from shoal.resources import STATE_COPIES, check_run

    spec = get_app("synthetic")
    small, big = SyntheticParams(grid=[62, 62]), SyntheticParams(grid=[126, 62])
    assert check_run(spec, small, 2) == STATE_COPIES * 3 * 8 * 64 * 64
    assert check_run(spec, big, 2) == 2 * check_run(spec, small, 2)
    with pytest.raises(ShoalError, match="needs about 288.0 KiB"):
        check_run(spec, small, 2, memory=1000)
    with pytest.raises(ShoalError, match="asks for 9 worker threads"):
        check_run(spec, small, 9, threads=8)
    assert check_run(spec, small, 9, threads=8, memory=1000, allow_large=True) > 1000


def test_a_run_folder_keeps_a_run_log(tmp_path):
    out = tmp_path / "run"
    assert main(["run", "synthetic-hotspot", *SMALL, "--tiles", "4", "--nodes", "1", "--out", str(out), "-q"]) == 0
    log = (out / "run.log").read_text()
    assert "synthetic-hotspot started: 4 tiles on 1 nodes (sfc)" in log
    assert main(["run", "synthetic-hotspot", *SMALL, "--out", str(out), "-q"]) == 2  # and refuses a second run


# ----- traces and final states a run never writes -----------------------------------------------
@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished run of 4 steps, 16 tiles on 2 nodes: 128 task rows."""
    return run_scenario("synthetic-hotspot", steps=4, tiles=16, nodes=2, set=["app.grid=[48,48]"],
                        out=tmp_path_factory.mktemp("bad") / "run").path




def _grid(cells_x, cells_y):
    """A grid whose tiling agrees with it (the last tiles take the rest)."""
    def edit(f):
        f["tiling"].attrs["grid"] = [cells_x, cells_y]
        for axis, n in enumerate((cells_x, cells_y)):
            edges = f[f"tiling/edges{axis}"][()]
            edges[-1] = n
            del f[f"tiling/edges{axis}"]
            f[f"tiling/edges{axis}"] = edges
    return edit


BAD_TRACES = {
    "NaN cost": (_set("tasks/cost", 5, np.nan),
                 "/tasks/cost holds nan at row 5 (costs must be finite and non-negative)"),
    "infinite cost": (_set("tasks/cost", 0, np.inf), "/tasks/cost holds inf at row 0"),
    "negative cost": (_set("tasks/cost", 9, -0.5), "/tasks/cost holds -0.5 at row 9"),
    "negative work": (_set("tasks/work", 2, -1), "/tasks/work holds -1 at row 2 (counts must be non-negative)"),
    "10^9 cells, edges not cut to it": (lambda f: f["tiling"].attrs.__setitem__("grid", [100000, 10000]),
                                        "/tiling/edges0 does not cut 0..100000"),
    "2 x 10^9 cells": (_grid(50000, 40000), "a grid of 2e+09 cells (50000 x 40000), more than the 1.07e+09"),
    "committed beyond the rows": (_set("committed", 0, 129), "/committed counts 129 rows of /tasks, which stores 128"),
}


@pytest.mark.parametrize("edit, expected", BAD_TRACES.values(), ids=BAD_TRACES.keys())
def test_a_trace_a_run_never_writes_is_refused_before_replay_or_report_write(capsys, tmp_path, finished, edit,
                                                                            expected):
    run = tmp_path / "run"
    shutil.copytree(finished, run)
    with h5py.File(run / "trace.h5", "r+") as f:
        edit(f)
    before = sorted(p.name for p in run.iterdir())
    replayed = tmp_path / "replayed"
    line = one_error_line(capsys, ["replay", str(run), "--nodes", "2", "--cores", "1", "--out", str(replayed)])
    assert expected in line and str(run / "trace.h5") in line
    assert not replayed.exists()
    assert expected in one_error_line(capsys, ["report", str(run)])
    assert sorted(p.name for p in run.iterdir()) == before  # no picture drawn


def test_compare_of_a_final_state_holding_nan_is_an_error_naming_the_field(capsys, tmp_path, finished):
    run = tmp_path / "nan"
    shutil.copytree(finished, run)
    with np.load(run / "state" / "final.npz") as z:
        state = {k: z[k] for k in z.files}
    name = sorted(k for k, v in state.items() if v.dtype.kind == "f")[0]
    state[name].flat[[3, 7]] = np.nan
    save_npz(run / "state" / "final.npz", state)
    line = one_error_line(capsys, ["compare", str(run), str(run)])  # NaN is not equal to itself
    assert line == (f"error: field {name!r} of {run} holds NaN (2 of {state[name].size} values), which equals "
                    "nothing, not even itself")
    assert f"field {name!r} of {run} holds NaN" in one_error_line(capsys, ["compare", str(finished), str(run)])
    assert main(["compare", str(finished), str(finished)]) == 0


# ----- where a run writes, and sizes that cannot be meant --------------------------------------------
@pytest.mark.parametrize("name", ["/tmp/x", "../../escaped", "..", "a/b", ""])
def test_a_scenario_name_is_a_label_and_the_run_stays_under_the_chosen_folder(name, tmp_path, monkeypatch, capsys):
    work = tmp_path / "deep" / "work"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    scenario = work / "mine.toml"
    scenario.write_text(f'name = "{name}"\n[run]\nsteps = 2\ntiles = 4\nnodes = 1\n[app]\nname = "synthetic"\n'
                        "grid = [16, 16]\n")
    outside = lambda: set(Path("/tmp").glob("x-*")) | set(tmp_path.glob("*")) | set((tmp_path / "deep").glob("*"))  # noqa: E731
    before = outside()
    assert main(["run", str(scenario)]) == 0, capsys.readouterr().err
    made = list((work / "runs").iterdir())
    assert len(made) == 1 and (made[0] / "summary.json").exists()
    assert made[0].resolve().parent == (work / "runs").resolve()
    assert outside() == before and sorted(p.name for p in work.iterdir()) == ["mine.toml", "runs"]


def test_an_empty_out_is_refused_and_nothing_is_written(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert "--out names no folder" in one_error_line(capsys, ["run", "synthetic-hotspot", *SMALL, "--out", ""])
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv, expected", [
    (["--steps", "99999999999999999999"], "run.steps must be <= 2147483647 (a trace numbers steps with 32-bit"),
    (["--set", "run.steps=99999999999999999999"], "run.steps must be <= 2147483647"),
    (["--invasive", "workload", "--cores", "100000"], "the run asks for 100000 worker threads"),
])
def test_sizes_that_cannot_be_meant_are_refused(argv, expected, tmp_path, capsys):
    assert expected in one_error_line(capsys, ["run", "synthetic-hotspot", *argv, "--out", str(tmp_path / "r")])
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("body", [
    "[run]\nsteps = " + "[" * 1000 + "]" * 1000,
    "[run]\nsteps = " + "{a = " * 1000 + "1" + "}" * 1000,
])
def test_a_scenario_nested_a_thousand_deep_is_one_line(body, tmp_path, capsys):
    path = tmp_path / "deep.toml"
    path.write_text('name = "deep"\n[app]\nname = "synthetic"\n' + body + "\n")
    assert one_error_line(capsys, ["run", str(path), "--out", str(tmp_path / "r")]) == \
        f"error: {path}: invalid TOML: nested too deeply"
    deep = "[" * 1000 + "]" * 1000
    assert "nested too deeply" in one_error_line(capsys, ["run", "synthetic-hotspot", "--set", f"run.steps={deep}",
                                                          "--out", str(tmp_path / "r")])
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("every, frames", [(0, []), (3, [0, 3, 6, 7])])
def test_frame_every_writes_what_it_says(every, frames, tmp_path):
    rec = run_scenario("synthetic-hotspot", steps=7, tiles=4, nodes=1,
                       set=["app.grid=[16,16]", f"run.frame_every={every}"], out=tmp_path / "r")
    written = sorted(int(p.stem.split("-")[1]) for p in (rec.path / "frames").glob("state-*.npz"))
    assert written == frames and (rec.path / "state" / "final.npz").exists()
