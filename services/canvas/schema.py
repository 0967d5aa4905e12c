"""The canvas schema version: recorded in ``canvas_meta``, checked at open, migrated forward.

``SCHEMA_VERSION`` is the version this code writes. At open, inside the same transaction that
creates a new canvas (``BEGIN IMMEDIATE`` on SQLite, the canvas's advisory lock on PostgreSQL):

- a new database gets every table and index, and the current version;
- a database at an older version runs each step of ``MIGRATIONS`` in order, then records the
  current version; the whole migration commits or none of it does (both engines run DDL in a
  transaction);
- a database at a newer version, or one older than ``OLDEST_MIGRATABLE``, is refused with
  ``CanvasSchemaError`` before anything is written, saying which version it holds and what to do.

A database without ``canvas_meta`` but with ``objects`` is a canvas from before versioning
(version 0); its migration step creates what is missing (tables, indexes, the search index).

No Alembic: the canvas creates its own schema at open (there is no deploy step to run migrations
from), each step is a few statements that must also run on a user's SQLite file, and the check has
to happen inside the opening transaction. A numbered function per step does that in one page.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection
from sqlmodel import SQLModel

from .errors import CanvasSchemaError

__all__ = ["SCHEMA_VERSION", "OLDEST_MIGRATABLE", "MIGRATIONS", "schema_version", "prepare_schema"]

SCHEMA_VERSION = 4
"""The schema version this code creates and expects."""
OLDEST_MIGRATABLE = 0
"""The oldest version ``MIGRATIONS`` can bring forward."""


def _create_missing(conn: Connection) -> None:
    from . import models
    from .search import install_search

    SQLModel.metadata.create_all(conn, tables=models.TABLES)
    install_search(conn)


def _name_search(conn: Connection) -> None:
    from .search import upgrade_search

    upgrade_search(conn)


def _page_index(conn: Connection) -> None:
    from . import models

    for index in models.ObjectRow.__table__.indexes:  # type: ignore[attr-defined]
        if index.name == "ix_objects_type_owner_name_pk":
            index.create(conn, checkfirst=True)
    conn.execute(text("DROP INDEX IF EXISTS ix_objects_type_owner_name"))  # what it replaces


def _profiles_receivers(conn: Connection) -> None:
    from . import models

    tables = [models.ProfileRow.__table__, models.ProfileDefaultRow.__table__,  # type: ignore[attr-defined]
              models.ReceiverAttemptRow.__table__]  # type: ignore[attr-defined]
    SQLModel.metadata.create_all(conn, tables=tables)
    columns = {c["name"] for c in inspect(conn).get_columns("custom_objects")}
    if "config" not in columns:
        conn.execute(text("ALTER TABLE custom_objects ADD COLUMN config TEXT NOT NULL DEFAULT '{}'"))


_READ_INDEXES = frozenset({"ix_objects_owner_type_name_cover"})
"""Indexes added after version 4 that only speed reads (``_ensure_read_indexes``)."""


def _ensure_read_indexes(conn: Connection) -> None:
    """Indexes that only make reads faster, created when missing whatever the version: they change
    no table, so a canvas holding them stays readable and writable by a workbench that predates them
    (both engines keep every index current on each write)."""
    from . import models

    for index in models.ObjectRow.__table__.indexes:  # type: ignore[attr-defined]
        if index.name in _READ_INDEXES:
            index.create(conn, checkfirst=True)


def _ensure_counts_and_names(conn: Connection) -> None:
    """The object counts (``counters``) and the name filter's trigram index (``name_index``), created
    and filled once when a canvas opens without them, whatever its version: both are derived from
    ``objects`` and kept in step by the database itself (triggers, an index), so a canvas holding
    them stays right when a workbench that predates them writes to it."""
    from .counters import install_counters
    from .name_index import install_name_index

    install_counters(conn)
    install_name_index(conn)


def _ensure_rule_index(conn: Connection) -> None:
    """Delivery rules filed by owner and event (``rule_index``), derived from ``documents`` and kept in
    step by triggers: created and filled once when a canvas opens without them, whatever its version
    (a workbench that predates them ignores the table, and its writes keep it current)."""
    from .rule_index import install_rule_index

    install_rule_index(conn)


MIGRATIONS: dict[int, Callable[[Connection], None]] = {
    0: _create_missing,  # 0 -> 1: versioning, every table and index of version 1, the search index
    1: _name_search,  # 1 -> 2: PostgreSQL's index of name words (search's first tier); nothing on SQLite
    2: _page_index,  # 2 -> 3: a page by owner and name takes its keys from one index (..._name_pk replaces ..._name)
    3: _profiles_receivers,  # 3 -> 4: profiles' purview, directory defaults, receiver attempts, receiver settings
}
"""``MIGRATIONS[v]`` brings a version-``v`` canvas to version ``v + 1``."""


def schema_version(conn: Connection) -> int | None:
    """The recorded version; 0 for a canvas from before versioning, ``None`` for an empty database."""
    tables = set(inspect(conn).get_table_names())
    if "canvas_meta" in tables:
        value = conn.execute(text("SELECT value FROM canvas_meta WHERE key = 'schema_version'")).scalar()
        return int(value) if value is not None else 0
    return 0 if "objects" in tables else None


def _record(conn: Connection, version: int) -> None:
    conn.execute(text("CREATE TABLE IF NOT EXISTS canvas_meta (key VARCHAR PRIMARY KEY, value VARCHAR NOT NULL)"))
    conn.execute(text("DELETE FROM canvas_meta WHERE key = 'schema_version'"))
    conn.execute(text("INSERT INTO canvas_meta(key, value) VALUES ('schema_version', :v)"), {"v": str(version)})


def prepare_schema(conn: Connection, where: str) -> int:
    """Create, check or migrate the schema in ``conn``'s transaction; returns the version found."""
    found = schema_version(conn)
    if found is None:
        _create_missing(conn)
        _record(conn, SCHEMA_VERSION)
        _ensure_read_indexes(conn)
        _ensure_counts_and_names(conn)
        _ensure_rule_index(conn)
        return SCHEMA_VERSION
    if found > SCHEMA_VERSION:
        raise CanvasSchemaError(
            f"the canvas at {where} has schema version {found}, newer than this workbench understands "
            f"(version {SCHEMA_VERSION}); upgrade the workbench to open it. Nothing was changed")
    if found < OLDEST_MIGRATABLE:
        raise CanvasSchemaError(
            f"the canvas at {where} has schema version {found}, older than this workbench can migrate "
            f"(from version {OLDEST_MIGRATABLE}); open it with an older workbench first. Nothing was changed")
    for version in range(found, SCHEMA_VERSION):
        MIGRATIONS[version](conn)
    if found != SCHEMA_VERSION:
        _record(conn, SCHEMA_VERSION)
    _ensure_read_indexes(conn)
    _ensure_counts_and_names(conn)
    _ensure_rule_index(conn)
    return found
