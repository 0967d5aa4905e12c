"""``CaptionBar``: the demo's narration (step number, caption, paused state) and what the step's actions said.

In the tour, what a toast would say is narrated here on its own line (``said``), so no toast ever
covers a pane in the tour or in its pictures.
"""

from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Static

from ..text import safe, tone

__all__ = ["CaptionBar", "SAID_SHOWN"]

SAID_SHOWN = 3
"""The latest things a step said that the narration shows (older ones give way)."""


class CaptionBar(Static):
    """One caption of the walkthrough, with its position, whether the tour is paused and what the step said."""

    DEFAULT_CSS = """
    CaptionBar {
        height: auto;
        max-height: 5;
        background: $boost;
        color: $text;
        border-top: heavy $accent;
        padding: 0 1;
    }
    """

    caption: reactive[str] = reactive("", layout=True)
    """The narration of the current step (plain text)."""
    position: reactive[str] = reactive("")
    """``3/11``."""
    last: reactive[bool] = reactive(False)
    """The last step: there is no next one to offer."""
    paused: reactive[bool] = reactive(False)
    """The tour waits for space or →."""
    said: reactive[tuple[tuple[str, str], ...]] = reactive((), layout=True)
    """``(text, severity)`` of what the step's actions said (what a toast would show), oldest first."""

    def render(self) -> Text:
        text = Text(f"▶ {self.position}  " if not self.paused else f"⏸ {self.position}  ", style="bold")
        text.append(safe(self.caption, 600))
        text.append("   (q leaves)" if self.last else "   (space pause · → next)", style="dim")
        if self.said:
            text.append("\n")
            text.append("said: ", style="dim")
            for number, (message, severity) in enumerate(self.said[-SAID_SHOWN:]):
                if number:
                    text.append("  ·  ", style="dim")
                style = tone("bad", bold=True) if severity == "error" else tone("warn") if severity == "warning" else ""
                text.append(safe(message, 240), style=style)
        return text
