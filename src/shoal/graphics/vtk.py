"""VTK output, which ParaView and VisIt read directly: the one writer of shoal's VTK files.

:class:`VTKFile` writes a VTK XML file whose arrays are zlib-compressed (VTK's
``vtkZLibDataCompressor``, level 1, blocks of 1 MiB compressed on every usable core) and
appended raw after the XML, each array streamed block by block from its chunks, so a field is
never copied whole in memory. :func:`write_image_data` and
:func:`write_poly_data` are the two kinds of data set shoal writes; :func:`write_series` turns a
run folder's frames into a time series of them, and :func:`add_to_series` lists a file an app
exported itself.

A frame's arrays go into the file physical ones first (ParaView's default colouring is the
first scalar, and its lists follow the file's order), under their physical names
(:data:`PHYSICAL_NAMES`: ``rho`` is written ``density``), and bookkeeping (:data:`BOOKKEEPING`:
particle ids, kinds, cells) last.

The XML is written here rather than by a library: meshio writes neither poly data nor image
data, and the ``vtk`` wheel (over 500 MB) would be a heavy dependency for a few lines of
documented XML. The test suite reads the files back with VTK's own readers.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
import zlib
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import quoteattr

import numpy as np

from ..errors import ShoalError
from ..files import atomic_write, write_text
from ..resources import usable_cores

SERIES_FOLDER = "paraview"  # under the run folder's frames/
SERIES_FILE = "series.pvd"

# VTK XML type names of the NumPy dtypes a frame holds.
VTK_TYPES = {"i1": "Int8", "u1": "UInt8", "i2": "Int16", "u2": "UInt16", "i4": "Int32", "u4": "UInt32",
             "i8": "Int64", "u8": "UInt64", "f4": "Float32", "f8": "Float64", "b1": "UInt8"}
COMPRESSOR = "vtkZLibDataCompressor"
BLOCK_BYTES = 1 << 20  # uncompressed bytes per zlib block (VTK reads any size)
ZLIB_LEVEL = 1  # on floating-point fields higher levels shrink files by ~2% for 2-3x the time
#: VTK names of frame arrays that have a physical meaning, in the order the files list them.
PHYSICAL_NAMES = {"rho": "density", "p": "pressure", "v": "velocity", "m": "mass"}
#: Frame arrays that say which particle or cell a value belongs to: listed last.
BOOKKEEPING = ("id", "kind", "cell", "tile", "owner")
_OFFSET_WIDTH = len('offset=""') + 20  # room for any 64-bit offset; VTK reserves the same


# ----- arrays and files --------------------------------------------------------------------------
@dataclass(frozen=True)
class Array:
    """A VTK DataArray: its values come as chunks in file order (for a grid, x fastest).

    Attributes
    ----------
    name : str or None
        Its name (``None``: unnamed, as ``Points`` coordinates are).
    dtype : numpy.dtype
        Little-endian type of its values.
    components : int
        Values per tuple (3 for vectors).
    tuples : int
        Number of tuples (points or cells).
    chunks : callable
        ``chunks()`` yields the values, ``tuples * components`` in all, in pieces of any size.
    """

    name: str | None
    dtype: np.dtype
    components: int
    tuples: int
    chunks: Callable[[], Iterable[np.ndarray]]

    @classmethod
    def of(cls, name: str | None, values: np.ndarray) -> Array:
        """An array in memory called ``name``: ``values`` 1D is one component per tuple, 2D
        ``(tuples, components)``."""
        values = np.asarray(values)
        return cls(name, values.dtype, values.shape[1] if values.ndim == 2 else 1, len(values), lambda: [values])

    @classmethod
    def grid(cls, name: str, field: np.ndarray) -> Array:
        """A ``field`` indexed ``[x, y(, z)]`` as the array ``name`` of one value per cell or
        point, x fastest (VTK's order), written one slice of the last axis at a time."""
        field = np.asarray(field)
        return cls(name, field.dtype, 1, field.size, lambda: (field[..., k].ravel(order="F")
                                                              for k in range(field.shape[-1])))

    @property
    def nbytes(self) -> int:
        """Bytes of its values, uncompressed."""
        return self.tuples * self.components * self.dtype.itemsize

    def element(self, offset: str) -> str:
        """Its ``DataArray`` element, appended data at the ``offset`` attribute given (a
        :class:`~shoal.errors.ShoalError` for a dtype VTK has no type for)."""
        vtk_type = VTK_TYPES.get(self.dtype.str[1:])
        if vtk_type is None:
            raise ShoalError(f"array {self.name!r}: dtype {self.dtype} has no VTK type")
        name = f" Name={quoteattr(self.name)}" if self.name is not None else ""
        return (f'<DataArray type="{vtk_type}"{name} NumberOfComponents="{self.components}" '
                f'NumberOfTuples="{self.tuples}" format="appended" {offset}/>\n')


class VTKFile:
    """One VTK XML file being put together: its XML body and the arrays it appends.

    Call :meth:`array` for each DataArray where the body holds it, then :meth:`write`.

    Parameters
    ----------
    kind : str
        The data set type: ``"ImageData"``, ``"PolyData"``, ...
    attributes : str
        The data set element's attributes (``' WholeExtent="0 4 0 3 0 0" ...'``).
    """

    def __init__(self, kind: str, attributes: str = ""):
        self.kind, self.attributes = kind, attributes
        self.arrays: list[Array] = []

    def array(self, array: Array) -> str:
        """The DataArray element of ``array``, whose values :meth:`write` appends."""
        self.arrays.append(array)
        return array.element(_offset_slot(len(self.arrays) - 1))

    def write(self, path: str | Path, body: str) -> Path:
        """Write the file atomically: the XML with ``body`` inside the data set element, then
        every array compressed, each offset filled in once its place is known.

        Returns
        -------
        Path
            ``path``.
        """
        path = Path(path)
        head = ('<?xml version="1.0"?>\n'
                f'<VTKFile type="{self.kind}" version="1.0" byte_order="LittleEndian" header_type="UInt64" '
                f'compressor="{COMPRESSOR}">\n<{self.kind}{self.attributes}>\n{body}</{self.kind}>\n'
                '<AppendedData encoding="raw">\n_').encode()
        slots = [head.index(_offset_slot(k).encode()) for k in range(len(self.arrays))]
        threads = usable_cores()
        with atomic_write(path, "wb") as fh, ThreadPoolExecutor(threads) as pool:
            fh.write(head)
            offsets = [_append(fh, a, len(head), pool, 2 * threads) for a in self.arrays]
            fh.write(b"\n</AppendedData>\n</VTKFile>\n")
            for slot, offset in zip(slots, offsets, strict=True):
                fh.seek(slot)
                fh.write(f'offset="{offset}"'.ljust(_OFFSET_WIDTH).encode())
        return path


def _offset_slot(k: int) -> str:
    """The k-th array's offset attribute until :meth:`VTKFile.write` knows it: as wide as any."""
    return f'offset="{k}"'.ljust(_OFFSET_WIDTH)


def _append(fh, array: Array, start: int, pool: ThreadPoolExecutor, ahead: int) -> int:
    """Append ``array`` compressed (VTK's header of UInt64: blocks, block size, last block's
    size or 0 when full, each block's compressed size; then the blocks) by the ``pool``'s
    threads, ``ahead`` blocks in flight at most; return its offset from ``start``, where the
    appended data begins."""
    at = fh.tell()
    n = array.nbytes
    nblocks = -(-n // BLOCK_BYTES)
    fh.write(bytes(8 * (3 + nblocks)))  # the header, written once the blocks' sizes are known
    sizes = []
    for packed in _compressed(_blocks(array, BLOCK_BYTES), pool, ahead):
        sizes.append(len(packed))
        fh.write(packed)
    end = fh.tell()
    fh.seek(at)
    fh.write(np.array([nblocks, BLOCK_BYTES, n % BLOCK_BYTES, *sizes], dtype="<u8").tobytes())
    fh.seek(end)
    return at - start


def _compressed(blocks: Iterable[bytes | memoryview], pool: ThreadPoolExecutor, ahead: int) -> Iterator[bytes]:
    """Each block zlib-compressed, in order, by the ``pool``'s threads (zlib lets go of the
    interpreter lock), ``ahead`` blocks in flight at most."""
    flight: deque = deque()
    for block in blocks:
        flight.append(pool.submit(zlib.compress, block, ZLIB_LEVEL))
        if len(flight) >= ahead:
            yield flight.popleft().result()
    while flight:
        yield flight.popleft().result()


def _blocks(array: Array, size: int) -> Iterator[bytes | memoryview]:
    """The bytes of ``array``'s chunks cut into blocks of ``size`` (the last one shorter); a
    ValueError (a caller's mistake) when they are not the bytes the array declares."""
    pending = bytearray()
    total = 0
    for chunk in array.chunks():
        view = memoryview(np.ascontiguousarray(chunk, dtype=array.dtype).reshape(-1).view(np.uint8))
        total += len(view)
        if pending:
            take = size - len(pending)
            pending += view[:take]
            view = view[take:]
            if len(pending) < size:
                continue
            yield bytes(pending)
            pending = bytearray()
        whole = len(view) // size * size
        for i in range(0, whole, size):
            yield view[i:i + size]
        pending += view[whole:]
    if pending:
        yield bytes(pending)
    if total != array.nbytes:
        raise ValueError(f"array {array.name!r}: {total} bytes in its chunks, {array.nbytes} declared")


# ----- data sets ---------------------------------------------------------------------------------
def write_image_data(path: str | Path, extent: tuple[int, ...], time: float, *, cells: Iterable[Array] = (),
                     points: Iterable[Array] = (), origin: tuple[float, ...] = (0.0, 0.0, 0.0),
                     spacing: tuple[float, ...] = (1.0, 1.0, 1.0)) -> Path:
    """Write a uniform grid as VTK image data (``.vti``), atomically.

    Parameters
    ----------
    path : str or Path
        The ``.vti`` file; its folder must exist.
    extent : tuple of int
        Cells along x, y (and z): the grid has one more point than cells along each axis.
    time : float
        Simulated seconds, kept as the field data ``TimeValue``.
    cells, points : iterable of Array
        Cell data and point data, x fastest. The first single-component array of each is its
        active scalars, the first of three components its active vectors.
    origin, spacing : tuple of float
        The first point and the distance between points along each axis (metres).

    Returns
    -------
    Path
        ``path``.
    """
    extent = (tuple(int(n) for n in extent) + (0, 0))[:3]
    whole = " ".join(f"0 {n}" for n in extent)
    f = VTKFile("ImageData", f' WholeExtent="{whole}" Origin="{_numbers(origin)}" Spacing="{_numbers(spacing)}"')
    body = (f"{_time_field(f, time)}<Piece Extent=\"{whole}\">\n{_attribute_data(f, 'PointData', points)}"
            f"{_attribute_data(f, 'CellData', cells)}</Piece>\n")
    return f.write(path, body)


def write_poly_data(path: str | Path, x: np.ndarray, time: float, fields: Iterable[Array] = (),
                    triangles: np.ndarray | None = None) -> Path:
    """Write particles, or a triangle mesh, as VTK poly data (``.vtp``), atomically: one vertex
    per particle, or one polygon per triangle.

    Parameters
    ----------
    path : str or Path
        The ``.vtp`` file; its folder must exist.
    x : ndarray, shape (n, 2 or 3)
        Positions (metres); 2D ones get z = 0.
    time : float
        Simulated seconds, kept as the field data ``TimeValue``.
    fields : iterable of Array
        Point data, one tuple per particle; active scalars and vectors as in
        :func:`write_image_data`.
    triangles : ndarray of int, shape (m, 3), optional
        A mesh's faces on the points (a cloth): written as polygons instead of vertices.

    Returns
    -------
    Path
        ``path``.
    """
    n = len(x)
    if triangles is None:
        kind, cells, connectivity = "Verts", n, np.arange(n, dtype=np.int64)
    else:
        kind, cells, connectivity = "Polys", len(triangles), np.asarray(triangles, np.int64).ravel()
    offsets = np.arange(1, cells + 1, dtype=np.int64) * (len(connectivity) // max(cells, 1))
    f = VTKFile("PolyData")
    body = (f'{_time_field(f, time)}<Piece NumberOfPoints="{n}" NumberOf{kind}="{cells}">\n'
            f"<Points>\n{f.array(Array.of(None, pad3(x)))}</Points>\n"
            f"<{kind}>\n{f.array(Array.of('connectivity', connectivity))}{f.array(Array.of('offsets', offsets))}"
            f"</{kind}>\n{_attribute_data(f, 'PointData', fields)}</Piece>\n")
    return f.write(path, body)


def _time_field(f: VTKFile, time: float) -> str:
    return f"<FieldData>\n{f.array(Array.of('TimeValue', np.array([float(time)])))}</FieldData>\n"


def _attribute_data(f: VTKFile, tag: str, arrays: Iterable[Array]) -> str:
    """``<PointData>`` or ``<CellData>`` of ``arrays``, naming the active scalars and vectors."""
    arrays = list(arrays)
    scalars = next((a.name for a in arrays if a.components == 1), None)
    vectors = next((a.name for a in arrays if a.components == 3), None)
    active = "".join(f" {k}={quoteattr(v)}" for k, v in (("Scalars", scalars), ("Vectors", vectors)) if v)
    return f"<{tag}{active}>\n{''.join(f.array(a) for a in arrays)}</{tag}>\n"


def _numbers(values: Iterable[float]) -> str:
    return " ".join(repr(float(v)) for v in (tuple(values) + (0.0, 0.0, 0.0))[:3])


def pad3(a: np.ndarray) -> np.ndarray:
    """Vectors of 2 components padded with zeros to the 3 VTK draws as vectors (other arrays as they are)."""
    if a.ndim != 2 or a.shape[1] != 2:
        return a
    out = np.zeros((len(a), 3), dtype=a.dtype)
    out[:, : a.shape[1]] = a
    return out


def ordered(frame: dict[str, np.ndarray], keep: Callable[[np.ndarray], bool]) -> list[tuple[str, np.ndarray]]:
    """The ``frame``'s arrays that ``keep`` accepts as (VTK name, array): the physical ones of
    :data:`PHYSICAL_NAMES` first under their physical names, then the others in the frame's
    order, then :data:`BOOKKEEPING`."""
    names = [k for k, a in frame.items() if keep(a)]
    first = [k for k in PHYSICAL_NAMES if k in names]
    last = [k for k in BOOKKEEPING if k in names]
    middle = [k for k in names if k not in first and k not in last]
    return [(PHYSICAL_NAMES.get(k, k), frame[k]) for k in first + middle + last]


# ----- time series -------------------------------------------------------------------------------
def write_series(run_folder: str | Path) -> Path:
    """Convert a run folder's frames into a ParaView time series.

    Every ``frames/state-<step>.npz`` becomes ``frames/paraview/state-<step>.vtp`` (a frame
    with particle positions ``x``: one vertex per particle, every per-particle array as point
    data) or ``.vti`` (a frame of grid arrays: one cell per grid cell, the arrays as cell
    data, unit spacing), arrays ordered and named by :func:`ordered`. ``frames/series.pvd``
    lists them with their simulated time: the frame's ``time`` when it holds one, else its step
    (the clock of apps without one).

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
    entries = {}
    for path in paths:
        with np.load(path, allow_pickle=False) as z:
            frame = {k: z[k] for k in z.files}
        step = int(re.fullmatch(r"state-(\d+)", path.stem).group(1))
        time = float(frame["time"]) if "time" in frame else float(step)
        target = write_frame(out / path.stem, frame, time)
        if target is None:
            raise ShoalError(f"{path}: neither particles (x of shape (n, 2 or 3)) nor grid arrays of one shape")
        entries[target.relative_to(frames).as_posix()] = time
    return _write_collection(frames / SERIES_FILE, entries)


def write_frame(stem: Path, frame: dict[str, np.ndarray], time: float) -> Path | None:
    """A frame as ``stem.vtp`` (particles: positions ``x``, every per-particle array as point
    data; a mesh when the frame also holds its ``triangles``) or ``stem.vti`` (grid arrays of
    one shape: one cell per grid cell, unit spacing), its arrays ordered and named by
    :func:`ordered` and its simulated ``time`` as ``TimeValue``; ``None`` for a frame that is
    neither."""
    if _is_particles(frame):
        n = len(frame["x"])
        fields = ordered({k: a for k, a in frame.items() if k not in ("x", "triangles")},
                         lambda a: a.ndim in (1, 2) and len(a) == n)
        arrays = [Array.of(k, pad3(a)) for k, a in fields]
        return write_poly_data(stem.with_suffix(".vtp"), frame["x"], time, arrays, triangles=frame.get("triangles"))
    shape = _grid_shape(frame)
    if shape is None:
        return None
    cells = [Array.grid(k, a) for k, a in ordered(frame, lambda a: a.shape == shape)]
    return write_image_data(stem.with_suffix(".vti"), shape, time, cells=cells)


def _is_particles(frame: dict[str, np.ndarray]) -> bool:
    x = frame.get("x")
    return x is not None and x.ndim == 2 and x.shape[1] in (2, 3)


def _grid_shape(frame: dict[str, np.ndarray]) -> tuple[int, ...] | None:
    """The common shape of a frame's 2D or 3D arrays (``None`` when there is none)."""
    shapes = {a.shape for a in frame.values() if a.ndim in (2, 3)}
    return shapes.pop() if len(shapes) == 1 else None


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
    entries = read_series(pvd) if pvd.exists() else {}
    entries[Path(file).relative_to(pvd.parent).as_posix()] = float(time)
    return _write_collection(pvd, entries)


def read_series(pvd: str | Path) -> dict[str, float]:
    """The files a ParaView collection lists (relative to its folder) and their times.

    Raises
    ------
    ShoalError
        ``pvd`` is not a collection of data sets with numeric times.
    """
    try:
        return {d.get("file"): float(d.get("timestep")) for d in ET.parse(pvd).getroot().iter("DataSet")}
    except (ET.ParseError, OSError, TypeError, ValueError) as exc:
        raise ShoalError(f"{pvd}: not a ParaView collection ({exc})") from None


def _write_collection(pvd: Path, entries: dict[str, float]) -> Path:
    """A ``.pvd`` listing ``entries`` (file -> time) in file-name order, written atomically."""
    datasets = "".join(f'    <DataSet timestep="{entries[f]!r}" group="" part="0" file={quoteattr(f)}/>\n'
                       for f in sorted(entries))
    write_text(pvd, '<?xml version="1.0"?>\n<VTKFile type="Collection" version="1.0" byte_order="LittleEndian">\n'
               f"  <Collection>\n{datasets}  </Collection>\n</VTKFile>\n")
    return pvd
