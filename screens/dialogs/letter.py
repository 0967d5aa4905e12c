"""``LetterDialog``: ask for one letter (a mark's name); ``esc`` (or any other key) cancels."""

from __future__ import annotations

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label

from ..text import DETAIL_CAP, safe

__all__ = ["LetterDialog"]


class LetterDialog(ModalScreen[str | None]):
    """Dismisses with the letter pressed, or None for any other key."""

    def __init__(self, question: str, listing: str = "") -> None:
        super().__init__()
        self.question = question
        """What the letter is for, plain text."""
        self.listing = listing
        """The marks there are (one per line), plain text."""

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(Text(safe(self.question, DETAIL_CAP)), classes="dialog-title")
            if self.listing:
                yield Label(Text(safe(self.listing, DETAIL_CAP), style="dim"))
            yield Label(Text("a letter (a-z, A-Z) · esc cancels", style="dim"))

    def on_key(self, event: events.Key) -> None:
        event.stop()
        event.prevent_default()
        char = event.character or ""
        self.dismiss(char if len(char) == 1 and char.isascii() and char.isalpha() else None)
