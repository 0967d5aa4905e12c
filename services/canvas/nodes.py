"""Nodes, their inboxes and messages, and jobs.

Spawning a child creates a ``spawned`` edge from the parent and makes the parent a watcher of the
child. ``message_send`` appends a message to the node's inbox and makes the sender a watcher; a
node that is not mid-turn is woken (status ``active``; a finished terminal node is not revived),
while messages that arrive mid-turn coalesce: they all wait in the inbox behind one pending wake
that ``end_turn`` turns into a single new turn.
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy import ColumnElement, func, or_, select, update
from sqlmodel import Session, col

from services.text import clip

from .counters import inbox_counts
from .eligibility import OPERATOR, Access
from .errors import CanvasError, DocumentInvalidError, NameTakenError
from .events import COMMON_LEVELS, EventBatch, add_edge, ensure_watch, hidden_entry_filters, publish_event
from .models import InboxRow, JobRow, NodeRow, ObjectRow
from .names import NODE_LIFECYCLES, NODE_MODES, NODE_STATUSES, check_handle, check_node_kind
from .objects import Tx, create_object, get_row, new_id, summary_of
from .profiles import resolve_profile
from .views import InboxEntryView, InboxPage, JobView, NodeView

__all__ = [
    "JOB_STATUSES",
    "spawn_node",
    "configure_node",
    "begin_turn",
    "end_turn",
    "message_send",
    "start_job",
    "finish_job",
    "node_view",
    "job_view",
    "entry_view",
    "inbox_page",
    "mark_read",
]

JOB_STATUSES = ("running", "exited", "killed")
_FINISHED = ("done", "dead", "canceled")


def _check_shape(mode: str | None, lifecycle: str | None, status: str | None) -> None:
    if mode is not None and mode not in NODE_MODES:
        raise DocumentInvalidError(f"the node mode {mode!r} must be one of {', '.join(NODE_MODES)}")
    if lifecycle is not None and lifecycle not in NODE_LIFECYCLES:
        raise DocumentInvalidError(f"the node lifecycle {lifecycle!r} must be one of {', '.join(NODE_LIFECYCLES)}")
    if status is not None and status not in NODE_STATUSES:
        raise DocumentInvalidError(f"the node status {status!r} must be one of {', '.join(NODE_STATUSES)}")


def spawn_node(tx: Tx, *, node_id: str | None, name: str | None, owner_id: str | None, kind: str = "general",
               mode: str = "base", lifecycle: str = "terminal", profile: str | None = None,
               parent: ObjectRow | None = None, status: str = "active", actor_id: str | None = None) -> ObjectRow:
    """Create a node; a parent gets a ``spawned`` edge to it and watches it."""
    check_node_kind(kind)
    _check_shape(mode, lifecycle, status)
    node_id = check_handle(node_id, "node id") if node_id else new_id("node")
    if get_row(tx.session, node_id) is not None:
        raise NameTakenError(f"the id {node_id!r} is taken by another object; choose another node id")
    if profile is None and parent is not None:  # a child inherits its caller's profile
        profile = tx.session.execute(select(NodeRow.profile).where(NodeRow.object_id == parent.id)).scalar_one_or_none()
    profile = resolve_profile(tx.session, profile)
    row = create_object(tx, type="node", name=name or node_id, owner_id=owner_id, id=node_id, kind=kind,
                        status=status, handle=node_id)
    tx.session.add(NodeRow(object_id=row.id, kind=kind, mode=mode, lifecycle=lifecycle, profile=profile,
                           parent_id=parent.id if parent else None))
    tx.session.flush()
    if parent is not None:
        add_edge(tx.session, parent.id, row.id, "spawned", tx.now)
        ensure_watch(tx.session, parent.id, row.id, tx.now)
    publish_event(tx.session, row, "created", tx.now, actor_id=actor_id or (parent.id if parent else None))
    return row


def configure_node(tx: Tx, node: ObjectRow, changes: Mapping[str, str | None], *,
                   actor_id: str | None = None, batch: EventBatch | None = None,
                   row: NodeRow | None = None) -> NodeRow:
    """Change a node's kind, mode, lifecycle, profile, status, activity or outcome; publishes
    ``configured``. The fields come as one mapping, so none can collide with a parameter's name.
    With ``batch`` (and no actor) the event is queued on it and the fields are written with the
    unit of work's next flush (a writer configuring many nodes writes them by table). ``row``: the
    node's row, when the caller holds it already (else it is looked up)."""
    fields = dict(changes)
    allowed = {"kind", "mode", "lifecycle", "profile", "status", "activity", "outcome", "name"}
    unknown = set(fields) - allowed
    if unknown:
        raise DocumentInvalidError(f"cannot configure {', '.join(sorted(unknown))} on a node")
    if "kind" in fields and fields["kind"] is not None:
        check_node_kind(fields["kind"])
    _check_shape(fields.get("mode"), fields.get("lifecycle"), fields.get("status"))
    if fields.get("profile"):
        fields["profile"] = resolve_profile(tx.session, fields["profile"])
    if row is None or row.object_id != node.id:
        row = tx.session.get(NodeRow, node.id) or tx.session.execute(
            select(NodeRow).where(NodeRow.object_id == node.id)).scalar_one()
    changed: dict[str, str | None] = {}
    for key, value in fields.items():
        if key == "status":
            if value != node.status:
                node.status = value
                changed[key] = value
        elif key == "name":
            if value and value != node.name:
                node.name = value
                changed[key] = value
        elif key == "kind":
            if value and value != row.kind:
                row.kind = node.kind = value
                changed[key] = value
        elif getattr(row, key) != value:
            setattr(row, key, value)
            changed[key] = value
    if changed:
        node.updated_at = tx.now
        level = 6 if changed.get("status") in ("dead", "canceled", "waiting_on_user") else None
        summary = f"{node.name}: " + ", ".join(f"{k}={v}" for k, v in changed.items())
        if batch is not None and actor_id is None:
            batch.add(node, "configured", tx.now, level=COMMON_LEVELS["configured"] if level is None else level,
                      data=changed, summary=summary)
        else:
            tx.session.flush()
            publish_event(tx.session, node, "configured", tx.now, level=level, actor_id=actor_id, data=changed,
                          summary=summary)
        tx.change("node.updated", node.id, **changed)
    return row


