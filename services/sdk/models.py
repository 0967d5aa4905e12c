"""The SDK's value types: a stored ``Connection``, a ``Run``, a ``RunEvent`` and a reply's result.

``Run`` and ``RunEvent`` are frozen views of the wire's DTOs (``services.wire``); each keeps the
fields it knows and, for ``Run``, the whole dict as ``raw`` so nothing the runtime sent is lost.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

__all__ = ["Connection", "Run", "RunEvent", "ReplyResult", "EVENT_ENVELOPE_FIELDS"]


@dataclass(slots=True)
class Connection:
    """One person's saved link to their runtime: tokens, expiry and where the runtime lives."""

    user_id: str
    access_token: str
    refresh_token: str
    expires_at: float
    """Epoch seconds after which ``access_token`` is no longer accepted."""
    scope: list[str] = field(default_factory=list)
    runtime_url: str = ""
    runtime_id: str = ""

    def expired(self, now: float, margin: float = 0.0) -> bool:
        """True when the access token is expired at ``now`` (or within ``margin`` seconds of it)."""
        return self.expires_at - margin <= now

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready copy."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Connection":
        """Rebuild from ``to_dict`` output."""
        return cls(
            user_id=str(data["user_id"]),
            access_token=str(data["access_token"]),
            refresh_token=str(data["refresh_token"]),
            expires_at=float(data["expires_at"]),
            scope=[str(s) for s in data.get("scope") or []],
            runtime_url=str(data.get("runtime_url") or ""),
            runtime_id=str(data.get("runtime_id") or ""),
        )


_RUN_FIELDS = (
    "id",
    "user_id",
    "name",
    "status",
    "activity",
    "params",
    "outcome",
    "result",
    "last_turn_error",
    "question",
    "pending",
    "messages",
    "created_at",
    "updated_at",
    "last_event_id",
)


@dataclass(frozen=True, slots=True)
class Run:
    """A run as the runtime describes it (``run.start``, ``run.get``, ``run.list``)."""

    id: str
    user_id: str | None
    name: str | None
    status: str | None
    """``running``, ``idle``, ``waiting_on_user`` or ``settled``."""
    activity: object
    """As the wire gives it (a string or None from a well-behaved runtime)."""
    params: dict[str, Any]
    outcome: str | None
    result: object
    last_turn_error: dict[str, Any] | None
    question: dict[str, Any] | None
    pending: list[dict[str, Any]]
    messages: list[dict[str, Any]]
    created_at: object
    updated_at: object
    last_event_id: object
    raw: dict[str, Any] = field(compare=False, repr=False)
    """The DTO exactly as received."""

    @classmethod
    def from_dto(cls, dto: dict[str, Any]) -> "Run":
        """Build from a run DTO; missing fields read as None (lists and params as empty)."""
        values: dict[str, Any] = {name: dto.get(name) for name in _RUN_FIELDS}
        values["id"] = str(dto.get("id", ""))
        values["params"] = dict(dto.get("params") or {})
        values["pending"] = list(dto.get("pending") or [])
        values["messages"] = list(dto.get("messages") or [])
        return cls(**values, raw=dto)


EVENT_ENVELOPE_FIELDS = frozenset({"id", "seq", "run_id", "node_id", "type", "at"})
"""Keys every run event has; the rest of the event's dict goes into ``RunEvent.data``."""


@dataclass(frozen=True, slots=True)
class RunEvent:
    """One event of a run's log (or a ``stream_gap`` notice from the stream)."""

    id: str | None
    seq: int | None
    """The cursor: counts from 1 per run; None on a ``stream_gap`` notice."""
    type: str
    run_id: str | None
    node_id: str | None
    """The run id for the root node; anything else is a child node."""
    at: Any
    data: dict[str, Any]
    """The event's own fields (``delta``, ``stop_reason``, ``outcome``, ...)."""

    @classmethod
    def from_dict(cls, event: dict[str, Any]) -> "RunEvent":
        """Split a wire event into its envelope fields and ``data``."""
        seq = event.get("seq")
        return cls(
            id=None if event.get("id") is None else str(event.get("id")),
            seq=seq if isinstance(seq, int) and not isinstance(seq, bool) else None,
            type=str(event.get("type", "")),
            run_id=event.get("run_id"),
            node_id=event.get("node_id"),
            at=event.get("at"),
            data={k: v for k, v in event.items() if k not in EVENT_ENVELOPE_FIELDS},
        )

    @classmethod
    def from_wire(cls, event: dict[str, Any]) -> "RunEvent":
        """``from_dict`` for a dict the caller hands over (one just decoded from the wire): its
        envelope keys are taken out and the rest becomes ``data`` as it is, without a copy.

        A stream builds one per event, so the fields are set through their slots directly (the
        frozen ``__init__`` goes through ``object.__setattr__`` for each): the same object."""
        pop = event.pop
        obj = _new(cls)
        event_id = pop("id", None)
        _set_id(obj, None if event_id is None else str(event_id))
        seq = pop("seq", None)
        _set_seq(obj, seq if type(seq) is int else None)
        _set_type(obj, str(pop("type", "")))
        _set_run_id(obj, pop("run_id", None))
        _set_node_id(obj, pop("node_id", None))
        _set_at(obj, pop("at", None))
        _set_data(obj, event)
        return obj

    def to_dict(self) -> dict[str, Any]:
        """The event as the wire dict."""
        return {
            "id": self.id,
            "seq": self.seq,
            "run_id": self.run_id,
            "node_id": self.node_id,
            "type": self.type,
            "at": self.at,
            **self.data,
        }


_new = object.__new__
_set_id, _set_seq, _set_type, _set_run_id, _set_node_id, _set_at, _set_data = (
    RunEvent.__dict__[name].__set__ for name in ("id", "seq", "type", "run_id", "node_id", "at", "data")
)


@dataclass(frozen=True, slots=True)
class ReplyResult:
    """How a ``runs.reply`` turn ended."""

    status: str
    """``completed``, ``error`` (the turn failed) or ``settled`` (the run settled first)."""
    text: str
    """The root node's output text for the turn."""
    error: dict[str, Any] | None
    """``{code, message}`` when the turn failed."""
    events: list[RunEvent]
    """Every event read from the reply's cursor to its end, all nodes included."""
    outcome: str | None = None
    """The outcome when the run settled."""
