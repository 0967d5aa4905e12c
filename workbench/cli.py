"""The ``workbench`` command (also ``python -m workbench``).

``workbench [--workspace PATH] [--config PATH] [--read-only]`` opens the workbench (exit status 2
when the workspace cannot open; settings in ``workbench.settings``); ``workbench demo [--speed X]``
plays the narrated walkthrough; ``workbench demo --headless --screenshots DIR`` plays it without a
terminal and writes one SVG per step; ``--version``; ``--help``.

``workbench serve [--workspace DIR] [--host H] [--port P] [--allow-remote] [--export FILE]
[--import FILE] [--max-body B] [--max-depth N] [--max-text C] [--max-wait S] [--max-streams N]`` serves the workspace's cloud (kept on disk) over HTTP until SIGTERM/SIGINT;
``workbench connect --workspace DIR USER --scope S ...`` prints a person's connection as JSON (with
``--key FILE``, ``--assertion`` prints a client assertion and ``--access-token`` a fresh access token);
``workbench web [--workspace DIR] [--host H] [--port P] [--tabs N] [--demo]`` serves the workbench in
browser tabs (``workbench.web``); ``workbench --serve [--port P]`` opens the workbench and serves its cloud at the same time.

``workbench --record FILE`` records the session (``services.record``); ``workbench export-test FILE
[-o OUT] [--served]`` writes it as a pytest module, ``workbench replay FILE [--served] [--inspect]`` plays it into a
fresh workspace and stops where it differs, ``workbench demo --from FILE`` narrates it.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from . import __version__

if TYPE_CHECKING:
    from .served import LimitOptions

__all__ = ["main", "build_parser"]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (kept import-light so ``--help`` and ``--version`` are instant)."""
    parser = argparse.ArgumentParser(
        prog="workbench",
        description="A terminal workbench for operators of agent apps on the crouter runtime.",
    )
    parser.add_argument("--version", action="version", version=f"workbench {__version__}")
    parser.add_argument("--workspace", type=Path, default=None,
                        help="the workspace folder (default: the settings file's, else ./.workbench; created with "
                             "the sample world)")
    parser.add_argument("--config", type=Path, default=None, metavar="PATH",
                        help="the settings file (default: config.toml in the platform's config folder)")
    parser.add_argument("--read-only", action="store_true",
                        help="look without touching: every action that changes state is refused")
    parser.add_argument("--log", type=Path, default=None, metavar="FILE",
                        help="write errors with their tracebacks here (default: logs/workbench.log in the workspace)")
    parser.add_argument("--layout", choices=("dashboard", "single"), default=None,
                        help="every pane at once, or one pane and a strip (default: by the terminal's size, "
                             "dashboard from 160x48)")
    parser.add_argument("--record", type=Path, default=None, metavar="FILE",
                        help="record the session (operator actions, app calls, scripted failures) into FILE, a new "
                             "JSON Lines file; replay it with `workbench replay`, `export-test` or `demo --from`")
    parser.add_argument("--serve", action="store_true",
                        help="also serve this workspace's cloud over HTTP (see `workbench serve`)")
    parser.add_argument("--port", type=int, default=None, help="the port for --serve (0 picks a free one)")
    parser.add_argument("--honcho-url", default=None, metavar="URL",
                        help="deliver memory to this Honcho server (default $HONCHO_URL, else the embedded "
                             "fake); the API key is read from $HONCHO_API_KEY only")
    parser.add_argument("--canvas-url", default=None, metavar="URL",
                        help="the canvas database (default $WORKBENCH_CANVAS_URL, else the settings file's, else "
                             "canvas.db in the workspace), e.g. postgresql+psycopg://user@host:5432/db")
    parser.add_argument("--honcho-workspace", default=None, metavar="ID",
                        help="the Honcho workspace memory goes into (default $HONCHO_WORKSPACE_ID, else workbench)")
    sub = parser.add_subparsers(dest="command")
    serve = sub.add_parser("serve", help="serve the workspace's cloud over HTTP for a real app (headless)")
    serve.add_argument("--workspace", type=Path, default=None, dest="sub_workspace", metavar="DIR",
                       help="the workspace folder (default ./.workbench)")
    serve.add_argument("--host", default="127.0.0.1", help="the address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=None, dest="sub_port", metavar="PORT",
                       help="the port (default 8790; 0 picks a free one)")
    serve.add_argument("--allow-remote", action="store_true",
                       help="allow a host other than loopback (anyone who reaches it can use the cloud)")
    serve.add_argument("--public-url", default=None, metavar="URL",
                       help="the URL apps reach it by (default http://HOST:PORT; e.g. with --host 0.0.0.0)")
    serve.add_argument("--notice-url", default=None, metavar="URL",
                       help="POST run notices to your app at this URL (verify them with verify_run_notice)")
    serve.add_argument("--export", type=Path, default=None, metavar="FILE",
                       help="write the workspace's whole cloud state to FILE and exit")
    serve.add_argument("--import", type=Path, default=None, metavar="FILE", dest="import_file",
                       help="replace the workspace's cloud state with FILE, then serve")
    serve.add_argument("--max-body", type=int, default=None, metavar="BYTES",
                       help="refuse request bodies above this size with 413 (default 1048576)")
    serve.add_argument("--max-depth", type=int, default=None, metavar="N",
                       help="refuse JSON nested deeper than this (default 32)")
    serve.add_argument("--max-text", type=int, default=None, metavar="CHARS",
                       help="the longest prompt, message or run name (default 262144)")
    serve.add_argument("--max-wait", type=float, default=None, metavar="SECONDS",
                       help="the longest grant long-poll (?wait=) is held (default 60)")
    serve.add_argument("--max-streams", type=int, default=None, metavar="N",
                       help="event streams one token may hold open (default 16)")
    connect = sub.add_parser("connect", help="connect a person and print the connection an app stores, as JSON")
    connect.add_argument("--workspace", type=Path, default=None, dest="sub_workspace", metavar="DIR",
                         help="the workspace folder (default ./.workbench)")
    connect.add_argument("user", nargs="?", default=None, help="the person's id, e.g. user:ada")
    connect.add_argument("--scope", action="extend", nargs="+", default=None, dest="scopes", metavar="S",
                         help="a scope to grant (repeat or list several; default crtr:llm crtr:act)")
    connect.add_argument("--key", type=Path, default=None, metavar="FILE",
                         help="your app's private key (PEM; created at FILE, mode 0600, when missing): the key "
                              "--assertion and --access-token sign with")
    shown = connect.add_mutually_exclusive_group()
    shown.add_argument("--assertion", action="store_true",
                       help="print only a client assertion signed with --key (valid 5 minutes; no person needed)")
    shown.add_argument("--access-token", action="store_true",
                       help="print only a fresh access token for the person (refreshed with --key)")
    web = sub.add_parser("web", help="serve the workbench in browser tabs (each tab a window on the served cloud)")
    web.add_argument("--workspace", type=Path, default=None, dest="sub_workspace", metavar="DIR",
                     help="the workspace folder (default: the settings file's, else ./.workbench); served first "
                          "when no server runs for it, and that server stopped at the end")
    web.add_argument("--host", default="127.0.0.1",
                     help="the address to listen on (default 127.0.0.1; another one is said in a warning)")
    web.add_argument("--port", type=int, default=None, dest="sub_port", metavar="PORT",
                     help="the port (default 8791; 0 picks a free one)")
    web.add_argument("--tabs", type=int, default=None, metavar="N",
                     help="tabs open at once, each a window process (default 5)")
    web.add_argument("--demo", action="store_true", help="play the narrated walkthrough in each tab instead")
    demo = sub.add_parser("demo", help="play the narrated walkthrough over the real services")
    demo.add_argument("--speed", type=float, default=None,
                      help="speed factor for auto-advance (2 = twice as fast; default 1, headless: full speed)")
    demo.add_argument("--headless", action="store_true", help="play without a terminal")
    demo.add_argument("--screenshots", type=Path, default=None, help="write one SVG per step into this folder")
    demo.add_argument("--workspace", type=Path, default=None, dest="demo_workspace",
                      help="the demo's workspace folder (default: a fresh temporary folder)")
    demo.add_argument("--from", type=Path, default=None, dest="demo_from", metavar="FILE",
                      help="narrate a recorded session (workbench --record FILE) instead of the bundled tour")
    export = sub.add_parser("export-test", help="write a recorded session as a pytest module that replays it")
    export.add_argument("recording", type=Path, help="the recording (workbench --record FILE)")
    export.add_argument("-o", "--output", type=Path, default=None, metavar="FILE",
                        help="the module to write (default: test_<recording>.py beside the recording)")
    export.add_argument("--served", action="store_true",
                        help="the test serves the cloud on a free loopback port and drives it over HTTP")
    replay = sub.add_parser("replay", help="play a recorded session into a fresh workspace; stop where it differs")
    replay.add_argument("recording", type=Path, help="the recording (workbench --record FILE)")
    replay.add_argument("--served", action="store_true", help="serve the fresh workspace's cloud and drive it over HTTP")
    replay.add_argument("--workspace", type=Path, default=None, dest="replay_workspace", metavar="DIR",
                        help="the fresh workspace (default: a temporary folder, removed afterwards)")
    replay.add_argument("--inspect", action="store_true",
                        help="at a divergence, show the step's expected and seen observations side by side; "
                             "every step matched, open the replayed workspace in time mode, the cursor over the steps")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status (the window itself ends the process with its
    status once the terminal is restored: ``workbench.app.run_window``)."""
    args = build_parser().parse_args(argv)
    config = None
    if args.command in ("export-test", "replay"):
        from .recording import export_test_command, replay_command

        if args.command == "export-test":
            return export_test_command(args.recording, args.output, served=args.served)
        return replay_command(args.recording, served=args.served, workspace=args.replay_workspace,
                              inspect=args.inspect)
    if args.command != "demo":
        from .settings import load_config

        config = load_config(args.config)
        args.workspace = args.workspace or config.workspace or Path(".workbench")
    if args.command == "demo":
        if args.speed is not None and args.speed <= 0:
            print("workbench demo: --speed must be above 0")
            return 2
        if args.demo_from is not None:
            from .recording import run_recorded_demo

            return run_recorded_demo(args.demo_from, speed=args.speed, headless=args.headless,
                                     screenshots=args.screenshots, workspace=args.demo_workspace)
        from .demo import run_demo

        return run_demo(speed=args.speed, headless=args.headless, screenshots=args.screenshots,
                        workspace=args.demo_workspace)
    if args.command == "web":
        from .web import web_command

        return web_command(args.sub_workspace or args.workspace, host=args.host, port=args.sub_port, tabs=args.tabs,
                           demo=args.demo, config=args.config)
    if args.command in ("serve", "connect"):
        from .served import connect_command, serve_command

        workspace = args.sub_workspace or args.workspace
        if args.command == "connect":
            return connect_command(workspace, args.user, args.scopes, key=args.key, assertion=args.assertion,
                                   access_token=args.access_token)
        return serve_command(workspace, host=args.host, port=args.sub_port, allow_remote=args.allow_remote,
                             export=args.export, import_file=args.import_file, notice_url=args.notice_url,
                             public_url=args.public_url, limits=_limits(args))
    from .collector import hold_collector

    hold_collector()  # until the window's Workspace is open (the App releases it): see workbench.collector
    from services.settings import Settings

    from .app import make_app, run_window

    if args.serve:
        from .served import check_ui_serve

        problem = check_ui_serve(args.workspace, args.port)
        if problem:
            print(f"workbench --serve: {problem}")
            return 2
        served = make_app(Settings(path=args.workspace, serve_port=_port(args.port), canvas_url=_canvas_url(args, config),
                                   **_memory(args, config)), config=config,
                          read_only=args.read_only, layout=args.layout, log=args.log, record=args.record)
        _exit_on_sigterm(served)
        return run_window(served)
    app = make_app(Settings(path=args.workspace, canvas_url=_canvas_url(args, config), **_memory(args, config)), config=config,
                   read_only=args.read_only, layout=args.layout, log=args.log, record=args.record)
    return run_window(app)


def _limits(args: argparse.Namespace) -> LimitOptions:
    """The ``--max-*`` options given, as ``Limits`` fields."""
    limits: LimitOptions = {}
    if args.max_body is not None:
        limits["body_bytes"] = args.max_body
    if args.max_depth is not None:
        limits["json_depth"] = args.max_depth
    if args.max_text is not None:
        limits["prompt_chars"] = limits["message_chars"] = args.max_text
    if args.max_wait is not None:
        limits["wait_s"] = args.max_wait
    if args.max_streams is not None:
        limits["streams_per_token"] = args.max_streams
    return limits


class MemoryOptions(TypedDict):
    """Where memory goes, as ``Settings`` fields."""

    honcho_url: str | None
    honcho_workspace_id: str


def _memory(args: argparse.Namespace, config: object = None) -> MemoryOptions:
    """Where memory goes: the flags, else Honcho's own environment variables (as its SDKs read them),
    else the settings file; the key is never read from a file."""
    return {"honcho_url": args.honcho_url or os.environ.get("HONCHO_URL")
            or getattr(config, "honcho_url", None) or None,
            "honcho_workspace_id": args.honcho_workspace or os.environ.get("HONCHO_WORKSPACE_ID")
            or getattr(config, "honcho_workspace", None) or "workbench"}


def _canvas_url(args: argparse.Namespace, config: object) -> str | None:
    """The canvas database: the flag, else ``$WORKBENCH_CANVAS_URL``, else the settings file, else None."""
    return (args.canvas_url or os.environ.get("WORKBENCH_CANVAS_URL") or getattr(config, "canvas_url", None)
            or None)


def _exit_on_sigterm(app: object) -> None:
    """SIGTERM closes the app like ``q`` does (the workspace stops serving and removes serve.json)."""
    import asyncio
    import signal

    def handler(signum: int, frame: object) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            raise SystemExit(128 + signum) from None
        loop.call_soon_threadsafe(app.exit)  # type: ignore[attr-defined]

    signal.signal(signal.SIGTERM, handler)


def _port(port: int | None) -> int:
    from services.served.server import DEFAULT_PORT

    return DEFAULT_PORT if port is None else port
