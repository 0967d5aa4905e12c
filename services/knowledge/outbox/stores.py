"""The outbox's file stores under one ``memory/`` root, laid out exactly as the seed's:

- ``data/outbox/capture.jsonl``: the durable outbox, one JSON line per record, append order;
  delivered marks are appended lines too (see ``models``). ``data/outbox/quarantine.jsonl``
  keeps every line that could not be parsed, with the reason.
- ``state/last-delivery.json``, ``state/ledger/<conversationId>.json``,
  ``state/forks/pending/<childId>.json``, ``cache/representations/<conversationId>.json``.

Every whole-file write is atomic (``services.files``: temp file in the same folder, fsync, rename,
folder fsync). Appends are fsynced, start on a fresh line when a crash left a partial one, and
happen only inside the outbox mutex. Concurrent captures share one append and its fsync
(``append_committed``, group commit); each returns only once the fsync covering its line is done.
An append that fails (disk full, an I/O error) is cut back
to where it started and fsynced before ``OutboxWriteError`` is raised, so no torn line is ever
left behind to be read later.

Bad text is REPAIRED and FLAGGED, never refused: the outbox holds turns nobody can send again,
and lines other programs wrote. A line that is not UTF-8, or whose JSON escapes hold a lone
surrogate or NUL, is read with ``services.text`` repairs (U+FFFD, NUL dropped); the record gets a
``repaired`` list saying what was repaired, and the snapshot lists the line so the next compaction
warns once and rewrites it clean. Ledgers and fork records are repaired the same way on read. A
bad value never stops a read, a sweep or a compaction.

Files put there from outside are bounded: every read opens a regular file only (a link to a
device or a FIFO is refused as ``CorruptFileError``, never read without end), and an append to a
path that is not a regular file is refused before a byte is written (``OutboxWriteError``). A line
nested deeper than ``MAX_DEPTH`` is a corrupt line (quarantined), told from its text before it is
parsed; a state file (ledger, fork, marker, cache) larger than ``STATE_FILE_BYTES`` or nested deeper
is corrupt too. The outbox itself has no size cap: it is the log of what was captured.

The mutex (``OutboxStores.locked``) is one module-level lock serialising every outbox
read-modify-write across all conversations and all store instances of the process, plus a file
lock (the ``filelock`` package's lock on ``data/outbox/capture.lock``, the lock
``services.files.FileLock`` takes; one handle per lock file in the process, kept a few milliseconds
after a capture for the next one, see ``_FlockHandle``) that extends it across processes: a sweep's rewrite can never lose a
concurrent append from this process or another one. Waiting for it longer than ``LOCK_WAIT_S`` raises ``LockTimeoutError``. The locked work is a
plain function run in a worker thread; it is not re-entrant, and no network call ever happens
inside.
"""

from __future__ import annotations

import asyncio
import contextlib
import filelock
import json
import logging
import math
import os
import stat
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar, cast

from services.files import (
    LOCK_WAIT_S,
    CorruptFileError,
    LockTimeoutError,
    UnstorableTextError,
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_text,
    contained_path,
    current_umask,
    fsync_dir,
    json_deeper_than,
    open_regular,
    replace_synced,
    stage_synced,
)
from services.text import decode_text, repair_value, text_problem, value_problem

from .index import GapRead, IndexWriter, OutboxSummary, read_summary
from .models import (
    CorruptLedgerError,
    DeliveryMarker,
    ForkRecord,
    Ledger,
    OutboxError,
    OutboxLine,
    OutboxRecord,
    OutboxSettings,
    OutboxWriteError,
    RepresentationSnapshot,
    check_conversation_id,
)

__all__ = ["OutboxStores", "OutboxSnapshot", "CorruptLine", "LedgerStamp"]

log = logging.getLogger("services.knowledge.outbox")

T = TypeVar("T")

MAX_DEPTH = 64
"""How deep a line of the outbox or a state file may nest (records and ledgers nest a few levels)."""
STATE_FILE_BYTES = 64 * 1024 * 1024
"""The largest ledger, fork record, marker or cached representation read (64 MiB)."""

_OUTBOX_MUTEX = threading.Lock()
"""The module-level outbox mutex: every store instance of the process queues on it."""


@dataclass(slots=True)
class CorruptLine:
    """A ``capture.jsonl`` line that is not a valid record or mark."""

    number: int
    """1-based line number in the file as read."""
    raw: str
    """The line's text (undecodable bytes replaced)."""
    reason: str
    """Why it was refused."""


