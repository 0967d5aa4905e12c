"""The status index (``capture.idx``): the status view reads it instead of parsing the outbox, and
never believes it blindly: a corrupt, stale or lying index is noticed, the outbox parsed, the index rebuilt."""

from __future__ import annotations

import json
import os
from pathlib import Path

from services.honcho import FakeHonchoService
from services.knowledge.outbox import MemoryOutbox
from services.knowledge.outbox.index import OutboxSummary
from services.knowledge.outbox.stores import OutboxStores

from .conftest import turn


def _truth(stores: OutboxStores) -> dict[str, tuple[str, list[str]]]:
    """Owners and pending batch ids per conversation, from a full parse of the outbox."""
    out: dict[str, tuple[str, list[str]]] = {}
    for record in stores.read_outbox().records:
        owner, ids = out.setdefault(record["conversationId"], (record.get("owner") or "user", []))
        if record.get("status") != "delivered":
            ids.append(record["batchId"])
    return out


def _view(summary: OutboxSummary) -> dict[str, tuple[str, list[str]]]:
    return {conv: (summary.owners[conv], summary.pending.get(conv, [])) for conv in summary.owners}


async def _summary(outbox: MemoryOutbox) -> OutboxSummary:
    return await outbox.stores.locked(outbox.stores.read_summary)


async def _capture_some(outbox: MemoryOutbox, count: int) -> list[str]:
    return [await outbox.capture_turn(f"run_{i % 3}", f"user:o{i % 2}", turn(f"q{i}", f"a{i}")) for i in range(count)]


async def test_status_reads_the_index_and_parses_nothing_it_covers(outbox: MemoryOutbox) -> None:
    await _capture_some(outbox, 12)
    await outbox.deliver("run_1")
    await _capture_some(outbox, 2)
    first = await _summary(outbox)
    assert first.parsed_bytes == 0  # every append of this process is in the index
    assert _view(first) == _truth(outbox.stores)
    assert first.pending["run_1"] == [_truth(outbox.stores)["run_1"][1][-1]]  # the mark flipped the earlier ones
    status = await outbox.status()
    assert {r.conversation_id: r.pending for r in status.conversations} == {"run_0": 5, "run_1": 1, "run_2": 4}


async def test_a_new_process_reads_the_index_the_last_one_wrote(outbox: MemoryOutbox, root: Path, feed) -> None:
    ids = await _capture_some(outbox, 7)
    await outbox.aclose()  # closing writes the lines kept in memory
    again = await MemoryOutbox.open(root, feed, honcho_service=FakeHonchoService())
    try:
        summary = await _summary(again)
        assert summary.parsed_bytes == 0
        assert sorted(b for _, pending in _view(summary).values() for b in pending) == sorted(ids)
    finally:
        await again.aclose()


async def test_lines_another_program_appended_are_parsed_then_indexed(outbox: MemoryOutbox) -> None:
    await _capture_some(outbox, 3)
    await _summary(outbox)
    foreign = {"batchId": "b_js1", "conversationId": 42, "owner": "user:js", "status": "pending", "createdAt": 5,
               "messages": [{"role": "user", "peerId": "user_js", "content": "from node", "createdAt": 5}]}
    with open(outbox.stores.outbox_path, "ab") as handle:
        handle.write(json.dumps(foreign).encode() + b"\n{not json\n")
    await _capture_some(outbox, 1)
    summary = await _summary(outbox)
    assert summary.parsed_bytes > 0 and summary.corrupt == 1
    assert _view(summary) == _truth(outbox.stores) and summary.pending["42"] == ["b_js1"]
    again = await _summary(outbox)  # the parsed part is in the index now
    assert again.parsed_bytes == 0 and _view(again) == _view(summary) and again.corrupt == 1
    assert (await outbox.status()).corrupt_lines == 1


async def test_a_corrupt_index_is_rebuilt_from_the_outbox(outbox: MemoryOutbox) -> None:
    await _capture_some(outbox, 9)
    await _summary(outbox)
    index = outbox.stores.index_path
    size = outbox.stores.outbox_path.stat().st_size
    index.write_bytes(index.read_bytes()[:-20] + b"\x00\xff garbage\n[1,2]\n{\"ino\": \"x\"}\n")  # the last line torn
    summary = await _summary(outbox)
    assert 0 < summary.parsed_bytes < size  # only the span of the torn line is parsed
    assert _view(summary) == _truth(outbox.stores)
    index.write_bytes(b"\x00\xff" * 100)
    summary = await _summary(outbox)
    assert summary.parsed_bytes == size and _view(summary) == _truth(outbox.stores)
    rebuilt = await _summary(outbox)
    assert rebuilt.parsed_bytes == 0 and _view(rebuilt) == _truth(outbox.stores)


async def test_an_index_that_lies_about_the_bytes_is_not_believed(outbox: MemoryOutbox) -> None:
    await _capture_some(outbox, 4)
    index = outbox.stores.index_path
    await _summary(outbox)
    index.unlink()
    await _summary(outbox)  # parsed, and the index rebuilt as one line for the whole file
    (line,) = index.read_bytes().splitlines()
    value = json.loads(line)
    value["h"] ^= 1  # the guard no longer matches the outbox's bytes
    value["c"] = {"run_0": ["user:o0", "b_invented"]}
    index.write_text(json.dumps(value) + "\n")
    summary = await _summary(outbox)
    assert summary.parsed_bytes > 0 and "b_invented" not in str(summary.pending)
    assert _view(summary) == _truth(outbox.stores)


