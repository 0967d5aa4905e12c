"""Rendering helpers for untrusted text: sanitise, clip, and build markup-free ``Text``; toasts; theme tones.

Times arrive from the services as float seconds since the epoch (``services.times``); the
panes format them here only (``iso``, ``date_time``, ``day_minute``, ``short_time``, ``age``).

``notify_plain`` is the one way the workbench shows a toast: message and title sanitised and clipped,
and never parsed as markup (Textual's ``notify`` parses markup by default, so an id holding ``[/x]``
would crash the app and ``[@click=app.quit]`` would be obeyed).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rich.cells import cell_len
from rich.console import Console
from rich.style import Style
from rich.text import Text
from textual import active_app  # type: ignore[attr-defined]  # Textual re-exports it without __all__
from textual.app import App
from textual.notifications import SeverityLevel

from services.clock import iso
from services.text import clip, distinct_titles, run_title, sanitize

__all__ = ["safe", "safe_text", "cell_text", "highlight", "iso", "short_time", "date_time", "day_minute", "age",
           "level_style", "tone", "TONES", "LINE_CAP", "DETAIL_CAP", "TOAST_CAP", "notify_plain", "counted", "words",
           "run_names", "hanging"]

LINE_CAP = 2_000
"""Characters of one untrusted value shown on a list row or stream line."""
DETAIL_CAP = 65_536
"""Characters of one untrusted value shown in a detail view."""
TOAST_CAP = 600
"""Characters of a toast's message."""


def safe(value: object, limit: int = LINE_CAP) -> str:
    """``value`` sanitised and clipped: a plain string safe for a markup-free renderer."""
    return clip(sanitize("" if value is None else value), limit)


def safe_text(value: object, limit: int = LINE_CAP, style: str = "") -> Text:
    """``value`` as a markup-free ``Text`` (never parsed as markup)."""
    return Text(safe(value, limit), style=style)


def cell_text(value: object, width: int) -> Text:
    """``value`` sanitised for a table cell, cut to ``width`` cells with an ellipsis."""
    text = Text(safe(value, width * 4))
    text.truncate(width, overflow="ellipsis")
    return text


def hanging(lead: str, body: str, width: int, style: str = "") -> Text:
    """``lead`` then ``body`` wrapped to ``width`` cells, each row after the first indented to where the body
    began (a long reason or preview reads as one block instead of running back to column 0); ends with a
    newline. ``body`` is shown as given: sanitise it first."""
    indent = cell_len(lead)
    room = max(10, width - indent)
    rows = Text(body, style=style).wrap(Console(width=room, color_system=None), room) if body else [Text("")]
    text = Text(lead)
    for number, row in enumerate(rows):
        if number:
            text.append(" " * indent)
        text.append_text(row)
        text.append("\n")
    return text


def run_names(desk: object, run_ids: Iterable[str]) -> dict[str, str]:
    """The one display name of each of ``run_ids`` (``run_title``, with a short id where two runs of the
    desk share a title), sanitised; an id the desk does not know (or no desk) is shown as itself."""
    wanted = list(dict.fromkeys(run_ids))
    runs = getattr(desk, "runs", None)
    titles: dict[str, str] = {}
    if wanted and callable(runs):
        try:
            views = runs(include_deleted=True)
        except Exception:  # noqa: BLE001 - a name is never worth a failed draw: the id stands in
            views = []
        titles = distinct_titles({v.id: run_title(v.name, v.prompt, v.id) for v in views})
    return {run_id: safe(titles.get(run_id, run_id), 160) for run_id in wanted}


def notify_plain(
    app: App[Any],  # Textual's own generic parameter (the App's return type): every App may toast
    message: object, *, title: object = "", severity: str = "information", timeout: float | None = None
) -> None:
    """Show a toast: ``message`` and ``title`` sanitised, clipped, and rendered with markup off."""
    level: SeverityLevel = "warning" if severity == "warning" else "error" if severity == "error" else "information"
    app.notify(safe(message, TOAST_CAP), title=safe(title, 120), severity=level, timeout=timeout, markup=False)


def highlight(text: Text | str, needle: str, style: str = "reverse") -> Text:
    """``text`` with every case-insensitive occurrence of ``needle`` styled (the filter match)."""
    out = text.copy() if isinstance(text, Text) else Text(text)
    if not needle:
        return out
    plain, low = out.plain.lower(), needle.lower()
    start = plain.find(low)
    while start >= 0:
        out.stylize(style, start, start + len(low))
        start = plain.find(low, start + len(low))
    return out


def counted(number: int, noun: str, plural: str | None = None) -> str:
    """``1 run``, ``3 runs``, ``0 refusals``: a count with its noun in the right number."""
    return f"{number} {noun if number == 1 else plural or noun + 's'}"


def words(value: object) -> str:
    """A wire word as people read it: ``waiting_on_user`` is ``waiting on user`` (sanitised)."""
    return safe(value, 80).replace("_", " ")


def short_time(ts: float) -> str:
    """``HH:MM:SS`` (UTC) of a timestamp."""
    return iso(ts)[11:19]


def date_time(ts: float | None, absent: str = "?") -> str:
    """``YYYY-MM-DD HH:MM:SS`` (UTC) of a timestamp; ``absent`` when there is none (None or 0)."""
    return iso(ts)[:19].replace("T", " ") if ts else absent


def day_minute(ts: float | None, absent: str = "?") -> str:
    """``MM-DD HH:MM`` (UTC) of a timestamp, for a narrow column; ``absent`` when there is none."""
    return iso(ts)[5:16].replace("T", " ") if ts else absent


def age(now: float, then: float) -> str:
    """A compact age: ``42s``, ``5m``, ``3h``, ``2d``."""
    seconds = max(0, int(now - then))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m"
    if seconds < 86400:
        return f"{seconds // 3600}h"
    return f"{seconds // 86400}d"


TONES = {
    "ok": "text-success",
    "bad": "text-error",
    "warn": "text-warning",
    "accent": "text-accent",
}
"""Semantic tones -> the theme variable each is drawn in (the text shades, readable on any surface)."""


def tone(name: str, *, bold: bool = False) -> Style:
    """The running App's theme colour for a tone (``ok``, ``bad``, ``warn``, ``accent``).

    Panes build Rich ``Text`` in Python, where ``$variables`` are not understood; this resolves the
    variable against the current theme at build time (the main screen reloads the panes when the
    theme changes). Without a running App (plain unit use) the tone is only bold or plain.
    """
    variable = TONES[name]
    try:
        value = active_app.get().theme_variables.get(variable, "")
    except LookupError:
        value = ""
    if not value or " " in value:  # no App, or a computed value ("auto 60%"): no fixed colour
        return Style(bold=bold or None)
    return Style(color=value, bold=bold or None)


def level_style(level: int) -> Style:
    """The style of an event level (1..10): 7 and up stand out as alerts, 4 and up as warnings."""
    return tone("bad", bold=True) if level >= 7 else tone("warn") if level >= 4 else Style()
