"""``serve.json``: how a served workspace says where its server is (``url``, ``pid``, ``token``,
``honcho_key``), written 0600 by the server and read by every window and command that looks for it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..files import CorruptFileError, read_json

__all__ = ["SERVE_FILE", "SERVE_LOCK", "read_serve_info", "live_serve_info"]

SERVE_FILE = "serve.json"
"""The file a serving process writes in the workspace folder."""
SERVE_FILE_BYTES = 64 * 1024
"""The most of ``serve.json`` read (it holds a URL, a pid and two keys)."""
SERVE_LOCK = "serve.lock"
"""The lock the serving process holds on the workspace folder."""


def read_serve_info(folder: Path) -> dict[str, Any] | None:
    """``serve.json`` of a workspace, or None when there is none (or it is unreadable)."""
    try:
        info = read_json(Path(folder) / SERVE_FILE, max_bytes=SERVE_FILE_BYTES, max_depth=4)
    except (OSError, CorruptFileError):  # also a FIFO, a device or a huge file put there: no server
        return None
    if not isinstance(info, dict) or not all(isinstance(info.get(k), t) for k, t in
                                             (("url", str), ("pid", int), ("token", str))):
        return None
    return info


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def live_serve_info(folder: Path) -> dict[str, Any] | None:
    """``serve.json`` when the process it names is alive (a stale file counts as none)."""
    info = read_serve_info(folder)
    if info is None or not _pid_alive(int(info["pid"])):
        return None
    return info
