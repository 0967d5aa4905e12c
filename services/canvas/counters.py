"""Counts the canvas pane reads at any size: how many objects of each type, owner and privacy.

``object_counts`` holds one row per ``(type, owner, privacy)`` with how many objects have them
(an object without owner counts under the owner ``''``). The database keeps it in step itself:
triggers on ``objects`` (row triggers on SQLite; statement triggers over the changed rows on
PostgreSQL, so a ``COPY`` of a million rows is counted in one statement) add and subtract inside
the transaction that inserts, deletes or changes an object's type, owner or privacy. A write that
rolls back takes its counts with it; every write path (the ORM, bulk SQL, an older workbench
writing to the same file) is counted, because none of them can go around a trigger.

``inbox_counts`` holds, the same way, each inbox's entries and unread entries (triggers on
``inbox``): an inbox page's two counts without reading a hundred thousand entries.

``install_counters`` creates the tables and their triggers when a canvas opens without them, and
fills them from ``objects`` and ``inbox`` in the same transaction (the backfill of an older canvas, once).

``count`` answers ``count_objects`` without a name filter from these rows: the operator's count is
a sum over at most a few thousand rows, whatever the number of objects; a reader's count sums the
rows its ``Access`` allows (``public``, no owner, ``friends`` of an owner among its friends,
``private`` of an owner it is) and adds the few objects it may read only because it *is* them.
"""

from __future__ import annotations

from sqlalchemy import Column, Integer, MetaData, String, Table, and_, func, inspect, not_, or_, select, text
from sqlalchemy.engine import Connection
from sqlmodel import Session, col

from .eligibility import Access
from .models import ObjectRow

__all__ = ["COUNTS", "INBOX_COUNTS", "install_counters", "count", "recount", "inbox_counts", "unread_counts",
           "recount_inboxes"]

COUNTS = Table(
    "object_counts", MetaData(),
    Column("type", String, primary_key=True),
    Column("owner_id", String, primary_key=True),
    Column("privacy", String, primary_key=True),
    Column("n", Integer, nullable=False),
)
"""``object_counts``: how many objects have each ``(type, owner id or '', privacy)``."""

INBOX_COUNTS = Table(
    "inbox_counts", MetaData(),
    Column("owner_id", String, primary_key=True),
    Column("total", Integer, nullable=False),
    Column("unread", Integer, nullable=False),
)
"""``inbox_counts``: each inbox's number of entries and of unread entries."""

_TABLE = ("CREATE TABLE object_counts (type VARCHAR NOT NULL, owner_id VARCHAR NOT NULL, privacy VARCHAR NOT NULL, "
          "n BIGINT NOT NULL, PRIMARY KEY (type, owner_id, privacy))")
_OWNER_INDEX = "CREATE INDEX ix_object_counts_owner ON object_counts (owner_id, type)"
_BACKFILL = ("INSERT INTO object_counts (type, owner_id, privacy, n) "
             "SELECT type, coalesce(owner_id, ''), privacy, count(*) FROM objects GROUP BY 1, 2, 3")
_UPSERT = "ON CONFLICT (type, owner_id, privacy) DO UPDATE SET n = object_counts.n + excluded.n"

_SQLITE_TRIGGERS = (
    "CREATE TRIGGER objects_counted_insert AFTER INSERT ON objects BEGIN "
    "INSERT INTO object_counts (type, owner_id, privacy, n) VALUES (new.type, coalesce(new.owner_id, ''), "
    f"new.privacy, 1) {_UPSERT}; END",
    "CREATE TRIGGER objects_counted_delete AFTER DELETE ON objects BEGIN "
    "INSERT INTO object_counts (type, owner_id, privacy, n) VALUES (old.type, coalesce(old.owner_id, ''), "
    f"old.privacy, -1) {_UPSERT}; END",
    "CREATE TRIGGER objects_counted_update AFTER UPDATE OF type, owner_id, privacy ON objects "
    "WHEN old.type IS NOT new.type OR old.owner_id IS NOT new.owner_id OR old.privacy IS NOT new.privacy BEGIN "
    "INSERT INTO object_counts (type, owner_id, privacy, n) VALUES (old.type, coalesce(old.owner_id, ''), "
    f"old.privacy, -1) {_UPSERT}; "
    "INSERT INTO object_counts (type, owner_id, privacy, n) VALUES (new.type, coalesce(new.owner_id, ''), "
    f"new.privacy, 1) {_UPSERT}; END",
)

