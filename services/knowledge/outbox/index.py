"""The outbox's status index, ``data/outbox/capture.idx``: what the status view needs, without parsing the outbox.

One JSON line per chunk of ``capture.jsonl`` that this process summed up: the chunk's byte span
``[s, e)``, the outbox file's inode ``ino``, a CRC ``h`` of the chunk's first and last
``GUARD`` bytes, and its summary: per conversation the owner and the batch ids still pending
(space-separated; records flipped by a mark in the same chunk left out), the batch ids its
delivered marks name (``m``) and how many lines could not be read (``x``).

Every fsynced append adds its chunk's line (``IndexWriter``), kept in memory and written in bulk,
never fsynced: the index is a cache, never the truth. A reader (``read_summary``, inside
the outbox mutex) takes a chunk only when its inode is the outbox's, its span lies inside the file
and does not overlap the chunks before it, and its guard bytes still read the same; every byte not
covered by such a chunk (lines another program appended, an append whose index line a crash cut
off, a torn or stale index) is parsed from the outbox itself. So a corrupt or stale index costs a
parse, never a wrong count. When a read had to parse, or the index grew long, it is replaced by one
chunk for the whole file; a compaction's rewrite starts it again (``IndexWriter.note_rewrite``).

A delivered mark flips the records of earlier chunks that it names (a mark never flips a record
appended after it, as in the outbox's own reading).
"""

from __future__ import annotations

import json
import logging
import os
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["GUARD", "Chunk", "GapRead", "IndexWriter", "OutboxSummary", "read_summary"]

log = logging.getLogger("services.knowledge.outbox")

GUARD = 64
"""Bytes at each end of a chunk whose CRC must still match before the chunk is believed."""

_MAX_LINES = 64
"""An index longer than this is folded into one chunk by the next reader (and kept lines are
written when this many gathered)."""

_FLUSH_BYTES = 1 << 20
"""Kept chunk lines are written once they hold this many bytes."""

JsonObject = Mapping[str, object]


@dataclass(slots=True)
class Chunk:
    """One summed-up span of the outbox."""

    start: int
    end: int
    owners: dict[str, str] = field(default_factory=dict)
    """Each conversation with a record in the chunk, and the owner of its first one."""
    pending: dict[str, str] = field(default_factory=dict)
    """Per conversation, the batch ids still pending after the chunk's own marks, space-separated."""
    marks: str = ""
    """The batch ids the chunk's delivered marks name, space-separated."""
    corrupt: int = 0
    """Lines of the chunk that could not be read."""


@dataclass(slots=True)
class GapRead:
    """What parsing a span of the outbox found (the reader's fallback, ``stores`` parses)."""

    records: list[tuple[str, str, str, bool]] = field(default_factory=list)
    """``(conversation id, owner, batch id, delivered by a mark of the span)`` in file order."""
    marks: list[str] = field(default_factory=list)
    """Batch ids named by the span's delivered marks."""
    corrupt: int = 0


@dataclass(slots=True)
class OutboxSummary:
    """The outbox as the status view needs it: owners, pending batch ids, unreadable lines."""

    owners: dict[str, str] = field(default_factory=dict)
    """Every conversation with a record in the outbox, with the owner of its first record."""
    parts: dict[str, list[str]] = field(default_factory=dict)
    """Per conversation, its pending batch ids in file order as space-separated runs (split on
    demand: counting needs no split)."""
    corrupt: int = 0
    """Lines the next compaction quarantines."""
    parsed_bytes: int = 0
    """How many bytes of the outbox this read had to parse (the index covered the rest)."""

    def count(self, conversation_id: str) -> int:
        """How many records of the conversation are not flipped by a delivered mark."""
        return sum(run.count(" ") + 1 for run in self.parts.get(conversation_id, ()) if run)

    def ids(self, conversation_id: str) -> list[str]:
        """The conversation's batch ids not flipped by a delivered mark, in file order."""
        return [batch for run in self.parts.get(conversation_id, ()) if run for batch in run.split(" ")]

    @property
    def pending(self) -> dict[str, list[str]]:
        """Every conversation's ``ids``."""
        return {conv: self.ids(conv) for conv in self.owners}


def _ids_ok(ids: Iterable[str]) -> bool:
    return all(batch and " " not in batch for batch in ids)


def _guard(head: bytes, tail: bytes) -> int:
    return zlib.crc32(tail, zlib.crc32(head))


