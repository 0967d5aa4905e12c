"""Rendering helpers for untrusted text: sanitise, clip, and build markup-free ``Text``."""

from __future__ import annotations

from rich.text import Text

from services.clock import iso
from services.text import clip, sanitize

__all__ = ["safe", "safe_text", "highlight", "short_time", "age", "level_style", "LINE_CAP", "DETAIL_CAP"]

LINE_CAP = 2_000
"""Characters of one untrusted value shown on a list row or stream line."""
DETAIL_CAP = 65_536
"""Characters of one untrusted value shown in a detail view."""


def safe(value: object, limit: int = LINE_CAP) -> str:
    """``value`` sanitised and clipped: a plain string safe for a markup-free renderer."""
    return clip(sanitize("" if value is None else value), limit)


def safe_text(value: object, limit: int = LINE_CAP, style: str = "") -> Text:
    """``value`` as a markup-free ``Text`` (never parsed as markup)."""
    return Text(safe(value, limit), style=style)


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


def short_time(ts: float) -> str:
    """``HH:MM:SS`` (UTC) of a timestamp."""
    return iso(ts)[11:19]


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


def level_style(level: int) -> str:
    """The style of an event level (1..10): 7 and up stand out as alerts, 4 and up as warnings."""
    return "bold red" if level >= 7 else "yellow" if level >= 4 else ""