@dataclass(slots=True)
class OutboxSnapshot:
    """The outbox as read: records in file order with delivered marks folded in."""

    records: list[OutboxRecord] = field(default_factory=list)
    """Every record, ``status`` set to ``delivered`` when a mark names it."""
    corrupt: list[CorruptLine] = field(default_factory=list)
    """Lines that could not be parsed (quarantined by the next compaction)."""
    marks: int = 0
    """How many delivered-mark lines the file holds."""
    repaired: list[tuple[int, str]] = field(default_factory=list)
    """``(line number, what was repaired)`` for lines read with text repairs (rewritten clean by
    the next compaction)."""

    newlines: int = 0
    """How many newline bytes the read covered (``advance`` numbers the lines after them)."""

    def pending(self) -> list[OutboxRecord]:
        """The records still waiting for delivery."""
        return [r for r in self.records if r.get("status") != "delivered"]


class OutboxStores:
    """Reads and writes of every outbox file; the ``locked`` mutex around read-modify-writes."""

    def __init__(self, root: Path, settings: OutboxSettings | None = None) -> None:
        self.root = Path(root)
        """The ``memory/`` folder holding ``data``, ``state`` and ``cache``."""
        self.settings = settings or OutboxSettings()
        """Window sizes used when writing ledgers."""
        self.data = self.root / "data"
        self.state = self.root / "state"
        self.cache = self.root / "cache"
        for folder in (self.data / "outbox", self.state / "ledger", self.state / "forks" / "pending",
                       self.cache / "representations"):
            folder.mkdir(parents=True, exist_ok=True)
        lock_path = self.data / "outbox" / "capture.lock"
        lock_path.touch(exist_ok=True)
        self._file_lock = _FlockHandle.for_path(lock_path)
        self._display_cache: _DisplayCache | None = None
        self._index = IndexWriter(self.outbox_path, self.index_path)
        self._groups: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Group] = weakref.WeakKeyDictionary()
        self._ledgers_unsynced = False

    # -- the mutex ---------------------------------------------------------------------------

    def run_locked(self, work: Callable[[], T], *, keep: bool = False) -> T:
        """Run ``work`` (blocking) holding the module mutex and the cross-process file lock.

        Waiting longer than ``LOCK_WAIT_S`` for either raises ``LockTimeoutError``. ``keep``: when
        ``work`` succeeds, the file lock may stay held a few milliseconds for the next capture
        (``_FlockHandle``); only group-committed appends ask for it.
        """
        if not _OUTBOX_MUTEX.acquire(timeout=LOCK_WAIT_S):
            raise LockTimeoutError(f"the memory outbox is busy in this process; gave up after {LOCK_WAIT_S:g} s")
        try:
            self._file_lock.enter()
            done = False
            try:
                result = work()
                done = True
                return result
            finally:
                self._file_lock.leave(keep=keep and done)
        finally:
            _OUTBOX_MUTEX.release()

    async def locked(self, work: Callable[[], T], *, keep: bool = False) -> T:
        """Run ``work`` in a worker thread holding the outbox mutex; its result or error is returned."""
        return await asyncio.to_thread(self.run_locked, work, keep=keep)

    # -- paths -------------------------------------------------------------------------------

    @property
    def outbox_path(self) -> Path:
        """``data/outbox/capture.jsonl``."""
        return self.data / "outbox" / "capture.jsonl"

    @property
    def index_path(self) -> Path:
        """``data/outbox/capture.idx``: the status index (see ``index``); never trusted without checks."""
        return self.data / "outbox" / "capture.idx"

    @property
    def quarantine_path(self) -> Path:
        """``data/outbox/quarantine.jsonl``: lines set aside, never deleted."""
        return self.data / "outbox" / "quarantine.jsonl"

    @property
    def last_delivery_path(self) -> Path:
        """``state/last-delivery.json``."""
        return self.state / "last-delivery.json"

    def ledger_path(self, conversation_id: str) -> Path:
        """``state/ledger/<conversationId>.json`` (the id is checked first)."""
        return contained_path(self.state / "ledger", f"{check_conversation_id(conversation_id)}.json")

    def fork_path(self, child_id: str) -> Path:
        """``state/forks/pending/<childId>.json``."""
        return contained_path(self.state / "forks" / "pending", f"{check_conversation_id(child_id)}.json")

    def representation_path(self, conversation_id: str) -> Path:
        """``cache/representations/<conversationId>.json``."""
        return contained_path(self.cache / "representations", f"{check_conversation_id(conversation_id)}.json")

    # -- outbox (call inside the mutex) -------------------------------------------------------

    def read_outbox(self) -> OutboxSnapshot:
        """Every record in file order, delivered marks folded in, bad lines listed."""
        snapshot = OutboxSnapshot()
        try:
            raw = _read_all(self.outbox_path)
        except FileNotFoundError:
            return snapshot
        _parse_into(snapshot, {}, raw, 1)
        snapshot.newlines = raw.count(b"\n")
        return snapshot

    def advance(self, key: tuple[int, int, int] | None, snapshot: OutboxSnapshot) -> OutboxSnapshot:
        """``snapshot`` (read when the file key was ``key``) brought up to the file as it is now.

        When the file is the same one (inode) and only grew, just the appended bytes are parsed
        into it (marks flip its records); anything else is a full read. Call inside the mutex.
        """
        now = self.outbox_key()
        if key is None or now is None or now[0] != key[0] or now[1] < key[1]:
            return self.read_outbox()
        if now == key:
            return snapshot
        with open(self.outbox_path, "rb") as handle:
            handle.seek(key[1])
            tail = handle.read(now[1] - key[1])
        index = {record["batchId"]: record for record in snapshot.records}
        _parse_into(snapshot, index, tail, snapshot.newlines + 1)
        snapshot.newlines += tail.count(b"\n")
        return snapshot

    def read_outbox_for_display(self) -> OutboxSnapshot:
        """The outbox for status views: a cached snapshot advanced by parsing only the appended tail.

        Appends only grow the file; a rewrite replaces its inode. The cache is reused when the
        inode is the same, the file did not shrink and the bytes just before the cached end are
        unchanged; anything else is a full read. The snapshot is shared: read it, never change it.
        """
        key = self.outbox_key()
        cache = self._display_cache
        if key is None:
            self._display_cache = None
            return OutboxSnapshot()
        if cache is not None and cache.key == key:
            return cache.snapshot
        if cache is not None and cache.key[0] == key[0] and key[1] >= cache.key[1]:
            with open(self.outbox_path, "rb") as handle:
                start = max(0, cache.key[1] - len(cache.guard))
                handle.seek(start)
                data = handle.read(key[1] - start)
            if data[: len(cache.guard)] == cache.guard:
                tail = data[len(cache.guard):]
                _parse_into(cache.snapshot, cache.index, tail, cache.newlines + 1)
                self._display_cache = _DisplayCache(key, cache.snapshot, cache.index,
                                                    cache.newlines + tail.count(b"\n"), data[-_GUARD:])
                return cache.snapshot
        raw = _read_all(self.outbox_path)
        snapshot = OutboxSnapshot()
        index: dict[str, OutboxRecord] = {}
        _parse_into(snapshot, index, raw, 1)
        self._display_cache = _DisplayCache((key[0], len(raw), key[2]), snapshot, index, raw.count(b"\n"),
                                            raw[-_GUARD:])
        return snapshot

    def read_summary(self) -> OutboxSummary:
        """The outbox summed up for the status view from the index, parsing only what it does not cover."""
        self._index.flush()
        return read_summary(self.outbox_path, self.index_path, _gap_read)

    def flush_index(self) -> None:
        """Write the status index lines kept in memory (call inside the mutex; the outbox closing)."""
        self._index.flush()

    def settled(self, batch_ids: list[str]) -> set[str]:
        """Which of ``batch_ids`` must not be sent now: marked delivered, or gone from the outbox.

        Read from the file as it is now (call inside the mutex), parsing only what was appended
        since the last such read (the ``read_outbox_for_display`` cache), so checking each
        conversation of a sweep against the marks stays cheap on a large outbox.
        """
        self.read_outbox_for_display()
        cache = self._display_cache
        if cache is None:
            return set(batch_ids)
        return {b for b in batch_ids if b not in cache.index or cache.index[b].get("status") == "delivered"}

    def outbox_key(self) -> tuple[int, int, int] | None:
        """The outbox file's identity and version (inode, size, mtime); None when it does not exist.

        Every append changes the size and every rewrite the inode, so an equal key (read inside
        the mutex) means the content a snapshot was read from is unchanged.
        """
        try:
            info = os.stat(self.outbox_path)
        except FileNotFoundError:
            return None
        return (info.st_ino, info.st_size, info.st_mtime_ns)

    def append_lines(self, values: Sequence[OutboxLine]) -> None:
        """Append records or marks as JSON lines (fsynced); a partial last line is closed first.

        All or nothing: a failed write is cut back to where it began (``OutboxWriteError``).
        The status index (``index``) is told about the appended chunk after the fsync.
        """
        if not values:
            return
        payload = "".join(json.dumps(v, ensure_ascii=False, separators=(",", ":")) + "\n" for v in values)
        data = payload.encode("utf-8")
        start, end, inode = _append_all(self.outbox_path, data, close_torn_line=True)
        self._index.note_append(start, end, values, data, inode)

    async def append_committed(self, values: Sequence[OutboxLine]) -> None:
        """Append ``values`` (records or marks) inside the mutex, sharing the write with concurrent callers.

        Group commit: callers arriving while an append is being written and fsynced queue up, and
        the next append writes all of their lines at once under one fsync. Each caller returns
        only after the fsync that covers its own lines; when that append fails, every caller of
        the group gets the error and none of their lines is in the file (``append_lines`` cuts a
        failed write back). A caller that finds nobody writing or waiting writes its own lines
        at once, without a writer task (a capture at a time, the usual case).
        """
        if not values:
            return
        loop = asyncio.get_running_loop()
        group = self._groups.get(loop)
        if group is None:
            group = self._groups[loop] = _Group()
        idle = not group.alone and (group.writer is None or group.writer.done())
        if idle and not group.waiting:  # nobody else is writing or waiting: write these lines at once
            group.alone = True
            try:
                await self.locked(lambda: self.append_lines(values), keep=True)
            finally:  # callers who came meanwhile are written next, by the group's writer
                group.alone = False
                if group.waiting:
                    group.writer = loop.create_task(self._write_groups(group), name="outbox-group-commit")
            return
        done: asyncio.Future[None] = loop.create_future()
        group.waiting.append((values, done))
        if idle:
            group.writer = loop.create_task(self._write_groups(group), name="outbox-group-commit")
        await done

    async def _write_groups(self, group: _Group) -> None:
        while group.waiting:
            batch, group.waiting = group.waiting[:_GROUP_MAX], group.waiting[_GROUP_MAX:]
            lines = [value for values, _ in batch for value in values]
            try:
                await self.locked(lambda: self.append_lines(lines), keep=True)
            except BaseException as exc:  # every caller of the group hears of it; none of its lines is kept
                for _, done in batch:
                    if not done.done():
                        done.set_exception(exc if isinstance(exc, Exception) else OutboxWriteError(
                            f"the append was stopped ({type(exc).__name__}); it may or may not be in the outbox"))
                if not isinstance(exc, Exception):  # cancelled or stopping: nobody's lines are known written
                    for _, done in group.waiting:
                        if not done.done():
                            done.set_exception(OutboxWriteError(
                                f"the append was stopped before it was written ({type(exc).__name__}); nothing was added"))
                    group.waiting = []
                    raise
                continue
            for _, done in batch:
                if not done.done():
                    done.set_result(None)

    def rewrite_outbox(self, records: list[OutboxRecord]) -> None:
        """Replace the outbox with ``records`` (atomic); the status index starts again from them."""
        text = "".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in records)
        atomic_write_text(self.outbox_path, text)
        self._index.note_rewrite(records)

    def quarantine(self, lines: list[CorruptLine], at_ms: int) -> None:
        """Append bad lines to the quarantine file (fsynced) before they leave the outbox."""
        if not lines:
            return
        entries = "".join(
            json.dumps({"quarantinedAt": at_ms, "line": c.number, "reason": c.reason, "raw": c.raw},
                       ensure_ascii=False) + "\n"
            for c in lines
        )
        _append_all(self.quarantine_path, entries.encode("utf-8", "replace"), close_torn_line=True)

    def quarantined_count(self) -> int:
        """How many lines the quarantine file holds."""
        try:
            return sum(1 for line in _read_all(self.quarantine_path).split(b"\n") if line.strip())
        except FileNotFoundError:
            return 0

    # -- ledgers ---------------------------------------------------------------------------

    def read_ledger(self, conversation_id: str) -> Ledger | None:
        """The conversation's ledger, None when none exists; ``CorruptLedgerError`` when unreadable."""
        path = self.ledger_path(conversation_id)
        try:
            value = _read_repaired(path)
        except FileNotFoundError:
            return None
        except CorruptFileError as exc:
            raise CorruptLedgerError(f"corrupt ledger {path}: {exc}") from exc
        problem = _ledger_problem(value)
        if problem:
            raise CorruptLedgerError(f"corrupt ledger {path}: {problem}")
        return cast(Ledger, value)  # its shape was just checked

    def read_ledgers(self) -> list[Ledger]:
        """Every readable ledger (status reads); unreadable ones are skipped with a warning."""
        ledgers = []
        for path in sorted((self.state / "ledger").glob("*.json")):
            try:
                ledgers.append(self.read_ledger(path.stem))
            except OutboxError as exc:
                log.warning("%s", exc)
        return [x for x in ledgers if x is not None]

    def write_ledger(self, ledger: Ledger, *, sync_folder: bool = True) -> LedgerStamp:
        """Write a ledger (atomic), its windows folded oldest-first to the configured bounds; its stamp.

        ``sync_folder=False`` leaves the ledger folder's fsync (which makes the rename survive a
        power loss) to a later ``sync_ledgers``; the file's own bytes are fsynced before the rename
        either way, so a reader (this process or another) sees the old ledger or the new one.
        Only for a write whose loss on power failure is covered: the ledger before it names the
        batches in flight, so the next delivery asks Honcho about them (see ``delivery``).
        """
        path = self.ledger_path(ledger["conversationId"])
        data = self._ledger_bytes(ledger)
        if sync_folder:
            atomic_write_bytes(path, data)
        else:
            replace_synced(path, data)
            self._ledgers_unsynced = True
        return _stamp(path)

    def write_ledgers(self, ledgers: Sequence[Ledger]) -> dict[str, LedgerStamp]:
        """Write several ledgers at once (each atomic), the ledger folder fsynced once for all; their stamps.

        Every file is written and fsynced under a temporary name, then all are renamed, then the
        folder is fsynced: a crash leaves each ledger as it was or as written, never torn.
        """
        folder = self.state / "ledger"
        staged: list[tuple[str, str, Path]] = []
        try:
            for ledger in ledgers:
                path = self.ledger_path(ledger["conversationId"])
                staged.append((ledger["conversationId"], stage_synced(path, self._ledger_bytes(ledger)), path))
            for _, tmp, path in staged:
                os.replace(tmp, path)
        except BaseException:
            for _, tmp, _ in staged:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
            raise
        fsync_dir(folder)
        self._ledgers_unsynced = False
        return {conv: _stamp(path) for conv, _, path in staged}

    @property
    def ledgers_unsynced(self) -> bool:
        """Whether a ledger was renamed into its folder since the folder's last fsync."""
        return self._ledgers_unsynced

    def sync_ledgers(self) -> None:
        """fsync the ledger folder when a ledger was renamed into it without (``write_ledger(sync_folder=False)``)."""
        if self._ledgers_unsynced:
            fsync_dir(self.state / "ledger")
            self._ledgers_unsynced = False

    def ledger_stamp(self, conversation_id: str) -> LedgerStamp | None:
        """The ledger file's (inode, size, mtime): a write by anyone since makes another stamp."""
        try:
            return _stamp(self.ledger_path(conversation_id))
        except FileNotFoundError:
            return None

    def _ledger_bytes(self, ledger: Ledger) -> bytes:
        bounded = dict(ledger)
        bounded["deliveredBatchIds"] = list(ledger.get("deliveredBatchIds", []))[-self.settings.delivered_batch_window:]
        bounded["anchors"] = list(ledger.get("anchors", []))[-self.settings.anchor_window:]
        text = json.dumps(bounded, ensure_ascii=False, separators=(",", ":")) + "\n"
        try:
            return text.encode("utf-8")
        except UnicodeEncodeError:
            raise UnstorableTextError(f"ledger of {ledger['conversationId']}: not written: {text_problem(text)}") from None

    # -- pending forks ---------------------------------------------------------------------

    def read_pending_fork(self, child_id: str) -> ForkRecord | None:
        """The fork record for ``child_id``, resolved or not; None when none exists."""
        try:
            return cast(ForkRecord, _read_object(self.fork_path(child_id)))
        except FileNotFoundError:
            return None

    def read_pending_forks(self) -> list[ForkRecord]:
        """Every fork record on disk, resolved ones included (filter on ``resolvedAt``)."""
        forks = []
        for path in sorted((self.state / "forks" / "pending").glob("*.json")):
            try:
                forks.append(cast(ForkRecord, _read_object(path)))
            except CorruptFileError as exc:
                log.warning("%s", exc)
        return forks

    def write_pending_fork(self, record: ForkRecord) -> None:
        """Write a fork record (atomic)."""
        atomic_write_json(self.fork_path(record["childId"]), record)

    # -- representations and the last-delivery marker --------------------------------------

    def read_representation(self, conversation_id: str) -> RepresentationSnapshot | None:
        """The cached representation snapshot, None when none was fetched yet."""
        try:
            return cast(RepresentationSnapshot, _read_object(self.representation_path(conversation_id)))
        except (FileNotFoundError, CorruptFileError):
            return None

    def write_representation(self, conversation_id: str, snapshot: RepresentationSnapshot) -> None:
        """Write a representation snapshot: replaced whole (temp file, rename), not fsynced.

        It is a cache the next delivery fetches again; a crash can at worst leave it unreadable,
        which reads as "none fetched yet".
        """
        path = self.representation_path(conversation_id)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write((json.dumps(snapshot, indent=2, ensure_ascii=False) + "\n").encode("utf-8", "replace"))
            os.chmod(tmp, 0o666 & ~current_umask())
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise

    def read_last_delivery(self) -> DeliveryMarker | None:
        """The newest-delivery marker, None before the first delivery."""
        try:
            return cast(DeliveryMarker, _read_object(self.last_delivery_path))
        except (FileNotFoundError, CorruptFileError):
            return None

    def write_last_delivery(self, marker: DeliveryMarker) -> None:
        """Write the newest-delivery marker (atomic)."""
        atomic_write_json(self.last_delivery_path, marker)


