"""An incremental server-sent-events parser that follows the WHATWG HTML rules exactly.

Feed it byte chunks split anywhere (even inside a UTF-8 sequence or between CR and LF); it returns
the events completed so far. Rules implemented (HTML "Server-sent events", 9.2.6):

- lines end with CRLF, LF or CR; one leading BOM is dropped;
- a line starting with ``:`` is a comment; ``field: value`` drops one space after the colon; a
  line without a colon is a field with an empty value;
- ``data`` lines are joined with LF; ``event`` sets the type (default ``message``);
- ``id`` sets the last event id unless the value contains NUL (an empty id resets it);
- ``retry`` is honoured only when it is all ASCII digits;
- an event is dispatched at a blank line, only when it has data; an event still open at the end of
  the stream is dropped.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass

__all__ = ["SSEEvent", "SSEParser"]

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_FRAME = re.compile(r"id: ([^\n\0]*)\nevent: ([^\n]*)\ndata: ([^\n]*)\n\n")
"""A whole frame as servers write it: read in one match, with the meaning ``_lines`` gives it."""


@dataclass(frozen=True, slots=True)
class SSEEvent:
    """One dispatched event."""

    type: str
    data: str
    last_event_id: str


class SSEParser:
    """Turns a byte stream into ``SSEEvent``s; keeps ``last_event_id`` and ``retry_ms``."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._buffer = ""
        self._started = False
        self._skip_lf = False
        self._data: list[str] = []
        self._type = ""
        self.last_event_id = ""
        """The id the next dispatched event carries (kept across events, as the spec says)."""
        self.retry_ms: int | None = None
        """The last valid ``retry`` value, in milliseconds."""

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """Parse ``chunk``; the events it completed, in order."""
        return [SSEEvent(*frame) for frame in self.feed_frames(chunk)]

    def feed_frames(self, chunk: bytes) -> list[tuple[str, str, str]]:
        """Like ``feed``, each event as a plain ``(type, data, last_event_id)`` tuple (a stream
        reader that converts every event at once does not build an ``SSEEvent`` first)."""
        text = self._decoder.decode(chunk)
        if not self._started:
            if not text:
                return []
            self._started = True
            if text[0] == "\ufeff":
                text = text[1:]
        return self._feed_text(text)

    def feed_text(self, text: str) -> list[SSEEvent]:
        """Parse already-decoded text (a BOM is honoured only at the very start)."""
        if not self._started and text:
            self._started = True
            if text[0] == "\ufeff":
                text = text[1:]
        return [SSEEvent(*frame) for frame in self._feed_text(text)]

    def close(self) -> list[SSEEvent]:
        """End of stream: whatever is still pending (a partial line or event) is dropped."""
        self._buffer = ""
        self._data = []
        self._type = ""
        self._skip_lf = False
        return []

    def _feed_text(self, text: str) -> list[tuple[str, str, str]]:
        if self._skip_lf and text:
            # the previous chunk ended with CR: an LF right after it belongs to that line break
            self._skip_lf = False
            if text[0] == "\n":
                text = text[1:]
        buffer = self._buffer + text
        if not buffer:
            return []
        if "\r" not in buffer:
            return self._feed_lf(buffer)
        parts = _LINE_BREAK.split(buffer)
        self._buffer = parts.pop()
        self._skip_lf = buffer[-1] == "\r"
        return self._lines(parts) if parts else []

    def _feed_lf(self, buffer: str) -> list[tuple[str, str, str]]:
        """``buffer`` with LF line ends only: each whole frame of the usual shape (``id``, ``event``,
        ``data``, blank line) is matched at once; anything else goes through ``_lines``, one frame
        (up to its blank line) at a time, so both paths see the same state."""
        events: list[tuple[str, str, str]] = []
        match = _FRAME.match
        pos = 0
        end = len(buffer)
        while pos < end:
            if not self._data and not self._type:
                found = match(buffer, pos)
                while found is not None:
                    event_id, kind, data = found.groups()
                    self.last_event_id = event_id
                    events.append((kind or "message", data, event_id))
                    pos = found.end()
                    found = match(buffer, pos)
            stop = buffer.find("\n\n", pos)
            if stop == -1:
                # no whole frame left: its complete lines now, the partial last line kept
                last = buffer.rfind("\n", pos)
                if last == -1:
                    break
                events += self._lines(buffer[pos:last].split("\n"))
                pos = last + 1
                break
            events += self._lines(buffer[pos : stop + 1].split("\n"))
            pos = stop + 2
        self._buffer = buffer[pos:]
        return events

    def _lines(self, lines: list[str]) -> list[tuple[str, str, str]]:
        events: list[tuple[str, str, str]] = []
        data = self._data
        for line in lines:
            if not line:
                if data:
                    events.append((self._type or "message", data[0] if len(data) == 1 else "\n".join(data),
                                   self.last_event_id))
                    data = []
                self._type = ""
                continue
            if line[0] == ":":
                continue
            name, colon, value = line.partition(":")
            if colon and value[:1] == " ":
                value = value[1:]
            if name == "data":
                data.append(value)
            elif name == "event":
                self._type = value
            elif name == "id":
                if "\0" not in value:
                    self.last_event_id = value
            elif name == "retry":
                if value and value.isascii() and value.isdigit():
                    self.retry_ms = int(value)
        self._data = data
        return events
