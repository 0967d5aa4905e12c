"""Recording this window's session (``--record FILE``, the palette's start/stop) into a new file.

The recording itself is ``services.record``; these start and stop it for a window and say where it
is. Playing a recording back (``export-test``, ``replay``, ``demo --from``) is ``workbench.recording``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from screens.text import notify_plain
from services.errors import ServiceError

if TYPE_CHECKING:
    from services.record import Recorder

    from .base import WorkbenchBase

__all__ = ["start_app_recording", "stop_app_recording", "toggle_recording"]


async def start_app_recording(app: WorkbenchBase, path: Path) -> Recorder:
    """Start recording the window's workspace into ``path`` (a new file)."""
    from services.record import start_recording

    if app.workspace is None:
        raise ServiceError("the workspace is not open yet")
    recorder = await start_recording(path, app.workspace)
    app.recorder = recorder
    notify_plain(app, f"Recording into {path}", title="Recording", timeout=6)
    return recorder


async def stop_app_recording(app: WorkbenchBase) -> None:
    """Stop the window's recording (if any) and say where it is."""
    recorder = app.recorder
    if recorder is None:
        return
    app.recorder = None
    await recorder.stop()
    notify_plain(app, f"Recording stopped: {recorder.steps} steps in {recorder.path}", title="Recording", timeout=8)


async def toggle_recording(app: WorkbenchBase) -> None:
    """The palette's "Start recording" / "Stop recording": a new file in the workspace's ``recordings/``."""
    if app.recorder is not None:
        await stop_app_recording(app)
        return
    import time

    folder = Path(app.settings.path) / "recordings"
    name = f"session-{time.strftime('%Y%m%d-%H%M%S')}.jsonl"
    number = 1
    while (folder / name).exists():
        number += 1
        name = f"session-{time.strftime('%Y%m%d-%H%M%S')}-{number}.jsonl"
    await start_app_recording(app, folder / name)
