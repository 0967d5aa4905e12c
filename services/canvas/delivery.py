"""Delivery, evaluated: which documents a node loads for an event, at which level, and why not.

The owner decides *eligibility* and a rule decides *loading* (the seed). For a node and an event
(``boot``, or ``workspace-open``), every document whose owner is in the node's view is weighed:

1. **privacy**: the node must be allowed to read it (``eligibility.Access``);
2. **shadowed**: of documents sharing a name, the one whose owner is nearest in the view wins
   (own node, repos nearest first, profile, app, person, plugins, ``crtr`` last);
3. **no rule**: it needs a rule ``on: <event>``;
4. **if**: a rule's ``if`` (``{kind, mode, lifecycle}``, each a value or a list of values) must
   match the node; a sub-kind ``review/security`` matches ``kind: review``; when several rules
   match, the widest level wins;
5. **capped**: on ``boot`` and ``workspace-open``, the node's profile limit for the document's
   project (a repo by handle or ``repo:<handle>``; another owner by ``<type>:<handle>``) lowers the
   level, and ``none`` drops it; the profile's own documents are never capped.

A document whose owner is not in the view at all is **not eligible** (unless privacy already
keeps it from the node). Load order: the widest owner first (``crtr``, plugins, the person, the
app, the profile, repos farthest first, the node last), so narrower guidance comes later and
refines what came before; by name within one owner. At ``content`` level each ``[[link]]`` of the
body attaches its target's preview (targets the node may read).

Asked by a reader (an ``asker``) rather than the operator, the answer is the one that reader would
get if what it may not read did not exist: such a document is not named, and it shadows nothing (a
document it would shadow reads as loaded, or with its own reason).
"""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NamedTuple

from sqlalchemy import bindparam, select
from sqlmodel import Session

from .eligibility import Access, access_for, describe, view_of_owner
from .errors import CanvasError
from .models import DocumentRow, NodeRow, ObjectRow
from .names import ReaderView
from .objects import OWNER, OWNER_REF, get_row, summaries_by_id
from .plugins import plugins_of
from .profiles import LIMIT_RANK, limit_of, purview_from, purview_of
from .rule_index import driver_rows, one_of, rules_by_document
from .views import (BootContext, BootItem, JsonValue, LoadVerdict, NotLoaded, ObjectSummary, Rule,
                    positional_builder)

__all__ = ["REASONS", "DELIVERY_EVENTS", "node_view_of", "reader_view_of_object", "reader_access", "boot_context", "explain", "who_loads"]

REASONS = ("loaded", "privacy", "not_eligible", "shadowed", "no_rule", "if_mismatch", "capped")
"""Why a document is or is not loaded, as a stable code."""
DELIVERY_EVENTS = ("boot", "workspace-open")
"""The events a node's automatic context is evaluated for (the profile limit applies to both)."""
_LEVELS = ("name", "preview", "content")
_MAX_LINKS = 50

# The read models built for every document a node weighs, by position and without the frozen guard's
# per-field cost (``positional_builder``): a boot context builds one to three for each of them.
_summary = positional_builder(ObjectSummary)
_not_loaded = positional_builder(NotLoaded)
_item = positional_builder(BootItem)


# The fixed lookups of one evaluation, built once: a statement made per call costs more to build and key
# for SQLAlchemy's cache than the database takes to answer it.
_OWNERS = select(OWNER.id, OWNER.type, OWNER.handle, OWNER_REF).where(OWNER.id.in_(bindparam("ids", expanding=True)))


def _chunks(ids: list[str], size: int = 5_000) -> Iterator[list[str]]:
    """``ids`` in pieces small enough for one statement's parameters on either engine."""
    for i in range(0, len(ids), size):
        yield ids[i:i + size]


