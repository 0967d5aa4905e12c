"""``Pane``: the base of the five panes: workspace hand-off, coalesced reloads, the filter bar, actions.

A pane is a controller: it reaches the Workspace only through workers (``act``/``reload``) and
updates its widgets from their results. Worker errors go to the App's one error handler.

The first frame shows each pane's heading only; the main screen then ``build``s the bodies (the
active pane first), so a terminal paints the workbench before its tables and trees are styled.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.coordinate import Coordinate
from textual.reactive import reactive
from textual.widgets import DataTable, Input, Label, Static
from textual.widgets.data_table import CellDoesNotExist
from textual.worker import Worker, WorkerState

from services.desk import Desk, WorkspaceView
from services.desk.filters import FilterError, Query, compile_filter, fields_help
from services.changes import Change

from ..loader import load
from ..text import notify_plain, safe, tone

if TYPE_CHECKING:
    from ..dialogs.form import Field

__all__ = ["Pane", "PaletteAction", "Said", "is_current", "DEBOUNCE"]

DEBOUNCE = 0.03
"""Seconds a database-backed reload waits, so a burst of changes costs one round of queries."""

PaletteAction = tuple[str, str, str]
"""``(label, key, action name)`` of an action that fits the selection."""
Said = str | tuple[str, str]
"""What a toast says after an action: its text, or ``(text, severity)`` when it did not do what was asked."""


def is_current(event: DataTable.RowHighlighted) -> bool:
    """Whether a ``RowHighlighted`` still describes the table's cursor (not a stale one from a refill)."""
    table = event.data_table
    if event.cursor_row != table.cursor_row or not table.row_count:
        return False
    try:
        return table.coordinate_to_cell_key(Coordinate(table.cursor_row, 0)).row_key == event.row_key
    except CellDoesNotExist:  # the row went away while the message waited
        return False


