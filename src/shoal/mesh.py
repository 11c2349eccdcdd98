"""A triangle or tetrahedral mesh split into parts: the ``"mesh"`` kind of decomposition.

The contact-mechanics paper (§III) partitions a cloth's triangles with METIS and makes each
part an object; :class:`MeshPartition` is that split, made the same way (METIS k-way over the
mesh's dual graph) or given. The mesh is triangles in 2D or 3D (a surface, like the cloth) or
tetrahedra in 3D.

What belongs where
    *Elements* are what is split: each belongs to exactly one part (``part_of_element``). A part
    *holds* the vertices of its elements; a vertex on the boundary between parts is held by
    each of them (a *shared* vertex) and *owned* by the lowest-numbered
    (``part_of_vertex``), so every vertex of an element is owned exactly once. As in the
    paper, the parts that hold a shared vertex each add up its contributions (in a fixed
    global order), so all of them hold its value; a vertex no element uses belongs to no part.

Neighbours and stencils
    Communication is needed wherever a stencil's vertex is held by more than one part (§III):
    a part exchanges with every part it shares a vertex with. Those are its
    :attr:`~MeshPartition.neighbours` and its stencil ``"all"``. The stencil ``"faces"`` is the
    parts holding an element that shares a facet (a triangle's edge, a tetrahedron's face)
    with one of its elements: what an element-pair stencil reads, like the paper's bend
    stencil of two triangles across an edge. It is a subset of ``"all"``, as a tiling's face
    neighbours are of its neighbours across faces, edges and corners.

Halo
    Ring 0 of a part is the vertices it holds; ring ``r`` the vertices that share an element
    with ring ``r - 1`` and lie in no earlier ring. With ``halo = h`` a part reads rings 1 to
    ``h`` (``h = 0``: nothing beyond what it holds, as a tiling's halo of 0). Each vertex comes
    from one part: the lowest-numbered of its neighbours that holds it
    (:meth:`~MeshPartition.halo_vertices`), the part whose element sits next to it, as the
    paper's external vertex comes from the partition of the adjacent triangle. Ring 1
    always has such a part; a wider halo that reaches a vertex none of its neighbours holds
    (through a part thinner than the halo) is refused, as a tiling refuses a halo wider than
    a tile.

Determinism and ids
    The same mesh, count and seed give the same partition: METIS is seeded, and parts are
    numbered by their lowest element id (part 0 holds element 0), whatever numbers METIS
    gave them. A part METIS leaves empty takes half of the part with the most elements,
    split in two by METIS (or, failing that, by element id).

Storage
    :meth:`~MeshPartition.to_dict` holds the partition vector and a SHA-256 of the mesh, not
    the mesh; :meth:`~MeshPartition.from_dict` takes the mesh back and refuses another one.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cached_property
from typing import ClassVar

import numpy as np
import pymetis

from .errors import ShoalError

# The facets of an element: a triangle's edges, a tetrahedron's faces (local vertex indices).
FACETS = {3: ((0, 1), (1, 2), (0, 2)), 4: ((0, 1, 2), (0, 1, 3), (0, 2, 3), (1, 2, 3))}


# ----- compressed rows ----------------------------------------------------------------------
def _csr(rows: np.ndarray, cols: np.ndarray, nrows: int, ncols: int) -> tuple[np.ndarray, np.ndarray]:
    """Compressed rows ``(xadj, adjncy)`` of the distinct pairs ``(row, col)``, columns sorted."""
    keys = np.unique(np.asarray(rows, np.int64) * ncols + np.asarray(cols, np.int64))
    r, c = np.divmod(keys, ncols)
    return np.searchsorted(r, np.arange(nrows + 1)).astype(np.int64), c.astype(np.int64)


def _rows(xadj: np.ndarray, adjncy: np.ndarray) -> tuple[np.ndarray, ...]:
    """Every row of a compressed-rows table as its own array."""
    return tuple(np.split(adjncy, xadj[1:-1]))


def _gather(xadj: np.ndarray, adjncy: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The entries of ``rows``, one after the other."""
    lengths = xadj[rows + 1] - xadj[rows]
    starts = np.repeat(xadj[rows] - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths)
    return adjncy[starts + np.arange(int(lengths.sum()))]


