"""Placement policies: who owns which tile.

Every policy lives in one registry keyed by name, so tests and commands run over all of
them. A policy returns ``owner[tile] -> node``; within a node nothing is fixed, any free core
takes the next ready tile. Dynamic policies re-place every K steps through the one balancing
step of :mod:`shoal.placement.balancing`. The static policies live in :mod:`.static`, the
dynamic ones in :mod:`.dynamic`; Charm++'s balancers in :mod:`.charm` and the METIS graph
partition (``metis``, ``metis-periodic``) in :mod:`.metis` serve both. Jobs, the second kind
of unit, have their own registry (:func:`job_policy`, :mod:`.job_policies`): their table and
costs are :mod:`.jobs`, how a node's cores share them :mod:`.job_split`.
"""

from .static import node_quotas  # isort: skip  (registers the static policies first)
from .balancing import BalanceContext, Balancer, node_loads
from .dynamic import GreedyPhase  # noqa: F401  (registers the dynamic policies)
from .job_policies import JOB_POLICIES, job_policy
from .registry import POLICIES, PlacementPolicy, all_policies, get_policy, policy_params, register

__all__ = ["POLICIES", "PlacementPolicy", "all_policies", "get_policy", "policy_params", "register", "node_quotas",
           "BalanceContext", "Balancer", "node_loads", "JOB_POLICIES", "job_policy"]
