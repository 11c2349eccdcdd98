"""What users load from a seismic run: VTK image data read back with VTK's own reader (values,
origin and spacing exact), the ParaView series in time order, the seismograms file bit for bit,
the frame's slices through the source within their size, and the pictures drawn from them."""

from __future__ import annotations

import subprocess
import sys
import tomllib
import xml.etree.ElementTree as ET
from types import SimpleNamespace

import numpy as np
import pytest
from vtkmodules.util.numpy_support import vtk_to_numpy
from vtkmodules.vtkIOXML import vtkXMLImageDataReader

from shoal.apps.seismic import drawing
from shoal.apps.seismic.output import read_seismograms, seismogram_arrays, write_seismograms
from shoal.apps.seismic.params import SeismicParams
from shoal.apps.seismic.vtk import STRESSES, VELOCITY, export, write_snapshot
from shoal.errors import ShoalError
from shoal.graphics.canvas import new_figure

FIELDS = VELOCITY + STRESSES


def _app(**keys):
    """A stand-in for the app: frames and files read only its parameters."""
    p = SeismicParams(**keys)
    p.validate()
    return SimpleNamespace(p=p)


def _gathered(app, step=7, dt=0.01, dtype="float64", seed=0):
    """A gathered state of random fields, three receivers whose samples after ``step`` are NaN."""
    rng = np.random.default_rng(seed)
    p = app.p
    out = {name: rng.normal(size=p.shape).astype(dtype) for name in FIELDS}
    receivers = np.array([[0.0, 0.0, 0.0], [p.extent[0] / 2, p.extent[1], 0.0], [p.extent[0], 0.0, p.extent[2]]])
    seis = rng.normal(size=(3, 21, 3))
    seis[:, step + 1:] = np.nan
    return out | {"seismograms": seis, "receivers": receivers, "time": np.array(step * dt), "dt": np.array(dt)}


SMALL = {"cells": [12, 9, 7], "spacing": 100.0, "absorbing": 2, "source_at": [550.0, 340.0, 260.0],
         "layers": [[0.0, 6000.0, 3464.0, 2700.0]]}


# ----- VTK ----------------------------------------------------------------------------------------
def _read_vti(path):
    reader = vtkXMLImageDataReader()
    reader.SetFileName(str(path))
    reader.Update()
    assert reader.GetErrorCode() == 0
    return reader.GetOutput()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("cells", [[12, 9, 7], [10, 6]])
def test_vti_reads_back_every_field_at_its_node_with_the_grid_spacing(tmp_path, dtype, cells):
    app = _app(**(SMALL | {"cells": cells, "spacing": 37.5, "scale": 2.0,
                           "source_at": [100.0, 50.0, 60.0][:len(cells)]}))
    g = _gathered(app, dtype=dtype)
    image = _read_vti(write_snapshot(app.p, g, tmp_path / "s.vti"))
    nx, ny, nz = app.p.shape
    assert image.GetDimensions() == (nx, ny, nz)
    assert image.GetSpacing() == (18.75, 18.75, 18.75) and image.GetOrigin() == (0.0, 0.0, 0.0)
    data = image.GetPointData()
    assert data.GetVectors().GetName() == "velocity"
    velocity = vtk_to_numpy(data.GetArray("velocity"))
    assert velocity.dtype == np.dtype(dtype) and velocity.shape == (nx * ny * nz, 3)
    for c, name in enumerate(VELOCITY):  # x fastest: Fortran order of [i, j, k]
        np.testing.assert_array_equal(velocity[:, c].reshape((nx, ny, nz), order="F"), g[name])
    for name in STRESSES:
        np.testing.assert_array_equal(vtk_to_numpy(data.GetArray(name)).reshape((nx, ny, nz), order="F"), g[name])
    # a point's coordinates are its normal-stress node's, z the depth
    assert image.GetPoint(image.ComputePointId([3, ny - 1, 4])) == (3 * 18.75, (ny - 1) * 18.75, 4 * 18.75)
    assert vtk_to_numpy(image.GetFieldData().GetArray("TimeValue"))[0] == float(g["time"])


def test_a_field_of_the_wrong_shape_is_refused(tmp_path):
    app = _app(**SMALL)
    g = _gathered(app)
    g["syz"] = g["syz"][:, :, 1:]
    with pytest.raises(ShoalError, match="'syz' has shape"):
        write_snapshot(app.p, g, tmp_path / "s.vti")
    assert not list(tmp_path.iterdir())  # nothing half written


