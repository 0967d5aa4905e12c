"""A capture that fails (an OKF run record, an outbox turn) is a badge in the header until it succeeds.

The outbox failure is a full disk at the OS boundary: ``os.write`` raises ENOSPC for the outbox's
own files only.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest

from services.knowledge.okf import OkfError
from tests.ui.conftest import quiet, ready, settle


def badge(app: Any) -> str:
    return app.main.query_one("#badges").render().plain


async def test_failed_captures_show_a_badge_until_they_succeed(app, monkeypatch) -> None:
    async with app.run_test(size=(160, 48)) as pilot:
        ws = await ready(pilot)
        assert "capture" not in badge(app)
        source = (await ws.okf.sources())[0]
        with pytest.raises(OkfError):
            await ws.okf.capture_record(source.id, {"thread": "", "turns": []})
        await settle(pilot)
        assert app.main.query_one("#badges").captures == 1
        assert "✗ 1 capture failed" in badge(app)
        assert [f.source for f in ws.capture_failures()] == ["okf"]

        run_id = next(v.id for v in ws.desk.runs() if v.user_id == "user:ada" and not v.deleted)
        outbox = str(ws.path / "memory")
        real_write = os.write

        def full_disk(fd: int, data: Any) -> int:
            if os.readlink(f"/proc/self/fd/{fd}").startswith(outbox):
                raise OSError(errno.ENOSPC, "No space left on device")
            return real_write(fd, data)

        capture_file = ws.path / "memory" / "data" / "outbox" / "capture.jsonl"
        lines_before = capture_file.read_bytes()
        monkeypatch.setattr(os, "write", full_disk)
        await ws.desk.reply(run_id, "a reply the outbox cannot take")
        await quiet(pilot)
        assert sorted(f.source for f in ws.capture_failures()) == ["okf", "outbox"]
        assert "✗ 2 captures failed" in badge(app)
        failure = next(f for f in ws.capture_failures() if f.source == "outbox")
        assert failure.id == run_id and "No space left on device" in failure.error
        assert capture_file.read_bytes() == lines_before  # nothing half written, nothing lost

        monkeypatch.setattr(os, "write", real_write)
        await ws.okf.capture_record(source.id, {"thread": "t-good", "turns": [
            {"id": "1", "role": "user", "text": "We decided the badge clears when a capture succeeds."}]})
        await ws.desk.reply(run_id, "a reply the outbox takes")
        await quiet(pilot)
        assert ws.capture_failures() == []
        assert "capture" not in badge(app)
        assert app.is_running


async def test_a_refused_note_is_a_capture_badge_until_a_clean_capture(app) -> None:
    async with app.run_test(size=(160, 48)) as pilot:
        ws = await ready(pilot)
        source = (await ws.okf.sources())[0]
        bad = Path(source.home) / "notes" / "refused.md"
        bad.write_bytes(b"We decided this \x00 note cannot be stored.\n")
        await ws.okf.capture_now(source.id)
        await settle(pilot)
        assert "✗ 1 capture failed" in badge(app)
        assert "refused" in ws.capture_failures()[0].error
        assert bad.read_bytes() == b"We decided this \x00 note cannot be stored.\n"  # left in the home as it was
        bad.unlink()
        await ws.okf.capture_now(source.id)
        await quiet(pilot)
        assert ws.capture_failures() == [] and "capture" not in badge(app)