class _NodeFacts(NamedTuple):
    """What an evaluation reads of a node: its object's id, name and owner, and its shape."""

    id: str
    name: str
    owner_id: str | None
    kind: str
    mode: str
    lifecycle: str
    profile: str | None
    parent_id: str | None
    owner_type: str | None = None
    """The owner's type and handle, when read with the node (else looked up when needed)."""
    owner_handle: str | None = None


_NODE_FACTS = ("SELECT o.id, o.name, o.owner_id, n.kind, n.mode, n.lifecycle, n.profile, n.parent_id, w.type, w.handle "
               "FROM objects o JOIN nodes n ON n.object_id = o.id LEFT JOIN objects w ON w.id = o.owner_id WHERE o.id = ?")


def _facts(node: ObjectRow, shape: NodeRow) -> _NodeFacts:
    return _NodeFacts(node.id, node.name, node.owner_id, shape.kind, shape.mode, shape.lifecycle, shape.profile,
                      shape.parent_id)


def _node(session: Session, ref: str) -> _NodeFacts:
    found = driver_rows(session, _NODE_FACTS, [ref])
    if found:  # the usual case, a node's id: one statement, no ORM object
        return _NodeFacts(*found[0])
    from .objects import find_object

    row = find_object(session, ref)
    if row.type != "node":
        raise CanvasError(f"{ref!r} is a {row.type}, not a node")
    return _NodeFacts(*driver_rows(session, _NODE_FACTS, [row.id])[0])


def node_view_of(session: Session, node: ObjectRow, shape: NodeRow) -> ReaderView:
    """The node's reader view: itself, its profile's purview repos (in purview order), its profile,
    the app or person that owns it (or owns the nearest ancestor that has an owner), and the plugins
    installed for those repos and that person (``plugins``)."""
    return _view_of(session, _facts(node, shape))[0]


def reader_view_of_object(session: Session, object_id: str) -> ReaderView | None:
    """The view an object reads in when it hears of things (a watcher, a receiver): a node its own
    (``node_view_of``); an owner (person, app, repo, profile) its own position; anything else (a
    custom object, a job, a document) its owner's. An object nobody owns (a receiver the operator
    registered without an owner) hears as the operator: ``None``, which reads everything."""
    for _ in range(3):  # a custom object's owner is a node or an owner object: two steps at most
        found = driver_rows(session, "SELECT type, owner_id FROM objects WHERE id = ?", [object_id])
        if not found:
            return None
        type_, owner_id = found[0]
        if type_ == "node":
            return _view_of(session, _node(session, object_id))[0]
        if type_ in ("user", "app", "repo", "profile"):
            return view_of_owner(get_row(session, object_id))
        if owner_id is None:
            return None
        object_id = str(owner_id)
    return None


def reader_access(session: Session, object_id: str) -> Access | None:
    """What the object ``object_id`` may read when it hears of things (``reader_view_of_object``;
    ``None``: everything)."""
    return access_for(session, reader_view_of_object(session, object_id))


class _Profile(NamedTuple):
    id: str
    handle: str | None


