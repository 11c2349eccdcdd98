"""Run folders: naming a new one, refusing one a run may not write into, and locking one for a run.

A run folder belongs to one run. :func:`claim_folder` refuses, before anything is written, a
folder that is a file, lies under one, cannot be written, or already holds anything (a finished
run, an interrupted one, other files) unless the run resumes that very folder; it then holds an
exclusive lock on ``run.lock`` for the run's life, so a second run into the folder is refused
naming the first one's process id.

The lock is ``flock``, which the kernel lets go of however the process ends. Some cluster file
systems (NFS mounted without a lock daemon) refuse every lock with "No locks available": there
the run says so in one line and holds an exclusive *owner file* instead (``run.owner``, made
with ``O_EXCL``, naming the host and process), and HDF5 opens files without its own locks
(``HDF5_USE_FILE_LOCKING=FALSE``, unless the user set it). A run killed without cleaning up
leaves that file behind; the next run on the same host takes it over once its process is gone,
and a run on another host is refused naming the file to remove.

Replays (``shoal replay``) claim their predicted run folders the same way.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import re
import socket
import time
from pathlib import Path

from .errors import ShoalError

logger = logging.getLogger("shoal")

LOCK = "run.lock"  # flock'd for the run's life; opened in place, never replaced
OWNER = "run.owner"  # the exclusive file of a file system without locks
NO_LOCKS = {errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL}  # what such file systems answer


class FolderLock:
    """A run's hold on its folder, until :meth:`release` (or, for ``flock``, the process's end).

    Attributes
    ----------
    made : bool
        The run created the folder (so a run that fails while starting removes it again).
    owner_file : Path or None
        The exclusive owner file held instead of a lock on a file system without locks.
    """

    def __init__(self, fd: int, made: bool, owner_file: Path | None = None):
        self.fd, self.made, self.owner_file = fd, made, owner_file

    def release(self) -> None:
        """Let go of the folder (close the lock file, remove the owner file); twice does nothing."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        if self.owner_file is not None:
            self.owner_file.unlink(missing_ok=True)
            self.owner_file = None


