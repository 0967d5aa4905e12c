"""Safe file-system primitives every store uses: atomic writes, guarded paths, locks, JSON reads.

- ``atomic_write_bytes`` / ``atomic_write_text`` / ``atomic_write_json``: a temp file in the same
  folder, written, fsynced, renamed over the target, then the folder fsynced. A crash leaves the
  old file or the new one, never half of either. The target's mode is kept when it existed.
- ``publish_tree``: a whole new folder of files, built beside its target and renamed into place
  (it appears complete or not at all; an existing target is refused).
- ``contained_path``: resolves a relative name under a base and refuses anything that escapes it
  (``..``, absolute names, NUL, symlinks anywhere on the way, hard-linked files).
- ``FileLock``: an exclusive ``flock`` on a lock file, across processes.
- ``read_json``: parses a JSON file and names the file in the error when it is not valid JSON.
- ``sweep_temps``: removes the temp files a killed writer left beside its targets (the caller
  holds whatever lock guards writes in that folder).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import stat
import tempfile
import threading
import shutil
import uuid
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import asyncio

from .errors import ServiceError
from .text import text_problem

__all__ = [
    "PathError",
    "CorruptFileError",
    "UnstorableTextError",
    "atomic_write_bytes",
    "atomic_write_text",
    "atomic_write_json",
    "publish_tree",
    "contained_path",
    "read_json",
    "FileLock",
    "AsyncFileLock",
    "fsync_dir",
    "sweep_temps",
]


class PathError(ServiceError):
    """A path that is not allowed: it escapes its base, is a link, or is not a regular file."""


class CorruptFileError(ServiceError):
    """A file exists but its content cannot be read as the format it must have."""


class UnstorableTextError(ServiceError, ValueError):
    """Text that has no UTF-8 form (a lone surrogate): refused before any byte is written."""


def fsync_dir(folder: Path) -> None:
    """Flush a folder's entry table to disk (after a rename into it)."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_bytes(path: Path, data: bytes, *, mode: int | None = None) -> None:
    """Replace ``path`` with ``data`` atomically (temp file, fsync, rename, folder fsync)."""
    path = Path(path)
    folder = path.parent
    folder.mkdir(parents=True, exist_ok=True)
    if mode is None:
        try:
            mode = stat.S_IMODE(os.lstat(path).st_mode)
        except FileNotFoundError:
            mode = 0o644
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    fsync_dir(folder)


def atomic_write_text(path: Path, text: str, *, mode: int | None = None) -> None:
    """``atomic_write_bytes`` for UTF-8 text; a lone surrogate raises ``UnstorableTextError`` (nothing written)."""
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        raise UnstorableTextError(f"{path}: not written: {text_problem(text)}") from None
    atomic_write_bytes(path, data, mode=mode)


def atomic_write_json(path: Path, value: Any, *, mode: int | None = None) -> None:
    """``atomic_write_bytes`` for a JSON document (two-space indent, trailing newline)."""
    atomic_write_text(path, json.dumps(value, indent=2, ensure_ascii=False) + "\n", mode=mode)


