"""``/`` takes the filter language in every list; ``ctrl+s`` saves the filter as a named view in the
settings file; the palette applies a saved view; a pane's default view applies when the window opens."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import DataTable, Input, Static

from services.workspace import Settings
from tests.toasts import said
from workbench.app import make_app
from workbench.settings import load_config

from .conftest import ready, settle


async def type_text(pilot, text: str) -> None:
    for ch in text:
        await pilot.press({" ": "space", '"': "quotation_mark", ":": "colon", "-": "minus"}.get(ch, ch))


def run_ids(app) -> list[str]:
    table = app.main.query_one("#runs-table", DataTable)
    return [str(key.value) for key in table.rows]


async def test_fields_filter_the_runs_and_an_unknown_field_is_named_in_the_filter_bar(settings: Settings,
                                                                                    tmp_path: Path) -> None:
    app = make_app(settings, config=load_config(tmp_path / "config.toml"))
    async with app.run_test(size=(140, 44)) as pilot:
        ws = await ready(pilot)
        await pilot.press("3", "slash")
        await type_text(pilot, "-status:settled person:ada")
        await settle(pilot)
        expected = [v.id for v in ws.desk.runs() if not v.system and v.status != "settled" and "ada" in v.user_id]
        assert sorted(run_ids(app)) == sorted(expected) and expected
        help_line = app.main.query_one("#runs-filter-help", Static)
        assert "fields: status, person" in str(help_line.render())
        bar = app.main.query_one("#runs-filter", Input)
        bar.value += " colour:red"  # pasted whole
        await settle(pilot)
        assert "runs has no field 'colour'; its fields are status, person" in str(help_line.render())
        assert sorted(run_ids(app)) == sorted(expected)  # the last filter that parsed stays applied
        await pilot.press("end", *["backspace"] * len(" colour:red"))
        await settle(pilot)
        assert "fields: status, person" in str(help_line.render())
        await pilot.press("ctrl+s")
        await settle(pilot)
        await type_text(pilot, "mine")
        await pilot.press("tab", "down", "down", "enter")  # open the list, pick yes
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        config = load_config(tmp_path / "config.toml")
        assert config.problem is None
        view = config.views["mine"]
        assert (view.pane, view.filter, view.default) == ("runs", "-status:settled person:ada", True), said(app)
        await pilot.press("escape")
        await settle(pilot)
        assert app.main.pane("runs").filter_text == ""
        assert len(run_ids(app)) > len(expected)
        await pilot.press("ctrl+p")
        await settle(pilot)
        await type_text(pilot, "view mine")
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        assert app.main.pane("runs").filter_text == "-status:settled person:ada"
        assert sorted(run_ids(app)) == sorted(expected)


async def test_a_default_view_applies_when_the_window_opens(settings: Settings, tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[views]\ndone = { pane = "runs", filter = "status:settled", default = true }\n', encoding="utf-8")
    app = make_app(settings, config=load_config(path))
    async with app.run_test(size=(140, 44)) as pilot:
        ws = await ready(pilot)
        await settle(pilot)
        settled = [v.id for v in ws.desk.runs() if not v.system and v.status == "settled"]
        assert settled and sorted(run_ids(app)) == sorted(settled)
        assert app.main.query_one("#runs-filter", Input).value == "status:settled"
