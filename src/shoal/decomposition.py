"""What any split of an app's domain into tiles offers: the :class:`Decomposition` protocol.

Two kinds exist. A ``"cartesian"`` :class:`~shoal.tiling.Tiling` cuts a cell grid into boxes;
a ``"mesh"`` :class:`~shoal.mesh.MeshPartition` splits the elements of a triangle or
tetrahedral mesh into parts. Both give tiles stable global ids ``0 .. ntiles - 1``, their
neighbours (everyone a tile may exchange with), the tiles a phase reads under a stencil, and
some *geometry* for placement policies to use:

``"boxes"``
    axis-aligned boxes of cells (``lo``, ``hi``, ``counts``, ``grid``): a tiling's.
``"order"``
    space-filling-curve orders over the tiles (``hilbert``, ``morton``): a tiling's.
``"graph"``
    the tile graph with edge weights (:meth:`Decomposition.graph`): both kinds.
``"centroids"``
    a point per tile (:attr:`Decomposition.centroids`): both kinds.

A placement policy declares the geometry it needs (``needs``, see
:mod:`shoal.placement.registry`); :func:`require` refuses, in one line, a decomposition that
lacks some of it.

A decomposition is stored as a JSON-ready dict (``to_dict``) with a ``"kind"`` key;
:func:`decomposition_from_dict` reads any kind back. A tiling's dict has no ``"kind"`` key
(checkpoints and traces stored it before there were kinds) and reads as Cartesian. A mesh
partition's dict holds its partition and a hash of its mesh, not the mesh, which the caller
passes back.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from .errors import ShoalError
from .mesh import MeshPartition
from .tiling import Tiling

GEOMETRY = frozenset({"boxes", "order", "graph", "centroids"})
"""Every kind of geometry a decomposition may offer."""

KINDS = {"cartesian": "Cartesian tiling", "mesh": "mesh partition"}
"""The kinds of decomposition, and what each is called in messages."""


@runtime_checkable
class Decomposition(Protocol):
    """What a split of the domain into tiles provides, whatever its kind.

    :class:`~shoal.tiling.Tiling` and :class:`~shoal.mesh.MeshPartition` follow it. Tile ids
    run from 0 to ``ntiles - 1`` and depend only on the decomposition, never on where a tile
    runs. Arrays of tile ids are int64 and sorted.
    """

    @property
    def kind(self) -> str:
        """``"cartesian"`` or ``"mesh"`` (a key of :data:`KINDS`)."""
        ...

    @property
    def geometry(self) -> frozenset[str]:
        """What it offers placement policies, among ``"boxes"``, ``"order"``, ``"graph"`` and
        ``"centroids"``."""
        ...

    @property
    def ndim(self) -> int:
        """Dimensions of the space the tiles lie in: 2 or 3."""
        ...

    @property
    def ntiles(self) -> int:
        """Number of tiles."""
        ...

    @property
    def halo(self) -> int:
        """Halo width: cells of a tiling, vertex rings of a mesh partition."""
        ...

    @property
    def neighbours(self) -> tuple[np.ndarray, ...]:
        """Per tile, every tile it may exchange with (sorted ids; symmetric)."""
        ...

    @property
    def centroids(self) -> np.ndarray:
        """A point per tile, shape (ntiles, ndim), float64."""
        ...

    @property
    def cells(self) -> np.ndarray:
        """How much of the domain each tile holds: cells of a box, elements of a mesh part."""
        ...

    def stencil(self, kind: str) -> tuple[np.ndarray, ...]:
        """Per tile, the tiles it reads under a stencil ``kind``: ``"faces"`` (across faces only)
        or ``"all"`` (:attr:`neighbours`)."""
        ...

    def neighbours_csr(self) -> tuple[np.ndarray, np.ndarray]:
        """:attr:`neighbours` in compressed rows ``(xadj, adjncy)``."""
        ...

    def graph(self) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """The tile graph ``(xadj, adjncy, weights)``: :meth:`neighbours_csr` and a weight per
        entry (what the two tiles share), or None."""
        ...

    def fine_to_coarse(self, coarse) -> np.ndarray:
        """For each tile, the tile of a coarser decomposition of the same kind that contains it."""
        ...

    def to_dict(self) -> dict:
        """A JSON-ready dict that :func:`decomposition_from_dict` reads back."""
        ...


def describe(decomposition: Decomposition) -> str:
    """``"a Cartesian tiling"`` or ``"a mesh partition"``: the decomposition's kind in words."""
    return f"a {KINDS.get(decomposition.kind, decomposition.kind)}"


def require(needs: frozenset[str], decomposition: Decomposition, who: str) -> None:
    """Refuse, in one line, a decomposition that lacks some of the geometry ``who`` needs.

    Parameters
    ----------
    needs : frozenset of str
        The geometry needed (see :data:`GEOMETRY`).
    decomposition : Decomposition
        What is offered.
    who : str
        Who needs it, for the message ("placement policy 'sectors'").

    Raises
    ------
    ShoalError
        ``placement policy 'sectors' needs boxes; a mesh partition has centroids, graph``.
    """
    missing = sorted(set(needs) - set(decomposition.geometry))
    if missing:
        raise ShoalError(f"{who} needs {', '.join(missing)}; {describe(decomposition)} has "
                         f"{', '.join(sorted(decomposition.geometry)) or 'no geometry'}")


def decomposition_from_dict(d: dict, mesh: tuple[np.ndarray, np.ndarray] | None = None) -> Decomposition:
    """The decomposition a ``to_dict`` wrote, of the kind its ``"kind"`` key names.

    Parameters
    ----------
    d : dict
        What ``to_dict`` returned. Without a ``"kind"`` key it is a tiling's, as checkpoints
        and traces stored it before there were kinds.
    mesh : (vertices, elements), optional
        The mesh a mesh partition was made of: its dict holds a hash of the mesh, not the mesh.

    Raises
    ------
    ShoalError
        For an unknown kind, a mesh partition without its mesh, or a mesh whose hash is not the
        partition's.
    """
    kind = d.get("kind", "cartesian")
    if kind == "cartesian":
        return Tiling.from_dict(d)
    if kind == "mesh":
        if mesh is None:
            raise ShoalError("a mesh partition is stored without its mesh: pass mesh=(vertices, elements)")
        return MeshPartition.from_dict(d, *mesh)
    raise ShoalError(f"unknown kind of decomposition {kind!r}; known: {', '.join(KINDS)}")


def same_decomposition(a: Decomposition, b: Decomposition) -> bool:
    """Whether ``a`` and ``b`` split the same domain into the same tiles (kind and ``to_dict`` equal)."""
    return a.kind == b.kind and a.to_dict() == b.to_dict()