LedgerStamp = tuple[int, int, int]
"""A ledger file's (inode, size, mtime in ns)."""


def _stamp(path: Path) -> LedgerStamp:
    info = os.stat(path)
    return (info.st_ino, info.st_size, info.st_mtime_ns)


_GUARD = 256
"""Bytes before the cached end that must be unchanged for an incremental display read."""


@dataclass(slots=True)
class _DisplayCache:
    key: tuple[int, int, int]
    snapshot: OutboxSnapshot
    index: dict[str, OutboxRecord]
    newlines: int
    guard: bytes


_LEASE_IDLE_S = 0.005
"""How long this process keeps an outbox's file lock after a group-committed append, for the next
capture: taking the ``filelock`` package's lock costs about 0.25 ms of CPU, a third of a capture."""
_LEASE_MAX_S = 0.1
"""A kept lock is let go once held this long, so another process waiting for it gets its turn ..."""
_LEASE_GAP_S = 0.001
"""... in a gap this long before this process takes it again (a waiter polls the lock, it does not
queue for it: without the gap, back-to-back captures would take it back before the waiter looks)."""


class _FlockHandle:
    """The cross-process half of the outbox mutex: the ``filelock`` package's lock on ``capture.lock``.

    It is the same lock ``services.files.FileLock`` takes on the same file (so holders of either
    exclude each other), without that wrapper's per-acquire bookkeeping (path resolution, folder
    creation, fork checks), which made every capture slower. The package opens the file at each
    acquire and closes it at release, so a lock file replaced on disk needs nothing of its own.

    One handle per lock file in the process (``for_path``), so every store of one outbox in this
    process shares it. Only the module mutex's holder enters it. A group-committed append may leave
    it held (``leave(keep=True)``): the next capture within ``_LEASE_IDLE_S`` finds it held and takes
    nothing. A keeper thread lets it go once it has been idle that long, whatever the event loops
    do, and any other work leaving it (a sweep, a status read) lets it go at once. It is never kept
    past ``_LEASE_MAX_S`` from when it was taken, and then this process waits ``_LEASE_GAP_S`` before
    taking it again, so captures back to back never starve another process. A forked child never
    counts its parent's hold.
    """

    _handles: "weakref.WeakValueDictionary[str, _FlockHandle]" = weakref.WeakValueDictionary()
    _handles_guard = threading.Lock()

    @classmethod
    def for_path(cls, path: Path) -> "_FlockHandle":
        """The process's handle on ``path``'s lock (made on first use)."""
        key = os.path.realpath(path)
        with cls._handles_guard:
            handle = cls._handles.get(key)
            if handle is None:
                handle = cls._handles[key] = cls(Path(key))
            return handle

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = filelock.FileLock(str(path), thread_local=False)
        self._state = threading.Condition()
        self._held_since: float | None = None
        """When this process took the package's lock (monotonic), while it holds it."""
        self._left_at = 0.0
        self._gap_until = 0.0
        self._users = 0
        self._pid = os.getpid()
        self._keeper: threading.Thread | None = None

    def enter(self) -> None:
        """Hold the lock (taken now, or still held from the last group commit)."""
        with self._state:
            if self._pid != os.getpid():  # a forked child: what its parent held is not its own
                self._pid, self._held_since, self._users, self._keeper = os.getpid(), None, 0, None
            if self._held_since is not None:
                self._users += 1
                return
            gap = self._gap_until - time.monotonic()
        if gap > 0:  # just let go after a long hold: the gap is for a waiting process
            time.sleep(gap)
        try:
            self._lock.acquire(timeout=LOCK_WAIT_S, poll_interval=0.001)
        except filelock.Timeout:
            raise LockTimeoutError(f"the memory outbox is busy in another process ({self.path}); "
                                   f"gave up after {LOCK_WAIT_S:g} s") from None
        with self._state:
            self._held_since = time.monotonic()
            self._users += 1

    def leave(self, *, keep: bool = False) -> None:
        """Stop holding it: let it go, or with ``keep`` keep it for the next capture (see the class)."""
        with self._state:
            self._users -= 1
            if self._users > 0 or self._held_since is None:
                return
            now = time.monotonic()
            if keep:
                if now - self._held_since >= _LEASE_MAX_S:
                    self._gap_until = now + _LEASE_GAP_S
                    self._let_go()
                    return
                self._left_at = now
                if self._keeper is None:  # a keeper already running sees ``_left_at`` when it wakes
                    self._keeper = threading.Thread(target=self._keep, name="outbox-lock-keeper", daemon=True)
                    self._keeper.start()
                return
            self._let_go()

    def _let_go(self) -> None:
        """Release the package's lock (``_state`` held)."""
        self._held_since = None
        self._lock.release()
        self._state.notify()

    def _keep(self) -> None:
        """The keeper thread: lets the kept lock go once it has been idle ``_LEASE_IDLE_S``."""
        with self._state:
            try:
                while self._held_since is not None and self._pid == os.getpid():
                    if self._users:  # in use now: look again in a while (nobody wakes the keeper)
                        self._state.wait(_LEASE_IDLE_S)
                        continue
                    wait = self._left_at + _LEASE_IDLE_S - time.monotonic()
                    if wait > 0:
                        self._state.wait(wait)
                        continue
                    self._let_go()
            except Exception as exc:  # the release failed: the next enter takes the lock anew
                self._held_since = None
                log.warning("the memory outbox's file lock could not be let go: %s", exc)
            finally:
                self._keeper = None


