"""``KeyFooter``: the footer that keeps the keys that matter when the terminal is narrow.

Textual's ``Footer`` lays every shown binding out in order and cuts the row at the edge, so at 120
columns the runs pane's last keys and ``q`` never showed. This footer measures: when everything fits
it shows everything; when not, it always keeps ``?`` (the full list) and ``q``, fills the rest with the
focused pane's keys in their declared order (most important first), and leaves out the pane numbers
(the strip and the pane titles show them). Keys read as people press them (``/``, ``?``, ``ctrl+p``),
each drawn as a chip with its label set apart from the next key (``main.tcss``), so ``space Pause`` reads
as the key ``space``.
"""

from __future__ import annotations

from collections import defaultdict

from textual.app import ComposeResult
from textual.binding import Binding
from textual.events import Resize
from textual.screen import Screen
from textual.widgets import Footer
from textual.widgets._footer import (
    FooterKey,  # the footer's own key widget (no public alias)
)

from ..help_keys import key_label

__all__ = ["ESSENTIAL_ACTIONS", "KeyFooter", "fit_keys"]

ESSENTIAL_ACTIONS = ("show_help", "quit")
"""Always shown: the key help (every other key is there) and quit."""
PALETTE_WIDTH = 14
"""Cells the command palette's key takes on the right."""


def _width(binding: Binding) -> int:
    """Cells one key takes in the footer (the key chip, its padding, the description and the gap after it)."""
    return len(key_label(binding.key)) + 2 + 1 + len(binding.description) + 2


def fit_keys(bindings: list[Binding], width: int) -> list[Binding]:
    """The bindings that fit in ``width`` cells: all of them, or the essentials plus the first that fit."""
    if sum(_width(b) for b in bindings) <= width:
        return bindings
    essentials = [b for b in bindings if b.action in ESSENTIAL_ACTIONS]
    room = width - sum(_width(b) for b in essentials)
    kept: list[Binding] = []
    for binding in bindings:
        if binding in essentials or binding.action.startswith("show_pane"):
            continue
        if _width(binding) <= room:
            kept.append(binding)
            room -= _width(binding)
    return [*kept, *essentials]


class KeyFooter(Footer):
    """The main screen's footer (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self.drawn: tuple[tuple[str, str, bool], ...] | None = None
        """The keys drawn now, as ``(key, description, enabled)`` (None: none drawn yet)."""
        self.recomposing = 0
        """Redraws under way (their keys are not all mounted yet)."""

    def wanted(self) -> tuple[tuple[str, str, bool], ...]:
        """The keys the bindings and the width call for now, as ``drawn`` holds them."""
        _first, shown = self._fitting()
        return tuple((b.key, b.description, _first[b.action][1]) for b in shown)

    @property
    def settled(self) -> bool:
        """The keys drawn are the ones wanted and every one is mounted (a picture may be taken)."""
        return (not self.recomposing and self.drawn == self.wanted()
                and all(key.is_mounted for key in self.children))

    def _fitting(self) -> tuple[dict[str, tuple[Binding, bool, str]], list[Binding]]:
        active = self.screen.active_bindings
        per_action: defaultdict[str, list[tuple[Binding, bool, str]]] = defaultdict(list)
        for _node, binding, enabled, tooltip in active.values():
            if binding.show:
                per_action[binding.action].append((binding, enabled, tooltip))
        first = {entries[0][0].action: entries[0] for entries in per_action.values()}
        width = (self.size.width or self.app.size.width) - PALETTE_WIDTH
        return first, fit_keys([entry[0] for entry in first.values()], width)

    def bindings_changed(self, screen: Screen[object]) -> None:
        """Redraw only when the keys to show changed (a redraw replaces every key: fewer of them, less flicker)."""
        self._bindings_ready = True
        if not screen.app.app_focus or not self.is_attached or screen is not self.screen:
            return
        if self.drawn is not None and self.drawn == self.wanted():
            return
        self.call_after_refresh(self.recompose)

    async def recompose(self) -> None:
        self.recomposing += 1
        try:
            await super().recompose()
        finally:
            self.recomposing -= 1

    def compose(self) -> ComposeResult:
        if not self._bindings_ready:
            return
        first, shown = self._fitting()
        self.drawn = tuple((b.key, b.description, first[b.action][1]) for b in shown)
        self.styles.grid_size_columns = len(shown) + 1
        for binding in shown:
            _binding, enabled, tooltip = first[binding.action]
            yield FooterKey(binding.key, key_label(binding.key), binding.description, binding.action,
                            disabled=not enabled, tooltip=tooltip).data_bind(compact=Footer.compact)
        if self.show_command_palette and self.app.ENABLE_COMMAND_PALETTE:
            palette = self.screen.active_bindings.get(self.app.COMMAND_PALETTE_BINDING)
            if palette is not None:
                _node, binding, enabled, _tooltip = palette
                yield FooterKey(binding.key, self.app.get_key_display(binding), binding.description, binding.action,
                                classes="-command-palette", disabled=not enabled,
                                tooltip=binding.tooltip or binding.description)

    def on_resize(self, event: Resize) -> None:
        if self._bindings_ready and self.is_attached:
            self.call_after_refresh(self.recompose)
