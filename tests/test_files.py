"""Every file shoal writes is whole or absent: the atomic-write helper."""

import numpy as np
import pytest

from shoal.files import atomic_path, atomic_write, save_npz, write_json


def test_a_failed_write_leaves_the_old_file_and_no_temporary_one(tmp_path):
    target = tmp_path / "summary.json"
    write_json(target, {"steps": 10})
    with pytest.raises(RuntimeError):
        with atomic_write(target, "w") as fh:
            fh.write('{"steps": ')
            raise RuntimeError("killed half way")
    assert target.read_text() == '{\n  "steps": 10\n}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.json"]


def test_a_library_writing_by_name_replaces_the_file_only_when_done(tmp_path):
    target = tmp_path / "data.bin"
    target.write_bytes(b"old")
    with atomic_path(target) as tmp:
        tmp.write_bytes(b"new")
        assert target.read_bytes() == b"old" and tmp.parent == tmp_path and tmp != target
    assert target.read_bytes() == b"new" and sorted(p.name for p in tmp_path.iterdir()) == ["data.bin"]


def test_npz_files_refuse_object_arrays_and_load_without_pickle(tmp_path):
    save_npz(tmp_path / "a.npz", {"x": np.arange(3.0)})
    with np.load(tmp_path / "a.npz", allow_pickle=False) as z:
        assert z["x"].tolist() == [0.0, 1.0, 2.0]
    with pytest.raises(TypeError, match="without pickle"):
        save_npz(tmp_path / "b.npz", {"x": np.array([{"a": 1}], dtype=object)})
    assert not (tmp_path / "b.npz").exists()
    with pytest.raises(ValueError, match="mode"):
        with atomic_write(tmp_path / "c", "a"):
            pass
