"""Uvicorn on a socket this process binds itself: what every server of the workbench runs on.

``bind_socket`` binds first (``port=0`` picks a free one), so a server's URL is known before it
answers anything; ``SocketServer`` then serves an ASGI app on that socket with uvicorn, in this
event loop (the cloud's server and the Honcho fake's alike).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import socket
from collections.abc import Callable, Iterator
from typing import Any

from ..errors import ServiceError

__all__ = ["ServeError", "SocketServer", "bind_socket", "origin_url", "is_loopback"]


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


class SocketServer:
    """An ASGI app served by uvicorn on an already bound socket, in this event loop.

    ``start()`` returns once connections are accepted; ``request_stop()`` is safe from a signal
    handler; ``stop()`` ends the serving task and closes the socket. The caller owns the process's
    signals (uvicorn installs none). ``on_shutdown`` runs as uvicorn begins its shutdown (e.g. to
    end open streams so the graceful wait does not outlast them).
    """

    def __init__(self, app: Any, sock: socket.socket, *, log_level: str = "warning", name: str = "the server",
                 graceful_s: int = 5, on_shutdown: Callable[[], None] | None = None) -> None:
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
