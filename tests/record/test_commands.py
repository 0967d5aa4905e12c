"""The commands: ``export-test``, ``replay`` (stops where it differs, showing both), ``demo --from``
(narrated, screenshotted), and the palette's start/stop of a recording."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from services.clock import FakeClock
from services.record import load_recording
from services.workspace import Settings
from workbench.app import make_app
from workbench.cli import build_parser, main
from workbench.recording import RecordedDemoApp

from ..ui.conftest import ready, settle


def test_export_test_writes_a_module(session_file: tuple[Path, dict[str, Any]], tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    path, _ = session_file
    assert main(["export-test", str(path)]) == 0
    written = path.with_name("test_session.py")
    compile(written.read_text(encoding="utf-8"), str(written), "exec")
    assert f"steps written to {written}" in capsys.readouterr().out
    assert main(["export-test", str(path), "--served", "-o", str(tmp_path / "t.py")]) == 0
    assert "SERVED = True" in (tmp_path / "t.py").read_text(encoding="utf-8")


def test_replay_says_every_step_matched(session_file: tuple[Path, dict[str, Any]],
                                        capsys: pytest.CaptureFixture[str]) -> None:
    path, _ = session_file
    assert main(["replay", str(path)]) == 0
    out = capsys.readouterr().out
    steps = len(load_recording(path).steps)
    assert f"all {steps} steps matched the recording" in out


def test_replay_stops_at_an_injected_divergence_and_shows_both(session_file: tuple[Path, dict[str, Any]],
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    path, _ = session_file
    recording = load_recording(path)
    lines = path.read_text(encoding="ascii").splitlines()
    # the recording says the revocation left the grant "suspended": the cloud says revoked
    target = next(s["n"] for s in recording.steps if str(s.get("path", "")).endswith("/grant/revoke"))
    step = json.loads(lines[target + 1])
    step["observed"]["grants"]["user:grace"] = "suspended"
    lines[target + 1] = json.dumps(step)
    path.write_text("\n".join(lines) + "\n", encoding="ascii")
    assert main(["replay", str(path)]) == 1
    out = capsys.readouterr().out
    assert f"step {target - 1}: " in out and f"step {target}: " not in out.split("diverged")[0]
    assert f"diverged at step {target}: grant of user:grace: expected suspended, seen revoked" in out
    expected, seen = out.split("expected (recorded):")[1].split("seen (replayed):")
    assert '"user:grace": "suspended"' in expected and '"user:grace": "revoked"' in seen


def test_a_hostile_recording_is_refused_by_every_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"format": "workbench-recording", "version": 99}\n', encoding="utf-8")
    for command in (["replay", str(bad)], ["export-test", str(bad)], ["demo", "--from", str(bad), "--headless"]):
        assert main(command) == 2
        assert "line 1: version 99 is newer than this workbench reads" in capsys.readouterr().out
    assert not (tmp_path / "test_bad.py").exists()


async def test_demo_from_a_recording_narrates_every_step_with_a_screenshot(
        session_file: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    path, _ = session_file
    recording = load_recording(path)
    shots = tmp_path / "shots"
    app = RecordedDemoApp(Settings(path=tmp_path / "ws"), recording, speed=200, screenshots=shots, exit_at_end=True)
    async with app.run_test(size=(160, 48)) as pilot:
        for _ in range(1200):
            await pilot.pause(0.05)
            if len(app.completed) == len(app.steps) or app.failures:
                break
        assert app.failures == []
        assert app.completed == ["load"] + [f"step_{s['n']}" for s in recording.steps]
    pictures = sorted(p.name for p in shots.glob("*.svg"))
    assert len(pictures) == len(recording.steps) + 1
    assert pictures[0] == "01-load.svg" and pictures[1] == "02-step_1.svg"
    first = (shots / "02-step_1.svg").read_text(encoding="utf-8")
    assert "Step&#160;1:" in first or "Step 1:" in first


async def test_the_palette_starts_and_stops_a_recording(tmp_path: Path) -> None:
    from workbench.commands import WorkbenchCommands

    app = make_app(Settings(path=tmp_path / "ws", clock=FakeClock()))
    async with app.run_test(size=(160, 48)) as pilot:
        ws = await ready(pilot)
        provider = WorkbenchCommands(app.main, None)
        entries = await provider._entries("")
        start = next(command for label, command, _ in entries if label.startswith("Start recording"))
        await start()
        await settle(pilot)
        assert app.recorder is not None, app.errors
        path = app.recorder.path
        assert path.parent == tmp_path / "ws" / "recordings"
        await ws.desk.revoke("user:linus", "grant_removed")
        entries = await provider._entries("")
        stop = next(command for label, command, _ in entries if label == "Stop recording")
        await stop()
        await settle(pilot)
        assert app.recorder is None
    recording = load_recording(path)
    assert recording.ended
    assert [s["path"] for s in recording.steps] == ["/people/user%3Alinus/grant/revoke"]
    assert recording.steps[0]["observed"]["grants"]["user:linus"] == "revoked"


def test_replay_and_export_refuse_a_recording_that_lost_its_end_or_a_step(
        session_file: tuple[Path, dict[str, Any]], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, _ = session_file
    lines = path.read_text(encoding="ascii").splitlines()
    assert json.loads(lines[-1])["type"] == "end"
    cases = {
        "no-end": lines[:-1],  # the window stopped (or crashed) before the end line
        "no-steps": lines[:2],  # a header and a state: what an attached window's --record left
        "last-step-lost": lines[:-2] + lines[-1:],
        "middle-step-lost": lines[:4] + lines[5:],
    }
    reasons = {"no-end": "no end line", "no-steps": "(0 steps read)",
               "last-step-lost": "a step line is missing", "middle-step-lost": "a step line is missing"}
    for name, kept in cases.items():
        damaged = tmp_path / f"{name}.jsonl"
        damaged.write_text("\n".join(kept) + "\n", encoding="ascii")
        for command in (["replay", str(damaged)], ["export-test", str(damaged), "-o", str(tmp_path / "t.py")]):
            assert main(command) == 2, (name, command)
            out = capsys.readouterr().out
            assert reasons[name] in out and "matched" not in out, (name, out)
        assert not (tmp_path / "t.py").exists()


def _diverging_revoke(path: Path) -> int:
    """Alter the recording: the revocation left the grant "suspended" (the cloud says revoked); answers the step."""
    recording = load_recording(path)
    lines = path.read_text(encoding="ascii").splitlines()
    target = next(s["n"] for s in recording.steps if str(s.get("path", "")).endswith("/grant/revoke"))
    step = json.loads(lines[target + 1])
    step["observed"]["grants"]["user:grace"] = "suspended"
    lines[target + 1] = json.dumps(step)
    path.write_text("\n".join(lines) + "\n", encoding="ascii")
    return int(target)


@pytest.mark.slow
def test_replay_inspect_opens_the_diverging_step_in_the_comparison_screen(
        session_file: tuple[Path, dict[str, Any]], capsys: pytest.CaptureFixture[str]) -> None:
    from screens.diff import DiffScreen, DiffTable
    from services.desk.diff import Comparison
    from workbench.recording import ReplayComparisonApp, replay_command

    path, _ = session_file
    target = _diverging_revoke(path)
    shown: list[Comparison] = []
    assert replay_command(path, inspect=True, show=shown.append) == 1
    assert f"diverged at step {target}" in capsys.readouterr().out
    [compared] = shown
    assert (compared.left, compared.right) == ("expected (recorded)", "seen (replayed)")
    assert compared.note.startswith(f"step {target}: grant of user:grace: expected suspended")
    first = compared.rows[compared.differences[0]]
    assert (first.section, first.left, first.right) == ("grants", "user:grace: suspended", "user:grace: revoked")
    sections = {row.section for row in compared.rows}
    assert {"step", "runs", "events", "grants"} <= sections
    assert all(not r.differs for r in compared.rows if r.section in ("runs", "events"))  # only the grant differs

    async def drive() -> None:
        app = ReplayComparisonApp(compared)
        async with app.run_test(size=(140, 44)) as pilot:
            await settle(pilot)
            screen = app.screen
            assert isinstance(screen, DiffScreen) and screen.comparison is compared
            table = screen.query_one("#diff-table", DiffTable)
            assert table.cursor_row == compared.differences[0]
            assert table.scroll_offset.y <= table.cursor_row < table.scroll_offset.y + table.size.height - 1
            await pilot.press("home")
            assert table.cursor_row == 0
            await pilot.press("n")
            assert table.cursor_row == compared.differences[0]
            await pilot.press("escape")
            await settle(pilot)
        assert not app.is_running

    asyncio.run(drive())


def test_replay_inspect_opens_the_end_state_in_time_mode_over_the_steps(
        session_file: tuple[Path, dict[str, Any]]) -> None:
    """Every step matched: no comparison; the replayed workspace opens in time mode, and the cursor
    steps back over the changes the recording's steps made, to the state before them."""
    from screens.time import TimeScreen
    from workbench.recording import replay_command

    shown: list[object] = []
    seen: list[tuple[str, str, int]] = []

    def look(folder: Path) -> None:
        async def drive() -> None:
            app = make_app(Settings(path=folder, seed=False, clock=FakeClock()), look_back=True)
            async with app.run_test(size=(160, 48)) as pilot:
                await ready(pilot)
                for _ in range(1500):  # the window opens in time mode once its workspace and history are open
                    if isinstance(app.screen, TimeScreen) and app.screen.banner:  # (bounded; a loaded machine is slow)
                        break
                    await pilot.pause(0.02)
                screen = app.screen
                assert isinstance(screen, TimeScreen)
                now = screen.banner
                store = app.workspace.timeline.store
                steps_made = store.between(store.first(), store.last())
                for _ in range(steps_made):
                    await pilot.press("left_square_bracket")
                    await settle(pilot)
                seen.append((now, screen.banner, steps_made))
                await pilot.press("escape")
                await settle(pilot)
                assert not isinstance(app.screen, TimeScreen)
        asyncio.run(drive())

    assert replay_command(session_file[0], inspect=True, show=shown.append, look_back=look) == 0
    assert shown == []
    (now, back, steps_made), = seen
    assert "0 changes ago" in now and steps_made >= len(load_recording(session_file[0]).steps)
    ago = int(back.split(" changes ago")[0].rsplit(" · ", 1)[1].replace(",", ""))
    assert len(load_recording(session_file[0]).steps) <= ago <= steps_made
    assert build_parser().parse_args(["replay", "x.jsonl", "--inspect"]).inspect