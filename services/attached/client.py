"""``RemoteCloud``: ``FakeCloud``'s driver surface over a served cloud's control API.

A test written against ``FakeCloud`` drives a served one the same way, awaiting where a call
crosses the wire::

    remote = RemoteCloud.from_workspace(folder)          # or RemoteCloud(url, token)
    conn = await remote.connect(store, "user:o1", scopes=["crtr:llm"])
    run = await remote.runs.get(run_id)                  # a RemoteRun: a snapshot plus the drivers
    runs = await remote.runs.all                         # properties of FakeCloud are awaited too
    grant = await remote.user("user:o1").grant.state
    await run.reply("hello")                             # FakeRun.reply over the wire
    await run.fail_turn(code="model_error", message="boom")
    await remote.user("user:o1").grant.revoke("grant_removed")
    await remote.user("user:o1").grant.restore()
    failure = await remote.fail_next("run.start", 503, user="user:o1", times=3)
    gate = await remote.gate("run.start"); ...; await gate.release()
    async for change in remote.changes(): ...

Each ``RemoteRun`` holds the run as the last answer showed it (``status``, ``seq``, ...) and
``await run.refresh()`` reads it again, events included (``runs.get`` includes them; ``runs.all``
leaves them out, so a long history is not sent for a listing). What cannot cross the wire (responders and provider
handlers: they are code) is not offered. A refused call raises ``ControlError`` with the
server's code and message; a missing or wrong token raises it with status 401.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import httpx

from ..control_wire import ConnectionJSON
from ..changes import Change
from ..served.asgi import CONTROL_PREFIX
from ..served.errors import ControlError
from ..cloud.errors import Answer, CloudError
from ..text import json_text_suspect

if TYPE_CHECKING:
    from ..sdk.http import OpenStream
    from ..sdk import Connection, ConnectionStore

__all__ = ["RemoteCloud", "RemoteRun", "RemoteUser", "RemoteGrant", "RemoteGate", "ControlError", "ChangeBatch",
           "change_json"]


def _q(value: str) -> str:
    return quote(value, safe="")


class RemoteCloud:
    """The control API of one served cloud."""

    def __init__(self, url: str, token: str, *, timeout: float = 30.0) -> None:
        self.url = url.rstrip("/")
        self.issuer = self.url
        self._http = httpx.AsyncClient(
            base_url=self.url + CONTROL_PREFIX,
            headers={"Authorization": f"Bearer {token}"},
            timeout=httpx.Timeout(timeout),
        )
        self.runs = RemoteRuns(self, None)

    @classmethod
    def from_workspace(cls, folder: Path | str, *, timeout: float = 30.0) -> "RemoteCloud":
        """The served cloud named by ``folder/serve.json`` (``ControlError`` when none is running)."""
        from ..served.server import live_serve_info

        info = live_serve_info(Path(folder))
        if info is None:
            raise ControlError(503, "not_served", f"{folder} is not being served (no live serve.json)")
        return cls(info["url"], info["token"], timeout=timeout)

    checks_text = True
    """``call(..., checked=True)`` says whether an answer's text needs a scan (``Desk.read_events_many``)."""

    async def call(self, method: str, path: str, body: object = None,
                   params: Mapping[str, str | int | float | bool | None] | None = None, *,
                   content: bytes | None = None, checked: bool = False) -> Any:
        """One control call; its JSON answer (``ControlError`` when refused). ``content`` is a body
        already encoded as JSON, sent instead of ``body``. With ``checked``: the answer, and whether
        every string of it is storable as it is (its JSON text holds no escape of a NUL or of a
        surrogate: JSON carries them no other way, and a text it carries whole is valid UTF-8), so a
        reader need not scan what it parsed (an emoji's escaped pair counts as suspect)."""
        response = await self._answered(method, path, body, params, content=content)
        if not checked:
            return response.json()
        return response.json(), not json_text_suspect(response.content)

    async def _answered(self, method: str, path: str, body: object = None,
                        params: Mapping[str, str | int | float | bool | None] | None = None, *,
                        content: bytes | None = None) -> httpx.Response:
        """The response to one control call (``ControlError`` when refused or unanswered)."""
        for attempt in (1, 2):
            try:
                if content is None:
                    response = await self._http.request(method, path, json=body, params=params)
                else:
                    response = await self._http.request(method, path, content=content, params=params,
                                                        headers={"Content-Type": "application/json"})
                break
            except httpx.RemoteProtocolError as exc:
                # a kept-alive connection the server closed as it was reused: a read is asked again once
                if method == "GET" and attempt == 1:
                    continue
                raise ControlError(503, "unreachable", f"{self.url} did not answer ({type(exc).__name__})") from exc
            except httpx.TransportError as exc:
                raise ControlError(503, "unreachable", f"{self.url} did not answer ({type(exc).__name__})") from exc
        # httpx binds a response and its stream to each other: read whole, the answer (a list of every
        # run is tens of MB) would stay until the cyclic collector next ran; unbound, it goes once read
        response.stream = httpx.ByteStream(b"")
        if response.status_code >= 300:
            try:
                error = response.json().get("error", {})
            except ValueError:
                error = {}
            raise ControlError(response.status_code, str(error.get("code", "refused")), str(error.get("message", "")))
        return response

    # -- the seed's surface ------------------------------------------------------------------

    def user(self, user_id: str) -> "RemoteUser":
        """The person with this id (``await remote.user(id).state()`` reads them)."""
        return RemoteUser(self, user_id)

    async def connect(
        self,
        store: "ConnectionStore | None",
        user_id: str,
        *,
        scopes: list[str] | None = None,
        dependencies: list[dict[str, Any]] | None = None,
    ) -> "Connection":
        """Make the person's grant active and save their ``Connection`` (access token expired) to ``store``."""

        answer = await self.connection(user_id, scopes=scopes, dependencies=dependencies)
        connection = connection_of(answer)
        if store is not None:
            await store.save(connection)
        return connection

    async def connection(
        self, user_id: str, *, scopes: list[str] | None = None, dependencies: list[dict[str, Any]] | None = None
    ) -> ConnectionJSON:
        """The connection JSON an app stores (with ``issuer`` and ``client_id``)."""
        body: dict[str, Any] = {}
        if scopes is not None:
            body["scopes"] = scopes
        if dependencies is not None:
            body["dependencies"] = dependencies
        return await self.call("POST", f"/people/{_q(user_id)}/connect", body)  # type: ignore[no-any-return]

    async def people(self) -> list[dict[str, Any]]:
        return (await self.call("GET", "/people"))["people"]  # type: ignore[no-any-return]

    async def fail_next(self, op: str, answer: Answer | dict[str, object], *, user: str | None = None, times: float = 1) -> "RemoteFailure":
        """Answer the next ``times`` matching requests with ``answer``; ``await f.remove()`` undoes it."""
        if isinstance(answer, CloudError):
            answer = {"status": answer.status, "code": answer.code, "message": answer.message,
                      "origin": answer.origin, "retryable": answer.retryable, "details": answer.details,
                      "param": answer.param, "retry_after_s": answer.retry_after_s}
        body = {"op": op, "answer": answer, "user": user, "times": None if times == float("inf") else times}
        return RemoteFailure(self, (await self.call("POST", "/fail_next", body))["id"])

    async def gate(self, op: str, *, user: str | None = None) -> "RemoteGate":
        """Hold every matching request until ``await gate.release()``."""
        return RemoteGate(self, (await self.call("POST", "/gates", {"op": op, "user": user}))["id"])

    async def reset(self) -> None:
        """``FakeCloud.reset`` on the served cloud."""
        await self.call("POST", "/reset")

    async def export_state(self) -> dict[str, Any]:
        """The whole state (``state.export_state``)."""
        return await self.call("GET", "/state")  # type: ignore[no-any-return]

    async def import_state(self, doc: Mapping[str, object]) -> None:
        """Replace the whole state with ``doc``."""
        await self.call("PUT", "/state", doc)

    def _open_changes(self, headers: dict[str, str] | None, origin: str | None = None) -> "OpenStream":
        """The change feed's streaming response (``async with``); a reader that stops early closes it
        quietly. With ``origin`` (a window's tag) the changes that window relayed are not sent back."""
        from ..sdk.http import OpenStream

        request = self._http.build_request("GET", "/changes", headers=headers, params={"origin": origin} if origin else None,
                                           timeout=httpx.Timeout(30.0, read=None))
        return OpenStream(lambda: self._http.send(request, stream=True))

    async def changes(self) -> AsyncIterator[Change]:
        """The served cloud's change feed, as it happens, until the iterator is closed."""
        from ..sdk.sse import SSEParser

        parser = SSEParser()
        async with self._open_changes(None) as response:
            if response.status_code >= 300:
                raise ControlError(response.status_code, "refused", "the change stream was refused")
            async for chunk in response.aiter_bytes():
                for frame in parser.feed(chunk):
                    data = json.loads(frame.data)
                    if isinstance(data, dict) and "source" in data:  # a ``reset`` frame is not a change
                        yield Change(data["source"], data["kind"], data.get("id", ""), data.get("data") or {})

    async def change_batches(self, last_event_id: str | None = None, origin: str | None = None) -> AsyncIterator["ChangeBatch"]:
        """The served cloud's change feed in the batches the server sends: first an empty batch
        with ``subscribed`` set, once the stream is open, then every change as it happens.

        With ``last_event_id`` (a ``ChangeBatch.last_id`` seen before) the server first sends what
        came after it, or, when it no longer holds all of that, a batch with ``reset`` set: read
        everything again."""
        from ..sdk.sse import SSEParser

        parser = SSEParser()
        headers = {"Last-Event-ID": last_event_id} if last_event_id else None
        async with self._open_changes(headers, origin) as response:
            if response.status_code >= 300:
                raise ControlError(response.status_code, "refused", "the change stream was refused")
            yield ChangeBatch([], None, subscribed=True)
            async for chunk in response.aiter_bytes():
                batch: list[Change] = []
                reset, last = False, None
                for frame in parser.feed(chunk):
                    try:
                        data = json.loads(frame.data)
                        if frame.type == "reset" and isinstance(data, dict) and "reset" in data:
                            reset, batch = True, []  # what came before it is read again anyway
                        else:
                            batch.append(Change(str(data["source"]), str(data["kind"]), str(data.get("id", "")),
                                                dict(data.get("data") or {})))
                    except (ValueError, KeyError, TypeError, AttributeError):
                        pass  # one unreadable frame never stops the stream
                    last = frame.last_event_id or last
                if batch or reset or last:
                    yield ChangeBatch(batch, last, reset=reset)

    async def publish(self, change: Change) -> None:
        """Publish a window's own change on the served change feed (for every other window)."""
        await self.call("POST", "/changes", {"source": change.source, "kind": change.kind, "id": change.id,
                                             "data": change.data})

    async def publish_many(self, changes: Sequence[Change]) -> None:
        """Publish a window's own changes in one request, in order (at most ``MAX_CHANGES``): the
        server publishes all of them, or none when it refuses one."""
        await self.publish_encoded([change_json(change) for change in changes])

    async def publish_encoded(self, parts: Sequence[bytes]) -> None:
        """``publish_many`` for changes already encoded with ``change_json`` (a sender that bounds a
        batch's size in bytes encodes each change once)."""
        await self.call("POST", "/changes", content=b'{"changes":[' + b",".join(parts) + b"]}")

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> "RemoteCloud":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