def test_series_lists_each_step_with_its_simulated_time_and_the_seismograms_follow(tmp_path):
    app = _app(**SMALL)
    dt = 0.0125
    for step in (4, 0, 12, 4, 8):  # out of order, and a step written twice (a resumed run)
        g = _gathered(app, step=step, dt=dt, seed=step)
        pvd = export(app, g, tmp_path, step)
    assert pvd == tmp_path / "series.pvd"
    root = ET.parse(pvd).getroot()
    assert root.get("type") == "Collection"
    series = [(float(d.get("timestep")), pvd.parent / d.get("file")) for d in root.iter("DataSet")]
    assert [p.relative_to(tmp_path).as_posix() for _, p in series] == [
        f"paraview/state-{s:06d}.vti" for s in (0, 4, 8, 12)]
    assert [t for t, _ in series] == [s * dt for s in (0, 4, 8, 12)]
    for t, path in series:
        image = _read_vti(path)
        assert vtk_to_numpy(image.GetFieldData().GetArray("TimeValue"))[0] == t
    s = read_seismograms(tmp_path / "seismograms.npz")  # the last export's: step 8
    assert float(s["time"]) == 8 * dt and s["data"].shape == (3, 9, 3)
    np.testing.assert_array_equal(s["data"], _gathered(app, step=8, dt=dt, seed=8)["seismograms"][:, :9])


def test_writing_needs_no_vtk(tmp_path):
    script = ("import sys\n"
              "import numpy as np\n"
              "from types import SimpleNamespace\n"
              "from shoal.apps.seismic.params import SeismicParams\n"
              "from shoal.apps.seismic.vtk import export\n"
              "p = SeismicParams(cells=[8, 6, 5], absorbing=1, source_at=[100.0, 100.0, 100.0])\n"
              "f = {n: np.zeros(p.shape) for n in ('vx vy vz sxx syy szz sxy sxz syz'.split())}\n"
              "g = f | {'seismograms': np.zeros((0, 3, 3)), 'receivers': np.zeros((0, 3)), 'time': np.array(0.0),\n"
              "         'dt': np.array(0.1)}\n"
              "export(SimpleNamespace(p=p), g, sys.argv[1], 0)\n"
              "assert not any(m.split('.')[0] in ('vtk', 'vtkmodules') for m in sys.modules), 'vtk imported'\n")
    subprocess.run([sys.executable, "-c", script, str(tmp_path)], check=True)
    assert (tmp_path / "paraview" / "state-000000.vti").exists() and (tmp_path / "seismograms.npz").exists()


# ----- seismograms file --------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_seismograms_file_round_trips_bit_for_bit(tmp_path, dtype):
    app = _app(**(SMALL | {"source": "moment", "moment": [1.0, 2.0, 3.0, 0.5, -0.5, 0.25], "wavelet": "dgaussian",
                           "f0": 3.0, "t0": 0.5}))
    g = _gathered(app, step=11, dt=0.003)
    g["seismograms"] = g["seismograms"].astype(dtype)
    g["seismograms"][1, 3, 2] = -0.0  # a signed zero survives
    written = seismogram_arrays(app.p, g)
    back = read_seismograms(write_seismograms(app.p, g, tmp_path / "s.npz"))
    assert back.keys() == written.keys()
    for name, a in written.items():
        assert back[name].dtype == a.dtype and back[name].shape == a.shape, name
        assert back[name].tobytes() == a.tobytes(), name
    assert back["data"].dtype == np.dtype(dtype)
    assert back["data"].tobytes() == np.ascontiguousarray(g["seismograms"][:, :12]).tobytes()
    np.testing.assert_array_equal(back["times"], np.arange(12) * 0.003)
    assert list(back["components"]) == ["vx", "vy", "vz"] and str(back["units"]) == "m/s"
    np.testing.assert_array_equal(back["positions"], g["receivers"])
    np.testing.assert_array_equal(back["source_position"], [550.0, 340.0, 260.0])
    np.testing.assert_array_equal(back["source_moment"], [1.0, 2.0, 3.0, 0.5, -0.5, 0.25])
    assert (str(back["source_kind"]), str(back["source_wavelet"]), float(back["source_f0"]),
            float(back["source_t0"])) == ("moment", "dgaussian", 3.0, 0.5)


