"""Every runs key through the real App, asserting on the real runs afterwards."""

from __future__ import annotations

from typing import Any

from rich.cells import cell_len

from screens.widgets.stream import INDENT, EventStream, wrap_line
from tests.toasts import raised
from tests.ui.conftest import ready, settle, type_text


def run_named(ws: Any, name: str) -> Any:
    return next(r for r in ws.desk.runs() if r.name == name)


async def select(pilot: Any, run_id: str) -> Any:
    pane = pilot.app.main.pane("runs")
    pane.select_key(run_id)
    pane.focus_main()
    await settle(pilot)
    assert pane.selected == run_id
    return pane


def stream_text(pilot: Any) -> str:
    stream = pilot.app.main.query_one("#runs-stream", EventStream)
    stream.flush()
    return "\n".join(stream.shown)


async def test_r_replies_as_the_model_attributed_and_f_fails_the_turn(app) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        ws = await ready(pilot)
        run = run_named(ws, "talk outline")
        await select(pilot, run.id)
        await pilot.press("r")
        await settle(pilot)
        await type_text(pilot, "Three points on compilers")
        await pilot.press("ctrl+s")
        await settle(pilot)
        fake = ws.cloud.runs.get(run.id)
        assert fake.events[-2]["type"] == "node.output_text.done"
        assert fake.events[-2]["text"] == "Three points on compilers"
        assert fake.status == "idle"
        assert [(a.action, a.by) for a in ws.desk.log(run.id)][-1] == ("reply", "operator")
        text = stream_text(pilot)
        assert "model ⚙ operator: Three points on compilers" in text  # one line: the reply, attributed
        assert "reply: Three points on compilers" not in text
        await fail_turn_case(pilot, app, ws)


async def fail_turn_case(pilot: Any, app: Any, ws: Any) -> None:
    run = run_named(ws, "garden plan")
    await select(pilot, run.id)
    await pilot.press("f")
    await settle(pilot)
    await pilot.press("tab")  # from the code choice to the message
    await type_text(pilot, "overloaded")
    await pilot.press("enter")
    await settle(pilot)
    fake = ws.cloud.runs.get(run.id)
    assert fake.last_turn_error == {"code": "model_error", "message": "overloaded"}
    assert "✗ turn failed: model_error: overloaded" in stream_text(pilot)


async def test_a_asks_i_idles_s_settles_and_d_deletes_after_confirmation(app) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        ws = await ready(pilot)
        run = run_named(ws, "patch review")
        await select(pilot, run.id)
        await pilot.press("a")
        await settle(pilot)
        await type_text(pilot, "Merge it?")
        await pilot.press("enter")
        await settle(pilot)
        assert ws.cloud.runs.get(run.id).status == "waiting_on_user"
        assert ws.cloud.runs.get(run.id).question["title"] == "Merge it?"
        await pilot.press("i")  # an open question keeps the run waiting: refused, nothing appended
        await settle(pilot)
        assert ws.cloud.runs.get(run.id).events[-1]["type"] == "node.question.opened"
        assert any("stays waiting on user" in n.message for n in raised(app))
        await pilot.press("s")
        await settle(pilot)
        await pilot.press("tab")
        await type_text(pilot, "merged")
        await pilot.press("enter")
        await settle(pilot)
        fake = ws.cloud.runs.get(run.id)
        assert fake.status == "settled" and fake.result == "merged"
        assert [a.action for a in ws.desk.log(run.id)] == ["ask", "settle"]
        await delete_case(pilot, app, ws)


async def test_e_emits_an_event_and_bad_json_is_a_clear_error(app) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        ws = await ready(pilot)
        run = run_named(ws, "patch review")
        await select(pilot, run.id)
        await pilot.press("e")
        await settle(pilot)
        await type_text(pilot, "node.activity")
        await pilot.press("tab")
        await type_text(pilot, '{"activity":"tool"}')
        await pilot.press("tab")
        await type_text(pilot, "reviewer-1")
        await pilot.press("enter")
        await settle(pilot)
        event = ws.cloud.runs.get(run.id).events[-1]
        assert (event["type"], event["activity"], event["node_id"]) == ("node.activity", "tool", "reviewer-1")
        await bad_emit_case(pilot, app, ws)


async def bad_emit_case(pilot: Any, app: Any, ws: Any) -> None:
    run = run_named(ws, "patch review")
    before = len(ws.cloud.runs.get(run.id).events)
    await select(pilot, run.id)
    await pilot.press("e")
    await settle(pilot)
    await type_text(pilot, "custom.thing")
    await pilot.press("tab")
    await type_text(pilot, "{nope")
    await pilot.press("enter")
    await settle(pilot)
    error = app.screen.query_one("#form-error")  # the dialog stays open with the problem inline
    assert "not JSON" in str(error.render())
    await pilot.press("escape")
    await settle(pilot)
    assert len(ws.cloud.runs.get(run.id).events) == before
    assert app.is_running


async def delete_case(pilot: Any, app: Any, ws: Any) -> None:
    run = run_named(ws, "garden plan")
    await select(pilot, run.id)
    await pilot.press("d")
    await settle(pilot)
    await pilot.press("n")
    await settle(pilot)
    assert not ws.cloud.runs.get(run.id).deleted
    await pilot.press("d")
    await settle(pilot)
    await pilot.press("y")
    await settle(pilot)
    assert ws.cloud.runs.get(run.id).deleted
    assert run.id not in [r.id for r in ws.desk.runs()]


