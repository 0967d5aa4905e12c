"""One time type in the read models: every time a pane or the App reads is float seconds since the epoch.

The stores keep their own formats on disk (OKF ISO-8601 strings, outbox epoch milliseconds); the
read models convert once (``services.times``). A stamp that is no usable time reads as absent
and never stops a read model from being built.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from services.times import LATEST_TIME, ms_time, parse_time, time_or_none
from services.clock import FakeClock
from services.desk import OperatorError
from services.workspace import Settings, Workspace

START = 1_800_000_000.0


def _optional(annotation: object) -> bool:
    return "None" in str(annotation)


def walk_times(value: Any, where: str, found: list[tuple[str, Any, bool]]) -> None:
    """Collect ``(path, value, may be None)`` for every field ending in ``_at`` or named ``at``.

    Walks dataclasses and named tuples through tuples, lists and dict values; the wire documents a
    run carries (event payloads, params) are dicts and are checked on their own below."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            item = getattr(value, f.name)
            if f.name == "at" or f.name.endswith("_at"):
                found.append((f"{where}.{f.name}", item, _optional(f.type)))
            else:
                walk_times(item, f"{where}.{f.name}", found)
    elif isinstance(value, tuple) and hasattr(value, "_fields"):
        hints = getattr(type(value), "__annotations__", {})
        for name in value._fields:
            item = getattr(value, name)
            if name == "at" or name.endswith("_at"):
                found.append((f"{where}.{name}", item, _optional(hints.get(name))))
            else:
                walk_times(item, f"{where}.{name}", found)
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            walk_times(item, f"{where}[{i}]", found)
    elif isinstance(value, dict) and value and all(dataclasses.is_dataclass(v) for v in value.values()):
        for key, item in value.items():
            walk_times(item, f"{where}[{key!r}]", found)


def bad_times(found: list[tuple[str, Any, bool]]) -> list[str]:
    return [f"{path} = {value!r}" for path, value, optional in found
            if not (isinstance(value, float) or (optional and value is None))]


async def wait_for(check: Any, rounds: int = 400) -> None:
    for _ in range(rounds):
        if await check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the workspace did not settle")


@pytest.fixture
async def ws(tmp_path: Path):
    clock = FakeClock(START)
    workspace = await Workspace.open(settings=Settings(path=tmp_path / "ws", clock=clock))

    async def settled() -> bool:
        await workspace.follower.idle()
        return not any(i.state == "judging" for i in await workspace.okf.queue())

    await wait_for(settled)
    yield workspace
    await workspace.close()


async def pane_reads(ws: Workspace) -> dict[str, Any]:
    """What the panes and the App read from an open workspace, after each kind of time was stamped."""
    desk = ws.desk
    clock = ws.settings.clock
    assert isinstance(clock, FakeClock)
    clock.advance(1.25)
    run = desk.runs()[0]
    await desk.reply(run.id, "noted")  # an operator action
    await desk.revoke("user:grace", "grant_removed")
    with pytest.raises(OperatorError):
        await desk.start_run("user:grace", "x")  # a refusal
    await desk.restore("user:grace")
    promoting = [i for i in await ws.okf.queue() if i.state == "pending" and i.promote]
    assert promoting, "the sample world judges its notes into a pending judgment that promotes"
    await ws.okf.approve(promoting[0].id)  # an accepted receipt
    reviews = [r for r in await ws.insights.list() if r.status == "pending"]
    if reviews:
        await ws.insights.approve(reviews[0].id, candidate=0)
    outbox = ws.outbox
    await outbox.sweep()  # the last delivery
    with open(outbox.stores.outbox_path, "ab") as handle:
        handle.write(b"{not json\n")
    await outbox.sweep()  # a quarantined line
    outbox.fake_honcho.go_down()
    await outbox.capture_turn("run_times", "user:ada", [{"role": "user", "text": "q"}, {"role": "assistant", "text": "a"}])

    async def start_child(parent_id: str, messages: list[dict[str, Any]]) -> str:
        return "run_times_child"

    await outbox.fork("run_times", 1, start_child=start_child)  # pending while memory is down
    reads: dict[str, Any] = {
        "runs": desk.runs(include_deleted=True),
        "details": [desk.detail(r.id) for r in desk.runs(include_deleted=True)],
        "grants": desk.grants(),
        "actions": [desk.log(r.id) for r in desk.runs()],
        "refusals": list(desk.refusals),
        "queue": await ws.okf.queue(),
        "judgments": [await ws.okf.detail(i.id) for i in await ws.okf.queue()],
        "notices": await ws.okf.notices(),
        "reviews": await ws.insights.list(),
        "status": await outbox.status(),
        "quarantine": await outbox.quarantined(),
        "representations": [outbox.representation(c.conversation_id) for c in (await outbox.status()).conversations],
        "captures": ws.capture_failures(),
    }
    canvas = ws.canvas
    objects = []
    for kind in ("document", "node", "job", "custom", "user"):
        page = await canvas.list_objects(type=kind, limit=20)
        objects.append(page)
        for summary in page.items[:5]:
            objects.append(await canvas.read(summary.id, events_limit=20))
            objects.append(await canvas.edges(summary.id, limit=20))
            if kind == "node":
                objects.append(await canvas.inbox(summary.id, limit=20))
    reads["canvas"] = objects
    return reads


