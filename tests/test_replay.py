"""The replay engine against makespans computed by hand, and aggregation's conservation laws."""

from dataclasses import replace

import numpy as np
import pytest

from shoal.cluster import Cluster, Network
from shoal.errors import ShoalError
from shoal.replay import ReplayConfig, replay
from shoal.replay.run import coarsening_for
from shoal.tiling import Tiling
from shoal.trace import Trace, aggregate

L, B = 1e-3, 1e6  # 1 ms latency; 1 MB/s, so 1000 bytes take 1 ms on an interface
NET = Network(latency_s=L, bandwidth_Bps=B, overhead_s=0.0)


def hand_trace(ntiles, costs, messages, phases=("a", "b"), barrier=None, lagged=None):
    """costs[step][phase][tile]; messages as (step, consumer phase, src, dst, bytes)."""
    S, P = len(costs), len(phases)
    tiling = Tiling.from_counts((ntiles, 1), (ntiles, 1), halo=0)
    step, phase, tile = np.meshgrid(np.arange(S), np.arange(P), np.arange(ntiles), indexing="ij")
    n = S * P * ntiles
    m = np.array(messages, dtype=np.int64).reshape(-1, 5)
    return Trace(
        tasks={"step": step.ravel(), "phase": phase.ravel(), "tile": tile.ravel(), "node": np.zeros(n),
               "worker": np.zeros(n), "start": np.zeros(n), "end": np.zeros(n),
               "cost": np.asarray(costs, float).ravel(), "work": np.ones(n)},
        messages={"step": m[:, 0], "phase": m[:, 1], "src": m[:, 2], "dst": m[:, 3], "bytes": m[:, 4]},
        phases=list(phases), tiling=tiling, cluster=Cluster.uniform(1, 1), placement_steps=np.array([0]),
        placement_owners=np.zeros((1, ntiles), int), step_end=np.zeros(S), barrier_phases=barrier,
        lagged_phases=lagged,
    )


def one_tile_per_node(trace, **kw):
    T = trace.tiling.ntiles
    return replay(trace, ReplayConfig(nodes=T, cores=1, placement="strips", network=NET, **kw))


def test_a_chain_takes_the_sum_of_its_costs():
    costs = [[[0.010], [0.020]], [[0.030], [0.005]]]
    r = replay(hand_trace(1, costs, []), ReplayConfig(nodes=1, cores=1, network=NET))
    assert r.makespan == pytest.approx(0.065, abs=1e-12)
    ends = r.trace.tasks["end"]
    assert np.allclose(ends, [0.010, 0.030, 0.060, 0.065])


def test_fan_in_waits_for_the_last_message_and_the_receiver_interface_serialises():
    # Tiles 0 and 1 finish phase a at 1 ms and both send 1000 bytes to tile 2 (its phase b).
    costs = [[[0.001, 0.001, 0.0005], [0.0, 0.0, 0.004]]]
    msgs = [(0, 1, 0, 2, 1000), (0, 1, 1, 2, 1000)]
    r = one_tile_per_node(hand_trace(3, costs, msgs))
    # First message: 1 ms + latency 1 ms + 1 ms on the receiver = 3 ms. The second queues
    # behind it on the receiver's interface: 4 ms. Then tile 2's phase b runs 4 ms.
    assert r.makespan == pytest.approx(0.008, abs=1e-12)


def test_an_idle_core_wakes_for_a_task_a_message_made_ready_a_busy_one_does_not():
    # Same fan-in: tile 2's core sat idle from 0.5 ms, so its worker must be woken (0.25 ms)
    # when the second message arrives at 4 ms. Tiles 0 and 1 start at t0 (workers starting).
    costs = [[[0.001, 0.001, 0.0005], [0.0, 0.0, 0.004]]]
    msgs = [(0, 1, 0, 2, 1000), (0, 1, 1, 2, 1000)]
    r = one_tile_per_node(hand_trace(3, costs, msgs), wake_s=0.00025)
    assert r.makespan == pytest.approx(0.00825, abs=1e-12)
    # A chain on one core never sleeps: each task follows the previous one at once.
    chain = replay(hand_trace(1, [[[0.010], [0.020]]], []), ReplayConfig(nodes=1, cores=1, network=NET,
                                                                         wake_s=0.001))
    assert chain.makespan == pytest.approx(0.030, abs=1e-12)


