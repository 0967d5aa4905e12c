"""``NeighbourhoodGraph`` in a small App: sides, kind labels, cursor and enter, "… N more", the stacked
fallback, the empty message, scrolling, the per-(data, width) cache, and hostile names.

The data are the canvas's real read models (``services.canvas.views``); the assertions read the
lines the widget renders.
"""

from __future__ import annotations

from typing import Any

import pytest
from rich.cells import cell_len
from textual.app import App, ComposeResult

import screens.widgets.graph as graph_module
from screens.widgets.graph import NeighbourhoodGraph
from services.canvas.views import EdgeView, Neighbourhood, ObjectSummary


def summary(id_: str, full_name: str, type_: str = "document") -> ObjectSummary:
    return ObjectSummary(id=id_, type=type_, kind="knowledge", name=full_name.rsplit("/", 1)[-1],
                         full_name=full_name, owner_id=None, privacy="public", status="", created_at=0.0,
                         updated_at=0.0)


def edge(kind: str, direction: str, other: ObjectSummary) -> EdgeView:
    return EdgeView(kind=kind, direction=direction, other=other, created_at=0.0)


CENTRE = summary("obj_centre", "garden-app/architecture")


def hood(outgoing: dict[str, list[ObjectSummary]] | None = None, incoming: dict[str, list[ObjectSummary]] | None = None,
         counts: dict[str, int] | None = None, centre: ObjectSummary = CENTRE) -> Neighbourhood:
    out = {k: tuple(edge(k, "out", o) for o in v) for k, v in (outgoing or {}).items()}
    inc = {k: tuple(edge(k, "in", o) for o in v) for k, v in (incoming or {}).items()}
    total = {f"out:{k}": len(v) for k, v in out.items()} | {f"in:{k}": len(v) for k, v in inc.items()}
    return Neighbourhood(object=centre, outgoing=out, incoming=inc, counts=total | (counts or {}))


def sample() -> Neighbourhood:
    return hood(
        outgoing={"links-to": [summary("obj_runbook", "garden-app/runbook"), summary("obj_faq", "garden-app/faq")],
                  "spawned": [summary("obj_rev", "reviewer-1", "node")]},
        incoming={"watches": [summary("obj_patch", "patch review", "node")],
                  "acted-on": [summary("obj_job", "nightly build", "job")]},
    )


class GraphApp(App[None]):
    """One graph filling the screen; records the edges chosen."""

    def __init__(self, data: Any) -> None:
        super().__init__()
        self.data = data
        self.chosen: list[NeighbourhoodGraph.EdgeChosen] = []

    def compose(self) -> ComposeResult:
        yield NeighbourhoodGraph(id="graph")

    def on_mount(self) -> None:
        graph = self.query_one(NeighbourhoodGraph)
        graph.show(self.data)
        graph.focus()

    def on_neighbourhood_graph_edge_chosen(self, event: NeighbourhoodGraph.EdgeChosen) -> None:
        self.chosen.append(event)


def lines(graph: NeighbourhoodGraph) -> list[str]:
    """The rows on screen, as text, each checked to be exactly the widget's width in cells."""
    rows = []
    for y in range(graph.size.height):
        strip = graph.render_line(y)
        text = "".join(segment.text for segment in strip)
        assert strip.cell_length == graph.size.width and cell_len(text) == graph.size.width, repr(text)
        rows.append(text)
    return rows


def row_of(rows: list[str], needle: str) -> str:
    return next(r for r in rows if needle in r)


async def test_incoming_left_outgoing_right_around_the_centre_box_with_kind_labels() -> None:
    app = GraphApp(sample())
    async with app.run_test(size=(100, 16)) as pilot:
        await pilot.pause()
        rows = lines(app.query_one(NeighbourhoodGraph))
        box = rows[1].index("architecture")
        assert "┌" in rows[0] and "document" in rows[2]
        for name in ("patch review", "nightly build"):
            row = row_of(rows, name)
            assert row.index(name) < box and "──▶" in row[row.index(name):box]  # left of the box, arrow into it
        for name in ("garden-app/runbook", "garden-app/faq", "reviewer-1"):
            row = row_of(rows, name)
            assert row.index(name) > box and "──▶" in row[box:row.index(name)]
        for kind in ("links-to", "spawned", "watches", "acted-on"):
            assert any(kind in r for r in rows), kind
        assert row_of(rows, "watches").index("watches") < box < row_of(rows, "spawned").index("spawned")
        assert "incoming" in rows[0] and "outgoing" in rows[0]
        graph = app.query_one(NeighbourhoodGraph)
        colours = set()
        for kind in ("links-to", "spawned", "watches", "acted-on"):  # each kind in its own theme colour
            y = next(i for i, r in enumerate(rows) if kind in r)
            segment = next(s for s in graph.render_line(y) if kind in s.text)
            assert segment.style.color == graph.get_component_rich_style(f"graph--{kind}").color
            colours.add(segment.style.color)
        assert len(colours) == 4


