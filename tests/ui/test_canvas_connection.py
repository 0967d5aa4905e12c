"""The canvas pane says so while the canvas server's change feed is down, and stops saying it once back."""

from __future__ import annotations

from textual.widgets import Static

from services.changes import Change

from .conftest import ready, settle


async def test_a_lost_canvas_server_connection_is_shown_until_it_is_restored(app) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        workspace = await ready(pilot)
        line = app.query_one("#canvas-connection", Static)
        assert not line.display
        workspace.feed.publish(Change("canvas", "canvas.connection.lost", "",
                                      {"error": "server closed the connection \x1b[31m[bold]x"}))
        await settle(pilot)
        shown = str(line.render())
        assert line.display and "connection lost" in shown and "reconnecting" in shown
        assert "\x1b" not in shown  # the server's words are sanitised
        workspace.feed.publish(Change("canvas", "canvas.connection.restored", "", {"reload": True}))
        await settle(pilot)
        assert not line.display
