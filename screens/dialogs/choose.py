"""``ChooseDialog``: pick one of a few labelled texts (``enter``, or its number), or ``esc``; returns the text or None."""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, OptionList
from textual.widgets.option_list import Option

from ..help_keys import keys_line
from ..text import safe

__all__ = ["ChooseDialog"]


class ChooseDialog(ModalScreen[str | None]):
    """A short list of ``(label, text)``; each row shows the label and the text's first line."""

    BINDINGS = [
        Binding("escape", "cancel", "Cancel", tooltip="Close the dialog without doing anything", id="dialog.cancel"),
        *[Binding(str(n), f"pick({n - 1})", f"Choose {n}", show=False, tooltip=f"Choose entry {n} of the list")
          for n in range(1, 10)],
    ]

    def __init__(self, title: str, choices: list[tuple[str, str]]) -> None:
        super().__init__()
        self.choose_title = title
        self.choices = choices

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(Text(safe(self.choose_title, 200)), classes="dialog-title")
            options = []
            for index, (label, text) in enumerate(self.choices):
                first = text.splitlines()[0] if text else ""
                row = Text(f"{index + 1} ", style="bold")
                row.append(safe(label, 60), style="bold")
                row.append(f"  {safe(first, 60)}", style="dim")
                options.append(Option(row, id=str(index)))
            yield OptionList(*options, id="choices")
            last = min(len(self.choices), 9)
            yield Label(Text(keys_line(self) + f"   1-{last} or enter choose   ↑ ↓ move", style="dim"),
                        classes="dialog-keys")

    @on(OptionList.OptionSelected)
    def _chosen(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(self.choices[int(event.option.id or 0)][1])

    def action_pick(self, index: int) -> None:
        """The choice numbered ``index + 1`` on screen (a number past the list does nothing)."""
        if 0 <= index < len(self.choices):
            self.dismiss(self.choices[index][1])

    def action_cancel(self) -> None:
        self.dismiss(None)
