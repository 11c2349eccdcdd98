"""Jobs, the second kind of unit: emitted by the tiles in tile order, placed by a job policy, cut
into ranges any core of their node may take, their results handed back in a fixed order. A
triangle mesh on METIS parts with penalty contacts between parts stays bitwise the same for any
part count, placement, job policy, split and worker count, and conserves momentum (on MPI
ranks too: test_jobs_mpi.py)."""

import numpy as np
import pytest

from graph_apps import MeshContact, sheet
from shoal.cluster import Cluster
from shoal.errors import ShoalError
from shoal.mesh import MeshPartition
from shoal.placement import get_policy
from shoal.runtime import App, LocalExecutor, Phase
from shoal.runtime.native import NativeExecutor

V, E = sheet()
STEPS = 6


def run(parts, nodes=1, workers=1, placement="sfc", job_policy="even", split=0, steps=STEPS, backend=LocalExecutor):
    mesh = MeshPartition.from_mesh(V, E, parts)
    app = MeshContact(mesh, V, job_split=split)
    cluster = Cluster.uniform(nodes, workers)
    owner = get_policy(placement).place(mesh, cluster, 1)
    with backend(app, mesh, cluster, owner, job_policy=job_policy) as ex:
        res = ex.run(steps)
    return mesh, owner, res, app.gather(res.states, mesh)


@pytest.fixture(scope="module")
def reference():
    return run(1)


@pytest.mark.parametrize("parts, nodes, workers, placement, job_policy, split", [
    (2, 2, 1, "sfc", "locality", 0),
    (4, 2, 2, "birdshot", "locality", 7),
    (5, 3, 1, "metis", "profiled", 0),
    (6, 2, 2, "geometric", "even", 5),
    (7, 3, 2, "strips", "profiled", 9),
])
def test_contacts_are_bitwise_the_same_for_any_parts_placement_job_policy_split_and_workers(
        reference, parts, nodes, workers, placement, job_policy, split):
    _, _, _, want = reference
    _, _, res, got = run(parts, nodes, workers, placement, job_policy, split)
    for name in ("x", "v", "force"):
        assert got[name].tobytes() == want[name].tobytes(), name
    assert len(res.jobs["job"]) > parts  # pairs of parts met


@pytest.mark.parametrize("parts, nodes, workers, job_policy, split", [
    (4, 2, 2, "even", 7),
    (6, 3, 1, "profiled", 0),
    (5, 1, 2, "even", 2),  # more ranges than tiles on a node: its ring grows to hold them and its tiles
])
def test_the_native_executor_runs_the_same_jobs_and_ranges_to_the_same_bits(reference, parts, nodes, workers,
                                                                             job_policy, split):
    """The emitting and job phases through the trampoline, the ranges queued between the
    segments: the Python executor's state, and its ranges (the same jobs, cut the same way; on
    the same nodes where the policy does not read measured times)."""
    _, _, python, want = run(parts, nodes, workers, "birdshot", job_policy, split)
    _, _, native, got = run(parts, nodes, workers, "birdshot", job_policy, split, backend=NativeExecutor)
    for name in ("x", "v", "force"):
        assert got[name].tobytes() == want[name].tobytes() == reference[3][name].tobytes(), name
    keys = ("step", "phase", "job", "a", "b", "first", "stop", "work") + (("node",) if job_policy == "even" else ())
    ranges = [sorted(zip(*(r.jobs[k].tolist() for k in keys), strict=True)) for r in (python, native)]
    assert ranges[0] == ranges[1] and len(ranges[0]) > STEPS  # every step's ranges
    assert np.all(native.jobs["end"] >= native.jobs["start"])


def test_contact_forces_are_equal_and_opposite_and_push_the_vertices_apart(reference):
    _, _, _, got = reference
    assert np.abs(got["force"]).max() > 0.1  # contacts happened
    momentum = got["v"].sum(axis=0)  # from rest, under pair forces only
    assert np.abs(momentum).max() < 1e-12 * np.abs(got["v"]).sum()

    def closest(x):
        d = np.linalg.norm(x[:, None] - x[None, :], axis=2)
        return d[np.triu_indices(len(x), 1)].min()

    assert closest(got["x"]) > closest(V)