@dataclass(frozen=True)
class ChangeBatch:
    """What one read of the change stream brought (``RemoteCloud.change_batches``)."""

    changes: list[Change]
    last_id: str | None
    """The id of the newest frame in it: resume after it with ``change_batches(last_id)``."""
    reset: bool = False
    """The server no longer holds every change after the id given: read everything again."""
    subscribed: bool = False
    """The opening batch: the stream is open (changes from now on will come)."""


class RemoteFailure:
    """A scripted failure on the served cloud."""

    def __init__(self, remote: RemoteCloud, failure_id: str) -> None:
        self._remote, self.id = remote, failure_id

    async def remove(self) -> None:
        await self._remote.call("DELETE", f"/failures/{_q(self.id)}")


class RemoteGate:
    """A gate on the served cloud: ``await gate.release()``."""

    def __init__(self, remote: RemoteCloud, gate_id: str) -> None:
        self._remote, self.id = remote, gate_id

    async def release(self) -> int:
        """Let held and future requests through; returns how many were held."""
        return int((await self._remote.call("POST", f"/gates/{_q(self.id)}/release"))["held"])


class RemoteRuns:
    """``remote.runs`` and ``remote.user(id).runs``: ``await runs.all`` and ``await runs.get(id)``."""

    def __init__(self, remote: RemoteCloud, user_id: str | None) -> None:
        self._remote, self._user_id = remote, user_id

    @property
    def all(self) -> Awaitable[list["RemoteRun"]]:
        """Every run in start order, deleted ones kept (``await runs.all``, as ``cloud.runs.all``)."""
        return self._all()

    async def _all(self) -> list["RemoteRun"]:
        params = {"user": self._user_id} if self._user_id else None
        answer = await self._remote.call("GET", "/runs", params=params)
        return [RemoteRun(self._remote, dto) for dto in answer["runs"]]

    async def get(self, run_id: str) -> "RemoteRun":
        """The run with this id (``ControlError`` 404 when unknown)."""
        run = RemoteRun(self._remote, await self._remote.call("GET", f"/runs/{_q(run_id)}"))
        if self._user_id is not None and run.user_id != self._user_id:
            raise ControlError(404, "run_not_found", f"{run_id} is not a run of {self._user_id}")
        return run


