"""``GrantsPane`` (``#grants``): each person's grant, and the keys that change it.

Shows state, ``rev``, scopes, dependencies with their setup state, spend cap, the current
refusal, held reads, and the refusals the app met. Keys: ``k`` revoke, ``u`` restore, ``f``
refuse with a code, ``t`` expire tokens, ``e`` edit scopes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import get_args

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Static

from services.changes import Change
from services.desk import GrantView, RefusalRecord, is_system
from services.wire import RefusalCode

from .dialogs import ConfirmDialog, Field, wants_confirmation
from .text import cell_text, counted, highlight, notify_plain, safe, safe_text, short_time, tone
from .widgets.fit_table import FitTable, fit_cell
from .widgets.pane import Pane, PaletteAction, is_current

__all__ = ["GrantsPane", "REFUSAL_CODES"]

REFUSAL_CODES: tuple[str, ...] = get_args(RefusalCode)
"""The codes a refusal may carry (the wire's; the SDK records exactly these as refusals)."""


class GrantsPane(Pane):
    """Grants per person."""

    title = "grants"
    number = 4
    sources = frozenset({"cloud", "workspace"})

    BINDINGS = [
        Binding("k", "revoke", "Revoke",
                tooltip="Revoke the person's grant: their app's refreshes are refused (asks first)",
                id="workbench.grants.revoke"),
        Binding("u", "restore", "Restore",
                tooltip="Restore a revoked grant with a new sign-in", id="workbench.grants.restore"),
        Binding("f", "refuse", "Refuse",
                tooltip="Refuse the person's token refreshes with a refusal code", id="workbench.grants.refuse"),
        Binding("t", "expire_tokens", "Expire tokens",
                tooltip="Expire the person's access tokens now, so their app must refresh",
                id="workbench.grants.expire_tokens"),
        Binding("e", "edit_scopes", "Scopes",
                tooltip="Change the scopes the person's grant holds", id="workbench.grants.edit_scopes"),
        Binding("escape", "clear_filter", "Clear filter", show=False,
                tooltip="Clear the filter", id="workbench.grants.clear_filter"),
    ]

    def __init__(self, *, classes: str = "") -> None:
        super().__init__(id="grants", classes=classes)
        self.selected: str | None = None
        """The person whose grant is shown."""
        self._views: dict[str, GrantView] = {}
        self._shown: list[tuple[str, tuple[Text, ...]]] = []
        self._refusal_cache: list[RefusalRecord] = []

    def compose_body(self) -> ComposeResult:
        table = FitTable(id="grants-table", keep=2, cursor_type="row", zebra_stripes=True)  # a column shows whole or not at all
        table.add_columns("person", "state", "rev", "refusal", "held", "cap", "deps", "scopes")
        yield table
        yield Static("", id="grant-detail", markup=False)

    def forget_drawn(self) -> None:
        self._shown = []

    def reload(self) -> None:
        desk = self.desk
        views = desk.grants()
        self._refusal_cache = list(desk.refusals)
        query = self.current_query()
        views, needle = query.filter(views), query.needle
        self._views = {v.user_id: v for v in views}
        rows = [(v.user_id, self._row(v, needle)) for v in views]
        if rows != self._shown:
            table = self.query_one("#grants-table", DataTable)
            keep = self.selected
            table.clear()
            for key, cells in rows:
                table.add_row(*cells, key=key)
            keys = [k for k, _ in rows]
            if keep in keys:
                table.move_cursor(row=keys.index(keep))
            elif keys:
                self.selected = keys[0]
            self._shown = rows
        revoked = sum(1 for v in views if v.state != "active")
        self.count_label = counted(len(views), "grant") + (f" · {revoked} revoked" if revoked else "")
        self._show_detail()

    def _row(self, v: GrantView, needle: str) -> tuple[Text, ...]:
        deps = ", ".join(f"{p}:{s}" for p, s, _ in v.dependencies) or "—"
        return (
            highlight(safe_text(v.user_id, 60, style="dim italic" if is_system(v.user_id) else ""), needle),
            Text(safe(v.state, 20), style=tone("ok") if v.state == "active" else tone("bad", bold=True)),
            Text(str(v.rev)),
            cell_text(v.refusal or v.revoked_code or "—", 24),
            Text(f"{v.holding}/{v.reads}"),
            cell_text(v.spend_cap, 20),
            cell_text(deps, 32),
            fit_cell(highlight(cell_text(" ".join(v.scopes), 80), needle)),  # last: cut to the room left; the detail has it whole
        )

    @on(DataTable.RowHighlighted, "#grants-table")
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key.value is not None and is_current(event):
            self.selected = str(event.row_key.value)
            self._show_detail()
            self.note_selection()

    def _show_detail(self) -> None:
        detail = self.query_one("#grant-detail", Static)
        view = self._views.get(self.selected or "")
        if view is None:
            detail.update(Text("no grant selected" if self.workspace else "opening the workspace…", style="dim"))
            return
        text = Text()
        text.append(safe(view.user_id, 80) + " ", style="bold")
        text.append(f"  {safe(view.state, 20)}", style=tone("ok") if view.state == "active" else tone("bad", bold=True))
        text.append(f"  rev {view.rev} · version {view.version} · {counted(view.runs, 'run')}\n")
        if is_system(view.user_id):
            text.append("system: the workbench's own person (the harvest judge's runs)\n", style="dim")
        text.append("scopes: ", style="bold")
        text.append(safe(" ".join(view.scopes) or "none", 400) + "\n")
        text.append("dependencies: ", style="bold")
        if not view.dependencies:
            text.append("none\n")
        for provider, state, message in view.dependencies:
            text.append(f"\n  {safe(provider, 60)}: ")
            text.append(safe(state, 40), style=tone("ok") if state == "ready" else tone("warn"))
            if message:
                text.append(f" — {safe(message, 200)}")
        if view.dependencies:
            text.append("\n")
        text.append("spend cap: ", style="bold")
        text.append(safe(view.spend_cap, 80) + "\n")
        text.append("current refusal: ", style="bold")
        if view.state != "active":  # a revoked grant refuses with its revocation's code, whatever else is set
            code = view.revoked_code or view.refusal or view.state
            text.append(safe(code, 80), style=tone("bad", bold=True))
            text.append(f" (the grant is {safe(view.state, 20)}; u restores it)", style=tone("bad"))
        elif view.refusal:
            text.append(safe(view.refusal, 80), style=tone("bad", bold=True))
            text.append(" (every refresh is refused; u restores the grant)", style=tone("bad"))
        else:
            text.append("none")
        text.append(f"\nheld reads: {view.holding} waiting · {view.reads} made\n")
        refusals = [r for r in self._refusal_cache if r.user_id == view.user_id][-5:]
        if refusals:
            past = view.state == "active" and view.refusal is None  # the grant refuses no more: history, not alarm
            text.append("refusals the app met" + (" (before the grant was restored):\n" if past else ":\n"), style="bold")
            for r in refusals:
                text.append(f"  {short_time(r.at)} {safe(r.code, 60)} at rev {r.rev}: {safe(r.message, 200)}\n",
                            style="dim" if past else tone("bad"))
        detail.update(text)

    # -- key actions ---------------------------------------------------------------------------

    def _need(self) -> str | None:
        if self.selected is None:
            notify_plain(self.app, "Select a person first.", severity="warning")
        return self.selected

    def _form(self, title: str, fields: list[Field], what: str, call: Callable[[dict[str, str]], Awaitable[object]],
              submit: str = "OK") -> None:
        """The form makes the change: a refused value (a bad scope) is said inline, the form stays open."""
        self.form_act(title, fields, what, call, submit=submit)

    def action_revoke(self) -> None:
        user = self._need()
        if user:
            desk = self.desk
            self._form(f"Revoke the grant of {safe(user, 80)}? Their app's next refresh is refused (u restores it).",
                       [Field("code", "Refusal code for the next refresh", "grant_revoked", choices=REFUSAL_CODES)],
                       f"Grant of {user} revoked.", lambda v: desk.revoke(user, v["code"]), submit="Revoke")

    def action_restore(self) -> None:
        user = self._need()
        if user:
            desk = self.desk
            if not wants_confirmation(self.app, "restore"):
                self.act(f"Grant of {user} restored.", lambda: desk.restore(user))
                return

            def confirmed(yes: bool | None) -> None:
                if yes:
                    self.act(f"Grant of {user} restored.", lambda: desk.restore(user))
            self.app.push_screen(ConfirmDialog(
                f"Restore the grant of {safe(user, 80)}? Their app's refreshes are accepted again and the refusal "
                "is cleared (confirm_restore = false in the settings skips this question)"), confirmed)

    def action_refuse(self) -> None:
        user = self._need()
        if user:
            desk = self.desk
            self._form(f"Refuse refreshes for {safe(user, 80)}", [Field("code", "Refusal code", choices=REFUSAL_CODES)],
                       f"Refreshes for {user} refused.", lambda v: desk.refuse(user, v["code"]))

    def action_expire_tokens(self) -> None:
        user = self._need()
        if user:
            desk = self.desk
            self.act(f"Tokens of {user} expired.", lambda: desk.expire_tokens(user))

    def action_edit_scopes(self) -> None:
        user = self._need()
        if user:
            desk = self.desk
            current = " ".join(self._views[user].scopes) if user in self._views else ""
            self._form(f"Scopes of {safe(user, 80)} (space separated)", [Field("scopes", "Scopes", current)],
                       f"Scopes of {user} set.", lambda v: desk.set_scopes(user, v["scopes"].split()))

    def action_clear_filter(self) -> None:
        self.clear_filter()

    def changed(self, changes: tuple[Change, ...]) -> None:
        """Reload on grant, refusal and run-count changes; a run's events leave grants as they are."""
        if self.workspace is not None and any(c.source in self.sources and c.kind != "run.event" for c in changes):
            self.request_reload()

    def focus_main(self) -> None:
        self.query_one("#grants-table", DataTable).focus()

    def palette_actions(self) -> list[PaletteAction]:
        view = self._views.get(self.selected or "")
        if view is None:
            return []
        actions: list[PaletteAction] = []
        if view.state == "active":
            actions.append((f"Revoke the grant of {view.user_id}", "k", "revoke"))
        actions += [(f"Restore the grant of {view.user_id}", "u", "restore")]
        if view.refusal is None:
            actions.append((f"Refuse refreshes for {view.user_id}", "f", "refuse"))
        actions += [(f"Expire the tokens of {view.user_id}", "t", "expire_tokens"),
                    (f"Edit the scopes of {view.user_id}", "e", "edit_scopes")]
        return actions

    async def palette_items(self) -> list[tuple[str, str]]:
        if self.workspace is None:
            return []
        return [(f"person {g.user_id} · grant {g.state} rev {g.rev}", g.user_id) for g in self.desk.grants()]

    def select_key(self, key: str) -> None:
        if self.filter_text:
            self.clear_filter()
        self.reload()
        keys = [k for k, _ in self._shown]
        if key in keys:
            self.query_one("#grants-table", DataTable).move_cursor(row=keys.index(key))
            self.selected = key
            self._show_detail()
            self.note_selection()
