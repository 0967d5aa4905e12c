"""``DeliveryDialog``: a node's boot context, or who loads a document, as styled plain text.

``boot_text`` and ``loads_text`` render the canvas's read models (``BootContext``, a list of
``LoadVerdict``) through the one sanitizer; the dialog only shows them and closes on ``esc``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Label, Static


if TYPE_CHECKING:
    from services.canvas import BootContext, LoadVerdict

from ..help_keys import keys_line
from ..text import hanging, safe

__all__ = ["DeliveryDialog", "boot_text", "loads_text"]

_REASONS = {
    "privacy": "privacy",
    "not_eligible": "not eligible",
    "shadowed": "shadowed",
    "no_rule": "no rule for this event",
    "if_mismatch": "if does not match",
    "capped": "capped by the profile",
}


def boot_text(context: BootContext, width: int = 100) -> Text:
    """What a node loads, in boot order, with level and why; then what it does not load, with why. A why
    or a preview wider than ``width`` wraps under itself, not at column 0."""
    text = Text()
    text.append(f"{safe(context.node_name, 120)} · kind {safe(context.kind, 60)} · mode {safe(context.mode, 40)} · "
                f"profile {safe(context.profile or '—', 80)} · on {safe(context.event, 40)}\n", style="bold")
    text.append(f"seen as {safe(context.seen_as, 300)}\n\n", style="dim")
    text.append(f"loads ({len(context.items)}), in boot order\n", style="bold underline")
    if not context.items:
        text.append("  nothing\n", style="dim")
    for n, item in enumerate(context.items, 1):
        text.append(f"{n}. {safe(item.document.full_name, 200)}", style="bold")
        text.append(f" · {safe(item.level, 20)}\n")
        text.append_text(hanging("     why: ", safe(item.why, 400), width, style="dim"))
        if item.level != "name":
            text.append_text(hanging("     ", safe(item.preview, 300), width))
        for name, preview in item.attached[:10]:
            text.append(f"     ↳ {safe(name, 160)}: {safe(preview, 200)}\n", style="dim")
    text.append(f"\nin its view, not loaded ({len(context.not_loaded)})\n", style="bold underline")
    if not context.not_loaded:
        text.append("  none\n", style="dim")
    for skipped in context.not_loaded:
        text.append(f"  ✗ {safe(skipped.document.full_name, 200)}", style="bold")
        text.append(f"  {_REASONS.get(skipped.reason, safe(skipped.reason, 40))}: {safe(skipped.detail, 400)}\n")
    return text


def loads_text(name: str, verdicts: list[LoadVerdict], event: str = "boot") -> Text:
    """Which nodes load a document on ``event`` (with the level) and which do not (with the reason); the
    dialog's title says whose (``who loads X on boot``), so the body does not say it again."""
    text = Text()
    loaders = [v for v in verdicts if v.loaded]
    others = [v for v in verdicts if not v.loaded]
    text.append(f"loaded by ({len(loaders)})\n", style="bold underline")
    if not loaders:
        text.append("  no node\n", style="dim")
    for v in loaders:
        text.append(f"  ✓ {safe(v.node_name, 120)}", style="bold")
        text.append(f" ({safe(v.node, 80)}) {safe(v.detail, 300)}\n")
    text.append(f"\nnot loaded by ({len(others)})\n", style="bold underline")
    if not others:
        text.append("  no node\n", style="dim")
    for v in others:
        text.append(f"  ✗ {safe(v.node_name, 120)}", style="bold")
        text.append(f" ({safe(v.node, 80)}) {_REASONS.get(v.reason, safe(v.reason, 40))}: {safe(v.detail, 300)}\n")
    return text


class DeliveryDialog(ModalScreen[None]):
    """Show a rendered boot context or who-loads-it list."""

    BINDINGS = [Binding("escape,q", "close", "Close", tooltip="Close the dialog", id="dialog.close")]

    def __init__(self, title: str, body: Text | Callable[[int], Text]) -> None:
        super().__init__()
        self.dialog_title = title
        """The title line (already sanitised)."""
        self.body = body
        """The rendered text, or what renders it for a width (wrapped rows keep their indent)."""

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog dialog-wide"):
            yield Label(Text(safe(self.dialog_title, 300)), classes="dialog-title", id="delivery-title")
            with VerticalScroll(id="delivery-scroll"):
                yield Static(self.body if isinstance(self.body, Text) else "", id="delivery-body", markup=False)
            yield Label(Text(keys_line(self), style="dim"), classes="dialog-keys")

    def on_mount(self) -> None:
        self.call_after_refresh(self.on_resize)

    def on_resize(self) -> None:
        """Render the body for the width the dialog has (on mount, and again when it changes)."""
        if not isinstance(self.body, Text):
            body = self.query_one("#delivery-body", Static)
            width = body.content_region.width or self.query_one("#delivery-scroll").content_region.width or 100
            body.update(self.body(width))

    def action_close(self) -> None:
        self.dismiss(None)
