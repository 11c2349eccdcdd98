"""Checkpoints: everything a run needs to continue bitwise identically from a step.

A checkpoint holds the step, the tiling, every tile's state (particles with their ids, time,
inflow and outflow counters), the owner table, the balancer's memory, and the reductions of
the step before (a lagged reduction is read a step later). Resuming keeps the tiling (tile
states are per tile) but may change the nodes, the workers and the placement: placement never
changes results.

Files
-----
``state/checkpoint-NNNNNN.h5`` (``NNNNNN``: the step, six digits or more) is an HDF5 file that
holds numbers only: no pickles, no Python objects, so opening one never runs code. It is
written to a unique temporary name, fsynced and renamed (:func:`shoal.files.atomic_path`), so
a crash leaves the old checkpoints and never half a new one; the two latest are kept.

Root attributes
    ``format`` (``"shoal checkpoint"``), ``version`` (int, :data:`VERSION`), ``step`` (int, the
    same as in the name), ``tiling`` (JSON of :meth:`shoal.tiling.Tiling.to_dict`) and
    ``sha256`` (hex SHA-256 of everything else in the file, see :func:`content_digest`).
``/owner``
    int64 ``(tiles,)``: the node of every tile.
``/states``
    Every tile's portable state, flattened by :mod:`shoal.runtime.packing` and stored as
    columns (:func:`~shoal.runtime.packing.to_columns`):

    - attribute ``layouts``: JSON list of the distinct layouts of the states (how to rebuild
      dicts, lists, tuples and scalars around the arrays);
    - ``ids`` int64 ``(n,)``: the tile id of each stored state, ascending;
    - ``layout_of`` int64 ``(n,)``: the index in ``layouts`` of each state's layout;
    - ``0``, ``1``, ...: one group per column, with attributes ``path`` (the entry's place in
      the layout, e.g. ``/particles/x``), ``scalar`` (1 if each state holds one number) and
      ``text`` (1 if the column is UTF-8 bytes of a string array), and datasets ``data`` (the
      entries of every state holding it, concatenated along the first axis), ``holders``
      (int64, positions in ``ids`` of those states) and ``offsets`` (int64, where each one's
      part of ``data`` starts, and the end).
``/balancer``
    The balancer's :meth:`~shoal.placement.balancing.Balancer.checkpoint_state` (policy memory,
    costs of the period so far, steps), stored like ``/states`` with one value (id 0).
``/reduced``
    The reductions of the step before, as a list of ``(step, phase name, value)``, stored like
    ``/states`` with one value (id 0).

Every dataset is contiguous and unfiltered, of a numeric, boolean or byte-string type. A file
that is empty, truncated, not HDF5 (a pickle, say), of another version, with a checksum that
does not match, holding object, opaque or compound data, links or external storage, or named
without a step is damaged: :meth:`Checkpoint.latest` falls back to the newest intact one and
says so in one warning line. Old pickle checkpoints (``checkpoint-NNNNNN.pkl``) are refused;
:func:`convert_pickle_checkpoint` converts one when the user says they trust it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import pickle
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from ..decomposition import decomposition_from_dict
from ..errors import ShoalError
from ..files import atomic_path
from ..mesh import MeshPartition
from ..tiling import Tiling
from .packing import Column, from_columns, to_columns

FORMAT = "shoal checkpoint"
VERSION = 3  # 3: HDF5 with a SHA-256 (2, the last pickle: the balancer's costs per phase and tile)
PICKLE_VERSION = 2  # the pickle checkpoints convert_pickle_checkpoint reads
NAME = re.compile(r"checkpoint-(\d{6,})\.h5")
HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
STORABLE = "biufcSU"  # dtype kinds a checkpoint holds: numbers, booleans, text

logger = logging.getLogger("shoal")


@dataclass
class Checkpoint:
    """Everything a run needs to continue from the start of ``step`` (the file layout is in the
    module's description).

    Parameters
    ----------
    step : int
        The step the run continues from: steps ``0 .. step - 1`` are done.
    tiling : Tiling
        The run's tiling; a resumed run keeps it.
    states : dict of int to state
        Every tile's portable state (:meth:`~shoal.runtime.app.App.portable`: the app's
        transient keys left out), by tile id.
    owner : ndarray of int
        The node of every tile at ``step``.
    balancer : dict
        The balancer's memory (:meth:`~shoal.placement.balancing.Balancer.checkpoint_state`).
    reduced : dict
        ``{(step, phase name): value}``: the lagged reductions of ``step - 1`` that ``step`` reads.
    """

    step: int
    tiling: Tiling | MeshPartition
    states: dict[int, Any]  # portable states (the app's transient keys left out)
    owner: np.ndarray
    balancer: dict = field(default_factory=dict)
    reduced: dict = field(default_factory=dict)  # (step, phase name) -> value, of step - 1

    def write(self, folder: Path, keep: int | None = 2) -> Path:
        """Write ``folder/checkpoint-NNNNNN.h5`` atomically (``folder`` is created if needed), then
        delete all but the ``keep`` latest checkpoints of ``folder`` (none if ``keep`` is None).
        Returns the new file's path."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"checkpoint-{self.step:06d}.h5"
        with atomic_path(path) as tmp, h5py.File(tmp, "w") as f:
            f.attrs.update(format=FORMAT, version=VERSION, step=int(self.step),
                           tiling=json.dumps(self.tiling.to_dict()))
            f.create_dataset("owner", data=np.asarray(self.owner, dtype=np.int64))
            if self.tiling.kind == "mesh":  # (its dict holds a hash of the mesh, not the mesh)
                f.create_dataset("mesh_vertices", data=np.asarray(self.tiling.vertices))
                f.create_dataset("mesh_elements", data=np.asarray(self.tiling.elements))
            ids = sorted(self.states)
            _write_values(f.create_group("states"), ids, [self.states[t] for t in ids])
            _write_values(f.create_group("balancer"), [0], [self.balancer])
            reduced = [(step, name, value) for (step, name), value in self.reduced.items()]
            _write_values(f.create_group("reduced"), [0], [reduced])
            f.attrs["sha256"] = _load_tree(f).digest
        if keep is not None:
            for _, old in _checkpoints(folder)[0][keep:]:
                old.unlink(missing_ok=True)
        return path

    @classmethod
    def read(cls, path: Path) -> Checkpoint:
        """The checkpoint in ``path``; a ShoalError naming the file and what is wrong if it is damaged."""
        path = Path(path)
        match = NAME.fullmatch(path.name)
        if match is None:
            raise ShoalError(f"{path} is not named checkpoint-NNNNNN.h5 (NNNNNN: its step)")
        _check_signature(path)
        try:
            with h5py.File(path, "r") as f:
                tree = _load_tree(f)
            cp = _decode(tree)
        except ShoalError as exc:
            raise ShoalError(f"{path}: {exc}") from None
        except (OSError, KeyError, ValueError, TypeError, IndexError, AttributeError) as exc:
            raise ShoalError(f"{path} is damaged ({type(exc).__name__}: {_one_line(exc)})") from None
        if cp.step != int(match.group(1)):
            raise ShoalError(f"{path} holds step {cp.step}, not the step in its name")
        return cp

    @staticmethod
    def latest_path(folder: Path) -> Path:
        """The newest checkpoint in ``folder`` by its name (not read: :meth:`latest` may fall
        back to an older one if this one is damaged)."""
        found, misnamed = _checkpoints(Path(folder))
        if not found:
            raise ShoalError(_nothing_to_resume(Path(folder), [f"{p} has no step in its name" for p in misnamed]))
        return found[0][1]

    @staticmethod
    def latest_step(folder: Path) -> int:
        """The step of the newest checkpoint, from its name (without reading it)."""
        return int(NAME.fullmatch(Checkpoint.latest_path(folder).name).group(1))

    @classmethod
    def latest(cls, folder: Path) -> Checkpoint:
        """The newest intact checkpoint in ``folder``: damaged newer ones are skipped with one
        warning line; a ShoalError naming each file and its fault if none is intact."""
        folder = Path(folder)
        found, misnamed = _checkpoints(folder)
        problems = [f"{p} has no step in its name" for p in misnamed]
        for _, path in found:
            try:
                cp = cls.read(path)
            except ShoalError as exc:
                problems.append(str(exc))
                continue
            if problems:
                logger.warning("damaged checkpoint skipped: %s; resuming from %s", "; ".join(problems), path.name)
            return cp
        raise ShoalError(_nothing_to_resume(folder, problems))