async def test_show_keeps_the_cursor_on_its_neighbour_and_a_new_object_starts_on_its_first_outgoing_edge() -> None:
    app = GraphApp(sample())
    async with app.run_test(size=(100, 16)) as pilot:
        await pilot.pause()
        graph = app.query_one(NeighbourhoodGraph)
        await pilot.press("down")
        assert graph.chosen[2].other.id == "obj_faq"
        data = sample()
        graph.show(Neighbourhood(data.object, {**data.outgoing, "links-to": (
            edge("links-to", "out", summary("obj_new", "garden-app/new")), *data.outgoing["links-to"])},
            data.incoming, data.counts))
        assert graph.chosen[2].other.id == "obj_faq" and graph.cursor == 4
        graph.show(hood(outgoing={"watches": [summary("obj_w", "w")]}, incoming={"watches": [summary("obj_v", "v")]},
                        centre=summary("obj_other", "other")))
        assert graph.chosen[2].other.id == "obj_w"
        graph.show(None)
        await pilot.pause()
        assert graph.chosen is None and "nothing selected" in lines(graph)[0]


async def test_cursor_keys_move_and_enter_posts_the_chosen_edge() -> None:
    app = GraphApp(sample())
    async with app.run_test(size=(100, 16)) as pilot:
        await pilot.pause()
        graph = app.query_one(NeighbourhoodGraph)
        ids = [e.other.id for _, _, e in graph.neighbours]
        assert ids == ["obj_patch", "obj_job", "obj_runbook", "obj_faq", "obj_rev"]  # drawing order: in, then out
        assert graph.cursor == 2  # a new object starts on its first outgoing edge
        await pilot.press("down", "j")
        assert graph.chosen[2].other.id == "obj_rev"
        await pilot.press("down")
        assert graph.cursor == 4  # stays on the last
        await pilot.press("up", "k")
        assert graph.chosen[2].other.id == "obj_runbook"
        await pilot.press("left")
        assert graph.chosen[0] == "in"
        await pilot.press("right")
        assert graph.chosen[0] == "out"
        await pilot.press("enter")
        await pilot.pause()
        chosen = app.chosen[-1]
        assert (chosen.object_id, chosen.kind, chosen.direction) == ("obj_runbook", "links-to", "out")
        assert chosen.control is graph
        cursor = graph.get_component_rich_style("graph--cursor")
        row = graph.cursor_row
        styled = [s for s in graph.render_line(row) if "garden-app/runbook" in s.text]
        assert styled and styled[0].style.bgcolor == cursor.bgcolor


async def test_a_click_on_a_neighbour_selects_and_chooses_it() -> None:
    app = GraphApp(sample())
    async with app.run_test(size=(100, 16)) as pilot:
        await pilot.pause()
        graph = app.query_one(NeighbourhoodGraph)
        rows = lines(graph)
        y = next(i for i, r in enumerate(rows) if "nightly build" in r)
        await pilot.click(NeighbourhoodGraph, offset=(rows[y].index("nightly build") + 2, y))
        await pilot.pause()
        assert graph.chosen[2].other.id == "obj_job"
        assert [(c.object_id, c.direction) for c in app.chosen] == [("obj_job", "in")]


async def test_more_edges_than_loaded_show_n_more() -> None:
    data = hood(outgoing={"links-to": [summary("a", "doc/a")]}, incoming={"watches": [summary("w", "watcher")]},
                counts={"out:links-to": 8, "in:watches": 3})
    app = GraphApp(data)
    async with app.run_test(size=(90, 10)) as pilot:
        await pilot.pause()
        rows = lines(app.query_one(NeighbourhoodGraph))
        box = rows[1].index("architecture")
        assert row_of(rows, "… 7 more").index("… 7 more") > box
        assert row_of(rows, "… 2 more").index("… 2 more") < box
        assert len(app.query_one(NeighbourhoodGraph).neighbours) == 2  # "more" rows are not neighbours


