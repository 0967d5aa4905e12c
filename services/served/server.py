"""Serving a workspace's cloud on a port: uvicorn over ``CloudApp``, announced in ``serve.json``.

``CloudServer(cloud, host=..., port=...)`` binds the socket itself (``port=0`` picks a free one),
so the URL is known before the cloud answers anything: the cloud's ``issuer`` and ``runtime_url``
are that one origin, ``http://HOST:PORT``. ``await server.start()`` returns once uvicorn
accepts connections; it then writes ``DIR/serve.json`` (``url``, ``pid``, ``token``: the control
API's bearer token) atomically with mode 0600. ``await server.stop()`` ends every open stream,
stops uvicorn and removes ``serve.json`` (only when it is still this process's).

``serve_workspace(...)`` is ``workbench serve``: the workspace's cloud, kept on disk, served until
SIGTERM or SIGINT, with the Honcho-compatible memory fake under ``/honcho`` on the same origin
(its state in ``memory/served-honcho.db``, its key in ``serve.json`` as ``honcho_key``). A host other than loopback is refused unless ``allow_remote`` is set. With a
``notice_url`` the cloud POSTs run notices there (``http_run_notices``).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import secrets
import signal
import socket
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..files import FileLock, atomic_write_json
from .listener import ServeError, SocketServer, bind_socket, is_loopback, origin_url
from .serve_file import SERVE_FILE, SERVE_LOCK, live_serve_info, read_serve_info

if TYPE_CHECKING:

    from ..cloud import FakeCloud, RunNoticeConfig
    from ..cloud.limits import Limits
    from .persist import CloudStore

__all__ = [
    "ServeError",
    "CloudServer",
    "SERVE_FILE",
    "DEFAULT_PORT",
    "is_loopback",
    "bind_socket",
    "origin_url",
    "read_serve_info",
    "live_serve_info",
    "who_can_reach",
    "http_run_notices",
    "claim_workspace",
    "check_not_served",
    "SERVE_LOCK",
]

DEFAULT_PORT = 8790
"""The port ``workbench serve`` uses when none is given."""


def who_can_reach(host: str, port: int) -> str:
    """A plain sentence saying who can reach a server bound to ``host``."""
    if is_loopback(host):
        return f"only programs on this machine can reach port {port}"
    if host in ("0.0.0.0", "::", "[::]", ""):
        return (
            f"anyone who can reach this machine on port {port}, on any of its networks, can use this cloud "
            "(its people, runs and tokens); the control API still needs the token in serve.json"
        )
    return (
        f"anyone who can reach {host} port {port} can use this cloud (its people, runs and tokens); "
        "the control API still needs the token in serve.json"
    )


class _QuietDrops(logging.Filter):
    """Keeps scripted dropped connections (``fail_next(op, 'unreachable')``) out of the error log."""

    def filter(self, record: logging.LogRecord) -> bool:
        from .asgi import ScriptedUnreachable

        return not (record.exc_info and isinstance(record.exc_info[1], ScriptedUnreachable))


def _quiet_scripted_drops() -> None:
    error_log = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, _QuietDrops) for f in error_log.filters):
        error_log.addFilter(_QuietDrops())


class CloudServer(SocketServer):
    """One cloud served on a bound socket, announced in a workspace's ``serve.json``."""

    def __init__(
        self,
        cloud: "FakeCloud",
        sock: socket.socket,
        *,
        folder: Path | None = None,
        store: "CloudStore | None" = None,
        token: str | None = None,
        log_level: str = "warning",
        url: str | None = None,
        lock: FileLock | None = None,
        honcho: Any = None,
        limits: "Limits | None" = None,
    ) -> None:
        from ..openapi import openapi_document
        from .asgi import CloudApp
        from .control import ControlApp
        from .guard import GuardApp
        from .honcho import HONCHO_PREFIX, HonchoApp

        self.cloud = cloud
        self.folder = Path(folder) if folder is not None else None
        self.store = store
        self.token = token or secrets.token_urlsafe(32)
        host, port = sock.getsockname()[:2]
        self.url = url or origin_url(host, port)
        """The URL apps use: ``http://HOST:PORT``, or the public URL it was given."""
        if limits is not None:
            cloud.limits = limits
        ack = store.flush if store is not None else None
        broken = (lambda: store.broken) if store is not None else None
        self.control = ControlApp(cloud, self.token, store=store)
        self.app = CloudApp(cloud, control=self.control, ack=ack, broken=broken)
        self.control.app = self.app
        self.honcho = honcho
        """The Honcho-compatible fake served under ``/honcho``, or None."""
        self.honcho_url: str | None = None
        """Where the Honcho-compatible memory fake answers (``URL/honcho``), when one is served."""
        self.honcho_key: str | None = None
        """The key ``/honcho`` requires (``Authorization: Bearer``), written to ``serve.json``."""
        served = None
        if honcho is not None:
            honcho.api_key = self.honcho_key = honcho.api_key or secrets.token_urlsafe(32)
            served = HonchoApp(honcho, prefix=HONCHO_PREFIX, fallback=self.app)
            self.honcho_url = self.url + HONCHO_PREFIX
        _quiet_scripted_drops()
        bound = origin_url(host, port)
        self.guard = GuardApp(served or self.app, origin=self.url, hosts=(str(host),), limits=cloud.limits,
                              passthrough_prefix=HONCHO_PREFIX if honcho is not None else None,
                              passes=served.owns if isinstance(served, HonchoApp) else None,
                              openapi=lambda: openapi_document(self.url))
        """Host, Origin, size, depth and text checks around everything served (``cloud/guard.py``)."""
        self.guard.allow_origin(bound)
        super().__init__(self.guard, sock, log_level=log_level, on_shutdown=self.app.close_streams)
        self._lock = lock
        """The workspace's ``serve.lock`` (``claim_workspace``), given back by ``stop``."""

    async def start(self) -> None:
        """Serve, wait until connections are accepted, then write ``serve.json``."""
        await super().start()
        if self.folder is not None:
            info: dict[str, Any] = {"url": self.url, "pid": os.getpid(), "token": self.token}
            if self.honcho_key is not None:
                info["honcho_key"] = self.honcho_key
            atomic_write_json(self.folder / SERVE_FILE, info, mode=0o600)

    async def stop(self) -> None:
        """Stop serving, commit the state, and remove ``serve.json`` when it is ours."""
        try:
            await super().stop()
        finally:
            try:
                if self.store is not None:
                    await self.store.flush()
                self._remove_serve_file()
            finally:
                if self._lock is not None:
                    self._lock.release()
                    self._lock = None

    def _remove_serve_file(self) -> None:
        if self.folder is None:
            return
        info = read_serve_info(self.folder)
        if info is not None and info["pid"] == os.getpid() and info["token"] == self.token:
            with contextlib.suppress(FileNotFoundError):
                (self.folder / SERVE_FILE).unlink()


