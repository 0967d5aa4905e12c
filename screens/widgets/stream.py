"""``EventStream``: a ``Log`` fed through a deque drained by a ~30 fps timer, with follow and pause.

Writers call ``replace(lines)`` (a new source) or ``extend(lines)`` (new lines); nothing is written
to the ``Log`` per line. While paused, new lines wait and ``held`` counts them ("+N new"). With
``wrap`` on, a line wider than the stream continues on indented rows (re-wrapped on resize);
``shown`` always gives the lines as written, unwrapped.
"""

from __future__ import annotations

import textwrap
from collections import deque
from collections.abc import Iterable, Iterator

from rich.cells import cell_len, chop_cells
from textual.events import Resize

from textual.message import Message
from textual.reactive import reactive
from textual.widgets import Log

__all__ = ["EventStream"]

DRAIN_HZ = 30
"""How often queued lines are written (frames per second)."""
BATCH = 5_000
"""Most lines written in one frame; the rest wait for the next frame."""
INDENT = " " * 9
"""How a wrapped line's continuation rows start (past the ``HH:MM:SS`` stamp)."""


def wrap_line(line: str, width: int) -> Iterator[str]:
    """``line`` as rows of at most ``width`` cells: at spaces where it can, mid-word where it must."""
    if cell_len(line) <= width:
        yield line
        return
    if width <= len(INDENT) + 8:
        yield from chop_cells(line, max(1, width))
        return
    if cell_len(line) == len(line):  # one cell per character: textwrap's counting is right
        yield from textwrap.wrap(line, width, subsequent_indent=INDENT) or [line]
        return
    first, rest = chop_cells(line, width)[0], line
    rest = line[len(first):]
    yield first
    for chunk in chop_cells(rest, width - len(INDENT)):
        yield INDENT + chunk


class EventStream(Log):
    """A live stream of pre-sanitised lines."""

    DEFAULT_CSS = """
    EventStream { height: 1fr; }
    """

    paused: reactive[bool] = reactive(False)
    """Paused: new lines are held (and counted) instead of shown."""
    held: reactive[int] = reactive(0)
    """How many lines arrived while paused."""
    wrap: reactive[bool] = reactive(True)
    """Wide lines continue on indented rows (off: one row each, scrolled sideways)."""

    class StateChanged(Message):
        """Paused or the held count changed."""

        def __init__(self, stream: "EventStream") -> None:
            super().__init__()
            self.stream = stream

        @property
        def control(self) -> "EventStream":
            return self.stream

    def __init__(self, *, id: str | None = None, classes: str | None = None, max_lines: int | None = 200_000) -> None:
        super().__init__(id=id, classes=classes, max_lines=max_lines, auto_scroll=True)
        self._line_queue: deque[str] = deque()
        self._held: list[str] = []
        self._written: deque[str] = deque(maxlen=max_lines)
        """The lines in the log as written (before wrapping)."""
        self._wrap_width = 0

    def on_mount(self) -> None:
        self._timer = self.set_interval(1 / DRAIN_HZ, self._drain, pause=True)
        """Runs only while lines wait (an idle stream costs nothing)."""

    def watch_paused(self, paused: bool) -> None:
        if not paused and self._held:
            self._line_queue.extend(self._held)
            self._held.clear()
            self.held = 0
            self.scroll_end(animate=False)
            self._wake()
        self.post_message(self.StateChanged(self))

    def watch_held(self) -> None:
        self.post_message(self.StateChanged(self))

    def watch_wrap(self) -> None:
        self._rewrite()
        self.post_message(self.StateChanged(self))

    def on_resize(self, event: Resize) -> None:
        if self.wrap and self._row_width() != self._wrap_width:
            self._rewrite()

    def _row_width(self) -> int:
        """Cells a row may fill (room kept for the scrollbar); 0 before the first layout."""
        width = self.content_region.width
        return max(1, width - self.styles.scrollbar_size_vertical) if width else 0

    def _rewrite(self) -> None:
        """Write every line again at the current width (wrap toggled or the stream resized)."""
        if not self.is_mounted:
            return
        self.clear()
        self._write(list(self._written))

    def replace(self, lines: Iterable[str]) -> None:
        """Show a new source from scratch (queued lines and held lines are dropped)."""
        self._line_queue.clear()
        self._held.clear()
        self.held = 0
        self.clear()
        self._written.clear()
        self._line_queue.extend(lines)
        self._drain()
        self._wake()

    def extend(self, lines: Iterable[str]) -> None:
        """Queue new lines (held and counted while paused)."""
        if self.paused:
            before = len(self._held)
            self._held.extend(lines)
            self.held += len(self._held) - before
        else:
            self._line_queue.extend(lines)
            self._wake()

    def _wake(self) -> None:
        timer = getattr(self, "_timer", None)
        if timer is not None and self._line_queue:
            timer.resume()

    @property
    def queued(self) -> int:
        """Lines waiting for the next frame."""
        return len(self._line_queue)

    @property
    def shown(self) -> list[str]:
        """The lines currently in the log, as written (unwrapped; for tests and the detail view)."""
        return list(self._written)

    def flush(self) -> None:
        """Write every queued line now (used before a screenshot)."""
        while self._line_queue:
            self._drain()

    def _drain(self) -> None:
        if not self._line_queue:
            timer = getattr(self, "_timer", None)
            if timer is not None:
                timer.pause()
            return
        count = min(len(self._line_queue), BATCH)
        batch = [self._line_queue.popleft() for _ in range(count)]
        self._written.extend(batch)
        self._write(batch)

    def _write(self, lines: list[str]) -> None:
        if self.wrap:
            width = self._wrap_width = self._row_width()
            if width and any(cell_len(line) > width for line in lines):
                lines = [row for line in lines for row in wrap_line(line, width)]
        self.write_lines(lines, scroll_end=not self.paused)
