"""What a live-view frame holds: an app's frame arrays cut to what a page can draw quickly.

Every app already says what a picture of its state is drawn from (:meth:`App.frame
<shoal.runtime.app.App.frame>`); this module turns those arrays into one ``frame`` message of at
most about 2 MB (Vertanen §6: send floats, let the client draw):

- **particles** (a frame with positions ``x``): positions in the x-y plane (the projection of a
  3D run), the particle ``id`` (so the page can follow one), ``kind`` when the app has one, and
  one float32 value per particle for each colouring the page offers (speed, density, pressure).
  Above :data:`MAX_POINTS` points, or the byte budget, a fixed subset is kept: a particle is kept
  when a hash of its id falls below a threshold, so the same particles stay on screen from frame
  to frame, spread over the whole fluid.
- **grids**: every 2D field as float32 indexed ``[i_x, j_y]``, every 3D field as its middle
  slices across z and y, strided down to the budget when too large.
- **extras**: the app's small other arrays (receivers, seismograms so far), and its scalars
  in the header.
"""

from __future__ import annotations

import math

import numpy as np

from .protocol import encode

#: The most particles a frame carries.
MAX_POINTS = 200_000
#: The bytes a frame aims to stay under.
MAX_BYTES = 2_000_000
#: Non-grid arrays larger than this many elements stay in the run.
MAX_EXTRA_ELEMENTS = 65_536
#: What particles are coloured by: (name on the page, unit, how to compute it from the frame).
COLOURINGS = (
    ("speed", "m/s", lambda f: np.linalg.norm(f["v"], axis=1) if "v" in f else None),
    ("density", "kg/m^3", lambda f: f.get("rho")),
    ("pressure", "Pa", lambda f: f.get("p")),
)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing: consecutive ids spread evenly


def kept_particles(ids: np.ndarray, keep: int) -> np.ndarray:
    """A mask keeping about ``keep`` of the particles ``ids``, the same ids at every frame.

    Parameters
    ----------
    ids : ndarray of int
        The particles' global ids.
    keep : int
        How many to keep, at most; all when there are no more.
    """
    n = len(ids)
    if n <= keep:
        return np.ones(n, dtype=bool)
    hashed = (ids.astype(np.uint64) * _GOLDEN) >> np.uint64(40)  # 24 well-mixed bits
    return hashed < np.uint64(int(keep / n * 2**24))


