"""The guide's reference names every command and option the ``workbench`` command takes."""

from __future__ import annotations

import argparse
from pathlib import Path

from workbench.cli import build_parser

REFERENCE = Path(__file__).resolve().parents[1] / "docs" / "reference.md"


def _options(parser: argparse.ArgumentParser) -> set[str]:
    return {o for a in parser._actions if not isinstance(a, argparse._HelpAction) for o in a.option_strings}


def test_every_command_and_option_is_in_the_reference() -> None:
    text = REFERENCE.read_text(encoding="utf-8")
    cli = text.split("## Command line", 1)[1]
    parser = build_parser()
    top = cli.split("### `workbench`", 1)[1].split("\n### ", 1)[0]
    missing = [f"workbench {o}" for o in sorted(_options(parser)) if f"`{o}`" not in top]
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    for name, sub in commands.items():
        heading = f"### `workbench {name}`"
        if heading not in cli:
            missing.append(heading)
            continue
        section = cli.split(heading, 1)[1].split("\n### ", 1)[0]
        missing += [f"workbench {name} {o}" for o in sorted(_options(sub)) if f"`{o}`" not in section]
    assert not missing, "not in docs/reference.md's Command line: " + ", ".join(missing)
