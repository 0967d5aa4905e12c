"""Documents: write, edit (revision-checked in the UPDATE's WHERE), move, history, delete, reports.

A document is an object of type ``document`` plus a ``documents`` row holding its current
revision; every revision is also kept in ``revisions``. Each ``[[link]]`` in a body is stored in
``links`` and, when it resolves, becomes a ``links-to`` edge; a link to nothing stays stored
(dangling, reported by lint) and is attached when a document of that name appears. A link resolves
in its document's owner's view, among what that owner may read (``eligibility``): an object the
owner may not read is nothing to it, until its privacy changes. A reader who may not read a
link's target sees the link as one to nothing (``document_view``), and a name the owner finds
ambiguous only because of an object the reader may not read resolves for that reader; the
``links-to`` edges a reader is shown are those of the links it is shown (``reader_link_edges``).
"""

from __future__ import annotations

import json
import time as _time
from typing import NamedTuple, cast

from sqlalchemy import Executable, Table, bindparam, delete, not_, or_, select, update
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlmodel import Session, col

from .eligibility import Access, view_of_owner
from .errors import (AmbiguousNameError, CanvasError, DocumentInvalidError, NameRefusedError, NameTakenError, ObjectNotFoundError,
                     OwnerInUseError, StaleRevisionError)
from .events import COMMON_LEVELS, add_edge, check_level, ensure_watch, publish_event
from .models import DocumentRow, EdgeRow, EventRow, LinkRow, ObjectRow, RevisionRow, WatchRow
from .names import (DOCUMENT_KINDS, NODE_LIFECYCLES, NODE_MODES, PRIVACY_LEVELS, check_node_kind, check_path,
                    link_targets)
from .objects import (Tx, create_object, find_object, get_row, hidden_ids, new_id, owner_handle, owner_ref, readable_ids,
                      resolve_many, summaries_by_id, summary_from_columns, summary_of)
from .search import index_many, index_object, unindex_object
from .views import DocumentView, EdgeView, Neighbourhood, RevisionView, Rule

__all__ = [
    "RULE_EVENTS",
    "DELIVER_LEVELS",
    "IF_FIELDS",
    "check_rules",
    "condition_problem",
    "check_preview",
    "write_document",
    "write_documents",
    "NewDocument",
    "BatchItemError",
    "edit_document",
    "move_document",
    "delete_document",
    "push_report",
    "release_node_documents",
    "document_view",
    "history",
    "view_of_owner",
    "reader_link_edges",
]

RULE_EVENTS = ("boot", "file-read", "command", "workspace-open", "spawn")
DELIVER_LEVELS = ("content", "preview", "name")
_RULE_KEYS = {"on", "at", "deliver", "if", "match"}
IF_FIELDS: dict[str, tuple[str, ...]] = {"kind": (), "mode": NODE_MODES, "lifecycle": NODE_LIFECYCLES}
"""The node facts a rule's ``if`` may test, with the values each may hold (``kind``: any valid kind name)."""


def check_preview(preview: object, name: str) -> str:
    """The preview, stripped, if present and one line; else ``DocumentInvalidError``."""
    if not isinstance(preview, str) or not preview.strip():
        raise DocumentInvalidError(f"the document {name!r} needs a one-line preview (\"When ..., read this because ...\")")
    if "\n" in preview.strip() or "\r" in preview:
        raise DocumentInvalidError(f"the preview of {name!r} must be one line")
    return preview.strip()


def _value_problem(field: str, value: object) -> str | None:
    if not isinstance(value, str):
        return f"'if' {field} must be a text value or a list of them, not {type(value).__name__} {value!r}"
    if field == "kind":
        try:
            check_node_kind(value)
        except NameRefusedError:
            return f"'if' kind {value!r} is not a valid kind name"
        return None
    allowed = IF_FIELDS[field]
    if value not in allowed:
        return f"'if' {field} {value!r} must be one of {', '.join(allowed)}"
    return None


def condition_problem(cond: object) -> str | None:
    """What is wrong with a rule's ``if``, or None when it is absent or well formed: a mapping of
    ``kind``, ``mode`` or ``lifecycle`` to one text value or a non-empty list of them, each a valid
    kind name or one of the field's values (a malformed ``if`` would never match any node)."""
    if cond is None:
        return None
    if not isinstance(cond, dict):
        return f"'if' must map kind, mode or lifecycle to values, not {type(cond).__name__} {cond!r}"
    for field, wanted in cond.items():
        if field not in IF_FIELDS:
            return f"'if' has the unknown field {field!r} (known: {', '.join(IF_FIELDS)})"
        if isinstance(wanted, list):
            if not wanted:
                return f"'if' {field} is an empty list, which no node matches"
            for value in wanted:
                problem = _value_problem(field, value)
                if problem is not None:
                    return problem
        else:
            problem = _value_problem(field, wanted)
            if problem is not None:
                return problem
    return None