def http_run_notices(url: str) -> "RunNoticeConfig":
    """Run notices POSTed to ``url`` over HTTP (the runtime's own timing: retries after 0.5 s, 2 s)."""
    import httpx

    from ..cloud import RunNoticeConfig

    client = httpx.AsyncClient(timeout=httpx.Timeout(10.0))

    async def deliver(request: httpx.Request) -> httpx.Response:
        response = await client.send(request)
        await response.aread()
        return response

    return RunNoticeConfig(url=url, deliver=deliver, retry_waits_ms=(500, 2000))


def check_public_url(url: str) -> None:
    """Refuse a public URL that is not ``http(s)://host[:port]`` (the cloud answers at its root)."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.path.strip("/") or parts.query:
        raise ServeError(f"--public-url must look like http://host:port, not {url!r}")


def check_host(host: str, allow_remote: bool) -> None:
    """Refuse a host other than loopback unless the caller allowed remote access."""
    if not is_loopback(host) and not allow_remote:
        raise ServeError(
            f"{host} is not a loopback address: anyone who can reach it could use this cloud. "
            "Pass --allow-remote to serve it anyway."
        )


def claim_workspace(folder: Path) -> FileLock:
    """Take the workspace's ``serve.lock`` (held while it is served, or while its stored cloud is
    used without a server); ``ServeError`` when another server holds it. A killed server's lock is
    free again, so its stale ``serve.json`` is simply replaced."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    lock = FileLock(folder / SERVE_LOCK)
    if not lock.try_acquire():
        info = live_serve_info(folder)
        where = f" at {info['url']} by process {info['pid']}" if info else " (it is starting or stopping)"
        raise ServeError(f"{folder} is already served{where}")
    return lock


