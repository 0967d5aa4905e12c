"""One time type for every read model: ``float`` seconds since the epoch (``Clock.time()``).

Times stored otherwise are converted once, when a read model is built, by these helpers: wire and
OKF times (ISO-8601 strings) by ``parse_time`` (or ``time_or_none`` where a time may be absent), the
outbox's integer milliseconds by ``ms_time``. A value that is no usable time (garbage, a bool, out
of range) reads as absent, never as an error, so one bad stamp never stops a pane from drawing.
The panes only format these floats (``screens/text.py``); they never convert a time themselves.
"""

from __future__ import annotations

import math
from datetime import datetime, timezone

__all__ = ["LATEST_TIME", "parse_time", "time_or_none", "ms_time"]


LATEST_TIME = 253_402_300_799.0
"""9999-12-31T23:59:59Z: the latest time a read model carries (later ones cannot be formatted)."""


def _usable(seconds: float) -> float | None:
    return seconds if math.isfinite(seconds) and 0.0 <= seconds <= LATEST_TIME else None


def time_or_none(value: object) -> float | None:
    """A wire time (ISO-8601 string, or seconds) as seconds since the epoch; None when absent or unusable.

    An ISO string without a zone is taken as UTC (the stores write UTC only)."""
    if type(value) is float:  # the common case, first (NaN fails both comparisons, infinities one)
        return value if 0.0 <= value <= LATEST_TIME else None
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        try:
            return _usable(float(value))
        except OverflowError:
            return None
    if isinstance(value, str) and value:
        try:
            moment = datetime.fromisoformat(value.strip())
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=timezone.utc)
            return _usable(moment.timestamp())
        except (ValueError, OverflowError, OSError):
            return None
    return None


def parse_time(value: object) -> float:
    """A wire time (ISO-8601 string, or seconds) as seconds since the epoch; 0.0 when absent or unusable."""
    seconds = time_or_none(value)
    return 0.0 if seconds is None else seconds


def ms_time(value: object) -> float | None:
    """A stored time in milliseconds since the epoch (the outbox's) as seconds; None when absent or unusable."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        return _usable(value / 1000)
    except OverflowError:
        return None
