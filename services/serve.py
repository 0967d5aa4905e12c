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
import ipaddress
import json
import logging
import os
import secrets
import signal
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import ServiceError
from .files import FileLock, atomic_write_json

if TYPE_CHECKING:

    from .cloud import FakeCloud, RunNoticeConfig
    from .cloud.persist import CloudStore

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

SERVE_FILE = "serve.json"
SERVE_LOCK = "serve.lock"
DEFAULT_PORT = 8790
"""The port ``workbench serve`` uses when none is given."""


class ServeError(ServiceError):
    """The workspace cannot be served as asked (a remote host without consent, a port in use...)."""


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


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


def origin_url(host: str, port: int) -> str:
    """``http://HOST:PORT`` (IPv6 hosts in brackets)."""
    shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
    return f"http://{shown}:{port}"


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening-ready TCP socket bound to ``(host, port)``; port 0 picks a free port."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # accepted connections inherit it: an answer's head and body go out at once, not 40 ms apart
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        raise ServeError(f"cannot listen on {host} port {port}: {exc.strerror or exc}") from None
    sock.set_inheritable(False)
    return sock


def read_serve_info(folder: Path) -> dict[str, Any] | None:
    """``serve.json`` of a workspace, or None when there is none (or it is unreadable)."""
    try:
        info = json.loads((Path(folder) / SERVE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
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


class _QuietDrops(logging.Filter):
    """Keeps scripted dropped connections (``fail_next(op, 'unreachable')``) out of the error log."""

    def filter(self, record: logging.LogRecord) -> bool:
        from .cloud.asgi import ScriptedUnreachable

        return not (record.exc_info and isinstance(record.exc_info[1], ScriptedUnreachable))


class SocketServer:
    """An ASGI app served by uvicorn on an already bound socket, in this event loop.

    ``start()`` returns once connections are accepted; ``request_stop()`` is safe from a signal
    handler; ``stop()`` ends the serving task and closes the socket. The caller owns the process's
    signals (uvicorn installs none). ``on_shutdown`` runs as uvicorn begins its shutdown (e.g. to
    end open streams so the graceful wait does not outlast them).
    """

    def __init__(self, app: Any, sock: socket.socket, *, log_level: str = "warning", name: str = "the server",
                 graceful_s: float = 5, on_shutdown: Callable[[], None] | None = None) -> None:
        import uvicorn

        self.sock = sock
        self.name = name

        class _Server(uvicorn.Server):
            @contextlib.contextmanager
            def capture_signals(self) -> Iterator[None]:  # the caller owns the signals
                yield

            async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
                if on_shutdown is not None:
                    on_shutdown()
                await super().shutdown(sockets=sockets)

        config = uvicorn.Config(app, lifespan="off", log_level=log_level, access_log=False,
                                timeout_graceful_shutdown=graceful_s, ws="none")
        self._server = _Server(config)
        self._task: asyncio.Task[None] | None = None

    @property
    def port(self) -> int:
        return int(self.sock.getsockname()[1])

    async def start(self) -> None:
        """Serve, and return once connections are accepted."""
        self._task = asyncio.ensure_future(self._server.serve(sockets=[self.sock]))
        while not self._server.started:
            if self._task.done():
                self._task.result()
                raise ServeError(f"{self.name} stopped while starting")
            await asyncio.sleep(0.01)

    def request_stop(self) -> None:
        """Ask the server to stop (safe from a signal handler)."""
        self._server.should_exit = True

    async def wait(self) -> None:
        """Wait until the server has stopped."""
        if self._task is not None:
            await asyncio.shield(self._task)

    async def stop(self) -> None:
        """Stop serving and close the socket."""
        self.request_stop()
        try:
            if self._task is not None:
                await self._task
        finally:
            self.sock.close()


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
    ) -> None:
        from .cloud.asgi import CloudApp
        from .cloud.control import ControlApp
        from .knowledge.outbox.honcho_serve import HONCHO_PREFIX, HonchoApp

        self.cloud = cloud
        self.folder = Path(folder) if folder is not None else None
        self.store = store
        self.token = token or secrets.token_urlsafe(32)
        host, port = sock.getsockname()[:2]
        self.url = url or origin_url(host, port)
        """The URL apps use: ``http://HOST:PORT``, or the public URL it was given."""
        ack = store.flush if store is not None else None
        self.control = ControlApp(cloud, self.token, store=store)
        self.app = CloudApp(cloud, control=self.control, ack=ack)
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
        super().__init__(served or self.app, sock, log_level=log_level, on_shutdown=self.app.close_streams)
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

    from .cloud import RunNoticeConfig

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
    say: Callable[[str], None] = print,
) -> None:
    """``workbench serve``: the workspace's durable cloud on ``host:port`` until SIGTERM/SIGINT."""
    from .cloud.persist import open_durable_cloud

    check_host(host, allow_remote)
    if public_url is not None:
        check_public_url(public_url)
    folder = Path(folder)
    lock = claim_workspace(folder)
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
    from .knowledge.outbox import FakeHonchoService

    honcho = FakeHonchoService(folder / "memory" / "served-honcho.json", clock=cloud.clock)  # the cloud's one clock
    server = CloudServer(cloud, sock, folder=folder, store=store, url=url, lock=lock, honcho=honcho)
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