def convert_pickle_checkpoint(path: str | Path, trust: bool) -> Path:
    """Convert an old pickle checkpoint ``checkpoint-NNNNNN.pkl`` to the HDF5 one beside it.

    Loading a pickle runs whatever code its author put in it, so this unpickles ``path`` only
    when ``trust`` is True (the user says they trust who made the file).

    Parameters
    ----------
    path : str or Path
        The ``.pkl`` checkpoint.
    trust : bool
        Whether the user trusts the file's author; without it nothing is read.

    Returns
    -------
    Path
        The new ``checkpoint-NNNNNN.h5`` in the same folder (older checkpoints are kept).

    Raises
    ------
    ShoalError
        Without ``trust`` (saying how to convert), or when ``path`` is not a file or not a
        readable version-2 pickle checkpoint.
    """
    path = Path(path)
    if not trust:
        raise ShoalError(_pickle_refusal(path))
    if not path.is_file():
        raise ShoalError(f"{path} is not a file")
    try:
        with open(path, "rb") as fh:
            data = pickle.load(fh)  # trusted by the user, explicitly
        if not isinstance(data, dict) or data.get("version") != PICKLE_VERSION:
            version = data.get("version") if isinstance(data, dict) else None
            raise ShoalError(f"{path} is not a version-{PICKLE_VERSION} pickle checkpoint (version {version})")
        cp = Checkpoint(int(data["step"]), Tiling.from_dict(data["tiling"]), dict(data["states"]),
                        np.asarray(data["owner"]), data["balancer"], data.get("reduced", {}))
    except ShoalError:
        raise
    except Exception as exc:  # anything unpickling or rebuilding raises: the file is not a checkpoint
        raise ShoalError(f"{path} is not a readable pickle checkpoint ({type(exc).__name__}: {_one_line(exc)})") \
            from None
    return cp.write(path.parent, keep=None)


