"""Events, watches and inboxes: publishing an event delivers it to every matching watcher.

A watch pattern is a comma-separated list of event-type globs (``*``, ``edited``, ``report.*``,
``exited,killed``); a watch also carries a minimum level (1-10). Delivery skips the actor of the
event (nobody is told about their own act) and any watcher that may not read the object at that
moment (``eligibility``; a document made private to another owner stops reaching its old watchers),
and writes one inbox entry per matching watcher.

An entry is stored while its watcher may read what it is about, but it is shown (an inbox, a queue, a
receiver) only if its reader may still read every object it names: the object, the actor, and any
object the event's data names (``MENTION_KEYS``: a ``report.update`` names its report, a ``run.forked``
its parent run). Decided at read time (``hidden_entry_filters``), so an entry about a report later made
private to another owner is left out, as if that report had never existed.
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Mapping

from typing import cast

from sqlalchemy import ColumnElement, Table, delete, func, not_, or_, select
from sqlmodel import Session, col

from .edges import add_edge
from .eligibility import Access
from .errors import WatchPatternError
from .models import EdgeRow, EventRow, InboxRow, ObjectRow, WatchRow
from .objects import hidden_ids

__all__ = [
    "COMMON_LEVELS",
    "EDGE_KINDS",
    "FORKED_FROM",
    "IMPLICIT_MIN_LEVEL",
    "MENTION_KEYS",
    "mentioned_ids",
    "hidden_entry_filters",
    "parse_pattern",
    "pattern_matches",
    "check_level",
    "publish_event",
    "EventBatch",
    "add_edge",
    "ensure_watch",
    "remove_watch",
]

COMMON_LEVELS = {
    "created": 3,
    "read": 1,
    "watched": 2,
    "deleted": 6,
    "configured": 4,
    "edited": 5,
    "moved": 4,
    "report.update": 6,
    "exited": 5,
    "killed": 7,
    "message.received": 5,
    "woken": 4,
    "spawned": 3,
}
"""Default level of each builtin event type (an ``exited`` with a non-zero code is raised to 7)."""
FORKED_FROM = "forked-from"
"""The edge kind from a fork's run node to the node of the run it was forked from."""
EDGE_KINDS = ("acted-on", "links-to", "watches", "spawned", FORKED_FROM)
IMPLICIT_MIN_LEVEL = 2
"""The minimum level of a watch made by reading, writing, messaging, spawning or starting a job:
level-1 chatter (``read``, activity changes) stays out of those inboxes; ``watch`` can lower it."""

MENTION_KEYS = ("report", "parent")
"""Event data keys that name another object by id: ``report.update``'s report, ``run.forked``'s parent.
A reader that may not read the object named sees neither the event nor an inbox entry of it."""


def mentioned_ids(data: Mapping[str, object]) -> set[str]:
    """The ids of the objects an event's ``data`` names (``MENTION_KEYS``)."""
    return {value for key in MENTION_KEYS if isinstance(value := data.get(key), str) and value}


def hidden_entry_filters(session: Session, where: list[ColumnElement[bool]],
                         access: Access) -> list[ColumnElement[bool]]:
    """The conditions that keep, of the inbox entries ``where`` selects, only those naming nothing
    ``access`` may not read: not their actor (a message's sender stays: the message is the reader's
    own) nor an object their event's data names. The entries whose event's data may name an object
    are few (a key of ``MENTION_KEYS`` in its text) and read once, so the page and its counts agree."""
    hidden = select(col(ObjectRow.id)).where(not_(access.clause()))
    out: list[ColumnElement[bool]] = [or_(col(InboxRow.kind) == "message", col(InboxRow.actor_id).is_(None),
                                          col(InboxRow.actor_id).not_in(hidden))]
    rows = session.execute(select(col(InboxRow.id), col(EventRow.data)).join(EventRow, col(EventRow.id) == col(InboxRow.event_id))
                           .where(*where, or_(*(col(EventRow.data).contains(f'"{key}":') for key in MENTION_KEYS)))
                           ).all()
    named: dict[int, set[str]] = {}
    for entry_id, data in rows:
        try:
            decoded = json.loads(data or "{}")
        except ValueError:
            continue
        if isinstance(decoded, dict) and (ids := mentioned_ids(decoded)):
            named[int(entry_id)] = ids
    gone = hidden_ids(session, sorted(set().union(*named.values())), access) if named else set()
    withheld = sorted(entry for entry, ids in named.items() if ids & gone)
    if withheld:
        out.append(col(InboxRow.id).not_in(withheld))
    return out


