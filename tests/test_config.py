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
