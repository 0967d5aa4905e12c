"""Text that cannot be stored: captured turns and lines other programs wrote are repaired and flagged."""

from __future__ import annotations

import json

import pytest

from services.knowledge.outbox import MemoryOutbox, OutboxError

from .conftest import advancing, contents, turn


def _line(batch: str, content_json: str, conv: str = "run_js", created: str = "1800000000000") -> bytes:
    """A record line as another program writes it; ``content_json`` is raw JSON text."""
    return (f'{{"batchId":"{batch}","conversationId":"{conv}","owner":"u","status":"pending",'
            f'"createdAt":{created},"messages":[{{"role":"user","peerId":"u","content":{content_json},'
            f'"createdAt":{created}}}]}}\n').encode()


async def test_lone_surrogate_in_a_captured_turn_is_repaired_and_flagged_never_lost(outbox: MemoryOutbox, fake,
                                                                                  seen) -> None:
    half_emoji = "split \ud83d here"
    batch = await outbox.capture_turn("run_a", "owner\udc80", [{"role": "user", "text": half_emoji},
                                                              {"role": "assistant", "text": "nul\x00byte"}])
    [record] = outbox.stores.read_outbox().records
    assert record["batchId"] == batch
    assert [m["content"] for m in record["messages"]] == ["split \ufffd here", "nulbyte"]
    assert record["owner"] == "owner\ufffd"
    assert len(record["repaired"]) == 3 and "lone surrogate U+D83D" in " ".join(record["repaired"])
    assert any("stored repaired" in e for e in (await outbox.status()).errors)
    assert any(c.kind == "outbox.warning" for c in seen)
    result = await outbox.sweep()
    assert result.errors == [] and result.delivered_records == 1
    assert contents(fake) == ["split \ufffd here", "nulbyte"]
    assert all(m["metadata"]["repaired"] is True for m in fake.all_messages())


async def test_an_escaped_lone_surrogate_line_never_stops_compaction(outbox: MemoryOutbox, fake) -> None:
    """A valid JSON line holding ``"\\udc80"`` (as a JavaScript writer leaves it): read repaired,
    delivered, rewritten clean, and retention keeps running on every later sweep."""
    await outbox.capture_turn("run_a", "u", turn("before", "b"))
    with open(outbox.stores.outbox_path, "ab") as handle:
        handle.write(_line("b_js", '"cut \\udc80 emoji"'))
        handle.write(_line("b_nul", '"nul \\u0000 inside"'))
    snapshot = outbox.stores.read_outbox()
    assert snapshot.corrupt == [] and [n for n, _ in snapshot.repaired] == [2, 3]
    first = await outbox.sweep()
    assert first.repaired == 2 and first.delivered_records == 3 and first.rewrote
    assert sum("repaired outbox line" in e for e in first.errors) == 2
    assert contents(fake, "conv-run_js") == ["cut \ufffd emoji", "nul  inside"]
    assert outbox.stores.read_outbox().records == []
    # A pending one (the service down) is rewritten clean and flagged, and later sweeps run.
    with open(outbox.stores.outbox_path, "ab") as handle:
        handle.write(_line("b_late", '"late \\ud800"'))
    fake.fail_next(422)
    second = await outbox.sweep()
    assert second.repaired == 1 and second.rewrote
    raw = outbox.stores.outbox_path.read_bytes()
    assert b"\\u" not in raw and "late \ufffd".encode() in raw
    [kept] = outbox.stores.read_outbox().records
    assert kept["repaired"] and outbox.stores.read_outbox().repaired == []
    third = await outbox.sweep()
    assert third.errors == [] and third.delivered_records == 1
    assert contents(fake, "conv-run_js")[-1] == "late \ufffd"


async def test_bytes_that_are_not_utf8_in_a_record_line_are_repaired_not_quarantined(outbox: MemoryOutbox,
                                                                                      fake) -> None:
    with open(outbox.stores.outbox_path, "ab") as handle:
        handle.write(_line("b_latin1", '"caf\xe9"').replace("café".encode(), b"caf\xe9"))
    [record] = outbox.stores.read_outbox().records
    assert record["messages"][0]["content"] == "caf\ufffd" and record["repaired"]
    result = await outbox.sweep()
    assert result.quarantined == 0 and result.delivered_records == 1
    assert contents(fake) == ["caf\ufffd"]


@pytest.mark.parametrize("created", ["-1e300", "1e300", "-Infinity", "NaN"])
async def test_an_unshowable_record_time_never_stops_compaction(outbox: MemoryOutbox, fake, clock,
                                                                created: str) -> None:
    await outbox.capture_turn("run_a", "u", turn("fine", "f"))
    with open(outbox.stores.outbox_path, "ab") as handle:
        handle.write(_line("b_time", '"odd time"', conv="run_t", created=created))
    fake.go_down()  # nothing is delivered, so compaction has records to keep
    result = await advancing(clock, outbox.sweep())
    kept = {r["batchId"] for r in outbox.stores.read_outbox().records}
    if created == "-1e300":  # over retention: dropped with the seed's warning, its time shown as a number
        assert result.dropped_expired == 1 and "b_time" not in kept
        assert any("b_time" in e and "ms since the epoch" in e for e in result.errors)
    elif created == "1e300":  # a finite far-future time is a valid record, kept
        assert "b_time" in kept
    else:  # not a finite number: set aside into the quarantine file
        assert result.quarantined == 1 and "b_time" not in kept
    fake.come_up()
    later = await outbox.sweep()
    assert later.errors == [] and "fine" in contents(fake)
    assert ("odd time" in contents(fake)) == (created == "1e300")  # sent without a created_at
    assert outbox.stores.read_outbox().records == []


async def test_recall_tool_text_that_cannot_be_sent_is_refused_plainly(outbox: MemoryOutbox, fake) -> None:
    await outbox.capture_turn("run_a", "u", turn("q", "a"))
    await outbox.sweep()
    calls = len(fake.calls)
    with pytest.raises(OutboxError, match="search: the query holds a lone surrogate U\\+DC80"):
        await outbox.search("run_a", "what \udc80")
    with pytest.raises(OutboxError, match="remember: the fact holds a NUL"):
        await outbox.remember("run_a", "a\x00b")
    with pytest.raises(OutboxError, match="chat: the question"):
        await outbox.chat("run_a", "\ud800?")
    assert len(fake.calls) == calls  # refused before any call


async def test_a_js_written_ledger_with_an_escaped_surrogate_is_repaired_on_read(outbox: MemoryOutbox,
                                                                                 fake) -> None:
    await outbox.capture_turn("run_l", "u", turn("one", "1"))
    await outbox.sweep()
    path = outbox.stores.ledger_path("run_l")
    ledger = json.loads(path.read_text())
    ledger["owner"] = "\\udc80owner"
    path.write_text(json.dumps(ledger).replace("\\\\udc80", "\\udc80"))
    await outbox.capture_turn("run_l", "u", turn("two", "2"))
    result = await outbox.sweep()
    assert result.errors == [] and contents(fake, "conv-run_l") == ["one", "1", "two", "2"]
    assert outbox.stores.read_ledger("run_l")["owner"] == "\ufffdowner"
