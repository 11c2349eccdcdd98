"""A run folder as the messages a live run would have sent: played back from what it wrote.

The frames are the app's frames on disk (``frames/state-<step>.npz``), each turned into a
``frame`` message by the same :func:`~shoal.live.frames.frame_message` a run uses; the loads of
every step and the placements come from the trace through its own accessors. A run stopped
before its end (a checkpoint, no summary) plays back as far as it went, marked ``stopped``.
"""

from __future__ import annotations

import json
import tomllib
import zipfile
from functools import cached_property
from pathlib import Path

import numpy as np

from ..errors import ShoalError
from ..live.frames import frame_message, live_frame
from ..live.protocol import encode


def check_run(path: Path) -> str:
    """The status of the run folder ``path``: ``finished`` (it has its summary) or ``stopped``.

    Raises
    ------
    ShoalError
        When ``path`` is no folder, or not a run's (no ``config.toml``, or neither summary nor trace).
    """
    path = Path(path)
    if not path.is_dir():
        raise ShoalError(f"no run folder at {path}")
    if not (path / "config.toml").is_file() or not any((path / f).is_file() for f in ("summary.json", "trace.h5")):
        raise ShoalError(f"{path} is not a run folder (no config.toml with a summary.json or trace.h5)")
    return "finished" if (path / "summary.json").is_file() else "stopped"


