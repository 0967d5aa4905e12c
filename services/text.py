"""The one sanitizer for untrusted text (runs, notes, documents, file names, error messages).

``sanitize`` makes any string safe to hand to a terminal renderer with markup off: C0 controls
(except tab and newline), DEL and C1 controls become visible escapes (``\\x1b`` shows as ``␛``
followed by nothing hidden), and bidi overrides are neutralised. It keeps every other character,
so square brackets, ``$`` and backslashes come out verbatim. Render the result with
``markup=False`` / ``Text(...)`` / ``Content(...)``; never interpolate it into markup.
"""

from __future__ import annotations

import re

__all__ = ["sanitize", "clip"]

_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]")
_PICTURES = {0x1B: "␛", 0x00: "␀", 0x7F: "␡", 0x0D: "␍", 0x07: "␇", 0x08: "␈"}


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    picture = _PICTURES.get(code)
    if picture is not None:
        return picture
    if code < 0x20:
        return chr(0x2400 + code)  # the Unicode "control pictures" block: ␁ ␂ ...
    if code <= 0x9F:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}"


def sanitize(text: object) -> str:
    """``text`` as a string with every control character shown as a visible escape."""
    value = text if isinstance(text, str) else str(text)
    return _CONTROL.sub(_visible, value)


def clip(text: str, limit: int = 4096) -> str:
    """``text`` cut to ``limit`` characters with a marker saying how much was left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [{len(text) - limit} more characters]"
