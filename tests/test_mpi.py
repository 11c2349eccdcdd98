"""The MPI executor under ``mpiexec``: state bitwise identical to the local executor's for 1–4
ranks with dynamic balancing on, one merged trace, clean stops when a rank fails or dies, and
resuming on another number of ranks."""

import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import assert_same_state, mpi_command, mpi_env, mpi_python
from shoal.compare import compare_runs
from shoal.records import TASKS
from shoal.replay import ReplayConfig, replay
from shoal.session import open_run, run_scenario
from shoal.trace import Trace
from stop_apps import stop_app

SYNTHETIC = ["synthetic-hotspot", "--steps", "24", "--tiles", "24", "--set", "app.grid=[48,48]"]
SPH2D = ["sph-dam-break", "--steps", "30", "--tiles", "16", "--set", "app.dx=0.05", "--set", "app.tank=[2.0, 1.2]",
         "--set", "app.fluid=[[0.0, 0.0, 0.5, 1.0]]", "--set", "run.frame_every=10"]
CHANNEL = ["sph-cylinder", "--steps", "30", "--tiles", "12", "--set", "app.dx=0.06"]
SPH3D = ["sph3d-dam-break", "--steps", "8", "--tiles", "8", "--set", "app.particles=3000"]


def _local(argv: list[str], out: Path):
    """The same scenario on the local executor, one node and one worker: the reference."""
    scenario, rest = argv[0], argv[1:]
    opts = dict(zip(rest[::2], rest[1::2], strict=True))
    sets = [v for k, v in zip(rest[::2], rest[1::2], strict=True) if k == "--set"]
    return run_scenario(scenario, steps=int(opts["--steps"]), tiles=int(opts["--tiles"]), nodes=1, workers=1,
                        placement="sfc", period=0, set=sets, out=out)


@pytest.fixture(scope="module")
def references(tmp_path_factory):
    base = tmp_path_factory.mktemp("local")
    return {name: _local(argv, base / name)
            for name, argv in (("synthetic", SYNTHETIC), ("sph2d", SPH2D), ("channel", CHANNEL))}


def _messages(trace: Trace) -> np.ndarray:
    m = trace.messages
    rows = np.stack([m["step"], m["phase"], m["src"], m["dst"], m["bytes"]]).astype(np.int64)
    return rows[:, np.lexsort(rows[::-1])]


def _check_merged_trace(trace: Trace, reference: Trace, ranks: int) -> None:
    """One trace of the common schema: every task once, on the node that owned its tile."""
    assert trace.cluster.nodes == ranks
    owners = np.stack([trace.owner_at(int(s)) for s in trace.tasks["step"]])
    assert np.array_equal(trace.tasks["node"], owners[np.arange(len(owners)), trace.tasks["tile"]])
    assert np.all(trace.tasks["end"] >= trace.tasks["start"]) and np.all(trace.tasks["cost"] >= 0)
    # Halo payloads do not depend on where tiles live: the same messages as the local run's.
    assert np.array_equal(_messages(trace), _messages(reference))
    # Each rank's workers counted every payload between ranks once at each end
    # and measured the time they spent on them: what the replay charges per message.
    m = trace.messages
    at = np.stack([trace.owner_at(int(s)) for s in m["step"]])
    rows = np.arange(len(at))
    remote = int((at[rows, m["src"]] != at[rows, m["dst"]]).sum())
    comm = trace.communication
    assert comm["messages"].shape == comm["cpu_s"].shape == (ranks,)
    assert int(comm["messages"].sum()) == 2 * remote
    assert np.all(comm["cpu_s"][comm["messages"] > 0] > 0)


