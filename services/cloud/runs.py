"""``FakeRun``: one run on the fake runtime, driven by a test, a responder or the operator.

A run is an append-only event log. Status and activity re-derive from the log as each event is
appended (``_reduce``); open event streams are fed from the same append. Nothing here runs a
model: every turn's text comes from whoever calls ``reply``.
"""

from __future__ import annotations

import asyncio
import collections
import copy
import functools
import itertools
import math
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..clock import Clock, iso
from ..wire import FAILURES, SETTLE_ENDINGS, TURN_ERROR_CODES
from .errors import CloudError
from .event_log import EventLog

__all__ = [
    "FakeRun", "RunStreamFeed", "ResponderContext", "TURN_ERROR_CODES", "SETTLE_KINDS", "next_entry_id",
    "advance_entry_ids", "RunHost", "RunLedger",
]

SETTLE_KINDS = SETTLE_ENDINGS
"""The keys ``settle`` takes (``services.wire.SettleEnding``)."""
_entry_ids = itertools.count(1)
"""Turn entry ids (``e<n>``) are numbered across every cloud of the process."""


def next_entry_id() -> str:
    """The id of a new turn entry: ``e<n>``."""
    return f"e{next(_entry_ids)}"


def advance_entry_ids(after: int) -> None:
    """Number new turn entries after ``e<after>`` at least (a loaded state holds entries up to it)."""
    global _entry_ids
    current = next(_entry_ids)
    _entry_ids = itertools.count(max(current, after + 1))


@dataclass(frozen=True)
class ResponderContext:
    """What a responder receives: the run, why it was called, and the messages that woke it."""

    run: "FakeRun"
    kind: str
    """``start`` or ``message``."""
    messages: list[dict[str, Any]]


class RunStreamFeed:
    """One open ``run.events`` stream: the SSE frames the transport has still to send, in order.

    A plain deque and one waiter: appending an event costs an append (and a wake-up only when the
    stream is waiting), not an ``asyncio.Queue`` round per event."""

    def __init__(self) -> None:
        self.pending: collections.deque[tuple[str, dict[str, Any]] | None] = collections.deque()
        """Frames not yet sent (``None`` marks the end)."""
        self.last_seq = 0
        self.closed = False
        self._waiter: asyncio.Future[None] | None = None

    def push(self, kind: str, data: dict[str, Any]) -> None:
        if not self.closed:
            self.pending.append((kind, data))
            self._wake()

    def push_many(self, kind: str, items: list[dict[str, Any]]) -> None:
        """``push`` of each of ``items``, in order, with one wake-up."""
        if not self.closed:
            self.pending.extend([(kind, data) for data in items])
            self._wake()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.pending.append(None)
            self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def wait(self, timeout: float) -> bool:
        """Wait until a frame is pending; False when ``timeout`` seconds passed without one."""
        if self.pending:
            return True
        waiter = self._waiter = asyncio.get_running_loop().create_future()
        try:
            async with asyncio.timeout(timeout):
                await waiter
        except TimeoutError:
            return bool(self.pending)
        finally:
            self._waiter = None
        return True


class RunLedger(Protocol):
    """What a run needs of its cloud's shared state (``CloudState`` is one)."""

    @property
    def questions(self) -> dict[str, "FakeRun"]:
        """The run that opened each question, by question id."""
        ...

    def new_id(self, prefix: str) -> str: ...

    def forget_run_keys(self, run: "FakeRun") -> None: ...

    def run_changed(self, run: "FakeRun", event: dict[str, Any] | None) -> None: ...

    def runs_changed(self, run: "FakeRun", events: list[dict[str, Any]]) -> None: ...


class RunHost(Protocol):
    """What a run needs of the cloud it lives on (``FakeCloud`` is one): its clock and state.

    Declared here, beside its one user, so this module never names the cloud above it."""

    @property
    def clock(self) -> Clock: ...

    @property
    def state(self) -> RunLedger: ...