def test_two_messages_contend_for_the_sender_interface():
    # Tile 0 sends 1000 bytes to tile 1 and to tile 2 when its phase a ends at 2 ms.
    costs = [[[0.002, 0.0, 0.0], [0.0, 0.001, 0.003]]]
    msgs = [(0, 1, 0, 1, 1000), (0, 1, 0, 2, 1000)]
    r = one_tile_per_node(hand_trace(3, costs, msgs))
    t = r.trace.tasks
    start_b = {int(tile): s for tile, s, ph in zip(t["tile"], t["start"], t["phase"], strict=True) if ph == 1}
    # Alone, a message takes overhead + latency + bytes/bandwidth = 2 ms: the first arrives at 4 ms.
    assert start_b[1] == pytest.approx(0.002 + L + 0.001)
    # The second leaves when the sender's interface is free again (3 ms): it arrives at 5 ms.
    assert start_b[2] == pytest.approx(0.002 + 0.001 + L + 0.001)
    assert r.makespan == pytest.approx(0.005 + 0.003)


def test_message_cpu_is_charged_to_both_ends_of_messages_between_nodes():
    # Tile 0's phase a (1 ms) sends 1000 bytes to tile 1's phase b (1 ms).
    costs = [[[0.001, 0.0], [0.0, 0.001]]]
    tr = hand_trace(2, costs, [(0, 1, 0, 1, 1000)])
    assert one_tile_per_node(tr).makespan == pytest.approx(0.001 + L + 0.001 + 0.001)
    # 0.5 ms per message end: the sender's task and the reader's task each take 0.5 ms longer.
    charged = one_tile_per_node(tr, message_cpu_s=0.0005)
    assert charged.makespan == pytest.approx(0.0015 + L + 0.001 + 0.0015)
    # By default the charge is what the trace's run measured: 2 ms over 4 message ends.
    tr.communication = {"cpu_s": np.array([0.001, 0.001]), "messages": np.array([2, 2])}
    assert one_tile_per_node(tr).makespan == pytest.approx(charged.makespan)
    # Twice as fast cores: half the CPU time per message, as for the tasks.
    assert one_tile_per_node(tr, speed=2.0).makespan == pytest.approx(0.00075 + L + 0.001 + 0.00075)
    # Tiles of one node exchange memory, not messages: no charge.
    same_node = replay(tr, ReplayConfig(nodes=1, cores=2, network=NET))
    assert same_node.makespan == pytest.approx(0.002)
    with pytest.raises(ShoalError, match="message CPU"):
        one_tile_per_node(tr, message_cpu_s=-1.0)


def test_messages_inside_a_node_are_copies_charged_to_the_producer():
    costs = [[[0.002, 0.0], [0.0, 0.001]]]
    msgs = [(0, 1, 0, 1, 5000)]
    r = replay(hand_trace(2, costs, msgs), ReplayConfig(nodes=1, cores=2, network=NET, memcpy_bandwidth=1e6))
    assert r.makespan == pytest.approx(0.002 + 0.005 + 0.001)


def test_cores_of_a_node_share_one_fifo_queue():
    # Four independent 1 ms tasks on a node of two cores: two rounds.
    costs = [[[0.001] * 4]]
    r = replay(hand_trace(4, costs, [], phases=("a",)), ReplayConfig(nodes=1, cores=2, network=NET))
    assert r.makespan == pytest.approx(0.002)
    assert sorted(r.trace.tasks["worker"].tolist()) == [0, 0, 1, 1]


def test_barrier_after_a_reducing_phase():
    # Phase a reduces: every b waits for the slowest a plus an all-reduce over 2 nodes (2 latencies).
    costs = [[[0.001, 0.005], [0.001, 0.001]]]
    r = one_tile_per_node(hand_trace(2, costs, [], barrier=[True, False]))
    assert r.makespan == pytest.approx(0.005 + 2 * L + 0.001)


