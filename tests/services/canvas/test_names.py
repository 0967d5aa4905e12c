"""Name resolution: every name the canvas reports resolves back to its object, whatever else exists."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.canvas import AmbiguousNameError, Canvas, NameTakenError, ObjectNotFoundError, ReaderView
from services.clock import FakeClock

from .conftest import PREVIEW


async def test_a_full_name_stays_resolvable_when_another_owner_shares_its_handle(canvas: Canvas) -> None:
    await canvas.ensure_owner("user", "o1")
    x = await canvas.write("x", owner="user:o1", preview=PREVIEW, body="mine")
    assert x.object.full_name == "o1/x"
    await canvas.ensure_owner("repo", "o1")
    await canvas.write("y", owner="repo:o1", preview=PREVIEW, body="the repo's")
    # the name reported before the second owner appeared still means the same document ...
    assert (await canvas.read("o1/x")).object.id == x.object.id
    # ... and the name reported now names the owner's type, since the handle is shared
    now = (await canvas.get(x.object.id)).full_name
    assert now == "user:o1/x"
    assert (await canvas.read(now)).object.id == x.object.id
    assert (await canvas.get("o1/y")).full_name == "repo:o1/y"
    # a link written with the bare name before the clash keeps its target
    await canvas.write("z", owner="user:o1", preview=PREVIEW, body="see [[user:o1/x]]")
    assert (await canvas.read("user:o1/z")).document.links == (("user:o1/x", x.object.id),)


async def test_a_name_several_objects_answer_to_is_refused_listing_each_candidate(canvas: Canvas) -> None:
    await canvas.ensure_owner("user", "o1")
    await canvas.ensure_owner("repo", "o1")
    mine = await canvas.write("x", owner="user:o1", preview=PREVIEW, body="user's")
    theirs = await canvas.write("x", owner="repo:o1", preview=PREVIEW, body="repo's")
    with pytest.raises(AmbiguousNameError) as caught:
        await canvas.read("o1/x")
    assert caught.value.code == "ambiguous_name"
    assert caught.value.candidates == ("repo:o1/x", "user:o1/x")
    assert "repo:o1/x" in str(caught.value) and "user:o1/x" in str(caught.value)
    for candidate, doc in zip(caught.value.candidates, (theirs, mine), strict=True):
        assert (await canvas.read(candidate)).object.id == doc.object.id
    with pytest.raises(AmbiguousNameError, match="user:o1") as owners:
        await canvas.get("o1")  # a bare handle two owners share
    assert set(owners.value.candidates) == {"user:o1", "repo:o1"}
    with pytest.raises(AmbiguousNameError):
        await canvas.write("w", owner="o1", preview=PREVIEW, body="where?")  # nothing written
    assert await canvas.count_objects(type="document") == 2
    # display names two nodes share are ambiguous too; their reported names are their ids
    a = await canvas.spawn_node(node_id="na", name="helper")
    b = await canvas.spawn_node(node_id="nb", name="helper")
    with pytest.raises(AmbiguousNameError) as nodes:
        await canvas.get("helper")
    assert nodes.value.candidates == ("na", "nb")
    assert [(await canvas.get(n.object.full_name)).id for n in (a, b)] == ["na", "nb"]
    # a node whose id is an owner's handle: its documents are named node:<id>/...
    await canvas.spawn_node(node_id="o1")
    doc = await canvas.write("plan", owner="node:o1", preview=PREVIEW, body="node's")
    assert doc.object.full_name == "node:o1/plan" and doc.object.owner_id == "o1"
    assert (await canvas.read("node:o1/plan")).object.id == doc.object.id
    # a bare document name still resolves in the reader's view, first match wins
    assert (await canvas.get("x", view=ReaderView(repos=("o1",), person="o1"))).id == theirs.object.id
    with pytest.raises(ObjectNotFoundError):
        await canvas.get("o1/nothing")


async def test_a_node_id_another_object_holds_is_refused_as_a_taken_name(canvas: Canvas, seen) -> None:
    await canvas.spawn_node(node_id="n1", name="first")
    before = len(seen)
    with pytest.raises(NameTakenError, match="n1"):
        await canvas.spawn_node(node_id="n1", name="second")  # a clear error, not a database one
    assert (await canvas.get("n1")).name == "first" and await canvas.count_objects(type="node") == 1
    assert len(seen) == before


OWNER_TYPES = ("user", "repo", "profile", "app", "node")
HANDLES = st.sampled_from(["o1", "o2", "a.b", "crtr"])
PATHS = st.sampled_from(["x", "y", "notes/x", "o1", "o1/x", "x/y"])
OWNERS = st.tuples(st.sampled_from(OWNER_TYPES), HANDLES)


async def _scenario(owners: list[tuple[str, str]], docs: list[tuple[int, str]], extra_nodes: list[str]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        canvas = await Canvas.open(Path(folder) / "canvas.db", clock=FakeClock())
        try:
            refs = []
            for type_, handle in owners:
                if type_ == "node":
                    await canvas.spawn_node(node_id=handle, name=handle)
                    refs.append(f"node:{handle}")
                else:
                    await canvas.ensure_owner(type_, handle)
                    refs.append(f"{type_}:{handle}")
            for name in extra_nodes:
                await canvas.spawn_node(name=name)  # display names that clash with handles and paths
            for index, path in docs:
                owner = refs[index % len(refs)]
                try:
                    await canvas.write(path, owner=owner, preview=PREVIEW, body=f"[[{path}]]")
                except NameTakenError:
                    pass
            page = await canvas.list_objects(limit=1000)
            for obj in page.items:
                assert (await canvas.get(obj.full_name)).id == obj.id, obj.full_name
                assert (await canvas.read(obj.full_name)).object.full_name == obj.full_name
        finally:
            await canvas.close()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(owners=st.lists(OWNERS, min_size=1, max_size=6, unique=True),  # (type, handle) pairs are unique
       docs=st.lists(st.tuples(st.integers(0, 20), PATHS), max_size=8),
       extra_nodes=st.lists(st.sampled_from(["o1", "x", "o1/x", "crtr"]), max_size=2))
def test_every_reported_name_resolves_back_to_its_object(owners, docs, extra_nodes) -> None:
    asyncio.run(_scenario(owners, docs, extra_nodes))
