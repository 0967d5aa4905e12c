"""The canvas engine: ``make_engine(url)`` and the two kinds of unit of work.

The engine URL is a parameter. For SQLite (the embedded default) every pooled connection gets its
pragmas when it connects (WAL, ``synchronous=NORMAL``, ``foreign_keys=ON``, ``busy_timeout``,
``temp_store=MEMORY``), the
driver's own deferred ``BEGIN`` is switched off and SQLAlchemy's ``begin`` event emits ours instead:
``BEGIN`` for reads and ``BEGIN IMMEDIATE`` for every unit of work that may write, so a writer
waits for the lock (up to the busy timeout) instead of failing when a deferred read upgrades.

On PostgreSQL (``postgresql+psycopg://...``) the same two units of work hold: every unit of work
that may write first takes the canvas's transaction-scoped advisory lock (one per schema, so two
canvases in two schemas of one database never wait on each other), which makes writers take turns
exactly as ``BEGIN IMMEDIATE`` does on SQLite, while readers never wait. ``lock_timeout`` is the busy
timeout, so a writer that waits too long gets the same ``CanvasBusyError``. Underneath, the unique
indexes hold whatever any writer does: a unique violation that reaches the database is the same
``NameTakenError`` on both engines, and the stale-revision check sits in the ``UPDATE``'s ``WHERE``
clause, which PostgreSQL re-evaluates after waiting on a concurrent update's row lock. A dropped
server connection is ``CanvasUnavailableError`` (the change was not confirmed: a connection that
drops while committing leaves its outcome unknown, so the message says to read again); the pool checks each
connection before use (``pool_pre_ping``), so the next unit of work reconnects.
"""

from __future__ import annotations

import re
import sqlite3
import time
import weakref

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import event, text
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.pool import ConnectionPoolEntry
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlmodel import Session, create_engine

from .errors import CanvasBusyError, CanvasUnavailableError, NameTakenError
from .schema import prepare_schema

if TYPE_CHECKING:
    import psycopg
    from psycopg.rows import TupleRow

__all__ = ["make_engine", "database_url", "read_session", "write_session", "create_schema", "BUSY_TIMEOUT_MS",
           "is_postgres", "display_url", "canvas_label"]

BUSY_TIMEOUT_MS = 5000
"""How long a writer waits for another writer's lock before giving up with ``CanvasBusyError``."""

_BEGIN_OPTION = "canvas_begin"
_LOCK_CLASS = 0x63767331
"""The first key of the writers' advisory lock (``cvs1``); the second is the schema's hash."""


def is_postgres(bind: Engine | Connection | Session) -> bool:
    """Whether ``bind`` talks to PostgreSQL."""
    engine = bind.get_bind() if isinstance(bind, Session) else bind
    return engine.dialect.name == "postgresql"


def display_url(url: str) -> str:
    """``url`` with any password hidden, for messages."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - a message must never fail
        return "the canvas database"


def canvas_label(url: str | None) -> str:
    """Where a canvas on a server is, for the header: engine, user, host, database and schema (the
    ``search_path`` the URL's options set, else ``public``), never the password. Empty for a canvas
    in a file (SQLite), the workspace's own."""
    if not url or "://" not in str(url):
        return ""
    try:
        parsed = make_url(str(url))
    except Exception:  # noqa: BLE001 - a header must never fail
        return "canvas → a server (its URL does not parse)"
    if parsed.get_backend_name() != "postgresql":
        return f"canvas → {parsed.get_backend_name()} {parsed.database or ''}".rstrip()
    where = f"{parsed.username}@" if parsed.username else ""
    where += parsed.host or "localhost"
    where += f":{parsed.port}" if parsed.port else ""
    where += f"/{parsed.database}" if parsed.database else ""
    return f"canvas → PostgreSQL {where} (schema {_search_path(parsed.query.get('options'))})"


def _search_path(options: str | tuple[str, ...] | None) -> str:
    """The schema ``-csearch_path=NAME`` (or ``-c search_path=NAME``) in libpq's options, else ``public``."""
    text = " ".join(options) if isinstance(options, tuple) else str(options or "")
    match = re.search(r"search_path\s*=\s*([^\s,]+)", text.replace("%3D", "="))
    return match.group(1).strip("'\"") if match else "public"


def database_url(path_or_url: str | Path) -> str:
    """A SQLAlchemy URL for ``path_or_url``: URLs pass through, a path becomes ``sqlite:///path``."""
    text = str(path_or_url)
    if "://" in text:
        return text
    return f"sqlite:///{Path(text).expanduser().resolve()}"


def _enable_wal(cursor: sqlite3.Cursor, busy_timeout_ms: int) -> None:
    """Switch to WAL, waiting out another opener: SQLite answers a journal-mode change that meets a
    lock with "database is locked" at once, without calling the busy handler."""
    deadline = time.monotonic() + busy_timeout_ms / 1000
    while True:
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(0.01)


def make_engine(url: str, *, busy_timeout_ms: int = BUSY_TIMEOUT_MS, synchronous: str = "NORMAL") -> Engine:
    """An engine for ``url``; for SQLite with per-connection pragmas and explicit ``BEGIN``."""
    if make_url(url).get_backend_name() == "postgresql":
        return _postgres_engine(url, busy_timeout_ms)
    engine = create_engine(url)
    if engine.dialect.name != "sqlite":
        return engine

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: sqlite3.Connection, _record: ConnectionPoolEntry) -> None:
        dbapi_connection.isolation_level = None  # we emit BEGIN ourselves (see module docstring)
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
        if ":memory:" not in url and url.rstrip("/") != "sqlite:":
            _enable_wal(cursor, busy_timeout_ms)
        cursor.execute(f"PRAGMA synchronous={synchronous}")
        cursor.execute("PRAGMA foreign_keys=ON")
        # a statement whose triggers may fail (the counters' upserts, the name index) keeps a statement
        # journal for each row it writes: in memory, not in a temporary file (half a bulk insert's time)
        cursor.execute("PRAGMA temp_store=MEMORY")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Connection) -> None:
        mode = connection.get_execution_options().get(_BEGIN_OPTION, "")
        connection.exec_driver_sql(f"BEGIN {mode}".strip())

    return engine


