"""A tile's state as flat NumPy arrays, and back.

Tile states are whatever an app keeps: usually a dict of arrays and a few numbers, sometimes
lists of dicts (cached halos). To move a state to another process or write it to a file
without pickling it, :func:`flatten` turns it into ``{path: array}`` plus a layout (plain
JSON, so reading one back never runs code) and :func:`unflatten` rebuilds the same Python
structure: dicts with string keys, lists, tuples, NumPy arrays, and bool/int/float/str/None
scalars, each restored with its own type so that arithmetic on it stays bitwise the same.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from ..errors import ShoalError

LAYOUT = "__layout__"  # the key of the layout in a flattened state
SCALARS = {bool: "bool", int: "int", float: "float", str: "str"}


def flatten(value: Any) -> dict[str, np.ndarray]:
    """``{path: array}`` of every array and scalar in ``value``, plus its layout under ``__layout__``."""
    arrays: dict[str, np.ndarray] = {}
    layout = _flatten(value, "", arrays)
    arrays[LAYOUT] = np.frombuffer(json.dumps(layout, separators=(",", ":")).encode(), dtype=np.uint8)
    return arrays


def unflatten(arrays: dict[str, np.ndarray]) -> Any:
    """The structure :func:`flatten` was given (arrays are the stored ones, not copies)."""
    if LAYOUT not in arrays:
        raise ShoalError("a packed tile state has no layout")
    try:
        layout = json.loads(bytes(np.asarray(arrays[LAYOUT], dtype=np.uint8)).decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ShoalError(f"a packed tile state has a damaged layout: {exc}") from None
    return _unflatten(layout, "", arrays)


def _flatten(value: Any, path: str, out: dict) -> Any:
    if isinstance(value, np.ndarray):
        if value.dtype.hasobject:
            raise ShoalError(f"tile state entry {path or '/'} holds Python objects: keep arrays of numbers")
        out[path] = value
        return "a"
    if value is None:
        return "none"
    if type(value) in SCALARS:
        out[path] = np.asarray(value)
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
