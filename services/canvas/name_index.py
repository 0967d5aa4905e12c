"""The index behind name filters: a trigram index, so a substring of a name is found without
reading every name.

A name filter is a substring match (``list_objects(name_filter=...)``): ``LIKE '%x%'`` on SQLite
(ASCII letters in either case) and ``lower(name) LIKE lower('%x%')`` on PostgreSQL. Its answers are
defined by that predicate alone; the index only narrows which rows are tested:

- **SQLite**: ``object_names``, a contentless FTS5 table with the case-sensitive ``trigram``
  tokenizer over each name lower-cased as ``LIKE`` compares it (``lower()``: ASCII letters only),
  kept in step by triggers on ``objects``. A filter of three characters or more, lower-cased the
  same way, becomes an FTS5 phrase (its trigrams in a row): a name holds it exactly when the
  ``LIKE`` matches, so the operator's count of a filter is a count of the index alone. A page (and
  a count by type, owner or reader) still applies the ``LIKE`` to each candidate. A filter of one
  or two characters has no trigram: it is answered the old way.
- **PostgreSQL**: a GIN index ``USING gin (lower(name) gin_trgm_ops)`` from the ``pg_trgm``
  extension, which serves the ``lower(name) LIKE`` predicate directly (PostgreSQL rechecks each
  candidate); the filter is lower-cased here as ``lower()`` does under the names' ``"C"`` collation
  (``ascii_lower``), so the predicate is the index's own expression. When ``pg_trgm`` cannot be installed (no such extension, no right to create it),
  the canvas works without the index, only slower.

``install_name_index`` creates the index when a canvas opens without it (and fills it, once, in
the opening transaction).
"""

from __future__ import annotations

from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError
from sqlmodel import Session

__all__ = ["MIN_CHARS", "install_name_index", "has_name_index", "fts_phrase", "ascii_lower", "CANDIDATES"]

MIN_CHARS = 3
"""The shortest filter a trigram index can serve; a shorter one reads the names in order."""
CANDIDATES = "SELECT rowid FROM object_names WHERE object_names MATCH :phrase"
"""SQLite: the keys of the objects whose name may hold the filter ``:phrase`` (``fts_phrase``)."""

_SQLITE = (
    "CREATE VIRTUAL TABLE object_names USING fts5(name, content='', tokenize='trigram case_sensitive 1')",
    "CREATE TRIGGER objects_named_insert AFTER INSERT ON objects BEGIN "
    "INSERT INTO object_names (rowid, name) VALUES (new.pk, lower(new.name)); END",
    "CREATE TRIGGER objects_named_delete AFTER DELETE ON objects BEGIN "
    "INSERT INTO object_names (object_names, rowid, name) VALUES ('delete', old.pk, lower(old.name)); END",
    "CREATE TRIGGER objects_named_update AFTER UPDATE OF name ON objects WHEN old.name IS NOT new.name BEGIN "
    "INSERT INTO object_names (object_names, rowid, name) VALUES ('delete', old.pk, lower(old.name)); "
    "INSERT INTO object_names (rowid, name) VALUES (new.pk, lower(new.name)); END",
    "INSERT INTO object_names (rowid, name) SELECT pk, lower(name) FROM objects",
)
_INFO_KEY = "canvas_name_index"


def install_name_index(conn: Connection) -> bool:
    """Create (and fill) the name index in ``conn``'s transaction when it is missing; True when it did."""
    if conn.dialect.name == "postgresql":
        return _install_pg(conn)
    if conn.dialect.name != "sqlite" or "object_names" in inspect(conn).get_table_names():
        return False
    try:
        with conn.begin_nested():  # an SQLite built without FTS5's trigram tokenizer: go without the index
            for statement in _SQLITE:
                conn.execute(text(statement))
    except DBAPIError:
        return False
    return True


def _trgm_schema(conn: Connection) -> str | None:
    return conn.execute(text("SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace "
                             "WHERE e.extname = 'pg_trgm'")).scalar_one_or_none()


def _install_pg(conn: Connection) -> bool:
    exists = conn.execute(text("SELECT 1 FROM pg_indexes WHERE schemaname = current_schema() "
                               "AND indexname = 'ix_objects_name_trgm'")).first()
    if exists is not None:
        return False
    schema = _trgm_schema(conn)
    if schema is None:
        try:  # in ``public``, not in this canvas's schema: dropping one canvas's schema must not drop it for all
            with conn.begin_nested():
                conn.execute(text("CREATE EXTENSION IF NOT EXISTS pg_trgm SCHEMA public"))
        except DBAPIError:
            pass
        schema = _trgm_schema(conn)
        if schema is None:
            return False
    quoted = '"' + schema.replace('"', '""') + '"'
    conn.execute(text(f"CREATE INDEX ix_objects_name_trgm ON objects USING gin (lower(name) {quoted}.gin_trgm_ops)"))
    return True


def has_name_index(session: Session) -> bool:
    """SQLite: whether this canvas has ``object_names`` (remembered per connection)."""
    conn = session.connection()
    known = conn.info.get(_INFO_KEY)
    if known is None:
        known = conn.exec_driver_sql("PRAGMA table_info(object_names)").first() is not None  # no scan of the schema
        conn.info[_INFO_KEY] = known
    return bool(known)


_ASCII_LOWER = {c: c + 32 for c in range(ord("A"), ord("Z") + 1)}


def ascii_lower(text_: str) -> str:
    """``text_`` with its ASCII letters lower-cased and nothing else: what SQLite's ``lower()`` and
    ``LIKE`` do, and PostgreSQL's ``lower()`` under the names' ``"C"`` collation."""
    return text_.translate(_ASCII_LOWER)


def fts_phrase(needle: str) -> str | None:
    """The FTS5 phrase of a name filter (its trigrams in a row, ASCII letters lower-cased as
    SQLite's ``lower()`` and ``LIKE`` do), or None when it is too short to have one."""
    if len(needle) < MIN_CHARS:
        return None
    return '"' + ascii_lower(needle).replace('"', '""') + '"'