def test_a_lagged_reduction_holds_the_next_phase_one_step_later():
    # Tile 0's a is slow at step 0. Lagged, b of step 0 waits for nothing; b of step 1 waits for
    # step 0's reduction (5 ms + 2 ms all-reduce). As a plain barrier, every b waits for its step's.
    costs = [[[0.005, 0.001], [0.001, 0.001]], [[0.001, 0.001], [0.001, 0.001]]]
    lagged = one_tile_per_node(hand_trace(2, costs, [], barrier=[True, False], lagged=[True, False]))
    start = lagged.trace.tasks["start"].reshape(2, 2, 2)
    assert start[0, 1, 1] == pytest.approx(0.001)  # tile 1's b at step 0: at once
    assert start[1, 1, 1] == pytest.approx(0.005 + 2 * L)  # tile 1's b at step 1: the reduction of step 0
    assert lagged.makespan == pytest.approx(0.005 + 2 * L + 0.001)
    plain = one_tile_per_node(hand_trace(2, costs, [], barrier=[True, False]))
    assert plain.makespan == pytest.approx((0.005 + 2 * L + 0.001) + (0.001 + 2 * L + 0.001))
    assert lagged.trace.lagged_phases == [True, False]


def test_mpi_reference_puts_a_barrier_after_every_phase():
    costs = [[[0.001, 0.003], [0.003, 0.001]]]
    asynchronous = one_tile_per_node(hand_trace(2, costs, []))
    mpi = replay(hand_trace(2, costs, []), ReplayConfig(nodes=2, cores=1, network=NET, mpi_reference=True))
    assert asynchronous.makespan == pytest.approx(0.004)
    assert mpi.makespan == pytest.approx(0.003 + 2 * L + 0.003)


def test_balancing_moves_state_over_the_network_and_records_it():
    # 4 tiles, 2 nodes of 1 core; tiles 0 and 1 (node 0 under strips) carry all the work.
    costs = [[[0.004, 0.004, 0.0, 0.0]] for _ in range(4)]
    tr = hand_trace(4, costs, [], phases=("a",))
    tr.tile_bytes = np.full(4, 2000)
    r = replay(tr, ReplayConfig(nodes=2, cores=1, placement="greedy", period=2, initial="strips", network=NET))
    bal = r.trace.balance
    # GreedyLB ignores where tiles are: owner (0, 0, 1, 1) becomes (0, 1, 0, 0), three moves.
    assert bal["moved"].tolist() == [3] and bal["lif_before"][0] == pytest.approx(1.0)
    assert bal["lif_after"][0] == pytest.approx(0.0)
    assert bal["bytes"].tolist() == [6000]
    # Two steps of 8 ms on node 0, the barrier's all-reduce (2 latencies), the plan, then node 1
    # sends two 2 ms tiles back to back: the second arrives latency + 4 ms after the barrier.
    # Then two balanced steps of 4 ms.
    migration = L + 2 * 2000 / B
    expected = 0.016 + 2 * L + float(bal["plan_s"][0]) + migration + 0.008
    assert r.makespan == pytest.approx(expected, rel=1e-9)
    with pytest.raises(ShoalError, match="overheads"):
        replay(tr, ReplayConfig(nodes=2, cores=1, placement="greedy", period=2, restart_s=-1.0))
    # Restarting the executor at the balancing step adds its time once.
    r = replay(tr, ReplayConfig(nodes=2, cores=1, placement="greedy", period=2, initial="strips", network=NET,
                                restart_s=0.003))
    expected = 0.016 + 2 * L + float(r.trace.balance["plan_s"][0]) + 0.003 + migration + 0.008
    assert r.makespan == pytest.approx(expected, rel=1e-9)


