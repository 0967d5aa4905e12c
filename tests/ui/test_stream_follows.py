"""A stream that says ``following`` shows the run's last event after every change of run, view or
width: the rows it replaces never leave it at an earlier scroll offset."""

from __future__ import annotations

from typing import Any

from screens.widgets.stream import EventStream
from tests.ui.conftest import ready, run_named, settle, show_run


def _stream(pilot: Any) -> EventStream:
    stream = pilot.app.main.query_one("#runs-stream", EventStream)
    stream.flush()
    return stream


async def _drawn(pilot: Any) -> EventStream:
    await settle(pilot)
    stream = _stream(pilot)
    await pilot.pause()
    return stream


def _shows_the_end(stream: EventStream) -> bool:
    """The last row is on screen (the list is scrolled to its end)."""
    rows, height = stream.line_count, stream.scrollable_content_region.height
    return rows <= height or stream.scroll_offset.y >= rows - height


async def test_following_shows_the_last_event_after_a_change_of_run_view_or_width(app: Any) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        ws = await ready(pilot)
        short, long = run_named(ws, "talk outline"), run_named(ws, "garden plan")
        fake = ws.cloud.runs.get(long.id)
        fake.emit_many([("node.output_text.done", {"text": f"line {i}", "entry_id": f"l{i}"}) for i in range(1000)])
        pane = await show_run(pilot, long.id)
        stream = await _drawn(pilot)
        assert pilot.app.main.query_one("#stream-state").render().plain.startswith("following")
        assert stream.line_count > 1000 and _shows_the_end(stream)
        for _ in range(2):
            for run in (short, long, short, long):
                pane.select_key(run.id)
                stream = await _drawn(pilot)
                assert _shows_the_end(stream), (run.name, pane.raw, stream.scroll_offset, stream.line_count)
            await pilot.press("v")  # the raw view, then back to the conversation
            stream = await _drawn(pilot)
            assert _shows_the_end(stream), (pane.raw, stream.scroll_offset, stream.line_count)
        await pilot.press("w")  # unwrapped: the rows change width
        stream = await _drawn(pilot)
        assert _shows_the_end(stream)
        await pilot.resize_terminal(90, 30)
        stream = await _drawn(pilot)
        assert _shows_the_end(stream)


async def test_a_paused_stream_keeps_its_place_while_following_resumes_at_the_end(app: Any) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        ws = await ready(pilot)
        long = run_named(ws, "garden plan")
        ws.cloud.runs.get(long.id).emit_many(
            [("node.output_text.done", {"text": f"line {i}", "entry_id": f"l{i}"}) for i in range(300)])
        await show_run(pilot, long.id)
        stream = await _drawn(pilot)
        stream.scroll_home(animate=False, immediate=True)
        await pilot.press("p")  # paused: what the operator scrolled to stays
        stream = await _drawn(pilot)
        assert stream.scroll_offset.y == 0
        await pilot.press("p")  # following again: the end
        stream = await _drawn(pilot)
        assert _shows_the_end(stream)
