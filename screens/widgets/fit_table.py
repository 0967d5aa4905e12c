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

A table made with ``keep=N`` never lets the pane clip a column at all: its first ``N`` columns always
show, and each later column shows only while it fits whole (the flexible one at its ``min_width``),
left to right; the rest are left out until the table is wide enough again (the pane's detail shows
every value). The table keeps every row's full cells so that a resize brings columns back.
"""

from __future__ import annotations

from typing import Any

from rich.cells import cell_len
from rich.text import Text
from textual import events
from textual.coordinate import Coordinate
from textual.geometry import Size
from textual.widgets import DataTable

__all__ = ["FitTable", "fit_cell"]


def fit_cell(text: Text) -> Text:
    """``text`` as a cell the table cuts with ``…`` when its column is narrower (a copy)."""
    out = text.copy()
    out.no_wrap, out.overflow = True, "ellipsis"
    return out


class FitTable(DataTable[Any]):  # Any: DataTable's cell type; every pane's table mixes str and Text cells
    """A ``DataTable`` with one column sized to the room left at layout time.

    The ``Any`` in this class's signatures are ``DataTable``'s own (its overrides must accept what it does).
    """

    def __init__(self, *, flex: int = -1, min_width: int = 16, keep: int | None = None, **kwargs: Any) -> None:  # DataTable's keywords
        super().__init__(**kwargs)
        self.flex = flex
        """The index of the flexible column (``-1``: the last)."""
        self.min_width = min_width
        """The fewest cells the flexible column gets (its content's width when that is less)."""
        self.keep = keep
        """Columns always shown; the later ones show only while they fit whole (None: all show, the pane clips)."""
        self._labels: list[Any] = []
        self._rows: list[tuple[tuple[Any, ...], Any]] = []
        self._shown: tuple[int, ...] | None = None  # indices of the columns shown (None: all)
        self._showing: tuple[int, ...] | None = None  # the columns a rebuild is queued for

    # -- columns left out when they do not fit (``keep``) --------------------------------------------

    def add_columns(self, *labels: Any) -> list[Any]:
        self._labels.extend(labels)
        return super().add_columns(*labels)

    def add_row(self, *cells: Any, key: Any = None, **kwargs: Any) -> Any:
        if self.keep is None:
            return super().add_row(*cells, key=key, **kwargs)
        self._rows.append((cells, key))
        shown = self._shown if self._shown is not None else range(len(cells))
        return super().add_row(*(cells[i] for i in shown if i < len(cells)), key=key, **kwargs)

    def update_cell_at(self, coordinate: Coordinate, value: Any, *, update_width: bool = False) -> None:
        """``coordinate``'s column counts every column, shown or not (as ``add_row``'s cells do)."""
        if self.keep is None:
            super().update_cell_at(coordinate, value, update_width=update_width)
            return
        row, column = coordinate
        cells, key = self._rows[row]
        self._rows[row] = (tuple(value if i == column else cell for i, cell in enumerate(cells)), key)
        shown = self._shown if self._shown is not None else tuple(range(len(self._labels)))
        if column in shown:
            super().update_cell_at(Coordinate(row, shown.index(column)), value, update_width=update_width)

    def clear(self, columns: bool = False) -> "FitTable":
        self._rows = []
        if columns:
            self._labels, self._shown = [], None
        super().clear(columns)
        return self

    @property
    def shown_labels(self) -> list[str]:
        """The labels of the columns shown now."""
        shown = self._shown if self._shown is not None else range(len(self._labels))
        return [str(self._labels[i]) for i in shown]

    def _natural(self, index: int) -> int:
        """The cells column ``index`` needs to show its label and every value whole."""
        widths = [cell_len(str(self._labels[index]))]
        for cells, _key in self._rows:
            if index < len(cells):
                cell = cells[index]
                widths.append(cell.cell_len if isinstance(cell, Text) else cell_len(str(cell)))
        return max(widths)

    def _fitting(self, room: int) -> tuple[int, ...]:
        """The columns to show in ``room`` cells: the kept ones, then each next one while it fits whole."""
        count = len(self._labels)
        flex = self.flex % count
        shown: list[int] = []
        used = 0
        for index in range(count):
            natural = self._natural(index)
            need = (min(natural, self.min_width) if index == flex else natural) + 2 * self.cell_padding
            if index >= (self.keep or 0) and used + need > room:
                break
            shown.append(index)
            used += need
        return tuple(shown)

    def _show_columns(self, shown: tuple[int, ...]) -> None:
        """Rebuild the table with the columns ``shown`` (the rows and the cursor row stay)."""
        self._showing = None
        if shown == self._shown:
            return
        self._shown = shown
        cursor = self.cursor_row
        rows = list(self._rows)
        super().clear(columns=True)
        super().add_columns(*(self._labels[i] for i in shown))
        for cells, key in rows:
            super().add_row(*(cells[i] for i in shown if i < len(cells)), key=key)
        if rows:
            self.move_cursor(row=min(cursor, len(rows) - 1))

    # -- the flexible column -------------------------------------------------------------------

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
        if self.keep is not None and self._labels:
            room = self.scrollable_content_region.width - self._row_label_column_width
            shown = self._fitting(room)
            if shown != (self._shown if self._shown is not None else tuple(range(len(self._labels)))):
                if shown != self._showing:
                    self._showing = shown
                    self.call_later(self._show_columns, shown)
                return
            flex = self.flex % len(self._labels)
            if flex not in shown:
                return
            column = columns[shown.index(flex)]
        else:
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