def _view_of(session: Session, node: _NodeFacts) -> tuple[ReaderView, _Profile | None, list[tuple[str, str]]]:
    """``node_view_of``, with the profile it found (if any) and that profile's purview."""
    profile = node.profile
    repos: tuple[str, ...] = ()
    prof: _Profile | None = None
    purview: list[tuple[str, str]] = []
    if profile:
        named = {id_: (type_, handle, raw) for id_, type_, handle, raw in driver_rows(
            session, "SELECT o.id, o.type, o.handle, p.purview FROM objects o LEFT JOIN profiles p "
                     "ON p.object_id = o.id WHERE o.id IN (?, ?)", [profile, f"profile:{profile}"])}
        for key in (profile, f"profile:{profile}"):  # its id, else its handle's id
            if key in named:
                if named[key][0] == "profile":
                    prof = _Profile(key, named[key][1])
                    purview = purview_from(named[key][2])
                break
        if prof is not None:
            profile = prof.id
            repos = tuple(dict.fromkeys(p[len("repo:"):] if p.startswith("repo:") else p for p, _ in purview))
    holder: str | None = node.owner_id
    parent, seen = node.parent_id, {node.id}
    while holder is None and parent and parent not in seen:  # the nearest ancestor that has an owner
        seen.add(parent)
        up = driver_rows(session, "SELECT o.owner_id, n.parent_id FROM objects o LEFT JOIN nodes n "
                                  "ON n.object_id = o.id WHERE o.id = ?", [parent])
        holder, parent = (up[0][0], up[0][1]) if up else (None, None)
    if holder == node.owner_id and node.owner_type is not None:  # read with the node
        held: tuple[str, str | None] | None = (node.owner_type, node.owner_handle)
    else:
        found = driver_rows(session, "SELECT type, handle FROM objects WHERE id = ?", [holder]) if holder else []
        held = found[0] if found else None
    person = held[1] if held is not None and held[0] == "user" else None
    app = held[1] if held is not None and held[0] == "app" else None
    plugins = plugins_of(session, repos, person)
    return (ReaderView(node=node.id, repos=repos, profile=profile, app=app, person=person, plugins=plugins),
            prof, purview)


class _Load(NamedTuple):
    """How a loaded document is given: its level, the rule that brought it, what it asked, what capped it."""

    level: str
    rule: Rule
    requested: str
    capped_by: str | None


def _matches(cond: dict[str, JsonValue] | None, shape: _NodeFacts) -> bool:
    if not cond:
        return True
    for key, wanted in cond.items():
        have = getattr(shape, key, None) if key in ("kind", "mode", "lifecycle") else None
        options = wanted if isinstance(wanted, list) else [wanted]
        if have is None or not any(have == o or (key == "kind" and str(have).startswith(f"{o}/")) for o in options):
            return False
    return True


def _level(rule: Rule) -> str:
    return str(rule.get("deliver", rule.get("at", "preview")))


def _cap(level: str, limit: str) -> str:
    return level if LIMIT_RANK[level] <= LIMIT_RANK[limit] else limit