# ----- the folder ---------------------------------------------------------------------------------
def _checkpoints(folder: Path) -> tuple[list[tuple[int, Path]], list[Path]]:
    """``(step, path)`` of the well-named checkpoints, newest first, and the misnamed ones."""
    found, misnamed = [], []
    for p in folder.glob("checkpoint-*.h5"):
        m = NAME.fullmatch(p.name)
        if m:
            found.append((int(m.group(1)), p))
        else:
            misnamed.append(p)
    return sorted(found, reverse=True), sorted(misnamed)


def _nothing_to_resume(folder: Path, problems: list[str]) -> str:
    pickles = sorted(folder.glob("checkpoint-*.pkl"))
    if pickles:
        return _pickle_refusal(pickles[-1])
    if problems:
        return f"no intact checkpoint in {folder}: " + "; ".join(problems)
    return f"{folder} holds no checkpoint to resume from (run with --checkpoint-every)"


def _pickle_refusal(path: Path) -> str:
    return (f"{path} is an old pickle checkpoint, which shoal no longer opens: loading a pickle runs any code "
            f"its author put in it; if you trust who made it, convert it with: shoal convert-checkpoint --trust {path}")


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


# ----- writing ------------------------------------------------------------------------------------
def _write_values(group: h5py.Group, ids: list[int], values: list[Any]) -> None:
    """``values`` (with ids ``ids``) as columns in ``group`` (see the module docstring)."""
    layouts, layout_of, columns = to_columns(values)
    group.attrs["layouts"] = json.dumps(layouts)
    group.create_dataset("ids", data=np.asarray(ids, dtype=np.int64))
    group.create_dataset("layout_of", data=layout_of)
    for k, c in enumerate(columns):
        if c.data.dtype.kind not in STORABLE:
            raise ShoalError(f"tile state entry {c.path or '/'} has dtype {c.data.dtype}, which a checkpoint cannot "
                             "store: keep numbers, booleans and text")
        col = group.create_group(str(k))
        text = c.data.dtype.kind == "U"
        col.attrs.update(path=c.path, scalar=int(c.scalar), text=int(text))
        col.create_dataset("data", data=np.char.encode(c.data, "utf-8") if text else c.data)
        col.create_dataset("holders", data=c.holders)
        col.create_dataset("offsets", data=c.offsets)


# ----- reading ------------------------------------------------------------------------------------
@dataclass
class Tree:
    """Everything in a checkpoint file: attributes and arrays by object name, and their digest."""

    attrs: dict[str, dict[str, Any]]
    arrays: dict[str, np.ndarray]
    digest: str


def content_digest(f: h5py.File) -> str:
    """SHA-256 of every object's name, attributes (but the root's ``sha256``) and data, in name order."""
    return _load_tree(f).digest


def _load_tree(f: h5py.File) -> Tree:
    """Read every object of ``f``, refusing anything that is not plain numbers or text."""
    links: list[str] = []
    f.visititems_links(lambda name, link: None if isinstance(link, h5py.HardLink) else links.append(name))
    if links:
        raise ShoalError(f"holds soft or external links ({', '.join(links[:3])}), which a checkpoint never has")
    names = [""]
    f.visit(names.append)
    sha = hashlib.sha256()
    attrs, arrays = {}, {}
    for name in sorted(names):
        obj = f[name] if name else f
        sha.update(b"\0name\0" + name.encode())
        attrs[name] = {}
        for key in sorted(obj.attrs):
            value = obj.attrs[key]
            if name or key != "sha256":
                sha.update(b"\0attr\0" + key.encode() + b"\0" + _canonical(value, f"attribute {name}/{key}"))
            attrs[name][key] = value
        if isinstance(obj, h5py.Dataset):
            data = _read_dataset(obj)
            sha.update(b"\0data\0" + f"{data.dtype.str}{data.shape}".encode() + b"\0" + data.tobytes())
            arrays[name] = data
    return Tree(attrs, arrays, sha.hexdigest())