class Pane(Vertical):
    """One of the main screen's panes."""

    ALLOW_MAXIMIZE = True  # ``z`` zooms the focused pane

    BINDINGS = [
        Binding("ctrl+s", "save_view", "Save the filter as a named view", tooltip="Save the filter being typed as a named view (the palette applies it again)", show=False, id="workbench.save_view"),
    ]

    title: ClassVar[str] = ""
    """The pane's name in the strip and the help."""
    number: ClassVar[int] = 0
    """The key (1..5) that brings it forward."""
    sources: ClassVar[frozenset[str]] = frozenset()
    """The change sources this pane listens to."""

    count_label: reactive[str] = reactive("")
    """A short live count for the title and the strip (``4 runs · 1 waiting on user``, ``19 objects``)."""
    filter_text: reactive[str] = reactive("")
    """The filter typed after ``/`` (empty: no filter)."""

    def __init__(self, classes: str = "", *, id: str | None = None, name: str | None = None) -> None:
        super().__init__(classes=f"pane {classes}".strip(), id=id, name=name)
        self.workspace: WorkspaceView | None = None
        """The Workspace once opened."""
        self._reload_queued = False
        self._good_filter = ""
        """The last filter text that parsed (a filter being typed that does not parse leaves it)."""
        self.filter_problem = ""
        """Why the filter typed does not parse ("" when it does)."""
        self.built = False
        """Whether the body is mounted (the main screen builds it after the first frame)."""

    # -- composition -----------------------------------------------------------------------------

    mount_snapshot: tuple[str, ...] = ()
    """The rows the pane showed when the window was last left: drawn over it (the pane is ``-stale``)
    until the Workspace opens (``MainScreen._opened``)."""

    def compose(self) -> ComposeResult:
        if self.mount_snapshot:
            from ..snapshot import snapshot_view

            yield snapshot_view(self.mount_snapshot)
        yield self.heading()

    def compose_body(self) -> ComposeResult:
        """The pane's widgets below the heading and the filter bar."""
        yield from ()

    async def build(self) -> None:
        """Mount the filter bar and the body once, then load if the Workspace is already here."""
        if self.built:
            return
        self.built = True

        def body() -> ComposeResult:
            yield self.filter_bar()
            yield Static("", classes="filter-help", id=f"{self.id}-filter-help", markup=False)
            yield from self.compose_body()

        await self.mount_compose(body())
        if not self.is_attached:  # the app is closing: the body went with it
            return
        self.body_mounted()
        if self.workspace is not None:
            self.request_reload()

    def body_mounted(self) -> None:
        """Called once the body is mounted (before the first load)."""

    # -- composition helpers ----------------------------------------------------------------

    def filter_bar(self) -> Input:
        """The hidden filter input every pane yields once."""
        return Input(placeholder="filter…  (esc clears)", classes="filter-bar", id=f"{self.id}-filter")

    def heading(self) -> Label:
        """The pane's heading line."""
        return Label(self.heading_text(), classes="pane-title")

    def headline(self, *, short: bool = False) -> str:
        """The pane's name and its count: ``7 runs · 1 waiting on user``, ``canvas · 19 objects``
        (the name alone until the count is known); ``short`` keeps the first count only."""
        count = self.count_label if self.count_label not in ("", "—") else ""
        if short:
            count = count.split(" · ")[0]
        if not count:
            return self.title
        first = count.split(" · ")[0].split()
        if len(first) >= 2 and first[1] in (self.title, self.title.removesuffix("s")):
            return count  # the count names the pane itself (``7 runs``)
        return f"{self.title} · {count}"

    def strip_labels(self) -> tuple[str, ...]:
        """The pane's labels for the strip, fullest first: ``headline``, its short form, the name and
        its first number (``runs 7``), the name alone."""
        number = next((word for word in self.count_label.split() if word.isdigit()), "")
        return (self.headline(), self.headline(short=True), f"{self.title} {number}".strip(), self.title)

    def heading_text(self) -> Text:
        """The heading: the key that brings the pane forward, then ``headline``."""
        text = Text()
        text.append(f" {self.number} ", style="reverse")
        text.append(f" {self.headline()}")
        return text

    def watch_count_label(self) -> None:
        if self.is_mounted:
            for label in self.query(".pane-title").results(Label):
                label.update(self.heading_text())

    # -- workspace and changes --------------------------------------------------------------

    @property
    def desk(self) -> Desk:
        """The workspace's desk (a pane acts only once the workspace is open)."""
        if self.workspace is None:
            raise RuntimeError("the workspace is not open yet")
        return self.workspace.desk

    def attach(self, workspace: WorkspaceView) -> None:
        """The Workspace opened: remember it and load."""
        self.workspace = workspace
        self.request_reload()

    def changed(self, changes: tuple[Change, ...]) -> None:
        """A batch of service changes arrived; reload when one concerns this pane."""
        if self.workspace is not None and any(c.source in self.sources for c in changes):
            self.request_reload()

    def request_reload(self) -> None:
        """Reload once after the current messages (bursts coalesce into one reload)."""
        if not self._reload_queued:
            self._reload_queued = True
            self.call_later(self._run_reload)

    def _run_reload(self) -> None:
        self._reload_queued = False
        if self.workspace is not None and self.built:
            self.reload()

    def reload(self) -> None:
        """Fetch fresh data (a worker) and show it."""

    def forget_drawn(self) -> None:
        """Forget the rows last drawn, so the next reload redraws them all (the theme changed)."""

    # -- actions through workers ------------------------------------------------------------

    @work(group="actions", exit_on_error=False)
    async def act(self, what: Said | Callable[[], Said], call: Callable[[], object]) -> object:
        """Run one service call; on success say ``what`` in a toast and reload.

        A callable ``what`` is asked after the call, so the toast states what the call actually left
        (the state read back), not what was hoped for."""
        result = call()
        if isinstance(result, Awaitable):
            result = await result
        self.say(what() if callable(what) else what)
        self.request_reload()
        return result

    def form_act(self, title: str, fields: list[Field], what: Said | Callable[[], Said],
                 call: Callable[[dict[str, str]], object], *, submit: str = "OK",
                 check: Callable[[dict[str, str]], str | None] | None = None) -> None:
        """Ask with a form that makes the change itself: a refusal shows inline and the form stays open
        with what was typed; once made, say ``what`` (a callable is asked after the change) and reload."""
        FormDialog = load(self.app, "screens.dialogs.form", "FormDialog", what="The form dialog")
        if FormDialog is None:
            return

        def done(values: dict[str, str] | None) -> None:
            if values is not None:
                self.say(what() if callable(what) else what)
                self.request_reload()
        self.app.push_screen(FormDialog(title, fields, submit=submit, check=check, action=call), done)

    def say(self, said: Said) -> None:
        """A toast for an action's result (nothing when empty; a warning when it did not do what was asked)."""
        text, severity = (said, "information") if isinstance(said, str) else said
        if text:
            notify_plain(self.app, text, severity=severity, timeout=3 if severity == "information" else 5)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state == WorkerState.ERROR and event.worker.error is not None:
            report = getattr(self.app, "report_error", None)
            if report is not None:
                report(event.worker.error)

    # -- filter -----------------------------------------------------------------------------

    def open_filter(self) -> None:
        """Show the filter bar and its help line, and focus it."""
        bar = self.query_one(".filter-bar", Input)
        bar.add_class("-shown")
        self.query_one(".filter-help", Static).add_class("-shown")
        self._show_filter_help()
        bar.focus()

    def apply_filter(self, text: str) -> None:
        """Set the filter to ``text`` (a saved view) and show it in the bar; empty clears it."""
        if not text:
            self.clear_filter()
            return
        bar = self.query_one(".filter-bar", Input)
        bar.value = text
        bar.add_class("-shown")
        self.query_one(".filter-help", Static).add_class("-shown")
        self.filter_text = text

    @on(Input.Changed, ".filter-bar")
    def _filter_changed(self, event: Input.Changed) -> None:
        event.stop()
        self.filter_text = event.value

    @on(Input.Submitted, ".filter-bar")
    def _filter_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.focus_main()

    def clear_filter(self) -> None:
        """Clear and hide the filter."""
        bar = self.query_one(".filter-bar", Input)
        bar.value = ""
        bar.remove_class("-shown")
        self.query_one(".filter-help", Static).remove_class("-shown")
        self.filter_text = ""
        self.focus_main()

    def _check_filter(self) -> bool:
        """Parse the filter typed: remember it when it parses, else say why under the bar. Returns
        whether it parsed (a filter that does not parse leaves the list as the last one that did)."""
        text = self.filter_text.strip()
        try:
            compile_filter(text, self.filter_pane, 0.0)
        except FilterError as error:
            self.filter_problem = str(error)
        else:
            self.filter_problem = ""
            self._good_filter = text
        if self.built:
            self._show_filter_help()
        return not self.filter_problem

    def _show_filter_help(self) -> None:
        help_line = self.query_one(".filter-help", Static)
        if self.filter_problem:
            help_line.update(Text(f"⚠ {safe(self.filter_problem, 300)}", style=tone("warn", bold=True)))
            return
        help_line.update(Text(f"fields: {fields_help(self.filter_pane)} · word \"phrase\" field:value -negated "
                              "since:5m · enter: to the list · ctrl+s: save as a view · esc: clear", style="dim"))

    @property
    def filter_pane(self) -> str:
        """The pane whose fields the filter takes (``services.desk.filters.PANE_FIELDS``)."""
        return self.id or ""

    def current_query(self) -> Query:
        """The filter that last parsed, with the clock's now for ``since:``."""
        now = self.workspace.settings.clock.time() if self.workspace is not None else 0.0
        return compile_filter(self._good_filter, self.filter_pane, now)

    def watch_filter_text(self) -> None:
        if self._check_filter() and self.workspace is not None:
            self.request_reload()

    def action_save_view(self) -> None:
        """``ctrl+s`` (in the filter or the list): save the filter as a named view in the settings file."""
        save = getattr(self.app, "save_view", None)
        if self.filter_problem:
            notify_plain(self.app, f"The filter does not parse, so it cannot be saved: {self.filter_problem}",
                         severity="warning")
        elif not self._good_filter:
            notify_plain(self.app, "Type a filter after / first, then ctrl+s saves it as a view.", severity="warning")
        elif save is not None:
            save(self.filter_pane, self._good_filter)

    # -- focus, palette, jumps --------------------------------------------------------------

    def focus_main(self) -> None:
        """Focus the pane's main list."""

    def palette_actions(self) -> list[PaletteAction]:
        """The actions that fit the selected item's current state."""
        return []

    async def palette_items(self) -> list[tuple[str, str]]:
        """``(label, key)`` of the things one can jump to in this pane."""
        return []

    def select_key(self, key: str) -> None:
        """Select the item ``key`` (after a palette jump)."""

    def selection(self) -> str | None:
        """The selected item's key (what ``select_key`` takes), or None."""
        selected = getattr(self, "selected", None)
        return selected if isinstance(selected, str) else None

    def selection_label(self) -> str:
        """The selection as a mark lists it (its key; a pane may name it better)."""
        return safe(self.selection() or "", 80)

    def note_selection(self) -> None:
        """Say that the selection moved (the main screen keeps it for back and forward)."""
        from ..messages import SelectionMoved

        key = self.selection()
        if key is not None and self.id:
            self.post_message(SelectionMoved(self.id, key))
