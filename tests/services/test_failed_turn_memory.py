"""A failed turn is not stored in memory as speech: the seed captures what was said (issue 37)."""

from __future__ import annotations

from services.follower import turn_messages


def test_a_failed_turn_keeps_the_input_and_adds_no_message_of_its_own() -> None:
    events = [
        {"type": "node.turn.started", "entry_id": "e1", "input": {"text": "Plan the bee inspection"}},
        {"type": "node.turn.completed", "entry_id": "e1", "stop_reason": "error",
         "error": {"code": "model_error", "message": "overloaded"}},
    ]
    assert turn_messages(events, events[-1]) == [{"role": "user", "text": "Plan the bee inspection"}]


def test_a_completed_turn_keeps_both_sides() -> None:
    events = [
        {"type": "node.turn.started", "entry_id": "e1", "input": {"text": "hello"}},
        {"type": "node.output_text.done", "entry_id": "e1", "text": "hi"},
        {"type": "node.turn.completed", "entry_id": "e1", "stop_reason": "completed"},
    ]
    assert turn_messages(events, events[-1]) == [{"role": "user", "text": "hello"}, {"role": "assistant", "text": "hi"}]
