"""The native executor on MPI ranks: bitwise the local run's state with halos batched per rank
pair (copy plans and packers) and reductions gathered on every rank, particles whose runs are
redone with more room on every rank, a rank left without tiles, and one clear line where it
cannot run (its stops: tests/test_mpi.py, beside the Python executor's; its jobs:
tests/test_jobs_mpi.py)."""

import subprocess

import numpy as np
import pytest

from conftest import assert_same_state, mpi_env, mpi_python
from shoal.compare import compare_runs
from shoal.session import open_run, run_scenario

SWE = ["swe-radial-dam-break", "--steps", "30", "--tiles", "12", "--set", "app.max_level=0",
       "--set", "app.min_level=0", "--set", "app.blocks=[6,6]", "--set", "app.block=8"]


@pytest.fixture(scope="module")
def swe_local(tmp_path_factory):
    """The shallow-water run in one process, one worker: the reference."""
    sets = [v for k, v in zip(SWE[1::2], SWE[2::2], strict=True) if k == "--set"]
    return run_scenario(SWE[0], steps=30, tiles=12, nodes=1, workers=1, set=sets,
                        out=tmp_path_factory.mktemp("swe") / "local")


@pytest.mark.mpi(ranks=(2,))  # (3 ranks: the particles below, and shallow water in test_swe_runs)
def test_shallow_water_on_ranks_is_the_local_run_bitwise(ranks, swe_local, mpirun, tmp_path):
    """Strips of variable size (a packer) batched per rank pair, the time step a minimum over
    every rank's tiles: the same bits as one process, on any ranks and placement."""
    workers = 2 if ranks == 2 else 1
    mpirun(ranks, "run", *SWE, "--executor", "native", "--workers", workers, "--placement", "birdshot",
           "--out", tmp_path / "mpi")
    assert compare_runs(swe_local.path, tmp_path / "mpi").identical
    run = open_run(tmp_path / "mpi")
    assert run.summary["executor"] == "native" and run.summary["ranks"] == ranks
    trace = run.trace
    owner = trace.owner_at(0)
    assert np.array_equal(trace.tasks["node"], owner[trace.tasks["tile"]])  # every task once, on its tile's rank
    # Every payload once, from its sender: the same rows as the local run's.
    mine, ref = trace.messages, swe_local.trace.messages
    key = lambda m: np.stack([m["step"], m["phase"], m["src"], m["dst"], m["bytes"]])  # noqa: E731
    a, b = key(mine), key(ref)
    assert np.array_equal(a[:, np.lexsort(a[::-1])], b[:, np.lexsort(b[::-1])])
    remote = owner[mine["src"]] != owner[mine["dst"]]
    assert int(trace.communication["messages"].sum()) == 2 * int(remote.sum())  # counted at each end


@pytest.mark.mpi(ranks=(2,))
def test_adaptive_shallow_water_on_ranks_is_the_local_run_bitwise(ranks, mpirun, tmp_path):
    """Blocks that change level: strips of several sizes and target levels batched per rank
    pair, the regrid's Python deferred to on each rank, every run ended after a regrid."""
    sets = ["app.max_level=1", "app.min_level=0", "app.blocks=[6,6]", "app.block=4", "app.regrid_every=4"]
    argv = ["swe-radial-dam-break", "--steps", "14", "--tiles", "9"]
    mpirun(ranks, "run", *argv, *(a for v in sets for a in ("--set", v)), "--workers", 1, "--placement", "birdshot",
           "--out", tmp_path / "mpi")
    local = run_scenario(argv[0], steps=14, tiles=9, nodes=1, workers=1, set=sets, executor="python",
                         out=tmp_path / "local")
    assert open_run(tmp_path / "mpi").summary["executor"] == "native"
    assert len(set(local.state()["level"].tolist())) == 2  # blocks at both levels
    assert compare_runs(local.path, tmp_path / "mpi").identical


@pytest.mark.mpi(ranks=(2,))
def test_seismic_waves_on_ranks_are_the_local_run_bitwise(ranks, mpirun, tmp_path):
    """Copy plans (stress and velocity slabs into ghosts) batched per rank pair; seismograms
    recorded on both ranks."""
    argv = ["seismic-layered-2d", "--steps", "30", "--tiles", "8"]
    mpirun(ranks, "run", *argv, "--workers", 1, "--placement", "strips", "--out", tmp_path / "mpi")
    local = run_scenario(argv[0], steps=30, tiles=8, nodes=1, workers=1, out=tmp_path / "local")
    assert open_run(tmp_path / "mpi").summary["executor"] == "native"
    assert compare_runs(local.path, tmp_path / "mpi").identical


