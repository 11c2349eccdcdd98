"""What users hand the shallow-water app as arrays: a bed or an initial state on the cell
centres of one level of the app's grid, read from a file, or an initial state from a Python
callable.

A scenario file is plain data, so it can only name a file: ``app.bathymetry_file`` an
``.npy`` array of bed heights, ``app.initial`` an ``.npz`` archive of the water (``h`` or
``eta``, and ``u``, ``v``). From Python, ``app.initial`` may also be a callable
``f(x, y, b) -> (h, u, v)``; :class:`FromPython` carries it under the name a scenario file
records (``"python:module.name"``), so a run folder's ``config.toml`` says where the water came
from, and a resumed run, whose state is in its checkpoint, does not need the callable.

Every check here fails with one line naming the key, the file or the callable, and what is
wrong, before anything is written.
"""

from __future__ import annotations

import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ...errors import ShoalError

#: How a scenario file names an initial state that came from a Python callable.
PYTHON = "python:"
#: The arrays of an initial-state archive: the depth or the surface, and the velocity.
WATER = ("h", "eta", "u", "v")
_NPY, _ZIP = b"\x93NUMPY", b"PK"


class FromPython(str):
    """A Python callable ``f(x, y, b) -> (h, u, v)`` set as ``app.initial``: a string to every
    serialiser (``"python:module.qualified_name"``), the callable to the app (``.fn``)."""

    fn: Callable

    def __new__(cls, fn: Callable) -> FromPython:
        name = getattr(fn, "__qualname__", type(fn).__qualname__)
        self = super().__new__(cls, f"{PYTHON}{getattr(fn, '__module__', None) or '?'}.{name}")
        self.fn = fn
        return self

    def __deepcopy__(self, memo: dict) -> FromPython:
        return self  # immutable, and a callable is not copied

    def __reduce__(self):
        return FromPython, (self.fn,)


def level_shapes(blocks: list[int], block: int, max_level: int) -> dict[tuple[int, int], int]:
    """The array shape of each level's cell centres over the whole domain, to that level."""
    return {(blocks[0] * block * 2**lv, blocks[1] * block * 2**lv): lv for lv in range(max_level + 1)}


def _kind(key: str, path: str) -> bytes:
    """The first bytes of the file ``app.<key>`` names (its format), or one line why not."""
    try:
        with open(path, "rb") as f:
            head = f.read(6)
    except OSError as exc:
        raise ShoalError(f"app.{key} {path!r}: cannot read it ({exc.strerror})") from None
    if not head:
        raise ShoalError(f"app.{key} {path!r} is empty")
    return head


def _grid_array(key: str, name: str, a: np.ndarray, shapes: dict[tuple[int, int], int]) -> np.ndarray:
    """``a`` as float64 if it holds finite real numbers on one level's cell centres."""
    if a.dtype.kind not in "iuf":
        raise ShoalError(f"app.{key}: {name} holds {a.dtype} values, not real numbers")
    if a.ndim != 2 or tuple(a.shape) not in shapes:
        raise ShoalError(f"app.{key}: {name} has shape {a.shape}; it must give one level's cell centres: one of "
                         f"{', '.join(str(s) for s in shapes)}")
    a = np.asarray(a, dtype=np.float64)
    if not np.isfinite(a).all():
        raise ShoalError(f"app.{key}: {name} holds values that are not finite")
    return a


def read_bed(path: str, shapes: dict[tuple[int, int], int]) -> tuple[np.ndarray, int]:
    """The bed heights of ``app.bathymetry_file`` (an ``.npy`` array, axis 0 along x) and the
    level whose cell centres they give (``shapes`` from :func:`level_shapes`)."""
    head = _kind("bathymetry_file", path)
    if head.startswith(_ZIP):
        raise ShoalError(f"app.bathymetry_file {path!r} is an .npz archive: it takes one array saved with "
                         "numpy.save (.npy)")
    if not head.startswith(_NPY):
        raise ShoalError(f"app.bathymetry_file {path!r} is not a NumPy .npy file (one array saved with numpy.save)")
    try:
        bed = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        raise ShoalError(f"app.bathymetry_file {path!r}: cannot read its array ({exc})") from None
    bed = _grid_array("bathymetry_file", "its array", bed, shapes)
    return bed, shapes[bed.shape]


