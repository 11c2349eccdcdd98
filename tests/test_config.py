import pytest

from shoal.config import builtin_scenarios, load_scenario, scenario_from_dict
from shoal.errors import ShoalError


def test_builtin_scenarios_load_and_validate():
    names = builtin_scenarios()
    assert {"synthetic-hotspot", "synthetic-ramp", "synthetic-hotspot-3d"} <= set(names)
    for name in names:
        sc = load_scenario(name)
        assert sc.name == name and sc.description


def test_set_overrides_typed_fields():
    sc = load_scenario("synthetic-hotspot").override(
        ["run.steps=7", "app.grid=[64, 32]", "placement=birdshot", "app.sigma=1"])
    assert sc.run.steps == 7 and sc.params.grid == [64, 32]
    assert sc.run.placement == "birdshot"
    assert sc.params.sigma == 1.0 and isinstance(sc.params.sigma, float)


def test_resolved_config_is_itself_a_scenario():
    import tomllib

    sc = load_scenario("synthetic-ramp").override(["run.steps=3"])
    again = scenario_from_dict(tomllib.loads(sc.to_toml()))
    assert again.to_dict() == sc.to_dict()


@pytest.mark.parametrize("assignment, match", [
    ("run.stepz=3", "valid keys: run.steps"),
    ("app.colour=3", "valid keys:.*app.grid"),
    ("run.steps=three", "run.steps expects int"),
    ("run.steps=0", "run.steps must be positive"),
    ("run.placement=nowhere", "unknown placement"),
    ("app.grid=5", "app.grid expects list"),
    ("steps", "key=value"),
    ("app.name=other", "cannot be overridden"),
])
def test_bad_overrides_name_what_is_wrong(assignment, match):
    with pytest.raises(ShoalError, match=match):
        load_scenario("synthetic-hotspot").override([assignment])


def test_unknown_scenario_lists_the_builtin_ones():
    with pytest.raises(ShoalError, match="synthetic-hotspot"):
        load_scenario("no-such-scenario")


def test_scenario_files_are_checked(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "x"\n[app]\nname = "synthetic"\nwobble = 1\n')
    with pytest.raises(ShoalError, match="unknown key app.wobble"):
        load_scenario(str(bad))
    bad.write_text("name = [")
    with pytest.raises(ShoalError, match="invalid TOML"):
        load_scenario(str(bad))
    bad.write_text('name = "x"\n[app]\nname = "nope"\n')
    with pytest.raises(ShoalError, match="unknown app"):
        load_scenario(str(bad))


def test_policy_parameters_come_from_the_balance_table_then_the_command_line():
    table = {"refine": {"tolerance": 1.2}, "swap": {"interval": 4, "smoothing": 1}}
    sc = scenario_from_dict({"name": "x", "app": {"name": "synthetic"}, "run": {}, "balance": table})
    assert sc.balance == {"refine": {"tolerance": 1.2}, "swap": {"interval": 4, "smoothing": 1.0}}
    sc.override_balance(["refine.tolerance=1.02", "refine.faithful=false"])
    assert sc.balance["refine"] == {"tolerance": 1.02, "faithful": False}
    from shoal.placement import get_policy, policy_params

    params = policy_params(get_policy("refine"), sc.balance)
    assert params.tolerance == 1.02 and params.faithful is False
    assert policy_params(get_policy("greedy-refine"), sc.balance).tolerance == 1.05  # its default


@pytest.mark.parametrize("assignment, match", [
    ("refine.bogus=1", "unknown parameter of 'refine'; its parameters: refine.tolerance, refine.faithful"),
    ("greedy.tolerance=1.1", "its parameters: none"),
    ("nosuch.tolerance=1.1", "unknown placement 'nosuch'"),
    ("refine.tolerance=0.5", "tolerance must be a finite number >= 1"),
    ("refine.tolerance=nan", "refine.tolerance must be a finite number, got nan"),
    ("refine.tolerance=fast", "expects float"),
    ("swap.smoothing=0", "smoothing must lie in"),
    ("tolerance=1.1", "policy.key=value"),
])
def test_bad_policy_parameters_are_one_clear_error(assignment, match):
    with pytest.raises(ShoalError, match=match):
        load_scenario("synthetic-hotspot").override_balance([assignment])


def test_policy_parameters_reach_real_runs_and_replays(tmp_path, capsys):
    import json
    import tomllib

    from shoal.cli import main

    (tmp_path / "hot.toml").write_text(load_scenario("synthetic-hotspot").to_toml()
                                       + "\n[balance]\nrefine.tolerance = 100.0\n")
    run = tmp_path / "run"
    argv = ["run", str(tmp_path / "hot.toml"), "--steps", "9", "--tiles", "32", "--set", "app.grid=[64,64]",
            "--placement", "refine", "--period", "3", "--out"]
    assert main([*argv, str(run)]) == 0
    config = tomllib.loads((run / "config.toml").read_text())
    assert config["balance"] == {"refine": {"tolerance": 100.0}}
    # a tolerance of 100 leaves the hot spot's node alone; the command line wins over the table
    assert json.loads((run / "summary.json").read_text())["migrated_tiles"] == 0
    assert main([*argv, str(tmp_path / "strict"), "--lb", "refine.tolerance=1.0"]) == 0
    assert json.loads((tmp_path / "strict" / "summary.json").read_text())["migrated_tiles"] > 0
    # the replay reads the recorded table, and --lb wins there too
    common = ["replay", str(run), "--nodes", "4", "--cores", "1", "--placement", "refine", "--period", "3"]
    assert main([*common, "--out", str(tmp_path / "loose")]) == 0
    assert main([*common, "--lb", "refine.tolerance=1.0", "--out", str(tmp_path / "tight")]) == 0
    loose, tight = (json.loads((tmp_path / d / "summary.json").read_text()) for d in ("loose", "tight"))
    assert loose["migrated_tiles"] == 0 < tight["migrated_tiles"]
    assert tomllib.loads((tmp_path / "tight" / "config.toml").read_text())["replay"]["balance"] == {
        "refine": {"tolerance": 1.0}}
    capsys.readouterr()
    assert main([*common, "--lb", "refine.tolerance=0.5", "--out", str(tmp_path / "bad")]) == 2
    assert capsys.readouterr().err.count("\n") == 1
