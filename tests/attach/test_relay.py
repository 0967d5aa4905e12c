"""A window relays its own changes to the others in batches: in the order it made them, each with
its origin, one request in flight at a time; a ``caught_up`` marker never overtakes them, ``stop``
sends what is queued, and a batch the server does not take is one line in ``errors``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import httpx
import pytest

from services.attached import ServedDesk
from services.attached.client import RemoteCloud
from services.attached.desk import CAUGHT_UP
from services.changes import Change, ChangeFeed
from services.cloud import FakeCloud
from services.served.server import CloudServer


async def until(condition: Callable[[], bool], rounds: int = 1000) -> bool:
    """Let the loop run until ``condition`` holds (bounded in rounds, never asserted on time)."""
    for _ in range(rounds):
        if condition():
            return True
        await asyncio.sleep(0.01)
    return condition()


class Window:
    """A window's desk on the served cloud: its feed, what reached it from the others, its relay requests."""

    def __init__(self, server: CloudServer) -> None:
        self.remote = RemoteCloud(server.url, server.token)
        self.feed = ChangeFeed()
        self.desk = ServedDesk(self.remote, self.feed)
        self.posts: list[int] = []
        """The size of each relay request (``POST /changes``), in bytes."""
        self.seen: list[Change] = []
        """The canvas changes other windows relayed, as they reached this window's feed."""

        async def count(request: httpx.Request) -> None:
            if request.method == "POST" and request.url.path.endswith("/changes"):
                self.posts.append(len(request.content))

        self.remote._http.event_hooks["request"].append(count)
        self.feed.subscribe(lambda c: self.seen.append(c) if c.source == "canvas" and "origin" in c.data else None)


@pytest.fixture
async def windows(served_cloud: tuple[FakeCloud, CloudServer]) -> AsyncIterator[tuple[Window, Window]]:
    _, server = served_cloud
    one, two = Window(server), Window(server)
    await one.desk.start()
    await two.desk.start()
    yield one, two
    for window in (one, two):
        await window.desk.stop()
        await window.remote.aclose()


def burst(feed: ChangeFeed, count: int, prefix: str = "obj") -> list[str]:
    """``count`` canvas changes made by a window, as its canvas publishes them; their ids."""
    ids = [f"{prefix}_{n}" for n in range(count)]
    for number, object_id in enumerate(ids):
        feed.announce("canvas", "object.updated", object_id, n=number)
    return ids


async def test_a_burst_reaches_another_window_in_order_with_its_origin_in_few_requests(
        windows: tuple[Window, Window]) -> None:
    one, two = windows
    ids = burst(one.feed, 2000)
    assert await until(lambda: len(two.seen) >= 2000), len(two.seen)
    assert [c.id for c in two.seen] == ids
    assert {c.data["origin"] for c in two.seen} == {one.desk.origin}
    assert [c.data["n"] for c in two.seen] == list(range(2000))
    assert 4 <= len(one.posts) <= 20, one.posts  # batches of at most 500, not a request per change
    assert list(one.desk.errors) == [] and one.seen == []  # a window's own changes do not come back to it


async def test_a_marker_comes_after_everything_relayed_before_it(
        served_cloud: tuple[FakeCloud, CloudServer], windows: tuple[Window, Window]) -> None:
    cloud, _ = served_cloud
    one, _ = windows
    order: list[str] = []
    unsubscribe = cloud.changes.subscribe(lambda c: order.append(c.kind if c.kind == CAUGHT_UP else c.id))
    try:
        ids = burst(one.feed, 1200)  # on the loop: asked for at once, the marker comes after them
        assert await one.desk.caught_up()
        assert order.index(CAUGHT_UP) == len(ids) and order[:len(ids)] == ids  # the server published it last
        order.clear()
        ids = await asyncio.to_thread(burst, one.feed, 700, "threaded")  # a store's writes, from a thread
        assert await one.desk.caught_up()
        assert order.index(CAUGHT_UP) == len(ids) and order[:len(ids)] == ids
    finally:
        unsubscribe()