def test_every_job_runs_once_over_all_its_items_on_the_node_its_policy_chose():
    mesh, owner, res, _ = run(5, nodes=3, workers=2, placement="metis", job_policy="locality", split=6)
    j = res.jobs
    for step in range(STEPS):
        mine = j["step"] == step
        jobs = np.unique(j["job"][mine])
        assert jobs.tolist() == list(range(len(jobs)))  # ids in the order the tiles emitted them
        for job in jobs:
            rows = mine & (j["job"] == job)
            first, stop = np.sort(j["first"][rows]), np.sort(j["stop"][rows])
            assert first[0] == 0 and (first[1:] == stop[:-1]).all()  # ranges cover the job, each once
            a = int(j["a"][rows][0])
            assert stop[-1] == (mesh.part_of_vertex == a).sum()  # a job's items: its first part's vertices
            assert len(np.unique(j["node"][rows])) == 1  # one node runs all its ranges
            if stop[-1] > 6:
                assert rows.sum() == 2  # cut into as many ranges as the node has cores
        tiles = j["a"][mine], j["b"][mine]
        assert ((tiles[1] == -1) | (tiles[1] > tiles[0])).all()
        singles = np.sort(tiles[0][(tiles[1] == -1) & (j["first"][mine] == 0)])
        assert singles.tolist() == list(range(5))  # every part checks its own vertices


def test_the_even_policy_gives_every_node_as_many_jobs_give_or_take_one():
    _, _, res, _ = run(6, nodes=3, job_policy="even")
    j = res.jobs
    for step in range(STEPS):
        counts = np.bincount(j["node"][j["step"] == step], minlength=3)
        assert counts.max() - counts.min() <= 1


def test_a_job_that_answers_for_other_tiles_than_it_read_stops_the_run_naming_it():
    class Wrong(MeshContact):
        def collide(self, job, inputs, first, stop, ctx):
            return 1, {job["a"]: np.zeros((0, 4))}  # forgets the second part

    mesh = MeshPartition.from_mesh(V, E, 3)
    with LocalExecutor(Wrong(mesh, V), mesh, Cluster.uniform(1, 2), np.zeros(3, np.int64)) as ex:
        with pytest.raises(ShoalError, match=r"job \d+ reads tiles \[\d, \d\] and returned results for"):
            ex.run(2)


def test_job_phases_follow_a_phase_that_emits_them():
    base = {"name": "x", "init_tile": lambda *a: 0, "gather": lambda *a: {}, "a": lambda *a: 0, "b": lambda *a: 0,
            "run": lambda *a: 0, "pack_job_input": lambda *a: 0}
    with pytest.raises(TypeError, match="does not emit them"):
        type("Orphan", (App,), {**base, "phases": (Phase("a"), Phase("b", jobs="run"))})
    with pytest.raises(TypeError, match="does not run them"):
        type("Lost", (App,), {**base, "phases": (Phase("a", emits_jobs=True), Phase("b"))})
    with pytest.raises(ValueError, match="cannot reduce"):
        Phase("a", emits_jobs=True, reduction="sum")




def test_a_trace_keeps_every_range_of_every_job(tmp_path):
    import h5py

    from shoal.records import JOB_RUNS
    from shoal.trace import Trace

    mesh, owner, res, _ = run(4, nodes=2, workers=2, job_policy="locality", split=6)
    trace = Trace.of_run(res, MeshContact.phases, mesh, Cluster.uniform(2, 2), placements=[(0, owner)])
    back = Trace.read(trace.write(tmp_path / "trace.h5"))
    assert set(back.jobs) == set(JOB_RUNS.names)
    for name in JOB_RUNS.names:
        assert back.jobs[name].tobytes() == res.jobs[name].astype(JOB_RUNS.column(name).dtype).tobytes(), name
    with h5py.File(tmp_path / "trace.h5") as f:
        assert f["jobs"].attrs["version"] == 1 and int(f["jobs/committed"][0]) == len(res.jobs["job"])
    assert back.truncated(3).jobs["step"].max() == 2
    assert (back.jobs["fetched"] >= 0).all() and (back.jobs["end"] >= back.jobs["start"]).all()


# ----- replaying jobs ---------------------------------------------------------------------------
def test_a_serial_replay_runs_every_job_once_at_its_measured_cost():
    from shoal.replay import ReplayConfig, replay
    from shoal.trace import Trace

    mesh, owner, res, _ = run(4, nodes=2, workers=2, job_policy="locality", split=6)
    trace = Trace.of_run(res, MeshContact.phases, mesh, Cluster.uniform(2, 2), placements=[(0, owner)])
    r = replay(trace, ReplayConfig(nodes=1, cores=1, costs="measured", placement="sfc"))
    assert r.makespan == pytest.approx(trace.tasks["cost"].sum() + trace.jobs["cost"].sum(), rel=1e-9)
    j = r.trace.jobs
    recorded = {(int(s), int(k)) for s, k in zip(trace.jobs["step"], trace.jobs["job"], strict=True)}
    assert {(int(s), int(k)) for s, k in zip(j["step"], j["job"], strict=True)} == recorded
    assert (j["node"] == 0).all() and (j["first"] == 0).all()  # one node of one core: never cut (split 0)
    assert (j["fetched"] == 0).all()  # every input is on the job's node


