"""``JudgmentsPane`` (``#judgments``): the approval queue of harvest judgments and insight reviews.

The detail shows each outcome's verdict, reason, input text and the concept diff against the
base. ``y`` approves (the ticked outcomes only, when some are ticked with ``space``), ``n``
rejects with a reason. For an insight review ``c`` picks the candidate truth and ``y`` opens it
for editing before approving. After approval the receipts (status, digest, time) are shown.
``j`` judges an invalid, failed or rejected judgment again, or retries a delivery left unfinished.
A judgment delivered to a Git base shows its branch, its pull request (``o`` opens it, asking
first) or how to open the review, and waits for the merge (state ``delivered``); ``j`` checks for
the merge now, and once the accepted branch shows it the judgment is accepted at that head. A
judgment that cannot progress on its own waits for the operator: ``n`` rejects a delivery whose last
attempt failed, and when a proposal branch is gone with no matching merge found, ``y`` accepts it as
merged (asking first) and ``n`` rejects it.
What needs the operator in OKF (a blocked base, a failed capture, a refused note) heads the detail,
with the way out, and its count shows beside the open count.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from rich.style import Style
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import DataTable, SelectionList, Static
from textual.strip import Strip
from textual.widgets._toggle_button import ToggleButton  # its BUTTON_INNER is the box's tick (no public alias)
from textual.widgets.option_list import OptionDoesNotExist
from typing_extensions import TypeIs
from rich.segment import Segment

from services.desk.filters import JudgmentRow, Query
from services.errors import ServiceError

if TYPE_CHECKING:  # the knowledge services load with the workspace, not with the panes
    from services.canvas import LoadVerdict
    from services.knowledge.insights import InsightReview, InsightReviews
    from services.knowledge.okf import Harvest, OkfNotice
    from services.knowledge.okf.models import GitDelivery, JudgmentDetail, JudgmentItem

from .dialogs import ConfirmDialog, Field, wants_confirmation
from .text import (DETAIL_CAP, cell_text, counted, date_time, day_minute, hanging, highlight, notify_plain, run_names,
                   safe, tone)
from .widgets.fit_table import FitTable, fit_cell
from .widgets.pane import DEBOUNCE, Pane, PaletteAction, is_current

__all__ = ["JudgmentsPane"]

VERDICT_TONE = {"promote": "ok", "merge": "accent", "drop": "bad"}
"""The tone each verdict is drawn in."""


def _verdict_style(verdict: str, *, bold: bool = False) -> Style | str:
    """A verdict drawn in its tone (unknown verdicts plain)."""
    return tone(VERDICT_TONE[verdict], bold=bold) if verdict in VERDICT_TONE else ("bold" if bold else "")


def _is_judgment(item: JudgmentItem | InsightReview) -> TypeIs[JudgmentItem]:
    """A harvest judgment's queue row (an insight review is the one that carries a proposal)."""
    return not hasattr(item, "proposal")


def _is_harvest(detail: JudgmentDetail | InsightReview | None) -> TypeIs[JudgmentDetail]:
    """The detail of a harvest judgment (it holds its queue row as ``item``)."""
    return hasattr(detail, "item")


def _is_review(detail: JudgmentDetail | InsightReview | None) -> TypeIs[InsightReview]:
    """An insight review (it carries its proposal)."""
    return hasattr(detail, "proposal")


def _state(item: JudgmentItem | InsightReview) -> str:
    """A queue row's state: a judgment's ``state`` or a review's ``status``."""
    return item.state if _is_judgment(item) else item.status


def _detail_state(detail: JudgmentDetail | InsightReview) -> str:
    """The state of the item a detail shows."""
    return detail.item.state if _is_harvest(detail) else detail.status


