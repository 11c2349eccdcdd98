"""VTK output of frames, which ParaView and VisIt read directly.

:func:`write_series` writes a run folder's frames as a time series, one VTK XML file per frame
(``.vtp`` poly data of the particles' vertices for particle apps, ``.vti`` image data for grid
apps) and a ParaView data file (``.pvd``) giving each file its simulated time, so ParaView's
time toolbar shows seconds, not frame numbers.

The XML files are written here rather than by a library: meshio writes neither poly data nor
image data, and the ``vtk`` wheel (over 500 MB) would be a heavy dependency for a few lines of
documented XML. The test suite reads them back with VTK's own readers.
"""

from __future__ import annotations

import base64
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from xml.sax.saxutils import quoteattr

import numpy as np

from ..errors import ShoalError
from ..files import atomic_write, write_text

SERIES_FOLDER = "paraview"  # under the run folder's frames/
SERIES_FILE = "series.pvd"

# VTK XML type names of the NumPy dtypes a frame holds.
VTK_TYPES = {"i1": "Int8", "u1": "UInt8", "i2": "Int16", "u2": "UInt16", "i4": "Int32", "u4": "UInt32",
              "i8": "Int64", "u8": "UInt64", "f4": "Float32", "f8": "Float64", "b1": "UInt8"}


# ----- time series -------------------------------------------------------------------------------
def write_series(run_folder: str | Path) -> Path:
    """Convert a run folder's frames into a ParaView time series.

    Every ``frames/state-<step>.npz`` becomes ``frames/paraview/state-<step>.vtp`` (a frame
    with particle positions ``x``: one vertex per particle, every per-particle array as point
    data) or ``.vti`` (a frame of grid arrays: one cell per grid cell, the arrays as cell
    data, unit spacing). ``frames/series.pvd`` lists them with their simulated time:
    the frame's ``time`` when it holds one, else its step (the clock of apps without one).

    Parameters
    ----------
    run_folder : str or Path
        A run folder written by ``shoal run``.

    Returns
    -------
    Path
        The ``.pvd`` file; open it in ParaView.

    Raises
    ------
    ShoalError
        The folder holds no frames, or a frame is neither particles nor a grid.
    """
    frames = Path(run_folder) / "frames"
    paths = sorted(frames.glob("state-*.npz"))
    if not paths:
        raise ShoalError(f"{frames}: no frames (state-*.npz) to convert; run with run.frame_every > 0")
    out = frames / SERIES_FOLDER
    out.mkdir(exist_ok=True)
    entries = []
    for path in paths:
        with np.load(path) as z:
            frame = {k: z[k] for k in z.files}
        step = int(re.fullmatch(r"state-(\d+)", path.stem).group(1))
        time = float(frame["time"]) if "time" in frame else float(step)
        target = out / path.stem
        if _is_particles(frame):
            target = _write_poly_data(target.with_suffix(".vtp"), frame, time)
        elif _grid_shape(frame) is not None:
            target = _write_image_data(target.with_suffix(".vti"), frame, time)
        else:
            raise ShoalError(f"{path}: neither particles (x of shape (n, 2 or 3)) nor grid arrays of one shape")
        entries.append((time, target.relative_to(frames).as_posix()))
    datasets = "".join(f'    <DataSet timestep="{t!r}" group="" part="0" file={quoteattr(f)}/>\n' for t, f in entries)
    pvd = frames / SERIES_FILE
    write_text(pvd, '<?xml version="1.0"?>\n<VTKFile type="Collection" version="1.0" byte_order="LittleEndian">\n'
               f"  <Collection>\n{datasets}  </Collection>\n</VTKFile>\n")
    return pvd


def _is_particles(frame: dict[str, np.ndarray]) -> bool:
    x = frame.get("x")
    return x is not None and x.ndim == 2 and x.shape[1] in (2, 3)


def _grid_shape(frame: dict[str, np.ndarray]) -> tuple[int, ...] | None:
    """The common shape of a frame's 2D or 3D arrays (``None`` when there is none)."""
    shapes = {a.shape for a in frame.values() if a.ndim in (2, 3)}
    return shapes.pop() if len(shapes) == 1 else None