def test_seismograms_file_says_where_each_component_was_read():
    app = _app(**(SMALL | {"receivers": [[520.0, 330.0, 0.0]]}))
    g = _gathered(app)
    g["receivers"] = np.array([[520.0, 330.0, 0.0]])
    sampled = seismogram_arrays(app.p, g)["sampled_at"]
    # each component's own node nearest (520, 330, 0): vx at x = (i + 1/2) dx, vz at z = (k + 1/2) dx clipped to k = 0
    np.testing.assert_array_equal(sampled[0], [[550.0, 300.0, 0.0], [500.0, 350.0, 0.0], [500.0, 300.0, 50.0]])


def test_a_file_that_is_not_seismograms_is_refused(tmp_path):
    np.savez(tmp_path / "other.npz", data=np.zeros(3))
    with pytest.raises(ShoalError, match="not a shoal-seismograms file"):
        read_seismograms(tmp_path / "other.npz")
    (tmp_path / "junk.npz").write_text("junk")
    with pytest.raises(ShoalError, match="not a readable"):
        read_seismograms(tmp_path / "junk.npz")


# ----- frames -------------------------------------------------------------------------------------
def test_frame_slices_through_the_source_and_along_the_surface():
    app = _app(**SMALL)
    g = _gathered(app, step=5)
    j = 3  # the source's y = 340 m is nearest the node at 300 m
    f = drawing.frame(app, g)
    assert list(f)[:4] == ["vz_section", "speed_section", "vz_surface", "speed_surface"]
    assert int(f["stride"]) == 1 and float(f["section_y"]) == j * 100.0
    np.testing.assert_array_equal(f["vz_section"], g["vz"][:, j, :].astype(np.float32))
    np.testing.assert_array_equal(f["vz_surface"], g["vz"][:, :, 0].astype(np.float32))
    speed = np.sqrt(g["vx"] ** 2 + g["vy"] ** 2 + g["vz"] ** 2).astype(np.float32)
    np.testing.assert_array_equal(f["speed_section"], speed[:, j, :])
    np.testing.assert_array_equal(f["speed_surface"], speed[:, :, 0])
    np.testing.assert_array_equal(f["seismograms"], g["seismograms"][:, :6].astype(np.float32))
    np.testing.assert_array_equal(f["seismogram_times"], np.arange(6) * 0.01)
    np.testing.assert_array_equal(f["source"], [550.0, 340.0, 260.0])
    np.testing.assert_array_equal(f["pml"], [2, 2, 2, 2, 0, 2])  # a free surface on top
    assert list(f["shape"]) == [12, 9, 7] and float(f["time"]) == 0.05
    assert all(np.isfinite(a).all() for a in f.values())  # frames on disk hold no NaN


def test_frame_of_a_2d_run_is_the_whole_plane():
    app = _app(**(SMALL | {"cells": [12, 7], "source_at": [550.0, 260.0]}))
    g = _gathered(app)
    f = drawing.frame(app, g)
    assert "vz_surface" not in f and float(f["section_y"]) == 0.0
    np.testing.assert_array_equal(f["vz_section"], g["vz"][:, 0, :].astype(np.float32))
    np.testing.assert_array_equal(f["pml"], [2, 2, 0, 0, 0, 2])


def _lazy_gathered(app, receivers=20, steps=300):
    """A gathered state of a large grid held in a few bytes (broadcast views): vx = vy = 0 and
    ``vz[i, j, k] = j``, so a slice shows which y it was taken at."""
    p = app.p
    zero = np.broadcast_to(np.float32(0.0), p.shape)
    vz = np.broadcast_to(np.arange(p.shape[1], dtype=np.float32)[None, :, None], p.shape)
    seis = np.zeros((receivers, steps + 1, 3))
    return {"vx": zero, "vy": zero, "vz": vz, "seismograms": seis, "receivers": np.zeros((receivers, 3)),
            "time": np.array(steps * 0.01), "dt": np.array(0.01)}


def test_frame_of_the_ligurian_grid_stays_under_2_mb_at_full_resolution():
    app = _app(cells=[500, 350, 130], spacing=100.0, source_at=[21000.0, 14960.0, 8000.0])
    f = drawing.frame(app, _lazy_gathered(app))
    assert sum(a.nbytes for a in f.values()) <= drawing.MAX_BYTES
    assert int(f["stride"]) == 1 and f["vz_section"].shape == (500, 130) and f["vz_surface"].shape == (500, 350)
    assert (f["vz_section"] == 150.0).all()  # through the source: y = 14960 m is nearest node 150
    np.testing.assert_array_equal(f["vz_surface"], np.broadcast_to(np.arange(350, dtype=np.float32), (500, 350)))


