"""Honcho's wire shapes as typed dictionaries: the resources it answers and the requests it reads.

Field names and types follow the real server's ``src/schemas/api.py`` (plastic-labs/honcho) as
serialised on the wire (``name`` is sent as ``id``, ``h_metadata`` as ``metadata``, ...). The
outbox's client (``services.knowledge.outbox.honcho_client``) returns them, the fake
(``services.honcho``) builds them, and the memory view (``honcho_view``) reads them.

``JSON`` is any value a JSON document holds; request bodies are read as ``JSON`` and narrowed with
``isinstance`` before use. ``Metadata`` is the free-form object a caller attaches to a resource:
its keys and values follow the caller's own conventions, so it stays open as in Honcho's schema.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Generic, Literal, Protocol, TypeAlias, TypedDict, TypeVar, runtime_checkable

import httpx

__all__ = [
    "JSON", "Conclusion", "ConclusionLevel", "JSONObject", "Message", "Metadata", "Page", "Peer",
    "PeerCardAnswer", "PeerContext", "QueueStatus", "RepresentationAnswer", "Session",
    "SessionContext", "SessionPeerConfig", "SessionSummaries", "Summary", "ValidationIssue", "WireAnswer",
    "Workspace",
]

JSON: TypeAlias = "dict[str, JSON] | list[JSON] | str | int | float | bool | None"
"""A value of a JSON document."""

JSONObject: TypeAlias = "dict[str, JSON]"
"""A JSON object."""

Metadata: TypeAlias = "dict[str, Any]"  # free-form by design: Honcho's schema types it dict[str, Any] too
"""A resource's ``metadata``: an object whose keys the caller defines."""

ConclusionLevel = Literal["explicit", "deductive", "inductive", "contradiction"]

T = TypeVar("T")


class Workspace(TypedDict):
    """A workspace."""

    id: str
    metadata: Metadata
    configuration: Metadata
    created_at: str


class Peer(TypedDict):
    """A peer of a workspace."""

    id: str
    workspace_id: str
    created_at: str
    metadata: Metadata
    configuration: Metadata


class Session(TypedDict):
    """A session of a workspace."""

    id: str
    is_active: bool
    workspace_id: str
    metadata: Metadata
    configuration: Metadata
    created_at: str


class SessionPeerConfig(TypedDict):
    """How a peer takes part in a session (``None``: the server's default); also the answer of
    ``GET .../sessions/{s}/peers/{p}/config``."""

    observe_me: bool | None
    observe_others: bool | None


class Message(TypedDict):
    """A stored message."""

    id: str
    content: str
    peer_id: str
    session_id: str
    metadata: Metadata
    created_at: str
    workspace_id: str
    token_count: int


class Conclusion(TypedDict):
    """A conclusion one peer holds about another."""

    id: str
    content: str
    observer_id: str
    observed_id: str
    session_id: str | None
    level: ConclusionLevel
    created_at: str


class Page(TypedDict, Generic[T]):
    """One page of a list route."""

    items: list[T]
    total: int
    page: int
    size: int
    pages: int


class Summary(TypedDict):
    """A session summary."""

    content: str
    message_id: str
    summary_type: str
    created_at: str
    token_count: int


class SessionSummaries(TypedDict):
    """A session's short and long summaries."""

    id: str
    short_summary: Summary | None
    long_summary: Summary | None


class SessionContext(TypedDict):
    """A session's context: its newest messages within a token budget, and what is known."""

    id: str
    messages: list[Message]
    summary: Summary | None
    peer_representation: str | None
    peer_card: list[str] | None


class PeerContext(TypedDict):
    """What one peer knows of another."""

    peer_id: str
    target_id: str
    representation: str | None
    peer_card: list[str] | None


class RepresentationAnswer(TypedDict):
    """The answer of ``POST .../peers/{p}/representation``."""

    representation: str


class PeerCardAnswer(TypedDict):
    """The answer of ``GET`` and ``PUT .../peers/{p}/card``."""

    peer_card: list[str] | None


class QueueStatus(TypedDict):
    """The answer of ``GET .../queue/status`` (the fake never queues work)."""

    total_work_units: int
    completed_work_units: int
    in_progress_work_units: int
    pending_work_units: int
    sessions: dict[str, JSONObject] | None


class ValidationIssue(TypedDict):
    """One entry of FastAPI's 422 ``detail`` list."""

    type: str
    loc: list[str | int]
    msg: str
    input: JSON


WireAnswer: TypeAlias = "Mapping[str, object] | Sequence[Mapping[str, object]] | None"
"""An answer body: one of the objects above, a list of them, or no body."""


class InProcessHoncho(Protocol):
    """A Honcho service running in this process that answers a call as values (the fake's ``call``).

    ``HonchoClient`` over an ``InProcessTransport`` hands its calls to ``call`` instead of encoding
    each body as JSON text for the transport to parse back: the same routes, checks, answers and
    errors. The outbox knows the embedded fake only through this and its transport, as an app
    knows a server only through its wire."""

    api_key: str | None

    @property
    def transport(self) -> httpx.AsyncBaseTransport:
        """The httpx transport in front of the service."""
        ...

    def call(self, method: str, path: str, *, body: JSON = None, params: httpx.QueryParams | None = None,
             authorization: str | None = None) -> tuple[int, WireAnswer | JSON, dict[str, str]]:
        """The status, the answer and the headers of one call (``path`` decoded)."""
        ...


@runtime_checkable
class InProcessTransport(Protocol):
    """An httpx transport whose service is in this process (``honcho_service``)."""

    @property
    def honcho_service(self) -> InProcessHoncho:
        """The service behind the transport."""
        ...
