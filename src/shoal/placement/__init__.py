"""Placement policies: who owns which tile.

Every policy lives in one registry keyed by name, so tests and commands run over all of
them. A policy returns ``owner[tile] -> node``; within a node nothing is fixed, any free core
takes the next ready tile.
"""

from .dynamic import BalanceContext, node_loads  # noqa: E402  (registers after the static ones)
from .registry import POLICIES, PlacementPolicy, get_policy, register
from .static import node_quotas

__all__ = ["POLICIES", "PlacementPolicy", "get_policy", "register", "node_quotas", "BalanceContext", "node_loads"]