def check_rules(rules: object, name: str) -> list[Rule]:
    """Delivery rules as a list of dicts ``{on, at|deliver, if?, match?}``; else ``DocumentInvalidError``."""
    if rules is None:
        return []
    if isinstance(rules, dict):
        rules = [rules]
    if not isinstance(rules, (list, tuple)):
        raise DocumentInvalidError(f"the rules of {name!r} must be a list of rule objects")
    out: list[Rule] = []
    for i, rule in enumerate(rules):
        if not isinstance(rule, dict):
            raise DocumentInvalidError(f"rule {i + 1} of {name!r} is not an object")
        unknown = set(rule) - _RULE_KEYS
        if unknown:
            raise DocumentInvalidError(f"rule {i + 1} of {name!r} has unknown keys: {', '.join(sorted(unknown))}")
        if rule.get("on") not in RULE_EVENTS:
            raise DocumentInvalidError(f"rule {i + 1} of {name!r}: 'on' must be one of {', '.join(RULE_EVENTS)}")
        level = rule.get("deliver", rule.get("at", "preview"))
        if level not in DELIVER_LEVELS:
            raise DocumentInvalidError(f"rule {i + 1} of {name!r}: the delivery level must be one of {', '.join(DELIVER_LEVELS)}")
        problem = condition_problem(rule.get("if"))
        if problem is not None:
            raise DocumentInvalidError(f"rule {i + 1} of {name!r}: {problem}")
        out.append(cast(Rule, dict(rule)))  # its keys and values were checked above
    return out


def _check_common(name: str, owner: ObjectRow, kind: str, privacy: str) -> None:
    if kind not in DOCUMENT_KINDS:
        raise DocumentInvalidError(f"the kind of {name!r} must be one of {', '.join(DOCUMENT_KINDS)}")
    if privacy not in PRIVACY_LEVELS:
        raise DocumentInvalidError(f"the privacy of {name!r} must be one of {', '.join(PRIVACY_LEVELS)}")
    if owner.type == "repo" and privacy != "public":
        raise DocumentInvalidError(f"{name!r}: a repo owns only public documents (asked for {privacy!r})")
    if owner.type in ("document", "job"):
        raise DocumentInvalidError(f"{name!r}: a {owner.type} cannot own documents")


def _owner_access(session: Session, owner: ObjectRow | None,
                  known: dict[str, Access | None] | None = None) -> Access | None:
    """What a document's links may resolve to: what its owner may read (a node in its whole view);
    ``known`` keeps each owner's answer for the rest of a unit of work (a bulk load asks per document)."""
    from .delivery import reader_access  # delivery reads documents' rules and previews

    if owner is None:
        return None
    if known is None:
        return reader_access(session, owner.id)
    if owner.id not in known:
        known[owner.id] = reader_access(session, owner.id)
    return known[owner.id]


def _resolve(session: Session, target: str, owner: ObjectRow | None, access: Access | None) -> str | None:
    """What ``[[target]]`` of a document of ``owner`` names: in the owner's view and among what the
    owner may read (``access``), so an object it may not read neither answers nor makes the name
    ambiguous."""
    try:
        return find_object(session, target, view_of_owner(owner), access=access).id
    except (ObjectNotFoundError, NameRefusedError, AmbiguousNameError):
        return None  # stored as a dangling link (lint reports it) until one object answers


def _store_links(tx: Tx, doc: ObjectRow, owner: ObjectRow | None, body: str, *, new: bool = False) -> None:
    s = tx.session
    if not new:  # a document created in this unit of work has no links yet
        s.execute(delete(LinkRow).where(LinkRow.document_id == doc.id))
        s.execute(delete(EdgeRow).where(EdgeRow.src_id == doc.id, EdgeRow.kind == "links-to"))
    targets = link_targets(body)
    access = _owner_access(s, owner, tx.readers) if targets else None
    for target in targets:
        target_id = _resolve(s, target, owner, access)
        s.add(LinkRow(document_id=doc.id, target=target, target_id=target_id))
        if target_id is not None:
            add_edge(s, doc.id, target_id, "links-to", tx.now)
    s.flush()


def _heal_links(tx: Tx, doc: ObjectRow, owner: ObjectRow | None) -> None:
    s = tx.session
    names = {doc.name}
    if owner is not None:
        handle = owner.handle or owner.id
        names |= {f"{handle}/{doc.name}", f"{owner.type}:{handle}/{doc.name}", f"{owner.id}/{doc.name}"}
    dangling = s.execute(select(LinkRow).where(LinkRow.target.in_(names), LinkRow.target_id.is_(None))).scalars().all()
    for link in dangling:
        source = get_row(s, link.document_id)
        owner = get_row(s, source.owner_id) if source and source.owner_id else None
        if _resolve(s, link.target, owner, _owner_access(s, owner, tx.readers)) == doc.id:
            link.target_id = doc.id
            add_edge(s, link.document_id, doc.id, "links-to", tx.now)
    s.flush()


