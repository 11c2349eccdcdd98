"""Provenance: what a measurement records about its host and software, the busy judgement, the
commit of a checkout, and the record every run keeps in its summary and run.log."""

import json
import shutil
import subprocess
import time

import numpy as np
import pytest

import shoal
from shoal import provenance
from shoal.session import run_scenario


def test_record_has_every_field_with_its_type():
    rec = provenance.record()
    assert isinstance(rec["host"], str) and isinstance(rec["cpu"], str) and rec["cpu"]
    assert isinstance(rec["logical_cores"], int) and isinstance(rec["usable_cores"], int)
    assert 1 <= rec["usable_cores"] <= rec["logical_cores"]
    assert rec["load_before"] is None or (len(rec["load_before"]) == 3
                                          and all(isinstance(x, float) for x in rec["load_before"]))
    assert rec["busy_before"] in (True, False, None) and rec["busy_threshold"] == provenance.BUSY_LOAD_PER_CORE
    assert rec["shoal"]["version"] == shoal.__version__ and isinstance(rec["shoal"]["commit"], str)
    versions = rec["versions"]
    assert set(versions) == {"python", "numpy", "numba", "mpi4py", "h5py"}
    assert versions["numpy"] == np.__version__ and isinstance(versions["python"], str)
    assert all(v is None or isinstance(v, str) for v in versions.values())
    threads = rec["threads"]
    assert set(threads["environment"]) == set(provenance.THREAD_VARIABLES)
    assert isinstance(threads["numba_num_threads"], int) and threads["numba_num_threads"] >= 1
    assert threads["worker_threads"]["numba_threads"] == 1  # worker threads never start Numba's own pool
    assert json.loads(json.dumps(rec)) == rec  # JSON as it is


def test_thread_variables_are_read_from_the_environment(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    monkeypatch.delenv("MKL_NUM_THREADS", raising=False)
    env = provenance.thread_settings()["environment"]
    assert env["OMP_NUM_THREADS"] == "3" and env["MKL_NUM_THREADS"] is None


def test_a_library_not_installed_has_no_version():
    assert provenance.library_version("surely-no-such-distribution-here") is None
    assert provenance.library_version("numpy") == np.__version__


def test_finish_adds_the_load_after_the_wall_time_and_the_judgement(monkeypatch):
    monkeypatch.setattr(provenance, "load_average", lambda: [0.1, 0.1, 0.1])
    rec = provenance.record()
    assert rec["busy_before"] is False and provenance.busy_warning(rec) is None
    monkeypatch.setattr(provenance, "load_average", lambda: [3.0, 1.0, 0.5])
    done = provenance.finish(rec)
    assert done["load_after"] == [3.0, 1.0, 0.5] and done["wall_s"] > 0 and done["own_cores"] >= 0
    assert done["busy_after"] is ((3.0 - done["own_cores"]) / rec["usable_cores"] > rec["busy_threshold"])
    assert done["busy"] is done["busy_after"]
    assert {k: done[k] for k in rec} == rec  # the start is kept as it was


def test_the_load_this_process_made_itself_does_not_make_the_host_busy(monkeypatch):
    cpu = iter([100.0, 118.0])  # 18 CPU seconds over the 10 s the measurement lasted: 1.8 cores
    monkeypatch.setattr(provenance, "process_cpu_s", lambda: next(cpu))
    monkeypatch.setattr(provenance, "usable_cores", lambda: 2)
    monkeypatch.setattr(provenance, "load_average", lambda: [0.0, 0.0, 0.0])
    rec = provenance.record()
    rec["start_unix_s"] = time.time() - 10.0
    monkeypatch.setattr(provenance, "load_average", lambda: [2.0, 2.0, 2.0])
    done = provenance.finish(rec)
    assert done["own_cores"] == pytest.approx(1.8, rel=1e-3)
    assert done["busy_after"] is False and done["busy"] is False  # (2.0 - 1.8) / 2 = 0.1 per core


@pytest.mark.parametrize("load, usable, own, busy", [
    ([1.0, 0.0, 0.0], 2, 0.0, True),     # half a core per core from others
    ([0.4, 9.0, 9.0], 2, 0.0, False),    # 0.2 per core, and only the last minute counts
    ([0.6, 0.0, 0.0], 2, 0.0, True),     # 0.3 per core
    ([2.0, 2.0, 2.0], 2, 1.5, False),    # 0.25 per core is not above the threshold
    ([2.0, 2.0, 2.0], 4, 0.0, True),
    (None, 2, 0.0, None),                # no load average on this system: unknown
])
def test_busy_is_the_last_minute_load_of_others_per_usable_core(load, usable, own, busy):
    assert provenance.is_busy(load, usable, 0.25, own=own) is busy


def test_unknown_load_leaves_busy_unknown(monkeypatch):
    monkeypatch.setattr(provenance, "load_average", lambda: None)
    done = provenance.finish(provenance.record())
    assert done["load_before"] is None and done["busy_before"] is None and done["busy"] is None
    assert provenance.busy_warning(done) is None
    assert "load unknown" in provenance.describe(done)


def test_busy_warning_names_when_and_the_load(monkeypatch):
    monkeypatch.setattr(provenance, "usable_cores", lambda: 2)
    monkeypatch.setattr(provenance, "load_average", lambda: [1.5, 1.0, 0.5])
    rec = provenance.record()
    warning = provenance.busy_warning(rec)
    assert "1.50, 1.00, 0.50 before" in warning and "2 usable cores" in warning and "after" not in warning


def test_describe_names_the_host_cpu_versions_and_commit():
    rec = provenance.record()
    line = provenance.describe(rec)
    for part in (rec["cpu"], f"shoal {shoal.__version__}", rec["shoal"]["commit"][:12], f"NumPy {np.__version__}"):
        assert part in line


# ----- the commit ------------------------------------------------------------------------------
def _git(cwd, *args):
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, check=True,
                          capture_output=True, text=True).stdout.strip()


