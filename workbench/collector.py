"""When the cyclic garbage collector runs in a window (import-light: the command holds it before
importing the App).

Starting a window allocates hundreds of thousands of objects that all stay alive: the modules,
classes and tables of Textual and of the services, then the Workspace. The collector's passes over
them took about a fifth of that CPU time and freed next to nothing, so it is held off from the
command's start until the Workspace is open (``hold_collector``, ``release_collector``), then runs
less often (``collect_less_often``): a live run stream allocates a few objects an event.
"""

from __future__ import annotations

import gc

__all__ = ["GC_YOUNG", "collect_less_often", "hold_collector", "release_collector"]

GC_YOUNG = 50_000
"""Allocations between the garbage collector's young-generation passes once a window has a workspace.
CPython's default (700) passes every few events of a live run stream (each event is a few objects):
at 100k events/s those passes, and the older ones they trigger, took half the loop's time."""

_held = False
"""Whether ``hold_collector`` turned the collector off (and ``release_collector`` is to turn it on)."""


def hold_collector() -> None:
    """Turn the collector off until ``release_collector``; one someone else turned off is left so."""
    global _held
    if gc.isenabled():
        gc.disable()
        _held = True


def release_collector() -> None:
    """Turn the collector back on if ``hold_collector`` turned it off, at ``collect_less_often``'s
    thresholds; the cycles made meanwhile are freed by its next passes."""
    global _held
    if _held:
        _held = False
        gc.enable()
    collect_less_often()


def collect_less_often() -> None:
    """Raise the young generation's threshold to ``GC_YOUNG`` (and the middle one's to 20), unless the
    process already collects less often or not at all; a pass still frees every cycle, only later."""
    young, middle, old = gc.get_threshold()
    if 0 < young < GC_YOUNG:
        gc.set_threshold(GC_YOUNG, max(middle, 20), old)
