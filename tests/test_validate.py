"""``shoal validate``'s protocol: repeated runs quoted as medians with spreads, its table (ranks
and whether the ranking of policies held, per group) and the provenance it keeps."""

import json

import numpy as np
import pytest

from shoal import validate as v
from shoal.errors import ShoalError
from shoal.validate import COLUMNS, Validation, table


def row(group, nodes, workers, label, measured, predicted, m_spread=0.02, p_spread=0.01):
    return {"group": group, "scenario": f"{group}-case", "nodes": nodes, "workers": workers, "label": label,
            "measured_s": measured, "predicted_s": predicted, "error": predicted / measured - 1,
            "measured_spread": m_spread, "predicted_spread": p_spread}


CAL = {"task_overhead_s": 0.0, "payload_overhead_s": 0.0}


def hand_made() -> Validation:
    return Validation([
        row("synthetic", 1, 1, "sfc", 2.0, 1.8),
        row("synthetic", 2, 1, "geometric", 1.5, 1.2),   # measured 3rd, predicted 3rd
        row("synthetic", 2, 1, "birdshot", 1.0, 0.9),    # 1st, 1st
        row("synthetic", 2, 1, "greedy/5", 1.2, 1.0),    # 2nd, 2nd
        row("sph", 1, 1, "sfc", 3.0, 3.3),
        row("sph", 2, 1, "strips", 2.0, 1.5),            # measured 2nd, predicted 1st
        row("sph", 2, 1, "refine/20", 1.5, 1.6),         # 1st, 2nd: the ranking broke
    ], CAL)


def test_table_rows_quote_medians_with_spreads_error_ranks_and_the_verdict():
    rows = table(hand_made())
    assert all(len(r) == len(COLUMNS) for r in rows)
    assert rows[0] == ("synthetic-case", "1x1", "sfc", "1.800 ±1%", "2.000 ±2%", "-10.0%", "-", "-")
    assert rows[1] == ("synthetic-case", "2x1", "geometric", "1.200 ±1%", "1.500 ±2%", "-20.0%", "3 / 3", "yes")
    assert rows[2][6:] == ("1 / 1", "yes") and rows[3][6:] == ("2 / 2", "yes")
    assert rows[4][5:] == ("+10.0%", "-", "-")
    assert rows[5][6:] == ("2 / 1", "no") and rows[6][6:] == ("1 / 2", "no")


def test_ranked_sets_are_the_groups_with_two_multi_node_cases():
    result = hand_made()
    assert result.ranked_sets() == [("synthetic", 1), ("sph", 1)]
    assert result.ranking_preserved("synthetic") and not result.ranking_preserved("sph")
    lone = Validation([row("g", 1, 1, "sfc", 1.0, 1.0), row("g", 2, 1, "birdshot", 1.0, 1.0),
                       row("g", 2, 2, "birdshot", 0.5, 0.6)], CAL)
    assert lone.ranked_sets() == [] and all(r[6:] == ("-", "-") for r in table(lone))


def test_a_tie_in_the_measurement_holds_whatever_the_predicted_order():
    tied = Validation([row("g", 2, 1, "a", 1.00, 1.2, m_spread=0.03), row("g", 2, 1, "b", 1.02, 1.1)], CAL)
    assert [r[6:] for r in table(tied)] == [("1 / 2", "yes"), ("2 / 1", "yes")]


def test_validate_refuses_zero_repeats(tmp_path):
    with pytest.raises(ShoalError, match="at least 1 run"):
        v.validate(tmp_path, repeats=0)
    assert not any(tmp_path.iterdir())


def test_every_case_runs_repeats_times_and_keeps_runs_spreads_and_provenance(tmp_path, monkeypatch):
    monkeypatch.setattr(v, "CASES", [("synthetic", "synthetic-hotspot", ["app.grid=[32,32]"], 2, 1, "sfc", 0),
                                     ("synthetic", "synthetic-hotspot", ["app.grid=[32,32]"], 2, 1, "birdshot", 0)])
    monkeypatch.setattr(v, "STEPS", {"synthetic": 4})
    monkeypatch.setattr(v, "calibrate", lambda **kw: {"task_overhead_s": 1e-6, "handoff_s": 0.0})
    predicted = iter([0.3, 0.1, 0.2, 0.5, 0.4, 0.6])  # the replay, switched for fixed predictions
    monkeypatch.setattr(v, "predict", lambda *args: next(predicted))
    result = v.validate(tmp_path, repeats=3)
    saved = json.loads((tmp_path / "validation.json").read_text())
    assert saved["rows"] == result.rows and saved["provenance"] == result.provenance
    first, second = result.rows
    assert first["runs"] == 3 and first["predicted_runs_s"] == [0.3, 0.1, 0.2]
    assert first["predicted_s"] == 0.2 and first["predicted_spread"] == pytest.approx(0.2 / 0.2)
    assert second["predicted_s"] == 0.5 and second["predicted_spread"] == pytest.approx(0.2 / 0.5)
    for r in result.rows:
        m = r["measured_runs_s"]
        assert len(m) == 3 and r["measured_s"] == float(np.median(m))
        assert r["measured_spread"] == pytest.approx(np.ptp(m) / np.median(m))
        assert r["error"] == pytest.approx(r["predicted_s"] / r["measured_s"] - 1)
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == sorted(
        f"{k:02d}-synthetic-hotspot-2x1-{label}-{r}" for k, label in enumerate(("sfc", "birdshot")) for r in range(3))
    prov = result.provenance
    assert prov["busy"] in (True, False, None) and "load_after" in prov and prov["wall_s"] > 0


def test_the_commands_table_names_the_lock_its_replays_modeled(tmp_path, monkeypatch, capsys):
    from shoal.cli import main
    from shoal.replay.run import lock_line

    monkeypatch.setattr(v, "CASES", [("synthetic", "synthetic-hotspot", ["app.grid=[32,32]"], 2, 1, "sfc", 0)])
    monkeypatch.setattr(v, "STEPS", {"synthetic": 4})
    monkeypatch.setattr(v, "calibrate", lambda **kw: {"task_overhead_s": 1e-6, "payload_overhead_s": 0.0,
                                                       "wake_s": 0.0, "restart_s": 0.0, "handoff_s": 0.0})
    modeled, real = [], v.replay

    def replay(trace, cfg):  # the real replay, noting the lock it was asked for
        modeled.append(cfg.gil)
        return real(trace, cfg)

    monkeypatch.setattr(v, "replay", replay)
    assert main(["validate", "--repeats", "1", "--out", str(tmp_path)]) == 0
    assert modeled == [v.LOCK]
    assert f"modeled {lock_line(modeled)})" in " ".join(capsys.readouterr().out.split())
