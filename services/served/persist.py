"""``CloudStore``: a fake cloud's state kept in the workspace, in SQLite (``cloud.db``, WAL).

The in-memory ``FakeCloud`` stays what it is; a store follows it. ``await store.load(cloud)``
puts the stored state into a new cloud (``True`` when there was one); from then on
``await store.flush()`` writes what changed since the last flush in one transaction. A served
cloud calls ``flush`` at its acknowledgement points: before an answer starts and before each
event-stream chunk is written (``CloudApp``'s ``ack``); a change no client is sent (the operator's
own action, a responder's reply) is committed within ``AUTOFLUSH_S`` anyway. Flushes are group
commits: callers that
arrive while one is being written wait for the next one, which covers them all, so a burst of
events costs one commit. The promise: whatever a client was sent is on disk first, so a
``kill -9`` loses nothing acknowledged; a restarted cloud resumes streams from the stored
events and verifies the tokens it issued before (its signing key is stored).

What changed is found cheaply: runs through the cloud's change feed (``run.started``,
``run.event``, ``run.deleted``) plus anything marked with ``touch_run``; people by a small
fingerprint (grant version, refusal, token cut-off, refresh token, memory revisions); the
idempotency keys and refresh tokens by difference. Rows hold JSON with ASCII escapes, so every
value the cloud accepted (lone surrogates and NUL included) is kept exactly and never fails a
write. Commits use ``synchronous=NORMAL`` in WAL mode: safe against a killed process; a power
loss may drop the last commits. ``import_file`` / ``replace`` swap in a whole state document
(``state.import_state``), refusing a malformed one before anything is written.
"""

from __future__ import annotations

import asyncio
import json
import json.encoder
from pathlib import Path
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypedDict

from sqlalchemy import delete, select
from sqlalchemy.dialects.sqlite import insert
from sqlalchemy.exc import SQLAlchemyError

from ..changes import Change, RunEvents
from ..files import read_json
from ..cloud.keys import SigningKey
from ..cloud.state import (
    FORMAT,
    VERSION,
    CloudStateError,
    export_state,
    import_state,
    key_record,
    meta_record,
    run_generations,
    run_log,
    run_record,
    user_record,
)
from .tables import (
    EVENTS,
    EXPORTED_META,
    KEYS,
    META,
    REFRESH,
    RUNS,
    USERS,
    make_engine,
    private_file,
)

if TYPE_CHECKING:
    from ..cloud.cloud import FakeCloud
    from ..cloud.runs import FakeRun
    from ..cloud.users import FakeUser

__all__ = ["CloudStore", "open_durable_cloud", "CLOUD_DB", "StoreWriteError"]

CLOUD_DB = "cloud.db"
AUTOFLUSH_S = 0.1
"""How soon a change no client was sent is committed anyway."""


class StoreWriteError(OSError):
    """The state could not be written (a full disk, a file-size limit, an I/O error): what was
    changed stays in memory and is written by the next flush that succeeds."""


_INSERT_EVENTS = (f"INSERT OR REPLACE INTO {EVENTS.name} ({EVENTS.c.run_id.name}, {EVENTS.c.gen.name}, "
                  f"{EVENTS.c.seq.name}, {EVENTS.c.data.name}) VALUES (?, ?, ?, ?)")


_dump_encoder = json.JSONEncoder(separators=(",", ":"))
_dump_iter = json.encoder.c_make_encoder(  # type: ignore[attr-defined]
    None, _dump_encoder.default, json.encoder.encode_basestring_ascii, None, ":", ",", False, False, True
)
"""``json.dumps(value, separators=...)`` builds an encoder and its C half on every call (once per
stored event): both built once here (no circular-reference markers: a row is plain JSON data)."""


def _dump(value: object) -> str:
    """``json.dumps(value, separators=(",", ":"))``: ASCII escapes, so every text is storable."""
    if isinstance(value, (dict, list)):
        return "".join(_dump_iter(value, 0))
    return _dump_encoder.encode(value)


