"""The recall tools (search, chat, remember) and their ``Honcho unavailable`` errors."""

from __future__ import annotations

import pytest

from services.knowledge.outbox import MemoryOutbox, OutboxError, RecallToolError

from .conftest import turn


async def _delivered(outbox: MemoryOutbox) -> None:
    await outbox.capture_turn("run_1", "user:o1", turn("I love sourdough pizza", "noted"))
    await outbox.capture_turn("run_2", "user:o1", turn("my cat is called Miso", "cute"))
    await outbox.sweep()


async def test_search_finds_the_owners_messages_across_conversations(outbox: MemoryOutbox) -> None:
    await _delivered(outbox)
    hits = await outbox.search("run_2", "pizza")
    assert [h["content"] for h in hits] == ["I love sourdough pizza"]
    assert hits[0]["conversation"] == "run_1"


async def test_chat_answers_deterministically_and_says_it_is_a_fake(outbox: MemoryOutbox) -> None:
    await _delivered(outbox)
    await outbox.remember("run_1", "prefers Miso's vet on Tuesdays")
    answer = await outbox.chat("run_1", "what is the cat called? Miso")
    assert answer.startswith("[fake Honcho: a deterministic answer, no model]")
    assert "my cat is called Miso" in answer and "1 conclusion:" in answer
    assert answer == await outbox.chat("run_1", "what is the cat called? Miso")


async def test_remember_makes_a_user_level_conclusion(outbox: MemoryOutbox, fake, seen) -> None:
    await _delivered(outbox)
    conclusion = await outbox.remember("run_1", "allergic to peanuts")
    assert conclusion["session_id"] is None
    stored = fake.stored_conclusions()
    assert [(c["content"], c["observer_id"], c["session_id"]) for c in stored] == [
        ("allergic to peanuts", "assistant", None)]
    assert stored[0]["observed_id"] == outbox.settings.peer_for_owner("user:o1")
    assert any(c.kind == "memory.remembered" for c in seen)


async def test_tools_establish_an_unknown_conversation_first(outbox: MemoryOutbox, fake) -> None:
    assert await outbox.search("run_new", "anything") == []
    assert outbox.stores.read_ledger("run_new")["sessionId"] == "conv-run_new"


@pytest.mark.parametrize("fault", ["down", "500"])
@pytest.mark.parametrize("tool", ["search", "chat", "remember"])
async def test_failures_read_honcho_unavailable(outbox: MemoryOutbox, fake, fault, tool) -> None:
    await _delivered(outbox)
    if fault == "down":
        fake.go_down()
    else:
        fake.fail_next(500)
    call = {"search": lambda: outbox.search("run_1", "pizza"), "chat": lambda: outbox.chat("run_1", "pizza"),
            "remember": lambda: outbox.remember("run_1", "a fact")}[tool]
    with pytest.raises(RecallToolError) as info:
        await call()
    message = str(info.value)
    assert message.startswith("memory-honcho: Honcho unavailable (") and message.endswith(")")
    assert ("cannot reach Honcho" if fault == "down" else "HTTP 500") in message
    assert message in outbox.errors
    assert fake.stored_conclusions() == []


async def test_tool_failure_during_establish_reads_honcho_unavailable(outbox: MemoryOutbox, fake) -> None:
    fake.go_down()
    with pytest.raises(RecallToolError, match=r"^memory-honcho: Honcho unavailable \("):
        await outbox.search("run_never_seen", "x")


@pytest.mark.parametrize(("tool", "arg"), [("search", " "), ("chat", ""), ("remember", "")])
async def test_empty_tool_input_is_refused(outbox: MemoryOutbox, tool, arg) -> None:
    with pytest.raises(OutboxError, match="empty"):
        await getattr(outbox, tool)("run_1", arg)