def test_outside_a_checkout_the_commit_is_unknown(tmp_path, monkeypatch):
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))  # git must not look above
    package = tmp_path / "site-packages" / "shoal"
    package.mkdir(parents=True)
    assert provenance.git_commit(package) == ("unknown", None)


def test_without_git_the_commit_is_unknown(tmp_path, monkeypatch):
    def no_git(*args, **kwargs):
        raise FileNotFoundError("git")

    monkeypatch.setattr(provenance.subprocess, "run", no_git)
    assert provenance.git_commit(provenance.PACKAGE) == ("unknown", None)
    assert provenance.record()["shoal"]["commit"] == "unknown"


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_a_checkout_gives_its_commit_and_whether_it_is_dirty(tmp_path):
    package = tmp_path / "src" / "shoal"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("x = 1\n")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-q", "-m", "first")
    head = _git(tmp_path, "rev-parse", "HEAD")
    assert provenance.git_commit(package) == (head, False)
    (package / "__init__.py").write_text("x = 2\n")
    assert provenance.git_commit(package) == (head, True)


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_shoal_installed_inside_another_repository_has_no_commit(tmp_path):
    package = tmp_path / ".venv" / "lib" / "site-packages" / "shoal"
    package.mkdir(parents=True)
    (tmp_path / "analysis.py").write_text("pass\n")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", "analysis.py")
    _git(tmp_path, "commit", "-q", "-m", "someone else's project")
    assert provenance.git_commit(package) == ("unknown", None)


# ----- every run records it --------------------------------------------------------------------
def test_a_run_keeps_its_provenance_in_the_summary_and_says_it_in_run_log(tmp_path):
    rec = run_scenario("synthetic-ramp", steps=2, tiles=4, nodes=1, workers=1, set=["app.grid=[16,16]"],
                       out=tmp_path / "run")
    saved = json.loads((rec.path / "summary.json").read_text())["provenance"]
    assert saved == rec.summary["provenance"]
    assert saved["shoal"]["version"] == shoal.__version__ and saved["versions"]["numpy"] == np.__version__
    for key in ("load_before", "load_after", "busy_before", "busy_after", "busy", "wall_s", "own_cores", "cpu"):
        assert key in saved
    log = (rec.path / "run.log").read_text()
    assert f"host {saved['host']}: " in log and f"shoal {shoal.__version__}" in log


def test_a_run_on_a_busy_host_warns_in_run_log(tmp_path, monkeypatch):
    monkeypatch.setattr(provenance, "load_average", lambda: [64.0, 64.0, 64.0])
    rec = run_scenario("synthetic-ramp", steps=2, tiles=4, nodes=1, workers=1, set=["app.grid=[16,16]"],
                       out=tmp_path / "run")
    assert rec.summary["provenance"]["busy"] is True
    warnings = [line for line in (rec.path / "run.log").read_text().splitlines() if "WARNING" in line]
    assert len(warnings) == 2 and all("the host was busy" in w for w in warnings)  # at the start and the end
    assert "before" in warnings[0] and "after" in warnings[1]