def live_frame(frame: dict[str, np.ndarray], step: int, time: float, budget: int = MAX_BYTES,
               max_points: int = MAX_POINTS, layout: dict | None = None) -> tuple[dict, dict[str, np.ndarray]]:
    """The header fields and arrays of the ``frame`` message for an app's frame arrays.

    Parameters
    ----------
    frame : dict of str to ndarray
        What the app's :meth:`~shoal.runtime.app.App.frame` returned.
    step, time : int, float
        The step the frame shows and its simulated time (s).
    budget : int
        Bytes the arrays should stay under.
    max_points : int
        The most particles to send.
    layout : dict, optional
        The app's hints for its grids (:attr:`shoal.apps.AppSpec.layout`): a 2D grid named
        there gets ``"down"`` and ``"signed"`` flags.

    Returns
    -------
    fields : dict
        ``step``, ``time``, ``points`` (particles in the run, or ``None``), ``kept`` (particles
        sent), ``colourings`` (``[{"name", "unit"}]``, each sent as array ``point:<name>``),
        ``grids`` (``[{"name", "of", "shape", "stride", "axis", "down", "signed"}]``, each sent as array
        ``grid:<name>``), ``extras`` (names, sent as ``extra:<name>``), ``traces`` (the extras
        the app's layout calls ``"traces"``: time series, one row per station) and ``meta`` (the
        app's scalars by name).
    arrays : dict of str to ndarray
        The arrays, keyed as the fields say.
    """
    fields: dict = {"step": int(step), "time": float(time), "points": None, "kept": 0, "colourings": [],
                    "grids": [], "extras": [], "traces": [], "meta": {}}
    arrays: dict[str, np.ndarray] = {}
    used = set()
    if "x" in frame:
        used |= _particles(frame, fields, arrays, budget, max_points)
    left = max(budget - sum(a.size * 4 for a in arrays.values()), budget // 4)
    _grids(frame, used, fields, arrays, left, layout or {})
    for name, a in frame.items():
        a = np.asarray(a)
        if name in used or name in {g["of"] for g in fields["grids"]}:
            continue
        if a.ndim == 0 and a.dtype.kind in "biuf":
            fields["meta"][name] = a.item()
        elif 0 < a.size <= MAX_EXTRA_ELEMENTS and a.dtype.kind in "biuf":
            fields["extras"].append(name)
            arrays[f"extra:{name}"] = a
            if "traces" in (layout or {}).get(name, ()):
                fields["traces"].append(name)
    return fields, arrays


def _particles(frame, fields, arrays, budget, max_points) -> set[str]:
    x = np.asarray(frame["x"])
    n = len(x)
    ids = np.asarray(frame["id"]) if "id" in frame else np.arange(n)
    # (a colouring's array may be a field on a grid, FLIP's pressure: then it is no colouring)
    colourings = [(name, unit, v) for name, unit, fn in COLOURINGS
                  if (v := fn(frame)) is not None and np.ndim(v) >= 1 and len(v) == n]
    per_point = 4 * (2 + 1 + len(colourings)) + ("kind" in frame)
    keep = kept_particles(ids, min(max_points, budget // per_point))
    fields["points"], fields["kept"] = n, int(keep.sum())
    fields["dims"] = int(x.shape[1])
    arrays["x"] = x[keep, :2]
    arrays["id"] = ids[keep]
    if "kind" in frame:
        arrays["kind"] = np.asarray(frame["kind"])[keep].astype(np.uint8)
    for name, unit, values in colourings:
        fields["colourings"].append({"name": name, "unit": unit})
        arrays[f"point:{name}"] = np.asarray(values)[keep]
    # Every other per-particle array stays in the run: the page has no use for it.
    return {name for name, a in frame.items() if np.ndim(a) >= 1 and len(a) == n} | {"x", "id"}


def _grids(frame, used, fields, arrays, budget, layout) -> None:
    planes = []
    for name, a in frame.items():
        a = np.asarray(a)
        # A grid is at least 4 cells along every axis: smaller 2D and 3D arrays are lists of
        # vectors (receivers' positions, seismograms' components).
        if name in used or a.dtype.kind not in "biuf" or a.ndim not in (2, 3) or min(a.shape) < 4:
            continue
        if a.ndim == 2:
            planes.append((name, name, a, None))
        else:
            planes.append((f"{name}[z]", name, a[:, :, a.shape[2] // 2], "z"))
            planes.append((f"{name}[y]", name, a[:, a.shape[1] // 2, :], "y"))
    total = sum(p.size * 4 for _, _, p, _ in planes)
    stride = max(1, math.ceil(math.sqrt(total / budget))) if total > budget else 1
    for label, of, plane, axis in planes:
        hints = layout.get(of, ()) if axis is None else ()  # a 3D field's slices: drawn as they come
        fields["grids"].append({"name": label, "of": of, "shape": list(plane[::stride, ::stride].shape),
                                "stride": stride, "axis": axis, "down": "down" in hints, "signed": "signed" in hints})
        arrays[f"grid:{label}"] = plane[::stride, ::stride]


def frame_message(frame: dict[str, np.ndarray], step: int, time: float, layout: dict | None = None,
                  **extra) -> bytes:
    """The encoded ``frame`` message of an app's frame arrays ``frame`` of ``step``, at simulated
    ``time`` (see :func:`live_frame`, which ``layout`` is passed to); ``extra`` fields join the
    header (a run adds how many frames it dropped so far)."""
    fields, arrays = live_frame(frame, step, time, layout=layout)
    return encode("frame", {**fields, **extra}, arrays)
