"""Nodes, the cores on each, and the network between them."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .errors import ShoalError


@dataclass(frozen=True)
class Network:
    """Point-to-point network: a lone message takes ``overhead + latency + bytes / bandwidth``
    (the replay engine's model, which also queues messages on each node's interface).

    Defaults are those of a 10 Gb/s Ethernet cluster.

    Parameters
    ----------
    latency_s : float
        Seconds a message takes to cross the network, whatever its size; >= 0.
    bandwidth_Bps : float
        Bytes per second a node's interface sends or receives; > 0.
    overhead_s : float
        Fixed seconds each message costs the sending interface (software overhead); >= 0.

    Raises
    ------
    ShoalError
        If a value is out of range.
    """

    latency_s: float = 5e-6
    bandwidth_Bps: float = 1.25e9
    overhead_s: float = 1e-6

    def __post_init__(self):
        if self.latency_s < 0 or self.overhead_s < 0:
            raise ShoalError("network latency and overhead must be >= 0")
        if self.bandwidth_Bps <= 0:
            raise ShoalError(f"network bandwidth must be positive, got {self.bandwidth_Bps}")


@dataclass(frozen=True)
class Cluster:
    """A set of nodes, each with its own number of cores.

    Parameters
    ----------
    cores : tuple of int
        Cores on each node (may differ between nodes).
    network : Network
        The network between nodes; tiles on the same node exchange halos in memory.
    """

    cores: tuple[int, ...]
    network: Network = field(default_factory=Network)

    def __post_init__(self):
        if len(self.cores) == 0:
            raise ShoalError("a cluster needs at least one node")
        if any(int(c) <= 0 for c in self.cores):
            raise ShoalError(f"cores per node must be positive, got {list(self.cores)}")
        object.__setattr__(self, "cores", tuple(int(c) for c in self.cores))

    @classmethod
    def uniform(cls, nodes: int, cores: int, network: Network | None = None) -> Cluster:
        """A cluster of identical nodes.

        Parameters
        ----------
        nodes : int
            Number of nodes, at least 1.
        cores : int
            Cores on every node, at least 1.
        network : Network, optional
            The network between nodes; the default ``Network()`` when omitted.

        Raises
        ------
        ShoalError
            If ``nodes`` or ``cores`` is not positive.
        """
        if nodes <= 0:
            raise ShoalError(f"number of nodes must be positive, got {nodes}")
        if cores <= 0:
            raise ShoalError(f"cores per node must be positive, got {cores}")
        return cls((cores,) * nodes, network or Network())

    @property
    def nodes(self) -> int:
        """Number of nodes."""
        return len(self.cores)

    @property
    def total_cores(self) -> int:
        """Cores summed over all nodes."""
        return int(sum(self.cores))

    @property
    def core_array(self) -> np.ndarray:
        """Cores on each node as an ``int64`` array of length ``nodes``."""
        return np.asarray(self.cores, dtype=np.int64)

    def to_dict(self) -> dict:
        """JSON-ready dict: ``cores`` (a list) and the network's three parameters, flattened;
        ``from_dict`` reads it back."""
        n = self.network
        return {
            "cores": list(self.cores),
            "latency_s": n.latency_s,
            "bandwidth_Bps": n.bandwidth_Bps,
            "overhead_s": n.overhead_s,
        }

    @classmethod
    def from_dict(cls, d: dict) -> Cluster:
        """The cluster ``to_dict`` wrote (keys ``cores``, ``latency_s``, ``bandwidth_Bps``,
        ``overhead_s``); the same checks as the constructor apply."""
        return cls(tuple(d["cores"]), Network(d["latency_s"], d["bandwidth_Bps"], d["overhead_s"]))