def _postgres_engine(url: str, busy_timeout_ms: int) -> Engine:
    from .models import postgresql_partial_indexes

    postgresql_partial_indexes()
    # LIFO: the connection used last is used next, so the statements prepared on it are hit again
    engine = create_engine(url, pool_pre_ping=True, pool_use_lifo=True)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: psycopg.Connection[TupleRow], _record: ConnectionPoolEntry) -> None:
        with dbapi_connection.cursor() as cursor:
            cursor.execute(f"SET lock_timeout = {int(busy_timeout_ms)}")
            cursor.execute("SET jit = off")  # short UI queries: compiling them cost more than it saved
        dbapi_connection.commit()

    return engine


def _lock_writers(conn: Connection | Session) -> None:
    """Take the canvas's writer lock for the rest of this transaction (PostgreSQL)."""
    conn.execute(text("SELECT pg_advisory_xact_lock(:cls, hashtext(current_schema()))"), {"cls": _LOCK_CLASS})


def create_schema(engine: Engine) -> int:
    """Create, check or migrate the canvas schema (``services.canvas.schema``); returns the version found."""
    bind = engine.execution_options(**{_BEGIN_OPTION: "IMMEDIATE"}) if engine.dialect.name == "sqlite" else engine
    with _busy_guard(), bind.begin() as conn:  # one writer creates; a second opener waits, then finds it all
        if is_postgres(engine):
            _lock_writers(conn)
        return prepare_schema(conn, display_url(str(engine.url)))


def _is_unique_violation(exc: IntegrityError) -> bool:
    return getattr(exc.orig, "sqlstate", None) == "23505" or "UNIQUE constraint failed" in str(exc.orig)


@contextmanager
def _busy_guard() -> Iterator[None]:
    try:
        yield
    except OperationalError as exc:
        message = str(exc.orig)
        if "locked" in message or "busy" in message or "lock timeout" in message:
            raise CanvasBusyError(
                "the canvas database is busy: another writer held it past the busy timeout; "
                "nothing was written"
            ) from exc
        if type(exc.orig).__module__.startswith("psycopg"):
            raise CanvasUnavailableError(
                "the canvas database server could not be reached or dropped the connection, so the change "
                "was not confirmed (read the object again to see whether it was saved); the next action "
                "reconnects"
            ) from exc
        raise
    except IntegrityError as exc:
        if _is_unique_violation(exc):
            raise NameTakenError(
                "that name or id was taken by another writer at the same moment; nothing was written. "
                "Choose another name, or read the existing object"
            ) from exc
        raise


_READ_ONLY: weakref.WeakKeyDictionary[Engine, Engine] = weakref.WeakKeyDictionary()


def _read_only(engine: Engine) -> Engine:
    """``engine`` with PostgreSQL's ``BEGIN READ ONLY`` for its transactions (made once per engine)."""
    bound = _READ_ONLY.get(engine)
    if bound is None:
        bound = _READ_ONLY[engine] = engine.execution_options(postgresql_readonly=True)
    return bound


@contextmanager
def read_session(engine: Engine) -> Iterator[Session]:
    """A session for one read-only unit of work (plain ``BEGIN``; ``BEGIN READ ONLY`` on PostgreSQL).

    SQLite's read is rolled back. PostgreSQL's is committed when it succeeds: the server refuses any
    write in it, so the commit keeps nothing, while a ``ROLLBACK`` makes psycopg forget the statements
    it prepared on the connection, and the server would plan every query of every read again.
    """
    postgres = is_postgres(engine)
    with _busy_guard(), Session(_read_only(engine) if postgres else engine, expire_on_commit=False) as session:
        finished = False
        try:
            yield session
            finished = True
        finally:
            if finished and postgres:
                session.commit()
            else:
                session.rollback()


@contextmanager
def write_session(engine: Engine) -> Iterator[Session]:
    """A session for one unit of work that may write: ``BEGIN IMMEDIATE``, commit or roll back whole."""
    bind = engine.execution_options(**{_BEGIN_OPTION: "IMMEDIATE"}) if engine.dialect.name == "sqlite" else engine
    with _busy_guard(), Session(bind, expire_on_commit=False) as session:
        try:
            if is_postgres(engine):
                _lock_writers(session)
            yield session
            session.commit()
        except BaseException:
            session.rollback()
            raise
