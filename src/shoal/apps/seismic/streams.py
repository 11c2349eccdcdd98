"""Seismograms as an ObsPy ``Stream``, and as SAC or miniSEED files (``shoal export``).

ObsPy is an optional extra (``pip install shoal[obspy]``), imported only here and only when
called. One trace per receiver and component, with:

- codes: network ``network`` (default ``"XX"``, the code of no registered network), station
  ``R0000``, ``R0001``, ... (the receiver's number in ``app.receivers``), location ``""``, and a
  channel named as SPECFEM names its synthetics: the SEED band code of the sampling rate
  (``F`` from 1000 Hz, ``C`` 250, ``H`` 80, ``B`` 10, ``M`` 1, else ``L``), ``X`` for a
  generated trace, and the axis ``X``, ``Y`` or ``Z``;
- samples: ``vx``, ``vy`` and ``-vz`` in m/s, so that ``Z`` points up as SEED's vertical does
  (the grid's z is depth); a 2D run (the x-z plane) has no ``Y`` trace;
- times: the first sample is the run's ``t = 0``, the source's origin time (the wavelet peaks
  ``app.t0`` later), at ``origin_time`` (default ``1970-01-01T00:00:00``, ObsPy's
  ``UTCDateTime(0)``), every ``dt``;
- ``stats.coordinates``: the receiver's ``x``, ``y`` and ``z`` (depth) in metres on the grid,
  and ``elevation`` (``-z``); ``stats.distance``: its horizontal distance from the source in
  metres (what ``Stream.plot(type="section")`` reads);
- ``stats.sac``: the same for SAC files: ``dist`` (km), ``stdp`` (receiver depth, m),
  ``evdp`` (source depth, km), ``o = b = 0`` (the reference time is the origin time, ``iztype``
  IO), ``user0..2`` the receiver's x, y, z and ``user3..5`` the source's (m), ``kevnm`` the
  scenario's name. Geographic headers (``stla``, ``evlo``, ...) stay unset: the grid has no
  geography, and ``lcalda`` is off so that readers keep ``dist``.

miniSEED keeps only the codes, the start time, the sampling rate and the samples (in the run's
precision); SAC keeps the headers above and float32 samples.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ...errors import ShoalError
from .output import SEISMOGRAMS_FILE, read_seismograms, seismogram_arrays

NETWORK = "XX"
FORMATS = {"sac": "SAC", "mseed": "MSEED"}
# SEED band codes by the lowest sampling rate (Hz) they stand for, fastest first
BANDS = ((1000.0, "F"), (250.0, "C"), (80.0, "H"), (10.0, "B"), (1.0, "M"), (0.0, "L"))
AXES = ("X", "Y", "Z")


def band_code(sampling_rate: float) -> str:
    """The SEED band code of a sampling rate (Hz): ``F``, ``C``, ``H``, ``B``, ``M`` or ``L``."""
    return next(code for low, code in BANDS if sampling_rate >= low)


def _seismograms(source) -> tuple[dict[str, np.ndarray], str]:
    """A seismograms file's members and the run's name, from a run folder (its final state,
    else its frames' seismograms so far), a seismograms ``.npz`` or its members."""
    if isinstance(source, dict):
        return source, ""
    path = Path(source)
    if not path.exists():
        raise ShoalError(f"{path}: no such run folder or seismograms file")
    if not path.is_dir():
        return read_seismograms(path), path.stem
    final, config = path / "state" / "final.npz", path / "config.toml"
    if final.exists() and config.exists():
        import tomllib

        from .params import SeismicParams

        try:
            table = tomllib.loads(config.read_text())  # the run's resolved scenario, as shoal wrote it
            app = dict(table.get("app", {}))
            with np.load(final, allow_pickle=False) as z:
                gathered = {k: z[k] for k in z.files}
        except (OSError, ValueError) as exc:
            raise ShoalError(f"{path}: cannot read its final state or configuration ({exc})") from None
        name = app.pop("name", None)
        if name != "seismic" or "seismograms" not in gathered:
            raise ShoalError(f"{path}: a run of app {name!r}, not seismic: it has no seismograms")
        try:
            params = SeismicParams(**app)
        except TypeError as exc:
            raise ShoalError(f"{config}: not a seismic run's [app] table ({exc})") from None
        return seismogram_arrays(params, gathered), str(table.get("name", path.name))
    if (path / "frames" / SEISMOGRAMS_FILE).exists():
        return read_seismograms(path / "frames" / SEISMOGRAMS_FILE), path.name
    raise ShoalError(f"{path}: neither a finished seismic run (state/final.npz) nor one with "
                     f"frames/{SEISMOGRAMS_FILE}")


def to_obspy(source, *, origin_time=None, network: str = NETWORK, location: str = ""):
    """A run's seismograms as an ``obspy.Stream`` (see the module's docstring for the headers).

    Parameters
    ----------
    source : str, Path or dict
        A seismic run folder (its ``frames/seismograms.npz``), a seismograms ``.npz``, or the
        members :func:`~shoal.apps.seismic.output.read_seismograms` returns.
    origin_time : obspy.UTCDateTime or str, optional
        The absolute time of the run's ``t = 0`` (default ``UTCDateTime(0)``,
        1970-01-01T00:00:00).
    network : str
        The network code (at most 2 characters).
    location : str
        The location code (at most 2 characters).

    Returns
    -------
    obspy.Stream
        One trace per receiver and component, receiver by receiver (X, Y, Z).

    Raises
    ------
    ShoalError
        ObsPy is not installed, the codes are too long, or ``source`` is no seismograms.
    """
    try:
        from obspy import Stream, Trace, UTCDateTime
        from obspy.core import AttribDict
    except ImportError:
        raise ShoalError("seismograms as ObsPy streams need ObsPy: pip install shoal[obspy]") from None
    if len(network) > 2 or len(location) > 2:
        raise ShoalError(f"network {network!r} and location {location!r} codes take at most 2 characters")
    s, name = _seismograms(source)
    try:
        start = UTCDateTime(0) if origin_time is None else UTCDateTime(origin_time)
    except (TypeError, ValueError) as exc:
        raise ShoalError(f"origin time {origin_time!r} is not a time ObsPy reads ({exc})") from None
    dt = float(s["dt"])
    data = np.asarray(s["data"])
    positions = np.asarray(s["positions"], dtype=float).reshape(-1, 3)
    src = np.asarray(s["source_position"], dtype=float)
    if len(positions) > 10_000:
        raise ShoalError(f"{len(positions)} receivers: station codes R0000..R9999 name at most 10000")
    band = band_code(1.0 / dt)
    axes = (0, 2) if int(s.get("ndim", 3)) == 2 else (0, 1, 2)  # a 2D run (the x-z plane) has no vy
    traces = []
    for r, where in enumerate(positions):
        offset = float(np.hypot(*(where[:2] - src[:2])))
        for c in axes:
            sac = {"dist": offset / 1000.0, "stdp": float(where[2]), "evdp": float(src[2]) / 1000.0,
                   "o": 0.0, "b": 0.0, "iztype": 11, "lcalda": 0, "kevnm": name[:16],
                   **{f"user{k}": float(v) for k, v in enumerate((*where, *src))}}
            header = {"network": network, "station": f"R{r:04d}", "location": location,
                      "channel": f"{band}X{AXES[c]}", "starttime": start, "delta": dt,
                      "distance": offset, "sac": AttribDict(sac),
                      "coordinates": AttribDict({"x": float(where[0]), "y": float(where[1]), "z": float(where[2]),
                                                 "elevation": -float(where[2])})}
            samples = -data[r, :, c] if c == 2 else data[r, :, c]  # SEED's Z points up; the grid's z is depth
            traces.append(Trace(np.ascontiguousarray(samples), header=header))
    return Stream(traces)


def export(run, fmt: str, out, *, origin_time=None, network: str = NETWORK, location: str = "") -> list[Path]:
    """Write a run's seismograms as SAC files (one per trace) or one miniSEED file.

    Parameters
    ----------
    run : str or Path
        A seismic run folder.
    fmt : {"sac", "mseed"}
        The format.
    out : str or Path
        The folder to write into (made if missing; files already there of the same names are
        replaced).
    origin_time, network, location
        As :func:`to_obspy`.

    Returns
    -------
    list of Path
        The files written: ``NET.STA.LOC.CHA.sac`` per trace, or ``seismograms.mseed``.

    Raises
    ------
    ShoalError
        An unknown format, ObsPy missing, or a run folder without seismograms; checked before
        anything is written.
    """
    if fmt not in FORMATS:
        raise ShoalError(f"--format must be one of {', '.join(FORMATS)}; got {fmt!r}")
    stream = to_obspy(run, origin_time=origin_time, network=network, location=location)
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ShoalError(f"{out} is a file, not a folder to export into")
    out.mkdir(parents=True, exist_ok=True)
    if fmt == "mseed":
        path = out / "seismograms.mseed"
        stream.write(str(path), format="MSEED")
        return [path]
    paths = []
    for trace in stream:
        path = out / f"{trace.id}.sac"
        trace.write(str(path), format="SAC")
        paths.append(path)
    return paths
