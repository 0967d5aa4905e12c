"""Quarantined outbox lines, shown with their reason, and the operator's two ways out of quarantine.

``read_quarantine(stores)`` lists ``data/outbox/quarantine.jsonl``. ``retry_quarantined`` reads a
line again by today's rules (a line set aside before those rules accepted it, or one mended by
hand): when it now reads as a record it goes back into ``capture.jsonl`` for the next sweep, and
leaves the quarantine; when it still cannot be read, ``QuarantineError`` says why and nothing
changes. ``drop_quarantined`` moves the line into ``data/outbox/dropped.jsonl`` (appended and
fsynced first, so a dropped line is never destroyed, only put out of the way). Both run inside
the outbox mutex and find the line by its content, so a quarantine rewritten meanwhile never
makes them act on another line (``QuarantineError``: it is gone).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from services.times import ms_time
from services.files import atomic_write_text
from services.text import decode_text

from .models import OutboxError, OutboxRecord
from .stores import OutboxSnapshot, OutboxStores, _append_all, _parse_into, _read_all

__all__ = ["QuarantineError", "QuarantinedLine", "drop_quarantined", "read_quarantine", "retry_quarantined"]


class QuarantineError(OutboxError):
    """A quarantined line cannot be retried (it still does not read) or is no longer there."""


@dataclass(frozen=True, slots=True)
class QuarantinedLine:
    """One line of the quarantine file."""

    position: int
    """0-based position in the quarantine file."""
    quarantined_at: float | None
    """When it was set aside (seconds since the epoch; the file keeps milliseconds), when known."""
    line: int | None
    """Its line number in ``capture.jsonl`` then."""
    reason: str
    """Why it was set aside."""
    raw: str
    """The line's text."""
    entry: str
    """The quarantine file's own line (what identifies it)."""


def read_quarantine(stores: OutboxStores) -> list[QuarantinedLine]:
    """Every quarantined line, oldest first; an unreadable quarantine line is shown as it is."""
    out = []
    for position, entry in enumerate(_entries(stores)):
        try:
            value: object = json.loads(entry)
        except (ValueError, RecursionError):  # a line put there by hand, nested past what the parser follows
            value = None
        if not isinstance(value, dict):
            out.append(QuarantinedLine(position, None, None, "unreadable quarantine entry", entry, entry))
            continue
        line = value.get("line")
        out.append(QuarantinedLine(
            position, ms_time(value.get("quarantinedAt")),
            line if isinstance(line, int) and not isinstance(line, bool) else None,
            str(value.get("reason") or "no reason recorded"), str(value.get("raw", entry)), entry))
    return out


def retry_quarantined(stores: OutboxStores, item: QuarantinedLine) -> OutboxRecord:
    """Put ``item`` back into the outbox when it now reads as a record (call inside the mutex)."""
    entries = _entries(stores)
    index = _find(entries, item)
    snapshot = OutboxSnapshot()
    _parse_into(snapshot, {}, item.raw.encode("utf-8", "replace"), 1)
    if snapshot.corrupt:
        raise QuarantineError(f"the line still cannot be read: {snapshot.corrupt[0].reason}; it stays in quarantine")
    if not snapshot.records:
        raise QuarantineError("the line is a delivered mark, not a record; drop it instead")
    record = snapshot.records[0]
    stores.append_lines([record])
    _rewrite(stores, entries[:index] + entries[index + 1:])
    return record


def drop_quarantined(stores: OutboxStores, item: QuarantinedLine) -> None:
    """Move ``item`` out of the quarantine into ``dropped.jsonl`` (call inside the mutex)."""
    entries = _entries(stores)
    index = _find(entries, item)
    _append_all(stores.quarantine_path.with_name("dropped.jsonl"), (entries[index] + "\n").encode("utf-8"),
                close_torn_line=True)
    _rewrite(stores, entries[:index] + entries[index + 1:])


def _entries(stores: OutboxStores) -> list[str]:
    try:
        raw = _read_all(stores.quarantine_path)
    except FileNotFoundError:
        return []
    return [line for line in decode_text(raw)[0].split("\n") if line.strip()]


def _find(entries: list[str], item: QuarantinedLine) -> int:
    if 0 <= item.position < len(entries) and entries[item.position] == item.entry:
        return item.position
    if item.entry in entries:
        return entries.index(item.entry)
    raise QuarantineError("that quarantined line is no longer there (the quarantine changed); look again")


def _rewrite(stores: OutboxStores, entries: list[str]) -> None:
    atomic_write_text(stores.quarantine_path, "".join(e + "\n" for e in entries))
