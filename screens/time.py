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

from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Input, Label, Static

from services.desk import OperatorError, is_system, turns_of
from services.timeline import TimeCursor, parse_when

from .run_lines import STATUS_GLYPHS, raw_line
from .text import counted, date_time, notify_plain, safe, safe_text, tone
from .widgets.footer import KeyFooter

if TYPE_CHECKING:
    from services.desk import WorkspaceView

__all__ = ["TimeScreen", "REFUSED_KEYS", "PAGE"]

PAGE = 200
"""Rows each list reads as of the cursor (its first page, in the pane's order)."""
STREAM_SHOWN = 400
"""The last events of the selected run's stream drawn as of the cursor."""
REFUSED_KEYS = "r,x,s,a,i,e,d,n,m,c,k,u,f,t,y,b,o,p,v,w,z,A,L,M,N,R,S,T,Y,space,delete,ctrl+s"
"""The keys that act on the present in the panes: refused in the past, in words."""


class TimeScreen(Screen[None]):
    """The workspace as of the cursor."""

    BINDINGS = [
        Binding("escape", "back_to_now", "Back to now", tooltip="Leave time mode: the panes show now again",
                id="workbench.time.back_to_now"),
        Binding("left_square_bracket", "step(-1)", "Back a change",
                tooltip="Move the cursor one change back (an event, an action, a decision)", id="workbench.time.back"),
        Binding("right_square_bracket", "step(1)", "Forward a change",
                tooltip="Move the cursor one change forward", id="workbench.time.forward"),
        Binding("left_curly_bracket", "minutes(-1)", "Back a minute",
                tooltip="Move the cursor a minute back", id="workbench.time.back_minute"),
        Binding("right_curly_bracket", "minutes(1)", "Forward a minute",
                tooltip="Move the cursor a minute forward", id="workbench.time.forward_minute"),
        Binding("g", "go_to", "Go to a time",
                tooltip="Type a time to move to: 14:02:11, 14:02:11.320, -5m or 2026-12-04 14:02",
                id="workbench.time.go_to"),
        Binding("F", "fork_here", "Fork here",
                tooltip="Fork the selected run at the turn it was on at the cursor", id="workbench.time.fork_here"),
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

    def compose(self) -> ComposeResult:
        yield Label("", id="time-banner")
        yield Label("", id="time-change")
        with Horizontal(classes="time-row"):
            with Vertical(classes="time-pane", id="time-canvas-pane"):
                yield Label("1 canvas", classes="time-title", id="time-canvas-title")
                yield _table("time-canvas", "type", "name", "status")
                yield Static("", id="time-graph", markup=False)
            with Vertical(classes="time-pane", id="time-inbox-pane"):
                yield Label("2 inbox", classes="time-title", id="time-inbox-title")
                yield _table("time-inbox", "to", "kind", "summary", "read")
            with Vertical(classes="time-pane", id="time-runs-pane"):
                yield Label("3 runs", classes="time-title", id="time-runs-title")
                yield _table("time-runs", "", "run", "person", "events")
                yield Static("", id="time-stream", markup=False)
        with Horizontal(classes="time-row"):
            with Vertical(classes="time-pane", id="time-grants-pane"):
                yield Label("4 grants", classes="time-title", id="time-grants-title")
                yield _table("time-grants", "person", "state", "rev", "refusal")
            with Vertical(classes="time-pane", id="time-judgments-pane"):
                yield Label("5 judgments", classes="time-title", id="time-judgments-title")
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
        """Draw every pane as of the cursor."""
        cursor = self.cursor
        self.banner = await cursor.banner()
        self.query_one("#time-banner", Label).update(Text(self.banner))
        moment = await cursor.current()
        said = "no change recorded yet" if moment is None else (
            f"change {moment.id:,}: {safe(moment.source, 20)} {safe(moment.kind, 40)} {safe(moment.item, 80)}"
            + (f" · event {moment.seq}" if moment.seq else ""))
        timeline = self.workspace.timeline
        if timeline is not None and timeline.notice and moment is not None and moment.id == cursor.first:
            said += f" · {safe(timeline.notice, 300)}"
        self.query_one("#time-change", Label).update(Text(said))
        await self._draw_canvas()
        await self._draw_inbox()
        await self._draw_runs()
        await self._draw_grants()
        await self._draw_judgments()

    def _fill(self, table_id: str, rows: list[tuple[str, tuple[Text | str, ...]]], keep: str | None) -> str | None:
        table = self.query_one(f"#{table_id}", DataTable)
        table.clear()
        for key, cells in rows:
            table.add_row(*cells, key=key)
        keys = [k for k, _ in rows]
        self.shown[table_id] = keys
        if keep in keys:
            table.move_cursor(row=keys.index(keep))
            return keep
        return keys[0] if keys else None

    async def _draw_canvas(self) -> None:
        cursor = self.cursor
        total = await cursor.count("object")
        page = await cursor.page("object", limit=PAGE)
        names = {key: str(value.get("name") or key) for key, value in page}
        self.query_one("#time-canvas-title", Label).update(f"1 canvas · {counted(total, 'object')}")
        rows = [(key, (safe_text(v.get("type"), 12), safe_text(names[key], 60), safe_text(v.get("status") or "—", 16)))
                for key, v in page]
        self.selected_object = self._fill("time-canvas", rows, self.selected_object)
        await self._draw_graph()

    async def _draw_graph(self) -> None:
        text = Text()
        ident = self.selected_object
        if ident is None:
            text.append("no object then", style="dim")
        else:
            value = await self.cursor.get("object", ident)
            name = str(value.get("name") or ident) if value else ident
            text.append(safe(name, 80) + "\n", style="bold")
            outgoing = await self.cursor.page("edge", a=ident, limit=40)
            for _, edge in outgoing:
                other = await self.cursor.get("object", str(edge["dst"]))
                text.append(f"  → {safe(edge['kind'], 20)} {safe((other or {}).get('name') or edge['dst'], 60)}\n")
            if not outgoing:
                text.append("  no edges out then\n", style="dim")
        self.query_one("#time-graph", Static).update(text)

    async def _draw_inbox(self) -> None:
        page = await self.cursor.page("inbox", limit=PAGE)
        total = await self.cursor.count("inbox")
        unread = sum(1 for _, v in page if not v.get("read"))
        self.query_one("#time-inbox-title", Label).update(f"2 inbox · {counted(total, 'entry', 'entries')} · {unread} unread")
        owners: dict[str, str] = {}
        for _, v in page:
            owner = str(v.get("owner_id"))
            if owner not in owners:
                found = await self.cursor.get("object", owner)
                owners[owner] = str((found or {}).get("name") or owner)
        rows = [(key, (safe_text(owners[str(v.get('owner_id'))], 30), safe_text(v.get("kind"), 10),
                       safe_text(v.get("summary") or v.get("event_type"), 80),
                       Text("read", style="dim") if v.get("read") else Text("unread", style=tone("warn"))))
                for key, v in page]
        self._fill("time-inbox", rows, None)

    async def _draw_runs(self) -> None:
        every = await self.cursor.page("run", limit=PAGE)
        page = [(k, v) for k, v in every if not is_system(str(v.get("user_id")))]  # as the runs pane: work, not plumbing
        live = sum(1 for _, v in page if v.get("status") != "settled" and not v.get("deleted"))
        hidden = len(every) - len(page)
        self.query_one("#time-runs-title", Label).update(
            f"3 runs · {counted(len(page), 'run')} · {live} live" + (f" · {hidden} system hidden" if hidden else ""))
        rows = []
        for key, v in page:
            status = "deleted" if v.get("deleted") else str(v.get("status"))
            title = v.get("name") or v.get("prompt") or key
            # the events the stream shows then: a burst's events are changes of their own, one by one
            events = await self.cursor.seq(key)
            rows.append((key, (Text(STATUS_GLYPHS.get(status, "·")), safe_text(title, 50), safe_text(v.get("user_id"), 24),
                               Text(str(events)))))
        self.selected_run = self._fill("time-runs", rows, self.selected_run)
        await self._draw_stream()

    async def _draw_stream(self) -> None:
        stream = self.query_one("#time-stream", Static)
        run_id = self.selected_run
        if run_id is None:
            stream.update(Text("no run then", style="dim"))
            return
        run = await self.cursor.get("run", run_id)
        seq = await self.cursor.seq(run_id)
        events = self._events(run_id, seq)
        text = Text()
        status = (run or {}).get("status", "?")
        text.append(f"{safe(run_id, 60)} · {safe(status, 20)} · {counted(len(events), 'event')} then\n", style="bold")
        for event in events[-STREAM_SHOWN:]:
            text.append(raw_line(event) + "\n")
        stream.update(text)
        stream.scroll_end(animate=False)

    def _events(self, run_id: str, seq: int) -> list[dict[str, Any]]:
        """The run's events up to ``seq``: its stream as of the cursor (read from its own log)."""
        try:
            events = self.workspace.desk.mirror.events(run_id)
        except Exception:  # a run the desk no longer knows: nothing of it can be read now
            return []
        return [e for e in events if isinstance(e.get("seq"), int) and int(e["seq"]) <= seq]  # type: ignore[call-overload]

    async def _draw_grants(self) -> None:
        grants = await self.cursor.page("grant", limit=PAGE)
        revoked = sum(1 for _, v in grants if v.get("state") != "active")
        self.query_one("#time-grants-title", Label).update(f"4 grants · {counted(len(grants), 'grant')} · {revoked} revoked")
        rows = [(key, (safe_text(key, 40), Text(safe(v.get("state"), 20), style=tone("ok") if v.get("state") == "active"
                                                                             else tone("bad", bold=True)),
                       Text(str(v.get("rev"))), safe_text(v.get("refusal") or v.get("revoked_code") or "—", 24)))
                for key, v in grants]
        self._fill("time-grants", rows, None)

    async def _draw_judgments(self) -> None:
        items = await self.cursor.page("judgment", limit=PAGE)
        waiting = sum(1 for _, v in items if (v.get("state") or v.get("status")) == "pending")
        self.query_one("#time-judgments-title", Label).update(f"5 judgments · {waiting} to judge")
        rows = []
        for key, v in items:
            if v.get("source") == "okf":
                what, by = f"{v.get('inputs', 0)} input(s) of {v.get('source_id', '')}", str(v.get("agent", ""))
            else:
                proposal = v.get("proposal") if isinstance(v.get("proposal"), dict) else {}
                what, by = str(proposal.get("topic") or proposal.get("title") or key), str(v.get("proposer", ""))
            rows.append((key, (safe_text(v.get("state") or v.get("status"), 12), safe_text(what, 60), safe_text(by, 24))))
        self._fill("time-judgments", rows, None)
        memory = await self.cursor.get("memory", "status")
        line = Text("memory: ", style="bold")
        if memory is None:
            line.append("no memory outbox then", style="dim")
        else:
            line.append(f"{memory.get('conversations', 0)} conversations · {memory.get('pending', 0)} pending · "
                        f"{memory.get('quarantined', 0)} quarantined · last delivery "
                        f"{date_time(memory.get('last_delivery_at'), 'never')}")
        self.query_one("#time-memory", Static).update(line)

    # -- selection -----------------------------------------------------------------------------

    @on(DataTable.RowHighlighted, "#time-canvas")
    async def _object_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key.value is not None and event.row_key.value != self.selected_object:
            self.selected_object = str(event.row_key.value)
            await self._draw_graph()

    @on(DataTable.RowHighlighted, "#time-runs")
    async def _run_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key.value is not None and event.row_key.value != self.selected_run:
            self.selected_run = str(event.row_key.value)
            await self._draw_stream()

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
        turns = turns_of(run_id, self._events(run_id, seq))
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


def _table(table_id: str, *columns: str) -> DataTable[Any]:
    table: DataTable[Any] = DataTable(id=table_id, cursor_type="row", zebra_stripes=True)
    table.add_columns(*columns)
    return table
