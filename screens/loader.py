"""``load``: the one way a window imports a module after it started (a screen pushed on a key, a dialog,
a widget made on first use, a palette provider's target).

The workbench imports what it needs for its first frame at start and the rest on first use. When the
installed files change under an open window (a reinstall, an upgrade, a branch switched in an
editable install), a module not imported yet may be gone, renamed or broken. ``load`` then says so in
a toast, writes the failure with its traceback to the workspace's log (through the App's one error
handler), and answers None: the caller leaves that one thing out and everything already loaded keeps
working. A module already imported comes from ``sys.modules`` and never fails here.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from textual.app import App

from services.errors import ServiceError

from .text import notify_plain

__all__ = ["InstalledFilesChanged", "load", "load_module"]


class InstalledFilesChanged(ServiceError):
    """A part of the workbench could not be loaded in a window that is already open."""


def load(app: App[Any], module: str, name: str, *, what: str) -> Any | None:  # Any: whatever ``name`` is; App[Any]: any App (Textual's return-type parameter is invariant)
    """``name`` from ``module`` (a dotted name), imported now; None when it cannot be loaded (said in a
    toast naming ``what``, logged with the traceback)."""
    loaded = load_module(app, module, what=what)
    if loaded is None:
        return None
    try:
        return getattr(loaded, name)
    except Exception as exc:  # noqa: BLE001 - a missing name, or a lazy attribute whose module fails to load
        _report(app, what, exc)
        return None


def load_module(app: App[Any], module: str, *, what: str) -> ModuleType | None:
    """``module`` (a dotted name) imported now; None when it cannot be loaded (said and logged as ``load``)."""
    try:
        return importlib.import_module(module)
    except Exception as exc:  # noqa: BLE001 - any failure to load (missing, renamed, broken, raising) is the same news
        _report(app, what, exc)
        return None


def _report(app: App[Any], what: str, exc: Exception) -> None:
    """Say in a toast that ``what`` cannot be loaded, and log it with both tracebacks."""
    try:
        raise InstalledFilesChanged(
            f"{what} cannot be loaded ({type(exc).__name__}: {exc}): the workbench's installed files changed "
            "while this window was open. Everything already loaded keeps working; restart the workbench "
            "to use it.") from exc
    except InstalledFilesChanged as error:
        report = getattr(app, "report_error", None)
        if callable(report):
            report(error)  # a toast and the log, with both tracebacks
        else:
            notify_plain(app, str(error), title="Error", severity="error", timeout=8)
