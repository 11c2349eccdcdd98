"""Load views that scale: a replay on 32 nodes x 18 cores (576 cores) is reported in pictures
under 4000 px that hold every step, node, core and placement; the report leaves matplotlib's
backend alone."""

import subprocess
import sys
import textwrap

import matplotlib.pyplot as plt
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from matplotlib.collections import PolyCollection
from PIL import Image

from shoal.apps import all_apps
from shoal.cluster import Cluster
from shoal.errors import ShoalError
from shoal.graphics.canvas import node_colors
from shoal.replay import ReplayConfig, replay
from shoal.replay.run import write_replay
from shoal.report import loads, report_run
from shoal.report.timeline import BINS, parse_range, select, task_cores, timeline, utilisation
from shoal.tiling import Tiling
from shoal.trace import Trace

NODES, CORES, STEPS, PERIOD = 32, 18, 12, 4


def hotspot_trace(tiles_per_side: int, steps: int, phases=("compute",), seed: int = 0) -> Trace:
    """A recorded run to replay: a hot spot crossing a square of tiles one way, a little
    noise on every tile, and one halo message per tile to its right neighbour in every phase
    after the first."""
    G = tiles_per_side
    tiling = Tiling.from_counts((2 * G, 2 * G), (G, G), halo=1)
    T, P = tiling.ntiles, len(phases)
    ix, iy = np.unravel_index(np.arange(T), (G, G))
    step, phase, tile = (a.ravel() for a in np.meshgrid(np.arange(steps), np.arange(P), np.arange(T), indexing="ij"))
    centre = (step * 4) % G
    noise = np.random.default_rng(seed).uniform(0.9, 1.1, len(step))
    cost = 1e-4 * noise * (1 + 5 * np.exp(-((ix[tile] - centre) ** 2 + (iy[tile] - G / 2) ** 2) / 40.0))
    n = len(step)
    src = np.flatnonzero(ix < G - 1)
    ms, mp, msrc = (a.ravel() for a in np.meshgrid(np.arange(steps), np.arange(1, P), src, indexing="ij"))
    return Trace(
        tasks={"step": step, "phase": phase, "tile": tile, "node": np.zeros(n), "worker": np.zeros(n),
               "start": np.zeros(n), "end": np.zeros(n), "cost": cost, "work": np.ones(n)},
        messages={"step": ms, "phase": mp, "src": msrc, "dst": msrc + G, "bytes": np.full(len(ms), 800)},
        phases=list(phases), tiling=tiling, cluster=Cluster.uniform(1, 1), placement_steps=np.array([0]),
        placement_owners=np.zeros((1, T), int), step_end=np.zeros(steps), scenario="hotspot")


@pytest.fixture(scope="module")
def replayed(tmp_path_factory):
    """A greedy replay on 576 cores, rebalancing every 4 steps, written as a run folder."""
    result = replay(hotspot_trace(48, STEPS), ReplayConfig(nodes=NODES, cores=CORES, placement="greedy",
                                                           period=PERIOD))
    folder = tmp_path_factory.mktemp("report") / "greedy-576"
    write_replay(result, folder)
    return folder, Trace.read(folder)


@pytest.fixture(scope="module")
def report(replayed):
    return {p.name: p for p in report_run(replayed[0])}


def test_every_picture_of_576_cores_is_under_4000_px(report):
    assert set(report) == {"load-heatmap.png", "timeline.png", "lif.png", "tile-load.png", "placement.png"}
    for path in report.values():
        width, height = Image.open(path).size
        assert 300 < width < 4000 and 300 < height < 4000, path.name


def test_the_heatmap_holds_every_step_and_node_relative_to_the_step_mean(replayed):
    _, trace = replayed
    assert trace.cluster.total_cores == NODES * CORES
    fig = loads.load_heatmap(trace)
    ax = fig.axes[0]
    shown = np.asarray(ax.images[0].get_array())
    assert shown.shape == (NODES, STEPS)  # nodes up, steps across
    assert np.allclose(shown.mean(axis=0), 1.0)  # each step's mean over nodes is the fair share
    assert np.allclose(shown.T * trace.node_load().mean(axis=1, keepdims=True), trace.node_load())
    norm = ax.images[0].norm
    assert norm.vcenter == 1.0 and norm.vmin >= 0 and norm.vmax >= shown.max()
    assert all(float(t).is_integer() for t in ax.get_yticks())  # integer node ticks
    absolute = np.asarray(loads.load_heatmap(trace, absolute=True).axes[0].images[0].get_array())
    assert np.allclose(absolute, trace.node_load().T * 1e3)


def test_the_relative_heatmap_does_not_change_when_every_cost_scales(replayed):
    _, trace = replayed
    slower = trace.with_tasks(cost=trace.tasks["cost"] * 7.5)
    assert np.allclose(loads.relative_load(slower), loads.relative_load(trace))


