"""``MainScreen``: the five panes as a dashboard (160x48 and up) or one pane plus a strip of counts.

Keys ``1``..``5`` bring a pane forward, ``/`` filters the focused pane, ``?`` opens the key help.
The screen hands the Workspace to the panes when it opens, fans every batch of service changes
out to them, keeps the header badges current, and routes palette jumps.
"""

from __future__ import annotations

from typing import Any

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Container
from textual.events import Resize
from textual.reactive import reactive
from textual.screen import Screen

from services.desk import WorkspaceView

from .canvas import CanvasPane
from .grants import GrantsPane
from .help import HelpScreen
from .inbox import InboxPane
from .judgments import JudgmentsPane
from .messages import JumpRequested, ServicesChanged, WorkspaceOpened
from .runs import RunsPane
from .text import notify_plain
from .widgets.badges import BadgeBar, PaneStrip
from .widgets.footer import KeyFooter
from .widgets.pane import Pane

__all__ = ["MainScreen", "PANE_IDS", "DASHBOARD_SIZE"]

PANE_IDS = ("canvas", "inbox", "runs", "grants", "judgments")
"""The pinned pane ids, in key order (``1``..``5``)."""
DASHBOARD_SIZE = (160, 48)
"""At and above this terminal size every pane shows at once."""


