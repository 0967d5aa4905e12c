"""Screenshots: ``S`` (and the palette's "Screenshot") write an SVG into the workspace's ``screenshots/``
folder and say where; a failure to write says why.

A picture shows the panes, not the toasts piled over them: ``picture`` hides the screen's toasts for
the one frame it draws (they stay listed and come back at once, with their own timeouts), so what the
operator keeps on screen is what the file shows. Only then does the "Screenshot saved" toast appear.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import TYPE_CHECKING

from textual.widgets._toast import ToastRack  # the screen's toast layer (no public alias)

from screens.text import notify_plain

if TYPE_CHECKING:
    from .base import WorkbenchBase

__all__ = ["picture", "save_to_workspace", "screenshot_folder", "take_screenshot"]


def screenshot_folder(app: WorkbenchBase) -> Path:
    """``screenshots/`` in the workspace folder."""
    return Path(app.settings.path) / "screenshots"


async def picture(app: WorkbenchBase, filename: str, path: str | None = None) -> str:
    """Save the current screen as an SVG with no toast in it; returns the file written."""
    racks = [rack for rack in app.screen.query(ToastRack) if rack.display]
    for rack in racks:
        rack.display = False
    try:
        if racks:
            drawn: asyncio.Future[None] = asyncio.get_running_loop().create_future()

            def laid_out() -> None:
                if not drawn.done():
                    drawn.set_result(None)
            app.screen.call_after_refresh(laid_out)
            await drawn  # the screen laid out again without its toasts
        return str(app.save_screenshot(filename, path))
    finally:
        for rack in racks:
            rack.display = True


async def save_to_workspace(app: WorkbenchBase) -> Path | None:
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
        path = Path(await picture(app, name, str(folder)))
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


def take_screenshot(app: WorkbenchBase) -> None:
    """Start writing a screenshot (a worker: the toasts are hidden for a frame first)."""
    app.run_worker(save_to_workspace(app), group="screenshot", exit_on_error=False)