_GROUP_MAX = 1000
"""At most this many callers' lines go into one group-committed append."""


@dataclass(slots=True)
class _Group:
    """Callers waiting for the next group-committed append, and the task writing them."""

    waiting: list[tuple[Sequence[OutboxLine], asyncio.Future[None]]] = field(default_factory=list)
    writer: asyncio.Task[None] | None = None
    alone: bool = False
    """A lone caller is writing its own lines (no writer task): callers arriving meanwhile wait for
    the writer it starts when it is done."""


def _append_all(path: Path, data: bytes, *, close_torn_line: bool) -> tuple[int, int, int]:
    """Append ``data`` to ``path`` and fsync, all or nothing: a failure truncates back to the start.

    Returns the file offsets the appended bytes span (a closing newline for a torn line included)
    and the file's inode. One descriptor reads the last byte and appends (a capture at a time pays
    for every system call).
    """
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):  # a link to /dev/null or a FIFO would swallow what is captured
            raise OutboxWriteError(f"cannot append to {path}: it is not a regular file; nothing was added")
        start = info.st_size
        if start and close_torn_line and os.pread(fd, 1, start - 1) != b"\n":
            data = b"\n" + data
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
            return start, start + len(data), info.st_ino
        except BaseException as exc:
            try:
                os.ftruncate(fd, start)
                os.fsync(fd)
            except OSError as undo:
                raise OutboxWriteError(f"cannot append to {path} ({_why(exc)}), and the partial line could not "
                                       f"be removed ({_why(undo)}); the next sweep quarantines it") from exc
            if isinstance(exc, OSError):
                raise OutboxWriteError(f"cannot append to {path} ({_why(exc)}); nothing was added") from exc
            raise
    finally:
        os.close(fd)