def test_frame_thins_the_slices_and_the_seismograms_to_fit():
    app = _app(cells=[500, 350, 130], spacing=100.0, scale=2.0, source_at=[21000.0, 14960.0, 8000.0])
    f = drawing.frame(app, _lazy_gathered(app, receivers=50, steps=4000))
    assert sum(a.nbytes for a in f.values()) <= drawing.MAX_BYTES
    assert f["seismograms"].nbytes <= drawing.MAX_BYTES // 4
    keep = 5  # 50 x 4001 x 3 float32 is 2.4 MB: every 5th sample fits in 512 KiB, every 4th would not
    assert f["seismograms"].shape == (50, 801, 3)
    np.testing.assert_array_equal(f["seismogram_times"], np.arange(0, 4001, keep) * 0.01)
    # 1000 x 260 + 1000 x 700 values, twice, in float32 fit with every 3rd node along each axis, not every 2nd
    assert int(f["stride"]) == 3
    assert f["vz_section"].shape == (334, 87) and (f["vz_section"] == 299.0).all()  # y = 14960 m at dx = 50 m
    np.testing.assert_array_equal(f["vz_surface"][0], np.arange(0, 700, 3, dtype=np.float32))


# ----- pictures -----------------------------------------------------------------------------------
def test_draw_shows_the_section_with_depth_down_and_marks_receivers_source_and_pml():
    app = _app(**SMALL)
    g = _gathered(app)
    f = drawing.frame(app, g)
    fig = new_figure(7, 5)
    ax = fig.add_subplot()
    image = drawing.draw(f, ax, scale=(-0.5, 3.0))
    assert image.get_clim() == (-3.0, 3.0)  # symmetric about 0
    assert image.get_cmap().name == "RdBu_r"
    np.testing.assert_array_equal(image.get_array(), f["vz_section"].T)
    # pixels centred on the nodes, vz half a cell deep
    assert image.get_extent() == [-50.0, 1150.0, 0.0, 700.0]
    bottom, top = ax.get_ylim()
    assert bottom > top  # depth increases downwards
    lines = {line.get_label(): line for line in ax.get_lines()}
    np.testing.assert_array_equal(lines["receivers"].get_xdata(), g["receivers"][:, 0])
    np.testing.assert_array_equal(lines["receivers"].get_ydata(), g["receivers"][:, 2])
    assert list(lines["source"].get_xdata()) == [550.0] and list(lines["source"].get_ydata()) == [260.0]
    edge = lines["C-PML inner edge"]  # 2 cells from x-, x+ and the bottom; the free top has none
    assert (min(edge.get_xdata()), max(edge.get_xdata())) == (200.0, 900.0)
    assert (min(edge.get_ydata()), max(edge.get_ydata())) == (0.0, 400.0)
    assert ax.get_xlabel() == "x (m)" and ax.get_ylabel() == "depth z (m)"
    fig.canvas.draw()


def test_draw_the_surface_and_the_speed():
    app = _app(**SMALL)
    f = drawing.frame(app, _gathered(app))
    fig = new_figure(7, 5)
    ax = fig.add_subplot()
    image = drawing.draw(f, ax, field="speed", plane="surface")
    np.testing.assert_array_equal(image.get_array(), f["speed_surface"].T)
    top = float(np.percentile(f["speed_surface"].astype(float), 99.5))  # robust: not the largest value
    assert image.get_clim() == (0.0, top) and top < float(f["speed_surface"].max())
    assert image.get_extent() == [-50.0, 1150.0, -50.0, 850.0]
    bottom, top = ax.get_ylim()
    assert bottom < top  # seen from above: y up
    edge = {line.get_label(): line for line in ax.get_lines()}["C-PML inner edge"]
    assert (min(edge.get_ydata()), max(edge.get_ydata())) == (200.0, 600.0)
    f["vz_section"][:] = 0.0
    assert drawing.draw(f, fig.add_subplot()).get_clim() == (-1.0, 1.0)  # at rest


