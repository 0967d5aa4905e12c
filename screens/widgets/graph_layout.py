"""The drawing behind ``NeighbourhoodGraph``: one object's edges laid out on a grid of characters.

No Textual here: ``layout(neighbourhood, width)`` returns the grid (rows of styled runs), the
neighbours in drawing order and where each can be clicked. The selected object is a box in the middle; objects with edges into it sit in the left column,
objects its edges point to in the right column, each column a trunk of box-drawing lines grouped
under one heading per edge kind. Below ``NARROW`` columns, or when a column would keep fewer than
``MIN_NAME`` cells for names, the drawing stacks instead (the object on top, then the incoming and
outgoing edges as indented arrow lines). The grid of characters is built once per (data, width) and
cached by the widget; its ``render_line`` only slices it and styles it.

Names are untrusted: each goes through ``safe`` and is clipped by terminal cells (wide characters
count twice), so no name can push the drawing out of shape.
"""

from __future__ import annotations

from itertools import groupby
from typing import TYPE_CHECKING, Any, NamedTuple

from rich.cells import cell_len, get_character_cell_size

from ..text import safe


if TYPE_CHECKING:
    from services.canvas import EdgeView, Neighbourhood

__all__ = ["KINDS", "NARROW", "MIN_NAME", "Neighbour", "Place", "Grid", "fit", "layout"]

KINDS = ("links-to", "watches", "acted-on", "spawned", "forked-from")
"""The edge kinds with their own colour, in drawing order (any other kind follows, sorted)."""
NARROW = 40
"""Below this many columns the graph is drawn stacked instead of side by side."""
MIN_NAME = 10
"""Cells a side column needs for names; narrower than that, the graph is drawn stacked too."""
NAME_CAP = 300
"""Characters of one name kept before it is clipped to its column."""

Neighbour = tuple[str, str, "EdgeView"]
"""``(direction, kind, edge)``: one neighbour as drawn (``edge`` is an ``EdgeView``)."""
Place = tuple[int, int, int]
"""``(row, first column, column after the last)``: where a neighbour can be clicked."""


def fit(text: str, cells: int) -> str:
    """``text`` cut to at most ``cells`` terminal cells, ending in ``…`` when it was cut."""
    if cell_len(text) <= cells:
        return text
    out, used = [], 0
    for char in text:
        size = get_character_cell_size(char)
        if used + size > cells - 1:
            break
        out.append(char)
        used += size
    return "".join(out) + "…" if cells > 0 else ""


def _clean(value: object) -> str:
    """An untrusted name as one line: sanitised, clipped, whitespace runs as one space."""
    return " ".join(safe(value, NAME_CAP).split())


class Grid:
    """Rows of cells, each cell ``[text, style, slot]`` (``slot``: the neighbour drawn there or -1)."""

    def __init__(self, width: int, height: int) -> None:
        self.width = width
        # each cell is [text, style, slot], changed in place: its parts differ in type, hence Any
        self.cells: list[list[list[Any]]] = [[[" ", "", -1] for _ in range(width)] for _ in range(height)]

    def put(self, y: int, x: int, text: str, style: str = "", slot: int = -1, cells: int | None = None,
            right: bool = False) -> None:
        """Write ``text`` at row ``y``: from column ``x``, or ending at ``x`` when ``right``."""
        room = (x + 1 if right else self.width - x) if cells is None else cells
        text = fit(text, max(0, min(room, self.width)))
        if right:
            x = x - cell_len(text) + 1
        row = self.cells[y]
        for char in text:
            size = get_character_cell_size(char)
            if size == 0:
                if 0 < x <= self.width:
                    row[x - 1][0] += char
                continue
            if x < 0 or x + size > self.width:
                break
            row[x] = [char, style, slot]
            if size == 2:
                row[x + 1] = ["", style, slot]
            x += size

    def runs(self) -> list[list[tuple[str, str, int]]]:
        """Each row as runs of ``(text, style, slot)`` (neighbouring cells that look alike joined)."""
        return [[("".join(cell[0] for cell in cells), style, slot)
                 for (style, slot), cells in groupby(row, key=lambda cell: (cell[1], cell[2]))] for row in self.cells]


def _kind_style(kind: str) -> str:
    return f"graph--{kind}" if kind in KINDS else "graph--edge"


class _Entry(NamedTuple):
    what: str
    """``heading`` (a kind), ``edge`` (a neighbour) or ``more`` (edges not loaded)."""
    kind: str
    slot: int
    """The neighbour's index for an ``edge``, else -1."""
    text: str


def _entries(hood: "Neighbourhood", direction: str, neighbours: list[Neighbour]) -> list[_Entry]:
    """One side's rows: per kind a heading, its neighbours, and "… N more" when not all were loaded."""
    groups = hood.outgoing if direction == "out" else hood.incoming
    counted = {key.split(":", 1)[1] for key, n in hood.counts.items() if key.startswith(direction + ":") and n}
    kinds = sorted(set(groups) | counted, key=lambda k: (KINDS.index(k) if k in KINDS else len(KINDS), k))
    rows: list[_Entry] = []
    for kind in kinds:
        group = groups.get(kind, ())
        rows.append(_Entry("heading", kind, -1, _clean(kind)))
        for edge in group:
            rows.append(_Entry("edge", kind, len(neighbours), _clean(edge.other.label)))
            neighbours.append((direction, kind, edge))
        hidden = hood.counts.get(f"{direction}:{kind}", 0) - len(group)
        if hidden > 0:
            rows.append(_Entry("more", kind, -1, f"… {hidden} more"))
    return rows


