"""The app contract, checked on every registered app with its tiny parameter set: a new app
that registers itself is tested here without touching this file."""

import io

import matplotlib
import numpy as np
import pytest

from conftest import assert_same_state
from shoal.apps import all_apps
from shoal.cluster import Cluster
from shoal.live.frames import live_frame
from shoal.placement import get_policy
from shoal.runtime import App, Simulation
from shoal.runtime.checkpoint import Checkpoint

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

APPS = sorted(all_apps())
STEPS = 4


def _simulation(name, tiles, nodes=1, workers=1, states=None, step=0, reduced=None, executor="python"):
    app = all_apps()[name].tiny_app(2 * STEPS)
    tiling = app.decompose(tiles)
    app.check_tiling(tiling)
    app.prepare(tiling)
    cluster = Cluster.uniform(nodes, workers)
    owner = get_policy("birdshot").place(tiling, cluster, 7)
    return Simulation(app, tiling, cluster, owner, states=states, step=step, reduced=reduced, executor=executor)


@pytest.fixture(scope="module", params=APPS)
def reference(request):
    """Each app run 2 x STEPS steps on one tile: the state every other test must match."""
    sim = _simulation(request.param, 1)
    sim.run(STEPS)
    middle = sim.gather()
    sim.run(STEPS)
    yield request.param, middle, sim.gather()
    sim.close()


def test_the_app_follows_the_contract(reference):
    name = reference[0]
    app = all_apps()[name].tiny_app()
    assert isinstance(app, App) and app.name == name
    assert len(app.grid) in (2, 3) and all(int(n) > 0 for n in app.grid)
    for phase in app.phases:
        assert callable(getattr(app, phase.method))
    if any(p.lagged for p in app.phases):
        assert set(app.initial_reductions()) >= {p.name for p in app.phases if p.lagged}


def test_init_then_steps_on_one_and_on_four_tiles_are_bitwise_equal(reference):
    name, middle, final = reference
    sim = _simulation(name, 4, nodes=2, workers=2)
    sim.run(STEPS)
    assert_same_state(middle, sim.gather())
    sim.run(STEPS)
    assert_same_state(final, sim.gather())
    sim.close()


def test_the_native_executor_runs_the_app_bitwise_as_the_python_one(reference):
    """Compiled phases, or phases left in Python through the trampoline: the same bits."""
    name, middle, final = reference
    sim = _simulation(name, 4, nodes=2, workers=2, executor="native")
    sim.run(STEPS)
    assert_same_state(middle, sim.gather())
    sim.run(STEPS)
    assert_same_state(final, sim.gather())
    sim.close()


def _halfway_then(name, final, carry) -> None:
    """Run STEPS steps on 4 tiles, hand the states through ``carry(sim) -> (states, step,
    reduced)``, continue on another placement: the end must be the reference's."""
    sim = _simulation(name, 4)
    sim.run(STEPS)
    states, step, reduced = carry(sim)
    sim.close()
    again = _simulation(name, 4, nodes=2, states=states, step=step, reduced=reduced)
    again.run(STEPS)
    assert_same_state(final, again.gather())
    again.close()


def test_a_checkpoint_round_trip_continues_bitwise(reference, tmp_path):
    def through_a_checkpoint(sim):
        Checkpoint(sim.step_count, sim.tiling, sim.all_states(), sim.owner, {}, sim.reduced).write(tmp_path)
        cp = Checkpoint.latest(tmp_path)
        return cp.states, cp.step, cp.reduced

    _halfway_then(reference[0], reference[2], through_a_checkpoint)


