"""Legacy VTK (binary) output of particle frames, which ParaView and VisIt read directly.

One ``.vtk`` file per frame: an UNSTRUCTURED_GRID of vertex cells (VTK cell type 1), one per
particle, and the particle fields
as POINT_DATA (scalars for 1-component arrays, VECTORS for 2- or 3-component ones, padded to
3 components as VTK requires).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np


def _block(f, header: str, data: np.ndarray, dtype: str) -> None:
    f.write(header.encode())
    f.write(np.ascontiguousarray(data, dtype=dtype).tobytes())
    f.write(b"\n")


def write_particles_vtk(path: Path, x: np.ndarray, fields: dict[str, np.ndarray], title: str = "shoal") -> Path:
    """Write points ``x`` (n, 2 or 3) and per-particle ``fields`` to a legacy binary VTK file."""
    n = len(x)
    pts = np.zeros((n, 3))
    pts[:, : x.shape[1]] = x
    tmp = Path(str(path) + ".partial")
    with open(tmp, "wb") as f:
        f.write(f"# vtk DataFile Version 3.0\n{title[:200]}\nBINARY\nDATASET UNSTRUCTURED_GRID\n".encode())
        _block(f, f"POINTS {n} double\n", pts, ">f8")
        cells = np.empty((n, 2), dtype=">i4")
        cells[:, 0] = 1
        cells[:, 1] = np.arange(n)
        _block(f, f"CELLS {n} {2 * n}\n", cells, ">i4")
        _block(f, f"CELL_TYPES {n}\n", np.ones(n), ">i4")
        f.write(f"POINT_DATA {n}\n".encode())
        for name, arr in fields.items():
            arr = np.asarray(arr)
            if arr.ndim == 1:
                kind = ">i4" if arr.dtype.kind in "iub" else ">f8"
                vtype = "int" if kind == ">i4" else "double"
                _block(f, f"SCALARS {name} {vtype} 1\nLOOKUP_TABLE default\n", arr, kind)
            else:
                vec = np.zeros((n, 3))
                vec[:, : arr.shape[1]] = arr
                _block(f, f"VECTORS {name} double\n", vec, ">f8")
    os.replace(tmp, path)
    return Path(path)
