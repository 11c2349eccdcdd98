"""Running tiles: the app contract, the simulation driver and the executors."""

from .app import App, Phase, StepContext
from .local import ExecutionResult, LocalExecutor
from .simulation import At, Every, Simulation, StepRecord

__all__ = ["App", "Phase", "StepContext", "LocalExecutor", "ExecutionResult", "Simulation", "Every", "At",
           "StepRecord"]
