"""The canvas tables (SQLModel): one ``objects`` table every type shares, plus one table per type.

Every object (document, node, job, owner, custom object) is a row of ``objects`` with a string id,
a type, a name, an owner and a privacy. Type-specific fields live in ``documents``, ``nodes``,
``jobs`` and ``custom_objects`` keyed by the object id. ``edges``, ``events``, ``watches`` and
``inbox`` make the graph. Child rows cascade when their object is deleted; inbox entries keep a
snapshot (object name, event type, level) so a watcher's inbox survives the object.

JSON-shaped fields (rules, event data, a custom object's catalog) are stored as JSON text so Core
bulk inserts and other SQL servers need nothing special.
"""

from __future__ import annotations

from sqlalchemy import Column, ForeignKey, Index, Integer, String, Text, UniqueConstraint, text
from sqlmodel import Field, SQLModel

__all__ = [
    "ObjectRow",
    "DocumentRow",
    "RevisionRow",
    "LinkRow",
    "NodeRow",
    "JobRow",
    "CustomObjectRow",
    "EdgeRow",
    "EventRow",
    "WatchRow",
    "InboxRow",
    "ProfileRow",
    "ProfileDefaultRow",
    "ReceiverAttemptRow",
    "TABLES",
]


_NAME = String().with_variant(String(collation="C"), "postgresql")


def _fk(target: str, *, nullable: bool = False, on_delete: str = "CASCADE", index: bool = False) -> Column:
    return Column(String, ForeignKey(target, ondelete=on_delete), nullable=nullable, index=index)


_PARTIAL = {"ux_objects_owner_doc_name": "type = 'document'", "ux_objects_handle": "handle IS NOT NULL"}
"""The rows each partial unique index of ``objects`` covers (SQL, the same on both engines)."""


def postgresql_partial_indexes() -> None:
    """Give the partial indexes of ``objects`` their PostgreSQL ``WHERE`` (as SQLite's): done once, before
    a PostgreSQL engine creates anything. Naming it in the table's definition would import the
    PostgreSQL dialect whenever the models are imported (a twentieth of a window's start-up)."""
    for index in ObjectRow.__table__.indexes:  # type: ignore[attr-defined]
        where = _PARTIAL.get(index.name or "")
        if where is not None and index.dialect_options["postgresql"]["where"] is None:
            index.dialect_options["postgresql"]["where"] = text(where)


class ObjectRow(SQLModel, table=True):
    """One canvas object of any type."""

    __tablename__ = "objects"
    __table_args__ = (
        Index("ix_objects_type_owner_name_pk", "type", "owner_id", "name", "pk"),  # a page's keys from the index alone
        # every column a summary needs, by owner: an owner's documents (a node's boot context, a page
        # by owner) come from one range of this index, without a lookup into the table per row
        Index("ix_objects_owner_type_name_cover", "owner_id", "type", "name", "pk", "id", "kind", "handle", "privacy",
              "status", "created_at", "updated_at"),
        Index("ix_objects_type_name", "type", "name"),
        Index("ix_objects_owner_name", "owner_id", "name"),
        Index("ix_objects_name", "name"),
        # partial on both engines: PostgreSQL's WHERE is added when a PostgreSQL engine is made
        # (``postgresql_partial_indexes``), so that SQLite alone never imports that dialect
        Index("ux_objects_owner_doc_name", "owner_id", "name", unique=True, sqlite_where=text(_PARTIAL["ux_objects_owner_doc_name"])),
        Index("ux_objects_handle", "type", "handle", unique=True, sqlite_where=text(_PARTIAL["ux_objects_handle"])),
    )

    pk: int | None = Field(default=None, sa_column=Column(Integer, primary_key=True, autoincrement=True))
    id: str = Field(sa_column=Column(String, unique=True, nullable=False))
    type: str
    kind: str = ""
    name: str = Field(sa_column=Column(_NAME, nullable=False))
    """Sorted and compared byte-wise on both engines (``COLLATE "C"`` on PostgreSQL, whatever the
    database's locale), so a page of objects by name is the same page on SQLite and PostgreSQL."""
    handle: str | None = None
    owner_id: str | None = Field(default=None, sa_column=_fk("objects.id", nullable=True, on_delete="RESTRICT"))
    privacy: str = "public"
    status: str = ""
    created_at: float
    updated_at: float