def read_water(path: str, shapes: dict[tuple[int, int], int]) -> tuple[dict[str, np.ndarray], int]:
    """The arrays of ``app.initial`` (an ``.npz`` archive of ``h`` or ``eta``, and optionally
    ``u`` and ``v``, all on the cell centres of one level) and that level."""
    key = "initial"
    if not Path(path).is_file():
        raise ShoalError(f"app.initial {path!r} does not exist")
    head = _kind(key, path)
    if not head.startswith(_ZIP):
        what = "one array (.npy)" if head.startswith(_NPY) else "not an .npz archive"
        raise ShoalError(f"app.initial {path!r} is {what}: it takes an .npz archive (numpy.savez) of h or eta, "
                         "and u and v")
    try:
        with np.load(path, allow_pickle=False) as archive:
            arrays = {name: archive[name] for name in archive.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise ShoalError(f"app.initial {path!r}: cannot read its arrays ({exc})") from None
    unknown = sorted(set(arrays) - set(WATER))
    if unknown:
        raise ShoalError(f"app.initial {path!r} holds {', '.join(unknown)}; it may hold h or eta, u and v")
    if ("h" in arrays) == ("eta" in arrays):
        raise ShoalError(f"app.initial {path!r} must hold exactly one of h (the depth) and eta (the surface)")
    arrays = {name: _grid_array(key, name, a, shapes) for name, a in arrays.items()}
    if len({a.shape for a in arrays.values()}) > 1:
        raise ShoalError(f"app.initial {path!r}: its arrays differ in shape: "
                         f"{', '.join(f'{k} {a.shape}' for k, a in arrays.items())}")
    if "h" in arrays and (arrays["h"] < 0).any():
        raise ShoalError(f"app.initial {path!r}: h is negative somewhere (negative depth)")
    return arrays, shapes[next(iter(arrays.values())).shape]


def call_water(fn: FromPython, x: np.ndarray, y: np.ndarray, b: np.ndarray,
               where: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``fn(x, y, b)``: depth and velocity at the cell centres ``x, y`` over the bed ``b``,
    checked (three arrays or numbers that broadcast to ``x``'s shape, finite, the depth not
    negative); ``where`` names the cells in a message."""
    try:
        out = fn.fn(x, y, b)
    except ShoalError:
        raise
    except Exception as exc:  # the user's code: say whose, in one line
        raise ShoalError(f"app.initial ({fn}) failed on {where}: {type(exc).__name__}: {exc}") from None
    if not (isinstance(out, tuple | list) and len(out) == 3):
        got = f"{len(out)} values" if isinstance(out, tuple | list) else f"a {type(out).__name__}"
        raise ShoalError(f"app.initial ({fn}) must return three values (h, u, v), got {got} on {where}")
    fields = []
    for name, value in zip(("h", "u", "v"), out, strict=True):
        try:
            a = np.broadcast_to(np.asarray(value, dtype=np.float64), x.shape)
        except (TypeError, ValueError):
            raise ShoalError(f"app.initial ({fn}) returned {name} that is not numbers broadcasting to the cells' "
                             f"shape {x.shape} on {where}") from None
        if not np.isfinite(a).all():
            raise ShoalError(f"app.initial ({fn}) returned {name} not finite on {where}")
        fields.append(a)
    if (fields[0] < 0).any():
        raise ShoalError(f"app.initial ({fn}) returned a negative depth h on {where}")
    return fields[0], fields[1], fields[2]