def _node_row(session: Session, node: ObjectRow) -> NodeRow:
    if node.type != "node":
        raise CanvasError(f"{node.name!r} is a {node.type}, not a node")
    return session.execute(select(NodeRow).where(NodeRow.object_id == node.id)).scalar_one()


def begin_turn(tx: Tx, node: ObjectRow) -> None:
    """The node starts a turn: mid-turn messages will coalesce until ``end_turn``."""
    row = _node_row(tx.session, node)
    row.turn_active, row.wake_pending = True, False
    if node.status != "active":
        node.status, node.updated_at = "active", tx.now
    tx.session.flush()
    tx.change("node.updated", node.id, status=node.status, turn_active=True)


def end_turn(tx: Tx, node: ObjectRow, *, status: str = "idle") -> bool:
    """The turn ends; if messages arrived meanwhile, one new turn starts for all of them (True)."""
    row = _node_row(tx.session, node)
    _check_shape(None, None, status)
    woke = row.wake_pending
    row.turn_active = woke
    row.wake_pending = False
    if woke:
        row.wakes += 1
        node.status = "active"
        publish_event(tx.session, node, "woken", tx.now, data={"coalesced": True})
    else:
        node.status = status
    node.updated_at = tx.now
    tx.session.flush()
    tx.change("node.updated", node.id, status=node.status, turn_active=row.turn_active)
    return woke


def message_send(tx: Tx, node: ObjectRow, body: str, *, sender_id: str | None) -> tuple[InboxRow, bool, bool]:
    """Append ``body`` to the node's inbox; returns ``(entry, woke, coalesced)``."""
    if not isinstance(body, str) or not body.strip():
        raise DocumentInvalidError("a message needs a body")
    row = _node_row(tx.session, node)
    entry = InboxRow(owner_id=node.id, kind="message", object_id=sender_id, object_name=sender_id or "operator",
                     event_type="message", level=5, actor_id=sender_id, at=tx.now,
                     summary=clip(body.strip().splitlines()[0], 80), body=body)
    tx.session.add(entry)
    woke = coalesced = False
    if row.turn_active:
        row.wake_pending = coalesced = True
    elif node.status not in _FINISHED or row.lifecycle == "resident":
        row.turn_active, row.wakes, woke = True, row.wakes + 1, True
        node.status = "active"
    node.updated_at = tx.now
    tx.session.flush()
    if sender_id and sender_id != node.id and get_row(tx.session, sender_id) is not None:
        ensure_watch(tx.session, sender_id, node.id, tx.now)
        add_edge(tx.session, sender_id, node.id, "acted-on", tx.now)
    publish_event(tx.session, node, "message.received", tx.now, actor_id=sender_id,
                  data={"entry": entry.id, "woke": woke, "coalesced": coalesced})
    if woke:
        publish_event(tx.session, node, "woken", tx.now, actor_id=sender_id)
    tx.change("inbox.added", node.id, entry=entry.id, woke=woke, coalesced=coalesced)
    return entry, woke, coalesced


def start_job(tx: Tx, *, command: str, actor: ObjectRow, log_path: str = "", name: str | None = None) -> ObjectRow:
    """A running job owned by ``actor``, who watches it."""
    if not isinstance(command, str) or not command.strip():
        raise DocumentInvalidError("a job needs a command")
    job_id = new_id("job")
    row = create_object(tx, type="job", name=name or job_id, owner_id=actor.id, id=job_id, status="running")
    tx.session.add(JobRow(object_id=row.id, command=command, log_path=log_path, started_by=actor.id))
    tx.session.flush()
    ensure_watch(tx.session, actor.id, row.id, tx.now)
    add_edge(tx.session, actor.id, row.id, "acted-on", tx.now)
    publish_event(tx.session, row, "created", tx.now, actor_id=actor.id, data={"command": command})
    return row