def as_label(text: str) -> str:
    """``text`` made a folder name's label: anything but letters, digits, ``.``, ``_`` and ``-``
    becomes ``-``, and leading dots and dashes go (``../../x`` -> ``x``, ``/tmp/x`` -> ``tmp-x``)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).lstrip(".-") or "run"


def new_folder(root: str | Path, label: str) -> Path:
    """A folder under ``root`` named after ``label`` and the time, that does not exist yet.

    ``label`` is a label, not a path (:func:`as_label`), so a scenario named ``../../x`` or
    ``/tmp/x`` still writes under ``root``.
    """
    base = Path(root) / f"{as_label(label)}-{time.strftime('%Y%m%d-%H%M%S')}"
    path, k = base, 1
    while path.exists():
        path, k = Path(f"{base}-{k}"), k + 1
    return path


def check_folder(path: Path, own: bool = False, locked: bool = False) -> None:
    """Refuse a run folder this run may not write into (one line), writing nothing.

    Parameters
    ----------
    path : Path
        The folder.
    own : bool
        The run resumes this folder, which may then hold its interrupted run.
    locked : bool
        This process holds the folder's lock.

    Raises
    ------
    ShoalError
        If ``path`` is empty, a file, lies under a file, cannot be written, is in use by another
        run, or already holds a finished run, an interrupted one or other files.
    """
    if str(path) in ("", "."):
        raise ShoalError("--out names no folder: give a new folder's name")
    if path.exists() and not path.is_dir():
        raise ShoalError(f"--out {path} is a file, not a folder")
    existing = next(p for p in (path, *path.parents) if p.exists() or p == Path(p.anchor))
    if not existing.is_dir():
        raise ShoalError(f"--out {path} lies under {existing}, which is a file")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ShoalError(f"--out {path}: {existing} is not writable")
    if existing != path:
        return  # a new folder
    holder = None if locked else lock_holder(path)
    if holder is not None:
        raise ShoalError(f"{path} is in use by another run ({holder})")
    if (path / "summary.json").exists():
        raise ShoalError(f"{path} already holds a finished run; choose another --out")
    content = sorted(p.name for p in path.iterdir() if p.name not in (LOCK, OWNER))
    if content and not own:
        what = "an interrupted run (continue it with --resume)" if (path / "config.toml").exists() else \
            f"other files ({', '.join(content[:3])}{', ...' if len(content) > 3 else ''})"
        raise ShoalError(f"{path} already holds {what}; choose another --out")


def claim_folder(path: Path, own: bool = False) -> FolderLock:
    """Make (if need be) and lock the run folder ``path`` for this run, after :func:`check_folder`.

    The lock is held until released or the process ends. ``own``: the run resumes this folder,
    which may hold its interrupted run.
    """
    check_folder(path, own)
    made = not path.exists()
    try:
        path.mkdir(parents=True, exist_ok=True)
        fd = os.open(path / LOCK, os.O_RDWR | os.O_CREAT, 0o666)  # the umask decides, as for every file
    except OSError as exc:
        raise ShoalError(f"--out {path} cannot be written: {exc.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise ShoalError(f"{path} is in use by another run ({lock_holder(path) or 'pid unknown'})") from None
    except OSError as exc:
        if exc.errno not in NO_LOCKS:
            os.close(fd)
            raise ShoalError(f"{path}: cannot lock {LOCK}: {exc.strerror}") from None
        os.close(fd)
        lock = _own(path, made, exc.strerror or "no locks")
    else:
        lock = FolderLock(fd, made)
    try:
        check_folder(path, own, locked=True)  # again, holding the lock: another run may have come and gone
    except ShoalError:
        lock.release()
        raise
    if lock.fd >= 0:
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
    return lock


def _own(path: Path, made: bool, why: str) -> FolderLock:
    """Hold ``path`` by its exclusive owner file, on a file system that refuses locks."""
    owner = path / OWNER
    for _ in range(2):  # a stale owner file of this host is taken over once
        try:
            fd = os.open(owner, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            host, pid = _read_owner(owner)
            if _stale(host, pid):
                owner.unlink(missing_ok=True)
                continue
            where = f"pid {pid} on {host}" if pid is not None else "a run that left no pid"
            raise ShoalError(f"{path} is in use by another run ({where}; if that run is gone, remove "
                             f"{owner})") from None
        except OSError as exc:
            raise ShoalError(f"--out {path} cannot be written: {exc.strerror}") from None
        with os.fdopen(fd, "w") as fh:
            fh.write(f"{socket.gethostname()} {os.getpid()}\n")
        os.environ.setdefault("HDF5_USE_FILE_LOCKING", "FALSE")  # HDF5 would refuse its files there too
        logger.warning("%s: this file system refuses locks (%s): the run holds %s instead (a run killed "
                       "without cleanup leaves it behind) and opens HDF5 files without locking", path, why, OWNER)
        return FolderLock(-1, made, owner)
    raise ShoalError(f"{path} is in use by another run (remove {owner} if that run is gone)")


def _read_owner(owner: Path) -> tuple[str, int | None]:
    try:
        host, pid = owner.read_text().split()
        return host, int(pid)
    except (OSError, ValueError):
        return "unknown host", None


def _stale(host: str, pid: int | None) -> bool:
    """Whether an owner file names a process of this host that is gone."""
    return host == socket.gethostname() and pid is not None and not _alive(pid)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def lock_holder(path: Path) -> str | None:
    """Who holds ``path``'s lock (``"pid N"``, or ``"pid N on HOST"`` for an owner file), or
    None when nobody does (an owner file of a process of this host that is gone counts as none)."""
    if (path / OWNER).exists():
        host, pid = _read_owner(path / OWNER)
        if not _stale(host, pid):
            return f"pid {pid} on {host}; if that run is gone, remove {path / OWNER}"
        return None
    try:
        fd = os.open(path / LOCK, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return None
    except BlockingIOError:
        for _ in range(20):  # a run that just took the lock writes its pid right after
            pid = os.pread(fd, 32, 0).decode(errors="replace").strip()
            if pid:
                return f"pid {pid}"
            time.sleep(0.01)
        return "pid unknown"
    except OSError:
        return None  # a file system without locks, and no owner file: nobody holds it
    finally:
        os.close(fd)