class _Batch(TypedDict):
    """The rows one flush writes, by table (``_collect`` takes them, ``_write`` writes them)."""

    meta: list[dict[str, str]]
    users: list[dict[str, str]]
    runs: list[dict[str, str | int | None]]
    events: list[tuple[str, int, dict[str, Any]]]
    """``(run id, generation, event)``: an event is a JSON object whose fields vary by type."""
    wipe: list[tuple[str, int]]
    keys: list[dict[str, str]]
    unkeys: list[tuple[str, str]]
    refresh: list[dict[str, str]]


class _Seen:
    """What the store last wrote of one run object."""

    __slots__ = ("run", "gen", "seq", "first_seq", "deleted")

    def __init__(self, run: "FakeRun", gen: int) -> None:
        self.run = run
        self.gen = gen
        self.seq = 0
        self.first_seq = 0
        self.deleted: bool | None = None


class CloudStore:
    """The durable state of one cloud in one SQLite file."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.engine = make_engine(self.path)
        except (OSError, SQLAlchemyError) as exc:
            raise CloudStateError(
                f"cannot open the cloud state {self.path}: {_reason(exc)}; move it aside to start afresh, "
                "or import an export with --import"
            ) from None
        self.cloud: "FakeCloud | None" = None
        self._lock = asyncio.Lock()
        self._asked = 0
        self._done = 0
        self._dirty_runs: dict[int, "FakeRun"] = {}
        self._runs: dict[int, _Seen] = {}
        self._ordinal = 0
        self._users: dict[str, tuple[object, ...]] = {}
        self._keys: set[tuple[str, str]] = set()
        self._refresh: set[str] = set()
        self._meta: dict[str, str] = {}
        self._unsubscribe: Callable[[], None] | None = None
        self._broken = False
        self._key: SigningKey | None = None
        self._scheduled = False
        self._background: set[asyncio.Future[None]] = set()
        self.loaded = False
        """True once ``load`` found a stored state."""

    # -- loading -----------------------------------------------------------------------------

    def stored_state(self) -> dict[str, Any] | None:
        """The stored state as a ``state`` document, or None when nothing is stored yet."""
        with self.engine.connect() as conn:
            meta = {row.key: json.loads(row.value) for row in conn.execute(select(META))}
            if "signing_key" not in meta:
                return None
            users = sorted((json.loads(row.data) for row in conn.execute(select(USERS))),
                           key=lambda u: u["id"])
            events: dict[tuple[str, int], list[Any]] = {}
            query = select(EVENTS).order_by(EVENTS.c.run_id, EVENTS.c.gen, EVENTS.c.seq)
            for row in conn.execute(query):
                events.setdefault((row.run_id, row.gen), []).append(json.loads(row.data))
            runs = []
            for row in conn.execute(select(RUNS).order_by(RUNS.c.ordinal)):
                record = json.loads(row.data)
                first = int(record.get("first_seq", 1))
                record["events"] = [e for e in events.get((row.run_id, row.gen), []) if e["seq"] >= first]
                runs.append(record)
            keys = sorted((json.loads(row.data) for row in conn.execute(select(KEYS))),
                          key=lambda k: (k["user_id"], k["key"]))
            refresh = {row.token: row.user_id for row in conn.execute(select(REFRESH))}
        return {
            "format": FORMAT,
            "version": VERSION,
            "meta": {k: meta[k] for k in EXPORTED_META if k in meta},
            "users": users,
            "runs": runs,
            "idempotency": keys,
            "refresh_tokens": refresh,
        }

    def stored_meta(self, key: str) -> Any:
        """One stored setting (e.g. ``served_url``), or None."""
        with self.engine.connect() as conn:
            row = conn.execute(select(META).where(META.c.key == key)).first()
        return json.loads(row.value) if row is not None else None

    async def load(self, cloud: "FakeCloud") -> bool:
        """Put the stored state into ``cloud`` and follow it from now on; True when state was stored."""
        try:
            doc = await asyncio.to_thread(self.stored_state)
        except (SQLAlchemyError, ValueError, KeyError, TypeError) as exc:
            raise CloudStateError(
                f"cannot read the cloud state {self.path}: {_reason(exc)}; move it aside to start afresh, "
                "or import an export with --import"
            ) from None
        if doc is not None:
            import_state(cloud, doc)
        self.loaded = doc is not None
        self.attach(cloud)
        if doc is None:
            self._mark_unwritten(cloud)
            await self.flush()
        else:
            self._mark_written(cloud)
        return doc is not None

    def attach(self, cloud: "FakeCloud") -> None:
        """Follow ``cloud``'s changes (``load`` does it)."""
        if self._unsubscribe is not None:
            self._unsubscribe()
        self.cloud = cloud
        self._unsubscribe = cloud.changes.subscribe(self._on_change, many=self._on_changes)

    def _on_change(self, change: Change) -> None:
        if change.source != "cloud":
            return
        if change.kind.startswith("run."):
            self.touch_run(change.id)
        self._schedule()

    def _on_changes(self, changes: Sequence[Change]) -> None:
        """``_on_change`` of a burst: a run's burst marks its run once."""
        if isinstance(changes, RunEvents):
            if changes.source == "cloud" and changes.events:
                self.touch_run(changes.run_id)
                self._schedule()
            return
        for change in changes:
            self._on_change(change)

    def _schedule(self) -> None:
        """Flush soon after a change nobody acknowledges (the operator's own actions, a responder)."""
        if self._scheduled:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._scheduled = True
        loop.call_later(AUTOFLUSH_S, self._autoflush)

    def _autoflush(self) -> None:
        self._scheduled = False
        if self.cloud is None:
            return
        task = asyncio.ensure_future(self.flush())
        self._background.add(task)
        task.add_done_callback(self._flushed)

    def _flushed(self, task: "asyncio.Future[None]") -> None:
        self._background.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self._schedule()  # the next flush rewrites the whole state (``_broken``)

    def touch_run(self, run_id: str) -> None:
        """Mark a run changed (the change feed does it; ``expire_events`` publishes no change).

        The run object is taken now: a deleted run's id may start a new run before the flush."""
        run = self.cloud.state.runs.get(run_id) if self.cloud is not None else None
        if run is not None:
            self._dirty_runs[id(run)] = run

    def _mark_written(self, cloud: "FakeCloud") -> None:
        """Everything ``cloud`` holds now counts as written (just loaded from this store)."""
        self._runs.clear()
        runs = run_log(cloud)
        for run, gen in zip(runs, run_generations(runs), strict=True):
            seen = self._runs[id(run)] = _Seen(run, gen)
            seen.seq, seen.first_seq, seen.deleted = run.seq, run.first_seq, run.deleted
        self._ordinal = len(runs)
        state = cloud.state
        self._users = {uid: _fingerprint(user) for uid, user in state.users.items()}
        self._keys = set(state.idempotency)
        self._refresh = set(state.refresh_tokens)
        self._meta = {k: _dump(v) for k, v in meta_record(cloud).items()}
        self._key = state.key
        self._dirty_runs.clear()

    def _mark_unwritten(self, cloud: "FakeCloud") -> None:
        """Nothing of ``cloud`` is stored yet: the next flush writes all of it."""
        self._runs.clear()
        self._ordinal = 0
        self._users, self._keys, self._refresh, self._meta = {}, set(), set(), {}
        self._key = None
        self._dirty_runs = {id(run): run for run in run_log(cloud)}

    # -- writing -----------------------------------------------------------------------------

    async def flush(self) -> None:
        """Write every change made so far (a group commit shared with concurrent callers)."""
        if self.cloud is None:
            return
        self._asked += 1
        ticket = self._asked
        async with self._lock:
            if self._done >= ticket:
                return
            upto = self._asked
            cloud = self.cloud
            try:
                if self._broken:  # a failed write left the rows behind the marks: write the whole state
                    await asyncio.to_thread(self._write_all, export_state(cloud))
                    self._mark_written(cloud)
                    self._broken = False
                batch = self._collect(cloud)
                if batch is not None:
                    try:
                        await asyncio.to_thread(self._write, batch)
                    except BaseException:
                        self._broken = True
                        raise
            except (OSError, SQLAlchemyError) as exc:
                raise StoreWriteError(f"cannot write the cloud state {self.path}: {_reason(exc)}") from None
            self._done = upto

    @property
    def broken(self) -> bool:
        """True after a write failed, until a flush succeeds again."""
        return self._broken

    def _cheap_meta(self, cloud: "FakeCloud") -> dict[str, object]:
        """``meta_record`` without encoding the signing key again while it is the same key."""
        state = cloud.state
        meta: dict[str, object] = {"client_id": cloud.client_id, "token_serial": state.token_serial,
                "client_jwk": state.client_jwk}
        if state.key is not self._key:
            self._key = state.key
            meta["signing_key"] = {"pem": state.key.private_pem(), "kid": state.key.kid}
        return meta

    def _collect(self, cloud: "FakeCloud") -> "_Batch | None":
        """What changed since the last flush, as rows (taken on the loop, written in a thread)."""
        batch: _Batch = {"meta": [], "users": [], "runs": [], "events": [], "wipe": [],
                         "keys": [], "unkeys": [], "refresh": []}
        for key, value in self._cheap_meta(cloud).items():
            text = _dump(value)
            if self._meta.get(key) != text:
                self._meta[key] = text
                batch["meta"].append({"key": key, "value": text})
        state = cloud.state
        for uid, user in state.users.items():
            mark = _fingerprint(user)
            if self._users.get(uid) != mark:
                self._users[uid] = mark
                batch["users"].append({"id": uid, "data": _dump(user_record(user))})
        if self._dirty_runs:
            dirty, self._dirty_runs = self._dirty_runs, {}
            changed = list(dirty.values())
            if any(id(run) not in self._runs for run in changed):  # new runs are numbered in start order
                position = {id(run): i for i, run in enumerate(run_log(cloud))}
                changed.sort(key=lambda run: position.get(id(run), 0))
            for run in changed:
                self._collect_run(cloud, run, batch)
            keys = state.idempotency
            if set(keys) != self._keys:
                current = set(keys)
                for owner in current - self._keys:
                    batch["keys"].append({"user_id": owner[0], "key": owner[1],
                                          "data": _dump(key_record(owner, keys[owner]))})
                batch["unkeys"].extend(self._keys - current)
                self._keys = current
        if len(state.refresh_tokens) != len(self._refresh):
            for token, uid in state.refresh_tokens.items():
                if token not in self._refresh:
                    self._refresh.add(token)
                    batch["refresh"].append({"token": token, "user_id": uid})
        return batch if any(batch.values()) else None

    def _collect_run(self, cloud: "FakeCloud", run: "FakeRun", batch: "_Batch") -> None:
        seen = self._runs.get(id(run))
        if seen is None or seen.run is not run:
            gen = sum(1 for other in self._runs.values() if other.run.id == run.id)
            seen = self._runs[id(run)] = _Seen(run, gen)
            self._ordinal += 1
            batch["wipe"].append((run.id, gen))
            ordinal = self._ordinal
        else:
            ordinal = None
        if seen.seq == run.seq and seen.deleted == run.deleted and seen.first_seq == run.first_seq:
            return
        events = run.events
        i = len(events)
        while i > 0 and events[i - 1]["seq"] > seen.seq:
            i -= 1
        batch["events"].extend((run.id, seen.gen, e) for e in events[i:])
        batch["runs"].append({"run_id": run.id, "gen": seen.gen, "ordinal": ordinal,
                              "data": _dump(run_record(run))})
        seen.seq, seen.first_seq, seen.deleted = run.seq, run.first_seq, run.deleted

    def _write(self, batch: "_Batch") -> None:
        with self.engine.begin() as conn:
            if batch["meta"]:
                stmt = insert(META)
                conn.execute(stmt.on_conflict_do_update(index_elements=["key"], set_={"value": stmt.excluded.value}),
                             batch["meta"])
            if batch["users"]:
                stmt = insert(USERS)
                conn.execute(stmt.on_conflict_do_update(index_elements=["id"], set_={"data": stmt.excluded.data}),
                             batch["users"])
            table = EVENTS
            for run_id, gen in batch["wipe"]:
                conn.execute(delete(table).where(table.c.run_id == run_id, table.c.gen == gen))
            if batch["events"]:
                # the one bulk statement of a flush, sent to the driver as it is: many rows per
                # commit without the SQL layer's per-row parameter processing
                conn.exec_driver_sql(_INSERT_EVENTS, [(r, g, e["seq"], _dump(e)) for r, g, e in batch["events"]])
            for row in batch["runs"]:
                runs = RUNS
                if row["ordinal"] is None:
                    conn.execute(runs.update().where(runs.c.run_id == row["run_id"], runs.c.gen == row["gen"])
                                 .values(data=row["data"]))
                else:
                    conn.execute(insert(runs).prefix_with("OR REPLACE"), [row])
            if batch["keys"]:
                conn.execute(insert(KEYS).prefix_with("OR REPLACE"), batch["keys"])
            keys = KEYS
            for user_id, key in batch["unkeys"]:
                conn.execute(delete(keys).where(keys.c.user_id == user_id, keys.c.key == key))
            if batch["refresh"]:
                conn.execute(insert(REFRESH).prefix_with("OR REPLACE"), batch["refresh"])

    def set_meta(self, key: str, value: object) -> None:
        """Store one setting outside the exported state (``served_url``)."""
        stmt = insert(META)
        with self.engine.begin() as conn:
            conn.execute(stmt.on_conflict_do_update(index_elements=["key"], set_={"value": stmt.excluded.value}),
                         [{"key": key, "value": _dump(value)}])

    # -- whole state ---------------------------------------------------------------------------

    def _write_all(self, doc: dict[str, Any]) -> None:
        with self.engine.begin() as conn:
            for table in (USERS, RUNS, EVENTS, KEYS, REFRESH):
                conn.execute(delete(table))
            meta = META
            conn.execute(delete(meta).where(meta.c.key.in_(EXPORTED_META)))
            conn.execute(insert(meta), [{"key": k, "value": _dump(v)} for k, v in doc["meta"].items()
                                        if k in EXPORTED_META])
            if doc["users"]:
                conn.execute(insert(USERS),
                             [{"id": u["id"], "data": _dump(u)} for u in doc["users"]])
            generations: dict[str, int] = {}
            for ordinal, run in enumerate(doc["runs"], start=1):
                gen = generations.get(run["id"], 0)
                generations[run["id"]] = gen + 1
                record = {k: v for k, v in run.items() if k != "events"}
                conn.execute(insert(RUNS),
                             [{"run_id": run["id"], "gen": gen, "ordinal": ordinal, "data": _dump(record)}])
                if run["events"]:
                    conn.execute(insert(EVENTS),
                                 [{"run_id": run["id"], "gen": gen, "seq": e["seq"], "data": _dump(e)}
                                  for e in run["events"]])
            if doc["idempotency"]:
                conn.execute(insert(KEYS),
                             [{"user_id": k["user_id"], "key": k["key"], "data": _dump(k)} for k in doc["idempotency"]])
            if doc["refresh_tokens"]:
                conn.execute(insert(REFRESH),
                             [{"token": t, "user_id": u} for t, u in doc["refresh_tokens"].items()])

    async def replace(self, cloud: "FakeCloud", doc: Any) -> None:
        """Replace the state of ``cloud`` and of this store with ``doc`` (refused whole when malformed)."""
        async with self._lock:
            import_state(cloud, doc)  # raises CloudStateError before anything changes
            clean = export_state(cloud)
            await asyncio.to_thread(self._write_all, clean)
            self._mark_written(cloud)

    def import_document(self, doc: Any, client_id: str) -> None:
        """Replace the stored state with ``doc`` (no cloud attached: before serving)."""
        from ..cloud import FakeCloud

        probe = FakeCloud(client_id)
        import_state(probe, doc)  # validates
        self._write_all(export_state(probe))

    async def close(self) -> None:
        """Flush, stop following the cloud and release the file."""
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        await self.flush()
        for task in list(self._background):
            await asyncio.gather(task, return_exceptions=True)
        self.cloud = None
        self.engine.dispose()


