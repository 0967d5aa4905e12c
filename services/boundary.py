"""The one typed boundary the panes stand on: frozen read models and the desk's actions.

The panes (``screens/``) and the App (``workbench/``) hold a ``WorkspaceView`` and call its
``desk``: a ``Desk`` is either ``OperatorDesk`` (an embedded cloud, in this process) or
``ServedDesk`` (a served cloud, through its control API and change stream). Reads answer frozen
read models (``RunView``, ``RunDetail``, ``GrantView``, ``OperatorAction``, ``RefusalRecord``),
never a live cloud object; an action answers ``None`` or an awaitable (the served desk crosses the
wire), and ``Pane.act`` awaits either.

Every time in a read model is one type: ``float`` seconds since the epoch (``Clock.time()``), as
the canvas and insight reviews store it. Times stored otherwise are converted once, when the read
model is built, by the helpers here: wire and OKF times (ISO-8601 strings) by ``parse_time`` (or
``time_or_none`` where a time may be absent), the outbox's integer milliseconds by ``ms_time``. A
value that is no usable time (garbage, a bool, out of range) reads as absent, never as an error,
so one bad stamp never stops a pane from drawing. The panes only format these floats
(``screens/text.py``); they never convert a time themselves.
"""

from __future__ import annotations

import math
from collections import OrderedDict, deque
from collections.abc import Awaitable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .canvas import Canvas
    from .changes import ChangeFeed
    from .knowledge.insights import InsightReviews
    from .knowledge.okf import Harvest
    from .knowledge.outbox import MemoryOutbox
    from .operator import GrantView, OperatorAction, RefusalRecord, RunView
    from .workspace import CaptureFailure, Settings

__all__ = ["RunDetail", "Desk", "WorkspaceView", "parse_time", "time_or_none", "ms_time", "Maybe", "LATEST_TIME"]

Maybe = Awaitable[Any] | None
"""What an action answers: nothing (done in this process) or an awaitable (done over the wire)."""


LATEST_TIME = 253_402_300_799.0
"""9999-12-31T23:59:59Z: the latest time a read model carries (later ones cannot be formatted)."""


def _usable(seconds: float) -> float | None:
    return seconds if math.isfinite(seconds) and 0.0 <= seconds <= LATEST_TIME else None


