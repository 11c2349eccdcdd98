"""Run folders belong to one run: an ``--out`` this run may not write into is refused with one
line before anything is written; a lock stops two runs sharing a folder; ``--resume``
continues its own folder only; replays claim their folders the same way; ``compare`` of a
damaged folder is an error (exit 2), never "different". Its files follow the user's umask, and a
file system without locks gets an exclusive owner file instead."""

import errno
import logging
import os
import shutil
import socket
import stat
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from shoal.cli import main
from shoal.compare import compare_runs
from shoal.errors import ShoalError
from shoal.files import write_text
from shoal.replay import ReplayConfig, replay
from shoal.replay.run import write_replay
from shoal.rundir import claim_folder
from shoal.session import run_scenario

RUN = ["synthetic-hotspot", "--steps", "4", "--tiles", "4", "--nodes", "1", "--set", "app.grid=[32,32]"]
KW = dict(steps=4, tiles=4, nodes=1, set=["app.grid=[32,32]"])


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    return run_scenario("synthetic-hotspot", checkpoint_every=2, out=tmp_path_factory.mktemp("f") / "done", **KW).path


def snapshot(folder):
    """Every file under ``folder`` with its bytes (None: no such folder)."""
    if not folder.exists():
        return None
    if folder.is_file():
        return folder.read_bytes()
    return {str(p.relative_to(folder)): p.read_bytes() if p.is_file() else None for p in sorted(folder.rglob("*"))}


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err and "\n" not in err and "Traceback" not in err, err
    return err


def interrupted(tmp_path, finished):
    """A run folder as a killed run leaves it: its checkpoints, no final state, no summary."""
    shutil.copytree(finished, tmp_path / "interrupted")
    (tmp_path / "interrupted" / "summary.json").unlink()
    (tmp_path / "interrupted" / "state" / "final.npz").unlink()
    return tmp_path / "interrupted"


def other_content(tmp_path, finished):
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "thesis.tex").write_text("precious")
    return tmp_path / "notes"


def a_file(tmp_path, finished):
    (tmp_path / "file").write_text("x")
    return tmp_path / "file"


def under_a_file(tmp_path, finished):
    return a_file(tmp_path, finished) / "run"


@pytest.mark.parametrize("make, says", [
    (lambda tmp_path, finished: finished, "already holds a finished run"),
    (interrupted, "already holds an interrupted run (continue it with --resume)"),
    (other_content, "already holds other files (thesis.tex)"),
    (a_file, "is a file, not a folder"),
    (under_a_file, "which is a file"),
])
def test_an_out_folder_that_is_not_this_runs_is_refused_and_left_as_it_was(make, says, finished, tmp_path, capsys):
    out = make(tmp_path, finished)
    before = snapshot(out if out.exists() else out.parent)
    assert main(["run", *RUN, "--out", str(out)]) == 2
    assert says in one_line_error(capsys)
    assert snapshot(out if out.exists() else out.parent) == before


def test_a_read_only_out_is_refused(tmp_path, capsys, monkeypatch):
    (tmp_path / "ro").mkdir()
    (tmp_path / "ro").chmod(0o555)
    if os.geteuid() == 0:  # root writes into read-only folders: let the folder say it is not writable
        access = os.access
        monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if str(p) == str(tmp_path / "ro")
                            else access(p, mode, **kw))
    assert main(["run", *RUN, "--out", str(tmp_path / "ro" / "run")]) == 2
    assert "is not writable" in one_line_error(capsys)
    assert not (tmp_path / "ro" / "run").exists()


def test_a_folder_another_run_holds_is_refused_naming_its_process(tmp_path, capsys):
    lock = claim_folder(tmp_path / "busy")
    try:
        assert main(["run", *RUN, "--out", str(tmp_path / "busy")]) == 2
        assert f"is in use by another run (pid {os.getpid()})" in one_line_error(capsys)
        with pytest.raises(ShoalError, match="in use by another run"):
            claim_folder(tmp_path / "busy")
    finally:
        lock.release()
    assert sorted(p.name for p in (tmp_path / "busy").iterdir()) == ["run.lock"]
    assert main(["run", *RUN, "--out", str(tmp_path / "busy")]) == 0  # free once let go; a lock file is no run


