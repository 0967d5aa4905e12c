"""Keys as people press them, read from the live bindings (after the keymap): the help and the footers use these.

``key_label("slash")`` is ``/``, ``key_label("ctrl+p")`` is ``ctrl+p``, ``key_label("left")`` is ``←``.
``effective_bindings(node)`` is a node's bindings after the App's keymap (a remapped key shows its new
key), merged per action so ``n,escape`` reads ``n / esc``. ``help_groups(screen, panes, active)`` builds
the groups the ``?`` screen lists: the focused pane (and the workbench's own keys of the widget in it),
everywhere (the screen, the App, and the keys Textual answers itself: tab, shift+tab, ctrl+p, esc, each
listed once), then the other panes. The panes come as ``PaneKeys`` (key, name, node), so this module
knows no screen of its own: the screens and the dialogs import it, it imports none of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from textual.binding import Binding
from textual.dom import DOMNode
from textual.keys import format_key

if TYPE_CHECKING:
    from textual.screen import Screen

__all__ = ["NAVIGATION", "KeyLine", "PaneKeys", "class_bindings", "effective_bindings", "help_groups", "key_label",
           "keys_line", "screen_help_groups"]

ALIASES = {
    "escape": "esc",
    "enter": "enter",
    "backspace": "backspace",
    "space": "space",
    "tab": "tab",
    "pageup": "pgup",
    "pagedown": "pgdn",
    "delete": "del",
}
"""Key names shown as words (Textual's own display would draw some as symbols)."""


@dataclass(frozen=True)
class KeyLine:
    """One help line: the keys (as pressed), the description, and the binding id (for the keymap)."""

    keys: str
    description: str
    binding_id: str = ""
    phrase: str = ""
    """What the key does, in a phrase (the binding's ``tooltip``); the help shows it, the footer the description."""

    @property
    def explained(self) -> str:
        """The help's line for the key: its phrase, else its description."""
        return self.phrase or self.description


@dataclass(frozen=True)
class PaneKeys:
    """A pane as the help lists it: the key that brings it forward, its name, and the node whose keys it has."""

    number: int
    title: str
    node: DOMNode


NAVIGATION: tuple[KeyLine, ...] = (
    KeyLine("tab", "Next widget / pane"),
    KeyLine("shift+tab", "Previous widget / pane"),
    KeyLine("↑ / ↓  k / j", "Move in a list or the graph"),
    KeyLine("← / →  h / l", "Incoming / outgoing edges (graph), previous / next event (event detail)"),
    KeyLine("enter", "Open / follow the selection"),
    KeyLine("ctrl+p", "Command palette: jump to anything, act on the selection, themes"),
    KeyLine("esc", "Close a dialog, clear the filter"),
)
"""The keys Textual's widgets answer themselves (they have no binding of ours to read)."""


def key_label(key: str) -> str:
    """One key as people press it: ``/``, ``?``, ``ctrl+p``, ``tab``, ``←``, ``R``."""
    parts = key.strip().split("+")
    *modifiers, name = parts if parts[-1] else [*parts[:-2], "+"]
    shown = ALIASES.get(name) or format_key(name)
    if shown == name and len(name) > 1 and "_" in name:  # an unnamed key: plain words
        shown = name.replace("_", " ")
    return "+".join([*modifiers, shown])


def _merge(bindings: list[Binding]) -> list[KeyLine]:
    """Bindings merged per (action, description), keys in first-seen order."""
    order: dict[tuple[str, str], list[str]] = {}
    ids: dict[tuple[str, str], str] = {}
    phrases: dict[tuple[str, str], str] = {}
    for binding in bindings:
        if binding.system:
            continue
        slot = (binding.action, binding.description or binding.action.replace("_", " "))
        labels = order.setdefault(slot, [])
        for key in binding.key.split(","):
            label = key_label(key)
            if label not in labels:
                labels.append(label)
        ids.setdefault(slot, binding.id or "")
        if binding.tooltip and (binding.id or not phrases.get(slot)):  # the workbench's own words before Textual's
            phrases[slot] = binding.tooltip
        phrases.setdefault(slot, "")
    return [KeyLine(" / ".join(keys), slot[1], ids[slot], phrases[slot]) for slot, keys in order.items()]


def effective_bindings(node: DOMNode, *, app: DOMNode | None = None) -> list[KeyLine]:
    """``node``'s own bindings after the App's keymap, merged per action."""
    app = app or node.app
    bindings_map = node._bindings.copy()  # Textual keeps a node's merged BINDINGS here
    keymap = getattr(app, "_keymap", None)
    if keymap:
        bindings_map.apply_keymap(keymap)
    bindings = [binding for _key, binding in bindings_map]
    return _merge(bindings)


def class_bindings(bindings: Sequence[Binding], app: DOMNode) -> list[KeyLine]:
    """The keys of a screen not on the stack yet (its class's ``BINDINGS``) after the App's keymap, merged per
    action: the main screen's help lists the memory view's keys so."""
    keymap: dict[str, str] = getattr(app, "_keymap", None) or {}
    remapped = [replace(b, key=keymap[b.id]) if b.id and b.id in keymap else b for b in bindings]
    return _merge(remapped)


def keys_line(node: DOMNode) -> str:
    """``node``'s keys on one line (``y yes  n / esc no``), for a dialog's own key hint."""
    return "   ".join(f"{line.keys} {line.description.lower()}" for line in effective_bindings(node))


def help_groups(screen: Screen[None], panes: Sequence[PaneKeys], active: PaneKeys,
                views: Sequence[tuple[str, Sequence[Binding]]] = ()) -> list[tuple[str, list[KeyLine]]]:
    """The ``?`` groups for a screen of panes: the focused one (``active``) first, then everywhere, then the
    others, then the views a key opens (``views``: their title and their screen's ``BINDINGS``)."""
    app = screen.app
    groups: list[tuple[str, list[KeyLine]]] = []
    focused_lines = effective_bindings(active.node)
    widget: DOMNode | None = screen.focused
    inner: list[KeyLine] = []
    while widget is not None and widget is not active.node and widget is not screen:
        # the workbench's own keys only: a list's cursor keys are Textual's, and NAVIGATION says them once
        inner.extend(line for line in effective_bindings(widget) if line.description and line.binding_id)
        widget = widget.parent
    groups.append((f"{active.number} {active.title} (focused)", focused_lines))
    if inner:
        groups.append((f"In the {active.title} list", inner))
    said = {line.keys for line in NAVIGATION}  # tab, shift+tab, ctrl+p: said once, in NAVIGATION's words
    everywhere = [line for line in [*effective_bindings(screen), *effective_bindings(app)] if line.keys not in said]
    groups.append(("Everywhere", [*everywhere, *NAVIGATION]))
    for pane in panes:
        if pane.node is not active.node:
            groups.append((f"{pane.number} {pane.title}", effective_bindings(pane.node)))
    for title, bindings in views:
        groups.append((title, class_bindings(bindings, app)))
    return groups


def screen_help_groups(screen: Screen[None], title: str) -> list[tuple[str, list[KeyLine]]]:
    """The ``?`` groups for a screen of its own (the memory view): its keys, then the App's and Textual's."""
    app = screen.app
    said = {line.keys for line in NAVIGATION}
    focused: DOMNode | None = screen.focused
    inner: list[KeyLine] = []
    while focused is not None and focused is not screen:
        inner.extend(line for line in effective_bindings(focused) if line.description and line.binding_id)
        focused = focused.parent
    own = [line for line in effective_bindings(screen) if line.keys not in said and line.binding_id]
    groups: list[tuple[str, list[KeyLine]]] = [(title, [*own, *inner])]
    groups.append(("Everywhere", [*(line for line in effective_bindings(app) if line.keys not in said), *NAVIGATION]))
    return groups
