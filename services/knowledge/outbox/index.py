"""The outbox's status index, ``data/outbox/capture.idx``: what the status view needs, without parsing the outbox.

One JSON line per chunk of ``capture.jsonl`` that this process summed up: the chunk's byte span
``[s, e)``, the outbox file's inode ``ino``, a CRC ``h`` of the chunk's first and last
``GUARD`` bytes, and its summary: per conversation (``c``) the owner, how many of its records are
still pending (records flipped by a mark in the same chunk left out) and where their batch ids
sit in ``i``, the batch ids its delivered marks name (``m``) and how many lines could not be read
(``x``).

``i`` comes first and holds every pending batch id of the chunk, space-separated, in one string
that needs no JSON escape (an id that would need one is not indexed: that chunk is parsed from
the outbox instead). A reader takes the rest of the line as JSON and leaves ``i`` as bytes,
read only for the conversations and chunks where the ids matter (a later delivered mark, a
ledger's delivered window): counting pending records over 100,000 of them reads no id.

Every fsynced append adds its chunk's line (``IndexWriter``), kept in memory and written in bulk,
never fsynced: the index is a cache, never the truth. A reader (``read_summary``, inside
the outbox mutex) takes a chunk only when its inode is the outbox's, its span lies inside the file
and does not overlap the chunks before it, and its guard bytes still read the same; every byte not
covered by such a chunk (lines another program appended, an append whose index line a crash cut
off, a torn or stale index) is parsed from the outbox itself. So a corrupt or stale index costs a
parse, never a wrong count. When a read had to parse, applied delivered marks to earlier chunks, or
the index grew long, it is replaced by one chunk for the whole file; a compaction's rewrite starts
it again (``IndexWriter.note_rewrite``).

A delivered mark flips the records of earlier chunks that it names (a mark never flips a record
appended after it, as in the outbox's own reading).
"""

from __future__ import annotations

import json
import logging
import os
import re
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from services.files import CorruptFileError, open_regular

__all__ = ["GUARD", "Chunk", "GapRead", "Ids", "IndexWriter", "OutboxSummary", "read_summary"]

log = logging.getLogger("services.knowledge.outbox")

GUARD = 64
"""Bytes at each end of a chunk whose CRC must still match before the chunk is believed."""

_MAX_LINES = 64
"""An index longer than this is folded into one chunk by the next reader (and kept lines are
written when this many gathered)."""

_FLUSH_BYTES = 1 << 20
"""Kept chunk lines are written once they hold this many bytes."""

JsonObject = Mapping[str, object]

_PLAIN = re.compile('[^"\\\\\x00-\x20\x7f\ud800-\udfff]+')
"""A batch id the index can hold verbatim inside a JSON string (no quote, backslash, space, control
or lone surrogate)."""

_HEAD = b'{"i":"'
"""How a chunk line begins: its id string, read up to the next quote without a JSON parse."""


@dataclass(slots=True)
class Ids:
    """Some pending batch ids of one conversation, space-separated bytes, counted without being read."""

    count: int
    source: bytes
    start: int
    end: int
    listed: list[str] | None = None
    """The ids themselves when one of them is not plain (``_PLAIN``: it could hold a space)."""

    @classmethod
    def of(cls, ids: Sequence[str]) -> Ids:
        """The ids given, in order."""
        data = " ".join(ids).encode("utf-8", "replace")
        return cls(len(ids), data, 0, len(data), None if _ids_ok(ids) else list(ids))

    def raw(self) -> bytes:
        """The ids as space-separated UTF-8 bytes."""
        return self.source[self.start:self.end]

    def ids(self) -> list[str]:
        """The ids, in order."""
        if self.listed is not None:
            return list(self.listed)
        return self.raw().decode("utf-8", "replace").split(" ") if self.count else []


