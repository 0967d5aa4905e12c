"""Full-text search over object names, document previews and bodies, on each engine's own index.

``install_search`` creates the index, ``index_object``/``unindex_object`` keep it in step inside
the writer's transaction, and ``search_ids`` answers a query. The user's query never reaches either
engine's query language: it is cut into words (``query_words``), every word is required and the
last one matches as a prefix, so quotes, ``*``, ``NEAR``, ``-``, ``AND``/``OR`` and parentheses are
plain text on both engines and the same query finds the same objects.

- **SQLite**: an FTS5 table (``unicode61``, diacritics removed), ranked by ``bm25`` with the name
  weighing 10, the preview 4 and the body 1. A one-word query with more than ``RANK_ALL`` hits
  (counting them is cheap; bm25 costs a few microseconds a hit, 0.6 s for a common word at a
  million objects) is ranked in tiers (``fts_tiers``): the hits whose name and preview both hold every
  word, then those whose name does, then those whose preview does, then the rest; each tier is
  ranked by bm25 and cut to the page inside FTS5, and a later tier is read only while the page is
  not full. The hits are the same; a common word costs what its best tier costs.
- **PostgreSQL**: ``object_search`` holds one ``tsvector`` per object (the ``simple`` configuration:
  lower-cased words, no stemming and no stop words, like ``unicode61``) behind a GIN index; the
  name is weight A, the preview B, the body C, and the query is ``to_tsquery`` of the quoted words
  joined by ``&``, the last with ``:*``. A second GIN index covers the name's words alone
  (``ts_filter(doc, '{a}')``), so a page is ranked in two tiers: the objects whose name holds every
  word, then, only if they do not fill it, the others; each tier is ranked by ``ts_rank`` and cut
  to the page inside the database. A common word then costs what its name hits cost, not what
  all its hits cost. Text is cut into words here before it reaches
  ``to_tsvector`` (``_pg_words``), because PostgreSQL's parser would read ``o1/ops/deploys``,
  URLs, e-mail addresses and ``1.5`` as single tokens where FTS5 sees words.

**Where the two differ** (documented, and tested only where they agree):

- Ranking. On SQLite, a one-word query with more than ``RANK_ALL`` hits puts a name hit above every hit
  whose name lacks the words, as PostgreSQL does, and a name-and-preview hit above a name-only
  one; with fewer hits bm25 alone orders them, so a body repeating the words may still outrank a
  name hit there. ``ts_rank`` with weights {C 0.1, B 0.4, A 1.0} follows the same order of fields as
  bm25's 1 : 4 : 10, but it does not weigh a word's rarity across the canvas, nor shorten the
  score of a long body the way bm25 does. On PostgreSQL a name holding every word always ranks
  first (the tiers above; for one whole word ``ts_rank`` already ranks every name hit above every
  other hit); on SQLite bm25 lets a preview or body that repeats the words often enough outrank a
  name hit. Hits of the same strength come back in a stable order (``pk``) on PostgreSQL and in
  FTS5's own order on SQLite. Tests compare sets, and the order only where one field clearly
  wins (a name hit over a body hit).
- Accents. FTS5 drops diacritics (``café`` finds ``cafe``); the ``simple`` configuration keeps
  them (``café`` finds only ``café``) unless the server has ``unaccent``, which we do not require.
- Very long bodies. A ``tsvector`` is limited to 1 MB, so PostgreSQL indexes the first
  ``PG_INDEX_CHARS`` characters of each body (SQLite indexes it whole); a word that occurs only
  beyond that point is found on SQLite and not on PostgreSQL.
- Positions. A ``tsvector`` keeps at most 256 positions per word; it changes the rank of a
  document repeating one word thousands of times, never whether it is found.

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

from sqlalchemy import bindparam, select, text
from sqlalchemy.engine import Connection, Engine
from sqlmodel import Session, col

from .eligibility import Access
from .models import ObjectRow

__all__ = [
    "SNIPPET_SCAN",
    "MAX_SNIPPET_HITS",
    "SNIPPET_CHARS",
    "MAX_RESULTS",
    "PG_INDEX_CHARS",
    "RANK_ALL",
    "fts_tiers",
    "pg_tsquery",
    "Snippet",
    "install_search",
    "index_object",
    "index_many",
    "unindex_object",
    "search_ids",
    "ranked_pks",
    "upgrade_search",
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

WINDOW_FACTOR = 4
"""A reader's search first ranks ``limit * WINDOW_FACTOR`` hits unfiltered, then keeps what it may read."""

