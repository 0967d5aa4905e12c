"""The Honcho fake's SQLite store: schema, opening, and the one-time import of the old JSON state.

One connection per service, in WAL mode with ``synchronous=FULL``; every request runs in one
transaction (``BEGIN IMMEDIATE`` ... ``COMMIT``), so a batch is stored whole or not at all, also
when the process is killed mid-batch. Message text is indexed with FTS5 for search, in the same
transaction as the rows: whoever inserts messages calls ``index_messages`` once for all of them
(one ``INSERT ... SELECT``; a per-row trigger made every message several times dearer). A
database from before drops its insert trigger when opened (its rows are already indexed).

A state path ending in ``.json`` (the old one-file state, ``memory/served-honcho.json``) means
the database beside it (``served-honcho.db``); when that database does not exist yet and the JSON
file does, its workspaces, peers, sessions, members, messages and conclusions are imported once
and the JSON file is renamed ``*.json.imported``.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from ..errors import ServiceError
from ..files import CorruptFileError, read_json
from .filters import parse_time, sortable_time

__all__ = ["FakeHonchoStateError", "database_path", "index_messages", "last_message_seq", "open_store"]

LEGACY_STATE_BYTES = 512 * 1024 * 1024
"""The largest JSON state file of an older fake imported (read whole into memory)."""

SCHEMA = """
CREATE TABLE IF NOT EXISTS counter (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS workspaces (
    id TEXT PRIMARY KEY, metadata TEXT NOT NULL DEFAULT '{}', configuration TEXT NOT NULL DEFAULT '{}',
    created_at TEXT NOT NULL, ts TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS peers (
    workspace_id TEXT NOT NULL, id TEXT NOT NULL, metadata TEXT NOT NULL DEFAULT '{}',
    configuration TEXT NOT NULL DEFAULT '{}', created_at TEXT NOT NULL, ts TEXT NOT NULL,
    PRIMARY KEY (workspace_id, id));
CREATE TABLE IF NOT EXISTS sessions (
    workspace_id TEXT NOT NULL, id TEXT NOT NULL, metadata TEXT NOT NULL DEFAULT '{}',
    configuration TEXT NOT NULL DEFAULT '{}', is_active INTEGER NOT NULL DEFAULT 1,
    created_at TEXT NOT NULL, ts TEXT NOT NULL, PRIMARY KEY (workspace_id, id));
CREATE TABLE IF NOT EXISTS session_peers (
    workspace_id TEXT NOT NULL, session_id TEXT NOT NULL, peer_id TEXT NOT NULL,
    configuration TEXT NOT NULL DEFAULT '{}', PRIMARY KEY (workspace_id, session_id, peer_id));
CREATE TABLE IF NOT EXISTS messages (
    seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, workspace_id TEXT NOT NULL, session_id TEXT NOT NULL,
    peer_id TEXT NOT NULL, content TEXT NOT NULL, metadata TEXT NOT NULL DEFAULT '{}',
    created_at TEXT NOT NULL, ts TEXT NOT NULL, token_count INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS messages_session ON messages (workspace_id, session_id, seq);
CREATE INDEX IF NOT EXISTS messages_peer ON messages (workspace_id, peer_id, seq);
CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts USING fts5(content, content='messages', content_rowid='seq');
CREATE TRIGGER IF NOT EXISTS messages_ad AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content) VALUES ('delete', old.seq, old.content); END;
CREATE TABLE IF NOT EXISTS conclusions (
    seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, workspace_id TEXT NOT NULL, observer_id TEXT NOT NULL,
    observed_id TEXT NOT NULL, session_id TEXT, content TEXT NOT NULL, level TEXT NOT NULL DEFAULT 'explicit',
    metadata TEXT NOT NULL DEFAULT '{}', created_at TEXT NOT NULL, ts TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS peer_cards (
    workspace_id TEXT NOT NULL, observer_id TEXT NOT NULL, observed_id TEXT NOT NULL, card TEXT NOT NULL,
    PRIMARY KEY (workspace_id, observer_id, observed_id));
"""


class FakeHonchoStateError(ServiceError):
    """The fake's state file cannot be read (it is left as it is)."""


def database_path(state_path: Path) -> Path:
    """The SQLite file for ``state_path`` (a ``.json`` path means the ``.db`` beside it)."""
    return state_path.with_suffix(".db") if state_path.suffix == ".json" else state_path


def open_store(state_path: Path | None) -> sqlite3.Connection:
    """Open (creating when absent) the store; ``None`` keeps it in memory."""
    target = ":memory:" if state_path is None else str(database_path(state_path))
    legacy = None
    if state_path is not None:
        candidate = state_path if state_path.suffix == ".json" else state_path.with_suffix(".json")
        if candidate.exists() and not database_path(state_path).exists():
            legacy = candidate
        database_path(state_path).parent.mkdir(parents=True, exist_ok=True)
    try:
        conn = sqlite3.connect(target, check_same_thread=False, isolation_level=None)
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("PRAGMA busy_timeout=5000")
        conn.executescript(SCHEMA)
        conn.execute("DROP TRIGGER IF EXISTS messages_ai")  # the per-row index trigger of older stores
    except sqlite3.DatabaseError as exc:
        raise FakeHonchoStateError(
            f"the memory fake's state file {target} cannot be read ({exc}); move it aside to start empty"
        ) from None
    if legacy is not None:
        _import_json(conn, legacy)
    return conn


def last_message_seq(conn: sqlite3.Connection) -> int:
    """The newest message's ``seq`` (0 when there is none): rows inserted after it get higher ones."""
    return int(conn.execute("SELECT COALESCE(MAX(seq), 0) FROM messages").fetchone()[0])


def index_messages(conn: sqlite3.Connection, after_seq: int) -> None:
    """Add the text of every message with ``seq > after_seq`` to the search index (inside the
    transaction that inserted them)."""
    conn.execute("INSERT INTO messages_fts(rowid, content) SELECT seq, content FROM messages WHERE seq > ?",
                 (after_seq,))


def _import_json(conn: sqlite3.Connection, path: Path) -> None:
    try:
        data = read_json(path, max_bytes=LEGACY_STATE_BYTES)  # a regular file, size and depth bounded
        workspaces = data.get("workspaces") or {}
        if not isinstance(workspaces, dict):
            raise ValueError("workspaces is not an object")
    except (OSError, ValueError, AttributeError, CorruptFileError) as exc:
        conn.close()
        raise FakeHonchoStateError(
            f"the memory fake's state file {path} cannot be read ({exc}); move it aside to start empty"
        ) from None
    conn.execute("BEGIN IMMEDIATE")
    first = last_message_seq(conn)
    for wid, ws in workspaces.items():
        conn.execute("INSERT OR IGNORE INTO workspaces (id, created_at, ts) VALUES (?, ?, ?)", (wid, *_times(None)))
        for peer in (ws.get("peers") or {}).values():
            conn.execute("INSERT OR IGNORE INTO peers VALUES (?, ?, ?, ?, ?, ?)",
                         (wid, peer["id"], _j(peer.get("metadata")), _j(peer.get("configuration")),
                          *_times(peer.get("created_at"))))
        for session in (ws.get("sessions") or {}).values():
            conn.execute("INSERT OR IGNORE INTO sessions VALUES (?, ?, ?, ?, 1, ?, ?)",
                         (wid, session["id"], _j(session.get("metadata")), _j(session.get("configuration")),
                          *_times(session.get("created_at"))))
        for sid, members in (ws.get("session_peers") or {}).items():
            for pid, config in members.items():
                conn.execute("INSERT OR IGNORE INTO session_peers VALUES (?, ?, ?, ?)", (wid, sid, pid, _j(config)))
        for sid, messages in (ws.get("messages") or {}).items():
            for m in messages:
                conn.execute("INSERT INTO messages (id, workspace_id, session_id, peer_id, content, metadata, "
                             "created_at, ts, token_count) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                             (m["id"], wid, sid, m["peer_id"], m["content"], _j(m.get("metadata")),
                              *_times(m.get("created_at")), int(m.get("token_count") or 0)))
        for c in ws.get("conclusions") or []:
            conn.execute("INSERT INTO conclusions (id, workspace_id, observer_id, observed_id, session_id, content, "
                         "level, created_at, ts) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                         (c["id"], wid, c["observer_id"], c["observed_id"], c.get("session_id"), c["content"],
                          c.get("level") or "explicit", *_times(c.get("created_at"))))
    index_messages(conn, first)
    conn.execute("INSERT OR REPLACE INTO counter VALUES ('next_id', ?)", (int(data.get("next_id", 1)),))
    conn.execute("COMMIT")
    path.rename(path.with_name(path.name + ".imported"))


def _j(value: object) -> str:
    return json.dumps(value or {}, ensure_ascii=False)


def _times(value: object) -> tuple[str, str]:
    moment = parse_time(value) if isinstance(value, str) else None
    if moment is None:
        moment = parse_time("1970-01-01T00:00:00+00:00")
    assert moment is not None
    return moment.isoformat(), sortable_time(moment)