@dataclass(slots=True)
class Chunk:
    """One summed-up span of the outbox."""

    start: int
    end: int
    owners: dict[str, str] = field(default_factory=dict)
    """Each conversation with a record in the chunk, and the owner of its first one."""
    pending: dict[str, Ids] = field(default_factory=dict)
    """Per conversation, the batch ids still pending after the chunk's own marks."""
    marks: str = ""
    """The batch ids the chunk's delivered marks name, space-separated."""
    corrupt: int = 0
    """Lines of the chunk that could not be read."""
    plain: bool = True
    """Whether every id of the chunk can be written to the index (``_PLAIN``)."""


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
    parts: dict[str, list[Ids]] = field(default_factory=dict)
    """Per conversation, its pending batch ids in file order as runs (read on demand: counting
    reads no id)."""
    corrupt: int = 0
    """Lines the next compaction quarantines."""
    parsed_bytes: int = 0
    """How many bytes of the outbox this read had to parse (the index covered the rest)."""
    plain: bool = True
    """Whether every id can be written to the index (else the index is not rebuilt from this read)."""

    def count(self, conversation_id: str) -> int:
        """How many records of the conversation are not flipped by a delivered mark."""
        return sum(run.count for run in self.parts.get(conversation_id, ()))

    def ids(self, conversation_id: str) -> list[str]:
        """The conversation's batch ids not flipped by a delivered mark, in file order."""
        return [batch for run in self.parts.get(conversation_id, ()) for batch in run.ids()]

    @property
    def pending(self) -> dict[str, list[str]]:
        """Every conversation's ``ids``."""
        return {conv: self.ids(conv) for conv in self.owners}


def _ids_ok(ids: Iterable[str]) -> bool:
    return all(_PLAIN.fullmatch(batch) for batch in ids)


def _guard(head: bytes, tail: bytes) -> int:
    return zlib.crc32(tail, zlib.crc32(head))


def _chunk_line(ino: int, chunk: Chunk, guard: int) -> bytes:
    parts: list[bytes] = []
    where: dict[str, list[object]] = {}
    at = 0
    for conv, owner in chunk.owners.items():
        run = chunk.pending.get(conv)
        if run is None or not run.count:
            where[conv] = [owner, 0, at, at]
            continue
        raw = run.raw()
        if parts:
            parts.append(b" ")
            at += 1
        parts.append(raw)
        where[conv] = [owner, run.count, at, at + len(raw)]
        at += len(raw)
    value = {"ino": ino, "s": chunk.start, "e": chunk.end, "h": guard, "c": where, "m": chunk.marks,
             "x": chunk.corrupt}
    rest = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "replace")
    return _HEAD + b"".join(parts) + b'",' + rest[1:] + b"\n"


@dataclass(slots=True)
class _Line:
    """One index line read back: its JSON without ``i``, and where ``i``'s bytes sit in ``source``."""

    value: object
    source: bytes
    start: int
    end: int


def _index_lines(index: Path) -> list[_Line]:
    """The index's lines; ``i`` is left in the file's bytes (no copy, no parse)."""
    try:
        with open_regular(index) as handle:  # a cache: anything but a regular file holds no chunks
            raw = handle.read()
    except (OSError, CorruptFileError):
        return []
    lines: list[_Line] = []
    at = 0
    while at < len(raw):
        stop = raw.find(b"\n", at)
        stop = len(raw) if stop < 0 else stop
        if raw.startswith(_HEAD, at, stop) or raw[at:stop].strip():  # a chunk line is never copied
            lines.append(_read_line(raw, at, stop))
        at = stop + 1
    return lines


def _read_line(raw: bytes, at: int, stop: int) -> _Line:
    """The line ``raw[at:stop]``; its value is None when it cannot be read."""
    try:
        if raw.startswith(_HEAD, at, stop):
            begin = at + len(_HEAD)
            end = raw.find(b'"', begin, stop)
            if end < 0 or raw[end + 1:end + 2] != b",":
                return _Line(None, b"", 0, 0)
            return _Line(json.loads(b"{" + raw[end + 2:stop]), raw, begin, end)
        value = json.loads(raw[at:stop])  # spelled another way (spaces, escapes): the whole line is JSON
    except ValueError:
        return _Line(None, b"", 0, 0)
    ids = value.pop("i", "") if isinstance(value, dict) else ""
    if not isinstance(ids, str):
        return _Line(None, b"", 0, 0)
    data = ids.encode("utf-8", "replace")
    return _Line(value, data, 0, len(data))


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
    chunk.pending = {conv: Ids.of(ids) for conv, ids in waiting.items()}
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

    def note_append(self, start: int, end: int, values: Sequence[JsonObject], data: bytes, ino: int) -> None:
        """Keep the chunk line for ``values``, appended (and fsynced) as ``data`` at ``[start, end)``
        of the outbox file with inode ``ino``."""
        chunk = _summed(values, start, end)
        if chunk is None or end - start != len(data) or not data:
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


