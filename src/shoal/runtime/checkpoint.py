"""Checkpoints: everything a run needs to continue bitwise identically from a step.

A checkpoint holds the step, the tiling, every tile's state (particles with their ids, time,
inflow and outflow counters), the owner table, the balancer's memory, and the reductions of
the step before (a lagged reduction is read a step later). It is written to a
temporary name and renamed, so a checkpoint on disk is always complete; the two latest are
kept. Resuming keeps the tiling (tile states are per tile) but may change the nodes, the
workers and the placement: placement never changes results.
"""

from __future__ import annotations

import os
import pickle
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ShoalError
from ..tiling import Tiling

VERSION = 2  # 2: the balancer's costs per phase and tile


@dataclass
class Checkpoint:
    step: int
    tiling: Tiling
    states: dict[int, Any]  # portable states (the app's transient keys left out)
    owner: np.ndarray
    balancer: dict = field(default_factory=dict)
    reduced: dict = field(default_factory=dict)  # (step, phase name) -> value, of step - 1

    def write(self, folder: Path, keep: int = 2) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"checkpoint-{self.step:06d}.pkl"
        tmp = path.with_name(path.name + ".partial")
        data = {"version": VERSION, "step": self.step, "tiling": self.tiling.to_dict(), "states": self.states,
                "owner": self.owner, "balancer": self.balancer, "reduced": self.reduced}
        with open(tmp, "wb") as fh:
            pickle.dump(data, fh, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
        for old in sorted(folder.glob("checkpoint-*.pkl"))[:-keep]:
            old.unlink()
        return path

    @staticmethod
    def latest_path(folder: Path) -> Path:
        found = sorted(Path(folder).glob("checkpoint-*.pkl"))
        if not found:
            raise ShoalError(f"{folder} holds no checkpoint to resume from (run with --checkpoint-every)")
        return found[-1]

    @staticmethod
    def latest_step(folder: Path) -> int:
        """The step of the latest checkpoint, from its name (without reading it)."""
        return int(Checkpoint.latest_path(folder).stem.split("-")[1])

    @classmethod
    def latest(cls, folder: Path) -> Checkpoint:
        path = cls.latest_path(folder)
        with open(path, "rb") as fh:
            data = pickle.load(fh)
        if data.get("version") != VERSION:
            raise ShoalError(f"{path} has checkpoint version {data.get('version')}; this shoal reads {VERSION}")
        return cls(data["step"], Tiling.from_dict(data["tiling"]), data["states"], np.asarray(data["owner"]),
                   data["balancer"], data.get("reduced", {}))