def test_an_interrupted_run_is_continued_only_by_resuming_it(finished, tmp_path, capsys):
    run = interrupted(tmp_path, finished)
    assert main(["run", "--resume", str(run), "--out", str(other_content(tmp_path, finished))]) == 2
    assert "already holds other files" in one_line_error(capsys)
    assert main(["run", "--resume", str(run)]) == 0
    capsys.readouterr()
    assert compare_runs(run, finished).identical
    assert main(["run", "--resume", str(run)]) == 2  # finished now: never written into again
    assert "already holds a finished run" in one_line_error(capsys)


@pytest.mark.parametrize("flags", [
    ["--set", "app.dx=nan"],
    ["--placement", "no-such-policy"],
    ["--set", "app.grid=[32,\"x\"]"],
])
def test_a_refused_input_leaves_no_folder(flags, tmp_path, capsys):
    assert main(["run", *RUN, *flags, "--out", str(tmp_path / "new" / "run")]) == 2
    one_line_error(capsys)
    assert not (tmp_path / "new").exists()


def test_a_failure_after_the_folder_is_claimed_removes_the_folder_it_made(tmp_path, monkeypatch):
    import shoal.session.building as session

    def broken(*args, **kwargs):
        raise ShoalError("the first frame cannot be drawn")

    monkeypatch.setattr(session, "_attach", broken)
    with pytest.raises(ShoalError, match="first frame"):
        run_scenario("synthetic-hotspot", out=tmp_path / "new", **KW)
    assert not (tmp_path / "new").exists()


def test_a_replay_claims_its_folder_like_a_run(finished, tmp_path, capsys):
    result = replay(run_scenario("synthetic-hotspot", out=tmp_path / "r", **KW).trace, ReplayConfig(nodes=2, cores=1))
    write_replay(result, tmp_path / "predicted")
    before = snapshot(tmp_path / "predicted")
    with pytest.raises(ShoalError, match="already holds a finished run"):
        write_replay(result, tmp_path / "predicted")
    assert snapshot(tmp_path / "predicted") == before
    notes = other_content(tmp_path, finished)
    assert main(["replay", str(finished), "--nodes", "2", "--cores", "1", "--out", str(notes)]) == 2
    assert "already holds other files" in one_line_error(capsys)
    lock = claim_folder(tmp_path / "busy")
    try:
        with pytest.raises(ShoalError, match=f"pid {os.getpid()}"):
            write_replay(result, tmp_path / "busy")
    finally:
        lock.release()


# ----- compare of damaged folders ---------------------------------------------------------------
def no_final_state(run):
    (run / "state" / "final.npz").unlink()


def truncated_final_state(run):
    p = run / "state" / "final.npz"
    p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])


def garbage_summary(run):
    (run / "summary.json").write_bytes(b"\x00\xffnot json")


def list_summary(run):
    (run / "summary.json").write_text("[1, 2]")


def no_summary(run):
    (run / "summary.json").unlink()


def object_state(run):
    np.savez(run / "state" / "final.npz", u=np.array([{"a": 1}], dtype=object))


@pytest.mark.parametrize("damage, says", [
    (no_final_state, "final.npz is missing"),
    (truncated_final_state, "final.npz is not a readable final state"),
    (object_state, "final.npz is not a readable final state"),
    (garbage_summary, "summary.json is not valid JSON"),
    (list_summary, "summary.json is not a JSON object"),
    (no_summary, "has no summary.json"),
])
def test_compare_of_a_damaged_folder_is_an_error_not_a_difference(damage, says, finished, tmp_path, capsys):
    run = tmp_path / "damaged"
    shutil.copytree(finished, run)
    damage(run)
    with pytest.raises(ShoalError, match=says):
        compare_runs(finished, run)
    assert main(["compare", str(run), str(finished)]) == 2
    assert says in one_line_error(capsys)