_GLOB = re.compile(r"^[a-z*?][a-z0-9_.*?-]*$")


def parse_pattern(pattern: str) -> tuple[str, ...]:
    """The globs of ``pattern``, or ``WatchPatternError`` saying what does not parse."""
    if not isinstance(pattern, str) or not pattern.strip():
        raise WatchPatternError("a watch pattern is required ('*' watches every event)")
    parts = tuple(p.strip() for p in pattern.split(","))
    for part in parts:
        if not part or not _GLOB.match(part):
            raise WatchPatternError(
                f"the watch pattern {pattern!r} does not parse: {part!r} is not an event-type glob "
                "(lower-case letters, digits, . _ - and * ?, comma separated)"
            )
    return parts


def pattern_matches(pattern: str, event_type: str) -> bool:
    """Whether ``event_type`` matches any glob of ``pattern``."""
    return any(fnmatch.fnmatchcase(event_type, glob) for glob in parse_pattern(pattern))


def check_level(level: object, what: str = "level") -> int:
    """``level`` if it is an int 1..10, else ``WatchPatternError``."""
    if isinstance(level, bool) or not isinstance(level, int) or not 1 <= level <= 10:
        raise WatchPatternError(f"the {what} {level!r} is not a level from 1 to 10")
    return level


def ensure_watch(session: Session, watcher_id: str, object_id: str, at: float, *, pattern: str | None = None,
                 min_level: int | None = None, read_revision: int | None = None) -> tuple[WatchRow, bool]:
    """Make ``watcher`` a watcher of ``object`` (or update the watch); returns ``(watch, created)``."""
    if pattern is not None:
        parse_pattern(pattern)
    if min_level is not None:
        check_level(min_level, "minimum level")
    watch = session.execute(
        select(WatchRow).where(WatchRow.watcher_id == watcher_id, WatchRow.object_id == object_id)
    ).scalar_one_or_none()
    created = watch is None
    if watch is None:
        watch = WatchRow(watcher_id=watcher_id, object_id=object_id, created_at=at,
                         min_level=IMPLICIT_MIN_LEVEL if min_level is None else min_level)
        session.add(watch)
    if pattern is not None:
        watch.pattern = pattern
    if min_level is not None:
        watch.min_level = min_level
    if read_revision is not None:
        watch.last_read_revision = read_revision
    session.flush()
    add_edge(session, watcher_id, object_id, "watches", at)
    return watch, created


def remove_watch(session: Session, watcher_id: str, object_id: str) -> bool:
    """End ``watcher``'s watch on ``object``; whether there was one."""
    gone = session.execute(
        delete(WatchRow).where(WatchRow.watcher_id == watcher_id, WatchRow.object_id == object_id)
    ).rowcount
    session.execute(delete(EdgeRow).where(
        EdgeRow.src_id == watcher_id, EdgeRow.dst_id == object_id, EdgeRow.kind == "watches"
    ))
    return bool(gone)


def _may_hear(session: Session, watcher_id: str, obj: ObjectRow) -> bool:
    """Whether ``watcher_id`` may read ``obj`` now, in the view it hears in (``delivery.reader_access``)."""
    from .delivery import reader_access  # delivery reads names and profiles, which publish events

    access = reader_access(session, watcher_id)
    return access is None or access.allows(obj.id, obj.owner_id, obj.privacy)


