"""The ``workbench`` command (also ``python -m workbench``).

``workbench [--workspace PATH]`` opens the workbench; ``workbench demo [--speed X]`` plays the
narrated walkthrough; ``workbench demo --headless --screenshots DIR`` plays it without a
terminal and writes one SVG per step; ``--version``; ``--help``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from . import __version__

__all__ = ["main", "build_parser"]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (kept import-light so ``--help`` and ``--version`` are instant)."""
    parser = argparse.ArgumentParser(
        prog="workbench",
        description="A terminal workbench for operators of agent apps on the crouter runtime.",
    )
    parser.add_argument("--version", action="version", version=f"workbench {__version__}")
    parser.add_argument("--workspace", type=Path, default=Path(".workbench"),
                        help="the workspace folder (default ./.workbench; created with the sample world)")
    sub = parser.add_subparsers(dest="command")
    demo = sub.add_parser("demo", help="play the narrated walkthrough over the real services")
    demo.add_argument("--speed", type=float, default=1.0, help="speed factor for auto-advance (2 = twice as fast)")
    demo.add_argument("--headless", action="store_true", help="play without a terminal")
    demo.add_argument("--screenshots", type=Path, default=None, help="write one SVG per step into this folder")
    demo.add_argument("--workspace", type=Path, default=None, dest="demo_workspace",
                      help="the demo's workspace folder (default: a fresh temporary folder)")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    args = build_parser().parse_args(argv)
    if args.command == "demo":
        if args.speed <= 0:
            print("workbench demo: --speed must be above 0")
            return 2
        from .demo import run_demo

        return run_demo(speed=args.speed, headless=args.headless, screenshots=args.screenshots,
                        workspace=args.demo_workspace)
    from services.workspace import Settings

    from .app import make_app

    make_app(Settings(path=args.workspace)).run()
    return 0