def time_or_none(value: object) -> float | None:
    """A wire time (ISO-8601 string, or seconds) as seconds since the epoch; None when absent or unusable.

    An ISO string without a zone is taken as UTC (the stores write UTC only)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        try:
            return _usable(float(value))
        except OverflowError:
            return None
    if isinstance(value, str) and value:
        try:
            moment = datetime.fromisoformat(value.strip())
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=timezone.utc)
            return _usable(moment.timestamp())
        except (ValueError, OverflowError, OSError):
            return None
    return None


def parse_time(value: object) -> float:
    """A wire time (ISO-8601 string, or seconds) as seconds since the epoch; 0.0 when absent or unusable."""
    seconds = time_or_none(value)
    return 0.0 if seconds is None else seconds


def ms_time(value: object) -> float | None:
    """A stored time in milliseconds since the epoch (the outbox's) as seconds; None when absent or unusable."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        return _usable(value / 1000)
    except OverflowError:
        return None


@dataclass(frozen=True)
class RunDetail:
    """One run with its event log, as the runs pane's stream shows it (a snapshot, never live)."""

    id: str
    user_id: str
    name: str | None
    status: str
    created_at: float
    updated_at: float
    deleted: bool
    params: dict[str, Any]
    events: tuple[dict[str, Any], ...]
    """The run's events as the wire has them, except their ``at``: float seconds since the epoch."""
    settled: bool
    seq: int
    """The last event's sequence number."""
    activity: str | None
    pending: tuple[dict[str, Any], ...]
    question: dict[str, Any] | None
    """The open question as the wire has it, except its ``created_at``: float seconds."""
    last_turn_error: dict[str, Any] | None
    outcome: dict[str, Any] | None


class EventTimes:
    """Run events with their ``at`` as float seconds, each event converted once.

    A run's log only grows (or is cut at its start), so the converted copies are kept per run and
    a new call converts only the events appended since; a log that is not the one converted (cut,
    or replaced by a fresh read) is converted again whole. The newest ``keep`` runs are kept.
    """

    def __init__(self, keep: int = 64) -> None:
        self.keep = keep
        self._runs: OrderedDict[str, tuple[list[dict[str, Any]], list[dict[str, Any]]]] = OrderedDict()

    def convert(self, run_id: str, events: tuple[dict[str, Any], ...]) -> tuple[dict[str, Any], ...]:
        """``events`` with each ``at`` in seconds (0.0 when it holds no usable time)."""
        sources, converted = self._runs.pop(run_id, ([], []))
        done = len(sources)
        if done and (done > len(events) or sources[0] is not events[0] or sources[-1] is not events[done - 1]):
            sources, converted, done = [], [], 0
        for event in events[done:]:
            sources.append(event)
            converted.append({**event, "at": parse_time(event.get("at"))} if "at" in event else dict(event))
        self._runs[run_id] = (sources, converted)
        while len(self._runs) > self.keep:
            self._runs.popitem(last=False)
        return tuple(converted)


_EVENT_TIMES = EventTimes()


def _question(question: Any) -> dict[str, Any] | None:
    if not isinstance(question, dict):
        return None
    return {**question, "created_at": parse_time(question.get("created_at"))} if "created_at" in question else question


def run_detail(dto: dict[str, Any], events: tuple[dict[str, Any], ...]) -> RunDetail:
    """A ``RunDetail`` from a run's wire DTO (plus the fake's ``deleted`` / ``seq``) and its events.

    Wire times become float seconds here: the run's, its events' ``at`` and its question's."""
    return RunDetail(
        id=dto["id"], user_id=dto["user_id"], name=dto.get("name"),
        status="deleted" if dto.get("deleted") else dto["status"],
        created_at=parse_time(dto.get("created_at")), updated_at=parse_time(dto.get("updated_at")),
        deleted=bool(dto.get("deleted")), params=dict(dto.get("params") or {}),
        events=_EVENT_TIMES.convert(str(dto["id"]), events),
        settled=dto["status"] == "settled",
        seq=int(dto.get("seq", dto.get("last_event_id", 0))), activity=dto.get("activity"),
        pending=tuple(dto.get("pending") or ()), question=_question(dto.get("question")),
        last_turn_error=dto.get("last_turn_error"), outcome=dto.get("outcome"),
    )


class Desk(Protocol):
    """Operator and app actions on runs and grants, and the views the panes draw."""

    actions: dict[str, list[OperatorAction]]
    refusals: deque[RefusalRecord]

    def runs(self, *, include_deleted: bool = False) -> list[RunView]: ...
    def detail(self, run_id: str) -> RunDetail: ...
    def grants(self) -> list[GrantView]: ...
    def log(self, run_id: str) -> list[OperatorAction]: ...
    def refusals_since(self, seconds: float = 60.0) -> list[RefusalRecord]: ...
    def waiting_on_user(self) -> int: ...

    def reply(self, run_id: str, text: str, *, chunks: int = 4) -> Maybe: ...
    def fail_turn(self, run_id: str, code: str, message: str) -> Maybe: ...
    def settle(self, run_id: str, kind: str, value: str = "") -> Maybe: ...
    def ask(self, run_id: str, title: str) -> Awaitable[str] | str: ...
    def go_idle(self, run_id: str) -> Maybe: ...
    def emit(self, run_id: str, type: str, fields_json: str = "{}", node_id: str | None = None) -> Maybe: ...
    def delete_run(self, run_id: str) -> Maybe: ...
    async def start_run(self, user_id: str, prompt: str) -> str: ...
    async def send_message(self, run_id: str, text: str, *, start_turn: bool = True) -> None: ...
    async def cancel_run(self, run_id: str) -> None: ...

    def revoke(self, user_id: str, code: str = "grant_revoked") -> Maybe: ...
    async def restore(self, user_id: str) -> None: ...
    def refuse(self, user_id: str, code: str) -> Maybe: ...
    def expire_tokens(self, user_id: str) -> Maybe: ...
    def set_scopes(self, user_id: str, scopes: list[str]) -> Maybe: ...


class ServerView(Protocol):
    """Where a cloud is served (``serve.json``): its URL."""

    @property
    def url(self) -> str: ...


class WorkspaceView(Protocol):
    """What the panes and the App may use of an open workspace."""

    settings: Settings
    feed: ChangeFeed

    @property
    def desk(self) -> Desk: ...
    @property
    def canvas(self) -> Canvas | None: ...
    @property
    def okf(self) -> Harvest | None: ...
    @property
    def insights(self) -> InsightReviews | None: ...
    @property
    def outbox(self) -> MemoryOutbox | None: ...
    @property
    def attached(self) -> ServerView | None: ...
    @property
    def server(self) -> ServerView | None: ...
    @property
    def header_status(self) -> str: ...
    def capture_failures(self) -> list[CaptureFailure]: ...
    async def close(self) -> None: ...
