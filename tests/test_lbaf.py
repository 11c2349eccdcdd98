"""Export of a trace to vt/LBAF's LBDatafile JSON: vt's schema, what LBAF's PyPI release reads,
and the trace's loads; the ``shoal export-lbaf`` command.

LBAF 1.0.1, its only PyPI release, installs on Python 3.8 to 3.10 with NumPy 1.22 pinned, so it
cannot run beside shoal: its reader's needs are checked here as its code states them (a task's
entity ``id``, an int; a task's ``time``, a float >= 0; both ends of a communication by ``id``;
every rank the same phases), beside vt's schema (scripts/LBDatafile_schema.py) and its
validator's check that communications name tasks of their phase."""

import json

import numpy as np
import pytest

from shoal import lbaf
from shoal.cli import main
from shoal.errors import ShoalError
from shoal.session import run_scenario

NODES = 3


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    # A moving hot spot rebalanced every 2 steps: tiles leave their home node.
    return run_scenario("synthetic-hotspot", steps=6, tiles=9, nodes=NODES, placement="greedy", period=2,
                        set=["app.grid=[48,48]"], out=tmp_path_factory.mktemp("lbaf") / "run")


@pytest.fixture(scope="module")
def trace(run):
    return run.trace


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
    # LBAF 1.0.1 reads the id alone (an object's id must be an int), and only of "object" entities
    assert _is(e.get("id"), int) and e["type"] == "object", f"{where}: LBAF 1.0.1 needs an object's id"


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


def _check_dataset(docs):
    """What holds across the files: LBAF reads every phase on every rank; vt's validator wants
    every communication's ends among the tasks of its phase; LBAF keys objects by id."""
    assert len({len(doc["phases"]) for doc in docs}) == 1
    for n in range(len(docs[0]["phases"])):
        tasks = [t for doc in docs for t in doc["phases"][n]["tasks"]]
        ids = [t["entity"]["id"] for t in tasks]
        assert len(ids) == len(set(ids)), "one task per object and phase"
        assert all(t["time"] >= 0.0 for t in tasks), "LBAF refuses a negative load"
        ends = {c[k]["id"] for doc in docs for c in doc["phases"][n].get("communications", []) for k in ("from", "to")}
        assert ends <= set(ids), f"phase {n}: communications name objects without a task"


def test_every_file_follows_the_lbdatafile_schema_and_what_lbaf_reads(files):
    for rank, doc in enumerate(files):
        _check_file(doc, rank)
    _check_dataset(files)


def test_both_ids_name_the_tile(files):
    entities = [t["entity"] for doc in files for p in doc["phases"] for t in p["tasks"]]
    entities += [c[k] for doc in files for p in doc["phases"] for c in p["communications"] for k in ("from", "to")]
    assert entities and all(e["id"] == e["seq_id"] and e["collection_id"] == lbaf.COLLECTION for e in entities)


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


@pytest.mark.parametrize("damage", ["int time", "no collection", "no id", "comm without id", "unknown key"])
def test_the_schema_check_catches_what_lbaf_would_refuse(files, damage):
    doc = json.loads(json.dumps(files[0]))
    task = next(t for p in doc["phases"] for t in p["tasks"])
    comm = next(c for p in doc["phases"] for c in p["communications"])
    if damage == "int time":
        task["time"] = 1
    elif damage == "no collection":
        del task["entity"]["collection_id"]
    elif damage == "no id":  # what LBAF 1.0.1 crashed on
        del task["entity"]["id"]
    elif damage == "comm without id":
        del comm["to"]["id"]
    else:
        task["load"] = 1.0
    with pytest.raises(AssertionError):
        _check_file(doc, 0)


@pytest.mark.parametrize("damage", ["missing phase", "duplicate task", "negative time", "dangling comm"])
def test_the_dataset_check_catches_what_lbaf_would_refuse(files, damage):
    docs = json.loads(json.dumps(files))
    phase = docs[0]["phases"][1]
    if damage == "missing phase":
        del docs[1]["phases"][-1]
    elif damage == "duplicate task":
        docs[1]["phases"][1]["tasks"].append(phase["tasks"][0])
    elif damage == "negative time":
        phase["tasks"][0]["time"] = -1.0
    else:
        phase["communications"][0]["to"]["id"] = 10**6
    with pytest.raises(AssertionError):
        _check_dataset(docs)


def test_the_command_writes_the_same_files_as_the_function(run, files, tmp_path, capsys):
    out = tmp_path / "lbaf"
    assert main(["-q", "export-lbaf", str(run.path), "--out", str(out)]) == 0
    printed = capsys.readouterr().out.split()
    assert printed == [str(out / f"data.{r}.json") for r in range(NODES)]
    assert [json.loads((out / f"data.{r}.json").read_text()) for r in range(NODES)] == files


@pytest.mark.parametrize("case", ["no trace", "out is a file"])
def test_the_command_refuses_bad_input_in_one_line_and_writes_nothing(run, tmp_path, capsys, case):
    from test_bad_inputs import one_error_line

    out = tmp_path / "out"
    if case == "no trace":
        line = one_error_line(capsys, ["export-lbaf", str(tmp_path / "nothing.h5"), "--out", str(out)])
        assert line == f"error: no trace at {tmp_path / 'nothing.h5'}"
        assert not out.exists()
    else:
        out.write_text("")
        line = one_error_line(capsys, ["export-lbaf", str(run.path), "--out", str(out)])
        assert line == f"error: {out}: is a file; LBAF's data files need a folder"
        assert out.read_text() == ""
