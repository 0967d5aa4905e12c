"""Settings that persist (theme saved on change, default workspace, keymap by binding id, read-only as a
default; a bad file names its line and the app starts with defaults) and ``--read-only``."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from screens.widgets.badges import BadgeBar
from services.workspace import Settings
from tests.toasts import until_said
from workbench import cli
from workbench.app import make_app
from workbench.readonly import CHANGING_BINDINGS
from workbench.settings import ConfigWriteError, load_config, save_setting

from .conftest import ready, settle


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_a_good_settings_file_is_read(tmp_path: Path) -> None:
    config = load_config(write(tmp_path / "config.toml", 'theme = "nord"\nworkspace = "~/ws"\nlayout = "single"\n'
                                                         'read_only = true\n[keymap]\n"workbench.runs.reply" = "ctrl+r"\n'))
    assert config.problem is None
    assert (config.theme, config.layout, config.read_only) == ("nord", "single", True)
    assert config.workspace == Path("~/ws").expanduser()
    assert config.keymap == {"workbench.runs.reply": "ctrl+r"}


@pytest.mark.parametrize(("text", "line", "words"), [
    ('theme = "nord"\nlayout = \n', 2, "invalid value"),
    ('theme = "nord"\n\ncolour = "red"\n', 3, "unknown setting 'colour'"),
    ('read_only = "yes"\n', 1, "read_only must be a true or false"),
    ('layout = "tiles"\n', 1, "layout must be one of dashboard, single"),
    ('[keymap]\n"workbench.quit" = ""\n', 2, "must be a non-empty string"),
])
def test_bad_settings_file_names_the_line_and_gives_defaults(tmp_path: Path, text: str, line: int, words: str) -> None:
    path = write(tmp_path / "config.toml", text)
    config = load_config(path)
    assert config.problem is not None
    assert f"{path} line {line}" in config.problem and words in config.problem and "using the defaults" in config.problem
    assert (config.theme, config.layout, config.read_only, config.keymap) == (None, None, False, {})
    assert path.read_text(encoding="utf-8") == text  # left as written


def test_missing_settings_file_is_all_defaults(tmp_path: Path) -> None:
    config = load_config(tmp_path / "none.toml")
    assert config.problem is None and config.theme is None


def test_unwritable_settings_file_is_refused_and_the_old_file_kept(tmp_path: Path, monkeypatch) -> None:
    path = write(tmp_path / "config.toml", '# mine\ntheme = "nord"\n[keymap]\n"workbench.quit" = "q"\n')

    def full(*_args: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(ConfigWriteError, match="cannot save theme to .*No space left"):
        save_setting(path, "theme", "gruvbox")
    assert path.read_text(encoding="utf-8") == '# mine\ntheme = "nord"\n[keymap]\n"workbench.quit" = "q"\n'
    assert [p.name for p in tmp_path.iterdir()] == ["config.toml"]


async def test_theme_change_is_saved_and_keymap_applied(tmp_path: Path) -> None:
    path = write(tmp_path / "config.toml", '# my settings\ntheme = "nord"\n[keymap]\n"workbench.show_help" = "f1"\n')
    app = make_app(Settings(path=tmp_path / "ws"), config=load_config(path))
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        assert app.theme == "nord"
        await pilot.press("f1")
        await settle(pilot)
        assert type(app.screen).__name__ == "HelpScreen"
        await pilot.press("escape")
        app.theme = "gruvbox"
        await settle(pilot)
    text = path.read_text(encoding="utf-8")
    assert 'theme = "gruvbox"' in text and text.startswith("# my settings\n") and '"workbench.show_help" = "f1"' in text
    assert load_config(path).theme == "gruvbox"


async def test_bad_settings_file_starts_with_defaults_and_says_which_line(tmp_path: Path) -> None:
    path = write(tmp_path / "config.toml", 'theme = "nord"\nread_only = maybe\n')
    app = make_app(Settings(path=tmp_path / "ws"), config=load_config(path))
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        assert app.theme != "nord" and not app.read_only
        assert any(f"{path} line 2" in e for e in app.errors)
        app.theme = "gruvbox"
        await settle(pilot)
    assert path.read_text(encoding="utf-8") == 'theme = "nord"\nread_only = maybe\n'  # never rewritten while bad


def test_cli_takes_the_default_workspace_and_read_only_from_the_settings(tmp_path: Path, monkeypatch) -> None:
    path = write(tmp_path / "config.toml", f'workspace = "{tmp_path / "mine"}"\nread_only = true\n')
    built: list[object] = []

    class Stop(Exception):
        pass

    def fake_make_app(settings: Settings, **kwargs: object) -> object:
        built.append((settings.path, kwargs["read_only"], kwargs["config"].read_only))  # type: ignore[union-attr]
        raise Stop

    monkeypatch.setattr("workbench.app.make_app", fake_make_app)
    with pytest.raises(Stop):
        cli.main(["--config", str(path)])
    assert built == [(tmp_path / "mine", False, True)]


async def test_read_only_refuses_every_state_changing_action_with_a_reason(tmp_path: Path) -> None:
    app = make_app(Settings(path=tmp_path / "ws"), read_only=True)
    async with app.run_test(size=(120, 40)) as pilot:
        ws = await ready(pilot)
        runs_before = [(v.id, v.status) for v in ws.desk.runs()]
        assert "READ-ONLY" in str(app.main.query_one("#badges", BadgeBar).render())
        for key in ("3", "x", "d", "r", "n", "s"):
            await pilot.press(key)
        await settle(pilot)
        assert type(app.screen).__name__ == "MainScreen"  # no dialog opened
        await pilot.press("4", "k", "5", "y", "2", "R")
        await settle(pilot)
        assert type(app.screen).__name__ == "MainScreen"
        assert [(v.id, v.status) for v in ws.desk.runs()] == runs_before
        toasts = await until_said(pilot, lambda words: any(t.startswith("Read-only: Cancel would") for t in words))
        assert any(t.startswith("Read-only: Cancel would change the workspace") for t in toasts)
        assert all("\n" not in t for t in toasts)
        await pilot.press("question_mark")  # looking stays possible
        await settle(pilot)
        assert type(app.screen).__name__ == "HelpScreen"


async def test_read_only_covers_every_pane_binding_that_changes_state(app) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        ids = {b.id for pane in app.main.panes() for b in pane.BINDINGS if b.id}
        looking = {i for i in ids if i.rsplit(".", 1)[-1] in {
            "toggle_pause", "toggle_view", "toggle_wrap", "event_detail", "open_grant", "clear_filter",
            "next_candidate", "go_back", "follow_edge", "tick_outcome",
            "boot_context", "who_loads", "read_as", "open_review",  # what a node loads, who loads it, read as, a PR link
            "next_turn", "previous_turn", "compare_run"}}  # the turn cursor, comparing two runs
        assert ids - looking <= CHANGING_BINDINGS
        assert ids - looking  # the panes do have actions that change state


def test_saved_views_are_written_into_the_views_table_keeping_every_other_line(tmp_path: Path) -> None:
    from workbench.settings import SavedView, save_view

    path = write(tmp_path / "config.toml", '# mine\ntheme = "nord"\n[keymap]\n"workbench.quit" = "q"\n')
    save_view(path, SavedView("waiting", "runs", "status:waiting_on_user", default=True))
    save_view(path, SavedView("to judge", "judgments", 'kind:harvest "bee hives"'))
    save_view(path, SavedView("idle", "runs", "status:idle", default=True))  # the pane's default moves here
    text = path.read_text(encoding="utf-8")
    assert text.startswith('# mine\ntheme = "nord"\n[keymap]\n"workbench.quit" = "q"\n')
    config = load_config(path)
    assert config.problem is None and config.keymap == {"workbench.quit": "q"}
    assert {n: (v.pane, v.filter, v.default) for n, v in config.views.items()} == {
        "waiting": ("runs", "status:waiting_on_user", False), "to judge": ("judgments", 'kind:harvest "bee hives"', False),
        "idle": ("runs", "status:idle", True)}


@pytest.mark.parametrize(("views", "words"), [
    ('x = { pane = "runs", filter = "colour:red" }', "the view 'x''s filter: runs has no field 'colour'"),
    ('x = { pane = "memory", filter = "a" }', "pane must be one of"),
    ('x = { pane = "runs" }', "needs a pane and a filter"),
    ('x = { pane = "runs", filter = "a", sort = "b" }', "unknown key 'sort'"),
    ('x = "status:idle"', "must be a table"),
    ('x = { pane = "runs", filter = "a", default = true }\ny = { pane = "runs", filter = "b", default = true }',
     "both the default of runs"),
])
def test_a_bad_saved_view_names_its_line_and_the_file_is_not_rewritten(tmp_path: Path, views: str, words: str) -> None:
    from workbench.settings import SavedView, save_view

    text = f'theme = "nord"\n[views]\n{views}\n'
    path = write(tmp_path / "config.toml", text)
    config = load_config(path)
    line = 2 + views.count("\n") + 1  # the last view's line (the second default is the one named)
    assert config.problem is not None and f"{path} line {line}" in config.problem and words in config.problem
    assert config.views == {}
    with pytest.raises(ConfigWriteError, match="cannot save the view"):
        save_view(path, SavedView("y", "runs", "status:idle"))
    assert path.read_text(encoding="utf-8") == text