def test_on_the_recorded_cluster_each_part_of_a_resumed_run_runs_on_the_nodes_it_had():
    """Node 1 joins at step 2 (a run resumed on more nodes): 0 threads before. Four 1 ms tiles."""
    tr = replace(hand_trace(4, [[[0.001] * 4]] * 4, [], phases=("a",)), cluster=Cluster((1, 1)),
                 worker_steps=np.array([0, 2]), worker_cores=np.array([[1, 0], [1, 1]]))
    r = replay(tr, ReplayConfig(placement="strips", network=NET))
    # Steps 0-1: every tile on node 0's one core, 4 ms each; the restart where node 1 joins (the
    # barrier's all-reduce, 2 latencies); steps 2-3: the tiles placed anew, two per node, 2 ms each.
    assert r.makespan == pytest.approx(0.008 + 2 * L + 0.004, rel=1e-12)
    t = r.trace
    assert [sorted(set(t.tasks["node"][t.tasks["step"] == k].tolist())) for k in range(4)] == [[0], [0], [0, 1], [0, 1]]
    assert t.placement_steps.tolist() == [0, 2] and t.worker_cores.tolist() == [[1, 0], [1, 1]]
    s = r.summary()
    assert s["lif_mean"] == 0.0  # node 1 is absent from steps 0-1, not idle (which would make their LIF 1)
    # busy 16 ms over the threads held: 1 for steps 0-1 (4 ms each), 2 for steps 2-3 (the first
    # with the restart: 4 ms, then 2 ms)
    assert s["core_s"] == pytest.approx(0.008 + 2 * (0.004 + 0.002), rel=1e-12)
    assert s["efficiency"] == pytest.approx(0.016 / 0.020, rel=1e-12)
    # A dynamic policy balances on the nodes present only.
    uneven = tr.with_tasks(cost=np.tile([0.004, 0.001, 0.001, 0.001], 4))
    g = replay(uneven, ReplayConfig(placement="greedy", period=1, network=NET)).trace
    assert set(g.tasks["node"][g.tasks["step"] < 2].tolist()) == {0}
    assert set(g.tasks["node"][g.tasks["step"] >= 2].tolist()) == {0, 1}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    from shoal.session import run_scenario

    return run_scenario("synthetic-hotspot", steps=6, tiles=64, nodes=2, set=["app.grid=[64,64]"],
                        out=tmp_path_factory.mktemp("rec") / "r").trace


def test_aggregation_conserves_cost_and_the_bytes_crossing_coarse_boundaries(recorded):
    coarse = recorded.tiling.coarsen(2)
    agg = aggregate(recorded, coarse)
    assert agg.tiling.ntiles == 16
    assert agg.tasks["cost"].sum() == pytest.approx(recorded.tasks["cost"].sum(), rel=1e-12)
    assert agg.tasks["work"].sum() == recorded.tasks["work"].sum()
    assert recorded.tasks["kernel_calls"].sum() > 0  # read back from the file
    assert agg.tasks["kernel_calls"].dtype == np.int32
    assert agg.tasks["kernel_calls"].sum() == recorded.tasks["kernel_calls"].sum()
    f2c = recorded.tiling.fine_to_coarse(coarse)
    crossing = f2c[recorded.messages["src"]] != f2c[recorded.messages["dst"]]
    assert agg.messages["bytes"].sum() == recorded.messages["bytes"][crossing].sum()
    assert (agg.messages["src"] != agg.messages["dst"]).all()


def test_tiles_per_core_picks_the_nearest_nested_level(recorded):
    assert coarsening_for(recorded.tiling, 16).ntiles == 16
    assert coarsening_for(recorded.tiling, 64).ntiles == 64
    with pytest.raises(Exception, match="finer"):
        coarsening_for(recorded.tiling, 65)


def test_replay_writes_a_predicted_trace_of_the_common_schema(recorded, tmp_path):
    r = replay(recorded, ReplayConfig(nodes=2, cores=2, placement="refine", period=2, tiles_per_core=4))
    path = r.trace.write(tmp_path / "p.h5")
    back = Trace.read(path)
    assert back.predicted and back.tiling.ntiles == 16 and len(back.steps) == 6
    assert back.balance is not None and len(back.balance["step"]) == 2
    assert (back.tasks["end"] >= back.tasks["start"]).all()
    # Tasks of one core never overlap.
    t = back.tasks
    for node in range(2):
        for core in range(2):
            sel = (t["node"] == node) & (t["worker"] == core)
            order = np.argsort(t["start"][sel])
            assert (t["start"][sel][order][1:] >= t["end"][sel][order][:-1] - 1e-12).all()


def test_a_replay_reads_as_timed_stages(recorded):
    r = replay(recorded, ReplayConfig(nodes=2, cores=2, placement="greedy", period=2, tiles_per_core=4))
    stages = r.summary()["stages_s"]
    assert list(stages) == ["check", "model", "interval", "aggregate", "price", "place", "simulate", "record"]
    assert all(v >= 0 for v in stages.values())
    assert stages["simulate"] >= r.sim_wall_s  # the engine's own time is part of the stage


def test_speculative_with_a_proxy_of_full_resolution_decides_like_the_oracle(recorded):
    cfg = dict(nodes=2, cores=2, period=2, tiles_per_core=4)
    oracle = replay(recorded, ReplayConfig(placement="oracle", **cfg)).trace
    speculative = replay(recorded, ReplayConfig(placement="speculative", proxy=recorded, **cfg)).trace
    assert np.array_equal(oracle.placement_owners, speculative.placement_owners)