RANK_ALL = 4_000
"""SQLite: a one-word query with at most this many hits has every hit ranked by bm25 (a few
milliseconds); one with more is ranked in tiers (``fts_tiers``), so only the hits of the best tiers
are ranked. A query of several words is always ranked whole: its hits are at most its rarest
word's, and a tier's query would read every word's hits three times (name, preview, all)."""

PG_INDEX_CHARS = 200_000
"""How many characters of each body PostgreSQL indexes (a ``tsvector`` is limited to 1 MB)."""

_PG_DOC = ("setweight(to_tsvector('simple', :name), 'A') || setweight(to_tsvector('simple', :preview), 'B') || "
           "setweight(to_tsvector('simple', :body), 'C')")
_PG_WEIGHTS = "'{0.1, 0.1, 0.4, 1.0}'"
_PG_NAME = "ts_filter(f.doc, '{a}')"
"""The name's words: the weight-A part of an object's ``tsvector``."""
_PG_NAME_INDEX = ("CREATE INDEX IF NOT EXISTS ix_object_search_name ON object_search "
                  "USING GIN (ts_filter(doc, '{a}'))")
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


def _is_postgres(bind: Engine | Session) -> bool:
    engine = bind.get_bind() if isinstance(bind, Session) else bind
    return engine.dialect.name == "postgresql"


def _is_sqlite(bind: Engine | Session) -> bool:
    engine = bind.get_bind() if isinstance(bind, Session) else bind
    return engine.dialect.name == "sqlite"


def install_search(conn: Connection) -> None:
    """Create the search index in ``conn``'s transaction (idempotent)."""
    if conn.dialect.name == "postgresql":
        conn.execute(text(
            "CREATE TABLE IF NOT EXISTS object_search ("
            "pk INTEGER PRIMARY KEY REFERENCES objects(pk) ON DELETE CASCADE, doc tsvector NOT NULL)"
        ))
        conn.execute(text("CREATE INDEX IF NOT EXISTS ix_object_search_doc ON object_search USING GIN (doc)"))
        conn.execute(text(_PG_NAME_INDEX))
        return
    if conn.dialect.name != "sqlite":
        return
    conn.execute(text(
        "CREATE VIRTUAL TABLE IF NOT EXISTS object_fts USING fts5("
        "name, preview, body, tokenize='unicode61 remove_diacritics 2')"
    ))


def index_object(session: Session, pk: int, name: str, preview: str = "", body: str = "", *, new: bool = False) -> None:
    """(Re)index one object under its integer key ``pk`` (``new``: created in this unit of work, not indexed yet)."""
    if _is_postgres(session):
        session.execute(text(
            "INSERT INTO object_search(pk, doc) VALUES (:pk, " + _PG_DOC + ") ON CONFLICT (pk) DO UPDATE SET doc = excluded.doc"
        ), {"pk": pk, "name": _pg_words(name), "preview": _pg_words(preview), "body": _pg_words(body[:PG_INDEX_CHARS])})
        return
    if not _is_sqlite(session):
        return
    if not new:
        session.execute(text("DELETE FROM object_fts WHERE rowid = :pk"), {"pk": pk})
    session.execute(
        text("INSERT INTO object_fts(rowid, name, preview, body) VALUES (:pk, :name, :preview, :body)"),
        {"pk": pk, "name": name, "preview": preview, "body": body},
    )