@pytest.mark.parametrize("placement", ["greedy", "refine", "speculative"])
def test_a_mesh_partitions_trace_replays_under_the_dynamic_balancers(placement):
    """Parts of a mesh migrate as grid tiles do; the speculative balancer, which coarsens a
    grid's tiling to foresee loads, takes a mesh's loads as they are."""
    from shoal.replay import ReplayConfig, replay
    from shoal.trace import Trace

    mesh, owner, res, _ = run(6, nodes=2, workers=1, job_policy="locality", split=0)
    trace = Trace.of_run(res, MeshContact.phases, mesh, Cluster.uniform(2, 1), placements=[(0, owner)])
    static = replay(trace, ReplayConfig(nodes=2, cores=1, costs="measured", placement="metis"))
    moving = replay(trace, ReplayConfig(nodes=2, cores=1, costs="measured", placement=placement, period=1,
                                        initial="metis"))
    assert len(moving.trace.jobs["job"]) == len(static.trace.jobs["job"]) == len(trace.jobs["job"])
    assert moving.trace.tasks["cost"].sum() == pytest.approx(static.trace.tasks["cost"].sum(), rel=1e-12)


def hand_job_trace(in_b=3000):
    """Two tiles; phase 'broad' (10 ms each) emits one job reading both (30 ms; inputs of 1000
    and ``in_b`` bytes, results of 1000 bytes each); phase 'contact' (1 ms each) reads them."""
    from shoal.records import JOB_RUNS
    from shoal.tiling import Tiling
    from shoal.trace import Trace

    tasks = {"step": [0, 0, 0, 0], "phase": [0, 0, 1, 1], "tile": [0, 1, 0, 1], "node": [0] * 4, "worker": [0] * 4,
             "start": [0.0] * 4, "end": [0.0] * 4, "cost": [0.010, 0.010, 0.001, 0.001], "work": [1] * 4}
    job = dict(zip(JOB_RUNS.names, [[v] for v in (0, 0, 1, 0, 2, 0, 1, 0, 10, 0, 0, 0.0, 0.0, 0.030, 10, 0.030, 0,
                                                  1000, in_b, 1000, 1000)], strict=True))
    return Trace(tasks=tasks, messages={k: np.zeros(0) for k in ("step", "phase", "src", "dst", "bytes")},
                 phases=["broad", "contact"], tiling=Tiling.from_counts((2, 1), (2, 1), halo=0),
                 cluster=Cluster.uniform(1, 1), placement_steps=np.array([0]), placement_owners=np.zeros((1, 2), int),
                 step_end=np.zeros(1), barrier_phases=[True, False], jobs=job)


def test_a_replayed_job_waits_for_the_barrier_and_its_inputs_and_its_tiles_for_its_results():
    from shoal.cluster import Network
    from shoal.replay import ReplayConfig, replay

    net = Network(latency_s=1e-3, bandwidth_Bps=1e6, overhead_s=0.0)  # 1000 bytes: 1 ms on an interface
    r = replay(hand_job_trace(), ReplayConfig(nodes=2, cores=1, placement="strips", network=net, costs="measured",
                                              job_policy="locality"))
    j = r.trace.jobs
    # Algorithm 2: 30 ms is not below the average 15 ms on either tile's node: the least loaded, node 0
    assert j["node"].tolist() == [0] and j["fetched"].tolist() == [3000]
    # tile 1's input leaves at 10 ms: 1 ms latency + 3 ms on each interface -> 14 ms (the barrier: 12 ms)
    assert j["start"][0] == pytest.approx(0.014) and j["end"][0] == pytest.approx(0.044)
    t = r.trace.tasks
    contact = t["phase"] == 1
    ends = dict(zip(t["tile"][contact].tolist(), t["end"][contact].tolist(), strict=True))
    assert ends[0] == pytest.approx(0.045)  # its result is on its node
    assert ends[1] == pytest.approx(0.044 + 0.001 + 0.001 + 0.001)  # its result crosses the network
    assert r.makespan == pytest.approx(0.047)
    even = replay(hand_job_trace(), ReplayConfig(nodes=2, cores=1, placement="strips", network=net,
                                                 costs="measured", job_policy="even"))
    assert even.trace.jobs["node"].tolist() == [0]  # one job: the first node