def test_the_overview_is_each_cores_busy_time_over_the_whole_run(replayed):
    _, trace = replayed
    ax = timeline(trace).axes[1]
    fraction = np.asarray(ax.images[0].get_array())
    assert fraction.shape == (NODES * CORES, BINS)  # every core, down
    left, right, _, _ = ax.images[0].get_extent()
    t = trace.tasks
    assert left == pytest.approx(t["start"].min() * 1e3) and right == pytest.approx(t["end"].max() * 1e3)
    width = (t["end"].max() - t["start"].min()) / BINS
    busy = np.bincount(task_cores(trace), weights=t["end"] - t["start"], minlength=NODES * CORES)
    assert np.allclose(fraction.sum(axis=1) * width, busy, rtol=1e-9, atol=1e-12)


def test_a_detail_of_steps_and_cores_draws_every_task_of_the_selection_and_no_other(replayed):
    folder, trace = replayed
    paths = {p.name: p for p in report_run(folder, steps=(4, 6), cores=(18, 36))}
    assert Image.open(paths["timeline.png"]).size[1] < 4000
    ax = timeline(trace, steps=(4, 6), cores=(18, 36)).axes[0]
    boxes = np.concatenate([np.array([p.vertices[:4] for p in c.get_paths()])
                            for c in ax.collections if isinstance(c, PolyCollection)])
    t, core = trace.tasks, task_cores(trace)
    chosen = (t["step"] >= 4) & (t["step"] < 6) & (core >= 18) & (core < 36)
    assert len(boxes) == chosen.sum()
    drawn = sorted(zip(boxes[:, 0, 0], boxes[:, 2, 0], np.round(boxes[:, :, 1].mean(axis=1)), strict=True))
    expected = sorted(zip(t["start"][chosen] * 1e3, t["end"][chosen] * 1e3, core[chosen] - 18, strict=True))
    assert np.allclose(drawn, expected)


@pytest.mark.parametrize("steps, cores, words", [
    ((6, 4), None, "steps 6:4 is empty"),
    (None, (3, 3), "cores 3:3 is empty"),
    ((100, 200), None, "holds no task"),
    (None, (576, 600), "holds no task"),
])
def test_an_empty_selection_is_one_line(replayed, steps, cores, words):
    with pytest.raises(ShoalError, match=words) as err:
        select(replayed[1], steps, cores)
    assert "\n" not in str(err.value)


def test_the_placement_after_every_balancing_step_and_the_tile_loads_are_drawn(replayed):
    _, trace = replayed
    assert list(trace.placement_steps) == [0, 4, 8]
    panels = [ax for ax in loads.placements(trace).axes if ax.images]
    assert len(panels) == 3
    for ax, owner in zip(panels, trace.placement_owners, strict=True):
        assert np.array_equal(np.asarray(ax.images[0].get_array()), loads.cell_map(trace, owner).T)
    assert len(set(map(tuple, panels[0].images[0].cmap.colors))) == NODES
    tile_ms = np.asarray(loads.tile_load_map(trace).axes[0].images[0].get_array())
    expected = loads.cell_map(trace, trace.tile_cost().mean(axis=0) * 1e3).T
    assert np.allclose(tile_ms, expected)


@pytest.mark.parametrize("text, expected", [("4:6", (4, 6)), ("4:", (4, None)), (":6", (None, 6)), ("7", (7, 8)),
                                            (" 0:576 ", (0, 576))])
def test_ranges_read_as_start_to_end_excluded(replayed, text, expected):
    assert parse_range(text) == expected
    sel, _ = select(replayed[1], steps=parse_range(text))
    assert sel.steps == tuple(w if v is None else v for v, w in zip(expected, (0, STEPS), strict=True))


@pytest.mark.parametrize("text, words", [("a:b", "not a range"), ("1:2:3", "not a range"), ("", "not a range"),
                                         ("-2:4", "negative")])
def test_a_malformed_range_is_one_line_naming_the_flag(text, words):
    with pytest.raises(ShoalError, match=words) as err:
        parse_range(text, "--steps")
    assert str(err.value).startswith("--steps") and "\n" not in str(err.value)


@pytest.mark.parametrize("nodes", [1, 7, 10, 11, 20, 21, 32, 576, 4096])
def test_every_node_has_its_own_colour(nodes):
    rgb = np.asarray(node_colors(nodes).colors)[:, :3]
    assert len(rgb) == nodes and len({tuple(c) for c in rgb}) == nodes


def test_neighbouring_nodes_get_far_apart_colours_past_twenty():
    rgb = np.asarray(node_colors(64).colors)[:, :3]
    assert np.linalg.norm(np.diff(rgb, axis=0), axis=1).min() > 0.1


@given(st.lists(st.tuples(st.floats(0, 10), st.floats(0, 3)), min_size=1, max_size=30),
       st.integers(1, 40), st.floats(-1, 2), st.floats(0.5, 20))
