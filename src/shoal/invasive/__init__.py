"""Invasive compute balancing: a resource manager that moves cores, not data, between the ranks
of a run and between concurrently running simulations (the invasive paper, §5).

Modules: :mod:`.distribution` (how many cores each application should hold: by workload, or by
steepest ascent over scalability graphs, measured ones made concave), :mod:`.manager` (the
manager's state machine: who holds which core, the targets, cores asked back and not yet let
go, the waiting list), :mod:`.server` (the manager as a separate process on a local socket) and
:mod:`.client` (an application's side: register, invade, poll, release, retreat).
"""

from .client import Invasion, setup
from .manager import Constraints, ResourceManager
from .server import ManagerHandle, start_manager

__all__ = ["Constraints", "Invasion", "ManagerHandle", "ResourceManager", "setup", "start_manager"]
