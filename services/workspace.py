"""The Workspace: one folder of state and the services wired over it; the only thing screens talk to.

``await Workspace.open(path)`` creates the folder if needed and starts:

- ``.cloud``: the embedded fake cloud (in memory: it starts afresh each time, with the sample
  world's people, providers and runs, whose fixed ids replay into the same canvas nodes); with
  ``Settings.serve_port`` it is kept in ``cloud.db`` instead (seeded once) and served on that
  loopback port by ``.server`` (``workbench --serve``) until ``close()``;
- ``.desk``: operator and app actions on runs and grants (the app's side goes through the SDK);
- ``.canvas``: the object graph in ``canvas.db``, followed from the cloud's runs by ``.follower``;
- ``.outbox``: the memory outbox under ``memory/`` (completed turns are captured into it);
- ``.insights``: insight reviews under ``knowledge/insights``;
- ``.okf``: OKF harvest judgments under ``knowledge/``.

A new workspace (no ``workspace.json`` yet) is seeded with the sample world's documents,
listeners, node messages and proposals. A workspace that cannot open (a damaged ``canvas.db``, a
file where the folder belongs, a permission refused, a file that does not parse) raises one
``WorkspaceOpenError`` naming the file, the cause and what to do, after closing whatever it had
started.

``capture_failures()`` lists the captures that failed and have not succeeded since (any service
publishes ``capture.failed`` with the item's id, or ``capture.completed`` with ``skipped`` notes;
a clean ``capture.completed`` or ``capture.appended`` for the same source and id clears it): the
header's capture badge counts them. ``.changes()``
iterates every ``Change`` any service publishes; ``close()`` stops everything.

A folder another process serves (a live, answering ``serve.json``) is attached to instead: no
second cloud starts; ``.desk`` is a ``services.attached.desk.ServedDesk`` over the server's control API
and change stream, ``.attached`` names the server and ``header_status`` says so. A stale
``serve.json`` (dead process, no answer) is removed and the folder opens as usual. The process
holding ``follower.lock`` carries the runs into the canvas: the serving window, or, when the
server is headless (``workbench serve``), the first window attached, reading runs over the wire.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Coroutine, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar

import asyncio
import hashlib
import os
import tempfile
from functools import partial

from .changes import Change, ChangeFeed, RunEvents
from .clock import Clock
from .files import atomic_write_json
from .desk.models import JUDGE_USER, CaptureFailure
from .open_errors import WorkspaceOpenError, canvas_location, open_error
from .settings import Settings

if TYPE_CHECKING:
    from .attached import ServedDesk, ServerInfo
    from .canvas import Canvas
    from .cloud import FakeCloud
    from .served.persist import CloudStore
    from .attached.client import RemoteCloud
    from .honcho import FakeHonchoService
    from .desk import Desk, RunDetail
    from .files import FileLock
    from .follower import RunFollower
    from .knowledge.insights import InsightReviews
    from .knowledge.okf import Harvest
    from .knowledge.outbox import MemoryOutbox
    from .sdk import ConnectionStore, OAuth2Client
    from .served.server import CloudServer
    from .timeline import Timeline

__all__ = ["Settings", "Workspace", "WorkspaceOpenError", "CaptureFailure", "JUDGE_USER", "import_services"]

_T = TypeVar("_T")

class CloudOptions(TypedDict):
    """What a workspace's cloud is built with besides its id: the settings' stream idle time and
    clock, and the workspace's change feed."""

    stream_idle_ms: int
    clock: Clock
    changes: ChangeFeed


FOLLOWER_LOCK = "follower.lock"
"""Held by the one process that carries a served workspace's runs into its canvas."""
MEMORY_DB = "honcho.db"
"""The embedded memory service's state, under the workspace's ``memory/`` (SQLite)."""


async def together(*steps: Coroutine[object, object, object]) -> None:
    """Run independent steps of an open at once. The first failure is raised as itself (the open names
    its file from it) after the other steps are cancelled and have ended, so nothing is left running."""
    try:
        async with asyncio.TaskGroup() as group:
            for step in steps:
                group.create_task(step)
    except BaseExceptionGroup as failed:
        raise failed.exceptions[0] from None


