"""``run.events`` as a server-sent-event body that really streams.

The body is an ``httpx.AsyncByteStream``: the transport returns the response at once and the
client reads frames as the run appends events. Frames already queued are sent together, so a
burst costs one chunk. The stream ends on idle (``stream_idle_ms`` with no event), on
``close_idle``, on delete (``stream_dropped``), on revoke (``stream_error``), or when the client
closes it; closing with events unread owes the app a run notice.
"""

from __future__ import annotations

import json
import json.encoder
from collections.abc import AsyncIterator
from typing import Any, Protocol

import httpx

from ..text import escape_surrogates
from ..wire import event_line_name
from .event_log import EventLog, events_between
from .runs import FakeRun, RunStreamFeed

__all__ = ["EventStream", "StreamHost", "encode_frame", "frame_text", "utf8"]


class _NoticeOwer(Protocol):
    def owe_notice(self, run: FakeRun) -> None: ...


class StreamHost(Protocol):
    """What an event stream needs of its cloud (``FakeCloud`` is one)."""

    @property
    def stream_idle_ms(self) -> int: ...

    @property
    def state(self) -> _NoticeOwer: ...

_TERMINAL = frozenset({"stream_error", "stream_dropped", "stream_idle"})
_BATCH = 512
_BACKLOG_PAGE = 2048
"""How many missed events a stream on a served cloud reads from its run's log at a time."""


_encoder = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
_iterencode = json.encoder.c_make_encoder(  # type: ignore[attr-defined]
    None, _encoder.default, json.encoder.encode_basestring, None, ":", ",", False, False, True
)
"""The C encoder ``_encoder.encode`` builds on every call, built once (without the circular-
reference markers: an event is plain JSON data, copied when it was appended)."""


def _encode(data: dict[str, Any]) -> str:
    return "".join(_iterencode(data, 0))


def utf8(text: str) -> bytes:
    """Frames' text as UTF-8. A lone surrogate (what a JavaScript app sends when it splits an emoji)
    has no UTF-8 form: it can only sit inside a JSON string of a ``data`` line (the other lines are
    ASCII), so it travels as its JSON escape, as a JavaScript server's ``JSON.stringify`` sends it,
    and the client's JSON parser reads back the same text. One bad event never stops a stream."""
    try:
        return text.encode()
    except UnicodeEncodeError:
        return escape_surrogates(text).encode()


def frame_text(kind: str, data: dict[str, Any]) -> str:
    """``encode_frame`` before the UTF-8 encoding (``utf8``; a batch of frames is encoded at once)."""
    if kind == "event":
        return f"id: {data['seq']}\nevent: {event_line_name(data['type'])}\ndata: {_encode(data)}\n\n"
    return f"event: {kind}\ndata: {_encode(data)}\n\n"


def encode_frame(kind: str, data: dict[str, Any]) -> bytes:
    """One SSE frame: events carry ``id`` and their type; control frames only their name."""
    return utf8(frame_text(kind, data))


class EventStream(httpx.AsyncByteStream):
    """The body of one ``run.events`` answer."""

    def __init__(self, cloud: StreamHost, run: FakeRun, after: int) -> None:
        self.cloud = cloud
        self.run = run
        self.feed = RunStreamFeed()
        self.feed.last_seq = after
        self._initial: list[bytes] = []
        if after < run.first_seq - 1:
            self._initial.append(
                encode_frame("stream_gap", {"requested_after": after, "first_available": run.first_seq})
            )
            self.feed.last_seq = run.first_seq - 1
        self._upto = run.seq
        """The events up to this seq are read from the run's log; later ones arrive on the feed."""
        paged = isinstance(run.events, EventLog)
        self._page = _BACKLOG_PAGE if paged else None
        self._backlog = paged
        self._catch_up()
        run.streams.append(self.feed)
        self._closed = False

    def _catch_up(self) -> None:
        """Take the next page of the events the client missed (all of them from a list; a page from
        a log that reads older events from a store, so a stream resumed from far back holds one
        page at a time) into ``_initial``."""
        events = events_between(self.run.events, self.feed.last_seq, self._upto, self._page)
        for event in events:
            self._initial.append(encode_frame("event", event))
        if events:
            self.feed.last_seq = events[-1]["seq"]
        if self._page is None or len(events) < self._page:
            self._backlog = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while self._initial:
            chunk = b"".join(self._initial)
            self._initial = []
            yield chunk
            if self._backlog and not self._closed:
                self._catch_up()
        idle_s = self.cloud.stream_idle_ms / 1000
        feed = self.feed
        pending = feed.pending
        while not self._closed:
            if not await feed.wait(idle_s):
                yield encode_frame("stream_idle", {"idle_ms": self.cloud.stream_idle_ms})
                break
            frames: list[str] = []
            done = False
            last_seq = feed.last_seq
            while pending and len(frames) < _BATCH:
                item = pending.popleft()
                if item is None:
                    done = True
                    break
                kind, data = item
                frames.append(frame_text(kind, data))
                if kind == "event":
                    last_seq = data["seq"]
                elif kind in _TERMINAL:
                    done = True
                    break
            feed.last_seq = last_seq
            if frames:
                yield utf8("".join(frames))
            if done:
                break
        await self.aclose()

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.feed.closed = True
        run = self.run
        if self.feed in run.streams:
            run.streams.remove(self.feed)
        if not run.streams and run.seq > self.feed.last_seq and not run.deleted:
            self.cloud.state.owe_notice(run)
