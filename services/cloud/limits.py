"""What a served cloud accepts at most: one typed object, documented in the README's "Security".

``Limits()`` holds the defaults; ``workbench serve`` takes each as an option (``--max-body`` ...),
and a test passes its own. The guard (``guard.py``) applies the request-level ones before any route
runs; the runtime and the control API apply the per-field ones where the field is read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["Limits", "DEFAULT_LIMITS", "decimal_int"]


@dataclass(frozen=True, slots=True)
class Limits:
    """The caps of one served cloud (sizes in bytes or characters, times in seconds)."""

    body_bytes: int = 1024 * 1024
    """A request body above this is refused with 413 before it is read further (1 MiB)."""
    json_depth: int = 32
    """Objects and lists nested deeper than this are refused with 400."""
    prompt_chars: int = 256 * 1024
    """``run.start``'s ``prompt`` (and any other text field it carries)."""
    message_chars: int = 256 * 1024
    """``run.message``'s ``text``, a ``reply``'s text, a run's ``name``."""
    event_bytes: int = 256 * 1024
    """One event appended through the control API (``emit``), as JSON."""
    calls: int = 10_000
    """How many calls ``cloud.calls``, ``cloud.directory_calls``, ``cloud.refreshes`` and each person's
    ``reads`` keep (the oldest go first)."""
    idempotency_keys: int = 10_000
    """How many ``Idempotency-Key`` answers the cloud keeps (the oldest go first: a retry after that
    many later keyed requests is answered as a new request)."""
    wait_s: float = 60.0
    """The longest ``grant.get`` long-poll (``?wait=`` above it holds this long)."""
    streams_per_token: int = 16
    """Event streams (``run.events``, the change feed) one bearer token may hold open at once."""

    def __post_init__(self) -> None:
        for name in ("body_bytes", "json_depth", "prompt_chars", "message_chars", "event_bytes", "calls",
                     "idempotency_keys", "streams_per_token"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive whole number, not {value!r}")
        if not isinstance(self.wait_s, (int, float)) or not math.isfinite(self.wait_s) or self.wait_s < 0:
            raise ValueError(f"wait_s must be a finite number of seconds, not {self.wait_s!r}")


DEFAULT_LIMITS = Limits()


def decimal_int(text: str) -> int | None:
    """``text`` as a whole number when it is ASCII digits (an optional leading ``-``), else None.

    ``str.isdigit`` accepts ``"²"`` and ``int`` then raises; this accepts exactly what ``int`` reads
    the same in every language: ``[0-9]+``.
    """
    body = text[1:] if text.startswith("-") else text
    if not body or len(body) > 18 or not body.isascii() or not body.isdigit():
        return None
    return int(text)
