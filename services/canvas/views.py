"""Plain frozen read models the canvas hands out: never attached ORM objects."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import TypedDict, TypeVar, Union

JsonValue = Union[str, int, float, bool, None, list["JsonValue"], dict[str, "JsonValue"]]
"""A value a JSON text decodes to (event data, rule conditions)."""
JsonObject = dict[str, JsonValue]
"""A JSON object: event data, a receiver's settings."""

Rule = TypedDict("Rule", {"on": str, "at": str, "deliver": str, "if": dict[str, JsonValue], "match": JsonValue},
                 total=False)
"""One delivery rule of a document: ``{on, at|deliver, if?, match?}`` (``if`` is a keyword, hence this form)."""

__all__ = [
    "JsonValue",
    "JsonObject",
    "Rule",
    "ObjectSummary",
    "ObjectPage",
    "RevisionView",
    "DocumentView",
    "NodeView",
    "JobView",
    "CustomObjectView",
    "EventView",
    "WatchView",
    "EdgeView",
    "Neighbourhood",
    "InboxEntryView",
    "InboxPage",
    "MessageReceipt",
    "SearchHit",
    "LintFinding",
    "ObjectDetail",
    "ProfileView",
    "BootItem",
    "NotLoaded",
    "BootContext",
    "LoadVerdict",
    "ReceiverAttempt",
    "positional_builder",
]

_Model = TypeVar("_Model")


@dataclass(frozen=True, slots=True)
class ObjectSummary:
    """One object as a list row: id, type, kind, full name, owner, privacy, status, times."""

    id: str
    type: str
    kind: str
    name: str
    full_name: str
    owner_id: str | None
    privacy: str
    status: str
    created_at: float
    updated_at: float

    @property
    def label(self) -> str:
        """The name a person reads: a document's full name, any other object's own name (its id
        when it has none). ``full_name`` is the one that resolves back; this one is for display."""
        if self.type == "document":
            return self.full_name
        return self.name or self.full_name


@dataclass(frozen=True, slots=True)
class ObjectPage:
    """One page of a listing; ``has_more`` says whether a next page exists."""

    items: tuple[ObjectSummary, ...]
    offset: int
    limit: int
    has_more: bool
    seen_as: str = "operator (no reader: sees everything)"
    """Whose view the page was read in (the operator's sees everything)."""


@dataclass(frozen=True, slots=True)
class RevisionView:
    """One stored revision of a document."""

    revision: int
    name: str
    kind: str
    preview: str
    summary: str | None
    body: str
    rules: tuple[Rule, ...]
    author: str | None
    at: float


@dataclass(frozen=True, slots=True)
class DocumentView:
    """A document at its current revision."""

    object: ObjectSummary
    kind: str
    preview: str
    summary: str | None
    body: str
    rules: tuple[Rule, ...]
    revision: int
    links: tuple[tuple[str, str | None], ...] = ()
    """Each ``[[link]]`` as ``(text, target id or None when it resolves to nothing)``."""


@dataclass(frozen=True, slots=True)
class NodeView:
    """A node: shape (kind, mode, lifecycle, profile), parent and turn state."""

    object: ObjectSummary
    kind: str
    mode: str
    lifecycle: str
    profile: str | None
    parent_id: str | None
    status: str
    activity: str | None
    outcome: str | None
    turn_active: bool
    wake_pending: bool
    wakes: int


@dataclass(frozen=True, slots=True)
class JobView:
    """A job: command, status, exit code and log path."""

    object: ObjectSummary
    command: str
    status: str
    exit_code: int | None
    log_path: str
    started_by: str | None


@dataclass(frozen=True, slots=True)
class CustomObjectView:
    """A custom object: dotted kind, declared events with their levels, receiver."""

    object: ObjectSummary
    kind: str
    catalog: dict[str, int]
    receiver: str | None


@dataclass(frozen=True, slots=True)
class EventView:
    """One event an object published."""

    id: int
    object_id: str
    type: str
    level: int
    actor_id: str | None
    at: float
    data: JsonObject


@dataclass(frozen=True, slots=True)
class WatchView:
    """One watch: who watches what, with which pattern and minimum level."""

    watcher_id: str
    object_id: str
    pattern: str
    min_level: int
    last_read_revision: int | None


@dataclass(frozen=True, slots=True)
class EdgeView:
    """One edge seen from an object: its kind, direction and the object at the other end."""

    kind: str
    direction: str
    """``out`` (this object is the source) or ``in``."""
    other: ObjectSummary
    created_at: float


@dataclass(frozen=True, slots=True)
class Neighbourhood:
    """An object's edges both ways, grouped by kind, with how many there are in all."""

    object: ObjectSummary
    outgoing: dict[str, tuple[EdgeView, ...]]
    incoming: dict[str, tuple[EdgeView, ...]]
    counts: dict[str, int]
    """``"out:<kind>"`` / ``"in:<kind>"`` -> number of edges (the pages above may be shorter)."""
    seen_as: str = "operator (no reader: sees everything)"
    """Whose view the edges were read in (edges to what that reader may not read are left out)."""


