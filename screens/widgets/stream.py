"""``EventStream``: a virtual list of pre-sanitised lines, fed in batches per frame, with follow and pause.

Writers call ``replace(lines)`` (a new source) or ``extend(lines)`` (new lines). Lines wait in a
queue that a frame timer (``DRAIN_HZ``) moves into the list, at most ``BATCH`` a frame, so a burst
never holds a key behind it. The list is a ``ScrollView`` that renders only the rows on screen
(``render_line``): a row costs nothing until it is scrolled into view, and a frame costs the same
with ten lines or two hundred thousand. While paused, new lines wait and ``held`` counts them
("+N new"). With ``wrap`` on, a line wider than the stream continues on indented rows (re-wrapped
on resize); ``shown`` always gives the lines as written, unwrapped. A following stream (not
paused) shows its last row after every new source (``replace``), re-wrap and resume; one that was
scrolled up by hand stays where it is while lines arrive. ``mark(index)`` highlights one written
line (its rows, wrapped or not) and scrolls it into view: the runs pane's turn cursor. A writer that
shows a window of a longer source puts older lines before the first (``prepend``, the view kept where
it was) and lets lines go at either end (``drop``); ``Edge`` tells it the operator scrolled to the top
or the end, where it reads more.
"""

from __future__ import annotations

import re
import textwrap
from collections import deque
from collections.abc import Iterable, Iterator
from itertools import islice

from rich.cells import cell_len, chop_cells
from rich.segment import Segment
from rich.style import Style
from textual.events import Resize
from textual.geometry import Region, Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.selection import Selection
from textual.strip import Strip

__all__ = ["EventStream"]

DRAIN_HZ = 60
"""How often queued lines are moved into the list (frames per second)."""
BATCH = 5_000
"""Most lines moved in one frame; the rest wait for the next frame."""
INDENT = " " * 9
"""How a wrapped line's continuation rows start (past the ``HH:MM:SS`` stamp)."""
_BREAKS = re.compile("[\n\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")
"""Where ``str.splitlines`` would cut a line (a line carrying one becomes several rows)."""
_CONTROL = re.compile("[\x00-\x1f\x7f]").sub
"""Control characters, shown as ``�`` if one ever reaches a row (the sanitiser shows them already)."""


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


def _split(lines: Iterable[str]) -> list[str]:
    """Each line as the rows it is written on (a line break inside a line starts a new row; tabs expanded)."""
    out: list[str] = []
    for line in lines:
        if "\t" in line:
            line = line.expandtabs()
        if _BREAKS.search(line):
            out.extend(line.splitlines() or [""])
        else:
            out.append(line)
    return out


