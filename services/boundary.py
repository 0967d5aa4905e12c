"""The one typed boundary the panes stand on: frozen read models and the desk's actions.

The panes (``screens/``) and the App (``workbench/``) hold a ``WorkspaceView`` and call its
``desk``: a ``Desk`` is either ``OperatorDesk`` (an embedded cloud, in this process) or
``ServedDesk`` (a served cloud, through its control API and change stream). Reads answer frozen
read models (``RunView``, ``RunDetail``, ``GrantView``, ``OperatorAction``, ``RefusalRecord``),
never a live cloud object; an action answers ``None`` or an awaitable (the served desk crosses the
wire), and ``Pane.act`` awaits either.

Every time in a read model is one type: ``float`` seconds since the epoch (``Clock.time()``), as
the canvas and insight reviews store it; wire times (ISO-8601 strings) are converted once, here,
by ``parse_time``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .canvas import Canvas
    from .changes import ChangeFeed
    from .knowledge.insights import InsightReviews
    from .knowledge.okf import Harvest
    from .knowledge.outbox import MemoryOutbox
    from .operator import GrantView, OperatorAction, RefusalRecord, RunView
    from .workspace import CaptureFailure, Settings

__all__ = ["RunDetail", "Desk", "WorkspaceView", "parse_time", "Maybe"]

Maybe = Awaitable[Any] | None
"""What an action answers: nothing (done in this process) or an awaitable (done over the wire)."""


def parse_time(value: object) -> float:
    """A wire time (ISO-8601 string, or seconds) as seconds since the epoch; 0.0 when absent."""
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str) and value:
        try:
            return datetime.fromisoformat(value).timestamp()
        except ValueError:
            return 0.0
    return 0.0


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
    settled: bool
    seq: int
    """The last event's sequence number."""
    activity: str | None
    pending: tuple[dict[str, Any], ...]
    question: dict[str, Any] | None
    last_turn_error: dict[str, Any] | None
    outcome: dict[str, Any] | None


def run_detail(dto: dict[str, Any], events: tuple[dict[str, Any], ...]) -> RunDetail:
    """A ``RunDetail`` from a run's wire DTO (plus the fake's ``deleted`` / ``seq``) and its events."""
    return RunDetail(
        id=dto["id"], user_id=dto["user_id"], name=dto.get("name"),
        status="deleted" if dto.get("deleted") else dto["status"],
        created_at=parse_time(dto.get("created_at")), updated_at=parse_time(dto.get("updated_at")),
        deleted=bool(dto.get("deleted")), params=dict(dto.get("params") or {}), events=events,
        settled=dto["status"] == "settled",
        seq=int(dto.get("seq", dto.get("last_event_id", 0))), activity=dto.get("activity"),
        pending=tuple(dto.get("pending") or ()), question=dto.get("question"),
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
