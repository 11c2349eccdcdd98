"""Running tiles: the app protocol and the executors."""

from .app import App, Phase, StepContext
from .local import ExecutionResult, LocalExecutor

__all__ = ["App", "Phase", "StepContext", "LocalExecutor", "ExecutionResult"]
