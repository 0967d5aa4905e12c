"""``InboxPane`` (``#inbox``): for the selected node, its inbox entries (level, event, actor, object,
time; unread ones stand out), coalesced bursts shown as one entry with a count, mark read, and
``m`` to send the node a message.
"""

from __future__ import annotations

from dataclasses import dataclass
import asyncio
from typing import TYPE_CHECKING

from rich.style import Style
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Static

from services.desk.filters import Query
from services.desk.models import is_system
from services.text import distinct_titles

from .dialogs import Field

if TYPE_CHECKING:
    from services.canvas import Canvas, InboxEntryView, InboxPage, ObjectSummary
from .text import counted, highlight, iso, level_style, notify_plain, safe, safe_text, short_time, words
from .widgets.fit_table import FitTable, fit_cell
from .widgets.pane import DEBOUNCE, Pane, PaletteAction, is_current

__all__ = ["InboxPane", "InboxGroup", "group_entries"]

NODES_SHOWN = 200
ENTRIES_SHOWN = 200


@dataclass(frozen=True)
class InboxGroup:
    """Consecutive entries of one burst (same kind, event, object and actor) shown as one row."""

    entries: tuple[InboxEntryView, ...]

    @property
    def first(self) -> InboxEntryView:
        """The newest entry of the burst."""
        return self.entries[0]

    @property
    def count(self) -> int:
        """How many entries the burst holds."""
        return len(self.entries)

    @property
    def unread(self) -> int:
        """How many of them are unread."""
        return sum(1 for e in self.entries if not e.read)

    @property
    def ids(self) -> list[int]:
        """Every entry id in the burst."""
        return [e.id for e in self.entries]


def group_entries(entries: list[InboxEntryView] | tuple[InboxEntryView, ...]) -> list[InboxGroup]:
    """Coalesce consecutive entries with the same kind, event type, object and actor (messages never)."""
    groups: list[list[InboxEntryView]] = []
    for entry in entries:
        if groups and entry.kind != "message":
            last = groups[-1][-1]
            if (last.kind, last.event_type, last.object_id, last.actor_id) == \
                    (entry.kind, entry.event_type, entry.object_id, entry.actor_id):
                groups[-1].append(entry)
                continue
        groups.append([entry])
    return [InboxGroup(tuple(g)) for g in groups]


