"""Delivery rules filed by owner and event: what a node's boot context reads instead of every document.

``delivery_rules`` is derived from ``documents.rules``: one row per rule of a document, keyed by
the document's owner, the rule's event (its ``on``), the document and the rule's position in its
list, holding the rule's JSON text and the document's preview. A node's boot context then reads,
for its view's owners and its event, only the rules that can fire, clustered together (SQLite keeps
the rows in key order: ``WITHOUT ROWID``), and the previews of what they bring in, instead of one
lookup into ``documents`` per document it can see.

The database keeps it in step, in the same statement as the write it follows, whoever writes:
triggers on ``documents`` (insert; update of ``rules`` or ``preview``; delete) and on ``objects``
(a document's owner changes). So this workbench, an older one that predates the table, a bulk load
and a rolled-back transaction all leave it agreeing with ``documents``; no write path has to
remember it. A canvas opened without it (older files, or one made before it existed) gets the
table and its triggers and is filled from ``documents`` once, inside the opening transaction; the
``delivery_rules`` mark in ``canvas_meta`` says that was done. The schema version does not change:
a workbench that predates the table ignores it, and the triggers keep it current under that
workbench's writes too.

Rules text that is not a JSON list (never written by the canvas, which stores ``json.dumps`` of
checked rules) files nothing; a rule without a text ``on`` is filed under no event.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlmodel import Session

__all__ = ["TABLE", "MARK", "install_rule_index", "rules_by_document", "driver_rows"]

TABLE = "delivery_rules"
"""The derived table's name."""
MARK = "delivery_rules"
"""The ``canvas_meta`` key saying the table, its triggers and its first filling are in place."""

_COLUMNS = "owner_id, event, document_id, position, rule, preview"

# -- SQLite: rules expanded with json_each; ``r.key`` is the index in the list --------------------------------

_SQLITE_TABLE = (
    f"CREATE TABLE IF NOT EXISTS {TABLE} (owner_id VARCHAR NOT NULL, event VARCHAR NOT NULL, "
    "document_id VARCHAR NOT NULL, position INTEGER NOT NULL, rule TEXT NOT NULL, preview TEXT NOT NULL, "
    "PRIMARY KEY (owner_id, event, document_id, position)) WITHOUT ROWID"
)


def _sqlite_rows(doc: str, rules: str, preview: str, owner: str, *, source: str = "", where: str = "") -> str:
    """``SELECT``ing the rows of one document from its id, rules, preview and owner expressions
    (``source``: tables joined before the rules are expanded, ``where``: conditions on them)."""
    listed = f"CASE WHEN json_valid({rules}) AND json_type({rules}) = 'array' THEN {rules} ELSE '[]' END"
    return (f"SELECT {owner}, json_extract(r.value, '$.on'), {doc}, r.key, r.value, {preview} "
            f"FROM {source}json_each({listed}) AS r "
            f"WHERE {where}{owner} IS NOT NULL AND r.type = 'object' AND json_type(r.value, '$.on') = 'text'")


_SQLITE_OWNER_ROWS = _sqlite_rows("d.object_id", "d.rules", "d.preview", "NEW.owner_id",
                                  source="documents AS d, ", where="d.object_id = NEW.id AND ")
_SQLITE_OWNER_OF = "(SELECT o.owner_id FROM objects AS o WHERE o.id = NEW.object_id)"
_SQLITE_TRIGGERS = (
    f"CREATE TRIGGER IF NOT EXISTS tr_{TABLE}_insert AFTER INSERT ON documents "
    f"WHEN NEW.rules IS NOT '[]' BEGIN "
    f"INSERT INTO {TABLE} ({_COLUMNS}) {_sqlite_rows('NEW.object_id', 'NEW.rules', 'NEW.preview', _SQLITE_OWNER_OF)}; "
    "END",
    f"CREATE TRIGGER IF NOT EXISTS tr_{TABLE}_update AFTER UPDATE OF rules, preview ON documents "
    f"WHEN NEW.rules IS NOT OLD.rules OR NEW.preview IS NOT OLD.preview BEGIN "
    f"DELETE FROM {TABLE} WHERE document_id = OLD.object_id; "
    f"INSERT INTO {TABLE} ({_COLUMNS}) {_sqlite_rows('NEW.object_id', 'NEW.rules', 'NEW.preview', _SQLITE_OWNER_OF)}; "
    "END",
    f"CREATE TRIGGER IF NOT EXISTS tr_{TABLE}_delete AFTER DELETE ON documents BEGIN "
    f"DELETE FROM {TABLE} WHERE document_id = OLD.object_id; "
    "END",
    f"CREATE TRIGGER IF NOT EXISTS tr_{TABLE}_owner AFTER UPDATE OF owner_id ON objects "
    f"WHEN NEW.type = 'document' AND NEW.owner_id IS NOT OLD.owner_id BEGIN "
    f"DELETE FROM {TABLE} WHERE document_id = NEW.id; "
    f"INSERT INTO {TABLE} ({_COLUMNS}) {_SQLITE_OWNER_ROWS}; "
    "END",
)

