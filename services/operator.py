"""The operator's desk: everything a person at the workbench does to runs and grants.

Operator actions drive the fake directly (reply as the model, fail a turn, settle, ask, go idle,
emit, delete) and are logged per run, attributed to the operator. App actions (start a run,
send a message, cancel) go through the real SDK, as the app would. Grant actions change the
person's grant on the fake. Reads return plain frozen views for the UI.
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass, field, replace
from typing import Any

from .boundary import RunDetail, run_detail
from .changes import ChangeFeed
from .cloud import FakeCloud, FakeRun
from .errors import ServiceError
from .sdk import CrouterError, OAuth2Client, Refusal
from .wire import OUTCOMES

__all__ = [
    "OperatorError",
    "OperatorAction",
    "RefusalRecord",
    "RunView",
    "GrantView",
    "OperatorDesk",
    "SETTLE_CHOICES",
]

SETTLE_CHOICES = OUTCOMES
"""How the operator may settle a run: every ``services.wire.Outcome``."""
OPERATOR = "operator"


class OperatorError(ServiceError):
    """An operator action that cannot be done (unknown run, wrong state, bad input)."""


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


def event_fields(type: str, fields_json: str) -> tuple[str, dict[str, Any]]:
    """An operator's event as typed: its type (stripped) and its fields (a JSON object), or ``OperatorError``."""
    if not type.strip():
        raise OperatorError("an event needs a type")
    try:
        fields = json.loads(fields_json or "{}")
    except json.JSONDecodeError as exc:
        raise OperatorError(f"event fields are not valid JSON: {exc}") from None
    if not isinstance(fields, dict):
        raise OperatorError("event fields must be a JSON object")
    return type.strip(), fields