async def test_narrow_width_stacks_the_centre_over_arrow_lines() -> None:
    app = GraphApp(sample())
    async with app.run_test(size=(30, 16)) as pilot:
        await pilot.pause()
        graph = app.query_one(NeighbourhoodGraph)
        rows = lines(graph)
        assert rows[0].startswith("● garden-app/architecture")
        assert not any("┌" in r for r in rows)  # no box
        assert row_of(rows, "◀─watches─").startswith("◀") and row_of(rows, "─links-to─▶").startswith("─")
        assert row_of(rows, "patch review").lstrip().startswith("└ patch review")
        in_at = next(i for i, r in enumerate(rows) if "patch review" in r)
        out_at = next(i for i, r in enumerate(rows) if "garden-app/runbook" in r)
        assert 1 < in_at < out_at
        await pilot.press("down")
        assert graph.chosen[2].other.id == "obj_faq"


@pytest.mark.parametrize("size", [(80, 8), (30, 8)], ids=["wide", "narrow"])
async def test_no_edges_says_so(size: tuple[int, int]) -> None:
    app = GraphApp(hood())
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        graph = app.query_one(NeighbourhoodGraph)
        rows = lines(graph)
        assert any("no edges" in r for r in rows)
        await pilot.press("enter", "down")
        assert app.chosen == [] and graph.chosen is None


async def test_many_neighbours_scroll_to_keep_the_cursor_in_view_and_draw_once_per_width(monkeypatch) -> None:
    calls: list[int] = []
    real = graph_module.layout

    def counting(data: Any, width: int) -> Any:
        calls.append(width)
        return real(data, width)

    monkeypatch.setattr(graph_module, "layout", counting)
    data = hood(outgoing={"links-to": [summary(f"o{i}", f"doc/{i:02}") for i in range(30)]})
    app = GraphApp(data)
    async with app.run_test(size=(70, 8)) as pilot:
        await pilot.pause()
        graph = app.query_one(NeighbourhoodGraph)
        drawn = len(calls)
        for _ in range(20):
            await pilot.press("down")
        await pilot.pause()
        assert graph.cursor == 20
        top = graph.scroll_offset.y
        assert top > 0 and top <= graph.cursor_row < top + graph.size.height
        assert "doc/20" in "".join(lines(graph))
        assert len(calls) == drawn  # cursor moves and scrolling only slice the cached grid
        await pilot.resize_terminal(60, 8)
        await pilot.pause()
        assert calls[-1] == graph.size.width and len(calls) > drawn


HOSTILE = [
    "[bold]x[/]",
    "evil\x1b]0;title\x07name",
    "wipe\x1b[2Jscreen",
    "c1\x9bbyte",
    "long" + "x" * 100_000,
    "漢字の名前" * 20,
    "tab\tand\nnewline",
]


@pytest.mark.parametrize("size", [(100, 24), (64, 24), (30, 24)], ids=["wide", "tight", "narrow"])
async def test_hostile_names_come_out_sanitised_and_clipped_to_the_width(size: tuple[int, int]) -> None:
    others = [summary(f"h{i}", name) for i, name in enumerate(HOSTILE)]
    data = hood(outgoing={"links-to": others}, incoming={"watches": others[::-1]},
                centre=summary("obj_evil", "漢字" * 40 + "\x1b[31m"))
    app = GraphApp(data)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        graph = app.query_one(NeighbourhoodGraph)
        lines(graph)
        grid, _, _ = graph_module.layout(data, graph.size.width)  # every row, also those out of view
        rows = ["".join(t for t, _, _ in runs) for runs in grid.runs()]
        text = "\n".join(rows)
        assert not any(ch in text for ch in "\x1b\x07\x9b\t")
        assert "[bold]x[/]" in text  # shown literally, never parsed as markup
        assert "␛" in text and "\\x9b" in text  # the sanitizer's visible escapes
        assert "…" in text and len(text) < 20_000
        assert any("漢字" in r for r in rows)
        for width in (20, 39, 40, 41, 55, 64, 80, 121):
            grid, _, _ = graph_module.layout(data, width)
            for runs in grid.runs():
                assert cell_len("".join(t for t, _, _ in runs)) == width
