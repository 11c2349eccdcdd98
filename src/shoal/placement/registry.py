"""The registry of placement policies and the protocol a policy follows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from ..cluster import Cluster
from ..errors import ShoalError
from ..tiling import Tiling


@dataclass
class NoParams:
    """The parameters of a policy that has none."""

    def validate(self) -> None:
        return None


class PlacementPolicy(Protocol):
    """What a placement policy provides.

    ``dynamic`` policies are asked again every ``period`` steps through
    ``rebalance(ctx: BalanceContext, memory: dict) -> owner``; static ones place once.
    ``params`` is the dataclass of the policy's typed parameters (``--lb name.key=value`` or
    a scenario's ``[balance]`` table fill it), with a ``validate()`` method.
    """

    name: str
    dynamic: bool
    summary: str
    params: type

    def place(self, tiling: Tiling, cluster: Cluster, seed: int = 0) -> np.ndarray:
        """Initial ``owner[tile] -> node`` (int64 array of length ``tiling.ntiles``)."""
        ...


def policy_params(policy: PlacementPolicy, balance: dict[str, dict[str, Any]] | None) -> Any:
    """The policy's typed parameters from a ``[balance]`` table (its defaults where silent)."""
    return policy.params(**(balance or {}).get(policy.name, {}))


POLICIES: dict[str, PlacementPolicy] = {}


def register(policy: PlacementPolicy) -> PlacementPolicy:
    if policy.name in POLICIES:
        raise ValueError(f"placement policy {policy.name!r} registered twice")
    POLICIES[policy.name] = policy
    return policy


def get_policy(name: str) -> PlacementPolicy:
    try:
        return POLICIES[name]
    except KeyError:
        raise ShoalError(
            f"unknown placement {name!r}; known: {', '.join(sorted(POLICIES))}"
        ) from None


def check_owner(owner: np.ndarray, tiling: Tiling, cluster: Cluster) -> np.ndarray:
    """Validate an owner array: one node per tile, every node index in range."""
    owner = np.asarray(owner)
    if owner.shape != (tiling.ntiles,):
        raise ShoalError(f"owner array has shape {owner.shape}, expected ({tiling.ntiles},)")
    if owner.min() < 0 or owner.max() >= cluster.nodes:
        raise ShoalError(f"owner array names nodes outside 0..{cluster.nodes - 1}")
    return owner.astype(np.int64)