def _write_poly_data(path: Path, frame: dict[str, np.ndarray], time: float) -> Path:
    x = frame["x"]
    n = len(x)
    fields = {k: a for k, a in frame.items() if k != "x" and a.ndim in (1, 2) and len(a) == n}
    ids = np.arange(n, dtype=np.int64)
    piece = (f'<Piece NumberOfPoints="{n}" NumberOfVerts="{n}">\n'
             f"<Points>\n{_data_array('', _pad3(x))}</Points>\n"
             f"<Verts>\n{_data_array('connectivity', ids)}{_data_array('offsets', ids + 1)}</Verts>\n"
             f"<PointData>\n{''.join(_data_array(k, _pad3(a)) for k, a in fields.items())}"
             "</PointData>\n</Piece>\n")
    return _write_xml(path, "PolyData", "", piece, time)


def _write_image_data(path: Path, frame: dict[str, np.ndarray], time: float) -> Path:
    shape = _grid_shape(frame)
    extent = " ".join(f"0 {n}" for n in (list(shape) + [0])[:3])
    # VTK orders cells x fastest: Fortran order of an array indexed [x, y, z].
    cells = "".join(_data_array(k, a.ravel(order="F")) for k, a in frame.items() if a.shape == shape)
    piece = f'<Piece Extent="{extent}">\n<PointData/>\n<CellData>\n{cells}</CellData>\n</Piece>\n'
    return _write_xml(path, "ImageData", f' WholeExtent="{extent}" Origin="0 0 0" Spacing="1 1 1"', piece, time)


def _write_xml(path: Path, kind: str, attributes: str, piece: str, time: float) -> Path:
    """A VTK XML file of one piece whose dataset also carries its time as ``TimeValue`` field data."""
    time_field = f"<FieldData>\n{_data_array('TimeValue', np.array([time]))}</FieldData>\n"
    with atomic_write(path, "w") as f:
        f.write(f'<?xml version="1.0"?>\n<VTKFile type="{kind}" version="1.0" byte_order="LittleEndian" '
                f'header_type="UInt64">\n<{kind}{attributes}>\n{time_field}{piece}</{kind}>\n</VTKFile>\n')
    return path


def _data_array(name: str, a: np.ndarray) -> str:
    """An inline binary DataArray: base64 of the byte count (UInt64) and of the little-endian values."""
    a = np.asarray(a)
    vtk_type = VTK_TYPES.get(a.dtype.str[1:])
    if vtk_type is None:
        raise ShoalError(f"frame array {name!r}: dtype {a.dtype} has no VTK type")
    data = np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("<")).tobytes()
    header = np.array([len(data)], dtype="<u8").tobytes()
    components = a.shape[1] if a.ndim == 2 else 1
    name_attr = f" Name={quoteattr(name)}" if name else ""
    return (f'<DataArray type="{vtk_type}"{name_attr} NumberOfComponents="{components}" '
            f'NumberOfTuples="{len(a)}" format="binary">'
            f"{base64.b64encode(header).decode()}{base64.b64encode(data).decode()}</DataArray>\n")


def _pad3(a: np.ndarray) -> np.ndarray:
    """Vectors of 2 components padded with zeros to the 3 VTK draws as vectors (other arrays as they are)."""
    if a.ndim != 2 or a.shape[1] != 2:
        return a
    out = np.zeros((len(a), 3), dtype=a.dtype)
    out[:, : a.shape[1]] = a
    return out


def add_to_series(pvd: str | Path, time: float, file: str | Path) -> Path:
    """List ``file`` at simulated ``time`` in the ParaView collection ``pvd`` (made if missing).

    An entry for the same file is replaced (a resumed run writes its steps again); entries are
    kept in file-name order, which for ``state-<step>`` is step order. The collection is
    rewritten atomically.

    Parameters
    ----------
    pvd : str or Path
        The ``.pvd`` file.
    time : float
        Simulated seconds of the step ``file`` holds.
    file : str or Path
        The step's data file, in ``pvd``'s folder or below it.

    Returns
    -------
    Path
        ``pvd``.
    """
    pvd = Path(pvd)
    entries = {}
    if pvd.exists():
        try:
            for d in ET.parse(pvd).getroot().iter("DataSet"):
                entries[d.get("file")] = float(d.get("timestep"))
        except (ET.ParseError, TypeError, ValueError) as exc:
            raise ShoalError(f"{pvd}: not a ParaView collection this run can add to ({exc})") from None
    entries[Path(file).relative_to(pvd.parent).as_posix()] = float(time)
    datasets = "".join(f'    <DataSet timestep="{entries[f]!r}" group="" part="0" file={quoteattr(f)}/>\n'
                       for f in sorted(entries))
    write_text(pvd, '<?xml version="1.0"?>\n<VTKFile type="Collection" version="1.0" byte_order="LittleEndian">\n'
               f"  <Collection>\n{datasets}  </Collection>\n</VTKFile>\n")
    return pvd
