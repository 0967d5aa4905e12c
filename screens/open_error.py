"""``OpenErrorScreen``: the one screen shown when the workspace cannot open.

It names the file (or the canvas server's URL, its password masked), says the cause and what to
do, in plain words (the service's ``WorkspaceOpenError``), and quits with exit status 2, the CLI's
status for a workspace it cannot use. Nothing behind it waits for a workspace that will not come.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import Static

from .text import safe

if TYPE_CHECKING:
    from services.open_errors import WorkspaceOpenError

__all__ = ["OpenErrorScreen", "OPEN_FAILED_STATUS"]

OPEN_FAILED_STATUS = 2
"""The exit status of a workbench whose workspace could not open."""


class OpenErrorScreen(Screen[None]):
    """The workspace's file, the cause and the remedy; ``q`` quits with status 2."""

    BINDINGS = [
        Binding("q,escape", "app.quit", "Quit",
                tooltip="Quit: the workspace did not open", id="workbench.open_error.quit"),
    ]

    DEFAULT_CSS = """
    OpenErrorScreen { align: center middle; }
    OpenErrorScreen > Vertical {
        width: 90%;
        max-width: 110;
        height: auto;
        border: thick $error;
        padding: 1 2;
        background: $surface;
    }
    """

    def __init__(self, error: WorkspaceOpenError) -> None:
        super().__init__(id="open-error")
        self.error = error
        """The ``WorkspaceOpenError`` (``path``, ``cause``, ``remedy``)."""

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(self.explanation(), id="open-error-text", markup=False)

    def explanation(self) -> Text:
        """The error as plain, sanitised lines: what, the file, the cause, what to do, how to leave."""
        error = self.error
        text = Text()
        text.append("The workspace cannot open.\n\n", style="bold")
        where = str(getattr(error, "path", ""))
        text.append("database:    " if "://" in where else "file:        ", style="bold")  # a server's URL, password masked
        text.append(safe(where, 1000) + "\n")
        text.append("cause:       ", style="bold")
        text.append(safe(getattr(error, "cause", error), 2000) + "\n")
        text.append("what to do:  ", style="bold")
        text.append(safe(getattr(error, "remedy", ""), 2000) + "\n\n")
        text.append(f"q quits (exit status {OPEN_FAILED_STATUS})", style="dim")
        return text
