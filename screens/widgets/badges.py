"""``BadgeBar``: the header line with the title and the live badges, and ``PaneStrip``: pane counts."""

from __future__ import annotations

from rich.style import Style
from rich.text import Text
from textual.events import Click
from textual.reactive import reactive
from textual.widgets import Static

from ..text import counted, safe, tone

__all__ = ["BadgeBar", "PaneStrip"]


class BadgeBar(Static):
    """Title plus badges: judgments waiting, runs waiting on the user, refusals in the last minute, and
    captures that failed (OKF notes and run records, outbox turns), shown only while there are some."""

    judgments: reactive[int] = reactive(0)
    """Harvest judgments and insight reviews waiting for the operator."""
    waiting: reactive[int] = reactive(0)
    """Runs waiting on their person."""
    refusals: reactive[int] = reactive(0)
    """Refusals the app met in the last minute from grants that still refuse (a restore clears them)."""
    captures: reactive[int] = reactive(0)
    """Captures that failed and have not succeeded since (``Workspace.capture_failures``)."""
    memory: reactive[str] = reactive("")
    """Where memory goes when it is a Honcho server (empty: the embedded fake)."""
    memory_problem: reactive[str] = reactive("")
    """Why that server cannot be reached or refuses the key (empty: none known)."""
    canvas: reactive[str] = reactive("")
    """Where the canvas is when it is on a server (``canvas_label``; empty: ``canvas.db`` in the workspace)."""
    settings_problem: reactive[str] = reactive("")
    """Why the settings file is not used (empty: none); shown until the file is fixed."""
    status: reactive[str] = reactive("opening the workspace…")
    """A short state word (opening / ready / the workspace error)."""

    def render(self) -> Text:
        """The header at the width there is: in full, else with short badges and the status without its
        aside, so where the cloud and memory are still shows whole; what still does not fit ends in ``…``."""
        width = self.size.width or self.app.size.width
        for short in (False, True):
            text = self._header(short=short)
            if text.cell_len <= width:
                return text
        text.truncate(max(1, width), overflow="ellipsis")
        return text

    def _header(self, *, short: bool) -> Text:
        text = Text(" workbench ", style="bold reverse")
        if getattr(self.app, "read_only", False):
            text.append(" READ-ONLY ", style=tone("warn", bold=True) + Style(reverse=True))
        text.append("  ")
        text.append(f" ⚖ {self.judgments}" + (" " if short else " to judge "), style="bold" if self.judgments else "dim")
        text.append(" ")
        text.append(f" ? {self.waiting}" + (" waiting " if short else " waiting on the user "),
                    style="bold" if self.waiting else "dim")
        text.append(" ")
        refusals = f" ‼ {self.refusals}/min " if short else f" ‼ {counted(self.refusals, 'refusal')}/min "
        text.append(refusals, style=tone("bad", bold=True) if self.refusals else "dim")
        if self.captures:
            text.append(" ")
            failures = "capture failed" if self.captures == 1 else "captures failed"
            text.append(f" ✗ {self.captures} {failures} ", style=tone("bad", bold=True))
        if self.memory_problem:
            text.append(" ")
            text.append(f" ⚠ memory not delivered: {safe(self.memory_problem, 160)} ", style=tone("bad", bold=True))
        if self.settings_problem:
            text.append(" ")
            text.append(f" ⚠ settings not used: {safe(self.settings_problem, 200)} ", style=tone("warn", bold=True))
        if self.status != "ready":  # where the cloud is (attached / serving) before where memory goes
            status = self.status.split(" (", 1)[0] if short else self.status  # "(served by process N)" is an aside
            text.append(f"  {safe(status, 200)}", style="dim")
        if self.memory:
            text.append(f"  memory → {safe(self._memory_where(), 120)}", style="dim")
        if self.canvas:
            text.append(f"  {safe(self.canvas, 160)}", style="dim")
        return text

    def _memory_where(self) -> str:
        """The memory URL, as a path when it is on the server the status names (``/honcho ...``)."""
        for word in self.status.split():
            origin = word.rstrip("/")
            if origin.startswith(("http://", "https://")) and self.memory.startswith(origin + "/"):
                return self.memory[len(origin):]
        return self.memory


class PaneStrip(Static):
    """The other panes with their live counts (shown when one pane fills the body)."""

    labels: reactive[tuple[tuple[int, str, tuple[str, ...], bool], ...]] = reactive(())
    """``(number, pane id, headlines, active)`` per pane; the headlines go from the fullest (the pane's
    name and its counts) to the shortest (its name), and the strip uses the fullest that fits."""

    def render(self) -> Text:
        width = self.size.width or self.app.size.width
        tiers = max((len(headlines) for _n, _t, headlines, _a in self.labels), default=1)
        for tier in range(tiers):
            text = self._strip(tier)
            if text.cell_len <= width:
                break
        return text

    def _strip(self, tier: int) -> Text:
        text = Text()
        self._spans: list[tuple[int, int, str]] = []
        for number, title, headlines, active in self.labels:
            start = len(text)
            text.append(f" {number} ", style=tone("accent", bold=True))  # the key, as the footer draws keys
            text.append(f" {headlines[min(tier, len(headlines) - 1)]} ", style="bold reverse" if active else "")
            self._spans.append((start, len(text), title))
            text.append("│", style="dim")
        return text

    async def on_click(self, event: Click) -> None:
        """A click on a pane's label brings that pane forward (its title is its id)."""
        for start, end, title in getattr(self, "_spans", []):
            if start <= event.x < end:
                await self.screen.run_action(f"show_pane({title!r})")
                return