@dataclass
class FakeRun:
    """A run: read-only members mirror the seed (``id``, ``user_id``, ``params``, ``status``...)."""

    cloud: RunHost
    id: str
    user_id: str
    params: dict[str, Any]
    idempotency_key: str | None = None
    name: str | None = None
    messages: list[dict[str, Any]] = field(default_factory=list)
    status: str = "running"
    activity: str | None = "thinking"
    outcome: dict[str, Any] | None = None
    result: str | None = None
    last_turn_error: dict[str, Any] | None = None
    events: list[dict[str, Any]] | EventLog = field(default_factory=list)
    """The run's events, oldest first: a list, or on a served cloud an ``EventLog`` that reads the
    older ones from the store."""
    deleted: bool = False
    question: dict[str, Any] | None = None
    created_at: float = 0.0
    updated_at: float = 0.0
    turns: int = 0
    seq: int = 0
    first_seq: int = 1
    streams: list[RunStreamFeed] = field(default_factory=list)

    # -- read-only views -------------------------------------------------------------------

    @property
    def pending(self) -> list[dict[str, Any]]:
        """Messages recorded but not yet delivered to a turn."""
        return [m for m in self.messages if not m["delivered"]]

    @property
    def settled(self) -> bool:
        return self.status == "settled"

    def to_dto(self) -> dict[str, Any]:
        """The run as ``run.get`` answers it (a copy the caller owns)."""
        return copy.deepcopy(self.to_wire())

    def to_wire(self) -> dict[str, Any]:
        """``to_dto`` sharing the run's own lists and dicts, for an answer encoded at once (the
        runtime's ``run.get``): no deep copy of what is about to be serialised anyway."""
        return {
            "id": self.id,
            "user_id": self.user_id,
            "name": self.name,
            "status": self.status,
            "activity": self.activity,
            "params": self.params,
            "outcome": self.outcome,
            "result": self.result,
            "last_turn_error": self.last_turn_error,
            "question": self.question,
            "pending": self.pending,
            "messages": self.messages,
            "created_at": _iso_ms(self.created_at),
            "updated_at": _iso_ms(self.updated_at),
            "last_event_id": self.seq,
        }

    # -- driving a run -------------------------------------------------------------------------

    def reply(self, text: str, *, chunks: int = 2, message_ids: list[str] | None = None) -> None:
        """One root turn: started, ``chunks`` text deltas, text done, completed; the run goes idle."""
        entry_id = self._start_turn(message_ids)
        for delta in _split(text, max(1, chunks)):
            self.emit("node.output_text.delta", {"delta": delta, "entry_id": entry_id})
        self.emit("node.output_text.done", {"text": text, "entry_id": entry_id})
        self.emit(
            "node.turn.completed", {"stop_reason": "end_turn", "error": None, "entry_id": entry_id}
        )

    def fail_turn(
        self, *, code: str = "model_error", message: str = "the model failed", message_ids: list[str] | None = None
    ) -> None:
        """The same turn ending ``stop_reason: 'error'`` with ``{code, message}``."""
        if code not in TURN_ERROR_CODES:
            raise ValueError(f"fail_turn code must be one of {TURN_ERROR_CODES}, not {code!r}")
        entry_id = self._start_turn(message_ids)
        self.emit(
            "node.turn.completed",
            {"stop_reason": "error", "error": {"code": code, "message": message}, "entry_id": entry_id},
        )

    def set_activity(self, activity: str, *, at: str | None = None) -> None:
        """Fake-only: status ``running`` with this activity until the next event."""
        fields: dict[str, Any] = {"activity": activity}
        if at is not None:
            fields["activity_at"] = at
        self.emit("node.activity", fields)

    def settle(self, ending: dict[str, Any] | None = None, **kwargs: Any) -> None:
        """Settle the run: ``{result}``, ``{declined: {...}}``, ``{failure: ...}`` or ``{runtime_error: ...}``."""
        ending = {**(ending or {}), **kwargs}
        if "runtimeError" in ending:
            ending["runtime_error"] = ending.pop("runtimeError")
        kinds = [k for k in SETTLE_KINDS if k in ending]
        if len(kinds) != 1:
            raise ValueError(f"settle takes exactly one of {SETTLE_KINDS}, got {sorted(ending)}")
        kind = kinds[0]
        value = ending[kind]
        fields: dict[str, Any]
        if kind == "result":
            fields = {"outcome": "result", "result": "" if value is None else str(value)}
        elif kind == "declined":
            declined = dict(value or {})
            fields = {
                "outcome": "declined",
                "declined": {
                    "reason": declined.get("reason", ""),
                    "code": declined.get("code", "declined"),
                    "retryable": bool(declined.get("retryable", False)),
                },
            }
        elif kind == "failure":
            if value not in FAILURES:
                raise ValueError(f"failure must be one of {FAILURES}, not {value!r}")
            fields = {"outcome": value, "failure": value}
        else:
            fields = {"outcome": "runtime_error", "runtime_error": str(value)}
        self.emit("node.settled", fields)

    def idle(self) -> None:
        """Go idle without a new turn (stopped without submitting)."""
        self.emit("node.idle", {})

    def ask(self, *, title: str, slots: list[dict[str, Any]] | None = None) -> str:
        """Open a question (``waiting_on_user``); returns its id."""
        state = self.cloud.state
        question_id = state.new_id("q")
        question: dict[str, object] = {
            "id": question_id,
            "run_id": self.id,
            "title": title,
            "slots": copy.deepcopy(slots or []),
            "status": "open",
            "answers": None,
            "created_at": iso(self.cloud.clock.time()),
        }
        state.questions[question_id] = self
        self.emit("node.question.opened", {"question": question})
        return question_id

    def delete(self) -> None:
        """As if the runtime deleted it: reads 404, streams close, idempotency keys dropped."""
        if self.deleted:
            return
        self.deleted = True
        self.cloud.state.forget_run_keys(self)
        for stream in list(self.streams):
            stream.push("stream_dropped", {"reason": "run_deleted"})
            stream.close()
        self.streams.clear()
        self.cloud.state.run_changed(self, None)

    def emit(self, type: str, fields: dict[str, Any] | None = None, *, node_id: str | None = None) -> dict[str, Any]:
        """Append any event; another ``node_id`` is a child node's event."""
        event = self._append(type, fields, node_id)
        for stream in self.streams:
            stream.push("event", event)
        self.cloud.state.run_changed(self, event)
        return event

    def emit_many(
        self, events: Iterable[tuple[str, dict[str, Any] | None]], *, node_id: str | None = None
    ) -> list[dict[str, Any]]:
        """Append a burst of events (``(type, fields)`` pairs) at once: each is appended as ``emit``
        appends it, then the burst is streamed and published together (every stream and every change
        subscriber sees each event, in order, once). Returns the events appended."""
        if self.deleted:
            raise CloudError(404, "run_not_found", f"run {self.id} was deleted")
        append = self._append
        appended: list[dict[str, Any]] = []
        now = self.cloud.clock.time()  # appended at once: one time for the whole burst
        try:
            for type, fields in events:
                appended.append(append(type, fields, node_id, now))
        finally:  # a bad pair stops the burst; what was appended before it is streamed and published
            if appended:
                for stream in self.streams:
                    stream.push_many("event", appended)
                self.cloud.state.runs_changed(self, appended)
        return appended

    def _append(
        self, type: str, fields: dict[str, Any] | None, node_id: str | None, now: float | None = None
    ) -> dict[str, Any]:
        """One event appended to the log at ``now`` (default: the clock's time), the run's status
        re-derived; not streamed or published yet."""
        if self.deleted:
            raise CloudError(404, "run_not_found", f"run {self.id} was deleted")
        seq = self.seq + 1  # taken only once the event is built: a refused one leaves no gap in the numbering
        if now is None:
            now = self.cloud.clock.time()
        run_id = self.id
        event = {
            "id": str(seq),
            "seq": seq,
            "run_id": run_id,
            "node_id": node_id or run_id,
            "type": type,
            "at": _iso_ms(now),
        }
        if type.__class__ is not str or type not in _TYPES_SEEN:
            _check_type(type)
        if fields:
            if not isinstance(fields, dict):  # (``type`` names the event's type here, hence __class__)
                raise TypeError(f"an event's fields are an object (a dict), not {fields.__class__.__name__}")
            event.update(_own_copy(fields))  # update copies the top level: only nested values need a copy
        self.seq = seq
        self.events.append(event)
        self.updated_at = now
        if event["type"] in _REDUCERS:
            self._reduce(event)
        elif self.activity not in _RESTING and self.status == "running" and event["node_id"] == run_id:
            self.activity = "thinking"  # any other root event: the run is thinking again
        return event

    def close_idle(self) -> None:
        """Idle-close every open stream now."""
        for stream in list(self.streams):
            stream.push("stream_idle", {"idle_ms": 0})
            stream.close()

    def expire_events(self, up_to: int) -> None:
        """Drop events with ``seq <= up_to`` so a cursor before them answers ``stream_gap``."""
        if isinstance(self.events, EventLog):
            self.events.expire(up_to)
        else:
            self.events = [e for e in self.events if e["seq"] > up_to]
        self.first_seq = max(self.first_seq, up_to + 1)

    # -- internals ---------------------------------------------------------------------------

    def _start_turn(self, message_ids: list[str] | None) -> str:
        if self.deleted:
            raise CloudError(404, "run_not_found", f"run {self.id} was deleted")
        if message_ids is None:
            delivered = self.pending
        else:
            by_id = {m["id"]: m for m in self.messages}
            unknown = [i for i in message_ids if i not in by_id]
            if unknown:
                raise ValueError(f"unknown message ids: {unknown}")
            delivered = [by_id[i] for i in message_ids]
        for message in delivered:
            message["delivered"] = True
        if delivered:
            text = "\n\n".join(m["text"] for m in delivered)
        elif self.turns == 0:
            text = str(self.params.get("prompt", ""))
        else:
            text = ""
        self.turns += 1
        entry_id = next_entry_id()
        self.emit(
            "node.turn.started",
            {"input": {"text": text, "message_ids": [m["id"] for m in delivered]}, "entry_id": entry_id},
        )
        return entry_id

    def _reduce(self, event: dict[str, Any]) -> None:
        """Re-derive status and activity from one appended event of a ``_REDUCERS`` type (root
        events only; ``emit`` handles every other type itself)."""
        if event["node_id"] != self.id:
            return
        kind = event["type"]
        if kind == "node.turn.started":
            self.status, self.activity = "running", "thinking"
        elif kind == "node.activity":
            self.status, self.activity = "running", event.get("activity")
        elif kind == "node.turn.completed":
            error = event.get("error")
            self.last_turn_error = copy.deepcopy(error) if event.get("stop_reason") == "error" else None
            self._rest()
        elif kind == "node.idle":
            self._rest()
        elif kind == "node.question.opened":
            self.question = copy.deepcopy(event.get("question"))
            self.status, self.activity = "waiting_on_user", None
        elif kind == "node.question.answered":
            if self.question and self.question.get("id") == event.get("question_id"):
                self.question = None
            self.status, self.activity = "running", "thinking"
        elif kind == "node.message.received":
            if event.get("start_turn"):
                self.status, self.activity = "running", "thinking"
        elif kind == "node.reopened":
            self.outcome, self.result = None, None
            self._rest()
        elif kind == "node.settled":
            outcome = {k: copy.deepcopy(v) for k, v in event.items() if k not in _ENVELOPE_KEYS}
            self.outcome = outcome
            self.result = outcome.get("result")
            self.question = None
            self.status, self.activity = "settled", None
        elif kind == "run.renamed":
            self.name = event.get("name")

    def _rest(self) -> None:
        self.activity = None
        self.status = "waiting_on_user" if self.question else "idle"


