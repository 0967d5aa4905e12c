"""``RunsPane`` (``#runs``): every run, the selected run's live stream, and the keys that drive runs.

Operator keys act as the model or the runtime (reply, fail a turn, settle, ask, idle, emit,
delete); app keys go through the real SDK (start, message, cancel, fork). Every action shows up in
the stream, attributed. A refusal in the stream names the grant revision behind it (``g``).

``t`` / ``T`` step a turn cursor through the selected run's turns (the turn's line is marked in the
stream); ``F`` forks the run at that turn (the last one when the cursor is off): a form shows the
turn's message to edit, and the fork, a new run with the parent's messages up to that turn, starts
and is selected. A fork's info line and its stream name its parent and turn.
"""

from __future__ import annotations

import re
import time
from bisect import bisect_right
from contextlib import aclosing
from collections import deque
from collections.abc import Callable, Collection
from typing import get_args

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.coordinate import Coordinate
from textual.timer import Timer
from textual.widgets import DataTable, Label, Static

from services.changes import Change
from services.errors import ServiceError
from services.wire import Outcome, TurnErrorCode
from services.desk import SYSTEM_USERS, OperatorAction, RefusalRecord, RunDetail, RunView, lineage, run_view, seq_of

from .diff import DiffScreen
from .dialogs import ConfirmDialog, DetailDialog, Field
from .dialogs.form import json_object_check
from .messages import JumpRequested
from .run_lines import (FOLDED, FORK_GLYPH, STATUS_GLYPHS, Attribution, action_line, carried_lines, conversation_of,
                        lineage_phrase, merge_lines, raw_line, refusal_line, turn_line)
from .text import DETAIL_CAP, age, cell_text, counted, words, highlight, iso, notify_plain, run_names, safe, safe_text, tone
from .widgets.fit_table import FitTable, fit_cell
from .widgets.pane import Pane, PaletteAction, Said, is_current
from .widgets.stream import EventStream

WINDOW = 5000
"""How many of a run's newest events the stream draws when the run is selected."""
PAGE = 2000
"""How many events are read at a time as the operator scrolls past the first (or last) drawn."""
DRAWN = 12_000
"""The most events the stream draws lines of: scrolling on lets the far end go (read again when wanted)."""

__all__ = ["RunsPane"]

TURN_CODES: tuple[str, ...] = get_args(TurnErrorCode)
"""The codes a failed turn may carry (the wire's)."""
SETTLE_KINDS: tuple[str, ...] = get_args(Outcome)
"""How a run may settle (the wire's outcomes)."""
Row = tuple[Text, Text, Text, Text, Text, Text]
"""A run's cells in the list: glyph, title, status, age, person, activity."""
WAITING = "waiting_on_user"
"""The status of a run waiting on its person (the list's title counts them)."""
ROWS = 160
"""The most runs the list holds as table rows at once: a window of the listed runs around the cursor
(moved as the cursor nears its edge), so a workspace of many runs costs the list what it shows."""
EDGE = 16
"""The window moves (centred on the cursor) when the cursor comes this near an edge it has runs beyond."""
PALETTE_RUNS = 40
"""The most runs the command palette is offered for one query (the best matches, newest first)."""
SEARCH_AFTER = 0.3
"""Seconds a filter stays as typed before the older runs are searched for it."""
FOUND_HELD = 2000
"""The most older runs (those a window over many runs does not hold) one filter takes into the list:
the newest that match; a filter that matches more says so (narrow it to list the rest)."""
FRAME_HZ = 60
"""How often run events given by the change feed are applied (once a frame, in one batch)."""
_DIGITS = re.compile("[0-9]").sub
"""Replaces each digit (the info line's counts change while its run streams; its shape does not)."""
INFO_EVERY = 0.25
"""Seconds between redraws of the info line while its run streams (a redraw lays the pane out again)."""


class RunTable(FitTable):
    """The runs list's table: it holds a window of the listed runs (``ROWS``), so its first and last
    rows (``ctrl+home``, ``ctrl+end``) are asked of the pane, which knows the whole list."""

    class Reach(Message):
        """The operator asked for the list's first (``last`` False) or last run."""

        def __init__(self, table: "RunTable", last: bool) -> None:
            super().__init__()
            self.table = table
            self.last = last

        @property
        def control(self) -> "RunTable":
            return self.table

    def action_scroll_top(self) -> None:
        self.post_message(self.Reach(self, False))

    def action_scroll_bottom(self) -> None:
        self.post_message(self.Reach(self, True))