NO_TILES = """
import sys
import numpy as np
from shoal.apps import get_app
from shoal.cluster import Cluster
from shoal.runtime import Simulation
from shoal.runtime.launch import current_team
from shoal.tiling import Tiling

out = sys.argv[1]
team = current_team()
spec = get_app("synthetic")
app = spec.build(spec.params(grid=[48, 48]), 12)
tiling = Tiling.from_count(app.grid, 12)
app.prepare(tiling)
owner = np.array([0] * 7 + [1] * 5)  # rank 2 holds nothing, then takes three tiles
sim = Simulation(app, tiling, Cluster.uniform(team.size, 1), owner, team=team, executor="native")
sim.run(5)
sim.reconfigure(owner=np.array([0] * 5 + [1] * 4 + [2] * 3))
sim.run(7)
everything = sim.gather()
if team.is_root:
    np.savez(out, **everything)
sim.close()
"""


@pytest.mark.mpi(ranks=(3,))
def test_a_rank_without_tiles_runs_through_and_takes_tiles_later(ranks, tmp_path):
    script = tmp_path / "no_tiles.py"
    script.write_text(NO_TILES)
    done = subprocess.run(mpi_python(ranks, script, tmp_path / "state.npz"), capture_output=True, text=True,
                          timeout=240, env=mpi_env())
    assert done.returncode == 0, done.stderr
    from shoal.apps import get_app
    from shoal.cluster import Cluster
    from shoal.runtime import Simulation
    from shoal.tiling import Tiling

    spec = get_app("synthetic")
    app = spec.build(spec.params(grid=[48, 48]), 12)
    tiling = Tiling.from_count(app.grid, 12)
    app.prepare(tiling)
    serial = Simulation(app, tiling, Cluster.uniform(1, 1), np.zeros(12, int), executor="python")
    serial.run(12)
    with np.load(tmp_path / "state.npz") as z:
        assert_same_state(serial.gather(), {k: z[k] for k in z.files})
    serial.close()


PARTICLES = """
import sys
import numpy as np
from shoal.apps import get_app
from shoal.apps.sph import capacity
from shoal.cluster import Cluster
from shoal.placement import get_policy
from shoal.runtime import Simulation
from shoal.runtime.launch import current_team
from shoal.tiling import Tiling

out = sys.argv[1]
# Room for one particle more than a tile holds and for payloads of one row: the water spreads
# into tiles that had none and runs overflow on one rank or the other, then are redone on both.
grown = []
capacity.Room.particles = lambda self, n, share: self.factor + n
capacity.Room.payload = lambda self, near: self.factor
capacity.Room.grow = lambda self: grown.append(setattr(self, "factor", 2 * self.factor))
team = current_team()
app = get_app("sph2d").tiny_app()
tiling = Tiling.from_count(app.grid, 6)
app.prepare(tiling)
cluster = Cluster.uniform(team.size, 2)
sim = Simulation(app, tiling, cluster, get_policy("birdshot").place(tiling, cluster, 3), team=team, executor="native")
for _ in range(4):
    sim.run(10)
counts = team.concatenate(np.array([len(grown)]))
assert len(set(counts.tolist())) == 1, counts  # every rank grew alike
everything = sim.gather()
if team.is_root:
    np.savez(out, grown=len(grown), **everything)
sim.close()
"""


@pytest.mark.mpi(ranks=(3,))
def test_particles_on_ranks_are_the_local_run_bitwise_with_runs_redone_on_every_rank(ranks, tmp_path):
    """2D SPH natively on ranks, its room barely above its particles: runs that overflow on any
    rank are redone on every rank with more room, payloads sized alike on both ends, to the
    one-process Python executor's bits."""
    script = tmp_path / "particles.py"
    script.write_text(PARTICLES)
    done = subprocess.run(mpi_python(ranks, script, tmp_path / "state.npz"), capture_output=True, text=True,
                          timeout=240, env=mpi_env())
    assert done.returncode == 0, done.stderr
    from shoal.apps import get_app
    from shoal.cluster import Cluster
    from shoal.runtime import Simulation
    from shoal.tiling import Tiling

    app = get_app("sph2d").tiny_app()
    tiling = Tiling.from_count(app.grid, 6)
    app.prepare(tiling)
    serial = Simulation(app, tiling, Cluster.uniform(1, 1), np.zeros(6, int), executor="python")
    serial.run(40)
    with np.load(tmp_path / "state.npz") as z:
        got = {k: z[k] for k in z.files}
    assert int(got.pop("grown")) >= 1
    assert_same_state(serial.gather(), got)
    serial.close()


@pytest.mark.mpi(ranks=(2,))
def test_what_the_native_executor_cannot_run_on_ranks_is_one_line(ranks, mpirun, tmp_path):
    done = mpirun(ranks, "run", *SWE, "--executor", "native", "--set", "run.overlap=false", "--out", tmp_path / "b",
                  check=False)
    assert done.returncode != 0 and "the native executor always overlaps halos" in done.stderr
    # (--executor auto picks the Python executor there: tests/test_mpi.py's stop test asserts it)
