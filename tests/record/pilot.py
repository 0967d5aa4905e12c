"""A scripted pilot session recorded the way an operator records one (``workbench --record FILE``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from services.clock import FakeClock
from services.record import app_client
from services.sdk import CrouterError
from services.workspace import Settings
from workbench.app import make_app

from ..ui.conftest import ready, settle

HOSTILE = "Plan [bold]Saturday[/] \x1b[31m\u202egnirehtaw"
"""A prompt full of markup, an escape sequence and a bidi override: stored and replayed as data."""


async def record_pilot_session(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    """Record runs, replies, a scripted failure, an app's SDK calls, a failed turn, a revoke and a
    restore, an approval and a settle in a window opened with ``--record``; answers the file and
    what the session saw (tokens the app held, the runs it made)."""
    path = tmp_path / "session.jsonl"
    app = make_app(Settings(path=tmp_path / "ws", clock=FakeClock()), record=path)
    seen: dict[str, Any] = {}
    async with app.run_test(size=(160, 48)) as pilot:
        ws = await ready(pilot)
        for _ in range(200):
            if app.recorder is not None:
                break
            await pilot.pause(0.02)
        assert app.recorder is not None, app.errors
        desk = ws.desk
        run_id = await desk.start_run("user:ada", HOSTILE)
        await desk.reply(run_id, "Water the south beds at 7:00 [red]now[/red]", chunks=2)
        await desk.control.call("POST", "/fail_next", {"op": "run.message", "answer": 503, "user": "user:ada",
                                                       "times": 1})
        oauth = app_client(ws)
        try:
            ada = await oauth.client("user:ada")
            made = await ada.runs.start(prompt="from the app")
            try:
                await ada.runs.message(made.id, "more please")
            except CrouterError as error:
                seen["scripted"] = error.status
            await ada.runs.message(made.id, "more please")
            await desk.fail_turn(made.id, "model_error", "the model timed out")
            grace = await oauth.client("user:grace")  # connected before the revocation
            await desk.revoke("user:grace", "grant_removed")
            try:
                await grace.runs.message("run_sample_talk", "Are you still there?")
            except CrouterError as error:
                seen["refused"] = error.status
            await desk.restore("user:grace")
            connection = await ws.store.get("user:ada")
            seen["tokens"] = [connection.access_token, connection.refresh_token]
        finally:
            await oauth.aclose()
        pending = await ws.insights.list("pending")
        await ws.insights.approve(pending[0].id, candidate=0)
        await settle(pilot)
        seen["insight"] = pending[0].proposal.title
        await desk.settle(run_id, "result", "watered")
        seen["runs"] = [run_id, made.id]
        await settle(pilot)
        await app.recorder.flush_calls()
    return path, seen
