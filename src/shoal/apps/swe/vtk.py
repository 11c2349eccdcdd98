"""A shallow-water state as VTK that ParaView opens as one adaptive grid, and a time series of them.

Each written step is an overlapping-AMR file (``.vthb``, read by VTK's
``vtkXMLUniformGridAMRReader``): one ``Block`` per level with its cell size, and one box of
image data (a ``.vti`` file in the folder named after the step) per rectangle of root blocks
at that level. ParaView then knows the levels, not only the pieces: it colours or thresholds
by level and resamples the whole grid to one image. A ``.pvd`` collection lists the steps
with their simulated time; open it: its reader (VTK's collection reader) reads every level of
each step, while a ``.vthb`` opened on its own reads as many as the reader's "Default Number
Of Levels" says (0: all). Root blocks never overlap here (each holds one level at a time), so
nothing is blanked: every cell is the state's own.

VTK's level 0 is the coarsest level present (VTK refuses an empty level 0); the cell data
``level`` holds the app's own. Cell data: ``h``, ``hu``, ``hv``, ``b``, ``eta`` (``h + b``,
NaN where dry, as :meth:`~shoal.apps.swe.app.SWEApp.uniform`) and ``level``, x fastest,
zlib-compressed by :mod:`shoal.graphics.vtk`'s writer, so nothing here needs the ``vtk`` wheel.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from xml.sax.saxutils import quoteattr

import numpy as np

from ...errors import ShoalError
from ...files import write_text
from ...graphics.vtk import SERIES_FILE, SERIES_FOLDER, Array, add_to_series, write_image_data

FIELDS = ("h", "hu", "hv", "b")


def boxes(level: np.ndarray) -> list[tuple[int, int, int, int, int]]:
    """Rectangles of root blocks of one level that together cover the grid once.

    Greedy and deterministic: from the first block not yet covered (x-major), a run along y of
    blocks of its level, widened along x while the whole run matches.

    Parameters
    ----------
    level : ndarray of int, shape (nbx, nby)
        Every root block's level.

    Returns
    -------
    list of (level, bx0, bx1, by0, by1)
        Each rectangle's level and its blocks ``bx0 <= bx < bx1``, ``by0 <= by < by1``.
    """
    nbx, nby = level.shape
    free = np.ones((nbx, nby), dtype=bool)
    out = []
    for bx in range(nbx):
        for by in range(nby):
            if not free[bx, by]:
                continue
            lv = level[bx, by]
            by1 = by + 1
            while by1 < nby and free[bx, by1] and level[bx, by1] == lv:
                by1 += 1
            bx1 = bx + 1
            while bx1 < nbx and np.all(free[bx1, by:by1] & (level[bx1, by:by1] == lv)):
                bx1 += 1
            free[bx:bx1, by:by1] = False
            out.append((int(lv), bx, bx1, by, by1))
    return out


def write_step(app, gathered: dict[str, np.ndarray], path: str | Path) -> Path:
    """Write a gathered state as an overlapping-AMR file ``path`` (``.vthb``) and its boxes.

    The boxes go to the folder beside it named after its stem (emptied first), then the
    ``.vthb`` itself, atomically: a file that exists lists only boxes fully written.

    Parameters
    ----------
    app : SWEApp
        The run's app (root blocks, cell sizes, origin, dry depth).
    gathered : dict of str to ndarray
        What ``app.gather`` returned; its ``time`` goes into every box as ``TimeValue``.
    path : str or Path
        The ``.vthb`` file.

    Returns
    -------
    Path
        ``path``.
    """
    path = Path(path)
    p = app.p
    nbx, nby = app.grid
    level = np.asarray(gathered["level"], dtype=np.int64)
    if level.size != nbx * nby:
        raise ShoalError(f"a gathered state of {level.size} root blocks, the app has {nbx} x {nby}")
    n = p.block * 2**level
    start = np.concatenate(([0], np.cumsum(n * n)))
    time = float(gathered.get("time", np.nan))
    pieces = path.with_suffix("")
    if pieces.exists():
        shutil.rmtree(pieces)
    pieces.mkdir(parents=True)
    # 2:1 balance leaves no level between the coarsest and the finest empty; VTK's levels count from the coarsest.
    coarsest = int(level.min())
    listed = {lv: [] for lv in range(coarsest, int(level.max()) + 1)}
    for lv, bx0, bx1, by0, by1 in boxes(level.reshape(nbx, nby)):
        m = p.block * 2**lv
        fields = {name: np.empty(((bx1 - bx0) * m, (by1 - by0) * m)) for name in FIELDS}
        for bx in range(bx0, bx1):
            for by in range(by0, by1):
                g = bx * nby + by
                for name, a in fields.items():
                    a[(bx - bx0) * m:(bx - bx0 + 1) * m, (by - by0) * m:(by - by0 + 1) * m] = \
                        gathered[name][start[g]:start[g + 1]].reshape(m, m)
        fields["eta"] = np.where(fields["h"] > p.dry, fields["h"] + fields["b"], np.nan)
        fields["level"] = np.full(fields["h"].shape, lv, dtype=np.uint8)
        dx = p.dx0 / 2**lv
        file = pieces / f"level{lv}-{len(listed[lv])}.vti"
        _write_box(file, fields, (p.origin[0] + bx0 * p.block * p.dx0, p.origin[1] + by0 * p.block * p.dx0), dx,
                   time)
        box = f"{bx0 * m} {bx1 * m - 1} {by0 * m} {by1 * m - 1} 0 -1"
        listed[lv].append((box, file.relative_to(path.parent).as_posix()))
    body = []
    for lv, entries in listed.items():
        dx = repr(p.dx0 / 2**lv)
        sets = "".join(f'      <DataSet index="{i}" amr_box="{box}" file={quoteattr(f)}/>\n'
                       for i, (box, f) in enumerate(entries))
        body.append(f'    <Block level="{lv - coarsest}" spacing="{dx} {dx} {dx}">\n{sets}    </Block>\n')
    origin = f"{float(p.origin[0])!r} {float(p.origin[1])!r} 0"
    write_text(path, '<?xml version="1.0"?>\n<VTKFile type="vtkOverlappingAMR" version="1.1" '
               'byte_order="LittleEndian" header_type="UInt64">\n'
               f'  <vtkOverlappingAMR origin="{origin}" grid_description="XY">\n{"".join(body)}'
               "  </vtkOverlappingAMR>\n</VTKFile>\n")
    return path


def _write_box(path: Path, fields: dict[str, np.ndarray], corner: tuple[float, float], dx: float,
               time: float) -> Path:
    """One box of cells as image data: its lower-left corner, square cells of side ``dx``."""
    return write_image_data(path, fields["h"].shape, time, cells=[Array.grid(k, a) for k, a in fields.items()],
                            origin=corner, spacing=(dx, dx, dx))


def export(app, gathered: dict[str, np.ndarray], frames: str | Path, step: int) -> Path:
    """Step ``step`` of a run as ``frames/paraview/state-<step>.vthb``, listed in ``frames/series.pvd``.

    Parameters
    ----------
    app : SWEApp
        The run's app.
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
    vthb = write_step(app, gathered, frames / SERIES_FOLDER / f"state-{step:06d}.vthb")
    return add_to_series(frames / SERIES_FILE, float(gathered.get("time", step)), vthb)
