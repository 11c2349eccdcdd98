"""The `shoal` command as users script it: run folders, compare's exit codes, reports, errors."""

import json
import subprocess
import sys

import pytest

from shoal.cli import build_parser, main

SMALL = ["--steps", "5", "--set", "app.grid=[40,32]"]
SUMMARY_KEYS = {"app", "scenario", "steps", "tiles", "nodes", "workers", "placement", "wall_s",
                "step_time_mean_s", "lif_mean", "efficiency"}


def shoal(*args):
    return subprocess.run([sys.executable, "-m", "shoal", *args], capture_output=True, text=True)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("cli")
    made = {}
    for name, extra in {
        "ref": ["--tiles", "1", "--nodes", "1", "--workers", "1", "--placement", "sfc"],
        "birdshot16": ["--tiles", "16", "--nodes", "2", "--workers", "2", "--placement", "birdshot"],
        "strips20": ["--tiles", "20", "--nodes", "4", "--workers", "1", "--placement", "strips"],
        "geometric-shape": ["--nodes", "3", "--placement", "geometric", "--set", "run.tile_shape=[7,6]"],
        "other": ["--tiles", "4", "--nodes", "2", "--set", "app.diffusivity=0.05"],
    }.items():
        assert main(["run", "synthetic-hotspot", *SMALL, *extra, "--out", str(base / name)]) == 0
        made[name] = base / name
    return made


def test_run_folder_has_config_trace_state_and_summary(runs):
    folder = runs["birdshot16"]
    for part in ("config.toml", "trace.h5", "state/final.npz", "summary.json"):
        assert (folder / part).exists(), part
    summary = json.loads((folder / "summary.json").read_text())
    assert SUMMARY_KEYS <= set(summary)
    assert summary["tiles"] == 16 and summary["nodes"] == 2 and summary["workers"] == 2
    assert summary["placement"] == "birdshot" and summary["steps"] == 5
    assert 0 < summary["efficiency"] <= 1.0 + 1e-9
    assert summary["lif_mean"] >= 0


@pytest.mark.parametrize("other", ["birdshot16", "strips20", "geometric-shape"])
def test_compare_says_identical_across_tilings_placements_and_workers(runs, other):
    r = shoal("compare", str(runs["ref"]), str(runs[other]))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "largest absolute difference: 0" in r.stdout


def test_compare_exits_1_on_runs_that_differ(runs):
    r = shoal("compare", str(runs["ref"]), str(runs["other"]))
    assert r.returncode == 1
    assert "different" in r.stdout and "u: max |a - b|" in r.stdout


def test_compare_exits_2_on_error(runs, tmp_path):
    r = shoal("compare", str(runs["ref"]), str(tmp_path / "nothing"))
    assert r.returncode == 2 and "error:" in r.stderr


def test_report_draws_pngs(runs):
    from shoal.report import report_run

    paths = report_run(runs["birdshot16"])
    names = {p.name for p in paths}
    assert {"load-heatmap.png", "timeline.png", "lif.png", "placement.png", "frame-final.png"} <= names
    for p in paths:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 5000


def test_lif_prints_the_three_estimates_and_draws_figures(tmp_path):
    r = shoal("lif", "--nodes", "32", "--busy", "0.6", "--tiles-per-node", "32", "--trials", "4000",
              "--plot", "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "approximation (Birdshot Eq. 2): 0.3800" in r.stdout
    assert "exact (binomial model):         0.2891" in r.stdout
    assert "Monte Carlo" in r.stdout
    assert (tmp_path / "lif-figure3.png").exists() and (tmp_path / "lif-figure4.png").exists()


def test_every_subcommand_has_help():
    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices
    for name in commands:
        with pytest.raises(SystemExit) as info:
            parser.parse_args([name, "--help"])
        assert info.value.code == 0


@pytest.mark.parametrize("args, match", [
    (["run", "no-such-scenario"], "unknown scenario"),
    (["run", "synthetic-hotspot", "--tiles", "100000", "--set", "app.grid=[8,8]"], "more tiles than cells"),
    (["run", "synthetic-hotspot", "--set", "run.wobble=1"], "valid keys"),
    (["run", "synthetic-hotspot", "--steps", "0"], "must be positive"),
    (["run", "synthetic-hotspot", "--placement", "teleport"], "unknown placement"),
    (["lif", "--nodes", "4", "--busy", "1.5", "--tiles-per-node", "4"], "busy fraction"),
])
def test_bad_input_is_one_line_and_exit_2(args, match, capsys, tmp_path):
    assert main([*args, "--out", str(tmp_path / "x")] if args[0] == "run" else args) == 2
    err = capsys.readouterr().err.strip()
    assert match in err and len(err.splitlines()) == 1


def test_a_finished_run_folder_is_never_overwritten(runs, capsys):
    assert main(["run", "synthetic-hotspot", *SMALL, "--out", str(runs["ref"])]) == 2
    assert "already holds a finished run" in capsys.readouterr().err


def test_python_api_runs_a_scenario(tmp_path):
    import shoal

    rec = shoal.run("synthetic-ramp", steps=3, placement="birdshot", set=["app.grid=[32,16]"], out=tmp_path / "r")
    assert rec.summary["scenario"] == "synthetic-ramp" and rec.summary["steps"] == 3
    assert rec.state()["u"].shape == (32, 16)


def test_the_first_compilation_is_announced_once_per_app_and_only_once_the_input_is_good(tmp_path, monkeypatch,
                                                                                          capsys):
    """A cold cache says the pause is compilation, not a hang, for every app's first run; bad
    input stays one line."""
    import shoal.compilation

    monkeypatch.setattr(shoal.compilation, "marker_file", lambda part: tmp_path / f"{part}.compiled")
    assert main(["run", "synthetic-hotspot", *SMALL, "--set", "app.no_such_key=1", "--out", str(tmp_path / "bad")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("error:") and not list(tmp_path.glob("*.compiled"))
    assert main(["run", "synthetic-hotspot", *SMALL, "--out", str(tmp_path / "good")]) == 0
    assert capsys.readouterr().err.count("compiling synthetic kernels, first run only") == 1
    assert main(["run", "synthetic-hotspot", *SMALL, "--out", str(tmp_path / "again")]) == 0
    assert "compiling" not in capsys.readouterr().err
    sph = ["--steps", "2", "--tiles", "4", "--nodes", "1", "--set", "app.dx=0.05", "--set", "app.tank=[1.0,0.6]",
           "--set", "app.fluid=[[0.0,0.0,0.25,0.5]]"]
    assert main(["run", "sph-dam-break", *sph, "--out", str(tmp_path / "sph")]) == 0
    assert capsys.readouterr().err.count("compiling sph2d kernels, first run only") == 1
    assert sorted(p.name for p in tmp_path.glob("*.compiled")) == ["sph2d.compiled", "synthetic.compiled"]


def test_the_command_line_and_the_session_import_without_scipy_s_heavy_modules():
    """``shoal run --help`` and ``import shoal.session`` stay light: SciPy's optimize and stats
    (a second or two to import) come only where a policy or a model uses them."""
    probe = ("import sys, contextlib, io\n"
             "import shoal.session\n"
             "from shoal.cli import main\n"
             "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
             "    main(['run', '--help'])\n"
             "print(sorted(m for m in sys.modules if m.startswith(('scipy.optimize', 'scipy.stats', "
             "'scipy.interpolate', 'scipy.spatial'))))\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
