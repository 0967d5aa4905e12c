"""App actions on a served cloud: start a run, send a message, cancel, made as the app.

A window attached to a served workspace has no app of its own. These control routes act for it
the way the embedded desk does: through the SDK (``services.sdk.Crouter``) over the cloud's own
transport, with the person's connection. Whatever the cloud refuses (a revoked grant, a refused
refresh, an idempotency conflict, a run in the wrong state, an unknown run) is answered with the
SDK error's own status, code and message, so the window shows the cloud's words.

Routes (under ``/_workbench/v1``, listed in ``control.py``):

- ``POST /people/{user}/runs`` ``{prompt, name?, forked_from?, forked_at_turn?, history?, idempotency_key?}``
  answers ``{run_id, run}``
- ``POST /runs/{run_id}/message`` ``{text, start_turn?, idempotency_key?}`` answers ``{message,
  run}``
- ``POST /runs/{run_id}/cancel`` answers ``{run}``
- ``POST /people/{user}/reconnect`` ``{scopes?, dependencies?}``: a new sign-in (refusal cleared,
  grant active, the connection saved where these actions read it) answers ``{reconnected, grant}``

``run`` is the run as ``GET /runs/{run_id}?events=0`` shows it. Text with a lone surrogate or NUL
is refused (400 ``invalid_request``, saying where) before anything is sent: nothing is half done.

Whose connection: ``use(client_for)`` gives the clients, e.g. a serving workspace's
``OAuth2Client.client``, the very connection its embedded desk refreshes (so a refused refresh
reads and is recorded exactly as there). Without one, each call gets a client with a fresh access
token from the cloud (``cloud.crouter``): the runtime still checks the grant as for any app, but
no refresh happens, so a refusal scripted for refreshes (``user.refuse``) does not apply.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from ..text import value_problem
from .dtos import run_dto
from .errors import ControlError

if TYPE_CHECKING:
    from ..sdk import ConnectionStore, Crouter
    from ..cloud.cloud import FakeCloud

__all__ = ["AppActions", "ClientFor"]

T = TypeVar("T")

ClientFor = Callable[[str], Awaitable["Crouter"]]
"""The SDK client acting as the app for a person id."""


class AppActions:
    """The handlers of the app-action control routes for one cloud."""

    def __init__(self, cloud: "FakeCloud", client_for: ClientFor | None = None, store: "ConnectionStore | None" = None) -> None:
        self.cloud = cloud
        self._client_for = client_for
        self._store = store

    def use(self, client_for: ClientFor | None, store: "ConnectionStore | None" = None) -> None:
        """Act through ``client_for(user_id)`` from now on (None: fresh tokens from the cloud); a
        person reconnected here saves their connection to ``store`` (where ``client_for`` reads it)."""
        self._client_for = client_for
        self._store = store

    # -- routes ------------------------------------------------------------------------------

    async def start_run(self, body: dict[str, object], query: dict[str, str], user: str) -> dict[str, object]:
        """``POST /people/{user}/runs``: ``run.start`` as the app."""
        prompt = _required(body, "prompt")
        options: dict[str, Any] = {}
        for option in ("name", "forked_from"):
            value = _text(body, option)
            if value is not None:
                options[option] = value
        history = body.get("history")
        if history is not None:
            if not isinstance(history, list) or not all(isinstance(m, dict) for m in history):
                raise _refused("history must be a list of message objects")
            _check("history", history)
            options["history"] = history
        turn = body.get("forked_at_turn")
        if turn is not None:
            if isinstance(turn, bool) or not isinstance(turn, int) or turn < 1:
                raise _refused("forked_at_turn must be a whole number from 1")
            if "forked_from" not in options:
                raise _refused("forked_at_turn names a turn of the run in forked_from: give both")
            options["forked_at_turn"] = turn
        key = _text(body, "idempotency_key")
        if user not in self.cloud.people:  # never create a person as a side effect
            raise _refusal(404, "person_not_found", f"no person {user}")
        run = await self._call(user, lambda c: c.runs.start(prompt=prompt, idempotency_key=key, **options))
        return {"run_id": run.id, "run": self._dto(run.id)}

    async def message(self, body: dict[str, object], query: dict[str, str], run_id: str) -> dict[str, object]:
        """``POST /runs/{run_id}/message``: ``run.message`` as the app."""
        text = _required(body, "text")
        start_turn = body.get("start_turn", True)
        if not isinstance(start_turn, bool):
            raise _refused("start_turn must be true or false")
        key = _text(body, "idempotency_key")
        owner = self._owner(run_id)
        answer = await self._call(owner, lambda c: c.runs.message(run_id, text, start_turn, key))
        return {"message": answer.get("message"), "run": self._dto(run_id)}

    async def cancel(self, body: dict[str, object], query: dict[str, str], run_id: str) -> dict[str, object]:
        """``POST /runs/{run_id}/cancel``: ``run.cancel`` as the app."""
        owner = self._owner(run_id)
        await self._call(owner, lambda c: c.runs.cancel(run_id))
        return {"run": self._dto(run_id)}

    async def reconnect(self, body: dict[str, object], query: dict[str, str], user: str) -> dict[str, object]:
        """``POST /people/{user}/reconnect``: a new sign-in for the app's side, as the embedded desk's
        restore does: any refusal cleared, the grant active again, the new connection saved where
        the app actions read it (so they go through again after a refused refresh removed it)."""
        from ..sdk import MemoryConnectionStore

        if user not in self.cloud.people:
            raise _refusal(404, "person_not_found", f"no person {user}")
        scopes, dependencies = body.get("scopes"), body.get("dependencies")
        if scopes is not None and (not isinstance(scopes, list) or not all(isinstance(s, str) for s in scopes)):
            raise _refused("scopes must be a list of strings")
        if dependencies is not None and (not isinstance(dependencies, list)
                                         or not all(isinstance(d, dict) and "provider" in d for d in dependencies)):
            raise _refused("dependencies must be a list of {provider, state?, message?} objects")
        _check("scopes", scopes)
        _check("dependencies", dependencies)
        self.cloud.user(user).refuse("ok")
        await self.cloud.connect(self._store if self._store is not None else MemoryConnectionStore(), user,
                                 scopes=scopes, dependencies=dependencies)
        return {"reconnected": True, "grant": self.cloud.user(user).grant.state}

    # -- internals -----------------------------------------------------------------------------

    def _owner(self, run_id: str) -> str:
        try:
            return self.cloud.runs.get(run_id).user_id
        except KeyError:
            raise _refusal(404, "run_not_found", f"no run {run_id}") from None

    def _dto(self, run_id: str) -> dict[str, object]:
        return run_dto(self.cloud.runs.get(run_id), events=False)

    async def _call(self, user_id: str, act: Callable[["Crouter"], Awaitable[T]]) -> T:
        from ..sdk import CrouterError

        try:
            if self._client_for is not None:
                client = await self._client_for(user_id)
                return await act(client)
            async with self.cloud.crouter(user_id) as client:
                return await act(client)
        except CrouterError as exc:  # the cloud's (or the directory's) own answer, passed on as it is
            raise _refusal(exc.status or 502, exc.code or "error", exc.message) from None


def _required(body: Mapping[str, object], key: str) -> str:
    value = _text(body, key)
    if value is None:
        raise _refused(f"{key} is required")
    return value


def _text(body: Mapping[str, object], key: str) -> str | None:
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise _refused(f"{key} must be a string")
    _check(key, value)
    return value


def _check(key: str, value: object) -> None:
    problem = value_problem(value)
    if problem is not None:
        raise _refused(f"{key} cannot be stored: {problem}")


def _refused(message: str) -> Exception:
    return _refusal(400, "invalid_request", message)


def _refusal(status: int, code: str, message: str) -> Exception:
    return ControlError(status, code, message)
