"""``ConfirmDialog``: a yes/no question as a typed modal (``True`` when confirmed)."""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Label

from ..help_keys import keys_line
from ..text import DETAIL_CAP, safe

__all__ = ["ConfirmDialog", "wants_confirmation"]


def wants_confirmation(app: object, what: str) -> bool:
    """Whether the settings ask to confirm ``what`` (``approve``, ``restore``, ``quit``): yes unless
    the settings file says ``confirm_<what> = false``."""
    return bool(getattr(getattr(app, "config", None), f"confirm_{what}", True))


class ConfirmDialog(ModalScreen[bool]):
    """``y``/``enter`` confirms, ``n``/``esc`` declines."""

    BINDINGS = [
        Binding("y", "answer(True)", "Yes", tooltip="Yes: do what the dialog asks", id="dialog.yes"),
        Binding("n,escape", "answer(False)", "No", tooltip="No: leave everything as it is", id="dialog.no"),
    ]

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question
        """The question, plain text (sanitised again when shown)."""

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(Text(safe(self.question, DETAIL_CAP)), classes="dialog-title")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Yes (y)", variant="error", id="yes")
                yield Button("No (n)", id="no")
            yield Label(Text(keys_line(self), style="dim"), classes="dialog-keys")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, value: bool) -> None:
        self.dismiss(value)