class RemoteRun:
    """A run on the served cloud: the last snapshot of it plus ``FakeRun``'s drivers (async)."""

    def __init__(self, remote: RemoteCloud, dto: dict[str, Any]) -> None:
        self._remote = remote
        self.id: str = dto["id"]
        self._apply(dto)

    def _apply(self, dto: dict[str, Any]) -> None:
        self.raw = dto
        self.user_id: str = dto["user_id"]
        self.params: dict[str, Any] = dto.get("params") or {}
        self.name = dto.get("name")
        self.status: str = dto["status"]
        self.activity = dto.get("activity")
        self.outcome = dto.get("outcome")
        self.result = dto.get("result")
        self.last_turn_error = dto.get("last_turn_error")
        self.question = dto.get("question")
        self.messages: list[dict[str, Any]] = dto.get("messages") or []
        self.pending: list[dict[str, Any]] = dto.get("pending") or []
        self.deleted: bool = bool(dto.get("deleted"))
        self.idempotency_key = dto.get("idempotency_key")
        self.seq: int = int(dto.get("seq", dto.get("last_event_id", 0)))
        self.events: list[dict[str, Any]] = dto.get("events", getattr(self, "events", []))
        """The events as last read (``runs.get`` / ``refresh``); empty for a run from ``runs.all``."""

    async def refresh(self) -> "RemoteRun":
        """Read the run again."""
        self._apply(await self._remote.call("GET", f"/runs/{_q(self.id)}"))
        return self

    async def _act(self, action: str, body: dict[str, Any]) -> dict[str, Any]:
        answer = await self._remote.call("POST", f"/runs/{_q(self.id)}/{action}", body)
        self._apply(answer["run"])
        return answer  # type: ignore[no-any-return]

    async def reply(self, text: str, *, chunks: int = 2, message_ids: list[str] | None = None) -> None:
        await self._act("reply", {"text": text, "chunks": chunks, "message_ids": message_ids})

    async def fail_turn(self, *, code: str = "model_error", message: str = "the model failed",
                        message_ids: list[str] | None = None) -> None:
        await self._act("fail_turn", {"code": code, "message": message, "message_ids": message_ids})

    async def set_activity(self, activity: str, *, at: str | None = None) -> None:
        await self._act("set_activity", {"activity": activity, "at": at})

    async def settle(self, ending: dict[str, Any] | None = None, **kwargs: Any) -> None:
        await self._act("settle", {"ending": ending, **kwargs})

    async def idle(self) -> None:
        await self._act("idle", {})

    async def ask(self, *, title: str, slots: list[dict[str, Any]] | None = None) -> str:
        return str((await self._act("ask", {"title": title, "slots": slots}))["question_id"])

    async def delete(self) -> None:
        await self._act("delete", {})

    async def emit(self, type: str, fields: dict[str, Any] | None = None, *, node_id: str | None = None) -> dict[str, Any]:
        answer = await self._act("emit", {"type": type, "fields": fields, "node_id": node_id})
        return answer["event"]  # type: ignore[no-any-return]

    async def emit_many(self, events: list[dict[str, Any]]) -> list[int]:
        """Append many events in one call (each ``{type, fields?, node_id?}``); their seqs."""
        return list((await self._act("emit", {"events": events}))["seqs"])

    async def close_idle(self) -> None:
        await self._act("close_idle", {})

    async def expire_events(self, up_to: int) -> None:
        await self._act("expire_events", {"up_to": up_to})


