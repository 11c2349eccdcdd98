"""A tile's state as flat NumPy arrays, and back.

Tile states are whatever an app keeps: usually a dict of arrays and a few numbers, sometimes
lists of dicts (cached halos). To move a state to another process or write it to a file
without pickling it, :func:`flatten` turns it into ``{path: array}`` plus a layout (plain
JSON, so reading one back never runs code) and :func:`unflatten` rebuilds the same Python
structure: dicts with string keys, lists, tuples, NumPy arrays, and bool/int/float/str/None
scalars, each restored with its own type so that arithmetic on it stays bitwise the same.

Many states at once (a checkpoint's tiles) are stored as columns: :func:`to_columns` gathers
the entries that share a path, dtype and trailing shape from every state into one array
(concatenated along the first axis) so a file holds a few large arrays instead of one small
array per entry and tile; :func:`from_columns` splits them back.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ShoalError

LAYOUT = "__layout__"  # the key of the layout in a flattened state
compact_json = json.JSONEncoder(separators=(",", ":")).encode  # made once: json.dumps makes one per call
SCALARS = {bool: "bool", int: "int", float: "float", str: "str"}


def flatten(value: Any) -> dict[str, np.ndarray]:
    """``{path: array}`` of every array and scalar in ``value``, plus its layout under ``__layout__``."""
    arrays: dict[str, np.ndarray] = {}
    layout = _flatten(value, "", arrays)
    arrays[LAYOUT] = np.frombuffer(compact_json(layout).encode(), dtype=np.uint8)
    return arrays


def unflatten(arrays: dict[str, np.ndarray]) -> Any:
    """The structure :func:`flatten` was given (arrays are the stored ones, not copies)."""
    if LAYOUT not in arrays:
        raise ShoalError("a packed tile state has no layout")
    return _unflatten(_layout(bytes(np.asarray(arrays[LAYOUT], dtype=np.uint8))), "", arrays)


@functools.lru_cache(maxsize=1024)
def _layout(text: bytes) -> Any:
    """A layout read from its JSON (read only: messages repeat the same few layouts)."""
    try:
        return json.loads(text.decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ShoalError(f"a packed tile state has a damaged layout: {exc}") from None


def _flatten(value: Any, path: str, out: dict) -> Any:
    if isinstance(value, np.ndarray):
        if value.dtype.hasobject:
            raise ShoalError(f"tile state entry {path or '/'} holds Python objects: keep arrays of numbers")
        out[path] = value
        return "a"
    if value is None:
        return "none"
    if type(value) is str:
        out[path] = np.frombuffer(value.encode(), dtype=np.uint8)  # UTF-8: exact, trailing NULs too
        return "str"
    if type(value) in SCALARS:
        out[path] = np.asarray(value)
        if out[path].dtype.hasobject:
            raise ShoalError(f"tile state entry {path or '/'} is an integer beyond 64 bits")
        return SCALARS[type(value)]
    if isinstance(value, np.generic):
        out[path] = np.asarray(value)
        return "np"
    if isinstance(value, dict):
        if not all(isinstance(k, str) and "/" not in k for k in value):
            raise ShoalError(f"tile state dict {path or '/'} needs string keys without '/'")
        return {"dict": {k: _flatten(v, f"{path}/{k}", out) for k, v in value.items()}}
    if isinstance(value, (list, tuple)):
        kind = "list" if isinstance(value, list) else "tuple"
        return {kind: [_flatten(v, f"{path}/{i}", out) for i, v in enumerate(value)]}
    raise ShoalError(f"tile state entry {path or '/'} is a {type(value).__name__}: keep arrays, numbers, "
                     "strings, lists and dicts")


def _unflatten(layout: Any, path: str, arrays: dict) -> Any:
    if layout == "none":
        return None
    if isinstance(layout, str):
        if path not in arrays:
            raise ShoalError(f"a packed tile state lacks entry {path or '/'}")
        a = arrays[path]
        if layout == "a":
            return a
        if layout == "np":
            return a[()]
        if layout == "str":
            try:
                return bytes(np.asarray(a, dtype=np.uint8)).decode()
            except (UnicodeDecodeError, ValueError, TypeError):
                raise ShoalError(f"a packed tile state's text {path or '/'} is not UTF-8") from None
        kind = {v: k for k, v in SCALARS.items()}.get(layout)
        if kind is None:
            raise ShoalError(f"a packed tile state names an unknown kind {layout!r}")
        return kind(a[()])
    if isinstance(layout, dict) and len(layout) == 1:
        (kind, items), = layout.items()
        if kind == "dict" and isinstance(items, dict):
            return {k: _unflatten(v, f"{path}/{k}", arrays) for k, v in items.items()}
        if kind in ("list", "tuple") and isinstance(items, list):
            seq = [_unflatten(v, f"{path}/{i}", arrays) for i, v in enumerate(items)]
            return seq if kind == "list" else tuple(seq)
    raise ShoalError("a packed tile state has a layout this shoal cannot read")


@dataclass
class Column:
    """One entry ``path`` of several flattened states, concatenated along the first axis.

    ``holders[i]`` is the position (among the states) of the i-th state that has this entry,
    and its part of ``data`` is ``data[offsets[i]:offsets[i + 1]]``. A scalar entry (shape
    ``()``) takes one element.
    """

    path: str
    data: np.ndarray
    scalar: bool
    holders: np.ndarray
    offsets: np.ndarray


def to_columns(values: list[Any]) -> tuple[list[str], np.ndarray, list[Column]]:
    """The distinct JSON layouts of ``values``, which layout each one has, and their entries as columns."""
    layouts: dict[str, int] = {}
    layout_of = np.zeros(len(values), dtype=np.int64)
    parts: dict[tuple, tuple[list[int], list[np.ndarray]]] = {}
    for i, value in enumerate(values):
        arrays = flatten(value)
        text = bytes(arrays.pop(LAYOUT)).decode()
        layout_of[i] = layouts.setdefault(text, len(layouts))
        for path, a in arrays.items():
            key = (path, a.dtype.str, a.shape[1:] if a.ndim else None)
            holders, pieces = parts.setdefault(key, ([], []))
            holders.append(i)
            pieces.append(a if a.ndim else a.reshape(1))
    columns = []
    for (path, dtype, trailing), (holders, pieces) in parts.items():
        lengths = [len(p) for p in pieces]
        data = np.concatenate(pieces) if pieces else np.zeros(0, dtype=dtype)
        columns.append(Column(path, data, trailing is None, np.asarray(holders, dtype=np.int64),
                              np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)])))
    return list(layouts), layout_of, columns


def from_columns(layouts: list[str], layout_of: np.ndarray, columns: list[Column]) -> list[Any]:
    """The values :func:`to_columns` was given (each entry a copy, so no two share memory).

    Parameters
    ----------
    layouts, layout_of, columns
        What :func:`to_columns` returned (or were read back from a file).

    Raises
    ------
    ShoalError
        If a column's holders or offsets point outside the values or the data, a scalar entry
        holds other than one value, or a value names a layout that is not there.
    """
    flat: list[dict[str, np.ndarray]] = [{} for _ in layout_of]
    for c in columns:
        _check_column(c, len(flat))
        for i, lo, hi in zip(c.holders.tolist(), c.offsets[:-1].tolist(), c.offsets[1:].tolist(), strict=True):
            piece = c.data[lo:hi]
            if c.scalar:
                if hi - lo != 1:
                    raise ShoalError(f"packed scalar entry {c.path or '/'} does not hold one value per state")
                piece = piece.reshape(())
            flat[i][c.path] = piece.copy()
    out = []
    for arrays, k in zip(flat, layout_of.tolist(), strict=True):
        if not 0 <= k < len(layouts):
            raise ShoalError(f"a packed state names layout {k} of {len(layouts)}")
        arrays[LAYOUT] = np.frombuffer(layouts[k].encode(), dtype=np.uint8)
        out.append(unflatten(arrays))
    return out


def _check_column(c: Column, nvalues: int) -> None:
    """Refuse a column whose holders or offsets point outside its states or its data."""
    where = f"packed entry {c.path or '/'}"
    if c.data.ndim == 0 or c.holders.ndim != 1 or c.offsets.shape != (len(c.holders) + 1,):
        raise ShoalError(f"{where} has data, holders and offsets of mismatched shapes")
    if np.any((c.holders < 0) | (c.holders >= nvalues)) or np.any(np.diff(c.offsets) < 0) or \
            c.offsets[0] < 0 or c.offsets[-1] > len(c.data):
        raise ShoalError(f"{where} has holders or offsets out of range")
