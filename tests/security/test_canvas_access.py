"""A reader learns nothing of what it may not read, on every read path of the canvas, on both engines.

The table test builds the same world twice on one engine: once with a document private to another
owner (``app:crtr/plans``) that the reader's world links to, shares a name with and once watched
while it was public, and once without it. For each read path the reader's answer must be the same
in both worlds: what it may not read is never mentioned, counted, resolved, delivered or named.
The world also holds, with the private document, a report of Grace's node that Ada's node and
receivers heard of and that was then made private to it, a private document of Grace's that shadows
crtr's ``guide`` in Grace's node's view, and a document of crtr's whose link crtr finds ambiguous only
because of the private document. The focused tests below it pin each of the ways it leaked before.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import psycopg
import pytest

from services.canvas import Canvas, CanvasError, ObjectNotFoundError, ReaderView
from services.changes import ChangeFeed
from services.clock import FakeClock
from tests.services.canvas.conftest import (ENGINES, canvas, canvas_url, pg_schema_url, pg_server,  # noqa: F401
                                            plain, with_schema)
from tests.services.conftest import clock, feed  # noqa: F401 - the canvas fixture's own fixtures

pytestmark = pytest.mark.asyncio

PREVIEW = "When checking who may read what, read this because it shows the shape."
BOOT = [{"on": "boot", "deliver": "content"}]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "engine_name" in metafunc.fixturenames:
        metafunc.parametrize("engine_name", ENGINES)


class Hook:
    """A loopback HTTP server standing in for a ``url`` receiver: it keeps every body POSTed to it."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, object]] = []
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                hook.bodies.append(json.loads(self.rfile.read(int(self.headers.get("content-length", "0")))))
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/hook"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def hooks() -> Iterator[tuple[Hook, Hook]]:
    pair = Hook(), Hook()
    yield pair
    for hook in pair:
        hook.close()