def _reason(exc: BaseException) -> str:
    """The driver's own words for a database error (without SQLAlchemy's statement and links)."""
    orig = getattr(exc, "orig", None)
    return str(orig if orig is not None else exc)


def _fingerprint(user: "FakeUser") -> tuple[object, ...]:
    return (
        user.grant.mark,
        user.refusal,
        user.tokens_valid_from,
        user.refresh_token,
        len(user.superseded),
        user.family_revoked,
        tuple((name, doc.get("revision")) for name, doc in user.memory.documents.items()),
    )


STATE_FILE_BYTES = 512 * 1024 * 1024
"""The largest state file ``read_state_file`` reads (512 MiB; the whole state is held in memory)."""
STATE_FILE_DEPTH = 128
"""How deep a state file may nest: a run event's fields nest up to ``Limits.json_depth`` (32 by
default) below the state's own few levels."""


def read_state_file(path: Path) -> dict[str, Any]:
    """A state document from a file (``CloudStateError`` when it is not one, in one line: also a
    file that is not a regular one, is larger than ``STATE_FILE_BYTES`` or nests deeper than
    ``STATE_FILE_DEPTH``, all told before it is parsed)."""
    try:
        doc = read_json(Path(path), max_bytes=STATE_FILE_BYTES, max_depth=STATE_FILE_DEPTH)
    except OSError as exc:
        raise CloudStateError(f"cannot read {path}: {exc.strerror or exc}") from None
    except Exception as exc:  # CorruptFileError names the file
        raise CloudStateError(str(exc)) from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise CloudStateError(f"{path} is not a workbench cloud state")
    return doc


