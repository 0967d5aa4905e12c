"""``ctrl+k`` + letter marks the selection (kept in the workspace's marks.json), ``'`` + letter jumps back
to it in its pane; ``alt+left`` / ``alt+right`` walk back and forward through what was selected, across panes."""

from __future__ import annotations

import json

from services.desk.marks import Marks

from .conftest import ready, settle


async def test_a_mark_is_kept_in_the_workspace_and_jumps_back_across_panes(app) -> None:
    async with app.run_test(size=(140, 44)) as pilot:
        ws = await ready(pilot)
        await pilot.press("3")
        runs = app.main.pane("runs")
        target = next(v.id for v in ws.desk.runs() if not v.system and v.id != runs.selected)
        runs.select_key(target)
        await settle(pilot)
        await pilot.press("ctrl+k", "g")
        await settle(pilot)
        kept = json.loads((ws.settings.path / "marks.json").read_text(encoding="utf-8"))
        assert kept["g"]["pane"] == "runs" and kept["g"]["key"] == target
        assert Marks(ws.settings.path).get("g").key == target  # read back as the next window would
        await pilot.press("4")
        await settle(pilot)
        await pilot.press("down")
        await settle(pilot)
        await pilot.press("apostrophe", "g")
        await settle(pilot)
        assert app.main.active == "runs" and runs.selected == target
        await pilot.press("apostrophe", "z")  # no such mark: said, nothing moves
        await settle(pilot)
        assert app.main.active == "runs" and runs.selected == target


async def test_alt_left_and_alt_right_walk_the_selections_across_panes(app) -> None:
    async with app.run_test(size=(140, 44)) as pilot:
        ws = await ready(pilot)
        await pilot.press("3")
        runs, grants = app.main.pane("runs"), app.main.pane("grants")
        first, second = [v.id for v in ws.desk.runs() if not v.system and v.id != runs.selected][:2]
        runs.select_key(first)
        await settle(pilot)
        runs.select_key(second)
        await settle(pilot)
        person = next(g.user_id for g in ws.desk.grants())
        await pilot.press("4")
        grants.select_key(person)
        await settle(pilot)
        assert app.main.visited[-3:] == [("runs", first), ("runs", second), ("grants", person)]
        await pilot.press("alt+left")
        await settle(pilot)
        assert app.main.active == "runs" and runs.selected == second
        await pilot.press("alt+left")
        await settle(pilot)
        assert runs.selected == first
        await pilot.press("alt+right", "alt+right")
        await settle(pilot)
        assert app.main.active == "grants" and grants.selected == person
        assert app.main.visited[-3:] == [("runs", first), ("runs", second), ("grants", person)]  # walking adds none