def _chunk_line(ino: int, chunk: Chunk, guard: int) -> bytes:
    value = {"ino": ino, "s": chunk.start, "e": chunk.end, "h": guard,
             "c": {conv: [owner, chunk.pending.get(conv, "")] for conv, owner in chunk.owners.items()},
             "m": chunk.marks, "x": chunk.corrupt}
    return (json.dumps(value, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8", "replace")


def _summed(values: Iterable[JsonObject], start: int, end: int) -> Chunk | None:
    """The chunk summary of values just appended in file order; None when an id cannot be indexed."""
    chunk = Chunk(start, end)
    order: list[tuple[str, str]] = []
    marked: dict[str, int] = {}
    marks: list[str] = []
    for position, value in enumerate(values):
        if "op" in value:
            ids = value.get("batchIds")
            if not isinstance(ids, list) or not all(isinstance(b, str) for b in ids):
                return None
            for batch in ids:
                marked[batch] = position
                marks.append(batch)
            continue
        conv, owner, batch = value.get("conversationId"), value.get("owner"), value.get("batchId")
        if not isinstance(conv, str) or not isinstance(owner, str) or not isinstance(batch, str):
            return None
        chunk.owners.setdefault(conv, owner or "user")
        order.append((conv, batch))
        marked.pop(batch, None)  # a mark earlier in the chunk does not flip a later record
    if not _ids_ok(b for _, b in order) or not _ids_ok(marks) or any(" " in c for c in chunk.owners):
        return None
    waiting: dict[str, list[str]] = {}
    for conv, batch in order:
        if batch not in marked:
            waiting.setdefault(conv, []).append(batch)
    chunk.pending = {conv: " ".join(ids) for conv, ids in waiting.items()}
    chunk.marks = " ".join(marks)
    return chunk


class IndexWriter:
    """Chunk lines of this process's appends, kept in memory and written to the index in bulk.

    Writing a line per capture would cost a file write next to every fsynced append; the lines
    are written when enough gathered, before every read of the index and when the outbox closes.
    Lines a crash loses only cost the next reader a parse. Call inside the outbox mutex.
    """

    def __init__(self, outbox: Path, index: Path) -> None:
        self.outbox = outbox
        self.index = index
        self._lines: list[bytes] = []
        self._size = 0

    def note_append(self, start: int, end: int, values: Sequence[JsonObject], data: bytes) -> None:
        """Keep the chunk line for ``values``, appended (and fsynced) as ``data`` at ``[start, end)``."""
        chunk = _summed(values, start, end)
        if chunk is None or end - start != len(data) or not data:
            return
        try:
            ino = os.stat(self.outbox).st_ino
        except OSError:
            return
        line = _chunk_line(ino, chunk, _guard(data[:GUARD], data[-GUARD:]))
        self._lines.append(line)
        self._size += len(line)
        if self._size > _FLUSH_BYTES or len(self._lines) > _MAX_LINES:
            self.flush()

    def flush(self) -> None:
        """Write the kept lines to the index (not fsynced: the index is a cache)."""
        if not self._lines:
            return
        lines, self._lines, self._size = self._lines, [], 0
        try:
            with open(self.index, "ab") as handle:
                handle.write(b"".join(lines))
        except OSError as exc:
            log.debug("outbox index not updated: %s", exc)

    def note_rewrite(self, records: Sequence[JsonObject]) -> None:
        """Start the index again for an outbox just rewritten with ``records`` (compaction)."""
        self._lines, self._size = [], 0
        try:
            info = os.stat(self.outbox)
            with open(self.outbox, "rb") as handle:
                head = handle.read(GUARD)
                handle.seek(max(0, info.st_size - GUARD))
                tail = handle.read(GUARD)
            chunk = _summed(records, 0, info.st_size) if info.st_size else None
            _replace(self.index, b"" if chunk is None else _chunk_line(info.st_ino, chunk, _guard(head, tail)))
        except OSError as exc:
            log.debug("outbox index not restarted: %s", exc)
            _discard(self.index)


def _replace(index: Path, data: bytes) -> None:
    tmp = index.with_name(f".{index.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, index)


def _discard(index: Path) -> None:
    try:
        index.unlink()
    except OSError:
        pass


def _chunk_of(value: object, ino: int, size: int) -> tuple[Chunk, int] | None:
    """A chunk line read back and checked for shape, inode and span; None when it is not usable."""
    if not isinstance(value, dict) or value.get("ino") != ino:
        return None
    start, end, guard, convs = value.get("s"), value.get("e"), value.get("h"), value.get("c")
    marks, corrupt = value.get("m", ""), value.get("x", 0)
    if not (isinstance(start, int) and isinstance(end, int) and isinstance(guard, int) and isinstance(convs, dict)
            and isinstance(marks, str) and isinstance(corrupt, int)) or not 0 <= start < end <= size:
        return None
    chunk = Chunk(start, end, marks=marks, corrupt=corrupt)
    for conv, entry in convs.items():
        if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str)
                and isinstance(entry[1], str)):
            return None
        chunk.owners[conv] = entry[0]
        if entry[1]:
            chunk.pending[conv] = entry[1]
    return chunk, guard


def _guard_holds(fd: int, chunk: Chunk, guard: int) -> bool:
    head = os.pread(fd, min(GUARD, chunk.end - chunk.start), chunk.start)
    tail_at = max(chunk.start, chunk.end - GUARD)
    tail = os.pread(fd, chunk.end - tail_at, tail_at)
    return _guard(head, tail) == guard


def read_summary(outbox: Path, index: Path, parse: Callable[[bytes], GapRead]) -> OutboxSummary:
    """The outbox summed up from the index's chunks, parsing (with ``parse``) only what they do not cover."""
    try:
        fd = os.open(outbox, os.O_RDONLY)
    except FileNotFoundError:
        return OutboxSummary()
    try:
        info = os.fstat(fd)
        size = info.st_size
        lines = _index_lines(index)
        candidates = []
        for line in lines:
            try:
                value = json.loads(line)
            except ValueError:
                continue
            found = _chunk_of(value, info.st_ino, size)
            if found is not None:
                candidates.append(found)
        candidates.sort(key=lambda c: (c[0].start, -c[0].end))
        chunks: list[Chunk] = []
        gaps: list[tuple[int, int]] = []
        position = 0
        for chunk, guard in candidates:
            if chunk.start < position or not _guard_holds(fd, chunk, guard):
                continue
            if chunk.start > position:
                gaps.append((position, chunk.start))
            chunks.append(chunk)
            position = chunk.end
        if position < size:
            gaps.append((position, size))
        parsed = 0
        for start, end in gaps:
            data = os.pread(fd, end - start, start)
            chunks.append(_gap_chunk(start, end, parse(data)))
            parsed += end - start
        chunks.sort(key=lambda c: c.start)
        summary = _fold(chunks)
        summary.parsed_bytes = parsed
        if size and (parsed or len(lines) > _MAX_LINES or len(lines) != len(chunks)):
            whole = _whole(summary, size)
            if whole is not None:
                head = os.pread(fd, min(GUARD, size), 0)
                tail = os.pread(fd, min(GUARD, size), max(0, size - GUARD))
                try:
                    _replace(index, _chunk_line(info.st_ino, whole, _guard(head, tail)))
                except OSError as exc:
                    log.debug("outbox index not folded: %s", exc)
        return summary
    finally:
        os.close(fd)


def _index_lines(index: Path) -> list[bytes]:
    try:
        raw = index.read_bytes()
    except OSError:
        return []
    return [line for line in raw.split(b"\n") if line.strip()]


def _gap_chunk(start: int, end: int, read: GapRead) -> Chunk:
    chunk = Chunk(start, end, corrupt=read.corrupt, marks=" ".join(read.marks))
    waiting: dict[str, list[str]] = {}
    for conv, owner, batch, delivered in read.records:
        chunk.owners.setdefault(conv, owner)
        if not delivered:
            waiting.setdefault(conv, []).append(batch)
    chunk.pending = {conv: " ".join(ids) for conv, ids in waiting.items()}
    return chunk


def _fold(chunks: list[Chunk]) -> OutboxSummary:
    """The chunks (in file order) folded into one summary; a mark flips records of earlier chunks."""
    summary = OutboxSummary()
    last_mark: dict[str, int] = {}
    for number, chunk in enumerate(chunks):
        summary.corrupt += chunk.corrupt
        if chunk.marks:
            for batch in chunk.marks.split(" "):
                last_mark[batch] = number
    for number, chunk in enumerate(chunks):
        for conv, owner in chunk.owners.items():
            summary.owners.setdefault(conv, owner)
            ids = chunk.pending.get(conv)
            runs = summary.parts.setdefault(conv, [])
            if not ids:
                continue
            if last_mark:
                ids = " ".join(b for b in ids.split(" ") if last_mark.get(b, -1) <= number)
            runs.append(ids)
    return summary


def _whole(summary: OutboxSummary, size: int) -> Chunk | None:
    """One chunk standing for the whole file (marks already applied); None when an id cannot be indexed."""
    if any(" " in conv for conv in summary.owners):
        return None
    chunk = Chunk(0, size, owners=dict(summary.owners), corrupt=summary.corrupt)
    chunk.pending = {conv: " ".join(run for run in runs if run) for conv, runs in summary.parts.items()}
    chunk.pending = {conv: ids for conv, ids in chunk.pending.items() if ids}
    return chunk