class OutcomeList(SelectionList[str]):
    """The outcomes of a pending harvest judgment, each ticked (``X``) only when it is: Textual draws every
    box with its ``X`` and tells them apart by colour alone, so a picture (or a terminal with few colours)
    showed every outcome ticked while the detail said none was."""

    def render_line(self, y: int) -> Strip:
        strip = super().render_line(y)
        try:
            option = self.get_option_at_index(self.scroll_offset.y + y)
        except OptionDoesNotExist:
            return strip
        if option.value in self.selected:
            return strip
        segments = list(strip)
        if len(segments) > 1 and segments[1].text == ToggleButton.BUTTON_INNER:
            segments[1] = Segment(" " * len(ToggleButton.BUTTON_INNER), segments[1].style)
        return Strip(segments, strip.cell_length)


class JudgmentsPane(Pane):
    """Harvest judgments and insight reviews waiting for the operator."""

    title = "judgments"
    number = 5
    sources = frozenset({"okf", "insights"})

    BINDINGS = [
        Binding("y", "approve", "Approve",
                tooltip="Approve the selected judgment (the ticked outcomes only) or insight",
                id="workbench.judgments.approve"),
        Binding("n", "reject", "Reject",
                tooltip="Reject the selected judgment or insight, saying why", id="workbench.judgments.reject"),
        Binding("c", "next_candidate", "Candidate",
                tooltip="Pick the next candidate truth of an insight review", id="workbench.judgments.next_candidate"),
        Binding("space", "tick_outcome", "Tick outcome",
                tooltip="Tick or untick an outcome of a harvest judgment, to approve it alone",
                id="workbench.judgments.tick_outcome"),
        Binding("j", "rejudge", "Rejudge / retry / check merge", show=False,
                tooltip="Judge again, retry an unfinished delivery, or check for the merge",
                id="workbench.judgments.rejudge"),
        Binding("o", "open_review", "Open PR", show=False,
                tooltip="Open the judgment's pull request in the browser (asks first)",
                id="workbench.judgments.open_review"),
        Binding("escape", "clear_filter", "Clear filter", show=False,
                tooltip="Clear the filter", id="workbench.judgments.clear_filter"),
    ]

    def __init__(self, *, classes: str = "") -> None:
        super().__init__(id="judgments", classes=classes)
        self.selected: str | None = None
        """``okf:<judgment id>`` or ``insight:<review id>``."""
        self.items: dict[str, JudgmentItem | InsightReview] = {}
        """Every queue row by key."""
        self.detail: JudgmentDetail | InsightReview | None = None
        """The selected judgment's detail or insight review."""
        self.candidate = 0
        """The candidate truth picked for the selected insight review."""
        self.loaders: list[LoadVerdict] | None = None
        """For an approved insight, the nodes that load its listener at boot (``Canvas.who_loads``)."""
        self.notices: list[OkfNotice] = []
        """What needs the operator in OKF (blocked bases, failed captures, refused notes)."""
        self.waiting = 0
        """Judgments and reviews waiting for a decision (the header badge)."""
        self._table_rows: list[tuple[str, tuple[Text, ...]]] = []
        self._inputs: dict[tuple[str, int], tuple[str, ...]] = {}
        """The input names of each harvest judgment, by ``(id, attempt)``."""

    def compose_body(self) -> ComposeResult:
        # what each row judges comes second, sized to the room left: the columns after it show only while they fit whole
        table = FitTable(id="judgments-table", flex=1, min_width=20, keep=2, cursor_type="row", zebra_stripes=True)
        table.add_columns("kind", "what", "state", "verdicts", "created")
        yield table
        yield OutcomeList(id="judgment-outcomes")
        with VerticalScroll(id="judgment-detail"):
            yield Static("", id="judgment-text", markup=False)

    @property
    def okf(self) -> Harvest | None:
        """The workspace's OKF harvest service (None when absent)."""
        return None if self.workspace is None else self.workspace.okf

    @property
    def insights(self) -> InsightReviews | None:
        """The workspace's insight reviews service (None when absent)."""
        return None if self.workspace is None else self.workspace.insights

    def reload(self) -> None:
        if self.okf is None and self.insights is None:
            self.query_one("#judgment-text", Static).update(
                Text("This workspace has no knowledge services.", style="dim"))
            self.count_label = "—"
            return
        self.load(self.current_query())

    @work(group="judgments", exclusive=True, exit_on_error=False)
    async def load(self, query: Query) -> None:
        """Load the queue and the selected item's detail."""
        await asyncio.sleep(DEBOUNCE)  # a newer reload cancels this one while it waits (exclusive)
        items: dict[str, JudgmentItem | InsightReview] = {}
        okf, insights = self.okf, self.insights
        if okf is not None:
            queue = await okf.queue()
            for item in sorted(queue, key=lambda i: (i.created_at, -i.inputs, i.agent, i.attempt, i.id)):
                items[f"okf:{item.id}"] = item
        if insights is not None:
            for review in await insights.list():
                items[f"insight:{review.id}"] = review
        self.notices = list(await okf.notices()) if okf is not None else []
        self.waiting = sum(1 for i in items.values() if _state(i) == "pending")
        self.count_label = f"{self.waiting} to judge" + (f" · {len(self.notices)} ⚠" if self.notices else "")
        await self._learn_inputs(items)
        self.items = items
        needle = query.needle
        if not query.empty:
            match = query.matcher()
            items = {k: v for k, v in items.items() if match(self.filter_row(k, v))}
        self._show_rows(items, needle)
        if self.selected in items:
            await self._load_detail(self.selected)
        else:
            self.detail = None
            self._show_detail()
        main = self.screen
        if hasattr(main, "update_badges"):
            main.update_badges()

    async def _learn_inputs(self, items: dict[str, JudgmentItem | InsightReview]) -> None:
        """Remember the names of the notes and records each judgment judges (once per attempt)."""
        okf = self.okf
        for item in items.values():
            if okf is not None and _is_judgment(item) and (item.id, item.attempt) not in self._inputs:
                try:
                    detail = await okf.detail(item.id)
                except ServiceError:  # a damaged judgment still lists, by its agent and count
                    continue
                names = tuple(dict.fromkeys(self._input_name(o.input_kind, o.input_name) for o in detail.outcomes))
                if names:  # none before the judge answers: asked again on the next load
                    self._inputs[(item.id, item.attempt)] = names

    def filter_row(self, key: str, item: JudgmentItem | InsightReview) -> JudgmentRow:
        """The row as the filter reads it (``kind:harvest state:pending agent:… what:…``)."""
        if _is_judgment(item):
            return JudgmentRow(key, "harvest", item.state, item.agent, self._what(key, item), item.created_at)
        return JudgmentRow(key, "insight", item.status, item.proposer, self._what(key, item), item.created_at)

    def _input_name(self, kind: str, name: str) -> str:
        """How an input is named: a run record by its run's one display name (``run_title``), a note by its file."""
        if kind != "record" or self.workspace is None:
            return name
        return run_names(self.workspace.desk, [name])[name]

    def _what(self, key: str, item: JudgmentItem | InsightReview) -> str:
        """What a row judges: the notes / records of a harvest judgment, the proposal of an insight review."""
        if _is_judgment(item):
            names = self._inputs.get((item.id, item.attempt), ())
            judged = ", ".join(names[:3]) + (f" +{len(names) - 3}" if len(names) > 3 else "") if names else \
                counted(item.inputs, "input")
            return f"{judged} · {item.agent} · attempt {item.attempt}"
        return f"{item.proposal.title} → {item.proposal.owner}/{item.proposal.name}"

    def forget_drawn(self) -> None:
        self._table_rows = []

    def _show_rows(self, items: dict[str, JudgmentItem | InsightReview], needle: str) -> None:
        table = self.query_one("#judgments-table", DataTable)
        rows: list[tuple[str, tuple[Text, ...]]] = []
        for key, item in items.items():
            if _is_judgment(item):
                state, verdicts = item.state, f"+{item.promote} ≈{item.merge} −{item.drop}"
                kind = "harvest"
            else:
                state, verdicts = item.status, f"{len(item.proposal.candidates)} cand."
                kind = "insight"
            what = fit_cell(highlight(cell_text(self._what(key, item), 120), needle))  # second: shown at every width
            rows.append((key, (Text(kind), what, Text(safe(state, 20), style="bold" if state == "pending" else "dim"),
                               Text(verdicts),
                               Text(day_minute(item.created_at)),  # MM-DD HH:MM; the detail has it whole
                               )))
        if rows == self._table_rows:
            return
        self._table_rows = rows
        table.clear()
        for key, cells in rows:
            table.add_row(*cells, key=key)
        keys = [k for k, _ in rows]
        if self.selected in keys:
            table.move_cursor(row=keys.index(self.selected))
        elif keys:
            pending = [k for k in keys if _state(self.items[k]) == "pending"]
            self.selected = pending[0] if pending else keys[0]
            table.move_cursor(row=keys.index(self.selected))

    @on(DataTable.RowHighlighted, "#judgments-table")
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        key = event.row_key.value
        if key is not None and key != self.selected and is_current(event):
            self.selected = str(key)
            self.candidate = 0
            self.load_detail(self.selected)
            self.note_selection()

    @work(group="judgment-detail", exclusive=True, exit_on_error=False)
    async def load_detail(self, key: str) -> None:
        """Load and show one item's detail."""
        await self._load_detail(key)

    async def _load_detail(self, key: str) -> None:
        kind, _, ident = key.partition(":")
        okf, insights = self.okf, self.insights
        if kind == "okf" and okf is not None:
            self.detail = await okf.detail(ident)
        elif kind != "okf" and insights is not None:
            review = await insights.get(ident)
            self.detail = review
            self.loaders = await self._listener_loaders(review)
        self._show_detail()

    async def _listener_loaders(self, review: InsightReview) -> list[LoadVerdict] | None:
        """For an approved insight, the nodes that now load its listener at boot (None: not known)."""
        canvas = None if self.workspace is None else self.workspace.canvas
        listener = getattr(review.proposal, "listener", None)
        if canvas is None or review.status != "approved" or not listener:
            return None
        try:
            return [v for v in await canvas.who_loads(listener) if v.loaded]
        except ServiceError:  # the listener is gone or was never written
            return None

    def _show_detail(self) -> None:
        self.refresh_bindings()  # the keys that apply follow the item shown
        text_widget = self.query_one("#judgment-text", Static)
        outcomes = self.query_one("#judgment-outcomes", SelectionList)
        outcomes.clear_options()
        d = self.detail
        if d is None:
            outcomes.display = False
            text = self._notice_text()
            text.append("nothing selected" if self.items else "the queue is empty", style="dim")
            text_widget.update(text)
            return
        if _is_harvest(d):
            text_widget.update(self._notice_text() + self._okf_text(d))
            pending = d.item.state == "pending"
            outcomes.display = pending and bool(d.outcomes)
            if pending:
                for o in d.outcomes:
                    label = Text(f"{safe(o.verdict, 20):<8} ", style=_verdict_style(o.verdict))
                    label.append(safe(f"{o.input_kind} {self._input_name(o.input_kind, o.input_name)}", 80))
                    outcomes.add_option((label, o.input))
                if d.outcomes:
                    outcomes.highlighted = 0
        else:
            outcomes.display = False
            text_widget.update(self._insight_text(d))

    def _detail_width(self) -> int:
        """The cells a detail row has (wrapped rows of a reason keep their indent within it)."""
        return self.query_one("#judgment-detail", VerticalScroll).scrollable_content_region.width or 80

    def on_resize(self) -> None:
        if self.detail is not None:
            self._show_detail()  # the reasons are wrapped to the width there is

    def _notice_text(self) -> Text:
        """What needs the operator in OKF, with the way out (empty when nothing does)."""
        text = Text()
        if not self.notices:
            return text
        text.append(f"⚠ knowledge needs attention ({len(self.notices)})\n", style=tone("warn", bold=True))
        for notice in self.notices[:20]:
            text.append(f"  {safe(notice.kind, 20)} · {safe(notice.subject, 200)}: ", style=tone("warn"))
            text.append(f"{safe(notice.reason, 600)}\n")
            text.append(f"    way out: {safe(notice.remedy, 800)}\n", style="dim")
        if len(self.notices) > 20:
            text.append(f"  … and {len(self.notices) - 20} more\n", style="dim")
        text.append("\n")
        return text

    def _okf_text(self, d: JudgmentDetail) -> Text:
        item = d.item
        text = Text()
        text.append(f"harvest judgment · {safe(item.state, 20)}", style="bold")
        text.append(f" · attempt {item.attempt} · {safe(item.agent, 60)} · {counted(item.inputs, 'input')}\n")
        if item.state == "pending":
            text.append("space ticks outcomes to approve one by one (none ticked: y approves all) · n rejects\n",
                        style="dim")
        for problem in item.problems:
            text.append(f"✗ {safe(problem, 400)}\n", style=tone("bad"))
        if item.state in ("invalid", "failed"):
            text.append("j judges it again (its inputs are kept)\n", style="dim")
        elif item.state == "delivering" and item.problems:
            text.append("the delivery did not finish · j retries it · n rejects it\n", style="dim")
        if item.reason:
            text.append(f"rejected: {safe(item.reason, 400)}\n", style=tone("warn"))
        git = {g.alias: g for g in getattr(item, "git", ())}
        if item.receipts:
            text.append("receipts\n", style="bold underline")
            accepted = {alias: (digest, at) for alias, digest, at in getattr(item, "accepted", ())}
            for alias, status in item.receipts:
                digest, at = accepted.get(alias, (None, None))
                text.append(f"  {safe(alias, 60)}: {safe(status, 40)}")
                if digest:
                    text.append(f" · {'head' if alias in git else 'digest'} {safe(digest, 80)}")
                if at:
                    text.append(f" · at {date_time(at)}")
                text.append("\n")
        for g in git.values():
            text.append(self._git_text(g))
        text.append("outcomes\n", style="bold underline")
        for o in d.outcomes:
            text.append(f"  {safe(o.verdict, 20)}", style=_verdict_style(o.verdict, bold=True))
            if o.decision:
                text.append(f" ({safe(o.decision, 40)})", style="dim")
            text.append(f" · {safe(o.input_kind, 20)} {safe(self._input_name(o.input_kind, o.input_name), 120)}\n")
            text.append_text(hanging("    reason: ", safe(o.reason, 1000), self._detail_width()))
            if o.concepts:
                text.append(f"    concepts: {safe(', '.join(o.concepts), 400)}\n")
            text.append("    input: ", style="dim")
            text.append(safe(o.input_text, 4000).replace("\n", "\n      ") + "\n")
        for base, path, reason in d.removals:
            text.append(f"  removes {safe(base, 60)}/{safe(path, 200)}: {safe(reason, 400)}\n", style=tone("bad"))
        if d.diff:
            text.append("concept diff against the base\n", style="bold underline")
            for line in safe(d.diff, DETAIL_CAP).splitlines():
                style = tone("ok") if line.startswith("+") else tone("bad") if line.startswith("-") else ""
                text.append(line + "\n", style=style)
        if d.reply:
            text.append("judge reply\n", style="bold underline")
            text.append(safe(d.reply, 8000) + "\n")
        return text

    @staticmethod
    def _git_text(g: GitDelivery) -> Text:
        """One Git delivery: the branch, its review, and whether the merge is visible yet."""
        text = Text()
        text.append(f"git · {safe(g.alias, 60)}\n", style="bold underline")
        if g.branch:
            text.append(f"  branch {safe(g.branch, 200)}")
            if g.commit:
                text.append(f" · commit {safe(g.commit[:12], 12)}")
            text.append("\n")
        if g.pr_url:
            text.append(f"  pull request {safe(g.pr_url, 300)}", style=tone("accent"))
            text.append(f" · {safe(g.pr_state or '?', 20)} · o opens it (asks first)\n", style="dim")
        elif g.review and g.status == "delivered":
            text.append(f"  review: {safe(g.review, 600)}\n")
        if g.status == "delivered" and g.upstream:
            text.append(f"  ? merge unknown: {safe(g.upstream, 600)}\n", style=tone("warn"))
            text.append("  y accepts it as merged · n rejects it (its inputs are judged again) · j checks again\n",
                        style="dim")
        elif g.status == "delivered":
            text.append("  … waiting for the merge into the accepted branch; it counts once merged · j checks now\n",
                        style=tone("warn"))
        elif g.status == "accepted":
            text.append(f"  ✓ merged: accepted at head {safe(g.accepted_commit or '?', 80)}\n", style=tone("ok"))
        elif g.status == "rejected":
            text.append(f"  ✗ rejected upstream: {safe(g.rejected or '', 400)}\n", style=tone("bad"))
        else:
            text.append(f"  delivery stopped at {safe(g.status, 40)} · j retries it\n", style="dim")
        return text

    def _insight_text(self, r: InsightReview) -> Text:
        p = r.proposal
        text = Text()
        text.append(f"insight review · {safe(r.status, 20)}\n", style="bold")
        text.append(safe(p.title, 200) + "\n", style="bold")
        text.append(f"destination {safe(p.owner, 80)} / {safe(p.name, 200)} · visibility {safe(p.visibility, 400)}\n")
        if p.listener:
            text.append(f"listener {safe(p.listener, 200)}\n")
        text.append(f"source {safe(p.source, 400)}\n")
        text.append("candidate truths (c picks, y edits and approves)\n", style="bold underline")
        for i, candidate in enumerate(p.candidates):
            chosen = i == self.candidate
            text.append(f" {'▶' if chosen else ' '} {i + 1}. ", style="bold" if chosen else "")
            text.append(safe(candidate, 2000) + "\n", style="bold" if chosen else "")
        if r.status == "approved":
            text.append(f"approved: {safe(r.text, 2000)}\n", style=tone("ok"))
            text.append(f"written to {safe(r.document, 200)} revision {r.revision}\n", style=tone("ok"))
            if self.loaders is not None:
                names = ", ".join(f"{safe(v.node_name, 60)} ({safe(v.level, 20)})" for v in self.loaders[:20])
                text.append(f"nodes that now load the listener at boot: {names or 'none yet'}\n", style=tone("ok"))
        if r.reason:
            text.append(f"rejected: {safe(r.reason, 400)}\n", style=tone("warn"))
        for error in r.errors:
            text.append(f"✗ {safe(error, 400)}\n", style=tone("bad"))
        return text

    # -- keys ----------------------------------------------------------------------------------

    def _stuck(self) -> str | None:
        """``delivering`` for a delivery whose last attempt failed, ``unknown`` for a Git delivery whose
        branch is gone with no matching merge found: the judgment waits on the operator's decision."""
        d = self.detail
        if not _is_harvest(d) or self.selected is None or not self.selected.startswith("okf:"):
            return None
        if d.item.state == "delivering" and d.item.problems:
            return "delivering"
        if d.item.state == "delivered" and any(g.upstream for g in d.item.git):
            return "unknown"
        return None

    def _need_pending(self, *, stuck_too: bool = False) -> tuple[str, str] | None:
        if self.selected is None or self.detail is None:
            notify_plain(self.app, "Select a judgment first.", severity="warning")
            return None
        kind, _, ident = self.selected.partition(":")
        state = _detail_state(self.detail)
        if stuck_too and self._stuck() is not None:
            return kind, ident
        if state != "pending":
            notify_plain(self.app, f"This {'judgment' if kind == 'okf' else 'review'} is {state}, not pending.",
                            severity="warning")
            return None
        return kind, ident

    def action_approve(self) -> None:
        harvest = self.okf
        if self._stuck() == "unknown" and harvest is not None and self.selected is not None:
            ident = self.selected.partition(":")[2]

            def merged(yes: bool | None) -> None:
                if yes:
                    self.act("Accepted as merged.", lambda: harvest.confirm_merged(ident))
            self.app.push_screen(ConfirmDialog(
                "The proposal branch is gone and no commit on the accepted branch carries exactly this proposal. "
                "Accept it as merged (a reviewer merged it with edits)? n rejects it instead."), merged)
            return
        target = self._need_pending()
        if target is None:
            return
        kind, ident = target
        if kind == "okf":
            okf = self.okf
            if okf is None:
                return
            outcomes = self.query_one("#judgment-outcomes", SelectionList)
            ticked = list(outcomes.selected)
            what = f"{len(ticked)} outcome(s) approved and delivered." if ticked else "Judgment approved and delivered."
            declined = [outcomes.get_option_at_index(i) for i in range(outcomes.option_count)]
            declined = [o for o in declined if o.value not in ticked] if ticked else []
            if not declined:
                if not wants_confirmation(self.app, "approve"):
                    self.act(what, lambda: okf.approve(ident, ticked or None))
                    return

                def whole(yes: bool | None) -> None:
                    if yes:
                        self.act(what, lambda: okf.approve(ident, ticked or None))
                count = outcomes.option_count
                self.app.push_screen(ConfirmDialog(
                    f"Approve the whole judgment and deliver its {count} outcome{'' if count == 1 else 's'} to the "
                    "knowledge base? (space ticks outcomes to approve one by one; confirm_approve = false in the "
                    "settings skips this question)"), whole)
                return

            def confirmed(yes: bool | None) -> None:
                if yes:
                    self.act(f"{what} Declined: {len(declined)}.", lambda: okf.approve(ident, ticked))
            names = "; ".join(safe(str(o.prompt), 120) for o in declined)
            self.app.push_screen(ConfirmDialog(f"Approve {len(ticked)} of {outcomes.option_count} outcomes? "
                                               f"These will be declined: {names}"), confirmed)
            return
        insights, candidate, review = self.insights, self.candidate, self.detail
        if insights is None or not _is_review(review):
            return
        truth = review.proposal.candidates[candidate]

        self.form_act(f"Approve candidate {candidate + 1} (edit it first if needed)",  # a refusal stays in the form
                      [Field("truth", "Durable truth", safe(truth, DETAIL_CAP), multiline=True)],
                      "Insight approved into the canvas.",
                      lambda v: insights.approve(ident, candidate=candidate, text=v["truth"]), submit="Approve")

    def action_reject(self) -> None:
        target = self._need_pending(stuck_too=True)
        if target is None:
            return
        kind, ident = target
        service = self.okf if kind == "okf" else self.insights
        if service is None:
            return

        self.form_act("Reject: say why", [Field("reason", "Reason")], "Rejected.",  # an empty reason stays in the form
                      lambda v: service.reject(ident, v["reason"]), submit="Reject")

    def action_rejudge(self) -> None:
        """Judge the selected harvest judgment again, or retry its unfinished delivery."""
        detail, okf = self.detail, self.okf
        if self.selected is None or not _is_harvest(detail) or okf is None \
                or not self.selected.startswith("okf:"):
            self.app.notify("Select a harvest judgment first.", severity="warning", markup=False)
            return
        ident, state = self.selected.partition(":")[2], detail.item.state
        if state == "delivering":
            self.act("Delivery retried.", lambda: okf.retry(ident))
        elif state == "delivered":
            changed: list[JudgmentItem] = []

            async def check() -> None:
                changed.extend(await okf.recheck(ident))

            self.act(lambda: f"Checked: the judgment is now {safe(changed[0].state, 20)}." if changed
                     else "Checked: still waiting for the merge.", check)
        elif state in ("invalid", "failed", "rejected", "approved"):
            self.act("Judged again.", lambda: okf.rejudge(ident))
        else:
            self.app.notify(f"This judgment is {safe(state, 20)}; it cannot be judged again now.", severity="warning",
                            markup=False)

    @work(group="judgments-open", exclusive=True, exit_on_error=False)
    async def action_open_review(self) -> None:
        """Open the selected judgment's pull request in the browser, after asking."""
        git = self.detail.item.git if _is_harvest(self.detail) else ()
        urls = [g.pr_url for g in git if g.pr_url]
        if not urls:
            notify_plain(self.app, "This judgment has no pull request to open.", severity="warning")
            return
        url = urls[0]
        if await self.app.push_screen_wait(ConfirmDialog(f"Open this pull request in your browser?\n\n{safe(url, 400)}")):
            self.app.open_url(url)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The footer offers a key only where it applies: ``space`` on a pending harvest judgment's outcomes,
        ``c`` on an insight review (the help lists them all)."""
        if action == "tick_outcome":
            return _is_harvest(self.detail) and self.detail.item.state == "pending" and bool(self.detail.outcomes)
        if action == "next_candidate":
            return _is_review(self.detail)
        return True

    def action_tick_outcome(self) -> None:
        """``space`` from the queue: tick (or untick) the highlighted outcome without tabbing into the list."""
        outcomes = self.query_one("#judgment-outcomes", SelectionList)
        if not outcomes.display or not outcomes.option_count:
            notify_plain(self.app, "This item has no outcomes to tick.", severity="warning")
            return
        index = outcomes.highlighted if outcomes.highlighted is not None else 0
        outcomes.toggle(outcomes.get_option_at_index(index).value)
        outcomes.highlighted = min(index + 1, outcomes.option_count - 1)

    def action_next_candidate(self) -> None:
        if self.selected and self.selected.startswith("insight:") and _is_review(self.detail):
            self.candidate = (self.candidate + 1) % max(1, len(self.detail.proposal.candidates))
            self._show_detail()

    def action_clear_filter(self) -> None:
        self.clear_filter()

    def focus_main(self) -> None:
        self.query_one("#judgments-table", DataTable).focus()

    def palette_actions(self) -> list[PaletteAction]:
        if self.detail is None or self.selected is None:
            return []
        insight = self.selected.startswith("insight:")
        state = _detail_state(self.detail)
        if not insight and state in ("invalid", "failed", "rejected"):
            return [("Judge it again", "j", "rejudge")]
        if not insight and state == "delivering":
            return [("Retry the delivery", "j", "rejudge")] + (
                [("Reject with a reason", "n", "reject")] if self._stuck() else [])
        if not insight and state == "delivered":
            actions_git: list[PaletteAction] = [("Check for the merge now", "j", "rejudge")]
            if self._stuck() == "unknown":
                actions_git += [("Accept it as merged", "y", "approve"), ("Reject with a reason", "n", "reject")]
            if _is_harvest(self.detail) and any(g.pr_url for g in self.detail.item.git):
                actions_git.append(("Open the pull request (asks first)", "o", "open_review"))
            return actions_git
        if state != "pending":
            return []
        actions: list[PaletteAction] = [("Approve" + (" the picked candidate" if insight else " the judgment"), "y", "approve"),
                                        ("Reject with a reason", "n", "reject")]
        if insight:
            actions.append(("Pick the next candidate truth", "c", "next_candidate"))
        return actions

    async def palette_items(self) -> list[tuple[str, str]]:
        return [(f"judgment {self._what(k, v)} · {k.split(':', 1)[1]}", k) for k, v in self.items.items()]

    def select_key(self, key: str) -> None:
        if self.filter_text:
            self.clear_filter()
        self.selected = key
        self.note_selection()
        self.candidate = 0
        self._table_rows = []
        self.request_reload()
