"""The cyclic garbage collector's pace while a burst of work runs: ``collecting_less``.

A window's catch-up holds every run's list entry and tens of thousands of changes in flight; at
Python's thresholds (700, 10, 10) the collector promoted them again and again and walked everything
held: the catch-up of 100,000 runs into a fresh canvas spent 17 s of its 55 in 55 full walks (0.2-0.3 s
each, the window frozen). With a young generation of 10,000 allocations it spends about 7 s in 13. Held for
the whole life of a window, that pace made a burst of the panes' own (a diff of two long runs) slower
in one launch out of two, so it is held only while a burst runs: a follower's catch-up, a history's
baseline. A served cloud keeps its own thresholds (``SERVE_GC_THRESHOLD``) for as long as it serves.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["CATCH_UP_GC_THRESHOLD", "collecting_less"]

CATCH_UP_GC_THRESHOLD = (10_000, 10, 10)
"""The thresholds while a catch-up runs (Python's defaults: 700, 10, 10)."""

_held = 0
_before: tuple[int, int, int] | None = None


@contextmanager
def collecting_less() -> Iterator[None]:
    """``CATCH_UP_GC_THRESHOLD`` while at least one holder is inside; the thresholds found before the
    first one, after the last one leaves (thresholds set higher, or a collector turned off, are left
    as they are). Cycles are still collected, within 10,000 allocations."""
    global _held, _before
    if _held == 0:
        found = gc.get_threshold()
        _before = found if 0 < found[0] < CATCH_UP_GC_THRESHOLD[0] else None
        if _before is not None:
            gc.set_threshold(*CATCH_UP_GC_THRESHOLD)
    _held += 1
    try:
        yield
    finally:
        _held -= 1
        if _held == 0 and _before is not None:
            gc.set_threshold(*_before)
            _before = None