# -- PostgreSQL: one function per trigger; json (not jsonb) keeps each rule's text and key order -----------

_PG_TABLE = (
    f"CREATE TABLE IF NOT EXISTS {TABLE} (owner_id VARCHAR NOT NULL, event VARCHAR NOT NULL, "
    "document_id VARCHAR NOT NULL, position INTEGER NOT NULL, rule TEXT NOT NULL, preview TEXT NOT NULL, "
    "PRIMARY KEY (owner_id, event, document_id, position))"
)
_PG_FUNCTIONS = (
    # the rules text as a JSON list, or an empty one when it is not one (never an error that refuses a write)
    """CREATE OR REPLACE FUNCTION delivery_rules_list(rules text) RETURNS json LANGUAGE plpgsql IMMUTABLE AS $f$
    BEGIN
      IF rules IS NULL OR rules = '' OR rules = '[]' THEN RETURN '[]'::json; END IF;
      IF json_typeof(rules::json) = 'array' THEN RETURN rules::json; END IF;
      RETURN '[]'::json;
    EXCEPTION WHEN others THEN
      RETURN '[]'::json;
    END $f$""",
    """CREATE OR REPLACE FUNCTION delivery_rules_file(doc text, owner text, rules text, preview text) RETURNS void
    LANGUAGE sql AS $f$
      INSERT INTO delivery_rules (owner_id, event, document_id, position, rule, preview)
      SELECT owner, r.value ->> 'on', doc, r.n - 1, r.value::text, preview
      FROM json_array_elements(delivery_rules_list(rules)) WITH ORDINALITY AS r(value, n)
      WHERE owner IS NOT NULL AND json_typeof(r.value) = 'object' AND json_typeof(r.value -> 'on') = 'string'
    $f$""",
    """CREATE OR REPLACE FUNCTION delivery_rules_on_document() RETURNS trigger LANGUAGE plpgsql AS $f$
    BEGIN
      IF TG_OP <> 'INSERT' THEN
        DELETE FROM delivery_rules WHERE document_id = OLD.object_id;
      END IF;
      IF TG_OP <> 'DELETE' AND NEW.rules IS DISTINCT FROM '[]' THEN
        PERFORM delivery_rules_file(NEW.object_id, (SELECT o.owner_id FROM objects AS o WHERE o.id = NEW.object_id),
                                    NEW.rules, NEW.preview);
      END IF;
      RETURN NULL;
    END $f$""",
    """CREATE OR REPLACE FUNCTION delivery_rules_on_owner() RETURNS trigger LANGUAGE plpgsql AS $f$
    BEGIN
      DELETE FROM delivery_rules WHERE document_id = NEW.id;
      PERFORM delivery_rules_file(d.object_id, NEW.owner_id, d.rules, d.preview)
      FROM documents AS d WHERE d.object_id = NEW.id;
      RETURN NULL;
    END $f$""",
)
_PG_TRIGGERS = (
    (f"tr_{TABLE}_insert", "documents",
     "AFTER INSERT ON documents FOR EACH ROW WHEN (NEW.rules <> '[]') EXECUTE FUNCTION delivery_rules_on_document()"),
    (f"tr_{TABLE}_update", "documents",
     "AFTER UPDATE OF rules, preview ON documents FOR EACH ROW "
     "WHEN (NEW.rules IS DISTINCT FROM OLD.rules OR NEW.preview IS DISTINCT FROM OLD.preview) "
     "EXECUTE FUNCTION delivery_rules_on_document()"),
    (f"tr_{TABLE}_delete", "documents",
     "AFTER DELETE ON documents FOR EACH ROW EXECUTE FUNCTION delivery_rules_on_document()"),
    (f"tr_{TABLE}_owner", "objects",
     "AFTER UPDATE OF owner_id ON objects FOR EACH ROW "
     "WHEN (NEW.type = 'document' AND NEW.owner_id IS DISTINCT FROM OLD.owner_id) "
     "EXECUTE FUNCTION delivery_rules_on_owner()"),
)


def _marked(conn: Connection) -> bool:
    return conn.execute(text("SELECT 1 FROM canvas_meta WHERE key = :k"), {"k": MARK}).first() is not None


