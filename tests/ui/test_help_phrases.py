"""The key help explains every key in a phrase, read from the bindings (their ``tooltip``), in every screen,
pane, widget and dialog, the memory view included; ``?`` works inside the memory view, and the main help
lists the memory view's keys; a narrow runs footer keeps the keys that change a run first (issue 37)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

from textual.binding import Binding
from textual.dom import DOMNode
from textual.widgets import Static
from textual.widgets._footer import FooterKey

import screens
import workbench
from screens.help import HelpScreen, key_table
from screens.memory import MemoryScreen

from .conftest import ready, settle

TERSE = ("Raw/chat", "Event", "Grant", "Candidate", "Read as…")
"""Footer words that said too little as the help's whole explanation."""


def _bound_classes() -> list[type[DOMNode]]:
    classes: list[type[DOMNode]] = []
    for package in (screens, workbench):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if info.name.endswith("__main__"):
                continue
            module = importlib.import_module(info.name)
            for _name, cls in inspect.getmembers(module, inspect.isclass):
                if cls.__module__ == module.__name__ and issubclass(cls, DOMNode) and "BINDINGS" in cls.__dict__:
                    classes.append(cls)
    return classes


def test_every_binding_of_every_screen_pane_and_dialog_has_a_help_phrase() -> None:
    classes = _bound_classes()
    names = {cls.__name__ for cls in classes}
    assert {"MainScreen", "RunsPane", "MemoryScreen", "ConfirmDialog", "WorkbenchApp", "NeighbourhoodGraph"} <= names, names
    missing = []
    for cls in classes:
        for entry in cls.__dict__["BINDINGS"]:
            binding = entry if isinstance(entry, Binding) else Binding(*entry)
            phrase = binding.tooltip or ""
            if len(phrase.split()) < 3 or phrase == binding.description:
                missing.append(f"{cls.__name__}: {binding.key} {binding.action}")
    assert not missing, missing


async def test_help_explains_keys_in_phrases_and_lists_the_memory_view(app) -> None:
    async with app.run_test(size=(160, 45)) as pilot:
        await ready(pilot)
        await pilot.press("3", "question_mark")
        await settle(pilot)
        assert isinstance(app.screen, HelpScreen)
        text = key_table(app.screen.groups).plain
        explained = [line.strip().split("  ", 1)[-1].strip() for line in text.splitlines() if line.startswith("  ")]
        for terse in TERSE:
            assert terse not in explained, terse
        assert "Switch the stream between the conversation and the raw events" in text
        assert "M memory view" in text and "Sweep the outbox now" in text
        assert "Search what the memory service holds" in text


async def test_question_mark_inside_the_memory_view_shows_its_keys(app) -> None:
    async with app.run_test(size=(160, 45)) as pilot:
        await ready(pilot)
        await pilot.press("M")
        await settle(pilot)
        assert isinstance(app.screen, MemoryScreen)
        app.screen.set_focus(None)
        await pilot.press("question_mark")
        await settle(pilot)
        assert isinstance(app.screen, HelpScreen)
        text = str(app.screen.query_one("#help-keys", Static).render())
        assert text.startswith("M memory view")
        for phrase in ("Sweep the outbox now", "quarantined line aside", "Back to the panes", "Quit the workbench"):
            assert phrase in text, phrase
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, MemoryScreen)


async def test_at_100x30_the_runs_footer_keeps_the_keys_that_change_a_run(app) -> None:
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        await pilot.press("3")
        await settle(pilot)
        keys = [k.key_display for k in app.main.query(FooterKey) if "-command-palette" not in k.classes]
        for key in ("n", "m", "x", "e", "d", "?", "q"):
            assert key in keys, keys


def test_a_long_phrase_goes_on_under_itself_not_under_the_keys() -> None:
    """At a narrow width a description wraps within its own column (issue 37: wrapped lines at column 0)."""
    from screens.help_keys import KeyLine

    phrase = "Fork the run at the cursor's turn (else its last turn), with that message to edit it first"
    rows = key_table([("runs", [KeyLine("F", "Fork", "workbench.runs.fork_run", phrase)])], columns=60).plain.splitlines()
    described = [row for row in rows[1:] if row.strip()]
    assert len(described) > 1  # it did wrap
    start = described[0].index("Fork the run")
    assert all(row[:start].strip() == "" and row[start] != " " for row in described[1:])
    assert " ".join([described[0][start:], *(row.strip() for row in described[1:])]) == phrase