async def test_n_m_x_go_through_the_sdk_as_the_app(app) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        ws = await ready(pilot)
        pane = app.main.pane("runs")
        pane.focus_main()
        await pilot.press("n")
        await settle(pilot)
        await pilot.press("tab")
        await type_text(pilot, "Book a table")
        await pilot.press("enter")
        await settle(pilot)
        started = [r for r in ws.desk.runs() if r.prompt == "Book a table"]
        assert len(started) == 1 and started[0].user_id == "user:ada"
        run_id = started[0].id
        assert pane.selected == run_id
        ops = [c.op for c in ws.cloud.calls]
        assert "run.start" in ops
        await pilot.press("m")
        await settle(pilot)
        await type_text(pilot, "for two")
        await pilot.press("enter")
        await settle(pilot)
        assert [m["text"] for m in ws.cloud.runs.get(run_id).messages] == ["for two"]
        await pilot.press("x", "y")  # x asks first, naming the run
        await settle(pilot)
        assert ws.cloud.runs.get(run_id).outcome["outcome"] == "canceled"
        assert [(a.action, a.by) for a in ws.desk.log(run_id)] == [("start", "app"), ("message", "app"), ("cancel", "app")]
        text = stream_text(pilot)
        assert text.count("for two") == 1 and "app → message: for two" in text  # one line, the app's
        assert "⚙ app · start: Book a table" in text


async def test_p_pauses_with_a_new_counter_and_v_toggles_raw_events(app) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        ws = await ready(pilot)
        run = run_named(ws, "talk outline")
        pane = await select(pilot, run.id)
        stream = app.main.query_one("#runs-stream", EventStream)
        await pilot.press("p")
        await settle(pilot)
        assert stream.paused
        shown = len(stream.shown)
        await ws.desk.reply(run.id, "while paused")
        await settle(pilot)
        assert stream.held >= 1
        assert len(stream.shown) == shown
        assert f"+{stream.held} new" in str(app.main.query_one("#stream-state").render())
        await pilot.press("p")
        await settle(pilot)
        stream.flush()
        assert not stream.paused and stream.held == 0
        assert any("model ⚙ operator: while paused" in line for line in stream.shown)
        await pilot.press("v")
        await settle(pilot)
        stream.flush()
        assert pane.raw
        assert any("node.output_text.delta" in line for line in stream.shown)
        await wrap_case(pilot, stream)
        await pilot.press("o")
        await settle(pilot)
        assert type(app.screen).__name__ == "DetailDialog"
        body = str(app.screen.query_one("#detail-body").render())
        assert '"type": "node.turn.completed"' in body
        await pilot.press("left")
        await settle(pilot)
        assert '"type": "node.output_text.done"' in str(app.screen.query_one("#detail-body").render())
        await pilot.press("escape")


async def test_a_refusal_in_the_stream_links_to_its_grant(app) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        ws = await ready(pilot)
        run = run_named(ws, "talk outline")
        await select(pilot, run.id)
        await ws.desk.revoke("user:grace", "grant_removed")
        await pilot.press("m")
        await settle(pilot)
        await type_text(pilot, "hello")
        await pilot.press("enter")
        await settle(pilot)
        assert any("grant_removed" in e for e in app.errors)
        assert "grant_removed" in str(app.screen.query_one("#form-error").render())  # said in the form, still open
        await pilot.press("escape")
        await settle(pilot)
        rev = ws.cloud.user("user:grace").grant.state["rev"]
        assert "‼ refused grant_removed" in stream_text(pilot)
        assert f"grant of user:grace at rev {rev}" in stream_text(pilot)
        assert app.main.query_one("#badges").refusals == 1
        await pilot.press("g")
        await settle(pilot)
        assert app.main.active == "grants"
        assert app.main.pane("grants").selected == "user:grace"


async def wrap_case(pilot: Any, stream: EventStream) -> None:
    """Raw events are wider than the stream: wrapped (the default) they fill more rows, none too wide;
    ``w`` writes them one row each; ``shown`` is the same lines either way."""
    width = stream.content_region.width
    written = stream.shown
    assert stream.wrap and any(cell_len(line) > width for line in written)
    assert stream.line_count > len(written)
    assert all(cell_len(row) <= width for row in stream.lines)
    await pilot.press("w")
    await settle(pilot)
    assert not stream.wrap and stream.line_count == len(written) and stream.shown == written
    assert "unwrapped" in str(pilot.app.main.query_one("#stream-state").render())
    await pilot.press("w")
    await settle(pilot)
    assert stream.wrap and stream.line_count > len(written)


def test_wrap_line_keeps_every_row_within_the_width_and_loses_nothing() -> None:
    plain = "12:00:00 model: " + "a fairly long sentence with words " * 6 + "x" * 90
    wide = plain + "日本語のテキスト" * 5
    for line in (plain, wide):
        for width in (12, 20, 40, 79):
            rows = list(wrap_line(line, width))
            assert len(rows) > 1 and all(cell_len(row) <= width for row in rows)
            joined = "".join(row.removeprefix(INDENT) if i else row for i, row in enumerate(rows))
            assert joined.replace(" ", "") == line.replace(" ", "")
    assert list(wrap_line("short", 40)) == ["short"]
