"""Attaching to a served workspace: one cloud per workspace, every window on it.

``find_server(folder)`` reads the workspace's ``serve.json`` and answers the live server it names,
or None. A file whose process is dead, or whose server does not answer the control API within a
couple of seconds while the workspace's ``serve.lock`` is free, is stale: it is removed (a server
started later writes a new one). A server that holds the lock but does not answer is refused with
``AttachError`` in plain words (two clouds on one folder would drift apart).

``ServedDesk`` is the operator's desk over a served cloud: the same views and actions as
``OperatorDesk``, read through the control API and kept current by the server's change stream.
Every change the server publishes is applied to the desk's snapshots first and then republished
on the window's own ``ChangeFeed``, so panes redraw from fresh views. A window's own changes to
the shared stores (canvas, insights, OKF, outbox) are relayed to the server (``POST /changes``),
tagged with the window's ``origin``, so every other window redraws them too. Actions go through the
control API (operator and grant actions); the server's answer is the truth, so two windows acting
on one run see each other's refusals in the cloud's own words. App actions (start a run, send a
message, cancel, fork a conversation) are made by the server as the app (``attach_app.py``). Text
no store can keep (a lone surrogate, NUL) is refused before it is sent.

A dropped change stream reconnects with ``Last-Event-ID`` (the newest id read) and the server
sends exactly what was missed; when it no longer holds all of it (``reset``), or when no id was
read yet, the desk reads runs and people again and publishes what changed meanwhile once.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .boundary import RunDetail, parse_time, run_detail
from .changes import Change, ChangeFeed
from .clock import Clock
from .errors import ServiceError
from .operator import (
    OPERATOR,
    SETTLE_CHOICES,
    GrantView,
    OperatorAction,
    OperatorError,
    RefusalRecord,
    RunView,
    event_fields,
)
from .attach_app import ServedAppActions, sendable

__all__ = ["AttachError", "ServedDesk", "ServerInfo", "find_server"]

PROBE_TIMEOUT_S = 2.0
RELAYED = frozenset({"canvas", "insights", "okf", "outbox"})
"""The sources whose changes a window relays to the others (through the server's change stream)."""


class AttachError(ServiceError):
    """The workspace's server holds it but cannot be reached, so no window can attach or start another."""


@dataclass(frozen=True)
class ServerInfo:
    """A live server of a workspace, as ``serve.json`` names it."""

    url: str
    pid: int
    token: str


async def find_server(folder: Path) -> ServerInfo | None:
    """The live, answering server of ``folder``; a stale ``serve.json`` is removed and None answered."""
    from .cloud.remote import ControlError, RemoteCloud
    from .files import FileLock
    from .serve import SERVE_FILE, SERVE_LOCK, live_serve_info, read_serve_info

    folder = Path(folder)
    info = read_serve_info(folder)
    if info is None:
        return None
    if live_serve_info(folder) is not None:
        remote = RemoteCloud(info["url"], info["token"], timeout=PROBE_TIMEOUT_S)
        try:
            await remote.call("GET", "/people")
            return ServerInfo(info["url"], int(info["pid"]), info["token"])
        except ControlError:
            pass
        finally:
            await remote.aclose()
    lock = FileLock(folder / SERVE_LOCK)
    if not lock.try_acquire():
        raise AttachError(
            f"{folder} is served by process {info['pid']} at {info['url']}, which does not answer; "
            f"stop that process (or wait until it answers) and open the workspace again"
        )
    try:
        if read_serve_info(folder) == info:  # still the stale one: nobody replaced it meanwhile
            with contextlib.suppress(FileNotFoundError):
                (folder / SERVE_FILE).unlink()
    finally:
        lock.release()
    return None


def _view(dto: dict[str, Any]) -> RunView:
    outcome = dto.get("outcome") or None
    error = dto.get("last_turn_error")
    return RunView(
        id=dto["id"], user_id=dto["user_id"], name=dto.get("name") or "",
        status="deleted" if dto.get("deleted") else dto["status"], activity=dto.get("activity"),
        prompt=str((dto.get("params") or {}).get("prompt", "")),
        created_at=parse_time(dto.get("created_at")), updated_at=parse_time(dto.get("updated_at")),
        events=int(dto.get("seq", dto.get("last_event_id", 0))), pending=len(dto.get("pending") or []),
        outcome=outcome.get("outcome") if isinstance(outcome, dict) else None,
        question=(dto.get("question") or {}).get("title"),
        last_turn_error=f"{error['code']}: {error['message']}" if error else None,
        deleted=bool(dto.get("deleted")),
    )


@dataclass
class ServedDesk(ServedAppActions):
    """The operator's desk over a served cloud (``RemoteCloud``), kept current by its change stream."""

    remote: Any
    """The ``RemoteCloud`` of the server."""
    changes: ChangeFeed
    clock: Clock = field(default_factory=Clock)
    actions: dict[str, list[OperatorAction]] = field(default_factory=dict)
    refusals: deque[RefusalRecord] = field(default_factory=lambda: deque(maxlen=500))
    _runs: dict[str, dict[str, Any]] = field(default_factory=dict)
    _events: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    _people: dict[str, dict[str, Any]] = field(default_factory=dict)
    _task: asyncio.Task[None] | None = None
    _subscribed: asyncio.Event = field(default_factory=asyncio.Event)
    errors: deque[str] = field(default_factory=lambda: deque(maxlen=100))
    origin: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    """This window's tag on the changes it relays (its own come back on the stream and are skipped)."""
    _unrelay: Any = None
    _sending: set[asyncio.Task[None]] = field(default_factory=set)
    last_event_id: str | None = None
    """The id of the newest change read from the stream (sent as ``Last-Event-ID`` on reconnect)."""
    reconnect_s: float = 0.5
    """How long to wait before reconnecting a dropped change stream."""
    _connection: "asyncio.Future[None] | None" = None

    # -- following the server ------------------------------------------------------------------

    async def load(self, *, full: bool = False) -> None:
        """Read every run (with its events) and every person from the server; ``full`` also forgets
        runs the server no longer has."""
        answer = await self.remote.call("GET", "/runs", params={"events": "1"})
        if full:
            self._runs, self._events = {}, {}
        for dto in answer["runs"]:
            self._store_run(dto)
        await self._load_people()

    async def _load_people(self) -> None:
        people = await self.remote.people()
        self._people = {p["id"]: p for p in people}

    def _store_run(self, dto: dict[str, Any]) -> None:
        events = dto.pop("events", None)
        self._runs[dto["id"]] = dto
        if events is not None:
            self._events[dto["id"]] = list(events)
        else:
            self._events.setdefault(dto["id"], [])

    async def start(self) -> None:
        """Follow the server's change stream (returns once subscribed, then reloads to close the gap)."""
        loop = asyncio.get_running_loop()
        self._task = loop.create_task(self._follow())

        def relay(change: Change) -> None:  # any thread: the send happens on the loop
            if change.source in RELAYED and "origin" not in change.data and not loop.is_closed():
                loop.call_soon_threadsafe(self._send, change)

        self._unrelay = self.changes.subscribe(relay)
        waiter = asyncio.ensure_future(self._subscribed.wait())
        done, _ = await asyncio.wait({waiter, self._task}, timeout=10.0, return_when=asyncio.FIRST_COMPLETED)
        if self._task in done:
            waiter.cancel()
            self._task.result()
        if waiter not in done:
            waiter.cancel()
            raise OperatorError(f"the change stream of {self.remote.url} did not open")
        await self.load()  # anything that changed before the subscription took is read again

    def _send(self, change: Change) -> None:
        task = asyncio.get_running_loop().create_task(self._publish(change))
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    async def _publish(self, change: Change) -> None:
        try:
            await self.remote.publish(Change(change.source, change.kind, change.id,
                                             {**change.data, "origin": self.origin}))
        except ServiceError as exc:  # the other windows miss one redraw; this window's data is already saved
            self.errors.append(f"relay {change.kind} {change.id}: {exc}")

    async def stop(self) -> None:
        if self._unrelay is not None:
            self._unrelay()
            self._unrelay = None
        for task in list(self._sending):
            with contextlib.suppress(Exception):
                await task
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None
        await self.drop_stream()  # the connection closes before the window goes

    async def _follow(self) -> None:
        """Follow the change stream; after a drop, resume after the last change seen (the server
        sends what was missed, or ``reset``, and then everything is read again)."""
        import httpx

        from .cloud.remote import ControlError

        while True:
            self._connection = asyncio.ensure_future(self._read_stream())
            try:
                await asyncio.shield(self._connection)
            except asyncio.CancelledError:
                if not self._connection.cancelled():  # this task itself was cancelled: stop
                    self._connection.cancel()
                    raise
                # only the connection was dropped (``drop_stream``): reconnect below
            except (httpx.TransportError, httpx.StreamError, ControlError) as exc:
                self.errors.append(f"change stream: {type(exc).__name__}: {exc}")
                self.changes.emit("workspace", "attach.lost", self.remote.url, error=type(exc).__name__)
            await asyncio.sleep(self.reconnect_s)
            if self.last_event_id is None:  # nothing to resume from: read everything once, then follow
                with contextlib.suppress(Exception):
                    await self._reload()

    async def _read_stream(self) -> None:
        async for batch in self.remote.change_batches(self.last_event_id):
            if batch.subscribed:
                self._subscribed.set()
                continue
            if batch.reset:
                await self._reload()
            if batch.changes:
                await self._apply(batch.changes)
            if batch.last_id:
                self.last_event_id = batch.last_id

    async def _reload(self) -> None:
        """After a ``reset``: read everything again, then publish what changed meanwhile once (each
        new run, each event not seen before, each deletion), so the panes and the follower miss
        nothing; the shared stores' panes are told to read again (``attach.reloaded``)."""
        before = {run_id: (max((int(e.get("seq", 0)) for e in self._events.get(run_id, [])), default=0),
                           bool(dto.get("deleted"))) for run_id, dto in self._runs.items()}
        await self.load(full=True)
        mark = {"origin": "server"}  # never relayed back
        for run_id, dto in self._runs.items():
            user = {"user_id": dto["user_id"], **mark}
            seen, was_deleted = before.get(run_id, (-1, False))
            if seen < 0:
                self.changes.publish(Change("cloud", "run.started", run_id, user))
            for event in self._events.get(run_id, []):
                if int(event.get("seq", 0)) > seen:
                    self.changes.publish(Change("cloud", "run.event", run_id, {"event": event, **user}))
            if dto.get("deleted") and not was_deleted:
                self.changes.publish(Change("cloud", "run.deleted", run_id, user))
        for user_id in self._people:
            self.changes.publish(Change("cloud", "grant.changed", user_id, dict(mark)))
        for source in ("workspace", *sorted(RELAYED)):
            self.changes.publish(Change(source, "attach.reloaded", self.remote.url, dict(mark)))

    async def drop_stream(self) -> None:
        """Close the change stream from this side (it reconnects, resuming after the last change seen)."""
        connection = self._connection
        if connection is not None and not connection.done():
            connection.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await connection

    async def _apply(self, batch: list[Change]) -> None:
        runs: dict[str, None] = {}
        people = False
        for change in batch:
            if change.source != "cloud":
                continue
            if change.kind == "run.event":
                event = change.data.get("event") or {}
                log = self._events.setdefault(change.id, [])
                if not log or int(event.get("seq", 0)) > int(log[-1].get("seq", 0)):
                    log.append(event)
                runs[change.id] = None
            elif change.kind in ("run.started", "run.deleted"):
                runs[change.id] = None
                people = True
            else:
                people = True
        for run_id in runs:
            try:
                dto = await self.remote.call("GET", f"/runs/{_q(run_id)}", params={"events": "0"})
                self._store_run(dto)
            except ServiceError as exc:
                self.errors.append(f"run {run_id}: {exc}")
        if people:
            with contextlib.suppress(ServiceError):
                await self._load_people()
        for change in batch:
            origin = change.data.get("origin")
            if origin == self.origin:
                continue  # this window's own change, published here when it happened
            if origin is None:  # marked, so that this window never relays it back
                change = Change(change.source, change.kind, change.id, {**change.data, "origin": "server"})
            self.changes.publish(change)

    # -- views ----------------------------------------------------------------------------------

    def runs(self, *, include_deleted: bool = False) -> list[RunView]:
        """Every run, newest first."""
        views = [_view(d) for d in self._runs.values() if include_deleted or not d.get("deleted")]
        return sorted(views, key=lambda v: v.created_at, reverse=True)

    def detail(self, run_id: str) -> RunDetail:
        """The run as last read, with its events."""
        dto = self._runs.get(run_id)
        if dto is None:
            raise OperatorError(f"no run {run_id}")
        return run_detail(dto, tuple(self._events.get(run_id, ())))

    run = detail

    def grants(self) -> list[GrantView]:
        """Every known person's grant, by person id."""
        views = []
        for user_id in sorted(self._people):
            person = self._people[user_id]
            state = person.get("grant")
            if state is None:
                continue
            cap = state.get("spend_cap")
            views.append(GrantView(
                user_id=user_id, state=state["state"], rev=state["rev"], version=state["version"],
                scopes=tuple(state["resolved_scopes"]),
                dependencies=tuple((d["provider"], d["state"], d.get("message")) for d in state["dependencies"]),
                spend_cap=f"{cap['amount']} {cap.get('currency', '')}/{cap.get('period', '')}" if cap else "none",
                refusal=person.get("refusal"), revoked_code=state.get("revoked_code"),
                holding=int(person.get("holding") or 0), reads=int(person.get("reads") or 0),
                runs=len([d for d in self._runs.values() if d["user_id"] == user_id and not d.get("deleted")]),
            ))
        return views

    def log(self, run_id: str) -> list[OperatorAction]:
        return list(self.actions.get(run_id, []))

    def refusals_since(self, seconds: float = 60.0) -> list[RefusalRecord]:
        cutoff = self.clock.time() - seconds
        return [r for r in self.refusals if r.at >= cutoff]

    def waiting_on_user(self) -> int:
        return sum(1 for d in self._runs.values() if not d.get("deleted") and d["status"] == "waiting_on_user")

    # -- operator actions through the control API -------------------------------------------------

    async def _act(self, run_id: str, action: str, body: dict[str, Any]) -> dict[str, Any]:
        from .cloud.remote import ControlError

        dto = self._runs.get(run_id)
        if dto is None:
            raise OperatorError(f"no run {run_id}")
        if dto.get("deleted") and action != "delete":
            raise OperatorError(f"run {run_id} was deleted")
        sendable(body)
        try:
            answer: dict[str, Any] = await self.remote.call("POST", f"/runs/{_q(run_id)}/{action}", body)
        except ControlError as exc:
            raise OperatorError(exc.message or f"{exc.status} {exc.code}") from None
        self._store_run(dict(answer["run"]))
        return answer

    async def reply(self, run_id: str, text: str, *, chunks: int = 4) -> None:
        """Reply as the model: one root turn delivering every pending message."""
        await self._act(run_id, "reply", {"text": text, "chunks": chunks})
        self._note(run_id, "reply", text)

    async def fail_turn(self, run_id: str, code: str, message: str) -> None:
        await self._act(run_id, "fail_turn", {"code": code, "message": message})
        self._note(run_id, "fail turn", f"{code}: {message}")

    async def settle(self, run_id: str, kind: str, value: str = "") -> None:
        if kind not in SETTLE_CHOICES:
            raise OperatorError(f"settle takes one of {', '.join(SETTLE_CHOICES)}, not {kind!r}")
        if self.detail(run_id).settled:
            raise OperatorError(f"run {run_id} is already settled")
        if kind == "result":
            body: dict[str, Any] = {"result": value}
        elif kind == "declined":
            body = {"declined": {"reason": value or "declined by the operator", "code": "declined", "retryable": False}}
        elif kind == "runtime_error":
            body = {"runtime_error": value or "runtime error injected by the operator"}
        else:
            body = {"failure": kind}
        await self._act(run_id, "settle", body)
        self._note(run_id, "settle", f"{kind}{': ' + value if value else ''}")

    async def ask(self, run_id: str, title: str) -> str:
        if not title.strip():
            raise OperatorError("a question needs a title")
        answer = await self._act(run_id, "ask", {"title": title})
        self._note(run_id, "ask", title)
        return str(answer["question_id"])

    async def go_idle(self, run_id: str) -> None:
        await self._act(run_id, "idle", {})
        self._note(run_id, "idle", "")

    async def emit(self, run_id: str, type: str, fields_json: str = "{}", node_id: str | None = None) -> None:
        type, fields = event_fields(type, fields_json)
        await self._act(run_id, "emit", {"type": type, "fields": fields, "node_id": node_id or None})
        self._note(run_id, "emit", type.strip() + (f" on {node_id}" if node_id else ""))

    async def delete_run(self, run_id: str) -> None:
        if self.detail(run_id).deleted:
            raise OperatorError(f"run {run_id} is already deleted")
        await self._act(run_id, "delete", {})
        self._note(run_id, "delete", "")

    # -- grant actions through the control API ------------------------------------------------------

    async def _person(self, user_id: str, path: str, body: dict[str, Any]) -> None:
        from .cloud.remote import ControlError

        if (self._people.get(user_id) or {}).get("grant") is None:
            raise OperatorError(f"{user_id} has no grant")
        sendable(body)
        try:
            await self.remote.call("POST", f"/people/{_q(user_id)}/{path}", body)
        except ControlError as exc:
            raise OperatorError(exc.message or f"{exc.status} {exc.code}") from None
        await self._load_people()

    async def revoke(self, user_id: str, code: str = "grant_revoked") -> None:
        await self._person(user_id, "grant/revoke", {"code": code})
        self._note_user(user_id, "revoke", code)

    async def restore(self, user_id: str) -> None:
        """Reactivate the grant, clear any refusal and reconnect the person (a new sign-in)."""
        state = (self._people.get(user_id) or {}).get("grant") or {}
        await self._person(user_id, "reconnect", {"scopes": list(state.get("resolved_scopes") or []),
                                                  "dependencies": list(state.get("dependencies") or [])})
        self._note_user(user_id, "restore", "")

    async def refuse(self, user_id: str, code: str) -> None:
        await self._person(user_id, "refuse", {"code": code})
        self._note_user(user_id, "refuse", code)

    async def expire_tokens(self, user_id: str) -> None:
        await self._person(user_id, "expire_tokens", {})
        self._note_user(user_id, "expire tokens", "")

    async def set_scopes(self, user_id: str, scopes: list[str]) -> None:
        cleaned = [s.strip() for s in scopes if s.strip()]
        bad = [s for s in cleaned if ":" not in s or " " in s]
        if bad:
            raise OperatorError(f"scopes look like <provider>:<group>; not {', '.join(bad)}")
        await self._person(user_id, "grant/set", {"resolved_scopes": cleaned})
        self._note_user(user_id, "set scopes", " ".join(cleaned))

    # -- the window's own log ----------------------------------------------------------------------

    def _note(self, run_id: str, action: str, detail: str, *, by: str = OPERATOR) -> None:
        entry = OperatorAction(run_id, action, detail, by, self.clock.time())
        self.actions.setdefault(run_id, []).append(entry)
        self.changes.emit("workspace", "operator.action", run_id, action=action, by=by)

    def _note_user(self, user_id: str, action: str, detail: str) -> None:
        for dto in self._runs.values():
            if dto["user_id"] == user_id and not dto.get("deleted"):
                self._note(dto["id"], f"grant {action}", f"{user_id} {detail}".strip())
        self.changes.emit("workspace", "grant.action", user_id, action=action)


def _q(value: str) -> str:
    from urllib.parse import quote

    return quote(value, safe="")