class _Weigher:
    """Everything one evaluation needs, loaded once: the node, its view, access and profile limits."""

    def __init__(self, session: Session, node: _NodeFacts, event: str, asker: Access | None = None) -> None:
        if event not in DELIVERY_EVENTS:
            raise CanvasError(f"delivery is evaluated for {', '.join(DELIVERY_EVENTS)}, not {event!r}")
        self.session, self.node, self.event = session, node, event
        self.asker = asker
        """Who asks (``None``: the operator): what it may not read is never named in an answer."""
        self.view, self.profile, self.purview = _view_of(session, node)
        self.access: Access = access_for(session, self.view)  # type: ignore[assignment]
        self.order = self.view.owner_ids()
        self.rank = {owner: i for i, owner in enumerate(self.order)}
        self.profile_id = self.view.profile_id()
        if self.profile is None or self.profile.id != self.profile_id:  # the view names a profile it did not find
            row = get_row(session, self.profile_id) if self.profile_id else None
            self.profile = _Profile(row.id, row.handle) if row is not None else None
            self.purview = purview_of(session, self.profile_id) if self.profile_id else []
        # the view's owners, once: each one's type and handle (for the profile's limits), and its full-name reference
        self.owners: dict[str, tuple[str, str | None, str | None]] = {
            id_: (type_, handle, ref) for id_, type_, handle, ref in session.connection().execute(
                _OWNERS, {"ids": self.order})}
        self._rules_seen: dict[tuple[str, ...] | None, tuple[str, str, Rule | None, str]] = {}
        self.filed: dict[str, tuple[tuple[str, ...], str]] = {}
        """The rules filed for this event, by document: ``(rule texts, preview)`` (``candidates`` reads them)."""
        self._limits: dict[str, tuple[str, str] | None] = {}
        self._ruled: dict[tuple[str | None, tuple[str, ...] | None], tuple[str, str, _Load | None]] = {}

    def candidates(self) -> list[ObjectSummary]:
        """Every document owned in the view, in load order (the widest owner first, by name within one),
        from the owners' index alone (no lookup into ``documents``); the few owners' full-name references
        are worked out once, not per row, and rows come back as plain columns, no ORM object each. Also
        reads the rules filed for this event (``rule_index``)."""
        refs = {id_: ref for id_, (_, _, ref) in self.owners.items()}
        owned, params = one_of(self.session, "owner_id", self.order)
        rows = driver_rows(self.session, "SELECT id, kind, name, owner_id, privacy, status, created_at, updated_at "
                                         f"FROM objects WHERE {owned} AND type = 'document'", params)
        rank = self.rank
        rows.sort(key=lambda r: (-rank[r[3]], r[2]))
        self.filed = rules_by_document(self.session, self.order, self.event)
        return [_summary(id_, "document", kind, name, f"{refs[owner_id]}/{name}" if refs.get(owner_id) else name,
                         owner_id, privacy, status, created, updated)
                for id_, kind, name, owner_id, privacy, status, created, updated in rows]

    def _by_rules(self, texts: tuple[str, ...] | None) -> tuple[str, str, Rule | None, str]:
        """``(reason, words, rule, requested level)`` from a document's rules for this event alone (its
        node and event fixed): documents with the same rules share the answer, so each is weighed once."""
        known = self._rules_seen.get(texts)
        if known is not None:
            return known
        stored: list[Rule] = [json.loads(t) for t in texts or ()]
        rules = [r for r in stored if r.get("on") == self.event]
        answer: tuple[str, str, Rule | None, str]
        if not rules:
            answer = "no_rule", f"no rule delivers it on {self.event}", None, ""
        else:
            fitting = [r for r in rules if _matches(r.get("if"), self.node)]
            if not fitting:
                conds = "; ".join(json.dumps(r.get("if"), sort_keys=True) for r in rules)
                answer = ("if_mismatch", f"its {self.event} rule needs if {conds}; this node is kind {self.node.kind}, "
                          f"mode {self.node.mode}", None, "")
            else:
                rule = max(fitting, key=lambda r: _LEVELS.index(_level(r)) if _level(r) in _LEVELS else -1)
                answer = "loaded", "", rule, _level(rule) if _level(rule) in _LEVELS else "preview"
        self._rules_seen[texts] = answer
        return answer

    def _limit(self, owner_id: str | None) -> tuple[str, str] | None:
        """The profile's ``(project, limit)`` for documents of ``owner_id`` (once per owner), or None."""
        key = owner_id or ""
        if key not in self._limits:
            owner = self.owners.get(key)
            self._limits[key] = (limit_of(self.purview, owner[0], owner[1] or key) if owner is not None
                                 and key != self.profile_id and self.profile is not None else None)
        return self._limits[key]

    def weigh(self, doc: ObjectSummary, readable: bool,
              nearest: dict[str, ObjectSummary]) -> tuple[str, str, _Load | None]:
        """``(reason, words, (level, rule, requested, capped_by) or None)`` for one candidate, given
        whether the node may read it (``Access.allows``, worked out once per document by the caller)."""
        if not readable:
            return "privacy", f"{doc.privacy} to {doc.owner_id}; this node may not read it", None
        winner = nearest.get(doc.name)
        if winner is not None and winner is not doc:  # for an asker, ``nearest`` holds only what it may read
            return "shadowed", f"shadowed by the nearer {winner.full_name} (same name, owner nearer in the view)", None
        filed = self.filed.get(doc.id)
        key = (doc.owner_id, filed[0] if filed is not None else None)
        known = self._ruled.get(key)
        if known is None:
            known = self._ruled[key] = self._by_owner_rules(*key)
        return known

    def _by_owner_rules(self, owner_id: str | None, texts: tuple[str, ...] | None) -> tuple[str, str, _Load | None]:
        """The answer for a readable, unshadowed document from its owner and its rules for this event
        alone: documents of one owner with the same rules share it, so each pair is weighed once."""
        reason, words, rule, requested = self._by_rules(texts)
        if rule is None:
            return reason, words, None
        level, capped_by = requested, None
        found = self._limit(owner_id)
        if found is not None and self.profile is not None and LIMIT_RANK[found[1]] < LIMIT_RANK[requested]:
            level = _cap(requested, found[1])
            capped_by = f"profile {self.profile.handle}: {found[0]} -> {found[1]}"
        if level == "none":
            return "capped", f"its rule asks for {requested}, but {capped_by}", None
        return "loaded", f"at {level}", _Load(level, rule, requested, capped_by)


