"""A seismic state as VTK image data that ParaView opens as a time series.

Each exported step is one ``.vti`` file (VTK XML image data, VTK's ``vtkXMLImageDataReader``):
one point per normal-stress node, the origin at the first node (0, 0, 0) and the spacing the
cell's side in metres along x, y and z. **z is depth, positive down**, as in the app: ParaView
draws +z upwards, so the surface (z = 0) is at the bottom of its view unless the camera is
turned (or a Transform filter scales z by -1). A 2D run is one layer of points at y = 0.

Point data: ``velocity`` (vx, vy, vz in m/s, the active vectors) and the stresses ``sxx``,
``syy``, ``szz``, ``sxy``, ``sxz``, ``syz`` (Pa), in the run's precision. Each value is its field
at its own staggered node of the same indices (vx half a cell further along x, sxz half a cell
along x and z, ...: :data:`~shoal.apps.seismic.source.OFFSETS`), not interpolated to the
point. Field data ``TimeValue`` holds the simulated time.

The arrays are raw little-endian binary appended after the XML (each preceded by its byte count
as UInt64), written plane by plane: no base64 (a third larger) and no second copy of a field in
memory, which matters at tens of millions of points. ``frames/series.pvd`` lists every step with
its simulated time (open it); ``frames/seismograms.npz`` (:mod:`~shoal.apps.seismic.output`)
holds the seismograms so far. Nothing here needs the ``vtk`` wheel.
"""

from __future__ import annotations

from pathlib import Path
from xml.sax.saxutils import quoteattr

import numpy as np

from ...errors import ShoalError
from ...files import atomic_write
from ...report.vtk import SERIES_FILE, SERIES_FOLDER, VTK_TYPES, add_to_series
from .output import SEISMOGRAMS_FILE, write_seismograms

VELOCITY = ("vx", "vy", "vz")
STRESSES = ("sxx", "syy", "szz", "sxy", "sxz", "syz")


def write_snapshot(params, gathered: dict[str, np.ndarray], path: str | Path) -> Path:
    """Write a gathered state's velocity and stresses as VTK image data ``path`` (``.vti``), atomically.

    Parameters
    ----------
    params : SeismicParams
        The run's parameters (the grid's shape and spacing).
    gathered : dict of str to ndarray
        What ``app.gather`` returned: the nine fields ``(nx, ny, nz)`` and ``time``.
    path : str or Path
        The ``.vti`` file; its folder must exist.

    Returns
    -------
    Path
        ``path``.
    """
    path = Path(path)
    shape = tuple(params.shape)
    fields = {name: np.asarray(gathered[name]) for name in VELOCITY + STRESSES}
    for name, a in fields.items():
        if a.shape != shape:
            raise ShoalError(f"gathered field {name!r} has shape {a.shape}, the grid is {shape}")
    dtype = np.result_type(*fields.values()).newbyteorder("<")
    vtk_type = VTK_TYPES[dtype.str[1:]]
    nx, ny, nz = shape
    points = nx * ny * nz
    time = np.array([float(gathered.get("time", np.nan))], dtype="<f8")
    # (name, components, VTK type, tuples, bytes) of each appended block, in file order
    size = dtype.itemsize
    blocks = [("TimeValue", 1, "Float64", 1, time.nbytes), ("velocity", 3, vtk_type, points, 3 * points * size)]
    blocks += [(name, 1, vtk_type, points, points * size) for name in STRESSES]
    offsets = np.concatenate(([0], np.cumsum([8 + b[4] for b in blocks])))
    arrays = [f'<DataArray type="{kind}" Name={quoteattr(name)} NumberOfComponents="{comps}" '
              f'NumberOfTuples="{tuples}" format="appended" offset="{off}"/>\n'
              for (name, comps, kind, tuples, _), off in zip(blocks, offsets, strict=False)]
    extent = f"0 {nx - 1} 0 {ny - 1} 0 {nz - 1}"
    dx = float(params.dx)
    head = ('<?xml version="1.0"?>\n<VTKFile type="ImageData" version="1.0" byte_order="LittleEndian" '
            'header_type="UInt64">\n'
            f'<ImageData WholeExtent="{extent}" Origin="0 0 0" Spacing="{dx!r} {dx!r} {dx!r}">\n'
            f"<FieldData>\n{arrays[0]}</FieldData>\n"
            f'<Piece Extent="{extent}">\n<PointData Vectors="velocity">\n{"".join(arrays[1:])}</PointData>\n'
            '<CellData/>\n</Piece>\n</ImageData>\n<AppendedData encoding="raw">\n_')
    with atomic_write(path, "wb") as fh:
        fh.write(head.encode())
        fh.write(np.array([time.nbytes], dtype="<u8").tobytes())
        fh.write(time.tobytes())
        fh.write(np.array([blocks[1][4]], dtype="<u8").tobytes())
        for k in range(nz):  # VTK orders points x fastest, then y, then z
            plane = np.stack([fields[c][:, :, k].T for c in VELOCITY], axis=-1)
            fh.write(np.ascontiguousarray(plane, dtype=dtype))
        for (*_, n), name in zip(blocks[2:], STRESSES, strict=True):
            fh.write(np.array([n], dtype="<u8").tobytes())
            for k in range(nz):
                fh.write(np.ascontiguousarray(fields[name][:, :, k].T, dtype=dtype))
        fh.write(b"\n</AppendedData>\n</VTKFile>\n")
    return path


def export(app, gathered: dict[str, np.ndarray], frames: str | Path, step: int) -> Path:
    """Step ``step`` of a run as ``frames/paraview/state-<step>.vti``, listed with its simulated
    time in ``frames/series.pvd``, and the seismograms so far as ``frames/seismograms.npz``.

    Parameters
    ----------
    app : SeismicApp
        The run's app (its parameters ``app.p``).
    gathered : dict of str to ndarray
        What ``app.gather`` returned at ``step``.
    frames : str or Path
        A run folder's ``frames`` folder (or any folder).
    step : int
        The step, which names the file.

    Returns
    -------
    Path
        The collection: open it in ParaView.
    """
    frames = Path(frames)
    (frames / SERIES_FOLDER).mkdir(parents=True, exist_ok=True)
    vti = write_snapshot(app.p, gathered, frames / SERIES_FOLDER / f"state-{step:06d}.vti")
    write_seismograms(app.p, gathered, frames / SEISMOGRAMS_FILE)
    return add_to_series(frames / SERIES_FILE, float(gathered.get("time", step)), vti)
