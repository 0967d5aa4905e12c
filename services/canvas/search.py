"""Full-text search over object names, document previews and bodies: the one SQLite-only part.

``install_search`` creates the FTS5 index, ``index_object``/``unindex_object`` keep it in step
inside the writer's transaction, and ``search_ids`` answers a query. On any other SQL server the
same three functions fall back to a ``LIKE`` scan over ``objects`` and ``documents``, so nothing
else in the canvas depends on FTS5.
"""

from __future__ import annotations

import re

from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine
from sqlmodel import Session

__all__ = ["install_search", "index_object", "unindex_object", "search_ids", "fts_query"]

_TOKEN = re.compile(r"\w+", re.UNICODE)


def _is_sqlite(bind: Engine | Session) -> bool:
    engine = bind.get_bind() if isinstance(bind, Session) else bind
    return engine.dialect.name == "sqlite"


def install_search(conn: Connection) -> None:
    """Create the search index in ``conn``'s transaction if the server supports it (idempotent)."""
    if conn.dialect.name != "sqlite":
        return
    conn.execute(text(
        "CREATE VIRTUAL TABLE IF NOT EXISTS object_fts USING fts5("
        "name, preview, body, tokenize='unicode61 remove_diacritics 2')"
    ))


def index_object(session: Session, pk: int, name: str, preview: str = "", body: str = "") -> None:
    """(Re)index one object under its integer key ``pk``."""
    if not _is_sqlite(session):
        return
    session.execute(text("DELETE FROM object_fts WHERE rowid = :pk"), {"pk": pk})
    session.execute(
        text("INSERT INTO object_fts(rowid, name, preview, body) VALUES (:pk, :name, :preview, :body)"),
        {"pk": pk, "name": name, "preview": preview, "body": body},
    )


def unindex_object(session: Session, pk: int) -> None:
    """Drop one object from the index."""
    if _is_sqlite(session):
        session.execute(text("DELETE FROM object_fts WHERE rowid = :pk"), {"pk": pk})


def fts_query(query: str) -> str:
    """The user's words as a safe FTS5 query: each word quoted, all required, the last a prefix."""
    words = _TOKEN.findall(query)
    if not words:
        return ""
    quoted = ['"' + word.replace('"', '""') + '"' for word in words]
    quoted[-1] += "*"
    return " ".join(quoted)


def search_ids(session: Session, query: str, *, type: str | None = None, limit: int = 20) -> list[tuple[int, str]]:
    """``(pk, snippet)`` of the best matches for ``query``, best first; never raises on odd input."""
    match = fts_query(query)
    if not match:
        return []
    if _is_sqlite(session):
        sql = (
            "SELECT f.rowid, snippet(object_fts, -1, '', '', '…', 12) FROM object_fts f "
            + ("JOIN objects o ON o.pk = f.rowid " if type else "")
            + "WHERE object_fts MATCH :match "
            + ("AND o.type = :type " if type else "")
            + "ORDER BY bm25(object_fts, 10.0, 4.0, 1.0) LIMIT :limit"
        )
        rows = session.execute(text(sql), {"match": match, "type": type, "limit": limit}).all()
        return [(int(pk), str(snip)) for pk, snip in rows]
    like = "%" + " ".join(_TOKEN.findall(query)) + "%"
    sql = (
        "SELECT o.pk, COALESCE(d.preview, o.name) FROM objects o LEFT JOIN documents d ON d.object_id = o.id "
        "WHERE (o.name LIKE :like OR d.preview LIKE :like OR d.body LIKE :like)"
        + (" AND o.type = :type" if type else "") + " ORDER BY o.pk LIMIT :limit"
    )
    return [(int(pk), str(snip)) for pk, snip in session.execute(text(sql), {"like": like, "type": type, "limit": limit}).all()]