def test_a_replay_cuts_big_jobs_for_the_modeled_cores():
    from shoal.replay import ReplayConfig, replay

    r = replay(hand_job_trace(), ReplayConfig(nodes=1, cores=2, costs="measured", job_split=4))
    j = r.trace.jobs
    assert sorted(zip(j["first"].tolist(), j["stop"].tolist(), strict=True)) == [(0, 5), (5, 10)]
    assert j["cost"].sum() == pytest.approx(0.030)
    # two cores share the job: 10 ms broad, then 15 ms on each core, then 1 ms contact
    assert r.makespan == pytest.approx(0.010 + 0.015 + 0.001)


def test_a_profiled_placement_reads_what_the_last_windows_ranges_measured(monkeypatch):
    from shoal.placement import job_policies

    seen = []
    policy = job_policies.job_policy("profiled")
    place = type(policy).place

    def spy(self, jobs, owner, cluster, params=None, measured=None):
        seen.append(measured)
        return place(self, jobs, owner, cluster, params, measured)

    monkeypatch.setattr(type(policy), "place", spy)
    _, _, res, _ = run(4, nodes=2, workers=2, job_policy="profiled", split=6, steps=3)
    assert seen[0] is None  # nothing measured before the first window
    j = res.jobs
    for step in (1, 2):
        before = j["step"] == step - 1
        got = seen[step]
        assert sorted(got["seconds"].tolist()) == sorted(j["cost"][before].tolist())  # every range of the window
        assert sorted(zip(got["a"].tolist(), got["size"].tolist(), strict=True)) == sorted(
            zip(j["a"][before].tolist(), (j["stop"] - j["first"])[before].tolist(), strict=True))


# ----- the node-level barrier (contact mechanics, §VI-B) ------------------------------------------
class NodeBarrierContact(MeshContact):
    phases = (MeshContact.phases[0], Phase("contact", jobs="collide", work="vertices", node_barrier=True))


@pytest.mark.parametrize("backend", [LocalExecutor, NativeExecutor], ids=["python", "native"])
def test_under_a_node_barrier_every_tile_waits_for_its_nodes_ranges_and_the_state_is_the_same(reference, backend):
    mesh = MeshPartition.from_mesh(V, E, 6)
    app = NodeBarrierContact(mesh, V, job_split=5)
    cluster = Cluster.uniform(2, 2)
    owner = get_policy("metis").place(mesh, cluster, 1)
    with backend(app, mesh, cluster, owner, job_policy="locality") as ex:
        res = ex.run(STEPS)
    got = app.gather(res.states, mesh)
    assert got["x"].tobytes() == reference[3]["x"].tobytes()
    t, j = res.tasks, res.jobs
    for step in range(STEPS):
        for node in range(2):
            ranges = (j["step"] == step) & (j["node"] == node)
            if not ranges.any():
                continue
            mine = (t["step"] == step) & (t["phase"] == 1) & (owner[t["tile"]] == node)
            assert t["start"][mine].min() >= j["end"][ranges].max()


def test_a_replayed_node_barrier_holds_every_tile_of_the_node():
    from shoal.replay import ReplayConfig, replay

    trace = hand_job_trace()
    trace.jobs["b"][:] = -1  # a job of tile 0 alone: tile 1 does not read it
    plain = replay(trace, ReplayConfig(nodes=1, cores=2, costs="measured"))
    trace.node_barrier_phases = [False, True]
    held = replay(trace, ReplayConfig(nodes=1, cores=2, costs="measured"))

    def contact_end(r, tile):
        t = r.trace.tasks
        return float(t["end"][(t["phase"] == 1) & (t["tile"] == tile)][0])

    assert contact_end(plain, 1) == pytest.approx(0.011)  # 10 ms broad, then its own 1 ms
    assert contact_end(held, 1) == pytest.approx(0.041)  # after tile 0's 30 ms job on its node
    assert contact_end(held, 0) == contact_end(plain, 0) == pytest.approx(0.041)


def test_a_node_barrier_belongs_to_a_job_phase():
    with pytest.raises(ValueError, match="node-level barrier"):
        Phase("a", node_barrier=True)
