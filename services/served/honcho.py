"""The Honcho-compatible fake served over real HTTP: an ASGI app, a server, and a command.

``HonchoApp(service, prefix="/honcho")`` answers every request under ``prefix`` from a
``FakeHonchoService`` (the very same route table the in-process transport reaches), so the
official SDKs and ``HonchoClient`` talk to it at ``http://HOST:PORT/honcho``. A request outside
the prefix goes to ``fallback`` when one is given (the workspace's cloud on ``workbench serve``),
else it is 404. ``go_down()`` on the service makes the app drop each connection, as a dead host.

``HonchoServer(service, host, port)`` runs it on its own port under uvicorn (``port=0`` picks a
free one); ``python -m services.served.honcho --port N --state FILE`` does the same
in a process of its own, with the state kept in the SQLite ``FILE`` (see ``FakeHonchoService``)
and, with ``--key KEY``, requiring that API key, and prints
``serving URL`` once it accepts connections. ``--die-after-batches N`` is a fault for tests: the
process kills itself with SIGKILL right after it has stored (and saved) its Nth message batch and
before it answers, as a server that crashes between committing and replying.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from pathlib import Path

import httpx

from .asgi import ASGIApp, Receive, Scope, ScriptedUnreachable, Send, lifespan, read_body
from ..errors import ServiceError
from .listener import SocketServer, bind_socket, origin_url
from ..honcho import FakeHonchoService

__all__ = ["HONCHO_PREFIX", "HonchoApp", "HonchoServer", "main", "served_honcho_key"]

HONCHO_PREFIX = "/honcho"
"""Where the fake Honcho lives on the origin ``workbench serve`` answers on."""

def served_honcho_key(folder: Path) -> str | None:
    """The key a workspace's served ``/honcho`` requires (``honcho_key`` in its ``serve.json``)."""
    from .serve_file import read_serve_info

    info = read_serve_info(folder)
    key = info.get("honcho_key") if info else None
    return key if isinstance(key, str) else None


_HOP_HEADERS = frozenset({b"transfer-encoding", b"connection", b"keep-alive", b"content-length"})


class HonchoApp:
    """An ASGI app answering Honcho's routes under ``prefix`` from one ``FakeHonchoService``."""

    def __init__(self, service: FakeHonchoService, *, prefix: str = "", fallback: ASGIApp | None = None,
                 die_after_batches: int | None = None) -> None:
        self.service = service
        self.prefix = prefix.rstrip("/")
        self.fallback = fallback
        self.die_after_batches = die_after_batches
        """Kill this process (SIGKILL) after storing this many message batches, before answering."""
        self.batches = 0

    def owns(self, path: str) -> bool:
        """True when ``path`` is under this app's prefix, or is a Honcho route at the root (``/v3/...``).

        The root alias is for the TypeScript SDK (``@honcho-ai/sdk``), which builds each URL with
        ``new URL(path, baseURL)`` and so drops a base URL's path: given ``http://HOST:PORT/honcho``
        it calls ``http://HOST:PORT/v3/...``. The cloud has no ``/v3`` routes."""
        if not self.prefix or path == self.prefix or path.startswith(self.prefix + "/"):
            return True
        return path == "/v3" or path.startswith("/v3/")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            if self.fallback is not None:
                await self.fallback(scope, receive, send)
            else:
                await lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        path = scope.get("path", "/")
        if not self.owns(path):
            if self.fallback is not None:
                await self.fallback(scope, receive, send)
            else:
                await _answer(send, 404, b'{"detail":"Not Found"}')
            return
        body = await read_body(receive)
        query = scope.get("query_string", b"").decode("latin-1")
        inner = path[len(self.prefix):] if self.prefix and path.startswith(self.prefix) else path
        target = "http://honcho.fake" + (inner or "/") + ("?" + query if query else "")
        request = httpx.Request(scope["method"], target, content=body,
                                headers=[(k, v) for k, v in scope.get("headers", []) if k.lower() != b"host"])
        try:
            response = await asyncio.to_thread(self.service.handle, request)
        except httpx.TransportError:
            await send({"type": "http.response.start", "status": 502, "headers": [(b"content-length", b"1")]})
            raise ScriptedUnreachable("scripted: the memory service is unreachable") from None
        if response.status_code == 201 and scope["method"] == "POST" and path.endswith("/messages"):
            self.batches += 1
            if self.die_after_batches is not None and self.batches >= self.die_after_batches:
                os.kill(os.getpid(), signal.SIGKILL)
        headers = [(k, v) for k, v in response.headers.raw if k.lower() not in _HOP_HEADERS]
        await _answer(send, response.status_code, response.content, headers)


async def _answer(send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    head = [h for h in (headers or [(b"content-type", b"application/json")])]
    head.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": body, "more_body": False})


class HonchoServer(SocketServer):
    """A ``FakeHonchoService`` served by uvicorn on its own socket."""

    def __init__(self, service: FakeHonchoService, host: str = "127.0.0.1", port: int = 0, *,
                 prefix: str = "", log_level: str = "warning", die_after_batches: int | None = None) -> None:
        self.service = service
        sock = bind_socket(host, port)
        self.prefix = prefix.rstrip("/")
        self.url = origin_url(*sock.getsockname()[:2]) + self.prefix
        """The base URL a Honcho client is given."""
        self.app = HonchoApp(service, prefix=self.prefix, die_after_batches=die_after_batches)
        super().__init__(self.app, sock, log_level=log_level, name="the memory server", graceful_s=2)


async def _serve(host: str, port: int, state: Path | None, prefix: str, die_after: int | None,
                 key: str | None) -> None:
    server = HonchoServer(FakeHonchoService(state, api_key=key), host, port, prefix=prefix,
                          die_after_batches=die_after)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, server.request_stop)
    await server.start()
    print(f"serving {server.url}", flush=True)
    try:
        await server.wait()
    finally:
        await server.stop()


def main(argv: list[str] | None = None) -> int:
    """Serve the fake Honcho on its own port until SIGTERM or SIGINT."""
    parser = argparse.ArgumentParser(prog="python -m services.served.honcho",
                                     description="Serve the Honcho-compatible fake over HTTP.")
    parser.add_argument("--host", default="127.0.0.1", metavar="HOST")
    parser.add_argument("--port", type=int, default=0, metavar="PORT")
    parser.add_argument("--state", type=Path, default=None, metavar="FILE",
                        help="keep the state in this SQLite file (kept across restarts)")
    parser.add_argument("--key", default=os.environ.get("HONCHO_FAKE_KEY") or None, metavar="KEY",
                        help="require this API key (Authorization: Bearer KEY); default $HONCHO_FAKE_KEY, else none")
    parser.add_argument("--prefix", default="", metavar="PATH")
    parser.add_argument("--die-after-batches", type=int, default=None, metavar="N", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    try:
        asyncio.run(_serve(args.host, args.port, args.state, args.prefix, args.die_after_batches, args.key))
    except ServiceError as exc:  # a port in use, an unreadable state file
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
