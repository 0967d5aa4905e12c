"""``DiffScreen``: two runs side by side (``c`` on one run in the runs pane, then ``c`` on another).

Rows come from ``services.desk.diff.diff_runs``: outcomes, messages aligned as a text diff, events by
type and order, time per turn and refusals; a differing row is marked ``*`` and the first one is
selected. ``n`` / ``N`` move to the next / previous difference, ``esc`` closes.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Label

from services.desk.diff import DiffRow

from .text import safe, tone
from .widgets.footer import KeyFooter

__all__ = ["DiffScreen"]


class DiffScreen(Screen[None]):
    """Run A (left) against run B (right)."""

    BINDINGS = [
        Binding("escape", "close", "Close the comparison", id="workbench.diff.close"),
        Binding("n", "next_difference", "Next difference", id="workbench.diff.next_difference"),
        Binding("N", "previous_difference", "Previous difference", id="workbench.diff.previous_difference"),
    ]

    def __init__(self, left: str, right: str, rows: list[DiffRow]) -> None:
        super().__init__(id="diff")
        self.left = left
        """Run A's title (plain text)."""
        self.right = right
        """Run B's title (plain text)."""
        self.rows = rows
        """The comparison's rows."""
        self.differences = [i for i, row in enumerate(rows) if row.differs]
        """The indexes of the rows that differ."""

    def compose(self) -> ComposeResult:
        count = len(self.differences)
        yield Label(Text(f"compare  A “{safe(self.left, 60)}”  ·  B “{safe(self.right, 60)}”  ·  "
                         + (f"{count} difference{'' if count == 1 else 's'}" if count else "no differences"),
                         style="bold"), id="diff-title")
        yield DataTable(id="diff-table", cursor_type="row", zebra_stripes=True)
        yield KeyFooter()

    def on_mount(self) -> None:
        table = self.query_one("#diff-table", DataTable)
        table.add_column("", key="mark", width=1)
        table.add_column("section", key="section", width=8)
        half = max(20, (self.app.size.width - 16) // 2)
        table.add_column("A", key="a", width=half)
        table.add_column("B", key="b", width=half)
        bad = tone("warn", bold=True)
        table.add_rows((Text("*", style=bad) if row.differs else Text(" "), Text(row.section, style="dim"),
                        Text(safe(row.left, 400), style=bad if row.differs else ""),
                        Text(safe(row.right, 400), style=bad if row.differs else "")) for row in self.rows)
        if self.differences:
            table.move_cursor(row=self.differences[0])
        table.focus()

    def _move(self, step: int) -> None:
        table = self.query_one("#diff-table", DataTable)
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
