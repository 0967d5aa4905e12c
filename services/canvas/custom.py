"""Custom objects: a dotted kind, a declared event catalog with fixed levels, and a receiver.

Only declared events can be published, each at the level its catalog fixes. A ``queue`` receiver
collects what the object hears (as a watcher, ``watch(..., watcher=<custom object>)``) in its
inbox; ``receive`` hands out unacknowledged entries oldest first and ``ack`` settles them, so an
entry received but never acknowledged is handed out again.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

from sqlalchemy import not_, or_, select
from sqlmodel import Session, col

from .errors import CanvasError, DocumentInvalidError, NameRefusedError, UndeclaredEventError
from .events import check_level, hidden_entry_filters, publish_event
from .models import CustomObjectRow, InboxRow, ObjectRow
from .objects import Tx, create_object, summary_of
from .views import CustomObjectView

if TYPE_CHECKING:
    from .receivers import ReceiverConfig

__all__ = ["RECEIVERS", "register_custom", "publish_custom", "receive_queue", "custom_view", "catalog_of"]

RECEIVERS = ("queue", "url", "argv")
_DOTTED = re.compile(r"^[a-z][a-z0-9-]*(\.[a-z][a-z0-9-]*)+$")
_EVENT = re.compile(r"^[a-z][a-z0-9_-]*(\.[a-z][a-z0-9_-]*)*$")


def register_custom(tx: Tx, *, kind: str, name: str, owner_id: str | None, events: Mapping[str, int],
                    receiver: str | None = None, config: ReceiverConfig | None = None) -> ObjectRow:
    """A new custom object of ``kind`` declaring ``events`` (``{type: level}``)."""
    if not isinstance(kind, str) or not _DOTTED.match(kind):
        raise NameRefusedError(f"the custom object kind {kind!r} must be dotted, like 'acme.deploy'")
    if not isinstance(name, str) or not name.strip():
        raise NameRefusedError("a custom object needs a name")
    if receiver is not None and receiver not in RECEIVERS:
        raise DocumentInvalidError(f"the receiver {receiver!r} must be one of {', '.join(RECEIVERS)}")
    if not isinstance(events, Mapping) or not events:
        raise DocumentInvalidError(f"the custom object {name!r} must declare at least one event")
    catalog: dict[str, int] = {}
    for event, level in events.items():
        if not isinstance(event, str) or not _EVENT.match(event):
            raise DocumentInvalidError(f"{name!r} declares an invalid event name {event!r}")
        catalog[event] = check_level(level, f"level of {event!r}")
    row = create_object(tx, type="custom", name=name.strip(), owner_id=owner_id, kind=kind, handle=None)
    tx.session.add(CustomObjectRow(object_id=row.id, catalog=json.dumps(catalog, sort_keys=True), receiver=receiver,
                                   config=json.dumps(dict(config or {}), sort_keys=True)))
    tx.session.flush()
    publish_event(tx.session, row, "created", tx.now, data={"kind": kind})
    return row


def catalog_of(session: Session, obj: ObjectRow) -> tuple[dict[str, int], str | None]:
    """The declared events and receiver of a custom object."""
    if obj.type != "custom":
        raise CanvasError(f"{obj.name!r} is a {obj.type}, not a custom object")
    row = session.execute(select(CustomObjectRow).where(CustomObjectRow.object_id == obj.id)).scalar_one()
    return json.loads(row.catalog), row.receiver


def publish_custom(tx: Tx, obj: ObjectRow, event: str, *, data: Mapping[str, object] | None = None,
                   actor_id: str | None = None) -> int:
    """Publish a declared event at its catalog level; an undeclared one is refused. Returns the event id."""
    catalog, _ = catalog_of(tx.session, obj)
    if event not in catalog:
        declared = ", ".join(sorted(catalog)) or "none"
        raise UndeclaredEventError(f"{obj.name!r} ({obj.kind}) does not declare the event {event!r}; declared: {declared}")
    row, _ = publish_event(tx.session, obj, event, tx.now, level=catalog[event], actor_id=actor_id, data=data)
    tx.change("event.published", obj.id, type=event, level=catalog[event])
    return row.id or 0


def receive_queue(session: Session, obj: ObjectRow, *, limit: int = 10) -> list[InboxRow]:
    """Unacknowledged entries of a queue receiver, oldest first; an entry about an object its owner
    may no longer read (``delivery.reader_access``), or naming one (``events.hidden_entry_filters``), is
    not handed out, as if the object did not exist."""
    from .delivery import reader_access

    _, receiver = catalog_of(session, obj)
    if receiver != "queue":
        raise CanvasError(f"{obj.name!r} has no queue receiver")
    where = [col(InboxRow.owner_id) == obj.id, col(InboxRow.read_at).is_(None)]
    access = reader_access(session, obj.id)
    if access is not None:
        hidden = select(col(ObjectRow.id)).where(not_(access.clause()))
        where.append(or_(col(InboxRow.object_id).is_(None), col(InboxRow.object_id).not_in(hidden)))
        where += hidden_entry_filters(session, where, access)
    return list(session.execute(select(InboxRow).where(*where).order_by(col(InboxRow.id))
                                .limit(max(1, limit))).scalars().all())


def custom_view(session: Session, obj: ObjectRow) -> CustomObjectView:
    """A custom object as a read model."""
    catalog, receiver = catalog_of(session, obj)
    return CustomObjectView(object=summary_of(obj, None), kind=obj.kind, catalog=catalog, receiver=receiver)
