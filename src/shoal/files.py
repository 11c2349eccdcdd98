"""Writing files so that a reader never sees half of one.

Every file shoal writes goes through :func:`atomic_write`: the bytes go to a uniquely named
temporary file beside the target, are flushed and fsynced, and the temporary file is renamed
over the target (an atomic replace on POSIX), then the folder is fsynced so the rename
survives a power cut. A crash at any moment leaves either the old file or the new one, and
two writers never share a temporary name. The new file gets the mode a plain ``open`` would
give it (the old file's, or ``0o666`` less the umask), so run folders can be shared as the
user's umask says, not private as temporary files start.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import numpy as np


@contextmanager
def atomic_write(path: str | Path, mode: str = "wb") -> Iterator[IO]:
    """Open a temporary file that replaces ``path`` when the block ends without an error.

    Parameters
    ----------
    path : str or Path
        The file to (re)place. Its folder must exist.
    mode : {"wb", "w"}
        Binary or text.

    Yields
    ------
    file object
        Write to it; it is flushed, fsynced and renamed over ``path`` on leaving the block. On
        an exception the temporary file is removed and ``path`` is left as it was.
    """
    if mode not in ("wb", "w"):
        raise ValueError(f"mode must be 'wb' or 'w', got {mode!r}")
    with atomic_path(path) as tmp, open(tmp, mode) as fh:
        yield fh  # closed here, then fsynced and renamed by atomic_path


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A temporary path beside ``path`` for libraries that open files by name (h5py, VTK).

    The library writes and closes the file inside the block; on leaving, the file is fsynced
    and renamed over ``path``. On an exception it is removed and ``path`` is left as it was.
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
    try:
        os.fchmod(fd, _mode_for(path))  # mkstemp makes it 0600
    finally:
        os.close(fd)
    try:
        yield Path(tmp)
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_folder(path.parent)


def _mode_for(path: Path) -> int:
    """The permission bits a new file at ``path`` should have: those of the file it replaces,
    or what ``open`` gives a new file under this process's umask."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return 0o666 & ~current_umask()


def current_umask() -> int:
    """This process's umask, read without changing it (``os.umask`` can only be read by setting
    it, which would race with other threads creating files); from ``/proc`` where Linux has it."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    with _UMASK_LOCK:
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


_UMASK_LOCK = threading.Lock()


def remove_partials(folder: str | Path, targets: Iterable[str] | None = None) -> list[Path]:
    """Delete the temporary files that writers killed inside :func:`atomic_path` left in ``folder``.

    Call it only on a folder this process alone writes (a run folder under its lock): the
    temporary file of a writer still at work would vanish under it.

    Parameters
    ----------
    folder : str or Path
        The folder (not its subfolders); a missing one holds nothing.
    targets : iterable of str, optional
        The names whose temporary files go (``trace.h5`` takes ``.trace.h5.*.partial``);
        default: every one.

    Returns
    -------
    list of Path
        The files deleted.
    """
    folder = Path(folder)
    if not folder.is_dir():
        return []
    patterns = [f".{name}.*.partial" for name in targets] if targets is not None else [".*.partial"]
    stale = sorted({p for pattern in patterns for p in folder.glob(pattern) if p.is_file()})
    for p in stale:
        p.unlink(missing_ok=True)
    return stale


def fsync_folder(folder: str | Path) -> None:
    """Make a rename or a new file in ``folder`` durable (a no-op where folders cannot be opened)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_json(path: str | Path, data: Any) -> None:
    """Write ``data`` to ``path`` as indented JSON (two spaces, a final newline), atomically.

    ``path``'s folder must exist; ``data`` must be JSON-serialisable (``TypeError`` otherwise,
    and ``path`` is left as it was).
    """
    with atomic_write(path, "w") as fh:
        fh.write(json.dumps(data, indent=2) + "\n")


def write_text(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` as is (no newline added), atomically; ``path``'s folder must exist."""
    with atomic_write(path, "w") as fh:
        fh.write(text)


def save_npz(path: str | Path, arrays: dict[str, np.ndarray]) -> None:
    """Write ``arrays`` to ``path`` as an uncompressed ``.npz`` archive, atomically.

    Parameters
    ----------
    path : str or Path
        The archive, written under exactly this name (no ``.npz`` is appended); its folder must exist.
    arrays : dict of str to array_like
        The archive's members by name.

    Raises
    ------
    TypeError
        If an array holds Python objects: loading it would need pickle. Nothing is written.
    """
    for name, arr in arrays.items():
        if np.asarray(arr).dtype.hasobject:
            raise TypeError(f"array {name!r} holds Python objects; an .npz must load without pickle")
    with atomic_write(path, "wb") as fh:
        np.savez(fh, **arrays)