def index_many(session: Session, rows: Sequence[dict[str, object]]) -> None:
    """Index many new objects at once (bulk loads): each row has ``pk``, ``name``, ``preview``, ``body``."""
    if not rows:
        return
    if _is_postgres(session):
        session.execute(text(
            "INSERT INTO object_search(pk, doc) VALUES (:pk, " + _PG_DOC + ")"
        ), [{"pk": r["pk"], "name": _pg_words(str(r["name"])), "preview": _pg_words(str(r["preview"])),
             "body": _pg_words(str(r["body"])[:PG_INDEX_CHARS])} for r in rows])
    elif _is_sqlite(session):
        session.execute(text("INSERT INTO object_fts(rowid, name, preview, body) VALUES (:pk, :name, :preview, :body)"),
                        list(rows))


def upgrade_search(conn: Connection) -> None:
    """Schema step 1 -> 2 (PostgreSQL): the GIN index over each object's name words (the first tier
    of ``ranked_pks``), built from the index already stored."""
    if conn.dialect.name == "postgresql":
        conn.execute(text(_PG_NAME_INDEX))


def unindex_object(session: Session, pk: int) -> None:
    """Drop one object from the index."""
    if _is_postgres(session):
        session.execute(text("DELETE FROM object_search WHERE pk = :pk"), {"pk": pk})
    elif _is_sqlite(session):
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


_NOT_WORD = re.compile(r"[\W_]+", re.UNICODE)


def _pg_words(text_: str) -> str:
    """``text_`` as words and single spaces: PostgreSQL's parser would otherwise read paths, URLs,
    e-mail addresses and decimals as single tokens (``o1/ops/deploys``), where FTS5 sees words."""
    return _NOT_WORD.sub(" ", text_ or "")


def pg_tsquery(query: str) -> str:
    """The user's words as a safe ``to_tsquery('simple', ...)`` text: each quoted, all required
    (``&``), the last a prefix (``:*``); the same reading as ``fts_query``."""
    words = _NOT_WORD.sub(" ", " ".join(query_words(query))).split()
    if not words:
        return ""
    quoted = ["'" + word.replace("'", "''").replace("\\", "\\\\") + "'" for word in words]
    quoted[-1] += ":*"
    return " & ".join(quoted)


_BM25 = "bm25(object_fts, 10.0, 4.0, 1.0)"
"""SQLite's rank of a hit: bm25 with the name weighing 10, the preview 4 and the body 1."""
def fts_tiers(match: str) -> list[str]:
    """The FTS5 queries of ``match``'s tiers, best first, by the fields that hold every word, weighed
    as bm25 weighs them: the name and the preview, the name (not the preview), the preview (not the
    name), then the rest (the body alone, or words spread over the fields). Each hit of ``match``
    is in exactly one tier; each tier's query holds ``match`` itself, so its bm25 still weighs
    every field (a body mention ranks a hit higher within its tier)."""
    name, preview = f"({{name}} : ({match}))", f"({{preview}} : ({match}))"
    return [f"({match}) AND {name} AND {preview}", f"({match}) AND {name} NOT {preview}",
            f"({match}) AND {preview} NOT {name}", f"({match}) NOT {name} NOT {preview}"]


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


def _pg_tier(session: Session, where: str, params: dict[str, object], type: str | None, limit: int,
             visible: str = "") -> list[int]:
    sql = (
        "WITH q AS MATERIALIZED (SELECT to_tsquery('simple', :match) AS q) SELECT f.pk FROM q, object_search f "
        + ("JOIN objects o ON o.pk = f.pk " if type or visible else "")
        + f"WHERE {where} " + ("AND o.type = :type " if type else "") + (f"AND {visible} " if visible else "")
        + f"ORDER BY ts_rank({_PG_WEIGHTS}, f.doc, q.q) DESC, f.pk LIMIT :limit"
    )
    return [int(pk) for pk in session.execute(text(sql), {**params, "type": type, "limit": limit}).scalars()]


_WINDOW_ROWS = (select(ObjectRow.pk, ObjectRow.id, ObjectRow.owner_id, ObjectRow.privacy)
                .where(col(ObjectRow.pk).in_(bindparam("pks", expanding=True))))
"""Who owns each hit of a window, and how private it is (``Access.allows`` decides)."""