def _read_all(path: Path) -> bytes:
    """The whole of the regular file ``path`` (``CorruptFileError`` for a device, a FIFO, a folder)."""
    with open_regular(path) as handle:
        return handle.read()


def _why(exc: BaseException) -> str:
    return (exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)) or type(exc).__name__


def _read_repaired(path: Path) -> object:
    """``read_json`` with bad text repaired (see the module docstring); a repaired object gets a note."""
    with open_regular(path) as handle:
        raw = handle.read(STATE_FILE_BYTES + 1)
    if len(raw) > STATE_FILE_BYTES:
        raise CorruptFileError(f"{path} is larger than the limit of {STATE_FILE_BYTES} bytes")
    if json_deeper_than(raw, MAX_DEPTH):
        raise CorruptFileError(f"{path}: nested deeper than {MAX_DEPTH} levels")
    text, undecodable = decode_text(raw)
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise CorruptFileError(f"{path}: not valid JSON ({getattr(exc, 'msg', exc)})") from exc
    problem = "bytes that are not UTF-8 text" if undecodable else None
    if b"\\u" in raw:  # only a JSON escape can carry a lone surrogate or NUL into a parsed value
        fixed, changed = repair_value(value)
        if changed:
            problem = problem or value_problem(value) or "text that is not valid Unicode"
            value = fixed
    if problem is not None:
        log.warning("memory-honcho: repaired %s on read (%s)", path, problem)
        if isinstance(value, dict):
            value = {**value, "repaired": [*_notes(value), f"read: {problem}"]}
    return value


