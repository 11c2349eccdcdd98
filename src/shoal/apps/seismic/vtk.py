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

The arrays are zlib-compressed and appended raw after the XML by :mod:`shoal.graphics.vtk`'s
writer, plane by plane: no second copy of a field in memory, which matters at tens of millions
of points, and the cells the wave has not reached (exact zeros) take next to nothing.
``frames/series.pvd`` lists every step with its simulated time (open it);
``frames/seismograms.npz`` (:mod:`~shoal.apps.seismic.output`) holds the seismograms so far.
Nothing here needs the ``vtk`` wheel.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ...errors import ShoalError
from ...graphics.vtk import SERIES_FILE, SERIES_FOLDER, Array, add_to_series, write_image_data
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
    nx, ny, nz = shape
    points = nx * ny * nz

    def velocity():  # VTK orders points x fastest, then y, then z
        for k in range(nz):
            yield np.stack([fields[c][:, :, k].T for c in VELOCITY], axis=-1)

    arrays = [Array("velocity", dtype, 3, points, velocity)]
    arrays += [Array.grid(name, fields[name].astype(dtype, copy=False)) for name in STRESSES]
    dx = float(params.dx)
    return write_image_data(path, (nx - 1, ny - 1, nz - 1), float(gathered.get("time", np.nan)), points=arrays,
                            spacing=(dx, dx, dx))


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