def _chunk_of(line: _Line, ino: int, size: int) -> tuple[Chunk, int] | None:
    """A chunk line read back and checked for shape, inode and span; None when it is not usable."""
    value = line.value
    if not isinstance(value, dict) or value.get("ino") != ino:
        return None
    start, end, guard, convs = value.get("s"), value.get("e"), value.get("h"), value.get("c")
    marks, corrupt = value.get("m", ""), value.get("x", 0)
    if not (isinstance(start, int) and isinstance(end, int) and isinstance(guard, int) and isinstance(convs, dict)
            and isinstance(marks, str) and isinstance(corrupt, int)) or not 0 <= start < end <= size:
        return None
    chunk = Chunk(start, end, marks=marks, corrupt=corrupt)
    length = line.end - line.start
    for conv, entry in convs.items():
        if not (isinstance(entry, list) and len(entry) == 4 and isinstance(entry[0], str)):
            return None
        owner, count, begin, stop = entry
        if not (type(count) is int and type(begin) is int and type(stop) is int  # noqa: E721 - bool is no count
                and 0 <= begin <= stop <= length and (count > 0) == (stop > begin) and count <= (stop - begin + 1) // 2):
            return None
        chunk.owners[conv] = owner
        if count:
            chunk.pending[conv] = Ids(count, line.source, line.start + begin, line.start + stop)
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
            found = _chunk_of(line, info.st_ino, size)
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
        flipped = any(chunk.marks for chunk in chunks[1:])  # folding applies them: the next read reads no id
        if size and (parsed or flipped or len(lines) > _MAX_LINES or len(lines) != len(chunks)):
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


def _gap_chunk(start: int, end: int, read: GapRead) -> Chunk:
    chunk = Chunk(start, end, corrupt=read.corrupt, marks=" ".join(read.marks),
                  plain=_ids_ok(read.marks) and _ids_ok(batch for _, _, batch, _ in read.records))
    waiting: dict[str, list[str]] = {}
    for conv, owner, batch, delivered in read.records:
        chunk.owners.setdefault(conv, owner)
        if not delivered:
            waiting.setdefault(conv, []).append(batch)
    chunk.pending = {conv: Ids.of(ids) for conv, ids in waiting.items()}
    return chunk


def _fold(chunks: list[Chunk]) -> OutboxSummary:
    """The chunks (in file order) folded into one summary; a mark flips records of earlier chunks."""
    summary = OutboxSummary()
    last_mark: dict[str, int] = {}
    for number, chunk in enumerate(chunks):
        summary.corrupt += chunk.corrupt
        summary.plain = summary.plain and chunk.plain
        if chunk.marks:
            for batch in chunk.marks.split(" "):
                last_mark[batch] = number
    last = max(last_mark.values(), default=-1)
    for number, chunk in enumerate(chunks):
        for conv, owner in chunk.owners.items():
            summary.owners.setdefault(conv, owner)
            run = chunk.pending.get(conv)
            runs = summary.parts.setdefault(conv, [])
            if run is None or not run.count:
                continue
            if number < last:  # a later mark may flip some: only then are the ids read
                run = Ids.of([b for b in run.ids() if last_mark.get(b, -1) <= number])
                if not run.count:
                    continue
            runs.append(run)
    return summary


def _whole(summary: OutboxSummary, size: int) -> Chunk | None:
    """One chunk standing for the whole file (marks already applied); None when an id cannot be indexed."""
    if not summary.plain or any(" " in conv for conv in summary.owners):
        return None
    chunk = Chunk(0, size, owners=dict(summary.owners), corrupt=summary.corrupt)
    for conv, runs in summary.parts.items():
        runs = [run for run in runs if run.count]
        if len(runs) == 1:
            chunk.pending[conv] = runs[0]
        elif runs:
            data = b" ".join(run.raw() for run in runs)
            chunk.pending[conv] = Ids(sum(run.count for run in runs), data, 0, len(data))
    return chunk