@pytest.mark.mpi(ranks=(2, 3))  # 3 ranks of 2 workers: more threads than cores (1 rank: the resumed run below)
@pytest.mark.parametrize("app, argv, policy", [
    ("synthetic", SYNTHETIC, ["--placement", "greedy", "--period", "3"]),
    ("sph2d", SPH2D, ["--placement", "refine", "--period", "4"]),
])
def test_state_bitwise_identical_to_the_local_executor(app, argv, policy, ranks, references, mpirun, tmp_path):
    workers = 2 if ranks % 2 else 1  # R ranks x W threads, both tried
    mpirun(ranks, "run", *argv, *policy, "--workers", workers, "--out", tmp_path / "mpi")
    ref = references[app]
    cmp = compare_runs(ref.path, tmp_path / "mpi")
    assert cmp.identical, f"{ranks} ranks differ from the local run by {cmp.max_abs_diff}"
    run = open_run(tmp_path / "mpi")
    assert run.summary["ranks"] == ranks and run.summary["nodes"] == ranks
    trace = run.trace
    _check_merged_trace(trace, ref.trace, ranks)
    balance = trace.balance
    assert len(balance["step"]) == len(trace.placement_steps) - 1 > 0
    if ranks > 1 and app == "synthetic":  # the hot spot moves: greedy moves tiles between ranks
        assert balance["moved"].sum() > 0
        tile_bytes = 2 * (48 * 48 // 24) * 8  # u and burn
        assert np.array_equal(balance["bytes"], balance["moved"] * tile_bytes)
    # The merged trace reads like any other: replay it on its own cluster.
    predicted = replay(trace, ReplayConfig(nodes=ranks, cores=workers, placement="sfc"))
    assert predicted.makespan > 0


@pytest.mark.mpi(ranks=(3,))  # (2 ranks: the runs above)
def test_channel_3d_no_overlap_and_speculative_identical_across_ranks(ranks, references, mpirun, tmp_path):
    mpirun(ranks, "run", *CHANNEL, "--placement", "swap", "--period", "5", "--out", tmp_path / "channel")
    assert compare_runs(references["channel"].path, tmp_path / "channel").identical
    mpirun(ranks, "run", *SPH2D, "--placement", "birdshot", "--set", "run.overlap=false", "--out", tmp_path / "bsp")
    assert compare_runs(references["sph2d"].path, tmp_path / "bsp").identical
    # speculative: rank 0 runs the low-resolution proxy, then plans for everyone
    mpirun(ranks, "run", *SYNTHETIC, "--placement", "speculative", "--period", "6", "--out", tmp_path / "spec")
    assert compare_runs(references["synthetic"].path, tmp_path / "spec").identical
    assert (tmp_path / "spec" / "proxy" / "summary.json").exists()
    mpirun(ranks, "run", *SPH3D, "--placement", "greedy", "--period", "4", "--out", tmp_path / "3d")
    ref3d = _local(SPH3D, tmp_path / "3d-local")
    assert compare_runs(ref3d.path, tmp_path / "3d").identical


def _watch(proc: subprocess.Popen) -> list[tuple[float, str]]:
    """Collect stderr lines with the time each arrived, in the background."""
    lines: list[tuple[float, str]] = []

    def read():
        for line in proc.stderr:
            lines.append((time.monotonic(), line.rstrip()))

    threading.Thread(target=read, daemon=True).start()
    return lines


@pytest.mark.mpi(ranks=(3,))
def test_a_rank_that_raises_stops_every_rank_with_its_rank_and_step(ranks, tmp_path):
    proc = subprocess.Popen(mpi_command(ranks, "run", *SYNTHETIC[:1], "--steps", "200", "--tiles", "24", "--set",
                                        "app.grid=[48,48]", "--set", "app.fail_at_step=37", "--placement",
                                        "greedy", "--period", "5", "--out", tmp_path / "run"),
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=mpi_env())
    lines = _watch(proc)
    try:
        proc.wait(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("the job hung after a rank raised")
    ended = time.monotonic()
    text = "\n".join(line for _, line in lines)
    assert proc.returncode != 0
    failed = [t for t, line in lines if "failed" in line and "step 37" in line and "injected fault" in line]
    assert failed, text
    # mpiexec's own banner, written beside ours, may leave our line indented or behind a stray byte
    owner_rank = [line for _, line in lines if re.search(r"(^|[^\w:])error: rank \d+ failed", line)]
    assert owner_rank, text
    assert ended - failed[0] < 10.0
    assert not (tmp_path / "run" / "summary.json").exists()


def _rank_pid(out: Path, rank: int) -> int | None:
    """The process of ``rank`` of the run writing ``out`` (Linux /proc)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().split(b"\0")
            env = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if str(out).encode() in cmd and b"-m" in cmd and f"OMPI_COMM_WORLD_RANK={rank}".encode() in env:
            return int(entry.name)
    return None


@pytest.mark.mpi(ranks=(3,))
def test_killed_rank_stops_the_job_and_the_run_resumes_on_two_ranks(ranks, mpirun, tmp_path):
    """Balancing every step, so the kill lands in the middle of steps and of migrations."""
    argv = [*SYNTHETIC[:1], "--steps", "100", "--tiles", "24", "--set", "app.grid=[48,48]"]
    out = tmp_path / "run"
    proc = subprocess.Popen(mpi_command(ranks, "run", *argv, "--placement", "greedy", "--period", "1",
                                        "--checkpoint-every", "20", "--out", out),
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=mpi_env())
    lines = _watch(proc)
    try:
        deadline = time.monotonic() + 120
        while not list((out / "state").glob("checkpoint-*.h5")):
            assert proc.poll() is None and time.monotonic() < deadline, "no checkpoint was written"
            time.sleep(0.05)
        time.sleep(0.3)
        pid = _rank_pid(out, 1)
        assert pid is not None and proc.poll() is None, "the run ended before rank 1 could be killed"
        os.kill(pid, signal.SIGKILL)
        killed = time.monotonic()
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert time.monotonic() - killed < 10.0
    text = "\n".join(line for _, line in lines)
    assert proc.returncode != 0
    assert "rank 1" in text, text
    assert "stopped at step" in text, text  # survivors say where they were
    assert not (out / "summary.json").exists()

    # What was written is readable, and resuming on another number of ranks ends identical
    # to a run that never stopped.
    resumed = mpirun(2, "run", "--resume", out)
    assert "2 MPI ranks" in resumed.stdout
    reference = _local([*argv], tmp_path / "local")
    assert compare_runs(reference.path, out).identical
    assert open_run(out).summary["resumed_from_step"] >= 20


@pytest.mark.slow
@pytest.mark.mpi(ranks=(3,))
def test_a_hundred_balancing_steps_with_migrations_never_hang(ranks, mpirun, tmp_path):
    mpirun(ranks, "run", *SYNTHETIC[:1], "--steps", "100", "--tiles", "24", "--set", "app.grid=[48,48]",
           "--placement", "greedy", "--period", "1", "--workers", "2", "--out", tmp_path / "run", timeout=300)
    balance = open_run(tmp_path / "run").trace.balance
    assert len(balance["step"]) == 99
    assert balance["moved"].sum() > 60  # the hot spot keeps moving, and tiles follow it


@pytest.mark.mpi(ranks=(2,))
def test_resizing_one_rank_only_keeps_the_state_and_is_recorded(ranks, references, mpirun, tmp_path):
    """Rank 1 goes 2 -> 1 -> 3 -> 2 worker threads; rank 0 keeps its 2."""
    mpirun(ranks, "run", *SYNTHETIC, "--workers", 2, "--placement", "greedy", "--period", "4",
           "--set", "run.resize=[[5,1,1],[11,1,3],[17,1,2]]", "--out", tmp_path / "resized")
    assert compare_runs(references["synthetic"].path, tmp_path / "resized").identical
    trace = open_run(tmp_path / "resized").trace
    assert trace.worker_cores.tolist() == [[2, 2], [2, 1], [2, 3], [2, 2]]
    assert trace.worker_steps.tolist() == [0, 5, 11, 17]
    tasks = trace.tasks
    on_rank_1 = tasks["node"] == 1
    assert set(tasks["worker"][on_rank_1 & (tasks["step"] >= 5) & (tasks["step"] < 11)].tolist()) == {0}


STOP_SCRIPT = """
import sys
import numpy as np
from shoal.cluster import Cluster
from shoal.placement import get_policy
from shoal.runtime import Simulation
from shoal.runtime.launch import current_team

asker, out, name, executor = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[5]
sys.path.insert(0, sys.argv[4])
from stop_apps import stop_app

team = current_team()
app, tiling, end = stop_app(name)
cluster = Cluster.uniform(team.size, 1)
sim = Simulation(app, tiling, cluster, get_policy("sfc").place(tiling, cluster), team=team, executor=executor)
assert sim.executor.backend == executor
if team.rank == asker:
    sim.add_measurement(lambda r: sim.request_stop() if r.step == 3 else None)
sim.run(end)
steps = team.agree(sim.step_count)
assert steps == sim.step_count == sim.stopped_at, (team.rank, sim.step_count, steps)
everything = sim.gather()
if team.is_root:
    np.savez(out, steps=steps, **everything)
sim.close()
"""


@pytest.mark.mpi(ranks=(3,))  # (2 ranks stop alike in the tests of resuming)
@pytest.mark.parametrize(("app", "executor"), [("sph2d", "python"), ("synthetic", "native")],
                         ids=["python-executor", "native-executor"])
def test_a_stop_asked_on_any_rank_ends_every_rank_at_the_same_step(ranks, app, executor, tmp_path):
    """On the native executor rank 0 freezes every rank (none starts a step past its frontier,
    tasks that would are held), takes the largest frontier, and every rank runs that many steps.
    Asked on another rank (on 2 ranks: it asks rank 0), or on rank 0 itself (on 3)."""
    asker = 1 if ranks == 2 else 0
    script = tmp_path / "stop.py"
    script.write_text(STOP_SCRIPT)
    done = subprocess.run(mpi_python(ranks, script, asker, tmp_path / "state.npz", app, Path(__file__).parent,
                                     executor),
                          capture_output=True, text=True, timeout=240, env=mpi_env())
    assert done.returncode == 0, done.stderr
    with np.load(tmp_path / "state.npz") as z:
        got = {k: z[k] for k in z.files}
    steps = int(got.pop("steps"))
    serial_app, tiling, end = stop_app(app)
    assert 4 <= steps < end
    from shoal.cluster import Cluster
    from shoal.runtime import Simulation

    serial = Simulation(serial_app, tiling, Cluster.uniform(1, 1), np.zeros(tiling.ntiles, int), executor="python")
    serial.run(steps)
    assert_same_state(serial.gather(), got)
    serial.close()


@pytest.mark.mpi(ranks=(2,))
def test_sigusr1_to_mpiexec_stops_every_rank_cleanly_and_the_run_resumes(ranks, mpirun, tmp_path):
    """Open MPI's mpiexec ends the job on Ctrl-C but passes SIGUSR1 on: every rank stops at
    the same step boundary, a checkpoint is written, and the run resumes to the same end."""
    argv = [*SYNTHETIC[:1], "--steps", "150", "--tiles", "16", "--set", "app.grid=[96,96]",
            "--set", "app.work_per_cell=2000.0"]
    out = tmp_path / "run"
    proc = subprocess.Popen(mpi_command(ranks, "run", *argv, "--checkpoint-every", "25", "--out", out),
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=mpi_env())
    deadline = time.monotonic() + 120
    while not list((out / "state").glob("checkpoint-*.h5")):
        assert proc.poll() is None and time.monotonic() < deadline, "no checkpoint was written"
        time.sleep(0.05)
    proc.send_signal(signal.SIGUSR1)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "stopped at step" in err and not (out / "summary.json").exists()
    mpirun(ranks, "run", "--resume", out)
    reference = _local(argv, tmp_path / "local")
    assert compare_runs(reference.path, out).identical


CHAIN_SCRIPT = """
import sys, time
import numpy as np
from shoal.cluster import Cluster
from shoal.runtime import App, Phase, Simulation
from shoal.runtime.launch import current_team
from shoal.tiling import Tiling

class Chain(App):
    '''Four tiles in a row, every step counted in each; tile 1 is slow.'''
    name = "chain"
    phases = (Phase("a", halo=True), Phase("b"))
    grid = (32, 2)
    def init_tile(self, tile, tiling): return {"n": np.zeros(1)}
    def gather(self, states, tiling): return {"n": np.array([s["n"][0] for _, s in sorted(states.items())])}
    def pack_halos(self, state, src, tiling): return {int(d): state["n"].copy() for d in tiling.neighbours[src]}
    def a(self, tile, state, halos, ctx, tiling):
        time.sleep(0.03 if tile == 1 else 0.001); state["n"] += 1; return 1
    b = a

team = current_team()
tiling = Tiling.from_count(Chain.grid, 4)
sim = Simulation(Chain(), tiling, Cluster.uniform(2, 2), np.array([1, 0, 0, 0]), team=team)
if team.rank == 1:
    sim.add_measurement(lambda r: sim.request_stop() if r.step == 5 else None)
sim.run(100000)
everything = sim.gather()
if team.is_root:
    print("steps", sim.stopped_at, "counts", *everything["n"].astype(int), flush=True)
sim.close()
"""


@pytest.mark.mpi(ranks=(2,))
def test_a_rank_ahead_of_its_frontier_runs_up_to_the_agreed_step(ranks, tmp_path):
    """Rank 1 (tile 0) asks early and is done up to its own frontier; rank 0's slow tile 1 has
    started a later step: rank 1 must run on to that step, every tile counting every step."""
    script = tmp_path / "chain.py"
    script.write_text(CHAIN_SCRIPT)
    done = subprocess.run(mpi_python(ranks, script), capture_output=True, text=True, timeout=120, env=mpi_env())
    assert done.returncode == 0, done.stderr
    words = done.stdout.split()
    steps = int(words[words.index("steps") + 1])
    counts = [int(c) for c in words[words.index("counts") + 1:]]
    assert steps >= 6 and counts == [2 * steps] * 4, done.stdout


@pytest.mark.mpi(ranks=(3,))
def test_resuming_on_fewer_ranks_between_balancing_steps(ranks, mpirun, tmp_path):
    argv = [*SYNTHETIC[:1], "--steps", "24", "--tiles", "24", "--set", "app.grid=[48,48]"]
    mpirun(ranks, "run", *argv, "--placement", "greedy", "--period", "7", "--checkpoint-every", "10",
           "--out", tmp_path / "full")
    state = tmp_path / "full" / "state"
    assert sorted(p.name for p in state.glob("checkpoint-*.h5"))[-1] == "checkpoint-000020.h5"
    (tmp_path / "partial" / "state").mkdir(parents=True)
    for name in ("config.toml",):
        (tmp_path / "partial" / name).write_text((tmp_path / "full" / name).read_text())
    for p in state.glob("checkpoint-*.h5"):
        (tmp_path / "partial" / "state" / p.name).write_bytes(p.read_bytes())
    mpirun(2, "run", "--resume", tmp_path / "partial")  # its balancer's period and background began on 3
    assert compare_runs(tmp_path / "full", tmp_path / "partial").identical


@pytest.mark.mpi(ranks=(1, 3))
def test_a_run_resumed_on_another_number_of_ranks_keeps_one_trace_of_every_step(ranks, mpirun, tmp_path):
    """A run of 2 ranks interrupted after its checkpoint at step 20, resumed in place on 1 or 3."""
    argv = [*SYNTHETIC[:1], "--steps", "24", "--tiles", "24", "--set", "app.grid=[48,48]"]
    full, partial = tmp_path / "full", tmp_path / "partial"
    mpirun(2, "run", *argv, "--checkpoint-every", "10", "--out", full)
    (partial / "state").mkdir(parents=True)
    for name in ("config.toml", "trace.h5", "state/checkpoint-000020.h5"):
        shutil.copy(full / name, partial / name)
    mpirun(ranks, "run", "--resume", partial)
    assert compare_runs(full, partial).identical
    assert sorted(p.name for p in partial.glob("*.h5")) == ["trace.h5"]
    assert open_run(partial).summary["steps"] == 24
    trace, first = Trace.read(partial), Trace.read(full).truncated(20)
    nodes = max(2, ranks)
    assert trace.steps.tolist() == list(range(24)) and trace.cluster.nodes == nodes
    assert trace.worker_steps.tolist() == [0, 20]
    assert trace.worker_cores.tolist() == ([[1, 1, 0], [1, 1, 1]] if ranks == 3 else [[1, 1], [1, 0]])
    before = trace.tasks["step"] < 20
    for c in TASKS.names:
        assert trace.tasks[c][before].tobytes() == first.tasks[c].tobytes(), c
    # After the checkpoint every task ran on the rank that owned its tile, one of the resumed run's.
    owner = trace.owner_at(20)
    t = trace.tasks
    assert np.array_equal(t["node"][~before], owner[t["tile"][~before]])
    assert set(t["node"][~before].tolist()) == set(range(ranks))
    assert np.array_equal(_messages(trace), _messages(Trace.read(full)))  # payloads do not depend on ranks
    # The message threads' counts: the first part's totals as its trace held them, plus the
    # payloads each rank of the resumed part sent to or received from another.
    m = trace.messages
    later = m["step"] >= 20
    src, dst = owner[m["src"][later]], owner[m["dst"][later]]
    remote = src != dst
    extra = np.bincount(src[remote], minlength=nodes) + np.bincount(dst[remote], minlength=nodes)
    expected = np.pad(first.communication["messages"], (0, nodes - 2)) + extra
    assert trace.communication["messages"].tolist() == expected.tolist()


WIRE_SCRIPT = """
import os, pickle, socket, sys
import numpy as np
from mpi4py import MPI


def refuse(*args, **kwargs):
    raise AssertionError("a message between ranks was unpickled")


MPI.pickle.__init__(pickle.dumps, refuse, pickle.HIGHEST_PROTOCOL)  # mpi4py's receive-side pickler
sys.excepthook = lambda *exc: (sys.__excepthook__(*exc), MPI.COMM_WORLD.Abort(1))  # a failure ends every rank

from shoal.cli import main
from shoal.errors import ShoalError
from shoal.runtime import mpi

mpi.INLINE_BYTES, mpi.PART_BYTES = 256, 1000  # tile states then follow their message, results in many parts
team = mpi.MPITeam()
odd = {"fortran": np.asfortranarray(np.arange(12.0).reshape(3, 4)), "strided": np.arange(20)[::3],
       "big_fortran": np.asfortranarray(np.arange(6000.0).reshape(60, 100)), "big_strided": np.arange(3000)[::2],
       "empty": np.zeros((0, 3), np.float32), "zero_d": np.array(7, np.int16), "flags": np.array([True, False]),
       "text": np.array(["ab", "c"]), "scalars": (1, 2.5, "x", None, np.float32(3), [True])}


def same(a, b):
    assert type(a) is type(b), (a, b)
    if isinstance(a, dict):
        assert list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    elif isinstance(a, np.ndarray):
        fortran = [x.ndim > 1 and x.flags.f_contiguous and not x.flags.c_contiguous for x in (a, b)]
        assert (a.dtype, a.shape, a.tobytes(), fortran[0]) == (b.dtype, b.shape, b.tobytes(), fortran[1]), (a, b)
    else:
        assert a == b or (a is None and b is None), (a, b)
    return True


if team.rank == 1:
    team._complete(team.post(odd, 0, 99))
else:
    same(odd, team._take(1, 99))
    first = np.frombuffer(mpi.encode(odd, (5, 6))[0], np.uint8)
    damaged = first.copy()
    damaged[40:50] = 0xFF
    for buf in (damaged, first[:10], first[:-8]):
        try:
            mpi.decode(buf, lambda out: out.fill(0))
            raise AssertionError("a damaged message was read")
        except ShoalError:
            pass

code = main(sys.argv[1:])
assert code == 0, code
assert "mpi4py.util.pkl5" not in sys.modules


def sockets():
    '''The inodes of the sockets this process holds (Linux /proc).'''
    found = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # closed meanwhile (the listing's own)
            continue
        if target.startswith("socket:["):
            found.add(target[len("socket:["):-1])
    return found


def address(field, family):
    '''An address of /proc/net/tcp{,6}: hex of 32-bit words in host (little-endian) order, then a port.'''
    words = bytes.fromhex(field.split(":")[0])
    return socket.inet_ntop(family, b"".join(words[i:i + 4][::-1] for i in range(0, len(words), 4)))


def tcp_ends():
    '''(local, remote) addresses of every TCP socket this process holds.'''
    mine, ends = sockets(), []
    for table, family in (("tcp", socket.AF_INET), ("tcp6", socket.AF_INET6)):
        for line in open(f"/proc/net/{table}").read().splitlines()[1:]:
            fields = line.split()
            if fields[9] in mine:
                ends.append((address(fields[1], family), address(fields[2], family)))
    return ends


ends = tcp_ends()
loopback = ("127.", "::1", "::ffff:127.")
assert ends and all(a.startswith(loopback) for end in ends for a in end), ends
"""


@pytest.mark.mpi(ranks=(2,))
def test_messages_are_buffers_never_unpickled_and_stay_on_loopback(ranks, references, tmp_path):
    """With mpi4py's unpickler made to raise on every rank, a balanced run (messages in many
    parts) ends identical to the local one; odd arrays keep dtype, shape, order and bytes; a
    damaged message is refused; every TCP socket a rank holds has both ends on loopback."""
    script = tmp_path / "wire.py"
    script.write_text(WIRE_SCRIPT)
    out = tmp_path / "run"
    done = subprocess.run(mpi_python(ranks, script, "run", *SYNTHETIC, "--placement", "greedy", "--period", "3",
                                     "--out", out), capture_output=True, text=True, timeout=60, env=mpi_env())
    assert done.returncode == 0, done.stderr
    assert compare_runs(references["synthetic"].path, out).identical
    assert open_run(out).trace.balance["moved"].sum() > 0  # tile states travelled too


THREADS_SCRIPT = """
import json
import threading
import numpy as np
from shoal.cluster import Cluster
from shoal.runtime import App, LocalExecutor, Phase
from shoal.runtime.mpi import MPIExecutor
from shoal.runtime.launch import current_team
from shoal.tiling import Tiling

on_main = []  # per task run in this process: whether the main thread ran it
movers = []  # per pass moving messages: the name of the thread that made it


def exchange(self, _pass=MPIExecutor._exchange):
    movers.append(threading.current_thread().name)
    return _pass(self)


MPIExecutor._exchange = exchange


class Smooth(App):
    name = "smooth-probe"
    phases = (Phase("measure", reduction="max"), Phase("smooth", halo=True))
    grid = (12, 12)

    def init_tile(self, tile, tiling):
        return np.array([float(tile * tile % 7)])

    def pack_halos(self, state, src, tiling):
        return {d: state.copy() for d in tiling.neighbours[src].tolist()}

    def smooth(self, tile, state, halos, ctx, tiling):
        on_main.append(threading.current_thread() is threading.main_thread())
        state[0] = 0.5 * state[0] + 0.5 * sum(halos[s][0] for s in sorted(halos)) / len(halos) + ctx.reduced["measure"]
        return 1

    def measure(self, tile, state, halos, ctx, tiling):
        return 1, float(state[0]) * 1e-3

    def gather(self, states, tiling):
        return {}


team = current_team()
app, tiling = Smooth(), Tiling.from_count((12, 12), 16)
owner = np.arange(16) * team.size // 16
ex = team.executor(app, tiling, Cluster.uniform(team.size, 1), owner)
states = {int(t): app.init_tile(int(t), tiling) for t in np.flatnonzero(owner == team.rank)}
seen, threads, step = [], [], 0
for workers in (1, 2, 1):  # the rank's worker: its main thread, then two threads, then the main thread again
    ex.reconfigure(cores={team.rank: workers})
    on_main.clear()
    movers.clear()
    result = ex.run(4, states=states, first_step=step)
    states, step = result.states, step + 4
    seen.append((workers, len(on_main), sum(on_main)))
    threads.append(sorted(set(movers)))
ex.close()
with LocalExecutor(app, tiling, Cluster.uniform(1, 1), np.zeros(16, int)) as serial:
    reference = serial.run(12).states
same = all(np.array_equal(states[t], reference[t]) for t in states)
print("result", json.dumps({"rank": team.rank, "seen": seen, "threads": threads, "same": same,
                            "main": threading.main_thread().name}), flush=True)
"""


@pytest.mark.mpi(ranks=(2,))
def test_a_rank_of_one_worker_runs_its_tasks_on_the_main_thread(ranks, tmp_path):
    """One worker per rank: the main thread runs the tasks and moves the messages between
    them (no second thread); with two, the worker threads do both, and no other thread moves
    messages; bitwise the serial state either way."""
    script = tmp_path / "threads.py"
    script.write_text(THREADS_SCRIPT)
    done = subprocess.run(mpi_python(ranks, script), capture_output=True, text=True, timeout=240, env=mpi_env())
    assert done.returncode == 0, done.stderr
    results = [json.loads(line.split(" ", 1)[1]) for line in done.stdout.splitlines() if line.startswith("result ")]
    assert sorted(r["rank"] for r in results) == list(range(ranks)), done.stdout
    tasks = 4 * (16 // ranks)  # 4 steps of the smoothing phase on each of this rank's tiles
    for r in results:
        assert r["seen"] == [[1, tasks, tasks], [2, tasks, 0], [1, tasks, tasks]], r
        one, two, again = r["threads"]
        assert one == again == [r["main"]], r
        assert two and set(two) <= {f"shoal-node{r['rank']}-w{k}" for k in range(2)}, r
        assert r["same"], r


LEVEL_SCRIPT = """
import mpi4py
mpi4py.rc.thread_level = "funneled"  # only the main thread may call MPI
from mpi4py import MPI
from shoal.errors import ShoalError
from shoal.runtime.mpi import MPITeam

assert MPI.Query_thread() == MPI.THREAD_FUNNELED
try:
    MPITeam()
except ShoalError as exc:
    print("refused:", exc)
"""


@pytest.mark.mpi(ranks=(1,))
def test_an_mpi_started_below_the_serialized_thread_level_is_refused_in_one_line(ranks, tmp_path):
    """Workers call MPI (one at a time): an MPI started for the main thread only is refused
    with a line that says how to start it, instead of calls from threads it does not allow."""
    script = tmp_path / "level.py"
    script.write_text(LEVEL_SCRIPT)
    done = subprocess.run(mpi_python(ranks, script), capture_output=True, text=True, timeout=60, env=mpi_env())
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith("refused:")]
    assert len(lines) == 1 and "MPI_THREAD_SERIALIZED" in lines[0] and "thread_level" in lines[0], done.stdout