@dataclass
class OperatorDesk:
    """Actions and views over one cloud, as the operator and as the app."""

    cloud: FakeCloud
    oauth: OAuth2Client
    changes: ChangeFeed
    actions: dict[str, list[OperatorAction]] = field(default_factory=dict)
    refusals: deque[RefusalRecord] = field(default_factory=lambda: deque(maxlen=500))

    # -- views -----------------------------------------------------------------------------

    def runs(self, *, include_deleted: bool = False) -> list[RunView]:
        """Every run, newest first."""
        views = [_run_view(r) for r in self.cloud.runs.all if include_deleted or not r.deleted]
        return sorted(views, key=lambda v: v.created_at, reverse=True)

    def run(self, run_id: str) -> FakeRun:
        """The live run, to drive it in this process (the panes read ``detail`` instead)."""
        try:
            return self.cloud.runs.get(run_id)
        except KeyError:
            raise OperatorError(f"no run {run_id}") from None

    def detail(self, run_id: str) -> RunDetail:
        """The run and its event log, as a frozen snapshot (what the panes read)."""
        run = self.run(run_id)
        dto = {**run.to_dto(), "deleted": run.deleted, "seq": run.seq}
        detail = run_detail(dto, tuple(run.events))
        return replace(detail, created_at=run.created_at, updated_at=run.updated_at)

    def grants(self) -> list[GrantView]:
        """Every known person's grant, by person id."""
        views = []
        for user_id in sorted(self.cloud.people):
            user = self.cloud.user(user_id)
            state = user.grant.state
            if state is None:
                continue
            cap = state.get("spend_cap")
            views.append(
                GrantView(
                    user_id=user_id,
                    state=state["state"],
                    rev=state["rev"],
                    version=state["version"],
                    scopes=tuple(state["resolved_scopes"]),
                    dependencies=tuple((d["provider"], d["state"], d.get("message")) for d in state["dependencies"]),
                    spend_cap=f"{cap['amount']} {cap.get('currency', '')}/{cap.get('period', '')}" if cap else "none",
                    refusal=user.refusal,
                    revoked_code=state.get("revoked_code"),
                    holding=user.holding,
                    reads=len(user.reads),
                    runs=len([r for r in user.runs.all if not r.deleted]),
                )
            )
        return views

    def log(self, run_id: str) -> list[OperatorAction]:
        """The actions taken on a run, oldest first."""
        return list(self.actions.get(run_id, []))

    def refusals_since(self, seconds: float = 60.0) -> list[RefusalRecord]:
        """Refusals the app met in the last ``seconds``."""
        cutoff = self.cloud.clock.time() - seconds
        return [r for r in self.refusals if r.at >= cutoff]

    def waiting_on_user(self) -> int:
        """How many runs wait on their person (an open question)."""
        return sum(1 for r in self.cloud.runs.all if not r.deleted and r.status == "waiting_on_user")

    # -- operator actions (as the model / the runtime) ---------------------------------------

    def reply(self, run_id: str, text: str, *, chunks: int = 4) -> None:
        """Reply as the model: one root turn delivering every pending message."""
        run = self._live(run_id)
        run.reply(text, chunks=chunks)
        self._note(run_id, "reply", text)

    def fail_turn(self, run_id: str, code: str, message: str) -> None:
        """Fail a turn with ``model_error`` or ``content_refused``."""
        run = self._live(run_id)
        try:
            run.fail_turn(code=code, message=message)
        except ValueError as exc:
            raise OperatorError(str(exc)) from None
        self._note(run_id, "fail turn", f"{code}: {message}")

    def settle(self, run_id: str, kind: str, value: str = "") -> None:
        """Settle: ``result``, ``declined``, ``canceled``, ``deadline_exceeded`` or ``runtime_error``."""
        run = self._live(run_id)
        if kind not in SETTLE_CHOICES:
            raise OperatorError(f"settle takes one of {', '.join(SETTLE_CHOICES)}, not {kind!r}")
        if run.settled:
            raise OperatorError(f"run {run_id} is already settled")
        if kind == "result":
            run.settle(result=value)
        elif kind == "declined":
            run.settle(declined={"reason": value or "declined by the operator", "code": "declined", "retryable": False})
        elif kind == "runtime_error":
            run.settle(runtime_error=value or "runtime error injected by the operator")
        else:
            run.settle(failure=kind)
        self._note(run_id, "settle", f"{kind}{': ' + value if value else ''}")

    def ask(self, run_id: str, title: str) -> str:
        """Open a question to the run's person; returns its id."""
        run = self._live(run_id)
        if not title.strip():
            raise OperatorError("a question needs a title")
        question_id = run.ask(title=title)
        self._note(run_id, "ask", title)
        return question_id

    def go_idle(self, run_id: str) -> None:
        """Stop without submitting: the run goes idle."""
        self._live(run_id).idle()
        self._note(run_id, "idle", "")

    def emit(self, run_id: str, type: str, fields_json: str = "{}", node_id: str | None = None) -> None:
        """Append any event; ``fields_json`` is a JSON object of its fields."""
        run = self._live(run_id)
        type, fields = event_fields(type, fields_json)
        run.emit(type, fields, node_id=node_id or None)
        self._note(run_id, "emit", type.strip() + (f" on {node_id}" if node_id else ""))

    def delete_run(self, run_id: str) -> None:
        """Delete as the runtime would: reads 404, streams close."""
        run = self.run(run_id)
        if run.deleted:
            raise OperatorError(f"run {run_id} is already deleted")
        run.delete()
        self._note(run_id, "delete", "")

    # -- app actions through the SDK -----------------------------------------------------------

    async def start_run(self, user_id: str, prompt: str) -> str:
        """Start a run as the app, through the SDK; returns its id."""
        client = await self._client(user_id)
        run = await self._sdk(user_id, client.runs.start(prompt=prompt))
        self._note(run.id, "start", prompt, by="app")
        return run.id

    async def send_message(self, run_id: str, text: str, *, start_turn: bool = True) -> None:
        """Send a message to a run as the app, through the SDK."""
        run = self.run(run_id)
        client = await self._client(run.user_id)
        await self._sdk(run.user_id, client.runs.message(run_id, text, start_turn=start_turn))
        self._note(run_id, "message", text, by="app")

    async def cancel_run(self, run_id: str) -> None:
        """Cancel a run as the app, through the SDK."""
        run = self.run(run_id)
        client = await self._client(run.user_id)
        await self._sdk(run.user_id, client.runs.cancel(run_id))
        self._note(run_id, "cancel", "", by="app")

    # -- grant actions ---------------------------------------------------------------------

    def revoke(self, user_id: str, code: str = "grant_revoked") -> None:
        grant = self._grant(user_id)
        try:
            grant.revoke(code)
        except ValueError as exc:  # not a refusal code: the app would never see it as one
            raise OperatorError(str(exc)) from None
        self._note_user(user_id, "revoke", code)

    async def restore(self, user_id: str) -> None:
        """Reactivate the grant, clear any refusal and reconnect the app (a new sign-in)."""
        grant = self._grant(user_id)
        scopes = grant.scopes
        dependencies = (grant.state or {}).get("dependencies", [])
        self.cloud.user(user_id).refuse("ok")
        await self.cloud.connect(self.oauth.store, user_id, scopes=scopes, dependencies=dependencies)
        self._note_user(user_id, "restore", "")

    def refuse(self, user_id: str, code: str) -> None:
        self._grant(user_id)
        try:
            self.cloud.user(user_id).refuse(code)
        except ValueError as exc:
            raise OperatorError(str(exc)) from None
        self._note_user(user_id, "refuse", code)

    def expire_tokens(self, user_id: str) -> None:
        self._grant(user_id)
        self.cloud.user(user_id).expire_tokens()
        self._note_user(user_id, "expire tokens", "")

    def set_scopes(self, user_id: str, scopes: list[str]) -> None:
        cleaned = [s.strip() for s in scopes if s.strip()]
        bad = [s for s in cleaned if ":" not in s or " " in s]
        if bad:
            raise OperatorError(f"scopes look like <provider>:<group>; not {', '.join(bad)}")
        self._grant(user_id).set(resolved_scopes=cleaned)
        self._note_user(user_id, "set scopes", " ".join(cleaned))

    # -- internals -------------------------------------------------------------------------

    def _live(self, run_id: str) -> FakeRun:
        run = self.run(run_id)
        if run.deleted:
            raise OperatorError(f"run {run_id} was deleted")
        return run

    def _grant(self, user_id: str):  # type: ignore[no-untyped-def]
        if user_id not in self.cloud.people or self.cloud.user(user_id).grant.state is None:
            raise OperatorError(f"{user_id} has no grant")
        return self.cloud.user(user_id).grant

    async def _client(self, user_id: str):  # type: ignore[no-untyped-def]
        return await self._sdk(user_id, self.oauth.client(user_id))

    async def _sdk(self, user_id: str, call: Any) -> Any:
        try:
            return await call
        except CrouterError as exc:  # a refusal was already recorded by ``on_refusal``
            raise OperatorError(f"{exc.code or exc.status}: {exc.message}") from exc

    def record_refusal(self, refusal: Refusal) -> None:
        """Remember a refusal with the grant revision that caused it (``on_refusal`` calls this)."""
        state = self.cloud.user(refusal.user_id).grant.state if refusal.user_id else None
        record = RefusalRecord(refusal.user_id or "", refusal.code, refusal.message or "", state["rev"] if state else None, self.cloud.clock.time())
        self.refusals.append(record)
        self.changes.emit("workspace", "refusal", record.user_id, code=record.code)

    def _note(self, run_id: str, action: str, detail: str, *, by: str = OPERATOR) -> None:
        entry = OperatorAction(run_id, action, detail, by, self.cloud.clock.time())
        self.actions.setdefault(run_id, []).append(entry)
        self.changes.emit("workspace", "operator.action", run_id, action=action, by=by)

    def _note_user(self, user_id: str, action: str, detail: str) -> None:
        for run in self.cloud.user(user_id).runs.all:
            if not run.deleted:
                self._note(run.id, f"grant {action}", f"{user_id} {detail}".strip())
        self.changes.emit("workspace", "grant.action", user_id, action=action)


def _run_view(run: FakeRun) -> RunView:
    outcome = run.outcome.get("outcome") if run.outcome else None
    error = run.last_turn_error
    return RunView(
        id=run.id,
        user_id=run.user_id,
        name=run.name or "",
        status="deleted" if run.deleted else run.status,
        activity=run.activity,
        prompt=str(run.params.get("prompt", "")),
        created_at=run.created_at,
        updated_at=run.updated_at,
        events=run.seq,
        pending=len(run.pending),
        outcome=outcome,
        question=(run.question or {}).get("title"),
        last_turn_error=f"{error['code']}: {error['message']}" if error else None,
        deleted=run.deleted,
    )