def install_rule_index(conn: Connection) -> bool:
    """Create ``delivery_rules``, its index and triggers, and fill it from ``documents``, in ``conn``'s
    transaction (the one opening the canvas), unless ``canvas_meta`` says that was done. Returns
    whether it filled the table. Needs ``canvas_meta``, ``objects`` and ``documents``."""
    if _marked(conn):
        return False
    postgres = conn.dialect.name == "postgresql"
    conn.execute(text(_PG_TABLE if postgres else _SQLITE_TABLE))
    conn.execute(text(f"CREATE INDEX IF NOT EXISTS ix_{TABLE}_document ON {TABLE} (document_id)"))
    if postgres:
        for statement in _PG_FUNCTIONS:
            conn.execute(text(statement))
        for name, table, body in _PG_TRIGGERS:
            conn.execute(text(f"DROP TRIGGER IF EXISTS {name} ON {table}"))
            conn.execute(text(f"CREATE TRIGGER {name} {body}"))
    else:
        for statement in _SQLITE_TRIGGERS:
            conn.execute(text(statement))
    conn.execute(text(f"DELETE FROM {TABLE}"))  # whatever a half-made earlier copy held: filled whole below
    if postgres:
        conn.execute(text(
            "SELECT delivery_rules_file(d.object_id, o.owner_id, d.rules, d.preview) "
            "FROM documents AS d JOIN objects AS o ON o.id = d.object_id WHERE d.rules <> '[]'"))
    else:
        conn.execute(text(
            f"INSERT INTO {TABLE} ({_COLUMNS}) "
            + _sqlite_rows("d.object_id", "d.rules", "d.preview", "o.owner_id",
                           source="documents AS d JOIN objects AS o ON o.id = d.object_id, ",
                           where="d.rules <> '[]' AND ")))
    conn.execute(text("INSERT INTO canvas_meta(key, value) VALUES (:k, '1')"), {"k": MARK})
    return True


def driver_rows(session: Session, sql: str, params: Sequence[object]) -> list[tuple[Any, ...]]:
    """Rows of ``sql`` (positional ``?`` marks) straight from the database driver, in the session's
    transaction: for the few statements that return one row per document a node can see, where
    building SQLAlchemy's row objects costs more than the query itself. ``?`` marks a parameter
    (so the text holds no literal ``?``)."""
    if session.autoflush:
        session.flush()  # as the session does before its own statements: pending ORM writes are seen
    conn = session.connection()
    if conn.dialect.paramstyle != "qmark":  # psycopg: a literal % is written %%, a parameter %s
        sql = sql.replace("%", "%%").replace("?", "%s")
    cursor = conn.connection.cursor()
    try:
        cursor.execute(sql, tuple(params))
        return list(cursor.fetchall())
    finally:
        cursor.close()


def one_of(session: Session, column: str, values: Sequence[object]) -> tuple[str, list[object]]:
    """``column`` is one of ``values``, as SQL for ``driver_rows`` with its parameters: ``IN (?, ...)``
    on SQLite; on PostgreSQL ``= ANY(?)`` with one array, so the statement's text is the same whatever
    the count, and the server plans it once (psycopg prepares a statement it has run a few times)."""
    if session.connection().dialect.name == "postgresql":
        return f"{column} = ANY(?)", [list(values)]
    return f"{column} IN ({', '.join('?' * len(values))})", list(values)


def rules_by_document(session: Session, owners: Sequence[str], event: str) -> dict[str, tuple[tuple[str, ...], str]]:
    """For the documents of ``owners`` that have a rule ``on: event``: ``{document id: (the rules' JSON
    texts in their list's order, the document's preview)}``. Reads only those rules' rows."""
    if not owners:
        return {}
    owned, params = one_of(session, "owner_id", owners)
    # unordered: ordering costs PostgreSQL a sort of every row by collated text; a document's few rules
    # are put in their list's order here instead
    rows = driver_rows(session, f"SELECT document_id, position, rule, preview FROM {TABLE} WHERE {owned} "
                                "AND event = ?", [*params, event])
    found: dict[str, tuple[tuple[str, ...], str]] = {}
    first: dict[str, int] = {}
    more: dict[str, list[tuple[int, str]]] = {}
    for doc, position, rule, preview in rows:
        if doc not in found:
            found[doc], first[doc] = ((rule,), preview), position
        else:  # a further rule of the same document (few have one)
            more.setdefault(doc, []).append((position, rule))
    for doc, extra in more.items():
        rules, preview = found[doc]
        found[doc] = (tuple(rule for _, rule in sorted([(first[doc], rules[0]), *extra])), preview)
    return found
