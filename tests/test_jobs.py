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

V, E = sheet()
STEPS = 6


def run(parts, nodes=1, workers=1, placement="sfc", job_policy="even", split=0, steps=STEPS):
    mesh = MeshPartition.from_mesh(V, E, parts)
    app = MeshContact(mesh, V, job_split=split)
    cluster = Cluster.uniform(nodes, workers)
    owner = get_policy(placement).place(mesh, cluster, 1)
    with LocalExecutor(app, mesh, cluster, owner, job_policy=job_policy) as ex:
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