def seed_providers(cloud: "FakeCloud", world: dict[str, Any]) -> None:
    """The world's providers (code, not state: defined again on every start)."""
    for spec in world.get("providers", []):
        tools = {name: {"group": tool.get("group", name)} for name, tool in spec.get("tools", {}).items()}
        cloud.providers.define(spec["name"], tools=tools, status=spec.get("status", "ready"), error=spec.get("error"))


async def open_durable_cloud(
    folder: Path,
    url: str,
    *,
    client_id: str = "workbench",
    import_file: Path | None = None,
    seed: bool = True,
    **options: Any,
) -> tuple["FakeCloud", CloudStore]:
    """The workspace's cloud on ``url`` (issuer and runtime on that one origin) with its stored
    state; a new state is seeded with the sample world's people, providers and runs."""
    from assets import ASSETS_DIR

    from ..sdk import MemoryConnectionStore
    from ..world import load_world, seed_cloud
    from ..cloud import FakeCloud

    store = CloudStore(Path(folder) / CLOUD_DB)
    try:
        if import_file is not None:
            doc = read_state_file(import_file)
            await asyncio.to_thread(store.import_document, doc, client_id)
        cloud = FakeCloud(client_id, issuer=url, runtime_url=url, **options)
        stored = await store.load(cloud)
        world = load_world(ASSETS_DIR / "sample" / "world.json") if seed else {}
        if world and not stored:
            await seed_cloud(cloud, world, MemoryConnectionStore())
            await cloud.settle_tasks()
        elif world:
            seed_providers(cloud, world)
        await store.flush()
        await asyncio.to_thread(store.set_meta, "served_url", url)
    except BaseException:
        store.engine.dispose()
        raise
    return cloud, store


__all__ += ["read_state_file", "CloudStateError", "make_engine", "seed_providers", "private_file"]
