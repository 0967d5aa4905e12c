"""Forking a run at a turn through the desk, in an embedded window and in one attached to a server:
the fork carries exactly the parent's messages up to that turn (the last one as edited), names its
parent and turn, and the canvas links its node to the parent's."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from services.clock import FakeClock
from services.desk import OperatorError, lineage
from services.workspace import Settings, Workspace

GARDEN = "run_sample_garden"
"""The sample world's "garden plan": turn 1 (the prompt, a reply), turn 2 (a message, a reply), settled."""
TURN_1 = "Plan the week's garden chores"
REPLY_1 = "Water the tomatoes Monday and Thursday; weed on Saturday."
TURN_2 = "Can you text me the list?"


@dataclass
class Window:
    """The window that acts (``acting``) and the workspace whose cloud and canvas keep the result."""

    acting: Workspace
    home: Workspace


@pytest.fixture(params=["embedded", "served"])
async def window(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Window]:
    if request.param == "embedded":
        ws = await Workspace.open(settings=Settings(path=tmp_path / "ws", clock=FakeClock(1_800_000_000.0)))
        try:
            await ws.follower.idle()
            yield Window(ws, ws)
        finally:
            await ws.close()
        return
    served = await Workspace.open(settings=Settings(path=tmp_path / "ws", serve_port=0))
    try:
        await served.follower.idle()
        attached = await Workspace.open(served.path)
        try:
            assert attached.cloud is None and attached.attached is not None
            yield Window(attached, served)
        finally:
            await attached.close()
    finally:
        await served.close()


async def test_a_fork_at_a_turn_carries_the_parents_messages_up_to_it_with_the_edited_last_one(window: Window) -> None:
    desk = window.acting.desk
    assert [(t.number, t.text) for t in desk.turns(GARDEN)] == [(1, TURN_1), (2, TURN_2)]
    child = await desk.fork_at(GARDEN, 2, "Can you email me the list instead?")
    await desk.caught_up()

    run = window.home.cloud.runs.get(child)
    assert run.params["history"] == [
        {"role": "user", "text": TURN_1},
        {"role": "assistant", "text": REPLY_1},
        {"role": "user", "text": "Can you email me the list instead?"},
    ]
    assert run.params["prompt"] == "Can you email me the list instead?"  # its first turn answers the edit
    assert (run.params["forked_from"], run.params["forked_at_turn"]) == (GARDEN, 2)
    assert run.user_id == window.home.cloud.runs.get(GARDEN).user_id
    view = desk.view(child)
    assert view.name == "fork of “garden plan” at turn 2"
    assert (view.forked_from, view.forked_at_turn) == (GARDEN, 2)
    assert lineage(desk.detail(child).params) is not None
    assert [(a.action, a.detail, a.by) for a in desk.log(child)] == [("fork", f"from {GARDEN} at turn 2", "app")]
    assert [(a.action, a.detail) for a in desk.log(GARDEN) if a.action == "forked"] == [("forked", f"{child} at turn 2")]


async def test_a_fork_at_the_first_turn_unedited_carries_its_message_alone(window: Window) -> None:
    child = await window.acting.desk.fork_at(GARDEN, 1)
    assert window.home.cloud.runs.get(child).params["history"] == [{"role": "user", "text": TURN_1}]


async def test_a_fork_the_parent_cannot_make_is_refused_in_words_and_starts_nothing(window: Window) -> None:
    desk, cloud = window.acting.desk, window.home.cloud
    before = len(cloud.runs.all)
    with pytest.raises(OperatorError, match="turns 1 to 2; there is no turn 3"):
        await desk.fork_at(GARDEN, 3)
    with pytest.raises(OperatorError, match="type the message the fork starts with"):
        await desk.fork_at(GARDEN, 2, "   ")
    fresh = await desk.start_run("user:ada", "no turn yet")
    with pytest.raises(OperatorError, match="no turns yet"):
        await desk.fork_at(fresh, 1)
    await desk.delete_run(fresh)
    with pytest.raises(OperatorError, match="was deleted"):
        await desk.fork_at(fresh, 1)
    assert len(cloud.runs.all) == before + 1  # only the run started above


async def test_the_canvas_links_a_forks_node_to_its_parents(window: Window) -> None:
    child = await window.acting.desk.fork_at(GARDEN, 2, "email it")
    await window.acting.desk.caught_up()
    await window.home.follower.idle()
    canvas = window.home.canvas
    around = await canvas.edges(child)
    assert [e.other.id for e in around.outgoing["forked-from"]] == [GARDEN]
    parent = await canvas.edges(GARDEN)
    assert [e.other.id for e in parent.incoming["forked-from"]] == [child]
    events = await canvas.events(child)
    forked = [e for e in events if e.type == "run.forked"]
    assert len(forked) == 1 and forked[0].data == {"parent": GARDEN, "turn": 2}


async def test_a_memory_fork_links_its_node_to_its_parent_too(tmp_path: Path) -> None:
    ws = await Workspace.open(settings=Settings(path=tmp_path / "ws", clock=FakeClock(1_800_000_000.0)))
    try:
        await ws.follower.idle()
        child = await ws.outbox.fork(GARDEN, 1)
        await ws.follower.idle()
        assert [e.other.id for e in (await ws.canvas.edges(child)).outgoing["forked-from"]] == [GARDEN]
        view = ws.desk.view(child)
        assert (view.forked_from, view.forked_at_turn) == (GARDEN, None)
    finally:
        await ws.close()
