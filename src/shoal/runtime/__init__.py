"""Running tiles: the app contract, the simulation driver and the executors."""

from .app import App, Phase, StepContext
from .graph import Loop
from .local import ExecutionResult, LocalExecutor
from .simulation import At, Every, Simulation, StepRecord

__all__ = ["App", "Phase", "Loop", "StepContext", "LocalExecutor", "ExecutionResult", "Simulation", "Every", "At",
           "StepRecord"]