async def test_an_index_of_a_replaced_outbox_is_not_believed(outbox: MemoryOutbox) -> None:
    await _capture_some(outbox, 5)
    await _summary(outbox)
    stale = outbox.stores.index_path.read_bytes()
    await outbox.sweep()  # delivers everything and rewrites the outbox (a new file)
    await _capture_some(outbox, 2)
    outbox.stores.index_path.write_bytes(stale)  # as if the rewrite's index had been lost
    summary = await _summary(outbox)
    assert _view(summary) == _truth(outbox.stores)
    assert sum(len(p) for p in summary.pending.values()) == 2


async def test_the_same_bytes_under_another_inode_are_parsed_again(outbox: MemoryOutbox) -> None:
    await _capture_some(outbox, 3)
    await _summary(outbox)
    path = outbox.stores.outbox_path
    copy = path.with_name("copy.jsonl")
    copy.write_bytes(path.read_bytes())
    os.replace(copy, path)
    summary = await _summary(outbox)
    assert summary.parsed_bytes == path.stat().st_size and _view(summary) == _truth(outbox.stores)


async def test_compaction_starts_the_index_again(outbox: MemoryOutbox) -> None:
    await _capture_some(outbox, 6)
    await outbox.deliver("run_0")
    await outbox.sweep()
    await _capture_some(outbox, 2)
    summary = await _summary(outbox)
    assert summary.parsed_bytes == 0 and _view(summary) == _truth(outbox.stores)
    assert len(outbox.stores.index_path.read_bytes().splitlines()) <= 2


async def test_a_long_index_is_folded_into_one_line(outbox: MemoryOutbox) -> None:
    await _capture_some(outbox, 150)
    first = await _summary(outbox)
    assert len(outbox.stores.index_path.read_bytes().splitlines()) == 1
    second = await _summary(outbox)
    assert first.parsed_bytes == second.parsed_bytes == 0 and _view(second) == _truth(outbox.stores)


async def test_counts_come_from_the_index_and_ids_are_read_where_marks_flip(outbox: MemoryOutbox) -> None:
    await _capture_some(outbox, 30)
    await _summary(outbox)
    lines = outbox.stores.index_path.read_bytes().splitlines()
    assert lines and all(line.startswith(b'{"i":"b_') for line in lines)  # the ids first, left unread
    await outbox.deliver("run_2")  # a delivered mark after that chunk flips some of its records
    summary = await _summary(outbox)
    assert summary.parsed_bytes == 0 and _view(summary) == _truth(outbox.stores)
    assert summary.count("run_2") == 0 and summary.count("run_0") == 10
    assert len(outbox.stores.index_path.read_bytes().splitlines()) == 1  # folded: marks applied once
    again = await _summary(outbox)
    assert again.parsed_bytes == 0 and _view(again) == _truth(outbox.stores)


async def test_an_index_line_of_the_earlier_form_is_parsed_again(outbox: MemoryOutbox) -> None:
    ids = await _capture_some(outbox, 5)
    await _summary(outbox)
    outbox.stores.index_path.unlink()
    await _summary(outbox)  # parsed, and the index rebuilt as one line for the whole file
    info = outbox.stores.outbox_path.stat()
    (line,) = outbox.stores.index_path.read_bytes().splitlines()
    value = json.loads(line)
    value.pop("i")
    value["c"] = {conv: [entry[0], "b_invented"] for conv, entry in value["c"].items()}  # ids inline, as before
    assert value["ino"] == info.st_ino and value["e"] == info.st_size
    outbox.stores.index_path.write_text(json.dumps(value) + "\n")
    summary = await _summary(outbox)
    assert summary.parsed_bytes == info.st_size and "b_invented" not in str(summary.pending)
    assert sorted(b for _, pending in _view(summary).values() for b in pending) == sorted(ids)


async def test_ids_the_index_cannot_hold_verbatim_are_counted_from_the_outbox(outbox: MemoryOutbox) -> None:
    await _capture_some(outbox, 2)
    foreign = {"batchId": 'b_"quoted\\ id', "conversationId": "run_9", "owner": "user:js", "status": "pending",
               "createdAt": 5, "messages": [{"role": "user", "peerId": "user_js", "content": "hi", "createdAt": 5}]}
    with open(outbox.stores.outbox_path, "ab") as handle:
        handle.write(json.dumps(foreign).encode() + b"\n")
    for _ in range(2):  # not written into the index: every read parses that part again, and counts it
        summary = await _summary(outbox)
        assert summary.parsed_bytes > 0 and summary.pending["run_9"] == ['b_"quoted\\ id']
        assert _view(summary) == _truth(outbox.stores)
    status = await outbox.status()
    assert {r.conversation_id: r.pending for r in status.conversations}["run_9"] == 1
