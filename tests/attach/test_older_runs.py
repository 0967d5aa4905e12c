"""A window attached to a workspace of many runs holds the newest ones and what it shows: an older run
is read when the runs list scrolls to it, a filter or the palette finds it, a jump names it or the
change stream does; the counts (by person, by status) are right throughout, read again from the server
when an older run changes; every reader of all runs (the follower's catch-up, the history's baseline)
walks them a page at a time, and what the follower held to carry them is let go once carried."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import services.attached.desk as attached_desk
from services.attached.client import RemoteCloud
from services.cloud import FakeCloud
from services.sdk import MemoryConnectionStore
from services.served.server import CloudServer, bind_socket, origin_url
from services.attached.desk import StreamBook
from services.desk import RunMirror
from services.desk.views import live_runs_by_person
from services.workspace import Settings, Workspace
from tests.attach.test_two_windows import until
from tests.ui.conftest import ready
from workbench.app import make_app


@pytest.fixture
async def served(tmp_path: Path) -> Any:
    """A served workspace of the sample world's runs and 30 more: every third settled, two deleted,
    the rest left live (the oldest of them waiting on its person)."""
    workspace = await Workspace.open(settings=Settings(path=tmp_path / "ws", serve_port=0))
    desk = workspace.desk
    made = [await desk.start_run("user:ada" if n % 2 else "user:grace", f"run {n}") for n in range(30)]
    for n, run_id in enumerate(made):
        if n % 3 == 0:
            await desk.settle(run_id, "result", f"done {n}")
    await desk.delete_run(made[4])
    await desk.delete_run(made[10])
    await desk.ask(made[1], "which one?")
    yield workspace
    await workspace.close()


def _owner_counts(served: Workspace) -> dict[str, int]:
    return live_runs_by_person(served.desk.book.run_dtos())


async def test_the_book_reads_the_newest_first_then_the_older_a_page_at_a_time(served: Workspace) -> None:
    owner = served.desk
    every = owner.run_ids()
    assert len(every) > 30
    async with RemoteCloud.from_workspace(served.path) as remote:
        book = StreamBook(remote, RunMirror())
        await book.load(first=6)
        assert list(book.runs) == every[-6:] and book.unread == len(every) - 6

        def counted() -> None:  # the runs held and what the server counted of the rest: every run
            assert book.runs_by_person() == _owner_counts(served)
            assert book.runs_by_status().get("waiting_on_user") == owner.waiting_on_user() > 0

        counted()
        # a reader of every run walks them a page at a time; the book holds no more than it did
        walked = [str(dto["id"]) async for page in book.pages(4) for dto in page]
        assert sorted(walked) == sorted(every) and len(walked) == len(every)
        older = [str(dto["id"]) async for page in book.pages(4, held=False) for dto in page]
        assert sorted(older) == sorted(every[:-6])
        assert list(book.runs) == every[-6:]
        # a run the change stream names is read at once, whatever its age: a page does not replace it
        oldest = every[0]
        book.absorb_run(await remote.call("GET", f"/runs/{oldest}", params={"events": "0"}), owned=True)
        kept = book.runs[oldest]
        pages = 0
        while await book.read_older(7):
            pages += 1
            counted()
            assert 0 < book.unread < len(every) - 6
        assert pages == (len(every) - 6 - 1) // 7 and book.unread == 0
        assert list(book.runs) == every  # every run, in start order, as a whole read holds them
        assert book.runs[oldest] is kept
        counted()
        assert not await book.read_older(7)  # nothing more to read

        whole = StreamBook(remote, RunMirror())
        await whole.load()
        assert whole.runs == book.runs and whole.unread == 0
        few = StreamBook(remote, RunMirror())
        await few.load(first=len(every))  # one page holds them all: nothing left to read
        assert few.unread == 0 and few.runs == book.runs


async def test_walks_over_the_older_runs_at_once_read_each_page_once(
        served: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    every = served.desk.run_ids()
    asked: list[str] = []
    real = httpx.AsyncHTTPTransport.handle_async_request

    async def counted(transport: httpx.AsyncHTTPTransport, request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/runs") and "before" in request.url.params:
            asked.append(request.url.params["before"])
        return await real(transport, request)

    monkeypatch.setattr(httpx.AsyncHTTPTransport, "handle_async_request", counted)
    async with RemoteCloud.from_workspace(served.path) as remote:
        book = StreamBook(remote, RunMirror())
        await book.load(first=6)

        async def walk() -> list[str]:
            return [str(dto["id"]) async for page in book.pages(4) for dto in page]

        first, second = await asyncio.gather(walk(), walk())
        assert sorted(first) == sorted(second) == sorted(every)
        pages = -(-(len(every) - 6) // 4)
        assert len(asked) == pages and len(set(asked)) == pages  # each page read once, for both
        asked.clear()
        assert sorted(await walk()) == sorted(every)  # alone: read afresh, nothing kept
        assert len(asked) == pages and not book._shared


async def _served_many(folder: Path, monkeypatch: pytest.MonkeyPatch, *, first: int,
                       older: int) -> tuple[CloudServer, FakeCloud]:
    """A headless server of 30 runs (as ``workbench serve`` runs one): every third settled, two deleted,
    the second waiting on its person, the first with the prompt ``needle-old``; a window attached to
    it reads the newest ``first`` runs, and older ones ``older`` at a time."""
    monkeypatch.setattr(attached_desk, "FIRST_RUNS", first)
    monkeypatch.setattr(attached_desk, "OLDER_RUNS", older)
    folder.mkdir()
    sock = bind_socket("127.0.0.1", 0)
    url = origin_url(*sock.getsockname()[:2])
    cloud = FakeCloud("app", issuer=url, runtime_url=url)
    server = CloudServer(cloud, sock, folder=folder)  # as `workbench serve` does: the window follows
    await server.start()
    for user in ("user:a", "user:b"):
        await cloud.connect(MemoryConnectionStore(), user, scopes=["crtr:llm"])
    for n in range(30):
        prompt = "needle-old" if n == 0 else f"run {n}"
        run = cloud.runs.get((await cloud.crouter("user:a" if n % 2 else "user:b").runs.start(prompt=prompt)).id)
        run.reply(f"answer {n}")
        if n % 3 == 0:
            run.settle(result=f"done {n}")
        if n in (4, 10):
            run.delete()
        if n == 1:
            run.ask(title="which one?")
    return server, cloud


@contextlib.asynccontextmanager
async def _runs_list(folder: Path) -> AsyncIterator[tuple[Any, Any, Workspace, Any]]:
    """The app over ``folder``, its runs list shown: the app, its pilot, its workspace, the runs pane."""
    app = make_app(Settings(path=folder))
    async with app.run_test(size=(140, 40)) as pilot:
        ws = await ready(pilot)
        await pilot.press("3")
        yield app, pilot, ws, app.main.pane("runs")


async def _truth(server: CloudServer) -> dict[str, Any]:
    async with RemoteCloud(server.url, server.token) as remote:
        whole = StreamBook(remote, RunMirror())
        await whole.load()  # every run, read whole
        return whole.runs


def _waiting(runs: dict[str, Any]) -> int:
    return sum(1 for d in runs.values() if d["status"] == "waiting_on_user" and not d["deleted"])


async def test_a_window_over_many_runs_holds_the_newest_and_its_readers_walk_the_rest_a_page_at_a_time(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    server, cloud = await _served_many(tmp_path / "ws", monkeypatch, first=5, older=3)
    truth = await _truth(server)
    every = list(truth)
    ws = await Workspace.open(tmp_path / "ws")
    try:
        desk = ws.desk
        assert ws.attached is not None and ws.follower is not None
        assert desk.run_ids() == every[-5:] and desk.unread_runs() == len(every) - 5
        assert {g.user_id: g.runs for g in desk.grants()} == live_runs_by_person(truth.values())
        assert desk.waiting_on_user() == _waiting(truth) > 0
        assert await desk.caught_up()

        # the follower's catch-up carried every run into the canvas, and let go of what it held for it
        await ws.follower.idle()
        assert ws.canvas is not None
        nodes = {n.id for n in (await ws.canvas.list_objects(type="node", limit=500)).items}
        assert nodes == set(truth)  # a deleted run's node is kept, marked
        assert list(ws.follower.errors) == []
        assert desk.run_ids() == every[-5:]
        # the history's baseline holds every run, the oldest included
        assert ws.timeline is not None
        await ws.timeline.settled()
        assert set(ws.timeline.store.every("run")) == set(truth)

        # an older run the window does not hold asks its person: held from then on, and counted
        oldest_live = next(run_id for run_id in every if not truth[run_id]["deleted"]
                           and truth[run_id]["status"] != "settled" and truth[run_id]["status"] != "waiting_on_user")
        cloud.runs.get(oldest_live).ask(title="and now?")
        assert await desk.caught_up()
        assert desk.has_run(oldest_live) and desk.view(oldest_live).status == "waiting_on_user"
        assert desk.waiting_on_user() == _waiting(truth) + 1
        # one deleted: the counts by person lose it
        cloud.runs.get(every[2]).delete()
        assert await desk.caught_up()
        after = await _truth(server)
        assert {g.user_id: g.runs for g in desk.grants()} == live_runs_by_person(after.values())
        assert desk.waiting_on_user() == _waiting(after)

        # a jump to a run not held reads it; an unknown one is said unknown
        assert not desk.has_run(every[5]) and await desk.hold_run(every[5]) and desk.view(every[5]).id == every[5]
        assert not await desk.hold_run("run_nobody")
        assert {g.user_id: g.runs for g in desk.grants()} == live_runs_by_person(after.values())

        # a run started now is listed first
        new = (await cloud.crouter("user:a").runs.start(prompt="one more")).id
        assert await desk.caught_up()
        assert desk.runs()[0].id == new
        assert {g.user_id: g.runs for g in desk.grants()} == live_runs_by_person((await _truth(server)).values())
    finally:
        await ws.close()
        await server.stop()


async def test_the_runs_list_reads_older_runs_as_it_scrolls_and_its_filter_palette_and_jumps_find_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    server, _ = await _served_many(tmp_path / "ws", monkeypatch, first=20, older=4)
    truth = await _truth(server)
    every = list(truth)
    live = [run_id for run_id in every if not truth[run_id]["deleted"]]
    try:
        async with _runs_list(tmp_path / "ws") as (app, pilot, ws, pane):
            assert await until(pilot, lambda: "older runs, read as the list scrolls down" in pane.count_label)
            assert pane.count_label.startswith("19 runs") and "10 older runs" in pane.count_label  # one deleted
            assert ws.desk.unread_runs() == 10
            # to the list's end: the older runs are read a page at a time while the cursor is near the end
            pane.query_one("#runs-table").focus()
            await pilot.press("ctrl+end")
            assert await until(pilot, lambda: pane.count_label.startswith(f"{len(live)} runs")), pane.count_label
            assert "older" not in pane.count_label and ws.desk.unread_runs() == 0
            assert sorted(pane._ids) == sorted(live)  # each once, newest first
            started = [pane._listed[run_id].created_at for run_id in pane._ids]
            assert started == sorted(started, reverse=True)
            assert app.errors == []

        # a new window: a filter finds the oldest run, the palette too, and a jump reads the one it names
        async with _runs_list(tmp_path / "ws") as (app, pilot, ws, pane):
            assert await until(pilot, lambda: pane.count_label.startswith("19 runs"))
            assert not ws.desk.has_run(every[0])
            offered = await pane.palette_search("needle-old")
            assert [key for _, key in offered] == [every[0]]
            pane.apply_filter("needle")
            assert await until(pilot, lambda: pane.count_label == "1 run"), pane.count_label
            assert list(pane._listed) == [every[0]]
            assert await until(pilot, lambda: pane.selected == every[0])
            # another filter: what the last one's search held is let go
            pane.apply_filter("prompt:\"run 2\"")
            assert await until(pilot, lambda: ws.desk.has_run(every[2]) and pane._search == ""), pane.count_label
            assert every[2] in pane._listed and pane.selected != every[2]
            pane.apply_filter("nothing-matches-this")
            assert await until(pilot, lambda: not ws.desk.has_run(every[2]) and not ws.desk.has_run(every[0]))
            pane.clear_filter()
            assert not ws.desk.has_run(every[6])
            pane.select_key(every[6])
            assert await until(pilot, lambda: pane.selected == every[6]), pane.selected
            pane.select_key("run_nobody")
            assert await until(pilot, lambda: any("There is no run run_nobody" in str(n.message)
                                                  for n in app._notifications))
            assert app.errors == []
    finally:
        await server.stop()


async def test_a_page_of_older_runs_that_fails_is_said_and_read_when_asked_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    server, _ = await _served_many(tmp_path / "ws", monkeypatch, first=20, older=3)
    failed: list[str] = []
    real = httpx.AsyncHTTPTransport.handle_async_request

    armed: list[bool] = []

    async def flaky(transport: httpx.AsyncHTTPTransport, request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/runs") and "before" in request.url.params and armed and not failed:
            failed.append(str(request.url))
            raise httpx.ConnectError("the server went away for a moment", request=request)
        return await real(transport, request)

    monkeypatch.setattr(httpx.AsyncHTTPTransport, "handle_async_request", flaky)
    try:
        async with _runs_list(tmp_path / "ws") as (app, pilot, ws, pane):
            assert await until(pilot, lambda: pane.count_label.startswith("19 runs"))
            assert ws.follower is not None and ws.timeline is not None
            await ws.follower.idle()  # their walks over every run are done: the next page read is the list's
            await ws.timeline.settled()
            held = ws.desk.run_ids()
            armed.append(True)
            pane.query_one("#runs-table").focus()
            await pilot.press("ctrl+end")
            assert await until(pilot, lambda: any("older runs could not be read" in str(n.message)
                                                  for n in app._notifications))
            assert failed and set(held) <= set(ws.desk.run_ids())  # nothing lost
            await pilot.press("ctrl+home", "ctrl+end")  # asked again (a redraw near the end asks too): read
            assert await until(pilot, lambda: pane.count_label.startswith("28 runs")), pane.count_label
            assert ws.desk.unread_runs() == 0 and app.errors == []
    finally:
        await server.stop()


def test_the_counts_kept_as_runs_come_in_are_the_counts_of_every_run_held() -> None:
    import random

    rng = random.Random(7)
    book = StreamBook(None, RunMirror())  # type: ignore[arg-type]  # nothing read: runs taken in as answers give them
    for step in range(3000):
        run_id = f"run_{rng.randrange(200)}"
        book.absorb_run({"id": run_id, "user_id": rng.choice(["user:a", "user:b", "user:c"]),
                         "status": rng.choice(["running", "idle", "waiting_on_user", "settled"]),
                         "deleted": rng.random() < 0.2, "created_at": float(step)}, owned=True)
        if step % 100 == 0:
            held = [d for d in book.runs.values() if not d["deleted"]]
            assert book.runs_by_person() == live_runs_by_person(book.runs.values())
            statuses: dict[str, int] = {}
            for d in held:
                statuses[str(d["status"])] = statuses.get(str(d["status"]), 0) + 1
            assert {k: v for k, v in book.runs_by_status().items() if v} == statuses


async def test_after_a_reset_the_follower_weighs_the_runs_the_window_does_not_hold_against_the_canvas(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    server, cloud = await _served_many(tmp_path / "ws", monkeypatch, first=5, older=4)
    truth = await _truth(server)
    older = next(run_id for run_id in list(truth)[:20] if truth[run_id]["status"] not in ("settled", "waiting_on_user")
                 and not truth[run_id]["deleted"])
    ws = await Workspace.open(tmp_path / "ws")
    try:
        assert ws.follower is not None and ws.canvas is not None
        await ws.follower.idle()
        desk = ws.desk
        assert isinstance(desk, attached_desk.ServedDesk) and not desk.has_run(older)
        seen: list[Any] = []
        ws.feed.subscribe(seen.append)
        server.control.change_log.size = 3
        assert await desk.caught_up()  # it holds a last event id
        await desk.drop_stream()
        run = cloud.runs.get(older)
        for n in range(6):  # more than the server keeps: the window is told to read everything again
            run.reply(f"while away {n}")
        run.ask(title="still there?")
        assert await until_loop(lambda: any(c.kind == "attach.reloaded" for c in seen))
        assert desk.waiting_on_user() == _waiting(truth) + 1
        await ws.follower.idle()
        node = await ws.canvas.get(older)
        assert node.status == "waiting_on_user", node
        assert not desk.has_run(older) and list(ws.follower.errors) == []
    finally:
        await ws.close()
        await server.stop()


async def until_loop(condition: Any, rounds: int = 500) -> bool:
    for _ in range(rounds):
        if condition():
            return True
        await asyncio.sleep(0.01)
    return condition()
