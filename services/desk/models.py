"""The desk's read models: frozen snapshots the panes draw, never a live cloud object.

Every time in them is float seconds since the epoch (``services.times``), converted once when the
model is built from a run's or a person's DTO (``views.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from ..errors import ServiceError

__all__ = ["JUDGE_USER", "SYSTEM_USERS", "is_system", "CaptureFailure", "OperatorError", "OperatorAction", "RefusalRecord", "RunView", "RunDetail", "GrantView"]

JUDGE_USER = "user:operator"
"""The operator's own person on the fake cloud: harvest judge runs are started as them."""
SYSTEM_USERS = frozenset({JUDGE_USER})
"""The people the workbench starts runs as for itself (the harvest judge): their runs are plumbing, not
work, so the lists hide them by default and mark them ``system`` where they show."""


def is_system(user_id: str | None) -> bool:
    """Whether a run (or node, or grant) of ``user_id`` is one the workbench made for itself."""
    return user_id in SYSTEM_USERS


class OperatorError(ServiceError):
    """An operator or app action the desk cannot do (unknown run, wrong state, bad input, a refusal in
    the cloud's own words): the one error a pane catches from the desk."""


@dataclass(frozen=True)
class OperatorAction:
    """One thing the operator (or the app, through the SDK) did to a run, shown in its stream."""

    run_id: str
    action: str
    detail: str
    by: str
    at: float


@dataclass(frozen=True)
class RefusalRecord:
    """A refusal the app met: who, the code, and the grant revision it came from."""

    user_id: str
    code: str
    message: str
    rev: int | None
    at: float
    run_id: str | None = None
    """The run the refused call was for; None when not known (a call made outside the desk's actions)."""
    start: bool = False
    """The refused call was a start (or a fork): it concerned no run that exists, so no run's stream shows it."""

    def concerns(self, run_id: str, user_id: str, created_at: float) -> bool:
        """Whether a run's stream shows this refusal: the run's own, or (when the run is not known) any
        run of the person alive then; a refused start never names another run."""
        if self.start or self.user_id != user_id:
            return False
        return self.run_id == run_id if self.run_id is not None else self.at >= created_at


@dataclass(frozen=True)
class RunView:
    """A run as the runs pane lists it."""

    id: str
    user_id: str
    name: str
    status: str
    activity: str | None
    prompt: str
    created_at: float
    updated_at: float
    events: int
    pending: int
    outcome: str | None
    question: str | None
    last_turn_error: str | None
    deleted: bool
    forked_from: str | None = None
    """The run this one was forked from (None: no fork)."""
    forked_at_turn: int | None = None
    """The parent's turn it was forked at (None: no fork, or a fork that did not say)."""

    @property
    def system(self) -> bool:
        """The workbench's own run (the harvest judge's), not a person's work."""
        return is_system(self.user_id)


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
    params: dict[str, object]
    events: tuple[dict[str, object], ...]
    """The run's events as the wire has them, except their ``at``: float seconds since the epoch."""
    settled: bool
    seq: int
    """The last event's sequence number."""
    activity: str | None
    pending: tuple[dict[str, object], ...]
    question: dict[str, object] | None
    """The open question as the wire has it, except its ``created_at``: float seconds."""
    last_turn_error: dict[str, object] | None
    outcome: dict[str, object] | None


@dataclass(frozen=True)
class GrantView:
    """A person's grant as the grants pane shows it."""

    user_id: str
    state: str
    rev: int
    version: int
    scopes: tuple[str, ...]
    dependencies: tuple[tuple[str, str, str | None], ...]
    spend_cap: str
    refusal: str | None
    revoked_code: str | None
    holding: int
    reads: int
    runs: int


@dataclass(frozen=True)
class CaptureFailure:
    """A capture that failed (an OKF note or run record, an outbox turn) and has not succeeded since."""

    source: str
    """The service: ``okf`` or ``outbox``."""
    id: str
    """What failed to capture: an OKF source id, a conversation (run) id."""
    error: str
    """The service's own words."""
    at: float
