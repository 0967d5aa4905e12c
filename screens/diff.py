"""``DiffScreen``: a comparison side by side: two runs (``c`` on one run in the runs pane, then ``c`` on
another), or a recording's expected observation against what a replay saw (``workbench replay FILE
--inspect``).

Both come as one read model, ``services.desk.diff.Comparison``: the two sides' names and the rows; a
differing row is marked ``*`` and the first one is selected. ``n`` / ``N`` move to the next / previous
difference, ``esc`` closes.

The rows are drawn by ``DiffTable``, a ``ScrollView`` that renders only the rows on screen
(``render_line``): opening a comparison of thousands of rows costs what one screen of them costs.
"""

from __future__ import annotations

from rich.cells import cell_len, set_cell_size
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.events import Click, Resize
from textual.geometry import Size
from textual.reactive import reactive
from textual.screen import Screen
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widgets import Label

from services.desk.diff import Comparison, DiffRow

from .text import safe, tone
from .widgets.footer import KeyFooter

__all__ = ["DiffScreen", "DiffTable"]

SECTION = 9
"""The section column's width (the longest section name, ``judgments``)."""
CLIP = 400
"""The most characters of one side's text sanitised for a row (a row shows far fewer)."""


def _fit(text: str, width: int) -> str:
    """``text`` in exactly ``width`` cells: padded, or cut with ``…``."""
    if cell_len(text) <= width:
        return set_cell_size(text, width)
    return set_cell_size(text, max(0, width - 1)) + "…"


