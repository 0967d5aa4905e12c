"""``FitTable``: a ``DataTable`` whose one flexible column takes the width the others leave.

A plain ``DataTable`` sizes every column to its widest cell and lets the pane clip the table at
its right edge, so a long title is cut mid-word with no sign that it was. Here the flexible column
(a title, a "what") is sized when the table lays out, from the table's real width: it shrinks to
what is left after the other columns, never below ``min_width``, and its cells end in ``…`` where
they are cut (Rich cuts a ``no_wrap`` cell with ``overflow="ellipsis"``; ``fit_cell`` makes one).
When even ``min_width`` does not fit, the columns to its right are the ones the pane clips, so the
flexible column goes first in a table whose narrowest layout must still show it. A flexible last
column has nothing to its right to give way: it takes whatever room is left, however little, so
its cut still shows as ``…`` instead of a clipped word.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import events
from textual.geometry import Size
from textual.widgets import DataTable

__all__ = ["FitTable", "fit_cell"]


def fit_cell(text: Text) -> Text:
    """``text`` as a cell the table cuts with ``…`` when its column is narrower (a copy)."""
    out = text.copy()
    out.no_wrap, out.overflow = True, "ellipsis"
    return out


class FitTable(DataTable[Any]):
    """A ``DataTable`` with one column sized to the room left at layout time."""

    def __init__(self, *, flex: int = -1, min_width: int = 16, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.flex = flex
        """The index of the flexible column (``-1``: the last)."""
        self.min_width = min_width
        """The fewest cells the flexible column gets (its content's width when that is less)."""

    def _update_dimensions(self, new_rows: Any) -> None:
        # DataTable measures new and changed cells here when idle, and has no public hook after it
        super()._update_dimensions(new_rows)
        self.fit_columns()

    def on_resize(self, event: events.Resize) -> None:
        self.fit_columns()

    def fit_columns(self) -> None:
        """Size the flexible column from the table's current width (a no-op when unchanged)."""
        columns = self.ordered_columns
        if not columns or not self.size.width:
            return
        column = columns[self.flex]
        room = self.scrollable_content_region.width - self._row_label_column_width
        others = sum(c.get_render_width(self) for c in columns if c is not column)
        natural = max(column.content_width, 1)
        floor = 1 if column is columns[-1] else self.min_width
        width = min(natural, max(floor, room - others - 2 * self.cell_padding))
        if column.auto_width or column.width != width:
            column.auto_width, column.width = False, width
            self.virtual_size = Size(others + column.get_render_width(self) + self._row_label_column_width,
                                     self.virtual_size.height)
            self._clear_caches()
