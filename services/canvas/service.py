"""``Canvas``: the async service the Workspace and the UI use; every method returns read models.

Each call is one unit of work in a worker thread (``asyncio.to_thread``) with its own Session:
reads in a plain transaction, writes in ``BEGIN IMMEDIATE``. Changes are published on the
``ChangeFeed`` (source ``canvas``) only after the write committed. On PostgreSQL the same changes
also travel to every other canvas on that database by ``NOTIFY`` (``services.canvas.notify``), and
theirs arrive on this feed; a lost listening connection is announced as ``canvas.connection.lost``
and ``canvas.connection.restored``.

Bad text is REFUSED: every public method checks all its arguments first (``guard.checks_text``)
and answers a lone surrogate or NUL anywhere in them with ``TextRefusedError`` (code
``text_refused``), before any database work. Names follow ``objects``: every ``full_name`` the
canvas reports resolves back to its object, and a name several objects answer to is
``AmbiguousNameError`` listing the candidates.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Required, TypedDict, TypeVar

from sqlalchemy import func, select
from sqlalchemy.engine import Engine
from sqlmodel import Session

from services.changes import Change, ChangeFeed
from services.clock import Clock

from . import counters as _counters
from . import custom as _custom
from . import delivery as _delivery
from . import documents as _docs
from . import nodes as _nodes
from . import plugins as _plugins
from . import profiles as _profiles
from .engine import (BUSY_TIMEOUT_MS, create_schema, database_url, is_postgres, make_engine, read_session,
                     write_session)
from .errors import CanvasError, DocumentInvalidError, ObjectNotFoundError, OwnerInUseError
from .events import ensure_watch, mentioned_ids, publish_event, remove_watch
from .guard import checks_text
from .insights import LISTENER_OWNER_TYPES, LISTENER_RULES, append_approved_link, listener_body, listener_path, listener_preview
from .lint import lint_documents
from .models import DocumentRow, EdgeRow, EventRow, InboxRow, NodeRow, ObjectRow, ReceiverAttemptRow, WatchRow
from .notify import ChangeListener, channel_name, send_changes
from .names import CRTR_APP, OWNER_TYPES, ReaderView, split_owner_ref
from .eligibility import OPERATOR, Access, access_for
from .objects import (Tx, count_objects, ensure_owner, find_object, find_readable, get_row, hidden_ids, list_objects,
                      neighbourhood, owner_handle, summary_of, with_owner)
from .receivers import ReceiverDispatcher, attempt_view, check_receiver
from .search import SNIPPET_SCAN, make_snippet, query_words, ranked_pks
from .views import (BootContext, CustomObjectView, DocumentView, EventView, InboxEntryView, InboxPage, JobView,
                    LintFinding, LoadVerdict, MessageReceipt, Neighbourhood, NodeView, ObjectDetail, ObjectPage,
                    ObjectSummary, ProfileView, ReceiverAttempt, RevisionView, SearchHit, WatchView)

__all__ = ["Canvas", "DocumentItem", "WRITE_MANY_LIMIT"]

WRITE_MANY_LIMIT = 500
"""The most documents one ``Canvas.write_many`` call takes."""
_WRITE_FIELDS = frozenset({"name", "preview", "body", "owner", "summary", "kind", "privacy", "rules"})

T = TypeVar("T")


class DocumentItem(TypedDict, total=False):
    """One document of ``Canvas.write_many``: ``write``'s arguments."""

    name: Required[str]
    preview: Required[str]
    body: str
    owner: str
    summary: str | None
    kind: str
    privacy: str
    rules: Sequence[Mapping[str, object]]


def _event_view(row: EventRow) -> EventView:
    return EventView(id=row.id or 0, object_id=row.object_id, type=row.type, level=row.level, actor_id=row.actor_id,
                     at=row.at, data=json.loads(row.data or "{}"))


def _watch_view(row: WatchRow) -> WatchView:
    return WatchView(watcher_id=row.watcher_id, object_id=row.object_id, pattern=row.pattern,
                     min_level=row.min_level, last_read_revision=row.last_read_revision)


