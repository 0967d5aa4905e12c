"""The demo walkthrough: a narrated tour that drives the real services the way the keys do.

``DemoApp`` is the workbench plus a caption bar and a driver. Captions and timings come from
``assets/demo/walkthrough.json``; each step id maps to one ``DemoSteps`` method that calls the
same pane actions a person's keys call. Auto-advance waits ``seconds / speed``; ``space`` pauses,
``right`` steps. Headless runs write one SVG per step and exit at the end.

The tour shows no toasts: what a toast would say (an action's result, an error) is narrated on the
caption's own line, so every picture shows the five panes whole. An operator's own session keeps
its toasts.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar, cast

from textual import work
from textual.binding import Binding
from textual.notifications import SeverityLevel
from textual.widgets import Footer
from textual.worker import WorkerState

from assets import ASSETS_DIR
from screens.loader import load
from screens.text import TOAST_CAP, notify_plain, safe
from screens.widgets.caption import CaptionBar
from screens.widgets.footer import KeyFooter
from screens.widgets.pane import Pane
from screens.widgets.stream import EventStream
from services.desk import WorkspaceView
from services.errors import ServiceError
from services.workspace import Settings, Workspace

from .app import WorkbenchApp

if TYPE_CHECKING:
    from textual.worker import Worker

_T = TypeVar("_T")

__all__ = ["DemoStep", "DemoError", "DemoApp", "DemoSteps", "load_walkthrough", "run_demo", "demo_speed", "demo_status",
           "WALKTHROUGH"]

WALKTHROUGH = ASSETS_DIR / "demo" / "walkthrough.json"
"""The bundled walkthrough script."""


class DemoError(ServiceError):
    """A demo step could not do what it narrates (the services answered otherwise)."""


@dataclass(frozen=True)
class DemoStep:
    """One step: its id (the action), its caption and how long it stays on screen at speed 1."""

    id: str
    caption: str
    seconds: float


def load_walkthrough(path: Path = WALKTHROUGH) -> list[DemoStep]:
    """The steps of a walkthrough file, with a clear error for a malformed one."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        steps = [DemoStep(str(s["id"]), str(s["caption"]), float(s.get("seconds", 4))) for s in data["steps"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise DemoError(f"{path}: not a walkthrough ({exc})") from None
    unknown = [s.id for s in steps if not hasattr(DemoSteps, s.id)]
    if unknown:
        raise DemoError(f"{path}: unknown step(s) {', '.join(unknown)}")
    return steps