@dataclass(frozen=True, slots=True)
class InboxEntryView:
    """One inbox entry: a delivered event or a message."""

    id: int
    owner_id: str
    kind: str
    object_id: str | None
    object_name: str
    event_type: str
    level: int
    actor_id: str | None
    at: float
    summary: str
    body: str | None
    read: bool


@dataclass(frozen=True, slots=True)
class InboxPage:
    """One page of an inbox, newest first, with the unread and total counts."""

    owner_id: str
    items: tuple[InboxEntryView, ...]
    unread: int
    total: int
    offset: int
    limit: int
    seen_as: str = "operator (no reader: sees everything)"
    """Whose view the page was read in (entries about what that reader may not read are left out)."""


@dataclass(frozen=True, slots=True)
class MessageReceipt:
    """What ``message_send`` did: the inbox entry, and whether it woke the node or coalesced."""

    entry: InboxEntryView
    woke: bool
    coalesced: bool


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One full-text match and a short snippet around it."""

    object: ObjectSummary
    snippet: str


@dataclass(frozen=True, slots=True)
class LintFinding:
    """One lint finding on a document: which rule, and what is wrong, in words."""

    name: str
    rule: str
    message: str


@dataclass(frozen=True, slots=True)
class ObjectDetail:
    """One object with everything a detail pane shows."""

    object: ObjectSummary
    document: DocumentView | None = None
    node: NodeView | None = None
    job: JobView | None = None
    custom: CustomObjectView | None = None
    revisions: tuple[RevisionView, ...] = ()
    events: tuple[EventView, ...] = ()
    watchers: tuple[WatchView, ...] = ()
    seen_as: str = "operator (no reader: sees everything)"
    """Whose view the object was read in."""


@dataclass(frozen=True, slots=True)
class ProfileView:
    """A profile: its fixed id, handle, display name, purview (project, delivery limit) and pinned directories."""

    object: ObjectSummary
    handle: str
    display_name: str
    purview: tuple[tuple[str, str], ...]
    defaults: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class BootItem:
    """One document a node loads for an event: at which level, which rule of which owner brought it,
    and the profile limit that capped it (if one did)."""

    document: ObjectSummary
    level: str
    """``name``, ``preview`` or ``content``: what the node is given."""
    rule: Rule
    owner: str
    """The owner's full-name reference (``ada``, ``repo:x``)."""
    requested: str
    """The level the rule asked for, before any cap."""
    capped_by: str | None
    """``profile <handle>: <project> -> <limit>`` when the profile's limit lowered the level."""
    preview: str
    body: str | None = None
    """The body, at ``content`` level only."""
    attached: tuple[tuple[str, str], ...] = ()
    """At ``content`` level: each ``[[link]]`` target the node may read, with its preview."""

    @property
    def why(self) -> str:
        """The rule and owner that brought it in, in words."""
        keys = sorted(self.rule, key=lambda k: (k != "on", k not in ("deliver", "at"), k))
        rule = ", ".join(f"{k}: {self.rule[k]}" for k in keys)
        text = f"rule {{{rule}}} of {self.owner}"
        return text + (f"; capped by {self.capped_by}" if self.capped_by else "")


@dataclass(frozen=True, slots=True)
class NotLoaded:
    """A document a node does not load, with the reason (a code from ``delivery.REASONS``) and the words."""

    document: ObjectSummary
    reason: str
    detail: str


@dataclass(frozen=True, slots=True)
class BootContext:
    """What a node loads for one event (``boot`` or ``workspace-open``), in load order, and the
    documents in its view that it does not load, each with why."""

    node: str
    node_name: str
    event: str
    kind: str
    mode: str
    profile: str | None
    seen_as: str
    items: tuple[BootItem, ...]
    not_loaded: tuple[NotLoaded, ...]


@dataclass(frozen=True, slots=True)
class LoadVerdict:
    """Whether one node loads one document for an event: the level, or the reason it does not."""

    node: str
    node_name: str
    loaded: bool
    level: str | None
    reason: str
    detail: str


@dataclass(frozen=True, slots=True)
class ReceiverAttempt:
    """One attempt to deliver an inbox entry to a ``url`` or ``argv`` receiver."""

    object_id: str
    entry_id: int
    event_type: str
    attempt: int
    outcome: str
    status: int | None
    error: str
    at: float


def positional_builder(cls: type[_Model]) -> Callable[..., _Model]:
    """A constructor of the frozen, slotted read model ``cls`` taking every field by position, about
    four times cheaper than ``cls`` itself: its own ``__init__`` passes each field through
    ``object.__setattr__`` to get past the frozen guard. This one fills a twin class with the same slots
    by plain assignment and then makes the object a ``cls`` (``__class__`` may change between classes of
    one slot layout; Python refuses any other). The object is a ``cls`` in every respect, frozen as
    always. For the few answers that build one read model per document of a node's view."""
    names = tuple(f.name for f in fields(cls))  # type: ignore[arg-type]
    code = (f"def __init__(self, {', '.join(names)}):\n" + "".join(f"    self.{n} = {n}\n" for n in names)
            + "    self.__class__ = cls\n")
    scope: dict[str, object] = {"cls": cls}
    exec(code, scope)  # the twin's __init__ assigns each slot by name, as dataclasses writes its own
    return type(f"_{cls.__name__}Twin", (), {"__slots__": names, "__init__": scope["__init__"]})