async def test_every_time_a_pane_reads_from_an_open_workspace_is_float_seconds(ws: Workspace) -> None:
    reads = await pane_reads(ws)
    found: list[tuple[str, Any, bool]] = []
    for name, value in reads.items():
        walk_times(value, name, found)
    assert bad_times(found) == []
    names = {path.rsplit(".", 1)[-1] for path, value, _ in found if value is not None}
    # every kind of stamp was reached (not an empty walk): runs, actions, refusals, canvas, OKF, outbox
    assert {"at", "created_at", "updated_at", "accepted_at", "last_delivery_at", "quarantined_at", "fetched_at"} <= names
    assert reads["status"].pending_forks and reads["quarantine"]
    assert all(START <= v <= START + 60 for _, v, _ in found if isinstance(v, float) and v), found
    for detail in reads["details"]:  # the wire documents a run carries: their times too
        assert all(isinstance(e["at"], float) and e["at"] >= START for e in detail.events), detail.id
        if detail.question is not None:
            assert isinstance(detail.question["created_at"], float)


def test_stored_and_wire_times_convert_once_to_seconds() -> None:
    assert parse_time("2027-01-15T08:00:00.250Z") == parse_time("2027-01-15T08:00:00.250+00:00") == 1_800_000_000.25
    assert parse_time("2027-01-15T09:00:00+01:00") == 1_800_000_000.0
    assert parse_time("2027-01-15T08:00:00") == 1_800_000_000.0  # the stores write UTC only
    assert parse_time(1_800_000_000) == 1_800_000_000.0 and isinstance(parse_time(1_800_000_000), float)
    assert ms_time(1_800_000_000_250) == 1_800_000_000.25
    assert time_or_none("") is None and parse_time(None) == 0.0


UNUSABLE = {"words": "yesterday", "empty": "", "bool": True, "none": None, "nan": float("nan"), "inf": float("inf"),
            "negative": -5, "far": 1e30, "huge-int": 10**400, "year-99999": "99999-01-01T00:00:00Z", "list": [1],
            "object": {"at": 1}}


@pytest.mark.parametrize("stamp", list(UNUSABLE.values()), ids=list(UNUSABLE))
def test_unusable_stored_times_read_as_absent_never_as_an_error(stamp: Any) -> None:
    assert time_or_none(stamp) is None and parse_time(stamp) == 0.0 and ms_time(stamp) is None
    assert ms_time(LATEST_TIME * 1000 + 1) is None and ms_time(LATEST_TIME * 1000) == LATEST_TIME