class DocumentRow(SQLModel, table=True):
    """A document's current revision."""

    __tablename__ = "documents"

    object_id: str = Field(sa_column=Column(String, ForeignKey("objects.id", ondelete="CASCADE"), primary_key=True))
    kind: str = "knowledge"
    preview: str
    summary: str | None = None
    body: str = Field(default="", sa_column=Column(Text, nullable=False))
    rules: str = "[]"
    revision: int = 1
    updated_by: str | None = None


class RevisionRow(SQLModel, table=True):
    """One stored revision of a document (revision 1 is the first write)."""

    __tablename__ = "revisions"
    __table_args__ = (UniqueConstraint("document_id", "revision"),)

    id: int | None = Field(default=None, primary_key=True)
    document_id: str = Field(sa_column=_fk("objects.id"))
    revision: int
    name: str
    kind: str
    preview: str
    summary: str | None = None
    body: str = Field(default="", sa_column=Column(Text, nullable=False))
    rules: str = "[]"
    author: str | None = None
    at: float


class LinkRow(SQLModel, table=True):
    """A ``[[link]]`` in a document body: its text, and its target once it resolves."""

    __tablename__ = "links"
    __table_args__ = (Index("ix_links_document", "document_id"), Index("ix_links_target_text", "target", "target_id"))

    id: int | None = Field(default=None, primary_key=True)
    document_id: str = Field(sa_column=_fk("objects.id"))
    target: str
    target_id: str | None = Field(default=None, sa_column=_fk("objects.id", nullable=True, on_delete="SET NULL", index=True))


class NodeRow(SQLModel, table=True):
    """A node's shape and turn state (its status is ``objects.status``)."""

    __tablename__ = "nodes"

    object_id: str = Field(sa_column=Column(String, ForeignKey("objects.id", ondelete="CASCADE"), primary_key=True))
    kind: str = "general"
    mode: str = "base"
    lifecycle: str = "terminal"
    profile: str | None = None
    parent_id: str | None = Field(default=None, sa_column=_fk("objects.id", nullable=True, on_delete="SET NULL", index=True))
    activity: str | None = None
    outcome: str | None = None
    turn_active: bool = False
    wake_pending: bool = False
    wakes: int = 0
    last_seq: int = 0
    """The last run event ``seq`` applied to this node (the run bridge skips replays)."""


class JobRow(SQLModel, table=True):
    """A backgrounded command (its status is ``objects.status``)."""

    __tablename__ = "jobs"

    object_id: str = Field(sa_column=Column(String, ForeignKey("objects.id", ondelete="CASCADE"), primary_key=True))
    command: str
    exit_code: int | None = None
    log_path: str = ""
    started_by: str | None = None


class CustomObjectRow(SQLModel, table=True):
    """A registered custom object's event catalog (JSON ``{event: level}``) and receiver."""

    __tablename__ = "custom_objects"

    object_id: str = Field(sa_column=Column(String, ForeignKey("objects.id", ondelete="CASCADE"), primary_key=True))
    catalog: str = "{}"
    receiver: str | None = None
    config: str = Field(default="{}", sa_column=Column(Text, nullable=False, server_default="{}"))
    """The receiver's settings as JSON: ``{"url": ...}`` or ``{"argv": [...], "timeout": s}``."""


class EdgeRow(SQLModel, table=True):
    """A directed edge ``src --kind--> dst`` (``acted-on``, ``links-to``, ``watches``, ``spawned``)."""

    __tablename__ = "edges"
    __table_args__ = (
        Index("ux_edges_src_kind_dst", "src_id", "kind", "dst_id", unique=True),
        Index("ix_edges_dst_kind_src", "dst_id", "kind", "src_id"),
    )

    id: int | None = Field(default=None, primary_key=True)
    src_id: str = Field(sa_column=_fk("objects.id"))
    dst_id: str = Field(sa_column=_fk("objects.id"))
    kind: str
    created_at: float