@checks_text
class Canvas:
    """The canvas object graph over one database (``Canvas.open(path_or_url)``)."""

    def __init__(self, engine: Engine, *, changes: ChangeFeed | None = None, clock: Clock | None = None) -> None:
        self.engine = engine
        """The SQLAlchemy engine (one per Canvas)."""
        self.changes = changes if changes is not None else ChangeFeed()
        """Where every committed write is published (source ``canvas``)."""
        self.clock = clock or Clock()
        """The clock stamping objects, events and inbox entries."""
        self.listener: ChangeListener | None = None
        """On PostgreSQL, the thread hearing other canvases' changes (``None`` on SQLite)."""
        self.receivers = ReceiverDispatcher(engine, self.clock)
        """Hands events custom objects hear to their ``url`` and ``argv`` receivers."""
        self._channel: str | None = None

    # -- lifecycle -------------------------------------------------------------------------------

    @classmethod
    async def open(cls, path_or_url: str | Path, *, changes: ChangeFeed | None = None,
                   clock: Clock | None = None, busy_timeout_ms: int = BUSY_TIMEOUT_MS, listen: bool = True) -> Canvas:
        """Open (creating if needed) the canvas at a file path or engine URL (``sqlite:///...`` or
        ``postgresql+psycopg://...``); on PostgreSQL, ``listen`` hears other canvases' changes."""
        url = database_url(path_or_url)
        if url.startswith("sqlite:///") and ":memory:" not in url:
            Path(url[len("sqlite:///"):]).parent.mkdir(parents=True, exist_ok=True)
        canvas = cls(make_engine(url, busy_timeout_ms=busy_timeout_ms), changes=changes, clock=clock)
        try:
            await asyncio.to_thread(canvas._setup, listen)
        except BaseException:
            await canvas.close()
            raise
        canvas.receivers.poke()  # what custom objects heard while no canvas was open
        return canvas

    def _setup(self, listen: bool) -> None:
        create_schema(self.engine)
        if is_postgres(self.engine):
            with read_session(self.engine) as session:
                schema = str(session.execute(select(func.current_schema())).scalar_one())
            self._channel = channel_name(schema)
            if listen:
                self.listener = ChangeListener(self.engine, self._channel, self.changes)
                self.listener.start()
        with write_session(self.engine) as session:
            ensure_owner(Tx(session, self.clock.time()), "app", "crtr", name="crtr")
        self.receivers.refresh()

    async def close(self) -> None:
        """Stop listening and release the engine's connections."""
        await self.receivers.close()
        listener, self.listener = self.listener, None
        if listener is not None:
            await asyncio.to_thread(listener.stop)
        await asyncio.to_thread(self.engine.dispose)

    # -- units of work -----------------------------------------------------------------------------

    async def _read(self, fn: Callable[[Session], T]) -> T:
        def run() -> T:
            with read_session(self.engine) as session:
                return fn(session)
        return await asyncio.to_thread(run)

    async def _write(self, fn: Callable[[Tx], T]) -> T:
        def run() -> tuple[T, list[Change]]:
            with write_session(self.engine) as session:
                tx = Tx(session, self.clock.time())
                result = fn(tx)
                if self._channel is not None and tx.changes:
                    send_changes(session, self._channel, self.listener.origin if self.listener else "", tx.changes)
            return result, tx.changes
        result, changes = await asyncio.to_thread(run)
        self.changes.publish_many(changes)  # one burst: a subscriber that takes batches is called once
        self.receivers.poke()
        return result

    @staticmethod
    def _owner(tx: Tx, ref: str) -> ObjectRow:
        type_, handle = split_owner_ref(ref)
        if type_ in OWNER_TYPES and ":" in ref:
            return ensure_owner(tx, type_, handle)
        row = find_object(tx.session, ref)
        if row.type not in (*OWNER_TYPES, "node"):
            raise DocumentInvalidError(f"{ref!r} is a {row.type}; owners are nodes, people, apps, repos and profiles")
        return row

    @staticmethod
    def _actor(session: Session, ref: str | None) -> str | None:
        if ref is None:
            return None
        return find_object(session, ref).id

    # -- owners and generic verbs ------------------------------------------------------------------

    async def ensure_owner(self, type: str, handle: str, *, name: str | None = None) -> ObjectSummary:
        """The owner object ``<type>:<handle>`` (``user``, ``app``, ``repo``, ``profile``), created if missing."""
        return await self._write(lambda tx: summary_of(ensure_owner(tx, type, handle, name=name), None))

    async def list_objects(self, *, type: str | None = None, owner: str | None = None, name_filter: str | None = None,
                           offset: int = 0, limit: int = 50, view: ReaderView | None = None) -> ObjectPage:
        """One page of objects by name; filters: type, owner id, a name substring. Records nothing.
        With a reader's ``view``, only what it may read (``eligibility``); without, everything."""
        return await self._read(lambda s: list_objects(s, type=type, owner=owner, name_filter=name_filter,
                                                       offset=offset, limit=limit, access=access_for(s, view)))

    async def count_objects(self, *, type: str | None = None, owner: str | None = None,
                            name_filter: str | None = None, view: ReaderView | None = None) -> int:
        """How many objects match the same filters as ``list_objects``: without a name filter from the
        counts the database keeps per type, owner and privacy (``counters``), whatever the canvas's size."""
        return await self._read(lambda s: count_objects(s, type=type, owner=owner, name_filter=name_filter,
                                                        access=access_for(s, view)))

    async def count_by_type(self, types: Sequence[str], *, view: ReaderView | None = None) -> tuple[int, dict[str, int]]:
        """Every object's count and each of ``types``' counts (as ``count_objects``), in one read: the
        figures a browser's top level shows together."""
        def run(s: Session) -> tuple[int, dict[str, int]]:
            access = access_for(s, view)
            return (count_objects(s, access=access),
                    {t: count_objects(s, type=t, access=access) for t in types})
        return await self._read(run)

    async def get(self, ref: str, *, view: ReaderView | None = None) -> ObjectSummary:
        """The object ``ref`` names (id, full name, or bare name in ``view``); records nothing. An
        object the reader may not read is ``ObjectNotFoundError``, as a name nobody holds."""
        def run(s: Session) -> ObjectSummary:
            row, _ = find_readable(s, ref, view)
            return summary_of(row, _owner_handle(s, row))
        return await self._read(run)

    def _detail(self, s: Session, row: ObjectRow, events_limit: int, access: Access | None = None) -> ObjectDetail:
        events = _events_page(s, row.id, limit=events_limit, before=None, access=access)
        watchers = s.execute(select(WatchRow).where(WatchRow.object_id == row.id).order_by(WatchRow.id)
                             .limit(200)).scalars().all()
        if access is not None:  # a watcher the reader may not read is not named
            hidden = hidden_ids(s, [w.watcher_id for w in watchers], access)
            watchers = [w for w in watchers if w.watcher_id not in hidden]
        is_doc = row.type == "document"
        return ObjectDetail(object=summary_of(row, _owner_handle(s, row)), events=tuple(events),
                            watchers=tuple(map(_watch_view, watchers)), seen_as=access.label if access else OPERATOR,
                            document=_docs.document_view(s, row, access) if is_doc else None,
                            revisions=tuple(_docs.history(s, row, limit=20)) if is_doc else (),
                            node=_nodes.node_view(s, row) if row.type == "node" else None,
                            job=_nodes.job_view(s, row) if row.type == "job" else None,
                            custom=_custom.custom_view(s, row) if row.type == "custom" else None)

    async def read(self, ref: str, *, reader: str | None = None, view: ReaderView | None = None,
                   events_limit: int = 20) -> ObjectDetail:
        """One object with its detail. A ``reader`` is recorded: a ``read`` event, and it becomes a watcher.
        With a ``view``, an object that reader may not read is ``ObjectNotFoundError`` (nothing recorded)."""
        if reader is None:
            def plain(s: Session) -> ObjectDetail:
                row, access = find_readable(s, ref, view)
                return self._detail(s, row, events_limit, access)
            return await self._read(plain)

        def run(tx: Tx) -> ObjectDetail:
            row, access = find_readable(tx.session, ref, view)
            reader_id = self._actor(tx.session, reader)
            assert reader_id is not None
            revision = _docs.document_view(tx.session, row).revision if row.type == "document" else None
            publish_event(tx.session, row, "read", tx.now, actor_id=reader_id, data={"revision": revision})
            _, created = ensure_watch(tx.session, reader_id, row.id, tx.now, read_revision=revision)
            if created:
                publish_event(tx.session, row, "watched", tx.now, actor_id=reader_id)
                tx.change("watch.added", row.id, watcher=reader_id)
            return self._detail(tx.session, row, events_limit, access)
        return await self._write(run)

    async def search(self, query: str, *, type: str | None = None, limit: int = 20,
                     view: ReaderView | None = None) -> list[SearchHit]:
        """Full-text search over names, previews and bodies, best first (at most 100). Records nothing.

        The cost is bounded whatever the documents' size: each hit's snippet comes from a bounded
        window of its text (``search.SNIPPET_SCAN`` characters), weighing at most
        ``search.MAX_SNIPPET_HITS`` matches.
        """
        def run(s: Session) -> list[SearchHit]:
            pks = ranked_pks(s, query, type=type, limit=limit, access=access_for(s, view))
            if not pks:
                return []
            words = query_words(query)
            stmt = (with_owner(ObjectRow.pk.in_(pks))
                    .add_columns(DocumentRow.preview, func.substr(DocumentRow.body, 1, SNIPPET_SCAN))
                    .outerjoin(DocumentRow, DocumentRow.object_id == ObjectRow.id))
            hits = {row.pk: SearchHit(object=summary_of(row, ref),
                                      snippet=make_snippet([preview or "", body or "", row.name or ""], words).text)
                    for row, ref, preview, body in s.execute(stmt).all()}
            return [hits[pk] for pk in pks if pk in hits]
        return await self._read(run)

    async def watch(self, ref: str, *, watcher: str, pattern: str = "*", min_level: int = 1,
                    view: ReaderView | None = None) -> WatchView:
        """``watcher`` watches ``ref`` for events matching ``pattern`` at ``min_level`` or above; with a
        ``view``, only an object that reader may read (else ``ObjectNotFoundError``)."""
        def run(tx: Tx) -> WatchView:
            row, _ = find_readable(tx.session, ref, view)
            watcher_id = self._actor(tx.session, watcher)
            assert watcher_id is not None
            watch, created = ensure_watch(tx.session, watcher_id, row.id, tx.now, pattern=pattern, min_level=min_level)
            if created:
                publish_event(tx.session, row, "watched", tx.now, actor_id=watcher_id)
            tx.change("watch.added", row.id, watcher=watcher_id, pattern=pattern, min_level=min_level)
            return _watch_view(watch)
        return await self._write(run)

    async def unwatch(self, ref: str, *, watcher: str) -> bool:
        """End ``watcher``'s watch on ``ref``; whether there was one."""
        def run(tx: Tx) -> bool:
            row = find_object(tx.session, ref)
            watcher_id = self._actor(tx.session, watcher)
            gone = remove_watch(tx.session, watcher_id or "", row.id)
            if gone:
                tx.change("watch.removed", row.id, watcher=watcher_id)
            return gone
        return await self._write(run)

    async def edges(self, ref: str, *, kind: str | None = None, limit: int = 50,
                    view: ReaderView | None = None) -> Neighbourhood:
        """``ref``'s edges both ways grouped by kind (up to ``limit`` per group). Records nothing.
        With a ``view``, edges to objects that reader may not read are left out, and the ``links-to``
        edges are those of the links that reader is shown (``documents.reader_link_edges``)."""
        def run(s: Session) -> Neighbourhood:
            row, access = find_readable(s, ref, view)
            hood = neighbourhood(s, row, kind=kind, limit=limit, access=access)
            if access is None:
                return hood
            return _docs.reader_link_edges(s, row, hood, kind=kind, limit=limit, access=access)
        return await self._read(run)

    async def events(self, ref: str, *, limit: int = 50, before: int | None = None,
                     view: ReaderView | None = None) -> list[EventView]:
        """``ref``'s events, newest first, optionally before an event id. With a ``view``, an event that
        names an object that reader may not read (its actor, a report it announces) is left out."""
        def run(s: Session) -> list[EventView]:
            row, access = find_readable(s, ref, view)
            return _events_page(s, row.id, limit=limit, before=before, access=access)
        return await self._read(run)

    async def record_event(self, ref: str, type: str, *, level: int | None = None, data: Mapping[str, object] | None = None,
                           actor: str | None = None, summary: str | None = None) -> EventView:
        """Publish an event of a builtin kind on any object (delivered to its matching watchers)."""
        def run(tx: Tx) -> EventView:
            row = find_object(tx.session, ref)
            event, _ = publish_event(tx.session, row, type, tx.now, level=level, actor_id=self._actor(tx.session, actor),
                                     data=dict(data or {}), summary=summary)
            tx.change("event.published", row.id, type=type, level=event.level)
            return _event_view(event)
        return await self._write(run)

    async def delete(self, ref: str, *, actor: str | None = None) -> None:
        """Delete an object; its watchers hear ``deleted``.

        A node takes its jobs and its documents with it, except documents another owner's document
        links to: those move to the node's owner. Every other owner still owning objects is refused.
        """
        def run(tx: Tx) -> None:
            row = find_object(tx.session, ref)
            if row.id == CRTR_APP:
                raise OwnerInUseError("the app crtr is built in and cannot be deleted")
            if row.type == "document":
                _docs.delete_document(tx, row, actor_id=self._actor(tx.session, actor))
                return
            actor_id = self._actor(tx.session, actor)
            if row.type == "node":
                _docs.release_node_documents(tx, row, actor_id=actor_id)
                for job in tx.session.execute(select(ObjectRow).where(ObjectRow.owner_id == row.id,
                                                                      ObjectRow.type == "job")).scalars().all():
                    publish_event(tx.session, job, "deleted", tx.now, actor_id=actor_id)
                    tx.session.delete(job)
                    tx.change("object.deleted", job.id, type="job", name=job.name)
                tx.session.flush()
            owned = tx.session.execute(select(ObjectRow.id).where(ObjectRow.owner_id == row.id).limit(1)).first()
            if owned is not None:
                raise OwnerInUseError(f"{row.name!r} still owns objects; delete or move them first")
            publish_event(tx.session, row, "deleted", tx.now, actor_id=actor_id)
            tx.session.delete(row)
            tx.session.flush()
            tx.change("object.deleted", row.id, type=row.type, name=row.name)
        await self._write(run)

    # -- documents -------------------------------------------------------------------------------

    async def write(self, name: str, *, preview: str, body: str = "", owner: str | None = None,
                    summary: str | None = None, kind: str = "knowledge", privacy: str = "public",
                    rules: Sequence[Mapping[str, object]] | None = None, actor: str | None = None) -> DocumentView:
        """Create document ``<owner>/<name>`` (owner defaults to the writing node); the writer watches it."""
        def run(tx: Tx) -> DocumentView:
            actor_id = self._actor(tx.session, actor)
            if owner is None and actor_id is None:
                raise DocumentInvalidError(f"{name!r}: say which owner holds it (no writing node to default to)")
            owner_row = self._owner(tx, owner) if owner is not None else get_row(tx.session, actor_id or "")
            assert owner_row is not None
            doc = _docs.write_document(tx, owner=owner_row, path=name, preview=preview, body=body, summary=summary,
                                       kind=kind, privacy=privacy, rules=rules, actor_id=actor_id)
            return _docs.document_view(tx.session, doc)
        return await self._write(run)

    async def write_many(self, documents: Sequence[DocumentItem], *, actor: str | None = None) -> list[DocumentView]:
        """Create many documents in one unit of work (imports, bulk loads), with everything ``write``
        does for each: each item holds ``write``'s arguments (``name``, ``preview``, ``body``, ``owner``,
        ``summary``, ``kind``, ``privacy``, ``rules``). All are written or none: the first refused item
        (a taken name, a name twice in the batch, a bad preview) stops the batch, names its position,
        and nothing of it is kept. At most ``WRITE_MANY_LIMIT`` items, so the writer lock is held briefly."""
        items = list(documents)
        if len(items) > WRITE_MANY_LIMIT:
            raise DocumentInvalidError(f"write_many takes at most {WRITE_MANY_LIMIT} documents per call "
                                       f"({len(items)} given); split the batch")
        for i, item in enumerate(items):
            unknown = set(item) - _WRITE_FIELDS if isinstance(item, Mapping) else None
            if unknown is None or unknown or "name" not in item or "preview" not in item:
                raise DocumentInvalidError(f"write_many item {i}: a mapping with name and preview, and only "
                                           f"{', '.join(sorted(_WRITE_FIELDS))}")

        def run(tx: Tx) -> list[DocumentView]:
            actor_id = self._actor(tx.session, actor)
            owners: dict[str, ObjectRow] = {}
            batch = []
            for i, item in enumerate(items):
                ref = item.get("owner")
                if ref is None and actor_id is None:
                    raise DocumentInvalidError(f"write_many item {i} ({item['name']!r}): say which owner holds it")
                key = str(ref) if ref is not None else actor_id or ""
                if key not in owners:
                    found = self._owner(tx, key) if ref is not None else get_row(tx.session, key)
                    assert found is not None
                    owners[key] = found
                batch.append(_docs.NewDocument(owner=owners[key], path=item["name"], preview=item["preview"],
                                               body=item.get("body", ""), summary=item.get("summary"),
                                               kind=item.get("kind", "knowledge"), privacy=item.get("privacy", "public"),
                                               rules=item.get("rules")))
            try:
                return _docs.write_documents(tx, batch, actor_id=actor_id)
            except _docs.BatchItemError as exc:
                error = exc.error
                error.args = (f"write_many item {exc.position}: {error}; nothing of the batch was written",)
                raise error from None
        return await self._write(run)

    async def edit(self, ref: str, *, actor: str | None = None, base_revision: int | None = None,
                   body: str | None = None, preview: str | None = None, summary: str | None = None,
                   rules: Sequence[Mapping[str, object]] | None = None, privacy: str | None = None,
                   kind: str | None = None) -> DocumentView:
        """A new revision made from ``base_revision`` (default: the revision ``actor`` last read).

        Refused with ``StaleRevisionError`` (carrying the refused body) when the document moved on.
        """
        def run(tx: Tx) -> DocumentView:
            doc = _document(tx.session, ref)
            _docs.edit_document(tx, doc, actor_id=self._actor(tx.session, actor), base_revision=base_revision,
                                body=body, preview=preview, summary=summary, rules=rules, privacy=privacy, kind=kind)
            return _docs.document_view(tx.session, doc)
        return await self._write(run)

    async def move(self, ref: str, *, to: str | None = None, owner: str | None = None,
                   actor: str | None = None) -> DocumentView:
        """Rename and/or re-own a document; its id and links stay."""
        def run(tx: Tx) -> DocumentView:
            doc = _document(tx.session, ref)
            _docs.move_document(tx, doc, to_path=to, to_owner=self._owner(tx, owner) if owner else None,
                                actor_id=self._actor(tx.session, actor))
            return _docs.document_view(tx.session, doc)
        return await self._write(run)

    async def history(self, ref: str, *, limit: int = 100) -> list[RevisionView]:
        """A document's revisions, newest first."""
        return await self._read(lambda s: _docs.history(s, _document(s, ref), limit=limit))

    async def push_report(self, node: str, *, label: str, preview: str, body: str) -> DocumentView:
        """A node's report document (``<node-id>/reports/<ts>-<id>-<label>``) and its ``report.update`` event."""
        def run(tx: Tx) -> DocumentView:
            row = _typed(tx.session, node, "node")
            return _docs.document_view(tx.session, _docs.push_report(tx, row, label=label, preview=preview, body=body))
        return await self._write(run)

    async def lint(self, ref: str | None = None, *, owner: str | None = None,
                   view: ReaderView | None = None) -> list[LintFinding]:
        """Lint findings for one document, an owner's documents, or every document. With a ``view``,
        only documents that reader may read, and a link to what it may not read is dangling to it."""
        def run(s: Session) -> list[LintFinding]:
            access = access_for(s, view)
            ids = [_document(s, ref, view).id] if ref else None
            owner_id = find_readable(s, owner, view)[0].id if owner else None
            return lint_documents(s, ids=ids, owner_id=owner_id, access=access)
        return await self._read(run)

    # -- nodes, inboxes, jobs --------------------------------------------------------------------

    async def spawn_node(self, *, node_id: str | None = None, name: str | None = None, kind: str = "general",
                         mode: str = "base", lifecycle: str = "terminal", profile: str | None = None,
                         parent: str | None = None, owner: str | None = None, status: str = "active") -> NodeView:
        """A new node; with a ``parent``, a ``spawned`` edge and the parent's watch."""
        def run(tx: Tx) -> NodeView:
            parent_row = _typed(tx.session, parent, "node") if parent else None
            owner_id = self._owner(tx, owner).id if owner else None
            row = _nodes.spawn_node(tx, node_id=node_id, name=name, owner_id=owner_id, kind=kind, mode=mode,
                                    lifecycle=lifecycle, profile=profile, parent=parent_row, status=status)
            return _nodes.node_view(tx.session, row)
        return await self._write(run)

    async def configure_node(self, ref: str, /, *, actor: str | None = None, **fields: str | None) -> NodeView:
        """Change kind, mode, lifecycle, profile, status, activity, outcome or name; publishes ``configured``
        (``ref`` is positional only, so no field can collide with it)."""
        def run(tx: Tx) -> NodeView:
            row = _typed(tx.session, ref, "node")
            _nodes.configure_node(tx, row, fields, actor_id=self._actor(tx.session, actor))
            return _nodes.node_view(tx.session, row)
        return await self._write(run)

    async def begin_turn(self, ref: str) -> NodeView:
        """The node starts a turn; messages until ``end_turn`` coalesce."""
        def run(tx: Tx) -> NodeView:
            row = _typed(tx.session, ref, "node")
            _nodes.begin_turn(tx, row)
            return _nodes.node_view(tx.session, row)
        return await self._write(run)

    async def end_turn(self, ref: str, *, status: str = "idle") -> bool:
        """The node's turn ends; True when coalesced messages start one new turn."""
        return await self._write(lambda tx: _nodes.end_turn(tx, _typed(tx.session, ref, "node"), status=status))

    async def message_send(self, body: str, *, to: str, sender: str | None = None) -> MessageReceipt:
        """Append a message to node ``to``'s inbox; wakes it, or coalesces while it is mid-turn."""
        def run(tx: Tx) -> MessageReceipt:
            row = _typed(tx.session, to, "node")
            entry, woke, coalesced = _nodes.message_send(tx, row, body, sender_id=self._actor(tx.session, sender))
            return MessageReceipt(entry=_nodes.entry_view(entry), woke=woke, coalesced=coalesced)
        return await self._write(run)

    async def inbox(self, owner: str, *, offset: int = 0, limit: int = 50, unread_only: bool = False,
                    view: ReaderView | None = None) -> InboxPage:
        """One page of an object's inbox, newest first, with unread and total counts. With a ``view``,
        entries about objects that reader may not read are left out (and not counted)."""
        def run(s: Session) -> InboxPage:
            row, access = find_readable(s, owner, view)
            return _nodes.inbox_page(s, row.id, offset=offset, limit=limit, unread_only=unread_only, access=access)
        return await self._read(run)

    async def object_columns(self, ids: Sequence[str] | None = None, *, after: int = 0,
                             limit: int = 2000) -> list[tuple[int, tuple[str, str, str, str, str | None, str, str, float, float]]]:
        """Objects' own columns (id, type, kind, name, owner id, privacy, status, created, updated) with
        their ``pk``: those ``ids`` name, or (``ids`` None) up to ``limit`` after ``pk`` ``after``, in
        ``pk`` order, for a reader that walks every object a page at a time (the time cursor's history)."""
        columns = (ObjectRow.pk, ObjectRow.id, ObjectRow.type, ObjectRow.kind, ObjectRow.name, ObjectRow.owner_id,
                   ObjectRow.privacy, ObjectRow.status, ObjectRow.created_at, ObjectRow.updated_at)

        def run(s: Session) -> list[tuple[int, tuple[str, str, str, str, str | None, str, str, float, float]]]:
            stmt = select(*columns)
            if ids is not None:
                stmt = stmt.where(ObjectRow.id.in_(list(ids)))  # type: ignore[attr-defined]
            else:
                stmt = stmt.where(ObjectRow.pk > after).order_by(ObjectRow.pk).limit(limit)  # type: ignore[arg-type,operator]
            return [(int(r[0]), tuple(r[1:])) for r in s.connection().execute(stmt).all()]  # type: ignore[misc]
        return await self._read(run)

    async def edge_rows(self, ids: Sequence[str] | None = None, *, after: int = 0,
                        limit: int = 2000) -> list[tuple[int, str, str, str, float]]:
        """Edges as stored (row id, source, kind, target, created): those touching ``ids`` either way,
        or (``ids`` None) up to ``limit`` after row id ``after``, in id order."""
        def run(s: Session) -> list[tuple[int, str, str, str, float]]:
            stmt = select(EdgeRow.id, EdgeRow.src_id, EdgeRow.kind, EdgeRow.dst_id, EdgeRow.created_at)
            if ids is not None:
                wanted = list(ids)
                stmt = stmt.where(EdgeRow.src_id.in_(wanted) | EdgeRow.dst_id.in_(wanted))  # type: ignore[attr-defined]
            else:
                stmt = stmt.where(EdgeRow.id > after).order_by(EdgeRow.id).limit(limit)  # type: ignore[arg-type,operator]
            return [(int(r[0]), str(r[1]), str(r[2]), str(r[3]), float(r[4])) for r in s.connection().execute(stmt).all()]
        return await self._read(run)

    async def inbox_owners(self) -> list[str]:
        """Every object that has an inbox entry, read or not (one walk of the inbox's owner index)."""
        return await self._read(lambda s: [str(r[0]) for r in s.connection().execute(
            select(InboxRow.owner_id).distinct().order_by(InboxRow.owner_id)).all()])  # type: ignore[call-overload]

    async def inbox_kept(self, *, after_owner: str = "", owners: int = 200, per_owner: int = 200) -> tuple[str, list[InboxEntryView]]:
        """Each owner's newest ``per_owner`` inbox entries, for the next ``owners`` owners (by id) after
        ``after_owner``, in one read; answers the last owner read ("" when there were none), to walk on from."""
        def run(s: Session) -> tuple[str, list[InboxEntryView]]:
            found = [str(r[0]) for r in s.connection().execute(
                select(InboxRow.owner_id).where(InboxRow.owner_id > after_owner).distinct()  # type: ignore[arg-type,operator]
                .order_by(InboxRow.owner_id).limit(owners)).all()]  # type: ignore[arg-type]
            if not found:
                return "", []
            ranked = select(InboxRow.id.label("id"), func.row_number().over(  # type: ignore[union-attr]
                partition_by=InboxRow.owner_id, order_by=InboxRow.id.desc()).label("rn")).where(  # type: ignore[union-attr]
                InboxRow.owner_id.in_(found)).subquery()  # type: ignore[attr-defined]
            rows = s.execute(select(InboxRow).where(InboxRow.id.in_(  # type: ignore[union-attr]
                select(ranked.c.id).where(ranked.c.rn <= per_owner)))).scalars().all()
            return found[-1], [_nodes.entry_view(r) for r in rows]
        return await self._read(run)

    async def fingerprint(self) -> list[float]:
        """Numbers that change whenever an object, an edge or an inbox entry is added, changed, read or
        removed (counts, the newest keys, times and their sums, the lengths of what a list shows), in
        one walk of each table: equal numbers mean a reader that recorded the canvas when they were
        taken need not read it again. (A change that leaves every count, time and length as it was
        goes unseen: it takes a clock that stands still, as in tests, and a value of the same length.)"""
        def run(s: Session) -> list[float]:
            conn = s.connection()
            o = ObjectRow
            shape = (func.length(o.name) + 7 * func.length(o.status) + 13 * func.length(func.coalesce(o.owner_id, ""))
                     + 17 * func.length(o.privacy) + 19 * func.length(o.kind) + 23 * func.length(o.type))
            objects = conn.execute(select(func.count(), func.max(o.pk), func.max(o.updated_at), func.sum(o.updated_at),
                                          func.sum(shape))).one()
            edges = conn.execute(select(func.count(), func.max(EdgeRow.id))).one()
            inbox = conn.execute(select(func.count(), func.max(InboxRow.id), func.count(InboxRow.read_at),
                                        func.max(InboxRow.read_at))).one()
            return [float(v or 0) for v in (*objects, *edges, *inbox)]
        return await self._read(run)

    async def inbox_count_table(self) -> dict[str, tuple[int, int]]:
        """Every inbox's ``(unread, total)`` from the counts the database keeps (one row per owner): what
        changes whenever an entry is delivered or read, announced or not."""
        c = _counters.INBOX_COUNTS.c
        return await self._read(lambda s: {str(o): (int(u), int(t)) for o, u, t in s.connection().execute(
            select(c.owner_id, c.unread, c.total)).all()})

    async def unread_counts(self, owners: Sequence[str]) -> dict[str, int]:
        """How many unread entries each of ``owners`` (object ids) has in its inbox, read at once from the
        counts the database keeps (the operator's view: every entry counts); an unknown id has 0."""
        ids = [str(o) for o in owners][:1000]
        return await self._read(lambda s: _counters.unread_counts(s, ids))

    async def mark_read(self, owner: str, entry_ids: Sequence[int] | None = None, *, up_to: int | None = None) -> int:
        """Mark inbox entries read (the ids, all up to ``up_to``, or all); returns how many changed."""
        return await self._write(lambda tx: _nodes.mark_read(tx, find_object(tx.session, owner).id,
                                                             list(entry_ids) if entry_ids is not None else None,
                                                             up_to=up_to))

    async def start_job(self, command: str, *, actor: str, log_path: str = "", name: str | None = None) -> JobView:
        """A running job started (and watched) by ``actor``."""
        def run(tx: Tx) -> JobView:
            row = _nodes.start_job(tx, command=command, actor=find_object(tx.session, actor), log_path=log_path,
                                   name=name)
            return _nodes.job_view(tx.session, row)
        return await self._write(run)

    async def job_exited(self, ref: str, exit_code: int) -> JobView:
        """The job exited with ``exit_code``; watchers get ``exited``."""
        def run(tx: Tx) -> JobView:
            row = _typed(tx.session, ref, "job")
            _nodes.finish_job(tx, row, exit_code=exit_code)
            return _nodes.job_view(tx.session, row)
        return await self._write(run)

    async def job_killed(self, ref: str) -> JobView:
        """The job was killed; watchers get ``killed``."""
        def run(tx: Tx) -> JobView:
            row = _typed(tx.session, ref, "job")
            _nodes.finish_job(tx, row, exit_code=None, killed=True)
            return _nodes.job_view(tx.session, row)
        return await self._write(run)

    # -- custom objects --------------------------------------------------------------------------

    async def register_custom_object(self, kind: str, *, name: str, events: Mapping[str, int],
                                     owner: str | None = None, receiver: str | None = None, url: str | None = None,
                                     argv: Sequence[str] | None = None, timeout: float | None = None) -> CustomObjectView:
        """Register a custom object with a dotted kind and a catalog ``{event: level}``; a ``url``
        receiver takes ``url`` (https; http only on loopback), an ``argv`` one its command as a list
        (run without a shell); ``timeout`` in seconds for either (``services.canvas.receivers``)."""
        config = check_receiver(receiver, url=url, argv=list(argv) if isinstance(argv, (list, tuple)) else argv,
                                timeout=timeout)

        def run(tx: Tx) -> CustomObjectView:
            owner_id = self._owner(tx, owner).id if owner else None
            row = _custom.register_custom(tx, kind=kind, name=name, owner_id=owner_id, events=events, receiver=receiver,
                                          config=config)
            return _custom.custom_view(tx.session, row)
        view = await self._write(run)
        if receiver in ("url", "argv"):
            self.receivers.active = True
        return view

    async def receiver_attempts(self, ref: str, *, limit: int = 50) -> list[ReceiverAttempt]:
        """A custom object's receiver attempts, newest first: outcome, HTTP or exit status, error."""
        def run(s: Session) -> list[ReceiverAttempt]:
            row = _typed(s, ref, "custom")
            rows = s.execute(select(ReceiverAttemptRow).where(ReceiverAttemptRow.object_id == row.id)
                             .order_by(ReceiverAttemptRow.id.desc()).limit(max(1, limit))).scalars().all()
            return [attempt_view(r) for r in rows]
        return await self._read(run)

    async def publish(self, ref: str, event: str, *, data: Mapping[str, object] | None = None,
                      actor: str | None = None) -> int:
        """Publish a declared event of a custom object; returns the event id."""
        return await self._write(lambda tx: _custom.publish_custom(
            tx, _typed(tx.session, ref, "custom"), event, data=dict(data or {}), actor_id=self._actor(tx.session, actor)))

    async def receive(self, ref: str, *, limit: int = 10) -> list[InboxEntryView]:
        """Unacknowledged entries of a custom object's queue, oldest first."""
        return await self._read(lambda s: [_nodes.entry_view(r) for r in
                                           _custom.receive_queue(s, _typed(s, ref, "custom"), limit=limit)])

    async def ack(self, ref: str, entry_ids: Sequence[int]) -> int:
        """Acknowledge queue entries; returns how many were still open."""
        return await self._write(lambda tx: _nodes.mark_read(tx, _typed(tx.session, ref, "custom").id, list(entry_ids)))

    # -- delivery and profiles -------------------------------------------------------------------

    async def reader_view(self, node: str) -> ReaderView:
        """The reader's view of node ``node``: itself, its profile's purview repos, its profile, and
        the app or person that owns it (``delivery.node_view_of``)."""
        def run(s: Session) -> ReaderView:
            row = _typed(s, node, "node")
            return _delivery.node_view_of(s, row, s.execute(select(NodeRow).where(NodeRow.object_id == row.id)).scalar_one())
        return await self._read(run)

    async def boot_context(self, node: str, *, event: str = "boot", view: ReaderView | None = None) -> BootContext:
        """What ``node`` loads for ``event`` (``boot`` or ``workspace-open``), in load order, each with
        its level, rule, owner and capping limit; and each document of its view it does not load, with why.
        Asked in a reader's ``view`` (the node's own, say), a document that reader may not read is not
        named at all: neither loaded nor ``privacy``, nor as what shadows another, nor as a link's target."""
        def run(s: Session) -> BootContext:
            row, access = find_readable(s, node, view)
            return _delivery.boot_context(s, row.id if view is not None else node, event, asker=access)
        return await self._read(run)

    async def why_not(self, node: str, document: str, *, event: str = "boot",
                      view: ReaderView | None = None) -> LoadVerdict:
        """Whether ``node`` loads ``document`` for ``event``, and if not, the reason: ``privacy``,
        ``not_eligible``, ``shadowed``, ``no_rule``, ``if_mismatch`` or ``capped``. In a reader's
        ``view``, a document (or node) it may not read is ``ObjectNotFoundError``, as a name nobody holds."""
        def run(s: Session) -> LoadVerdict:
            access = access_for(s, view)
            if view is not None:
                find_readable(s, node, view)
            return _delivery.explain(s, node, _document(s, document, view), event, asker=access)
        return await self._read(run)

    async def who_loads(self, document: str, *, event: str = "boot", limit: int = 200,
                        view: ReaderView | None = None) -> list[LoadVerdict]:
        """For each node (up to ``limit``), whether it loads ``document`` for ``event``; loaders first.
        In a reader's ``view``, a document it may not read is ``ObjectNotFoundError``."""
        def run(s: Session) -> list[LoadVerdict]:
            doc = _document(s, document, view)
            return _delivery.who_loads(s, doc, event, limit=limit, asker=access_for(s, view))
        return await self._read(run)

    async def install_plugin(self, plugin: str, *, scope: str) -> list[str]:
        """Install ``plugin`` (the app ``app:<plugin>``, created if missing) for a person
        (``user:<handle>``) or a project (``repo:<handle>``): the nodes of that person or with that
        repo in their view read and load its documents after the person's and before ``crtr``'s.
        Returns the scope's plugins in install order."""
        return await self._write(lambda tx: _plugins.install_plugin(tx, plugin, self._owner(tx, scope)))

    async def uninstall_plugin(self, plugin: str, *, scope: str) -> bool:
        """Remove ``plugin`` from a person's or project's plugins; whether it was installed there."""
        def run(tx: Tx) -> bool:
            return _plugins.uninstall_plugin(tx, plugin, find_object(tx.session, scope))
        return await self._write(run)

    async def plugins(self, scope: str) -> list[str]:
        """The plugins installed for a person or project, in install order."""
        return await self._read(lambda s: _plugins.installed_for(s, [find_object(s, scope).id]))

    async def create_profile(self, name: str, *, display_name: str | None = None,
                             purview: Sequence[tuple[str, str]] = ()) -> ProfileView:
        """A new profile (id ``profile:<name>``) with projects and their delivery limits."""
        return await self._write(lambda tx: _profiles.profile_view(tx.session, _profiles.create_profile(
            tx, name, display_name=display_name, purview=[tuple(p) for p in purview])))  # type: ignore[misc]

    async def profile(self, ref: str) -> ProfileView:
        """A profile by id, ``profile:<name>`` or name."""
        return await self._read(lambda s: _profiles.profile_view(s, _profiles.profile_row(s, ref)))

    async def set_profile_project(self, profile: str, project: str, limit: str | None) -> ProfileView:
        """Add or change a project of the profile's purview with its delivery limit
        (``content``/``preview``/``name``/``none``); ``limit=None`` removes the project."""
        def run(tx: Tx) -> ProfileView:
            row = _profiles.profile_row(tx.session, profile)
            _profiles.set_project(tx, row, project, limit)
            return _profiles.profile_view(tx.session, row)
        return await self._write(run)

    async def rename_profile(self, profile: str, new_name: str, *, display_name: str | None = None) -> ProfileView:
        """Rename a profile: the id stays, the handle (and full names of its documents) follow;
        refused with ``NameTakenError`` when another live profile holds ``new_name``."""
        def run(tx: Tx) -> ProfileView:
            row = _profiles.rename_profile(tx, _profiles.profile_row(tx.session, profile), new_name,
                                           display_name=display_name)
            return _profiles.profile_view(tx.session, row)
        return await self._write(run)

    async def set_default_profile(self, directory: str, profile: str | None) -> None:
        """Pin ``profile`` as the default of ``directory`` and everything under it (``None`` unpins)."""
        def run(tx: Tx) -> None:
            _profiles.set_default(tx, directory, _profiles.profile_row(tx.session, profile) if profile else None)
        await self._write(run)

    async def default_profile(self, directory: str) -> ProfileView | None:
        """The profile pinned on ``directory`` or its nearest parent, or None."""
        def run(s: Session) -> ProfileView | None:
            row = _profiles.default_for(s, directory)
            return _profiles.profile_view(s, row) if row is not None else None
        return await self._read(run)

    # -- insight listeners -----------------------------------------------------------------------

    async def create_listener(self, topic: str, *, owner: str, domain: str, exclusions: Sequence[str] = (),
                              actor: str | None = None) -> DocumentView:
        """Create the ``insights/<topic>`` listener preference under a repo, profile or user owner."""
        def run(tx: Tx) -> DocumentView:
            owner_row = self._owner(tx, owner)
            if owner_row.type not in LISTENER_OWNER_TYPES:
                raise DocumentInvalidError(f"a listener's owner must be a repo, profile or user, not a {owner_row.type}")
            doc = _docs.write_document(tx, owner=owner_row, path=listener_path(topic), preview=listener_preview(domain),
                                       body=listener_body(topic, domain, exclusions), kind="preference",
                                       rules=list(LISTENER_RULES), actor_id=self._actor(tx.session, actor))
            return _docs.document_view(tx.session, doc)
        return await self._write(run)

    async def approve_insight(self, listener: str, principle: str, *, actor: str | None = None) -> DocumentView:
        """Append ``[[principle]]`` under the listener's ``Approved insights`` (one transaction, no lost update)."""
        def run(tx: Tx) -> DocumentView:
            doc = _document(tx.session, listener)
            current = _docs.document_view(tx.session, doc)
            body = append_approved_link(current.body, principle)
            if body != current.body:
                _docs.edit_document(tx, doc, actor_id=self._actor(tx.session, actor), base_revision=current.revision,
                                    body=body)
            return _docs.document_view(tx.session, doc)
        return await self._write(run)