def import_services() -> None:
    """Import every service module ``Workspace.open`` needs (sqlalchemy, cryptography, ...).

    ``open`` imports them itself; a caller with an event loop to keep lively (the App) runs this
    in a thread first, so that most of a second of imports does not block the loop.
    """
    import importlib

    for name in ("cloud", "desk", "desk.embedded", "sdk", "world", "canvas", "follower", "attached",
                 "served.control", "knowledge.insights", "knowledge.outbox", "knowledge.outbox.target",
                 "knowledge.okf", "honcho", "timeline"):
        importlib.import_module(f"{__package__}.{name}")


class Workspace:
    """A workspace folder and its services."""

    server: CloudServer | None = None
    """The server of the cloud when this window serves it (``Settings.serve_port``)."""
    cloud_store: CloudStore | None = None
    """What keeps a served cloud's state in ``cloud.db``."""
    attached: ServerInfo | None = None
    """The server this window attached to, when another process serves the folder."""
    remote: RemoteCloud | None = None
    """The control API of that server, when attached."""
    _follower_lock: FileLock | None = None
    _served_desk: ServedDesk | None = None
    timeline: Timeline | None = None
    _history_temp: Path | None = None
    """The history the time cursor reads (None until the services are open)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.path = Path(settings.path)
        self.feed = ChangeFeed()
        self.cloud: FakeCloud | None = None
        """The cloud, when it runs in this process (None in a window attached to a server)."""
        self._desk: Desk | None = None
        self.oauth: OAuth2Client | None = None
        """The workspace's own app connection (None when attached)."""
        self.store: ConnectionStore | None = None
        """Where that connection keeps people's tokens."""
        self._canvas: Canvas | None = None
        self._okf: Harvest | None = None
        self._outbox: MemoryOutbox | None = None
        self._memory: FakeHonchoService | None = None
        """The embedded memory service (None when memory is served or remote)."""
        self._insights: InsightReviews | None = None
        self.follower: RunFollower | None = None
        self.created = False
        """True when this open created the workspace (and seeded it)."""
        self._opening: Path | str = self.path
        """The file or folder being opened (named when the open fails), or the canvas server's masked URL."""
        self._failed_at: tuple[BaseException, Path | str] | None = None
        """The first failure of a step that ran beside others, and the place it names."""
        self._knowledge_seeded = asyncio.Event()
        """Clear while a new workspace's notes are captured and judged: a settled run's record waits for
        it, so the world's judgments come in the same order whatever finishes first."""
        self._knowledge_seeded.set()
        self._captures: dict[tuple[str, str], CaptureFailure] = {}
        self.feed.subscribe(self._track_capture, many=self._track_captures)

    @classmethod
    async def open(cls, path: Path | str | None = None, *, settings: Settings | None = None) -> "Workspace":
        """Open (or create) the workspace at ``path`` and start its services."""
        if settings is None:
            settings = Settings(path=Path(path) if path is not None else Settings().path)
        elif path is not None:
            settings = Settings(**{**settings.__dict__, "path": Path(path)})
        workspace = cls(settings)
        try:
            await workspace._start()
        except Exception as exc:
            error = open_error(exc, workspace._failure_place(exc), workspace.path)
            try:
                await workspace.close()
            except Exception:  # what did not start cannot close cleanly; the cause is what matters
                pass
            raise error from exc
        return workspace

    def _track_capture(self, change: Change) -> None:
        skipped = change.data.get("skipped") if change.kind == "capture.completed" else None
        if change.kind == "capture.failed" or (isinstance(skipped, int) and skipped > 0):
            error = str(change.data.get("error") or f"{skipped} note(s) refused and left in the home")
            self._captures[(change.source, change.id)] = CaptureFailure(
                change.source, change.id, error, self.settings.clock.time())
        elif change.kind in ("capture.completed", "capture.appended"):
            self._captures.pop((change.source, change.id), None)

    def _track_captures(self, changes: Sequence[Change]) -> None:
        if not isinstance(changes, RunEvents):  # a run's burst of events holds no capture
            for change in changes:
                self._track_capture(change)

    def capture_failures(self) -> list[CaptureFailure]:
        """Captures that failed and have not succeeded since, oldest first."""
        return list(self._captures.values())

    async def _located(self, where: Path | str, step: Awaitable[_T]) -> _T:
        """``step``, a part of the open that runs beside others; a failure in it names ``where``."""
        try:
            return await step
        except Exception as exc:
            if self._failed_at is None:
                self._failed_at = (exc, where)
            raise

    def _failure_place(self, error: BaseException) -> Path | str:
        """The file or folder an open's failure names: the place of the step it came from."""
        if self._failed_at is not None and self._failed_at[0] is error:
            return self._failed_at[1]
        return self._opening

    # -- what an open workspace always has (both builders make each) --------------------------------

    def _opened(self, value: _T | None, what: str) -> _T:
        if value is None:
            raise RuntimeError(f"the workspace at {self.path} is not open ({what} is not there yet)")
        return value

    @property
    def desk(self) -> Desk:
        """Operator, app and grant actions on runs, and the read models the panes draw."""
        return self._opened(self._desk, "its desk")

    @property
    def canvas(self) -> Canvas:
        """The object graph (``canvas.db``, or the team's PostgreSQL canvas)."""
        return self._opened(self._canvas, "its canvas")

    @property
    def okf(self) -> Harvest:
        """OKF harvest judgments (an ``AttachedHarvest`` when attached: it judges nothing itself)."""
        return self._opened(self._okf, "its knowledge")

    @property
    def outbox(self) -> MemoryOutbox:
        """The memory outbox under ``memory/``."""
        return self._opened(self._outbox, "its memory outbox")

    @property
    def insights(self) -> InsightReviews:
        """Insight reviews under ``knowledge/insights``."""
        return self._opened(self._insights, "its insight reviews")

    async def _start(self) -> None:
        from .attached import find_server

        self.path.mkdir(parents=True, exist_ok=True)
        self._opening = self.path / "serve.json"
        found = await find_server(self.path)
        if found is not None:  # one cloud per workspace: this window attaches to the one served
            await self._start_attached(found)
            await self._start_history()
            return
        self._opening = self.path
        # the canvas (its schema, in threads) opens while the cloud is built (its signing key, in a thread)
        opening_canvas = asyncio.create_task(self._located(canvas_location(self.settings.canvas_url, self.path),
                                                           self._open_canvas()))
        try:
            await self._start_embedded(opening_canvas)
            await self._start_history()
        except BaseException:
            await asyncio.wait([opening_canvas])  # an opened canvas is closed with the rest
            if not opening_canvas.cancelled():
                opening_canvas.exception()  # a failure of its own is not the one this open reports
            raise

    async def _start_embedded(self, opening_canvas: asyncio.Task[Canvas]) -> None:
        """Open this window's own cloud and the stores; a new workspace is seeded with the world."""
        from assets import ASSETS_DIR

        from .cloud import generate_private_key_pem
        from .served.control import ControlApp
        from .desk.embedded import embedded_desk
        from .sdk import OAuth2Client
        from .world import load_world, seed_cloud

        marker = self.path / "workspace.json"
        self.created = not marker.exists()
        settings = self.settings
        self.cloud, self.store, kept = await self._open_cloud()
        desk_key = generate_private_key_pem("ec")
        if self.server is not None:  # an app's own first key is the one the directory pins
            self.cloud.trust_client_key(desk_key)
        self.oauth = OAuth2Client(
            client_id=settings.client_id,
            issuer=self.cloud.issuer,
            transport=self.cloud.transport,
            private_key=desk_key,
            redirect_uri="https://workbench.local/callback",
            store=self.store,
            on_refusal=lambda refusal: self._record_refusal(refusal.user_id or "", refusal.code, refusal.message or ""),
            clock=settings.clock,
        )
        # the serving window's control app is the server's own: attached windows act as the app
        # through this window's connections, as this window's desk does
        control = self.server.control if self.server is not None else ControlApp(self.cloud, "", change_log=False)
        control.app_actions.use(self.oauth.client, self.store)
        self._desk = embedded_desk(self.cloud, control, self.feed, clock=settings.clock)
        world = load_world(settings.world or ASSETS_DIR / "sample" / "world.json") if settings.seed else {}
        if world and not kept:
            await seed_cloud(self.cloud, world, self.store)
        elif world:
            from .served.persist import seed_providers

            seed_providers(self.cloud, world)
        await self._open_stores(world, opening_canvas)
        if self.created:
            self._opening = marker
            atomic_write_json(marker, {"version": 1, "client_id": settings.client_id})

    async def _start_attached(self, found: ServerInfo) -> None:
        """Attach to the workspace's server: runs and grants through its control API and change
        stream; the canvas, outbox, insights and OKF judgments from the folder's own stores (shared
        with the serving process through their locks). The serving process alone follows runs,
        sweeps the outbox and judges notes, so nothing is done twice."""
        from .attached import ServedDesk
        from .canvas import Canvas
        from .attached.client import RemoteCloud
        from .knowledge.insights import InsightReviews
        from .knowledge.okf.attached import AttachedHarvest
        from .knowledge.outbox import MemoryOutbox
        from .served.honcho import HONCHO_PREFIX, served_honcho_key
        from .knowledge.outbox.target import memory_target

        settings = self.settings
        self.attached = found
        self.remote = RemoteCloud(found.url, found.token)
        desk = self._desk = ServedDesk(self.remote, self.feed, clock=settings.clock, folder=self.path, info=found)
        self._served_desk = desk
        await desk.start()
        self._opening = canvas_location(settings.canvas_url, self.path)
        self._canvas = await Canvas.open(settings.canvas_url or self.path / "canvas.db", changes=self.feed,
                                        clock=settings.clock)
        self._opening = self.path / "memory"
        # memory goes where the serving process delivers it: the served fake under /honcho, or the
        # Honcho server the settings name (a fork here reads the turns delivered there)
        self._outbox = await MemoryOutbox.open(
            self.path / "memory", self.feed, clock=settings.clock, start_child=self._start_child,
            **memory_target(settings.honcho_url or found.url + HONCHO_PREFIX, settings.honcho_workspace_id,
                            api_key=None if settings.honcho_url else served_honcho_key(self.path)),
        )
        self._opening = self.path / "knowledge"
        self._insights = await InsightReviews.open(self.path / "knowledge", self.canvas, changes=self.feed,
                                                  clock=settings.clock)
        self._okf = await AttachedHarvest.attach(self.path / "knowledge", self.feed, clock=settings.clock)
        if self._claim_following():  # nobody follows the runs into the canvas (a headless server): this window does
            from .canvas import RunBridge
            from .follower import RunFollower

            self.follower = RunFollower(
                desk, self.feed, bridge=RunBridge(self.canvas), outbox=self.outbox,
                state_path=self.path / "follower.json", ignore_users=frozenset({JUDGE_USER}),
            )
            await self.follower.start(background=True)  # the window opens while it reads what the canvas lacks

    async def _start_history(self) -> None:
        """Keep the history the time cursor reads: in the folder's ``history.db`` for the window that
        owns the cloud, in a file of its own that ends with it for an attached window (the serving
        window keeps the folder's). A history file that cannot be read is set aside, and a new one kept."""
        from .timeline import HistoryError, Timeline, TimeStore

        if self.attached is not None:
            handle, name = tempfile.mkstemp(prefix="workbench-history-", suffix=".db")
            os.close(handle)
            path, self._history_temp = Path(name), Path(name)
        else:
            path = self.path / "history.db"
        notice: str | None
        try:
            store = await asyncio.to_thread(TimeStore, path)
        except HistoryError as exc:
            aside = path.with_name(f"{path.name}.unreadable-{int(self.settings.clock.time())}")
            await asyncio.to_thread(os.replace, path, aside)
            store = await asyncio.to_thread(TimeStore, path)
            notice = f"the history could not be read ({exc}); it was set aside as {aside.name} and begins again here"
        else:
            notice = None
        self.timeline = Timeline(store, self.feed, self.desk, canvas=self._canvas, okf=self._okf,
                                 insights=self._insights, outbox=self._outbox, clock=self.settings.clock)
        self.timeline.notice = notice
        await self.timeline.start()

    def _claim_following(self) -> bool:
        """Take the workspace's ``follower.lock``: one process at a time carries runs into the canvas."""
        from .files import FileLock

        lock = FileLock(self.path / FOLLOWER_LOCK)
        if not lock.try_acquire():
            return False
        self._follower_lock = lock
        return True

    @property
    def header_status(self) -> str:
        """What the header says about where this window's cloud is: ``ready`` for its own."""
        desk = self._served_desk
        if desk is not None:  # the server it follows now (a restarted one may have another port)
            info = desk.info or self.attached
            assert info is not None
            if desk.lost_since is not None:
                from .clock import iso

                return f"server gone since {iso(desk.lost_since)[11:19]} UTC (was {info.url}); retrying"
            return f"attached to {info.url} (served by process {info.pid})"
        if self.attached is not None:
            return f"attached to {self.attached.url} (served by process {self.attached.pid})"
        if self.server is not None:
            return f"serving {self.server.url}"
        return "ready"

    @property
    def canvas_label(self) -> str:
        """Where the canvas is when it is on a server (engine, user, host, database, schema); empty for
        ``canvas.db`` in the workspace."""
        from .canvas.engine import canvas_label

        return canvas_label(self.settings.canvas_url)

    async def _open_canvas(self) -> Canvas:
        from .canvas import Canvas

        settings = self.settings
        self._canvas = await Canvas.open(settings.canvas_url or self.path / "canvas.db", changes=self.feed,
                                        clock=settings.clock)
        return self._canvas

    async def _open_stores(self, world: dict[str, Any], opening_canvas: asyncio.Task[Canvas]) -> None:
        from .canvas import RunBridge
        from .follower import RunFollower
        from .knowledge.insights import InsightReviews
        from .knowledge.outbox import MemoryOutbox
        from .knowledge.outbox.target import memory_target

        settings = self.settings
        if self.server is not None:
            self._claim_following()  # the serving window follows; attached windows then leave it to it
        self._opening = canvas_location(settings.canvas_url, self.path)
        await opening_canvas
        self._opening = self.path / "memory"
        target = memory_target(settings.honcho_url, settings.honcho_workspace_id, served=self.server)
        if "honcho_service" not in target and "base_url" not in target:  # the embedded memory service
            from .honcho import FakeHonchoService

            # its state lives in the workspace like the outbox's: after a restart it still holds what
            # the outbox counts as delivered
            self._memory = FakeHonchoService(self.path / "memory" / MEMORY_DB, clock=settings.clock)
            target["honcho_service"] = self._memory
        self._outbox = await MemoryOutbox.open(
            self.path / "memory", self.feed, clock=settings.clock, start_child=self._start_child, **target)
        self._opening = self.path / "knowledge"
        self._insights = await InsightReviews.open(self.path / "knowledge", self.canvas, changes=self.feed, clock=settings.clock)
        self.follower = RunFollower(
            self.desk,
            self.feed,
            bridge=RunBridge(self.canvas),
            outbox=self.outbox,
            on_settled=self.record_run,
            state_path=self.path / "follower.json",
            ignore_users=frozenset({JUDGE_USER}),
        )
        await self._open_harvest()  # before the follower: settled runs become records for it
        if self.created and world:
            await self._seed_stores(world)
        else:
            await self.follower.start()
        self.outbox.start()
        assert self.okf is not None and self.cloud is not None
        await self.okf.start_watcher()
        await self.follower.idle()  # open returns with every run of the world applied and judged
        await self.cloud.settle_tasks()

    async def _seed_stores(self, world: dict[str, Any]) -> None:
        """A new workspace's world into its stores.

        The OKF knowledge (the bases, the agent's home, its notes captured and judged: files fsynced one
        by one, and git) is seeded while the follower carries the world's runs into the canvas (SQLite),
        so neither waits for the other. A run that settles meanwhile becomes a run record only once the
        notes are judged (``record_run`` waits), so the judgments are made in the order they always were.
        """
        from .world import seed_canvas, seed_insights, seed_knowledge

        assert self.follower is not None
        knowledge = self.path / "knowledge"

        async def seed_notes() -> None:
            try:
                await self._located(knowledge, seed_knowledge(self.okf, world, homes=knowledge / "homes",
                                                              bases=self.bases_path()))
            finally:
                self._knowledge_seeded.set()

        self._knowledge_seeded.clear()
        try:
            await self.follower.start()
            # the run nodes exist before messages are sent to them (seed_canvas)
            await together(seed_notes(), self.follower.idle())
        finally:
            self._knowledge_seeded.set()
        await seed_canvas(self.canvas, world)
        await seed_insights(self.insights, world)

    async def _open_harvest(self) -> None:
        """OKF judgments: judged by runs on the fake cloud, as the operator's own person."""
        from .knowledge.okf import CrouterJudgeClient, Harvest, deterministic_judge_reply

        assert self.cloud is not None and self.oauth is not None and self.store is not None
        judge_user = self.cloud.user(JUDGE_USER)
        await self.cloud.connect(self.store, JUDGE_USER, scopes=["crtr:llm", "crtr:act"])
        judge_user.runs.respond(lambda ctx: ctx.run.reply(deterministic_judge_reply(ctx.run.params["prompt"])))
        client = await self.oauth.client(JUDGE_USER)
        self._okf = await Harvest.open(
            self.path / "knowledge", self.feed, CrouterJudgeClient(client, app=self.settings.client_id),
            clock=self.settings.clock,
        )

    def bases_path(self) -> Path:
        """Where this workspace puts new accepted bases (see ``Settings.bases_path``)."""
        if self.settings.bases_path is not None:
            return Path(self.settings.bases_path)
        from .knowledge.okf.tree import inside_git_worktree

        local = self.path.resolve() / "knowledge" / "bases"
        if inside_git_worktree(local) is None:
            return local
        data = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
        digest = hashlib.sha256(str(self.path.resolve()).encode()).hexdigest()[:12]
        return data / "workbench" / "bases" / digest

    async def record_run(self, run: RunDetail) -> None:
        """When a run settles, its turns become an OKF run record to judge (the judge's own runs excepted)."""
        from .follower import run_record

        if self._okf is None or run.user_id == JUDGE_USER:
            return
        await self._knowledge_seeded.wait()  # a new workspace's notes are judged first (see _seed_stores)
        sources = await self.okf.sources()
        if not sources:
            return
        record = run_record(run)
        if record["turns"]:
            await self.okf.capture_record(sources[0].id, record)

    async def _start_child(self, parent_id: str, messages: list[dict[str, Any]]) -> str:
        """Fork a conversation: a new run, started as the app, carrying the parent's messages up to the fork point."""
        assert self.desk is not None
        return await self.desk.fork(parent_id, messages)

    def _record_refusal(self, user_id: str, code: str, message: str) -> None:
        """A refusal the workspace's own SDK connection met (its ``on_refusal``): the desk records it."""
        if self._desk is not None:
            self._desk.record_refusal(user_id, code, message)

    async def _open_cloud(self) -> tuple[FakeCloud, ConnectionStore, bool]:
        """The cloud, its connection store, and whether its state was kept from before: in memory,
        or (``serve_port``) kept in ``cloud.db`` and served on a loopback port from now on."""
        from .cloud import FakeCloud
        from .sdk import MemoryConnectionStore, SQLModelConnectionStore

        settings = self.settings
        options = CloudOptions(stream_idle_ms=settings.stream_idle_ms, clock=settings.clock, changes=self.feed)
        if settings.serve_port is None:  # its signing key is made off the loop (an RSA key takes a while)
            cloud = await asyncio.to_thread(partial(FakeCloud, client_id=settings.client_id, **options))
            return cloud, MemoryConnectionStore(), False
        from .served.persist import open_durable_cloud, private_file
        from .honcho import FakeHonchoService
        from .served.server import CloudServer, bind_socket, claim_workspace, origin_url

        honcho = FakeHonchoService(self.path / "memory" / "served-honcho.json", clock=settings.clock)  # under /honcho
        lock = claim_workspace(self.path)
        try:
            sock = bind_socket("127.0.0.1", settings.serve_port)
        except BaseException:
            lock.release()
            raise
        try:
            cloud, self.cloud_store = await open_durable_cloud(
                self.path, origin_url(*sock.getsockname()[:2]), client_id=settings.client_id, seed=False, **options
            )
        except BaseException:
            sock.close()
            lock.release()
            raise
        self.server = CloudServer(cloud, sock, folder=self.path, store=self.cloud_store, lock=lock, honcho=honcho)
        await self.server.start()
        store = SQLModelConnectionStore(f"sqlite:///{private_file(self.path / 'connections.db')}")
        return cloud, store, bool(self.cloud_store.loaded)

    def changes(self) -> AsyncIterator[Change]:
        """Every change any service publishes from now on."""
        return self.feed.changes()

    async def close(self) -> None:
        """Stop every service and release the folder."""
        if self._desk is not None:
            await self._desk.stop()
        if self.follower is not None:
            await self.follower.stop()
        if self.timeline is not None:  # after what the desk and the follower did last, before the stores it reads
            await self.timeline.close()
            self.timeline = None
        if self._history_temp is not None:
            self._history_temp.unlink(missing_ok=True)
            for extra in ("-wal", "-shm"):
                Path(f"{self._history_temp}{extra}").unlink(missing_ok=True)
            self._history_temp = None
        if self._follower_lock is not None:
            self._follower_lock.release()
            self._follower_lock = None
        if self._okf is not None:
            await self._okf.close()
        if self._outbox is not None:
            await self._outbox.aclose()
        if self._memory is not None:
            self._memory.close()
            self._memory = None
        if self._canvas is not None:
            await self._canvas.close()
        if self.oauth is not None:
            await self.oauth.aclose()
        if self.server is not None:
            await self.server.stop()
        if self.cloud_store is not None:
            await self.cloud_store.close()
        if self.cloud is not None:
            self.cloud.reset()
        if self.remote is not None:
            await self.remote.aclose()

    async def __aenter__(self) -> "Workspace":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
