"""VTK files: zlib-compressed, physical arrays first under their physical names, and read back
by VTK's own readers bit for bit; frames as a ParaView time series."""

import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from vtkmodules.util.numpy_support import vtk_to_numpy
from vtkmodules.vtkIOXML import vtkXMLImageDataReader, vtkXMLPolyDataReader

from shoal.apps.cloth.surface import sheet
from shoal.errors import ShoalError
from shoal.graphics import vtk
from shoal.graphics.vtk import Array, write_image_data, write_poly_data, write_series
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


def _names(data):
    return [data.GetArrayName(i) for i in range(data.GetNumberOfArrays())]


def _same(got, expected):
    """Bit for bit: the same dtype and the same bytes (``got`` a VTK array or one read from it)."""
    back = got if isinstance(got, np.ndarray) else vtk_to_numpy(got)
    assert back.dtype == expected.dtype
    np.testing.assert_array_equal(back.view(np.uint8), np.ascontiguousarray(expected).view(np.uint8))


def _frames(run):
    out = []
    for path in sorted((run / "frames").glob("state-*.npz")):
        with np.load(path) as z:
            out.append({k: z[k] for k in z.files})
    return out


def _compressed_appended(path):
    """The file's XML says zlib and appended data for every array (read up to the data)."""
    head = path.read_bytes().split(b"<AppendedData", 1)[0].decode()
    assert 'compressor="vtkZLibDataCompressor"' in head and 'header_type="UInt64"' in head
    formats = re.findall(r'format="(\w+)"', head)
    assert formats and set(formats) == {"appended"}


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


def test_each_file_holds_the_frame_bit_for_bit_compressed_physical_arrays_first(run):
    series = _series(write_series(run))
    for frame, (_, path) in zip(_frames(run), series, strict=True):
        _compressed_appended(path)
        data = _read(path)
        if "x" in frame:  # particles: one vertex per particle, every per-particle array as point data
            n, dim = frame["x"].shape
            assert path.suffix == ".vtp" and data.GetNumberOfPoints() == data.GetNumberOfVerts() == n
            points = vtk_to_numpy(data.GetPoints().GetData())
            _same(points[:, :dim].copy(), frame["x"])
            assert not points[:, dim:].any()
            pd = data.GetPointData()
            names = _names(pd)
            assert names[:4] == ["density", "pressure", "velocity", "mass"]  # physical first ...
            assert names[-3:] == ["id", "kind", "cell"]  # ... bookkeeping last
            assert pd.GetScalars().GetName() == "density" and pd.GetVectors().GetName() == "velocity"
            for vtk_name, name in (("density", "rho"), ("pressure", "p"), ("mass", "m"), ("id", "id"),
                                   ("kind", "kind")):
                _same(pd.GetArray(vtk_name), frame[name])
            v = vtk_to_numpy(pd.GetArray("velocity"))
            assert v.shape == (n, 3) and not v[:, dim:].any()
            _same(v[:, :dim].copy(), frame["v"])
        else:  # grid: one cell per grid cell, x fastest
            shape = frame["u"].shape
            dims = data.GetDimensions()
            assert path.suffix == ".vti" and tuple(d - 1 for d in dims[: len(shape)]) == shape
            assert data.GetNumberOfCells() == frame["u"].size
            assert _names(data.GetCellData()) == ["u", "burn"]
            for name in ("u", "burn"):
                back = vtk_to_numpy(data.GetCellData().GetArray(name)).reshape(shape, order="F")
                _same(back.copy(), frame[name])


def test_a_folder_without_frames_is_refused_by_name(tmp_path):
    with pytest.raises(ShoalError, match="no frames"):
        write_series(tmp_path)