def _actor_touch(tx: Tx, actor_id: str | None, doc: ObjectRow, revision: int) -> None:
    if actor_id and actor_id != doc.id and get_row(tx.session, actor_id) is not None:
        ensure_watch(tx.session, actor_id, doc.id, tx.now, read_revision=revision)
        add_edge(tx.session, actor_id, doc.id, "acted-on", tx.now)


def write_document(tx: Tx, *, owner: ObjectRow, path: str, preview: str, body: str, summary: str | None = None,
                   kind: str = "knowledge", privacy: str = "public", rules: object = None,
                   actor_id: str | None = None, allow_report: bool = False) -> ObjectRow:
    """Create a new document ``<owner>/<path>`` at revision 1."""
    check_path(path)
    full = f"{owner_ref(tx.session, owner)}/{path}"
    preview = check_preview(preview, full)
    if kind == "report" and not allow_report:
        raise DocumentInvalidError(f"{full!r}: report documents are created only by a push")
    _check_common(full, owner, kind, privacy)
    rule_list = check_rules(rules, full)
    body = body if isinstance(body, str) else ""
    taken = tx.session.execute(select(ObjectRow.id).where(
        ObjectRow.owner_id == owner.id, ObjectRow.name == path, ObjectRow.type == "document"
    )).first()
    if taken is not None:
        raise NameTakenError(f"{full!r} already exists; edit it instead of writing it again")
    doc = create_object(tx, type="document", name=path, owner_id=owner.id, kind=kind, privacy=privacy)
    rules_json = json.dumps(rule_list, sort_keys=True)
    tx.session.add(DocumentRow(object_id=doc.id, kind=kind, preview=preview, summary=summary, body=body,
                               rules=rules_json, revision=1, updated_by=actor_id))
    tx.session.add(RevisionRow(document_id=doc.id, revision=1, name=full, kind=kind, preview=preview,
                               summary=summary, body=body, rules=rules_json, author=actor_id, at=tx.now))
    tx.session.flush()
    _store_links(tx, doc, owner, body, new=True)
    _heal_links(tx, doc, owner)
    index_object(tx.session, doc.pk or 0, full, preview, body, new=True)
    publish_event(tx.session, doc, "created", tx.now, actor_id=actor_id, data={"revision": 1}, watched=False)
    _actor_touch(tx, actor_id, doc, 1)
    tx.change("document.written", doc.id, name=full, revision=1)
    return doc


class NewDocument(NamedTuple):
    """One document of ``write_documents``: ``write_document``'s arguments."""

    owner: ObjectRow
    path: str
    preview: str
    body: str = ""
    summary: str | None = None
    kind: str = "knowledge"
    privacy: str = "public"
    rules: object = None


class BatchItemError(CanvasError):
    """``write_documents`` refused the item at ``position``; nothing of the batch was written."""

    def __init__(self, position: int, error: CanvasError) -> None:
        super().__init__(str(error))
        self.position = position
        self.error = error


def _insert(session: Session, table: Table, rows: list[dict[str, object]]) -> None:
    if rows:
        session.execute(table.insert(), rows)


def _insert_edges(session: Session, rows: list[dict[str, object]]) -> None:
    """``add_edge`` for many edges in one statement: an edge that exists already is left as it is."""
    if not rows:
        return
    table = cast(Table, EdgeRow.__table__)
    if session.get_bind().dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert  # loaded with a PostgreSQL engine only

        statement: Executable = pg_insert(table).on_conflict_do_nothing(index_elements=["src_id", "kind", "dst_id"])
    else:
        statement = sqlite_insert(table).on_conflict_do_nothing(index_elements=["src_id", "kind", "dst_id"])
    session.execute(statement, rows)


