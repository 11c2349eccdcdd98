"""What users load from a shallow-water run: the overlapping-AMR VTK series read back with VTK's
own reader (every cell at its level, values exact, steps with their times), and the frame and
picture of the surface with the root blocks' levels."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from matplotlib.collections import PolyCollection
from matplotlib.colors import to_rgba
from vtkmodules.util.numpy_support import vtk_to_numpy
from vtkmodules.vtkIOXML import vtkXMLImageDataReader, vtkXMLUniformGridAMRReader

from shoal.apps import get_app
from shoal.apps.swe import drawing
from shoal.apps.swe.regrid import average4
from shoal.apps.swe.vtk import add_to_series, boxes, export, write_step
from shoal.cluster import Cluster
from shoal.graphics.canvas import new_figure
from shoal.runtime import LocalExecutor
from shoal.tiling import Tiling

SPEC = get_app("swe")
FIELDS = ("h", "hu", "hv", "b")


@pytest.fixture(scope="module")
def run():
    """The tiny adaptive dam break on 3 tiles: the app and its gathered state at steps 0, 2 and 4."""
    app = SPEC.build(SPEC.params(**SPEC.tiny), 4)
    tiling = Tiling.from_count(app.grid, 3)
    states = {t: app.init_tile(t, tiling) for t in range(tiling.ntiles)}
    gathered = {0: app.gather(states, tiling)}
    with LocalExecutor(app, tiling, Cluster.uniform(1, 1), np.zeros(tiling.ntiles, int)) as ex:
        for first in (0, 2):
            states = ex.run(2, states=states, first_step=first).states
            gathered[first + 2] = app.gather(states, tiling)
    return app, gathered


def _levels(gathered):
    return sorted(set(gathered["level"].tolist()))


def _block_cells(app, gathered, name):
    """Every root block's cells of ``name`` as an (n, n) array, by root-block id."""
    n = app.p.block * 2 ** gathered["level"]
    start = np.concatenate(([0], np.cumsum(n * n)))
    return [gathered[name][start[g]:start[g + 1]].reshape(m, m) for g, m in enumerate(n)]


def _read_amr(path):
    reader = vtkXMLUniformGridAMRReader()
    reader.SetFileName(str(path))
    reader.SetMaximumLevelsToReadByDefault(0)  # every level
    reader.Update()
    assert reader.GetErrorCode() == 0
    return reader.GetOutput()


# ----- VTK ----------------------------------------------------------------------------------------
def test_the_run_refines_part_of_the_grid(run):
    app, gathered = run
    assert all(_levels(g) == [0, 1] for g in gathered.values())  # so the files below hold two levels


