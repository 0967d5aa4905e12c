"""Documents: write, edit (revision-checked in the UPDATE's WHERE), move, history, delete, reports.

A document is an object of type ``document`` plus a ``documents`` row holding its current
revision; every revision is also kept in ``revisions``. Each ``[[link]]`` in a body is stored in
``links`` and, when it resolves, becomes a ``links-to`` edge; a link to nothing stays stored
(dangling, reported by lint) and is attached when a document of that name appears. A link resolves
in its document's owner's view, among what that owner may read (``eligibility``): an object the
owner may not read is nothing to it, until its privacy changes. A reader who may not read a
link's target sees the link as one to nothing (``document_view``).
"""

from __future__ import annotations

import json
import time as _time
from typing import cast

from sqlalchemy import delete, not_, select, update
from sqlmodel import Session

from .eligibility import Access, view_of_owner
from .errors import (AmbiguousNameError, DocumentInvalidError, NameRefusedError, NameTakenError, ObjectNotFoundError,
                     OwnerInUseError, StaleRevisionError)
from .events import add_edge, ensure_watch, publish_event
from .models import DocumentRow, EdgeRow, LinkRow, ObjectRow, RevisionRow, WatchRow
from .names import DOCUMENT_KINDS, PRIVACY_LEVELS, check_path, link_targets
from .objects import Tx, create_object, find_object, get_row, owner_handle, owner_ref, readable_ids, summary_of
from .search import index_object, unindex_object
from .views import DocumentView, RevisionView, Rule

__all__ = [
    "RULE_EVENTS",
    "DELIVER_LEVELS",
    "check_rules",
    "check_preview",
    "write_document",
    "edit_document",
    "move_document",
    "delete_document",
    "push_report",
    "release_node_documents",
    "document_view",
    "history",
    "view_of_owner",
]

RULE_EVENTS = ("boot", "file-read", "command", "workspace-open", "spawn")
DELIVER_LEVELS = ("content", "preview", "name")
_RULE_KEYS = {"on", "at", "deliver", "if", "match"}


def check_preview(preview: object, name: str) -> str:
    """The preview, stripped, if present and one line; else ``DocumentInvalidError``."""
    if not isinstance(preview, str) or not preview.strip():
        raise DocumentInvalidError(f"the document {name!r} needs a one-line preview (\"When ..., read this because ...\")")
    if "\n" in preview.strip() or "\r" in preview:
        raise DocumentInvalidError(f"the preview of {name!r} must be one line")
    return preview.strip()


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
        cond = rule.get("if")
        if cond is not None and (not isinstance(cond, dict) or not all(isinstance(k, str) for k in cond)):
            raise DocumentInvalidError(f"rule {i + 1} of {name!r}: 'if' must map fields to values")
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
