"""The window's last known rows: what each pane showed when the window was last left, kept in the
workspace folder (``last-screen.json``) so that the next start draws them in its first frame.

They are drawn dimmed, in the panes' places, with "as of HH:MM:SS, opening…" in the header, until
the Workspace is open and the live panes replace them; nothing in them can be selected or acted
on (a key meant for a pane is refused in words until then: ``MainScreen.on_key``). The file holds
text only: each pane's lines as they were drawn, the header's counts and when. It is read before
the first frame, so reading it imports nothing beyond ``json``; a file that is missing, damaged or
of another shape is ignored (the panes then show their headings until the live state arrives).
Every line read is passed through the one sanitizer, whatever the file says.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual.widgets import Static

from services.text import clip, sanitize

if TYPE_CHECKING:
    from textual.screen import Screen
    from textual.widget import Widget

__all__ = ["SNAPSHOT_FILE", "Snapshot", "read_snapshot", "write_snapshot", "screen_lines", "snapshot_view", "BADGES"]

SNAPSHOT_FILE = "last-screen.json"
"""The file, in the workspace folder."""
MAX_LINES = 200
"""Lines kept per pane (a pane taller than that shows the rest when it is live)."""
MAX_WIDTH = 400
"""Characters kept per line."""
BADGES = ("judgments", "waiting", "refusals", "captures")
"""The header's counts kept with the rows."""


@dataclass(frozen=True)
class Snapshot:
    """What the window showed when it was last left."""

    at: float
    """When (seconds since the epoch)."""
    panes: dict[str, tuple[str, ...]]
    """Each pane's lines (its heading first), sanitised."""
    badges: dict[str, int] = field(default_factory=dict)
    """The header's counts then."""


def read_snapshot(folder: Path) -> Snapshot | None:
    """The snapshot kept in ``folder``, or None (none kept, or not one this window wrote)."""
    try:
        data = json.loads((Path(folder) / SNAPSHOT_FILE).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("version") != 1:
        return None
    at, panes, badges = data.get("at"), data.get("panes"), data.get("badges", {})
    if not isinstance(at, (int, float)) or isinstance(at, bool) or not isinstance(panes, dict) \
            or not isinstance(badges, dict):
        return None
    kept: dict[str, tuple[str, ...]] = {}
    for pane_id, lines in panes.items():
        if not isinstance(pane_id, str) or not isinstance(lines, list) \
                or not all(isinstance(line, str) for line in lines):
            return None
        kept[pane_id] = tuple(clip(sanitize(line), MAX_WIDTH) for line in lines[:MAX_LINES])
    counts = {name: value for name, value in badges.items()
              if name in BADGES and isinstance(value, int) and not isinstance(value, bool) and value >= 0}
    return Snapshot(float(at), kept, counts)


def snapshot_view(lines: tuple[str, ...]) -> Static:
    """A pane's rows from before, dimmed (plain text, sanitised when read: nothing in it is markup)."""
    return Static(Text("\n".join(lines), style="dim", no_wrap=True, overflow="crop"), classes="pane-snapshot")


def screen_lines(screen: Screen[Any], widgets: Sequence[Widget]) -> list[list[str]] | None:
    """The text each of ``widgets`` shows inside its border, line by line, as ``screen`` is composed
    now (None when the screen's composition cannot be read)."""
    try:
        strips = screen._compositor.render_strips()  # what is drawn now; nothing is marked clean by it
    except Exception:  # another Textual's compositor: no snapshot rather than a wrong one
        return None
    shown = []
    for widget in widgets:
        region = widget.content_region
        lines = [strip.crop(region.x, region.right).text.rstrip() for strip in strips[region.y:region.bottom]]
        while lines and not lines[-1]:
            lines.pop()
        shown.append(lines)
    return shown


def write_snapshot(folder: Path, panes: dict[str, list[str]], badges: dict[str, int], at: float | None = None) -> None:
    """Keep ``panes`` (each pane's lines) and ``badges`` as the workspace's snapshot (written whole,
    under another name first, then renamed over the old one). A folder that is not there is left so."""
    folder = Path(folder)
    if not folder.is_dir():
        return
    document = {"version": 1, "at": time.time() if at is None else at,
                "panes": {pane_id: [line[:MAX_WIDTH] for line in lines[:MAX_LINES]] for pane_id, lines in panes.items()},
                "badges": {name: badges[name] for name in BADGES if name in badges}}
    fd, temp = tempfile.mkstemp(prefix=".last-screen.", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(document, out, ensure_ascii=False)
        os.replace(temp, folder / SNAPSHOT_FILE)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