def _evaluate(w: _Weigher) -> tuple[list[tuple[ObjectSummary, str, _Load]], list[NotLoaded]]:
    """The documents of the node's view it loads, each with its preview and how it is given, and the
    ones it does not, each with why; both in load order (``candidates`` reads them in it)."""
    found = w.candidates()
    allows, rank = w.access.allows, w.rank
    shown = w.asker.allows if w.asker is not None else None
    readable = [allows(doc.id, doc.owner_id, doc.privacy) for doc in found]  # once per document
    named = readable if shown is None else [shown(doc.id, doc.owner_id, doc.privacy) for doc in found]
    nearest: dict[str, ObjectSummary] = {}
    for doc, ok, seen in zip(found, readable, named):  # the readable document nearest in the view holds each name
        if ok and seen:  # for an asker, as if what it may not read did not exist: it shadows nothing
            held = nearest.get(doc.name)
            if held is None or rank[doc.owner_id or ""] < rank[held.owner_id or ""]:
                nearest[doc.name] = doc
    loaded, skipped = [], []
    weigh, filed = w.weigh, w.filed
    for doc, ok, seen in zip(found, readable, named):
        if shown is not None and not seen:
            continue  # never named to an asker that may not read it, nor counted as what shadows another
        reason, words, got = weigh(doc, ok, nearest)
        if got is None:
            skipped.append(_not_loaded(doc, reason, words))
        else:
            loaded.append((doc, filed[doc.id][1], got))
    return loaded, skipped