def ranked_pks(session: Session, query: str, *, type: str | None = None, limit: int = 20,
               access: Access | None = None) -> list[int]:
    """The keys of the best matches for ``query``, best first, ranked inside the index and cut to
    ``limit`` there (at most ``MAX_RESULTS``); never raises on odd input. With ``access`` (a reader),
    only objects it may read are ranked: the filter is part of the query, so a page is still full.

    On PostgreSQL in two tiers, each ranked by ``ts_rank`` and found through its own GIN index:
    first the objects whose name holds every word (the weight-A part of their ``tsvector``), then,
    only when those do not fill the page, the others. A word in many objects but few names costs
    what its name hits cost.
    """
    match = fts_query(query)
    if not match:
        return []
    limit = max(1, min(int(limit), MAX_RESULTS))
    if access is not None:
        # Rank a window of the best hits as the operator would (the cheap query), keep those the
        # reader may read; only when the window is full and still leaves the page short does the
        # filter go inside the ranking query. Either way the page is the reader's best ``limit``.
        window = limit * WINDOW_FACTOR
        pks = _ranked(session, query, match, type, window)
        if not pks:
            return []
        rows = session.connection().execute(_WINDOW_ROWS, {"pks": pks}).all()  # the rule in Python: no SQL to build
        seen = {int(pk) for pk, id_, owner, privacy in rows if access.allows(id_, owner, privacy)}
        kept = [pk for pk in pks if pk in seen]
        if len(kept) >= limit or len(pks) < window:
            return kept[:limit]
    return _ranked(session, query, match, type, limit, access)


def _ranked(session: Session, query: str, match: str, type: str | None, limit: int,
            access: Access | None = None) -> list[int]:
    visible, extra = access.sql("o") if access is not None else ("", {})
    if _is_sqlite(session):
        sql = (
            "SELECT f.rowid FROM object_fts f "
            + ("JOIN objects o ON o.pk = f.rowid " if type or visible else "")
            + "WHERE object_fts MATCH :match "
            + ("AND o.type = :type " if type else "")
            + (f"AND {visible} " if visible else "")
            + f"ORDER BY {_BM25} LIMIT :limit"
        )
        tiers = [match]
        if len(query_words(query)) == 1:  # more words: fewer hits, and a tier's query reads each word's hits thrice
            hits = session.execute(text(  # counting is cheap, and stops past RANK_ALL; ranking each hit is not
                "SELECT count(*) FROM (SELECT rowid FROM object_fts WHERE object_fts MATCH :match LIMIT :cap)"),
                {"match": match, "cap": RANK_ALL + 1}).scalar_one()
            tiers = [match] if hits <= RANK_ALL else fts_tiers(match)
        pks: list[int] = []
        for tier in tiers:
            pks += [int(pk) for pk in session.execute(text(sql), {"match": tier, "type": type,
                                                                  "limit": limit - len(pks), **extra}).scalars()]
            if len(pks) >= limit:
                break
        return pks
    if _is_postgres(session):
        params: dict[str, object] = {"match": pg_tsquery(query), **extra}
        pks = _pg_tier(session, f"{_PG_NAME} @@ q.q", params, type, limit, visible)
        if len(pks) < limit:
            pks += _pg_tier(session, f"f.doc @@ q.q AND NOT {_PG_NAME} @@ q.q", params, type, limit - len(pks), visible)
        return pks
    like = "%" + " ".join(query_words(query)) + "%"
    sql = (
        "SELECT o.pk FROM objects o LEFT JOIN documents d ON d.object_id = o.id "
        "WHERE (o.name LIKE :like OR d.preview LIKE :like OR d.body LIKE :like)"
        + (" AND o.type = :type" if type else "") + (f" AND {visible}" if visible else "") + " ORDER BY o.pk LIMIT :limit"
    )
    return [int(pk) for pk in session.execute(text(sql), {"like": like, "type": type, "limit": limit,
                                                          **extra}).scalars()]


def search_ids(session: Session, query: str, *, type: str | None = None, limit: int = 20) -> list[tuple[int, str]]:
    """``(pk, snippet)`` of the best matches for ``query``, best first; never raises on odd input."""
    pks = ranked_pks(session, query, type=type, limit=limit)
    snippets = _snippets(session, pks, query_words(query))
    return [(pk, snippets[pk].text) for pk in pks if pk in snippets]
