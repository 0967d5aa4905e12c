"""Help from the bindings: ``?`` lists the focused pane's and the App's keys as pressed; dialogs show
their own keys; the footer keeps ``?`` and ``q`` and the pane's first keys when the width is short."""

from __future__ import annotations

from textual.widgets import Static
from textual.widgets._footer import FooterKey

from screens.dialogs import ConfirmDialog
from screens.help import HelpScreen

from .conftest import ready, settle


async def test_help_lists_focused_pane_and_app_keys_with_human_names(app) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press("3")
        await pilot.press("question_mark")
        await settle(pilot)
        assert isinstance(app.screen, HelpScreen)
        text = str(app.screen.query_one("#help-keys", Static).render())
        first = text.splitlines()[0]
        assert first.startswith("3 runs (focused)")
        for shown in ("/", "?", "ctrl+p", "tab", "shift+tab", "esc", "←", "Reply", "Cancel", "Quit", "Command palette"):
            assert shown in text, shown
        assert "slash" not in text and "question_mark" not in text
        assert "space" in text  # the judgments' and the inbox's space are listed with their panes
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


async def test_help_follows_the_keymap(app) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        app.update_keymap({"workbench.runs.reply": "ctrl+r"})
        await pilot.press("3", "question_mark")
        await settle(pilot)
        text = str(app.screen.query_one("#help-keys", Static).render())
        assert any(line.strip().startswith("ctrl+r") and "Reply" in line for line in text.splitlines())


async def test_dialog_shows_its_own_keys(app) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        app.push_screen(ConfirmDialog("Delete?"))
        await settle(pilot)
        hint = str(app.screen.query_one(".dialog-keys").render())
        assert "y yes" in hint and "n / esc no" in hint
        assert "Reply" not in hint


async def test_narrow_footer_keeps_help_and_quit_and_the_first_pane_keys(app) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press("3")
        await settle(pilot)
        keys = [k.key_display for k in app.main.query(FooterKey) if "-command-palette" not in k.classes]
        assert "?" in keys and "q" in keys
        assert keys[0] == "n"  # the runs pane's first key first
        assert "1" not in keys  # the pane numbers live in the strip when room is short
        total = sum(len(k.key_display) + len(k.description) + 3 for k in app.main.query(FooterKey))
        assert total <= 120
