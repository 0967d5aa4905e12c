"""``MainScreen``: the five panes as a dashboard (160x48 and up) or one pane plus a strip of counts.

Keys ``1``..``5`` bring a pane forward, ``/`` filters the focused pane, ``?`` opens the key help.
The screen hands the Workspace to the panes when it opens, fans every batch of service changes
out to them, keeps the header badges current, and routes palette jumps.

The first frame draws each pane's heading only, so it is composed of ``PaneSlot``s (a heading in
the pane's place, with its id and classes); the pane modules (tables, trees, the graph, dialogs)
are imported after that frame, off the event loop, and each slot is then swapped for its pane.
When the workspace folder keeps the rows its panes showed when the window was last left
(``screens.snapshot``), the first frame draws them, dimmed, with "as of HH:MM:SS, opening…" in the
header, and they cover the panes built behind them until the Workspace opens (``stale``); a key
meant for a pane meanwhile is refused in words.
"""

from __future__ import annotations

import asyncio
import importlib
import time
from typing import TYPE_CHECKING, cast

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Container, Vertical
from textual.events import DescendantFocus, Key, Resize
from textual.reactive import reactive
from textual.screen import Screen
from textual.widgets import Label

from .loader import load
from .messages import JumpRequested, SelectionMoved, ServicesChanged, WorkspaceOpened
from .text import notify_plain
from .widgets.badges import BadgeBar, PaneStrip
from .widgets.footer import KeyFooter

if TYPE_CHECKING:
    from textual.theme import Theme
    from textual.dom import DOMNode

    from .judgments import JudgmentsPane
    from .widgets.pane import Pane

    from services.desk import WorkspaceView
    from services.desk.marks import Marks

    from .snapshot import Snapshot

__all__ = ["MainScreen", "PaneSlot", "PANE_IDS", "PANES", "DASHBOARD_SIZE"]

PANE_IDS = ("canvas", "inbox", "runs", "grants", "judgments")
"""The pinned pane ids, in key order (``1``..``5``)."""
PANES = {
    "canvas": ("screens.canvas", "CanvasPane", "canvas"),
    "inbox": ("screens.inbox", "InboxPane", "inbox"),
    "runs": ("screens.runs", "RunsPane", "runs"),
    "grants": ("screens.grants", "GrantsPane", "grants"),
    "judgments": ("screens.judgments", "JudgmentsPane", "judgments"),
}
"""Each pane id's module, class and title (the key is its place in ``PANE_IDS`` plus one)."""
DASHBOARD_SIZE = (160, 48)
"""At and above this terminal size every pane shows at once."""
VISITS_KEPT = 200
"""How many selections back and forward remember."""
BADGES_EVERY = 1 / 60
"""Seconds between badge recounts while only run events arrive (one frame)."""


def pane_base() -> type[Pane]:
    """The panes' base class. Its module (tables, inputs, the desk) is imported with the panes, after the
    first frame; until then no ``Pane`` exists, so a check for one before that never needs it."""
    from .widgets.pane import Pane

    return Pane


def import_panes() -> dict[str, type[Pane]]:
    """The pane classes by id (their modules imported here: the tables, trees, graph and dialogs)."""
    classes: dict[str, type[Pane]] = {}
    for pane_id, (module, name, _title) in PANES.items():
        cls = getattr(importlib.import_module(module), name)
        assert issubclass(cls, pane_base())
        classes[pane_id] = cls
    return classes


class PaneSlot(Vertical):
    """A pane's place in the first frame: its heading, until the pane itself is mounted here."""

    built = False
    """A slot has no body (the pane that replaces it builds one)."""

    def __init__(self, pane_id: str, *, classes: str = "", lines: tuple[str, ...] = ()) -> None:
        super().__init__(id=pane_id, classes=f"pane {classes}".strip())
        self.number = PANE_IDS.index(pane_id) + 1
        """The key that brings the pane forward."""
        self.title = PANES[pane_id][2]
        """The pane's name."""
        self.lines = lines
        """The rows the pane showed when the window was last left (``screens.snapshot``), drawn dimmed."""

    def compose(self) -> ComposeResult:
        if self.lines:
            from .snapshot import snapshot_view

            yield snapshot_view(self.lines)
            return
        heading = Text()
        heading.append(f" {self.number} ", style="reverse")
        heading.append(f" {self.title}")
        yield Label(heading, classes="pane-title")

    def strip_labels(self) -> tuple[str, ...]:
        """The pane's name, as the strip shows it until the count is known."""
        return (self.title,)


