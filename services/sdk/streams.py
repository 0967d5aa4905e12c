"""Reading a run's event stream: ``RunStream``, ``RunReply`` and ``forward_run_events``.

``RunStream`` iterates ``RunEvent``s from ``run.events`` (server-sent events, parsed by
``SSEParser``). It keeps the cursor (the last ``seq`` handed out) and reconnects from it, with
backoff, after a retryable error or a dropped connection, for as long as it takes. Control frames:
``stream_idle`` ends the iteration (``end_reason == "idle"``; reopen to go on), ``stream_gap`` is
handed to the consumer as a ``RunEvent`` of type ``stream_gap`` and the stream goes on,
``stream_error`` raises the error its envelope describes, ``stream_dropped`` ends the iteration
(``end_reason == "dropped"``). A non-retryable HTTP error raises its mapped error.
"""

from __future__ import annotations

import collections
import json
import json.scanner
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import Any, Protocol

import httpx

from services import wire

from .errors import APIConnectionError, CrouterError, NotFoundError, error_from_envelope
from .http import RuntimeHttp
from .models import ReplyResult, RunEvent
from .sse import SSEParser


class RunsLike(Protocol):
    """What a turn's reply needs of ``RunsResource``: send a message, read the event stream."""

    async def message(self, run_id: str, text: str, start_turn: bool = True,
                      idempotency_key: str | None = None) -> object: ...

    def events(self, run_id: str, after: int | None = None) -> "RunStream": ...


class ClientLike(Protocol):
    """What forwarding a run's events needs of ``Crouter``: its ``runs``."""

    @property
    def runs(self) -> RunsLike: ...

__all__ = ["RunStream", "RunReply", "forward_run_events", "stream_delay"]

STREAM_MAX_DELAY = 8.0
"""The longest wait between two reconnection attempts, in seconds."""


def stream_delay(failures: int, retry_ms: int | None = None) -> float:
    """The wait before reconnection ``failures`` (0-based): from 0.25 s (or the server's
    ``retry:``) doubling, capped at ``STREAM_MAX_DELAY``."""
    base = retry_ms / 1000.0 if retry_ms is not None else 0.25
    return min(STREAM_MAX_DELAY, base * (2 ** min(failures, 16)))


def _stream_retryable(error: CrouterError) -> bool:
    if isinstance(error, APIConnectionError) or error.retryable is True:
        return True
    return error.status is not None and (error.status >= 500 or error.status == 429)


class RunStream:
    """Async iterator over a run's events, resuming from its cursor across reconnects."""

    def __init__(self, http: RuntimeHttp, run_id: str, *, after: int | None = None) -> None:
        self._http = http
        self.run_id = run_id
        self.cursor: int | None = after
        """The ``seq`` of the last event handed out (the resume point)."""
        self.end_reason: str | None = None
        """``idle`` or ``dropped`` once the stream ended by a control frame."""
        self.reconnects = 0
        """How many times the stream reconnected after a failure."""
        self._batches: AsyncGenerator[list[RunEvent], None] | None = None
        self._ready: collections.deque[RunEvent] = collections.deque()
        """Events read from the connection and not yet handed out, in order."""

    def __aiter__(self) -> "RunStream":
        return self

    async def __anext__(self) -> RunEvent:
        ready = self._ready
        while not ready:
            if self._batches is None:
                self._batches = self._read()
            ready.extend(await self._batches.__anext__())
        event = ready.popleft()
        if event.seq is not None:
            self.cursor = event.seq
        return event

    async def aclose(self) -> None:
        """Stop reading and close the connection."""
        self._ready.clear()
        if self._batches is not None:
            await self._batches.aclose()

    async def _read(self) -> AsyncGenerator[list[RunEvent], None]:
        """The events of each chunk read, as one list (a chunk carries many frames, so the hops
        from the connection to the consumer are paid per chunk, not per event). A control frame
        ends the list before it; what it does (end, raise) happens once the events before it were
        handed out. Reconnects resume from the cursor, which is the last event handed out, and
        this generator asks for more only when every event read was handed out."""
        failures = 0
        retry_ms: int | None = None
        run_id = self.run_id
        control = frozenset(wire.CONTROL_FRAMES)
        while True:
            params: dict[str, int] = {}
            headers: dict[str, str] = {}
            if self.cursor is not None:
                params["after"] = self.cursor
                headers[wire.LAST_EVENT_ID] = str(self.cursor)
            parser = SSEParser()
            try:
                async with self._http.open_stream(
                    "run.events", path={"run_id": run_id}, params=params, headers=headers
                ) as response:
                    async for chunk in response.aiter_bytes():
                        batch: list[RunEvent] = []
                        for kind, data_text, _ in parser.feed_frames(chunk):
                            if kind in control:
                                data = _json_object(data_text)
                                if kind == "stream_gap":
                                    batch.append(RunEvent(None, None, "stream_gap", run_id, None, None, data))
                                    continue
                                if batch:
                                    yield batch
                                    batch = []
                                if kind == "stream_error":
                                    raise _StreamEnded(error_from_envelope(data.get("error"), 500, origin="runtime"))
                                self.end_reason = "idle" if kind == "stream_idle" else "dropped"
                                return
                            batch.append(RunEvent.from_wire(_json_object(data_text)))
                            failures = 0
                        if batch:
                            yield batch
                    retry_ms = parser.retry_ms
            except _StreamEnded as ended:
                raise ended.error from None
            except httpx.TransportError:
                retry_ms = parser.retry_ms
            except CrouterError as error:
                if not _stream_retryable(error):
                    raise
                retry_ms = parser.retry_ms or retry_ms
            # the connection ended without a closing frame, or a retryable error: resume
            await self._http.sleep(stream_delay(failures, retry_ms))
            failures += 1
            self.reconnects += 1


