"""Replay: a recorded trace run again on a modeled cluster, under any placement policy."""

from .run import ReplayConfig, ReplayResult, replay

__all__ = ["ReplayConfig", "ReplayResult", "replay"]