_PG_FUNCTIONS = (
    "CREATE OR REPLACE FUNCTION object_counts_added() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
    "INSERT INTO object_counts (type, owner_id, privacy, n) "
    f"SELECT type, coalesce(owner_id, ''), privacy, count(*) FROM counted_rows GROUP BY 1, 2, 3 {_UPSERT}; "
    "RETURN NULL; END $$",
    "CREATE OR REPLACE FUNCTION object_counts_removed() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
    "INSERT INTO object_counts (type, owner_id, privacy, n) "
    f"SELECT type, coalesce(owner_id, ''), privacy, -count(*) FROM counted_rows GROUP BY 1, 2, 3 {_UPSERT}; "
    "RETURN NULL; END $$",
    "CREATE OR REPLACE FUNCTION object_counts_changed() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
    "INSERT INTO object_counts (type, owner_id, privacy, n) "
    "SELECT t, o, p, sum(d) FROM ("
    "SELECT b.type, coalesce(b.owner_id, ''), b.privacy, -1 FROM before_rows b JOIN after_rows a ON a.pk = b.pk "
    "WHERE (a.type, a.owner_id, a.privacy) IS DISTINCT FROM (b.type, b.owner_id, b.privacy) UNION ALL "
    "SELECT a.type, coalesce(a.owner_id, ''), a.privacy, 1 FROM before_rows b JOIN after_rows a ON a.pk = b.pk "
    "WHERE (a.type, a.owner_id, a.privacy) IS DISTINCT FROM (b.type, b.owner_id, b.privacy)"
    f") AS m(t, o, p, d) GROUP BY t, o, p {_UPSERT}; "
    "RETURN NULL; END $$",
)
_PG_TRIGGERS = (
    "CREATE TRIGGER objects_counted_insert AFTER INSERT ON objects REFERENCING NEW TABLE AS counted_rows "
    "FOR EACH STATEMENT EXECUTE FUNCTION object_counts_added()",
    "CREATE TRIGGER objects_counted_delete AFTER DELETE ON objects REFERENCING OLD TABLE AS counted_rows "
    "FOR EACH STATEMENT EXECUTE FUNCTION object_counts_removed()",
    "CREATE TRIGGER objects_counted_update AFTER UPDATE ON objects REFERENCING OLD TABLE AS before_rows "
    "NEW TABLE AS after_rows FOR EACH STATEMENT EXECUTE FUNCTION object_counts_changed()",
)


_INBOX_TABLE = ("CREATE TABLE inbox_counts (owner_id VARCHAR NOT NULL PRIMARY KEY, total BIGINT NOT NULL, "
                "unread BIGINT NOT NULL)")
_INBOX_BACKFILL = ("INSERT INTO inbox_counts (owner_id, total, unread) SELECT owner_id, count(*), "
                   "sum(CASE WHEN read_at IS NULL THEN 1 ELSE 0 END) FROM inbox GROUP BY owner_id")
_INBOX_UPSERT = ("ON CONFLICT (owner_id) DO UPDATE SET total = inbox_counts.total + excluded.total, "
                 "unread = inbox_counts.unread + excluded.unread")
