"""A window whose installed files change under it says so and keeps working: a module it loads after
start (the memory view on ``M``, the key help's list of the memory view's keys) that cannot be loaded
any more is named in a toast and written to the workspace log with its traceback, never a crash (issue 37)."""

from __future__ import annotations

import importlib.abc
import sys
from typing import Any

import pytest

from screens.help import HelpScreen
from tests.toasts import said

from .conftest import ready, settle


class Gone(importlib.abc.MetaPathFinder):
    """A finder that says one module is not installed any more (as after a reinstall that moved it)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> None:
        if fullname == self.name:
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)
        return None


async def test_m_after_the_memory_view_was_uninstalled_says_so_logs_it_and_the_window_goes_on(
        app, monkeypatch: pytest.MonkeyPatch) -> None:
    async with app.run_test(size=(160, 45)) as pilot:
        await ready(pilot)
        monkeypatch.delitem(sys.modules, "screens.memory", raising=False)
        monkeypatch.setattr(sys, "meta_path", [Gone("screens.memory"), *sys.meta_path])
        await pilot.press("M")
        await settle(pilot)
        assert app.screen is app.main and app.is_running
        toasts = [text for text in said(app) if "memory view cannot be loaded" in text]
        assert toasts and "ModuleNotFoundError" in toasts[0] and "installed files changed" in toasts[0]
        await pilot.press("3", "question_mark")  # the help still opens, without the memory view's keys
        await settle(pilot)
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        await settle(pilot)
        await pilot.press("M")
        await settle(pilot)
        assert app.screen is app.main and app.is_running
    log = app.log_file.read_text(encoding="utf-8")
    assert "The memory view cannot be loaded" in log
    assert "Traceback (most recent call last)" in log and "ModuleNotFoundError: No module named 'screens.memory'" in log