async def test_stop_sends_what_is_queued(served_cloud: tuple[FakeCloud, CloudServer],
                                         windows: tuple[Window, Window]) -> None:
    cloud, _ = served_cloud
    one, _ = windows
    published: list[str] = []
    unsubscribe = cloud.changes.subscribe(lambda c: published.append(c.id) if c.source == "canvas" else None)
    try:
        ids = burst(one.feed, 1500)
        await asyncio.sleep(0)  # the first batch is in flight, the rest queued behind it
        await one.desk.stop()
        assert published == ids
    finally:
        unsubscribe()


async def test_a_batch_the_server_does_not_take_is_one_line_and_a_refused_change_costs_only_itself(
        windows: tuple[Window, Window]) -> None:
    one, two = windows
    token = one.remote._http.headers["Authorization"]
    one.remote._http.headers["Authorization"] = "Bearer wrong"
    burst(one.feed, 3, "lost")
    assert await until(lambda: len(one.desk.errors) == 1)
    await asyncio.sleep(0.05)
    assert len(one.desk.errors) == 1 and "relay: 3 changes not relayed" in one.desk.errors[0], one.desk.errors
    assert "lost_0" in one.desk.errors[0] and "lost_2" in one.desk.errors[0]

    one.remote._http.headers["Authorization"] = token
    one.desk.errors.clear()
    for number in range(6):  # the server's text policy refuses the NUL: that change alone is not relayed
        one.feed.announce("canvas", "object.updated", f"kept_{number}", name="bad\x00" if number == 3 else "fine")
    assert await until(lambda: len(two.seen) >= 5)
    assert await two.desk.caught_up() and await one.desk.caught_up()
    assert [c.id for c in two.seen] == ["kept_0", "kept_1", "kept_2", "kept_4", "kept_5"]
    assert len(one.desk.errors) == 1 and one.desk.errors[0].startswith("relay object.updated kept_3:"), one.desk.errors


async def test_stop_drops_what_is_queued_in_one_line_when_the_server_does_not_answer(
        windows: tuple[Window, Window]) -> None:
    one, _ = windows
    answering = one.remote
    gone = RemoteCloud("http://127.0.0.1:1", "token")  # nothing listens there: refused at once
    one.desk.remote = gone
    try:
        burst(one.feed, 1200)
        await asyncio.sleep(0)  # the first batch is on its way, the rest queued behind it
        await one.desk.stop()
        errors = list(one.desk.errors)
        assert len(errors) == 2, errors
        assert errors[0].startswith("relay: 500 changes not relayed (object.updated obj_0 to object.updated obj_499)")
        assert errors[1].startswith("relay: 700 changes not relayed (object.updated obj_500 to object.updated obj_1199)")
        assert "the window closed while http://127.0.0.1:1 did not answer" in errors[1]
    finally:
        one.desk.remote = answering
        await gone.aclose()


async def test_the_server_does_not_send_a_window_back_the_changes_it_relayed_but_does_its_markers(
        served_cloud: tuple[FakeCloud, CloudServer]) -> None:
    _, server = served_cloud
    remote = RemoteCloud(server.url, server.token)
    got: list[Change] = []
    subscribed = asyncio.Event()

    async def read() -> None:
        async for batch in remote.change_batches(None, "win_a"):
            if batch.subscribed:
                subscribed.set()
            got.extend(batch.changes)

    reader = asyncio.ensure_future(read())
    try:
        await asyncio.wait_for(subscribed.wait(), 10)
        await remote.publish_many([
            Change("canvas", "object.updated", "mine", {"origin": "win_a"}),
            Change("canvas", "object.updated", "theirs", {"origin": "win_b"}),
            Change("okf", "judgment.approved", "mine_too", {"origin": "win_a"}),
            Change("workspace", CAUGHT_UP, "marker", {"origin": "win_a"}),
        ])
        assert await until(lambda: any(c.id == "marker" for c in got))
        assert [c.id for c in got] == ["theirs", "marker"]  # in order; its own relayed changes left out
    finally:
        reader.cancel()
        await asyncio.gather(reader, return_exceptions=True)
        await remote.aclose()
