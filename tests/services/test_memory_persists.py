"""The embedded memory service keeps its state in the workspace: after a restart the memory view still
shows what the outbox counts as delivered, and search finds it (issue 37)."""

from __future__ import annotations

from pathlib import Path

from services.clock import FakeClock
from services.workspace import Settings, Workspace


async def test_memory_delivered_before_a_restart_is_read_and_found_after_it(tmp_path: Path) -> None:
    settings = Settings(path=tmp_path / "ws", clock=FakeClock())
    workspace = await Workspace.open(settings=settings)
    try:
        await workspace.outbox.capture_turn("conv_persist", "user:ada", [
            {"role": "user", "text": "When do the hives get their spring inspection?"},
            {"role": "assistant", "text": "The hives get their spring inspection on a warm April morning."}])
        result = await workspace.outbox.sweep()
        assert result.delivered_records >= 1
        before = await workspace.outbox.read_honcho(session_id="conv-conv_persist", query="spring inspection")
        assert before.error is None and before.messages_total == 2 and before.found
    finally:
        await workspace.close()

    reopened = await Workspace.open(settings=settings)
    try:
        status = await reopened.outbox.status()
        delivered = sum(c.delivered for c in status.conversations if c.conversation_id == "conv_persist")
        assert delivered >= 1  # the outbox still counts them as delivered
        after = await reopened.outbox.read_honcho(session_id="conv-conv_persist", query="spring inspection")
        assert after.error is None
        assert "conv-conv_persist" in {s.id for s in after.sessions}
        assert after.messages_total == 2
        assert [m.content for m in after.messages] == [m.content for m in before.messages]
        assert {m.content for m in after.found} == {m.content for m in before.found}
    finally:
        await reopened.close()
    assert (tmp_path / "ws" / "memory" / "honcho.db").is_file()