_SCALARS = (str, int, float, bool, type(None))
_SCALAR_TYPES = frozenset(_SCALARS)
"""The exact scalar types (a set lookup, before the ``isinstance`` that also takes their subclasses)."""


_TYPES_SEEN: set[str] = set()
"""Event types already found fit (a cloud sees a few dozen)."""
_CONTROL = re.compile("[\x00-\x1f\x7f]")


def _check_type(type_: object) -> None:
    """Refuse an event type that is not one line of text: it names the frame a stream sends, so a
    line break in it would end that line early and could add a frame of its own."""
    if not isinstance(type_, str):
        raise TypeError(f"an event's type is text, not {type_.__class__.__name__}")
    if not type_ or _CONTROL.search(type_) is not None:
        raise ValueError(f"an event's type is one line of text without control characters, not {type_!r}")
    if len(_TYPES_SEEN) < 4096:
        _TYPES_SEEN.add(type_)


def _own_copy(fields: dict[str, Any]) -> dict[str, Any]:
    """Fields whose values the caller cannot change afterwards once their top level is copied (into
    the event): ``fields`` itself when every value is a scalar (the common delta), a deep copy otherwise."""
    for value in fields.values():
        if type(value) not in _SCALAR_TYPES and not isinstance(value, _SCALARS):
            return copy.deepcopy(fields)
    return fields


