"""Recording in the workbench: ``--record FILE``, the palette's start/stop, and the commands that
play a recording back: ``export-test``, ``replay`` and ``demo --from``.

The recording itself is ``services.record``; this module starts and stops it for a window, writes an
exported test, prints a replay's verdict (expected and seen, as plain sanitised text) and, with
``--inspect``, opens it in the comparison screen (``ReplayComparisonApp``), and narrates a
recording as a demo: each recorded step becomes one caption, paced by the time it took when recorded
(between ``MIN_STEP_S`` and ``MAX_STEP_S``), with a headless screenshot per step.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, cast

from textual.app import App
from textual.binding import Binding

from screens.text import safe
from services.errors import ServiceError

from .demo import DemoApp, DemoError, DemoStep, play_demo
from .record_window import start_app_recording, stop_app_recording, toggle_recording

if TYPE_CHECKING:
    from services.desk.diff import Comparison
    from services.record import Recording, ReplaySession
    from services.record.format import Step, StepFields
    from services.workspace import Settings, Workspace

__all__ = ["start_app_recording", "stop_app_recording", "toggle_recording", "export_test_command",
           "replay_command", "ReplayComparisonApp", "RecordedDemoApp", "run_recorded_demo", "recorded_steps"]

MIN_STEP_S = 1.5
"""The shortest time a recorded step stays on screen in a demo (at speed 1)."""
MAX_STEP_S = 6.0
"""The longest."""


# -- export-test and replay ------------------------------------------------------------------------


def _load(path: Path, command: str, *, complete: bool = False) -> "Recording | None":
    """The recording, or None once the reason was printed; ``complete``: one without its end line is
    refused too (a replay or an exported test of it would call a truncated file a match)."""
    from services.record import load_recording

    try:
        recording = load_recording(path)
        if complete:
            recording.check_complete()
        return recording
    except ServiceError as exc:
        print(f"workbench {command}: {safe(str(exc), 2000)}")
        return None


def export_test_command(path: Path, output: Path | None, *, served: bool = False) -> int:
    """``workbench export-test FILE [-o OUT] [--served]``: write the pytest module (default
    ``test_<FILE stem>.py`` beside the recording); status 2 for a recording that does not load."""
    from services.record import export_test

    recording = _load(path, "export-test", complete=True)
    if recording is None:
        return 2
    stem = "".join(c if c.isalnum() else "_" for c in path.stem)
    target = output or path.with_name(f"test_{stem}.py")
    source = export_test(recording, served=served, name=stem)
    try:
        target.write_text(source, encoding="utf-8")
    except OSError as exc:
        print(f"workbench export-test: {target} cannot be written ({exc.strerror or exc})")
        return 1
    print(f"workbench export-test: {len(recording.steps)} steps written to {target}")
    return 0


class ReplayComparisonApp(App[None]):
    """A replay's divergence in the comparison screen (``workbench replay FILE --inspect``): the
    recorded observation after the diverging step (A) against what the replay saw (B), the first
    difference selected; closing the comparison (``esc``) or ``q`` ends it."""

    TITLE = "workbench replay"
    BINDINGS = [Binding("q", "quit", "Quit", tooltip="Close the comparison and end the replay", id="workbench.replay.quit")]

    def __init__(self, comparison: "Comparison") -> None:
        super().__init__()
        self.comparison = comparison
        """What the screen shows."""

    def on_mount(self) -> None:
        from screens.diff import DiffScreen

        self.push_screen(DiffScreen(self.comparison), lambda _: self.exit())


def replay_command(path: Path, *, served: bool = False, workspace: Path | None = None, inspect: bool = False,
                   show: "Callable[[Comparison], None] | None" = None,
                   look_back: "Callable[[Path], None] | None" = None) -> int:
    """``workbench replay FILE [--served] [--workspace DIR] [--inspect]``: play into a fresh workspace
    and stop at the first step whose observation differs, showing both; ``inspect`` then opens them
    side by side in the comparison screen (``show``: how it is opened; default a ``ReplayComparisonApp``
    in the terminal). With ``inspect`` and every step matched, the replayed workspace opens in a window in
    time mode, the cursor over the recording's steps (``look_back``: how it is opened). Status 0 when every step matched, 1 at a divergence, 2 for a recording that does
    not load."""
    from services.record import describe, replay
    from services.record.replay import comparison

    recording = _load(path, "replay", complete=True)
    if recording is None:
        return 2

    async def say(step: "Step") -> None:
        print(f"step {step['n']}: {safe(describe(step), 300)}: as recorded")

    with tempfile.TemporaryDirectory(prefix="workbench-replay-") as tmp:
        folder = workspace or Path(tmp) / "workspace"
        try:
            report = asyncio.run(replay(recording, folder, served=served, on_step=say))
        except ServiceError as exc:
            print(f"workbench replay: {safe(str(exc), 2000)}")
            return 1
        divergence = report.divergence
        if divergence is None:
            print(f"workbench replay: all {len(report.played)} steps matched the recording")
            if inspect:  # the recording's end state, with the time cursor over its steps
                (look_back or _look_back)(folder)
            return 0
    print(f"workbench replay: diverged at step {divergence.step}: {safe(divergence.what, 1000)}")
    print("expected (recorded):")
    print(_shown(divergence.expected))
    print("seen (replayed):")
    print(_shown(divergence.seen))
    compared = comparison(report)
    if inspect and compared is not None:
        (show or _show_comparison)(compared)
    return 1


def _look_back(folder: Path) -> None:
    """The replayed workspace in a window, opened in time mode (``esc`` shows its end state live)."""
    from services.settings import Settings

    from .app import make_app

    make_app(Settings(path=folder, seed=False), look_back=True).run()


def _show_comparison(compared: "Comparison") -> None:
    ReplayComparisonApp(compared).run()


def _shown(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value, indent=1, ensure_ascii=False)
    return safe(text, 20_000)


# -- a recording as a demo --------------------------------------------------------------------------


def recorded_steps(recording: "Recording") -> list[DemoStep]:
    """One demo step per recorded step (after one that loads the starting state), captioned and paced."""
    from services.record import describe, recorded_run_names
    from services.record.sdk_calls import attempts

    names = recorded_run_names(recording)  # a run is named by its title, as everywhere in the window
    steps = [DemoStep("load", f"A recorded session ({recording.header.get('started_at', '')}): the cloud as it "
                              "was before the first step.", 3.0)]
    previous_at = 0.0
    for step in attempts(recording.steps):
        at = float(step["at"])
        seconds = min(MAX_STEP_S, max(MIN_STEP_S, at - previous_at))
        previous_at = at
        steps.append(DemoStep(f"step_{step['n']}", f"Step {step['n']}: {safe(describe(step, names), 400)}{_quoted(step)}", seconds))
    return steps


def _quoted(step: "StepFields") -> str:
    """The text a step carried (a reply, a prompt, a message), clipped: shown as data, never markup."""
    body = step.get("body") or {}
    text = body.get("text") or body.get("prompt") or step.get("text") or step.get("title")
    return f': "{safe(str(text), 120)}"' if text else ""


class RecordedSteps:
    """The demo's driver for a recording: ``load`` and ``step_N`` play on the demo's workspace."""

    def __init__(self, app: "RecordedDemoApp") -> None:
        self.app = app
        self.session: ReplaySession | None = None
        self.by_id = {f"step_{s['n']}": s for s in app.planned}

    async def load(self) -> None:
        from services.record import ReplaySession

        self.session = await ReplaySession.attach(cast("Workspace", self.app.workspace), self.app.recording.state)
        self.app.main.action_show_pane("runs")

    def __getattr__(self, name: str) -> Callable[[], Awaitable[None]]:
        step = self.__dict__.get("by_id", {}).get(name)
        if step is None:
            raise AttributeError(name)

        async def play() -> None:
            await self._play(step)
        return play

    async def _play(self, step: "Step") -> None:
        from services.record import Divergence
        from services.record.replay import check_outcome

        session = self.session
        if session is None:
            raise DemoError("the recording's starting state was not loaded")
        try:
            outcome = await session.play(step)
            check_outcome(step, outcome)
            await session.expect(int(step["n"]), step.get("observed"))
        except Divergence as divergence:
            raise DemoError(f"the replay differs from the recording: {divergence.what}") from None
        self._show(step, session)

    def _show(self, step: "StepFields", session: "ReplaySession") -> None:
        main = self.app.main
        path = str(step.get("path") or "")
        parts = path.strip("/").split("/")
        from urllib.parse import unquote

        if step["kind"] in ("insight", "okf"):  # both are decided in the judgments pane
            main.action_show_pane("judgments")
        elif parts[:1] == ["people"] and len(parts) > 2 and parts[2] != "runs":
            main.action_show_pane("grants")
            main.pane("grants").select_key(unquote(parts[1]))
        else:
            run = step.get("made") or (parts[1] if parts[:1] == ["runs"] and len(parts) > 1 else None)
            if step["kind"] == "app":
                run = step.get("made") or next((unquote(p) for p in parts if p.startswith("run_")), None)
            main.action_show_pane("runs")
            if run:
                main.pane("runs").select_key(session.id(unquote(run)))


class RecordedDemoApp(DemoApp):
    """The demo narrating a recording instead of the bundled tour."""

    def __init__(self, settings: "Settings", recording: "Recording", *, speed: float = 1.0,
                 screenshots: Path | None = None, exit_at_end: bool = False) -> None:
        from services.record.sdk_calls import attempts

        super().__init__(settings, steps=recorded_steps(recording), speed=speed, screenshots=screenshots,
                         exit_at_end=exit_at_end)
        self.recording = recording
        """The recording narrated."""
        self.planned = attempts(recording.steps)
        """Its steps, an app's retried calls folded into one."""

    def make_driver(self) -> object:
        return RecordedSteps(self)


def run_recorded_demo(path: Path, *, speed: float | None = None, headless: bool = False,
                      screenshots: Path | None = None, workspace: Path | None = None) -> int:
    """``workbench demo --from FILE``: narrate a recording on a fresh workspace (status as ``run_demo``;
    2 for a recording that does not load)."""
    from services.workspace import Settings

    recording = _load(path, "demo")
    if recording is None:
        return 2
    return play_demo(lambda folder, pace: RecordedDemoApp(Settings(path=folder), recording, speed=pace,
                                                          screenshots=screenshots, exit_at_end=headless),
                     speed=speed, headless=headless, screenshots=screenshots, workspace=workspace)