class RemoteGrant:
    """A person's grant on the served cloud."""

    def __init__(self, remote: RemoteCloud, user_id: str) -> None:
        self._remote, self._user_id = remote, user_id

    async def _act(self, action: str, body: dict[str, Any]) -> dict[str, Any] | None:
        answer = await self._remote.call("POST", f"/people/{_q(self._user_id)}/grant/{action}", body)
        return answer["grant"]  # type: ignore[no-any-return]

    @property
    def state(self) -> Awaitable[dict[str, Any] | None]:
        """The grant DTO, or None when the person has none (``await grant.state``, as ``grant.state``)."""
        return self._state()

    async def _state(self) -> dict[str, Any] | None:
        return (await self._remote.call("GET", f"/people/{_q(self._user_id)}"))["grant"]  # type: ignore[no-any-return]

    async def revoke(self, code: str = "grant_revoked") -> None:
        await self._act("revoke", {"code": code})

    async def restore(self, patch: dict[str, Any] | None = None) -> None:
        await self._act("restore", {"patch": patch})

    async def set(self, **changes: Any) -> None:
        await self._act("set", changes)

    async def setup(self, provider: str, state: str, *, message: str | None = None) -> None:
        await self._act("setup", {"provider": provider, "state": state, "message": message})

    async def sync(self) -> None:
        await self._act("sync", {})