def finish_job(tx: Tx, job: ObjectRow, *, exit_code: int | None, killed: bool = False) -> None:
    """The job ``exited`` (with its code) or was ``killed``; watchers hear of it."""
    if job.type != "job":
        raise CanvasError(f"{job.name!r} is a {job.type}, not a job")
    if job.status != "running":
        raise CanvasError(f"the job {job.name!r} already {job.status}")
    row = tx.session.execute(select(JobRow).where(JobRow.object_id == job.id)).scalar_one()
    row.exit_code = exit_code
    job.status, job.updated_at = ("killed" if killed else "exited"), tx.now
    tx.session.flush()
    kind = "killed" if killed else "exited"
    level = 7 if killed or (exit_code or 0) != 0 else 5
    publish_event(tx.session, job, kind, tx.now, level=level, data={"exit_code": exit_code},
                  summary=f"{job.name}: {kind}" + ("" if killed else f" ({exit_code})"))
    tx.change("job.updated", job.id, status=job.status, exit_code=exit_code)


def node_view(session: Session, node: ObjectRow) -> NodeView:
    """A node as a read model."""
    row = _node_row(session, node)
    return NodeView(object=summary_of(node, node.handle), kind=row.kind, mode=row.mode, lifecycle=row.lifecycle,
                    profile=row.profile, parent_id=row.parent_id, status=node.status, activity=row.activity,
                    outcome=row.outcome, turn_active=row.turn_active, wake_pending=row.wake_pending, wakes=row.wakes)


def job_view(session: Session, job: ObjectRow) -> JobView:
    """A job as a read model."""
    row = session.execute(select(JobRow).where(JobRow.object_id == job.id)).scalar_one()
    return JobView(object=summary_of(job, None), command=row.command, status=job.status, exit_code=row.exit_code,
                   log_path=row.log_path, started_by=row.started_by)


def entry_view(row: InboxRow) -> InboxEntryView:
    """An inbox row as a read model."""
    return InboxEntryView(id=row.id or 0, owner_id=row.owner_id, kind=row.kind, object_id=row.object_id,
                          object_name=row.object_name, event_type=row.event_type, level=row.level,
                          actor_id=row.actor_id, at=row.at, summary=row.summary, body=row.body,
                          read=row.read_at is not None)


def inbox_page(session: Session, owner_id: str, *, offset: int = 0, limit: int = 50,
               unread_only: bool = False, oldest_first: bool = False, access: Access | None = None) -> InboxPage:
    """One page of ``owner_id``'s inbox (newest first by default) with unread and total counts; for a
    reader (``access``), entries about an object it may not read (or one gone), or naming one as their
    actor or in their event's data (``events.hidden_entry_filters``), are left out; messages stay."""
    limit = max(1, min(int(limit), 1000))
    where: list[ColumnElement[bool]] = [col(InboxRow.owner_id) == owner_id]
    if access is not None:
        where.append(or_(InboxRow.kind == "message", InboxRow.object_id.in_(select(ObjectRow.id).where(access.clause()))))
        where += hidden_entry_filters(session, where, access)
    stmt = select(InboxRow).where(*where)
    if unread_only:
        stmt = stmt.where(InboxRow.read_at.is_(None))
    stmt = stmt.order_by(InboxRow.id if oldest_first else InboxRow.id.desc()).offset(max(0, offset)).limit(limit)
    rows = session.execute(stmt).scalars().all()
    if access is None:  # the operator's counts are kept by the database (``counters.inbox_counts``)
        unread, total = inbox_counts(session, owner_id)
    else:
        unread, total = session.execute(select(func.count().filter(InboxRow.read_at.is_(None)), func.count())
                                        .select_from(InboxRow).where(*where)).one()
    return InboxPage(owner_id=owner_id, items=tuple(entry_view(r) for r in rows), unread=int(unread),
                     total=int(total), offset=max(0, offset), limit=limit,
                     seen_as=access.label if access else OPERATOR)


def mark_read(tx: Tx, owner_id: str, entry_ids: list[int] | None = None, *, up_to: int | None = None) -> int:
    """Mark entries read: the listed ids, every entry up to ``up_to``, or (neither) all; returns how many."""
    stmt = update(InboxRow).where(InboxRow.owner_id == owner_id, InboxRow.read_at.is_(None))
    if entry_ids is not None:
        stmt = stmt.where(InboxRow.id.in_(list(entry_ids)))
    if up_to is not None:
        stmt = stmt.where(InboxRow.id <= up_to)
    count = tx.session.execute(stmt.values(read_at=tx.now).execution_options(synchronize_session=False)).rowcount
    if count:
        tx.change("inbox.read", owner_id, count=count)
    return int(count)
