"""Run options are declared once: the flags of ``shoal run``, the keywords, signatures and
docstrings of ``shoal.run`` and ``shoal.simulation``, and the checks all come from the
declarations, and typed values reach the scenario as they are."""

from __future__ import annotations

import argparse
import inspect
import json
import tomllib
from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

import shoal
from shoal.cli import build_parser, main
from shoal.config import RunParams, load_scenario
from shoal.errors import ShoalError
from shoal.options import add_flags, at_least, check, declared, option, values
from shoal.session import RunOptions, SimulationOptions, run_scenario

SMALL = ["--steps", "3", "--set", "app.grid=[32,32]", "--tiles", "4", "--nodes", "1"]


def run_flags() -> dict[str, argparse.Action]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {a.dest: a for a in sub.choices["run"]._actions if a.option_strings}


def test_every_declared_run_option_is_a_flag_and_a_keyword_with_its_help():
    flags = run_flags()
    signature = inspect.signature(shoal.run).parameters
    doc = shoal.run.__doc__
    for cls in (RunParams, RunOptions):
        for f, opt in declared(cls):
            if opt.flag:
                assert f.name in flags and flags[f.name].help.startswith(opt.help.replace("%", "%%")), f.name
            if opt.flag or cls is RunOptions:
                assert f.name in signature, f.name
                assert f"\n    {f.name} : " in doc, f.name
    # fields set only through --set are no keywords: one way to set them
    assert "frame_every" not in signature and "halo" not in signature
    assert list(inspect.signature(shoal.simulation).parameters) == \
        ["scenario"] + [n for n in signature if n in inspect.signature(shoal.simulation).parameters][1:]
    assert "resume" not in inspect.signature(shoal.simulation).parameters
    assert shoal.run is run_scenario


def test_an_unknown_keyword_names_the_known_ones(tmp_path):
    with pytest.raises(ShoalError, match=r"unknown option\(s\) tiles_per_node; known: steps, tiles"):
        shoal.run("synthetic-hotspot", tiles_per_node=4, out=tmp_path / "r")
    with pytest.raises(ShoalError, match=r"unknown option\(s\) resume"):
        shoal.simulation("synthetic-hotspot", resume=tmp_path)
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("keywords, message", [
    ({"steps": "10"}, "run.steps expects int, got '10'"),
    ({"steps": 0}, "run.steps must be positive, got 0"),
    ({"period": -2}, "run.period: a period must be >= 0 steps, got -2"),
    ({"period": True}, "run.period expects int or str, got True"),
    ({"placement": "teleport"}, "unknown placement"),
    ({"view_every": 0}, "--view-every must be positive, got 0"),
    ({"allow_large": "yes"}, "allow_large expects bool"),
])
def test_a_bad_keyword_value_is_one_clear_error_before_anything_is_written(tmp_path, keywords, message):
    with pytest.raises(ShoalError, match=message.replace("(", r"\(").replace(")", r"\)")):
        run_scenario("synthetic-hotspot", out=tmp_path / "r", **keywords)
    assert not (tmp_path / "r").exists()


def test_a_period_keeps_its_type_from_the_flag_to_the_balancer(tmp_path):
    out = tmp_path / "run"
    assert main(["run", "synthetic-hotspot", *SMALL, "--nodes", "2", "--placement", "greedy", "--period", "adaptive",
                 "--out", str(out)]) == 0
    assert tomllib.loads((out / "config.toml").read_text())["run"]["period"] == "adaptive"
    rec = run_scenario("synthetic-hotspot", steps=4, tiles=4, nodes=2, placement="greedy", period=2,
                       set=["app.grid=[32,32]"], out=tmp_path / "two")
    config = tomllib.loads((rec.path / "config.toml").read_text())["run"]
    assert config["period"] == 2 and isinstance(config["period"], int)
    assert rec.trace.balance["step"].tolist() == [2]


def test_a_set_assignment_wins_over_a_flag_as_it_comes_later(tmp_path):
    out = tmp_path / "run"
    assert main(["run", "synthetic-hotspot", *SMALL, "--set", "run.steps=2", "--out", str(out)]) == 0
    assert json.loads((out / "summary.json").read_text())["steps"] == 2


def test_the_run_reads_as_timed_stages_in_its_log_and_summary(tmp_path):
    rec = run_scenario("synthetic-hotspot", steps=3, tiles=4, nodes=1, set=["app.grid=[32,32]"], out=tmp_path / "r")
    stages = rec.summary["stages_s"]
    for name in ("resolve", "build", "build.app", "build.decompose", "build.place", "build.prepare",
                 "build.claim", "build.attach", "simulate", "write.frames", "write.trace", "write.state",
                 "write.fit"):
        assert name in stages and stages[name] >= 0, name
    assert stages["build"] >= stages["build.app"] + stages["build.place"]
    line = next(line for line in (rec.path / "run.log").read_text().splitlines() if " stages: " in line)
    assert "resolve " in line and "build " in line and "(app " in line and "simulate " in line and "write " in line


@dataclass
class _Example:
    count: int = option(1, "how many", check=at_least(1))
    label: str | None = option(None, "a label", flag="--name", metavar="TEXT")
    hidden: int = option(0, "Python only", flag=False)


@given(st.integers(min_value=-5, max_value=5))
def test_a_declared_check_holds_whatever_the_value_came_from(count):
    parser = argparse.ArgumentParser()
    add_flags(parser, _Example)
    given_ = values(parser.parse_args(["--count", str(count), "--name", "x"]), _Example)
    assert given_ == {"count": count, "label": "x"}
    example = _Example(**given_)
    if count >= 1:
        check(example)
    else:
        with pytest.raises(ShoalError, match=f"--count must be positive, got {count}"):
            check(example)
    assert "hidden" not in values(parser.parse_args([]), _Example)


def test_a_flag_whose_text_does_not_parse_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["run", "synthetic-hotspot", "--period", "sometimes"])
    assert stop.value.code == 2 and "a period is a number of steps or 'adaptive'" in capsys.readouterr().err
    assert load_scenario("synthetic-hotspot").run.period == 0
    assert SimulationOptions().set == ()
