"""``NeighbourhoodGraph``: one object's edges drawn as a small graph, with a cursor that follows them.

The selected object is a box in the middle, incoming edges to its left and outgoing ones to its
right, grouped by kind (``graph_layout`` draws it; stacked in narrow widgets). The grid is built
once per (data, width) and cached; ``render_line`` only slices it and styles it. Names are
untrusted: the layout sanitises and clips each by terminal cells.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from rich.segment import Segment
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Region, Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from .graph_layout import KINDS, MIN_NAME, NARROW, Neighbour, Place, fit, layout


if TYPE_CHECKING:
    from services.canvas import Neighbourhood

__all__ = ["NeighbourhoodGraph", "KINDS", "NARROW", "MIN_NAME", "Neighbour", "fit", "layout"]


class NeighbourhoodGraph(ScrollView, can_focus=True):
    """An object's neighbourhood drawn as a graph; a cursor picks a neighbour and ``enter`` follows it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up,k", "cursor_up", "Previous edge", show=False,
                tooltip="The previous edge in the graph", id="workbench.graph.cursor_up"),
        Binding("down,j", "cursor_down", "Next edge", show=False,
                tooltip="The next edge in the graph", id="workbench.graph.cursor_down"),
        Binding("left,h", "cursor_left", "Incoming", show=False,
                tooltip="Move to the incoming edges", id="workbench.graph.cursor_left"),
        Binding("right,l", "cursor_right", "Outgoing", show=False,
                tooltip="Move to the outgoing edges", id="workbench.graph.cursor_right"),
        Binding("enter", "choose_edge", "Follow edge",
                tooltip="Follow the selected edge to its object", id="workbench.graph.choose_edge"),
    ]

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "graph--centre", "graph--label", "graph--line", "graph--cursor", "graph--more", "graph--edge",
        *(f"graph--{kind}" for kind in KINDS),
    }
    """The box, muted labels, trunk lines, the cursor, "… N more", other kinds, and one class per kind."""

    DEFAULT_CSS = """
    NeighbourhoodGraph {
        height: 1fr;
        overflow-x: hidden;
        scrollbar-size-vertical: 1;
        & > .graph--centre { color: $text; text-style: bold; }
        & > .graph--label { color: $text-muted; }
        & > .graph--line { color: $text-muted; }
        & > .graph--more { color: $text-muted; text-style: italic; }
        & > .graph--edge { color: $text-muted; }
        & > .graph--links-to { color: $text-primary; }
        & > .graph--watches { color: $text-warning; }
        & > .graph--acted-on { color: $text-success; }
        & > .graph--spawned { color: $text-secondary; }
        & > .graph--forked-from { color: $text-accent; }
        & > .graph--cursor {
            color: $block-cursor-blurred-foreground;
            background: $block-cursor-blurred-background;
            text-style: underline;
        }
        &:focus > .graph--cursor {
            color: $block-cursor-foreground;
            background: $block-cursor-background;
            text-style: $block-cursor-text-style;
        }
    }
    """

    cursor: reactive[int] = reactive(0, init=False)
    """The index in ``neighbours`` of the highlighted neighbour."""

    class EdgeChosen(Message):
        """The operator chose a neighbour (``enter`` or a click): follow the edge to ``object_id``."""

        def __init__(self, graph: "NeighbourhoodGraph", object_id: str, kind: str, direction: str) -> None:
            super().__init__()
            self.graph = graph
            """The graph the edge was chosen in."""
            self.object_id = object_id
            """The object at the other end of the edge."""
            self.kind = kind
            """The edge kind (``links-to``, ``watches``, ...)."""
            self.direction = direction
            """``out`` (the shown object is the source) or ``in``."""

        @property
        def control(self) -> "NeighbourhoodGraph":
            """The graph (for ``@on(NeighbourhoodGraph.EdgeChosen, "#id")``)."""
            return self.graph

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.neighbourhood: Neighbourhood | None = None
        """The ``Neighbourhood`` drawn (None: nothing selected)."""
        self.neighbours: list[Neighbour] = []
        """Every neighbour as ``(direction, kind, edge)``, in drawing order (incoming first)."""
        self._places: list[Place] = []
        self._lines: list[list[tuple[str, str, int]]] = []
        self._drawn: tuple[int, int] | None = None
        self._version = 0

    def validate_cursor(self, cursor: int) -> int:
        return max(0, min(cursor, len(self.neighbours) - 1))

    def watch_cursor(self) -> None:
        self._scroll_to_cursor()
        self.refresh()

    # -- data --------------------------------------------------------------------------------

    def show(self, neighbourhood: Neighbourhood | None) -> None:
        """Draw ``neighbourhood`` (a ``Neighbourhood``, or None to clear).

        The cursor stays on the same neighbour when it is still there; on a new object it starts on
        the first outgoing edge (the usual one to follow), else on the first edge.
        """
        previous = self.chosen
        same = neighbourhood is not None and self.neighbourhood is not None and \
            neighbourhood.object.id == self.neighbourhood.object.id
        self.neighbourhood = neighbourhood
        self._version += 1
        self._draw(self.size.width)
        keys = [(d, k, e.other.id) for d, k, e in self.neighbours]
        key = (previous[0], previous[1], previous[2].other.id) if previous is not None else None
        if same:
            target = keys.index(key) if key in keys else self.cursor
        else:
            target = next((i for i, (d, _, _) in enumerate(keys) if d == "out"), 0)
            if self.is_mounted:
                self.scroll_to(y=0, animate=False, immediate=True)
        self.set_reactive(NeighbourhoodGraph.cursor, self.validate_cursor(target))
        self._scroll_to_cursor()
        self.refresh()

    def _draw(self, width: int) -> None:
        """Build the grid for ``width`` unless the one cached is for this data and width."""
        if self._drawn == (self._version, width):
            return
        grid, self.neighbours, self._places = layout(self.neighbourhood, max(1, width))
        self._lines = grid.runs()
        self._drawn = (self._version, width)
        size = Size(width, len(self._lines))
        if self.virtual_size != size:
            self.virtual_size = size

    @property
    def chosen(self) -> Neighbour | None:
        """The neighbour under the cursor, if any."""
        return self.neighbours[self.cursor] if self.neighbours else None

    @property
    def cursor_row(self) -> int | None:
        """The drawing's row (0 at the top, before scrolling) of the neighbour under the cursor."""
        return self._places[self.cursor][0] if self.neighbours else None

    # -- rendering ---------------------------------------------------------------------------

    def render_line(self, y: int) -> Strip:
        """One row of the cached grid, styled; the cursor's neighbour in ``graph--cursor``."""
        width = self.size.width
        self._draw(width)
        lines = self._lines
        row = y + self.scroll_offset.y
        base = self.rich_style
        if row >= len(lines):
            return Strip.blank(width, base)
        segments = []
        for text, style, slot in lines[row]:
            rich = self.get_component_rich_style(style) if style else base
            if slot >= 0 and slot == self.cursor and self.neighbours:
                rich = rich + self.get_component_rich_style("graph--cursor")
            segments.append(Segment(text, rich))
        return Strip(segments).adjust_cell_length(width, base)

    def _scroll_to_cursor(self) -> None:
        row = self.cursor_row
        if row is not None and self.is_mounted:
            self.scroll_to_region(Region(0, row, max(1, self.size.width), 1), animate=False, immediate=True,
                                  x_axis=False)

    # -- handlers ----------------------------------------------------------------------------

    def on_resize(self, event: events.Resize) -> None:
        self._draw(self.size.width)
        self._scroll_to_cursor()

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None:
            return
        row, x = offset.y + self.scroll_offset.y, offset.x
        for index, (at, start, end) in enumerate(self._places):
            if at == row and start <= x < end:
                self.cursor = index
                self.action_choose_edge()
                return

    # -- actions -----------------------------------------------------------------------------

    def action_cursor_up(self) -> None:
        """Highlight the neighbour drawn before this one."""
        self.cursor -= 1

    def action_cursor_down(self) -> None:
        """Highlight the neighbour drawn after this one."""
        self.cursor += 1

    def action_cursor_left(self) -> None:
        """Jump to the incoming neighbour nearest the cursor's row."""
        self._jump("in")

    def action_cursor_right(self) -> None:
        """Jump to the outgoing neighbour nearest the cursor's row."""
        self._jump("out")

    def _jump(self, direction: str) -> None:
        if not self.neighbours or self.neighbours[self.cursor][0] == direction:
            return
        row = self._places[self.cursor][0]
        column = [i for i, (d, _, _) in enumerate(self.neighbours) if d == direction]
        if column:
            self.cursor = min(column, key=lambda i: (abs(self._places[i][0] - row), i))

    def action_choose_edge(self) -> None:
        """Follow the edge under the cursor: post ``EdgeChosen``."""
        chosen = self.chosen
        if chosen is not None:
            direction, kind, edge = chosen
            self.post_message(self.EdgeChosen(self, edge.other.id, kind, direction))