class EventStream(ScrollView, can_focus=True):
    """A live stream of pre-sanitised lines."""

    ALLOW_SELECT = True
    COMPONENT_CLASSES = {"event-stream--mark"}
    """The marked line's rows (``mark``)."""
    DEFAULT_CSS = """
    EventStream {
        height: 1fr;
        background: $surface;
        color: $text;
        overflow: scroll;
        &:focus { background-tint: $foreground 5%; }
        & > .event-stream--mark { background: $accent 35%; text-style: bold; }
    }
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

    class Edge(Message):
        """The operator scrolled to the first row (``top``) or the last one."""

        def __init__(self, stream: "EventStream", top: bool) -> None:
            super().__init__()
            self.stream = stream
            self.top = top

        @property
        def control(self) -> "EventStream":
            return self.stream

    def __init__(self, *, id: str | None = None, classes: str | None = None, max_lines: int | None = 200_000) -> None:
        super().__init__(id=id, classes=classes)
        self.max_lines = max_lines
        """The most lines kept (the oldest go first)."""
        self._line_queue: deque[str] = deque()
        self._frame_style: Style | None = None
        """The widget's style while one frame's rows are drawn (``render_lines``)."""
        self._held: list[str] = []
        self._written: deque[str] = deque(maxlen=max_lines)
        """The lines in the list as written (before wrapping)."""
        self._rows: list[str] = []
        """The rows on the list (after wrapping): what ``render_line`` draws."""
        self._width = 0
        """The widest row, in cells (the list's virtual width)."""
        self._wrap_width = 0
        self._to_end = False
        """The rows were laid out anew while following: show the end once they are written."""
        self._height = 0
        """The rows on screen at the last resize (to tell whether the end was shown before it)."""
        self._mark: int | None = None
        """The index in the written lines of the marked line (None: none is)."""
        self._mark_rows: tuple[int, int] | None = None
        """The rows the marked line is drawn on: ``[start, end)``."""

    def on_mount(self) -> None:
        self._timer = self.set_interval(1 / DRAIN_HZ, self._drain, pause=True)
        """Runs only while lines wait (an idle stream costs nothing)."""

    def watch_paused(self, paused: bool) -> None:
        if not paused:  # following again: the latest line, whether or not any were held
            self._line_queue.extend(self._held)
            self._held.clear()
            self.held = 0
            self._follow_to_end()
            self._wake()
        self.post_message(self.StateChanged(self))

    def watch_held(self) -> None:
        self.post_message(self.StateChanged(self))

    def watch_wrap(self) -> None:
        self._rewrite()
        self.post_message(self.StateChanged(self))

    def on_resize(self, event: Resize) -> None:
        height, self._height = self._height, self.scrollable_content_region.height
        was_at_end = self.scroll_offset.y >= len(self._rows) - height  # the end, at the height before
        if self.wrap and self._row_width() != self._wrap_width:
            self._to_end = self._to_end or was_at_end
            self._rewrite()
        elif was_at_end and not self.paused:
            self._follow_to_end()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self.refresh()

    # -- the rows ---------------------------------------------------------------------------

    @property
    def lines(self) -> list[str]:
        """The rows on the list, as drawn (wrapped)."""
        return self._rows

    @property
    def line_count(self) -> int:
        """How many rows the list has."""
        return len(self._rows)

    def render_lines(self, crop: Region) -> list[Strip]:
        self._frame_style = self.rich_style  # worked out once a frame, not once a row (it walks the ancestors)
        try:
            return super().render_lines(crop)
        finally:
            self._frame_style = None

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        index = scroll_y + y
        width = self.scrollable_content_region.width
        style = self._frame_style or self.rich_style
        if index >= len(self._rows):
            return Strip.blank(width, style)
        row = _CONTROL("\ufffd", self._rows[index])
        marked = self._mark_rows
        if marked is not None and marked[0] <= index < marked[1]:
            style = style + self.get_component_rich_style("event-stream--mark", partial=True)
        strip = Strip([Segment(row, style)], cell_len(row))
        return strip.crop_extend(scroll_x, scroll_x + width, style).apply_offsets(scroll_x, index)

    def get_selection(self, selection: Selection) -> tuple[str, str] | None:
        """The text under a mouse selection."""
        return selection.extract("\n".join(self._rows)), "\n"

    def selection_updated(self, selection: Selection | None) -> None:
        self.refresh()

    def _row_width(self) -> int:
        """Cells a row may fill (room kept for the scrollbar); 0 before the first layout."""
        width = self.content_region.width
        return max(1, width - self.styles.scrollbar_size_vertical) if width else 0

    def _clear_rows(self) -> None:
        self._rows = []
        self._width = 0
        self.virtual_size = Size(0, 0)
        self.refresh()

    def _rewrite(self) -> None:
        """Lay every line out again at the current width (wrap toggled or the stream resized)."""
        if not self.is_mounted:
            return
        self._to_end = self._to_end or self.is_vertical_scroll_end
        self._clear_rows()
        self._write(list(self._written))
        self._place_mark()

    def _follow_to_end(self) -> None:
        """Show the last row now and again once the layout is done (a new source or width changes
        the list's size in the same frame, so the end measured now may not be the end drawn).

        ``force``: until the next layout the list may still think it has no scrollbar (the rows
        just outgrew it), and an unforced scroll would then be ignored."""
        self.scroll_end(animate=False, immediate=True, x_axis=False, force=True)
        self.call_after_refresh(self._end_if_following)

    def _end_if_following(self) -> None:
        if not self.paused and not self.is_vertical_scrollbar_grabbed:
            self.scroll_end(animate=False, immediate=True, x_axis=False, force=True)

    def replace(self, lines: Iterable[str]) -> None:
        """Show a new source from scratch (queued lines and held lines are dropped)."""
        self._line_queue.clear()
        self._held.clear()
        self.held = 0
        self._clear_rows()
        self._written.clear()
        self._mark = self._mark_rows = None
        self._to_end = not self.paused
        self.scroll_to(0, 0, animate=False, immediate=True)
        self._line_queue.extend(lines)
        self._drain()
        self._wake()

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        if new == old or not self._rows:
            return
        if new <= 0 < old:
            self.post_message(self.Edge(self, True))
        elif new >= self.max_scroll_y > old:
            self.post_message(self.Edge(self, False))

    def prepend(self, lines: Iterable[str]) -> None:
        """Put ``lines`` before the first line, the rows on screen kept where they are."""
        lines = list(lines)
        if not lines:
            return
        self.flush()
        rows = self._layout(lines)
        self._rows[:0] = rows
        for line in reversed(lines):
            self._written.appendleft(line)
        if self._mark is not None:
            self._mark += len(lines)
        if self._mark_rows is not None:
            self._mark_rows = (self._mark_rows[0] + len(rows), self._mark_rows[1] + len(rows))
        self._resize_to(rows)
        self.scroll_to(y=self.scroll_offset.y + len(rows), animate=False, immediate=True, force=True)
        self.refresh()

    def append_rows(self, lines: Iterable[str]) -> None:
        """Put ``lines`` after the last line now, the view left where it is (a page read below it)."""
        lines = list(lines)
        if not lines:
            return
        self.flush()
        rows = self._layout(lines)
        self._written.extend(lines)
        self._rows.extend(rows)
        self._resize_to(rows)
        self.refresh()

    def _resize_to(self, rows: list[str]) -> None:
        """The list's virtual size after ``rows`` were added (as wide as the widest row, or the wrap width)."""
        widest = max(map(cell_len, rows)) if not self.wrap or not self._wrap_width else self._wrap_width
        self._width = max(self._width, widest)
        self.virtual_size = Size(self._width, len(self._rows))

    def drop(self, count: int, *, end: bool) -> None:
        """Let the first (or, with ``end``, the last) ``count`` written lines go, with their rows."""
        self.flush()
        count = min(count, len(self._written))
        if count <= 0:
            return
        if end:
            gone = [self._written.pop() for _ in range(count)][::-1]
        else:
            gone = [self._written.popleft() for _ in range(count)]
        rows = len(self._layout(gone))
        if end:
            del self._rows[len(self._rows) - rows:]
        else:
            del self._rows[:rows]
            if self._mark is not None:
                self._mark -= count
        if self._mark is not None and not 0 <= self._mark < len(self._written):
            self._mark = self._mark_rows = None
        elif self._mark_rows is not None and not end:
            start, stop = self._mark_rows[0] - rows, self._mark_rows[1] - rows
            self._mark_rows = (start, stop) if start >= 0 else None
        self.virtual_size = Size(self._width, len(self._rows))
        if not end:
            self.scroll_to(y=max(0, self.scroll_offset.y - rows), animate=False, immediate=True, force=True)
        self.refresh()

    def extend(self, lines: Iterable[str]) -> None:
        """Queue new lines (held and counted while paused); they are drawn on the next frame."""
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
        """The lines currently in the list, as written (unwrapped; for tests and the detail view)."""
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
        queue = self._line_queue
        count = min(len(queue), BATCH)
        batch = [queue.popleft() for _ in range(count)]
        if self._mark is not None and self._written.maxlen is not None:  # the oldest lines may go
            self._mark -= max(0, len(self._written) + len(batch) - self._written.maxlen)
            if self._mark < 0:
                self._mark = self._mark_rows = None
        self._written.extend(batch)
        self._write(batch)

    def _layout(self, lines: list[str]) -> list[str]:
        """``lines`` as rows (wrapped to the width when ``wrap`` is on)."""
        rows = _split(lines)
        if self.wrap:
            width = self._wrap_width = self._row_width()
            if width and any(cell_len(row) > width for row in rows):
                rows = [part for row in rows for part in wrap_line(row, width)]
        return rows

    # -- the mark ---------------------------------------------------------------------------

    @property
    def marked(self) -> int | None:
        """The index in ``shown`` of the marked line (None: none is)."""
        return self._mark

    @property
    def marked_rows(self) -> tuple[int, int] | None:
        """The rows the marked line is drawn on, ``[start, end)`` (None: none is)."""
        return self._mark_rows

    def mark(self, index: int | None) -> None:
        """Highlight the written line at ``index`` (in ``shown``; None clears) and scroll it into view.
        The rows are found by laying out the lines after it (a key press, never a frame, pays for it)."""
        self._mark = index if index is not None and 0 <= index < len(self._written) else None
        self._place_mark()
        if self._mark_rows is not None:
            start, end = self._mark_rows
            height = self.scrollable_content_region.height
            if not start >= self.scroll_offset.y or not end <= self.scroll_offset.y + height:
                self.scroll_to(y=max(0, start - height // 3), animate=False, immediate=True, force=True)
        self.refresh()

    def _place_mark(self) -> None:
        """Find the rows of the marked line again (after a new layout, or lines dropped at the start)."""
        if self._mark is None:
            self._mark_rows = None
            return
        after = sum(len(self._layout([line])) for line in islice(self._written, self._mark + 1, None))
        own = len(self._layout([self._written[self._mark]]))
        end = len(self._rows) - after
        self._mark_rows = (end - own, end) if end - own >= 0 else None

    def _write(self, lines: list[str]) -> None:
        """Add ``lines`` as rows (wrapped to the width when ``wrap`` is on), drop the oldest past
        ``max_lines``, and follow the end when the list was at its end."""
        rows = self._layout(lines)
        if not rows:
            return
        laid_anew = self._to_end and not self._line_queue  # the last batch of a new layout
        at_end = self.is_vertical_scroll_end or laid_anew
        if laid_anew:
            self._to_end = False
        self._rows.extend(rows)
        if self.max_lines is not None and len(self._rows) > self.max_lines:
            dropped = len(self._rows) - self.max_lines
            del self._rows[:dropped]
            if self._mark_rows is not None:
                start, end = self._mark_rows[0] - dropped, self._mark_rows[1] - dropped
                self._mark_rows = (start, end) if start >= 0 else None
        self._resize_to(rows)
        if at_end and not self.paused and not self.is_vertical_scrollbar_grabbed:
            if laid_anew:
                self._follow_to_end()
            else:
                self.scroll_end(animate=False, immediate=True, x_axis=False, force=True)
        self.refresh()