def publish_tree(target: Path, files: Mapping[str, bytes]) -> None:
    """Create the folder ``target`` holding ``files`` (relative name -> content), all or nothing.

    The folder is built beside ``target`` with every file fsynced, then renamed into place and the
    parent fsynced; a crash leaves no ``target`` (only a hidden staging folder). An existing
    ``target`` (even one that appears meanwhile) raises ``FileExistsError`` and nothing is left.
    """
    target = Path(target)
    if os.path.lexists(target):
        raise FileExistsError(errno.EEXIST, "already exists", str(target))
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.parent / f".{target.name}.{uuid.uuid4().hex}.staging"
    try:
        for rel, data in files.items():
            path = staging / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
        if os.path.lexists(target):
            raise FileExistsError(errno.EEXIST, "already exists", str(target))
        os.rename(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    fsync_dir(target.parent)


_TEMP_RE = re.compile(r"^\.(?P<name>.+)\.[a-z0-9_]{8}\.tmp$")


def sweep_temps(folder: Path, names: Iterable[str] | None = None) -> list[str]:
    """Remove the ``.<name>.XXXXXXXX.tmp`` files ``atomic_write_*`` left in ``folder``; their names.

    Only regular files go (never links or folders); with ``names``, only the temps of those target
    names. The caller holds the lock that guards writes in ``folder``, so no live writer's temp is
    taken. A missing folder sweeps nothing.
    """
    wanted = None if names is None else set(names)
    removed: list[str] = []
    try:
        entries = list(os.scandir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return removed
    for entry in entries:
        match = _TEMP_RE.match(entry.name)
        if match is None or (wanted is not None and match.group("name") not in wanted):
            continue
        if entry.is_file(follow_symlinks=False):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(entry.path)
                removed.append(entry.name)
    return removed


def read_json(path: Path) -> Any:
    """Parse the JSON file at ``path``; a file that is not valid JSON raises ``CorruptFileError``."""
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        raise
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CorruptFileError(f"{path}: not valid JSON ({exc})") from exc


def contained_path(base: Path, name: str, *, must_exist: bool = False) -> Path:
    """Return ``base/name`` after proving it stays inside ``base`` with no link on the way.

    Refuses: an empty name, NUL, absolute names, any ``..`` component, a symlink at any
    component (the base itself may be reached through links), and an existing file with more
    than one hard link. ``must_exist`` also refuses a missing target and anything that is not a
    regular file or folder (FIFOs, devices).
    """
    if not name or "\x00" in name:
        raise PathError(f"invalid path {name!r}")
    rel = Path(name)
    if rel.is_absolute():
        raise PathError(f"absolute path not allowed: {name!r}")
    parts = rel.parts
    if not parts or any(part in ("..", "") for part in parts):
        raise PathError(f"path escapes its base: {name!r}")
    base = Path(base).resolve()
    current = base
    for index, part in enumerate(parts):
        if part == ".":
            continue
        current = current / part
        try:
            info = os.lstat(current)
        except FileNotFoundError:
            if must_exist:
                raise PathError(f"no such file: {name!r}") from None
            break
        except OSError as exc:
            if exc.errno == errno.ENAMETOOLONG:
                raise PathError(f"name too long: {name[:80]!r}...") from None
            raise
        if stat.S_ISLNK(info.st_mode):
            raise PathError(f"symlink not allowed: {name!r}")
        last = index == len(parts) - 1
        if last:
            if stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
                raise PathError(f"hard-linked file not allowed: {name!r}")
            if must_exist and not (stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode)):
                raise PathError(f"not a regular file: {name!r}")
        elif not stat.S_ISDIR(info.st_mode):
            raise PathError(f"not a folder: {'/'.join(parts[: index + 1])!r}")
    return base.joinpath(*[p for p in parts if p != "."])


class FileLock:
    """An exclusive lock across processes (``flock`` on ``path``) and threads of this process.

    ``with FileLock(path):`` blocks until the lock is held; ``try_acquire()`` does not block.
    """

    _thread_locks: dict[str, threading.RLock] = {}
    _guard = threading.Lock()

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        key = str(self.path.resolve()) if self.path.exists() else os.path.abspath(self.path)
        with FileLock._guard:
            self._thread_lock = FileLock._thread_locks.setdefault(key, threading.RLock())
        self._fd: int | None = None
        self._depth = 0

    def acquire(self, blocking: bool = True) -> bool:
        """Take the lock; with ``blocking=False`` return False at once when another holder has it."""
        if not self._thread_lock.acquire(blocking):
            return False
        if self._depth:
            self._depth += 1
            return True
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            os.close(fd)
            self._thread_lock.release()
            return False
        self._fd = fd
        self._depth = 1
        return True

    def try_acquire(self) -> bool:
        """Take the lock only if it is free now."""
        return self.acquire(blocking=False)

    def release(self) -> None:
        """Give the lock back."""
        self._depth -= 1
        if self._depth == 0 and self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
        self._thread_lock.release()

    def __enter__(self) -> "FileLock":
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """The lock as a context manager (same as ``with lock:``)."""
        with self:
            yield


class AsyncFileLock:
    """An exclusive lock for async code: an ``asyncio.Lock`` within the process, ``flock`` across processes.

    Waiting for the ``flock`` happens in a worker thread, so the event loop keeps running; the
    lock is released from the loop (``flock`` is not bound to a thread).
    ``async with AsyncFileLock(path):``.
    """

    _locks: dict[str, "asyncio.Lock"] = {}

    def __init__(self, path: Path) -> None:
        import asyncio

        self.path = Path(path)
        key = os.path.abspath(self.path)
        self._inner = AsyncFileLock._locks.setdefault(key, asyncio.Lock())
        self._fd: int | None = None

    async def __aenter__(self) -> "AsyncFileLock":
        import asyncio

        await self._inner.acquire()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                await asyncio.to_thread(fcntl.flock, fd, fcntl.LOCK_EX)
            except BaseException:
                os.close(fd)
                raise
            self._fd = fd
        except BaseException:
            self._inner.release()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        fd, self._fd = self._fd, None
        try:
            if fd is not None:
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)
        finally:
            self._inner.release()
