"""``MemoryScreen`` (``M`` from the main screen): the memory outbox, and the keys that drive it.

Shows where memory goes (and why it cannot get there), the pending records per conversation with
their delivered count, session and last error, the last delivery and last sweep, the forks
waiting, the quarantined lines with their reasons, and the cached peer representation of the
selected conversation. Keys: ``s`` sweep now, ``r`` retry the selected quarantined line, ``d``
drop it (both ask first), ``esc`` back. Everything shown is sanitised and markup-free.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Label, Static

from services.desk import WorkspaceView
from services.errors import ServiceError

if TYPE_CHECKING:
    from services.knowledge.outbox import MemoryOutbox

from .dialogs import ConfirmDialog
from .text import cell_text, date_time, notify_plain, safe, safe_text, tone
from .widgets.pane import is_current

__all__ = ["MemoryScreen"]


class MemoryScreen(Screen[None]):
    """The memory outbox of one Workspace."""

    BINDINGS = [
        Binding("s", "sweep", "Sweep now", id="workbench.memory.sweep"),
        Binding("r", "retry", "Retry quarantined", id="workbench.memory.retry"),
        Binding("d", "drop", "Drop quarantined", id="workbench.memory.drop"),
        Binding("escape,M", "close", "Back", id="workbench.memory.close"),
    ]

    DEFAULT_CSS = """
    MemoryScreen #memory-conversations { height: auto; max-height: 12; }
    MemoryScreen #memory-quarantine { height: auto; max-height: 10; }
    MemoryScreen .memory-heading { text-style: bold; margin-top: 1; }
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
        self.status: Any = None
        """The newest ``OutboxStatus`` shown."""
        self.quarantine: list[Any] = []
        """The quarantined lines shown, in table order."""
        self.selected_conversation: str | None = None

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static("", id="memory-where", markup=False)
            yield Label("conversations", classes="memory-heading")
            table: DataTable[Any] = DataTable(id="memory-conversations", cursor_type="row", zebra_stripes=True)
            table.add_columns("conversation", "owner", "pending", "delivered", "session", "turns", "error")
            yield table
            yield Static("", id="memory-summary", markup=False)
            yield Label("quarantined lines", classes="memory-heading")
            lines: DataTable[Any] = DataTable(id="memory-quarantine", cursor_type="row", zebra_stripes=True)
            lines.add_columns("#", "set aside", "line", "reason", "text")
            yield lines
            with Vertical():
                yield Label("peer representation", classes="memory-heading")
                yield Static("", id="memory-representation", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        self.reload()
        self.set_interval(2.0, self.reload)  # captures and the timer's sweeps land while it is open

    # -- loading ------------------------------------------------------------------------------

    @work(exclusive=True, group="memory-reload")
    async def reload(self) -> None:
        """Read the outbox's status and quarantine, then redraw."""
        outbox = self.outbox
        self.status = await outbox.status()
        self.quarantine = await outbox.quarantined()
        self._draw()

    def _draw(self) -> None:
        outbox, status = self.outbox, self.status
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
        for conv in status.conversations:
            table.add_row(cell_text(conv.conversation_id, 30), cell_text(conv.owner, 16), str(conv.pending),
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
        if snapshot is None:
            body.update(safe_text(f"{conv}: none fetched yet", 4000))
            return
        body.update(safe_text(f"{conv} (fetched {date_time(snapshot.fetched_at)}): {snapshot.text}", 4000))

    @on(DataTable.RowHighlighted, "#memory-conversations")
    def _conversation(self, event: DataTable.RowHighlighted) -> None:
        if is_current(event) and event.row_key.value is not None:
            self.selected_conversation = str(event.row_key.value)
            self._draw_representation()

    # -- keys ---------------------------------------------------------------------------------

    def selected_line(self) -> Any:
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
    async def _act(self, what: str, item: Any) -> None:
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
