"""Untrusted text: the one sanitizer for the terminal, and the one text policy for the stores.

**For the terminal.** ``sanitize`` makes any string safe to hand to a terminal renderer with
markup off: C0 controls (except tab and newline), DEL and C1 controls become visible escapes
(``\\x1b`` shows as ``␛``), bidi overrides are neutralised, and every *format* character (zero-width
space, BOM, joiners, soft hyphen, variation selectors, tags, line and paragraph separators) is shown
as a visible ``\\uXXXX`` escape, so the cells a renderer measures are the cells a terminal draws. It
keeps every other character, so square brackets, ``$`` and backslashes come out verbatim. Render the
result with ``markup=False`` / ``Text(...)`` / ``Content(...)``; never interpolate it into markup.

**For the stores.** Three kinds of text cannot be stored faithfully anywhere: a lone surrogate
(``"\\udc80"``, what a JavaScript app sends when it splits an emoji; it has no UTF-8 form), NUL (which
C libraries, SQLite's FTS and Honcho cut or strip) and bytes that are not UTF-8. Every store treats
them one of two ways, and says which in its docstring and in the README's "Bad input" section:

- **refused** with the store's own clear error (``text_problem`` names what and where), when the
  caller typed the value and can fix it, or the original stays where it came from: canvas writes,
  OKF judgments (model output is re-judged or failed, never half-applied), OKF notes (each bad note
  is skipped with its reason and stays in its home) and OKF run records (``E_CAPTURE``);
- **repaired and flagged** (``repair_text``: surrogate pairs joined, lone surrogates become U+FFFD,
  NUL removed; ``decode_text`` for bytes), when refusing would lose something nobody can send again:
  captured conversation turns, outbox lines written by another program.

Either way a bad value never stops a sweep, a compaction, a run or an open.

**Secrets in URLs.** ``public_url`` and ``redact_urls`` take the user information out of URLs
(``https://user:TOKEN@host/`` becomes ``https://host/``; an ``ssh://`` URL keeps its user name, which
names the account, and loses any password) before a URL or a text that may hold one (an error a
tool printed) is shown, logged or stored. Credentials stay with their own tools.
"""

from __future__ import annotations

import re
from typing import TypeVar, cast

V = TypeVar("V")

__all__ = [
    "json_text_suspect",
    "run_title",
    "distinct_titles",
    "sanitize",
    "clip",
    "text_problem",
    "value_problem",
    "repair_text",
    "repair_value",
    "has_bad_text",
    "decode_text",
    "escape_surrogates",
    "public_url",
    "redact_urls",
    "url_userinfo",
]