# ----- the writer --------------------------------------------------------------------------------
def test_arrays_of_many_blocks_streamed_in_odd_chunks_read_back_bit_for_bit(tmp_path):
    """Blocks cut across chunks and chunks across blocks, a block that ends exactly where a chunk
    does, a partial last block, and an empty array."""
    rng = np.random.default_rng(1)
    per_block = vtk.BLOCK_BYTES // 8
    n = 2 * per_block + 777  # float64 values: two full blocks and a partial one
    field = rng.normal(size=n)
    ints = np.arange(vtk.BLOCK_BYTES // 4, dtype=np.int32)  # one block's worth, then zeros
    cuts = [0, 1, 3000, per_block, per_block + 1, n]  # chunk edges, one on a block's end

    def pieces():
        return (field[a:b] for a, b in zip(cuts[:-1], cuts[1:], strict=True))

    x = rng.normal(size=(n, 3))
    vectors = rng.normal(size=(n, 3)).astype(np.float32)
    path = write_poly_data(tmp_path / "p.vtp", x, 0.5, [
        Array("field", field.dtype, 1, n, pieces), Array.of("vectors", vectors),
        Array("ints", ints.dtype, 1, n, lambda: [ints, np.zeros(n - len(ints), np.int32)]),
    ])
    _compressed_appended(path)
    data = _read(path)
    _same(data.GetPoints().GetData(), x)
    pd = data.GetPointData()
    _same(pd.GetArray("field"), field)
    _same(pd.GetArray("vectors"), vectors)
    _same(pd.GetArray("ints"), np.concatenate([ints, np.zeros(n - len(ints), np.int32)]))
    empty = write_poly_data(tmp_path / "e.vtp", np.zeros((0, 2)), 0.0, [Array.of("rho", np.zeros(0))])
    assert _read(empty).GetNumberOfPoints() == 0


def test_a_mesh_frame_is_poly_data_of_its_triangles(tmp_path):
    cloth = sheet(5, size=0.2, height=0.1)
    speed = np.linspace(0.0, 1.0, 25)
    frame = {"x": cloth.vertices, "triangles": cloth.triangles, "speed": speed}
    path = vtk.write_frame(tmp_path / "cloth", frame, 0.25)
    data = _read(path)
    _same(data.GetPoints().GetData(), cloth.vertices)
    assert data.GetNumberOfPolys() == len(cloth.triangles) and data.GetNumberOfVerts() == 0
    polys = vtk_to_numpy(data.GetPolys().GetConnectivityArray())
    np.testing.assert_array_equal(polys, cloth.triangles.ravel())
    _same(data.GetPointData().GetArray("speed"), speed)


def test_image_data_puts_points_and_cells_where_asked_and_zeros_take_no_room(tmp_path):
    rng = np.random.default_rng(2)
    cells = rng.normal(size=(64, 32, 128)).astype(np.float32)  # exactly one block: the last one full
    assert cells.nbytes == vtk.BLOCK_BYTES
    zeros = np.zeros((65, 33, 129))
    path = write_image_data(tmp_path / "g.vti", cells.shape, 1.25, cells=[Array.grid("c", cells)],
                            points=[Array.grid("z", zeros)], origin=(10.0, -5.0, 2.0), spacing=(0.5, 0.25, 2.0))
    data = _read(path)
    assert data.GetDimensions() == (65, 33, 129)
    assert data.GetOrigin() == (10.0, -5.0, 2.0) and data.GetSpacing() == (0.5, 0.25, 2.0)
    _same(vtk_to_numpy(data.GetCellData().GetArray("c")).reshape(cells.shape, order="F").copy(), cells)
    _same(vtk_to_numpy(data.GetPointData().GetArray("z")).reshape(zeros.shape, order="F").copy(), zeros)
    assert vtk_to_numpy(data.GetFieldData().GetArray("TimeValue"))[0] == 1.25
    assert path.stat().st_size < cells.nbytes + zeros.nbytes / 100  # 2.2 MB of zeros take under 22 kB


def test_a_dtype_vtk_has_no_type_for_is_refused_before_anything_is_written(tmp_path):
    with pytest.raises(ShoalError, match="'when': dtype complex128 has no VTK type"):
        write_poly_data(tmp_path / "c.vtp", np.zeros((3, 2)), 0.0, [Array.of("when", np.zeros(3, complex))])
    assert not list(tmp_path.iterdir())


def test_arrays_are_ordered_physical_first_and_bookkeeping_last():
    frame = {"id": 0, "cell": 0, "e": 0, "v": 0, "kind": 0, "rhoh": 0, "p": 0, "rho": 0}
    names = [name for name, _ in vtk.ordered({k: np.zeros(1) for k in frame}, lambda a: True)]
    assert names == ["density", "pressure", "velocity", "e", "rhoh", "id", "kind", "cell"]