class RemoteMemory:
    """A person's memory documents on the served cloud."""

    def __init__(self, remote: RemoteCloud, user_id: str) -> None:
        self._remote, self._user_id = remote, user_id

    async def put(self, name: str, body: str, **options: Any) -> dict[str, Any]:
        return await self._remote.call(  # type: ignore[no-any-return]
            "POST", f"/people/{_q(self._user_id)}/memory", {"name": name, "body": body, **options})

    async def remove(self, name: str) -> None:
        await self._remote.call("DELETE", f"/people/{_q(self._user_id)}/memory/{_q(name)}")


class RemoteUser:
    """One person on the served cloud: ``grant``, ``runs``, ``memory``, ``refuse``, ``expire_tokens``."""

    def __init__(self, remote: RemoteCloud, user_id: str) -> None:
        self._remote = remote
        self.id = user_id
        self.grant = RemoteGrant(remote, user_id)
        self.runs = RemoteRuns(remote, user_id)
        self.memory = RemoteMemory(remote, user_id)

    async def state(self) -> dict[str, Any]:
        """``{id, grant, refusal, tokens_valid_from, holding, memory}``."""
        return await self._remote.call("GET", f"/people/{_q(self.id)}")  # type: ignore[no-any-return]

    async def refuse(self, code: str) -> None:
        await self._remote.call("POST", f"/people/{_q(self.id)}/refuse", {"code": code})

    async def expire_tokens(self) -> None:
        await self._remote.call("POST", f"/people/{_q(self.id)}/expire_tokens")


def change_json(change: Change) -> bytes:
    """One change as ``POST /changes`` carries it (UTF-8 JSON; ``TypeError`` or ``ValueError`` when its
    data is not JSON)."""
    return json.dumps({"source": change.source, "kind": change.kind, "id": change.id, "data": change.data},
                      separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


def connection_of(answer: ConnectionJSON) -> "Connection":
    """The ``Connection`` an app keeps, from the control API's connection JSON."""
    from ..sdk import Connection

    return Connection(user_id=answer["user_id"], access_token=answer["access_token"],
                      refresh_token=answer["refresh_token"], expires_at=answer["expires_at"],
                      scope=answer["scope"], runtime_url=answer["runtime_url"], runtime_id=answer["runtime_id"])