def _canonical(value: Any, where: str) -> bytes:
    if isinstance(value, str):
        return b"s" + value.encode()
    a = np.asarray(value)
    if a.dtype.kind not in STORABLE:
        raise ShoalError(f"{where} holds {_kind(a.dtype)} data, not the numbers and text of a checkpoint")
    return f"{a.dtype.str}{a.shape}".encode() + b"\0" + a.tobytes()


def _kind(dtype: np.dtype) -> str:
    return {"O": "Python object", "V": "opaque or compound"}.get(dtype.kind, str(dtype))


def _read_dataset(ds: h5py.Dataset) -> np.ndarray:
    """The data of ``ds`` if it is plain numbers or bytes stored in this file, else a ShoalError."""
    where = f"dataset {ds.name}"
    if ds.dtype.kind not in STORABLE or ds.dtype.hasobject or ds.dtype.fields is not None:
        raise ShoalError(f"{where} holds {_kind(ds.dtype)} data, not the numbers and text of a checkpoint")
    if ds.is_virtual or ds.external or ds.id.get_create_plist().get_nfilters():
        raise ShoalError(f"{where} is virtual, external or filtered, not plain data in the file")
    if ds.id.get_storage_size() != ds.nbytes:
        raise ShoalError(f"{where} claims {ds.nbytes} bytes but stores {ds.id.get_storage_size()}")
    return ds[()]


def _check_signature(path: Path) -> None:
    """Refuse files that are not HDF5 before the HDF5 library parses them."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(len(HDF5_SIGNATURE))
    except OSError as exc:
        raise ShoalError(f"{path} cannot be read ({exc.strerror})") from None
    if head == HDF5_SIGNATURE:
        return
    if not head:
        raise ShoalError(f"{path} is empty")
    if head[:1] == b"\x80":
        raise ShoalError(f"{path} is a pickle, not an HDF5 checkpoint: refused, nothing in it was run")
    raise ShoalError(f"{path} is not an HDF5 file (garbage or another format)")


def _decode(tree: Tree) -> Checkpoint:
    root = tree.attrs[""]
    if root.get("format") != FORMAT:
        raise ShoalError(f"is not a shoal checkpoint (format {root.get('format')!r})")
    if root.get("version") != VERSION:
        raise ShoalError(f"has checkpoint version {root.get('version')} (this shoal reads {VERSION})")
    if root.get("sha256") != tree.digest:
        raise ShoalError("fails its checksum (the content does not match the SHA-256 it was written with)")
    mesh = (tree.arrays["mesh_vertices"], tree.arrays["mesh_elements"]) if "mesh_vertices" in tree.arrays else None
    tiling = decomposition_from_dict(json.loads(root["tiling"]), mesh)
    owner = tree.arrays["owner"]
    ids, states = _read_values(tree, "states")
    if owner.shape != (tiling.ntiles,) or ids != list(range(tiling.ntiles)):
        raise ShoalError(f"holds {len(ids)} tile states and {owner.size} owners for {tiling.ntiles} tiles")
    (balancer,), (reduced,) = _read_values(tree, "balancer")[1], _read_values(tree, "reduced")[1]
    return Checkpoint(int(root["step"]), tiling, dict(zip(ids, states, strict=True)), owner, balancer,
                      {(step, name): value for step, name, value in reduced})


def _read_values(tree: Tree, group: str) -> tuple[list[int], list[Any]]:
    """The ids and values :func:`_write_values` wrote into ``group``."""
    layouts = json.loads(tree.attrs[group]["layouts"])
    if not isinstance(layouts, list) or not all(isinstance(s, str) for s in layouts):
        raise ShoalError(f"/{group} has layouts that are not a list of strings")
    ids, layout_of = tree.arrays[f"{group}/ids"], tree.arrays[f"{group}/layout_of"]
    if ids.shape != layout_of.shape or ids.ndim != 1:
        raise ShoalError(f"/{group} has ids and layout indices of different shapes")
    columns = []
    k = 0
    while f"{group}/{k}" in tree.attrs:
        name, attrs = f"{group}/{k}", tree.attrs[f"{group}/{k}"]
        data = tree.arrays[f"{name}/data"]
        if attrs["text"]:
            data = np.char.decode(data, "utf-8")
        columns.append(Column(str(attrs["path"]), data, bool(attrs["scalar"]), tree.arrays[f"{name}/holders"],
                              tree.arrays[f"{name}/offsets"]))
        k += 1
    return ids.tolist(), from_columns(layouts, layout_of, columns)
