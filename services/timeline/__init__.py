"""The history a time cursor reads: every pane's items as of any change the window saw.

``Timeline`` (``timeline.py``) follows a workspace's change feed and records, after each burst, the
items it touched (``frames.py``: a run, a grant, a canvas object, an edge, an inbox entry, a judgment,
the memory counts) into a ``TimeStore`` (``store.py``), one SQLite file of moments and versions.
``TimeCursor`` (``cursor.py``) is a position in it: step, jump, and read each pane as of there.
"""

from __future__ import annotations

from .cursor import Panes, TimeCursor, parse_when
from .frames import INBOX_KEPT, KINDS, Frame, read_frame
from .store import HistoryError, Moment, TimeStore, Version
from .timeline import OPENED, Timeline

__all__ = ["Timeline", "TimeStore", "TimeCursor", "Panes", "Moment", "Version", "HistoryError", "Frame", "KINDS",
           "INBOX_KEPT", "OPENED", "read_frame", "parse_when", "frame_at"]


def frame_at(store: TimeStore, moment: int | None = None) -> Frame:
    """Every kind's items as of ``moment`` (None: the newest), as ``read_frame`` reads them live."""
    return {kind: store.every(kind, moment) for kind in KINDS}
