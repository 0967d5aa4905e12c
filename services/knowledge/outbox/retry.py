"""How long a sweep waits before trying a transient memory-service failure again.

A failure is transient when the same call may succeed later: the service was unreachable or
timed out, or answered 408, 429 or 5xx (``HonchoError.transient``). The wait is the answer's
``Retry-After`` when it sent one (delta seconds or an HTTP date, capped at
``retry_after_cap_s``), else capped exponential backoff: ``retry_base_s`` doubled per attempt,
at most ``retry_max_delay_s``. Times come from the injected clock, so tests wait no real time.
"""

from __future__ import annotations

import math
from email.utils import parsedate_to_datetime

from .models import HonchoError, OutboxSettings

__all__ = ["parse_retry_after", "retry_delay", "RetryBudget"]


def parse_retry_after(value: str | None, now: float) -> float | None:
    """``Retry-After`` as seconds from ``now``: delta seconds or an HTTP date; None when unusable."""
    if value is None:
        return None
    text = value.strip()
    if not text:
        return None
    try:
        seconds = float(text)
    except ValueError:
        try:
            moment = parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        if moment is None:
            return None
        seconds = moment.timestamp() - now
    if not math.isfinite(seconds):
        return None
    return max(0.0, seconds)


def retry_delay(error: HonchoError, attempt: int, settings: OutboxSettings, now: float) -> float:
    """The wait before try ``attempt + 1`` after ``error`` on try ``attempt`` (1-based)."""
    asked = parse_retry_after(error.retry_after, now)
    if asked is not None:
        return min(asked, settings.retry_after_cap_s)
    return min(settings.retry_base_s * 2 ** (attempt - 1), settings.retry_max_delay_s)


class RetryBudget:
    """The waiting one sweep may still do; once spent, failures wait for the next sweep."""

    def __init__(self, seconds: float) -> None:
        self.left = seconds

    def take(self, seconds: float) -> bool:
        """Spend ``seconds`` if that much is left; otherwise False, and no more waiting this sweep."""
        if seconds > self.left:
            self.left = 0.0
            return False
        self.left -= seconds
        return True

    def spend_all(self) -> None:
        """Wait no more this sweep (the service stayed unavailable through every try)."""
        self.left = 0.0
