"""Checkpoint files: HDF5 holding numbers only, read back value for value and type for type; a
damaged latest checkpoint falls back to the older intact one with one warning line, none intact
is one clear error; crafted files run nothing; old pickles are refused unless converted on trust."""

import logging
import pickle
import shutil

import h5py
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from shoal.cli import main
from shoal.compare import compare_runs
from shoal.errors import ShoalError
from shoal.runtime.checkpoint import Checkpoint, content_digest, convert_pickle_checkpoint
from shoal.runtime.packing import from_columns, to_columns
from shoal.session import run_scenario
from shoal.tiling import Tiling

RUN = dict(steps=12, tiles=4, nodes=2, placement="swap", period=2, checkpoint_every=5, set=["app.grid=[32,32]"])


class Payload:
    """Unpickling this creates ``marker``: the proof that a reader ran code from a file."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return open, (self.marker, "w")


@pytest.fixture(scope="module")
def full(tmp_path_factory):
    """A run with a dynamic balancer (its memory is checkpointed) and checkpoints at steps 5 and 10."""
    return run_scenario("synthetic-hotspot", out=tmp_path_factory.mktemp("cp") / "full", **RUN).path


@pytest.fixture
def shoal_warnings():
    """Warning lines of the ``shoal`` logger (whatever handlers the CLI set up)."""
    lines = []
    handler = logging.Handler(logging.WARNING)
    # a busy host is said too (shoal.provenance): not what these tests count
    handler.emit = lambda record: None if "host was busy" in record.getMessage() else lines.append(record.getMessage())
    log = logging.getLogger("shoal")
    log.addHandler(handler)
    yield lines
    log.removeHandler(handler)


def copy_run(full, to):
    shutil.copytree(full, to)
    return to


def assert_same(a, b):
    """Equal values of the same types (dtypes and shapes of arrays too), recursively."""
    assert type(a) is type(b), (a, b)
    if isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    elif isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            assert_same(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            assert_same(x, y)
    elif isinstance(a, float | np.floating):
        assert np.asarray(a).tobytes() == np.asarray(b).tobytes()
    else:
        assert a == b


# ----- round trips ----------------------------------------------------------------------------
def test_a_checkpoint_reads_back_every_value_with_its_type(tmp_path):
    tiling = Tiling.from_count((12, 8), 3, 1)
    states = {
        0: {"x": np.arange(6.0).reshape(3, 2), "id": np.arange(3, dtype=np.int32), "t": 0.1, "n": 7, "on": True,
            "name": "dam", "f32": np.float32(1.5), "halos": [{"a": np.zeros(2)}, None], "pair": (1, "b")},
        1: {"x": np.zeros((0, 2)), "id": np.zeros(0, dtype=np.int32), "t": -0.0, "n": 0, "on": False,
            "name": "ünï", "f32": np.float32(np.nan), "halos": [], "pair": (2, "c"), "extra": np.array(["ab", "ç"])},
        2: np.full((2, 2, 2), 3 + 4j),
    }
    balancer = {"memory": {"tile_cost": np.array([1.0, 2.0, 3.0]), "last_swap": 4}, "cost": np.ones((2, 3)),
                "background": np.zeros(0), "steps": 3}
    reduced = {(9, "dt"): 0.001, (9, "count"): np.int64(5)}
    cp = Checkpoint(10, tiling, states, np.array([0, 1, 1]), balancer, reduced)
    back = Checkpoint.read(cp.write(tmp_path))
    assert back.step == 10 and back.tiling.to_dict() == tiling.to_dict()
    for got, want in ((back.states, states), (back.balancer, balancer), (back.reduced, reduced),
                      (back.owner, np.array([0, 1, 1]))):
        assert_same(got, want)
    with h5py.File(tmp_path / "checkpoint-000010.h5") as f:
        assert f.attrs["sha256"] == content_digest(f)
        assert f.attrs["format"] == "shoal checkpoint" and f.attrs["version"] == 3


def test_a_resumed_run_keeps_the_two_latest_checkpoints_and_no_temporary_file(full):
    assert sorted(p.name for p in (full / "state").iterdir() if "checkpoint" in p.name) == [
        "checkpoint-000005.h5", "checkpoint-000010.h5"]
    cp = Checkpoint.latest(full / "state")
    assert cp.step == 10 and set(cp.balancer["memory"]) == {"tile_cost", "last_swap"}


values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-2**62, 2**62), st.floats(allow_nan=False), st.text(max_size=3),
              st.lists(st.floats(allow_nan=False, width=32), max_size=4).map(lambda v: np.array(v, np.float32))),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.sampled_from("abc"), inner, max_size=3)),
    max_leaves=8)


@given(st.lists(values, min_size=1, max_size=4))
def test_columns_split_back_into_the_same_values(items):
    layouts, layout_of, columns = to_columns(items)
    assert_same(from_columns(layouts, layout_of, columns), items)


# ----- damage -----------------------------------------------------------------------------------
def _truncate(p, marker):
    p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])


def _empty(p, marker):
    p.write_bytes(b"")


def _garbage(p, marker):
    p.write_bytes(np.random.default_rng(0).bytes(4096))


def _changed_value(p, marker):
    with h5py.File(p, "r+") as f:
        f["owner"][0] += 1


def _wrong_version(p, marker):
    with h5py.File(p, "r+") as f:
        f.attrs["version"] = 99


def _renamed_pickle(p, marker):
    p.write_bytes(pickle.dumps(Payload(marker)))


def _pickle_in_an_opaque_dataset(p, marker):
    with h5py.File(p, "r+") as f:
        del f["states/0/data"]
        blob = pickle.dumps(Payload(marker))
        f.create_dataset("states/0/data", data=np.void(blob))
        f.attrs["sha256"] = "0" * 64


def _pickle_in_an_object_dataset(p, marker):
    with h5py.File(p, "r+") as f:
        ds = f.create_dataset("states/payload", shape=(1,), dtype=h5py.vlen_dtype(np.uint8))
        ds[0] = np.frombuffer(pickle.dumps(Payload(marker)), dtype=np.uint8)


def _an_external_link(p, marker):
    with h5py.File(p, "r+") as f:
        f["states/elsewhere"] = h5py.ExternalLink(str(marker), "/")


def _older_step_under_a_newer_name(p, marker):
    shutil.copy(p.with_name("checkpoint-000005.h5"), p)


DAMAGE = {
    "truncated": (_truncate, "damaged"),
    "empty": (_empty, "is empty"),
    "garbage": (_garbage, "not an HDF5 file"),
    "checksum": (_changed_value, "checksum"),
    "version": (_wrong_version, "version 99"),
    "renamed pickle": (_renamed_pickle, "is a pickle"),
    "opaque pickle": (_pickle_in_an_opaque_dataset, "opaque or compound data"),
    "object pickle": (_pickle_in_an_object_dataset, "Python object data"),
    "external link": (_an_external_link, "links"),
    "step mismatch": (_older_step_under_a_newer_name, "not the step in its name"),
}


@pytest.mark.parametrize("damage", DAMAGE)
def test_a_damaged_latest_checkpoint_falls_back_to_the_older_one_with_one_warning(damage, full, tmp_path,
                                                                                   shoal_warnings):
    state = copy_run(full, tmp_path / "run")
    marker = tmp_path / "ran-code"
    damage_file, says = DAMAGE[damage]
    damage_file(state / "state" / "checkpoint-000010.h5", marker)
    cp = Checkpoint.latest(state / "state")
    assert cp.step == 5
    assert len(shoal_warnings) == 1 and "\n" not in shoal_warnings[0]
    assert "checkpoint-000010.h5" in shoal_warnings[0] and says in shoal_warnings[0]
    assert "resuming from checkpoint-000005.h5" in shoal_warnings[0]
    assert not marker.exists()


@pytest.mark.parametrize("damage", DAMAGE)
def test_with_no_intact_checkpoint_the_error_names_each_file_and_its_fault(damage, full, tmp_path):
    state = copy_run(full, tmp_path / "run") / "state"
    marker = tmp_path / "ran-code"
    damage_file, says = DAMAGE[damage]
    damage_file(state / "checkpoint-000010.h5", marker)
    (state / "checkpoint-000005.h5").unlink()
    with pytest.raises(ShoalError) as err:
        Checkpoint.latest(state)
    message = str(err.value)
    assert "\n" not in message and "checkpoint-000010.h5" in message and says in message
    assert not marker.exists()


def test_a_badly_named_checkpoint_is_skipped_with_one_warning(full, tmp_path, shoal_warnings):
    state = copy_run(full, tmp_path / "run") / "state"
    shutil.copy(state / "checkpoint-000010.h5", state / "checkpoint-abc.h5")
    assert Checkpoint.latest(state).step == 10 and Checkpoint.latest_step(state) == 10
    assert len(shoal_warnings) == 1 and "checkpoint-abc.h5 has no step in its name" in shoal_warnings[0]
    for p in state.glob("checkpoint-0*.h5"):
        p.unlink()
    with pytest.raises(ShoalError, match="checkpoint-abc.h5 has no step in its name"):
        Checkpoint.latest(state)


def test_a_run_resumed_past_a_damaged_checkpoint_ends_identical(full, tmp_path, shoal_warnings):
    run = copy_run(full, tmp_path / "run")
    _truncate(run / "state" / "checkpoint-000010.h5", None)
    resumed = run_scenario(None, resume=run, out=tmp_path / "resumed")
    assert resumed.summary["resumed_from_step"] == 5
    assert compare_runs(full, resumed.path).identical
    assert len(shoal_warnings) == 1


def test_the_payload_would_run_if_unpickled(tmp_path):
    """The crafted files above are live: unpickling one creates its marker."""
    pickle.loads(pickle.dumps(Payload(tmp_path / "ran")))
    assert (tmp_path / "ran").exists()


# ----- old pickle checkpoints -----------------------------------------------------------------
def _old_pickle(cp: Checkpoint, folder):
    """A checkpoint as the pickle format (version 2) wrote it."""
    path = folder / f"checkpoint-{cp.step:06d}.pkl"
    data = {"version": 2, "step": cp.step, "tiling": cp.tiling.to_dict(), "states": cp.states, "owner": cp.owner,
            "balancer": cp.balancer, "reduced": cp.reduced}
    path.write_bytes(pickle.dumps(data, protocol=pickle.HIGHEST_PROTOCOL))
    return path


def test_an_old_pickle_checkpoint_is_refused_then_converted_on_trust_and_resumes_identical(full, tmp_path,
                                                                                           capsys):
    run = copy_run(full, tmp_path / "run")
    (run / "summary.json").unlink()
    old = _old_pickle(Checkpoint.latest(run / "state"), run / "state")
    for p in (run / "state").glob("checkpoint-*.h5"):
        p.unlink()
    assert main(["run", "--resume", str(run), "--out", str(tmp_path / "refused")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and f"shoal convert-checkpoint --trust {old}" in err and "runs any code" in err
    with pytest.raises(ShoalError, match="convert-checkpoint --trust"):
        convert_pickle_checkpoint(old, trust=False)
    assert convert_pickle_checkpoint(old, trust=True) == run / "state" / "checkpoint-000010.h5"
    resumed = run_scenario(None, resume=run, out=tmp_path / "resumed")
    assert resumed.summary["resumed_from_step"] == 10 and compare_runs(full, resumed.path).identical


def test_converting_an_untrusted_pickle_runs_nothing(tmp_path):
    old = tmp_path / "checkpoint-000003.pkl"
    old.write_bytes(pickle.dumps(Payload(tmp_path / "ran-code")))
    with pytest.raises(ShoalError) as err:
        convert_pickle_checkpoint(old, trust=False)
    assert "\n" not in str(err.value) and str(old) in str(err.value)
    assert not (tmp_path / "ran-code").exists()
    with pytest.raises(ShoalError, match="not a version-2 pickle checkpoint"):
        convert_pickle_checkpoint(old, trust=True)  # trusted: it runs, and is still no checkpoint
    assert (tmp_path / "ran-code").exists()


def test_resume_with_no_intact_checkpoint_is_one_line_and_exit_2(full, tmp_path, capsys):
    run = copy_run(full, tmp_path / "run")
    for p in (run / "state").glob("checkpoint-*.h5"):
        _garbage(p, None)
    assert main(["run", "--resume", str(run), "--out", str(tmp_path / "resumed")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "no intact checkpoint" in err and "checkpoint-000005.h5 is not an HDF5 file" in err
    assert not (tmp_path / "resumed").exists()


def test_a_resumed_run_removes_the_temporary_files_a_kill_left_and_no_others(full, tmp_path):
    """A kill in the middle of an atomic write leaves its ``.NAME.<random>.partial``; the run that
    resumes the folder holds its lock, so every such file of its own is stale and goes."""
    run = copy_run(full, tmp_path / "killed")
    (run / "summary.json").unlink()
    (run / "state" / "final.npz").unlink()
    stale = [run / "state" / ".checkpoint-000010.h5.k3j4x9.partial", run / "state" / ".final.npz.a1b2c3.partial",
             run / ".trace.h5.q8w7e6.partial", run / ".summary.json.z0y9x8.partial"]
    others = [run / ".load-heatmap.png.r5t6y7.partial",  # shoal report's, which may be drawing right now
              run / "state" / "notes.txt"]
    for p in stale + others:
        p.write_bytes(b"half a file")
    assert main(["run", "--resume", str(run), "-q"]) == 0
    assert [p for p in stale if p.exists()] == []
    assert all(p.exists() for p in others)
    assert compare_runs(run, full).identical
