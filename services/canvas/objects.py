"""Repository functions shared by every object type: create, find by id or name, list, count, edges.

Each function takes a ``Tx`` (a session, the time and the changes to publish after commit) or a
plain session for reads, and returns rows for the caller's unit of work or frozen read models.

**Names.** Every name the canvas reports (``ObjectSummary.full_name``) resolves back to its object
through ``find_object``: a document's is ``<owner-ref>/<path>``, where the owner reference is the
owner's bare handle, or ``<type>:<handle>`` while another owner (of any type, nodes included)
shares that handle (the seed's rule); any other object's is its id. A name several objects answer
to (a bare handle two owners share, ``o1/x`` when both ``user:o1`` and ``repo:o1`` hold ``x``, a
display name two nodes share) is refused with ``AmbiguousNameError`` listing the unambiguous name
of each candidate; a bare document name resolves in the reader's view, first match wins.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field

from sqlalchemy import (ColumnElement, Connection, Integer, Select, and_, bindparam, case, column, exists, func, literal, not_,
                        select, text, union_all)
from sqlalchemy.orm import aliased
from sqlalchemy.orm.util import AliasedClass
from sqlmodel import Session, col

from services.changes import Change

from . import counters
from .eligibility import OPERATOR, Access, access_for, settle_view
from .errors import AmbiguousNameError, ObjectNotFoundError
from .models import EdgeRow, ObjectRow
from .name_index import CANDIDATES, ascii_lower, fts_phrase, has_name_index
from .names import OWNER_TYPES, RESOLVE_TYPES, ReaderView, check_handle, owner_id, split_owner_ref
from .views import EdgeView, Neighbourhood, ObjectPage, ObjectSummary, positional_builder

__all__ = [
    "Tx",
    "new_id",
    "summary_of",
    "summaries",
    "summaries_by_id",
    "summaries_of_rows",
    "SummaryColumns",
    "get_row",
    "find_object",
    "find_readable",
    "readable_ids",
    "hidden_ids",
    "ensure_owner",
    "create_object",
    "list_objects",
    "count_objects",
    "neighbourhood",
    "owner_handle",
    "owner_ref",
    "full_name",
    "with_owner",
    "OWNER",
    "OWNER_REF",
]

_Owner = aliased(ObjectRow, name="owner")
_Other = aliased(ObjectRow, name="other_owner")
_MAX_CANDIDATES = 10
_PREFIX = {"document": "doc", "node": "node", "job": "job", "custom": "obj"}


@dataclass
class Tx:
    """One unit of work: its session, its time, and the changes to publish once it commits."""

    session: Session
    now: float
    changes: list[Change] = field(default_factory=list)
    readers: dict[str, Access | None] = field(default_factory=dict)
    """What each owner may read, as worked out once in this unit of work (links resolve in it)."""

    def change(self, kind: str, id: str, /, **data: object) -> None:
        """Queue a ``Change`` from source ``canvas`` for after the commit. ``kind`` and ``id`` are
        positional only, so ``data`` may hold fields of those names (a node's changed ``kind``)."""
        self.changes.append(Change("canvas", kind, id, data))


def new_id(prefix: str) -> str:
    """A fresh object id such as ``doc_3f9a1c2b7d4e``."""
    return f"{prefix}_{secrets.token_hex(6)}"


_summary = positional_builder(ObjectSummary)
"""``ObjectSummary`` by position: id, type, kind, name, full name, owner id, privacy, status, times."""


def _summary_of_columns(id_: str, type_: str, kind: str, name: str, owner_id: str | None, privacy: str,
                        status: str, created: float, updated: float, owner_ref: str | None) -> ObjectSummary:
    """The read model of one object's columns: a document's full name is ``<owner_ref>/<path>``, any
    other's its id."""
    full = (f"{owner_ref}/{name}" if owner_ref else name) if type_ == "document" else id_
    return _summary(id_, type_, kind, name, full, owner_id, privacy, status, created, updated)


summary_from_columns = _summary_of_columns
"""``_summary_of_columns`` for a writer that has the columns without an ORM row (``write_documents``)."""


def summary_of(row: ObjectRow, owner_ref: str | None) -> ObjectSummary:
    """The read model of ``row`` (see ``_summary_of_columns``)."""
    return _summary_of_columns(row.id, row.type, row.kind, row.name, row.owner_id, row.privacy, row.status,
                               row.created_at, row.updated_at, owner_ref)


def _ref_of(owner: AliasedClass[ObjectRow]) -> ColumnElement[str | None]:
    """SQL: the reference of ``owner`` (an aliased objects row) in full names: its handle, or
    ``<type>:<handle>`` while another owner shares the handle."""
    shared = exists().where(_Other.type.in_(RESOLVE_TYPES), _Other.handle == owner.handle, _Other.id != owner.id)
    return case((and_(owner.handle.is_not(None), shared), owner.type + literal(":") + owner.handle),
                else_=owner.handle)


_OWNER_REF = _ref_of(_Owner).label("owner_ref")
OWNER = _Owner
"""The owner alias ``with_owner`` joins (for statements selecting plain columns)."""
OWNER_REF = _OWNER_REF
"""The owner reference column of ``with_owner`` (join ``OWNER`` on ``objects.owner_id``)."""


def with_owner(stmt_where: ColumnElement[bool] | None = None) -> Select[tuple[ObjectRow, str | None]]:
    """``select(ObjectRow, owner reference)``, optionally filtered: rows for ``summaries``."""
    stmt = select(ObjectRow, _OWNER_REF).outerjoin(_Owner, _Owner.id == ObjectRow.owner_id)
    return stmt if stmt_where is None else stmt.where(stmt_where)


def summaries(session: Session, stmt: Select[tuple[ObjectRow, str | None]]) -> list[ObjectSummary]:
    """Run a statement selecting ``(ObjectRow, owner reference)`` and build summaries."""
    return [summary_of(row, ref) for row, ref in session.execute(stmt).all()]


_SUMMARY_COLUMNS = select(ObjectRow.id, ObjectRow.type, ObjectRow.kind, ObjectRow.name, ObjectRow.owner_id,
                          ObjectRow.privacy, ObjectRow.status, ObjectRow.created_at, ObjectRow.updated_at)
_LISTED = _SUMMARY_COLUMNS.add_columns(_OWNER_REF).outerjoin(_Owner, _Owner.id == ObjectRow.owner_id)
"""``SummaryColumns`` and the owner's reference: a page of summaries without an ORM object per row."""


def _flushed(session: Session) -> Connection:
    """The session's connection, after its pending writes, as its own statements flush them first."""
    if session.autoflush:
        session.flush()
    return session.connection()


def _listed_summaries(session: Session, stmt: Select[tuple[object, ...]]) -> list[ObjectSummary]:
    """Run ``_LISTED`` narrowed (a page) and build its summaries, in order."""
    return [_summary_of_columns(*row) for row in _flushed(session).execute(stmt).all()]
_BY_IDS = _SUMMARY_COLUMNS.where(col(ObjectRow.id).in_(bindparam("ids", expanding=True)))
_REFS = select(_Owner.id, _OWNER_REF).where(_Owner.id.in_(bindparam("owners", expanding=True)))


SummaryColumns = tuple[str, str, str, str, str | None, str, str, float, float]
"""An object's columns as a summary needs them: id, type, kind, name, owner id, privacy, status, times."""


def summaries_of_rows(session: Session, rows: Sequence[SummaryColumns]) -> dict[str, ObjectSummary]:
    """Summaries of plain rows (``SummaryColumns``), by id; each distinct owner's full-name
    reference is worked out once, not once per row."""
    owners = sorted({str(r[4]) for r in rows if r[4] is not None})
    refs: dict[str, str | None] = (dict(session.connection().execute(_REFS, {"owners": owners}).all())
                                   if owners else {})
    out = {}
    for row in rows:
        owner = row[4]
        out[row[0]] = _summary_of_columns(*row, refs.get(owner) if owner is not None else None)
    return out


def summaries_by_id(session: Session, ids: Sequence[str]) -> dict[str, ObjectSummary]:
    """The summaries of the objects ``ids`` name (those that exist), by id (``summaries_of_rows``)."""
    if not ids:
        return {}
    rows = session.connection().execute(_BY_IDS, {"ids": list(ids)}).all()
    return summaries_of_rows(session, rows)


_GET_ROW = select(ObjectRow).where(ObjectRow.id == bindparam("object_id"))


def get_row(session: Session, object_id: str) -> ObjectRow | None:
    """The object with id ``object_id``, or None."""
    return session.execute(_GET_ROW, {"object_id": object_id}).scalar_one_or_none()


def owner_ref(session: Session, owner: ObjectRow) -> str:
    """How full names refer to ``owner``: its handle, or ``<type>:<handle>`` while another owner shares it."""
    handle = owner.handle or owner.id
    shared = session.execute(select(ObjectRow.id).where(
        ObjectRow.type.in_(RESOLVE_TYPES), ObjectRow.handle == handle, ObjectRow.id != owner.id).limit(1)).first()
    return f"{owner.type}:{handle}" if shared is not None else handle


def _owner_handle_statement() -> Select[tuple[str]]:
    handle = func.coalesce(_Owner.handle, _Owner.id)
    shared = exists().where(_Other.type.in_(RESOLVE_TYPES), _Other.handle == handle, _Other.id != _Owner.id)
    return select(case((shared, _Owner.type + literal(":") + handle), else_=handle)).where(
        _Owner.id == bindparam("owner_id"))


_OWNER_HANDLE = _owner_handle_statement()
"""``owner_ref`` in one query, built once: building and keying it for every call cost more than
the database took to answer it (a point lookup through ``Canvas.get`` took twice as long)."""


def owner_handle(session: Session, row: ObjectRow) -> str | None:
    """The reference of ``row``'s owner in full names (see ``owner_ref``), or None without an owner."""
    if row.owner_id is None:
        return None
    return _flushed(session).execute(_OWNER_HANDLE, {"owner_id": row.owner_id}).scalar_one_or_none()


def full_name(session: Session, row: ObjectRow) -> str:
    """The name the canvas reports for ``row`` (``ObjectSummary.full_name``); it resolves back to ``row``."""
    return summary_of(row, owner_handle(session, row)).full_name


def _owners_by_ref(session: Session, ref: str) -> list[ObjectRow]:
    """Every owner ``ref`` may mean: ``<type>:<handle>`` names one; a bare handle each owner holding it."""
    type_, handle = split_owner_ref(ref)
    stmt = select(ObjectRow).where(ObjectRow.handle == handle)
    stmt = stmt.where(ObjectRow.type == type_) if type_ else stmt.where(ObjectRow.type.in_(RESOLVE_TYPES))
    return list(session.execute(stmt.order_by(ObjectRow.pk)).scalars().all())


def _one(session: Session, ref: str, rows: list[ObjectRow], access: Access | None = None) -> ObjectRow | None:
    """The only row of ``rows`` ``access`` may read, None for none, ``AmbiguousNameError`` (naming
    each) for more: for a reader, what it may not read takes no part (it neither makes a name
    ambiguous nor is named among the candidates)."""
    unique = [row for row in {row.id: row for row in rows}.values() if _readable(row, access)]
    if len(unique) > 1:
        raise AmbiguousNameError(ref, sorted(full_name(session, row) for row in unique))
    return unique[0] if unique else None


def _readable(row: ObjectRow, access: Access | None) -> bool:
    return access is None or access.allows(row.id, row.owner_id, row.privacy)


def readable_ids(session: Session, ids: Sequence[str], access: Access | None) -> set[str]:
    """Which of ``ids`` name an object ``access`` may read (all that exist, for the operator)."""
    if not ids:
        return set()
    stmt = select(ObjectRow.id).where(col(ObjectRow.id).in_(sorted(set(ids))))
    if access is not None:
        stmt = stmt.where(access.clause())
    return {str(i) for i in session.execute(stmt).scalars()}


def hidden_ids(session: Session, ids: Sequence[str], access: Access | None) -> set[str]:
    """Which of ``ids`` name an object that exists and ``access`` may not read (none, for the operator)."""
    if access is None or not ids:
        return set()
    stmt = select(ObjectRow.id).where(col(ObjectRow.id).in_(sorted(set(ids))), not_(access.clause()))
    return {str(i) for i in session.execute(stmt).scalars()}


def find_object(session: Session, ref: str, view: ReaderView | None = None, *,
                access: Access | None = None) -> ObjectRow:
    """The object ``ref`` names: an id, a full name ``<owner>/<path>``, or a bare name in ``view``.

    Tried in that order; a name several objects answer to is ``AmbiguousNameError``, except a bare
    document name, which resolves in the reader's view (first match wins, as the seed orders it).
    With a reader's ``access``, only what it may read answers a name: an object it may not read is
    never a candidate, so the answer is the one it would get if that object did not exist.
    """
    if not isinstance(ref, str) or not ref:
        raise ObjectNotFoundError("an object id or name is required")
    row = get_row(session, ref)
    if row is not None and _readable(row, access):
        return row
    head, sep, rest = ref.partition("/")
    if sep and head:
        type_, handle = split_owner_ref(head)
        stmt = (select(ObjectRow).join(_Owner, _Owner.id == ObjectRow.owner_id)
                .where(ObjectRow.type == "document", ObjectRow.name == rest, _Owner.handle == handle))
        stmt = stmt.where(_Owner.type == type_) if type_ else stmt.where(_Owner.type.in_(RESOLVE_TYPES))
        if access is not None:
            stmt = stmt.where(access.clause())
        found = _one(session, ref, list(session.execute(stmt.limit(_MAX_CANDIDATES)).scalars().all()), access)
        if found is not None:
            return found
    order = (settle_view(session, view) if view is not None else ReaderView()).owner_ids()
    docs = [d for d in session.execute(select(ObjectRow).where(
        ObjectRow.type == "document", ObjectRow.name == ref, ObjectRow.owner_id.in_(order)
    )).scalars().all() if _readable(d, access)]
    if docs:
        return sorted(docs, key=lambda r: order.index(r.owner_id or ""))[0]
    named_stmt = select(ObjectRow).where(ObjectRow.name == ref, ObjectRow.type != "document")
    if access is not None:
        named_stmt = named_stmt.where(access.clause())
    named = list(session.execute(named_stmt.order_by(ObjectRow.pk).limit(_MAX_CANDIDATES)).scalars().all())
    found = _one(session, ref, named + _owners_by_ref(session, ref), access)
    if found is not None:
        return found
    raise ObjectNotFoundError(f"no object is named {ref!r}")


_IN_CHUNK = 500
"""How many values one ``IN`` list of a bulk lookup holds."""


def _chunked(values: Sequence[str]) -> list[list[str]]:
    unique = list(dict.fromkeys(values))
    return [unique[i:i + _IN_CHUNK] for i in range(0, len(unique), _IN_CHUNK)]


def resolve_many(session: Session, refs: Sequence[str], view: ReaderView | None, *,
                 access: Access | None = None) -> dict[str, str | None]:
    """``find_object(session, ref, view).id`` for each of ``refs`` at once, None where it finds
    nothing or the name is ambiguous: the same order of tries (an id, a full name
    ``<owner>/<path>``, a bare document name in ``view``, then another object's name or an owner's
    handle), each tried for every reference in a few statements instead of a few per reference
    (``write_many``'s links). With ``access``, as ``find_object`` with it: only what that reader may
    read answers, so an object it may not read neither resolves nor makes a name ambiguous."""

    def readable(stmt):  # type: ignore[no-untyped-def]  # a select over ObjectRow's columns
        return stmt if access is None else stmt.where(access.clause())

    out: dict[str, str | None] = {}
    todo = [r for r in dict.fromkeys(refs) if isinstance(r, str) and r]
    for part in _chunked(todo):
        for (id_,) in session.execute(readable(select(ObjectRow.id).where(ObjectRow.id.in_(part)))).all():
            out[id_] = id_
    todo = [r for r in todo if r not in out]
    full = {}
    for ref in todo:
        head, sep, rest = ref.partition("/")
        if sep and head:
            full[ref] = (*split_owner_ref(head), rest)
    if full:
        found: dict[tuple[str, str], list[tuple[str, str]]] = {}
        handles = sorted({h for _, h, _ in full.values()})
        rests = sorted({r for _, _, r in full.values()})
        for hpart in _chunked(handles):
            for rpart in _chunked(rests):
                stmt = (select(ObjectRow.id, ObjectRow.name, _Owner.handle, _Owner.type)
                        .join(_Owner, _Owner.id == ObjectRow.owner_id)
                        .where(ObjectRow.type == "document", ObjectRow.name.in_(rpart), _Owner.handle.in_(hpart),
                               _Owner.type.in_(RESOLVE_TYPES)))
                for id_, name, handle, type_ in session.execute(readable(stmt)).all():
                    found.setdefault((str(handle), name), []).append((id_, type_))
        for ref, (type_, handle, rest) in full.items():
            hits = {id_ for id_, t in found.get((handle, rest), []) if type_ is None or t == type_}
            if len(hits) > 1:
                out[ref] = None  # ambiguous: find_object stops here
            elif hits:
                out[ref] = hits.pop()
    todo = [r for r in todo if r not in out]
    order = (settle_view(session, view) if view is not None else ReaderView()).owner_ids()
    rank = {owner: i for i, owner in enumerate(order)}
    best: dict[str, tuple[int, str]] = {}
    for part in _chunked(todo):
        stmt = select(ObjectRow.id, ObjectRow.name, ObjectRow.owner_id).where(
            ObjectRow.type == "document", ObjectRow.name.in_(part), ObjectRow.owner_id.in_(order))
        for id_, name, owner in session.execute(readable(stmt)).all():
            key = rank.get(owner or "", len(rank))
            if name not in best or key < best[name][0]:
                best[name] = (key, id_)
    out.update({name: id_ for name, (_, id_) in best.items()})
    todo = [r for r in todo if r not in out]
    candidates: dict[str, set[str]] = {r: set() for r in todo}
    for part in _chunked(todo):
        stmt = select(ObjectRow.id, ObjectRow.name).where(ObjectRow.name.in_(part), ObjectRow.type != "document")
        for id_, name in session.execute(readable(stmt)).all():
            candidates[name].add(id_)
    by_handle: dict[str, list[tuple[str, str | None]]] = {}
    for ref in todo:
        type_, handle = split_owner_ref(ref)
        by_handle.setdefault(handle, []).append((ref, type_))
    for part in _chunked(list(by_handle)):
        stmt = select(ObjectRow.id, ObjectRow.handle, ObjectRow.type).where(
            ObjectRow.handle.in_(part), ObjectRow.type.in_(RESOLVE_TYPES))
        for id_, handle, type_ in session.execute(readable(stmt)).all():
            for ref, wanted in by_handle.get(str(handle), []):
                if wanted is None or wanted == type_:
                    candidates[ref].add(id_)
    for ref, ids in candidates.items():
        out[ref] = next(iter(ids)) if len(ids) == 1 else None
    return {ref: out.get(ref) for ref in refs}


def find_readable(session: Session, ref: str, view: ReaderView | None) -> tuple[ObjectRow, Access | None]:
    """``find_object`` for a reader: an object it may not read is absent (the same
    ``ObjectNotFoundError`` as a name nobody holds, so the answer confirms nothing)."""
    access = access_for(session, view)
    row = find_object(session, ref, view, access=access)
    if not _readable(row, access):
        raise ObjectNotFoundError(f"no object is named {ref!r}")
    return row, access


def create_object(tx: Tx, *, type: str, name: str, owner_id: str | None, id: str | None = None,
                  kind: str = "", privacy: str = "public", status: str = "", handle: str | None = None) -> ObjectRow:
    """Insert a new object row and queue an ``object.created`` change."""
    row = ObjectRow(id=id or new_id(_PREFIX.get(type, "obj")), type=type, kind=kind, name=name, handle=handle,
                    owner_id=owner_id, privacy=privacy, status=status, created_at=tx.now, updated_at=tx.now)
    tx.session.add(row)
    tx.session.flush()
    tx.change("object.created", row.id, type=type, name=name)
    return row


def live_owner(session: Session, type_: str, handle: str) -> ObjectRow | None:
    """The owner of ``type_`` that holds ``handle`` now, or None. An owner's id (``<type>:<handle>``
    when it was made) stays when it is renamed, so the id alone does not say who holds a name."""
    row = get_row(session, owner_id(type_, handle))
    if row is not None and row.type == type_ and row.handle == handle:
        return row
    return session.execute(select(ObjectRow).where(ObjectRow.type == type_, ObjectRow.handle == handle)
                           .order_by(ObjectRow.pk).limit(1)).scalar_one_or_none()


def free_owner_id(session: Session, type_: str, handle: str) -> str:
    """The id for a new owner ``<type>:<handle>``: that, unless an owner renamed away from
    ``handle`` still has it as its id; then ``<type>:<handle>.<hex>``."""
    wanted = owner_id(type_, handle)
    while get_row(session, wanted) is not None:
        wanted = f"{owner_id(type_, handle)}.{secrets.token_hex(3)}"
    return wanted


def ensure_owner(tx: Tx, type_: str, handle: str, *, name: str | None = None) -> ObjectRow:
    """The owner object ``<type>:<handle>`` (the owner holding that handle now), created if missing."""
    if type_ not in OWNER_TYPES:
        raise ObjectNotFoundError(f"{type_!r} is not an owner type (one of {', '.join(OWNER_TYPES)})")
    check_handle(handle, f"{type_} handle")
    row = live_owner(tx.session, type_, handle)
    if row is None:
        row = create_object(tx, type=type_, name=name or handle, owner_id=None,
                            id=free_owner_id(tx.session, type_, handle), handle=handle)
    return row


def _filters(session: Session, type: str | None, owner: str | None, name_filter: str | None,
             access: Access | None = None, *, by_key: bool = False) -> list[ColumnElement[bool]]:
    """The WHERE terms of a listing; ``by_key``: the rows come from a list of keys (the trigram
    candidates), so type and owner are written so that SQLite does not read an index on them instead."""
    where: list[ColumnElement[bool]] = [] if access is None else [access.clause()]
    if type:
        where.append((ObjectRow.type + literal("") if by_key else ObjectRow.type) == type)
    if owner:
        where.append((ObjectRow.owner_id + literal("") if by_key else ObjectRow.owner_id) == owner)
    if name_filter:
        if session.get_bind().dialect.name == "postgresql":  # as SQLite's LIKE: ASCII letters in either case
            # lower(name), the trigram index's own expression: an ILIKE on the name could not use it
            where.append(func.lower(ObjectRow.name).contains(ascii_lower(name_filter), autoescape=True))
        else:
            where.append(ObjectRow.name.contains(name_filter, autoescape=True))
    return where


def _phrase(session: Session, name_filter: str | None) -> str | None:
    """SQLite: the trigram phrase of ``name_filter`` when the index can serve it, else None."""
    if not name_filter or session.get_bind().dialect.name != "sqlite" or not has_name_index(session):
        return None
    return fts_phrase(name_filter)


def _candidates(session: Session, name_filter: str | None) -> ColumnElement[bool] | None:
    """SQLite: ``pk IN (the trigram index's candidates)`` for a filter it can serve, else None. The
    candidates hold every row the filter's ``LIKE`` matches, which is still applied to each."""
    phrase = _phrase(session, name_filter)
    if phrase is None:
        return None
    return col(ObjectRow.pk).in_(text(CANDIDATES).bindparams(phrase=phrase).columns(column("rowid", Integer)))


def list_objects(session: Session, *, type: str | None = None, owner: str | None = None,
                 name_filter: str | None = None, offset: int = 0, limit: int = 50,
                 access: Access | None = None) -> ObjectPage:
    """One page of objects ordered by name, filtered by type, owner id and a name substring, and
    to what ``access`` may read (``None``: the operator, everything).

    A name filter a trigram index serves (``name_index``) reads the page from the index's
    candidates when they are few (a rare substring: a million names are not read in order to find
    fifty), and from the names in order when they are many (a common one: the page fills after a
    few thousand names). Both give the same page: the ``LIKE`` decides, the order is ``name, pk``."""
    limit = max(1, min(int(limit), 1000))
    offset = max(0, int(offset))
    candidates = _candidates(session, name_filter)
    if candidates is not None and not _few(session, name_filter or "", offset + limit + 1):
        candidates = None
    where = _filters(session, type, owner, name_filter, access, by_key=candidates is not None)
    if candidates is not None:
        where.append(candidates)
    if session.get_bind().dialect.name == "postgresql":
        # PostgreSQL works out the owner reference of every row it skips for the offset; pick the
        # page's keys first, then describe only those rows (same page, same order).
        page = (select(ObjectRow.pk).where(*where).order_by(ObjectRow.name, ObjectRow.pk)
                .offset(offset).limit(limit + 1).subquery())
        items = _listed_summaries(session, _LISTED.join(page, page.c.pk == ObjectRow.pk)
                                  .order_by(ObjectRow.name, ObjectRow.pk))
    else:
        items = _listed_summaries(session, _LISTED.where(*where).order_by(ObjectRow.name, ObjectRow.pk)
                                  .offset(offset).limit(limit + 1))
    return ObjectPage(items=tuple(items[:limit]), offset=offset, limit=limit, has_more=len(items) > limit,
                      seen_as=access.label if access else OPERATOR)


FEW_CANDIDATES = 1_000
"""Up to this many trigram candidates (and at least the page's rows), a filtered page is read from
the candidates; past it, from the names in order (each candidate costs a lookup; in order, a
common substring fills the page quickly)."""


def _few(session: Session, name_filter: str, page_rows: int) -> bool:
    """Whether the trigram index has few candidates for ``name_filter`` (``FEW_CANDIDATES``, or the page)."""
    cap = max(FEW_CANDIDATES, page_rows)
    n = session.connection().execute(text(f"SELECT count(*) FROM ({CANDIDATES} LIMIT :cap) AS c"),
                                     {"phrase": fts_phrase(name_filter), "cap": cap + 1}).scalar_one()
    return int(n) <= cap


def count_objects(session: Session, *, type: str | None = None, owner: str | None = None,
                  name_filter: str | None = None, access: Access | None = None) -> int:
    """How many objects the same filters match: without a name filter, from the counts the
    database keeps (``counters``); with one, through the trigram index where it serves."""
    if not name_filter:
        return counters.count(session, type=type, owner=owner, access=access)
    if not type and not owner and access is None and (phrase := _phrase(session, name_filter)) is not None:
        return int(session.connection().execute(text(f"SELECT count(*) FROM ({CANDIDATES}) AS c"),
                                                {"phrase": phrase}).scalar_one())  # the index holds it exactly
    candidates = _candidates(session, name_filter)
    where = _filters(session, type, owner, name_filter, access, by_key=candidates is not None)
    if candidates is not None:
        where.append(candidates)
    stmt = select(func.count()).select_from(ObjectRow).where(*where)
    return int(session.execute(stmt).scalar_one())


def neighbourhood(session: Session, row: ObjectRow, *, kind: str | None = None, limit: int = 50,
                  access: Access | None = None) -> Neighbourhood:
    """``row``'s edges both ways grouped by kind: counts of all, and up to ``limit`` per group (by the
    other end's id). Four statements whatever the number of groups: the counts, every group's page of
    edges (each an ordered index range cut to ``limit``), the other ends' summaries, and the owner."""
    sides = {"out": (EdgeRow.src_id, "src_id", "dst_id"), "in": (EdgeRow.dst_id, "dst_id", "src_id")}
    counted = []
    for direction, (here, _, _) in sides.items():
        where = [here == row.id] + ([EdgeRow.kind == kind] if kind else [])
        if access is not None:  # an edge to an object the reader may not read is not drawn
            there = EdgeRow.dst_id if direction == "out" else EdgeRow.src_id
            where.append(there.in_(select(ObjectRow.id).where(access.clause())))
        counted.append(select(literal(direction).label("direction"), EdgeRow.kind, func.count().label("n"))
                       .where(*where).group_by(EdgeRow.kind))
    counts: dict[str, int] = {}
    groups: dict[str, dict[str, tuple[EdgeView, ...]]] = {"out": {}, "in": {}}
    found = [(str(d), str(k), int(n)) for d, k, n in session.execute(union_all(*counted)).all()]
    members: list[str] = []
    params: dict[str, str | int] = {"id": row.id, "limit": max(0, int(limit))}
    visible = ""
    if access is not None:
        condition, extra = access.sql("v")
        params.update(extra)
        visible = f" AND {{there}} IN (SELECT v.id FROM objects v WHERE {condition})"
    for i, (direction, edge_kind, n) in enumerate(found):
        counts[f"{direction}:{edge_kind}"] = n
        _, here_name, there_name = sides[direction]
        params[f"k{i}"] = edge_kind
        members.append(  # column names from the table above, never from input; the other end's columns joined
            f"SELECT g{i}.direction, g{i}.kind, g{i}.created_at, g{i}.place, o.id, o.type, o.kind, o.name, o.owner_id, "
            f"o.privacy, o.status, o.created_at, o.updated_at FROM (SELECT '{direction}' AS direction, kind, "
            f"{there_name} AS other, created_at, row_number() OVER (ORDER BY {there_name}) AS place FROM edges "
            f"WHERE {here_name} = :id AND kind = :k{i}{visible.format(there=there_name)} ORDER BY {there_name} "
            f"LIMIT :limit) AS g{i} JOIN objects o ON o.id = g{i}.other")
    pages: dict[tuple[str, str], list[tuple[int, float, str]]] = {(d, k): [] for d, k, _ in found}
    if members and params["limit"]:
        edge_rows = session.connection().execute(text(" UNION ALL ".join(members)), params).all()
        others = summaries_of_rows(session, [tuple(r[4:]) for r in edge_rows])
        for r in edge_rows:
            pages[(str(r[0]), str(r[1]))].append((int(r[3]), float(r[2]), str(r[4])))
    for (direction, edge_kind), page in pages.items():  # each group in the database's order of the other ends
        groups[direction][edge_kind] = tuple(
            EdgeView(kind=edge_kind, direction=direction, other=others[other], created_at=at)
            for _, at, other in sorted(page))
    return Neighbourhood(object=summary_of(row, owner_handle(session, row)), outgoing=groups["out"],
                         incoming=groups["in"], counts=counts, seen_as=access.label if access else OPERATOR)