def _owner_handle(session: Session, row: ObjectRow) -> str | None:
    return owner_handle(session, row)


def _typed(session: Session, ref: str | None, type_: str) -> ObjectRow:
    if ref is None:
        raise ObjectNotFoundError(f"a {type_} is required")
    row = find_object(session, ref)
    if row.type != type_:
        raise CanvasError(f"{ref!r} is a {row.type}, not a {type_}")
    return row


def _document(session: Session, ref: str, view: ReaderView | None = None) -> ObjectRow:
    if view is None:
        return _typed(session, ref, "document")
    row, _ = find_readable(session, ref, view)
    if row.type != "document":
        raise CanvasError(f"{ref!r} is a {row.type}, not a document")
    return row


def _events_page(s: Session, object_id: str, *, limit: int, before: int | None,
                 access: Access | None) -> list[EventView]:
    """An object's events, newest first. For a reader, an event naming (as its actor, or in its data)
    an object the reader may not read is left out, and the page is filled from older events instead,
    so it is the page the reader would see if that object did not exist."""
    limit = max(0, int(limit))
    out: list[EventView] = []
    while len(out) < limit:
        stmt = select(EventRow).where(EventRow.object_id == object_id)
        if before is not None:
            stmt = stmt.where(EventRow.id < before)
        rows = s.execute(stmt.order_by(EventRow.id.desc()).limit(limit)).scalars().all()
        if not rows:
            break
        views = [_event_view(r) for r in rows]
        if access is not None:
            named = {v.actor_id for v in views if v.actor_id}.union(*(mentioned_ids(v.data) for v in views))
            hidden = hidden_ids(s, sorted(named), access)
            if hidden:
                views = [v for v in views if v.actor_id not in hidden and not mentioned_ids(v.data) & hidden]
        out += views
        if access is None or len(rows) < limit:
            break
        before = rows[-1].id
    return out[:limit]