class DiffTable(ScrollView, can_focus=True):
    """The comparison's rows under a fixed header (mark, section, A, B): only the rows on screen are
    drawn; ``cursor_row`` is the selected row."""

    COMPONENT_CLASSES = {"diff-table--header", "diff-table--cursor", "diff-table--even"}
    DEFAULT_CSS = """
    DiffTable {
        height: 1fr;
        background: $surface;
        color: $foreground;
        overflow-x: auto;
        overflow-y: scroll;
        & > .diff-table--header { text-style: bold; background: $panel; }
        & > .diff-table--cursor { background: $block-cursor-background; color: $block-cursor-foreground;
                                  text-style: $block-cursor-text-style; }
        & > .diff-table--even { background: $surface-lighten-1 50%; }
    }
    """
    BINDINGS = [
        Binding("up", "cursor_up", "Up", show=False, tooltip="Select the row above"),
        Binding("down", "cursor_down", "Down", show=False, tooltip="Select the row below"),
        Binding("pageup", "page_up", "Page up", show=False, tooltip="Move up a screen of rows"),
        Binding("pagedown", "page_down", "Page down", show=False, tooltip="Move down a screen of rows"),
        Binding("home", "first", "First row", show=False, tooltip="Select the first row"),
        Binding("end", "last", "Last row", show=False, tooltip="Select the last row"),
    ]

    cursor_row: reactive[int] = reactive(0, always_update=True)
    """The selected row's index."""

    def __init__(self, rows: list[DiffRow], *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.rows = rows
        """The rows drawn."""

    @property
    def row_count(self) -> int:
        return len(self.rows)

    def on_mount(self) -> None:
        self._size_rows()

    def on_resize(self, event: Resize) -> None:
        self._size_rows()
        self._show_cursor()

    def _half(self) -> int:
        """Each side's column width: half of what the mark and section columns leave."""
        return max(20, (self.scrollable_content_region.width - (3 + SECTION + 2)) // 2 - 2)

    def _size_rows(self) -> None:
        self.virtual_size = Size(3 + SECTION + 2 + 2 * (self._half() + 2), len(self.rows) + 1)

    def _body_height(self) -> int:
        """How many rows fit under the header."""
        return max(1, self.scrollable_content_region.height - 1)

    def move_cursor(self, *, row: int) -> None:
        """Select row ``row`` (clamped) and scroll it into view."""
        self.cursor_row = max(0, min(row, len(self.rows) - 1))

    def watch_cursor_row(self) -> None:
        self._show_cursor()
        self.refresh()

    def _show_cursor(self) -> None:
        """Scroll so that the selected row is on screen (a third of the way down, when it was not)."""
        top, height = self.scroll_offset.y, self._body_height()
        row = self.cursor_row
        if not top <= row < top + height:
            self.scroll_to(y=max(0, row - height // 3), animate=False, immediate=True, force=True)

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        width = self.scrollable_content_region.width
        base = self.rich_style
        half = self._half()
        if y == 0:
            style = base + self.get_component_rich_style("diff-table--header")
            cells = ["   ", f" {_fit('section', SECTION)} ", f" {_fit('A', half)} ", f" {_fit('B', half)} "]
            return Strip([Segment(cell, style) for cell in cells]).crop_extend(scroll_x, scroll_x + width, style)
        index = scroll_y + y - 1
        if index >= len(self.rows):
            return Strip.blank(width, base)
        row = self.rows[index]
        style = base
        if index == self.cursor_row:
            style = base + self.get_component_rich_style("diff-table--cursor")
        elif index % 2:
            style = base + self.get_component_rich_style("diff-table--even", partial=True)
        bad = style + tone("warn", bold=True) if row.differs and index != self.cursor_row else style
        dim = style + Style(dim=True)
        segments = [Segment(" ", style), Segment("*" if row.differs else " ", bad), Segment(" ", style),
                    Segment(" " + _fit(row.section, SECTION) + " ", dim),
                    Segment(" " + _fit(safe(row.left, CLIP), half) + " ", bad if row.differs else style),
                    Segment(" " + _fit(safe(row.right, CLIP), half) + " ", bad if row.differs else style)]
        return Strip(segments).crop_extend(scroll_x, scroll_x + width, style).apply_offsets(scroll_x, index)

    def on_click(self, event: Click) -> None:
        offset = event.get_content_offset(self)
        if offset is not None and offset.y >= 1:
            self.move_cursor(row=self.scroll_offset.y + offset.y - 1)

    def action_cursor_up(self) -> None:
        self.move_cursor(row=self.cursor_row - 1)

    def action_cursor_down(self) -> None:
        self.move_cursor(row=self.cursor_row + 1)

    def action_page_up(self) -> None:
        self.move_cursor(row=self.cursor_row - self._body_height())

    def action_page_down(self) -> None:
        self.move_cursor(row=self.cursor_row + self._body_height())

    def action_first(self) -> None:
        self.move_cursor(row=0)

    def action_last(self) -> None:
        self.move_cursor(row=len(self.rows) - 1)


class DiffScreen(Screen[None]):
    """Side A (left) against side B (right)."""

    DEFAULT_CSS = """
    DiffScreen #diff-note { color: $text-muted; }
    """
    BINDINGS = [
        Binding("escape", "close", "Close the comparison", tooltip="Close the comparison and go back", id="workbench.diff.close"),
        Binding("n", "next_difference", "Next difference", tooltip="Select the next row that differs", id="workbench.diff.next_difference"),
        Binding("N", "previous_difference", "Previous difference", tooltip="Select the previous row that differs", id="workbench.diff.previous_difference"),
    ]

    def __init__(self, comparison: Comparison) -> None:
        super().__init__(id="diff")
        self.comparison = comparison
        """What is compared: the sides' names and the rows."""
        self.differences = comparison.differences
        """The indexes of the rows that differ."""

    @property
    def rows(self) -> list[DiffRow]:
        return list(self.comparison.rows)

    def compose(self) -> ComposeResult:
        count = len(self.differences)
        comparison = self.comparison
        yield Label(Text(f"compare  A “{safe(comparison.left, 60)}”  ·  B “{safe(comparison.right, 60)}”  ·  "
                         + (f"{count} difference{'' if count == 1 else 's'}" if count else "no differences"),
                         style="bold"), id="diff-title")
        if comparison.note:
            yield Label(Text(safe(comparison.note, 400)), id="diff-note")
        table = DiffTable(list(comparison.rows), id="diff-table")
        if self.differences:
            table.set_reactive(DiffTable.cursor_row, self.differences[0])
        yield table
        yield KeyFooter()

    def on_mount(self) -> None:
        self.app.clear_notifications()  # "marked for comparison" and the like are done with: the rows are the answer
        self.query_one("#diff-table", DiffTable).focus()

    def _move(self, step: int) -> None:
        table = self.query_one("#diff-table", DiffTable)
        here = table.cursor_row
        later = [i for i in self.differences if (i > here if step > 0 else i < here)]
        if later:
            table.move_cursor(row=later[0] if step > 0 else later[-1])

    def action_next_difference(self) -> None:
        self._move(1)

    def action_previous_difference(self) -> None:
        self._move(-1)

    def action_close(self) -> None:
        self.dismiss(None)