class EventRow(SQLModel, table=True):
    """One event an object published, with its level (1-10) and JSON data."""

    __tablename__ = "events"
    __table_args__ = (Index("ix_events_object_id", "object_id", "id"),)

    id: int | None = Field(default=None, primary_key=True)
    object_id: str = Field(sa_column=_fk("objects.id"))
    type: str
    level: int
    actor_id: str | None = None
    at: float
    data: str = "{}"


class WatchRow(SQLModel, table=True):
    """``watcher`` watches ``object`` for events matching ``pattern`` at ``min_level`` or above."""

    __tablename__ = "watches"
    __table_args__ = (
        Index("ux_watches_watcher_object", "watcher_id", "object_id", unique=True),
        Index("ix_watches_object", "object_id"),
    )

    id: int | None = Field(default=None, primary_key=True)
    watcher_id: str = Field(sa_column=_fk("objects.id"))
    object_id: str = Field(sa_column=_fk("objects.id"))
    pattern: str = "*"
    min_level: int = 1
    last_read_revision: int | None = None
    created_at: float


class InboxRow(SQLModel, table=True):
    """One entry in an object's inbox: a delivered event or a message, read or unread."""

    __tablename__ = "inbox"
    __table_args__ = (
        Index("ix_inbox_owner_id", "owner_id", "id"),
        Index("ix_inbox_owner_unread", "owner_id", "read_at"),
        Index("ix_inbox_owner_ref", "owner_id", "ref"),
    )

    id: int | None = Field(default=None, primary_key=True)
    owner_id: str = Field(sa_column=_fk("objects.id"))
    kind: str = "event"
    event_id: int | None = None
    object_id: str | None = None
    object_name: str = ""
    event_type: str = ""
    level: int = 1
    actor_id: str | None = None
    at: float
    summary: str = ""
    body: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    read_at: float | None = None
    ref: str | None = None
    """An outside id (a run message id) so the same message is never filed twice."""


class ProfileRow(SQLModel, table=True):
    """A profile's purview: JSON ``[{"project": <repo handle or repo:<handle>>, "limit": <level>}]``."""

    __tablename__ = "profiles"

    object_id: str = Field(sa_column=Column(String, ForeignKey("objects.id", ondelete="CASCADE"), primary_key=True))
    purview: str = Field(default="[]", sa_column=Column(Text, nullable=False))


class ProfileDefaultRow(SQLModel, table=True):
    """The profile a directory (and everything under it) starts nodes with."""

    __tablename__ = "profile_defaults"

    directory: str = Field(sa_column=Column(String, primary_key=True))
    profile_id: str = Field(sa_column=_fk("objects.id", index=True))


class ReceiverAttemptRow(SQLModel, table=True):
    """One attempt to hand an inbox entry to a custom object's ``url`` or ``argv`` receiver."""

    __tablename__ = "receiver_attempts"
    __table_args__ = (Index("ix_receiver_attempts_object", "object_id", "id"),)

    id: int | None = Field(default=None, primary_key=True)
    object_id: str = Field(sa_column=_fk("objects.id"))
    entry_id: int
    event_type: str = ""
    attempt: int = 1
    outcome: str = ""
    """``delivered``, ``retrying`` or ``failed``."""
    status: int | None = None
    """The HTTP status, or the command's exit status."""
    error: str = Field(default="", sa_column=Column(Text, nullable=False, server_default=""))
    """What went wrong (a timeout, a connection error), or the command's stderr (its end), even on success."""
    at: float


TABLES = [
    ObjectRow.__table__,
    DocumentRow.__table__,
    RevisionRow.__table__,
    LinkRow.__table__,
    NodeRow.__table__,
    JobRow.__table__,
    CustomObjectRow.__table__,
    EdgeRow.__table__,
    EventRow.__table__,
    WatchRow.__table__,
    InboxRow.__table__,
    ProfileRow.__table__,
    ProfileDefaultRow.__table__,
    ReceiverAttemptRow.__table__,
]
"""Every canvas table, in creation order."""
