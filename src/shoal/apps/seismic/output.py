"""Seismograms as a file: a NumPy ``.npz`` archive of documented layout.

Why NumPy first: miniSEED and SAC are what seismologists' tools open, but writing them needs
ObsPy (compiled libraries and a dozen dependencies) for a handful of arrays, and both hold one
channel per trace named by a station code, with geographic coordinates at best (SAC's header)
and no place for a position in metres on the grid, the node a component was read at or the
source's parameters; SAC keeps only float32 samples. An ``.npz`` needs nothing beyond NumPy and
keeps the run's samples bit for bit beside every receiver's position and the source. With the
``obspy`` extra, :func:`~shoal.apps.seismic.streams.to_obspy` makes an ObsPy ``Stream`` of it
(codes, coordinates, distances, origin time) and ``shoal export RUN --format sac|mseed`` writes
the files.

Layout (every member an array; lengths in metres, z is depth, positive down):

``format``, ``version``
    ``"shoal-seismograms"`` and ``1``.
``times`` ``(nt,)`` float64
    ``t_n = n dt`` (s) of every sample reached: ``n = 0 .. time / dt``.
``data`` ``(nrec, nt, 3)``
    The velocity at each receiver, in the run's precision; the last axis is ``components``.
``components`` ``(3,)`` str, ``units`` str
    ``vx, vy, vz`` and ``"m/s"``.
``positions`` ``(nrec, 3)`` float64
    Each receiver's requested position ``(x, y, z)``.
``sampled_at`` ``(nrec, 3, 3)`` float64
    Where each component was read: its own staggered node nearest the receiver (no interpolation).
``dt``, ``time``
    The time step and the simulated time the file was written at (s).
``ndim``
    2 (the x-z plane: ``vy`` is zero and means nothing) or 3; a file without it is 3D.
``source_kind``, ``source_position``, ``source_amplitude``, ``source_direction``, ``source_moment``
    The source: ``force``, ``explosion`` or ``moment``; its position ``(x, y, z)``; N or N m; a
    force's direction ``(x, y, z)``; the moment tensor ``(xx, yy, zz, xy, xz, yz)``.
``source_wavelet``, ``source_f0``, ``source_t0``
    Its time function (``ricker``, ``gaussian`` or ``dgaussian``), dominant frequency (Hz) and centre (s).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ...errors import ShoalError
from ...files import save_npz
from .drawing import COMPONENTS, seismograms_so_far
from .source import nearest_node, node_position

FORMAT = "shoal-seismograms"
VERSION = 1
SEISMOGRAMS_FILE = "seismograms.npz"


def seismogram_arrays(params, gathered: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The members of a seismograms file for a gathered state (see the module's docstring).

    Parameters
    ----------
    params : SeismicParams
        The run's parameters (the source, the grid).
    gathered : dict of str to ndarray
        What ``app.gather`` returned: ``seismograms``, ``receivers``, ``time`` and ``dt``.

    Returns
    -------
    dict of str to ndarray
        The archive's members.
    """
    p = params
    times, data = seismograms_so_far(gathered)
    positions = np.asarray(gathered["receivers"], dtype=np.float64).reshape(-1, 3)
    sampled = np.array([[node_position(c, nearest_node(c, r, p.dx, p.shape), p.dx) for c in COMPONENTS]
                        for r in positions], dtype=np.float64).reshape(-1, 3, 3)
    return {
        "format": np.array(FORMAT), "version": np.array(VERSION, dtype=np.int64),
        "times": times, "data": np.ascontiguousarray(data), "components": np.array(COMPONENTS),
        "units": np.array("m/s"), "positions": positions, "sampled_at": sampled,
        "dt": np.array(float(gathered["dt"])), "time": np.array(float(gathered["time"])),
        "ndim": np.array(p.ndim, dtype=np.int64),
        "source_kind": np.array(p.source), "source_position": np.array(p.point(p.source_at), dtype=np.float64),
        "source_amplitude": np.array(float(p.amplitude)),
        "source_direction": np.array(p.direction, dtype=np.float64),
        "source_moment": np.array(p.moment, dtype=np.float64), "source_wavelet": np.array(p.wavelet),
        "source_f0": np.array(float(p.f0)), "source_t0": np.array(float(p.delay)),
    }


def write_seismograms(params, gathered: dict[str, np.ndarray], path: str | Path) -> Path:
    """Write a gathered state's seismograms so far to ``path`` (atomically, replacing it).

    Parameters
    ----------
    params : SeismicParams
        The run's parameters.
    gathered : dict of str to ndarray
        What ``app.gather`` returned.
    path : str or Path
        The ``.npz`` file.

    Returns
    -------
    Path
        ``path``.
    """
    path = Path(path)
    save_npz(path, seismogram_arrays(params, gathered))
    return path


def read_seismograms(path: str | Path) -> dict[str, np.ndarray]:
    """Every member of a seismograms file, as written.

    Parameters
    ----------
    path : str or Path
        A file :func:`write_seismograms` wrote.

    Returns
    -------
    dict of str to ndarray
        The members (see the module's docstring).

    Raises
    ------
    ShoalError
        The file is missing, not an ``.npz``, or not a seismograms file of a version this reads.
    """
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as z:
            out = {k: z[k] for k in z.files}
    except (OSError, ValueError) as exc:
        raise ShoalError(f"{path}: not a readable .npz ({exc})") from None
    if str(out.get("format", "")) != FORMAT or int(out.get("version", -1)) != VERSION:
        raise ShoalError(f"{path}: not a {FORMAT} file of version {VERSION}")
    return out
