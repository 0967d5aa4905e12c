"""The tables a served cloud's state is kept in (``cloud.db``), and the engine over them.

SQLModel table models, one per kind of record (``state``'s records as JSON in ``data``), and
``make_engine(path)``: WAL, ``synchronous=NORMAL`` and a busy timeout on every connection, the file
created owner-only first (it holds the signing key and refresh tokens).
"""

from __future__ import annotations

import os
from pathlib import Path

from sqlalchemy import Engine, Table, create_engine, event
from sqlmodel import Field, SQLModel

__all__ = [
    "CloudMetaRow", "CloudUserRow", "CloudRunRow", "CloudEventRow", "CloudKeyRow", "CloudRefreshRow",
    "CloudQuestionRow", "META", "USERS", "RUNS", "EVENTS", "KEYS", "REFRESH", "QUESTIONS", "EXPORTED_META", "make_engine", "private_file",
]


class CloudMetaRow(SQLModel, table=True):
    """One setting of the stored cloud (signing key, token serial, client key, served URL)."""

    __tablename__ = "cloud_meta"
    key: str = Field(primary_key=True)
    value: str


class CloudUserRow(SQLModel, table=True):
    """One person (``state.user_record`` as JSON)."""

    __tablename__ = "cloud_user"
    id: str = Field(primary_key=True)
    data: str


class CloudRunRow(SQLModel, table=True):
    """One run without its events; ``gen`` tells apart runs started again under a deleted id."""

    __tablename__ = "cloud_run"
    run_id: str = Field(primary_key=True)
    gen: int = Field(primary_key=True)
    ordinal: int
    data: str
    user_id: str | None = None
    """What a load reads without ``data`` (None in a row written before these columns: read from
    ``data`` once, then written): the run's person, status, whether it is deleted, the highest id
    serial it made and its highest turn entry number."""
    status: str | None = None
    deleted: bool | None = None
    serial: int | None = None
    top_entry: int | None = None
    dto: str | None = None
    """The run's ``GET /runs`` entry as JSON (``dtos.run_dto`` without events, no stream open), so a
    list sends a run not held as it is, without reading it back."""


class CloudEventRow(SQLModel, table=True):
    """One run event, as the stream sends it."""

    __tablename__ = "cloud_event"
    run_id: str = Field(primary_key=True)
    gen: int = Field(primary_key=True)
    seq: int = Field(primary_key=True)
    data: str


class CloudKeyRow(SQLModel, table=True):
    """One idempotency key and the answer it replays."""

    __tablename__ = "cloud_idempotency"
    user_id: str = Field(primary_key=True)
    key: str = Field(primary_key=True)
    data: str


class CloudQuestionRow(SQLModel, table=True):
    """The run (one generation of its id) that opened a question: found without reading the run."""

    __tablename__ = "cloud_question"
    question_id: str = Field(primary_key=True)
    run_id: str
    gen: int


class CloudRefreshRow(SQLModel, table=True):
    """One refresh token the directory issued, and its person."""

    __tablename__ = "cloud_refresh_token"
    token: str = Field(primary_key=True)
    user_id: str


_TABLES = [CloudMetaRow, CloudUserRow, CloudRunRow, CloudEventRow, CloudKeyRow, CloudRefreshRow, CloudQuestionRow]
META: Table = CloudMetaRow.__table__  # type: ignore[attr-defined]
USERS: Table = CloudUserRow.__table__  # type: ignore[attr-defined]
RUNS: Table = CloudRunRow.__table__  # type: ignore[attr-defined]
EVENTS: Table = CloudEventRow.__table__  # type: ignore[attr-defined]
KEYS: Table = CloudKeyRow.__table__  # type: ignore[attr-defined]
REFRESH: Table = CloudRefreshRow.__table__  # type: ignore[attr-defined]
QUESTIONS: Table = CloudQuestionRow.__table__  # type: ignore[attr-defined]
_RUN_COLUMNS = ("user_id TEXT", "status TEXT", "deleted BOOLEAN", "serial INTEGER", "top_entry INTEGER", "dto TEXT")
"""The columns ``cloud_run`` gained after its first version (``make_engine`` adds them to an older file)."""
EXPORTED_META = ("client_id", "signing_key", "token_serial", "client_jwk")


def private_file(path: Path) -> Path:
    """Create ``path`` owner-only (0600) when it does not exist yet, for a database holding secrets
    (SQLite gives its -wal and -shm files the same mode); returns it."""
    if not path.exists():
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
    return path


def make_engine(path: Path) -> Engine:
    """An engine on ``path`` with WAL, ``synchronous=NORMAL`` and a busy timeout, per connection."""
    private_file(path)  # it holds the signing key
    engine = create_engine(f"sqlite:///{path}", connect_args={"check_same_thread": False, "timeout": 30})

    @event.listens_for(engine, "connect")
    def _pragmas(dbapi_conn, _record) -> None:  # type: ignore[no-untyped-def]
        cursor = dbapi_conn.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    SQLModel.metadata.create_all(engine, tables=[META, USERS, RUNS, EVENTS, KEYS, REFRESH, QUESTIONS])
    with engine.begin() as conn:
        have = {row[1] for row in conn.exec_driver_sql(f"PRAGMA table_info({RUNS.name})")}
        for column in _RUN_COLUMNS:
            if column.split()[0] not in have:  # a file from before: its rows fill them at the next load
                conn.exec_driver_sql(f"ALTER TABLE {RUNS.name} ADD COLUMN {column}")
        # what a load reads of every run, in start order, read from this index alone
        conn.exec_driver_sql(f"CREATE INDEX IF NOT EXISTS {RUNS.name}_heads ON {RUNS.name} "
                             "(ordinal, run_id, gen, user_id, status, deleted, serial, top_entry)")
    return engine