def _spiked_frame(app, spike=100.0):
    """A frame whose vz section is a unit-amplitude wave plus a few cells of ``spike`` (a source)."""
    f = drawing.frame(app, _gathered(app))
    n0, n1 = f["vz_section"].shape
    i, k = np.meshgrid(np.arange(n0), np.arange(n1), indexing="ij")
    f["vz_section"] = np.sin(i * 0.9 + k * 0.7).astype(np.float32)
    f["vz_section"][5, 3] = spike
    f["vz_section"][6, 3] = -spike
    return f


def test_a_wavefield_is_coloured_up_to_a_high_percentile_of_its_magnitude_not_its_maximum():
    app = _app(**(SMALL | {"cells": [60, 9, 40]}))
    f = _spiked_frame(app)
    fig = new_figure(7, 5)
    image = drawing.draw(f, fig.add_subplot())
    top = float(np.percentile(np.abs(f["vz_section"].astype(float)), 99.5))
    assert image.get_clim() == (-top, top)  # symmetric, at the 99.5th percentile of |vz|
    assert 0.99 < top <= 1.0  # the wave, not the two cells of 100 at the source


def test_the_reports_common_scale_of_a_signed_field_is_robust_over_every_frame():
    from shoal.report.run_report import common_scale

    app = _app(**(SMALL | {"cells": [60, 9, 40]}))
    frames = [_spiked_frame(app, spike) for spike in (100.0, 1000.0)]
    frames[1]["vz_section"] *= 0.5
    every = np.concatenate([np.abs(f["vz_section"].astype(float)).ravel() for f in frames])
    top = float(np.percentile(every, 99.5))
    assert common_scale(frames, signed={"vz_section"}) == (-top, top) and top <= 1.0
    assert common_scale(frames) == (-500.0, 500.0)  # a field not declared signed: its range (the spikes')


def test_the_section_draws_the_layer_interfaces():
    app = _app(**(SMALL | {"layers": [[0.0, 6000.0, 3464.0, 2700.0], [250.0, 6500.0, 3700.0, 2800.0],
                                      [450.0, 7000.0, 4000.0, 2900.0], [5000.0, 8000.0, 4600.0, 3300.0]]}))
    f = drawing.frame(app, _gathered(app))
    np.testing.assert_array_equal(f["interfaces"], [250.0, 450.0])  # 5000 m is below the grid's 600 m
    fig = new_figure(7, 5)
    ax = fig.add_subplot()
    drawing.draw(f, ax)
    lines = [line for line in ax.get_lines() if line.get_linestyle() == ":"]
    assert sorted(line.get_ydata()[0] for line in lines) == [250.0, 450.0]
    assert all(tuple(line.get_xdata()) == (-50.0, 1150.0) for line in lines)  # across the section
    assert "layer interfaces" in [t.get_text() for t in ax.get_legend().get_texts()]
    surface = new_figure(7, 5).add_subplot()
    drawing.draw(f, surface, plane="surface")
    assert "layer interfaces" not in [line.get_label() for line in surface.get_lines()]


def test_seismograms_of_a_2d_run_have_no_vy_panel_and_receivers_are_labelled_by_offset():
    app = _app(**(SMALL | {"cells": [12, 7], "source_at": [550.0, 260.0]}))
    g = _gathered(app) | {"vx": np.zeros((12, 1, 7)), "vy": np.zeros((12, 1, 7)), "vz": np.zeros((12, 1, 7)),
                          "receivers": np.array([[0.0, 0.0, 0.0], [550.0, 0.0, 0.0], [1100.0, 0.0, 300.0]]),
                          "source": np.array([550.0, 0.0, 260.0])}
    for arrays in (g, drawing.frame(app, g)):
        fig = drawing.seismogram_figure(arrays)
        assert [ax.get_title() for ax in fig.axes] == ["vx", "vz"]
        assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["-0.55", "0", "0.55"]  # km along x
        assert fig.axes[0].get_ylabel() == "offset along x from the source (km)"


def test_seismograms_of_a_3d_run_are_labelled_by_distance_from_the_source():
    app = _app(**SMALL)
    f = drawing.frame(app, _gathered(app))  # receivers (0, 0, 0), (550, 800, 0), (1100, 0, 600)
    fig = drawing.seismogram_figure(f)
    assert [ax.get_title() for ax in fig.axes] == ["vx", "vy", "vz"]
    expected = [np.hypot(550.0, 340.0), np.hypot(0.0, 460.0), np.hypot(550.0, 340.0)]
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == [f"{d / 1000:.3g}" for d in expected]
    assert fig.axes[0].get_ylabel() == "distance from the source (km)"


