"""Every toast an App raised, kept for the test after the toast itself is gone.

A toast leaves ``App._notifications`` when its timeout (wall-clock seconds: 4 to 8 for ours) runs
out, so reading that collection after a few slow ``settle`` rounds on a loaded machine finds
nothing. ``record_toasts`` makes every ``Notifications`` collection also keep each notification it
is given (``raised``); the App and its toasts behave exactly as before.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from textual.notifications import Notification, Notifications

_ADD = Notifications.add
WAIT_S = 60.0
"""How long ``until_said`` waits for a toast: generous, a loaded machine is slow, not wrong."""


def _add_and_keep(self: Notifications, notification: Notification) -> Notifications:
    self.__dict__.setdefault("raised", []).append(notification)
    return _ADD(self, notification)


def record_toasts(monkeypatch: pytest.MonkeyPatch) -> None:
    """From now to the end of the test, every toast raised is kept (see ``raised``)."""
    monkeypatch.setattr(Notifications, "add", _add_and_keep)


def raised(app: Any) -> list[Notification]:
    """Every notification ``app`` raised, in order, expired or not."""
    return list(app._notifications.__dict__.get("raised", []))


def said(app: Any) -> list[str]:
    """The message of every toast ``app`` raised, in order."""
    return [str(n.message) for n in raised(app)]


async def until_said(pilot: Any, check: Callable[[list[str]], bool], wait_s: float = WAIT_S) -> list[str]:
    """Pause the pilot until ``check(said(app))`` holds (or ``wait_s`` of wall time passed); returns
    what was said, for the caller's assertion."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_s
    while not check(said(pilot.app)) and loop.time() < deadline:
        await pilot.pause(0.05)
    return said(pilot.app)