def write_documents(tx: Tx, items: list[NewDocument], *, actor_id: str | None = None) -> list[DocumentView]:
    """Create many documents at revision 1 in this unit of work, as ``write_document`` does each
    (the same rows, events, search entries, links and changes), but by table: each table takes
    the batch's rows in one statement, and links are resolved for the whole batch at once after
    every document exists, so a link to a document later in the batch resolves without waiting
    for the healing pass (``objects.resolve_many``). The first refused item raises
    ``BatchItemError`` with its position, before anything is written."""
    s = tx.session
    refs: dict[str, str] = {}
    checked = []
    names: dict[tuple[str, str], int] = {}
    refused: BatchItemError | None = None
    for i, item in enumerate(items):
        try:
            check_path(item.path)
            if item.owner.id not in refs:
                refs[item.owner.id] = owner_ref(s, item.owner)
            full = f"{refs[item.owner.id]}/{item.path}"
            preview = check_preview(item.preview, full)
            if item.kind == "report":
                raise DocumentInvalidError(f"{full!r}: report documents are created only by a push")
            _check_common(full, item.owner, item.kind, item.privacy)
            rules_json = json.dumps(check_rules(item.rules, full), sort_keys=True)
            if (item.owner.id, item.path) in names:
                raise NameTakenError(f"{full!r} already exists; edit it instead of writing it again")
        except CanvasError as exc:
            refused = BatchItemError(i, exc)  # unless an item before it is taken (below)
            break
        names[(item.owner.id, item.path)] = i
        checked.append((item, full, preview, rules_json, item.body if isinstance(item.body, str) else ""))
    by_owner: dict[str, list[str]] = {}
    for owner_id_, path in names:
        by_owner.setdefault(owner_id_, []).append(path)
    for owner_id_, paths in by_owner.items():
        for part in range(0, len(paths), 500):
            taken = s.execute(select(ObjectRow.name).where(
                ObjectRow.owner_id == owner_id_, ObjectRow.type == "document",
                ObjectRow.name.in_(paths[part:part + 500]))).scalars().all()
            if taken:
                i = min(names[(owner_id_, name)] for name in taken)
                exc = NameTakenError(f"{checked[i][1]!r} already exists; edit it instead of writing it again")
                raise BatchItemError(i, exc)
    if refused is not None:
        raise refused
    if not checked:
        return []
    now = tx.now
    ids = [new_id("doc") for _ in checked]
    _insert(s, cast(Table, ObjectRow.__table__), [
        {"id": id_, "type": "document", "kind": item.kind, "name": item.path, "handle": None,
         "owner_id": item.owner.id, "privacy": item.privacy, "status": "", "created_at": now, "updated_at": now}
        for id_, (item, *_rest) in zip(ids, checked)])
    pks: dict[str, int] = {}
    for part in range(0, len(ids), 500):
        pks.update(s.execute(select(ObjectRow.id, ObjectRow.pk).where(ObjectRow.id.in_(ids[part:part + 500]))).all())
    _insert(s, cast(Table, DocumentRow.__table__), [
        {"object_id": id_, "kind": item.kind, "preview": preview, "summary": item.summary, "body": body,
         "rules": rules_json, "revision": 1, "updated_by": actor_id}
        for id_, (item, _full, preview, rules_json, body) in zip(ids, checked)])
    _insert(s, cast(Table, RevisionRow.__table__), [
        {"document_id": id_, "revision": 1, "name": full, "kind": item.kind, "preview": preview,
         "summary": item.summary, "body": body, "rules": rules_json, "author": actor_id, "at": now}
        for id_, (item, full, preview, rules_json, body) in zip(ids, checked)])
    # links: every document of the batch exists now, so each link resolves as it will stay
    wanted: dict[str, list[tuple[str, str]]] = {}
    owners = {item.owner.id: item.owner for item, *_ in checked}
    for id_, (item, _full, _preview, _rules_json, body) in zip(ids, checked):
        for target in link_targets(body):
            wanted.setdefault(item.owner.id, []).append((id_, target))
    links: list[dict[str, object]] = []
    edges: list[dict[str, object]] = []
    for owner_id_, pairs in wanted.items():  # each in its owner's view, among what the owner may read
        owner = owners[owner_id_]
        found = resolve_many(s, [t for _, t in pairs], view_of_owner(owner), access=_owner_access(s, owner, tx.readers))
        for doc_id, target in pairs:
            links.append({"document_id": doc_id, "target": target, "target_id": found[target]})
            if found[target] is not None:
                edges.append({"src_id": doc_id, "dst_id": found[target], "kind": "links-to", "created_at": now})
    _insert(s, cast(Table, LinkRow.__table__), links)
    edges += _heal_many(tx, {id_: (item.owner, item.path) for id_, (item, *_r) in zip(ids, checked)})
    _insert_edges(s, edges)
    index_many(s, [{"pk": pks[id_], "name": full, "preview": preview, "body": body}
                   for id_, (_item, full, preview, _rules_json, body) in zip(ids, checked)])
    level = check_level(COMMON_LEVELS.get("created", 3))
    created = json.dumps({"revision": 1}, sort_keys=True)
    _insert(s, cast(Table, EventRow.__table__), [
        {"object_id": id_, "type": "created", "level": level, "actor_id": actor_id, "at": now, "data": created}
        for id_ in ids])
    if actor_id and get_row(s, actor_id) is not None:
        for id_ in ids:
            if id_ != actor_id:
                ensure_watch(s, actor_id, id_, now, read_revision=1)
        _insert_edges(s, [{"src_id": actor_id, "dst_id": id_, "kind": "acted-on", "created_at": now} for id_ in ids])
    for id_, (item, full, *_rest) in zip(ids, checked):
        tx.change("object.created", id_, type="document", name=item.path)
        tx.change("document.written", id_, name=full, revision=1)
    stored: dict[str, list[tuple[str, str | None]]] = {}
    for link in links:
        stored.setdefault(str(link["document_id"]), []).append((str(link["target"]), link["target_id"]))  # type: ignore[arg-type]
    return [DocumentView(object=summary_from_columns(id_, "document", item.kind, item.path, item.owner.id, item.privacy,
                                                     "", now, now, refs[item.owner.id]),
                         kind=item.kind, preview=preview, summary=item.summary, body=body, rules=_rules(rules_json),
                         revision=1, links=tuple(stored.get(id_, ())))
            for id_, (item, _full, preview, rules_json, body) in zip(ids, checked)]