def test_seismogram_figure_draws_every_receiver_and_component_on_one_scale():
    app = _app(**SMALL)
    g = _gathered(app, step=9)
    fig = drawing.seismogram_figure(g)
    axes = fig.axes
    assert [ax.get_title() for ax in axes] == ["vx", "vy", "vz"]
    seis = g["seismograms"][:, :10]
    gain = 0.45 / np.abs(seis).max()
    for c, ax in enumerate(axes):
        lines = ax.get_lines()
        assert len(lines) == 3
        for r, line in enumerate(lines):
            np.testing.assert_array_equal(line.get_xdata(), np.arange(10) * 0.01)
            np.testing.assert_allclose(line.get_ydata(), r + gain * seis[r, :, c], rtol=0, atol=1e-15)


def test_draw_seismograms_writes_a_png(tmp_path):
    app = _app(**SMALL)
    from matplotlib.image import imread

    path = drawing.draw_seismograms(drawing.frame(app, _gathered(app)), tmp_path / "seis.png")
    picture = imread(path)
    assert picture.shape[1] == 900 and picture.std() > 0  # 9 inches at 100 dpi, not blank


# ----- a run ---------------------------------------------------------------------------------------
TINY_RUN = """
name = "seismic-tiny"
[run]
steps = 6
tiles = 4
nodes = 1
workers = 1
halo = 2
frame_every = 2
[app]
name = "seismic"
cells = [20, 16, 12]
spacing = 100.0
absorbing = 3
source_at = [1000.0, 800.0, 600.0]
f0 = 2.5
t0 = 0.01
receivers = [[600.0, 800.0, 0.0], [1400.0, 800.0, 300.0]]
"""


def test_a_run_folder_holds_the_frames_the_series_and_the_seismograms(tmp_path):
    from shoal.cli import main
    from shoal.report.run_report import app_of_run

    (tmp_path / "tiny.toml").write_text(TINY_RUN)
    run = tmp_path / "run"
    assert main(["run", str(tmp_path / "tiny.toml"), "--out", str(run), "-q"]) == 0
    frames = run / "frames"
    with np.load(run / "state" / "final.npz") as z:
        final = {k: z[k] for k in z.files}
    dt = float(final["dt"])
    steps = (0, 2, 4, 6)
    assert sorted(p.name for p in frames.glob("state-*.npz")) == [f"state-{s:06d}.npz" for s in steps]
    listed = ET.parse(frames / "series.pvd").getroot().iter("DataSet")
    series = [(float(d.get("timestep")), d.get("file")) for d in listed]
    assert series == [(s * dt, f"paraview/state-{s:06d}.vti") for s in steps]
    # the last snapshot is the final state, every field exactly
    image = _read_vti(frames / "paraview" / "state-000006.vti")
    nx, ny, nz = final["vx"].shape
    velocity = vtk_to_numpy(image.GetPointData().GetArray("velocity"))
    for c, name in enumerate(VELOCITY):
        np.testing.assert_array_equal(velocity[:, c].reshape((nx, ny, nz), order="F"), final[name])
    for name in STRESSES:
        np.testing.assert_array_equal(
            vtk_to_numpy(image.GetPointData().GetArray(name)).reshape((nx, ny, nz), order="F"), final[name])
    assert np.abs(final["vz"]).max() > 0  # the source has fired: the comparison means something
    s = read_seismograms(frames / "seismograms.npz")
    assert s["data"].tobytes() == final["seismograms"].tobytes() and s["data"].shape == (2, 7, 3)
    np.testing.assert_array_equal(s["times"], np.arange(7) * dt)
    # the frames on disk are the app's frames, the seismograms so far in each
    app = app_of_run(tomllib.loads((run / "config.toml").read_text()))
    last = drawing.frame(app, final)
    with np.load(frames / "state-000006.npz") as z:
        assert set(z.files) == set(last)
        for name in last:
            np.testing.assert_array_equal(z[name], last[name])
    with np.load(frames / "state-000002.npz") as z:
        assert z["seismograms"].shape == (2, 3, 3)
    # the report draws the app's own picture of the seismograms beside the frames
    assert main(["report", str(run), "-q"]) == 0
    assert (run / "seismograms.png").stat().st_size > 0 and (run / "frame-final.png").exists()
