"""``TimeScreen``: every pane as it was at a moment of the history (``H`` or ``[`` on the main screen).

The screen draws the same things as the dashboard (the canvas's objects and the selected one's
edges, the inboxes, the runs and the selected run's stream, the grants, the judgments and the
memory counts) from ``services.timeline``'s history as of the cursor, never from the live services.
A banner says where the cursor is: "as of 14:02:11.320 · 1,204 changes ago · esc: back to now";
what keeps arriving is counted there, not drawn.

Keys: ``[`` / ``]`` one change back / forward, ``{`` / ``}`` a minute, ``g`` a typed time
(``14:02:11``, ``-5m``), ``esc`` back to now, ``F`` forks the selected run at the turn it was on at
the cursor (the one action allowed in the past). Any other action key is refused, in words.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, cast

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import DataTable, Input, Static

from services.desk import OperatorError, is_system, turns_of
from services.errors import ServiceError
from services.desk import seq_of
from services.timeline import HistoryError, Panes, TimeCursor, parse_when

from .run_lines import STATUS_GLYPHS, conversation_of, raw_line
from .text import counted, date_time, notify_plain, safe, safe_text, tone
from .widgets.footer import KeyFooter
from .widgets.stream import EventStream

if TYPE_CHECKING:
    from services.desk import WorkspaceView

__all__ = ["TimeScreen", "REFUSED_KEYS", "PAGE"]

PAGE = 200
"""Rows each list reads as of the cursor (its first page, in the pane's order)."""
STREAM_SHOWN = 400
"""The last events of the selected run's stream drawn as of the cursor."""
REFUSED_KEYS = "r,x,s,a,i,e,d,n,m,c,k,u,f,t,y,b,o,p,w,z,A,L,M,N,R,S,T,Y,space,delete,ctrl+s"
"""The keys that act on the present in the panes: refused in the past, in words."""


class TimeLine(Widget):
    """One line of text (a banner, a pane's title): shown again without laying the screen out again."""

    DEFAULT_CSS = """
    TimeLine { height: 1; width: 1fr; }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._content: Text | str = ""

    def show(self, content: Text | str) -> None:
        """Show ``content`` (plain data: never read as markup)."""
        self._content = content
        self.refresh()

    def render(self) -> Text:
        content = self._content
        return content if isinstance(content, Text) else Text(content)


class TimeScreen(Screen[None]):
    """The workspace as of the cursor."""

    BINDINGS = [
        Binding("escape", "back_to_now", "Back to now", tooltip="Leave time mode: the panes show now again",
                id="workbench.time.back_to_now"),
        Binding("left_square_bracket", "step(-1)", "Back",
                tooltip="Move the cursor one change back (an event, an action, a decision)", id="workbench.time.back"),
        Binding("right_square_bracket", "step(1)", "Forward",
                tooltip="Move the cursor one change forward", id="workbench.time.forward"),
        Binding("left_curly_bracket", "minutes(-1)", "Minute back",
                tooltip="Move the cursor a minute back", id="workbench.time.back_minute"),
        Binding("right_curly_bracket", "minutes(1)", "Minute on",
                tooltip="Move the cursor a minute forward", id="workbench.time.forward_minute"),
        Binding("g", "go_to", "Go to time",
                tooltip="Type a time to move to: 14:02:11, 14:02:11.320, -5m or 2026-12-04 14:02",
                id="workbench.time.go_to"),
        Binding("F", "fork_here", "Fork here",
                tooltip="Fork the selected run at the turn it was on at the cursor", id="workbench.time.fork_here"),
        Binding("v", "toggle_raw", "Raw events", show=False,
                tooltip="Show the selected run's stream as raw events, or as the conversation again",
                id="workbench.time.toggle_raw"),
        Binding("question_mark", "show_help", "Keys", tooltip="Show every key of time mode, with what it does",
                id="workbench.time.show_help"),
        Binding(REFUSED_KEYS, "refuse", "Refused in the past", show=False,
                tooltip="Actions change the present: refused while the panes show the past"),
    ]

    DEFAULT_CSS = """
    TimeScreen #time-banner { background: $warning 30%; color: $foreground; text-style: bold; padding: 0 1; }
    TimeScreen #time-change { color: $text-muted; padding: 0 1; }
    TimeScreen .time-row { height: 1fr; }
    TimeScreen .time-pane { width: 1fr; border: round $panel; }
    TimeScreen .time-pane:focus-within { border: round $accent; }
    TimeScreen .time-title { text-style: bold; padding: 0 1; }
    TimeScreen DataTable { height: 1fr; }
    TimeScreen #time-graph, TimeScreen #time-stream { height: 1fr; overflow-y: auto; padding: 0 1; }
    TimeScreen #time-stream-title { padding: 0 1; }
    TimeScreen #time-memory { height: auto; padding: 0 1; }
    TimeScreen #time-when { dock: bottom; display: none; }
    TimeScreen #time-when.shown { display: block; }
    """

    def __init__(self, workspace: WorkspaceView, *, back: int = 0) -> None:
        super().__init__(id="time")
        self.workspace = workspace
        timeline = workspace.timeline
        assert timeline is not None
        self.cursor = TimeCursor(timeline.store)
        """Where the panes are drawn from."""
        self.back = back
        """Changes to step back when the screen opens (``[`` on the main screen opens one back)."""
        self.selected_object: str | None = None
        self.selected_run: str | None = None
        self.shown: dict[str, list[str]] = {}
        """Each list's keys as drawn, in order (what the pilot tests read)."""
        self.banner = ""
        """The banner's text as drawn."""
        self.panes: Panes | None = None
        """What the panes were last drawn from."""
        self._raw: dict[str, object] = {}
        self._built: dict[str, list[tuple[str, tuple[Text | str, ...]]]] = {}
        self._stream_drawn: tuple[str | None, int, str, bool] | None = None
        self.raw = False
        """The stream as raw events (``v``), or as the conversation."""
        self._texts: dict[str, Text | str] = {}

    def compose(self) -> ComposeResult:
        yield TimeLine(id="time-banner")
        yield TimeLine(id="time-change")
        with Horizontal(classes="time-row"):
            with Vertical(classes="time-pane", id="time-canvas-pane"):
                yield TimeLine(classes="time-title", id="time-canvas-title")
                yield _table("time-canvas", "type", "name", "status")
                yield Static("", id="time-graph", markup=False)
            with Vertical(classes="time-pane", id="time-inbox-pane"):
                yield TimeLine(classes="time-title", id="time-inbox-title")
                yield _table("time-inbox", "to", "kind", "summary", "read")
            with Vertical(classes="time-pane", id="time-runs-pane"):
                yield TimeLine(classes="time-title", id="time-runs-title")
                yield _table("time-runs", "", "run", "person", "events")
                yield TimeLine(id="time-stream-title")
                yield EventStream(id="time-stream")
        with Horizontal(classes="time-row"):
            with Vertical(classes="time-pane", id="time-grants-pane"):
                yield TimeLine(classes="time-title", id="time-grants-title")
                yield _table("time-grants", "person", "state", "rev", "refusal")
            with Vertical(classes="time-pane", id="time-judgments-pane"):
                yield TimeLine(classes="time-title", id="time-judgments-title")
                yield _table("time-judgments", "state", "what", "by")
                yield Static("", id="time-memory", markup=False)
        yield Input(placeholder="a time: 14:02:11, 14:02:11.320, -5m or 2026-12-04 14:02 (enter: go, esc: cancel)",
                    id="time-when")
        yield KeyFooter()

    async def on_mount(self) -> None:
        self.app.clear_notifications()
        if self.back:
            await self.cursor.step(-self.back)
        await self.redraw()
        self.query_one("#time-runs", DataTable).focus()

    # -- drawing -------------------------------------------------------------------------------

    async def redraw(self) -> None:
        """Draw every pane as of the cursor: one read of the history, then only what changed is drawn again."""
        cursor = self.cursor
        try:
            self.banner, panes = await cursor.banner_and_panes(self.selected_object, limit=PAGE)
        except HistoryError as exc:  # a damaged history is said, and the panes stay as they were drawn
            self.banner = f"the history cannot be read here: {exc} · esc: back to now"
            self._put("time-banner", Text(safe(self.banner, 400)))
            notify_plain(self.app, str(exc), title="Time mode", severity="error")
            return
        self._put("time-banner", Text(self.banner))
        moment = panes.moment
        said = "no change recorded yet" if moment is None else (
            f"change {moment.id:,}: {safe(moment.source, 20)} {safe(moment.kind, 40)} {safe(moment.item, 80)}"
            + (f" · event {moment.seq}" if moment.seq else ""))
        timeline = self.workspace.timeline
        if timeline is not None and timeline.notice and moment is not None and moment.id == cursor.first:
            said += f" · {safe(timeline.notice, 300)}"
        self._put("time-change", Text(said))
        self.panes = panes
        self._draw_canvas(panes)
        self._draw_inbox(panes)
        self._draw_runs(panes)
        self._draw_grants(panes)
        self._draw_judgments(panes)

    def _put(self, widget_id: str, content: Text | str) -> None:
        """Show ``content`` in a line or a static, only when it differs from what it shows."""
        if self._texts.get(widget_id) != content:
            self._texts[widget_id] = content
            widget = self.query_one(f"#{widget_id}")
            if isinstance(widget, TimeLine):
                widget.show(content)
            else:
                cast(Static, widget).update(content)

    def _fill(self, table_id: str, raw: object, rows: Callable[[], list[tuple[str, tuple[Text | str, ...]]]],
              keep: str | None) -> str | None:
        """Draw a list's rows from ``raw`` (what they are made of: when it is what they were last made of,
        nothing is built or drawn), keeping ``keep`` selected; answers the selection. When only some
        cells changed (a run's event count, a grant's state), only those are drawn again."""
        if self._raw.get(table_id) != raw:
            self._raw[table_id] = raw
            built = rows()
            keys = [k for k, _ in built]
            table = self.query_one(f"#{table_id}", DataTable)
            before = self._built.get(table_id)
            if before is not None and [k for k, _ in before] == keys:
                columns = list(table.columns)
                for (key, cells), (_, old) in zip(built, before, strict=True):
                    for column, cell, was in zip(columns, cells, old, strict=True):
                        if cell != was:
                            table.update_cell(key, column, cell)
            else:
                table.clear()
                for key, cells in built:
                    table.add_row(*cells, key=key)
                if keep in keys:
                    table.move_cursor(row=keys.index(keep))
            self._built[table_id] = built
            self.shown[table_id] = keys
        keys = self.shown.get(table_id, [])
        if keep in keys:
            return keep
        return keys[0] if keys else None

    def _draw_canvas(self, panes: Panes) -> None:
        self._put("time-canvas-title", f"1 canvas · {counted(panes.object_count, 'object')}")
        def rows() -> list[tuple[str, tuple[Text | str, ...]]]:
            return [(key, (safe_text(v.get("type"), 12), safe_text(panes.names.get(key, key), 60),
                           safe_text(v.get("status") or "—", 16))) for key, v in panes.objects]
        self.selected_object = self._fill("time-canvas", panes.objects, rows, self.selected_object)
        self._draw_graph(panes)

    def _draw_graph(self, panes: Panes) -> None:
        text = Text()
        ident = self.selected_object
        if ident is None:
            text.append("no object then", style="dim")
        else:
            text.append(safe(panes.names.get(ident, ident), 80) + "\n", style="bold")
            for _, edge in panes.edges:
                dst = str(edge["dst"])
                text.append(f"  → {safe(edge['kind'], 20)} {safe(panes.names.get(dst, dst), 60)}\n")
            if not panes.edges:
                text.append("  no edges out then\n", style="dim")
        self._put("time-graph", text)

    def _draw_inbox(self, panes: Panes) -> None:
        unread = sum(1 for _, v in panes.inbox if not v.get("read"))
        self._put("time-inbox-title", 
            f"2 inbox · {counted(panes.inbox_count, 'entry', 'entries')} · {unread} unread")
        owners = [panes.names.get(str(v.get("owner_id")), str(v.get("owner_id"))) for _, v in panes.inbox]

        def rows() -> list[tuple[str, tuple[Text | str, ...]]]:
            return [(key, (safe_text(owner, 30), safe_text(v.get("kind"), 10),
                           safe_text(v.get("summary") or v.get("event_type"), 80),
                           Text("read", style="dim") if v.get("read") else Text("unread", style=tone("warn"))))
                    for (key, v), owner in zip(panes.inbox, owners, strict=True)]
        self._fill("time-inbox", (panes.inbox, owners), rows, None)

    def _draw_runs(self, panes: Panes) -> None:
        page = [(k, v) for k, v in panes.runs if not is_system(str(v.get("user_id")))]  # as the runs pane: work, not plumbing
        live = sum(1 for _, v in page if v.get("status") != "settled" and not v.get("deleted"))
        hidden = len(panes.runs) - len(page)
        self._put("time-runs-title", 
            f"3 runs · {counted(len(page), 'run')} · {live} live" + (f" · {hidden} system hidden" if hidden else ""))
        def rows() -> list[tuple[str, tuple[Text | str, ...]]]:
            out: list[tuple[str, tuple[Text | str, ...]]] = []
            for key, v in page:
                status = "deleted" if v.get("deleted") else str(v.get("status"))
                title = v.get("name") or v.get("prompt") or key
                # the events the stream shows then: a burst's events are changes of their own, one by one
                out.append((key, (Text(STATUS_GLYPHS.get(status, "·")), safe_text(title, 50),
                                  safe_text(v.get("user_id"), 24), Text(str(panes.seqs.get(key, 0))))))
            return out
        self.selected_run = self._fill("time-runs", (page, panes.seqs), rows, self.selected_run)
        self._draw_stream(panes)

    def _draw_stream(self, panes: Panes) -> None:
        run_id = self.selected_run
        seq = panes.seqs.get(run_id, 0) if run_id else 0
        run = dict(panes.runs).get(run_id) if run_id else None
        status = str((run or {}).get("status", "?"))
        if self._stream_drawn == (run_id, seq, status, self.raw):
            return
        self._stream_drawn = (run_id, seq, status, self.raw)
        stream = self.query_one("#time-stream", EventStream)
        if run_id is None:
            self._put("time-stream-title", Text("no run then", style="dim"))
            stream.replace(())
            return
        self._put("time-stream-title", Text(f"{safe(run_id, 60)} · {safe(status, 20)} · {counted(seq, 'event')} then",
                                            style="bold"))
        desk, after = self.workspace.desk, max(0, seq - STREAM_SHOWN)
        if not desk.mirror.covers(run_id, after):  # a window attached to a server holds a run's newest events
            stream.replace(())
            self.run_worker(self._read_stream(run_id, after, seq, self._stream_drawn), group="time-stream",
                            exclusive=True)
            return
        events = self._events(run_id, seq)
        stream.replace([raw_line(event) for event in events] if self.raw else conversation_of(events))

    async def _read_stream(self, run_id: str, after: int, seq: int, drawn: object) -> None:
        """Read the run's events up to the cursor from the server, and draw them if the cursor is still there."""
        try:
            events = await self.workspace.desk.read_events(run_id, after, seq)
        except (ServiceError, LookupError):
            events = []
        if self._stream_drawn != drawn:
            return
        self.query_one("#time-stream", EventStream).replace(
            [raw_line(event) for event in events] if self.raw else conversation_of(events))

    def _events(self, run_id: str, seq: int) -> list[dict[str, object]]:
        """The run's last ``STREAM_SHOWN`` events up to ``seq``: its stream as of the cursor, read from its
        own log (only those are read)."""
        try:
            events = self.workspace.desk.events_since(run_id, max(0, seq - STREAM_SHOWN))
        except (ServiceError, LookupError):  # a run the desk no longer knows: nothing of it can be read now
            return []
        return [e for e in events if seq_of(e) <= seq]

    def _draw_grants(self, panes: Panes) -> None:
        grants = panes.grants
        revoked = sum(1 for _, v in grants if v.get("state") != "active")
        self._put("time-grants-title", f"4 grants · {counted(len(grants), 'grant')} · {revoked} revoked")
        def rows() -> list[tuple[str, tuple[Text | str, ...]]]:
            return [(key, (safe_text(key, 40),
                           Text(safe(v.get("state"), 20), style=tone("ok") if v.get("state") == "active"
                                else tone("bad", bold=True)),
                           Text(str(v.get("rev"))), safe_text(v.get("refusal") or v.get("revoked_code") or "—", 24)))
                    for key, v in grants]
        self._fill("time-grants", grants, rows, None)

    def _draw_judgments(self, panes: Panes) -> None:
        items = panes.judgments
        waiting = sum(1 for _, v in items if (v.get("state") or v.get("status")) == "pending")
        self._put("time-judgments-title", f"5 judgments · {waiting} to judge")
        def rows() -> list[tuple[str, tuple[Text | str, ...]]]:
            out: list[tuple[str, tuple[Text | str, ...]]] = []
            for key, v in items:
                if v.get("source") == "okf":
                    what = (f"{v.get('inputs', 0)} input(s) judged: {v.get('promote', 0)} promote, {v.get('merge', 0)} merge, "
                            f"{v.get('drop', 0)} drop · attempt {v.get('attempt', 1)}")
                    by = str(v.get("agent", ""))
                else:
                    found = v.get("proposal")
                    proposal: dict[str, object] = found if isinstance(found, dict) else {}
                    what, by = str(proposal.get("topic") or proposal.get("title") or key), str(v.get("proposer", ""))
                out.append((key, (safe_text(v.get("state") or v.get("status"), 12), safe_text(what, 60),
                                  safe_text(by, 24))))
            return out
        self._fill("time-judgments", items, rows, None)
        memory = panes.memory
        line = Text("memory: ", style="bold")
        if memory is None:
            line.append("no memory outbox then", style="dim")
        else:
            line.append(f"{memory.get('conversations', 0)} conversations · {memory.get('pending', 0)} pending · "
                        f"{memory.get('quarantined', 0)} quarantined · last delivery "
                        f"{date_time(memory.get('last_delivery_at'), 'never')}")
        self._put("time-memory", line)

    # -- selection -----------------------------------------------------------------------------

    @on(DataTable.RowHighlighted, "#time-canvas")
    async def _object_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key.value is not None and event.row_key.value != self.selected_object:
            self.selected_object = str(event.row_key.value)
            self.panes = await self.cursor.panes(self.selected_object, limit=PAGE)
            self._draw_graph(self.panes)

    @on(DataTable.RowHighlighted, "#time-runs")
    def _run_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key.value is not None and event.row_key.value != self.selected_run:
            self.selected_run = str(event.row_key.value)
            if self.panes is not None:
                self._draw_stream(self.panes)

    # -- keys ----------------------------------------------------------------------------------

    @work(group="time", exclusive=True, exit_on_error=False)
    async def action_step(self, count: int) -> None:
        await self.cursor.step(count)
        await self.redraw()

    @work(group="time", exclusive=True, exit_on_error=False)
    async def action_minutes(self, count: int) -> None:
        await self.cursor.minutes(count)
        await self.redraw()

    def action_go_to(self) -> None:
        field = self.query_one("#time-when", Input)
        field.add_class("shown")
        field.value = ""
        field.focus()

    @on(Input.Submitted, "#time-when")
    async def _when_submitted(self, event: Input.Submitted) -> None:
        newest = await self.cursor.newest_at()  # a relative time counts back from now, not from the cursor
        try:
            when = parse_when(event.value, now=newest if newest is not None else 0.0)
        except ValueError as exc:
            notify_plain(self.app, str(exc), title="Go to a time", severity="warning")
            return
        await self.cursor.jump(when)
        self._hide_when()
        await self.redraw()

    def _hide_when(self) -> None:
        field = self.query_one("#time-when", Input)
        field.remove_class("shown")
        self.query_one("#time-runs", DataTable).focus()

    def action_back_to_now(self) -> None:
        field = self.query_one("#time-when", Input)
        if field.has_class("shown"):
            self._hide_when()
            return
        self.dismiss(None)

    def action_toggle_raw(self) -> None:
        """``v``: the stream as raw events, or as the conversation."""
        self.raw = not self.raw
        if self.panes is not None:
            self._draw_stream(self.panes)

    def action_show_help(self) -> None:
        """The key help of time mode (``?``): its keys, then the App's."""
        from .help import HelpScreen
        from .help_keys import screen_help_groups

        self.app.push_screen(HelpScreen(screen_help_groups(self, "H time mode (every other action key is refused in the past)")))

    def action_refuse(self) -> None:
        at = self.banner.split(" · ")[0].removeprefix("as of ") if self.banner else "the past"
        notify_plain(self.app, f"Refused: the panes show the workspace as of {at}, and actions change only the present. "
                     "esc returns to now; F forks the selected run at the turn it was on here.",
                     title="Time mode", severity="warning")

    async def action_fork_here(self) -> None:
        run_id = self.selected_run
        if run_id is None:
            notify_plain(self.app, "Select a run to fork first.", severity="warning")
            return
        seq = await self.cursor.seq(run_id)
        try:
            # every turn counts: the whole log up to the cursor (read from the server when not held)
            events = await self.workspace.desk.read_events(run_id, 0, seq)
        except (ServiceError, LookupError):  # a run the desk no longer knows
            events = []
        turns = turns_of(run_id, [e for e in events if seq_of(e) <= seq])
        if not turns:
            notify_plain(self.app, "The run had no turn yet at the cursor: there is nothing to fork from.",
                         severity="warning")
            return
        turn = turns[-1].number
        try:
            child = await self.workspace.desk.fork_at(run_id, turn)
        except OperatorError as exc:
            notify_plain(self.app, str(exc), title="Fork", severity="error")
            return
        notify_plain(self.app, f"Forked {run_id} at turn {turn}: new run {child}.", title="Fork")


def _table(table_id: str, *columns: str) -> DataTable[Text | str]:
    table: DataTable[Text | str] = DataTable(id=table_id, cursor_type="row", zebra_stripes=True)
    table.add_columns(*columns)
    return table