def _heal_many(tx: Tx, new: dict[str, tuple[ObjectRow, str]]) -> list[dict[str, object]]:
    """``_heal_links`` for many new documents at once: dangling links elsewhere that now resolve to
    one of them are attached; returns the ``links-to`` edges to add."""
    s = tx.session
    names: list[str] = []
    for owner, path in new.values():
        handle = owner.handle or owner.id
        names += [path, f"{handle}/{path}", f"{owner.type}:{handle}/{path}", f"{owner.id}/{path}"]
    dangling: list[tuple[int, str, str]] = []
    unique = list(dict.fromkeys(names))
    for part in range(0, len(unique), 500):
        dangling += s.execute(select(LinkRow.id, LinkRow.document_id, LinkRow.target).where(
            LinkRow.target.in_(unique[part:part + 500]), LinkRow.target_id.is_(None))).all()
    if not dangling:
        return []
    sources = list({d for _, d, _ in dangling})
    owner_of: dict[str, str | None] = {}
    for part in range(0, len(sources), 500):
        owner_of.update(s.execute(select(ObjectRow.id, ObjectRow.owner_id).where(
            ObjectRow.id.in_(sources[part:part + 500]))).all())
    groups: dict[str | None, list[tuple[int, str, str]]] = {}
    for link in dangling:
        groups.setdefault(owner_of.get(link[1]), []).append(link)
    edges: list[dict[str, object]] = []
    healed: list[dict[str, object]] = []
    for owner_id_, group in groups.items():
        owner = get_row(s, owner_id_) if owner_id_ else None
        found = resolve_many(s, [t for _, _, t in group], view_of_owner(owner),
                             access=_owner_access(s, owner, tx.readers))
        for link_id, source, target in group:
            target_id = found[target]
            if target_id in new:
                healed.append({"link_id": link_id, "found": target_id})
                edges.append({"src_id": source, "dst_id": target_id, "kind": "links-to", "created_at": tx.now})
    if healed:
        table = cast(Table, LinkRow.__table__)
        s.connection().execute(table.update().where(table.c.id == bindparam("link_id"))
                               .values(target_id=bindparam("found")), healed)
    return edges


def edit_document(tx: Tx, doc: ObjectRow, *, actor_id: str | None, base_revision: int | None = None,
                  body: str | None = None, preview: str | None = None, summary: str | None = None,
                  rules: object = None, privacy: str | None = None, kind: str | None = None) -> int:
    """Save a new revision made from ``base_revision`` (default: the actor's last read); returns it."""
    s = tx.session
    owner = get_row(s, doc.owner_id) if doc.owner_id else None
    full = f"{owner_ref(s, owner) if owner else ''}/{doc.name}"
    current = s.execute(select(DocumentRow).where(DocumentRow.object_id == doc.id)).scalar_one()
    if base_revision is None and actor_id:
        base_revision = s.execute(select(WatchRow.last_read_revision).where(
            WatchRow.watcher_id == actor_id, WatchRow.object_id == doc.id)).scalar_one_or_none()
    if base_revision is None:
        raise StaleRevisionError(
            f"edit of {full!r} refused: it was not read first; read it, then edit from that revision",
            name=full, base_revision=0, current_revision=current.revision, body=body)
    new_kind = kind or current.kind
    new_privacy = privacy or doc.privacy
    new_preview = check_preview(preview if preview is not None else current.preview, full)
    if new_kind == "report" and current.kind != "report":
        raise DocumentInvalidError(f"{full!r}: report documents are created only by a push")
    if owner is not None:
        _check_common(full, owner, new_kind, new_privacy)
    rules_json = json.dumps(check_rules(rules, full), sort_keys=True) if rules is not None else current.rules
    new_body = body if body is not None else current.body
    new_summary = summary if summary is not None else current.summary
    result = s.execute(
        update(DocumentRow)
        .where(DocumentRow.object_id == doc.id, DocumentRow.revision == base_revision)
        .values(kind=new_kind, preview=new_preview, summary=new_summary, body=new_body, rules=rules_json,
                revision=DocumentRow.revision + 1, updated_by=actor_id)
        .execution_options(synchronize_session=False)
    )
    if result.rowcount != 1:
        now_rev = s.execute(select(DocumentRow.revision).where(DocumentRow.object_id == doc.id)).scalar_one()
        raise StaleRevisionError(
            f"edit of {full!r} refused: it was made from revision {base_revision} but the document is at "
            f"revision {now_rev}; read it again and reapply your change",
            name=full, base_revision=base_revision, current_revision=now_rev, body=body)
    revision = base_revision + 1
    s.add(RevisionRow(document_id=doc.id, revision=revision, name=full, kind=new_kind, preview=new_preview,
                      summary=new_summary, body=new_body, rules=rules_json, author=actor_id, at=tx.now))
    opened = new_privacy != doc.privacy
    doc.privacy, doc.kind, doc.updated_at = new_privacy, new_kind, tx.now
    s.flush()
    if opened:  # links that could not see it may resolve to it now
        _heal_links(tx, doc, owner)
    if body is not None:
        _store_links(tx, doc, owner, new_body)
    index_object(s, doc.pk or 0, full, new_preview, new_body)
    publish_event(s, doc, "edited", tx.now, actor_id=actor_id, data={"revision": revision})
    _actor_touch(tx, actor_id, doc, revision)
    tx.change("document.edited", doc.id, name=full, revision=revision)
    return revision