def _read_object(path: Path) -> dict[str, object]:
    """``_read_repaired`` of a file that must hold a JSON object (``CorruptFileError`` otherwise)."""
    value = _read_repaired(path)
    if not isinstance(value, dict):
        raise CorruptFileError(f"{path}: not a JSON object")
    return value


def _notes(value: Mapping[str, object]) -> list[str]:
    notes = value.get("repaired")
    return [str(n) for n in notes] if isinstance(notes, list) else []


def _gap_read(raw: bytes) -> GapRead:
    """A span of the outbox parsed for the status index."""
    snapshot = OutboxSnapshot()
    marked: list[str] = []
    _parse_into(snapshot, {}, raw, 1, marked)
    return GapRead([(r["conversationId"], r.get("owner") or "user", r["batchId"], r.get("status") == "delivered")
                    for r in snapshot.records], marked, len(snapshot.corrupt))


def _parse_into(snapshot: OutboxSnapshot, index: dict[str, OutboxRecord], raw: bytes, first_line: int,
                marked: list[str] | None = None) -> None:
    """Parse JSONL bytes into ``snapshot``: records appended (and indexed), marks folded, bad lines kept.

    Text that cannot be stored (bytes that are not UTF-8, escaped lone surrogates or NUL) is
    repaired; the record says so in ``repaired`` and the line is listed in ``snapshot.repaired``.
    """
    for number, line in enumerate(raw.split(b"\n"), start=first_line):
        if not line.strip():
            continue
        text, undecodable = decode_text(line)
        if json_deeper_than(line, MAX_DEPTH):
            snapshot.corrupt.append(CorruptLine(number, text, f"nested deeper than {MAX_DEPTH} levels"))
            continue
        try:
            value = json.loads(text)
        except (ValueError, RecursionError) as exc:
            snapshot.corrupt.append(CorruptLine(number, text, f"not valid JSON ({getattr(exc, 'msg', exc)})"))
            continue
        problem = "bytes that are not UTF-8 text" if undecodable else None
        if b"\\u" in line:  # only a JSON escape can carry a lone surrogate or NUL into a parsed value
            fixed, changed = repair_value(value)
            if changed:
                problem = problem or value_problem(value) or "text that is not valid Unicode"
                value = fixed
        reason = _record_problem(value)
        if reason is not None:
            snapshot.corrupt.append(CorruptLine(number, text, reason))
            continue
        if problem is not None:
            snapshot.repaired.append((number, problem))
            if "op" not in value:
                value["repaired"] = [*_notes(value), f"line {number}: {problem}"]
        if "op" in value:
            snapshot.marks += 1
            if marked is not None:
                marked.extend(str(b) for b in value["batchIds"])
            for batch in value["batchIds"]:
                record = index.get(batch)
                if record is not None:
                    record["status"] = "delivered"
        else:
            snapshot.records.append(value)
            index[value["batchId"]] = value


