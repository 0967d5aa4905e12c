"""Where connections live: the ``ConnectionStore`` protocol and two stores.

A store saves one ``Connection`` per person. ``OAuth2Client`` saves a rotated refresh token to the
store before it uses the new access token, and deletes a connection the directory refused. A store
may offer ``lock(user_id)`` (an async context manager): the client then refreshes inside it and
re-reads the connection first, so two app processes sharing the store never present a superseded
refresh token.

- ``MemoryConnectionStore``: a dict, for tests and single-process apps (``lock`` is an asyncio lock).
- ``SQLModelConnectionStore(url)``: a ``sdk_connection`` table through SQLModel. For a SQLite file
  its ``lock`` also holds an exclusive file lock (``<database>.lock``) so it holds across processes.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Protocol, runtime_checkable

from sqlalchemy import event
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.pool import StaticPool
from sqlmodel import Field, Session, SQLModel, create_engine

from services.files import FileLock

from .models import Connection

__all__ = ["ConnectionStore", "MemoryConnectionStore", "SQLModelConnectionStore", "ConnectionRecord"]

LOCK_POLL_S = 0.01
"""How often a waiting ``lock`` retries the file lock (it never blocks the event loop)."""


@runtime_checkable
class ConnectionStore(Protocol):
    """Saves each person's ``Connection``; ``lock(user_id)`` is optional."""

    async def get(self, user_id: str) -> Connection | None:
        """The saved connection, or None."""
        ...

    async def save(self, conn: Connection) -> None:
        """Save (insert or replace) ``conn``."""
        ...

    async def delete(self, user_id: str) -> None:
        """Remove the person's connection (no error when there is none)."""
        ...


class MemoryConnectionStore:
    """Connections in a dict (copies in, copies out)."""

    def __init__(self) -> None:
        self._items: dict[str, Connection] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def get(self, user_id: str) -> Connection | None:
        found = self._items.get(user_id)
        return None if found is None else Connection.from_dict(found.to_dict())

    async def save(self, conn: Connection) -> None:
        self._items[conn.user_id] = Connection.from_dict(conn.to_dict())

    async def delete(self, user_id: str) -> None:
        self._items.pop(user_id, None)

    def lock(self, user_id: str) -> AbstractAsyncContextManager[None]:
        """Exclusive access to the person's connection within this process."""
        return self._locks.setdefault(user_id, asyncio.Lock())

    def __len__(self) -> int:
        return len(self._items)


class ConnectionRecord(SQLModel, table=True):
    """One stored connection (``scope`` as a JSON list)."""

    __tablename__ = "sdk_connection"

    user_id: str = Field(primary_key=True)
    access_token: str
    refresh_token: str
    expires_at: float
    scope: str = "[]"
    runtime_url: str = ""
    runtime_id: str = ""

    def to_connection(self) -> Connection:
        """The value this row stores."""
        return Connection(
            user_id=self.user_id,
            access_token=self.access_token,
            refresh_token=self.refresh_token,
            expires_at=self.expires_at,
            scope=list(json.loads(self.scope or "[]")),
            runtime_url=self.runtime_url,
            runtime_id=self.runtime_id,
        )


def _make_engine(url: str) -> Engine:
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return create_engine(url)
    memory = parsed.database in (None, "", ":memory:")
    engine = create_engine(
        url,
        connect_args={"check_same_thread": False, "timeout": 30},
        poolclass=StaticPool if memory else None,
    )

    @event.listens_for(engine, "connect")
    def _pragmas(dbapi_conn, _record) -> None:  # type: ignore[no-untyped-def]
        cursor = dbapi_conn.cursor()
        if not memory:
            cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=FULL")
        cursor.close()

    return engine


class SQLModelConnectionStore:
    """Connections in a SQL table; ``lock`` spans processes for a SQLite file."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.engine = _make_engine(url)
        SQLModel.metadata.create_all(self.engine, tables=[ConnectionRecord.__table__])  # type: ignore[list-item]
        parsed = make_url(url)
        database = parsed.database
        self.lock_path: Path | None = None
        if parsed.get_backend_name() == "sqlite" and database not in (None, "", ":memory:"):
            self.lock_path = Path(str(database)).with_name(Path(str(database)).name + ".lock")
        self._locks: dict[str, asyncio.Lock] = {}

    def _get(self, user_id: str) -> Connection | None:
        with Session(self.engine) as session:
            row = session.get(ConnectionRecord, user_id)
            return None if row is None else row.to_connection()

    def _save(self, conn: Connection) -> None:
        with Session(self.engine) as session:
            row = session.get(ConnectionRecord, conn.user_id)
            if row is None:
                row = ConnectionRecord(user_id=conn.user_id, access_token="", refresh_token="", expires_at=0.0)
            row.access_token = conn.access_token
            row.refresh_token = conn.refresh_token
            row.expires_at = float(conn.expires_at)
            row.scope = json.dumps(list(conn.scope))
            row.runtime_url = conn.runtime_url
            row.runtime_id = conn.runtime_id
            session.add(row)
            session.commit()

    def _delete(self, user_id: str) -> None:
        with Session(self.engine) as session:
            row = session.get(ConnectionRecord, user_id)
            if row is not None:
                session.delete(row)
                session.commit()

    async def get(self, user_id: str) -> Connection | None:
        return await asyncio.to_thread(self._get, user_id)

    async def save(self, conn: Connection) -> None:
        await asyncio.to_thread(self._save, conn)

    async def delete(self, user_id: str) -> None:
        await asyncio.to_thread(self._delete, user_id)

    @asynccontextmanager
    async def lock(self, user_id: str) -> AsyncIterator[None]:
        """Exclusive access to connections: this process's tasks, then other processes (file lock)."""
        async with self._locks.setdefault(user_id, asyncio.Lock()):
            if self.lock_path is None:
                yield
                return
            file_lock = FileLock(self.lock_path)
            while not file_lock.try_acquire():
                await asyncio.sleep(LOCK_POLL_S)
            try:
                yield
            finally:
                file_lock.release()

    def close(self) -> None:
        """Release the engine's connections."""
        self.engine.dispose()
