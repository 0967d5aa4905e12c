"""``CloudApp``: the fake cloud's own transport served as an ASGI application.

The app routes nothing itself. Each HTTP request becomes an ``httpx.Request`` on the cloud's
issuer origin and goes to ``cloud.transport.handle_async_request``, the same code the in-process
SDK reaches; the ``httpx.Response`` goes back as it comes: a plain answer in one body message, an
event stream chunk by chunk, as the run appends events (never buffered). When the client goes
away the stream is closed at once, so the run stops feeding it (and owes a run notice as usual).

An ``ack`` coroutine, when given, runs before every answer starts and before every stream chunk
is written: a cloud whose state is kept on disk commits there, so whatever a client receives is
durable first. Requests under ``CONTROL_PREFIX`` go to the ``control`` app instead (a scripted
``'unreachable'`` answer drops the connection, as a dead host would).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

import httpx

if TYPE_CHECKING:
    from ..cloud.cloud import FakeCloud

__all__ = ["CloudApp", "CONTROL_PREFIX", "ASGIApp", "Scope", "Receive", "Send", "ScriptedUnreachable", "lifespan", "until_disconnect"]

from ..control_wire import CONTROL_PREFIX

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_HOP_HEADERS = frozenset({b"transfer-encoding", b"connection", b"keep-alive"})


async def _no_ack() -> None:
    return None


class CloudApp:
    """An ASGI app over one ``FakeCloud``'s transport (plus an optional control app)."""

    def __init__(
        self,
        cloud: "FakeCloud",
        *,
        control: ASGIApp | None = None,
        ack: Callable[[], Awaitable[None]] | None = None,
        broken: Callable[[], bool] | None = None,
    ) -> None:
        self.cloud = cloud
        self.control = control
        self.ack = ack or _no_ack
        self.broken = broken or _never
        """True while the store cannot write (a full disk): requests that change state are refused
        with 507 before they change anything, reads are answered from memory."""
        self._streams: set[asyncio.Event] = set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        path = scope.get("path", "/")
        if self.control is not None and (path == CONTROL_PREFIX or path.startswith(CONTROL_PREFIX + "/")):
            await self.control(scope, receive, send)
            return
        body = await read_body(receive)
        reading = scope["method"] in _READS
        if not reading and self.broken():
            try:
                await self.ack()
            except OSError as exc:
                await send_envelope(send, storage_full(exc))
                return
        request = httpx.Request(
            scope["method"],
            self.cloud.issuer + _raw_target(scope),
            headers=[(k, v) for k, v in scope.get("headers", []) if k.lower() != b"host"],
            content=body,
        )
        try:
            response = await self.cloud.transport.handle_async_request(request)
        except httpx.TransportError:
            await _drop(send)
            return
        await self.send_response(response, receive, send, reading=reading)

    async def send_response(self, response: httpx.Response, receive: Receive, send: Send, *,
                            reading: bool = False) -> None:
        """Send ``response``; a streaming body goes chunk by chunk until it ends or the client leaves.

        When what it acknowledges cannot be written first, a change answers 507 instead (a read is
        answered anyway: it promises nothing new)."""
        headers = [(k, v) for k, v in response.headers.raw if k.lower() not in _HOP_HEADERS]
        try:
            content: bytes | None = response.content
        except httpx.ResponseNotRead:
            content = None
        try:
            await self.ack()
        except OSError as exc:
            if not reading:
                if content is None:
                    await response.aclose()
                await send_envelope(send, storage_full(exc))
                return
        await send({"type": "http.response.start", "status": response.status_code, "headers": headers})
        if content is not None:
            await send({"type": "http.response.body", "body": content, "more_body": False})
            return
        stream = response.stream
        assert isinstance(stream, httpx.AsyncByteStream)
        await self.stream_body(stream.__aiter__(), receive, send, close=stream.aclose)

    async def stream_body(
        self,
        chunks: AsyncIterator[bytes],
        receive: Receive,
        send: Send,
        *,
        close: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """Write ``chunks`` as they come (each after ``ack``); stop when the client disconnects
        or the server shuts down (``close_streams``)."""
        stop = asyncio.Event()
        self._streams.add(stop)
        watcher = asyncio.ensure_future(until_disconnect(receive))
        stopper = asyncio.ensure_future(stop.wait())
        try:
            while True:
                step = asyncio.ensure_future(chunks.__anext__())
                done, _ = await asyncio.wait({step, watcher, stopper}, return_when=asyncio.FIRST_COMPLETED)
                if step not in done:
                    step.cancel()
                    with contextlib.suppress(BaseException):
                        await step
                    break
                try:
                    chunk = step.result()
                except StopAsyncIteration:
                    break
                if chunk:
                    with contextlib.suppress(OSError):  # a full disk: the events are in memory still
                        await self.ack()
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
            if not watcher.done():
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            self._streams.discard(stop)
            watcher.cancel()
            stopper.cancel()
            aclose = getattr(chunks, "aclose", None)
            if aclose is not None:
                with contextlib.suppress(BaseException):
                    await aclose()
            if close is not None:
                await close()

    def close_streams(self) -> None:
        """End every open stream (at shutdown: a server waits for its answers to finish)."""
        for stop in list(self._streams):
            stop.set()


_READS = frozenset({"GET", "HEAD", "OPTIONS"})


def _never() -> bool:
    return False


def storage_full(exc: OSError) -> dict[str, Any]:
    """The wire's envelope for a change that could not be made durable (507)."""
    from ..cloud.errors import envelope

    return envelope(507, "insufficient_storage", f"the change was not stored: {exc}", retryable=True)


async def send_envelope(send: Send, body: dict[str, Any]) -> None:
    """Answer with an error envelope (its ``status`` is the HTTP status)."""
    data = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": body["error"]["status"],
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]})
    await send({"type": "http.response.body", "body": data, "more_body": False})


async def read_body(receive: Receive) -> bytes:
    """The whole request body (requests to the cloud are small JSON or form bodies)."""
    parts: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        parts.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(parts)


def _raw_target(scope: Scope) -> str:
    raw = scope.get("raw_path")
    path = raw.decode("latin-1") if raw else scope.get("path", "/")
    query = scope.get("query_string", b"")
    return path + ("?" + query.decode("latin-1") if query else "")


async def until_disconnect(receive: Receive) -> None:
    """Return once the client has gone away (the request's body already read)."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return


class ScriptedUnreachable(ConnectionAbortedError):
    """Raised to make the server drop a connection (``fail_next(op, 'unreachable')``); not an error."""


async def _drop(send: Send) -> None:
    """Break the connection mid-answer so the client sees no answer (a scripted unreachable host)."""
    await send({"type": "http.response.start", "status": 502, "headers": [(b"content-length", b"1")]})
    raise ScriptedUnreachable("scripted: the cloud is unreachable")


async def lifespan(receive: Receive, send: Send) -> None:
    """Answer ASGI lifespan messages (nothing to start or stop beyond what the server owns)."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