COPY_SHOWN = 240
"""Characters of a copied line the toast repeats (a curl command with its URL whole); longer ones end in ``…``."""


class MainScreen(Screen[None]):
    """The workbench's one main screen."""

    BINDINGS = [
        Binding("1", "show_pane('canvas')", "Canvas",
                tooltip="Bring the canvas pane forward: objects, links and documents", id="workbench.show_canvas"),
        Binding("2", "show_pane('inbox')", "Inbox",
                tooltip="Bring the inbox pane forward: messages waiting for each node", id="workbench.show_inbox"),
        Binding("3", "show_pane('runs')", "Runs",
                tooltip="Bring the runs pane forward: runs and their live event stream", id="workbench.show_runs"),
        Binding("4", "show_pane('grants')", "Grants",
                tooltip="Bring the grants pane forward: each person's grant, scopes and refusals",
                id="workbench.show_grants"),
        Binding("5", "show_pane('judgments')", "Judgments",
                tooltip="Bring the judgments pane forward: knowledge waiting for approval",
                id="workbench.show_judgments"),
        Binding("slash", "filter_pane", "Filter",
                tooltip="Filter the focused pane's list by text (esc clears it)", id="workbench.filter_pane"),
        Binding("question_mark", "show_help", "Keys",
                tooltip="Show every key, with what it does", id="workbench.show_help"),
        Binding("z", "toggle_maximize", "Zoom",
                tooltip="Zoom the focused pane to the whole window, or back", id="workbench.toggle_maximize"),
        Binding("Y", "copy_item", "Copy", show=False,
                tooltip="Copy the selection (its id, a curl or SDK call) to the clipboard", id="workbench.copy_item"),
        Binding("M", "show_memory", "Memory", show=False,
                tooltip="Open the memory view: the outbox, what the memory service holds, search",
                id="workbench.show_memory"),
        Binding("A", "toggle_system", "All runs", show=False,
                tooltip="Show or hide the workbench's own system runs (the harvest judge's)",
                id="workbench.toggle_system"),
        Binding("ctrl+k", "set_mark", "Mark the selection (then a letter)", show=False,
                tooltip="Mark the selected object with a letter (ctrl+k, then the letter); ' and the letter comes back to it",
                id="workbench.set_mark"),
        Binding("apostrophe", "jump_to_mark", "Jump to a mark (then its letter)", show=False,
                tooltip="Jump to the object marked with a letter (', then the letter), in its pane",
                id="workbench.jump_to_mark"),
        Binding("alt+left", "go_back", "Back to the previous selection", show=False,
                tooltip="Go back to what was selected before, across panes", id="workbench.go_back"),
        Binding("alt+right", "go_forward", "Forward to the next selection", show=False,
                tooltip="Go forward again after going back, across panes", id="workbench.go_forward"),
        Binding("H", "look_back(0)", "Look back", show=False,
                tooltip="Time mode: every pane as it was at a moment of the history ([ ] a change, { } a minute, g a time)",
                id="workbench.look_back"),
        Binding("left_square_bracket", "look_back(1)", "Look back a change", show=False,
                tooltip="Time mode, one change back from now", id="workbench.look_back_change"),
    ]

    active: reactive[str] = reactive("runs")
    """The pane brought forward (and, in the small layout, the one shown)."""
    compact: reactive[bool] = reactive(True)
    """One pane plus the strip (small terminals) instead of the dashboard."""

    def __init__(self) -> None:
        super().__init__(id="main", classes="-compact")  # the first frame's classes: no restyle at mount
        self.workspace: WorkspaceView | None = None
        """The Workspace once opened."""
        self._badges_at = 0.0
        """When the badges were last recounted (``time.monotonic``)."""
        self._badges_due = False
        """A recount is set for the end of the frame."""
        self.snapshot: Snapshot | None = None
        """The rows the window showed when it was last left, drawn until the live state replaces them."""
        self.stale = False
        """The panes' places show those rows (``snapshot``): the Workspace is not open yet, so nothing
        drawn can be acted on; a key meant for a pane is refused in words (``on_key``)."""
        self.visited: list[tuple[str, str]] = []
        """``(pane, key)`` of what was selected, oldest first (``alt+left`` / ``alt+right`` walk it)."""
        self.visit = -1
        """Where in ``visited`` back and forward stand."""
        self._walking: tuple[str, str] | None = None
        """The selection back or forward is going to (it is not a new visit)."""
        self.marks: Marks | None = None
        """The workspace's marks (``ctrl+k`` + letter, ``'`` + letter), once it is open."""

    def compose(self) -> ComposeResult:
        self.snapshot = self._last_rows()
        self.stale = self.snapshot is not None
        panes = self.snapshot.panes if self.snapshot is not None else {}
        yield BadgeBar(id="badges")
        with Container(id="body"):
            for pane_id in PANE_IDS:
                yield PaneSlot(pane_id, classes="-active" if pane_id == self.active else "",
                               lines=panes.get(pane_id, ()))
        yield PaneStrip(id="strip")
        yield KeyFooter()

    def _last_rows(self) -> Snapshot | None:
        """The snapshot the App's workspace folder keeps, when the App opens that folder itself."""
        settings = getattr(self.app, "settings", None)
        if settings is None or getattr(self.app, "workspace", None) is not None:
            return None
        from .snapshot import read_snapshot

        return read_snapshot(settings.path)

    def on_mount(self) -> None:
        if self.snapshot is not None:
            from .text import short_time

            badges = self.query_one("#badges", BadgeBar)
            for name, value in self.snapshot.badges.items():
                setattr(badges, name, value)
            badges.status = f"as of {short_time(self.snapshot.at)}, opening…"
        self._apply_size(self.app.size.width, self.app.size.height)
        self.call_after_refresh(self.build_panes)
        self.set_interval(1.0, self.update_badges)
        self.set_interval(10.0, self.tick_ages)
        self.app.theme_changed_signal.subscribe(self, self._theme_changed)

    def _theme_changed(self, _theme: Theme) -> None:
        """Panes draw tones resolved from the theme: redraw them in the new one."""
        self.query_one("#badges", BadgeBar).refresh()
        if not self.placed:
            return
        for pane in self.query(pane_base()):
            pane.forget_drawn()
            pane.request_reload()

    @property
    def placed(self) -> bool:
        """Whether the panes themselves are in place (not only their headings)."""
        return not self.query(PaneSlot)

    async def place_panes(self) -> None:
        """Swap each heading slot for its pane (their modules imported in a thread first)."""
        if self.placed:
            return
        classes = await asyncio.to_thread(import_panes)
        body = self.query_one("#body", Container)
        for slot in list(self.query(PaneSlot)):
            if not self.is_attached:  # the app is closing
                return
            pane_id = slot.id or ""
            index = body.children.index(slot)
            await slot.remove()
            pane = classes[pane_id](classes="-active" if pane_id == self.active else "")
            if self.stale and slot.lines:  # the rows from before cover the pane until the live state is here
                pane.add_class("-stale")
                pane.mount_snapshot = slot.lines
            if index < len(body.children):
                await body.mount(pane, before=index)
            else:
                await body.mount(pane)
            self.watch(pane, "count_label", lambda _=None: self._update_strip(), init=False)
        self._update_strip()

    async def build_panes(self) -> None:
        """Put the panes in place and mount their bodies (the active pane first), then focus the active one.

        Runs after the first frame, and again (a no-op by then) when the Workspace opens; both
        run on this screen's message queue, so a pane is never loaded before its body exists. While
        the last known rows are drawn (``stale``) each pane is built behind its rows from before,
        which cover it until the Workspace opens (``_opened``).
        """
        await self.place_panes()
        if not self.placed or all(pane.built for pane in self.panes()):
            return
        active = self.pane(self.active)
        await active.build()
        for pane in self.panes():
            await pane.build()
        if self.is_attached:
            self.action_show_pane(self.active)

    def panes(self) -> list[Pane]:
        """The five panes in key order (none until they are placed: see ``build_panes``)."""
        places = [self.query_one(f"#{pane_id}") for pane_id in PANE_IDS]
        base = pane_base()
        return [place for place in places if isinstance(place, base)]

    def pane(self, pane_id: str) -> Pane:
        """The pane with this id (once placed: see ``build_panes``)."""
        return self.query_one(f"#{pane_id}", pane_base())

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
        if not self.placed:
            return
        ChooseDialog = load(self.app, "screens.dialogs.choose", "ChooseDialog", what="The copy dialog")
        copy_choices = load(self.app, "screens.widgets.copy", "copy_choices", what="The copy choices")
        if ChooseDialog is None or copy_choices is None:
            return
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
                first = lines[0] if len(lines[0]) <= COPY_SHOWN else lines[0][:COPY_SHOWN - 1] + "…"  # a cut says so
                notify_plain(self.app, f"Copied to the terminal's clipboard: {first}{more}", timeout=4)
        self.app.push_screen(ChooseDialog(f"Copy from {pane.title}", choices), done)

    def tick_ages(self) -> None:
        """Ages (``42s``, ``5m``) are drawn when the list loads: reload the runs so they keep up."""
        if not self.placed:
            return
        runs = self.pane("runs")
        if runs.workspace is not None and runs.built:
            runs.request_reload()

    def action_toggle_maximize(self) -> None:
        """``z``: the focused pane fills the screen; ``z`` again restores the layout."""
        if self.maximized is not None:
            self.minimize()
        else:
            self.maximize(self.query_one(f"#{self.active}"), container=False)

    def watch_compact(self, compact: bool) -> None:
        if self.has_class("-compact") != compact:  # each class change restyles the whole screen
            self.set_class(compact, "-compact")
            self.set_class(not compact, "-dashboard")

    def watch_active(self, active: str) -> None:
        for pane in self.query("#body > .pane"):  # the panes, or their slots before the panes are placed
            if pane.has_class("-active") != (pane.id == active):
                pane.set_class(pane.id == active, "-active")
        self._update_strip()

    def _update_strip(self) -> None:
        if not self.is_mounted:
            return
        places = [self.query_one(f"#{pane_id}") for pane_id in PANE_IDS]
        self.query_one("#strip", PaneStrip).labels = tuple(
            (p.number, p.title, p.strip_labels(), p.id == self.active)
            for p in places if isinstance(p, PaneSlot) or isinstance(p, pane_base()))

    def on_descendant_focus(self, event: DescendantFocus) -> None:
        if not self.placed:  # only the panes take focus
            return
        base = pane_base()
        node: DOMNode | None = event.widget
        while node is not None and not isinstance(node, base):
            node = node.parent
        if isinstance(node, base) and node.id and node.id != self.active:
            self.active = node.id

    # -- keys -------------------------------------------------------------------------------

    def action_show_pane(self, pane_id: str) -> None:
        self.active = pane_id
        if self.placed and self.pane(pane_id).built:
            self.pane(pane_id).focus_main()

    def action_filter_pane(self) -> None:
        if self.placed and self.pane(self.active).built:
            self.pane(self.active).open_filter()

    def action_show_memory(self) -> None:
        """Open the memory outbox view (once the Workspace is open)."""
        if self.workspace is not None and getattr(self.workspace, "outbox", None) is not None:
            MemoryScreen = load(self.app, "screens.memory", "MemoryScreen", what="The memory view")
            if MemoryScreen is not None:
                self.app.push_screen(MemoryScreen(self.workspace))

    def action_toggle_system(self) -> None:
        """List the workbench's own runs and their nodes (the harvest judge's) too, or hide them again."""
        if not self.placed:
            return
        shown = not any(getattr(p, "show_system", False) for p in self.panes())
        for pane in self.panes():
            if hasattr(pane, "show_system"):
                pane.show_system = shown
                pane.reload()
        notify_plain(self.app, "System runs (the harvest judge's) and their nodes are listed; A hides them again." if shown
                     else "System runs and their nodes are hidden; A lists them.")

    def action_show_help(self) -> None:
        if not self.placed:  # the keys are the panes': until they are in place there is no list to show
            return
        from .help_keys import PaneKeys, help_groups

        HelpScreen = load(self.app, "screens.help", "HelpScreen", what="The key help")
        if HelpScreen is None:
            return
        panes = [PaneKeys(pane.number, pane.title, pane) for pane in self.panes()]
        active = self.pane(self.active)
        focused = next(keys for keys in panes if keys.node is active)
        MemoryScreen = load(self.app, "screens.memory", "MemoryScreen", what="The memory view's keys")
        views = [("M memory view", MemoryScreen.BINDINGS)] if MemoryScreen is not None else []
        self.app.push_screen(HelpScreen(help_groups(self, panes, focused, views)))

    # -- service messages ---------------------------------------------------------------------

    def on_key(self, event: Key) -> None:
        """While the last known rows are drawn, a key no binding took (one meant for a pane's rows) is
        refused in words: nothing drawn then is live, so nothing is done to it."""
        if not self.stale or self.snapshot is None or event.key in self.active_bindings:
            return
        if not (event.is_printable or event.key in ("enter", "space", "delete", "backspace")):
            return
        event.stop()
        self.refuse_stale()

    def refuse_stale(self) -> None:
        """Say that nothing was done: the rows drawn are from before, the live state is not here yet."""
        from .text import short_time

        at = short_time(self.snapshot.at) if self.snapshot is not None else "before"
        notify_plain(self.app, f"Not done: the panes show the rows as of {at} while the workspace opens. "
                     "Press it again once they are live.", title="Opening", severity="warning", timeout=4)

    def keep_snapshot(self) -> None:
        """Keep what the panes show now as the workspace's snapshot, for the next start's first frame."""
        settings = getattr(self.app, "settings", None)
        if settings is None or self.workspace is None or self.stale or not self.placed \
                or getattr(self.app, "read_only", False):
            return
        from .snapshot import screen_lines, write_snapshot

        panes = [pane for pane in self.panes() if pane.content_region.area]
        lines = screen_lines(self, panes)
        if lines is None:
            return
        badges = self.query_one("#badges", BadgeBar)
        write_snapshot(settings.path, {pane.id or "": shown for pane, shown in zip(panes, lines)},
                       {"judgments": badges.judgments, "waiting": badges.waiting, "refusals": badges.refusals,
                        "captures": badges.captures}, at=settings.clock.time())

    @on(WorkspaceOpened)
    async def _opened(self, event: WorkspaceOpened) -> None:
        await self.build_panes()
        if self.stale:  # the live panes replace the rows from before
            self.stale = False
            for pane in self.panes():
                pane.remove_class("-stale")
            await self.query(".pane-snapshot").remove()
        self.workspace = event.workspace
        self.query_one("#badges", BadgeBar).status = event.workspace.header_status
        self.query_one("#badges", BadgeBar).canvas = event.workspace.canvas_label
        defaults = getattr(self.app, "default_views", None)
        for pane_id, text in defaults() if defaults is not None else []:
            self.pane(pane_id).apply_filter(text)  # the settings' default views, before the first load
        for pane in self.panes():
            pane.attach(event.workspace)
        self.update_badges()
        self.action_show_pane(self.active)

    @on(ServicesChanged)
    def _changed(self, event: ServicesChanged) -> None:
        base = pane_base()
        for pane in self.get_child_by_id("body").children:  # the panes are the body's children: no DOM query
            if isinstance(pane, base):
                pane.changed(event.changes)
        if all(change.kind == "run.event" for change in event.changes):
            self._badges_soon()  # a stream of run events: the badges at most once a frame
        else:
            self.update_badges()
        for change in event.changes:
            if change.source != "workspace":
                continue
            if change.kind == "attach.lost":
                notify_plain(self.app, f"The server at {change.id} stopped answering; this window keeps trying.",
                             severity="warning", timeout=6)
            elif change.kind == "attach.back":
                notify_plain(self.app, f"The server is back at {change.id}; everything was read again.", timeout=6)

    # -- marks, back and forward ---------------------------------------------------------------

    @on(SelectionMoved)
    def _moved(self, event: SelectionMoved) -> None:
        place = (event.pane, event.key)
        if self._walking is not None:
            if place == self._walking:
                self._walking = None
            return
        if 0 <= self.visit < len(self.visited) and self.visited[self.visit] == place:
            return
        del self.visited[self.visit + 1:]
        self.visited.append(place)
        if len(self.visited) > VISITS_KEPT:
            del self.visited[0]
        self.visit = len(self.visited) - 1

    def _walk(self, step: int) -> None:
        target = self.visit + step
        if not self.placed or not 0 <= target < len(self.visited):
            notify_plain(self.app, "Nothing further " + ("back." if step < 0 else "forward."), timeout=2)
            return
        self.visit = target
        pane, key = self._walking = self.visited[target]
        self._jump(JumpRequested(pane, key))

    def action_go_back(self) -> None:
        """``alt+left``: select what was selected before, in its pane."""
        self._walk(-1)

    def action_go_forward(self) -> None:
        """``alt+right``: select what was selected after (once gone back)."""
        self._walk(1)

    def action_look_back(self, back: int) -> None:
        """``H`` (or ``[``, one change back): every pane as it was at a moment of the history."""
        workspace = self.workspace
        if workspace is None or workspace.timeline is None:
            notify_plain(self.app, "The history opens with the workspace: a moment, please.", timeout=3)
            return
        from .time import TimeScreen

        self.app.push_screen(TimeScreen(workspace, back=back))

    def _marks(self) -> Marks | None:
        from services.desk.marks import Marks

        if self.marks is None and self.workspace is not None:
            self.marks = Marks(self.workspace.settings.path)
            if self.marks.problem:
                notify_plain(self.app, self.marks.problem, severity="warning", timeout=8)
        return self.marks

    @work(group="marks", exclusive=True, exit_on_error=False)
    async def action_set_mark(self) -> None:
        """``ctrl+k`` then a letter: mark the focused pane's selection by that letter (kept in marks.json)."""
        marks = self._marks()
        if marks is None or not self.placed:
            return
        pane = self.pane(self.active)
        key = pane.selection()
        if key is None:
            notify_plain(self.app, f"Nothing selected in {pane.title} to mark.", severity="warning")
            return
        from .dialogs.letter import LetterDialog
        from services.desk.marks import Mark

        label = pane.selection_label()
        letter = await self.app.push_screen_wait(LetterDialog(f"Mark {pane.title} “{label}” as the letter…"))
        if letter is None:
            return
        try:
            marks.set(letter, Mark(pane.id or "", key, label))
        except OSError as error:
            notify_plain(self.app, f"The mark is not kept: {marks.path} cannot be written "
                         f"({error.strerror or error}).", severity="error", timeout=8)
            return
        notify_plain(self.app, f"Marked {pane.title} “{label}” as {letter}; ' then {letter} comes back to it.", timeout=3)

    @work(group="marks", exclusive=True, exit_on_error=False)
    async def action_jump_to_mark(self) -> None:
        """``'`` then a letter: select the object marked by that letter, in its pane."""
        marks = self._marks()
        if marks is None or not self.placed:
            return
        if not marks.marks:
            notify_plain(self.app, "No marks yet: ctrl+k then a letter marks the selection.", severity="warning")
            return
        from .dialogs.letter import LetterDialog

        listing = "\n".join(f"{letter}  {m.pane} · {m.label}" for letter, m in sorted(marks.marks.items()))
        letter = await self.app.push_screen_wait(LetterDialog("Jump to the mark…", listing))
        if letter is None:
            return
        mark = marks.get(letter)
        if mark is None or mark.pane not in PANE_IDS:
            notify_plain(self.app, f"No mark {letter}.", severity="warning")
            return
        self._jump(JumpRequested(mark.pane, mark.key))

    @on(JumpRequested)
    def _jump(self, event: JumpRequested) -> None:
        self.action_show_pane(event.pane)
        if self.placed:
            self.pane(event.pane).select_key(event.key)

    def _badges_soon(self) -> None:
        """Recount the badges now, or at the end of the frame when they were recounted within it."""
        if self._badges_due:
            return
        wait = self._badges_at + BADGES_EVERY - time.monotonic()
        if wait <= 0:
            self.update_badges()
        else:
            self._badges_due = True
            self.set_timer(wait, self.update_badges)

    def update_badges(self) -> None:
        """Recount the header badges from the services."""
        self._badges_due, self._badges_at = False, time.monotonic()
        if self.workspace is None:
            return
        desk = self.workspace.desk
        badges = self.query_one("#badges", BadgeBar)
        badges.status = self.workspace.header_status  # an attached window's server may go away and come back
        badges.waiting = desk.waiting_on_user()
        accepting = {g.user_id for g in desk.grants() if g.state == "active" and g.refusal is None}
        badges.refusals = sum(1 for r in desk.refusals_since(60) if r.user_id not in accepting)  # a restore clears it
        badges.judgments = cast("JudgmentsPane", self.pane("judgments")).waiting
        badges.settings_problem = getattr(self.app, "settings_problem", "") or ""
        failures = getattr(self.workspace, "capture_failures", None)
        badges.captures = len(failures()) if failures is not None else 0
        outbox = getattr(self.workspace, "outbox", None)
        if outbox is not None:
            badges.memory = "" if getattr(outbox, "embedded", True) else outbox.destination
            badges.memory_problem = outbox.unreachable or ""