def _pairs(xadj: np.ndarray, adjncy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every ordered pair ``(a, b)`` of different entries of one row, over all rows."""
    lengths = np.diff(xadj)
    row = np.repeat(np.arange(len(lengths)), lengths)  # the row of every entry
    reps = lengths[row]
    entry = np.repeat(np.arange(len(adjncy)), reps)
    offset = np.arange(len(entry)) - np.repeat(np.cumsum(reps) - reps, reps)
    partner = xadj[row[entry]] + offset
    keep = partner != entry
    return adjncy[entry[keep]], adjncy[partner[keep]]


# ----- the mesh -----------------------------------------------------------------------------
def mesh_sha256(vertices: np.ndarray, elements: np.ndarray) -> str:
    """SHA-256 (hex) of a mesh's shape and content, as float64 vertices and int64 elements."""
    v = np.ascontiguousarray(vertices, dtype=np.float64)
    e = np.ascontiguousarray(elements, dtype=np.int64)
    h = hashlib.sha256(f"shoal-mesh {v.shape} {e.shape}".encode())
    h.update(v.tobytes())
    h.update(e.tobytes())
    return h.hexdigest()


def _checked_mesh(vertices, elements) -> tuple[np.ndarray, np.ndarray]:
    """Read-only float64 vertices and int64 elements, or one line on what is wrong with them."""
    v = np.array(vertices, dtype=np.float64)
    e = np.asarray(elements)
    if v.ndim != 2 or v.shape[1] not in (2, 3):
        raise ShoalError(f"mesh vertices must have shape (vertices, 2 or 3), got {v.shape}")
    if not np.all(np.isfinite(v)):
        raise ShoalError(f"mesh vertex {int(np.flatnonzero(~np.isfinite(v).all(axis=1))[0])} is not finite")
    if e.ndim != 2 or e.shape[1] not in (3, 4):
        raise ShoalError(f"mesh elements must have shape (elements, 3 or 4): triangles or tetrahedra, got {e.shape}")
    if len(e) == 0:
        raise ShoalError("the mesh has no element")
    if not np.issubdtype(e.dtype, np.integer):
        raise ShoalError(f"mesh elements must hold vertex indices (integers), got {e.dtype}")
    if e.shape[1] == 4 and v.shape[1] != 3:
        raise ShoalError("tetrahedra need 3D vertices, got 2D ones")
    e = np.array(e, dtype=np.int64)
    bad = (e < 0) | (e >= len(v))
    if bad.any():
        k = int(np.flatnonzero(bad.any(axis=1))[0])
        raise ShoalError(f"element {k} names vertex {int(e[k][bad[k]][0])}, outside 0..{len(v) - 1}")
    s = np.sort(e, axis=1)
    repeated = (s[:, 1:] == s[:, :-1]).any(axis=1)
    if repeated.any():
        k = int(np.flatnonzero(repeated)[0])
        raise ShoalError(f"element {k} repeats a vertex ({e[k].tolist()}): elements must have distinct vertices")
    v.flags.writeable = False
    e.flags.writeable = False
    return v, e


def _facet_pairs(elements: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every ordered pair of elements that share a facet (an edge of triangles, a face of tetrahedra)."""
    local = FACETS[elements.shape[1]]
    facets = np.sort(np.concatenate([elements[:, list(f)] for f in local]), axis=1)
    owner = np.tile(np.arange(len(elements), dtype=np.int64), len(local))
    order = np.lexsort(facets.T[::-1])
    facets, owner = facets[order], owner[order]
    new = np.concatenate([[True], (facets[1:] != facets[:-1]).any(axis=1)])
    xadj = np.append(np.flatnonzero(new), len(facets)).astype(np.int64)
    return _pairs(xadj, owner)


# ----- METIS ----------------------------------------------------------------------------------
def _metis(xadj: np.ndarray, adjncy: np.ndarray, nparts: int, seed: int,
           vweights: np.ndarray | None = None, eweights: np.ndarray | None = None) -> np.ndarray:
    """METIS k-way parts of a graph, seeded, none empty (see the module docstring)."""
    n = len(xadj) - 1
    if nparts == 1:
        return np.zeros(n, np.int64)
    options = pymetis.Options(seed=int(seed) % 2**31)
    _, parts = pymetis.part_graph(nparts, pymetis.CSRAdjacency(xadj, adjncy), vweights=vweights,
                                  eweights=eweights, recursive=False, options=options)
    parts = np.asarray(parts, dtype=np.int64)
    for empty in np.flatnonzero(np.bincount(parts, minlength=nparts) == 0):
        counts = np.bincount(parts, minlength=nparts)
        largest = np.flatnonzero(parts == int(np.argmax(counts)))
        parts[largest[_halve(xadj, adjncy, largest, seed)]] = empty
    return parts


def _halve(xadj: np.ndarray, adjncy: np.ndarray, members: np.ndarray, seed: int) -> np.ndarray:
    """A mask of about half of ``members`` (two or more graph vertices): METIS's bisection of
    the graph they induce, or their second half by index if METIS leaves a side empty."""
    index = np.full(len(xadj) - 1, -1, dtype=np.int64)
    index[members] = np.arange(len(members))
    src = np.repeat(np.arange(len(xadj) - 1), np.diff(xadj))
    inside = (index[src] >= 0) & (index[adjncy] >= 0)
    sub_x, sub_j = _csr(index[src[inside]], index[adjncy[inside]], len(members), len(members))
    _, side = pymetis.part_graph(2, pymetis.CSRAdjacency(sub_x, sub_j), recursive=False,
                                 options=pymetis.Options(seed=int(seed) % 2**31))
    side = np.asarray(side, dtype=bool)
    if side.all() or not side.any():
        side = np.arange(len(members)) >= len(members) // 2
    return side


def _canonical(part: np.ndarray) -> np.ndarray:
    """Part ids renumbered by each part's lowest element id: part 0 holds element 0."""
    labels, first = np.unique(part, return_index=True)
    new = np.empty(int(labels.max()) + 1, dtype=np.int64)
    new[labels[np.argsort(first)]] = np.arange(len(labels))
    return new[part]


# ----- the partition --------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class MeshPartition:
    """A triangle or tetrahedral mesh's elements split into parts, with neighbours, halos of
    vertex rings, centroids and the part graph (see the module docstring).

    Parameters
    ----------
    vertices : ndarray of float, shape (vertices, 2 or 3)
        Vertex coordinates.
    elements : ndarray of int, shape (elements, 3 or 4)
        Each element's vertex indices: triangles (2D, or a surface in 3D) or tetrahedra (3D).
    part_of_element : ndarray of int, shape (elements,)
        The part of every element; parts ``0 .. max`` must each hold an element.
    halo : int
        Vertex rings a part reads around the vertices it holds.

    Raises
    ------
    ShoalError
        In one line: vertices or elements of the wrong shape, a vertex index out of range, an
        element repeating a vertex, a part holding no element, a halo that reaches a vertex no
        neighbour holds.
    """

    vertices: np.ndarray
    elements: np.ndarray
    part_of_element: np.ndarray
    halo: int = 1

    kind: ClassVar[str] = "mesh"
    """The kind of decomposition (:mod:`shoal.decomposition`)."""
    geometry: ClassVar[frozenset[str]] = frozenset({"centroids", "graph"})
    """What placement policies may use: the parts' centroids and the part graph."""

    def __post_init__(self):
        vertices, elements = _checked_mesh(self.vertices, self.elements)
        part = np.array(self.part_of_element)
        if part.shape != (len(elements),) or (len(part) and not np.issubdtype(part.dtype, np.integer)):
            raise ShoalError(f"part_of_element must hold an integer part per element ({len(elements)}), "
                             f"got {part.dtype} of shape {part.shape}")
        part = part.astype(np.int64)
        if part.min() < 0:
            raise ShoalError(f"element {int(np.argmin(part))} is in part {int(part.min())}: parts are numbered from 0")
        counts = np.bincount(part)
        if (counts == 0).any():
            raise ShoalError(f"part {int(np.flatnonzero(counts == 0)[0])} of {len(counts)} holds no element")
        part.flags.writeable = False
        if int(self.halo) != self.halo or self.halo < 0:
            raise ShoalError(f"halo must be a whole number of vertex rings >= 0, got {self.halo}")
        for name, value in (("vertices", vertices), ("elements", elements), ("part_of_element", part),
                            ("halo", int(self.halo))):
            object.__setattr__(self, name, value)
        if self.halo >= 2:  # rings 0 and 1 always come from neighbours; wider ones are checked now
            self._halos  # noqa: B018

    # ----- construction -------------------------------------------------------------------
    @classmethod
    def from_mesh(cls, vertices, elements, nparts: int, halo: int = 1, seed: int = 0) -> MeshPartition:
        """``nparts`` parts of a mesh by METIS k-way over its dual graph (elements sharing a facet).

        Parameters
        ----------
        vertices : array_like of float, shape (vertices, 2 or 3)
            Vertex coordinates.
        elements : array_like of int, shape (elements, 3 or 4)
            Triangles or tetrahedra, as vertex indices.
        nparts : int
            Parts, between 1 and the number of elements.
        halo : int
            Vertex rings a part reads around the vertices it holds.
        seed : int
            METIS's seed: the same mesh, count and seed always give the same partition.

        Raises
        ------
        ShoalError
            If the mesh is malformed (see the class) or has fewer elements than ``nparts``.
        """
        vertices, elements = _checked_mesh(vertices, elements)
        nparts = int(nparts)
        if nparts < 1:
            raise ShoalError(f"number of mesh parts must be positive, got {nparts}")
        if nparts > len(elements):
            raise ShoalError(f"cannot split {len(elements)} elements into {nparts} parts: "
                             "use at most one part per element")
        e1, e2 = _facet_pairs(elements)
        xadj, adjncy = _csr(e1, e2, len(elements), len(elements))
        part = _canonical(_metis(xadj, adjncy, nparts, seed))
        return cls(vertices, elements, part, halo)

    def coarsen(self, nparts: int, seed: int = 0) -> MeshPartition:
        """A coarser partition whose parts are unions of this one's: METIS k-way over the
        part graph (:meth:`graph`), parts weighted by their elements.

        Parameters
        ----------
        nparts : int
            Coarse parts, between 1 and :attr:`ntiles`.
        seed : int
            METIS's seed.

        Raises
        ------
        ShoalError
            If ``nparts`` is out of range.
        """
        nparts = int(nparts)
        if not 1 <= nparts <= self.ntiles:
            raise ShoalError(f"a mesh partition of {self.ntiles} parts coarsens to 1..{self.ntiles} parts, "
                             f"not {nparts}")
        xadj, adjncy, shared = self.graph()
        coarse = _metis(xadj, adjncy, nparts, seed, vweights=self.cells, eweights=shared)
        return MeshPartition(self.vertices, self.elements, _canonical(coarse[self.part_of_element]), self.halo)

    # ----- shape -------------------------------------------------------------------------
    @property
    def ndim(self) -> int:
        """Dimensions of the vertices: 2 or 3."""
        return int(self.vertices.shape[1])

    @cached_property
    def ntiles(self) -> int:
        """Number of parts; part ids run from 0 to ``ntiles - 1``."""
        return int(self.part_of_element.max()) + 1

    @cached_property
    def cells(self) -> np.ndarray:
        """Elements in every part (int64)."""
        return np.bincount(self.part_of_element, minlength=self.ntiles).astype(np.int64)

    @cached_property
    def mesh_sha256(self) -> str:
        """SHA-256 of the mesh (:func:`mesh_sha256`), what :meth:`from_dict` checks."""
        return mesh_sha256(self.vertices, self.elements)

    @cached_property
    def _elements_of(self) -> tuple[np.ndarray, ...]:
        order = np.argsort(self.part_of_element, kind="stable")
        return tuple(np.split(order.astype(np.int64), np.cumsum(self.cells)[:-1]))

    def elements_of(self, part: int) -> np.ndarray:
        """The elements of ``part``, sorted (int64)."""
        return self._elements_of[self._part(part)]

    @cached_property
    def _held(self) -> tuple[np.ndarray, np.ndarray]:
        """Compressed rows part -> the vertices it holds."""
        m = self.elements.shape[1]
        return _csr(np.repeat(self.part_of_element, m), self.elements.ravel(), self.ntiles, len(self.vertices))

    @cached_property
    def _holders(self) -> tuple[np.ndarray, np.ndarray]:
        """Compressed rows vertex -> the parts that hold it."""
        m = self.elements.shape[1]
        return _csr(self.elements.ravel(), np.repeat(self.part_of_element, m), len(self.vertices), self.ntiles)

    def vertices_of(self, part: int) -> np.ndarray:
        """The vertices ``part`` holds, its ring 0: those of its elements, shared ones included (sorted)."""
        xadj, adjncy = self._held
        p = self._part(part)
        return adjncy[xadj[p]:xadj[p + 1]]

    @cached_property
    def part_of_vertex(self) -> np.ndarray:
        """The owner of every vertex: the lowest-numbered part that holds it (-1 for a vertex no
        element uses)."""
        xadj, adjncy = self._holders
        out = np.full(len(self.vertices), -1, dtype=np.int64)
        used = np.diff(xadj) > 0
        out[used] = adjncy[xadj[:-1][used]]
        out.flags.writeable = False
        return out

    @cached_property
    def centroids(self) -> np.ndarray:
        """Every part's centroid: the mean of its elements' centroids, shape (ntiles, ndim)."""
        centre = self.vertices[self.elements].mean(axis=1)
        sums = np.stack([np.bincount(self.part_of_element, weights=centre[:, a], minlength=self.ntiles)
                         for a in range(self.ndim)], axis=1)
        return sums / self.cells[:, None]

    # ----- neighbours ------------------------------------------------------------------------
    @cached_property
    def _shared(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The part graph in compressed rows, with the vertices each pair shares."""
        p, q = _pairs(*self._holders)
        keys, counts = np.unique(p * self.ntiles + q, return_counts=True)
        rows, cols = np.divmod(keys, self.ntiles)
        return np.searchsorted(rows, np.arange(self.ntiles + 1)).astype(np.int64), cols, counts.astype(np.int64)

    @cached_property
    def neighbours(self) -> tuple[np.ndarray, ...]:
        """Every part's neighbours: the parts it shares a vertex with (sorted)."""
        xadj, adjncy, _ = self._shared
        return _rows(xadj, adjncy)

    @cached_property
    def face_neighbours(self) -> tuple[np.ndarray, ...]:
        """Every part's neighbours across facets: parts holding an element that shares an edge
        (triangles) or a face (tetrahedra) with one of its elements (sorted)."""
        e1, e2 = _facet_pairs(self.elements)
        p, q = self.part_of_element[e1], self.part_of_element[e2]
        cross = p != q
        return _rows(*_csr(p[cross], q[cross], self.ntiles, self.ntiles))

    def stencil(self, kind: str) -> tuple[np.ndarray, ...]:
        """The parts every part reads from under a stencil ``kind``: ``"faces"``
        (:attr:`face_neighbours`) or ``"all"`` (:attr:`neighbours`: parts sharing a vertex)."""
        if kind == "faces":
            return self.face_neighbours
        if kind == "all":
            return self.neighbours
        raise ShoalError(f"a mesh partition has no stencil {kind!r}; known: faces, all")

    def neighbours_csr(self) -> tuple[np.ndarray, np.ndarray]:
        """:attr:`neighbours` in compressed rows ``(xadj, adjncy)`` (int64)."""
        xadj, adjncy, _ = self._shared
        return xadj, adjncy

    def graph(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The part graph ``(xadj, adjncy, weights)``: :meth:`neighbours_csr`, each edge weighing
        the vertices the two parts share (int64, symmetric)."""
        return self._shared

    def shared_vertices(self, a: int, b: int) -> np.ndarray:
        """The vertices parts ``a`` and ``b`` both hold (sorted; empty unless neighbours)."""
        return np.intersect1d(self.vertices_of(a), self.vertices_of(b), assume_unique=True)

    # ----- halos ------------------------------------------------------------------------------
    @cached_property
    def _vertex_graph(self) -> tuple[np.ndarray, np.ndarray]:
        """Compressed rows vertex -> the vertices it shares an element with."""
        m = self.elements.shape[1]
        a = np.concatenate([self.elements[:, i] for i in range(m) for j in range(m) if i != j])
        b = np.concatenate([self.elements[:, j] for i in range(m) for j in range(m) if i != j])
        return _csr(a, b, len(self.vertices), len(self.vertices))

    @cached_property
    def _halos(self) -> dict[tuple[int, int], np.ndarray]:
        """``(dst, src) -> vertices`` of every part's halo, each vertex from one neighbour."""
        out = {}
        hx, hp = self._holders
        for dst in range(self.ntiles):
            visited = frontier = self.vertices_of(dst)
            rings = []
            for _ in range(self.halo):
                reached = np.unique(_gather(*self._vertex_graph, frontier))
                frontier = np.setdiff1d(reached, visited, assume_unique=True)
                if not len(frontier):
                    break
                rings.append(frontier)
                visited = np.union1d(visited, frontier)
            if not rings:
                continue
            need = np.sort(np.concatenate(rings))
            holders = _gather(hx, hp, need)
            lengths = hx[need + 1] - hx[need]
            # the lowest neighbour holding each vertex (holders are sorted): the first that is one
            candidate = np.where(np.isin(holders, self.neighbours[dst]), holders, self.ntiles)
            source = np.minimum.reduceat(candidate, np.concatenate([[0], np.cumsum(lengths)[:-1]]))
            if (source == self.ntiles).any():
                v = int(need[np.argmax(source == self.ntiles)])
                raise ShoalError(f"a halo of {self.halo} vertex rings around part {dst} reaches vertex {v}, which no "
                                 "part sharing a vertex with it holds: use fewer rings or fewer, larger parts")
            for src in np.unique(source):
                out[(dst, int(src))] = need[source == src]
        return out

    def halo_vertices(self, dst: int, src: int) -> np.ndarray:
        """The vertices of part ``src`` that part ``dst`` reads: those of ``dst``'s halo rings
        that come from ``src`` (sorted; empty if none, and always for ``src == dst``)."""
        return self._halos.get((self._part(dst), self._part(src)), np.zeros(0, np.int64))

    # ----- nesting ------------------------------------------------------------------------
    def fine_to_coarse(self, coarse: MeshPartition) -> np.ndarray:
        """For each part, the part of ``coarse`` that contains it.

        Raises
        ------
        ShoalError
            If ``coarse`` is not a mesh partition of the same mesh whose parts are unions of
            these.
        """
        if getattr(coarse, "kind", None) != "mesh":
            raise ShoalError("a mesh partition nests only in a mesh partition")
        if coarse.mesh_sha256 != self.mesh_sha256:
            raise ShoalError("the coarse mesh partition is of another mesh")
        first = np.unique(self.part_of_element, return_index=True)[1]  # each fine part's first element
        out = coarse.part_of_element[first].astype(np.int64)
        split = np.flatnonzero(out[self.part_of_element] != coarse.part_of_element)
        if len(split):
            fine = int(self.part_of_element[split[0]])
            raise ShoalError(f"the coarse mesh partition does not nest the fine one: fine part {fine} lies in coarse "
                             f"parts {int(out[fine])} and {int(coarse.part_of_element[split[0]])}")
        return out

    # ----- serialisation ----------------------------------------------------------------------
    def to_dict(self) -> dict:
        """JSON-ready dict: ``kind``, ``parts``, ``halo``, ``part_of_element`` (a list) and
        ``mesh`` (vertex and element counts, ``ndim``, vertices per element, ``sha256``);
        :meth:`from_dict` reads it back given the mesh."""
        return {"kind": self.kind, "parts": self.ntiles, "halo": self.halo,
                "part_of_element": self.part_of_element.tolist(),
                "mesh": {"vertices": len(self.vertices), "elements": len(self.elements), "ndim": self.ndim,
                         "nodes_per_element": int(self.elements.shape[1]), "sha256": self.mesh_sha256}}

    @classmethod
    def from_dict(cls, d: dict, vertices, elements) -> MeshPartition:
        """The partition :meth:`to_dict` wrote, of the mesh ``vertices`` and ``elements``.

        Parameters
        ----------
        d : dict
            What :meth:`to_dict` returned (JSON read back will do).
        vertices, elements : array_like
            The mesh the partition was made of; its hash must be the one ``d`` holds.

        Raises
        ------
        ShoalError
            If the mesh is not the one the partition was made of (its hash differs), or the
            dict is not a mesh partition's.
        """
        try:
            kind, stored, parts = d["kind"], d["mesh"]["sha256"], int(d["parts"])
            part, halo = np.asarray(d["part_of_element"]), int(d["halo"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ShoalError(f"not a mesh partition's dict (missing or bad {exc})") from None
        if kind != "mesh":
            raise ShoalError(f"not a mesh partition's dict: its kind is {kind!r}")
        vertices, elements = _checked_mesh(vertices, elements)
        sha = mesh_sha256(vertices, elements)
        if sha != stored:
            raise ShoalError(f"this mesh ({len(vertices)} vertices, {len(elements)} elements, SHA-256 {sha[:12]}) "
                             f"is not the one the partition was made of (SHA-256 {str(stored)[:12]})")
        out = cls(vertices, elements, part, halo)
        if out.ntiles != parts:
            raise ShoalError(f"a mesh partition's dict says {parts} parts, its elements are in {out.ntiles}")
        return out

    def _part(self, part: int) -> int:
        part = int(part)
        if not 0 <= part < self.ntiles:
            raise ShoalError(f"part {part} is outside 0..{self.ntiles - 1}")
        return part

    def __repr__(self) -> str:
        shape = "triangles" if self.elements.shape[1] == 3 else "tetrahedra"
        return (f"MeshPartition({len(self.elements)} {shape}, {len(self.vertices)} vertices in {self.ndim}D, "
                f"parts={self.ntiles}, halo={self.halo})")
