"""Frames as a ParaView time series, read back with VTK's own readers."""

import xml.etree.ElementTree as ET

import numpy as np
import pytest
from vtkmodules.util.numpy_support import vtk_to_numpy
from vtkmodules.vtkIOXML import vtkXMLImageDataReader, vtkXMLPolyDataReader

from shoal.errors import ShoalError
from shoal.report.vtk import write_series
from shoal.session import run_scenario

SPH2D = ["app.dx=0.1", "app.tank=[2.0, 1.2]", "app.fluid=[[0.0, 0.0, 0.5, 1.0]]"]
RUNS = {
    "sph-dam-break": SPH2D,
    "sph3d-dam-break": ["app.particles=500"],
    "synthetic-hotspot": ["app.grid=[12,10]"],
    "synthetic-hotspot-3d": ["app.grid=[8,6,4]"],
}


@pytest.fixture(scope="module", params=list(RUNS))
def run(request, tmp_path_factory):
    name = request.param
    out = tmp_path_factory.mktemp("series") / name
    run_scenario(name, steps=4, tiles=2, nodes=1, out=out, set=RUNS[name] + ["run.frame_every=2"])
    return out


def _series(pvd):
    """(time, file) of every data set of a .pvd collection."""
    root = ET.parse(pvd).getroot()
    assert root.get("type") == "Collection"
    return [(float(d.get("timestep")), pvd.parent / d.get("file")) for d in root.iter("DataSet")]


def _read(path):
    reader = vtkXMLPolyDataReader() if path.suffix == ".vtp" else vtkXMLImageDataReader()
    reader.SetFileName(str(path))
    reader.Update()
    assert reader.GetErrorCode() == 0, path
    return reader.GetOutput()


def _frames(run):
    out = []
    for path in sorted((run / "frames").glob("state-*.npz")):
        with np.load(path) as z:
            out.append({k: z[k] for k in z.files})
    return out


def test_series_lists_every_frame_with_its_simulated_time(run):
    series = _series(write_series(run))
    frames = _frames(run)
    assert len(series) == len(frames) == 3  # steps 0, 2 and 4
    times = [t for t, _ in series]
    if "time" in frames[0]:  # SPH: the physical clock the frame recorded
        assert times == [float(f["time"]) for f in frames]
        assert times[0] == 0.0 and times[1] > 0.0
    else:  # grid apps without a clock: the step
        assert times == [0.0, 2.0, 4.0]
    assert np.all(np.diff(times) > 0)
    for t, path in series:  # each file carries its own time too
        assert vtk_to_numpy(_read(path).GetFieldData().GetArray("TimeValue"))[0] == t


def test_each_file_holds_the_frame_exactly(run):
    series = _series(write_series(run))
    for frame, (_, path) in zip(_frames(run), series, strict=True):
        data = _read(path)
        if "x" in frame:  # particles: one vertex per particle, every per-particle array as point data
            n, dim = frame["x"].shape
            assert path.suffix == ".vtp" and data.GetNumberOfPoints() == data.GetNumberOfVerts() == n
            points = vtk_to_numpy(data.GetPoints().GetData())
            np.testing.assert_array_equal(points[:, :dim], frame["x"])
            assert not points[:, dim:].any()
            pd = data.GetPointData()
            for name in ("id", "kind", "rho", "p", "m"):
                np.testing.assert_array_equal(vtk_to_numpy(pd.GetArray(name)), frame[name])
            v = vtk_to_numpy(pd.GetArray("v"))
            assert v.shape == (n, 3)
            np.testing.assert_array_equal(v[:, :dim], frame["v"])
        else:  # grid: one cell per grid cell, x fastest
            shape = frame["u"].shape
            dims = data.GetDimensions()
            assert path.suffix == ".vti" and tuple(d - 1 for d in dims[: len(shape)]) == shape
            assert data.GetNumberOfCells() == frame["u"].size
            for name in ("u", "burn"):
                back = vtk_to_numpy(data.GetCellData().GetArray(name)).reshape(shape, order="F")
                np.testing.assert_array_equal(back, frame[name])


def test_a_folder_without_frames_is_refused_by_name(tmp_path):
    with pytest.raises(ShoalError, match="no frames"):
        write_series(tmp_path)
