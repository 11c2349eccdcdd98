"""``shoal report RUN``: the load per node over steps, a timeline (or, for many cores, the
cores' utilisation), the LIF per step, the load per tile, the placement after every balancing
step, and the app's fields, with the frames as a ParaView time series.

Figures are drawn on their own Agg canvases (:mod:`shoal.graphics.canvas`): importing or calling
the report leaves the caller's matplotlib backend alone.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import ShoalError
from ..graphics.canvas import new_figure, save_figure
from ..trace import Trace, mark_closed
from .loads import lif_over_steps, load_heatmap, placements, tile_load_map
from .timeline import select, timeline


def app_of_run(config: dict):
    """The run's app rebuilt from its resolved configuration (``None`` if it cannot be: a
    replay, or an input file no longer there)."""
    from ..config import scenario_from_dict

    try:
        sc = scenario_from_dict(config)
        from ..apps import get_app

        return get_app(sc.app).build(sc.params, sc.run.steps)
    except (ShoalError, KeyError, TypeError):
        return None


def _load(path: Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def app_frames(app, run: Path) -> list[Path]:
    """The ``app``'s own picture of the ``run`` folder's final state (``frame-final.png``) and, for apps without
    particle pictures of their own, of every frame written on the way (``frames/``), all on
    one colour scale: the range over every frame (Vertanen §6.2: per-frame scales mislead)."""
    final = run / "state" / "final.npz"
    if not final.exists():
        return []
    frames = [(run / "frame-final.png", app.frame(_load(final)))]
    if "x" not in frames[0][1]:
        frames += [(p.with_name(p.stem.replace("state", "frame") + ".png"), _load(p))  # already frames
                   for p in sorted((run / "frames").glob("state-*.npz"))]
    scale = app_scale(app, [f for _, f in frames])
    paths = []
    for path, frame in frames:
        fig = new_figure(7, 5)
        ax = fig.add_subplot()
        mappable = app.draw(frame, ax, scale)
        if ax.get_aspect() == 1.0:  # a picture of fixed aspect: the figure about as tall, the colour bar as tall
            (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
            fig.set_size_inches(7, min(max(3.0, 6 * abs(y1 - y0) / abs(x1 - x0) + 1.4), 9.0))
            fig.colorbar(mappable, cax=ax.inset_axes((1.03, 0.0, 0.03, 1.0)))
        else:
            fig.colorbar(mappable, ax=ax)
        paths.append(save_figure(fig, path, dpi=100))
    if len(frames) > 2:  # grid apps: the frames written on the way, in sequence
        from .particles import animation

        paths.append(animation(app, [frame for _, frame in frames[1:]], run, scale))
    return paths


def app_scale(app, frames: list[dict]) -> tuple[float, float] | None:
    """One colour scale over ``frames`` as ``app``'s layout asks: fields it calls signed on a
    robust symmetric scale, others from their least to their largest value (:func:`common_scale`)."""
    from ..apps import get_app

    layout = get_app(app.name).layout
    return common_scale(frames, signed={n for n, hints in layout.items() if "signed" in hints})


def common_scale(frames: list[dict], signed=()) -> tuple[float, float] | None:
    """The range of what the default picture colours by, over every frame.

    Parameters
    ----------
    frames : list of dict
        The app's frames.
    signed : collection of str
        Fields the app's layout calls signed: their range is symmetric about 0 up to a high
        percentile of their magnitude (:func:`~shoal.graphics.drawing.robust_bound`); any other
        field's goes from its least to its largest value.

    Returns
    -------
    (float, float) or None
        The range; ``None`` when the frames hold no field or no finite value.
    """
    from ..graphics.drawing import frame_values, robust_bound

    try:
        values = [frame_values(f) for f in frames]
    except ValueError:
        return None
    finite = np.concatenate([v[np.isfinite(v)].ravel() for v, _ in values])
    if not finite.size:
        return None
    if values[0][1] in signed:
        top = robust_bound(finite)
        return (-top, top)
    return (float(finite.min()), float(finite.max()))


def report_run(run: str | Path, steps: tuple[int | None, int | None] | None = None,
               cores: tuple[int | None, int | None] | None = None, absolute: bool = False,
               perfetto: bool = False) -> list[Path]:
    """Draw every picture of a run folder into it. The trace of a killed run is marked closed
    first (:func:`shoal.trace.mark_closed`), so that plain HDF5 readers open it afterwards.

    Parameters
    ----------
    run : str or Path
        A run folder (of ``shoal run`` or ``shoal replay``) holding ``trace.h5``.
    steps : (int or None, int or None), optional
        The timeline's steps, ``start <= step < end`` (``None``: open end; what
        :func:`~shoal.report.timeline.parse_range` makes of ``A:B``); default every step.
    cores : (int or None, int or None), optional
        The timeline's cores, numbered across the cluster node by node (node 0's workers
        first), ``start <= core < end``; default every core. A selection of up to 32 cores
        draws every task, a larger one each core's utilisation over time.
    absolute : bool
        Draw the load heatmap in CPU milliseconds rather than relative to each step's mean.
    perfetto : bool
        Also write the selection's tasks and the halo messages between them as
        ``timeline.perfetto.json.gz`` (gzipped Chrome trace event JSON, for https://ui.perfetto.dev).

    Returns
    -------
    list of Path
        The files written: ``load-heatmap.png``, ``timeline.png``, ``lif.png``, for 2D and 3D
        tilings ``tile-load.png`` and ``placement.png``, the app's frames, the ParaView series
        of a run that wrote frames (``frames/series.pvd``), and the Perfetto file.

    Raises
    ------
    ShoalError
        If ``run`` holds no readable trace, or the selection is empty or holds no task.
    """
    run = Path(run)
    if not (run / "trace.h5").exists():
        raise ShoalError(f"{run} holds no trace.h5: not a run folder")
    mark_closed(run / "trace.h5")  # a killed run's: then any HDF5 reader opens it (a live run's is left alone)
    trace = Trace.read(run)  # the folder: one that older shoal split in parts reads as one run
    selection, mask = select(trace, steps, cores)
    paths = [
        save_figure(load_heatmap(trace, absolute), run / "load-heatmap.png"),
        save_figure(timeline(trace, selection.steps, selection.cores), run / "timeline.png"),
        save_figure(lif_over_steps(trace), run / "lif.png"),
    ]
    for figure, name in ((tile_load_map(trace), "tile-load.png"), (placements(trace), "placement.png")):
        if figure is not None:
            paths.append(save_figure(figure, run / name))
    if perfetto:
        from ..perfetto import export

        paths.append(export(trace, run / "timeline.perfetto.json.gz", mask))
    (run / "frames").mkdir(exist_ok=True)
    app = None if trace.predicted else app_of_run(trace.config)
    if app is None:
        return paths
    paths += app_frames(app, run)
    final = run / "state" / "final.npz"
    state = _load(final) if final.exists() else {}
    if state:
        paths += app.pictures(state, run)
    if {"id", "x", "kind"} <= set(state) and state["x"].shape[1] == 2:
        from .particles import report_particles

        paths += report_particles(run, trace.config, app)
    series = paraview_series(app, run)
    return paths + ([series] if series is not None else [])


def paraview_series(app, run: Path) -> Path | None:
    """The run's frames as a ParaView time series, ``frames/series.pvd``: converted from the
    frames (:func:`~shoal.graphics.vtk.write_series`), or, for an app that exports its own files
    as the run goes (it overrides :meth:`~shoal.runtime.app.App.export`), the series the run
    wrote. ``None`` for a run that wrote no frames."""
    from ..graphics.vtk import SERIES_FILE, write_series
    from ..runtime.app import App

    frames = run / "frames"
    if type(app).export is not App.export:
        return frames / SERIES_FILE if (frames / SERIES_FILE).exists() else None
    return write_series(run) if any(frames.glob("state-*.npz")) else None
