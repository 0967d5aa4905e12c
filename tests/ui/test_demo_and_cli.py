"""The whole demo walkthrough headless (real services, one SVG per step), and the CLI surface."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from services.workspace import Settings
from workbench import __version__
from workbench.cli import build_parser
from workbench.demo import DemoApp, DemoError, load_walkthrough


@pytest.mark.long
async def test_the_whole_demo_plays_headless_and_leaves_the_services_changed(tmp_path: Path) -> None:
    steps = load_walkthrough()
    shots = tmp_path / "shots"
    app = DemoApp(Settings(path=tmp_path / "ws"), steps=steps, speed=200, screenshots=shots, exit_at_end=True)
    async with app.run_test(size=(160, 48)) as pilot:
        for _ in range(600):
            await pilot.pause(0.05)
            if len(app.completed) == len(steps):
                break
        ws = app.workspace
        assert app.completed == [s.id for s in steps]
        assert app.failures == []
        driver = app.driver
        run = ws.cloud.runs.get(driver.run_id)
        texts = [e.get("text") for e in run.events if e["type"] == "node.output_text.done"]
        assert texts[-1] == "Turn the compost on Sunday; it needs air, not water."
        assert [(a.action, a.by) for a in ws.desk.log(driver.run_id)][:2] == [("start", "app"), ("reply", "operator")]
        assert any(m["text"] == "And the compost?" for m in run.messages)
        assert driver.results["refusal"].user_id == "user:grace"
        assert ws.cloud.user("user:grace").grant.state["state"] == "active"
        approved = next(i for i in await ws.okf.queue() if i.id == driver.results["judgment"])
        assert approved.state == "approved" and approved.accepted
        insight = driver.results["insight"]
        assert insight.status == "approved"
        assert (await ws.canvas.read(insight.document)).document.body
        assert driver.results["sweep"].finished_at >= driver.results["sweep"].started_at
    svgs = sorted(p.name for p in shots.glob("*.svg"))
    assert svgs == [f"{i:02d}-{s.id}.svg" for i, s in enumerate(steps, start=1)]
    assert "refused grant_removed" in (shots / "05-revoke.svg").read_text("utf-8").replace("&#160;", " ")


async def test_space_pauses_and_right_steps(tmp_path: Path) -> None:
    steps = load_walkthrough()[:3]
    app = DemoApp(Settings(path=tmp_path / "ws"), steps=steps, speed=0.001)
    async with app.run_test(size=(120, 40)) as pilot:
        for _ in range(200):
            await pilot.pause(0.05)
            if app.completed:
                break
        assert app.completed == ["welcome"]
        await pilot.press("space")
        assert app.paused
        assert app.main.query_one("#caption").paused
        await pilot.press("right")
        for _ in range(200):
            await pilot.pause(0.05)
            if len(app.completed) == 2:
                break
        assert app.completed == ["welcome", "start_run"]
        await pilot.press("space")
        assert not app.paused


def test_a_malformed_walkthrough_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "walk.json"
    bad.write_text('{"steps": [{"id": "launch_rockets", "caption": "no"}]}', encoding="utf-8")
    with pytest.raises(DemoError, match="unknown step"):
        load_walkthrough(bad)
    bad.write_text("{nope", encoding="utf-8")
    with pytest.raises(DemoError, match="not a walkthrough"):
        load_walkthrough(bad)


def test_cli_version_and_help() -> None:
    out = subprocess.run([sys.executable, "-m", "workbench", "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == f"workbench {__version__}"
    out = subprocess.run([sys.executable, "-m", "workbench", "--help"], capture_output=True, text=True, check=True)
    assert "--workspace" in out.stdout and "demo" in out.stdout
    args = build_parser().parse_args(["demo", "--speed", "2", "--headless", "--screenshots", "shots"])
    assert (args.command, args.speed, args.headless, args.screenshots) == ("demo", 2.0, True, Path("shots"))
    assert build_parser().parse_args(["--workspace", "w"]).workspace == Path("w")


def test_the_version_matches_the_installed_metadata() -> None:
    from importlib.metadata import version

    assert __version__ == version("workbench")