_UNREAD = "CASE WHEN {row}.read_at IS NULL THEN 1 ELSE 0 END"
_SQLITE_INBOX_TRIGGERS = (
    "CREATE TRIGGER inbox_counted_insert AFTER INSERT ON inbox BEGIN "
    f"INSERT INTO inbox_counts (owner_id, total, unread) VALUES (new.owner_id, 1, {_UNREAD.format(row='new')}) "
    f"{_INBOX_UPSERT}; END",
    "CREATE TRIGGER inbox_counted_delete AFTER DELETE ON inbox BEGIN "
    f"INSERT INTO inbox_counts (owner_id, total, unread) VALUES (old.owner_id, -1, -{_UNREAD.format(row='old')}) "
    f"{_INBOX_UPSERT}; END",
    "CREATE TRIGGER inbox_counted_update AFTER UPDATE OF owner_id, read_at ON inbox "
    "WHEN old.owner_id IS NOT new.owner_id OR (old.read_at IS NULL) IS NOT (new.read_at IS NULL) BEGIN "
    f"INSERT INTO inbox_counts (owner_id, total, unread) VALUES (old.owner_id, -1, -{_UNREAD.format(row='old')}) "
    f"{_INBOX_UPSERT}; "
    f"INSERT INTO inbox_counts (owner_id, total, unread) VALUES (new.owner_id, 1, {_UNREAD.format(row='new')}) "
    f"{_INBOX_UPSERT}; END",
)
_PG_INBOX = (
    "CREATE OR REPLACE FUNCTION inbox_counts_changed() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
    "IF TG_OP = 'INSERT' THEN "
    "INSERT INTO inbox_counts (owner_id, total, unread) SELECT owner_id, count(*), "
    f"sum({_UNREAD.format(row='a')}) FROM after_rows a GROUP BY owner_id {_INBOX_UPSERT}; "
    "ELSIF TG_OP = 'DELETE' THEN "
    "INSERT INTO inbox_counts (owner_id, total, unread) SELECT owner_id, -count(*), "
    f"-sum({_UNREAD.format(row='b')}) FROM before_rows b GROUP BY owner_id {_INBOX_UPSERT}; "
    "ELSE "
    "INSERT INTO inbox_counts (owner_id, total, unread) SELECT o, sum(t), sum(u) FROM ("
    f"SELECT b.owner_id, -1, -{_UNREAD.format(row='b')} FROM before_rows b JOIN after_rows a ON a.id = b.id "
    "WHERE a.owner_id IS DISTINCT FROM b.owner_id OR (a.read_at IS NULL) <> (b.read_at IS NULL) UNION ALL "
    f"SELECT a.owner_id, 1, {_UNREAD.format(row='a')} FROM before_rows b JOIN after_rows a ON a.id = b.id "
    "WHERE a.owner_id IS DISTINCT FROM b.owner_id OR (a.read_at IS NULL) <> (b.read_at IS NULL)"
    f") AS m(o, t, u) GROUP BY o {_INBOX_UPSERT}; "
    "END IF; RETURN NULL; END $$",
    "CREATE TRIGGER inbox_counted_insert AFTER INSERT ON inbox REFERENCING NEW TABLE AS after_rows "
    "FOR EACH STATEMENT EXECUTE FUNCTION inbox_counts_changed()",
    "CREATE TRIGGER inbox_counted_delete AFTER DELETE ON inbox REFERENCING OLD TABLE AS before_rows "
    "FOR EACH STATEMENT EXECUTE FUNCTION inbox_counts_changed()",
    "CREATE TRIGGER inbox_counted_update AFTER UPDATE ON inbox REFERENCING OLD TABLE AS before_rows "
    "NEW TABLE AS after_rows FOR EACH STATEMENT EXECUTE FUNCTION inbox_counts_changed()",
)


def install_counters(conn: Connection) -> bool:
    """Create ``object_counts`` and ``inbox_counts`` with their triggers and fill them from
    ``objects`` and ``inbox``, in ``conn``'s transaction, when the canvas has them not yet; True
    when it did (a new or an older canvas)."""
    tables = set(inspect(conn).get_table_names())
    made = _install_inbox_counts(conn) if "inbox_counts" not in tables else False
    if "object_counts" in tables:
        return made
    conn.execute(text(_TABLE))
    conn.execute(text(_OWNER_INDEX))
    if conn.dialect.name == "postgresql":
        for statement in (*_PG_FUNCTIONS, *_PG_TRIGGERS):
            conn.execute(text(statement))
    else:
        for statement in _SQLITE_TRIGGERS:
            conn.execute(text(statement))
    conn.execute(text(_BACKFILL))
    return True