def _record_problem(value: object) -> str | None:
    """Why a parsed line is not a record or a delivered mark, or None when it is fine."""
    if not isinstance(value, dict):
        return "not a JSON object"
    if "op" in value:
        if value.get("op") != "delivered" or not isinstance(value.get("batchIds"), list):
            return "unknown mark"
        return None
    for key, kind in (("batchId", str), ("owner", str), ("messages", list)):
        if not isinstance(value.get(key), kind):
            return f"field {key!r} missing or not a {kind.__name__}"
    try:  # the JavaScript package writes a number here, this side a string: both are read
        value["conversationId"] = check_conversation_id(value.get("conversationId"))
    except OutboxError as exc:
        return str(exc)
    created = value.get("createdAt")
    if isinstance(created, bool) or not isinstance(created, (int, float)) or not math.isfinite(created):
        return "field 'createdAt' missing or not a finite number"
    for message in value["messages"]:
        if not isinstance(message, dict) or not isinstance(message.get("content"), str):
            return "a message without text content"
        if not isinstance(message.get("peerId"), str):
            return "a message without a peerId"
    return None


def _ledger_problem(value: object) -> str | None:
    if not isinstance(value, dict):
        return "not a JSON object"
    try:  # a number in the JavaScript package's ledgers, a string in ours
        value["conversationId"] = check_conversation_id(value.get("conversationId"))
    except OutboxError:
        return "field 'conversationId' missing or not a conversation id"
    for key in ("deliveredBatchIds", "anchors"):
        if not isinstance(value.get(key, []), list):
            return f"field {key!r} is not a list"
    if not isinstance(value.get("turnCount", 0), int):
        return "field 'turnCount' is not a number"
    return None
