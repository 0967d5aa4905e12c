"""Safe file-system primitives every store uses: atomic writes, guarded paths, locks, JSON reads.

- ``atomic_write_bytes`` / ``atomic_write_text`` / ``atomic_write_json``: a temp file in the same
  folder, written, fsynced, renamed over the target, then the folder fsynced. A crash leaves the
  old file or the new one, never half of either. The target's mode is kept when it existed.
- ``publish_tree``: a whole new folder of files, built beside its target and renamed into place
  (it appears complete or not at all; an existing target is refused).
- ``contained_path``: resolves a relative name under a base and refuses anything that escapes it
  (``..``, absolute names, NUL, ``.git``, names too long, symlinks anywhere on the way, hard-linked
  files); ``name_problem`` is its check of the name's text alone. Every writer of a path whose parts
  come from outside (a repository, a note, a judge, an import) goes through one of them.
- ``FileLock`` / ``AsyncFileLock``: one exclusive lock across processes and threads (the ``filelock``
  package: ``flock`` on POSIX, the system's file lock on Windows), with a wait limit and a clear
  ``LockTimeoutError``; the async one never blocks the event loop.
- ``read_json``: parses a JSON file and names the file in the error when it is not valid JSON; like
  every read of a file that may come from outside (``open_regular``, ``read_limited``), it refuses
  a file that is not a regular one (a device, FIFO or folder, also through a link), reads at most
  its size limit, and checks the nesting on the text (``json_deeper_than``) before parsing.
- ``sweep_temps``: removes the temp files a killed writer left beside its targets (the caller
  holds whatever lock guards writes in that folder).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import stat
import tempfile
import threading
import shutil
import time
import uuid
import weakref
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import filelock

if TYPE_CHECKING:
    import asyncio

from .errors import ServiceError
from .text import text_problem

__all__ = [
    "PathError",
    "CorruptFileError",
    "UnstorableTextError",
    "atomic_write_bytes",
    "stage_synced",
    "replace_synced",
    "atomic_write_text",
    "atomic_write_json",
    "publish_tree",
    "contained_path",
    "name_problem",
    "is_git_dir_name",
    "NAME_MAX_BYTES",
    "read_json",
    "open_regular",
    "read_limited",
    "json_deeper_than",
    "READ_LIMIT_BYTES",
    "JSON_DEPTH_LIMIT",
    "FileLock",
    "AsyncFileLock",
    "LockTimeoutError",
    "LOCK_WAIT_S",
    "fsync_dir",
    "sweep_temps",
    "current_umask",
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


def current_umask() -> int:
    """The process's umask (read from ``/proc`` where there is one, so no thread sees it changed)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def stage_synced(path: Path, data: bytes, *, mode: int | None = None) -> str:
    """``data`` written and fsynced to a new temporary file beside ``path``, with ``path``'s mode (a
    new file's follows the umask, as ``open()`` would make it); its name. Nothing replaces ``path``:
    the caller renames it into place (``os.replace``) or removes it."""
    if mode is None:
        try:
            mode = stat.S_IMODE(os.lstat(path).st_mode)
        except FileNotFoundError:
            mode = 0o666 & ~current_umask()
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return tmp