def test_a_low_resolution_proxy_predicts_where_the_load_will_be(tmp_path):
    from shoal.placement.proxy import ProxyLoads
    from shoal.session import run_scenario

    wide = ["app.sigma=0.15", "app.work_per_cell=2000.0"]  # a hot spot several tiles across
    fine = run_scenario("synthetic-hotspot", steps=6, tiles=64, nodes=1, set=["app.grid=[64,64]", *wide],
                        out=tmp_path / "fine").trace
    # The same scenario at half resolution: half the cells, so half the speed in cells per step.
    proxy = run_scenario("synthetic-hotspot", steps=6, tiles=16, nodes=1,
                         set=["app.grid=[32,32]", "app.velocity=[1.5, 0.75]", *wide], out=tmp_path / "proxy").trace
    # Loads as work, not measured seconds: the mapping is under test, not this host's noise
    as_work = [t.with_tasks(cost=t.tasks["work"].astype(np.float64)) for t in (fine, proxy)]
    predicted = ProxyLoads(as_work[1], fine.tiling, len(fine.steps)).loads(2, 4)
    truth = as_work[0].tile_cost()[2:4].mean(axis=0)
    assert np.corrcoef(predicted, truth)[0, 1] > 0.8


def test_the_interpreter_lock_serialises_the_python_share_of_tasks():
    # Two 2 ms tasks on two cores of one node, each with 1 ms of compiled kernel: 1 ms of Python.
    tr = hand_trace(2, [[[0.002, 0.002]]], [], phases=("a",))
    tr.tasks["kernel"] = np.array([0.001, 0.001])
    free = replay(tr, ReplayConfig(nodes=1, cores=2, network=NET))
    assert free.makespan == pytest.approx(0.002)
    locked = replay(tr, ReplayConfig(nodes=1, cores=2, network=NET, gil="shared", lock_model="serial"))
    # The second task waits 1 ms for the lock, then runs its 2 ms.
    assert locked.makespan == pytest.approx(0.003)
    # One lock per node: two nodes do not wait for each other.
    per_node = replay(tr, ReplayConfig(nodes=2, cores=1, placement="strips", network=NET, gil="process",
                                       lock_model="serial"))
    assert per_node.makespan == pytest.approx(0.002)


def test_lock_free_calls_wait_for_the_lock_where_threads_share_it():
    # As above, and each task makes two lock-free calls, each waiting 0.25 ms for the lock.
    tr = hand_trace(2, [[[0.002, 0.002]]], [], phases=("a",))
    tr.tasks["kernel"] = np.array([0.001, 0.001])
    tr.tasks["kernel_calls"] = np.array([2, 2], np.int32)
    handoff = dict(network=NET, handoff_s=2.5e-4, handoff_threads=2)
    shared = replay(tr, ReplayConfig(nodes=1, cores=2, gil="shared", **handoff))
    assert shared.makespan == pytest.approx(0.0025)
    assert shared.summary()["machine"]["handoff_s"] == 2.5e-4
    # Measured where 2 threads shared the lock, on 3 the wait doubles (two others to wait for).
    three = hand_trace(3, [[[0.002, 0.002, 0.002]]], [], phases=("a",))
    three.tasks["kernel_calls"] = np.array([2, 2, 2], np.int32)
    assert replay(three, ReplayConfig(nodes=1, cores=3, gil="shared", **handoff)).makespan == pytest.approx(0.003)
    # One thread per lock waits for nothing; nor does a compiled executor.
    assert replay(tr, ReplayConfig(nodes=2, cores=1, placement="strips", gil="process", **handoff)).makespan == \
        pytest.approx(0.002)
    assert replay(tr, ReplayConfig(nodes=1, cores=2, **handoff)).makespan == pytest.approx(0.002)
    # A trace that does not count its calls is charged none.
    del tr.tasks["kernel_calls"]
    assert replay(tr, ReplayConfig(nodes=1, cores=2, gil="shared", **handoff)).makespan == pytest.approx(0.002)
    with pytest.raises(ShoalError, match="hand-off"):
        replay(tr, ReplayConfig(nodes=1, cores=2, gil="shared", network=NET, handoff_s=-1.0))
