"""``WorkbenchBase``: what the workbench's App holds, and its one error path.

The modules the App calls for one concern each (the log, the settings file, screenshots, recording)
read and write these fields; they are typed here, below those modules, so that none of them imports
the App module that imports them. ``WorkbenchApp`` (``workbench.app``) is the App itself.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from textual.app import App

from screens.text import notify_plain, safe
from services.errors import ServiceError
from services.settings import Settings

if TYPE_CHECKING:
    from services.desk import WorkspaceView
    from services.open_errors import WorkspaceOpenError
    from services.record import Recorder

__all__ = ["WorkbenchBase", "error_text", "log_error"]


def error_text(error: BaseException) -> str:
    """The toast text for an error: the service's own clear message, sanitised."""
    if isinstance(error, ServiceError):
        return safe(str(error), 600)
    return safe(f"{type(error).__name__}: {error}", 600)


def log_error(app: WorkbenchBase, message: str, error: BaseException | None) -> None:
    """Write one error, with its traceback, to the app's log (if it has one)."""
    logger = app.error_log
    if logger is None:
        return
    exc_info = (type(error), error, error.__traceback__) if error is not None else None
    logger.error(message, exc_info=exc_info)


class WorkbenchBase(App[None]):
    """The workbench App's fields and error path (see the module's docstring)."""

    def __init__(self, workspace: WorkspaceView | None = None, *, settings: Settings | None = None) -> None:
        super().__init__()
        self.settings = settings or Settings()
        """What the Workspace is opened with (when none is given)."""
        self.workspace: WorkspaceView | None = workspace
        """The open Workspace (None until opened)."""
        self.errors: list[str] = []
        """Every error shown as a toast, in order (tests and the demo read it)."""
        self.open_error: WorkspaceOpenError | None = None
        """The ``WorkspaceOpenError`` when the workspace could not open (the App then exits 2)."""

    read_only: bool = False
    """Refuse every action that changes state (``--read-only``; the header says READ-ONLY)."""
    layout: str | None = None
    """``dashboard`` or ``single`` (``--layout`` or the settings file); None: chosen by the terminal's size."""
    settings_problem: str = ""
    """Why the settings file is not in use (a header badge shows it until the file is fixed); empty: none."""
    log_path: Path | None = None
    """``--log FILE``; None: ``logs/workbench.log`` in the workspace (``workbench.log``)."""
    error_log: logging.Logger | None = None
    """The open log (every error with its traceback), or None."""
    log_file: Path | None = None
    """The file the log writes to, once open."""
    record_path: Path | None = None
    """``--record FILE``: record the session into this file from the moment the workspace opens."""
    recorder: Recorder | None = None
    """The recording in progress (``services.record.Recorder``), or None."""

    def report_error(self, error: BaseException) -> None:
        """The one error handler: a toast with the service's clear, sanitised message."""
        message = error_text(error)
        self.errors.append(message)
        log_error(self, message, error)
        notify_plain(self, message, title="Error", severity="error", timeout=8)

    def report_inline(self, error: BaseException) -> str:
        """An error a dialog shows inline while it stays open: kept and logged like any other, no toast.
        Answers the clear, sanitised message."""
        message = error_text(error)
        self.errors.append(message)
        log_error(self, message, error)
        return message
