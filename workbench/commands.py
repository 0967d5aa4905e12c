"""``WorkbenchCommands``: the palette's jumps (objects, runs, people, judgments) and fitting actions.

Every label is sanitised and matched without markup (``Content`` built from plain text), so an
untrusted name can never inject styles or links into the palette.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.content import Content

from screens.loader import load
from screens.messages import JumpRequested
from screens.text import safe

if TYPE_CHECKING:
    from screens.main import MainScreen
    from screens.widgets.pane import Pane

__all__ = ["WorkbenchCommands"]

PANES_TO_SEARCH = ("runs", "grants", "judgments", "inbox", "canvas")


class WorkbenchCommands(Provider):
    """Jump to anything by name or id; act on the focused item with its key."""

    def _main(self) -> MainScreen | None:
        MainScreen = load(self.app, "screens.main", "MainScreen", what="The palette's jumps")
        if MainScreen is None:
            return None
        return next((s for s in self.app.screen_stack if isinstance(s, MainScreen)), None)

    async def _entries(self, query: str) -> list[tuple[str, Callable[[], object], str]]:
        main = self._main()
        if main is None or main.workspace is None:
            return []
        entries: list[tuple[str, Callable[[], object], str]] = []
        recording = getattr(self.app, "recorder", None) is not None
        entries.append(("Stop recording" if recording else "Start recording (a session to replay as a test)",
                        self._toggle_recording, "record operator actions, app calls and failures to a file"))
        from .views import apply_view, saved_views

        for view in saved_views(self.app):  # type: ignore[arg-type]
            entries.append((f"view {view.name} · {view.pane} · {view.filter}", partial(apply_view, main, view),
                            f"apply the saved filter to {view.pane}" + (" (its default)" if view.default else "")))
        active = main.pane(main.active)
        for label, key, action in active.palette_actions():
            entries.append((f"{label}  [{key}]", partial(self._run_action, active, action), "action on the selection"))
        for pane_id in PANES_TO_SEARCH:
            pane = main.pane(pane_id)
            items = await (pane.palette_search(query) if hasattr(pane, "palette_search") else pane.palette_items())
            for label, key in items:
                entries.append((f"go to {label}", partial(main.post_message, JumpRequested(pane_id, key)), f"open in {pane_id}"))
        return entries

    async def _toggle_recording(self) -> None:
        toggle = getattr(self.app, "toggle_recording", None)
        if toggle is not None:
            toggle()

    @staticmethod
    async def _run_action(pane: Pane, action: str) -> None:
        await pane.run_action(action)

    async def discover(self) -> Hits:
        for label, command, help_text in await self._entries(""):
            yield DiscoveryHit(Content(safe(label, 200)), command, text=safe(label, 200), help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for label, command, help_text in await self._entries(query):
            text = safe(label, 200)
            score, offsets = matcher.fuzzy_search.match(query, text)
            if score > 0:
                content = Content(text)
                for offset in offsets:
                    content = content.stylize("bold reverse", offset, offset + 1)
                yield Hit(score, content, command, text=text, help=help_text)