class DemoSteps:
    """The actions behind each step id, done through the panes' own action paths."""

    def __init__(self, app: "DemoApp") -> None:
        self.app = app
        self.ws = cast("Workspace", app.workspace)  # the tour drives the embedded cloud itself
        self.run_id: str | None = None
        """The run the tour started."""
        self.results: dict[str, object] = {}
        """What each step produced (for the caption and the tests)."""

    # -- helpers -----------------------------------------------------------------------------

    def show(self, pane_id: str, key: str | None = None) -> Pane:
        """Bring a pane forward (as its number key does) and select ``key`` in it."""
        main = self.app.main
        main.action_show_pane(pane_id)
        pane = main.pane(pane_id)
        if key is not None:
            pane.select_key(key)
        return pane

    async def act(self, pane: Pane, what: str, call: Callable[[], Awaitable[_T]]) -> _T:
        """Run a pane action (the same worker a key's dialog starts) and wait for it."""
        worker = pane.act(what, call)
        await _finished(worker)
        if worker.state == WorkerState.ERROR:
            raise DemoError(f"{what.rstrip('.')} did not happen: {worker.error}")
        return cast("_T", worker.result)

    async def until(self, check: Callable[[], Awaitable[bool]], what: str, timeout: float = 20.0) -> None:
        """Wait (real time) until ``check`` holds, or fail clearly."""
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout
        while not await check():
            if loop.time() > end:
                raise DemoError(f"the tour waited {timeout:.0f} s for {what}")
            await asyncio.sleep(0.05)

    # -- steps ---------------------------------------------------------------------------------

    async def welcome(self) -> None:
        self.show("runs")

    async def start_run(self) -> None:
        pane = self.show("runs")
        self.run_id = await self.act(pane, "Run “Plan Saturday's watering” started.",
                                     lambda: self.ws.desk.start_run("user:ada", "Plan Saturday's watering"))
        pane.select_key(self.run_id)

    def started(self) -> str:
        """The run the tour started (a step that needs it comes after ``start_run``)."""
        if self.run_id is None:
            raise DemoError("the tour has not started its run yet")
        return self.run_id

    async def reply(self) -> None:
        run_id = self.started()
        pane = self.show("runs", run_id)
        text = "Water the south beds at 7:00, then the herbs by the kitchen door; skip the lawn, rain is due."
        await self.act(pane, "Replied as the model.", lambda: self.ws.desk.reply(run_id, text, chunks=8))

    async def inject_failure(self) -> None:
        run_id = self.started()
        pane = self.show("runs", run_id)
        if self.ws.cloud is None:
            raise DemoError("the tour scripts failures on the embedded cloud, and this window is attached")
        self.ws.cloud.fail_next("run.message", "unreachable", user="user:ada", times=1)
        await self.act(pane, "Message sent (after one retry).", lambda: self.ws.desk.send_message(run_id, "And the compost?"))
        await self.act(pane, "Turn failed.", lambda: self.ws.desk.fail_turn(run_id, "model_error", "the model timed out"))
        await self.act(pane, "Retried with a reply.",
                       lambda: self.ws.desk.reply(run_id, "Turn the compost on Sunday; it needs air, not water."))

    async def revoke(self) -> None:
        grants = self.show("grants", "user:grace")
        await self.act(grants, "Grant of user:grace revoked.", lambda: self.ws.desk.revoke("user:grace", "grant_removed"))
        run = next(r for r in self.ws.desk.runs() if r.user_id == "user:grace")
        runs = self.show("runs", run.id)
        worker = runs.act("", lambda: self.ws.desk.send_message(run.id, "Are you still there?"))
        await _finished(worker)  # its refusal is the point of the step; the App showed it
        refusals = self.ws.desk.refusals_since(60)
        if not any(r.user_id == "user:grace" for r in refusals):
            raise DemoError("the app's message was not refused after the revocation")
        self.results["refusal"] = refusals[-1]

    async def restore(self) -> None:
        grants = self.show("grants", "user:grace")
        await self.act(grants, "Grant of user:grace restored.", lambda: self.ws.desk.restore("user:grace"))

    async def write_note(self) -> None:
        okf = self.ws.okf
        sources = await okf.sources()
        if not sources:
            raise DemoError("the workspace has no knowledge source to write a note for")
        before = {i.id for i in await okf.queue()}
        note = Path(sources[0].home) / "notes" / "pump-schedule.md"
        note.write_text("We decided to run the irrigation pump at night because daytime power is shared "
                        "with the greenhouse heaters.\n", encoding="utf-8")

        async def pending() -> bool:
            new = [i for i in await okf.queue() if i.id not in before and i.state == "pending"]
            if new:
                self.results["judgment"] = new[0].id
            return bool(new)
        await self.until(pending, "the note to become a pending judgment")
        self.show("judgments", f"okf:{self.results['judgment']}")

    async def approve_judgment(self) -> None:
        judgment = str(self.results["judgment"])
        pane = self.show("judgments", f"okf:{judgment}")
        item = await self.act(pane, "Judgment approved and delivered.", lambda: self.ws.okf.approve(judgment))
        self.results["approved"] = item
        pane.select_key(f"okf:{judgment}")

    async def approve_insight(self) -> None:
        pending = [r for r in await self.ws.insights.list() if r.status == "pending"]
        if not pending:
            raise DemoError("no insight review is waiting")
        review = pending[0]
        pane = self.show("judgments", f"insight:{review.id}")
        decided = await self.act(pane, "Insight approved into the canvas.",
                                 lambda: self.ws.insights.approve(review.id, candidate=0))
        self.results["insight"] = decided
        if decided.document is None:
            raise DemoError("the insight was approved but names no canvas document")
        document = await self.ws.canvas.get(decided.document)
        self.show("canvas", document.id)

    async def sweep(self) -> None:
        result = await self.ws.outbox.sweep()
        self.results["sweep"] = result
        notify_plain(self.app, f"Outbox swept: {result.conversations} conversations, {result.delivered_records} "
                     f"records delivered, {result.dropped_delivered} compacted.", timeout=6)
        await self.app.show_memory_view()

    async def done(self) -> None:
        await self.app.leave_memory_view()
        self.show("runs", self.run_id)


