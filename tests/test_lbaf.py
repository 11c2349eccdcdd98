"""Export of a trace to vt/LBAF's LBDatafile JSON: the schema's rules, and the trace's loads."""

import json

import numpy as np
import pytest

from shoal import lbaf
from shoal.errors import ShoalError
from shoal.session import run_scenario

NODES = 3


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    # A moving hot spot rebalanced every 2 steps: tiles leave their home node.
    return run_scenario("synthetic-hotspot", steps=6, tiles=9, nodes=NODES, placement="greedy", period=2,
                        set=["app.grid=[48,48]"], out=tmp_path_factory.mktemp("lbaf") / "run").trace


@pytest.fixture(scope="module")
def files(trace, tmp_path_factory):
    out = lbaf.export(trace, tmp_path_factory.mktemp("lbaf") / "data")
    assert sorted(p.name for p in out.iterdir()) == [f"data.{r}.json" for r in range(NODES)]
    return [json.loads((out / f"data.{r}.json").read_text()) for r in range(NODES)]


# ----- the rules of vt's LBDatafile schema, checked by hand --------------------------------------
def _is(value, kind):
    """JSON types as the schema reads them: an int is not a float, a bool is not an int."""
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, kind)


def _check_keys(d, required, optional, where):
    assert isinstance(d, dict), where
    for key, kind in required.items():
        assert key in d and _is(d[key], kind), f"{where}: {key}"
    for key, kind in optional.items():
        assert key not in d or _is(d[key], kind), f"{where}: {key}"
    assert set(d) <= set(required) | set(optional), f"{where}: unknown keys {set(d) - set(required) - set(optional)}"


def _check_entity(e, where, task):
    ids = {"id": int, "seq_id": int, "collection_id": int, "objgroup_id": int, "index": list}
    if task:
        _check_keys(e, {"home": int, "type": str, "migratable": bool}, ids, where)
    else:
        _check_keys(e, {"type": str}, {**ids, "home": int, "migratable": bool}, where)
    assert all(_is(i, int) for i in e.get("index", [])), where
    assert "seq_id" in e or "id" in e, f"{where}: either id or seq_id"
    if e.get("migratable") is True and "seq_id" in e:
        assert "collection_id" in e, f"{where}: a migratable entity with a seq_id needs a collection_id"


def _check_file(doc, rank):
    _check_keys(doc, {"phases": list}, {"type": str, "metadata": dict}, "file")
    assert doc.get("type", "LBDatafile") == "LBDatafile"
    _check_keys(doc["metadata"], {}, {"type": str, "rank": int, "shared_node": dict, "phases": dict,
                                      "attributes": dict}, "metadata")
    assert doc["metadata"]["type"] == "LBDatafile" and doc["metadata"]["rank"] == rank
    for phase in doc["phases"]:
        _check_keys(phase, {"id": int, "tasks": list}, {"communications": list, "user_defined": dict,
                                                         "lb_iterations": list}, "phase")
        for task in phase["tasks"]:
            _check_keys(task, {"entity": dict, "node": int, "resource": str, "time": float},
                        {"subphases": list, "user_defined": dict, "attributes": dict}, "task")
            _check_entity(task["entity"], "task entity", task=True)
            for sub in task.get("subphases", []):
                _check_keys(sub, {"id": int, "time": float}, {}, "subphase")
        for comm in phase.get("communications", []):
            _check_keys(comm, {"type": str, "to": dict, "from": dict, "messages": int, "bytes": float}, {},
                        "communication")
            _check_entity(comm["to"], "to", task=False)
            _check_entity(comm["from"], "from", task=False)


def test_every_file_follows_the_lbdatafile_schema(files):
    for rank, doc in enumerate(files):
        _check_file(doc, rank)


def test_every_rank_lists_every_step_as_a_phase(trace, files):
    for doc in files:
        assert [p["id"] for p in doc["phases"]] == [int(s) for s in trace.steps]


def test_loads_per_rank_and_phase_are_the_traces(trace, files):
    steps = trace.steps
    load = np.zeros((len(steps), NODES))
    np.add.at(load, (np.searchsorted(steps, trace.tasks["step"]), trace.tasks["node"]), trace.tasks["cost"])
    exported = np.array([[sum(t["time"] for t in phase["tasks"]) for phase in doc["phases"]] for doc in files]).T
    np.testing.assert_allclose(exported, load, rtol=1e-12)
    for rank, doc in enumerate(files):
        for phase in doc["phases"]:
            mine = (trace.tasks["step"] == phase["id"]) & (trace.tasks["node"] == rank)
            assert sorted(t["entity"]["seq_id"] for t in phase["tasks"]) == sorted(set(trace.tasks["tile"][mine]))
            for task in phase["tasks"]:
                assert task["node"] == rank and task["resource"] == "cpu"
                assert task["time"] == pytest.approx(sum(s["time"] for s in task["subphases"]), rel=1e-12)
                assert [s["id"] for s in task["subphases"]] == list(range(len(trace.phases)))


def test_tasks_remember_their_home_and_some_moved(trace, files):
    home = trace.owner_at(int(trace.steps[0]))
    tasks = [(t, doc_rank) for doc_rank, doc in enumerate(files) for p in doc["phases"] for t in p["tasks"]]
    assert all(t["entity"]["home"] == home[t["entity"]["seq_id"]] for t, _ in tasks)
    assert all(t["entity"]["index"] == list(trace.tiling.tile_index(t["entity"]["seq_id"])) for t, _ in tasks)
    assert any(t["entity"]["home"] != rank for t, rank in tasks)  # the balancer moved tiles


def test_communications_carry_every_halo_byte_once(trace, files):
    for i, step in enumerate(trace.steps):
        comms = [c for doc in files for c in doc["phases"][i]["communications"]]
        m = trace.messages["step"] == step
        assert sum(c["bytes"] for c in comms) == trace.messages["bytes"][m].sum()
        assert sum(c["messages"] for c in comms) == m.sum()
        pairs = [(c["from"]["seq_id"], c["to"]["seq_id"]) for c in comms]
        assert len(pairs) == len(set(pairs)) == len(set(zip(trace.messages["src"][m], trace.messages["dst"][m],
                                                            strict=True)))
    for doc in files:  # listed by the node that ran the sender
        for phase in doc["phases"]:
            ran = {t["entity"]["seq_id"] for t in phase["tasks"]}
            assert all(c["from"]["seq_id"] in ran for c in phase["communications"])


def test_a_file_as_the_folder_is_refused(trace, tmp_path):
    (tmp_path / "data").write_text("")
    with pytest.raises(ShoalError, match="data: is a file"):
        lbaf.export(trace, tmp_path / "data")


@pytest.mark.parametrize("damage", ["int time", "no collection", "no ids", "unknown key"])
def test_the_schema_check_catches_what_lbaf_would_refuse(files, damage):
    doc = json.loads(json.dumps(files[0]))
    task = next(t for p in doc["phases"] for t in p["tasks"])
    if damage == "int time":
        task["time"] = 1
    elif damage == "no collection":
        del task["entity"]["collection_id"]
    elif damage == "no ids":
        del task["entity"]["seq_id"]
    else:
        task["load"] = 1.0
    with pytest.raises(AssertionError):
        _check_file(doc, 0)
