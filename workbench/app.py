"""``WorkbenchApp`` and ``make_app``: the small App that opens the Workspace and hosts the main screen.

The App opens the Workspace in a worker after the first frame (so sqlmodel, jwt and cryptography
are imported after the first paint), forwards every batch of service changes to the main screen
as one ``ServicesChanged`` message (a run's events named once a batch), and is the one place worker errors become toasts. A workspace
that cannot open shows one screen (``OpenErrorScreen``: the file, the cause, what to do) and the
App then quits with status 2. Every toast is plain text (``notify`` is never parsed as markup).

Leaving with ``q`` keeps what the panes show (``screens.snapshot``) for the next start's first frame.
The command runs the window through ``run_window``: the terminal is restored before the services
close, and the process ends at once after that.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from textual import work
from textual.app import App
from textual.binding import Binding
from textual.notifications import SeverityLevel
from textual.worker import Worker

from assets import ASSETS_DIR
from screens.main import MainScreen
from screens.messages import ServicesChanged, WorkspaceOpened
from screens.open_error import OPEN_FAILED_STATUS, OpenErrorScreen
from screens.text import TOAST_CAP, notify_plain, safe
from screens.loader import load
from screens.widgets.badges import BadgeBar
from services.settings import Settings

from .base import WorkbenchBase, error_text, log_error
from .collector import GC_YOUNG, collect_less_often, hold_collector, release_collector
from .commands import WorkbenchCommands

if TYPE_CHECKING:
    from textual.dom import DOMNode

    from services.changes import Change
    from services.desk import WorkspaceView

    from .settings import UserConfig

__all__ = ["WorkbenchApp", "make_app", "run_window", "error_text", "collect_less_often", "GC_YOUNG", "CLOSE_WITHIN"]

CLOSE_WITHIN = 0.3
"""Seconds ``run_window`` gives the services to close after the terminal is restored. What has not
finished by then is left as a kill leaves it, which every store recovers from on the next open (the
outbox's journal, the canvas's transactions, a stale ``serve.json``)."""

STYLES = ASSETS_DIR / "styles"


class WorkbenchApp(WorkbenchBase):
    """The workbench: five live panes over one Workspace."""

    TITLE = "workbench"
    CSS_PATH = [STYLES / "base.tcss", STYLES / "main.tcss", STYLES / "dialogs.tcss"]
    COMMANDS = App.COMMANDS | {WorkbenchCommands}
    BINDINGS = [
        Binding("q", "quit", "Quit", tooltip="Quit the workbench (asks when work is in flight)", id="workbench.quit"),
        Binding("S", "screenshot", "Screenshot", show=False,
                tooltip="Save a picture of the window (SVG) in the workspace", id="workbench.screenshot"),
    ]

    def __init__(self, workspace: WorkspaceView | None = None, *, settings: Settings | None = None) -> None:
        super().__init__(workspace, settings=settings)
        self._owns_workspace = workspace is None
        self._pending_changes: list[Change] = []
        self._event_runs: set[str] = set()
        """The runs whose events are already named in ``_pending_changes``."""
        self._flush_queued = False
        self._unsubscribe: Callable[[], None] | None = None
        self.changes_seen = 0
        """How many service changes reached the App (tests and the demo wait for quiet with it)."""

    look_back = False
    """Open in time mode once the workspace is open (``make_app(look_back=True)``)."""
    config: UserConfig | None = None
    """The operator's ``UserConfig`` (theme, keymap, ...), applied at mount; None: no settings file."""

    def get_default_screen(self) -> MainScreen:
        """The main screen is the default screen (no blank screen is made and then covered)."""
        return MainScreen()

    def on_mount(self) -> None:
        from .log import start_log

        self.error_log = start_log(self, self.log_path)
        if self.config is not None:
            from .settings import apply_config

            apply_config(self, self.config)
        if self.workspace is not None:
            self.call_after_refresh(self._attach_workspace, self.workspace)
        else:
            self.call_after_refresh(self.open_workspace)

    @property
    def main(self) -> MainScreen:
        """The main screen (wherever dialogs are stacked)."""
        return next(s for s in self.screen_stack if isinstance(s, MainScreen))

    @work(group="workspace", exclusive=True, exit_on_error=False)
    async def open_workspace(self) -> None:
        """Open the Workspace (imports the heavy services now, after the first frame).

        The imports (sqlalchemy, cryptography, ...) take most of a second; they run in a thread so
        the panes build and keys are answered meanwhile. The garbage collector is held off until the
        Workspace is attached (``workbench.collector``).
        """
        from services.workspace import Workspace, import_services

        hold_collector()  # the command held it from its start; a window made otherwise holds it from here
        try:
            await asyncio.to_thread(import_services)
            workspace = await Workspace.open(settings=self.settings)
            self._attach_workspace(workspace)
        finally:
            release_collector()

    def _attach_workspace(self, workspace: WorkspaceView) -> None:
        self.workspace = workspace
        collect_less_often()
        loop = asyncio.get_running_loop()

        def on_changes(changes: Sequence[Change]) -> None:  # any thread: one hop onto the loop, then batch
            try:
                running = asyncio.get_running_loop()
            except RuntimeError:
                running = None
            if running is loop:
                self._queue_changes(changes)
            elif not loop.is_closed():
                loop.call_soon_threadsafe(self._queue_changes, tuple(changes))

        self._unsubscribe = workspace.feed.subscribe(lambda change: on_changes((change,)), many=on_changes)
        self.main.post_message(WorkspaceOpened(workspace))
        if self.look_back:
            self.call_after_refresh(self.main.action_look_back, 0)
        attached = getattr(workspace, "attached", None)
        if attached is not None:  # another process serves this folder: this window shares its cloud
            self.notify(f"attached to {attached.url}: this window shares the served cloud", title="Attached",
                        markup=False, timeout=10)
        if self.record_path is not None:
            self.start_recording(self.record_path)
        server = getattr(workspace, "server", None)
        if server is not None:  # workbench --serve: where apps reach this workspace's cloud
            self.notify(f"serving {server.url} (control token in serve.json)", title="Served", markup=False,
                        timeout=10)

    def _queue_changes(self, changes: Sequence[Change]) -> None:
        """Queue changes for the next ``ServicesChanged``; a run's events are named once a batch (the
        panes read the events themselves from the desk), so a burst costs the panes one change."""
        from services.changes import RunEvents  # imported by then: the workspace that publishes is open

        self.changes_seen += len(changes)
        pending, runs = self._pending_changes, self._event_runs
        if isinstance(changes, RunEvents) and changes.source == "cloud":  # a run's burst: one step
            if changes and changes.run_id not in runs:
                runs.add(changes.run_id)
                pending.append(changes[0])
            changes = ()
        for change in changes:
            if change.kind == "run.event" and change.source == "cloud":
                if change.id in runs:
                    continue
                runs.add(change.id)
            pending.append(change)
        if not self._flush_queued:
            self._flush_queued = True
            asyncio.get_running_loop().call_soon(self._flush_changes)

    def _flush_changes(self) -> None:
        self._flush_queued = False
        batch, self._pending_changes = tuple(self._pending_changes), []
        self._event_runs = set()
        if batch and self.is_running:
            self.main.post_message(ServicesChanged(batch))

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None:
        """Every toast is plain text: sanitised, clipped and never parsed as markup, whoever calls it."""
        super().notify(safe(message, TOAST_CAP), title=safe(title, 120), severity=severity, timeout=timeout,
                       markup=False)

    def show_open_error(self, error: BaseException) -> None:
        """The workspace cannot open: one screen names the file, the cause and what to do."""
        from services.open_errors import WorkspaceOpenError, open_error

        if not isinstance(error, WorkspaceOpenError):
            path = self.settings.path
            error = open_error(error, path, path)
        self.open_error = error
        self.errors.append(error_text(error))
        log_error(self, error_text(error), error)
        self.main.query_one("#badges", BadgeBar).status = "cannot open the workspace"
        if not any(isinstance(screen, OpenErrorScreen) for screen in self.screen_stack):
            self.push_screen(OpenErrorScreen(error))

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        from textual.worker import WorkerState

        if event.state == WorkerState.ERROR and event.worker.error is not None:
            if event.worker.group == "workspace":
                self.show_open_error(event.worker.error)
            else:
                self.report_error(event.worker.error)

    async def _dispatch_action(self, namespace: DOMNode, action_name: str,
                               params: Any) -> bool:  # Any: Textual's own signature (the parsed action arguments)
        """Every action passes here (keys, palette, clicks): read-only mode refuses those that change state,
        and a pane's action is refused while the pane shows its rows from before (``MainScreen.stale``)."""
        main = next((screen for screen in self.screen_stack if isinstance(screen, MainScreen)), None)
        if main is not None and main.stale and _in_pane(namespace):
            main.refuse_stale()
            return True
        if self.read_only:
            refusal = load(self, "workbench.readonly", "refusal", what="The read-only check")
            reason = refusal(namespace, action_name) if refusal is not None else "this action cannot be checked"
            if reason is not None:
                notify_plain(self, reason, title="Read-only", severity="warning", timeout=4)
                return True
        return await super()._dispatch_action(namespace, action_name, params)

    def save_view(self, pane: str, text: str) -> None:
        """``ctrl+s`` in a pane: save its filter as a named view in the settings file (``views.py``)."""
        from .views import ask_to_save_view

        ask_to_save_view(self, pane, text)

    def default_views(self) -> list[tuple[str, str]]:
        """``(pane, filter)`` of the saved views applied when the window opens."""
        from .views import default_views

        return default_views(self)

    def action_screenshot(self, filename: str | None = None, path: str | None = None) -> None:
        """``S``: an SVG of the screen, without its toasts, into the workspace's ``screenshots/`` (the path is shown)."""
        take_screenshot = load(self, "workbench.screenshot", "take_screenshot", what="The screenshot")
        if take_screenshot is not None:
            take_screenshot(self)

    def deliver_screenshot(self, filename: str | None = None, path: str | None = None,
                           time_format: str | None = None) -> str | None:
        """The palette's "Screenshot" writes into the workspace too (never a Downloads folder that may not exist);
        the file is written by a worker, and its path is said in a toast."""
        take_screenshot = load(self, "workbench.screenshot", "take_screenshot", what="The screenshot")
        if take_screenshot is not None:
            take_screenshot(self)
        return None

    async def action_quit(self) -> None:
        """Quit; with status 2 when the workspace could not open. With work in flight
        (``work_in_flight``) it asks first, unless the settings say ``confirm_quit = false``."""
        if self.open_error is not None:
            self.exit(return_code=OPEN_FAILED_STATUS)
            return
        from screens.dialogs import ConfirmDialog, wants_confirmation

        work = self.work_in_flight() if wants_confirmation(self, "quit") else []
        if not work:
            self.leave()
            return
        if isinstance(self.screen, ConfirmDialog):  # already asking
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self.leave()
        self.push_screen(ConfirmDialog(f"Quit with work in flight? {'; '.join(work)}. (confirm_quit = false in "
                                       "the settings quits without asking)"), answered)

    def leave(self) -> None:
        """Exit with status 0, keeping what the panes show for the next start's first frame."""
        try:
            self.main.keep_snapshot()
        except Exception as error:  # a snapshot that cannot be kept never holds the window open
            log_error(self, f"the panes' snapshot was not kept: {error_text(error)}", error)
        self.exit(return_code=0)

    def work_in_flight(self) -> list[str]:
        """What quitting now would cut short, in words: operator actions still on their way to the
        services, and, on the embedded cloud (it lives in memory and ends with the window), runs
        whose turn is in progress."""
        from textual.worker import WorkerState

        work = []
        actions = sum(1 for w in self.workers if w.group == "actions"
                      and w.state in (WorkerState.PENDING, WorkerState.RUNNING))
        if actions:
            work.append(f"{actions} action{'' if actions == 1 else 's'} on {'its' if actions == 1 else 'their'} way")
        workspace = self.workspace
        if workspace is not None and workspace.attached is None and workspace.server is None:
            running = sum(1 for run in workspace.desk.runs() if run.status == "running")
            if running:
                work.append(f"{running} run{'' if running == 1 else 's'} with a turn in progress on the embedded "
                            "cloud (it lives in memory: the turn is lost)")
        return work

    @work(group="recording", exclusive=True, exit_on_error=False)
    async def start_recording(self, path: Path) -> None:
        """Record this window's session into ``path`` (``--record``)."""
        start_app_recording = load(self, "workbench.record_window", "start_app_recording", what="Recording")
        if start_app_recording is not None:
            await start_app_recording(self, path)

    @work(group="recording", exclusive=True, exit_on_error=False)
    async def toggle_recording(self) -> None:
        """The palette's "Start recording" / "Stop recording"."""
        toggle_recording = load(self, "workbench.record_window", "toggle_recording", what="Recording")
        if toggle_recording is not None:
            await toggle_recording(self)

    async def on_unmount(self) -> None:
        from .log import stop_log

        if self.recorder is not None:  # the end line is written before the workspace closes
            from .record_window import stop_app_recording

            await stop_app_recording(self)
        stop_log(self)
        if self._unsubscribe is not None:
            self._unsubscribe()
        if self._owns_workspace and self.workspace is not None and not self.close_after_run:
            await self.workspace.close()

    close_after_run = False
    """The caller closes the Workspace once ``run_async`` returned, the terminal restored first
    (``run_window``); otherwise the App closes it as it unmounts."""

    async def close_workspace(self) -> None:
        """Close the Workspace this App opened (``run_window`` calls it after the terminal is restored)."""
        workspace, self.workspace = self.workspace, None
        if self._owns_workspace and workspace is not None:
            await workspace.close()


