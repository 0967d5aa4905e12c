"""Screenshots into the workspace: ``S`` (and the palette's "Screenshot") write an SVG into the
workspace's ``screenshots/`` folder and say where; a failure to write says why."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from screens.text import notify_plain

__all__ = ["save_to_workspace", "screenshot_folder"]


def screenshot_folder(app: Any) -> Path:
    """``screenshots/`` in the workspace folder."""
    return Path(app.settings.path) / "screenshots"


def save_to_workspace(app: Any) -> Path | None:
    """Write the screen as an SVG into the workspace's ``screenshots/``; returns the file, or None."""
    folder = screenshot_folder(app)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    name = f"workbench-{stamp}.svg"
    number = 1
    while (folder / name).exists():
        number += 1
        name = f"workbench-{stamp}-{number}.svg"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        path = Path(app.save_screenshot(name, str(folder)))
    except OSError as error:
        reason = error.strerror or str(error)
        message = f"Screenshot not saved: {folder / name} cannot be written ({reason})."
        app.errors.append(message)
        from .log import log_error

        log_error(app, message, error)
        notify_plain(app, message, title="Screenshot", severity="error", timeout=8)
        return None
    notify_plain(app, f"Screenshot saved: {path}", title="Screenshot", timeout=6)
    return path