def publish_event(session: Session, obj: ObjectRow, type_: str, at: float, *, level: int | None = None,
                  actor_id: str | None = None, data: Mapping[str, object] | None = None,
                  summary: str | None = None, watched: bool = True) -> tuple[EventRow, list[str]]:
    """Record an event on ``obj`` and deliver it to matching watchers; returns the event and inbox owners.
    ``watched=False`` says ``obj`` was created in this unit of work, so nobody watches it yet."""
    level = check_level(level if level is not None else COMMON_LEVELS.get(type_, 3))
    event = EventRow(object_id=obj.id, type=type_, level=level, actor_id=actor_id, at=at,
                     data=_encoded(data or {}))
    session.add(event)
    session.flush()
    delivered: list[str] = []
    if not watched:
        return event, delivered
    watches = session.execute(select(WatchRow).where(WatchRow.object_id == obj.id)).scalars().all()
    text = summary if summary is not None else f"{obj.name}: {type_}"
    guarded = obj.privacy != "public" and obj.owner_id is not None
    for watch in watches:
        if watch.watcher_id == actor_id or level < watch.min_level:
            continue
        if not pattern_matches(watch.pattern, type_):
            continue
        if guarded and not _may_hear(session, watch.watcher_id, obj):
            continue  # a watcher that may no longer read it hears nothing of it, as if it did not exist
        session.add(InboxRow(owner_id=watch.watcher_id, kind="event", event_id=event.id, object_id=obj.id,
                             object_name=obj.name, event_type=type_, level=level, actor_id=actor_id,
                             at=at, summary=text))
        delivered.append(watch.watcher_id)
    session.flush()
    return event, delivered


_encoder = json.JSONEncoder(sort_keys=True, default=str)
_encode_dict = json.encoder.c_make_encoder(  # type: ignore[attr-defined]
    None, str, json.encoder.encode_basestring_ascii, None, ": ", ", ", True, False, True)
"""The C half of ``_encoder``, made once (``JSONEncoder.encode`` makes it again for every value);
without circular-reference markers (a marker left by a failed call would refuse a later value): data
is plain JSON data or a run event's fields, and a cycle would end in a ``RecursionError``."""


def _encoded(data: Mapping[str, object]) -> str:
    """An event's data as stored: ``json.dumps(data, sort_keys=True, default=str)``."""
    if type(data) is dict and _encode_dict is not None:
        return "".join(_encode_dict(data, 0))
    return _encoder.encode(data)


