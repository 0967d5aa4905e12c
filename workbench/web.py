"""``workbench web``: the workbench in a browser tab, served with ``textual-serve``.

Each tab's websocket starts one ``workbench --workspace DIR`` process (``textual-serve`` runs it
with Textual's web driver and relays its screen to xterm.js in the page). Every such window
attaches to the workspace's served cloud like a second terminal window does: when no server runs
for the folder, ``workbench web`` starts ``workbench serve --port 0`` for it first and stops it when
it ends. ``--demo`` runs ``workbench demo`` in each tab instead (its own fresh workspace).

Why ``textual_serve.server.Server`` is subclassed rather than used as it is: its page, assets and
websocket answer anyone who can reach the port, a page of any origin included (a websocket is not
bound by the same-origin policy), and each websocket is a process. ``WebServer`` keeps its
process relay (``AppService``) and its ``handle_websocket`` and replaces the rest:

- one aiohttp middleware in front of every route makes the served cloud's Host and Origin checks
  (``services.served.guard.sender_refusal``, the same function ``GuardApp`` uses), then asks for
  the token: ``?token=`` on the page and its assets, the path ``/ws/TOKEN`` for the websocket
  (xterm.js appends its own ``?width=..`` query to the websocket URL). A request without it gets a
  plain page saying how to get in; nothing else (no ``/download`` route: the workbench delivers no
  files to the browser; no directory listings);
- its own page (``_PAGE``) with every asset URL carrying the token and no font fetched from
  outside the machine; answers are never cached and send no ``Referer`` (the token stays in the
  address bar) and may not be framed;
- at most ``tabs`` websockets (processes) at once: the page over the limit is a plain page, and a
  websocket over it gets a line in the terminal and is closed;
- it binds its socket itself (``--port 0`` picks a free one, so the printed URL is the real one)
  and runs in the caller's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import html
import secrets
import shlex
import signal
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

from aiohttp import WSCloseCode, web
from textual_serve.server import Server

from services.served.guard import sender_refusal
from services.served.listener import ServeError, bind_socket, is_loopback, origin_url

if TYPE_CHECKING:
    import socket

__all__ = ["WebServer", "web_command", "DEFAULT_WEB_PORT", "DEFAULT_TABS", "tab_command", "WebError"]

DEFAULT_WEB_PORT = 8791
"""The port ``workbench web`` uses when none is given (``workbench serve`` uses 8790)."""
DEFAULT_TABS = 5
"""Tabs (window processes) at once, unless ``--tabs`` says otherwise."""
SERVE_START_S = 60.0
"""The longest ``workbench serve`` may take to say it serves before ``workbench web`` gives up."""
SERVE_STOP_S = 15.0
"""How long the server this command started has to stop after SIGTERM before it is killed."""
_TOKEN_PARAM = "token"


class WebError(ServeError):
    """``workbench web`` cannot start as asked (the workspace cannot be served, a port in use...)."""


def tab_command(folder: Path | None, *, demo: bool = False, config: Path | None = None) -> str:
    """The shell command each tab runs: a window on ``folder`` (or the demo), this Python, this project."""
    words = [sys.executable, "-m", "workbench"]
    if config is not None:
        words += ["--config", str(config)]
    if demo:
        words.append("demo")
    else:
        assert folder is not None
        words += ["--workspace", str(folder)]
    return "exec " + shlex.join(words)


class WebServer(Server):
    """``textual-serve``'s server behind the token, the Host and Origin checks and the tab limit."""

    def __init__(self, command: str, sock: socket.socket, *, token: str, tabs: int = DEFAULT_TABS,
                 title: str = "workbench", hosts: tuple[str, ...] = ()) -> None:
        host, port = sock.getsockname()[:2]
        super().__init__(command, host=host, port=port, title=title)
        self.sock = sock
        self.token = token
        self.tabs = tabs
        self.url = origin_url(host, port)
        self.hosts = frozenset(h.lower() for h in (host, *hosts) if h)
        self.origins = frozenset({self.url.lower()})
        self.open_tabs = 0
        """Websockets (tab processes) open now."""
        self.sockets: set[web.WebSocketResponse] = set()
        self._runner: web.AppRunner | None = None

    # -- the aiohttp application ------------------------------------------------------------------

    async def _make_app(self) -> web.Application:
        app = web.Application(middlewares=[self._guard])
        app.add_routes([
            web.get("/", self.handle_index, name="index"),
            web.get("/ws/{token}", self.handle_websocket, name="websocket"),
            web.static("/static", self.statics_path, name="static"),
        ])
        app.on_shutdown.append(self.on_shutdown)
        return app

    @web.middleware
    async def _guard(self, request: web.Request,
                     handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
        refusal = sender_refusal(request.headers.get("Host", ""), request.headers.get("Origin"),
                                 request.headers.get("Sec-Fetch-Site", ""), hosts=self.hosts, origins=self.origins)
        if refusal is not None:
            return _plain(refusal.status, f"Refused: {refusal.message} ({refusal.param}).")
        given = request.match_info.get(_TOKEN_PARAM) or request.query.get(_TOKEN_PARAM, "")
        if not hmac.compare_digest(given.encode("utf-8", "replace"), self.token.encode()):
            return _page(403, "This workbench needs its key",
                         "Open it with the address <code>workbench web</code> printed when it started: it ends in "
                         "<code>?token=…</code>, a key only that terminal shows. An address without it, or with "
                         "the key of an earlier start, is refused. Lost it? Stop <code>workbench web</code> "
                         "and start it again for a new address.")
        response = await handler(request)
        if not response.prepared:
            response.headers["Cache-Control"] = "no-store"
            response.headers["Referrer-Policy"] = "no-referrer"
            response.headers["X-Content-Type-Options"] = "nosniff"
            response.headers["Content-Security-Policy"] = "frame-ancestors 'none'"
        return response

    async def handle_index(self, request: web.Request) -> web.Response:
        """The page: xterm.js and the websocket URL, every address carrying the token."""
        if self.open_tabs >= self.tabs:
            return _full_page(self.tabs)
        font_size = min(max(_to_int(request.query.get("fontsize", "16"), 16), 6), 48)
        token = html.escape(self.token, quote=True)
        page = _PAGE.format(title=html.escape(self.title), token=token, font_size=font_size,
                            websocket=html.escape(f"ws://{request.host}/ws/{self.token}", quote=True))
        return web.Response(text=page, content_type="text/html")

    async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
        """One tab: a window process for as long as its websocket is open (at most ``tabs`` at once)."""
        if self.open_tabs >= self.tabs:
            socket_ = web.WebSocketResponse()
            await socket_.prepare(request)
            await socket_.send_bytes(_tab_limit_text(self.tabs).encode())
            await socket_.close(code=WSCloseCode.TRY_AGAIN_LATER, message=b"too many tabs")
            return socket_
        self.open_tabs += 1
        try:
            return await super().handle_websocket(request)
        finally:
            self.open_tabs -= 1

    async def on_startup(self, app: web.Application) -> None:
        """Nothing printed here: ``web_command`` prints the address with its token."""

    async def on_shutdown(self, app: web.Application) -> None:
        """Every tab's websocket is closed, so each window process is told to quit and waited for."""
        for socket_ in list(self.sockets):
            await socket_.close(code=WSCloseCode.GOING_AWAY, message=b"workbench web stopped")

    # -- running ----------------------------------------------------------------------------------

    async def start(self) -> None:
        """Accept connections on the bound socket (in this event loop)."""
        app = await self._make_app()
        app.on_response_prepare.append(self._track)
        self._runner = web.AppRunner(app, handle_signals=False, access_log=None, shutdown_timeout=SERVE_STOP_S)
        await self._runner.setup()
        await web.SockSite(self._runner, self.sock).start()

    async def _track(self, request: web.Request, response: web.StreamResponse) -> None:
        if isinstance(response, web.WebSocketResponse):
            self.sockets.add(response)
            request.task.add_done_callback(lambda _: self.sockets.discard(response))

    async def stop(self) -> None:
        """Close every tab (each window quits) and the listening socket."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def page_url(self, host: str | None = None) -> str:
        """The address to open, with the token (``host``: the name to show instead of the bound one)."""
        base = origin_url(host, self.port) if host else self.url
        return f"{base}/?{_TOKEN_PARAM}={self.token}"


def _to_int(text: str, default: int) -> int:
    try:
        return int(text)
    except ValueError:
        return default


def _plain(status: int, text: str) -> web.Response:
    response = web.Response(status=status, text=text + "\n", content_type="text/plain")
    response.headers["Cache-Control"] = "no-store"
    return response


def _page(status: int, heading: str, body_html: str) -> web.Response:
    """A plain page (no script, no asset) saying what happened and what to do."""
    text = (f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{html.escape(heading)}</title></head>"
            f"<body style=\"font-family: sans-serif; max-width: 40em; margin: 3em auto; line-height: 1.5\">"
            f"<h1>{html.escape(heading)}</h1><p>{body_html}</p></body></html>\n")
    response = web.Response(status=status, text=text, content_type="text/html")
    response.headers["Cache-Control"] = "no-store"
    response.headers["Referrer-Policy"] = "no-referrer"
    response.headers["Content-Security-Policy"] = "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'"
    return response


def _full_page(tabs: int) -> web.Response:
    return _page(503, "Too many tabs", f"{tabs} tabs of this workbench are open (the limit: each tab is a window "
                 "process). Close one and reload this page, or start <code>workbench web</code> with a higher "
                 "<code>--tabs</code>.")


def _tab_limit_text(tabs: int) -> str:
    return (f"\r\n  {tabs} tabs of this workbench are open (the limit: each tab is a window process).\r\n"
            "  Close one and reload this page, or start workbench web with a higher --tabs.\r\n")


_PAGE = """<!DOCTYPE html>
<html>
<head>
<meta charset="utf-8">
<title>{title}</title>
<link rel="stylesheet" href="/static/css/xterm.css?token={token}">
<script src="/static/js/textual.js?token={token}"></script>
<style>
@font-face {{ font-family: "Roboto Mono"; src: url("/static/fonts/RobotoMono-VariableFont_wght.ttf?token={token}"); }}
@font-face {{ font-family: "Roboto Mono"; font-style: italic;
  src: url("/static/fonts/RobotoMono-Italic-VariableFont_wght.ttf?token={token}"); }}
body {{ background: #0c181f; margin: 0; }}
.textual-terminal {{ width: 100vw; height: 100vh; opacity: 0; transition: opacity 0.3s ease-out; }}
body.-first-byte .textual-terminal {{ opacity: 1; }}
.status {{ position: absolute; left: 0; right: 0; bottom: 0; padding: 8px 16px; display: none;
  font-family: "Roboto Mono", monospace; color: rgba(255, 255, 255, 0.95); background: #5e0ba7; z-index: 20; }}
.status a {{ color: inherit; }}
body:not(.-first-byte) .starting {{ display: block; bottom: auto; top: 0; background: #12232d; }}
body.-closed .closed {{ display: block; }}
body.-closed .starting {{ display: none; }}
</style>
</head>
<body>
<div class="status starting">Starting a workbench window…</div>
<div class="status closed">This window ended. <a href="" onclick="location.reload(); return false;">Reload</a> to open another.</div>
<div id="terminal" class="textual-terminal" data-session-websocket-url="{websocket}" data-font-size="{font_size}"></div>
</body>
</html>
"""


# -- the command ------------------------------------------------------------------------------------


class ServedCloud:
    """The workspace's served cloud for as long as ``workbench web`` runs: the one found running,
    or a ``workbench serve --port 0`` started here (and stopped by ``stop``)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.url = ""
        self.process: asyncio.subprocess.Process | None = None
        self._drains: list[asyncio.Task[None]] = []
        self._errors = bytearray()

    async def start(self) -> None:
        from services.attached.discovery import find_server

        found = await find_server(self.folder)
        if found is not None:
            self.url = found.url
            return
        self.process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "workbench", "serve", "--workspace", str(self.folder), "--port", "0",
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        stdout, stderr = self.process.stdout, self.process.stderr
        assert stdout is not None and stderr is not None
        self._drains.append(asyncio.create_task(self._keep_errors(stderr)))
        try:
            url = await asyncio.wait_for(self._announced(stdout), SERVE_START_S)
        except TimeoutError:
            await self.stop()
            raise WebError(f"workbench serve did not start serving {self.folder} within {SERVE_START_S:.0f} s") from None
        if url is None:  # it ended: perhaps another process started serving the folder meanwhile
            await self.stop()
            found = await find_server(self.folder)
            if found is None:
                from services.text import sanitize

                said = sanitize(bytes(self._errors).decode("utf-8", "replace").strip()) or "it ended"
                raise WebError(f"cannot serve {self.folder}: {said}")
            self.url = found.url
            self.process = None
            return
        self.url = url
        self._drains.append(asyncio.create_task(self._discard(stdout)))

    @staticmethod
    async def _announced(stdout: asyncio.StreamReader) -> str | None:
        while line := await stdout.readline():
            text = line.decode("utf-8", "replace").strip()
            if text.startswith("serving "):
                return text.removeprefix("serving ")
        return None

    async def _keep_errors(self, stream: asyncio.StreamReader) -> None:
        while chunk := await stream.read(4096):
            self._errors += chunk
            del self._errors[:-4096]

    @staticmethod
    async def _discard(stream: asyncio.StreamReader) -> None:
        while await stream.read(4096):
            pass

    async def stop(self) -> None:
        """Stop the server started here (SIGTERM, then SIGKILL after ``SERVE_STOP_S``); a found one is left."""
        process = self.process
        if process is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(process.wait(), SERVE_STOP_S)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                await process.wait()
        for task in self._drains:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(task, 1.0)
        self._drains.clear()


def _say(text: str) -> None:
    print(text, flush=True)


async def serve_web(folder: Path | None, *, host: str, port: int, tabs: int, demo: bool = False,
                    config: Path | None = None, say: Callable[[str], None] = _say,
                    stop: asyncio.Event | None = None) -> None:
    """Serve tabs until SIGINT/SIGTERM (or ``stop`` is set): the workspace's served cloud first."""
    from services.text import sanitize

    cloud = None if demo or folder is None else ServedCloud(folder)
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    sock = bind_socket(host, port)
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    server: WebServer | None = None
    try:
        if cloud is not None:
            await cloud.start()
            say(f"the workspace's cloud: {cloud.url}" + (" (started here)" if cloud.process else ""))
        title = "workbench demo" if demo else f"workbench · {sanitize(Path(folder or '.').name)}"
        server = WebServer(tab_command(folder, demo=demo, config=config), sock, token=secrets.token_urlsafe(24),
                           tabs=tabs, title=title, hosts=(host,))
        await server.start()
        if not is_loopback(host):
            say(f"warning: {_who_can_reach(host, server.port)}")
        shown = "127.0.0.1" if host in ("0.0.0.0", "::", "[::]", "") else host
        say(f"open {server.page_url(shown)}")
        say(f"at most {tabs} tabs at once; Ctrl+C stops (and closes every tab)")
        await stop.wait()
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
        try:
            if server is not None:
                await server.stop()
            else:
                sock.close()
        finally:
            if cloud is not None:
                await cloud.stop()


def _who_can_reach(host: str, port: int) -> str:
    where = "this machine on any of its networks" if host in ("0.0.0.0", "::", "[::]", "") else host
    return (f"anyone who can reach {where} on port {port} and has the address with its token can open a "
            "workbench window on this workspace in a browser and act in it as you; keep the token secret")


def web_command(folder: Path | None, *, host: str, port: int | None, tabs: int | None, demo: bool = False,
                config: Path | None = None) -> int:
    """``workbench web``; returns the exit status."""
    from services.errors import ServiceError
    from services.text import sanitize

    def fail(message: str) -> int:
        print(f"workbench web: {sanitize(message)}", file=sys.stderr, flush=True)
        return 2

    if port is not None and not 0 <= port <= 65535:
        return fail("--port must be between 0 and 65535")
    if tabs is not None and tabs < 1:
        return fail("--tabs must be at least 1")
    try:
        asyncio.run(serve_web(folder, host=host, port=DEFAULT_WEB_PORT if port is None else port,
                              tabs=DEFAULT_TABS if tabs is None else tabs, demo=demo, config=config))
    except ServiceError as exc:
        return fail(str(exc))
    except OSError as exc:
        return fail(f"{exc.strerror or exc}")
    except KeyboardInterrupt:
        return 130
    return 0

