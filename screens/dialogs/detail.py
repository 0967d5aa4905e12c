"""``DetailDialog``: a scrollable plain-text detail (an event, an outcome), with left/right paging."""

from __future__ import annotations

from collections.abc import Callable

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Label, Static

from ..help_keys import keys_line
from ..text import DETAIL_CAP, safe

__all__ = ["DetailDialog"]


class DetailDialog(ModalScreen[None]):
    """Show page ``index`` of ``count`` pages rendered by ``page(index) -> (title, body)``."""

    BINDINGS = [
        Binding("escape,q", "close", "Close", tooltip="Close the dialog", id="dialog.close"),
        Binding("left", "step(-1)", "Previous", tooltip="The previous event", id="dialog.previous"),
        Binding("right", "step(1)", "Next", tooltip="The next event", id="dialog.next"),
    ]

    def __init__(self, page: Callable[[int], tuple[str, str]], count: int, index: int) -> None:
        super().__init__()
        self.page = page
        """Renders one page as ``(title, body)`` plain strings (already sanitised)."""
        self.count = count
        """How many pages there are."""
        self.index = max(0, min(index, count - 1))
        """The page shown."""

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog dialog-wide"):
            yield Label("", id="detail-title", classes="dialog-title")
            with VerticalScroll(id="detail-scroll"):
                yield Static("", id="detail-body", markup=False)
            yield Label(Text(keys_line(self), style="dim"), classes="dialog-keys")

    def on_mount(self) -> None:
        self._show()

    def _show(self) -> None:
        title, body = self.page(self.index)
        self.query_one("#detail-title", Label).update(Text(f"{safe(title, 400)}  ({self.index + 1}/{self.count})"))
        self.query_one("#detail-body", Static).update(Text(safe(body, DETAIL_CAP)))

    def action_step(self, delta: int) -> None:
        self.index = max(0, min(self.index + delta, self.count - 1))
        self._show()

    def action_close(self) -> None:
        self.dismiss(None)