class MainScreen(Screen[None]):
    """The workbench's one main screen."""

    BINDINGS = [
        Binding("1", "show_pane('canvas')", "Canvas", id="workbench.show_canvas"),
        Binding("2", "show_pane('inbox')", "Inbox", id="workbench.show_inbox"),
        Binding("3", "show_pane('runs')", "Runs", id="workbench.show_runs"),
        Binding("4", "show_pane('grants')", "Grants", id="workbench.show_grants"),
        Binding("5", "show_pane('judgments')", "Judgments", id="workbench.show_judgments"),
        Binding("slash", "filter_pane", "Filter", id="workbench.filter_pane"),
        Binding("question_mark", "show_help", "Keys", id="workbench.show_help"),
        Binding("z", "toggle_maximize", "Zoom", id="workbench.toggle_maximize"),
        Binding("Y", "copy_item", "Copy", show=False, id="workbench.copy_item"),
        Binding("M", "show_memory", "Memory", show=False, id="workbench.show_memory"),
    ]

    active: reactive[str] = reactive("runs")
    """The pane brought forward (and, in the small layout, the one shown)."""
    compact: reactive[bool] = reactive(True)
    """One pane plus the strip (small terminals) instead of the dashboard."""

    def __init__(self) -> None:
        super().__init__(id="main", classes="-compact")  # the first frame's classes: no restyle at mount
        self.workspace: WorkspaceView | None = None
        """The Workspace once opened."""

    def compose(self) -> ComposeResult:
        yield BadgeBar(id="badges")
        with Container(id="body"):
            yield CanvasPane()
            yield InboxPane()
            yield RunsPane(classes="-active")
            yield GrantsPane()
            yield JudgmentsPane()
        yield PaneStrip(id="strip")
        yield KeyFooter()

    def on_mount(self) -> None:
        self._apply_size(self.app.size.width, self.app.size.height)
        self.call_after_refresh(self.build_panes)
        self.set_interval(1.0, self.update_badges)
        self.set_interval(10.0, self.tick_ages)
        for pane in self.panes():
            self.watch(pane, "count_label", lambda _=None: self._update_strip(), init=False)
        self.app.theme_changed_signal.subscribe(self, self._theme_changed)

    def _theme_changed(self, _theme: Any) -> None:
        """Panes draw tones resolved from the theme: redraw them in the new one."""
        self.query_one("#badges", BadgeBar).refresh()
        for pane in self.panes():
            pane.forget_drawn()
            pane.request_reload()

    async def build_panes(self) -> None:
        """Mount the panes' bodies (the active pane first) and focus the active one.

        Runs after the first frame, and again (a no-op by then) when the Workspace opens; both
        run on this screen's message queue, so a pane is never loaded before its body exists.
        """
        if all(pane.built for pane in self.panes()):
            return
        active = self.pane(self.active)
        await active.build()
        for pane in self.panes():
            await pane.build()
        if self.is_attached:
            self.action_show_pane(self.active)

    def panes(self) -> list[Pane]:
        """The five panes in key order."""
        return [self.pane(pane_id) for pane_id in PANE_IDS]

    def pane(self, pane_id: str) -> Pane:
        """The pane with this id."""
        return self.query_one(f"#{pane_id}", Pane)

    # -- layout -------------------------------------------------------------------------------

    def on_resize(self, event: Resize) -> None:
        self._apply_size(event.size.width, event.size.height)

    def _apply_size(self, width: int, height: int) -> None:
        layout = getattr(self.app, "layout", None)  # --layout / the settings file: dashboard or single
        if layout in ("dashboard", "single"):
            self.compact = layout == "single"
        else:
            self.compact = not (width >= DASHBOARD_SIZE[0] and height >= DASHBOARD_SIZE[1])

    def action_copy_item(self) -> None:
        """``Y``: copy the focused pane's selection as its id, JSON, or the SDK call / curl (OSC 52)."""
        from .dialogs.choose import ChooseDialog
        from .text import notify_plain
        from .widgets.copy import copy_choices

        pane = self.pane(self.active)
        choices = copy_choices(pane)
        if not choices:
            notify_plain(self.app, f"Nothing selected in {pane.title} to copy.", severity="warning")
            return

        def done(text: str | None) -> None:
            if text:
                self.app.copy_to_clipboard(text)
                lines = text.splitlines()
                more = f" (+{len(lines) - 1} lines)" if len(lines) > 1 else ""
                notify_plain(self.app, f"Copied to the terminal's clipboard: {lines[0][:80]}{more}", timeout=4)
        self.app.push_screen(ChooseDialog(f"Copy from {pane.title}", choices), done)

    def tick_ages(self) -> None:
        """Ages (``42s``, ``5m``) are drawn when the list loads: reload the runs so they keep up."""
        runs = self.pane("runs")
        if runs.workspace is not None and runs.built:
            runs.request_reload()

    def action_toggle_maximize(self) -> None:
        """``z``: the focused pane fills the screen; ``z`` again restores the layout."""
        if self.maximized is not None:
            self.minimize()
        else:
            self.maximize(self.pane(self.active), container=False)

    def watch_compact(self, compact: bool) -> None:
        if self.has_class("-compact") != compact:  # each class change restyles the whole screen
            self.set_class(compact, "-compact")
            self.set_class(not compact, "-dashboard")

    def watch_active(self, active: str) -> None:
        for pane in self.query(Pane):
            if pane.has_class("-active") != (pane.id == active):
                pane.set_class(pane.id == active, "-active")
        self._update_strip()

    def _update_strip(self) -> None:
        if not self.is_mounted:
            return
        self.query_one("#strip", PaneStrip).labels = tuple(
            (p.number, p.title, p.strip_labels(), p.id == self.active) for p in self.panes())

    def on_descendant_focus(self, event: Any) -> None:
        node = event.widget if hasattr(event, "widget") else None
        while node is not None and not isinstance(node, Pane):
            node = node.parent
        if isinstance(node, Pane) and node.id and node.id != self.active:
            self.active = node.id

    # -- keys -------------------------------------------------------------------------------

    def action_show_pane(self, pane_id: str) -> None:
        self.active = pane_id
        if self.pane(pane_id).built:
            self.pane(pane_id).focus_main()

    def action_filter_pane(self) -> None:
        if self.pane(self.active).built:
            self.pane(self.active).open_filter()

    def action_show_memory(self) -> None:
        """Open the memory outbox view (once the Workspace is open)."""
        if self.workspace is not None and getattr(self.workspace, "outbox", None) is not None:
            from .memory import MemoryScreen

            self.app.push_screen(MemoryScreen(self.workspace))

    def action_show_help(self) -> None:
        from .help_keys import help_groups

        self.app.push_screen(HelpScreen(help_groups(self)))

    # -- service messages ---------------------------------------------------------------------

    @on(WorkspaceOpened)
    async def _opened(self, event: WorkspaceOpened) -> None:
        await self.build_panes()
        self.workspace = event.workspace
        self.query_one("#badges", BadgeBar).status = event.workspace.header_status
        self.query_one("#badges", BadgeBar).canvas = event.workspace.canvas_label
        for pane in self.panes():
            pane.attach(event.workspace)
        self.update_badges()
        self.action_show_pane(self.active)

    @on(ServicesChanged)
    def _changed(self, event: ServicesChanged) -> None:
        for pane in self.panes():
            pane.changed(event.changes)
        self.update_badges()
        for change in event.changes:
            if change.source != "workspace":
                continue
            if change.kind == "attach.lost":
                notify_plain(self.app, f"The server at {change.id} stopped answering; this window keeps trying.",
                             severity="warning", timeout=6)
            elif change.kind == "attach.back":
                notify_plain(self.app, f"The server is back at {change.id}; everything was read again.", timeout=6)

    @on(JumpRequested)
    def _jump(self, event: JumpRequested) -> None:
        self.action_show_pane(event.pane)
        self.pane(event.pane).select_key(event.key)

    def update_badges(self) -> None:
        """Recount the header badges from the services."""
        if self.workspace is None:
            return
        desk = self.workspace.desk
        badges = self.query_one("#badges", BadgeBar)
        badges.status = self.workspace.header_status  # an attached window's server may go away and come back
        badges.waiting = desk.waiting_on_user()
        accepting = {g.user_id for g in desk.grants() if g.state == "active" and g.refusal is None}
        badges.refusals = sum(1 for r in desk.refusals_since(60) if r.user_id not in accepting)  # a restore clears it
        badges.judgments = self.query_one("#judgments", JudgmentsPane).waiting
        badges.settings_problem = getattr(self.app, "settings_problem", "") or ""
        failures = getattr(self.workspace, "capture_failures", None)
        badges.captures = len(failures()) if failures is not None else 0
        outbox = getattr(self.workspace, "outbox", None)
        if outbox is not None:
            badges.memory = "" if getattr(outbox, "embedded", True) else outbox.destination
            badges.memory_problem = outbox.unreachable or ""
