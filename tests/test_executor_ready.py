"""When tasks become ready: every task records the moment its last input arrived, which
falls after the inputs it waits on and before it starts."""

import numpy as np
import pytest

from shoal.apps import get_app
from shoal.cluster import Cluster
from shoal.placement import get_policy
from shoal.records import TASKS
from shoal.runtime import LocalExecutor
from shoal.runtime.local import merge_results
from shoal.tiling import Tiling


def run(tiling, nodes, workers, steps, chunks=1):
    spec = get_app("synthetic")
    app = spec.build(spec.params(grid=[48, 48]), steps * chunks)
    cluster = Cluster.uniform(nodes, workers)
    owner = get_policy("birdshot").place(tiling, cluster, 0)
    with LocalExecutor(app, tiling, cluster, owner) as executor:
        parts, states = [], None
        for c in range(chunks):
            parts.append(executor.run(steps, states=states, first_step=c * steps))
            states = parts[-1].states
    return app, merge_results(parts)


@pytest.mark.parametrize("workers", [1, 2])
def test_tasks_become_ready_after_their_inputs_and_before_they_start(workers):
    tiling = Tiling.from_count((48, 48), 16)
    app, res = run(tiling, 2, workers, 4)
    T, P = tiling.ntiles, len(app.phases)
    assert TASKS.column("ready").unit == "s"
    ready, start, end = (res.tasks[c].reshape(-1, T) for c in ("ready", "start", "end"))
    assert (ready <= start).all()
    assert (ready > 0).all()
    for task in range(1, ready.shape[0]):
        assert (ready[task] >= end[task - 1]).all()  # after its tile's previous task
        if app.phases[task % P].halo:
            for t in range(T):
                # after every neighbour that packed its halo has ended the task that packed it
                assert ready[task, t] >= max(end[task - 1, n] for n in tiling.neighbours[t])
        if app.phases[task % P - 1].reduction:
            assert (ready[task] >= end[task - 1].max()).all()  # after the reduction it reads


def test_merged_chunks_shift_ready_like_start():
    tiling = Tiling.from_count((48, 48), 4)
    _, res = run(tiling, 1, 1, 2, chunks=2)
    assert (np.diff(res.tasks["ready"].reshape(4, -1).min(axis=1)) > 0).all()
    assert (res.tasks["ready"] <= res.tasks["start"]).all()