@pytest.mark.parametrize("step", [0, 4])
def test_vthb_holds_every_cell_once_at_its_level_with_the_gathered_values(run, tmp_path, step):
    app, gathered = run
    g = gathered[step]
    amr = _read_amr(write_step(app, g, tmp_path / "state.vthb"))
    assert amr.CheckValidity()
    nbx, nby = app.grid
    level = g["level"]
    blocks = {name: _block_cells(app, g, name) for name in FIELDS}
    eta = [np.where(h > app.p.dry, h + b, np.nan) for h, b in zip(blocks["h"], blocks["b"], strict=True)]
    covered = np.zeros(nbx * nby, dtype=int)
    assert amr.GetNumberOfLevels() == len(_levels(g))
    for k, lv in enumerate(_levels(g)):  # VTK's level 0 is the coarsest present
        m, dx = app.p.block * 2**lv, app.p.dx0 / 2**lv
        cells = 0
        for i in range(amr.GetNumberOfBlocks(k)):
            box = amr.GetDataSetAsImageData(k, i)
            assert box.GetSpacing()[:2] == (dx, dx)
            nx, ny = (d - 1 for d in box.GetDimensions()[:2])
            cells += box.GetNumberOfCells()
            bx0, by0 = (round((o - app.p.origin[a]) / (app.p.block * app.p.dx0)) for a, o in
                        enumerate(box.GetOrigin()[:2]))
            assert box.GetOrigin()[:2] == (bx0 * app.p.block * app.p.dx0, by0 * app.p.block * app.p.dx0)
            data = box.GetCellData()
            back = {name: vtk_to_numpy(data.GetArray(name)).reshape(nx, ny, order="F")
                    for name in (*FIELDS, "eta", "level", "vtkGhostType")}
            assert not back["vtkGhostType"].any()  # nothing hidden: blocks never overlap
            assert (back["level"] == lv).all()
            for bx in range(bx0, bx0 + nx // m):
                for by in range(by0, by0 + ny // m):
                    gid = bx * nby + by
                    assert level[gid] == lv
                    covered[gid] += 1
                    part = np.s_[(bx - bx0) * m:(bx - bx0 + 1) * m, (by - by0) * m:(by - by0 + 1) * m]
                    for name in FIELDS:
                        np.testing.assert_array_equal(back[name][part], blocks[name][gid])
                    np.testing.assert_array_equal(back["eta"][part], eta[gid])
        assert cells == int((level == lv).sum()) * m * m
    assert (covered == 1).all()


def test_series_lists_each_step_with_its_simulated_time(run, tmp_path):
    app, gathered = run
    for step in (4, 0, 2, 2):  # out of order, and a step written twice (a resumed run)
        pvd = export(app, gathered[step], tmp_path, step)
    assert pvd == tmp_path / "series.pvd"
    root = ET.parse(pvd).getroot()
    assert root.get("type") == "Collection"
    series = [(float(d.get("timestep")), pvd.parent / d.get("file")) for d in root.iter("DataSet")]
    assert [p.name for _, p in series] == ["state-000000.vthb", "state-000002.vthb", "state-000004.vthb"]
    times = [t for t, _ in series]
    assert times == [float(gathered[s]["time"]) for s in (0, 2, 4)]
    assert times[0] == 0.0 and np.all(np.diff(times) > 0)
    for t, path in series:  # every box carries its step's time too
        amr = _read_amr(path)
        assert amr.GetNumberOfLevels() == 2
        reader = vtkXMLImageDataReader()
        for piece in sorted(path.with_suffix("").glob("*.vti")):
            reader.SetFileName(str(piece))
            reader.Update()
            assert vtk_to_numpy(reader.GetOutput().GetFieldData().GetArray("TimeValue"))[0] == t


def test_writing_needs_no_vtk(tmp_path):
    script = ("import sys\n"
              "from shoal.apps import get_app\n"
              "from shoal.apps.swe.vtk import export\n"
              "from shoal.tiling import Tiling\n"
              "spec = get_app('swe')\n"
              "app = spec.build(spec.params(**spec.tiny), 1)\n"
              "tiling = Tiling.from_count(app.grid, 1)\n"
              "export(app, app.gather({0: app.init_tile(0, tiling)}, tiling), sys.argv[1], 0)\n"
              "assert not any(m.split('.')[0] in ('vtk', 'vtkmodules') for m in sys.modules), 'vtk imported'\n")
    subprocess.run([sys.executable, "-c", script, str(tmp_path)], check=True)
    assert (tmp_path / "paraview" / "state-000000.vthb").exists()


def test_a_collection_that_is_not_one_is_refused(tmp_path):
    from shoal.errors import ShoalError

    (tmp_path / "series.pvd").write_text("<VTKFile><Collection><DataSet timestep='x' file='a'/>")
    with pytest.raises(ShoalError, match="not a ParaView collection"):
        add_to_series(tmp_path / "series.pvd", 1.0, tmp_path / "b.vthb")


@given(st.integers(1, 6), st.integers(1, 6), st.integers(0, 2**32 - 1))
def test_boxes_cover_every_block_once_with_one_level_each(nbx, nby, seed):
    level = np.random.default_rng(seed).integers(0, 3, size=(nbx, nby))
    covered = np.zeros_like(level)
    for lv, bx0, bx1, by0, by1 in boxes(level):
        assert bx0 < bx1 <= nbx and by0 < by1 <= nby
        assert (level[bx0:bx1, by0:by1] == lv).all()
        covered[bx0:bx1, by0:by1] += 1
    assert (covered == 1).all()


def test_boxes_of_one_level_are_one_box():
    assert boxes(np.full((5, 3), 2)) == [(2, 0, 5, 0, 3)]
    assert boxes(np.array([[0, 1], [0, 1], [1, 1]])) == [(0, 0, 2, 0, 1), (1, 0, 3, 1, 2), (1, 2, 3, 0, 1)]


# ----- frames and pictures ----------------------------------------------------------------------
def test_frame_is_the_surface_at_the_finest_level_present(run):
    app, gathered = run
    g = gathered[4]
    f = drawing.frame(app, g)
    assert list(f)[0] == "eta"  # the report's common colour scale is the first grid field's
    np.testing.assert_array_equal(f["eta"], app.uniform(g, 1)["eta"])
    np.testing.assert_array_equal(f["level"].reshape(-1), g["level"])
    assert f["level"].shape == app.grid
    (x0, y0), (lx, ly) = app.p.origin, app.p.extent
    np.testing.assert_array_equal(f["extent"], [x0, x0 + lx, y0, y0 + ly])
    assert float(f["time"]) == float(g["time"]) > 0
    # a smaller budget: one level coarser, then 2 x 2 means below level 0
    nx, ny = (n * app.p.block for n in app.grid)  # cells at level 0
    np.testing.assert_array_equal(drawing.frame(app, g, max_cells=4 * nx * ny - 1)["eta"], app.uniform(g, 0)["eta"])
    coarse = drawing.frame(app, g, max_cells=nx * ny - 1)
    h, b = (average4(app.uniform(g, 0)[name]) for name in ("h", "b"))
    assert coarse["eta"].shape == (nx // 2, ny // 2)
    np.testing.assert_array_equal(coarse["eta"], np.where(h > app.p.dry, h + b, np.nan))


def _synthetic(app, level, seed=0):
    """A gathered state of random cells at the given levels, a quarter of them dry."""
    rng = np.random.default_rng(seed)
    n = int(((app.p.block * 2**level) ** 2).sum())
    h = rng.uniform(0.0, 2.0, n)
    h[rng.random(n) < 0.25] = 0.0
    return {"level": level, "h": h, "hu": rng.normal(size=n), "hv": rng.normal(size=n),
            "b": rng.uniform(-3.0, 1.0, n), "time": np.array(12.5)}


def test_frame_keeps_within_its_size_on_a_large_grid():
    app = SPEC.build(SPEC.params(blocks=[20, 20], block=8, extent=[1600.0, 1600.0], max_level=2), 1)
    level = np.full(400, 2)
    level[:40] = 1
    g = _synthetic(app, level)
    f = drawing.frame(app, g)
    assert f["eta"].size <= drawing.MAX_CELLS and f["eta"].nbytes <= 2 * 2**20
    assert f["eta"].shape == (320, 320)  # level 2 would be 640 x 640
    np.testing.assert_array_equal(f["eta"], app.uniform(g, 1)["eta"])


def test_draw_shows_the_surface_with_land_grey_and_outlines_every_root_block(run):
    app, gathered = run
    g = _synthetic(app, gathered[4]["level"])
    f = drawing.frame(app, g)
    fig = new_figure(7, 5)
    ax = fig.add_subplot()
    image = drawing.draw(f, ax, scale=(-0.5, 3.0))
    assert image.get_clim() == (-3.0, 3.0)  # centred on sea level
    shown = image.get_array()
    np.testing.assert_array_equal(shown.mask, np.isnan(f["eta"]).T)
    np.testing.assert_array_equal(shown.data[~shown.mask], f["eta"].T[~shown.mask])  # sea level 0
    assert shown.mask.any() and image.get_cmap().get_bad().tolist() == list(to_rgba(drawing.LAND))
    (x0, y0), (lx, ly) = app.p.origin, app.p.extent
    assert image.get_extent() == [x0, x0 + lx, y0, y0 + ly]
    (outlines,) = [c for c in ax.collections if isinstance(c, PolyCollection)]
    paths = outlines.get_paths()
    nbx, nby = app.grid
    assert len(paths) == nbx * nby
    corners = {tuple(np.round(p.vertices[:4].min(axis=0), 9)) for p in paths}
    side = lx / nbx  # a root block's side (m)
    assert corners == {(round(x0 + side * i, 9), round(y0 + side * j, 9)) for i in range(nbx) for j in range(nby)}
    widths = np.asarray(outlines.get_linewidths())
    fine = np.sort(g["level"]) == 1  # drawn in level order, finest on top
    assert widths[fine].min() > widths[~fine].max()
    fig.canvas.draw()


def test_draw_defaults_to_the_frame_range_and_draws_a_flat_sea(run):
    app, gathered = run
    f = drawing.frame(app, gathered[0])
    fig = new_figure(7, 5)
    assert drawing.draw(f, fig.add_subplot()).get_clim() == (-2.0, 2.0)  # the column stands 2 m high
    f["eta"] = np.zeros_like(f["eta"])
    assert drawing.draw(f, fig.add_subplot()).get_clim() == (-1.0, 1.0)