def replace_synced(path: Path, data: bytes, *, mode: int | None = None) -> None:
    """Replace ``path`` with ``data`` (``stage_synced``, then a rename); the folder is not fsynced,
    so the caller does that once for several files (``atomic_write_bytes`` does it for one)."""
    tmp = stage_synced(path, data, mode=mode)
    try:
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def atomic_write_bytes(path: Path, data: bytes, *, mode: int | None = None) -> None:
    """Replace ``path`` with ``data`` atomically (temp file, fsync, rename, folder fsync)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    replace_synced(path, data, mode=mode)
    fsync_dir(path.parent)


def atomic_write_text(path: Path, text: str, *, mode: int | None = None) -> None:
    """``atomic_write_bytes`` for UTF-8 text; a lone surrogate raises ``UnstorableTextError`` (nothing written)."""
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        raise UnstorableTextError(f"{path}: not written: {text_problem(text)}") from None
    atomic_write_bytes(path, data, mode=mode)


def atomic_write_json(path: Path, value: object, *, mode: int | None = None) -> None:
    """``atomic_write_bytes`` for a JSON document (two-space indent, trailing newline)."""
    atomic_write_text(path, json.dumps(value, indent=2, ensure_ascii=False) + "\n", mode=mode)


def publish_tree(target: Path, files: Mapping[str, bytes]) -> None:
    """Create the folder ``target`` holding ``files`` (relative name -> content), all or nothing.

    Every name is proven inside ``target`` first (``name_problem``: no ``..``, absolute name,
    ``.git`` or name a file system cannot hold), so a refused tree creates nothing; each file is
    then created through ``contained_path`` with ``O_EXCL | O_NOFOLLOW``, so two names one file
    system folds into one file (case, Unicode normalisation) are refused instead of one replacing
    the other. The folder is built beside ``target`` with every file fsynced, then renamed into
    place and the parent fsynced; a crash leaves no ``target`` (only a hidden staging folder). An
    existing ``target`` (even one that appears meanwhile) raises ``FileExistsError`` and nothing is
    left; a refused name raises ``PathError`` naming it, and nothing is left either.
    """
    target = Path(target)
    for rel in files:
        problem = name_problem(rel)
        if problem is not None:
            raise PathError(f"{target}: {problem}")
    if os.path.lexists(target):
        raise FileExistsError(errno.EEXIST, "already exists", str(target))
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.parent / f".{target.name}.{uuid.uuid4().hex}.staging"
    os.mkdir(staging)
    try:
        for rel, data in files.items():
            try:
                path = contained_path(staging, rel)
            except PathError as exc:
                raise PathError(f"{target}: {exc}") from None
            _make_folders(staging, rel)
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)
            except FileExistsError:
                raise PathError(f"{target}: {rel!r} names a file written already (names this file system "
                                "cannot tell apart)") from None
            with os.fdopen(fd, "wb") as handle:
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


def _make_folders(base: Path, rel: str) -> None:
    """The folders of ``rel`` under ``base`` (``rel`` already proven inside it), made one by one
    without following a link: a component that is not a folder is refused."""
    current = Path(base)
    for part in rel.split("/")[:-1]:
        current = current / part
        try:
            os.mkdir(current)
        except FileExistsError:
            if not stat.S_ISDIR(os.lstat(current).st_mode):
                raise PathError(f"not a folder: {part!r} (in {rel!r})") from None


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


READ_LIMIT_BYTES = 64 * 1024 * 1024
"""How much of a JSON file ``read_json`` reads at most unless told otherwise (64 MiB)."""
JSON_DEPTH_LIMIT = 64
"""How deep ``read_json`` lets containers nest unless told otherwise (a parse far deeper exhausts
the interpreter's stack: ``RecursionError``)."""


def open_regular(path: Path | str) -> BinaryIO:
    """``path`` opened for reading in binary, when it is a regular file (a link to one is followed).

    Anything else (a device such as ``/dev/zero``, a FIFO, a socket, a folder) raises
    ``CorruptFileError`` naming it, judged with ``fstat`` on the descriptor opened (so it cannot be
    swapped after the check); a FIFO is opened without waiting for a writer.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise CorruptFileError(f"{path} is not a regular file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_limited(path: Path | str, max_bytes: int = READ_LIMIT_BYTES) -> bytes:
    """The bytes of the regular file ``path`` (``open_regular``); ``CorruptFileError`` when it holds
    more than ``max_bytes`` (at most ``max_bytes + 1`` are read, whatever the file says its size is)."""
    with open_regular(path) as handle:
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise CorruptFileError(f"{path} is larger than the limit of {max_bytes} bytes")
    return data


_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")
_NOT_BRACKET_OR_QUOTE = bytes(b for b in range(256) if b not in b'[]{}"')


def json_deeper_than(text: bytes, max_depth: int) -> bool | None:
    """Whether the JSON ``text`` nests objects and lists more than ``max_depth`` deep, told from the
    text alone (no parse, no recursion): False when it does not, True when it does, None when its
    brackets stop pairing within ``max_depth`` (not JSON: a parser names the fault before it nests
    deeper than that).

    The strings are taken out, then the brackets alone: each pass takes out the innermost pairs;
    after ``max_depth`` passes none is left when the text nests no deeper.
    """
    if text.count(b"[") + text.count(b"{") <= max_depth:
        return False
    if b"\\" in text:
        rest = _JSON_STRING.sub(b"", text).translate(None, _NOT_BRACKET)
    else:  # every quote opens or closes a string: with the brackets and quotes alone, the strings are
        # every other part (the same parts as in the whole text, usually far shorter)
        rest = b"".join(text.translate(None, _NOT_BRACKET_OR_QUOTE).split(b'"')[::2])
    for _ in range(max_depth):
        if not rest:
            return False
        # one pass takes out every pair empty now (a container holding no container): the ``[]``
        # are marked first, so a ``{}`` that only they made empty waits for the next pass
        taken = rest.replace(b"[]", b"\0\0").replace(b"{}", b"").replace(b"\0", b"")
        if len(taken) == len(rest):
            return None
        rest = taken
    return bool(rest)  # still brackets after max_depth passes that each took some: deeper (or
    # brackets that would never pair, which no parser accepts either)


def read_json(path: Path, *, max_bytes: int = READ_LIMIT_BYTES,
              max_depth: int = JSON_DEPTH_LIMIT) -> Any:  # a document of any shape; callers narrow
    """Parse the JSON file at ``path``; ``CorruptFileError`` when it is not a regular file (see
    ``open_regular``), holds more than ``max_bytes``, nests deeper than ``max_depth`` (checked on the
    text, before parsing) or is not valid JSON. ``FileNotFoundError`` and other ``OSError`` pass."""
    raw = read_limited(path, max_bytes)
    if json_deeper_than(raw, max_depth):
        raise CorruptFileError(f"{path}: nested deeper than {max_depth} levels")
    try:
        return json.loads(raw.decode("utf-8"))
    except RecursionError:  # brackets that do not pair, nested past what the parser can follow
        raise CorruptFileError(f"{path}: not valid JSON (nested too deeply to read)") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CorruptFileError(f"{path}: not valid JSON ({exc})") from exc


NAME_MAX_BYTES = 255
"""The longest name of one path component, in UTF-8 bytes, that every common file system holds."""


def is_git_dir_name(part: str) -> bool:
    """``.git`` as a file system may spell it: any case, trailing dots or spaces (Windows drops them)."""
    return part.rstrip(". ").casefold() in (".git", "git~1")


def name_problem(name: object) -> str | None:
    """Why ``name`` cannot be a relative POSIX path inside a base, judged from its text alone; or None.

    Refused: anything but non-empty text, NUL, an absolute name, an empty component (``a//b``, a
    trailing ``/``), ``.`` or ``..``, a ``.git`` component (any case, as a file system may spell it),
    and a component longer than ``NAME_MAX_BYTES`` or with no UTF-8 form (a lone surrogate: a name
    read from a tree that is not UTF-8).
    """
    if not isinstance(name, str) or not name:
        return f"invalid path {name!r}"
    if "\x00" in name:
        return f"path {name[:80]!r} holds NUL"
    if name.startswith("/") or os.path.isabs(name):
        return f"absolute path not allowed: {name[:80]!r}"
    for part in name.split("/"):
        if part in ("", ".", ".."):
            return f"path escapes its base: {name[:80]!r}"
        if is_git_dir_name(part):
            return f"a .git component is not allowed: {name[:80]!r}"
        try:
            size = len(part.encode("utf-8"))
        except UnicodeEncodeError:
            return f"path {name[:80]!r} is not UTF-8 text"
        if size > NAME_MAX_BYTES:
            return f"name too long ({size} bytes; {NAME_MAX_BYTES} at most): {name[:80]!r}..."
    return None


def contained_path(base: Path, name: str, *, must_exist: bool = False) -> Path:
    """Return ``base/name`` after proving it stays inside ``base`` with no link on the way.

    Every path whose parts come from outside (a repository's tree, a note, a judge's answer, an
    import) passes here before anything is written. Refuses what ``name_problem`` refuses (``..``,
    absolute names, NUL, ``.git``, empty components, names too long), a symlink at any existing
    component (the base itself may be reached through links), anything but a folder on the way,
    and an existing file with more than one hard link. ``must_exist`` also refuses a missing target
    and anything that is not a regular file or folder (FIFOs, devices). The error names the entry.
    """
    problem = name_problem(name)
    if problem is not None:
        raise PathError(problem)
    parts = name.split("/")
    base = Path(base).resolve()
    current = base
    for index, part in enumerate(parts):
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
            raise PathError(f"symlink not allowed: {'/'.join(parts[: index + 1])!r} (in {name!r})")
        last = index == len(parts) - 1
        if last:
            if stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
                raise PathError(f"hard-linked file not allowed: {name!r}")
            if must_exist and not (stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode)):
                raise PathError(f"not a regular file: {name!r}")
        elif not stat.S_ISDIR(info.st_mode):
            raise PathError(f"not a folder: {'/'.join(parts[: index + 1])!r}")
    return base.joinpath(*parts)


class LockTimeoutError(ServiceError):
    """A lock another holder kept for longer than this caller would wait; the lock file is named."""


LOCK_WAIT_S = 60.0
"""How long ``FileLock`` and ``AsyncFileLock`` wait by default before ``LockTimeoutError``."""

_POLL_S = 0.01
"""How often a waiter tries again for a lock another process holds."""


def _lock_key(path: Path) -> str:
    return os.path.normcase(os.path.realpath(path))


def _timed_out(path: Path, waited: float | None) -> LockTimeoutError:
    return LockTimeoutError(f"{path} is locked by another holder; gave up after waiting {waited or 0:g} s")


class FileLock:
    """An exclusive lock across processes (the ``filelock`` package) and threads; re-entrant per handle.

    ``with FileLock(path):`` waits at most ``timeout`` seconds (``LOCK_WAIT_S``; None waits for
    ever), then raises ``LockTimeoutError``; ``try_acquire()`` never waits. Threads of this process
    queue on one lock per path, so only other processes are polled for. The same handle may be
    taken again by the thread holding it; another handle on the same path is another holder.
    """

    _thread_locks: dict[str, threading.RLock] = {}
    _guard = threading.Lock()

    def __init__(self, path: Path, *, timeout: float | None = LOCK_WAIT_S) -> None:
        self.path = Path(path)
        self.timeout = timeout
        """Seconds to wait in ``acquire()`` / ``with``; None waits for ever."""
        key = _lock_key(self.path)
        with FileLock._guard:
            self._thread_lock = FileLock._thread_locks.setdefault(key, threading.RLock())
        self._file = filelock.FileLock(str(self.path), thread_local=False)
        self._depth = 0

    def acquire(self, blocking: bool = True) -> bool:
        """Take the lock; ``blocking=False`` returns False at once when another holder has it.

        A blocking wait longer than ``timeout`` raises ``LockTimeoutError``.
        """
        wait = self.timeout if blocking else 0.0
        deadline = None if wait is None else time.monotonic() + wait
        if blocking:
            got = self._thread_lock.acquire(timeout=-1 if wait is None else wait)
        else:
            got = self._thread_lock.acquire(False)
        if not got:
            if blocking:
                raise _timed_out(self.path, wait)
            return False
        if self._depth:
            self._depth += 1
            return True
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if blocking:
                left = -1.0 if deadline is None else max(0.0, deadline - time.monotonic())
                self._file.acquire(timeout=left, poll_interval=_POLL_S)
            else:
                self._file.acquire(blocking=False)
        except filelock.Timeout:
            self._thread_lock.release()
            if blocking:
                raise _timed_out(self.path, wait) from None
            return False
        except BaseException:
            self._thread_lock.release()
            raise
        self._depth = 1
        return True

    def try_acquire(self) -> bool:
        """Take the lock only if it is free now."""
        return self.acquire(blocking=False)

    def release(self) -> None:
        """Give the lock back (the outermost release lets other holders in)."""
        if self._depth <= 0:
            raise RuntimeError(f"{self.path}: released but not held")
        self._depth -= 1
        try:
            if self._depth == 0:
                self._file.release()
        finally:
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
    """An exclusive lock for async code that never blocks the event loop; not re-entrant.

    Tasks of this process queue on one ``asyncio.Lock`` per path (and event loop); other processes
    are polled for with non-blocking tries of the file lock (the ``filelock`` package), so a
    cancelled waiter leaves nothing held. ``async with AsyncFileLock(path):`` waits at most
    ``timeout`` seconds (``LOCK_WAIT_S``; None waits for ever), then raises ``LockTimeoutError``;
    ``await try_acquire()`` never waits.
    """

    _loops: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Lock]]" = (
        weakref.WeakKeyDictionary())

    def __init__(self, path: Path, *, timeout: float | None = LOCK_WAIT_S) -> None:
        self.path = Path(path)
        self.timeout = timeout
        """Seconds to wait in ``acquire()`` / ``async with``; None waits for ever."""
        self._key = _lock_key(self.path)
        self._file = filelock.FileLock(str(self.path), thread_local=False)
        self._inner: asyncio.Lock | None = None

    def _task_lock(self) -> "asyncio.Lock":
        import asyncio

        locks = AsyncFileLock._loops.setdefault(asyncio.get_running_loop(), {})
        return locks.setdefault(self._key, asyncio.Lock())

    def _try_file(self) -> bool:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._file.acquire(blocking=False)
        except filelock.Timeout:
            return False
        return True

    async def acquire(self) -> None:
        """Take the lock, waiting without blocking the loop; ``LockTimeoutError`` after ``timeout``."""
        import asyncio

        inner = self._task_lock()
        loop = asyncio.get_running_loop()
        deadline = None if self.timeout is None else loop.time() + self.timeout
        try:
            async with asyncio.timeout(self.timeout):
                await inner.acquire()
        except TimeoutError:
            raise _timed_out(self.path, self.timeout) from None
        try:
            while not self._try_file():
                if deadline is not None and loop.time() >= deadline:
                    raise _timed_out(self.path, self.timeout)
                await asyncio.sleep(_POLL_S)
        except BaseException:
            inner.release()
            raise
        self._inner = inner

    async def try_acquire(self) -> bool:
        """Take the lock only if it is free now (no task of this process nor another process has it)."""
        inner = self._task_lock()
        if inner.locked():
            return False
        await inner.acquire()  # free and unawaited: returns at once
        try:
            if not self._try_file():
                inner.release()
                return False
        except BaseException:
            inner.release()
            raise
        self._inner = inner
        return True

    def release(self) -> None:
        """Give the lock back."""
        inner, self._inner = self._inner, None
        if inner is None:
            raise RuntimeError(f"{self.path}: released but not held")
        try:
            self._file.release()
        finally:
            inner.release()

    async def __aenter__(self) -> "AsyncFileLock":
        await self.acquire()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.release()