def _load(path: Path) -> dict[str, np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise ShoalError(f"{path.name} is not a readable frame: {exc}") from None


class Playback:
    """One run folder, read for the page.

    Parameters
    ----------
    path : Path
        The run folder (checked by :func:`check_run`).
    """

    def __init__(self, path: Path):
        self.status = check_run(Path(path))  # naming the folder as it was given
        self.path = Path(path).resolve()
        try:
            self.config = tomllib.loads((self.path / "config.toml").read_text())
        except (tomllib.TOMLDecodeError, UnicodeDecodeError, OSError) as exc:
            raise ShoalError(f"{self.path / 'config.toml'} is not valid TOML: {exc}") from None
        self.frame_paths = {int(p.stem.split("-")[-1]): p for p in sorted((self.path / "frames").glob("state-*.npz"))
                            if p.stem.split("-")[-1].isdigit()}

    def check(self) -> None:
        """Read once what the page will ask of the run, so that a damaged run is refused before
        a page is served: the configuration's ``[run]`` and ``[app]`` tables, the summary, the
        trace and every frame's table of arrays (not the arrays).

        Raises
        ------
        ShoalError
            One line naming the file at fault.
        """
        config = self.path / "config.toml"
        if not isinstance(self.config.get("run"), dict) or not isinstance(self.config.get("app"), dict) \
                or not isinstance(self.config["app"].get("name"), str):
            raise ShoalError(f"{config} is not a run's configuration (no [run] table, or no [app] table with a name)")
        if (self.path / "summary.json").is_file() and not isinstance(self.summary, dict):
            raise ShoalError(f"{self.path / 'summary.json'} is not a run's summary (not a JSON object)")
        self.trace  # noqa: B018 (reading it is the check: it raises for a damaged trace)
        for path in self.frame_paths.values():
            try:
                with np.load(path, allow_pickle=False) as z:
                    z.files  # noqa: B018
            except (OSError, ValueError, EOFError, AttributeError, TypeError, zipfile.BadZipFile):
                raise ShoalError(f"{path} is not a readable frame (not a NumPy .npz file)") from None

    @cached_property
    def trace(self):
        """The run's trace, or ``None`` when it has none yet (a run stopped before its first chunk)."""
        from ..trace import Trace

        if not (self.path / "trace.h5").is_file():
            return None
        return Trace.read(self.path)  # the folder: one that older shoal split in parts reads as one run

    @cached_property
    def layout(self) -> dict:
        """The app's hints for drawing its grids (:attr:`shoal.apps.AppSpec.layout`); none for
        an app this shoal does not know."""
        from ..apps import all_apps

        spec = all_apps().get(str(self.config.get("app", {}).get("name")))
        return spec.layout if spec is not None else {}

    @cached_property
    def summary(self) -> dict | None:
        """``summary.json``, or ``None`` for a stopped run."""
        try:
            return json.loads((self.path / "summary.json").read_text())
        except (OSError, ValueError):
            return None

    def run(self) -> dict:
        """The run as a live run's ``hello`` describes it, with the tiles' x-y cell bounds
        (``tile_lo``, ``tile_hi``) as lists."""
        t, r = self.trace, self.config.get("run", {})
        out = {"scenario": self.config.get("name"), "app": self.config.get("app", {}).get("name"),
               "folder": str(self.path), "first_step": 0, "steps": r.get("steps"), "nodes": r.get("nodes"),
               "cores": None, "tiles": None, "grid": None, "extent": None,
               "ranks": (self.summary or {}).get("ranks", 1), "pid": None, "tile_lo": [], "tile_hi": []}
        if t is not None:
            out.update(nodes=t.cluster.nodes, cores=[int(c) for c in t.cluster.cores], tiles=t.tiling.ntiles)
            if t.tiling.kind == "cartesian":  # (the parts of a mesh have no boxes of cells to draw)
                out.update(grid=[int(g) for g in t.tiling.grid], tile_lo=t.tiling.lo[:, :2].tolist(),
                           tile_hi=t.tiling.hi[:, :2].tolist())
        return out

    def index(self, name: str) -> dict:
        """The playback index: ``name``, ``hello`` (:meth:`run`), the steps of the frames on disk,
        the status and the ``settings`` (:meth:`settings`)."""
        return {"name": name, "hello": self.run(), "frames": sorted(self.frame_paths), "status": self.status,
                "settings": self.settings()}

    def settings(self) -> dict[str, str] | None:
        """Every ``--set`` key of the run's configuration as TOML text (what the page's parameter
        table shows); ``None`` when the configuration is not one this shoal reads."""
        from ..config import scenario_from_dict, scenario_params

        try:
            return scenario_params(scenario_from_dict(self.config, str(self.path)))
        except ShoalError:
            return None

    def listing(self, name: str) -> dict:
        """One row of the run list: ``name``, ``scenario``, ``steps``, ``status``, ``frames``."""
        return {"name": name, "scenario": self.config.get("name"), "steps": self.config.get("run", {}).get("steps"),
                "status": self.status, "frames": len(self.frame_paths)}

    # ----- frames ----------------------------------------------------------------------------
    def frame_arrays(self, step: int) -> dict[str, np.ndarray]:
        """The app's frame arrays of ``step`` as written on disk."""
        if step not in self.frame_paths:
            raise ShoalError(f"no frame of step {step}; frames: {sorted(self.frame_paths)[:10]}")
        return _load(self.frame_paths[step])

    @staticmethod
    def _time(frame: dict, step: int) -> float:
        return float(frame["time"]) if "time" in frame and np.ndim(frame["time"]) == 0 else float("nan")

    def frame(self, step: int) -> bytes:
        """The ``frame`` message of the frame on disk at ``step``."""
        frame = self.frame_arrays(step)
        return frame_message(frame, step, self._time(frame, step), layout=self.layout, playback=True)

    def frames(self):
        """Every frame on disk in step order: ``(step, arrays)``."""
        for step in sorted(self.frame_paths):
            yield step, self.frame_arrays(step)

    def probe(self, grid: str, i: int, j: int) -> dict:
        """A grid point's value at every frame on disk: ``i``, ``j`` index the grid as the page
        gets it (``grid:<name>`` of the frame message, strided when the field is large)."""
        out = {"steps": [], "time": [], "values": []}
        for step, frame in self.frames():
            fields, arrays = live_frame(frame, step, self._time(frame, step))
            plane = arrays.get(f"grid:{grid}")
            if plane is None:
                names = [g["name"] for g in fields["grids"]]
                raise ShoalError(f"no grid {grid!r} in the frame of step {step}; grids: {', '.join(names) or 'none'}")
            if not (0 <= i < plane.shape[0] and 0 <= j < plane.shape[1]):
                raise ShoalError(f"point ({i}, {j}) lies outside grid {grid!r} of shape {list(plane.shape)}")
            value = float(plane[i, j])
            out["steps"].append(step)
            out["time"].append(fields["time"] if np.isfinite(fields["time"]) else None)
            out["values"].append(value if np.isfinite(value) else None)
        return out

    def follow(self, particle: int) -> dict:
        """A particle's x-y position at every frame on disk by its id (``null`` where a frame
        does not hold it)."""
        out = {"steps": [], "x": [], "y": []}
        for step, frame in self.frames():
            if "x" not in frame:
                raise ShoalError("the run's frames hold no particles")
            ids = frame["id"] if "id" in frame else np.arange(len(frame["x"]))
            hit = np.flatnonzero(ids == particle)
            out["steps"].append(step)
            out["x"].append(float(frame["x"][hit[0], 0]) if len(hit) else None)
            out["y"].append(float(frame["x"][hit[0], 1]) if len(hit) else None)
        return out

    # ----- loads and placements --------------------------------------------------------------
    def loads(self) -> bytes:
        """One ``loads`` message of every step in the trace: each node's busy seconds, the step's
        wall time and its load-imbalance factor."""
        t = self.trace
        if t is None or not len(t.steps):
            return encode("loads", {"first": 0}, {"load": np.zeros((0, 0), np.float32),
                                                  "step_time": np.zeros(0, np.float32), "lif": np.zeros(0, np.float32)})
        per_core = t.node_load()
        ends = np.asarray(t.step_end, dtype=np.float64)
        step_time = np.diff(np.concatenate([[0.0], ends])) if len(ends) == len(t.steps) else np.full(len(t.steps),
                                                                                                       np.nan)
        return encode("loads", {"first": int(t.steps[0])},
                      {"load": per_core * t.cores_per_step(), "step_time": step_time, "lif": t.step_lif()})

    def placements(self) -> bytes:
        """One ``placements`` message: the first step of every owner table, the tables, and the
        tiles each moved from the previous one."""
        t = self.trace
        if t is None:
            return encode("placements", {}, {"steps": np.zeros(0, np.int32), "owner": np.zeros((0, 0), np.int32),
                                             "migrated": np.zeros(0, np.int32)})
        owners = t.placement_owners
        migrated = np.concatenate([[0], (owners[1:] != owners[:-1]).sum(axis=1)]) if len(owners) else np.zeros(0)
        return encode("placements", {}, {"steps": t.placement_steps, "owner": owners, "migrated": migrated})