class _StreamEnded(Exception):
    """Carries a ``stream_error`` frame's error past the reconnect handler."""

    def __init__(self, error: CrouterError) -> None:
        super().__init__(str(error))
        self.error = error


_scan = json.scanner.make_scanner(json.JSONDecoder())  # type: ignore[arg-type]
"""The decoder's own scanner: one object from a position, without ``json.loads``' wrapping."""


def _json_object(text: str) -> dict[str, Any]:
    """``text`` decoded as ``json.loads`` does (an object as it is, another value as ``{"value":
    ...}``, text that is not JSON as ``{"raw": ...}``); an object that fills the text exactly, the
    usual case, is read by the scanner alone."""
    if text.startswith("{"):
        try:
            value, end = _scan(text, 0)
        except (StopIteration, ValueError):
            end = -1
        if end == len(text):
            return value  # type: ignore[no-any-return]
    try:
        value = json.loads(text)
    except ValueError:
        return {"raw": text}
    return value if isinstance(value, dict) else {"value": value}


class RunReply:
    """A message that starts a turn, and the root turn it starts.

    ``await reply.collect()`` waits for the turn and returns a ``ReplyResult``; ``async for event
    in reply`` hands out each event (deltas included) as it arrives. The reply ends at the first
    root ``node.turn.completed`` after the message's cursor (``completed`` or ``error``), or at a
    root ``node.settled`` before it (``settled``). Idle closes are reopened from the cursor.
    """

    def __init__(self, runs: RunsLike, run_id: str, text: str, *, idempotency_key: str | None = None) -> None:
        self._runs = runs
        self.run_id = run_id
        self.text = text
        self._idempotency_key = idempotency_key
        self.answer: dict[str, Any] | None = None
        """``run.message``'s answer ``{message, run, cursor}`` once sent."""
        self.result: ReplyResult | None = None
        """The result once the turn ended."""
        self._events: list[RunEvent] = []
        self._iterator: AsyncIterator[RunEvent] | None = None

    def __aiter__(self) -> AsyncIterator[RunEvent]:
        if self._iterator is None:
            self._iterator = self._run()
        return self._iterator

    async def collect(self) -> ReplyResult:
        """Wait for the turn to end and return how it ended."""
        if self.result is None:
            async for _ in self.__aiter__():
                pass
        assert self.result is not None
        return self.result

    async def _run(self) -> AsyncIterator[RunEvent]:
        answer = await self._runs.message(
            self.run_id, self.text, start_turn=True, idempotency_key=self._idempotency_key
        )
        self.answer = answer if isinstance(answer, dict) else None
        cursor = self.answer.get("cursor") if self.answer is not None else None
        cursor = cursor if isinstance(cursor, int) and not isinstance(cursor, bool) else None
        deltas: list[str] = []
        done_text: str | None = None
        while True:
            stream = self._runs.events(self.run_id, after=cursor)
            try:
                async for event in stream:
                    self._events.append(event)
                    root = event.node_id == self.run_id
                    if root and event.type == "node.output_text.delta":
                        deltas.append(str(event.data.get("delta", "")))
                    elif root and event.type == "node.output_text.done":
                        done_text = str(event.data.get("text", ""))
                    yield event
                    if root and event.type == "node.turn.completed":
                        error = event.data.get("error")
                        failed = event.data.get("stop_reason") == "error" or bool(error)
                        self._finish("error" if failed else "completed", deltas, done_text, error or None)
                        return
                    if root and event.type == "node.settled":
                        self._finish("settled", deltas, done_text, None, event.data.get("outcome"))
                        return
            finally:
                await stream.aclose()
            cursor = stream.cursor
            if stream.end_reason == "dropped":
                raise NotFoundError(
                    f"run {self.run_id} was dropped before its turn ended", code="stream_dropped", origin="runtime"
                )

    def _finish(
        self, status: str, deltas: list[str], done: str | None, error: Any, outcome: str | None = None
    ) -> None:
        text = done if done is not None else "".join(deltas)
        err = error if isinstance(error, dict) else None
        self.result = ReplyResult(status, text, err, list(self._events), outcome)


async def forward_run_events(
    client: ClientLike, run_id: str, send: Callable[[RunEvent], Awaitable[Any]], after: int | None = None
) -> int | None:
    """Read ``run_id``'s events from ``after`` and ``await send(event)`` for each, until the stream
    ends (idle close included); return the cursor of the last event sent."""
    cursor = after
    stream = client.runs.events(run_id, after=after)
    try:
        async for event in stream:
            await send(event)
            if event.seq is not None:
                cursor = event.seq
    finally:
        await stream.aclose()
    return cursor