def move_document(tx: Tx, doc: ObjectRow, *, to_path: str | None, to_owner: ObjectRow | None,
                  actor_id: str | None) -> None:
    """Rename and/or re-own ``doc``; its id, revisions and links stay."""
    s = tx.session
    old_owner = get_row(s, doc.owner_id) if doc.owner_id else None
    owner = to_owner or old_owner
    path = check_path(to_path or doc.name)
    assert owner is not None
    full = f"{owner_ref(s, owner)}/{path}"
    _check_common(full, owner, doc.kind, doc.privacy)
    clash = s.execute(select(ObjectRow.id).where(
        ObjectRow.owner_id == owner.id, ObjectRow.name == path, ObjectRow.type == "document", ObjectRow.id != doc.id
    )).first()
    if clash is not None:
        raise NameTakenError(f"cannot move to {full!r}: that name is taken")
    old_full = f"{owner_ref(s, old_owner) if old_owner else ''}/{doc.name}"
    doc.name, doc.owner_id, doc.updated_at = path, owner.id, tx.now
    s.flush()
    current = s.execute(select(DocumentRow).where(DocumentRow.object_id == doc.id)).scalar_one()
    index_object(s, doc.pk or 0, full, current.preview, current.body)
    _heal_links(tx, doc, owner)
    publish_event(s, doc, "moved", tx.now, actor_id=actor_id, data={"from": old_full, "to": full})
    _actor_touch(tx, actor_id, doc, current.revision)
    tx.change("document.moved", doc.id, name=full, previous=old_full)


def delete_document(tx: Tx, doc: ObjectRow, *, actor_id: str | None) -> None:
    """Tell the watchers, then delete ``doc`` with its revisions, links, edges and index entry."""
    handle = owner_handle(tx.session, doc)
    publish_event(tx.session, doc, "deleted", tx.now, actor_id=actor_id)
    unindex_object(tx.session, doc.pk or 0)
    tx.session.delete(doc)
    tx.session.flush()
    tx.change("object.deleted", doc.id, type="document", name=f"{handle}/{doc.name}")


def release_node_documents(tx: Tx, node: ObjectRow, *, actor_id: str | None) -> tuple[int, int]:
    """Before a node goes: delete its documents, except those a document it does not own links to.

    Kept documents move to the node's own owner (keeping id and links); returns ``(deleted, kept)``.
    """
    s = tx.session
    docs = s.execute(select(ObjectRow).where(ObjectRow.owner_id == node.id, ObjectRow.type == "document")).scalars().all()
    ids = [d.id for d in docs]
    kept_ids = set(s.execute(select(LinkRow.target_id).join(ObjectRow, ObjectRow.id == LinkRow.document_id).where(
        LinkRow.target_id.in_(ids), ObjectRow.owner_id != node.id)).scalars()) if ids else set()
    heir = get_row(s, node.owner_id) if node.owner_id else None
    if kept_ids and heir is None:
        raise OwnerInUseError(f"{node.name!r} owns documents other documents link to, and has no owner to keep them")
    for doc in docs:
        if doc.id in kept_ids:
            assert heir is not None
            move_document(tx, doc, to_path=doc.name, to_owner=heir, actor_id=actor_id)
        else:
            delete_document(tx, doc, actor_id=actor_id)
    return len(docs) - len(kept_ids), len(kept_ids)


