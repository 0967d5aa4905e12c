"""``MemoryScreen`` (``M`` from the main screen): the memory outbox, and the keys that drive it.

Shows where memory goes (and why it cannot get there), the pending records per conversation with
their delivered count, session and last error, the last delivery and last sweep, the forks
waiting, the quarantined lines with their reasons, and the cached peer representation of the
selected conversation. Below, what the memory service holds, read through the same client the
outbox delivers with: the newest sessions and the peers with their metadata, the selected session's
messages with their times, the selected peer's representation, and a search box (``/`` focuses it;
enter searches the workspace's messages). Keys: ``s`` sweep now, ``r`` retry the selected quarantined line, ``d``
drop it (both ask first), ``esc`` back. Everything shown is sanitised and markup-free.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.css.query import NoMatches
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Input, Label, Static

from services.desk import WorkspaceView
from services.errors import ServiceError

if TYPE_CHECKING:
    from services.knowledge.outbox.honcho_view import HonchoSnapshot
    from services.knowledge.outbox import MemoryOutbox, OutboxStatus, QuarantinedLine

from .dialogs import ConfirmDialog
from .loader import load
from .text import cell_text, date_time, notify_plain, run_names, safe, safe_text, tone
from .widgets.footer import KeyFooter
from .widgets.pane import is_current

__all__ = ["MemoryScreen"]


class MemoryScreen(Screen[None]):
    """The memory outbox of one Workspace."""

    BINDINGS = [
        Binding("s", "sweep", "Sweep now",
                tooltip="Sweep the outbox now: deliver what is captured to the memory service",
                id="workbench.memory.sweep"),
        Binding("r", "retry", "Retry quarantined",
                tooltip="Put the selected quarantined line back in the outbox (asks first)",
                id="workbench.memory.retry"),
        Binding("d", "drop", "Drop quarantined",
                tooltip="Set the selected quarantined line aside for good (asks first)", id="workbench.memory.drop"),
        Binding("slash", "search", "Search memory",
                tooltip="Search what the memory service holds (enter searches)", id="workbench.memory.search"),
        Binding("question_mark", "show_help", "Keys", tooltip="Show every key of the memory view, with what it does",
                id="workbench.memory.show_help"),
        Binding("escape,M", "close", "Back", tooltip="Back to the panes", id="workbench.memory.close"),
    ]

    DEFAULT_CSS = """
    MemoryScreen #memory-conversations { height: auto; max-height: 12; }
    MemoryScreen #memory-quarantine { height: auto; max-height: 10; }
    MemoryScreen .memory-heading { text-style: bold; margin-top: 1; }
    MemoryScreen #memory-sessions, MemoryScreen #memory-peers { height: auto; max-height: 10; width: 1fr; }
    MemoryScreen #memory-held { height: auto; }
    MemoryScreen VerticalScroll > Vertical { height: auto; }
    MemoryScreen #memory-messages, MemoryScreen #memory-found { height: auto; max-height: 14; }
    """

    @property
    def outbox(self) -> MemoryOutbox:
        """The workspace's memory outbox (the screen opens only when there is one)."""
        outbox = self.workspace.outbox
        if outbox is None:
            raise RuntimeError("this workspace has no memory outbox")
        return outbox

    def __init__(self, workspace: WorkspaceView) -> None:
        super().__init__(id="memory")
        self.workspace = workspace
        self.status: OutboxStatus | None = None
        """The newest ``OutboxStatus`` shown."""
        self.quarantine: list[QuarantinedLine] = []
        """The quarantined lines shown, in table order."""
        self.selected_conversation: str | None = None
        self.held: HonchoSnapshot | None = None
        """The newest ``HonchoSnapshot`` shown (what the memory service holds)."""
        self.held_session: str | None = None
        self.held_peer: str | None = None
        self.query_text: str | None = None

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static("", id="memory-where", markup=False)
            yield Label("conversations", classes="memory-heading")
            table: DataTable[str | Text] = DataTable(id="memory-conversations", cursor_type="row", zebra_stripes=True)
            table.add_columns("conversation", "owner", "pending", "delivered", "session", "turns", "error")
            yield table
            yield Static("", id="memory-summary", markup=False)
            yield Label("quarantined lines", classes="memory-heading")
            lines: DataTable[str | Text] = DataTable(id="memory-quarantine", cursor_type="row", zebra_stripes=True)
            lines.add_columns("#", "set aside", "line", "reason", "text")
            yield lines
            with Vertical():
                yield Label("peer representation", classes="memory-heading")
                yield Static("", id="memory-representation", markup=False)
            yield Label("in the memory service", classes="memory-heading")
            yield Input(placeholder="search memory (enter)", id="memory-search")
            yield Static("", id="memory-held-where", markup=False)
            with Horizontal(id="memory-held"):
                sessions: DataTable[str | Text] = DataTable(id="memory-sessions", cursor_type="row", zebra_stripes=True)
                sessions.add_columns("session", "metadata", "created")
                yield sessions
                peers: DataTable[str | Text] = DataTable(id="memory-peers", cursor_type="row", zebra_stripes=True)
                peers.add_columns("peer", "metadata", "created")
                yield peers
            yield Label("messages of the selected session", classes="memory-heading")
            messages: DataTable[str | Text] = DataTable(id="memory-messages", cursor_type="row", zebra_stripes=True)
            for label, width in (("time", 19), ("peer", 16), ("message", 90)):  # fixed: rows change under them
                messages.add_column(label, width=width)
            yield messages
            yield Static("", id="memory-peer-representation", markup=False)
            yield Label("search results", classes="memory-heading")
            found: DataTable[str | Text] = DataTable(id="memory-found", cursor_type="row", zebra_stripes=True)
            for label, width in (("time", 19), ("session", 20), ("peer", 16), ("message", 80)):
                found.add_column(label, width=width)
            yield found
        yield KeyFooter()

    def on_mount(self) -> None:
        self.reload()
        self.reload_held()
        self.set_interval(2.0, self.reload)  # captures and the timer's sweeps land while it is open

    # -- loading ------------------------------------------------------------------------------

    @work(exclusive=True, group="memory-reload")
    async def reload(self) -> None:
        """Read the outbox's status and quarantine, then redraw."""
        outbox = self.outbox
        self.status = await outbox.status()
        self.quarantine = await outbox.quarantined()
        try:
            self._draw()
        except NoMatches:  # the screen was closed while the outbox was read
            return

    @work(exclusive=True, group="memory-held")
    async def reload_held(self) -> None:
        """Read what the memory service holds (sessions, peers, messages, representation, search)."""
        self.held = await self.outbox.read_honcho(session_id=self.held_session, peer_id=self.held_peer,
                                                  query=self.query_text)
        try:
            self._draw_held()
        except NoMatches:  # the screen was closed while the memory service answered
            return

    def _draw_held(self) -> None:
        held = self.held
        if held is None:  # drawn once the memory service has answered
            return
        where = Text()
        where.append(f"{held.sessions_total} sessions · {len(held.peers)} peers shown · read from ")
        where.append(safe(self.outbox.destination, 200))
        if held.error:
            where.append("\n⚠ ", style=tone("bad", bold=True))
            where.append(safe(held.error, 600), style=tone("bad"))
        self.query_one("#memory-held-where", Static).update(where)
        for table_id, items in (("#memory-sessions", held.sessions), ("#memory-peers", held.peers)):
            table = self.query_one(table_id, DataTable)
            kept = table.cursor_row
            table.clear()
            for item in items:
                table.add_row(cell_text(item.id, 28), cell_text(item.metadata or "—", 36),
                              cell_text(item.created_at[:19].replace("T", " "), 19), key=item.id)
            if table.row_count:
                table.move_cursor(row=min(kept, table.row_count - 1))
        messages = self.query_one("#memory-messages", DataTable)
        messages.clear()
        for m in held.messages:
            messages.add_row(cell_text(m.created_at[:19].replace("T", " "), 19), cell_text(m.peer_id, 16),
                             cell_text(m.content, 90))
        representation = Text(f"representation of {safe(held.peer_id or '—', 80)}: ", style="bold")
        representation.append(safe(held.representation or "none", 4000))
        self.query_one("#memory-peer-representation", Static).update(representation)
        found = self.query_one("#memory-found", DataTable)
        found.clear()
        for m in held.found:
            found.add_row(cell_text(m.created_at[:19].replace("T", " "), 19), cell_text(m.session_id, 20),
                          cell_text(m.peer_id, 16), cell_text(m.content, 80))

    @on(DataTable.RowHighlighted, "#memory-sessions")
    def _held_session(self, event: DataTable.RowHighlighted) -> None:
        key = event.row_key.value
        if is_current(event) and key is not None and key != (self.held.session_id if self.held else None):
            self.held_session = str(key)
            self.reload_held()

    @on(DataTable.RowHighlighted, "#memory-peers")
    def _held_peer(self, event: DataTable.RowHighlighted) -> None:
        key = event.row_key.value
        if is_current(event) and key is not None and key != (self.held.peer_id if self.held else None):
            self.held_peer = str(key)
            self.reload_held()

    @on(Input.Submitted, "#memory-search")
    def _search(self, event: Input.Submitted) -> None:
        self.query_text = event.value.strip() or None
        self.reload_held()

    def action_show_help(self) -> None:
        """The key help of this view (``?``): its keys, then the App's."""
        from .help_keys import screen_help_groups

        HelpScreen = load(self.app, "screens.help", "HelpScreen", what="The key help")
        if HelpScreen is not None:
            self.app.push_screen(HelpScreen(screen_help_groups(self, "M memory view")))

    def action_search(self) -> None:
        self.query_one("#memory-search", Input).focus()

    def _draw(self) -> None:
        outbox, status = self.outbox, self.status
        if status is None:  # nothing read yet: the first load draws
            return
        where = Text("memory → ", style="bold")
        where.append(safe(outbox.destination, 300))
        if outbox.unreachable:
            where.append("  ⚠ unreachable: ", style=tone("bad", bold=True))
            where.append(safe(outbox.unreachable, 600))
            where.append(f"  ({status.pending_total} waiting; captures keep accumulating)", style="dim")
        self.query_one("#memory-where", Static).update(where)

        table = self.query_one("#memory-conversations", DataTable)
        kept = table.cursor_row  # a redraw (every 2 s) keeps each table's cursor where the operator left it
        table.clear()
        titles = run_names(getattr(self.workspace, "desk", None), [conv.conversation_id for conv in status.conversations])
        for conv in status.conversations:
            table.add_row(cell_text(titles[conv.conversation_id], 40), cell_text(conv.owner, 16), str(conv.pending),
                          str(conv.delivered), cell_text(conv.session_id or "—", 24), str(conv.turns),
                          cell_text(conv.error or "", 60), key=conv.conversation_id)
        if table.row_count:
            table.move_cursor(row=min(kept, table.row_count - 1))
        summary = Text()
        last = status.last_delivery_at
        summary.append(f"pending {status.pending_total} · last delivery {date_time(last, 'never')}")
        sweep = status.last_sweep
        if sweep is not None:
            summary.append(f" · last sweep delivered {sweep.delivered_records} records"
                           + (f", skipped: {safe(sweep.skipped, 200)}" if sweep.skipped else ""))
        summary.append(f"\nforks waiting: {len(status.pending_forks)}")
        for fork in status.pending_forks[:10]:
            summary.append(f"\n  {safe(fork.child_id, 80)} ← {safe(fork.parent_id, 80)}"
                           f" at turn {'?' if fork.at_turn is None else fork.at_turn}")
        for error in status.errors[-3:]:
            summary.append("\n")
            summary.append(safe(error, 400), style=tone("bad"))
        self.query_one("#memory-summary", Static).update(summary)

        lines = self.query_one("#memory-quarantine", DataTable)
        kept = lines.cursor_row
        lines.clear()
        for item in self.quarantine:
            when = date_time(item.quarantined_at)
            lines.add_row(str(item.position + 1), when, str(item.line or "?"), cell_text(item.reason, 60),
                          cell_text(item.raw, 80), key=str(item.position))
        if lines.row_count:
            lines.move_cursor(row=min(kept, lines.row_count - 1))
        self._draw_representation()

    def _draw_representation(self) -> None:
        conv = self.selected_conversation or (self.status.conversations[0].conversation_id
                                              if self.status and self.status.conversations else None)
        body = self.query_one("#memory-representation", Static)
        if conv is None:
            body.update(Text("no conversation yet", style="dim"))
            return
        snapshot = self.outbox.representation(conv)
        name = run_names(getattr(self.workspace, "desk", None), [conv])[conv]  # a conversation is a run: its title
        if snapshot is None:
            body.update(safe_text(f"{name}: none fetched yet", 4000))
            return
        body.update(safe_text(f"{name} (fetched {date_time(snapshot.fetched_at)}): {snapshot.text}", 4000))

    @on(DataTable.RowHighlighted, "#memory-conversations")
    def _conversation(self, event: DataTable.RowHighlighted) -> None:
        if is_current(event) and event.row_key.value is not None:
            self.selected_conversation = str(event.row_key.value)
            self._draw_representation()

    # -- keys ---------------------------------------------------------------------------------

    def selected_line(self) -> QuarantinedLine | None:
        """The quarantined line under the cursor, or None."""
        table = self.query_one("#memory-quarantine", DataTable)
        if not self.quarantine or not table.row_count:
            return None
        return self.quarantine[min(table.cursor_row, len(self.quarantine) - 1)]

    @work(exclusive=True, group="memory-act")
    async def action_sweep(self) -> None:
        attached = getattr(self.workspace, "attached", None)
        if attached is not None:  # the serving process alone sweeps this outbox
            notify_plain(self.app, f"this window is attached to {attached.url}: the serving process sweeps "
                         "its memory", title="Memory", severity="warning")
            return
        result = await self.outbox.sweep()
        if result.skipped:
            notify_plain(self.app, f"sweep skipped: {result.skipped}", title="Memory")
        elif self.outbox.unreachable:
            notify_plain(self.app, f"memory unreachable: {self.outbox.unreachable}", title="Memory",
                         severity="warning")
        else:
            notify_plain(self.app, f"swept: {result.delivered_records} records delivered", title="Memory")
        self.reload()
        self.reload_held()

    def action_retry(self) -> None:
        self._ask("retry", "Put this quarantined line back in the outbox for the next sweep?")

    def action_drop(self) -> None:
        self._ask("drop", "Drop this quarantined line? It is moved to dropped.jsonl and never delivered.")

    def _ask(self, what: str, question: str) -> None:
        item = self.selected_line()
        if item is None:
            notify_plain(self.app, "no quarantined line is selected", title="Memory")
            return
        detail = f"{question}\n\nreason: {item.reason}\n{item.raw[:300]}"

        def answered(yes: bool | None) -> None:
            if yes:
                self._act(what, item)

        self.app.push_screen(ConfirmDialog(detail), answered)

    @work(exclusive=True, group="memory-act")
    async def _act(self, what: str, item: QuarantinedLine) -> None:
        outbox = self.outbox
        try:
            if what == "retry":
                batch = await outbox.retry_quarantined(item)
                notify_plain(self.app, f"back in the outbox as {batch}", title="Memory")
            else:
                await outbox.drop_quarantined(item)
                notify_plain(self.app, "dropped (kept in dropped.jsonl)", title="Memory")
        except ServiceError as exc:
            notify_plain(self.app, str(exc), title="Memory", severity="error")
        self.reload()

    def action_close(self) -> None:
        self.dismiss(None)