def test_a_migrated_tile_packs_to_plain_arrays_and_unpacks_to_the_same_run(reference):
    def packed_and_unpacked(sim):
        moved = {}
        for t, state in sim.states.items():
            packed = sim.app.pack_state(state)
            assert all(isinstance(a, np.ndarray) and not a.dtype.hasobject for a in packed.values())
            buffer = io.BytesIO()
            np.savez(buffer, **packed)  # what a file or a message holds: no pickles
            buffer.seek(0)
            with np.load(buffer, allow_pickle=False) as z:
                moved[t] = sim.app.unpack_state({k: z[k] for k in z.files})
        return moved, sim.step_count, sim.reduced

    _halfway_then(reference[0], reference[2], packed_and_unpacked)


def test_the_app_draws_a_frame_of_numpy_arrays(reference, tmp_path):
    name, middle, _ = reference
    app = all_apps()[name].tiny_app()
    frame = app.frame(middle)
    assert frame and all(isinstance(a, np.ndarray) for a in frame.values())
    fig, ax = plt.subplots()
    mappable = app.draw(frame, ax)
    fig.colorbar(mappable, ax=ax)
    fig.savefig(tmp_path / "frame.png")
    plt.close(fig)
    picture = plt.imread(tmp_path / "frame.png")
    assert picture.std() > 0.05  # something was drawn, not a blank canvas
    # and the live view has something to draw: particles or a field (or a mesh's triangles)
    fields, arrays = live_frame(frame, 1, 0.0)
    assert fields["kept"] > 0 or fields["grids"] or "extra:triangles" in arrays, sorted(arrays)


def test_apps_declared_as_entry_points_register_and_a_broken_one_is_one_line(tmp_path, monkeypatch):
    import importlib.metadata

    import shoal.apps as apps
    from shoal.errors import ShoalError

    (tmp_path / "plugin_heat.py").write_text(
        "from shoal.apps import AppSpec, register_app\n"
        "from shoal.apps.synthetic import SyntheticApp, SyntheticParams\n"
        "register_app(AppSpec('plugin-heat', SyntheticParams, SyntheticApp, 'a plugin'))\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    good = importlib.metadata.EntryPoint("plugin-heat", "plugin_heat", "shoal.apps")
    broken = importlib.metadata.EntryPoint("broken", "no_such_module_here", "shoal.apps")
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group: [good] if group == "shoal.apps" else [])
    monkeypatch.setattr(apps, "_PLUGINS_LOADED", False)
    try:
        assert apps.get_app("plugin-heat").summary == "a plugin"
        monkeypatch.setattr(importlib.metadata, "entry_points", lambda group: [broken])
        monkeypatch.setattr(apps, "_PLUGINS_LOADED", False)
        with pytest.raises(ShoalError, match="app plugin 'broken' .* failed to load"):
            apps.get_app("synthetic")
    finally:
        apps.APPS.pop("plugin-heat", None)


PREPARED = """
import sys
import numba
from shoal.apps import all_apps
from shoal.live.frames import live_frame
from shoal.cluster import Cluster
from shoal.placement import get_policy
from shoal.runtime import LocalExecutor


def signatures():
    found = {}
    for name, module in list(sys.modules.items()):
        if name.startswith("shoal.apps"):
            for key, value in vars(module).items():
                value = getattr(value, "__wrapped__", value)
                if isinstance(value, numba.core.registry.CPUDispatcher):
                    found[f"{name}.{key}"] = len(value.signatures)
    return found

name = sys.argv[1]
app = all_apps()[name].tiny_app(20)
tiling = app.decompose(27)
app.prepare(tiling)
before = signatures()
cluster = Cluster.uniform(1, 1)
LocalExecutor(app, tiling, cluster, get_policy("sfc").place(tiling, cluster, 0)).run(20)
print(sorted(k for k, n in signatures().items() if n != before.get(k, 0)))
"""


@pytest.mark.parametrize("name", APPS)
def test_prepare_compiles_every_kernel_a_run_calls(name):
    """Kernels compiled (or loaded) in the timed run would charge their first tasks the
    compilation: a trace's costs would then say more about the compiler than the work. Run in
    a fresh interpreter, where nothing was compiled before."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", PREPARED, name], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
