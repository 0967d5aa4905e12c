"""``CanvasPane`` (``#canvas``): the object graph as a lazy tree by type and owner, the selected
object's neighbourhood as a small graph (``enter`` follows an edge), and its detail.

``b`` shows the selected node's boot context (what it loads, at which level, why, in boot order,
and what in its view it does not load); ``L`` shows who loads the selected document (the nodes
that do, and those that don't with the reason). ``v`` reads the canvas as a chosen node: every
list, count, detail and edge is then what that node may see, and the line above the tree says so;
``v`` again and "operator" returns to the operator's view, which sees everything.

Nothing off-screen is built: tree groups load one page (``PAGE`` objects) when expanded, with a
"more" node for the next page; a filter asks the canvas for matching names, one page at a time.
"""

from __future__ import annotations

import json
import asyncio
from typing import TYPE_CHECKING, TypedDict

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Static, Tree
from textual.widgets.tree import TreeNode

from services.changes import Change
from services.errors import ServiceError
from services.desk.filters import Query
from services.desk.models import is_system


if TYPE_CHECKING:
    from services.canvas import (Canvas, Neighbourhood, ObjectDetail, ObjectPage, ObjectSummary, ReaderView,
                                 ReceiverAttempt)

from .loader import load, load_module
from .text import DETAIL_CAP, counted, highlight, iso, level_style, notify_plain, safe, safe_text, short_time
from .widgets.fit_tree import FitTree
from .widgets.graph import NeighbourhoodGraph
from .widgets.pane import DEBOUNCE, Pane, PaletteAction

__all__ = ["CanvasPane", "PAGE"]

PAGE = 50
"""Objects loaded per tree page."""
TYPES = ("document", "node", "job", "custom", "user", "app", "repo", "profile")
OWNER_TYPES = ("user", "app", "repo", "profile", "node")


class _ListArgs(TypedDict, total=False):
    """The filters of one tree group's pages (``Canvas.list_objects`` arguments)."""

    type: str
    owner: str
    name_filter: str


class _NodeData(TypedDict, total=False):
    """What a tree node carries: a group of objects to list, an object, or the next page of a group."""

    kind: str
    """``list``, ``object`` or ``more``."""
    args: _ListArgs
    owners: bool
    object: str
    offset: int
    loaded: bool
    filtered: bool
    """The group lists a filter's matches: each page is checked against the filter's other terms too."""


def _label(summary: ObjectSummary, needle: str = "") -> Text:
    text = highlight(safe_text(summary.name or summary.full_name, 120), needle)
    text.append(f" · {safe(summary.type, 40)}", style="dim")
    if is_system(summary.owner_id):
        text.append(" · system", style="dim italic")
    return text


def _server_args(query: Query) -> tuple[_ListArgs, bool]:
    """What of a filter the canvas answers itself (one word or phrase as the name, one exact type),
    and whether that is the whole filter (else each page read is checked against the rest)."""
    args: _ListArgs = {}
    words = [t for t in query.terms if t.field is None and not t.negated]
    if words:
        args["name_filter"] = words[0].value
    types = [t for t in query.terms if t.field == "type"]
    if len(types) == 1 and not types[0].negated and types[0].value in TYPES:
        args["type"] = types[0].value
    exact = len(query.terms) == len(words[:1]) + (1 if "type" in args else 0)
    return args, exact


