"""The one desk under every window: the typed boundary the panes stand on.

The panes (``screens/``) and the App (``workbench/``) hold a ``WorkspaceView`` and act through its
``desk``: one ``Desk`` (``desk.py``), every operator, app and grant action written once, over a
control API answered in this process (``embedded.py``) or by the workspace's server
(``services.attached.desk.ServedDesk``). Reads answer frozen read models (``models.py``), built once from
the control API's DTOs (``views.py``), never a live cloud object.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from .desk import OPERATOR, SETTLE_CHOICES, ControlClient, Desk, RunBook, event_fields, sendable
from .models import JUDGE_USER, SYSTEM_USERS, is_system, CaptureFailure, GrantView, OperatorAction, OperatorError, RefusalRecord, RunDetail, RunView
from .mirror import FED_BUDGET, FED_KEEP, FED_TAIL, RunMirror, seq_of, wire_seq
from .forks import Lineage, Turn, fork_history, fork_name, lineage, turns_of
from .views import grant_view, run_detail, run_seq, run_view

if TYPE_CHECKING:
    from ..canvas import Canvas
    from ..changes import ChangeFeed
    from ..knowledge.insights import InsightReviews
    from ..knowledge.okf import Harvest
    from ..knowledge.outbox import MemoryOutbox
    from ..settings import Settings
    from ..timeline import Timeline

__all__ = [
    "Desk",
    "ControlClient",
    "RunBook",
    "WorkspaceView",
    "ServerView",
    "OperatorError",
    "CaptureFailure",
    "JUDGE_USER",
    "SYSTEM_USERS",
    "is_system",
    "OperatorAction",
    "RefusalRecord",
    "RunView",
    "RunDetail",
    "GrantView",
    "RunMirror",
    "FED_BUDGET",
    "FED_KEEP",
    "FED_TAIL",
    "Turn",
    "Lineage",
    "turns_of",
    "fork_history",
    "fork_name",
    "lineage",
    "seq_of",
    "wire_seq",
    "run_seq",
    "run_view",
    "run_detail",
    "grant_view",
    "event_fields",
    "sendable",
    "SETTLE_CHOICES",
    "OPERATOR",
]


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
    def timeline(self) -> Timeline | None: ...
    @property
    def header_status(self) -> str: ...
    @property
    def canvas_label(self) -> str: ...
    def capture_failures(self) -> list[CaptureFailure]: ...
    async def close(self) -> None: ...