# ----- files users can share -------------------------------------------------------------------------
SHARE = textwrap.dedent('''
    import os, sys
    os.umask(int(sys.argv[2], 8))
    from shoal.cli import main
    raise SystemExit(main(["run", "synthetic-hotspot", "--steps", "4", "--tiles", "4", "--nodes", "1",
                           "--checkpoint-every", "2", "--set", "app.grid=[16,16]", "--set", "run.frame_every=2",
                           "--out", sys.argv[1]]))
''')


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_a_run_folders_files_follow_the_users_umask(umask, mode, tmp_path):
    done = subprocess.run([sys.executable, "-c", SHARE, str(tmp_path / "r"), oct(umask)], capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    files = [p for p in (tmp_path / "r").rglob("*") if p.is_file()]
    assert len(files) > 8
    modes = {str(p.relative_to(tmp_path)): oct(stat.S_IMODE(p.stat().st_mode)) for p in files}
    assert set(modes.values()) == {oct(mode)}, modes


def test_an_atomic_rewrite_keeps_the_files_mode(tmp_path):
    path = tmp_path / "kept.txt"
    write_text(path, "first")
    path.chmod(0o640)
    write_text(path, "second")
    assert stat.S_IMODE(path.stat().st_mode) == 0o640 and path.read_text() == "second"


def no_locks(*args, **kwargs):
    raise OSError(errno.ENOLCK, "No locks available")


def test_a_file_system_without_locks_gets_an_owner_file_and_one_line(tmp_path, monkeypatch, caplog):
    import shoal.rundir as rundir

    monkeypatch.setattr(rundir.fcntl, "flock", no_locks)
    monkeypatch.delenv("HDF5_USE_FILE_LOCKING", raising=False)  # the fallback sets it for this process
    with caplog.at_level(logging.WARNING, logger="shoal"):
        lock = claim_folder(tmp_path / "run")
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "refuses locks (No locks available)" in warnings[0] and "run.owner" in warnings[0]
    owner = tmp_path / "run" / rundir.OWNER
    assert owner.read_text().split() == [socket.gethostname(), str(os.getpid())]
    with pytest.raises(ShoalError, match=f"in use by another run \\(pid {os.getpid()} on .*remove .*run.owner"):
        claim_folder(tmp_path / "run")
    lock.release()
    assert not owner.exists()
    claim_folder(tmp_path / "run").release()  # free again


def test_an_owner_file_left_by_a_dead_run_on_this_host_is_taken_over(tmp_path, monkeypatch):
    import shoal.rundir as rundir

    monkeypatch.setattr(rundir.fcntl, "flock", no_locks)
    monkeypatch.delenv("HDF5_USE_FILE_LOCKING", raising=False)  # the fallback sets it for this process
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / rundir.OWNER).write_text(f"{socket.gethostname()} {gone.stdout.strip()}\n")
    lock = claim_folder(tmp_path / "run", own=True)
    assert (tmp_path / "run" / rundir.OWNER).read_text().split()[1] == str(os.getpid())
    lock.release()
    (tmp_path / "run" / rundir.OWNER).write_text("another-host 12345\n")
    with pytest.raises(ShoalError, match="pid 12345 on another-host; if that run is gone, remove"):
        claim_folder(tmp_path / "run", own=True)


def test_a_whole_run_works_where_locks_are_refused(tmp_path, monkeypatch):
    import shoal.rundir as rundir

    monkeypatch.setattr(rundir.fcntl, "flock", no_locks)
    monkeypatch.delenv("HDF5_USE_FILE_LOCKING", raising=False)  # the fallback sets it for this process
    rec = run_scenario("synthetic-hotspot", out=tmp_path / "r", **KW)
    assert rec.summary is not None and not (tmp_path / "r" / rundir.OWNER).exists()
