"""Document lint: the rules the seed states, as findings (never a refusal).

Rules: ``preview-missing``, ``preview-multiline``, ``preview-shape`` (a preview says "When ...,
... because ..."), ``dangling-link`` (a ``[[link]]`` that resolves to nothing), ``repo-private``
(a repo owns only public documents), ``report-outside-push`` (a report not under ``reports/``
of a node), ``listener-owner`` (a node never owns an ongoing ``insights/`` listener),
``listener-shape`` (a listener is a preference delivered at boot, linking ``insights/capture``
and holding an ``Approved insights`` section), ``rule-invalid`` (a stored delivery rule the canvas
would refuse today, such as an ``if`` on an unknown field or with a value no node can have: it
never matches, so it would otherwise fail silently) and ``empty-body``.
"""

from __future__ import annotations

import json

from sqlalchemy import not_, or_, select
from sqlmodel import Session

from .documents import check_rules
from .eligibility import Access
from .errors import DocumentInvalidError
from .models import DocumentRow, LinkRow, ObjectRow
from .objects import owner_ref
from .views import LintFinding

__all__ = ["lint_documents", "LINT_RULES"]

LINT_RULES = (
    "preview-missing",
    "preview-multiline",
    "preview-shape",
    "dangling-link",
    "repo-private",
    "report-outside-push",
    "listener-owner",
    "listener-shape",
    "rule-invalid",
    "empty-body",
)


def _findings(doc: ObjectRow, row: DocumentRow, owner: ObjectRow | None, dangling: list[str],
              full: str) -> list[LintFinding]:
    out: list[LintFinding] = []

    def add(rule: str, message: str) -> None:
        out.append(LintFinding(name=full, rule=rule, message=message))

    preview = (row.preview or "").strip()
    if not preview:
        add("preview-missing", "the document has no preview; add one line: \"When ..., read this because ...\"")
    elif "\n" in preview:
        add("preview-multiline", "the preview spans several lines; keep it to one")
    elif not preview.lower().startswith("when") or "because" not in preview.lower():
        add("preview-shape", "the preview should say when to read it and why (\"When ..., read this because ...\")")
    for target in dangling:
        add("dangling-link", f"[[{target}]] links to nothing")
    if owner is not None and owner.type == "repo" and doc.privacy != "public":
        add("repo-private", f"a repo owns only public documents; this one is {doc.privacy}")
    if row.kind == "report" and (owner is None or owner.type != "node" or not doc.name.startswith("reports/")):
        add("report-outside-push", "report documents are created only by a push, under <node-id>/reports/")
    if doc.name.startswith("insights/") and doc.name != "insights/capture" and row.kind == "preference":
        if owner is not None and owner.type == "node":
            add("listener-owner", "a node never owns an ongoing insight listener; use repo, profile or user")
        rules = json.loads(row.rules or "[]")
        boot = any(r.get("on") == "boot" for r in rules)
        if not boot or "[[insights/capture]]" not in row.body or "Approved insights" not in row.body:
            add("listener-shape", "a listener is delivered on boot, links [[insights/capture]] and has an "
                "'Approved insights' section")
    try:
        stored = json.loads(row.rules or "[]")
    except ValueError:
        stored = row.rules
    try:
        check_rules(stored, full)
    except DocumentInvalidError as exc:
        add("rule-invalid", f"{exc}; it never loads as meant, so fix its rules")
    if not row.body.strip():
        add("empty-body", "the body is empty")
    return out


def lint_documents(session: Session, *, ids: list[str] | None = None, owner_id: str | None = None,
                   limit: int = 10_000, access: Access | None = None) -> list[LintFinding]:
    """Findings for the given documents (by id), an owner's documents, or all of them. For a reader
    (``access``), only the documents it may read, and a link to an object it may not read is
    ``dangling-link`` to it, as a link to nothing is."""
    stmt = select(ObjectRow, DocumentRow).join(DocumentRow, DocumentRow.object_id == ObjectRow.id)
    if access is not None:
        stmt = stmt.where(access.clause())
    if ids is not None:
        stmt = stmt.where(ObjectRow.id.in_(ids))
    if owner_id is not None:
        stmt = stmt.where(ObjectRow.owner_id == owner_id)
    rows = session.execute(stmt.order_by(ObjectRow.name).limit(limit)).all()
    findings: list[LintFinding] = []
    owners: dict[str, tuple[ObjectRow | None, str]] = {}
    for doc, row in rows:
        if doc.owner_id and doc.owner_id not in owners:
            found = session.execute(select(ObjectRow).where(ObjectRow.id == doc.owner_id)).scalar_one_or_none()
            owners[doc.owner_id] = (found, owner_ref(session, found) if found is not None else "?")
        dangling_to = LinkRow.target_id.is_(None)
        if access is not None:
            dangling_to = or_(dangling_to, LinkRow.target_id.in_(select(ObjectRow.id).where(not_(access.clause()))))
        dangling = list(session.execute(select(LinkRow.target).where(
            LinkRow.document_id == doc.id, dangling_to).order_by(LinkRow.id)).scalars())
        owner, ref = owners.get(doc.owner_id or "", (None, "?"))
        findings += _findings(doc, row, owner, dangling, f"{ref}/{doc.name}")
    return findings