def _claim(folder: Path) -> FileLock:
    """``claim_workspace``, with a folder that cannot be created or written said in one sentence."""
    try:
        return claim_workspace(folder)
    except OSError as exc:
        raise ServeError(f"cannot use the workspace {folder}: {exc.strerror or exc}") from None


def check_not_served(folder: Path) -> None:
    """Refuse when another server holds the workspace (the lock is taken and given back)."""
    claim_workspace(folder).release()


async def serve_workspace(
    folder: Path,
    *,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    allow_remote: bool = False,
    import_file: Path | None = None,
    notice_url: str | None = None,
    public_url: str | None = None,
    limits: "Limits | None" = None,
    say: Callable[[str], None] = print,
) -> None:
    """``workbench serve``: the workspace's durable cloud on ``host:port`` until SIGTERM/SIGINT.

    Every file it writes is 0600 and every folder it creates 0700 (the process's umask is 077
    while it serves). A file-size limit or a full disk makes writes fail with an error the server
    answers in words (507), not a signal that kills it (SIGXFSZ is ignored)."""
    previous_umask = os.umask(0o077)
    if hasattr(signal, "SIGXFSZ"):
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    previous_gc = gc.get_threshold()
    gc.set_threshold(*SERVE_GC_THRESHOLD)
    try:
        await _serve_workspace(folder, host=host, port=port, allow_remote=allow_remote, import_file=import_file,
                               notice_url=notice_url, public_url=public_url, limits=limits, say=say)
    finally:
        gc.set_threshold(*previous_gc)
        os.umask(previous_umask)


SERVE_GC_THRESHOLD = (50_000, 20, 100)
"""The cyclic collector's thresholds while a workspace is served (Python's defaults: 700, 10, 10).
A served cloud holds every run's events in memory and appends thousands a second, each a few new
objects: at the defaults the collector ran every few hundred events and, every hundred of those
runs, walked the whole state, about a fifth of the server's time under a stream of events. Nothing
the cloud keeps needs the collector to be freed; the cycles a server does make (a finished task, a
caught exception) are still collected, within 50,000 allocations."""


async def _serve_workspace(
    folder: Path,
    *,
    host: str,
    port: int,
    allow_remote: bool,
    import_file: Path | None,
    notice_url: str | None,
    public_url: str | None,
    limits: "Limits | None",
    say: Callable[[str], None],
) -> None:
    from .persist import open_durable_cloud

    check_host(host, allow_remote)
    if public_url is not None:
        check_public_url(public_url)
    folder = Path(folder)
    lock = _claim(folder)
    try:
        sock = bind_socket(host, port)
    except BaseException:
        lock.release()
        raise
    url = public_url.rstrip("/") if public_url else origin_url(*sock.getsockname()[:2])
    try:
        options: dict[str, Any] = {"run_notice": http_run_notices(notice_url)} if notice_url else {}
        cloud, store = await open_durable_cloud(folder, url, import_file=import_file, **options)
    except BaseException:
        sock.close()
        lock.release()
        raise
    from ..honcho import FakeHonchoService

    honcho = FakeHonchoService(folder / "memory" / "served-honcho.json", clock=cloud.clock)  # the cloud's one clock
    server = CloudServer(cloud, sock, folder=folder, store=store, url=url, lock=lock, honcho=honcho, limits=limits)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, server.request_stop)
    try:
        await server.start()
        if not is_loopback(host):
            say(f"warning: {who_can_reach(host, server.port)}")
        say(f"serving {server.url}")
        say(f"memory (Honcho API) at {server.honcho_url}")
        await server.wait()
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
        try:
            await server.stop()
        finally:
            await store.close()
