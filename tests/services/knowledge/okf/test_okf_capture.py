"""Capture of notes and run records: content addressing, no recapture, fail-closed limits."""

from __future__ import annotations

import json
import os

import pytest

from services.knowledge.okf import CaptureError, StateDir
from services.knowledge.okf.capture import TURN_LIMIT_BYTES, note_content_hash
from services.knowledge.okf.home import NOTE_LIMIT_BYTES

from .conftest import DECISION, RESIDUE, World


def status(world: World) -> dict:
    return world.harvest.state.status(world.source_id)


def inputs_dir(world: World):
    return world.harvest.state.source_dir(world.source_id) / "inputs"


async def test_notes_are_content_addressed_and_not_recaptured(world: World) -> None:
    (world.notes / "retries.md").write_text(DECISION)
    (world.notes / "deep").mkdir()
    (world.notes / "deep" / "todo.md").write_text(RESIDUE)
    (world.notes / ".retries.md.swp").write_text("swap")
    (world.notes / "retries.md~").write_text("backup")
    [report] = await world.harvest.capture_now(world.source_id, judge=False)
    assert len(report.captured) == 2 and report.unchanged == 0
    for input_id in report.captured:
        payload = json.loads((inputs_dir(world) / f"{input_id}.json").read_text())
        assert payload["kind"] == "note" and payload["version"] == 1
        assert payload["contentHash"] == note_content_hash(payload["name"], payload["text"])
    names = {json.loads((inputs_dir(world) / f"{i}.json").read_text())["name"] for i in report.captured}
    assert names == {"retries.md", "deep/todo.md"}
    [again] = await world.harvest.capture_now(world.source_id, judge=False)
    assert again.captured == () and again.unchanged == 2
    (world.notes / "retries.md").write_text(DECISION + "Also: never retry a 400.\n")
    [changed] = await world.harvest.capture_now(world.source_id, judge=False)
    assert len(changed.captured) == 1 and changed.unchanged == 1
    assert len(status(world)["captured"]["inputs"]) == 3
    assert (world.notes / "retries.md").read_text().endswith("never retry a 400.\n")  # live notes untouched
    assert status(world)["lastCapture"]["status"] == "ok"


@pytest.mark.parametrize("make_bad", ["non-utf8", "nul", "oversized", "symlink", "hardlink", "fifo"])
async def test_one_bad_note_is_skipped_with_its_reason_and_the_others_captured(world: World, make_bad: str) -> None:
    (world.notes / "good.md").write_text(DECISION)
    [first] = await world.harvest.capture_now(world.source_id, judge=False)
    (world.notes / "second.md").write_text("A second good note because reasons.\n")
    bad = world.notes / "bad.md"
    if make_bad == "non-utf8":
        bad.write_bytes(b"caf\xe9 latin-1 text\n")
        message = "is not UTF-8"
    elif make_bad == "nul":
        bad.write_bytes(b"text with a \x00 inside\n")
        message = "holds a NUL character"
    elif make_bad == "oversized":
        bad.write_bytes(b"x" * (NOTE_LIMIT_BYTES + 1))
        message = "over the 1 MiB note limit"
    elif make_bad == "symlink":
        (world.root / "outside.md").write_text("outside the home\n")
        os.symlink(world.root / "outside.md", bad)
        message = "is a symlink"
    elif make_bad == "hardlink":
        (world.root / "other.md").write_text("linked\n")
        os.link(world.root / "other.md", bad)
        message = "is hard-linked"
    else:
        os.mkfifo(bad)
        message = "not a regular file"
    [report] = await world.harvest.capture_now(world.source_id, judge=False)
    assert len(report.captured) == 1 and report.unchanged == 1  # the other notes were still captured
    assert [name for name, _ in report.skipped] == ["bad.md"] and message in report.skipped[0][1]
    names = {json.loads((inputs_dir(world) / f"{i}.json").read_text())["name"] for i in status(world)["captured"]["inputs"]}
    assert names == {"good.md", "second.md"}
    assert status(world)["lastCapture"]["status"] == "partial"
    assert status(world)["skippedNotes"] == [{"name": "bad.md", "reason": report.skipped[0][1]}]
    [notice] = await world.harvest.notices()
    assert (notice.kind, notice.subject) == ("note-skipped", "expert: notes/bad.md") and message in notice.reason
    assert "notes/bad.md" in notice.remedy
    assert world.seen[-1].kind == "capture.completed" and world.seen[-1].data["skipped"] == 1
    assert os.path.lexists(bad)  # the refused note stays in the home, untouched
    assert first.captured[0] in status(world)["captured"]["inputs"]
    os.unlink(bad)
    bad.write_text("Fixed: we decided on UTF-8 everywhere because of this.\n")
    [fixed] = await world.harvest.capture_now(world.source_id, judge=False)
    assert len(fixed.captured) == 1 and fixed.skipped == ()
    assert await world.harvest.notices() == [] and status(world)["lastCapture"]["status"] == "ok"


async def test_a_notes_folder_that_is_a_link_fails_the_capture_closed(world: World) -> None:
    (world.root / "elsewhere").mkdir()
    world.notes.rmdir()
    os.symlink(world.root / "elsewhere", world.notes)
    with pytest.raises(CaptureError, match="is not a plain folder"):
        await world.harvest.capture_now(world.source_id, judge=False)
    assert status(world)["lastCapture"]["status"] == "failed"
    [notice] = await world.harvest.notices()
    assert notice.kind == "capture-failed" and "not a plain folder" in notice.reason


