"""The app's side of a window attached to a served workspace: start, message, cancel and fork.

The window has no app of its own: the server makes each call as the app, through the SDK over the
cloud's own wire (``services.cloud.app_actions``), so what the cloud refuses comes back in its own
words, as ``OperatorError``; a refusal among them is recorded as the embedded desk records one.
Each start and message carries an idempotency key: a call that got no answer is sent once more
with the same key, so the cloud does it at most once. ``ServedDesk`` takes these methods from
``ServedAppActions``.
"""

from __future__ import annotations

import uuid
from collections import deque
from typing import TYPE_CHECKING, Any

from .changes import ChangeFeed
from .clock import Clock
from .operator import OperatorAction, OperatorError, RefusalRecord
from .text import value_problem

__all__ = ["ServedAppActions", "sendable"]


class ServedAppActions:
    """App actions through the control API (mixed into ``ServedDesk``, whose state they use)."""

    if TYPE_CHECKING:
        remote: Any
        changes: ChangeFeed
        clock: Clock
        origin: str
        refusals: deque[RefusalRecord]
        actions: dict[str, list[OperatorAction]]
        _runs: dict[str, dict[str, Any]]
        _people: dict[str, dict[str, Any]]

        def _store_run(self, dto: dict[str, Any]) -> None: ...

        def _note(self, run_id: str, action: str, detail: str, *, by: str = ...) -> None: ...

    async def start_run(self, user_id: str, prompt: str) -> str:
        """Start a run as the app; returns its id."""
        answer = await self._app(user_id, f"/people/{_q(user_id)}/runs", {"prompt": prompt})
        self._store_run(dict(answer["run"]))
        self._note(answer["run_id"], "start", prompt, by="app")
        return str(answer["run_id"])

    async def send_message(self, run_id: str, text: str, *, start_turn: bool = True) -> None:
        """Send a message to a run as the app."""
        answer = await self._app(await self._owner(run_id), f"/runs/{_q(run_id)}/message",
                                 {"text": text, "start_turn": start_turn})
        self._store_run(dict(answer["run"]))
        self._note(run_id, "message", text, by="app")

    async def cancel_run(self, run_id: str) -> None:
        """Cancel a run as the app."""
        answer = await self._app(await self._owner(run_id), f"/runs/{_q(run_id)}/cancel", {}, key=False)
        self._store_run(dict(answer["run"]))
        self._note(run_id, "cancel", "", by="app")

    async def fork(self, parent_id: str, messages: list[dict[str, Any]]) -> str:
        """A child run carrying ``messages`` (the parent's conversation up to the fork point), as the app."""
        user_id = await self._owner(parent_id)
        parent = self._runs[parent_id]
        last_user = next((m.get("text", "") for m in reversed(messages) if m.get("role") == "user"), "")
        body = {"prompt": last_user, "name": f"fork of {parent.get('name') or parent_id}",
                "forked_from": parent_id, "history": messages}
        answer = await self._app(user_id, f"/people/{_q(user_id)}/runs", body)
        self._store_run(dict(answer["run"]))
        self._note(answer["run_id"], "fork", f"from {parent_id}", by="app")
        return str(answer["run_id"])

    async def _owner(self, run_id: str) -> str:
        """The run's person (a run another window started a moment ago is read from the server)."""
        from .cloud.remote import ControlError

        dto = self._runs.get(run_id)
        if dto is None:
            try:
                self._store_run(await self.remote.call("GET", f"/runs/{_q(run_id)}", params={"events": "0"}))
            except ControlError as exc:
                raise OperatorError(exc.message or f"no run {run_id}") from None
            dto = self._runs[run_id]
        return str(dto["user_id"])

    async def _app(self, user_id: str, path: str, body: dict[str, Any], *, key: bool = True) -> dict[str, Any]:
        """One app action through the control API. A call that got no answer is sent once more
        with the same idempotency key, so the cloud does it at most once."""
        from .cloud.remote import ControlError
        from .wire import REFUSAL_CODES

        sendable(body)
        if key:
            body = {**body, "idempotency_key": f"wb-{self.origin}-{uuid.uuid4().hex}"}
        for attempt in (1, 2):
            try:
                answer: dict[str, Any] = await self.remote.call("POST", path, body)
                return answer
            except ControlError as exc:
                if exc.code == "unreachable" and key and attempt == 1:
                    continue
                if exc.code in REFUSAL_CODES:
                    self._record_refusal(user_id, exc.code, exc.message)
                raise OperatorError(f"{exc.code}: {exc.message}" if exc.message else f"{exc.status} {exc.code}") from None
        raise AssertionError("unreachable")  # the loop returns or raises

    def _record_refusal(self, user_id: str, code: str, message: str) -> None:
        grant = (self._people.get(user_id) or {}).get("grant") or {}
        record = RefusalRecord(user_id, code, message, grant.get("rev"), self.clock.time())
        self.refusals.append(record)
        self.changes.emit("workspace", "refusal", user_id, code=code)


def sendable(body: dict[str, Any]) -> None:
    """Refuse text no store can keep (a lone surrogate, NUL) before it is sent anywhere."""
    problem = value_problem(body)
    if problem is not None:
        raise OperatorError(f"this cannot be sent: {problem}")


def _q(value: str) -> str:
    from urllib.parse import quote

    return quote(value, safe="")
