"""What a cloth run leaves: its mesh frames read back by VTK in a ParaView series, its windows
as a CSV table equal to its log, and its pictures."""

import csv

import numpy as np
from vtkmodules.util.numpy_support import vtk_to_numpy
from vtkmodules.vtkIOXML import vtkXMLPolyDataReader

from shoal.apps.cloth import output
from shoal.apps.cloth.scenes import Drape
from shoal.graphics.vtk import read_series


def test_a_draped_sheet_leaves_frames_a_table_and_pictures(tmp_path):
    scene = Drape(n=9, size=0.5, height=0.27, radius=0.25)
    cloth, x, v = scene.build()
    for _ in range(3):
        cloth.run(x, v, 4, gravity=(0.0, 0.0, scene.gravity))
        last = output.write_mesh_frame(tmp_path / "frames", cloth, x, v)
    series = read_series(tmp_path / "frames" / output.SERIES)
    np.testing.assert_allclose(sorted(series.values()), [4 * scene.step * scene.window * k for k in (1, 2, 3)])
    reader = vtkXMLPolyDataReader()
    reader.SetFileName(str(last))
    reader.Update()
    data = reader.GetOutput()
    np.testing.assert_array_equal(vtk_to_numpy(data.GetPoints().GetData()), x)
    np.testing.assert_array_equal(vtk_to_numpy(data.GetPolys().GetConnectivityArray()),
                                  cloth.model.surface.triangles.ravel())
    np.testing.assert_allclose(vtk_to_numpy(data.GetPointData().GetArray("speed")), np.linalg.norm(v, axis=1))

    table = output.write_windows(tmp_path / "windows.csv", cloth.log)
    rows = list(csv.DictReader(table.open()))
    assert len(rows) == 12
    assert [int(r["rollbacks"]) for r in rows] == cloth.log.rollbacks
    assert [float(r["time"]) for r in rows] == cloth.log.time

    for path in (output.plot_windows(tmp_path / "windows.png", cloth.log, "drape"),
                 output.picture(tmp_path / "drape.png", cloth, x)):
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