def record(thread: str, *sizes_or_texts: object) -> dict:
    turns = []
    for n, item in enumerate(sizes_or_texts):
        text = "x" * item if isinstance(item, int) else str(item)
        turns.append({"id": f"t{n}", "ts": f"2026-11-30T00:00:0{n}Z", "role": "assistant", "text": text})
    return {"thread": thread, "turns": turns}


async def test_record_capture_takes_new_turns_in_windows(world: World) -> None:
    report = await world.harvest.capture_record(world.source_id, record("run-1", "hello", "we decided x"), judge=False)
    [input_id] = report.captured
    payload = json.loads((inputs_dir(world) / f"{input_id}.json").read_text())
    assert payload["kind"] == "record" and payload["thread"] == "run-1"
    assert payload["after"] is None and payload["until"] == "t1"
    assert payload["turns"][0] == {"id": "t0", "ts": "2026-11-30T00:00:00Z", "thread": "run-1", "kind": "session",
                                   "source": "crouter", "text": [{"role": "assistant", "text": "hello"}]}
    assert status(world)["captured"]["threads"] == {"run-1": "t1"}
    more = await world.harvest.capture_record(world.source_id, record("run-1", "hello", "we decided x", 60_000, 60_000),
                                              judge=False)
    assert len(more.captured) == 2  # two turns of 60 kB do not fit one ~96 kB window
    windows = [json.loads((inputs_dir(world) / f"{i}.json").read_text()) for i in more.captured]
    assert [(w["after"], w["until"]) for w in windows] == [("t1", "t2"), ("t2", "t3")]


async def test_turn_over_one_mib_fails_closed(world: World) -> None:
    ok = await world.harvest.capture_record(world.source_id, record("run-1", TURN_LIMIT_BYTES), judge=False)
    assert len(ok.captured) == 1
    before = sorted(os.listdir(inputs_dir(world)))
    with pytest.raises(CaptureError, match="over the 1 MiB turn limit"):
        await world.harvest.capture_record(world.source_id, record("run-2", "small", TURN_LIMIT_BYTES + 1), judge=False)
    assert sorted(os.listdir(inputs_dir(world))) == before
    assert "run-2" not in status(world)["captured"]["threads"]
    assert status(world)["lastCapture"]["status"] == "failed"


@pytest.mark.parametrize("bad, message", [
    ({"turns": []}, "thread"),
    ({"thread": "r", "turns": "no"}, "turns must be a list"),
    ({"thread": "r", "turns": [{"text": "no id"}]}, "string id"),
    ({"thread": "r", "turns": [{"id": "a", "text": 5}]}, "text must be"),
    ({"thread": "r", "turns": [{"id": "a", "text": "x"}, {"id": "a", "text": "y"}]}, "duplicate turn id"),
])
async def test_malformed_records_fail_closed(world: World, bad: dict, message: str) -> None:
    with pytest.raises(CaptureError, match=message):
        await world.harvest.capture_record(world.source_id, bad, judge=False)
    assert os.listdir(inputs_dir(world)) == []


def test_inputs_are_checked_against_their_hash(tmp_path) -> None:
    state = StateDir(tmp_path / "state")
    (state.sources_dir / "00000000-0000-4000-8000-000000000000" / "inputs").mkdir(parents=True)
    (state.sources_dir / "00000000-0000-4000-8000-000000000000" / "source.json").write_text("{}")
    input_id = state.write_input("00000000-0000-4000-8000-000000000000", {"version": 1, "kind": "note", "name": "a", "text": "b"})
    assert state.read_input("00000000-0000-4000-8000-000000000000", input_id)["text"] == "b"
    path = state.sources_dir / "00000000-0000-4000-8000-000000000000" / "inputs" / f"{input_id}.json"
    path.write_text(json.dumps({"version": 1, "kind": "note", "name": "a", "text": "tampered"}))
    with pytest.raises(Exception, match="does not match its hash"):
        state.read_input("00000000-0000-4000-8000-000000000000", input_id)


@pytest.mark.parametrize("bad", [
    {"thread": "run-9", "turns": [{"id": "t1", "role": "user", "text": "half an emoji \ud83d"}]},
    {"thread": "run-9", "turns": [{"id": "t1", "text": [{"role": "user", "text": "fine"}, {"role": "model", "text": "\udc80"}]}]},
    {"thread": "run-9", "turns": [{"id": "t\udc80", "text": "fine"}]},
    {"thread": "run-\udc80", "turns": [{"id": "t1", "text": "fine"}]},
    {"thread": "run-9", "turns": [{"id": "t1", "role": "us\x00er", "text": "fine"}]},
    {"thread": "run-9", "turns": [{"id": "t1", "text": "fine", "meta": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}]},
])
async def test_record_turn_with_unstorable_text_fails_with_e_capture(world: World, bad: dict) -> None:
    with pytest.raises(CaptureError) as raised:
        await world.harvest.capture_record(world.source_id, bad, judge=False)
    assert raised.value.code == "E_CAPTURE" and "nothing was captured" in str(raised.value)
    assert os.listdir(inputs_dir(world)) == []
    assert status(world)["captured"]["threads"] == {} and status(world)["lastCapture"]["status"] == "failed"
    assert world.kinds()[-1] == "capture.failed"
    [notice] = await world.harvest.notices()
    assert notice.kind == "capture-failed" and "E_CAPTURE" in notice.reason
    json.dumps(status(world), ensure_ascii=False).encode("utf-8")  # what was recorded is storable text
