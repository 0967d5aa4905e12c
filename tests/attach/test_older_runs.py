"""A window attached to a workspace of many runs opens on the newest ones, and reads the older ones
behind its panes: what it holds is then every run in start order, as a whole
read holds them; a person's runs are counted right before and after; a run read since the window
opened is not replaced by an older page; every reader of all runs (the follower's catch-up, the
history's baseline, a recording's ``caught_up``) waits until every run is read."""

from __future__ import annotations

import asyncio
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


def hold_older_pages(monkeypatch: pytest.MonkeyPatch) -> asyncio.Event:
    """The reads of older runs (``GET /runs?before=``) wait on the wire until the event is set."""
    gate = asyncio.Event()
    real = httpx.AsyncHTTPTransport.handle_async_request

    async def held(transport: httpx.AsyncHTTPTransport, request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/runs") and "before" in request.url.params:
            await gate.wait()
        return await real(transport, request)

    monkeypatch.setattr(httpx.AsyncHTTPTransport, "handle_async_request", held)
    return gate


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


async def test_a_window_over_many_runs_holds_them_all_once_read_and_its_readers_wait_for_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(attached_desk, "FIRST_RUNS", 5)
    monkeypatch.setattr(attached_desk, "OLDER_RUNS", 3)
    folder = tmp_path / "ws"
    folder.mkdir()
    sock = bind_socket("127.0.0.1", 0)
    url = origin_url(*sock.getsockname()[:2])
    cloud = FakeCloud("app", issuer=url, runtime_url=url)
    server = CloudServer(cloud, sock, folder=folder)  # as `workbench serve` does: the window follows
    await server.start()
    for user in ("user:a", "user:b"):
        await cloud.connect(MemoryConnectionStore(), user, scopes=["crtr:llm"])
    for n in range(30):
        run = cloud.runs.get((await cloud.crouter("user:a" if n % 2 else "user:b").runs.start(prompt=f"run {n}")).id)
        run.reply(f"answer {n}")
        if n % 3 == 0:
            run.settle(result=f"done {n}")
        if n in (4, 10):
            run.delete()
        if n == 1:
            run.ask(title="which one?")
    async with RemoteCloud(server.url, server.token) as remote:
        truth = StreamBook(remote, RunMirror())
        await truth.load()  # every run, read whole
    gate = hold_older_pages(monkeypatch)  # the window works with the newest meanwhile
    ws = await Workspace.open(folder)
    try:
        desk = ws.desk
        assert ws.attached is not None and ws.follower is not None
        assert desk.run_ids() == list(truth.runs)[-5:] and desk.unread_runs() == len(truth.runs) - 5
        counts = live_runs_by_person(truth.runs.values())
        assert {g.user_id: g.runs for g in desk.grants()} == counts  # counted right while the rest is unread
        assert desk.waiting_on_user() == sum(1 for d in truth.runs.values()
                                             if d["status"] == "waiting_on_user" and not d["deleted"]) > 0
        caught = asyncio.ensure_future(desk.caught_up())
        await asyncio.sleep(0.3)  # the follower and the history would have read a partial book by now
        assert not caught.done()
        gate.set()
        assert await caught
        assert desk.unread_runs() == 0
        assert desk.run_ids() == list(truth.runs)
        assert {v.id for v in desk.runs(include_deleted=True)} == set(truth.runs)
        assert {g.user_id: g.runs for g in desk.grants()} == live_runs_by_person(truth.runs.values())
        assert await desk.caught_up()

        # the follower's catch-up weighed every run: each one is on the canvas
        await ws.follower.idle()
        assert ws.canvas is not None
        nodes = {n.id for n in (await ws.canvas.list_objects(type="node", limit=500)).items}
        assert nodes == set(truth.runs)  # a deleted run's node is kept, marked
        assert list(ws.follower.errors) == []

        # the history's baseline holds every run, the oldest included
        assert ws.timeline is not None
        await ws.timeline.settled()
        assert set(ws.timeline.store.every("run")) == set(truth.runs)

        # a run started now is listed with the rest, newest first
        new = (await cloud.crouter("user:a").runs.start(prompt="one more")).id
        await desk.caught_up()
        assert desk.runs()[0].id == new and desk.run_ids() == [*truth.runs, new]
    finally:
        await ws.close()
        await server.stop()


async def test_the_runs_list_says_it_reads_the_older_runs_and_lists_them_once_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(attached_desk, "FIRST_RUNS", 4)
    monkeypatch.setattr(attached_desk, "OLDER_RUNS", 10)
    served = await Workspace.open(settings=Settings(path=tmp_path / "ws", serve_port=0))
    try:
        for n in range(12):
            await served.desk.start_run("user:ada", f"run {n}")
        total = len([v for v in served.desk.runs() if not v.system])
        gate = hold_older_pages(monkeypatch)
        app = make_app(Settings(path=served.path))
        async with app.run_test(size=(120, 40)) as pilot:
            ws = await ready(pilot)
            await pilot.press("3")
            pane = app.main.pane("runs")
            unread = ws.desk.unread_runs()
            assert unread > 0
            assert await until(pilot, lambda: "reading the older runs" in pane.count_label), pane.count_label
            shown = int(pane.count_label.split()[0])
            assert shown == 4 and shown + unread == len(served.desk.run_ids())  # the newest; the rest being read
            gate.set()
            assert await until(pilot, lambda: "older" not in pane.count_label), pane.count_label
            assert pane.count_label.startswith(f"{total} runs")
            assert app.errors == []
    finally:
        await served.close()


async def test_a_page_of_older_runs_that_fails_is_read_again_and_the_window_says_why(
        served: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(attached_desk, "FIRST_RUNS", 5)
    monkeypatch.setattr(attached_desk, "OLDER_RUNS", 8)
    failed: list[str] = []
    real = httpx.AsyncHTTPTransport.handle_async_request

    async def flaky(transport: httpx.AsyncHTTPTransport, request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/runs") and "before" in request.url.params and not failed:
            failed.append(str(request.url))
            raise httpx.ConnectError("the server went away for a moment", request=request)
        return await real(transport, request)

    monkeypatch.setattr(httpx.AsyncHTTPTransport, "handle_async_request", flaky)
    ws = await Workspace.open(served.path)
    try:
        desk = ws.desk
        assert isinstance(desk, attached_desk.ServedDesk)
        desk.reconnect_s = 0.01
        await desk.all_runs_read()
        assert failed and desk.unread_runs() == 0
        assert desk.run_ids() == served.desk.run_ids()  # nothing lost, nothing twice
        assert any("reading the older runs" in line and "did not answer" in line for line in desk.errors), desk.errors
    finally:
        await ws.close()


async def test_a_window_closes_at_once_while_it_reads_the_older_runs(
        served: Workspace, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(attached_desk, "FIRST_RUNS", 5)
    hold_older_pages(monkeypatch)  # never let through
    ws = await Workspace.open(served.path)
    desk = ws.desk
    assert desk.unread_runs() > 0
    waiting = asyncio.ensure_future(desk.caught_up(timeout=0.2))
    assert not await waiting  # not caught up: the older runs are not read, and it says so
    assert any("older runs were not read in time" in line for line in desk.errors)
    await asyncio.wait_for(ws.close(), 10)  # the follower, the history and the reads stop with it
    assert desk.unread_runs() > 0


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