class RunsPane(Pane):
    """Runs: list, live stream, and every run action by key."""

    title = "runs"
    number = 3
    sources = frozenset({"cloud", "workspace"})

    # the footer keeps the first keys when room is short: what an app does to a run (n m x), then the
    # operator's own writes (e d), then acting as the model, then the views
    BINDINGS = [
        Binding("n", "start_run", "New run",
                tooltip="Start a new run for a person, as their app would", id="workbench.runs.start_run"),
        Binding("m", "send_message", "Message",
                tooltip="Send the run a message, as its app would", id="workbench.runs.send_message"),
        Binding("x", "cancel_run", "Cancel",
                tooltip="Cancel the run, as its app would (asks first)", id="workbench.runs.cancel_run"),
        Binding("e", "emit_event", "Emit",
                tooltip="Emit an event (type and fields) on the run or one of its nodes",
                id="workbench.runs.emit_event"),
        Binding("d", "delete_run", "Delete", tooltip="Delete the run (asks first)", id="workbench.runs.delete_run"),
        Binding("r", "reply", "Reply",
                tooltip="Reply as the model to the selected run (streamed, attributed to you)",
                id="workbench.runs.reply"),
        Binding("f", "fail_turn", "Fail turn",
                tooltip="Fail the run's current turn with an error code", id="workbench.runs.fail_turn"),
        Binding("s", "settle", "Settle",
                tooltip="Settle the run with an outcome (a result or a reason): it ends", id="workbench.runs.settle"),
        Binding("a", "ask", "Ask",
                tooltip="Ask the run's person a question: the run waits on their answer", id="workbench.runs.ask"),
        Binding("i", "go_idle", "Idle",
                tooltip="Make the run idle: it waits for its app's next message", id="workbench.runs.go_idle"),
        Binding("F", "fork_run", "Fork at turn",
                tooltip="Fork the run at the cursor's turn (else its last turn), with that message to edit",
                id="workbench.runs.fork_run"),
        Binding("p", "toggle_pause", "Pause",
                tooltip="Pause the stream where it is, or follow it again", id="workbench.runs.toggle_pause"),
        Binding("v", "toggle_view", "Raw/chat",
                tooltip="Switch the stream between the conversation and the raw events",
                id="workbench.runs.toggle_view"),
        Binding("w", "toggle_wrap", "Wrap",
                tooltip="Wrap long stream lines, or cut them at the edge", id="workbench.runs.toggle_wrap"),
        Binding("o", "event_detail", "Event",
                tooltip="Open the selected event in full (← → step through events)", id="workbench.runs.event_detail"),
        Binding("g", "open_grant", "Grant",
                tooltip="Go to the grant of the run's person in the grants pane", id="workbench.runs.open_grant"),
        Binding("c", "compare_run", "Compare",
                tooltip="Mark the run for comparison; c on a second run compares the two side by side",
                id="workbench.runs.compare_run"),
        Binding("t", "next_turn", "Next turn", show=False,
                tooltip="Move the turn cursor to the run's next turn (its line is marked in the stream)",
                id="workbench.runs.next_turn"),
        Binding("T", "previous_turn", "Previous turn", show=False,
                tooltip="Move the turn cursor to the run's previous turn", id="workbench.runs.previous_turn"),
        Binding("escape", "clear_filter", "Clear filter", show=False,
                tooltip="Clear the filter", id="workbench.runs.clear_filter"),
    ]

    def __init__(self, *, classes: str = "") -> None:
        super().__init__(id="runs", classes=classes)
        self.selected: str | None = None
        """The id of the run whose stream is shown."""
        self._preferred: str | None = None
        """The run a fresh list selects: the newest one of a person, not of the harvest judge."""
        self.raw = False
        """Raw events (True) or the assembled conversation (False)."""
        self._table_rows: dict[str, Row] = {}
        self._order: list[str] = []
        """The ids of the runs the table holds, in list order (a window of ``_listed``)."""
        self._listed: dict[str, RunView] = {}
        """Every run the list shows (filtered, newest first), of which the table holds ``_order``."""
        self._ids: list[str] = []
        """``_listed``'s ids, in list order."""
        self._top = 0
        """The index in ``_ids`` of the table's first row."""
        self._seq = 0
        """The last event of the selected run drawn in the stream."""
        self._counts = (0, 0, 0)
        """The title's counts as last drawn: runs listed (system runs apart), waiting on their person, system runs."""
        self._touched: set[str] = set()
        self._started: set[str] = set()
        """Runs started since the last frame (taken into the list in place when no filter is typed)."""
        """Runs whose events arrived since the last frame."""
        self._frame: Timer | None = None
        """Applies the events given since the last frame (runs only while some wait)."""
        self._info_due = False
        """The info line waits for a redraw (its run gained events)."""
        self._info_at = 0.0
        """When the info line was last drawn (``time.monotonic``)."""
        self._info_shape = ""
        """The info line last drawn with its digits as ``0``: the same shape takes the same rows."""
        self._actions = 0
        self._refusals = 0
        self._attribution = Attribution()
        """The selected run's replies, messages and starts whose event is not drawn yet (its line names them)."""
        self.show_system = False
        """List the workbench's own runs (the harvest judge's) too (``A``); hidden by default."""
        self.compare_with: str | None = None
        """The run ``c`` marked for comparison (``c`` on another run compares the two)."""
        self.turn: int | None = None
        """The selected run's turn under the turn cursor (``t`` / ``T``), from 1; None while it is off."""
        self._floor = 0
        """The selected run's events start after this sequence number (its first kept event's, less one)."""
        self._above = 0
        """The stream draws the selected run's events after this sequence number (more above: ``> _floor``)."""
        self._below: int | None = None
        """The newest event the stream draws, when later ones are not drawn (None: it follows the newest)."""
        self._pages: deque[list[int]] = deque()
        """What the stream draws, oldest first, as ``[after, upto, lines]``: a page of events read as the
        operator scrolled, or the window drawn first (its ``upto`` grows as events arrive)."""
        self._turns_before = 0
        """The selected run's root turns before the events the stream draws (the turn cursor counts them)."""
        self._searched: str | None = None
        """The filter whose search of the older runs (those the window does not hold) ran or runs."""
        self._search = ""
        """That search: ``"running"``, ``"more"`` (it stopped at ``FOUND_HELD`` matches) or done (empty)."""
        self._reading = False
        """A page of older runs is being read (the list was scrolled to its end)."""
        self._found: list[str] = []
        """The older runs the filter's search held (let go when the filter changes)."""

    def compose_body(self) -> ComposeResult:
        # the title second, sized to the room left: the columns after status show only while they fit whole
        table = RunTable(id="runs-table", flex=1, keep=3, cursor_type="row", zebra_stripes=True)
        table.add_columns("", "run", "status", "age", "person", "activity")
        yield table
        yield Static("", id="run-info", markup=False)
        yield Label("", id="stream-state")
        yield EventStream(id="runs-stream")

    # -- loading ---------------------------------------------------------------------------

    def reload(self) -> None:
        desk = self.desk
        self._started.clear()  # counted below with every other run
        everything = desk.runs()
        people = [v for v in everything if v.user_id not in SYSTEM_USERS]  # one pass: a list of many runs
        system = len(everything) - len(people)
        views = everything if self.show_system else people
        now = self.workspace.settings.clock.time() if self.workspace is not None else 0.0
        query = self.current_query()
        views, needle = query.filter(views), query.needle
        self._ids = [v.id for v in views]
        self._listed = dict(zip(self._ids, views))
        # the harvest judge's runs may be listed (A), but a person's run is what opens first
        self._preferred = next((v.id for v in views if v.user_id not in SYSTEM_USERS), None)
        self._top = self._window_top(self.selected if self.selected in self._listed else self._preferred)
        self._show_rows(self._window_rows(now, needle))
        waiting = sum(1 for v in views if v.status == WAITING)
        self._counts = (len(views) - (system if self.show_system else 0), waiting, system)
        if query.empty:
            if self._searched is not None:
                self._searched, self._search = None, ""
                self.workers.cancel_group(self, "older-search")
                self._release_found()
        elif self._searched != self._good_filter and desk.unread_runs():
            # searched once the filter stays as typed a moment (each key would search them all)
            self._searched, self._search = self._good_filter, "running"
            self.workers.cancel_group(self, "older-search")
            self._release_found()
            text = self._good_filter
            self.set_timer(SEARCH_AFTER, lambda: self._search_older(text) if self._searched == text else None)
        self._show_count()
        if self.selected is not None:
            self._update_stream()
        self._show_info()

    def _show_count(self) -> None:
        """The title's counts: the runs listed, those waiting on their person, the system runs; in a
        window over many runs, the older runs it does not hold (read as the list scrolls to its end),
        or the filter's search of them."""
        shown, waiting, system = self._counts
        unread = self.desk.unread_runs()
        older = ""
        if unread and self._searched is not None:
            older = {"running": " · searching the older runs",
                     "more": f" · the newest {FOUND_HELD} older matches listed: narrow the filter for the rest"
                     }.get(self._search, "")
        elif unread:
            older = f" · {unread:,} older runs, read as the list scrolls down"
        self.count_label = (counted(shown, "run") + (f" · {waiting} waiting on user" if waiting else "")
                            + (f" · {counted(system, 'system run')}{' shown' if self.show_system else ''}" if system else "")
                            + older)

    @work(group="older-search", exclusive=True, exit_on_error=False)
    async def _search_older(self, text: str) -> None:
        """The filter ``text`` over the older runs the window does not hold, a page at a time: the
        newest ``FOUND_HELD`` that match are held and listed (the list drawn again after each page
        that found some); the title says so meanwhile."""
        found = 0
        try:
            async with aclosing(self.desk.run_pages(held=False)) as pages:  # closed at once when it stops early
                async for page in pages:
                    if self._searched != text or not self.is_mounted:
                        return
                    query = self.current_query()
                    keep = {v.id for v in query.filter([run_view(dto) for dto in page if not dto.get("deleted")])}
                    if keep:
                        taken = [dto for dto in page if dto["id"] in keep][:FOUND_HELD - found]
                        self._found += self.desk.hold_runs(taken)
                        found += len(taken)
                        self.request_reload()
                        if found >= FOUND_HELD:
                            self._search = "more"
                            return
            self._search = ""
        except ServiceError as exc:
            self._search = ""
            self.say((f"The older runs could not be searched: {exc}", "warning"))
        finally:
            if self._searched == text and self.is_mounted:
                self._show_count()

    def _release_found(self) -> None:
        """Let go of the older runs the last filter's search held (the selected run stays)."""
        found, self._found = self._found, []
        self.desk.release_runs([run_id for run_id in found if run_id != self.selected])

    @work(group="older-runs", exit_on_error=False)
    async def _read_older(self) -> None:
        """The next page of older runs (the list scrolled to its end), held and listed (``_reading``
        is set by the caller, at once: one page is read at a time)."""
        try:
            took = await self.desk.read_older_runs()
        except ServiceError as exc:
            self.say((f"The older runs could not be read: {exc}", "warning"))
            return
        finally:
            self._reading = False
        if took or not self.desk.unread_runs():
            self.request_reload()

    def _near_end(self, run_id: str) -> None:
        """Read the next older runs when ``run_id`` is near the end of the list and older ones remain
        (no filter typed: a filter searches them)."""
        if (not self._reading and self.desk.unread_runs() and not self._good_filter.strip()
                and run_id in self._listed and self._ids.index(run_id) >= len(self._ids) - EDGE):
            self._reading = True
            self._read_older()

    def _restatus(self, before: RunView, after: RunView) -> None:
        """A listed run's new status, taken in place: only the waiting count can change with it (the
        list's order is by start time, and the filter was asked again)."""
        shown, waiting, system = self._counts
        self._counts = (shown, waiting + (after.status == WAITING) - (before.status == WAITING), system)
        self._show_count()

    def _row(self, v: RunView, now: float, needle: str) -> Row:
        label = ("system · " if v.system else "") + (f"{v.name} — {v.prompt}" if v.name else v.prompt)
        return (
            Text(STATUS_GLYPHS.get(v.status, "·")),
            fit_cell(highlight(cell_text(label, 120), needle)),  # cut with … to the room left; the info line has it whole
            safe_text(v.status.replace("_", " "), 40),
            Text(age(now, v.updated_at)),
            highlight(safe_text(v.user_id, 60), needle),
            cell_text(v.activity or "", 24),
        )

    def _window_top(self, run_id: str | None) -> int:
        """Where the table's window of ``_ids`` starts so that it holds ``run_id``: where it is now when
        it holds the run already, else centred on it; the top when the run is not listed."""
        count = len(self._ids)
        if count <= ROWS or run_id is None or run_id not in self._listed:
            return 0
        top = min(self._top, count - ROWS)
        index = self._ids.index(run_id)
        if top <= index < top + ROWS:
            return top
        return max(0, min(index - ROWS // 2, count - ROWS))

    def _window_rows(self, now: float, needle: str) -> dict[str, Row]:
        """The cells of the runs in the table's window (only those are drawn)."""
        listed = self._listed
        return {run_id: self._row(listed[run_id], now, needle) for run_id in self._ids[self._top:self._top + ROWS]}

    def _move_window(self, run_id: str) -> None:
        """Centre the table's window on ``run_id`` (listed), keeping its row where it is on screen."""
        table = self.query_one("#runs-table", DataTable)
        count = len(self._ids)
        index = self._ids.index(run_id)
        top = max(0, min(index - ROWS // 2, count - ROWS))
        if top == self._top:
            return
        on_screen = table.cursor_row - round(table.scroll_y)
        self._top = top
        now = self.workspace.settings.clock.time() if self.workspace is not None else 0.0
        rows = self._window_rows(now, self.current_query().needle)
        order = list(rows)
        table.clear()
        for key, cells in rows.items():
            table.add_row(*cells, key=key)
        self._table_rows, self._order = rows, order
        row = order.index(run_id)
        table.move_cursor(row=row, scroll=False)
        # once the table has measured its new rows (when idle): the run's row where it was on screen
        table.call_after_refresh(table.scroll_to, y=max(0, row - on_screen), animate=False)

    def _near_edge(self, run_id: str) -> bool:
        """Whether ``run_id``'s row is near an edge of the table's window with listed runs beyond it."""
        if len(self._ids) <= ROWS or run_id not in self._table_rows:
            return False
        row = self._order.index(run_id)
        return (row < EDGE and self._top > 0) or (row >= len(self._order) - EDGE
                                                   and self._top + len(self._order) < len(self._ids))

    def _jump_to_end(self, last: bool) -> None:
        """The cursor to the first (or last) listed run, wherever the table's window is."""
        if not self._ids:
            return
        run_id = self._ids[-1 if last else 0]
        if run_id not in self._table_rows:
            self._move_window(run_id)
        table = self.query_one("#runs-table", DataTable)
        table.move_cursor(row=self._order.index(run_id))
        if last:
            self._near_end(run_id)

    def forget_drawn(self) -> None:
        self._table_rows, self._order = {}, []

    def _show_rows(self, rows: dict[str, Row]) -> None:
        table = self.query_one("#runs-table", DataTable)
        order = list(rows)
        if order == self._order:
            for key, cells in rows.items():
                old = self._table_rows.get(key)
                for col, (cell, before) in enumerate(zip(cells, old or ())):
                    if cell != before:
                        table.update_cell_at(Coordinate(order.index(key), col), cell)
        else:
            keep = self.selected
            table.clear()
            for key, cells in rows.items():
                table.add_row(*cells, key=key)
            if keep in rows:
                table.move_cursor(row=order.index(keep))
            elif order:
                pick = self._preferred if self._preferred in rows else order[0]
                table.move_cursor(row=order.index(pick))
                self._select(pick)
            else:
                self._select(None)
        self._table_rows, self._order = rows, order

    def _select(self, run_id: str | None) -> None:
        if run_id == self.selected:
            return
        self.selected = run_id
        self.turn = None
        self._rebuild_stream()
        self._show_info()
        self.note_selection()

    @on(DataTable.RowHighlighted, "#runs-table")
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key.value is not None and is_current(event):
            run_id = str(event.row_key.value)
            if self._near_edge(run_id):
                self._move_window(run_id)
            self._select(run_id)
            self._near_end(run_id)

    @on(RunTable.Reach, "#runs-table")
    def _reached(self, event: "RunTable.Reach") -> None:
        self._jump_to_end(event.last)

    # -- the stream --------------------------------------------------------------------------

    def _run_parts(self, *, events: bool = True) -> tuple[RunDetail, list[OperatorAction], list[RefusalRecord]] | None:
        if self.selected is None or self.workspace is None:
            return None
        desk = self.desk
        try:
            run = desk.detail(self.selected, events=events)
        except ServiceError:
            return None
        actions = desk.actions.get(run.id, [])
        refusals = [r for r in desk.refusals if r.concerns(run.id, run.user_id, run.created_at)]
        return run, actions, refusals

    def _rebuild_stream(self) -> None:
        stream = self.query_one("#runs-stream", EventStream)
        parts = self._run_parts(events=False)
        self._pages.clear()
        self._below = None
        if parts is None:
            stream.replace([])
            self._seq = self._actions = self._refusals = self._floor = self._above = self._turns_before = 0
            self._attribution = Attribution()
            return
        run, actions, refusals = parts
        desk = self.desk
        self._floor = desk.log_floor(run.id)
        events = desk.events_since(run.id, max(self._floor, run.seq - WINDOW))[-WINDOW:]  # the newest, only those read
        self._above = seq_of(events[0]) - 1 if events else run.seq
        if self._above > self._floor:  # a window of a longer log
            at = events[0].get("at") if events else None
            since = float(at) if isinstance(at, (int, float)) else 0.0
            actions = [a for a in actions if a.at >= since]
            refusals = [r for r in refusals if r.at >= since]
        lines, self._attribution = merge_lines(events, actions, refusals, raw=self.raw)
        if not self.raw and self._above <= self._floor:
            fork = self._lineage(run)
            if fork is not None:
                lines[:0] = carried_lines(run.params.get("history"), fork)
        stream.replace(lines)
        self._seq = seq_of(events[-1]) if events else 0
        self._pages.append([self._above, self._seq, len(lines)])
        self._actions, self._refusals = len(actions), len(refusals)
        if self._above <= self._floor:
            self._turns_before = 0
        if self.turn is not None:
            self._mark_turn(run.id, _turns_started(run.id, events))
        if not desk.holds(run.id, WINDOW):  # an attached window reads a run's newest events when it is shown
            self._read_tail(run.id)
        self._show_stream_state()

    def _read_tail(self, run_id: str) -> None:
        async def read() -> None:
            try:
                await self.desk.hold_tail(run_id, WINDOW)
            except ServiceError as exc:
                notify_plain(self.app, f"Could not read run “{self._run_title(run_id)}”: {exc}", severity="error")
                return
            if self.selected == run_id and self.desk.holds(run_id, WINDOW):
                self._rebuild_stream()

        self.run_worker(read(), group="stream-read", exclusive=True)

    @on(EventStream.Edge, "#runs-stream")
    def _edge(self, event: EventStream.Edge) -> None:
        """Scrolled to the first drawn line with earlier events above it, or to the last with later ones
        below: read the next page that way."""
        run_id = self.selected
        if run_id is None:
            return
        if event.top and self._above > self._floor:
            after, upto = max(self._floor, self._above - PAGE), self._above
        elif not event.top and self._below is not None:
            after, upto = self._below, self._below + PAGE
        else:
            return
        self.run_worker(self._read_page(run_id, after, upto, event.top), group="stream-page", exclusive=True)

    async def _read_page(self, run_id: str, after: int, upto: int, older: bool) -> None:
        try:
            events = await self.desk.read_events(run_id, after, upto)
        except ServiceError as exc:
            notify_plain(self.app, f"Could not read run “{self._run_title(run_id)}”: {exc}", severity="error")
            return
        if run_id != self.selected or (self._above if older else self._below) != (upto if older else after):
            return  # another run, or the stream moved meanwhile
        stream = self.query_one("#runs-stream", EventStream)
        lines = merge_lines(events, [], [], raw=self.raw)[0]
        if older:
            if not self.raw and after <= self._floor:
                run = self._now(run_id)
                fork = self._lineage(run) if run is not None else None
                if run is not None and fork is not None:
                    lines[:0] = carried_lines(run.params.get("history"), fork)
            stream.prepend(lines)
            self._pages.appendleft([after, upto, len(lines)])
            self._above = after
            self._turns_before = max(0, self._turns_before - sum(
                1 for e in events if e.get("type") == "node.turn.started" and e.get("node_id") == run_id))
            while sum(p[1] - p[0] for p in self._pages) > DRAWN and len(self._pages) > 1:
                gone = self._pages.pop()
                stream.drop(gone[2], end=True)
                self._below = gone[0]
        else:
            top = seq_of(events[-1]) if events else upto
            newest = self.desk.detail(run_id, events=False).seq
            stream.append_rows(lines)
            self._pages.append([after, top, len(lines)])
            self._below = None if top >= newest else top
            if self._below is None:  # caught up with the newest: following again from here
                self._seq = top
            while sum(p[1] - p[0] for p in self._pages) > DRAWN and len(self._pages) > 1:
                gone = self._pages.popleft()
                stream.drop(gone[2], end=False)
                self._above = gone[1]
        self._show_stream_state()

    def _update_stream(self) -> None:
        """Add what the selected run gained since it was drawn: its new events (only those are read),
        then new operator actions and refusals."""
        parts = self._run_parts(events=False)
        if parts is None:
            return
        run, actions, refusals = parts
        pending = self._take_actions(run.id, actions)
        lines = self._event_lines(run.id)
        lines.extend(pending)
        lines.extend(refusal_line(r) for r in refusals[self._refusals:])
        self._refusals = len(refusals)
        if lines:
            self.query_one("#runs-stream", EventStream).extend(lines)

    def _take_actions(self, run_id: str, actions: list[OperatorAction] | None = None) -> list[str]:
        """The lines of the actions taken since the stream was drawn. A reply or a message has none of its
        own: its event's line, drawn next, names who did it (``Attribution``); only when that event was
        drawn already (it arrived first) does the action get its own line."""
        if actions is None:
            actions = self.desk.actions.get(run_id, [])
        new, self._actions = actions[self._actions:], len(actions)
        if not new:
            return []
        if self.raw:
            return [action_line(a) for a in new]
        lines: list[str] = []
        drawn: list[dict[str, object]] | None = None
        for action in new:
            if action.action not in FOLDED:
                lines.append(action_line(action))
                continue
            if drawn is None:  # the events drawn lately: is this action's event among them?
                drawn = [e for e in self.desk.events_since(run_id, max(0, self._seq - 64)) if seq_of(e) <= self._seq]
            if any(Attribution([action]).take(e) for e in drawn):
                lines.append(action_line(action))
            else:
                self._attribution.add([action])
        return lines

    def _event_lines(self, run_id: str) -> list[str]:
        """The lines of the run's events after the last one drawn (the mirror's read models); none
        while the stream shows an earlier part of the run (they are read when it scrolls down to them)."""
        if self._below is not None:
            return []
        events = self.desk.events_since(run_id, self._seq)
        if not events:
            return []
        self._seq = seq_of(events[-1])
        lines = [raw_line(e) for e in events] if self.raw else conversation_of(events, self._attribution)
        if self._pages:
            self._pages[-1][1] = self._seq
            self._pages[-1][2] += len(lines)
        return lines

    def _apply_events(self) -> None:
        """One frame's worth of given run events: the selected run's new lines, and the rows of the
        runs that changed (a status change redraws the whole list, since its counts change)."""
        touched, self._touched = self._touched, set()
        started, self._started = self._started, set()
        if self.workspace is None or not self.built:
            return
        if self.selected in touched:
            pending = self._take_actions(self.selected)  # first: a reply's own event then names who replied
            lines = self._event_lines(self.selected) + pending
            if lines:
                self.query_one("#runs-stream", EventStream).extend(lines)
        if self._reload_queued:
            return  # a whole reload is on its way: it redraws the rows and the info line
        if self._refresh_rows(touched, started) and self.selected in touched:
            self._info_due = True
        if self._info_due:
            if time.monotonic() - self._info_at >= INFO_EVERY:
                self._show_info()
            elif self._frame is not None:
                self._frame.resume()  # drawn on a later frame, with whatever arrives meanwhile

    def _refresh_rows(self, run_ids: set[str], started: Collection[str] = ()) -> bool:
        """Redraw the rows of ``run_ids``; a run among ``started`` is taken into the list in place
        while no filter is typed. False (after asking for a whole reload) when a run is new otherwise,
        or the filter no longer keeps one. Returns True when only rows (and the counts) changed."""
        table = self.query_one("#runs-table", DataTable)
        now = self.workspace.settings.clock.time() if self.workspace is not None else 0.0
        query = self.current_query()
        needle, match = query.needle, None if query.empty else query.matcher()
        for run_id in run_ids:
            old = self._table_rows.get(run_id)
            if old is None:
                listed = self._listed.get(run_id)
                if listed is not None:  # listed outside the table's window: only a new status or match counts
                    try:
                        view = self.desk.view(run_id)
                    except ServiceError:
                        self.request_reload()
                        return False
                    if match is not None and not match(view):
                        self.request_reload()
                        return False
                    if view.status != listed.status:
                        self._restatus(listed, view)
                    self._listed[run_id] = view
                    continue
                if run_id in started and match is None:
                    try:
                        self._insert(self.desk.view(run_id), now, needle)
                    except ServiceError:
                        self.request_reload()
                        return False
                    continue
                if (match is None or self._matches_now(run_id, match)) and not self._hidden(run_id):
                    self.request_reload()
                    return False
                continue
            try:
                view = self.desk.view(run_id)
            except ServiceError:
                self.request_reload()
                return False
            cells = self._row(view, now, needle)
            if match is not None and not match(view):
                self.request_reload()
                return False
            if view.status != self._listed[run_id].status:
                self._restatus(self._listed[run_id], view)
            self._listed[run_id] = view
            row = self._order.index(run_id)
            for col, (cell, before) in enumerate(zip(cells, old)):
                if cell != before:
                    table.update_cell_at(Coordinate(row, col), cell)
            self._table_rows[run_id] = cells
        return True

    def _insert(self, view: RunView, now: float, needle: str) -> None:
        """A new run taken into the list where a whole redraw would put it (newest first; among runs
        started in the same instant, after them), and into the title's counts; the table's rows are
        drawn again only when it falls among them."""
        shown, waiting, system = self._counts
        hidden = view.user_id in SYSTEM_USERS
        if hidden:
            system += 1
        if hidden and not self.show_system:
            self._counts = (shown, waiting, system)
            self._show_count()
            return
        listed, ids = self._listed, self._ids
        at = bisect_right(ids, -view.created_at, key=lambda run_id: -listed[run_id].created_at)
        ids.insert(at, view.id)
        listed[view.id] = view
        self._counts = (shown + (not hidden), waiting + (view.status == WAITING), system)
        if not hidden and (self._preferred is None or at <= ids.index(self._preferred)):
            self._preferred = view.id
        if at < self._top:
            self._top += 1  # the same runs stay in the table's window
        elif at <= self._top + ROWS:
            self._show_rows(self._window_rows(now, needle))
        self._show_count()

    def _hidden(self, run_id: str) -> bool:
        """Whether the run is a system run the list hides now (its events redraw nothing)."""
        if self.show_system:
            return False
        try:
            return self.desk.view(run_id).system
        except ServiceError:
            return False

    def _show_info(self) -> None:
        self._info_due, self._info_at = False, time.monotonic()
        info = self.query_one("#run-info", Static)
        parts = self._run_parts(events=False)
        if parts is None:
            info.update(Text("no run selected" if self.workspace else "opening the workspace…", style="dim"))
            self._info_shape = ""
            return
        run, _, refusals = parts
        text = Text()
        text.append(f"{STATUS_GLYPHS.get('deleted' if run.deleted else run.status, '·')} ", style="bold")
        text.append(safe(run.name or run.params.get("prompt", ""), 120) + " ", style="bold")
        text.append(f"  {safe(run.user_id, 60)}  {run.seq} events  {len(run.pending)} pending")
        if run.question:
            text.append(f"\n? {safe(run.question.get('title'), 200)}", style=tone("warn"))
        if run.last_turn_error:
            text.append(f"\n✗ {safe(run.last_turn_error.get('code'), 60)}: {safe(run.last_turn_error.get('message'), 200)}",
                        style=tone("bad"))
        if run.outcome:
            text.append(f"\n■ {safe(run.outcome.get('outcome'), 60)}")
        fork = self._lineage(run)
        if fork is not None:
            parent = lineage(run.params)
            text.append(f"\n{FORK_GLYPH} {fork} ({safe(parent.parent_id if parent else '', 80)})", style=tone("accent"))
        if refusals and self._still_refused(run.user_id):  # a restored grant takes its banner with it
            last = refusals[-1]
            text.append(f"\n‼ {safe(last.code, 60)} from the grant of {safe(last.user_id, 60)} at rev {last.rev} (g)",
                        style=tone("bad"))
        shape = _DIGITS("0", text.plain)
        info.update(text, layout=shape != self._info_shape)  # only a count changed: the same rows, repainted
        self._info_shape = shape

    def _matches_now(self, run_id: str, match: Callable[[RunView], bool]) -> bool:
        """Whether a run not listed now matches the filter (its events may have made it match)."""
        try:
            view = self.desk.view(run_id)
        except ServiceError:
            return False
        return match(view)

    def _still_refused(self, user_id: str) -> bool:
        """Whether the person's grant refuses the app now (not active, or a refusal set for the next refresh)."""
        grant = next((g for g in self.desk.grants() if g.user_id == user_id), None)
        return grant is None or grant.state != "active" or grant.refusal is not None

    @on(EventStream.StateChanged, "#runs-stream")
    def _stream_state(self, event: EventStream.StateChanged) -> None:
        self._show_stream_state()

    def _show_stream_state(self) -> None:
        stream = self.query_one("#runs-stream", EventStream)
        mode = "raw events" if self.raw else "conversation"
        state = f"paused · +{stream.held} new" if stream.paused else "following"
        wrap = "wrapped" if stream.wrap else "unwrapped"
        keys = "(p pause · v view · w wrap · o event)" if self.turn is None else "(t / T turn · F fork here)"
        turn = "" if self.turn is None else f"turn {self.turn} · "
        more = []
        if self.selected is not None and self._above > self._floor:
            more.append(f"{counted(self._above - self._floor, 'earlier event')} above")
        if self.selected is not None and self._below is not None:
            more.append(f"{counted(max(0, self._seq_now() - self._below), 'later event')} below")
            state = "not following"
        window = f"{' · '.join(more)} (scroll to read) · " if more else ""
        self.query_one("#stream-state", Label).update(  # one full-width row (main.tcss): no layout pass
            Text(f"{turn}{window}{state} · {mode} · {wrap}  {keys}"), layout=False)

    def _seq_now(self) -> int:
        """The selected run's newest event's sequence number (0 when it is gone)."""
        run = self._now(self.selected) if self.selected is not None else None
        return run.seq if run is not None else 0

    def body_mounted(self) -> None:
        self._frame = self.set_interval(1 / FRAME_HZ, self._frame_tick, pause=True)
        self._show_stream_state()
        self._show_info()

    # -- key actions ---------------------------------------------------------------------------

    def _need_run(self) -> str | None:
        if self.selected is None:
            notify_plain(self.app, "Select a run first.", severity="warning")
        return self.selected

    def _now(self, run_id: str) -> RunDetail | None:
        """The run as the desk has it now, without its events (None once it is gone)."""
        try:
            return self.desk.detail(run_id, events=False)
        except ServiceError:
            return None

    def _left(self, run_id: str, done: str, before: RunDetail | None, want: tuple[str, ...] = ()) -> Said:
        """A toast that says what the action left: ``done``, then the run's status read back, and what
        it was before when that changed; a warning when the status is not one of ``want``."""
        after = self._now(run_id)
        if after is None:
            return f"{done} The run is gone."
        status = "deleted" if after.deleted else after.status
        text = f"{done} The run is {status.replace('_', ' ')}"
        if before is not None and before.status != status:
            text += f" (it was {before.status.replace('_', ' ')})"
        text += "."
        if after.question and status == "waiting_on_user":
            text += f" Its question is open: “{safe(after.question.get('title'), 80)}”."
        return (text, "warning") if want and status not in want else text

    def _refuse_settled(self, run_id: str, run: RunDetail | None, verb: str) -> bool:
        """Refuse (with a one-line reason) an action that a settled or deleted run would not take."""
        if run is None or run.deleted or run.settled:
            state = "gone" if run is None else "deleted" if run.deleted else "settled"
            ended = f" It ended {self._outcome(run)}." if run is not None and state == "settled" else ""
            notify_plain(self.app, f"Run “{self._run_title(run_id)}” is already {state}: nothing to {verb}.{ended}",
                         severity="warning")
            return True
        return False

    @staticmethod
    def _outcome(run: RunDetail) -> str:
        """How a settled run ended, as a phrase: ``with a result``, ``canceled``, ``with a runtime error``."""
        outcome = safe((run.outcome or {}).get("outcome") or "", 60)
        phrases = {"result": "with a result", "declined": "declined", "canceled": "canceled",
                   "deadline_exceeded": "past its deadline", "runtime_error": "with a runtime error"}
        return phrases.get(outcome) or (f"as {words(outcome)}" if outcome else "settled")

    def action_reply(self) -> None:
        run_id = self._need_run()
        if run_id:
            desk, before = self.desk, self._now(run_id)
            self.form_act(self._about("Reply as the model to", run_id), [Field("text", "Reply text", multiline=True)],
                          lambda: self._left(run_id, "Replied as the model.", before),
                          lambda v: desk.reply(run_id, v["text"]), submit="Reply")

    def action_fail_turn(self) -> None:
        run_id = self._need_run()
        if run_id:
            desk, before = self.desk, self._now(run_id)
            self.form_act(self._about("Fail the turn of", run_id), [Field("code", "Code", choices=TURN_CODES), Field("message", "Message", "the model failed")],
                          lambda: self._left(run_id, "Turn failed.", before),
                          lambda v: desk.fail_turn(run_id, v["code"], v["message"]), submit="Fail")

    def action_settle(self) -> None:
        run_id = self._need_run()
        if run_id:
            desk, before = self.desk, self._now(run_id)
            if self._refuse_settled(run_id, before, "settle"):
                return
            self.form_act(self._about("Settle", run_id), [Field("kind", "Outcome", choices=SETTLE_KINDS), Field("value", "Result / reason")],
                          lambda: self._left(run_id, "Run settled.", before, want=("settled",)),
                          lambda v: desk.settle(run_id, v["kind"], v["value"]), submit="Settle")

    def action_ask(self) -> None:
        run_id = self._need_run()
        if run_id:
            desk, before = self.desk, self._now(run_id)
            self.form_act(self._about("Ask the person of", run_id, "a question"), [Field("title", "Question")],
                          lambda: self._left(run_id, "Question asked.", before, want=("waiting_on_user",)),
                          lambda v: desk.ask(run_id, v["title"]), submit="Ask",
                          check=lambda v: None if v["title"].strip() else "Type the question to ask first.")

    def action_go_idle(self) -> None:
        run_id = self._need_run()
        if run_id:
            desk, before = self.desk, self._now(run_id)
            if self._refuse_settled(run_id, before, "make idle") or before is None:
                return
            if before.question:  # idle keeps an open question open: the run would stay waiting
                notify_plain(self.app, f"Run “{self._run_title(run_id)}” waits on its person's answer to "
                             f"“{safe(before.question.get('title'), 80)}”: it stays waiting on user until answered "
                             "or settled.", severity="warning")
                return
            self.act(lambda: self._left(run_id, "Stopped without a new turn.", before, want=("idle",)), lambda: desk.go_idle(run_id))

    def action_emit_event(self) -> None:
        run_id = self._need_run()
        if run_id:
            desk, before = self.desk, self._now(run_id)
            self.form_act(self._about("Emit an event on", run_id), [Field("type", "Type", placeholder="node.activity"),
                                            Field("fields", "Fields (JSON object)", "{}"),
                                            Field("node", "Node id (empty: the root)")],
                          lambda: self._left(run_id, "Event emitted.", before),
                          lambda v: desk.append_event(run_id, v["type"], v["fields"], v["node"] or None),
                          submit="Emit", check=json_object_check("fields", "Fields"))

    def action_delete_run(self) -> None:
        run_id = self._need_run()
        if run_id:
            desk, before = self.desk, self._now(run_id)
            if before is None or before.deleted:
                notify_plain(self.app, f"Run “{self._run_title(run_id)}” is already deleted: nothing to delete.",
                             severity="warning")
                return

            def done(yes: bool | None) -> None:
                if yes:
                    self.act(lambda: self._left(run_id, "Run deleted.", before, want=("deleted",)),
                             lambda: desk.delete_run(run_id))
            self.app.push_screen(ConfirmDialog(f"Delete run “{self._run_title(run_id)}” ({safe(run_id, 80)})? "
                                               "Reads will 404 and streams close."), done)

    def action_start_run(self) -> None:
        desk = self.desk if self.workspace else None
        if desk is None:
            return
        people = tuple(g.user_id for g in desk.grants()) or ("user:ada",)
        started: list[str] = []

        async def start(values: dict[str, str]) -> None:
            run_id = await desk.start_run(values["person"], values["prompt"])
            started.append(run_id)
            self.selected = None
            self._select(run_id)
        self.form_act("Start a run as the app (through the SDK)",
                      [Field("person", "Person", choices=people), Field("prompt", "Prompt")],
                      lambda: self._left(started[-1], f"Run “{self._run_title(started[-1])}” started.", None), start, submit="Start")

    def action_send_message(self) -> None:
        run_id = self._need_run()
        if run_id:
            desk, before = self.desk, self._now(run_id)
            self.form_act("Send a message as the app (through the SDK)", [Field("text", "Message")],
                          lambda: self._left(run_id, "Message sent.", before),
                          lambda v: desk.send_message(run_id, v["text"]), submit="Send")

    def action_cancel_run(self) -> None:
        run_id = self._need_run()
        if run_id:
            desk, before = self.desk, self._now(run_id)
            if self._refuse_settled(run_id, before, "cancel"):
                return

            def canceled() -> Said:
                after = self._now(run_id)
                if after is not None and after.settled and (after.outcome or {}).get("outcome") == "canceled":
                    return "Run canceled."
                return self._left(run_id, "The cancel changed nothing.", before, want=("settled",))

            def done(yes: bool | None) -> None:
                if yes:
                    self.act(canceled, lambda: desk.cancel_run(run_id))
            self.app.push_screen(ConfirmDialog(f"Cancel run “{self._run_title(run_id)}” ({safe(run_id, 80)})? "
                                               "Its turn ends and the app is told."), done)

    def _about(self, verb: str, run_id: str, after: str = "") -> str:
        """A dialog's title naming the run it acts on: ``Reply as the model to “title” (run id)``."""
        title = self._run_title(run_id)
        named = f"“{title}”" if title == safe(run_id, 80) else f"“{title}” ({safe(run_id, 80)})"
        return f"{verb} {named}" + (f" {after}" if after else "")

    def _run_title(self, run_id: str) -> str:
        """The run's one display name (``run_title``: its name, else its prompt; a short id where two runs
        share it), for toasts and dialogs."""
        return run_names(self.desk, [run_id])[run_id]

    # -- turns and forks --------------------------------------------------------------------------

    def _lineage(self, run: RunDetail) -> str | None:
        """``fork of “garden plan” at turn 2`` for a fork (its parent's title as this window has it), else None."""
        fork = lineage(run.params)
        if fork is None:
            return None
        return lineage_phrase(self._run_title(fork.parent_id), fork.turn)

    async def _step_turn(self, step: int) -> None:
        run_id = self._need_run()
        if run_id is None:
            return
        try:
            turns = await self.desk.read_turns(run_id)
        except ServiceError as exc:
            notify_plain(self.app, f"Could not read run “{self._run_title(run_id)}”: {exc}", severity="error")
            return
        count = len(turns)
        if not count:
            notify_plain(self.app, f"Run “{self._run_title(run_id)}” has no turns yet.", severity="warning")
            return
        if self.turn is None:
            self.turn = 1 if step > 0 else count
        else:
            self.turn = max(1, min(count, self.turn + step))
        try:
            drawn = await self.desk.read_events(run_id, self._above, self._below)  # what the stream draws
        except ServiceError:
            drawn = []
        self._turns_before = sum(1 for turn in turns if turn.seq <= self._above)
        self._mark_turn(run_id, _turns_started(run_id, drawn))
        self._show_stream_state()

    def _mark_turn(self, run_id: str, started: list[dict[str, object]]) -> None:
        """Mark the cursor's turn in the stream: its line (the same text for an earlier turn counts as
        that turn's, so the n-th of equal lines is the n-th of those turns). ``started`` are the run's
        root turns' first events the stream draws; a turn in a part of the run it does not draw now is
        not marked."""
        stream = self.query_one("#runs-stream", EventStream)
        index = None if self.turn is None else self.turn - self._turns_before
        if index is None or not 1 <= index <= len(started):
            stream.mark(None)
            return
        lines = [turn_line(e, raw=self.raw) for e in started[:index]]
        wanted, earlier = lines[-1], lines[:-1].count(lines[-1])
        found = [i for i, line in enumerate(stream.shown) if line == wanted]
        stream.mark(found[earlier] if earlier < len(found) else None)

    async def action_next_turn(self) -> None:
        await self._step_turn(1)

    async def action_previous_turn(self) -> None:
        await self._step_turn(-1)

    async def action_fork_run(self) -> None:
        run_id = self._need_run()
        if run_id is None:
            return
        desk, before = self.desk, self._now(run_id)
        if before is None or before.deleted:
            notify_plain(self.app, f"Run “{self._run_title(run_id)}” was deleted: there is nothing to fork.",
                         severity="warning")
            return
        try:
            turns = await desk.read_turns(run_id)
        except ServiceError as exc:
            notify_plain(self.app, f"Could not read run “{self._run_title(run_id)}”: {exc}", severity="error")
            return
        if not turns:
            notify_plain(self.app, f"Run “{self._run_title(run_id)}” has no turns yet: there is nothing to fork.",
                         severity="warning")
            return
        turn = turns[min(self.turn or len(turns), len(turns)) - 1]
        shown = safe(turn.text, DETAIL_CAP)  # the field shows the message sanitised: unchanged, the original is sent
        started: list[str] = []

        async def fork(values: dict[str, str]) -> None:
            text = values["text"]
            child = await desk.fork_at(run_id, turn.number, None if text == shown else text)
            started.append(child)
            self.selected = None
            self._select(child)

        title = self._about("Fork", run_id, f"at turn {turn.number} of {len(turns)}")
        self.form_act(title, [Field("text", f"Turn {turn.number}'s message: the fork starts with it (edit it first)",
                                    turn.text, multiline=True)],
                      lambda: f"Forked at turn {turn.number}: run “{self._run_title(started[-1])}” started.",
                      fork, submit="Fork",
                      check=lambda v: None if v["text"].strip() else "Type the message the fork starts with first.")

    def action_toggle_pause(self) -> None:
        stream = self.query_one("#runs-stream", EventStream)
        stream.paused = not stream.paused
        self._show_stream_state()  # in this frame, not after the stream's message comes back up

    def action_toggle_view(self) -> None:
        self.raw = not self.raw
        self._rebuild_stream()  # the turn cursor's line is marked again in the new view
        self._show_stream_state()

    def action_toggle_wrap(self) -> None:
        stream = self.query_one("#runs-stream", EventStream)
        stream.wrap = not stream.wrap

    def action_event_detail(self) -> None:
        parts = self._run_parts()
        if parts is None or not parts[0].events:
            notify_plain(self.app, "This run has no events yet.", severity="warning")
            return
        events = list(parts[0].events)

        def page(i: int) -> tuple[str, str]:
            import json

            event = events[i]
            return (safe(f"event {event.get('seq')} · {event.get('type')}", 200),
                    safe(json.dumps({**event, "at": iso(at)} if isinstance(at := event.get("at"), float) and at else event,  # as the wire reads
                                    indent=2, ensure_ascii=False, default=str), DETAIL_CAP))
        self.app.push_screen(DetailDialog(page, len(events), len(events) - 1))

    def action_open_grant(self) -> None:
        parts = self._run_parts(events=False)
        if parts is not None:
            self.post_message(JumpRequested("grants", parts[0].user_id))

    async def action_compare_run(self) -> None:
        """``c``: mark the selected run for comparison; ``c`` on another run shows the two side by side."""
        run_id = self._need_run()
        if run_id is None:
            return
        first = self.compare_with
        if first is None or first == run_id or self._now(first) is None:
            self.compare_with = run_id
            notify_plain(self.app, f"Run “{self._run_title(run_id)}” is marked for comparison: select another "
                         "run and press c.", timeout=4)
            return
        self.compare_with = None
        try:
            screen = await self.comparison(first, run_id)
        except ServiceError as exc:
            notify_plain(self.app, f"Could not read the runs to compare: {exc}", severity="error")
            return
        self.app.push_screen(screen)

    async def comparison(self, left: str, right: str) -> DiffScreen:
        """The screen comparing run ``left`` (A) with run ``right`` (B), each read whole."""
        from services.desk.diff import compare_runs

        desk = self.desk
        return DiffScreen(compare_runs(await desk.read_detail(left), await desk.read_detail(right), desk.refusals,
                                       left=self._run_title(left), right=self._run_title(right)))

    def action_clear_filter(self) -> None:
        self.clear_filter()

    # -- focus, palette, jumps ----------------------------------------------------------------

    def focus_main(self) -> None:
        self.query_one("#runs-table", DataTable).focus()

    def palette_actions(self) -> list[PaletteAction]:
        parts = self._run_parts(events=False)
        actions: list[PaletteAction] = [("Start a run as the app", "n", "start_run")]
        if parts is None:
            return actions
        run = parts[0]
        if run.deleted:
            return actions
        actions += [("Reply as the model", "r", "reply"), ("Fail the turn", "f", "fail_turn")]
        if not run.settled:
            actions += [("Settle the run", "s", "settle"), ("Cancel the run (SDK)", "x", "cancel_run")]
        actions += [("Ask the person", "a", "ask"), ("Send a message (SDK)", "m", "send_message"),
                    ("Go idle", "i", "go_idle"), ("Emit an event", "e", "emit_event"), ("Delete the run", "d", "delete_run"),
                    ("Open the grant", "g", "open_grant"), ("Event detail", "o", "event_detail"),
                    ("Compare with another run", "c", "compare_run"),
                    ("Fork the run at a turn", "F", "fork_run"), ("Next turn (the turn cursor)", "t", "next_turn")]
        return actions

    async def palette_items(self) -> list[tuple[str, str]]:
        return await self.palette_search("")

    async def palette_search(self, query: str) -> list[tuple[str, str]]:
        """The runs the palette offers for ``query``, at most ``PALETTE_RUNS``: those whose entry holds
        the query whole first, then those holding its letters in order (what the palette's fuzzy match
        takes), newest first in each; with no query, the newest runs. A workspace of many runs gives
        the palette a page to score, not every run on each key; in a window over many runs, the older
        runs it does not hold are searched a page at a time until the query is answered whole."""
        if self.workspace is None:
            return []
        needle = query.lower()
        loose = re.compile(".*?".join(re.escape(char) for char in needle), re.S) if needle else None
        whole: list[tuple[str, str]] = []
        near: list[tuple[str, str]] = []

        def offer(views: list[RunView]) -> bool:
            """Score ``views`` (newest first); True once the palette has its fill of whole matches."""
            for v in views:
                label = f"run {v.name or v.prompt} · {v.user_id} · {v.id}"
                entry = f"go to {label}".lower()  # as the palette lists it, and matches it
                if needle in entry:
                    whole.append((label, v.id))
                    if len(whole) >= PALETTE_RUNS:
                        return True
                elif loose is not None and len(near) < PALETTE_RUNS and loose.search(entry):
                    near.append((label, v.id))
            return False

        if not offer(self.desk.runs()) and needle and self.desk.unread_runs():
            try:
                async with aclosing(self.desk.run_pages(held=False)) as pages:  # closed at once on a break
                    async for page in pages:
                        views = sorted((run_view(dto) for dto in page if not dto.get("deleted")),
                                       key=lambda v: v.created_at, reverse=True)
                        if offer(views):
                            break
            except ServiceError as exc:  # what the held runs gave is offered
                self.say((f"The older runs could not be searched: {exc}", "warning"))
        return (whole + near)[:PALETTE_RUNS]

    def select_key(self, key: str) -> None:
        if not self.desk.has_run(key):  # an older run the window does not hold: read first
            self._read_then_select(key)
            return
        if self.filter_text:
            self.clear_filter()
        if self._hidden(key):
            self.show_system = True  # a jump to the judge's run lists the system runs (as A would)
        self.reload()
        if key in self._listed and key not in self._table_rows:
            self._move_window(key)
        if key in self._order:
            self.query_one("#runs-table", DataTable).move_cursor(row=self._order.index(key))
            self._select(key)

    @work(group="older-jump", exclusive=True, exit_on_error=False)
    async def _read_then_select(self, key: str) -> None:
        """A jump to a run the window does not hold: read it, then select it (or say it is unknown)."""
        try:
            known = await self.desk.hold_run(key)
        except ServiceError as exc:
            self.say((f"Run {safe(key, 80)} could not be read: {exc}", "warning"))
            return
        if known:
            self.select_key(key)
        else:
            self.say((f"There is no run {safe(key, 80)}.", "warning"))

    def selection_label(self) -> str:
        return self._run_title(self.selected) if self.selected else ""

    def changed(self, changes: tuple[Change, ...]) -> None:
        """Run events are applied as given, once a frame; any other change of ours reloads the list."""
        if self.workspace is None:
            return
        touched = self._touched
        for c in changes:
            if c.kind == "run.event" and c.source == "cloud":
                touched.add(c.id)
            elif c.kind == "run.started" and c.source == "cloud" and c.id is not None:
                touched.add(c.id)
                self._started.add(c.id)
            elif c.source in self.sources:
                self.request_reload()
        if touched and self._frame is not None:
            self._frame.resume()

    def _frame_tick(self) -> None:
        if self._frame is not None:
            self._frame.pause()
        self._apply_events()


def _turns_started(run_id: str, events: list[dict[str, object]]) -> list[dict[str, object]]:
    """The events among ``events`` that start one of the run's root turns."""
    return [e for e in events if e.get("type") == "node.turn.started" and e.get("node_id") == run_id]
