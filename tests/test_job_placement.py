"""Jobs and their placement: the table, the three policies (Algorithm 2 worked by hand on the
contact-mechanics paper's Fig. 4), the split of big jobs into item ranges, and bad input."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from shoal.cluster import Cluster
from shoal.errors import ShoalError
from shoal.placement import JOB_POLICIES, get_policy, job_policy
from shoal.placement.job_policies import LocalityParams, collision_tasks, cut_limit, register_job_policy
from shoal.placement.job_split import node_work, split_count, split_job
from shoal.placement.jobs import REPLY, REQUEST, WORK, CostProfile, job_costs, job_table

A, B, C = 0, 1, 2  # the three partitions (tiles) of Fig. 4, one per node: tile t lives on node t
FIG4_OWNER = np.array([0, 1, 2])


def fig4_jobs():
    """Fig. 4 as jobs: every potential collision pair is a job of cost 1 (the caption's "equal
    computation time for each collision pair"), 15 in three groups by partition pair. The text
    keeps the figure's caption but not its drawing, so the group sizes are ours: 6 pairs of
    (A, B), 5 of (A, C), 4 of (B, C), emitted group by group."""
    a = [A] * 6 + [A] * 5 + [B] * 4
    b = [B] * 6 + [C] * 5 + [C] * 4
    return job_table(a, b, cost=1.0, size=1)


# threshold 0.4 of avgLoad = 15 / 3 = 5: a group above 2 pairs is cut into tasks of about 2.
FIG4_PARAMS = LocalityParams(threshold=0.4)


def test_fig4_three_groups_become_the_eight_collision_tasks():
    # (A, B): 6 pairs, k = ceil(6 / 2) = 3 tasks of 2. (A, C): 5 pairs, k = 3; the pairs' cost
    # midpoints 0.5 .. 4.5 times 3 / 5 floor to tasks 0 0 1 2 2: sizes 2, 1, 2. (B, C): 4 pairs,
    # k = 2 tasks of 2. 3 + 3 + 2 = 8 tasks, the count in the paper's Collision Tasks column.
    tasks = collision_tasks(fig4_jobs(), np.ones(15), 2.0)
    assert [t.tolist() for t in tasks] == [[0, 1], [2, 3], [4, 5], [6, 7], [8], [9, 10], [11, 12], [13, 14]]


def test_fig4_algorithm_2_worked_by_hand():
    # avgLoad = 15 / 3 = 5. Load = [0, 0, 0]. Tasks in the order of L, (P1, P2) = nodes of (a, b):
    #  t1 (A,B) 2: Load[0] + 2 = 2 < 5 -> node 0                 Load [2, 0, 0]
    #  t2 (A,B) 2: 4 < 5 -> node 0                               Load [4, 0, 0]
    #  t3 (A,B) 2: node 0 would reach 6; node 1: 2 < 5 -> node 1 Load [4, 2, 0]
    #  t4 (A,C) 2: node 0 6, no; node 2: 2 < 5 -> node 2         Load [4, 2, 2]
    #  t5 (A,C) 1: node 0 would reach 5, not < 5; node 2: 3      Load [4, 2, 3]
    #  t6 (A,C) 2: node 0 6, node 2 5 (not < 5) -> pending
    #  t7 (B,C) 2: node 1: 4 < 5 -> node 1                       Load [4, 4, 3]
    #  t8 (B,C) 2: node 1 6, node 2 5 (not < 5) -> pending
    # Pending, biggest first, equal loads in the order of L: t6 then t8.
    #  t6 -> least loaded node 2 (3)                             Load [4, 4, 5]
    #  t8 -> least loaded: nodes 0 and 1 tie at 4, lowest id 0  Load [6, 4, 5]
    job_node = job_policy("locality").place(fig4_jobs(), FIG4_OWNER, Cluster.uniform(3, 4), FIG4_PARAMS)
    #                     t1    t2    t3    t4    t5 t6    t7    t8
    assert job_node.tolist() == [0, 0, 0, 0, 1, 1, 2, 2, 2, 2, 2, 1, 1, 0, 0]
    assert np.bincount(job_node, minlength=3).tolist() == [6, 4, 5]


def test_fig4_with_each_group_emitted_as_one_job_places_whole_groups():
    # A job is never cut across nodes: three jobs of 6, 5 and 4 pairs are three tasks.
    # avgLoad 5: (A,B) 6 -> pending; (A,C) 5 -> node 0 reaches 5, node 2 reaches 5: pending;
    # (B,C) 4 -> node 1. Pending 6 -> node 0 (least loaded, lowest id), 5 -> node 2.
    jobs = job_table([A, A, B], [B, C, C], cost=[6.0, 5.0, 4.0], size=[6, 5, 4])
    job_node = job_policy("locality").place(jobs, FIG4_OWNER, Cluster.uniform(3, 4), FIG4_PARAMS)
    assert job_node.tolist() == [0, 2, 1]


def test_algorithm_2_refuses_a_home_that_would_reach_the_average_exactly():
    # Tiles 0 and 1 on nodes 0 and 1, node 2 holds none; four single-tile jobs, each its own
    # group; avgLoad = 6 / 3 = 2.
    #  job 0 (tile 0, 2): 0 + 2 = 2 is not < 2 -> pending;  job 1 (tile 1, 2): likewise.
    #  job 2 (tile 0, 1): 1 < 2 -> node 0;                  job 3 (tile 1, 1): -> node 1.
    # Pending 0 then 1: node 2 (load 0), then node 0 (loads [1, 1, 2]: lowest id).
    # With <= instead, jobs 0 and 1 would stay home and jobs 2 and 3 would both go to node 2.
    jobs = job_table([0, 1, 0, 1], cost=[2.0, 2.0, 1.0, 1.0], size=1, group=[0, 1, 2, 3])
    job_node = job_policy("locality").place(jobs, np.array([0, 1]), Cluster.uniform(3, 1), LocalityParams(math.inf))
    assert job_node.tolist() == [2, 0, 0, 1]


def test_algorithm_2_tries_the_first_tile_then_the_second():
    # Tiles 0 and 1 on nodes 0 and 1; avgLoad = 10 / 2 = 5; each job its own group.
    #  job 0 (tile 1, 4): node 1, 4 < 5                               Load [0, 4]
    #  job 1 (tiles 1, 0; 0.5): node 1 first, 4.5 < 5, though node 0 is empty   [0, 4.5]
    #  job 2 (tiles 1, 0; 3): node 1 would reach 7.5; node 0: 3 < 5    Load [3, 4.5]
    #  job 3 (tiles 1, 0; 2.5): 7 and 5.5 -> pending -> least loaded node 0
    jobs = job_table([1, 1, 1, 1], [-1, 0, 0, 0], cost=[4.0, 0.5, 3.0, 2.5], size=1, group=[0, 1, 2, 3])
    job_node = job_policy("locality").place(jobs, np.array([0, 1]), Cluster.uniform(2, 1), LocalityParams(math.inf))
    assert job_node.tolist() == [1, 1, 0, 0]


def test_profiled_is_largest_first_onto_the_least_loaded_node_by_hand():
    # Costs 5 4 3 3 2 2 (ids 0..5) on 2 nodes: 5 -> 0 [5,0]; 4 -> 1 [5,4]; 3 (id 2) -> 1 [5,7];
    # 3 (id 3) -> 0 [8,7]; 2 (id 4) -> 1 [8,9]; 2 (id 5) -> 0 [10,9].
    jobs = job_table([0] * 6, cost=[5.0, 4.0, 3.0, 3.0, 2.0, 2.0], size=1, group=-1)
    job_node = job_policy("profiled").place(jobs, np.array([0]), Cluster.uniform(2, 8))
    assert job_node.tolist() == [0, 1, 1, 0, 1, 0]
    # Equal costs go by id; equal loads to the lowest node.
    ties = job_table([0] * 3, cost=1.0, size=1, job=[7, 3, 5])
    assert job_policy("profiled").place(ties, np.array([0]), Cluster.uniform(2, 1)).tolist() == [0, 0, 1]


MEASURED = {  # the last window: (a, b, seconds, items)
    "a": np.array([0, 1, 2, 1]),
    "b": np.array([1, 0, -1, 2]),
    "seconds": np.array([2.0, 1.0, 1.0, 0.0]),
    "size": np.array([4, 4, 2, 2]),
}


def test_cost_profile_rates_per_unordered_pair_and_the_mean_for_unseen_pairs():
    profile = CostProfile.from_measured(MEASURED)
    # (0, 1) and (1, 0) are one pair: 3 s over 8 items; tile 2 alone: 1 s / 2 items; (1, 2): 0.
    assert profile.rates == {(0, 1): 0.375, (2, -1): 0.5, (1, 2): 0.0}
    assert profile.mean_rate == pytest.approx(4.0 / 12)
    jobs = job_table([1, 2, 0, 2], [0, -1, 2, 1], cost=99.0, size=[8, 3, 6, 5])
    # (0, 2) was not measured: the window's mean rate, 1/3 s per item, times 6 items.
    assert profile.predict(jobs) == pytest.approx([3.0, 1.5, 2.0, 0.0])
    # Without a measured window the table's own costs stand, and an empty window keeps them too.
    assert job_costs(jobs).tolist() == [99.0] * 4
    empty = {k: v[:0] for k, v in MEASURED.items()}
    assert job_costs(jobs, empty).tolist() == [99.0] * 4


def test_profiled_places_by_the_predicted_costs():
    # Predicted 3.0, 1.5, 2.0, 0.0: largest first on 2 nodes: 3 -> 0, 2 -> 1, 1.5 -> 1, 0 -> 0.
    jobs = job_table([1, 2, 0, 2], [0, -1, 2, 1], cost=0.0, size=[8, 3, 6, 5])
    job_node = job_policy("profiled").place(jobs, np.zeros(3, int), Cluster.uniform(2, 1), measured=MEASURED)
    assert job_node.tolist() == [0, 1, 1, 0]
    # The table's costs alone (all 0) would put the jobs by id onto the least loaded node: all on 0.
    assert job_policy("profiled").place(jobs, np.zeros(3, int), Cluster.uniform(2, 1)).tolist() == [0, 0, 0, 0]


@given(n=st.integers(0, 200), nodes=st.integers(1, 9), cores=st.integers(1, 4))
def test_even_gives_equal_counts_in_id_order(n, nodes, cores):
    ids = np.random.default_rng(n).permutation(n) * 3 + 11
    jobs = job_table(np.zeros(n, int), cost=1.0, size=1, job=ids)
    job_node = job_policy("even").place(jobs, np.array([0]), Cluster.uniform(nodes, cores))
    counts = np.bincount(job_node, minlength=nodes)
    assert counts.max() - counts.min() <= 1 and counts.sum() == n
    assert (np.diff(job_node[np.argsort(ids)]) >= 0).all()  # consecutive runs by id


def test_even_follows_cores_on_unequal_nodes():
    jobs = job_table(np.zeros(12, int), cost=1.0, size=1)
    job_node = job_policy("even").place(jobs, np.array([0]), Cluster((1, 2, 3)))
    assert np.bincount(job_node).tolist() == [2, 4, 6]


@st.composite
def job_sets(draw):
    nodes = draw(st.integers(1, 5))
    cluster = Cluster(tuple(draw(st.integers(1, 4)) for _ in range(nodes)))
    ntiles = draw(st.integers(1, 8))
    owner = np.array(draw(st.lists(st.integers(0, nodes - 1), min_size=ntiles, max_size=ntiles)))
    n = draw(st.integers(0, 40))
    tiles = st.integers(0, ntiles - 1)
    a = draw(st.lists(tiles, min_size=n, max_size=n))
    b = [x if x != y else -1 for x, y in zip(draw(st.lists(st.integers(-1, ntiles - 1), min_size=n, max_size=n)), a,
                                             strict=True)]
    jobs = job_table(
        a, b,
        cost=draw(st.lists(st.one_of(st.just(0.0), st.floats(0, 1e3)), min_size=n, max_size=n)),
        size=draw(st.lists(st.integers(1, 100), min_size=n, max_size=n)),
        kind=draw(st.lists(st.integers(0, 2), min_size=n, max_size=n)),
        group=draw(st.lists(st.integers(-1, 3), min_size=n, max_size=n)),
        job=draw(st.lists(st.integers(0, 10**6), min_size=n, max_size=n, unique=True)),
    )
    params = LocalityParams(draw(st.sampled_from([0.1, 0.5, 1.0, math.inf])))
    return jobs, owner, cluster, params, draw(st.randoms(use_true_random=False))


def _params(name, params):
    return params if name == "locality" else None


@pytest.mark.parametrize("name", sorted(JOB_POLICIES))
@given(case=job_sets())
def test_every_job_gets_one_node_in_range_the_same_whatever_the_rows_order(name, case):
    jobs, owner, cluster, params, rnd = case
    policy = job_policy(name)
    job_node = policy.place(jobs, owner, cluster, _params(name, params))
    assert job_node.shape == jobs["job"].shape and job_node.dtype == np.int64
    assert ((job_node >= 0) & (job_node < cluster.nodes)).all()
    assert np.array_equal(job_node, policy.place(jobs, owner, cluster, _params(name, params)))
    perm = np.array(rnd.sample(range(len(jobs["job"])), len(jobs["job"])), dtype=np.int64)
    shuffled = {k: v[perm] for k, v in jobs.items()}
    assert np.array_equal(policy.place(shuffled, owner, cluster, _params(name, params)), job_node[perm])


@given(case=job_sets())
def test_locality_keeps_a_task_together_and_no_node_beyond_the_average_plus_its_largest_task(case):
    jobs, owner, cluster, params, _ = case
    if len(set(cluster.cores)) != 1:
        cluster = Cluster.uniform(cluster.nodes, cluster.cores[0])
    job_node = job_policy("locality").place(jobs, owner, cluster, params)
    costs = jobs["cost"]
    total = costs[np.argsort(jobs["job"])].sum()  # summed in id order, as the policy does
    tasks = collision_tasks(jobs, costs, cut_limit(params.threshold, total, cluster.nodes))
    assert sorted(np.concatenate([np.zeros(0, int)] + tasks).tolist()) == list(range(len(costs)))
    assert all(len(set(job_node[t].tolist())) == 1 for t in tasks)
    # Homes stay under avgLoad; each pending task goes to a node at or under it.
    biggest = max((costs[t].sum() for t in tasks), default=0.0)
    load = np.bincount(job_node, weights=costs, minlength=cluster.nodes)
    assert load.max() <= total / cluster.nodes + biggest + 1e-9 * max(total, 1.0)


def test_node_work_is_in_priority_then_id_order_with_big_jobs_cut_per_core():
    # One node of 3 cores, threshold 4 items: job 5 (work, 10 items) -> 3 ranges 4, 3, 3;
    # job 2 (request, 2 items) stays whole; job 9 (reply, 7 items) -> 3 ranges 3, 2, 2.
    jobs = job_table([0, 0, 0, 0], cost=1.0, size=[10, 2, 7, 1], kind=["work", "request", "reply", "work"],
                     job=[5, 2, 9, 1])
    (work,) = node_work(jobs, np.zeros(4, int), Cluster.uniform(1, 3), threshold=4)
    rows = list(zip(*(work[k].tolist() for k in ("job", "start", "end", "priority")), strict=True))
    assert rows == [(2, 0, 2, REQUEST), (9, 0, 3, REPLY), (9, 3, 5, REPLY), (9, 5, 7, REPLY),
                    (1, 0, 1, WORK), (5, 0, 4, WORK), (5, 4, 7, WORK), (5, 7, 10, WORK)]


@given(case=job_sets(), threshold=st.integers(0, 120), min_items=st.integers(1, 30))
def test_node_work_covers_every_job_once_on_its_own_node(case, threshold, min_items):
    jobs, owner, cluster, params, _ = case
    job_node = job_policy("locality").place(jobs, owner, cluster, params)
    lists = node_work(jobs, job_node, cluster, threshold, min_items)
    assert len(lists) == cluster.nodes
    seen = {}
    for node, work in enumerate(lists):
        keys = list(zip(work["priority"].tolist(), work["job"].tolist(), work["start"].tolist(), strict=True))
        assert keys == sorted(keys)
        for job, start, end in zip(work["job"].tolist(), work["start"].tolist(), work["end"].tolist(), strict=True):
            seen.setdefault(job, []).append((node, start, end))
    for i, job in enumerate(jobs["job"].tolist()):
        pieces = seen.pop(job)
        assert {p[0] for p in pieces} == {job_node[i]}
        assert [(s, e) for _, s, e in pieces] == split_job(int(jobs["size"][i]), threshold,
                                                           cluster.cores[job_node[i]], min_items)
    assert not seen


@given(size=st.integers(1, 10**6), threshold=st.integers(0, 10**6), cores=st.integers(1, 64),
       min_items=st.integers(1, 1000))
def test_split_covers_the_job_exactly_in_ranges_as_equal_as_whole_items_allow(size, threshold, cores, min_items):
    ranges = split_job(size, threshold, cores, min_items)
    assert len(ranges) == split_count(size, threshold, cores, min_items)
    assert ranges[0][0] == 0 and ranges[-1][1] == size
    assert all(prev[1] == nxt[0] for prev, nxt in zip(ranges, ranges[1:], strict=False))  # no gap, no overlap
    lengths = [e - s for s, e in ranges]
    assert min(lengths) >= 1 and max(lengths) - min(lengths) <= 1
    if size <= threshold:
        assert ranges == [(0, size)]
    else:
        assert len(ranges) <= cores
        assert len(ranges) == 1 or min(lengths) >= min_items
        assert len(ranges) == min(cores, max(1, size // min_items))  # one per core while ranges stay big enough


def test_split_by_hand():
    assert split_job(10, 3, 4) == [(0, 3), (3, 6), (6, 8), (8, 10)]
    assert split_job(10, 3, 4, min_items=3) == [(0, 4), (4, 7), (7, 10)]  # 4 ranges would hold 2 or 3
    assert split_job(10, 10, 4) == [(0, 10)]  # at the threshold: whole (Algorithm 3 splits above it)
    assert split_job(11, 10, 1) == [(0, 11)]  # one core: nothing to share


def test_the_job_registry_is_apart_from_the_tiles():
    assert sorted(JOB_POLICIES) == ["even", "locality", "profiled"]
    assert job_policy("locality").name == "locality"
    assert get_policy("locality").name == "tile-locality"  # the tiles' policy, by its deprecated name
    with pytest.raises(ValueError, match="registered twice"):
        register_job_policy(job_policy("even"))


def _one_line(call, match):
    with pytest.raises(ShoalError, match=match) as error:
        call()
    assert "\n" not in str(error.value)


def _place(name="even", owner=(0, 1), cluster=None, params=None, measured=None, **columns):
    table = {"job": [0, 1], "kind": [2, 2], "a": [0, 1], "b": [1, -1], "cost": [1.0, 2.0], "size": [3, 4]}
    table.update(columns)
    return job_policy(name).place({k: np.asarray(v) for k, v in table.items()}, np.asarray(owner),
                                  cluster or Cluster.uniform(2, 1), params, measured)


@pytest.mark.parametrize("call, match", [
    (lambda: job_policy("greedy"), "unknown job placement 'greedy'; known: even, locality, profiled"),
    (lambda: _place(cost=[1.0, -0.5]), "job 1: cost must be a finite number >= 0"),
    (lambda: _place(cost=[np.nan, 1.0]), "job 0: cost must be a finite number"),
    (lambda: _place(a=[0, 2]), r"job 1: reads a tile outside 0\.\.1"),
    (lambda: _place(b=[5, -1]), r"job 0: reads a tile outside 0\.\.1"),
    (lambda: _place(b=[-2, -1]), "job 0: tile b must be >= 0, or -1"),
    (lambda: _place(a=[-1, 1]), "job 0: tile a must be >= 0"),
    (lambda: _place(b=[0, -1]), "job 0: reads tile a twice"),
    (lambda: _place(size=[3, 0]), "job 1: size must be >= 1"),
    (lambda: _place(job=[4, 4]), "job id 4 appears more than once"),
    (lambda: _place(kind=[2, 3]), "job 1: kind must be one of"),
    (lambda: _place(a=[0.5, 1]), "column 'a' must hold integers"),
    (lambda: _place(group=[-3, 0]), "job 0: group must be >= 0, or -1"),
    (lambda: _place(owner=(0, 2)), r"owner names nodes outside 0\.\.1"),
    (lambda: _place(owner=(-1, 0)), r"owner names nodes outside 0\.\.1"),
    (lambda: _place("locality", params=LocalityParams(0.0)), "locality.threshold must be > 0"),
    (lambda: _place("locality", params=LocalityParams(np.nan)), "locality.threshold must be > 0"),
    (lambda: _place("even", params=LocalityParams()), "takes NoParams"),
    (lambda: _place("profiled", measured={**MEASURED, "seconds": -MEASURED["seconds"] - 1}), "measured job times"),
    (lambda: _place("profiled", measured={"a": [0], "b": [1], "size": [1]}), "no column 'seconds'"),
    (lambda: job_table([0], kind="compute", cost=1.0, size=1), "unknown job kind 'compute'"),
    (lambda: Cluster.uniform(0, 2), "number of nodes must be positive"),  # no policy can be asked for 0 nodes
    (lambda: split_job(10, 3, 0), "cores of the node must be >= 1"),
    (lambda: split_job(0, 3, 2), "job size must be >= 1"),
    (lambda: split_job(10, -1, 2), "split threshold must be >= 0"),
    (lambda: split_job(10, 3, 2, min_items=0), "min_items must be >= 1"),
    (lambda: split_job(10, 2.5, 2), "split threshold must be a whole number"),
    (lambda: node_work(job_table([0], cost=1.0, size=1), np.array([2]), Cluster.uniform(2, 1), 0),
     r"job_node names nodes outside 0\.\.1"),
    (lambda: node_work(job_table([0], cost=1.0, size=1), np.array([0, 0]), Cluster.uniform(2, 1), 0),
     "job_node must hold one node id per job"),
])
def test_bad_input_is_refused_in_one_line(call, match):
    _one_line(call, match)