async def test_unusable_stamps_on_disk_never_stop_a_read_model_and_are_left_as_they_are(ws: Workspace) -> None:
    outbox = ws.outbox
    quarantine = outbox.stores.quarantine_path
    quarantine.parent.mkdir(parents=True, exist_ok=True)
    stamps = ["yesterday", 1e30, True, 10**400, None, 1_800_000_000_250]
    quarantine.write_text("".join(json.dumps({"quarantinedAt": s, "line": 1, "reason": "old rules", "raw": f"x{i}"}) + "\n"
                                  for i, s in enumerate(stamps)), encoding="utf-8")
    marker = outbox.stores.last_delivery_path
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(json.dumps({"lastDeliveryAt": "soon", "batchId": "b", "conversationId": "c"}), encoding="utf-8")
    fork = outbox.stores.fork_path("run_child")
    fork.parent.mkdir(parents=True, exist_ok=True)
    fork.write_text(json.dumps({"childId": "run_child", "parentId": "run_p", "atTurn": "two", "createdAt": "now"}),
                    encoding="utf-8")
    item = next(i for i in await ws.okf.queue())
    run_file = ws.okf.state.runs_dir(item.source_id) / item.id / "run.json"
    run = json.loads(run_file.read_text("utf-8"))
    run["created"] = "the day before"
    run["receipts"] = {"team": {"status": "accepted", "acceptedDigest": "sha256-x", "acceptedAt": 12}}
    run_file.write_text(json.dumps(run), encoding="utf-8")
    review_files = sorted(ws.insights.folder.glob("*.json"))
    assert review_files, "the sample world proposes an insight"
    review = json.loads(review_files[0].read_text("utf-8"))
    review["created_at"] = "2027-01-15T08:00:00Z"  # a hand-edited review: a time as a string
    review_files[0].write_text(json.dumps(review), encoding="utf-8")
    on_disk = {p: p.read_bytes() for p in (quarantine, marker, fork, run_file, review_files[0])}

    lines = await outbox.quarantined()
    assert [q.quarantined_at for q in lines] == [None] * 5 + [1_800_000_000.25]
    status = await outbox.status()
    assert status.last_delivery_at is None and status.quarantined == len(stamps)
    assert [(f.child_id, f.at_turn, f.created_at) for f in status.pending_forks] == [("run_child", None, None)]
    shown = next(i for i in await ws.okf.queue() if i.id == item.id)
    assert shown.created_at == 0.0 and shown.accepted == (("team", "sha256-x", 12.0),)
    assert (await ws.okf.detail(item.id)).item == shown
    reviews = {r.id: r for r in await ws.insights.list()}
    assert reviews[review["id"]].created_at == 1_800_000_000.0
    assert {p: p.read_bytes() for p in on_disk} == on_disk  # reading never rewrote a store


async def test_stores_keep_their_own_time_format_on_disk(ws: Workspace) -> None:
    reads = await pane_reads(ws)
    approved = next(i for i in reads["queue"] if i.accepted)
    run = ws.okf.state.load_run(approved.source_id, approved.id)
    assert isinstance(run["created"], str) and approved.created_at == parse_time(run["created"])
    accepted_at = run["receipts"]["team"]["acceptedAt"]
    assert isinstance(accepted_at, str) and accepted_at.endswith("Z")
    assert approved.accepted[0].accepted_at == parse_time(accepted_at)
    entries = [json.loads(line) for line in ws.outbox.stores.quarantine_path.read_text("utf-8").splitlines()]
    assert all(isinstance(e["quarantinedAt"], int) for e in entries)
    assert [q.quarantined_at for q in reads["quarantine"]] == [e["quarantinedAt"] / 1000 for e in entries]
    marker = json.loads(ws.outbox.stores.last_delivery_path.read_text("utf-8"))
    assert isinstance(marker["lastDeliveryAt"], int) and reads["status"].last_delivery_at == marker["lastDeliveryAt"] / 1000
    shown = next(r for r in reads["representations"] if r is not None)
    cached = ws.outbox.stores.read_representation(shown.conversation_id)
    assert isinstance(cached["fetchedAt"], int) and shown.fetched_at == cached["fetchedAt"] / 1000
    fork = json.loads(ws.outbox.stores.fork_path("run_times_child").read_text("utf-8"))
    assert isinstance(fork["createdAt"], int) and reads["status"].pending_forks[0].created_at == fork["createdAt"] / 1000


async def test_run_event_times_are_converted_once_per_event(ws: Workspace) -> None:
    run_id = ws.desk.runs()[0].id
    first = ws.desk.detail(run_id).events
    again = ws.desk.detail(run_id).events
    assert first and all(a is b for a, b in zip(first, again))  # not converted again
    await ws.desk.reply(run_id, "one more")
    grown = ws.desk.detail(run_id).events
    assert len(grown) > len(first) and all(a is b for a, b in zip(first, grown))
    wire = ws.cloud.runs.get(run_id).events
    assert all(isinstance(e["at"], str) for e in wire)  # the live run keeps the wire's ISO strings
    assert [e["at"] for e in grown] == [parse_time(e["at"]) for e in wire]
    assert [{k: v for k, v in e.items() if k != "at"} for e in grown] == [
        {k: v for k, v in e.items() if k != "at"} for e in wire]
