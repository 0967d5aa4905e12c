"""``HelpScreen``: every key of the main screen and of each pane, read from their bindings."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Label, Static

__all__ = ["HelpScreen", "key_table"]


def key_table(groups: list[tuple[str, list[Binding]]]) -> Text:
    """The keys of each group as aligned plain text."""
    text = Text()
    for title, bindings in groups:
        text.append(f"{title}\n", style="bold underline")
        for binding in bindings:
            if binding.action.startswith("clear_filter") and binding.key == "escape":
                continue
            keys = binding.key.replace(",", " / ")
            text.append(f"  {keys:<14}", style="bold")
            text.append(f"{binding.description}\n")
        text.append("\n")
    return text


class HelpScreen(ModalScreen[None]):
    """The key help (``?``)."""

    BINDINGS = [Binding("escape,q,question_mark", "close", "Close", id="help.close")]

    def __init__(self, groups: list[tuple[str, list[Binding]]]) -> None:
        super().__init__()
        self.groups = groups
        """``(title, bindings)`` per section."""

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog dialog-wide", id="help"):
            yield Label(Text("Keys"), classes="dialog-title")
            with VerticalScroll():
                yield Static(key_table(self.groups), markup=False, id="help-keys")
            yield Label(Text("esc closes", style="dim"))

    def action_close(self) -> None:
        self.dismiss(None)
