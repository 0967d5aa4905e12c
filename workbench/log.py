"""The workbench's log: every error with its traceback, in a rotating file.

By default the log is ``logs/workbench.log`` in the workspace folder (1 MiB, three old files kept);
``--log FILE`` names another file. Toasts keep the clear one-liner; the log keeps the traceback and
the time. A ``--log`` file that cannot be opened is said once in a toast and the workbench runs
without it (when the workspace folder itself is unusable, its open-failure screen says so instead).
"""

from __future__ import annotations

import logging
from logging.handlers import RotatingFileHandler
from pathlib import Path
from typing import TYPE_CHECKING

from .base import log_error

if TYPE_CHECKING:
    from .base import WorkbenchBase

__all__ = ["BACKUPS", "MAX_BYTES", "default_log_path", "log_error", "start_log", "stop_log"]

MAX_BYTES = 1_048_576
"""A log file's size before it rotates."""
BACKUPS = 3
"""Rotated files kept (``workbench.log.1`` .. ``.3``)."""


def default_log_path(workspace: Path) -> Path:
    """``logs/workbench.log`` in the workspace folder."""
    return Path(workspace) / "logs" / "workbench.log"


def start_log(app: WorkbenchBase, path: Path | None) -> logging.Logger | None:
    """Open the log for ``app`` (its own logger, so two apps in one process keep two files)."""
    from screens.text import notify_plain

    named = path is not None
    path = path or default_log_path(app.settings.path)
    logger = logging.getLogger(f"workbench.app.{id(app)}")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handler = RotatingFileHandler(path, maxBytes=MAX_BYTES, backupCount=BACKUPS, encoding="utf-8")
    except OSError as error:
        if not named:  # the workspace folder itself is unusable: its own screen says so
            return None
        notify_plain(app, f"no log: {path} cannot be written ({error.strerror or error})", title="Log",
                     severity="warning", timeout=8)
        return None
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    logger.addHandler(handler)
    logger.info("workbench started (workspace %s)", app.settings.path)
    app.log_file = path
    return logger


def stop_log(app: WorkbenchBase) -> None:
    """Close the app's log file."""
    logger = getattr(app, "error_log", None)
    if logger is None:
        return
    for handler in list(logger.handlers):
        handler.close()
        logger.removeHandler(handler)
    app.error_log = None
