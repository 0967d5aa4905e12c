"""``HelpScreen``: every key of the focused pane, of the App and of each pane, read from the live bindings.

Keys read as people press them (``/``, ``?``, ``ctrl+p``, ``tab``, ``←``) and follow the keymap.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.events import Resize
from textual.screen import ModalScreen
from textual.widgets import Label, Static

from .help_keys import KeyLine, key_label, keys_line

__all__ = ["HelpScreen", "key_table"]


def _lines(entries: Sequence[KeyLine | Binding]) -> list[KeyLine]:
    """``KeyLine``s as they are; raw ``Binding``s read as people press them."""
    lines: list[KeyLine] = []
    for entry in entries:
        if isinstance(entry, Binding):
            keys = " / ".join(key_label(key) for key in entry.key.split(","))
            lines.append(KeyLine(keys, entry.description, entry.id or "", entry.tooltip or ""))
        else:
            lines.append(entry)
    return lines


def key_table(groups: Sequence[tuple[str, Sequence[KeyLine | Binding]]], columns: int | None = None) -> Text:
    """The keys of each group (``KeyLine``s or ``Binding``s) as aligned plain text: the key column is as
    wide as the longest keys plus two cells, so a key never runs into its description. Given the
    ``columns`` it is drawn in, a description too long for them goes on under itself, not under the keys."""
    text = Text()
    lined = [(title, _lines(entries)) for title, entries in groups]
    width = max([16, *(len(line.keys) + 2 for _title, lines in lined for line in lines)])
    room = columns - width - 2 if columns else 0
    for title, lines in lined:
        text.append(f"{title}\n", style="bold underline")
        for line in lines:
            text.append(f"  {line.keys:<{width}}", style="bold")
            parts = textwrap.wrap(line.explained, room) if room >= 20 and len(line.explained) > room else [line.explained]
            text.append(("\n" + " " * (width + 2)).join(parts) + "\n")
        text.append("\n")
    return text


class KeyTable(Static):
    """The key table, its descriptions wrapped to the width it is given (continuations stay in their column)."""

    def __init__(self, groups: Sequence[tuple[str, Sequence[KeyLine | Binding]]], *, id: str | None = None) -> None:
        super().__init__(key_table(groups), markup=False, id=id)
        self.groups = groups
        """``(title, bindings)`` per section."""

    def on_resize(self, event: Resize) -> None:
        self.update(key_table(self.groups, event.size.width))


class HelpScreen(ModalScreen[None]):
    """The key help (``?``)."""

    BINDINGS = [Binding("escape,q,question_mark", "close", "Close", tooltip="Close the key help", id="help.close")]

    def __init__(self, groups: Sequence[tuple[str, Sequence[KeyLine | Binding]]]) -> None:
        super().__init__()
        self.groups = groups
        """``(title, bindings)`` per section."""

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog dialog-wide", id="help"):
            yield Label(Text("Keys"), classes="dialog-title")
            with VerticalScroll():
                yield KeyTable(self.groups, id="help-keys")
            yield Label(Text(keys_line(self), style="dim"), classes="dialog-keys")

    def action_close(self) -> None:
        self.dismiss(None)