class EventBatch:
    """``publish_event`` for many events of one unit of work, by table: ``add`` queues an event and
    ``flush`` writes every queued event in one statement (their ids in the order added), then every
    inbox entry their delivery makes in another, as ``publish_event`` would have written them one by
    one. The watches of each object (and whether a watcher may read it) are read once per batch, so
    a writer that watches or spawns in between calls ``reset`` first (which flushes)."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self._queued: list[tuple[ObjectRow, str, str, int, str, str, str, str | None, str]] = []
        """Each event queued: its object, the object's id, type, level, data (JSON), summary, and the
        object's privacy, owner and name as they were (each column read once, when queued)."""
        self._watches: dict[str, list[WatchRow]] = {}
        self._hears: dict[tuple[str, str], bool] = {}
        self._at = 0.0

    def add(self, obj: ObjectRow, type_: str, at: float, *, level: int, data: Mapping[str, object],
            summary: str) -> None:
        """Queue an event on ``obj`` as it is now (its name, privacy and owner when it is delivered)."""
        self._queued.append((obj, obj.id, type_, check_level(level), _encoded(data), summary,
                             obj.privacy, obj.owner_id, obj.name))
        self._at = at

    def flush(self) -> None:
        """Write the queued events and their inbox entries (two statements, whatever their number;
        the events' ids are read back only when some of them are delivered)."""
        if not self._queued:
            return
        queued, self._queued = self._queued, []
        s, at = self.session, self._at
        missing = sorted({item[1] for item in queued} - set(self._watches))
        for part in range(0, len(missing), 500):
            chunk = missing[part:part + 500]
            for object_id in chunk:
                self._watches[object_id] = []
            for watch in s.execute(select(WatchRow).where(WatchRow.object_id.in_(chunk)).order_by(WatchRow.id)).scalars():
                self._watches[watch.object_id].append(watch)
        heard: list[list[str]] = []  # each event's watchers to deliver it to, in the order publish_event takes them
        watches = self._watches
        for obj, obj_id, type_, level, _data, _summary, privacy, owner_id, _name in queued:
            watching = watches[obj_id]
            if not watching:
                heard.append([])
                continue
            guarded = privacy != "public" and owner_id is not None
            heard.append([w.watcher_id for w in watching
                          if level >= w.min_level and pattern_matches(w.pattern, type_)
                          and (not guarded or self._may_hear(w.watcher_id, obj))])
        events = cast(Table, EventRow.__table__)
        rows = [(obj_id, type_, level, None, at, data) for _obj, obj_id, type_, level, data, *_ in queued]
        if not any(heard):
            insert_rows(s, events, _EVENT_COLUMNS, rows)
            return
        ids = _inserted_ids(s, events, _EVENT_COLUMNS, rows)
        inbox = [(watcher, "event", event_id, obj_id, name, type_, level, None, at, summary, None, None, None)
                 for event_id, (_obj, obj_id, type_, level, _data, summary, _privacy, _owner, name), watchers
                 in zip(ids, queued, heard, strict=True) for watcher in watchers]
        insert_rows(s, cast(Table, InboxRow.__table__), _INBOX_COLUMNS, inbox)

    def _may_hear(self, watcher_id: str, obj: ObjectRow) -> bool:
        key = (watcher_id, obj.id)
        if key not in self._hears:
            self._hears[key] = _may_hear(self.session, watcher_id, obj)
        return self._hears[key]

    def reset(self) -> None:
        """Flush, and forget the watches read: the next events read them again."""
        self.flush()
        self._watches.clear()
        self._hears.clear()


_EVENT_COLUMNS = ("object_id", "type", "level", "actor_id", "at", "data")
_INBOX_COLUMNS = ("owner_id", "kind", "event_id", "object_id", "object_name", "event_type", "level", "actor_id",
                  "at", "summary", "body", "read_at", "ref")


def insert_rows(session: Session, table: Table, columns: tuple[str, ...], rows: list[tuple[object, ...]]) -> None:
    """Insert ``rows`` (values in the order of ``columns``) into ``table`` in one ``executemany``. On
    SQLite the statement goes to the driver as it is: building each row's parameters through the
    compiled statement costs more than the insert (the values are plain: text, numbers, None)."""
    if not rows:
        return
    if session.get_bind().dialect.name != "sqlite":
        session.execute(table.insert(), [dict(zip(columns, row, strict=True)) for row in rows])
        return
    session.connection().exec_driver_sql(
        f"INSERT INTO {table.name} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})", rows)


def _inserted_ids(session: Session, table: Table, columns: tuple[str, ...], rows: list[tuple[object, ...]]) -> list[int]:
    """Insert ``rows`` into ``table`` and answer their ids, in the order of ``rows``. PostgreSQL
    answers them from ``RETURNING`` (multi-row statements, sorted to the rows' order); SQLite, which
    gives the same statement one row at a time, takes the batch in one ``executemany`` and reads them
    back: its write transaction is the only writer and an id is the highest one plus one, so the rows
    are those above the highest id before, in order."""
    if session.get_bind().dialect.name == "postgresql":
        return list(session.execute(table.insert().returning(table.c.id, sort_by_parameter_order=True),
                                    [dict(zip(columns, row, strict=True)) for row in rows]).scalars())
    before = session.execute(select(func.max(table.c.id))).scalar() or 0
    insert_rows(session, table, columns, rows)
    ids = list(session.execute(select(table.c.id).where(table.c.id > before).order_by(table.c.id)).scalars())
    if len(ids) != len(rows):
        raise RuntimeError(f"{table.name}: {len(rows)} rows inserted, {len(ids)} read back")
    return ids