def _install_inbox_counts(conn: Connection) -> bool:
    conn.execute(text(_INBOX_TABLE))
    statements = _PG_INBOX if conn.dialect.name == "postgresql" else _SQLITE_INBOX_TRIGGERS
    for statement in statements:
        conn.execute(text(statement))
    conn.execute(text(_INBOX_BACKFILL))
    return True


def inbox_counts(session: Session, owner_id: str) -> tuple[int, int]:
    """``(unread, total)`` of ``owner_id``'s inbox, from the counts."""
    c = INBOX_COUNTS.c
    row = session.connection().execute(select(c.unread, c.total).where(c.owner_id == owner_id)).first()
    return (int(row[0]), int(row[1])) if row is not None else (0, 0)


def unread_counts(session: Session, owner_ids: list[str]) -> dict[str, int]:
    """Each of ``owner_ids``' unread entries, from the counts, in one statement (0 for an empty inbox)."""
    c = INBOX_COUNTS.c
    found = dict(session.connection().execute(select(c.owner_id, c.unread).where(c.owner_id.in_(owner_ids))).all())
    return {owner: int(found.get(owner, 0)) for owner in owner_ids}


def recount_inboxes(session: Session) -> dict[str, tuple[int, int]]:
    """Each inbox's ``(unread, total)`` worked out from ``inbox`` itself (what ``inbox_counts`` must hold)."""
    rows = session.connection().execute(text(
        "SELECT owner_id, sum(CASE WHEN read_at IS NULL THEN 1 ELSE 0 END), count(*) FROM inbox GROUP BY owner_id"))
    return {str(o): (int(u), int(t)) for o, u, t in rows}


def recount(session: Session) -> dict[tuple[str, str, str], int]:
    """The counts worked out from ``objects`` itself (what ``object_counts`` must hold, zero rows aside)."""
    rows = session.connection().execute(text(
        "SELECT type, coalesce(owner_id, ''), privacy, count(*) FROM objects GROUP BY 1, 2, 3")).all()
    return {(str(t), str(o), str(p)): int(n) for t, o, p, n in rows}


def count(session: Session, *, type: str | None = None, owner: str | None = None,
          access: Access | None = None) -> int:
    """How many objects have ``type`` and ``owner`` (each optional) and, with ``access``, that reader
    may read: the same number as counting ``objects`` with ``Access.clause``, read from the counts."""
    c = COUNTS.c
    where = [c.type == type] if type else []
    if owner:
        where.append(c.owner_id == owner)
    if access is not None:
        where.append(or_(c.privacy == "public", c.owner_id == "",
                         and_(c.privacy == "friends", c.owner_id.in_(sorted(access.friends))),
                         and_(c.privacy == "private", c.owner_id.in_(sorted(access.own)))))
    total = int(session.connection().execute(select(func.coalesce(func.sum(c.n), 0)).where(*where)).scalar_one())
    if access is None or not access.own:
        return total
    # the objects the reader may read only because it is them (its node, profile, app, person)
    privacy, owner_col = col(ObjectRow.privacy), col(ObjectRow.owner_id)
    counted = or_(privacy == "public", owner_col.is_(None),
                  and_(privacy == "friends", owner_col.in_(sorted(access.friends))),
                  and_(privacy == "private", owner_col.in_(sorted(access.own))))
    itself = [col(ObjectRow.id).in_(sorted(access.own)), not_(counted)]
    if type:
        itself.append(col(ObjectRow.type) == type)
    if owner:
        itself.append(owner_col == owner)
    return total + int(session.execute(select(func.count()).select_from(ObjectRow).where(*itself)).scalar_one())