class InboxPane(Pane):
    """Node inboxes."""

    title = "inbox"
    number = 2
    sources = frozenset({"canvas"})

    BINDINGS = [
        Binding("m", "message_node", "Message node",
                tooltip="Send the selected node a message", id="workbench.inbox.message_node"),
        Binding("space", "mark_read", "Mark read",
                tooltip="Mark the selected inbox entry read", id="workbench.inbox.mark_read"),
        Binding("R", "mark_all_read", "All read",
                tooltip="Mark every message to the selected node read", id="workbench.inbox.mark_all_read"),
        Binding("escape", "clear_filter", "Clear filter", show=False,
                tooltip="Clear the filter", id="workbench.inbox.clear_filter"),
    ]

    def __init__(self, *, name: str | None = None, classes: str = "") -> None:
        super().__init__(classes, id="inbox", name=name)
        self.node: str | None = None
        """The node whose inbox is shown."""
        self.groups: list[InboxGroup] = []
        """The shown rows (bursts coalesced)."""
        self._node_list: list[ObjectSummary] = []
        self._unread = 0
        self.show_system = False
        """List the nodes of the workbench's own runs (the harvest judge's) too (``A``); hidden by default."""

    def compose_body(self) -> ComposeResult:
        nodes = FitTable(id="inbox-nodes", flex=0, min_width=12, keep=1, cursor_type="row")  # a long name ends in …
        nodes.add_columns("node", "status", "unread")
        yield nodes
        table = FitTable(id="inbox-table", keep=4, cursor_type="row", zebra_stripes=True)  # the object's name ends in … when cut
        table.add_columns("", "time", "level", "event", "×", "actor", "object")
        yield table
        yield Static("", id="inbox-detail", markup=False)

    @property
    def canvas(self) -> Canvas | None:
        """The workspace's canvas service (None when this workspace has none)."""
        return self.workspace.canvas if self.workspace is not None else None

    def forget_drawn(self) -> None:
        self._node_rows: list[tuple[str, str, str, int | None, bool]] | None = None
        self._entry_rows: list[tuple[Text, ...]] | None = None

    def reload(self) -> None:
        if self.canvas is None:
            self.query_one("#inbox-detail", Static).update(Text("This workspace has no canvas service.", style="dim"))
            self.count_label = "—"
            return
        self.load(self.current_query())

    @work(group="inbox", exclusive=True, exit_on_error=False)
    async def load(self, query: Query) -> None:
        """Load the nodes and the selected node's inbox page."""
        await asyncio.sleep(DEBOUNCE)  # a newer reload cancels this one while it waits (exclusive)
        canvas = self.canvas
        if canvas is None:
            return
        page = await canvas.list_objects(type="node", limit=NODES_SHOWN)
        nodes = list(page.items)
        system = sum(1 for n in nodes if is_system(n.owner_id))
        if not self.show_system:
            nodes = [n for n in nodes if not is_system(n.owner_id)]
        unread = await canvas.unread_counts([n.id for n in nodes[:50]])  # one read of the kept counts
        if self.node not in {n.id for n in nodes}:
            self.node = nodes[0].id if nodes else None
        inbox = await canvas.inbox(self.node, limit=ENTRIES_SHOWN) if self.node else None
        self._show_nodes(nodes, unread, system)
        self._show_inbox(inbox, query)

    def _show_nodes(self, nodes: list[ObjectSummary], unread_of: dict[str, int], system: int = 0) -> None:
        table = self.query_one("#inbox-nodes", DataTable)
        names = distinct_titles({n.id: n.name for n in nodes})  # two runs of one title: each with its short id
        rows = [(n.id, names[n.id], n.status, unread_of.get(n.id), is_system(n.owner_id)) for n in nodes]
        if rows == getattr(self, "_node_rows", None) and system == getattr(self, "_system", None):
            return
        self._system = system
        self._node_rows = rows
        table.clear()
        for node_id, name, status, unread, internal in rows:
            table.add_row(fit_cell(safe_text(name, 80, style="dim italic" if internal else "")), Text(words(status)), Text("" if unread is None else str(unread),
                                                                      style="bold" if unread else "dim"), key=node_id)
        keys = [r[0] for r in rows]
        if self.node in keys:
            table.move_cursor(row=keys.index(self.node))
        self._unread = sum(r[3] or 0 for r in rows)
        shown = len(rows) - (system if self.show_system else 0)
        self.count_label = (counted(shown, "node") + f" · {self._unread} unread"
                            + ((f" + {system} system" if self.show_system else f" · {system} system") if system else ""))

    def _show_inbox(self, inbox: InboxPage | None, query: Query) -> None:
        table = self.query_one("#inbox-table", DataTable)
        entries = query.filter(inbox.items) if inbox is not None else []
        needle = query.needle
        self.groups = group_entries(entries)
        rows = [self._entry_row(group, needle) for group in self.groups]
        if rows != getattr(self, "_entry_rows", None):
            self._entry_rows = rows
            cursor = table.cursor_row
            table.clear()
            for i, cells in enumerate(rows):
                table.add_row(*cells, key=str(i))
            if rows:
                table.move_cursor(row=min(cursor, len(rows) - 1))
        self._show_entry()

    @staticmethod
    def _entry_row(group: InboxGroup, needle: str) -> tuple[Text, ...]:
        e = group.first
        unread = group.unread > 0
        style = "bold" if unread else "dim"
        return (  # the long columns last: a narrow pane cuts them, the detail below has them whole
            Text("●" if unread else " ", style="bold"),
            Text(short_time(e.at), style=style),
            Text(f"L{e.level}", style=Style.parse(style) + level_style(e.level)),
            highlight(safe_text(e.event_type, 40, style), needle),
            Text(f"×{group.count}" if group.count > 1 else "", style="bold"),
            highlight(safe_text(e.actor_id or "—", 40, style), needle),
            fit_cell(highlight(safe_text(e.object_name or "—", 60, style), needle)),
        )

    def _show_entry(self) -> None:
        detail = self.query_one("#inbox-detail", Static)
        table = self.query_one("#inbox-table", DataTable)
        if not self.groups:
            detail.update(Text("no inbox entries" if self.node else "no nodes yet", style="dim"))
            return
        group = self.groups[min(table.cursor_row, len(self.groups) - 1)]
        e = group.first
        text = Text()
        text.append(safe(e.summary, 400), style="bold")
        if group.count > 1:
            text.append(f"  (a burst of {group.count}, {group.unread} unread)")
        about = [f"L{e.level} {safe(e.event_type, 80)}"]  # only what is known: no "by —"
        if e.actor_id:
            about.append(f"from {safe(e.actor_id, 80)}")
        if e.object_name:
            about.append(f"object {safe(e.object_name, 120)}")
        about.append(iso(e.at)[:19])  # one word: a wrapped line never splits the date from its time
        text.append("\n" + " · ".join(about), style="dim")
        if e.body and e.body.strip() != (e.summary or "").strip():
            text.append("\n" + safe(e.body, 2000))
        detail.update(text)

    @on(DataTable.RowHighlighted, "#inbox-nodes")
    def _node_highlighted(self, event: DataTable.RowHighlighted) -> None:
        key = event.row_key.value
        if key is not None and key != self.node and is_current(event):
            self.node = str(key)
            self.request_reload()
            self.note_selection()

    @on(DataTable.RowHighlighted, "#inbox-table")
    def _entry_highlighted(self) -> None:
        self._show_entry()

    # -- keys ---------------------------------------------------------------------------------

    def _group(self) -> InboxGroup | None:
        table = self.query_one("#inbox-table", DataTable)
        if not self.groups:
            return None
        return self.groups[min(table.cursor_row, len(self.groups) - 1)]

    def action_mark_read(self) -> None:
        group, node, canvas = self._group(), self.node, self.canvas
        if group is None or node is None or canvas is None:
            notify_plain(self.app, "No inbox entry selected.", severity="warning")
            return
        self.act("", lambda: canvas.mark_read(node, group.ids))

    def action_mark_all_read(self) -> None:
        node, canvas = self.node, self.canvas
        if node is not None and canvas is not None:
            name = next((row[1] for row in getattr(self, "_node_rows", None) or () if row[0] == node), node)
            self.act(f"Every message to {safe(name, 120)} marked read.", lambda: canvas.mark_read(node))

    def action_message_node(self) -> None:
        node, canvas = self.node, self.canvas
        if node is None or canvas is None:
            notify_plain(self.app, "No node selected.", severity="warning")
            return

        self.form_act("Send the node a message", [Field("body", "Message", multiline=True)],  # a refusal stays in the form
                      "Message sent to the node.", lambda v: canvas.message_send(v["body"], to=node), submit="Send")

    def action_clear_filter(self) -> None:
        self.clear_filter()

    def focus_main(self) -> None:
        self.query_one("#inbox-table", DataTable).focus()

    def palette_actions(self) -> list[PaletteAction]:
        if self.node is None:
            return []
        actions: list[PaletteAction] = [("Send the node a message", "m", "message_node")]
        group = self._group()
        if group is not None and group.unread:
            actions.append(("Mark the entry read", "space", "mark_read"))
        if self._unread:
            actions.append(("Mark the whole inbox read", "R", "mark_all_read"))
        return actions

    async def palette_items(self) -> list[tuple[str, str]]:
        return [(f"node inbox {safe(n[1], 80)} · {n[0]}", n[0]) for n in getattr(self, "_node_rows", [])]

    def selection(self) -> str | None:
        return self.node

    def select_key(self, key: str) -> None:
        self.node = key
        self.note_selection()
        self.request_reload()
