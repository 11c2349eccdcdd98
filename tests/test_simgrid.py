"""Export to SimGrid's time-independent traces, replayed by SimGrid itself."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from shoal.cluster import Network
from shoal.replay import ReplayConfig, replay
from shoal.replay.simgrid import export_tit
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


SMPIRUN = shutil.which("smpirun")
REPLAYER = next((p for p in (Path("/usr/lib/x86_64-linux-gnu/simgrid/smpireplaymain"),
                             Path("/usr/lib/simgrid/smpireplaymain")) if p.exists()), None)


@pytest.mark.skipif(SMPIRUN is None or REPLAYER is None, reason="SimGrid (smpirun) is not installed")
def test_simgrid_replay_agrees_with_the_mpi_reference_model(trace, tmp_path):
    out = export_tit(trace, tmp_path / "tit", NET)
    run = subprocess.run([SMPIRUN, "-np", "4", "-platform", "platform.xml", "-hostfile", "hostfile", "-replay",
                          "index.txt", "--cfg=network/model:CM02", "--cfg=smpi/bw-factor:1",
                          "--cfg=smpi/lat-factor:1", str(REPLAYER)], cwd=out, capture_output=True, text=True,
                         timeout=300)
    found = re.search(r"Simulation time ([0-9.eE+-]+)", run.stdout + run.stderr)
    assert found, run.stdout + run.stderr
    simgrid = float(found.group(1))
    shoal = replay(trace, ReplayConfig(nodes=4, cores=1, mpi_reference=True, network=NET)).makespan
    assert shoal == pytest.approx(simgrid, rel=0.02)