@contextmanager
def _collector_held() -> Iterator[None]:
    """Hold the cycle collector off while a result of thousands of new objects is built: they all live
    on, so a collection in the middle frees nothing and walks each of them again (measured: a third of
    a boot context's time at 10,000 documents). Reference counting frees as always; the collector is
    switched back on afterwards unless it was already off (another thread inside leaves it as found)."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def boot_context(session: Session, ref: str, event: str = "boot", *, asker: Access | None = None) -> BootContext:
    """What node ``ref`` loads for ``event``, in load order, and what in its view it does not load.
    With an ``asker`` (a reader; ``None`` is the operator), only documents it may read are named."""
    with _collector_held():
        return _boot_context(session, ref, event, asker)


def _boot_context(session: Session, ref: str, event: str, asker: Access | None) -> BootContext:
    node = _node(session, ref)
    w = _Weigher(session, node, event, asker)
    loaded, skipped = _evaluate(w)
    content_ids = [doc.id for doc, _, got in loaded if got[0] == "content"]
    bodies: dict[str, str] = {}
    links: dict[str, list[tuple[str, str]]] = {}
    for chunk in _chunks(content_ids):  # one statement per chunk, straight from the driver (no row objects)
        named, params = one_of(session, "object_id", chunk)
        bodies.update(driver_rows(session, f"SELECT object_id, body FROM documents WHERE {named}", params))
        named, params = one_of(session, "document_id", chunk)
        pairs = driver_rows(session, f"SELECT document_id, target_id FROM links WHERE {named} "
                                     "AND target_id IS NOT NULL ORDER BY id", params)
        target_ids = sorted({str(t) for _, t in pairs})
        targets = summaries_by_id(session, target_ids)
        previews = dict(session.execute(select(DocumentRow.object_id, DocumentRow.preview)
                                        .where(DocumentRow.object_id.in_(target_ids))).all()) if target_ids else {}
        for src, target in pairs:
            t = targets.get(str(target))
            if (t is not None and w.access.allows(t.id, t.owner_id, t.privacy) and len(links.get(src, [])) < _MAX_LINKS
                    and (asker is None or asker.allows(t.id, t.owner_id, t.privacy))):
                links.setdefault(src, []).append((t.full_name, previews.get(t.id, "")))
    items = []
    for doc, preview, (level, rule, requested, capped_by) in loaded:
        ref = doc.full_name[:-len(doc.name) - 1] if doc.full_name.endswith("/" + doc.name) else str(doc.owner_id)
        content = level == "content"
        items.append(_item(doc, level, rule.copy(), ref, requested, capped_by, preview,
                           bodies.get(doc.id) if content else None, tuple(links.get(doc.id, ())) if content else ()))
    return BootContext(node=node.id, node_name=node.name, event=event, kind=node.kind, mode=node.mode,
                       profile=w.profile.handle if w.profile is not None else node.profile,
                       seen_as=describe(w.view), items=tuple(items), not_loaded=tuple(skipped))


def _verdict(session: Session, w: _Weigher, doc: ObjectRow) -> LoadVerdict:
    loaded, skipped = _evaluate(w)
    for summary, _, got in loaded:
        if summary.id == doc.id:
            return LoadVerdict(node=w.node.id, node_name=w.node.name, loaded=True, level=got[0], reason="loaded",
                               detail=f"at {got[0]}" + (f"; capped by {got[3]}" if got[3] else ""))
    for n in skipped:
        if n.document.id == doc.id:
            return LoadVerdict(node=w.node.id, node_name=w.node.name, loaded=False, level=None, reason=n.reason,
                               detail=n.detail)
    if not w.access.allows(doc.id, doc.owner_id, doc.privacy):
        return LoadVerdict(node=w.node.id, node_name=w.node.name, loaded=False, level=None, reason="privacy",
                           detail=f"{doc.privacy} to {doc.owner_id}; this node may not read it")
    return LoadVerdict(node=w.node.id, node_name=w.node.name, loaded=False, level=None, reason="not_eligible",
                       detail=f"its owner {doc.owner_id} is not in this node's view")


def explain(session: Session, node_ref: str, doc: ObjectRow, event: str = "boot", *,
            asker: Access | None = None) -> LoadVerdict:
    """Whether node ``node_ref`` loads ``doc`` for ``event``, and if not, why (the caller has made sure
    an ``asker`` may read ``doc``)."""
    node = _node(session, node_ref)
    with _collector_held():
        return _verdict(session, _Weigher(session, node, event, asker), doc)


def who_loads(session: Session, doc: ObjectRow, event: str = "boot", *, limit: int = 200,
              asker: Access | None = None) -> list[LoadVerdict]:
    """For each node (up to ``limit``, by name) an ``asker`` may read, whether it loads ``doc`` for
    ``event`` and why not; the nodes that load it first."""
    stmt = select(ObjectRow, NodeRow).join(NodeRow, NodeRow.object_id == ObjectRow.id)
    if asker is not None:
        stmt = stmt.where(asker.clause())
    nodes = session.execute(stmt.order_by(ObjectRow.name, ObjectRow.pk).limit(max(1, limit))).all()
    with _collector_held():
        verdicts = [_verdict(session, _Weigher(session, _facts(node, shape), event, asker), doc)
                    for node, shape in nodes]
    return sorted(verdicts, key=lambda v: (not v.loaded, v.node_name))
