"""The canvas engine: ``make_engine(url)`` and the two kinds of unit of work.

The engine URL is a parameter. For SQLite (the embedded default) every pooled connection gets its
pragmas when it connects (WAL, ``synchronous=NORMAL``, ``foreign_keys=ON``, ``busy_timeout``), the
driver's own deferred ``BEGIN`` is switched off and SQLAlchemy's ``begin`` event emits ours instead:
``BEGIN`` for reads and ``BEGIN IMMEDIATE`` for every unit of work that may write, so a writer
waits for the lock (up to the busy timeout) instead of failing when a deferred read upgrades.
"""

from __future__ import annotations

import sqlite3
import time

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlalchemy.exc import OperationalError
from sqlmodel import Session, SQLModel, create_engine

from .errors import CanvasBusyError

__all__ = ["make_engine", "database_url", "read_session", "write_session", "create_schema", "BUSY_TIMEOUT_MS"]

BUSY_TIMEOUT_MS = 5000
"""How long a writer waits for another writer's lock before giving up with ``CanvasBusyError``."""

_BEGIN_OPTION = "canvas_begin"


def database_url(path_or_url: str | Path) -> str:
    """A SQLAlchemy URL for ``path_or_url``: URLs pass through, a path becomes ``sqlite:///path``."""
    text = str(path_or_url)
    if "://" in text:
        return text
    return f"sqlite:///{Path(text).expanduser().resolve()}"


def _enable_wal(cursor: Any, busy_timeout_ms: int) -> None:
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
    engine = create_engine(url)
    if engine.dialect.name != "sqlite":
        return engine

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # we emit BEGIN ourselves (see module docstring)
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
        if ":memory:" not in url and url.rstrip("/") != "sqlite:":
            _enable_wal(cursor, busy_timeout_ms)
        cursor.execute(f"PRAGMA synchronous={synchronous}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        mode = connection.get_execution_options().get(_BEGIN_OPTION, "")
        connection.exec_driver_sql(f"BEGIN {mode}".strip())

    return engine


def create_schema(engine: Engine) -> None:
    """Create every canvas table and index (and the search index) that does not exist yet."""
    from . import models  # noqa: F401  (registers the tables)
    from .search import install_search

    bind = engine.execution_options(**{_BEGIN_OPTION: "IMMEDIATE"}) if engine.dialect.name == "sqlite" else engine
    with _busy_guard(), bind.begin() as conn:  # one writer creates; a second opener waits, then finds it all
        SQLModel.metadata.create_all(conn, tables=models.TABLES)
        install_search(conn)


@contextmanager
def _busy_guard() -> Iterator[None]:
    try:
        yield
    except OperationalError as exc:
        if "locked" in str(exc) or "busy" in str(exc):
            raise CanvasBusyError(
                "the canvas database is busy: another writer held it past the busy timeout; "
                "nothing was written"
            ) from exc
        raise


@contextmanager
def read_session(engine: Engine) -> Iterator[Session]:
    """A session for one read-only unit of work (plain ``BEGIN``); always rolled back."""
    with _busy_guard(), Session(engine, expire_on_commit=False) as session:
        try:
            yield session
        finally:
            session.rollback()


@contextmanager
def write_session(engine: Engine) -> Iterator[Session]:
    """A session for one unit of work that may write: ``BEGIN IMMEDIATE``, commit or roll back whole."""
    bind = engine.execution_options(**{_BEGIN_OPTION: "IMMEDIATE"}) if engine.dialect.name == "sqlite" else engine
    with _busy_guard(), Session(bind, expire_on_commit=False) as session:
        try:
            yield session
            session.commit()
        except BaseException:
            session.rollback()
            raise
