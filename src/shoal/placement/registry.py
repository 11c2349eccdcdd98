"""The registry of placement policies and the protocol a policy follows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from ..cluster import Cluster
from ..decomposition import Decomposition, require
from ..errors import ShoalError
from ..log import logger

if TYPE_CHECKING:  # balancing imports this module
    from .balancing import BalanceContext


@dataclass
class NoParams:
    """The parameters of a policy that has none."""

    def validate(self) -> None:
        """Nothing to check: there are no parameters."""
        return None


class PlacementPolicy(Protocol):
    """What a placement policy provides.

    A policy is a frozen dataclass registered under its ``name``. Static policies
    (``dynamic`` false) place once, with :meth:`place`; dynamic ones place with :meth:`place`
    too and are then asked again every ``period`` steps through :meth:`rebalance`. The policies
    of :mod:`shoal.placement` subclass this protocol, so they inherit its contract and the
    refusal of :meth:`rebalance` by a static policy; a policy from elsewhere need only provide
    the same members.

    Attributes
    ----------
    name : str
        The key of the registry (``--placement NAME``).
    dynamic : bool
        Whether the policy re-places every ``period`` steps.
    summary : str
        One line saying what the policy does.
    params : type
        The dataclass of the policy's typed parameters (``--lb name.key=value`` or a
        scenario's ``[balance]`` table fill it), with a ``validate()`` method that raises
        :class:`~shoal.errors.ShoalError` for a bad value.
    needs : frozenset of str
        The geometry of the decomposition the policy uses, among ``"boxes"``, ``"order"``,
        ``"graph"`` and ``"centroids"`` (:mod:`shoal.decomposition`); empty for a policy that
        needs only the number of tiles, their neighbours and their loads. A policy given a
        decomposition without it refuses in one line (:func:`check_needs`).
    """

    name: str
    dynamic: bool
    summary: str
    params: type
    needs: frozenset[str]

    def place(self, tiling: Decomposition, cluster: Cluster, seed: int = 0) -> np.ndarray:
        """The initial placement: the node of every tile.

        Parameters
        ----------
        tiling : Decomposition
            The tiles to place: a :class:`~shoal.tiling.Tiling` or any decomposition that
            offers what the policy ``needs``.
        cluster : Cluster
            The nodes to place them on; shares follow each node's cores.
        seed : int, default 0
            Seed of a random placement; the same seed gives the same placement, and
            deterministic policies ignore it.

        Returns
        -------
        ndarray of int64, shape (tiling.ntiles,)
            ``owner[tile] -> node``, every node in ``0 .. cluster.nodes - 1``.

        Raises
        ------
        ShoalError
            If the policy cannot place these tiles on this cluster (fewer tiles than nodes),
            or the decomposition lacks the geometry it ``needs``.
        """
        ...

    def rebalance(self, ctx: BalanceContext, memory: dict) -> np.ndarray:
        """A dynamic policy's new placement at a balancing step.

        :class:`~shoal.placement.balancing.Balancer` calls it every ``period`` steps, in a real
        run and in a replay alike, and checks, prices and records what it returns.

        Parameters
        ----------
        ctx : BalanceContext
            The tiling, cluster, current owners, the period's loads per phase and tile
            (seconds per step), per-node background load and the policy's parameters.
        memory : dict
            The policy's own state between calls, one dict per run, empty at the first call
            and kept in checkpoints; a policy that needs no state ignores it.

        Returns
        -------
        ndarray of int64, shape (ctx.tiling.ntiles,)
            The new ``owner[tile] -> node``; tiles whose node changes migrate.

        Raises
        ------
        NotImplementedError
            For a static policy, which is never re-placed.
        """
        raise NotImplementedError(f"placement policy {self.name!r} is static: it places once and never rebalances")


def policy_params(policy: PlacementPolicy, balance: dict[str, dict[str, Any]] | None) -> Any:
    """The policy's typed parameters from a ``[balance]`` table (its defaults where silent).

    Parameters
    ----------
    policy : PlacementPolicy
        The policy whose ``params`` dataclass to fill.
    balance : dict or None
        A scenario's ``[balance]`` table: per policy name, its parameters by key.
    """
    return policy.params(**(balance or {}).get(policy.name, {}))


POLICIES: dict[str, PlacementPolicy] = {}

# Old names still accepted, each for the policy that now carries a clearer one; using one logs a
# warning once. Not keys of POLICIES, so nothing that runs over every policy meets them twice.
ALIASES: dict[str, str] = {"locality": "tile-locality"}
_WARNED: set[str] = set()


def register(policy: PlacementPolicy) -> PlacementPolicy:
    """Add ``policy`` to :data:`POLICIES` under its ``name`` and return it.

    Raises
    ------
    ValueError
        If a policy of that name is already registered (a programming error, not a user's).
    """
    if policy.name in POLICIES:
        raise ValueError(f"placement policy {policy.name!r} registered twice")
    POLICIES[policy.name] = policy
    return policy


def get_policy(name: str) -> PlacementPolicy:
    """The registered policy called ``name`` (policies other packages declare are loaded on first use).

    A deprecated name of :data:`ALIASES` gives the policy it stands for, with a warning in the
    log the first time; a registered policy of that very name would win.

    Raises
    ------
    ShoalError
        If no policy has that name; the message lists the known ones.
    """
    policies = all_policies()
    if name not in policies and name in ALIASES:
        if name not in _WARNED:
            _WARNED.add(name)
            logger.warning("placement %r is deprecated: it is now called %r", name, ALIASES[name])
        name = ALIASES[name]
    try:
        return policies[name]
    except KeyError:
        raise ShoalError(
            f"unknown placement {name!r}; known: {', '.join(sorted(POLICIES))}"
        ) from None


def all_policies() -> dict[str, PlacementPolicy]:
    """Every registered policy: shoal's, and those other packages declare as entry points in the
    ``shoal.placements`` group (``[project.entry-points."shoal.placements"] mine = "mypkg.policies"``;
    importing the module registers its policies)."""
    global _PLUGINS_LOADED
    if not _PLUGINS_LOADED:
        _PLUGINS_LOADED = True
        from ..plugins import load_entry_points

        load_entry_points("shoal.placements", "placement")
    return POLICIES


_PLUGINS_LOADED = False


def check_needs(policy: PlacementPolicy, decomposition: Decomposition) -> None:
    """Refuse, in one line, a decomposition without the geometry ``policy`` needs.

    Raises
    ------
    ShoalError
        ``placement policy 'sectors' needs boxes; a mesh partition has centroids, graph``.
    """
    require(policy.needs, decomposition, f"placement policy {policy.name!r}")


def check_owner(owner: np.ndarray, tiling: Decomposition, cluster: Cluster) -> np.ndarray:
    """Validate an ``owner`` array: one node of ``cluster`` per tile of ``tiling``, every node index in range."""
    owner = np.asarray(owner)
    if owner.shape != (tiling.ntiles,):
        raise ShoalError(f"owner array has shape {owner.shape}, expected ({tiling.ntiles},)")
    if owner.min() < 0 or owner.max() >= cluster.nodes:
        raise ShoalError(f"owner array names nodes outside 0..{cluster.nodes - 1}")
    return owner.astype(np.int64)