async def _finished(worker: Worker[object]) -> None:
    """Wait for another worker to end (``Worker.wait`` refuses to run inside the demo's own worker)."""
    while worker.state in (WorkerState.PENDING, WorkerState.RUNNING):
        await asyncio.sleep(0.01)


class DemoApp(WorkbenchApp):
    """The workbench playing the walkthrough (what a toast would say is narrated under the caption)."""

    BINDINGS = [
        *WorkbenchApp.BINDINGS,
        Binding("space", "toggle_pause", "Pause tour", priority=True,
                tooltip="Pause the tour, or go on", id="demo.toggle_pause"),
        Binding("right", "next_step", "Next step", priority=True,
                tooltip="Go to the tour's next step now", id="demo.next_step"),
    ]

    def __init__(self, settings: Settings, *, steps: list[DemoStep], speed: float = 1.0,
                 screenshots: Path | None = None, exit_at_end: bool = False) -> None:
        super().__init__(settings=settings)
        self.steps = steps
        """The walkthrough."""
        self.speed = speed
        """Auto-advance speed factor."""
        self.screenshots = screenshots
        """Where one SVG per step goes (None: nowhere)."""
        self.exit_at_end = exit_at_end
        """Leave when the last step was shown (headless runs)."""
        self.paused = False
        """The tour waits for space or →."""
        self.completed: list[str] = []
        """Ids of the steps done, in order."""
        self.failures: list[str] = []
        """Steps that could not do what they narrate."""
        self.driver: object = None
        """The step actions (after the workspace opened)."""
        self.said: list[tuple[str, str, str]] = []
        """``(step id, text, severity)`` of everything the tour narrated instead of a toast, in order."""
        self._skip = False
        self._step = 0

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None:
        """What a toast would say goes to the narration's own line (sanitised, never markup): no toast
        covers a pane during the tour or in its pictures."""
        text = safe(message, TOAST_CAP)
        title = safe(title, 120)
        if title and not text.startswith(title):
            text = f"{title}: {text}"
        step = self.steps[self._step - 1].id if self._step else ""
        self.said.append((step, text, severity))
        for screen in self.screen_stack:
            for caption in screen.query(CaptionBar):
                caption.said = (*caption.said, (text, severity))

    def _attach_workspace(self, workspace: WorkspaceView) -> None:
        super()._attach_workspace(workspace)
        self.call_after_refresh(self.play)

    @work(group="demo", exclusive=True, exit_on_error=False)
    async def play(self) -> None:
        """Play every step: caption, action, screenshot, wait."""
        caption = CaptionBar(id="caption")
        await self.main.mount(caption, before=self.main.query_one("#strip"))
        caption.said = tuple((text, severity) for _step, text, severity in self.said)  # said while opening
        self.driver = self.make_driver()
        for number, step in enumerate(self.steps, start=1):
            self._step = number
            caption.position = f"{number}/{len(self.steps)}"
            caption.last = number == len(self.steps)
            caption.caption = step.caption
            self.refresh_bindings()
            caption.said = () if number > 1 else caption.said
            for other in self.screen.query(CaptionBar) if self.screen is not self.main else ():
                other.position, other.caption, other.said, other.last = caption.position, caption.caption, (), caption.last
            try:
                await getattr(self.driver, step.id)()
            except ServiceError as exc:
                self.failures.append(f"{step.id}: {exc}")
                self.report_error(exc)
            await self._quiet()
            self.main.query_one("#runs-stream", EventStream).flush()
            await self.step_shown(number, step)
            self.completed.append(step.id)
            await self._wait(step.seconds / self.speed)
        if self.exit_at_end:
            self.exit()

    def make_driver(self) -> object:
        """The object whose methods the step ids name (the bundled tour's ``DemoSteps``)."""
        return DemoSteps(self)

    async def step_shown(self, number: int, step: DemoStep) -> None:
        """The step is done and drawn: write its picture (headless runs); tests look at the screen here."""
        if self.screenshots is not None:
            picture = load(self, "workbench.screenshot", "picture", what="The step's picture")
            if picture is None:
                return
            self.screenshots.mkdir(parents=True, exist_ok=True)
            await picture(self, f"{number:02d}-{step.id}.svg", str(self.screenshots))

    async def _quiet(self) -> None:
        """Let the panes take in the step's changes before the screenshot: every worker done, no reload
        still queued (a list and its detail then show the same state), and the footer's keys mounted."""
        for _ in range(40):
            await asyncio.sleep(0.05)
            for worker in [w for w in self.workers if w.group != "demo"]:
                await _finished(worker)
            busy = any(getattr(p, "_reload_queued", False) for p in self.main.query(Pane))
            if not busy and not [w for w in self.workers if w.group != "demo" and w.is_running]:
                break
        calm = 0
        for _ in range(200):  # the footer shows the keys the step left (a redraw under way shows none),
            await asyncio.sleep(0.05)  # twice in a row: keys just mounted are laid out by the next refresh
            calm = calm + 1 if all(footer.settled for footer in self.screen.query(KeyFooter)) else 0
            if calm >= 2:
                break

    async def _wait(self, seconds: float) -> None:
        loop = asyncio.get_running_loop()
        end = loop.time() + seconds
        while True:
            if self._skip:
                self._skip = False
                return
            if not self.paused and loop.time() >= end:
                return
            await asyncio.sleep(0.02)

    async def show_memory_view(self) -> None:
        """Open the memory view (as ``M`` does) with the tour's caption under it."""
        self.main.action_show_memory()
        await asyncio.sleep(0.05)
        screen = self.screen
        if screen is self.main:
            raise DemoError("the memory view did not open")
        shown = self.main.query_one("#caption", CaptionBar)
        caption = CaptionBar(id="caption")
        await screen.mount(caption, before=screen.query_one(Footer))
        caption.position, caption.caption, caption.said, caption.last = shown.position, shown.caption, shown.said, shown.last
        for worker in [w for w in self.workers if w.group != "demo"]:
            await _finished(worker)

    async def leave_memory_view(self) -> None:
        """Back to the panes (the caption follows the tour on the main screen)."""
        while self.screen is not self.main and len(self.screen_stack) > 1:
            self.pop_screen()
            await asyncio.sleep(0.05)

    def work_in_flight(self) -> list[str]:
        """Nothing to lose: the tour's workspace is its own and is thrown away, so ``q`` never asks."""
        return []

    def action_toggle_pause(self) -> None:
        self.paused = not self.paused
        if self.main.query("#caption"):
            self.main.query_one("#caption", CaptionBar).paused = self.paused

    def action_next_step(self) -> None:
        self._skip = True

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The last step offers no next one (the footer leaves ``→`` out)."""
        if action == "next_step":
            return self._step < len(self.steps)
        return True


def run_demo(*, speed: float | None = None, headless: bool = False, screenshots: Path | None = None,
             workspace: Path | None = None) -> int:
    """``workbench demo``: play the tour on a fresh workspace (a temporary folder unless given).

    ``speed`` None is the narration's pace in a terminal and full speed headless (no waiting out
    the captions nobody reads). Quitting early (``q``) is a normal end: status 0. Status 1 means a
    step could not do what it narrates, or a headless run did not reach the end.
    """
    steps = load_walkthrough()
    return play_demo(lambda folder, pace: DemoApp(Settings(path=folder), steps=steps, speed=pace,
                                                  screenshots=screenshots, exit_at_end=headless),
                     speed=speed, headless=headless, screenshots=screenshots, workspace=workspace)


def play_demo(make_app: Callable[[Path, float], DemoApp], *, speed: float | None, headless: bool,
              screenshots: Path | None, workspace: Path | None) -> int:
    """Run the demo app ``make_app(folder, pace)`` builds on ``workspace`` (a temporary folder unless
    given), print each failure (sanitised) and where the screenshots went; the status of ``demo_status``."""
    pace = demo_speed(speed, headless)
    with tempfile.TemporaryDirectory(prefix="workbench-demo-") as tmp:
        app = make_app(workspace or Path(tmp) / "workspace", pace)
        app.run(headless=headless, size=(160, 48) if headless else None)
        for failure in app.failures:
            print(f"workbench demo: {safe(failure, 2000)}")
        if screenshots is not None and headless:
            print(f"workbench demo: {len(app.completed)} steps, screenshots in {screenshots}")
        return demo_status(app, headless=headless)


def demo_speed(speed: float | None, headless: bool) -> float:
    """The auto-advance factor: as given, else 1 in a terminal and no waiting at all headless."""
    if speed is not None:
        return speed
    return float("inf") if headless else 1.0


def demo_status(app: DemoApp, *, headless: bool) -> int:
    """0 for a tour that ended well (played through, or quit early by the viewer), 1 otherwise."""
    unfinished = headless and len(app.completed) != len(app.steps)
    return 1 if app.failures or unfinished else 0