@functools.lru_cache(maxsize=8)
def _second_text(second: int) -> str:
    """``YYYY-MM-DDTHH:MM:SS`` of a whole UTC second (cached: events come many to a second)."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))


_last_ms: tuple[float, int, int, str] = (math.nan, -1, -1, "")
"""The last time ``_iso_ms`` formatted: ``(ts, second, millisecond, text)`` (one tuple, replaced
whole, so a reader on another thread never sees half of it)."""


def _iso_ms(ts: float) -> str:
    """``services.clock.iso(ts)`` (the same text, to the millisecond), formatting the date part
    once per second and the text once per millisecond instead of once per event."""
    global _last_ms
    last = _last_ms
    if ts == last[0]:
        return last[3]
    if not (ts >= 0 and math.isfinite(ts)):
        return iso(ts)
    frac, whole = math.modf(ts)
    micros = round(frac * 1e6)  # as datetime.fromtimestamp rounds
    second = int(whole)
    if micros >= 1_000_000:
        second, micros = second + 1, micros - 1_000_000
    millis = micros // 1000
    text = last[3] if second == last[1] and millis == last[2] else f"{_second_text(second)}.{millis:03d}Z"
    _last_ms = (ts, second, millis, text)
    return text


_ENVELOPE_KEYS = frozenset({"id", "seq", "run_id", "node_id", "type", "at"})
_REDUCERS = frozenset({
    "node.turn.started", "node.activity", "node.turn.completed", "node.idle", "node.question.opened",
    "node.question.answered", "node.message.received", "node.reopened", "node.settled", "run.renamed",
})
"""The event types ``_reduce`` treats one by one; any other root event only wakes the activity."""
_RESTING = (None, "thinking")


def _split(text: str, chunks: int) -> list[str]:
    """``text`` in ``chunks`` nearly equal pieces (fewer when the text is shorter)."""
    if not text:
        return [""]
    size = -(-len(text) // chunks)
    return [text[i : i + size] for i in range(0, len(text), size)]


Responder = Callable[[ResponderContext], object]
"""A responder: called with the context; what it returns is awaited when awaitable, else ignored."""