@pytest.fixture
def twin_url(engine_name: str, tmp_path) -> Iterator[str]:
    """A second, empty canvas on the same engine: the world without the private document."""
    if engine_name == "sqlite":
        yield str(tmp_path / "twin.db")
        return
    url = pg_server()
    schema = f"t_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(plain(url), autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    yield with_schema(url, schema)
    with psycopg.connect(plain(url), autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")


@pytest.fixture
async def twin(twin_url: str) -> AsyncIterator[Canvas]:
    opened = await Canvas.open(twin_url, changes=ChangeFeed(), clock=FakeClock())
    yield opened
    await opened.close()


@dataclasses.dataclass
class World:
    canvas: Canvas
    reader: ReaderView
    hub: str
    """Ada's public document linking to the private one, by every name that could reach it."""
    url_hook: str
    queue: str
    hook: Hook


async def build(cv: Canvas, hook: Hook, *, private: bool) -> World:
    """Ada's node and receivers, Grace's node, crtr's public documents; with ``private``, also
    ``app:crtr/plans``: public while Ada's node and receivers start watching it, then private."""
    cv.receivers.backoff = 0.01
    for type_, handle in (("user", "ada"), ("user", "grace"), ("repo", "crtr")):
        await cv.ensure_owner(type_, handle)
    await cv.spawn_node(node_id="n_ada", owner="user:ada", kind="developer")
    await cv.spawn_node(node_id="n_grace", owner="user:grace", kind="developer")
    url_hook = await cv.register_custom_object("acme.hook", name="ada-hook", events={"ping": 3}, owner="user:ada",
                                               receiver="url", url=hook.url)
    queue = await cv.register_custom_object("acme.queue", name="ada-queue", events={"ping": 3},
                                            owner="n_ada", receiver="queue")
    await cv.write("plans", owner="repo:crtr", preview=PREVIEW, body="the repo's zebra plans", rules=BOOT)
    await cv.write("guide", owner="app:crtr", preview=PREVIEW, body="see [[plans]]", rules=BOOT)
    if private:
        doc = await cv.write("plans", owner="app:crtr", preview=PREVIEW, body="crtr's zebra plans", rules=BOOT)
        for watcher in ("n_ada", queue.object.id, url_hook.object.id):  # the url receiver last: it hears
            await cv.watch(doc.object.id, watcher=watcher, min_level=1)  # nothing while the document is public
        await cv.edit(doc.object.id, base_revision=1, privacy="private")
        await cv.edit(doc.object.id, base_revision=2, body="crtr's secret zebra plans, revised")
        await cv.record_event(doc.object.id, "configured")
    hub = await cv.write("hub", owner="user:ada", preview=PREVIEW, rules=BOOT,
                         body="zebra: [[app:crtr/plans]], [[crtr/plans]], [[plans]] and [[nothing]]")
    await cv.watch(hub.object.id, watcher="n_ada", min_level=1)
    await cv.watch(hub.object.id, watcher=url_hook.object.id, min_level=1)
    await cv.edit(hub.object.id, base_revision=1, preview=PREVIEW + " Again.")
    await cv.write("index", owner="app:crtr", preview=PREVIEW, body="see [[crtr/plans]]")  # ambiguous to crtr
    for watcher in ("n_ada", queue.object.id, url_hook.object.id):  # Ada hears of Grace's node
        await cv.watch("n_grace", watcher=watcher, min_level=1)
    if private:
        await cv.write("guide", owner="user:grace", privacy="private", preview=PREVIEW, body="grace's", rules=BOOT)
        await cv.receivers.drain()
        cv.receivers.active = False  # heard while readable, hidden before any receiver is called
        report = await cv.push_report("n_grace", label="weekly", preview=PREVIEW, body="grace's weekly report")
        await cv.edit(report.object.id, base_revision=1, privacy="private")
        cv.receivers.active = True
        cv.receivers.poke()
    await cv.receivers.drain()
    return World(cv, await cv.reader_view("n_ada"), hub.object.id, url_hook.object.id, queue.object.id, hook)


ReadPath = Callable[[World], Awaitable[object]]


async def _names(w: World) -> object:
    answers = []
    for name in ("crtr/plans", "plans", "app:crtr/plans", "nothing"):
        answers.append(await _answer(w.canvas.get(name, view=w.reader)))
    return answers


async def _receivers(w: World) -> object:
    await w.canvas.receivers.drain()
    return [sorted(w.hook.bodies, key=lambda b: str(b["event"])),
            await w.canvas.receive(w.queue, limit=50)]


async def _edges_by_name(w: World, ref: str) -> object:
    """``ref``'s edges in the reader's view, each group by the other end's name (ids differ by world)."""
    hood = await w.canvas.edges(ref, view=w.reader)
    return dataclasses.replace(hood, **{side: {k: sorted(v, key=lambda e: (e.other.type, e.other.kind, e.other.name))
                                               for k, v in groups.items()}
                                        for side, groups in (("outgoing", hood.outgoing), ("incoming", hood.incoming))})


async def _other_boot(w: World) -> object:
    return [await w.canvas.boot_context("n_grace", view=w.reader),
            await w.canvas.why_not("n_grace", "app:crtr/guide", view=w.reader)]


async def _boot(w: World) -> object:
    return [await w.canvas.boot_context("n_ada", view=w.reader),
            await _answer(w.canvas.why_not("n_ada", "app:crtr/plans", view=w.reader)),
            await w.canvas.why_not("n_ada", "repo:crtr/plans", view=w.reader)]


READ_PATHS: list[tuple[str, ReadPath]] = [
    ("links", lambda w: w.canvas.read(w.hub, view=w.reader)),
    ("names", _names),
    ("edges", lambda w: w.canvas.edges("n_ada", view=w.reader)),
    ("edges of the hub", lambda w: w.canvas.edges(w.hub, view=w.reader)),
    ("receivers", _receivers),
    ("inbox", lambda w: w.canvas.inbox("n_ada", view=w.reader, limit=100)),
    ("search", lambda w: w.canvas.search("zebra plans", view=w.reader)),
    ("boot context and why_not", _boot),
    ("boot context of another node", _other_boot),
    ("who_loads", lambda w: w.canvas.who_loads(w.hub, view=w.reader)),
    ("who_loads of a shadowed document", lambda w: w.canvas.who_loads("app:crtr/guide", view=w.reader)),
    ("who_loads of the private name", lambda w: _answer(w.canvas.who_loads("app:crtr/plans", view=w.reader))),
    ("counts", lambda w: w.canvas.count_by_type(["document", "node", "custom"], view=w.reader)),
    ("listing", lambda w: w.canvas.list_objects(type="document", name_filter="plans", view=w.reader)),
    ("events", lambda w: w.canvas.events("n_ada", view=w.reader)),
    ("watches", lambda w: w.canvas.edges("n_ada", kind="watches", view=w.reader)),
    ("events of the hub", lambda w: w.canvas.events(w.hub, view=w.reader)),
    ("events of another node", lambda w: w.canvas.events("n_grace", view=w.reader)),
    ("edges of another node", lambda w: _edges_by_name(w, "n_grace")),
    ("edges of a document crtr links ambiguously", lambda w: _edges_by_name(w, "app:crtr/index")),
    ("edges of the repo's plans", lambda w: _edges_by_name(w, "repo:crtr/plans")),
    ("links of a document crtr links ambiguously", lambda w: w.canvas.read("app:crtr/index", view=w.reader)),
    ("lint", lambda w: w.canvas.lint(w.hub, view=w.reader)),
]


async def _answer(call: Awaitable[object]) -> object:
    """The answer, or the refusal as a reader sees it (its class and words)."""
    try:
        return await call
    except CanvasError as exc:  # the canvas's own refusals only: anything else fails the test
        return {"refused": type(exc).__name__, "words": str(exc)}


_SERIALS = {"id", "entry_id", "event_id", "entry"}
"""Row numbers: they differ between the two worlds by how many rows the other one wrote."""


def _plain(value: object, names: dict[str, str]) -> object:
    """``value`` as plain data, each object id replaced by the object's full name in its world."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {k: _plain(v, names) for k, v in value.items() if not (k in _SERIALS and isinstance(v, int))}
    if isinstance(value, (list, tuple)):
        return [_plain(v, names) for v in value]
    if isinstance(value, str):
        for id_, name in names.items():
            value = value.replace(id_, name)
        return value
    return value


async def _names_of(cv: Canvas) -> dict[str, str]:
    page = await cv.list_objects(limit=1000)
    return {o.id: f"<{o.full_name if o.type == 'document' else o.type + ' ' + o.label}>" for o in page.items
            if o.id != o.label}


@pytest.mark.parametrize("path", [p for p, _ in READ_PATHS])
async def test_a_reader_cannot_tell_what_it_may_not_read_exists(canvas: Canvas, twin: Canvas, path: str,  # noqa: F811
                                                                hooks: tuple[Hook, Hook]) -> None:
    read = dict(READ_PATHS)[path]
    with_it = await build(canvas, hooks[0], private=True)
    without = await build(twin, hooks[1], private=False)
    seen_with = _plain(await _answer(read(with_it)), await _names_of(canvas))
    seen_without = _plain(await _answer(read(without)), await _names_of(twin))
    assert seen_with == seen_without
    assert "<app:crtr/plans>" not in json.dumps(seen_with)  # the private document, by id, is never mentioned
    assert "secret" not in json.dumps(seen_with)


# -- the four ways it leaked ------------------------------------------------------------------------

GRACE = ReaderView(node="n_grace", person="grace")


async def test_a_link_to_an_unreadable_target_shows_what_a_link_to_nothing_shows(canvas: Canvas) -> None:  # noqa: F811
    await canvas.spawn_node(node_id="n_grace", owner="user:grace")
    secret = await canvas.write("secret", owner="user:ada", privacy="private", preview=PREVIEW, body="mine")
    hub = await canvas.write("hub", owner="user:ada", preview=PREVIEW, body="[[ada/secret]] and [[ada/nothing]]")
    assert (await canvas.read(hub.object.id)).document.links == (  # type: ignore[union-attr]
        ("ada/secret", secret.object.id), ("ada/nothing", None))  # the operator sees where it leads
    seen = await canvas.read(hub.object.id, view=GRACE)
    assert seen.document.links == (("ada/secret", None), ("ada/nothing", None))  # type: ignore[union-attr]
    assert [f.message for f in await canvas.lint(hub.object.id, view=GRACE)
            if f.rule == "dangling-link"] == ["[[ada/secret]] links to nothing", "[[ada/nothing]] links to nothing"]


async def test_a_name_an_unreadable_object_shares_resolves_to_the_readable_one(canvas: Canvas) -> None:  # noqa: F811
    await canvas.spawn_node(node_id="n_grace", owner="user:grace")
    await canvas.write("plans", owner="user:team", privacy="private", preview=PREVIEW, body="the team's")
    repo = await canvas.write("plans", owner="repo:team", preview=PREVIEW, body="the repo's")
    assert (await canvas.get("team/plans", view=GRACE)).id == repo.object.id
    profile = await canvas.write("plans", owner="profile:team", preview=PREVIEW, body="the profile's")
    with pytest.raises(Exception, match="ambiguous") as refused:
        await canvas.get("team/plans", view=GRACE)
    assert set(refused.value.candidates) == {repo.object.full_name, profile.object.full_name}  # type: ignore[attr-defined]
    assert "user:team" not in str(refused.value)
    with pytest.raises(ObjectNotFoundError, match="no object is named 'user:team/plans'"):
        await canvas.get("user:team/plans", view=GRACE)


async def test_a_receiver_stops_hearing_of_a_document_made_private_to_another_owner(
        canvas: Canvas, hooks: tuple[Hook, Hook]) -> None:  # noqa: F811
    hook = hooks[0]
    canvas.receivers.backoff = 0.01
    receiver = await canvas.register_custom_object("acme.hook", name="hook", events={"ping": 3}, owner="user:ada",
                                                   receiver="url", url=hook.url)
    queue = await canvas.register_custom_object("acme.queue", name="queue", events={"ping": 3}, owner="user:ada",
                                                receiver="queue")
    doc = await canvas.write("notes", owner="user:grace", preview=PREVIEW, body="v1")
    for watcher in (receiver.object.id, queue.object.id):
        await canvas.watch(doc.object.id, watcher=watcher, pattern="edited")
    await canvas.edit(doc.object.id, base_revision=1, body="v2")
    await canvas.receivers.drain()
    assert [b["event"] for b in hook.bodies] == ["edited"]  # heard while it was public
    assert [e.event_type for e in await canvas.receive(queue.object.id)] == ["edited"]
    await canvas.ack(queue.object.id, [e.id for e in await canvas.receive(queue.object.id)])
    # queued while public, made private before the receiver was called: withheld at delivery time
    canvas.receivers.active = False  # nothing is looked for until it is poked again
    await canvas.receivers.drain()  # what the acknowledgement's write started
    await canvas.edit(doc.object.id, base_revision=2, body="v3")
    await canvas.edit(doc.object.id, base_revision=3, privacy="private")
    canvas.receivers.active = True
    canvas.receivers.poke()
    await canvas.receivers.drain()
    assert await canvas.receive(queue.object.id) == []
    # published while private: never queued
    await canvas.edit(doc.object.id, base_revision=4, body="v5")
    await canvas.receivers.drain()
    assert [b["event"] for b in hook.bodies] == ["edited"]
    assert await canvas.receive(queue.object.id) == []
    assert (await canvas.inbox(receiver.object.id)).unread == 0  # nothing left waiting to be sent


async def test_edges_read_in_a_view_say_whose_view(canvas: Canvas) -> None:  # noqa: F811
    await canvas.spawn_node(node_id="n_grace", owner="user:grace")
    hub = await canvas.write("hub", owner="user:grace", preview=PREVIEW, body="plain")
    edges = await canvas.edges(hub.object.id, view=GRACE)
    assert edges.seen_as == (await canvas.list_objects(view=GRACE)).seen_as
    assert edges.seen_as.startswith("reader node n_grace")
    assert (await canvas.edges(hub.object.id)).seen_as.startswith("operator")


async def test_a_bulk_load_resolves_links_only_to_what_each_documents_owner_may_read(canvas: Canvas) -> None:  # noqa: F811
    """``write_many`` resolves a batch's links at once (and heals earlier dangling links in bulk): the
    same rule as ``write``, so a private document of another owner neither answers nor is attached."""
    await canvas.spawn_node(node_id="n_grace", owner="user:grace")
    await canvas.write("secret", owner="user:ada", privacy="private", preview=PREVIEW, body="ada's")
    early = await canvas.write("early", owner="user:grace", preview=PREVIEW, body="[[ada/diary]]")  # dangling
    one_by_one = await canvas.write("single", owner="user:grace", preview=PREVIEW, body="[[ada/secret]]")
    bulk = await canvas.write_many([
        {"name": "bulk", "owner": "user:grace", "preview": PREVIEW, "body": "[[ada/secret]] [[ada/diary]]"},
        {"name": "diary", "owner": "user:ada", "privacy": "private", "preview": PREVIEW, "body": "ada's"},
    ])
    assert one_by_one.links == (("ada/secret", None),)  # grace's document may not see ada's private one
    assert bulk[0].links == (("ada/secret", None), ("ada/diary", None))  # nor in a bulk load
    healed = await canvas.read(early.object.id)
    assert healed.document.links == (("ada/diary", None),)  # type: ignore[union-attr]  # nor when healing
    assert not (await canvas.edges(early.object.id)).outgoing.get("links-to")