def push_report(tx: Tx, node: ObjectRow, *, label: str, preview: str, body: str) -> ObjectRow:
    """A ``report`` document ``<node-id>/reports/<ts>-<id>-<label>`` and the node's ``report.update``."""
    stamp = _time.strftime("%Y%m%dT%H%M%SZ", _time.gmtime(tx.now))
    short = node.id.rsplit("_", 1)[-1][:8]
    path = f"reports/{stamp}-{short}-{label}"
    n = 1
    while tx.session.execute(select(ObjectRow.id).where(ObjectRow.owner_id == node.id, ObjectRow.name == path)).first():
        n += 1
        path = f"reports/{stamp}-{short}-{label}-{n}"
    doc = write_document(tx, owner=node, path=path, preview=preview, body=body, kind="report",
                         actor_id=node.id, allow_report=True)
    publish_event(tx.session, node, "report.update", tx.now, actor_id=node.id,
                  data={"report": doc.id, "name": f"{owner_ref(tx.session, node)}/{path}"},
                  summary=f"{node.name}: report {label}")
    return doc


def _rules(text: str) -> tuple[Rule, ...]:
    return tuple(json.loads(text or "[]"))


def document_view(session: Session, doc: ObjectRow, access: Access | None = None) -> DocumentView:
    """The current revision of ``doc`` as a read model. For a reader (``access``), a link to an object
    it may not read shows ``None``, as a link to nothing does: the difference would say it exists."""
    row = session.execute(select(DocumentRow).where(DocumentRow.object_id == doc.id)
                          .execution_options(populate_existing=True)).scalar_one()
    links = session.execute(select(LinkRow.target, LinkRow.target_id).where(LinkRow.document_id == doc.id)
                            .order_by(LinkRow.id)).all()
    if access is not None:
        readable = readable_ids(session, [str(i) for _, i in links if i is not None], access)
        known: dict[str, Access | None] = {}
        moot = _names_none_hides(session, [t for t, i in links if i not in readable], access)
        links = [(t, i if i in readable else None if t in moot else _reader_target(session, doc, t, access, known))
                 for t, i in links]
    return DocumentView(object=summary_of(doc, owner_handle(session, doc)), kind=row.kind, preview=row.preview,
                        summary=row.summary, body=row.body, rules=_rules(row.rules), revision=row.revision,
                        links=tuple((t, i) for t, i in links))


def _names_none_hides(session: Session, targets: list[str], access: Access) -> set[str]:
    """The link texts of ``targets`` that no object hidden from the reader answers to (by its name, or
    a full name's path): the reader resolves those as the owner did, to nothing. One statement."""
    if not targets:
        return set()
    names = {t: {t, t.partition("/")[2]} - {""} for t in targets}
    wanted = sorted(set().union(*names.values()))
    hidden = set(session.execute(select(ObjectRow.name).where(ObjectRow.name.in_(wanted), not_(access.clause())))
                 .scalars())
    return {t for t, n in names.items() if not n & hidden}


def _reader_target(session: Session, doc: ObjectRow, target: str, access: Access,
                   known: dict[str, Access | None]) -> str | None:
    """What ``[[target]]`` of ``doc`` names to a reader when it names nothing the reader may read: the
    name resolved again as if what the reader may not read did not exist (an object it may not read
    may have made the name ambiguous, or come first in the owner's view), kept only if the
    document's owner may read it too; else ``None``, a link to nothing."""
    owner = get_row(session, doc.owner_id) if doc.owner_id else None
    try:
        found = find_object(session, target, view_of_owner(owner), access=access)
    except (ObjectNotFoundError, NameRefusedError, AmbiguousNameError):
        return None
    mine = _owner_access(session, owner, known)
    return found.id if mine is None or mine.allows(found.id, found.owner_id, found.privacy) else None


def history(session: Session, doc: ObjectRow, *, limit: int = 100) -> list[RevisionView]:
    """The document's revisions, newest first."""
    rows = session.execute(select(RevisionRow).where(RevisionRow.document_id == doc.id)
                           .order_by(RevisionRow.revision.desc()).limit(limit)).scalars().all()
    return [RevisionView(revision=r.revision, name=r.name, kind=r.kind, preview=r.preview, summary=r.summary,
                         body=r.body, rules=_rules(r.rules), author=r.author, at=r.at) for r in rows]