def test_utilisation_splits_each_task_exactly_between_bins(tasks, bins, lo, span):
    """One core's tasks laid back to back from their gaps: each bin's busy time is within
    its width, and the bins hold exactly the tasks' time inside the edges."""
    starts, ends, t = [], [], 0.0
    for gap, duration in tasks:
        starts.append(t + gap)
        ends.append(t + gap + duration)
        t = ends[-1]
    start, end = np.array(starts), np.array(ends)
    edges = np.linspace(lo, lo + span, bins + 1)
    busy = utilisation(start, end, np.zeros(len(start), np.int64), 1, edges)[0]
    inside = np.clip(end, edges[0], edges[-1]) - np.clip(start, edges[0], edges[-1])
    assert busy.sum() == pytest.approx(inside.sum(), abs=1e-9)
    assert np.all(busy <= np.diff(edges) + 1e-9) and np.all(busy >= -1e-12)


def test_importing_and_drawing_the_report_leaves_the_backend_alone():
    script = textwrap.dedent("""
        import matplotlib
        matplotlib.use("svg")
        import shoal.report, shoal.report.sweep_plots, shoal.report.loads, shoal.report.timeline
        from shoal.cluster import Cluster
        from shoal.tiling import Tiling
        from shoal.trace import Trace
        import numpy as np
        trace = Trace(tasks={"step": [0, 1], "phase": [0, 0], "tile": [0, 0], "node": [0, 0], "worker": [0, 0],
                             "start": [0.0, 1.0], "end": [1.0, 2.0], "cost": [1.0, 1.0], "work": [1, 1]},
                      messages={k: [] for k in ("step", "phase", "src", "dst", "bytes")}, phases=["a"],
                      tiling=Tiling.from_counts((2, 2), (1, 1)), cluster=Cluster.uniform(1, 1),
                      placement_steps=[0], placement_owners=[[0]], step_end=[1.0, 2.0])
        shoal.report.loads.load_heatmap(trace).savefig("/dev/null", format="png")
        shoal.report.timeline.timeline(trace).savefig("/dev/null", format="png")
        print(matplotlib.get_backend())
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "svg"


# ----- every app's ParaView series ---------------------------------------------------------------
def _vtk_reader(path):
    """VTK's reader of a series file, updated: image data, poly data or an adaptive grid."""
    from vtkmodules.vtkIOXML import vtkXMLImageDataReader, vtkXMLPolyDataReader, vtkXMLUniformGridAMRReader

    reader = {".vti": vtkXMLImageDataReader, ".vtp": vtkXMLPolyDataReader,
              ".vthb": vtkXMLUniformGridAMRReader}[path.suffix]()
    reader.SetFileName(str(path))
    reader.Update()
    assert reader.GetErrorCode() == 0, path
    return reader.GetOutput()


@pytest.mark.parametrize("app", sorted(all_apps()))
def test_every_apps_report_draws_its_final_frame_and_a_paraview_series_in_time_order(app, tmp_path):
    """A report of any app's run draws its final frame (not a blank canvas), the load heatmap and
    the timeline; and whether the app exports its own files as the run goes or the report
    converts its frames, it lists frames/series.pvd: one file per frame, each there,
    VTK-readable and compressed, at increasing times."""
    from vtkmodules.util.numpy_support import vtk_to_numpy

    from conftest import tiny_run
    from shoal.graphics.vtk import read_series

    run = tiny_run(tmp_path / app, app=app, steps=4, set=["run.frame_every=2"]).path
    pvd = run / "frames" / "series.pvd"
    paths = {p.name: p for p in report_run(run)}
    assert {"frame-final.png", "load-heatmap.png", "timeline.png", "series.pvd"} <= set(paths)
    assert paths["series.pvd"] == pvd
    assert plt.imread(paths["frame-final.png"]).std() > 0.05  # something was drawn, not a blank canvas
    series = read_series(pvd)
    assert len(series) == len(list((run / "frames").glob("state-*.npz"))) == 3  # steps 0, 2 and 4
    files = sorted(series, key=series.get)
    times = [series[f] for f in files]
    assert files == sorted(files) and np.all(np.diff(times) > 0) and times[0] == 0.0
    for name, t in series.items():
        path = pvd.parent / name
        arrays = [path] if path.suffix != ".vthb" else sorted(path.with_suffix("").glob("*.vti"))  # its boxes
        assert arrays and all(b'compressor="vtkZLibDataCompressor"' in f.read_bytes()[:300] for f in arrays)
        data = _vtk_reader(path)
        if path.suffix != ".vthb":  # an adaptive grid's boxes carry the time, and are read through it
            assert vtk_to_numpy(data.GetFieldData().GetArray("TimeValue"))[0] == t
            assert data.GetNumberOfPoints() > 0
        else:
            assert data.GetNumberOfLevels() >= 1 and data.GetNumberOfCells() > 0
