"""``CaptionBar``: the demo's narration line (step number, caption, paused state)."""

from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Static

from ..text import safe

__all__ = ["CaptionBar"]


class CaptionBar(Static):
    """One caption of the walkthrough, with its position and whether the tour is paused."""

    DEFAULT_CSS = """
    CaptionBar {
        height: auto;
        max-height: 4;
        background: $boost;
        color: $text;
        border-top: heavy $accent;
        padding: 0 1;
    }
    """

    caption: reactive[str] = reactive("")
    """The narration of the current step (plain text)."""
    position: reactive[str] = reactive("")
    """``3/11``."""
    paused: reactive[bool] = reactive(False)
    """The tour waits for space or →."""

    def render(self) -> Text:
        text = Text(f"▶ {self.position}  " if not self.paused else f"⏸ {self.position}  ", style="bold")
        text.append(safe(self.caption, 600))
        text.append("   (space pause · → next)", style="dim")
        return text
