"""Finding a workspace's server: one cloud per workspace, every window on it.

``find_server(folder)`` reads the workspace's ``serve.json`` and answers the live server it names,
or None. A file whose process is dead, or whose server does not answer the control API within a
couple of seconds while the workspace's ``serve.lock`` is free, is stale: it is removed (a server
started later writes a new one). A server that holds the lock but does not answer is refused with
``AttachError`` in plain words (two clouds on one folder would drift apart).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

from ..errors import ServiceError

__all__ = ["AttachError", "ServerInfo", "find_server", "PROBE_TIMEOUT_S"]

PROBE_TIMEOUT_S = 2.0
"""How long a server named in ``serve.json`` has to answer before it counts as gone."""
BUSY_WAIT_S = 10.0
"""How long a window waits for a live server that takes its connection but is slow to answer (busy
writing a long run, on a loaded machine) before it says the server does not answer."""


class AttachError(ServiceError):
    """The workspace's server holds it but cannot be reached, so no window can attach or start another."""


@dataclass(frozen=True)
class ServerInfo:
    """A live server of a workspace, as ``serve.json`` names it."""

    url: str
    pid: int
    token: str


async def find_server(folder: Path) -> ServerInfo | None:
    """The live, answering server of ``folder``; a stale ``serve.json`` is removed and None answered."""
    import httpx

    from .client import ControlError, RemoteCloud
    from ..files import FileLock
    from ..served.server import SERVE_FILE, SERVE_LOCK, live_serve_info, read_serve_info

    folder = Path(folder)
    info = read_serve_info(folder)
    if info is None:
        return None
    if live_serve_info(folder) is not None:
        # a connection taken but not answered in time is a busy server: asked once more, waiting longer,
        # while its process lives (a refused connection or an error answer is not waited for)
        for timeout in (PROBE_TIMEOUT_S, BUSY_WAIT_S):
            remote = RemoteCloud(info["url"], info["token"], timeout=timeout)
            try:
                await remote.call("GET", "/people")
                return ServerInfo(info["url"], int(info["pid"]), info["token"])
            except ControlError as exc:
                if not isinstance(exc.__cause__, httpx.TimeoutException) or live_serve_info(folder) is None:
                    break
            finally:
                await remote.aclose()
    lock = FileLock(folder / SERVE_LOCK)
    if not lock.try_acquire():
        raise AttachError(
            f"{folder} is served by process {info['pid']} at {info['url']}, which does not answer; "
            f"stop that process (or wait until it answers) and open the workspace again"
        )
    try:
        if read_serve_info(folder) == info:  # still the stale one: nobody replaced it meanwhile
            with contextlib.suppress(FileNotFoundError):
                (folder / SERVE_FILE).unlink()
    finally:
        lock.release()
    return None