def _in_pane(node: DOMNode | None) -> bool:
    """Whether ``node`` is a pane or inside one."""
    from screens.main import pane_base

    base = pane_base()
    while node is not None:
        if isinstance(node, base):
            return True
        node = node.parent
    return False


def make_app(settings: Settings | None = None, workspace: WorkspaceView | None = None, *,
             config: UserConfig | None = None, read_only: bool = False, layout: str | None = None,
             log: Path | None = None, record: Path | None = None, look_back: bool = False) -> WorkbenchApp:
    """The one factory the CLI, the demo and the tests build the App with (``look_back``: the window
    opens in time mode, as ``workbench replay FILE --inspect`` shows a replay's end state)."""
    app = WorkbenchApp(workspace=workspace, settings=settings)
    app.look_back = look_back
    app.config = config
    app.read_only = read_only or bool(getattr(config, "read_only", False))
    app.layout = layout or getattr(config, "layout", None)
    app.log_path = log
    app.record_path = record
    return app


def run_window(app: WorkbenchApp) -> NoReturn:
    """Run the window in this terminal and end the process quickly once it is left: the screen is
    restored first, then the services close (at most ``CLOSE_WITHIN`` seconds), then the process
    ends without tearing its modules down one by one (the exit status is the App's)."""
    import logging
    import os
    import sys

    async def run() -> None:
        app.close_after_run = True
        try:
            await app.run_async()
        finally:
            try:
                await asyncio.wait_for(app.close_workspace(), CLOSE_WITHIN)
            except TimeoutError:  # what did not finish is left as after a kill
                pass
            except Exception as error:  # the terminal is the operator's again: one line says so
                print(f"workbench: the workspace did not close cleanly: {error_text(error)}", file=sys.stderr)

    asyncio.run(run())
    code = app.return_code or 0
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