# C0 (but tab and newline), DEL, C1, and every Unicode format character (category Cf), the line
# and paragraph separators (Zl, Zp) and the variation selectors. Generated from unicodedata 14.
_FORMAT = (
    "\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890-\u0891\u08e2\u180e\u200b-\u200f\u2028-\u202e"
    "\u2060-\u2064\u2066-\u206f\ufe00-\ufe0f\ufeff\ufff9-\ufffb\U000110bd\U000110cd"
    "\U00013430-\U00013438\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001"
    "\U000e0020-\U000e007f\U000e0100-\U000e01ef"
)
_CONTROL = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_FORMAT}\ud800-\udfff]")
_PICTURES = {0x1B: "␛", 0x00: "␀", 0x7F: "␡", 0x0D: "␍", 0x07: "␇", 0x08: "␈"}
_SURROGATE = re.compile("[\ud800-\udfff]")
_BAD_STORED = re.compile("[\x00\ud800-\udfff]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    picture = _PICTURES.get(code)
    if picture is not None:
        return picture
    if code < 0x20:
        return chr(0x2400 + code)  # the Unicode "control pictures" block: ␁ ␂ ...
    if code <= 0x9F:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def sanitize(text: object) -> str:
    """``text`` as a string with every control and format character shown as a visible escape."""
    value = text if isinstance(text, str) else str(text)
    return _CONTROL.sub(_visible, value)


TITLE_CHARS = 60
"""A run's title taken from its prompt keeps this many characters (then ``…``)."""


def run_title(name: object, prompt: object, run_id: str) -> str:
    """A run's one display name, wherever it is shown: its name, else its prompt's first line (cut with
    ``…``), else its id. The runs list, the canvas, the inbox, memory and the toasts all use it."""
    if isinstance(name, str) and name.strip():
        return name.strip()
    first = next((line.strip() for line in str(prompt or "").splitlines() if line.strip()), "")
    if first:
        return first if len(first) <= TITLE_CHARS else first[:TITLE_CHARS - 1].rstrip() + "…"
    return run_id


def short_id(run_id: str) -> str:
    """The last six characters of an id: enough to tell two runs of one title apart."""
    return run_id[-6:]


def distinct_titles(titles: dict[str, str]) -> dict[str, str]:
    """Titles by id, with `` · <short id>`` after each title two ids share (``okf judgment · 8c1f0a``)."""
    seen: dict[str, int] = {}
    for title in titles.values():
        seen[title] = seen.get(title, 0) + 1
    return {key: f"{title} · {short_id(key)}" if seen[title] > 1 else title for key, title in titles.items()}


def clip(text: str, limit: int = 4096) -> str:
    """``text`` cut to ``limit`` characters with a marker saying how much was left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [{len(text) - limit} more characters]"


# -- the store policy ---------------------------------------------------------------------------


def text_problem(value: str) -> str | None:
    """What makes ``value`` unstorable (a lone surrogate or NUL, and where), or None when it is fine."""
    match = _BAD_STORED.search(value)
    if match is None:
        return None
    char, at = match.group(), match.start()
    if char == "\x00":
        return f"NUL character at position {at}"
    return f"lone surrogate U+{ord(char):04X} at position {at} (text that is not valid Unicode)"


def value_problem(value: object, where: str = "") -> str | None:
    """``text_problem`` for every string (keys included) in a JSON-like value, naming its place."""
    if isinstance(value, str):
        problem = text_problem(value)
        return f"{where or 'value'}: {problem}" if problem else None
    if isinstance(value, dict):
        for key, item in value.items():
            place = f"{where}.{key}" if where else str(key)
            if isinstance(key, str) and (problem := text_problem(key)):
                return f"key {repair_text(place)[0]!r}: {problem}"
            if problem := value_problem(item, place):
                return problem
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            if problem := value_problem(item, f"{where}[{index}]"):
                return problem
    return None


def _surrogate_escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def escape_surrogates(json_text: str) -> str:
    """JSON text with each lone surrogate written as its escape (``\\ud800``), as JavaScript's
    ``JSON.stringify`` writes it: valid UTF-8 that a JSON parser reads back as the same text. Only
    for JSON text, where a surrogate can only stand inside a string."""
    return _SURROGATE.sub(_surrogate_escape, json_text)


def repair_text(value: str) -> tuple[str, bool]:
    """``value`` made storable, and whether anything changed.

    Surrogate pairs held as two code points are joined into their character, any surrogate left
    becomes U+FFFD (as a UTF-8 decoder or JavaScript's ``toWellFormed`` would do) and NUL is removed
    (as Honcho does). Clean text is returned as it is, at the cost of one regex scan.
    """
    if _BAD_STORED.search(value) is None:
        return value, False
    text = value.replace("\x00", "")
    if _SURROGATE.search(text) is not None:
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
        text = _SURROGATE.sub("\ufffd", text)
    return text, True


def has_bad_text(value: str) -> bool:
    """Whether ``repair_text`` would change ``value`` (a NUL or a surrogate in it)."""
    return _BAD_STORED.search(value) is not None


_ESCAPES = ("\\u0000", "\\ud", "\\uD")
_ESCAPES_BYTES = tuple(mark.encode() for mark in _ESCAPES)


def json_text_suspect(text: str | bytes) -> bool:
    """Whether JSON text may decode to a string holding a NUL or a surrogate. JSON carries them only
    as an escape (its text is UTF-8, and a raw control character in a string is refused), so text with
    none of these escapes decodes to storable strings only. An emoji's escaped pair counts as suspect:
    what it decodes to is then checked string by string (``has_bad_text``, ``repair_value``)."""
    marks: tuple[str, ...] | tuple[bytes, ...] = _ESCAPES_BYTES if isinstance(text, bytes) else _ESCAPES
    return any(mark in text for mark in marks)  # type: ignore[operator]


def json_clean(value: object) -> bool:
    """Whether every string of a JSON-like value is storable as it is (``repair_value`` would change
    nothing), in one scan of its JSON text; False also for a value that is not JSON-like (then walk
    it with ``repair_value``)."""
    import json

    try:
        flat = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return False
    return "\\u0000" not in flat and not has_bad_text(flat)


def repair_value(value: V) -> tuple[V, bool]:
    """``repair_text`` over every string (keys included) of a JSON-like value (a repaired mapping
    comes back as a plain ``dict``, a repaired sequence as its own type)."""
    if isinstance(value, str):
        text, fixed = repair_text(value)
        return cast(V, text), fixed
    if isinstance(value, dict):
        changed = False
        out: dict[object, object] = {}
        for key, item in value.items():
            if isinstance(key, str):
                key, fixed = repair_text(key)
                changed |= fixed
            item, fixed = repair_value(item)
            changed |= fixed
            out[key] = item
        return (cast(V, out), True) if changed else (value, False)
    if isinstance(value, (list, tuple)):
        items = [repair_value(item) for item in value]
        if any(fixed for _, fixed in items):
            return cast(V, type(value)(item for item, _ in items)), True
        return value, False
    return value, False


def decode_text(data: bytes) -> tuple[str, bool]:
    """UTF-8 ``data`` as text; bytes that are not UTF-8 become U+FFFD and the result is flagged."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text, fixed = repair_text(data.decode("utf-8", "replace"))
        return text, True
    return repair_text(text)


# -- secrets in URLs ------------------------------------------------------------------------------

_URL_USERINFO = re.compile(r"(?P<scheme>(?<![A-Za-z0-9+.])[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/?#\s]*)@")
_KEEPS_USER = frozenset({"ssh://", "git+ssh://", "ssh+git://"})


def _public_userinfo(match: re.Match[str]) -> str:
    scheme = match.group("scheme")
    user = match.group("userinfo").split(":", 1)[0]
    return f"{scheme}{user}@" if scheme.lower() in _KEEPS_USER and user else scheme


def redact_urls(text: str) -> str:
    """``text`` with the user information of every ``scheme://user:secret@`` URL in it taken out
    (an ``ssh://`` URL keeps its user name). Cheap when the text holds no ``@``."""
    if "@" not in text:
        return text
    return _URL_USERINFO.sub(_public_userinfo, text)


def public_url(url: str) -> str:
    """``url`` as it may be shown, logged or stored: without its user information (see ``redact_urls``)."""
    return redact_urls(url)


def url_userinfo(url: str) -> tuple[str, str] | None:
    """``(user, password)`` a ``scheme://user:password@host`` URL carries (percent-decoded; the
    password is ``""`` when only a user is given), or None when it carries none."""
    from urllib.parse import unquote

    match = _URL_USERINFO.match(url)
    if match is None:
        return None
    user, _, password = match.group("userinfo").partition(":")
    return unquote(user), unquote(password)
