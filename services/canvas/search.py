"""Full-text search over object names, document previews and bodies: the one SQLite-only part.

``install_search`` creates the FTS5 index, ``index_object``/``unindex_object`` keep it in step
inside the writer's transaction, and ``search_ids`` answers a query. On any other SQL server the
same three functions fall back to a ``LIKE`` scan over ``objects`` and ``documents``, so nothing
else in the canvas depends on FTS5.

**Bounded cost.** The index finds and ranks the hits (``rowid`` and ``bm25`` only, which stay cheap
on any document); the snippets are built here, not by FTS5's ``snippet()``, whose cost grows with
the square of the matches in one document (a 1 MiB document of one repeated word took minutes).
Each hit's snippet reads at most ``SNIPPET_SCAN`` characters of its body (``substr`` in SQL, so a
large body never reaches Python whole), weighs at most ``MAX_SNIPPET_HITS`` matches, and is cut
to about ``SNIPPET_CHARS`` characters; at most ``MAX_RESULTS`` hits are returned.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import bindparam, text
from sqlalchemy.engine import Connection, Engine
from sqlmodel import Session

__all__ = [
    "SNIPPET_SCAN",
    "MAX_SNIPPET_HITS",
    "SNIPPET_CHARS",
    "MAX_RESULTS",
    "Snippet",
    "install_search",
    "index_object",
    "unindex_object",
    "search_ids",
    "fts_query",
    "query_words",
    "make_snippet",
]

SNIPPET_SCAN = 65_536
"""How many characters of each text (name, preview, body) a snippet is looked for in."""
MAX_SNIPPET_HITS = 32
"""How many matches in one text are weighed when choosing where its snippet sits."""
SNIPPET_CHARS = 120
"""About how long a snippet is (it is cut at word boundaries and marked with ``…``)."""
MAX_RESULTS = 100
"""The most hits one search returns, whatever ``limit`` asks for."""

_TOKEN = re.compile(r"\w+", re.UNICODE)
_SPACE = re.compile(r"\s+")
_LEAD = 40
"""Characters of context kept before the chosen match."""


@dataclass(frozen=True, slots=True)
class Snippet:
    """A hit's snippet and the work it took: matches weighed and characters scanned."""

    text: str
    hits_considered: int
    scanned: int


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


def query_words(query: str) -> list[str]:
    """The words of ``query`` as the index sees them (the last one is matched as a prefix)."""
    return _TOKEN.findall(query or "")


def fts_query(query: str) -> str:
    """The user's words as a safe FTS5 query: each word quoted, all required, the last a prefix."""
    words = query_words(query)
    if not words:
        return ""
    quoted = ['"' + word.replace('"', '""') + '"' for word in words]
    quoted[-1] += "*"
    return " ".join(quoted)


def _word_pattern(words: Sequence[str]) -> re.Pattern[str]:
    parts = []
    for i, word in enumerate(words):
        tail = r"[^\W_]*" if i == len(words) - 1 else r"(?![^\W_])"
        parts.append(rf"(?P<w{i}>(?<![^\W_]){re.escape(word)}{tail})")
    return re.compile("|".join(parts), re.IGNORECASE)


def _fragment(text: str, at: int) -> str:
    start = max(0, at - _LEAD)
    if start:
        space = text.find(" ", start, at)
        start = space + 1 if space != -1 else start
    end = min(len(text), start + SNIPPET_CHARS)
    if end < len(text):
        space = text.rfind(" ", at, end)
        end = space if space > at else end
    piece = _SPACE.sub(" ", text[start:end]).strip()
    return ("…" if start else "") + piece + ("…" if end < len(text) else "")


def make_snippet(texts: Sequence[str], words: Sequence[str], *, scan: int = SNIPPET_SCAN,
                 max_hits: int = MAX_SNIPPET_HITS) -> Snippet:
    """The snippet of the text (of ``texts``, in order of preference) whose matches gather the most
    distinct ``words``; each text is looked at through its first ``scan`` characters and at most
    ``max_hits`` matches in it are weighed. With no match, the start of the first non-empty text."""
    pattern = _word_pattern(words) if words else None
    considered = scanned = 0
    best: tuple[int, str, int] | None = None  # (distinct words near the spot, text, offset)
    for full in texts:
        window = (full or "")[:scan]
        scanned += len(window)
        if pattern is None or not window:
            continue
        hits: list[tuple[int, str]] = []
        for match in pattern.finditer(window):
            hits.append((match.start(), match.lastgroup or ""))
            if len(hits) >= max_hits:
                break
        considered += len(hits)
        for at, _ in hits:
            near = {group for pos, group in hits if at <= pos < at + SNIPPET_CHARS - _LEAD}
            if best is None or len(near) > best[0]:
                best = (len(near), window, at)
    if best is not None:
        return Snippet(_fragment(best[1], best[2]), considered, scanned)
    first = next((t[:scan] for t in texts if t and t.strip()), "")
    return Snippet(_fragment(first, 0) if first else "", considered, scanned)


def _snippets(session: Session, pks: list[int], words: list[str]) -> dict[int, Snippet]:
    """Each hit's snippet from bounded windows of its name, preview and body."""
    if not pks:
        return {}
    stmt = text(
        "SELECT o.pk, o.name, d.preview, substr(d.body, 1, :scan) FROM objects o "
        "LEFT JOIN documents d ON d.object_id = o.id WHERE o.pk IN :pks"
    ).bindparams(bindparam("pks", expanding=True))
    rows = session.execute(stmt, {"scan": SNIPPET_SCAN, "pks": pks}).all()
    return {int(pk): make_snippet([preview or "", body or "", name or ""], words) for pk, name, preview, body in rows}


def search_ids(session: Session, query: str, *, type: str | None = None, limit: int = 20) -> list[tuple[int, str]]:
    """``(pk, snippet)`` of the best matches for ``query``, best first; never raises on odd input."""
    match = fts_query(query)
    if not match:
        return []
    limit = max(1, min(int(limit), MAX_RESULTS))
    words = query_words(query)
    if _is_sqlite(session):
        sql = (
            "SELECT f.rowid FROM object_fts f "
            + ("JOIN objects o ON o.pk = f.rowid " if type else "")
            + "WHERE object_fts MATCH :match "
            + ("AND o.type = :type " if type else "")
            + "ORDER BY bm25(object_fts, 10.0, 4.0, 1.0) LIMIT :limit"
        )
        pks = [int(pk) for pk in session.execute(text(sql), {"match": match, "type": type, "limit": limit}).scalars()]
    else:
        like = "%" + " ".join(words) + "%"
        sql = (
            "SELECT o.pk FROM objects o LEFT JOIN documents d ON d.object_id = o.id "
            "WHERE (o.name LIKE :like OR d.preview LIKE :like OR d.body LIKE :like)"
            + (" AND o.type = :type" if type else "") + " ORDER BY o.pk LIMIT :limit"
        )
        pks = [int(pk) for pk in session.execute(text(sql), {"like": like, "type": type, "limit": limit}).scalars()]
    snippets = _snippets(session, pks, words)
    return [(pk, snippets[pk].text) for pk in pks if pk in snippets]
