"""Zero-width and format characters never shift a pane's borders: the drawn rows are measured.

A name holding U+200B, U+FEFF or a ZWJ emoji sequence is measured by the renderer one way and
drawn by a terminal another (a ZWJ family is six cells to Rich and two to a terminal), which
pushed the pane borders sideways. ``sanitize`` shows those characters as visible escapes; this
test renders every pane with such names and reads the rows the compositor draws.
"""

from __future__ import annotations

import unicodedata
from typing import Any

import pytest
from rich.cells import cell_len

from tests.ui.conftest import ready, settle

FAMILY = "👨\u200d👩\u200d👧"
TRICKY = f"z\u200bw\ufeffj{FAMILY}\u00ads\u2060v\ufe0f\u2028e"
PERSON = f"user:{TRICKY}"
EDGES = "│╭╮╰╯┃┏┓┗┛"


def drawn_rows(app: Any) -> list[str]:
    """The screen as the compositor draws it, one string per row."""
    return [strip.text for strip in app.screen._compositor.render_strips()]


def cells(row: str) -> list[str]:
    """``row`` as terminal cells: a wide character takes its cell and leaves the next one empty."""
    out: list[str] = []
    for char in row:
        width = cell_len(char)
        if width:
            out.append(char)
            out.extend("" for _ in range(width - 1))
    return out


def invisible(char: str) -> bool:
    return unicodedata.category(char) in ("Cf", "Zl", "Zp", "Cc") or 0xFE00 <= ord(char) <= 0xFE0F


def check_rows(app: Any, panes: list[Any]) -> None:
    width, height = app.size
    rows = drawn_rows(app)
    assert len(rows) == height
    for y, row in enumerate(rows):
        assert [hex(ord(c)) for c in row if invisible(c)] == [], f"row {y} carries invisible characters"
        assert cell_len(row) == width, f"row {y} is {cell_len(row)} cells wide, not {width}"
        assert len(cells(row)) == width
    for pane in panes:
        region = pane.region
        assert region.area > 0, pane.id
        for y in range(region.y, region.bottom):
            row = cells(rows[y])
            assert row[region.x] in EDGES and row[region.right - 1] in EDGES, (pane.id, y, rows[y])


async def fill(pilot: Any, ws: Any) -> None:
    await ws.cloud.connect(ws.store, PERSON)
    client = await ws.oauth.client(PERSON)
    run = await client.runs.start(prompt=f"prompt {TRICKY}", name=f"run {TRICKY}")
    await ws.desk.ask(run.id, f"question {TRICKY}?")
    await settle(pilot)
    await pilot.app.workspace.follower.idle()
    node = next(o for o in (await ws.canvas.list_objects(type="node", limit=500)).items if o.id == run.id or
                o.name.endswith(TRICKY) or run.id in (o.full_name or ""))
    await ws.canvas.message_send(f"hello {TRICKY}", to=node.id)
    doc = await ws.canvas.write("notes/tricky", preview=f"When measuring, read this because {TRICKY}",
                                body=f"# {TRICKY}\n\n{TRICKY} {TRICKY}", owner="user:ada")
    source = (await ws.okf.sources())[0]
    await ws.okf.capture_record(source.id, {"thread": f"t-{run.id}", "turns": [
        {"id": "1", "role": "user", "text": f"We decided {TRICKY} is the rule."}]})
    await settle(pilot)
    main = pilot.app.main
    main.pane("runs").select_key(run.id)
    main.pane("grants").select_key(PERSON)
    main.pane("inbox").select_key(node.id)
    main.pane("canvas").select_key(doc.object.id)
    await settle(pilot)


@pytest.mark.parametrize("size", [(160, 48), (200, 60)])
async def test_format_characters_in_every_pane_leave_every_row_the_screen_width_with_borders_aligned(app, size) -> None:
    async with app.run_test(size=size) as pilot:
        ws = await ready(pilot)
        await fill(pilot, ws)
        judgments = pilot.app.main.pane("judgments")
        queue = [k for k, v in judgments.items.items() if k.startswith("okf:")]
        if queue:
            judgments.select_key(queue[-1])
        await settle(pilot)
        main = app.main
        assert not main.compact
        check_rows(app, main.panes())
        shown = "\n".join(drawn_rows(app))
        assert "\\u200b" in shown and "\\ufeff" in shown and "\\u200d" in shown  # shown, as escapes


async def test_format_characters_leave_the_small_layout_aligned_in_each_pane(app) -> None:
    async with app.run_test(size=(100, 32)) as pilot:
        ws = await ready(pilot)
        await fill(pilot, ws)
        for number, pane in enumerate(app.main.panes(), start=1):
            await pilot.press(str(number))
            await settle(pilot)
            check_rows(app, [pane])
