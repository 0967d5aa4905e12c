"""Canvas changes across processes and machines on PostgreSQL: ``NOTIFY`` on commit, ``LISTEN`` in a thread.

Every unit of work that writes sends its changes with ``pg_notify`` inside its own transaction, so
PostgreSQL delivers them exactly when (and only if) it commits. Each open canvas runs one
``ChangeListener``: a plain thread with its own connection that ``LISTEN``s on the canvas's channel
(one per schema, so canvases in two schemas of one database stay apart) and republishes every
change another canvas made on the local ``ChangeFeed``, the same feed panes already subscribe to;
its own changes it skips (the canvas published those itself after its commit). A change heard from
another canvas carries ``remote: True`` in its data. The thread blocks
on the connection's socket: nothing polls the database.

**A lost connection.** When the listener's connection drops, it publishes ``canvas.connection.lost``
(with the error in plain words), then reconnects with a growing pause (up to ``MAX_BACKOFF``
seconds) and publishes ``canvas.connection.restored``. Changes made while it was down were not
heard, so ``restored`` carries ``reload: True``: whoever shows canvas state reads it again.

**Payloads.** A notification carries at most 8000 bytes; a change whose JSON is larger travels
without its ``data`` and with ``truncated: True`` (the id and kind are enough to re-read it).
"""

from __future__ import annotations

import hashlib
import json
import threading
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING

from sqlalchemy import text
from sqlalchemy.engine import Engine
from sqlmodel import Session

from services.changes import Change, ChangeFeed

if TYPE_CHECKING:
    import psycopg
    from psycopg.rows import TupleRow

__all__ = ["MAX_PAYLOAD", "MAX_BACKOFF", "channel_name", "send_changes", "ChangeListener"]

MAX_PAYLOAD = 7900
"""The largest notification payload sent in bytes (PostgreSQL's limit is 8000)."""
MAX_BACKOFF = 5.0
"""The longest pause between two reconnection attempts, in seconds."""
_WAKE = 0.5
"""How often the listener thread looks up from the socket to see whether it was asked to stop."""


def channel_name(schema: str) -> str:
    """The ``LISTEN`` channel of the canvas in ``schema``."""
    return "canvas_" + hashlib.sha1(schema.encode()).hexdigest()[:20]


def _payload(origin: str, change: Change) -> str:
    body = {"origin": origin, "kind": change.kind, "id": change.id, "data": change.data}
    encoded = json.dumps(body, default=str)
    if len(encoded.encode()) > MAX_PAYLOAD:
        encoded = json.dumps({"origin": origin, "kind": change.kind, "id": change.id[:2000], "data": {},
                              "truncated": True})
    return encoded


def send_changes(session: Session, channel: str, origin: str, changes: Sequence[Change]) -> None:
    """Queue ``changes`` as notifications, in order and in one round trip; PostgreSQL delivers them
    when the transaction commits."""
    if changes:
        session.execute(text("SELECT pg_notify(:channel, p.payload) FROM unnest(CAST(:payloads AS text[])) "
                             "WITH ORDINALITY AS p(payload, n) ORDER BY p.n"),
                        {"channel": channel, "payloads": [_payload(origin, change) for change in changes]})


class ChangeListener:
    """A thread that turns other canvases' notifications into ``Change``s on ``feed``."""

    def __init__(self, engine: Engine, channel: str, feed: ChangeFeed, *, origin: str | None = None) -> None:
        self.conninfo = engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
        """The libpq URL of the canvas's database (its own connection, outside the pool)."""
        self.channel = channel
        """The channel listened on."""
        self.feed = feed
        """Where other canvases' changes are republished."""
        self.origin = origin or uuid.uuid4().hex
        """This canvas's mark on its own notifications."""
        self.connected = threading.Event()
        """Set while the listener holds a live connection."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"canvas-listen-{channel}", daemon=True)
        self._conn: psycopg.Connection[TupleRow] | None = None

    def start(self, *, wait: float = 10.0) -> None:
        """Start listening; returns once the first ``LISTEN`` is in place (or after ``wait`` seconds)."""
        self._thread.start()
        self.connected.wait(wait)

    def stop(self) -> None:
        """Stop listening and close the connection."""
        self._stop.set()
        self._thread.join(timeout=5)

    def _connect(self) -> psycopg.Connection[TupleRow]:
        import psycopg

        conn = psycopg.connect(self.conninfo, autocommit=True, connect_timeout=5)
        conn.execute(f'LISTEN "{self.channel}"')
        return conn

    def _run(self) -> None:
        backoff = 0.1
        lost = False
        while not self._stop.is_set():
            try:
                self._conn = conn = self._connect()
            except Exception as exc:  # noqa: BLE001 - any failure to connect is retried
                if not lost:
                    lost = True
                    self.feed.publish(Change("canvas", "canvas.connection.lost", "", {"error": _plain(exc)}))
                self._stop.wait(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF)
                continue
            backoff = 0.1
            self.connected.set()
            if lost:
                lost = False
                self.feed.publish(Change("canvas", "canvas.connection.restored", "", {"reload": True}))
            try:
                while not self._stop.is_set():
                    for note in conn.notifies(timeout=_WAKE):
                        self._deliver(note.payload)
            except Exception as exc:  # noqa: BLE001 - a dropped connection, whatever the driver calls it
                self.connected.clear()
                if not self._stop.is_set():
                    lost = True
                    self.feed.publish(Change("canvas", "canvas.connection.lost", "", {"error": _plain(exc)}))
            finally:
                self.connected.clear()
                try:
                    conn.close()
                except Exception:  # noqa: BLE001 - closing a dead connection
                    pass

    def _deliver(self, payload: str) -> None:
        try:
            body = json.loads(payload)
        except ValueError:
            return
        if not isinstance(body, dict) or body.get("origin") == self.origin:
            return
        raw = body.get("data")
        data: dict[str, object] = dict(raw) if isinstance(raw, dict) else {}
        if body.get("truncated"):
            data = {**data, "truncated": True}
        self.feed.publish(Change("canvas", str(body.get("kind", "")), str(body.get("id", "")),
                                 {**data, "remote": True}))


def _plain(exc: BaseException) -> str:
    first = str(exc).strip().splitlines()
    return (first[0] if first else type(exc).__name__)[:300]