class CanvasPane(Pane):
    """The canvas graph browser."""

    title = "canvas"
    number = 1
    sources = frozenset({"canvas"})

    BINDINGS = [
        Binding("enter", "follow_edge", "Follow edge", show=False,
                tooltip="Follow the selected link to its object", id="workbench.canvas.follow_edge"),
        Binding("backspace", "go_back", "Back",
                tooltip="Go back to the object you came from", id="workbench.canvas.go_back"),
        Binding("escape", "clear_filter", "Clear filter", show=False,
                tooltip="Clear the filter", id="workbench.canvas.clear_filter"),
        Binding("b", "boot_context", "Boot context",
                tooltip="Show the boot context the selected node loads", id="workbench.canvas.boot_context"),
        Binding("L", "who_loads", "Who loads it",
                tooltip="Show which nodes load the selected document at boot, and why not the others",
                id="workbench.canvas.who_loads"),
        Binding("v", "read_as", "Read as…",
                tooltip="Read the canvas as a chosen node sees it (or as the operator again)",
                id="workbench.canvas.read_as"),
    ]

    def __init__(self, *, name: str | None = None, classes: str = "") -> None:
        super().__init__(classes, id="canvas", name=name)
        self.selected: str | None = None
        """The id of the object whose neighbourhood and detail are shown."""
        self.history: list[str] = []
        """Objects visited before, for ``backspace``."""
        self.detail: ObjectDetail | None = None
        """The selected object's ``ObjectDetail``."""
        self.neighbourhood: Neighbourhood | None = None
        """The selected object's ``Neighbourhood``."""
        self.attempts: list[ReceiverAttempt] = []
        """The selected custom object's receiver attempts (url and argv receivers)."""
        self.view: ReaderView | None = None
        """The ``ReaderView`` the canvas is read as (None: the operator's view, which sees everything)."""
        self.view_node: str | None = None
        """The node whose view ``view`` is."""

    def compose_body(self) -> ComposeResult:
        connection = Static("", id="canvas-connection", markup=False)
        connection.display = False
        yield connection
        viewing = Static("", id="canvas-viewing", markup=False)
        viewing.display = False
        yield viewing
        with Horizontal(id="canvas-top"):
            tree = FitTree(Text("canvas"), id="canvas-tree")  # a long title ends in … at the pane's edge
            tree.show_root = False
            yield tree
            yield NeighbourhoodGraph(id="canvas-edges")
        with VerticalScroll(id="canvas-detail"):
            yield Static("", id="canvas-meta", markup=False)
            yield Vertical(id="canvas-body-holder")
            yield Static("", id="canvas-more", markup=False)

    @property
    def canvas(self) -> Canvas | None:
        """The workspace's canvas service (None when this workspace has none)."""
        return self.workspace.canvas if self.workspace is not None else None

    def _service(self) -> Canvas:
        """The canvas service, for an action that needs one."""
        canvas = self.canvas
        if canvas is None:
            raise RuntimeError("this workspace has no canvas service")
        return canvas

    def changed(self, changes: tuple[Change, ...]) -> None:
        """Say so while the canvas server's change feed is down (PostgreSQL), then reload as usual."""
        for change in changes:
            if change.source == "canvas" and change.kind in ("canvas.connection.lost", "canvas.connection.restored"):
                self.show_connection(change)
        super().changed(changes)

    def show_connection(self, change: Change) -> None:
        """Show or hide the line saying the canvas server connection is down."""
        line = self.query_one("#canvas-connection", Static)
        if change.kind == "canvas.connection.lost":
            reason = safe(str(change.data.get("error", "")), 200)
            line.update(Text(f"Canvas server connection lost ({reason}); reconnecting. Changes from other "
                             "workbenches show again once it is back.", style="bold"))
            line.display = True
        else:
            line.update("")
            line.display = False

    # -- the tree --------------------------------------------------------------------------------

    def reload(self) -> None:
        if self.canvas is None:
            self.query_one("#canvas-meta", Static).update(Text("This workspace has no canvas service.", style="dim"))
            self.count_label = "—"
            return
        query = self.current_query()
        fresh = query.empty and getattr(self, "_root_counts", None) is None  # nothing shown yet for this view
        self.load_roots(query, wait=0.0 if fresh else DEBOUNCE)
        if self.selected:
            self.load_object(self.selected, remember=False)

    def watch_filter_text(self) -> None:
        """A filter keystroke changes the tree only: the selected object's detail and neighbourhood
        stay as they are (a change to the canvas reloads them, as ``reload`` does). It loads at once:
        the next keystroke cancels this load (the worker is exclusive), so a stale page is never drawn."""
        if self._check_filter() and self.workspace is not None and self.built and self.canvas is not None:
            self.load_roots(self.current_query(), wait=0.0)

    @work(group="canvas-tree", exclusive=True, exit_on_error=False)
    async def load_roots(self, query: Query, wait: float = DEBOUNCE) -> None:
        """Rebuild the tree's top: counts by type and owner groups, or the filter's first page. A
        reload for changes first waits ``wait`` seconds, so a burst of changes costs one round of reads."""
        if wait:
            await asyncio.sleep(wait)  # a newer reload cancels this one while it waits (exclusive)
        canvas = self._service()
        tree = self.query_one("#canvas-tree", Tree)
        view = self.view
        if not query.empty:  # the count and the first page are independent reads: both at once
            args, exact = _server_args(query)
            total, page = await asyncio.gather(canvas.count_objects(**args, view=view),
                                               canvas.list_objects(**args, limit=PAGE, view=view))
            needle, typed = query.needle, " ".join(f"{t.field + ':' if t.field else ''}{t.value}" for t in query.terms)
            self.count_label = counted(total, "match", "matches") if exact else f"up to {counted(total, 'match', 'matches')}"
            self._root_counts = None
            heading = (f"{total} matching “{safe(typed, 80)}”" if exact else
                       f"matching “{safe(typed, 80)}” (of {total} read page by page)")
            with self.app.batch_update():
                tree.clear()
                group = tree.root.add(Text(heading), expand=True,
                                      data={"kind": "list", "args": args, "filtered": not exact})
                self._add_page(group, page, args, needle, filtered=not exact)
            return
        first_page: asyncio.Task[ObjectPage] | None = None
        if self.selected is None or getattr(self, "_root_counts", None) is None:
            # a first load: the first group's page (its type is most likely the first) is read beside the
            # counts; it fills the group shown expanded and gives the object selected first
            first_page = asyncio.ensure_future(canvas.list_objects(type=TYPES[0], limit=PAGE, view=view))
        try:
            total, counts = await canvas.count_by_type(TYPES, view=view)
        except BaseException:
            if first_page is not None:
                first_page.cancel()
            raise
        self.count_label = counted(total, "object")
        first_type = next((t for t in TYPES if counts[t]), None)
        if getattr(self, "_root_counts", None) == (counts, view) and tree.root.children:
            if first_page is not None:
                first_page.cancel()
            return
        first: ObjectPage | None = None
        if first_page is not None:
            if first_type == TYPES[0]:
                first = await first_page
            else:
                first_page.cancel()
                if first_type is not None and self.selected is None:
                    chosen = await canvas.list_objects(type=first_type, limit=1, view=view)
                    if chosen.items:
                        self.load_object(chosen.items[0].id)
        if first is not None and first.items and self.selected is None:
            self.load_object(first.items[0].id)  # its reads run while the tree is built below
        self._root_counts = (counts, view)
        with self.app.batch_update():  # the tree is drawn once, whole
            tree.clear()
            by_type = tree.root.add(Text("by type", style="bold"), expand=True, data={"kind": "heading"})
            for type_ in TYPES:
                if counts[type_]:
                    by_type.add(Text(f"{type_} ({counts[type_]})"), data={"kind": "list", "args": {"type": type_}},
                                allow_expand=True)
            by_owner = tree.root.add(Text("by owner", style="bold"), expand=False, data={"kind": "heading"})
            for type_ in OWNER_TYPES:
                if counts.get(type_):
                    by_owner.add(Text(f"{type_}s ({counts[type_]})"),
                                 data={"kind": "list", "args": {"type": type_}, "owners": True}, allow_expand=True)
            if first_type is not None:
                group = by_type.children[0]
                if first is not None and group.data is not None:  # the page read above: no second read, no second redraw
                    group.data["loaded"] = True
                    self._add_page(group, first, {"type": TYPES[0]})
                group.expand()

    def _add_page(self, node: TreeNode[_NodeData], page: ObjectPage, args: _ListArgs, needle: str = "",
                  owners: bool = False, filtered: bool = False) -> None:
        items = self.current_query().filter(page.items) if filtered else page.items
        for summary in items:
            if owners:
                node.add(_label(summary, needle), data={"kind": "list", "args": {"owner": summary.id},
                                                        "object": summary.id}, allow_expand=True)
            else:
                node.add_leaf(_label(summary, needle), data={"kind": "object", "object": summary.id})
        if page.has_more:
            node.add_leaf(Text("… more", style="italic"),
                          data={"kind": "more", "args": args, "offset": page.offset + page.limit, "owners": owners,
                                "filtered": filtered})

    @on(Tree.NodeExpanded, "#canvas-tree")
    def _expanded(self, event: Tree.NodeExpanded[_NodeData]) -> None:
        data = event.node.data or {}
        if data.get("kind") == "list" and not data.get("loaded") and not event.node.children:
            data["loaded"] = True
            self.load_page(event.node, data["args"], 0, bool(data.get("owners")), bool(data.get("filtered")))

    @work(group="canvas-page", exit_on_error=False)
    async def load_page(self, node: TreeNode[_NodeData], args: _ListArgs, offset: int, owners: bool,
                        filtered: bool = False) -> None:
        """Add one page of objects under ``node``."""
        page = await self._service().list_objects(offset=offset, limit=PAGE, view=self.view, **args)
        self._add_page(node, page, args, str(args.get("name_filter") or ""), owners, filtered)

    @on(Tree.NodeSelected, "#canvas-tree")
    def _tree_selected(self, event: Tree.NodeSelected[_NodeData]) -> None:
        data = event.node.data or {}
        if data.get("kind") == "more":
            parent = event.node.parent
            event.node.remove()
            if parent is not None:
                self.load_page(parent, data["args"], data["offset"], bool(data.get("owners")), bool(data.get("filtered")))

    @on(Tree.NodeHighlighted, "#canvas-tree")
    def _tree_highlighted(self, event: Tree.NodeHighlighted[_NodeData]) -> None:
        object_id = (event.node.data or {}).get("object")
        if object_id and object_id != self.selected:
            self.load_object(object_id)

    # -- the selected object -------------------------------------------------------------------

    @work(group="canvas-object", exclusive=True, exit_on_error=False)
    async def load_object(self, object_id: str, remember: bool = True) -> None:
        """Load an object's detail and neighbourhood and show them."""
        try:
            canvas = self._service()  # the detail and the neighbourhood are independent reads: both at once
            detail, edges = await asyncio.gather(canvas.read(object_id, events_limit=20, view=self.view),
                                                 canvas.edges(object_id, limit=20, view=self.view))
        except ServiceError:
            if self.view is None:
                raise
            self.selected = None  # not in this reader's view: as if it did not exist
            self.query_one("#canvas-meta", Static).update(Text("Nothing selected in this view.", style="dim"))
            return
        attempts: list[ReceiverAttempt] = []
        if detail.custom is not None and detail.custom.receiver in ("url", "argv"):
            attempts = await self._service().receiver_attempts(object_id, limit=20)
        if remember and self.selected and self.selected != object_id:
            self.history.append(self.selected)
        self.selected, self.detail, self.neighbourhood = object_id, detail, edges
        self.note_selection()
        self.attempts = attempts
        self._show_graph()
        self._show_detail()

    def _show_graph(self) -> None:
        self.query_one("#canvas-edges", NeighbourhoodGraph).show(self.neighbourhood)

    def _show_detail(self) -> None:
        d = self.detail
        if d is None:  # shown only once an object is selected
            return
        o = d.object
        meta = Text()
        meta.append(safe(o.label, 200), style="bold")
        facts = [safe(o.type, 40), safe(o.kind, 40), safe(o.privacy, 40), safe(o.status, 40),
                 f"updated {iso(o.updated_at)[:19]}", "system (the workbench's own)" if is_system(o.owner_id) else ""]
        meta.append("\n" + " · ".join(f for f in facts if f) + "\n")
        if d.document is not None:
            doc = d.document
            meta.append("preview: ", style="bold")
            meta.append(safe(doc.preview, 1000) + "\n")
            if doc.rules:
                meta.append("rules: ", style="bold")
                meta.append(safe("; ".join(json.dumps(r, ensure_ascii=False) for r in doc.rules), 1000) + "\n")
            meta.append(f"revision {doc.revision}\n")
        if d.node is not None:
            n = d.node
            meta.append(f"node: {safe(n.kind, 40)}/{safe(n.mode, 40)}/{safe(n.lifecycle, 40)} · {safe(n.status, 40)}"
                        f"{' · ' + safe(n.activity, 40) if n.activity else ''} · wakes {n.wakes}\n")
        if d.job is not None:
            meta.append(f"job: {safe(d.job.command, 200)} · {safe(d.job.status, 40)} · exit {safe(d.job.exit_code, 20)}\n")
        if d.custom is not None and d.custom.receiver:
            meta.append(f"receiver: {safe(d.custom.receiver, 20)}\n")
            for a in self.attempts:
                meta.append(f"  {short_time(a.at)} entry {a.entry_id} {safe(a.event_type, 60)} attempt {a.attempt} "
                            f"{safe(a.outcome, 20)} {safe(a.status if a.status is not None else '—', 20)} "
                            f"{safe(a.error, 300)}\n", style="dim")
        self.query_one("#canvas-meta", Static).update(meta)
        self._show_body(safe(d.document.body, DETAIL_CAP) if d.document is not None and d.document.body else "")
        more = Text()
        if d.revisions:
            more.append("revisions\n", style="bold underline")
            for r in d.revisions[:10]:
                more.append(f"  r{r.revision} {iso(r.at)[:19]} {safe(r.author or '—', 60)} {safe(r.summary or '', 200)}\n")
        more.append("events\n", style="bold underline")
        for e in d.events:
            more.append(f"  {short_time(e.at)} L{e.level:<2} {safe(e.type, 60)} {safe(e.actor_id or '', 60)}\n",
                        style=level_style(e.level))
        if not d.events:
            more.append("  none\n", style="dim")
        more.append("watchers\n", style="bold underline")
        for w in d.watchers:
            more.append(f"  {safe(w.watcher_id, 80)} pattern {safe(w.pattern, 60)} ≥ {w.min_level}\n")
        if not d.watchers:
            more.append("  none\n", style="dim")
        self.query_one("#canvas-more", Static).update(more)

    def _show_body(self, markdown: str) -> None:
        """The document body as Markdown whose links show their URL and ask before opening (the widget
        is made on first use: markdown-it loads after start-up)."""
        holder = self.query_one("#canvas-body-holder", Vertical)
        bodies = holder.query("#canvas-body")
        if not markdown and not bodies:
            return
        if not bodies:
            DocumentView = load(self.app, "screens.widgets.document", "DocumentView", what="The document view")
            if DocumentView is not None:
                holder.mount(DocumentView(markdown, id="canvas-body"))
            return
        body = bodies.first()
        body.display = bool(markdown)
        body.update(markdown)  # type: ignore[attr-defined]

    # -- keys --------------------------------------------------------------------------------

    @on(NeighbourhoodGraph.EdgeChosen, "#canvas-edges")
    def _edge_chosen(self, event: NeighbourhoodGraph.EdgeChosen) -> None:
        event.stop()
        self.load_object(event.object_id)

    def action_follow_edge(self) -> None:
        """Follow the edge under the graph's cursor (the graph handles ``enter`` itself when focused)."""
        self.query_one("#canvas-edges", NeighbourhoodGraph).action_choose_edge()

    def action_go_back(self) -> None:
        if self.history:
            self.load_object(self.history.pop(), remember=False)

    def action_clear_filter(self) -> None:
        self.clear_filter()

    def focus_main(self) -> None:
        self.query_one("#canvas-tree", Tree).focus()

    def palette_actions(self) -> list[PaletteAction]:
        actions: list[PaletteAction] = []
        if self.history:
            actions.append(("Back to the previous object", "backspace", "go_back"))
        kind = self.detail.object.type if self.detail is not None else None
        if kind == "node":
            actions.append(("Boot context of this node", "b", "boot_context"))
        if kind == "document":
            actions.append(("Who loads this document", "L", "who_loads"))
        actions.append(("Read the canvas as a node…", "v", "read_as"))
        return actions

    # -- delivery and reading as a node ---------------------------------------------------------

    @work(group="canvas-delivery", exclusive=True, exit_on_error=False)
    async def action_boot_context(self) -> None:
        """Show what the selected node loads at boot, at which level and why, in boot order."""
        if self.detail is None or self.detail.object.type != "node":
            notify_plain(self.app, "Select a node to see its boot context.", severity="warning")
            return
        delivery = load_module(self.app, "screens.dialogs.delivery", what="The boot context dialog")
        if delivery is None:
            return
        context = await self._service().boot_context(self.detail.object.id, view=self.view)
        self.app.push_screen(delivery.DeliveryDialog(f"boot context of {safe(context.node_name, 120)}",
                                                     lambda width: delivery.boot_text(context, width)))

    @work(group="canvas-delivery", exclusive=True, exit_on_error=False)
    async def action_who_loads(self) -> None:
        """Show which nodes load the selected document at boot, and why the others don't."""
        if self.detail is None or self.detail.object.type != "document":
            notify_plain(self.app, "Select a document to see who loads it.", severity="warning")
            return
        delivery = load_module(self.app, "screens.dialogs.delivery", what="The who-loads dialog")
        if delivery is None:
            return
        name = self.detail.object.full_name
        verdicts = await self._service().who_loads(self.detail.object.id, view=self.view)
        self.app.push_screen(delivery.DeliveryDialog(f"who loads {safe(name, 200)} on boot",
                                                     delivery.loads_text(name, verdicts)))

    @work(group="canvas-delivery", exclusive=True, exit_on_error=False)
    async def action_read_as(self) -> None:
        """Choose a node (or the operator) and read the canvas as it may see it."""
        ChooseDialog = load(self.app, "screens.dialogs.choose", "ChooseDialog", what="The read-as dialog")
        if ChooseDialog is None:
            return
        page = await self._service().list_objects(type="node", limit=50)
        choices = [("operator", "")] + [(o.label, o.id) for o in page.items]

        labels = {ident: label for label, ident in choices}

        def chosen(node: str | None) -> None:
            if node is not None:
                self.read_as(node or None, labels.get(node or ""))
        self.app.push_screen(ChooseDialog("Read the canvas as…", choices), chosen)

    @work(group="canvas-read-as", exclusive=True, exit_on_error=False)
    async def read_as(self, node: str | None, label: str | None = None) -> None:
        """Read the canvas as ``node`` (None: the operator's view), named ``label`` (its name as listed), and reload."""
        self.view = await self._service().reader_view(node) if node else None
        self.view_node = node
        line = self.query_one("#canvas-viewing", Static)
        if node is None:
            line.update("")
            line.display = False
        else:
            line.update(Text(f"Reading as node {safe(label or node, 120)}: only what it may see. v changes it.",
                             style="bold"))
            line.display = True
        self._root_counts = None
        self.history.clear()
        self.selected = None
        self.reload()

    async def palette_search(self, query: str) -> list[tuple[str, str]]:
        """Objects whose name contains ``query`` (one page; nothing when the query is empty)."""
        canvas = self.canvas
        if canvas is None or not query.strip():
            return []
        page = await canvas.list_objects(name_filter=query.strip(), limit=20, view=self.view)
        items = [(f"object {o.label} ({o.type}) · {o.id}", o.id) for o in page.items]
        try:
            found = await canvas.get(query.strip(), view=self.view)
            items = [(f"object {found.label} ({found.type}) · {found.id}", found.id),
                     *(item for item in items if item[1] != found.id)]  # an exact hit is listed once, first
        except ServiceError:  # not an id or full name: the name matches above are the answer
            pass
        return items

    def select_key(self, key: str) -> None:
        self.load_object(key)
