"""Export to SimGrid's time-independent traces, replayed by SimGrid itself."""

import os
import shutil

import pytest

from shoal.cluster import Network
from shoal.errors import ShoalError
from shoal.replay import ReplayConfig, replay
from shoal.replay.simgrid import export_tit, find_smpi, simgrid_replay
from shoal.session import run_scenario

NET = Network(latency_s=1e-6, bandwidth_Bps=1e8, overhead_s=0.0)


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    return run_scenario("synthetic-hotspot", steps=5, tiles=4, nodes=1, set=["app.grid=[64,64]"],
                        out=tmp_path_factory.mktemp("tit") / "run").trace


def test_export_writes_one_file_per_rank_with_matching_sends_and_receives(trace, tmp_path):
    out = export_tit(trace, tmp_path / "tit", NET)
    ranks = [(out / f"rank-{r}.txt").read_text().splitlines() for r in range(4)]
    assert (out / "index.txt").read_text().count("\n") == 4 and (out / "platform.xml").exists()
    for r, lines in enumerate(ranks):
        assert lines[0] == "# version: 1.0" and lines[1] == f"{r} init" and lines[-1] == f"{r} finalize"
        assert sum(line.split()[1] == "compute" for line in lines) == 5 * 2  # steps x phases
    sends = sorted((r, int(x.split()[2]), int(x.split()[4])) for r, lines in enumerate(ranks)
                   for x in lines if x.split()[1] == "isend")
    recvs = sorted((int(x.split()[2]), r, int(x.split()[4])) for r, lines in enumerate(ranks)
                   for x in lines if x.split()[1] == "irecv")
    assert sends == recvs  # every message is posted by both ends with the same size
    assert sum(b for _, _, b in sends) == int(trace.messages["bytes"].sum())


def test_sampi_actions_wrap_every_iteration(trace, tmp_path):
    out = export_tit(trace, tmp_path / "sampi", NET, sampi=True)
    text = (out / "rank-0.txt").read_text()
    assert text.count("iteration_in") == text.count("iteration_out") == text.count("migrate") == 5


SMPI = find_smpi()
# CI sets SHOAL_REQUIRE_SIMGRID=1 where it installed SimGrid, so that a broken install fails instead of skipping.
REQUIRED = os.environ.get("SHOAL_REQUIRE_SIMGRID") == "1"
needs_simgrid = pytest.mark.skipif(isinstance(SMPI, str) and not REQUIRED, reason=str(SMPI))


@needs_simgrid
def test_simgrid_replay_agrees_with_the_mpi_reference_model(trace, tmp_path):
    simgrid = simgrid_replay(export_tit(trace, tmp_path / "tit", NET))
    shoal = replay(trace, ReplayConfig(nodes=4, cores=1, mpi_reference=True, network=NET, costs="measured")).makespan
    assert shoal == pytest.approx(simgrid, rel=0.02)


@needs_simgrid
def test_a_damaged_export_is_one_line_naming_the_folder(trace, tmp_path):
    out = export_tit(trace, tmp_path / "tit", NET)
    (out / "rank-1.txt").write_text("# version: 1.0\n1 init\n1 teleport 3\n")
    with pytest.raises(ShoalError, match=r"tit: SimGrid's replay failed .*action teleport is unknown"):
        simgrid_replay(out)


def test_without_smpirun_the_replay_says_how_to_install_simgrid(trace, tmp_path, monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert "no smpirun on PATH" in find_smpi()
    with pytest.raises(ShoalError, match="apt-get install libsimgrid-dev"):
        simgrid_replay(export_tit(trace, tmp_path / "tit", NET))