def layout(hood: "Neighbourhood | None", width: int) -> tuple[Grid, list[Neighbour], list[Place]]:
    """Draw ``hood`` (a ``Neighbourhood`` or None) ``width`` cells wide: the grid, its neighbours, their places."""
    neighbours: list[Neighbour] = []
    if hood is None:
        grid = Grid(width, 1)
        grid.put(0, 1, "nothing selected", "graph--label")
        return grid, neighbours, []
    sides = {d: _entries(hood, d, neighbours) for d in ("in", "out")}
    places: list[Place] = [(0, 0, 0)] * len(neighbours)
    name, type_ = _clean(hood.object.name or hood.object.full_name), _clean(hood.object.type)
    inner = max(10, min(max(cell_len(name), cell_len(type_)) + 2, width // 3))
    needs = {d: max((cell_len(e.text) - (4 if e.what == "heading" else 0) for e in rows), default=0)
             for d, rows in sides.items()}
    avail = width - inner - 2 - 8 * sum(1 for rows in sides.values() if rows)
    rooms = dict(needs)
    if sum(needs.values()) > avail:
        small = min(needs, key=lambda d: needs[d])
        rooms[small] = min(needs[small], avail // 2)
        rooms["out" if small == "in" else "in"] = avail - rooms[small]
    if width < NARROW or any(rows and rooms[d] < min(MIN_NAME, needs[d]) for d, rows in sides.items()):
        return _stacked(hood, width, sides, places), neighbours, places
    return _wide(width, name, type_, inner, rooms, sides, places), neighbours, places


def _stacked(hood: "Neighbourhood", width: int, sides: dict[str, list[_Entry]], places: list[Place]) -> Grid:
    rows = [(d, entry) for d in ("in", "out") for entry in sides[d]]
    grid = Grid(width, 2 + max(1, len(rows)))
    grid.put(0, 0, "● " + _clean(hood.object.label), "graph--centre")
    grid.put(1, 2, _clean(hood.object.type), "graph--label")
    if not rows:
        grid.put(2, 2, "no edges", "graph--label")
    for y, (direction, entry) in enumerate(rows, start=2):
        if entry.what == "heading":
            arrow = f"◀─{entry.text}─" if direction == "in" else f"─{entry.text}─▶"
            grid.put(y, 0, arrow, _kind_style(entry.kind))
            continue
        last = y - 2 == len(rows) - 1 or rows[y - 1][1].what == "heading"
        grid.put(y, 1, "└ " if last else "├ ", "graph--line")
        grid.put(y, 3, entry.text, "graph--more" if entry.what == "more" else "", entry.slot)
        if entry.slot >= 0:
            places[entry.slot] = (y, 0, width)
    return grid


def _wide(width: int, name: str, type_: str, inner: int, rooms: dict[str, int], sides: dict[str, list[_Entry]],
          places: list[Place]) -> Grid:
    drawn = inner + 2 + sum(rooms[d] + 8 for d, rows in sides.items() if rows)  # each side: " name ──▶┤──"
    x0 = (width - drawn) // 2 + (rooms["in"] + 8 if sides["in"] else 0)
    xr = x0 + inner + 1
    alone = not sides["in"] or not sides["out"]
    grid = Grid(width, max(5 if alone else 4, 1 + len(sides["in"]), 1 + len(sides["out"])))
    grid.put(0, x0, "┌" + "─" * inner + "┐", "graph--centre")
    for y, text, style in ((1, name, "graph--centre"), (2, type_, "graph--label")):
        grid.put(y, x0, "│", "graph--centre")
        grid.put(y, x0 + 2, text, style, cells=inner - 2)
        grid.put(y, xr, "│", "graph--centre")
    grid.put(3, x0, "└" + "─" * inner + "┘", "graph--centre")
    if not sides["in"] and not sides["out"]:
        grid.put(4, max(0, (width - 31) // 2), "no edges to or from this object", "graph--label")
    elif alone:
        grid.put(4, x0 if not sides["in"] else xr, "no incoming" if not sides["in"] else "no outgoing",
                 "graph--label", cells=inner + 2, right=bool(sides["in"]))
    for direction, entries in sides.items():
        left, room = direction == "in", rooms[direction]
        trunk = x0 - 3 if left else xr + 3
        side = -1 if left else 1
        if not entries:
            continue
        grid.put(0, trunk + 2 * side, "incoming" if left else "outgoing", "graph--label", right=left, cells=room + 4)
        grid.put(1, x0 if left else xr, "┤" if left else "├", "graph--centre")
        grid.put(1, trunk + 1 if left else xr + 1, "──", "graph--line")
        for y, entry in enumerate(entries, start=1):
            last = y == len(entries)
            joints = "┌┘│┤" if left else "┐└│├"
            joint = joints[0 if y == 1 else 1 if last else 2 if entry.what == "heading" else 3]
            grid.put(y, trunk, joint, "graph--line")
            if entry.what == "heading":
                grid.put(y, trunk + 2 * side, entry.text, _kind_style(entry.kind), right=left, cells=room + 4)
                continue
            more = entry.what == "more"
            grid.put(y, trunk - 3 if left else trunk + 1, "┄┄┄" if more else "──▶",
                     "graph--line" if more else _kind_style(entry.kind))
            label = f" {fit(entry.text, room)} "
            grid.put(y, trunk + 4 * side, label, "graph--more" if more else "", entry.slot, cells=room + 2, right=left)
            if entry.slot >= 0:
                places[entry.slot] = (y, 0, trunk) if left else (y, trunk + 1, width)
    return grid