def reader_link_edges(session: Session, row: ObjectRow, hood: Neighbourhood, *, kind: str | None, limit: int,
                      access: Access) -> Neighbourhood:
    """``hood`` (``row``'s edges as ``access`` may see them) with its ``links-to`` edges those of the
    links that reader is shown. Stored edges follow what each document's owner resolved; a reader may
    resolve more (``document_view``: a name the owner found ambiguous because of an object the reader
    may not read names the one it may read). So a document's outgoing ``links-to`` edges are worked
    out from its links as the reader sees them, and an object's incoming ones gain each readable
    document whose link the reader resolves to it though no edge is stored. A derived edge is dated
    when its link was written or its target created, whichever is later."""
    if kind not in (None, "links-to"):
        return hood
    limit = max(0, int(limit))
    outgoing, incoming, counts = dict(hood.outgoing), dict(hood.incoming), dict(hood.counts)
    if row.type == "document":
        targets = sorted({i for _, i in document_view(session, row, access).links if i is not None})
        shown = targets[:limit]
        stored: dict[str, float] = dict(session.execute(select(col(EdgeRow.dst_id), col(EdgeRow.created_at)).where(
            col(EdgeRow.src_id) == row.id, col(EdgeRow.kind) == "links-to", col(EdgeRow.dst_id).in_(shown))).all()) if shown else {}
        others = summaries_by_id(session, shown)
        written = _links_written(session, row) if set(shown) - set(stored) else 0.0
        _set_group(outgoing, counts, "out", len(targets), tuple(
            EdgeView(kind="links-to", direction="out", other=others[t],
                     created_at=stored[t] if t in stored else max(written, others[t].created_at))
            for t in shown if t in others))
    extra = _reader_sources(session, row, access)
    if extra:
        have = {e.other.id: e for e in incoming.get("links-to", ())}
        others = summaries_by_id(session, sorted(extra))
        for source in sorted(extra):
            doc = get_row(session, source)
            if doc is not None and source in others:
                have[source] = EdgeView(kind="links-to", direction="in", other=others[source],
                                        created_at=max(_links_written(session, doc), row.created_at))
        _set_group(incoming, counts, "in", counts.get("in:links-to", 0) + len(extra),
                   tuple(have[k] for k in sorted(have))[:limit])
    return Neighbourhood(object=hood.object, outgoing=outgoing, incoming=incoming, counts=counts, seen_as=hood.seen_as)


def _set_group(groups: dict[str, tuple[EdgeView, ...]], counts: dict[str, int], direction: str, n: int,
               page: tuple[EdgeView, ...]) -> None:
    if n:
        groups["links-to"], counts[f"{direction}:links-to"] = page, n
    else:
        groups.pop("links-to", None)
        counts.pop(f"{direction}:links-to", None)


def _links_written(session: Session, doc: ObjectRow) -> float:
    """When ``doc``'s links were written: the first of its latest revisions that hold its current body."""
    at = doc.created_at
    body: str | None = None
    for text, when in session.execute(select(col(RevisionRow.body), col(RevisionRow.at)).where(col(RevisionRow.document_id) == doc.id)
                                      .order_by(col(RevisionRow.revision).desc())).all():
        if body is not None and text != body:
            break
        body, at = text, when
    return float(at)


def _reader_sources(session: Session, row: ObjectRow, access: Access) -> set[str]:
    """The documents the reader may read with a link it resolves to ``row`` though the link's stored
    target is not ``row`` (nothing, or an object the reader may not read): incoming ``links-to``
    edges only that reader has."""
    names = {row.id, row.name}
    if row.handle:
        names |= {row.handle, f"{row.type}:{row.handle}"}
    owner = get_row(session, row.owner_id) if row.owner_id else None
    if row.type == "document" and owner is not None:
        handle = owner.handle or owner.id
        names |= {f"{handle}/{row.name}", f"{owner.type}:{handle}/{row.name}", f"{owner.id}/{row.name}"}
    found = session.execute(
        select(col(LinkRow.document_id), col(LinkRow.target), col(LinkRow.target_id)).join(ObjectRow, col(ObjectRow.id) == col(LinkRow.document_id))
        .where(col(LinkRow.target).in_(sorted(n for n in names if n)), access.clause(),
               or_(col(LinkRow.target_id).is_(None), col(LinkRow.target_id) != row.id))).all()
    if not found:
        return set()
    hidden = hidden_ids(session, sorted({str(t) for _, _, t in found if t is not None}), access)
    stored = set(session.execute(select(col(EdgeRow.src_id)).where(
        col(EdgeRow.dst_id) == row.id, col(EdgeRow.kind) == "links-to",
        col(EdgeRow.src_id).in_(sorted({d for d, _, _ in found})))).scalars())
    sources = sorted({d for d, _, t in found if d not in stored and (t is None or t in hidden)})
    out: set[str] = set()
    for source in sources:  # the links as ``document_view`` shows them to this reader, so both agree
        doc = get_row(session, source)
        if doc is not None and any(i == row.id for _, i in document_view(session, doc, access).links):
            out.add(source)
    return out
