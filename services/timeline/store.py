"""``TimeStore``: what every pane showed, as of any change, in one SQLite file.

Two tables make the history:

- ``moments``: one row per change the window saw (a run's event, an operator action, a canvas
  write, a decision), numbered in the order they arrived, with the time they arrived and, for a
  run's event, its run and ``seq``. A cursor is a moment's number.
- ``counts``: how many items of each kind there were from each moment the number changed (a pane's
  count as of a moment is one row, not a walk of the items).
- ``rows``: the read models the panes draw, one row per version of one item (a run as the runs
  pane lists it, a grant, a canvas object, an edge, an inbox entry, a judgment, the memory counts),
  valid from the moment it was recorded (``since``) until the moment a newer version or its
  removal was (``until``; NULL while it is current). As of moment ``m`` an item is the row with
  ``since <= m < until``: a page of a pane as of ``m`` is one range of an index, whatever the
  history's length.

Values are JSON objects (never pickles: a workspace folder may come from anyone), written by
``record`` in one transaction with the moments they belong to, so a crash leaves the history as it
was before the batch or with the whole batch.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ServiceError

__all__ = ["TimeStore", "Moment", "Version", "HistoryError", "SCHEMA_VERSION"]

SCHEMA_VERSION = 1
"""The layout of the file; a file of another layout is set aside, never read as this one."""
CACHE_KIB = 64 * 1024
"""SQLite's page cache for the history, so the indexes a batch writes into stay in memory."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS moments (
    id INTEGER PRIMARY KEY,
    at REAL NOT NULL,
    source TEXT NOT NULL,
    kind TEXT NOT NULL,
    item TEXT NOT NULL,
    run_id TEXT,
    seq INTEGER
);
CREATE INDEX IF NOT EXISTS ix_moments_at ON moments (at, id);
CREATE INDEX IF NOT EXISTS ix_moments_seq ON moments (run_id, id) WHERE seq IS NOT NULL;
CREATE TABLE IF NOT EXISTS rows (
    id INTEGER PRIMARY KEY,
    kind TEXT NOT NULL,
    key TEXT NOT NULL,
    sort TEXT NOT NULL,
    a TEXT,
    b TEXT,
    since INTEGER NOT NULL,
    until INTEGER,
    value TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS ix_rows_key ON rows (kind, key, since);
CREATE INDEX IF NOT EXISTS ix_rows_sort ON rows (kind, sort, key);
CREATE INDEX IF NOT EXISTS ix_rows_a ON rows (kind, a, sort, key) WHERE a IS NOT NULL;
CREATE INDEX IF NOT EXISTS ix_rows_b ON rows (kind, b) WHERE b IS NOT NULL;
CREATE TABLE IF NOT EXISTS counts (kind TEXT NOT NULL, moment INTEGER NOT NULL, n INTEGER NOT NULL,
                                   PRIMARY KEY (kind, moment));
"""


class HistoryError(ServiceError):
    """The history file cannot be read or written (its own words, and the file it concerns)."""


@dataclass(frozen=True, slots=True)
class Moment:
    """One change as the history numbers it."""

    id: int
    at: float
    """When the window saw it (seconds since the epoch)."""
    source: str
    kind: str
    item: str
    run_id: str | None = None
    seq: int | None = None


@dataclass(frozen=True, slots=True)
class Version:
    """One item's read model as a batch left it: ``value`` None when the item is gone."""

    kind: str
    key: str
    value: dict[str, Any] | None
    sort: str = ""
    """The pane's order (a page reads rows in it)."""
    a: str | None = None
    """A column the item is found by (an edge's source, an inbox entry's owner)."""
    b: str | None = None
    """A second one (an edge's target)."""


_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
"""A version's value as the history keeps it (made once: a baseline encodes every run and object)."""


def _dumps(value: dict[str, Any]) -> str:
    return _ENCODER.encode(value)


def _loads(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except (TypeError, ValueError) as exc:
        raise HistoryError(f"a history row is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise HistoryError("a history row is not a JSON object")
    return value


class TimeStore:
    """The history file: moments and versions, written in batches, read as of a moment."""

    def __init__(self, path: Path | str) -> None:
        self.path = str(path)
        """The file (``:memory:`` for a history that ends with the window)."""
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL" if self.path != ":memory:" else "PRAGMA journal_mode=MEMORY")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
            self._db.executescript(_SCHEMA)
            found = self._db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
            if found is None:
                self._db.execute("INSERT INTO meta (key, value) VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
            elif found[0] != str(SCHEMA_VERSION):
                raise HistoryError(f"{self.path}: history of layout {found[0]!r}, this workbench reads {SCHEMA_VERSION}")
        except sqlite3.DatabaseError as exc:
            raise HistoryError(f"{self.path}: {exc}") from exc

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # -- writing -------------------------------------------------------------------------------

    def record(self, moments: Sequence[tuple[float, str, str, str, str | None, int | None]],
               versions: Iterable[Version]) -> int:
        """Add ``moments`` (at, source, kind, item, run id, seq) and the versions the batch left, as of
        its last moment, in one transaction; answer that moment's number (the last one when the batch
        brought none). A version equal to the item's current one writes nothing."""
        with self._lock:
            db = self._db
            try:
                db.execute("BEGIN IMMEDIATE")
                if moments:
                    db.executemany("INSERT INTO moments (at, source, kind, item, run_id, seq) VALUES (?, ?, ?, ?, ?, ?)",
                                   moments)
                moment = self._last()
                latest: dict[tuple[str, str], Version] = {}
                for v in versions:  # a key twice in one batch: the newer one is what the moment shows
                    latest.pop((v.kind, v.key), None)
                    latest[(v.kind, v.key)] = v
                current = self._current(list(latest))
                delta: dict[str, int] = {}
                closed: list[tuple[int, int]] = []
                added: list[tuple[str, str, str, str | None, str | None, int, str]] = []
                for (kind, key), v in latest.items():
                    text = None if v.value is None else _dumps(v.value)
                    open_row = current.get((kind, key))
                    if open_row is not None and open_row[1] == text:
                        continue
                    if open_row is None and text is None:
                        continue
                    if open_row is not None:
                        closed.append((moment, open_row[0]))
                    if text is not None:
                        added.append((kind, key, v.sort, v.a, v.b, moment, text))
                    if (open_row is None) != (text is None):  # an item came or went
                        delta[kind] = delta.get(kind, 0) + (1 if open_row is None else -1)
                db.executemany("UPDATE rows SET until = ? WHERE id = ?", closed)
                db.executemany("INSERT INTO rows (kind, key, sort, a, b, since, until, value) "
                               "VALUES (?, ?, ?, ?, ?, ?, NULL, ?)", added)
                for kind, change in delta.items():
                    if change:
                        db.execute("INSERT INTO counts (kind, moment, n) VALUES (?, ?, ?) "
                                   "ON CONFLICT (kind, moment) DO UPDATE SET n = n + ?",
                                   (kind, moment, self._count_now(kind) + change, change))
                db.execute("COMMIT")
                return moment
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise

    # -- reading -------------------------------------------------------------------------------

    def _current(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], tuple[int, str]]:
        """The current rows (id, value) of ``keys`` (kind, key) that have one, read a chunk at a time."""
        found: dict[tuple[str, str], tuple[int, str]] = {}
        by_kind: dict[str, list[str]] = {}
        for kind, key in keys:
            by_kind.setdefault(kind, []).append(key)
        for kind, names in by_kind.items():
            for i in range(0, len(names), 500):
                chunk = names[i:i + 500]
                found.update(((kind, key), (rid, value)) for key, rid, value in self._db.execute(
                    f"SELECT key, id, value FROM rows WHERE kind = ? AND until IS NULL AND key IN "
                    f"({', '.join('?' * len(chunk))})", (kind, *chunk)))
        return found

    def _count_now(self, kind: str) -> int:
        row = self._db.execute("SELECT n FROM counts WHERE kind = ? ORDER BY moment DESC LIMIT 1", (kind,)).fetchone()
        return int(row[0]) if row else 0

    def meta(self, key: str) -> str | None:
        """A value the history keeps about itself (``None``: none)."""
        row = self._all("SELECT value FROM meta WHERE key = ?", (key,))
        return str(row[0][0]) if row else None

    def set_meta(self, key: str, value: str | None) -> None:
        """Keep (``None``: forget) a value about the history."""
        with self._lock:
            if value is None:
                self._db.execute("DELETE FROM meta WHERE key = ?", (key,))
            else:
                self._db.execute("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = ?",
                                 (key, value, value))

    def _last(self) -> int:
        row = self._db.execute("SELECT max(id) FROM moments").fetchone()
        return int(row[0] or 0)

    def _all(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        with self._lock:
            try:
                return self._db.execute(sql, params).fetchall()
            except sqlite3.DatabaseError as exc:  # a damaged file, read: said in words, never a crash
                raise HistoryError(f"{self.path}: {exc}") from exc

    def last(self) -> int:
        """The newest moment's number (0: none yet)."""
        with self._lock:
            return self._last()

    def first(self) -> int:
        """The oldest moment's number (0: none yet)."""
        return int(self._all("SELECT min(id) FROM moments")[0][0] or 0)

    def moment(self, number: int) -> Moment | None:
        """Moment ``number``, or None."""
        rows = self._all("SELECT id, at, source, kind, item, run_id, seq FROM moments WHERE id = ?", (number,))
        return Moment(*rows[0]) if rows else None

    def moments(self, after: int, limit: int) -> list[Moment]:
        """Up to ``limit`` moments after ``after``, oldest first."""
        rows = self._all("SELECT id, at, source, kind, item, run_id, seq FROM moments WHERE id > ? ORDER BY id LIMIT ?",
                         (after, limit))
        return [Moment(*r) for r in rows]

    def at_or_before(self, when: float) -> int:
        """The last moment at or before the time ``when`` (0 when there is none)."""
        row = self._all("SELECT id FROM moments WHERE at <= ? ORDER BY at DESC, id DESC LIMIT 1", (when,))
        return int(row[0][0]) if row else 0

    def between(self, after: int, upto: int) -> int:
        """How many moments there are with ``after < id <= upto``."""
        return int(self._all("SELECT count(*) FROM moments WHERE id > ? AND id <= ?", (after, upto))[0][0])

    def page(self, kind: str, moment: int, *, offset: int = 0, limit: int = 50,
             a: str | None = None) -> list[tuple[str, dict[str, Any]]]:
        """Items of ``kind`` as of ``moment`` in the pane's order (``a``: only those found by it)."""
        where, params = "kind = ? AND since <= ? AND (until IS NULL OR until > ?)", [kind, moment, moment]
        if a is not None:
            where += " AND a = ?"
            params.append(a)
        rows = self._all(f"SELECT key, value FROM rows WHERE {where} ORDER BY sort, key LIMIT ? OFFSET ?",
                         (*params, limit, offset))
        return [(k, _loads(v)) for k, v in rows]

    def count(self, kind: str, moment: int, *, a: str | None = None) -> int:
        """How many items of ``kind`` there were as of ``moment`` (``a``: of those found by it, counted)."""
        if a is None:
            row = self._all("SELECT n FROM counts WHERE kind = ? AND moment <= ? ORDER BY moment DESC LIMIT 1",
                            (kind, moment))
            return int(row[0][0]) if row else 0
        return int(self._all("SELECT count(*) FROM rows WHERE kind = ? AND a = ? AND since <= ? "
                             "AND (until IS NULL OR until > ?)", (kind, a, moment, moment))[0][0])

    def get(self, kind: str, key: str, moment: int) -> dict[str, Any] | None:
        """One item as of ``moment`` (None: it did not exist then)."""
        rows = self._all("SELECT value FROM rows WHERE kind = ? AND key = ? AND since <= ? AND (until IS NULL OR until > ?)",
                         (kind, key, moment, moment))
        return _loads(rows[0][0]) if rows else None

    def get_many(self, kind: str, keys: Sequence[str], moment: int) -> dict[str, dict[str, Any]]:
        """The items of ``kind`` that ``keys`` name as of ``moment`` (those that existed then), by key."""
        found: dict[str, dict[str, Any]] = {}
        wanted = list(dict.fromkeys(keys))
        for i in range(0, len(wanted), 500):
            chunk = wanted[i:i + 500]
            found.update((k, _loads(v)) for k, v in self._all(
                f"SELECT key, value FROM rows WHERE kind = ? AND key IN ({', '.join('?' * len(chunk))}) "
                "AND since <= ? AND (until IS NULL OR until > ?)", (kind, *chunk, moment, moment)))
        return found

    def every(self, kind: str, moment: int | None = None) -> dict[str, dict[str, Any]]:
        """Every item of ``kind`` as of ``moment`` (None: now), by key."""
        if moment is None:
            rows = self._all("SELECT key, value FROM rows WHERE kind = ? AND until IS NULL", (kind,))
        else:
            rows = self._all("SELECT key, value FROM rows WHERE kind = ? AND since <= ? AND (until IS NULL OR until > ?)",
                             (kind, moment, moment))
        return {k: _loads(v) for k, v in rows}

    def keys(self, kind: str) -> list[str]:
        """The keys of the current items of ``kind``."""
        return [r[0] for r in self._all("SELECT key FROM rows WHERE kind = ? AND until IS NULL", (kind,))]

    def keys_by(self, kind: str, column: str, value: str) -> list[str]:
        """The current items of ``kind`` whose ``column`` (``a`` or ``b``) is ``value``."""
        if column not in ("a", "b"):
            raise ValueError(f"no column {column!r}")
        return [r[0] for r in self._all(f"SELECT key FROM rows WHERE kind = ? AND {column} = ? AND until IS NULL",
                                        (kind, value))]

    def seq_at(self, run_id: str, moment: int) -> int:
        """The last ``seq`` of run ``run_id``'s events seen at or before ``moment`` (0: none): the newest
        such moment's, one step of an index, as a run's events are recorded only as its seq grows."""
        row = self._all("SELECT seq FROM moments WHERE run_id = ? AND seq IS NOT NULL AND id <= ? ORDER BY id DESC "
                        "LIMIT 1", (run_id, moment))
        return int(row[0][0] or 0) if row else 0
