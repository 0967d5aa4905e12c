"""Hostile text through a run, a document and an error: shown verbatim (controls as visible escapes), harmless."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual.widgets import Markdown

from screens.widgets.stream import EventStream
from tests.ui.conftest import ready, settle

HOSTILE = "[bold]x[/] [@click=app.quit]q[/] [link=https://evil]c[/link] $v [$x] [[n]] [x [y] z] a\\ " \
          "\x1b]0;PWNED\x07 \x1b[2J \x1b]52;c;Zm9v\x07 \x9b31m \x00 \x7f done"
SHOWN = "[bold]x[/] [@click=app.quit]q[/] [link=https://evil]c[/link] $v [$x] [[n]] [x [y] z] a\\ " \
        "␛]0;PWNED␇ ␛[2J ␛]52;c;Zm9v␇ \\x9b31m ␀ ␡ done"
BIG = "A" * (1024 * 1024)


def no_controls(text: str) -> bool:
    return not any(ch in text for ch in ("\x1b", "\x9b", "\x00", "\x7f", "\x07"))


async def test_hostile_run_text_and_a_1_mib_line_render_verbatim_and_harmless(app) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        ws = await ready(pilot)
        # hostile text comes from outside: an app's prompt through the SDK, a model's replies from the
        # runtime (the operator's desk refuses NUL and lone surrogates in what it sends)
        async with ws.cloud.crouter("user:ada") as client:
            run_id = (await client.runs.start(prompt=HOSTILE)).id
        ws.cloud.runs.get(run_id).reply(HOSTILE)
        ws.cloud.runs.get(run_id).reply(BIG)
        pane = app.main.pane("runs")
        pane.select_key(run_id)
        await settle(pilot)
        stream = app.main.query_one("#runs-stream", EventStream)
        stream.flush()
        lines = stream.shown
        assert any(line.endswith(f"model: {SHOWN}") for line in lines)
        assert any(f"» turn: {SHOWN}" in line for line in lines)
        big = [line for line in lines if "AAAA" in line]
        assert big and all(len(line) < 3_000 and "more characters]" in line for line in big)
        assert all(no_controls(line) for line in lines)
        info = str(app.main.query_one("#run-info").render())
        assert no_controls(info) and "[bold]x[/]" in info
        svg = app.export_screenshot()
        assert no_controls(svg)
        assert "␛]0;PWNED␇" in svg or "&#9243;]0;PWNED" in svg
        await pilot.press("v")  # still answering keys after the 1 MiB line
        await settle(pilot)
        assert pane.raw
        assert app.is_running and app.return_code is None
        await error_case(pilot, app, ws)


async def test_hostile_document_and_note_render_verbatim(app) -> None:
    # the canvas refuses NUL outright and note capture skips a note holding one: the rest is hostile enough
    stored, shown = HOSTILE.replace("\x00", ""), SHOWN.replace("␀", "")
    async with app.run_test(size=(120, 40)) as pilot:
        ws = await ready(pilot)
        doc = await ws.canvas.write("notes/hostile", preview="When testing, read this because " + stored,
                                    body="# Hostile\n\n" + stored + "\n\n" + BIG, owner="user:ada")
        await pilot.press("1")
        pane = app.main.pane("canvas")
        pane.select_key(doc.object.id)
        await settle(pilot)
        meta = str(app.main.query_one("#canvas-meta").render())
        assert shown in meta and no_controls(meta)
        body = app.main.query_one("#canvas-body", Markdown)
        assert body.source is not None and no_controls(body.source) and "␛]0;PWNED␇" in body.source
        assert len(body.source) < 70_000
        assert no_controls(app.export_screenshot())
        source = (await ws.okf.sources())[0]
        before = {i.id for i in await ws.okf.queue()}
        (Path(source.home) / "notes" / "hostile.md").write_text(
            "We decided to keep this because " + stored + "\n", encoding="utf-8")
        await ws.okf.capture_now(source.id)
        judgment = next(i for i in await ws.okf.queue() if i.id not in before)
        await pilot.press("5")
        app.main.pane("judgments").select_key(f"okf:{judgment.id}")
        await settle(pilot)
        text = str(app.main.query_one("#judgment-text").render())
        assert shown in text and no_controls(text)
        assert no_controls(app.export_screenshot())
        await pilot.press("3")
        await settle(pilot)
        assert app.main.active == "runs"


async def error_case(pilot: Any, app: Any, ws: Any) -> None:
    pane: Any = app.main.pane("runs")
    pane.act("never", lambda: ws.desk.reply(HOSTILE, "x"))
    await settle(pilot)
    assert app.errors == [f"no run {SHOWN}"]
    assert app.is_running
