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
import weakref
from collections import OrderedDict
from pathlib import Path
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, TypedDict

from sqlalchemy import delete, literal_column, select
from sqlalchemy.dialects.sqlite import insert
from sqlalchemy.exc import SQLAlchemyError

from ..changes import Change, RunEvents
from ..files import read_json
from ..text import json_clean, json_text_suspect, repair_value
from ..cloud.book import READ_BACK, RunSlot
from ..cloud.event_log import EventLog, events_between
from ..cloud.keys import SigningKey
from ..cloud.shared import KeyWindow
from ..cloud.state import (
    FORMAT,
    VERSION,
    CloudStateError,
    export_state,
    id_serial,
    import_state,
    key_record,
    meta_record,
    run_from_record,
    run_history,
    run_ids,
    run_record,
    user_record,
)
from .tables import (
    EVENTS,
    EXPORTED_META,
    KEYS,
    META,
    QUESTIONS,
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
KEEP_EVENTS = 256
"""How many written events of each run a served cloud keeps in memory (its newest): older ones
are read from ``cloud.db`` when a read asks for them (``CloudStore(keep_events=...)``)."""
HOLD_EVENTS = 32_768
"""How many written events a served cloud keeps in memory in all, whatever the number of runs: past
it, the runs written least recently keep none (``CloudStore(hold_events=...)``)."""
HOLD_RUNS = 1_000
"""How many runs a served cloud holds in memory after a flush, whatever the number it ever held:
past it, those read or started least recently are let go of, but never one with a stream open or
anything unwritten (``CloudStore(hold_runs=...)``)."""
_STORE_FIELD = "_store"
"""A stored run row's own field (not part of the state document): ``held`` (how many events the
run holds), ``questions`` (the ids of the questions it opened) and ``top_entry`` (its highest turn
entry number), so a load knows them without reading the run's events."""


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
    questions: list[dict[str, str | int]]
    """``cloud_question`` rows: each question a run opened, and that run (its id and generation)."""
    release: list[tuple["FakeRun", int]]
    """``(run, seq)``: once the batch is committed, the run's log may let go of events up to ``seq``."""


class _Seen:
    """What the store last wrote of one run object."""

    __slots__ = ("ref", "gen", "seq", "first_seq", "deleted", "questions", "top_entry", "serial", "messages")

    def __init__(self, run: "FakeRun", gen: int, gone: "Callable[[weakref.ref[FakeRun]], None] | None" = None) -> None:
        self.ref = weakref.ref(run, gone)
        """The run (weakly: what the store saw of a run lives as long as the run)."""
        self.gen = gen
        self.seq = 0
        self.first_seq = 0
        self.deleted: bool | None = None
        self.questions: list[str] = []
        self.top_entry = 0
        self.serial = 0
        """The highest id serial of the run's own id, its questions and its first ``messages`` messages."""
        self.messages = 0

    @property
    def run(self) -> "FakeRun | None":
        return self.ref()


class _StoredEvents:
    """The stored events of one run (one generation of its id): an ``EventLog``'s source. Each read
    takes one pooled connection and walks the ``(run_id, gen, seq)`` key, so it costs what it answers."""

    __slots__ = ("engine", "run_id", "gen", "repair")

    def __init__(self, engine: Any, run_id: str, gen: int, *, repair: bool = True) -> None:
        self.engine = engine
        self.run_id = run_id
        self.gen = gen
        self.repair = repair
        """Repair text no answer could carry as it is read (the cloud's reads; an export reads exactly)."""

    def _where(self, after: int, before: int | None) -> tuple[str, list[object]]:
        sql = f"WHERE {_E_RUN} = ? AND {_E_GEN} = ? AND {_E_SEQ} > ?"
        params: list[object] = [self.run_id, self.gen, after]
        if before is not None:
            sql += f" AND {_E_SEQ} < ?"
            params.append(before)
        return sql, params

    def read(self, after: int, before: int | None, limit: int | None, offset: int = 0, *,
             exclude: Collection[str] = ()) -> list[dict[str, Any]]:
        where, params = self._where(after, before)
        if exclude:  # left out by the database, each row's type read from its JSON: never loaded here
            kinds = sorted(exclude)
            where += _excluding(_E_DATA, kinds)
            params += kinds
        sql = f"SELECT {_E_DATA} FROM {EVENTS.name} {where} ORDER BY {_E_SEQ}"
        if limit is not None or offset:
            sql += " LIMIT ? OFFSET ?"
            params += [-1 if limit is None else limit, offset]
        with self.engine.connect() as conn:
            rows = conn.exec_driver_sql(sql, tuple(params)).fetchall()
        if not self.repair:
            return [json.loads(row[0]) for row in rows]
        return [_loaded_event(row[0]) for row in rows]

    def count(self, after: int, before: int | None) -> int:
        where, params = self._where(after, before)
        with self.engine.connect() as conn:
            return int(conn.exec_driver_sql(f"SELECT count(*) FROM {EVENTS.name} {where}", tuple(params)).scalar_one())


_E_RUN, _E_GEN, _E_SEQ, _E_DATA = (EVENTS.c.run_id.name, EVENTS.c.gen.name, EVENTS.c.seq.name, EVENTS.c.data.name)
def _excluding(data: str, kinds: Sequence[str]) -> str:
    """The condition leaving out the stored events whose ``type`` is one of ``kinds`` (one parameter
    each), read from the JSON in the column ``data``."""
    return f" AND IFNULL(json_extract({data}, '$.type'), '') NOT IN ({', '.join('?' * len(kinds))})"


_RUNS_A_READ = 256
"""How many runs' ranges one statement of ``read_stored_many`` reads (five parameters each)."""


def stored_source(log: object) -> "_StoredEvents | None":
    """The store an ``EventLog``'s older events are in, when it is a served cloud's (else None)."""
    source = getattr(log, "source", None)
    return source if isinstance(source, _StoredEvents) else None


class EncodedEvent(NamedTuple):
    """A stored event as the JSON text an answer carries (``read_stored_many(encoded=True)``): the
    stored text itself, or, for text an older server stored that no answer could carry, its repair."""

    seq: int
    text: str


def _encoded_event(seq: int, data: str) -> EncodedEvent:
    if json_text_suspect(data):  # as ``_loaded_event``: repaired, then encoded again
        return EncodedEvent(seq, _dump(_loaded_event(data)))
    return EncodedEvent(seq, data)


def read_stored_many(parts: "list[tuple[_StoredEvents, int, int | None]]", limit: int | None, *,
                     exclude: Collection[str] = (), encoded: bool = False) -> list[list[Any]]:
    """Many runs' stored events at once, a list for each of ``parts`` (its run's store, and the range
    ``after < seq < before`` to read), in that order: the first ``limit`` events of them all, read
    run after run (what ``_StoredEvents.read`` of each in turn, sharing the limit, gives), leaving out
    the types ``exclude`` names. One statement walks the ``(run_id, gen, seq)`` key for each range,
    instead of a connection and a statement a run (``parts`` of one store: a cloud's). With ``encoded``
    each event is an ``EncodedEvent`` (its JSON text, for an answer to carry as it is), not a dict:
    nothing is parsed."""
    answer: list[list[Any]] = [[] for _ in parts]
    kinds = sorted(exclude)
    left = limit
    engines = {id(source.engine): source.engine for source, _, _ in parts}
    if len(engines) > 1:
        raise ValueError("one read takes the runs of one store")
    if not engines:
        return answer
    engine = next(iter(engines.values()))
    repair = all(source.repair for source, _, _ in parts)
    with engine.connect() as conn:
        for start in range(0, len(parts), _RUNS_A_READ):
            if left is not None and left <= 0:
                break
            chunk = parts[start:start + _RUNS_A_READ]
            params: list[object] = []
            for offset, (source, after, before) in enumerate(chunk):
                params += [start + offset, source.run_id, source.gen, after, _NO_BOUND if before is None else before]
            where = _excluding(f"e.{_E_DATA}", kinds) if kinds else ""
            params += kinds
            sql = (f"WITH w(o, r, g, a, b) AS (VALUES {', '.join(['(?, ?, ?, ?, ?)'] * len(chunk))}) "
                   f"SELECT w.o, e.{_E_SEQ}, e.{_E_DATA} FROM w JOIN {EVENTS.name} AS e ON e.{_E_RUN} = w.r "
                   f"AND e.{_E_GEN} = w.g AND e.{_E_SEQ} > w.a AND e.{_E_SEQ} < w.b{where} ORDER BY w.o, e.{_E_SEQ}")
            if left is not None:
                sql += " LIMIT ?"
                params.append(left)
            rows = conn.exec_driver_sql(sql, tuple(params)).fetchall()
            if encoded:
                for index, seq, data in rows:
                    answer[index].append(_encoded_event(seq, data) if repair else EncodedEvent(seq, data))
            else:
                load = _loaded_event if repair else json.loads
                for index, _, data in rows:
                    answer[index].append(load(data))
            if left is not None:
                left -= len(rows)
    return answer


_NO_BOUND = 2 ** 62
"""An upper bound no seq reaches (a range with no ``before``)."""


class _Marks:
    """What the cloud held at one moment (a whole state taken to be written): once that write
    commits, it counts as written, and nothing that changed after it does."""

    def __init__(self, cloud: "FakeCloud") -> None:
        state = cloud.state
        slots = state.run_log.slots
        self.places = [place for place, slot in enumerate(slots) if slot.run is not None]
        """Where each run held is in start order (a run only stored was written before)."""
        self.runs = [(run, run.seq, run.first_seq, run.deleted)
                     for run in (slots[place].run for place in self.places) if run is not None]
        self.users = {uid: _fingerprint(user) for uid, user in state.users.items()}
        self.keys = set(state.idempotency)
        self.refresh = set(state.refresh_tokens)
        self.meta = {k: _dump(v) for k, v in meta_record(cloud).items()}
        self.key = state.key


class CloudStore:
    """The durable state of one cloud in one SQLite file."""

    def __init__(self, path: Path, *, keep_events: int = KEEP_EVENTS, hold_events: int = HOLD_EVENTS,
                 hold_runs: int = HOLD_RUNS) -> None:
        for name, value in (("keep_events", keep_events), ("hold_events", hold_events), ("hold_runs", hold_runs)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be zero or more events, not {value!r}")
        self.keep_events = keep_events
        """How many written events of each run stay in memory (``KEEP_EVENTS``)."""
        self.hold_runs = hold_runs
        """How many runs stay held after a flush (``HOLD_RUNS``): past it, those read or started least
        recently are let go of (read back when asked for again), but never one in use."""
        self.hold_events = hold_events
        """How many written events stay in memory in all (``HOLD_EVENTS``): the runs written least
        recently let go of theirs first."""
        self._warm: OrderedDict[int, tuple["FakeRun", int]] = OrderedDict()
        """The runs whose logs hold written events in memory, least recently written first: each with
        how many events its log held when last counted."""
        self._warm_events = 0
        """How many events the logs of ``_warm`` held when last counted."""
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
        self._read_for: "FakeCloud | None" = None
        """The cloud whose runs the store reads back: the one followed, kept after ``close``."""
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
        """The stored state as a ``state`` document, every event included, read exactly as stored
        (an export), or None when nothing is stored yet."""
        with self.engine.connect() as conn:
            head = _read_head(conn, json.loads)
            if head is None:
                return None
            runs = []
            for row in conn.execute(select(RUNS.c.run_id, RUNS.c.gen, RUNS.c.data).order_by(RUNS.c.ordinal)):
                record = json.loads(row.data)
                record.pop(_STORE_FIELD, None)
                record["events"] = _StoredEvents(self.engine, row.run_id, row.gen, repair=False).read(
                    int(record.get("first_seq", 1)) - 1, None, None)
                runs.append(record)
        return _document(head, runs)

    def stored_meta(self, key: str) -> Any:
        """One stored setting (e.g. ``served_url``), or None."""
        with self.engine.connect() as conn:
            row = conn.execute(select(META).where(META.c.key == key)).first()
        return json.loads(row.value) if row is not None else None

    async def load(self, cloud: "FakeCloud") -> bool:
        """Put the stored state into ``cloud`` and follow it from now on; True when state was stored.

        What is read is the state without its runs: people, settings, idempotency keys, and for each
        run its place in start order (``RunSlot``: id, person, generation, status). A run is read
        back from the store when something asks for it (``_read_back``), its events when its log is
        read (``EventLog``): the load costs what the idempotency window and the people hold, not
        the runs the workspace ever held."""
        try:
            heads = await asyncio.to_thread(self._load_heads)
        except (SQLAlchemyError, ValueError, KeyError, TypeError) as exc:
            raise CloudStateError(
                f"cannot read the cloud state {self.path}: {_reason(exc)}; move it aside to start afresh, "
                "or import an export with --import"
            ) from None
        if heads is not None:
            doc, slots, top, ordinal, clean = heads
            import_state(cloud, doc, histories=[], owned=True, clean=clean, stored=list(slots), stored_top=top)
            self._ordinal = ordinal
        self.loaded = heads is not None
        self.attach(cloud)
        if heads is None:
            self._mark_unwritten(cloud)
            await self.flush()
        else:
            self._apply(_Marks(cloud), [])
        return heads is not None

    def _load_heads(self) -> tuple[dict[str, Any], list[RunSlot], tuple[int, int], int, bool] | None:
        """The stored state as a ``state`` document without runs, every run's ``RunSlot`` in start
        order, the highest id serial and turn entry number of them all, the highest ordinal, and
        whether every row's text was clean as stored (no NUL or surrogate escaped in its JSON: nothing
        for ``repair_value`` to change; an emoji's escaped pair counts as not clean, and its row is then
        checked string by string); None when nothing is stored yet. Rows written before ``cloud_run``
        had its columns are read whole once, and their columns (and questions) written."""
        clean = True

        def parsed(text: str) -> Any:
            nonlocal clean
            # a NUL or a surrogate reaches a string only as a JSON escape (SQLite's text is UTF-8, and
            # json.loads refuses a raw control character in a string)
            if clean and json_text_suspect(text):
                clean = False
            return json.loads(text)

        with self.engine.connect() as conn:
            head = _read_head(conn, parsed)
            if head is None:
                return None
            old = conn.exec_driver_sql(f"SELECT 1 FROM {RUNS.name} WHERE user_id IS NULL LIMIT 1").first()
        if old is not None:
            self._fill_columns()
        with self.engine.connect() as conn:
            slots: list[RunSlot] = []
            serial = top_entry = ordinal = 0
            rows = conn.exec_driver_sql(
                f"SELECT ordinal, run_id, gen, user_id, status, deleted, serial, top_entry FROM {RUNS.name} "
                "ORDER BY ordinal")
            shared: dict[str, str] = {}  # one string for each person and status, not one a run
            for place, run_id, gen, user_id, status, deleted, run_serial, run_top in rows:
                slots.append(RunSlot(run_id, shared.setdefault(user_id, user_id), gen=gen, deleted=bool(deleted),
                                     status=shared.setdefault(status, status)))
                serial = max(serial, run_serial or 0)
                top_entry = max(top_entry, run_top or 0)
                ordinal = max(ordinal, place)
        clean = clean and json_clean(head[3])
        return _document(head, []), slots, (serial, top_entry), ordinal, clean

    def _fill_columns(self) -> None:
        """Give the run rows written before ``cloud_run`` had its columns (``user_id`` ...) their
        columns, ``dto`` and questions, from their records (and their events, when a row is older
        still and has no ``_store`` field), in one transaction."""
        with self.engine.connect() as conn:
            rows = conn.exec_driver_sql(
                f"SELECT run_id, gen, data FROM {RUNS.name} WHERE user_id IS NULL").fetchall()
        probe: Any = None  # (a run built only to be described: it needs no cloud)
        updates: list[dict[str, Any]] = []
        questions: list[dict[str, str | int]] = []
        for run_id, gen, data in rows:
            record = json.loads(data)
            own = record.pop(_STORE_FIELD, None)
            run = run_from_record(probe, dict(record))
            if not isinstance(own, dict):
                held = _StoredEvents(self.engine, run_id, gen, repair=False).read(int(record.get("first_seq", 1)) - 1,
                                                                                  None, None)
                asked, top = run_history(held)
                own = {"held": len(held), "questions": asked, "top_entry": top}
            asked = _asked(own["questions"], run)
            updates.append({"r": run_id, "g": gen, "data": _dump({**record, _STORE_FIELD: own}),
                            **_run_columns(run, id_serial(run_ids(run), asked), int(own["top_entry"]))})
            questions += [{"question_id": q, "run_id": run_id, "gen": gen} for q in asked]
        with self.engine.begin() as conn:
            runs = RUNS
            for row in updates:
                conn.execute(runs.update().where(runs.c.run_id == row["r"], runs.c.gen == row["g"])
                             .values(**{k: v for k, v in row.items() if k not in ("r", "g")}))
            if questions:
                conn.execute(insert(QUESTIONS).prefix_with("OR REPLACE"), questions)

    def _read_back(self, slots: list[RunSlot], hold: bool) -> list["FakeRun"]:
        """The runs of stored ``slots`` read back (``RunBook.loader``): with ``hold``, followed from
        now on (the next change of one is written as that run's, not as a new one) and their questions
        known; else copies for one read. ``CloudStateError`` when a row is missing or malformed."""
        cloud = self._read_for  # (still read after ``close``: a cloud kept for inspection reads its runs)
        if cloud is None:
            raise CloudStateError(f"the cloud state {self.path} follows no cloud")
        texts = self._run_column(slots, "data")
        runs = []
        for slot, data in zip(slots, texts, strict=True):
            if data is None:
                raise CloudStateError(f"run {slot.id} is not in the cloud state {self.path}")
            try:
                record = json.loads(data)
            except ValueError as exc:
                raise CloudStateError(f"the stored run {slot.id} is not JSON: {exc}") from None
            own = record.pop(_STORE_FIELD, None) if isinstance(record, dict) else None
            run = run_from_record(cloud, record)
            if not isinstance(own, dict):
                own = {"held": None, "questions": [], "top_entry": 0}
            gen = slot.gen or 0
            held = own.get("held")
            source = _StoredEvents(self.engine, run.id, gen)
            if not isinstance(held, int) or isinstance(held, bool):
                held = source.count(run.first_seq - 1, None)
            run.events = EventLog(keep=self.keep_events, source=source, older=held, floor=run.first_seq - 1)
            if hold:
                seen = self._see(run, gen)
                seen.seq, seen.first_seq, seen.deleted = run.seq, run.first_seq, run.deleted
                seen.questions = [str(q) for q in own.get("questions", [])]
                seen.top_entry = int(own.get("top_entry", 0))
                seen.serial, seen.messages = id_serial(run_ids(run), seen.questions), len(run.messages)
                for question_id in _asked(seen.questions, run):
                    cloud.state.questions.setdefault(question_id, run)
            runs.append(run)
        return runs

    def _find_question(self, question_id: str) -> "FakeRun | None":
        """The run that opened ``question_id`` when it is a stored run's (``QuestionBook.finder``):
        read back and held from now on."""
        cloud = self._read_for
        if cloud is None:
            return None
        with self.engine.connect() as conn:
            row = conn.execute(select(QUESTIONS.c.run_id, QUESTIONS.c.gen)
                               .where(QUESTIONS.c.question_id == question_id)).first()
        if row is None:
            return None
        slot = cloud.state.runs.slot(row.run_id)
        while slot is not None and slot.gen != row.gen:
            slot = slot.prev
        if slot is None:
            return None
        return cloud.state.runs.held_runs([slot])[0]

    def stored_dtos(self, slots: Sequence[RunSlot]) -> list[str | None]:
        """For each of ``slots`` (stored ones), its ``GET /runs`` entry as stored (``run_dto`` without
        events, as JSON), or None when the row has none."""
        return self._run_column(slots, "dto")

    def _run_column(self, slots: Sequence[RunSlot], column: str) -> list[str | None]:
        """One column of each of ``slots``' rows (None for a row that is not there), ``READ_BACK``
        rows a statement, each found by its key."""
        found: dict[tuple[str, int], str | None] = {}
        with self.engine.connect() as conn:
            for start in range(0, len(slots), READ_BACK):
                chunk = slots[start:start + READ_BACK]
                params: list[object] = []
                for slot in chunk:
                    params += [slot.id, slot.gen or 0]
                pairs = ", ".join(["(?, ?)"] * len(chunk))
                sql = (f"WITH w(r, g) AS (VALUES {pairs}) SELECT c.run_id, c.gen, c.{column} FROM w JOIN "
                       f"{RUNS.name} AS c ON c.run_id = w.r AND c.gen = w.g")
                found.update({(run_id, gen): value for run_id, gen, value in conn.exec_driver_sql(sql, tuple(params))})
        return [found.get((slot.id, slot.gen or 0)) for slot in slots]

    def attach(self, cloud: "FakeCloud") -> None:
        """Follow ``cloud``'s changes (``load`` does it); its new runs' logs keep a bounded tail."""
        if self._unsubscribe is not None:
            self._unsubscribe()
        self.cloud = self._read_for = cloud
        cloud.state.event_log = self._new_log
        cloud.state.runs.loader = self._read_back
        cloud.state.questions.finder = self._find_question
        self._unsubscribe = cloud.changes.subscribe(self._on_change, many=self._on_changes)

    def _new_log(self) -> EventLog:
        """A new run's log: its source is set once the store numbers the run (its first flush)."""
        return EventLog(keep=self.keep_events)

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

    def _apply(self, marks: _Marks, histories: list[tuple[list[str], int]]) -> None:
        """What ``marks`` saw counts as written (the whole state was just loaded or written): each
        held run's log reads its older events from the store from now on and keeps only a tail.
        ``histories``: each held run's ``run_history``, in ``marks.runs``' order. (What the store saw
        of a run let go of, and still alive, stays: it is written as itself if it changes.)"""
        runs = [run for run, *_ in marks.runs]
        book = self.cloud.state.runs if self.cloud is not None else None
        for (run, seq, first_seq, deleted), (questions, top) in zip(marks.runs, histories, strict=True):
            slot = book.slot_of(run) if book is not None else None
            gen = slot.gen if slot is not None and slot.gen is not None else 0
            seen = self._see(run, gen)
            seen.seq, seen.first_seq, seen.deleted = seq, first_seq, deleted
            seen.questions, seen.top_entry = list(questions), top
            seen.serial, seen.messages = id_serial(run_ids(run), questions), len(run.messages)
            log = run.events
            if not isinstance(log, EventLog):  # (in seq order, as the store reads them)
                log = run.events = EventLog(sorted(log, key=_event_seq), keep=self.keep_events,
                                            floor=first_seq - 1)
            log.source = _StoredEvents(self.engine, run.id, gen)
            log.release(seq)
        self._warm.clear()
        self._warm_events = 0
        self._hold(runs)
        self._users = marks.users
        self._keys = marks.keys
        self._refresh = marks.refresh
        self._meta = marks.meta
        self._key = marks.key
        written = {id(run): (seq, first_seq, deleted) for run, seq, first_seq, deleted in marks.runs}
        self._dirty_runs = {key: run for key, run in self._dirty_runs.items()
                            if written.get(key) != (run.seq, run.first_seq, run.deleted)}

    def _mark_unwritten(self, cloud: "FakeCloud") -> None:
        """Nothing of ``cloud`` is stored yet: the next flush writes all of it (every run is held)."""
        self._runs.clear()
        self._ordinal = 0
        self._users, self._keys, self._refresh, self._meta = {}, set(), set(), {}
        self._key = None
        runs = list(cloud.state.run_log)
        for run in runs:
            if not isinstance(run.events, EventLog):
                run.events = EventLog(run.events, keep=self.keep_events, floor=run.first_seq - 1)
        self._dirty_runs = {id(run): run for run in runs}

    def _rewritten(self, cloud: "FakeCloud", marks: _Marks, histories: list[tuple[list[str], int]]) -> None:
        """Every run was just written again in start order (``_write_all``): each slot's generation
        is its place among its id's runs, and the held runs' histories are applied."""
        counted: dict[str, int] = {}
        for slot in cloud.state.run_log.slots:
            slot.gen = counted.get(slot.id, 0)
            counted[slot.id] = slot.gen + 1
        self._ordinal = len(histories)
        self._apply(marks, [histories[place] for place in marks.places])

    def _see(self, run: "FakeRun", gen: int) -> _Seen:
        """What the store saw of ``run`` (numbered ``gen``), noted from now on for as long as the run lives."""
        key = id(run)

        def gone(_: "weakref.ref[FakeRun]") -> None:
            if self._runs.get(key) is seen:
                del self._runs[key]

        seen = self._runs[key] = _Seen(run, gen, gone)
        return seen

    def _busy(self, run: "FakeRun") -> bool:
        """Whether ``run`` is in use: a stream open, or a change not written. (One held elsewhere, by a
        responder say, may be let go of: while it lives, reading its slot holds the same run again.)"""
        seen = self._runs.get(id(run))
        return bool(run.streams) or id(run) in self._dirty_runs or seen is None or seen.run is not run \
            or (seen.seq, seen.first_seq, seen.deleted) != (run.seq, run.first_seq, run.deleted)

    def _let_go(self, cloud: "FakeCloud") -> None:
        """Hold at most ``hold_runs`` runs (``RunBook.release``); what the store kept of one it lets
        go of (its events in memory, its questions) goes with it."""
        state = cloud.state
        for run in state.runs.release(self.hold_runs, self._busy):
            warm = self._warm.pop(id(run), None)
            if warm is not None:
                self._warm_events -= warm[1]
            seen = self._runs.get(id(run))
            if isinstance(run.events, EventLog) and seen is not None:
                run.events.release(seen.seq, keep=0)
            state.questions.forget(run, _asked(seen.questions if seen is not None else [], run))

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
                    doc, marks = export_state(cloud), _Marks(cloud)
                    self._rewritten(cloud, marks, await asyncio.to_thread(self._write_all, doc))
                    self._broken = False
                batch = self._collect(cloud)
                if batch is not None:
                    try:
                        await asyncio.to_thread(self._write, batch)
                    except BaseException:
                        self._broken = True
                        raise
                    for run, seq in batch["release"]:
                        if isinstance(run.events, EventLog):
                            run.events.release(seq)
                    self._hold(run for run, _ in batch["release"])
                self._let_go(cloud)
            except (OSError, SQLAlchemyError) as exc:
                raise StoreWriteError(f"cannot write the cloud state {self.path}: {_reason(exc)}") from None
            self._done = upto

    def _hold(self, written: Iterable["FakeRun"]) -> None:
        """Count the events the logs of ``written`` (just written, newest last) hold in memory, then let
        the runs written least recently go of theirs until at most ``hold_events`` are held in all
        (what they let go of is stored: a read takes it from there)."""
        warm = self._warm
        for run in written:
            log = run.events
            if not isinstance(log, EventLog):
                continue
            before = warm.pop(id(run), None)
            if before is not None:
                self._warm_events -= before[1]
            if log.in_memory:
                warm[id(run)] = (run, log.in_memory)
                self._warm_events += log.in_memory
        unwritten: list[tuple["FakeRun", int]] = []
        while self._warm_events > self.hold_events and warm:
            _, (run, counted) = warm.popitem(last=False)
            self._warm_events -= counted
            seen = self._runs.get(id(run))
            if seen is not None and isinstance(run.events, EventLog):
                run.events.release(seen.seq, keep=0)
                if run.events.in_memory:  # events not written yet stay: counted again, still the coldest
                    unwritten.append((run, run.events.in_memory))
        for run, left in reversed(unwritten):
            warm[id(run)] = (run, left)
            warm.move_to_end(id(run), last=False)
            self._warm_events += left

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
                         "keys": [], "unkeys": [], "refresh": [], "questions": [], "release": []}
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
            for run in _start_order(dirty.values(), self._runs, state.run_log.slots):
                self._collect_run(cloud, run, batch)
            self._collect_keys(state.idempotency, batch)
        if len(state.refresh_tokens) != len(self._refresh):
            for token, uid in state.refresh_tokens.items():
                if token not in self._refresh:
                    self._refresh.add(token)
                    batch["refresh"].append({"token": token, "user_id": uid})
        return batch if any(batch.values()) else None

    def _collect_keys(self, keys: KeyWindow, batch: "_Batch") -> None:
        """The idempotency keys set or dropped since the last flush (as the window noted them), new
        ones written in the window's order (oldest first: read back in the order written, the window
        trims the same keys after a restart)."""
        touched = keys.take_touched()
        for owner in touched:
            if owner in keys:
                if owner not in self._keys:
                    self._keys.add(owner)
                    batch["keys"].append({"user_id": owner[0], "key": owner[1],
                                          "data": _dump(key_record(owner, keys[owner]))})
            elif owner in self._keys:
                self._keys.discard(owner)
                batch["unkeys"].append(owner)

    def _collect_run(self, cloud: "FakeCloud", run: "FakeRun", batch: "_Batch") -> None:
        seen = self._runs.get(id(run))
        if seen is None or seen.run is not run:
            slot = cloud.state.runs.slot_of(run)
            if slot is None:  # no longer one of the cloud's runs (a reset): nothing to keep
                return
            gen, earlier = 0, slot.prev  # its place among the runs of its id
            while earlier is not None:
                gen, earlier = gen + 1, earlier.prev
            slot.gen = gen
            seen = self._see(run, gen)
            self._ordinal += 1
            batch["wipe"].append((run.id, gen))
            ordinal = self._ordinal
            if isinstance(run.events, EventLog):
                run.events.source = _StoredEvents(self.engine, run.id, gen)
            seen.serial = id_serial((run.id,))
        else:
            ordinal = None
        if seen.seq == run.seq and seen.deleted == run.deleted and seen.first_seq == run.first_seq:
            return
        new = events_between(run.events, seen.seq)  # unwritten events are always in memory
        if new:
            questions, top = run_history(new)
            seen.questions += questions
            seen.top_entry = max(seen.top_entry, top)
            batch["questions"] += [{"question_id": q, "run_id": run.id, "gen": seen.gen} for q in questions]
            seen.serial = max(seen.serial, id_serial(questions))
        batch["events"].extend((run.id, seen.gen, e) for e in new)
        if len(run.messages) > seen.messages:
            seen.serial = max(seen.serial, id_serial(str(m.get("id", "")) for m in run.messages[seen.messages:]))
            seen.messages = len(run.messages)
        record = run_record(run)
        record[_STORE_FIELD] = {"held": len(run.events), "questions": seen.questions, "top_entry": seen.top_entry}
        batch["runs"].append({"run_id": run.id, "gen": seen.gen, "ordinal": ordinal, "data": _dump(record),
                              **_run_columns(run, seen.serial, seen.top_entry)})
        batch["release"].append((run, run.seq))
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
                                 .values({k: v for k, v in row.items() if k not in _ROW_KEY}))
                else:
                    conn.execute(insert(runs).prefix_with("OR REPLACE"), [row])
            if batch["questions"]:
                conn.execute(insert(QUESTIONS).prefix_with("OR REPLACE"), batch["questions"])
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

    def _write_all(self, doc: dict[str, Any]) -> list[tuple[list[str], int]]:
        """Replace every stored row with ``doc``; each run's ``run_history``, in order."""
        histories = []
        with self.engine.begin() as conn:
            for table in (USERS, RUNS, EVENTS, KEYS, REFRESH, QUESTIONS):
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
                questions, top = run_history(run["events"])
                histories.append((questions, top))
                record[_STORE_FIELD] = {"held": len(run["events"]), "questions": questions, "top_entry": top}
                nobody: Any = None  # (a run built only to be described: it needs no cloud)
                described = run_from_record(nobody, {k: v for k, v in record.items() if k != _STORE_FIELD})
                asked = _asked(questions, described)
                conn.execute(insert(RUNS),
                             [{"run_id": run["id"], "gen": gen, "ordinal": ordinal, "data": _dump(record),
                               **_run_columns(described, id_serial(run_ids(described), asked), top)}])
                if asked:
                    conn.execute(insert(QUESTIONS).prefix_with("OR REPLACE"),
                                 [{"question_id": q, "run_id": run["id"], "gen": gen} for q in asked])
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
        return histories

    async def replace(self, cloud: "FakeCloud", doc: Any) -> None:
        """Replace the state of ``cloud`` and of this store with ``doc`` (refused whole when malformed)."""
        async with self._lock:
            import_state(cloud, doc)  # raises CloudStateError before anything changes
            clean, marks = export_state(cloud), _Marks(cloud)
            self._rewritten(cloud, marks, await asyncio.to_thread(self._write_all, clean))

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


def _start_order(changed: Iterable["FakeRun"], numbered: dict[int, _Seen], slots: "list[RunSlot]") -> "list[FakeRun]":
    """``changed`` with the runs the store has not numbered yet last, in start order (their order in
    ``slots``): they are found from its end, where a new run is, not by numbering the whole log."""
    old: list["FakeRun"] = []
    new: dict[int, "FakeRun"] = {}
    for run in changed:
        if id(run) in numbered and numbered[id(run)].run is run:
            old.append(run)
        else:
            new[id(run)] = run
    if not new:
        return old
    found: list["FakeRun"] = []
    for slot in reversed(slots):
        held = slot.run
        if held is not None and id(held) in new:
            found.append(new.pop(id(held)))
            if not new:
                break
    return [*new.values(), *old, *reversed(found)]  # (a run not in the log first, as before)


_ROW_KEY = ("run_id", "gen", "ordinal")


def _asked(questions: Iterable[object], run: "FakeRun") -> list[str]:
    """The questions a run opened (from its events), and the one its record holds when not among them."""
    asked = [str(q) for q in questions]
    opened = (run.question or {}).get("id")
    if isinstance(opened, str) and opened not in asked:
        asked.append(opened)
    return asked


def _run_columns(run: "FakeRun", serial: int, top_entry: int) -> dict[str, Any]:
    """What a run's row holds besides its record: what a load reads of it, and its ``GET /runs``
    entry (a run only stored has no stream open)."""
    dto = run.to_wire()  # a new dict sharing the run's values: encoded here at once, never kept
    dto.update(deleted=run.deleted, idempotency_key=run.idempotency_key, turns=run.turns, seq=run.seq,
               first_seq=run.first_seq, streams=0)  # as ``run_dto`` without events
    return {"user_id": run.user_id, "status": run.status, "deleted": run.deleted, "serial": serial,
            "top_entry": top_entry, "dto": _dump(dto)}


_Head = tuple[dict[str, Any], list[Any], list[Any], dict[str, str]]
"""What a stored state holds besides its runs: meta, people, idempotency keys, refresh tokens."""


def _read_head(conn: Any, parsed: Callable[[str], Any]) -> _Head | None:
    """The stored meta, people (by id), idempotency keys (in the order written, the oldest first:
    the window trims by age) and refresh tokens, each row's JSON read by ``parsed``; None when
    nothing is stored yet."""
    meta = {row.key: parsed(row.value) for row in conn.execute(select(META))}
    if "signing_key" not in meta:
        return None
    users = sorted((parsed(row.data) for row in conn.execute(select(USERS))), key=lambda u: u["id"])
    keys = [parsed(row.data) for row in conn.execute(select(KEYS).order_by(literal_column("rowid")))]
    refresh = {row.token: row.user_id for row in conn.execute(select(REFRESH))}
    return meta, users, keys, refresh


def _document(head: _Head, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """A ``state`` document of a stored head and ``runs``."""
    meta, users, keys, refresh = head
    return {
        "format": FORMAT,
        "version": VERSION,
        "meta": {k: meta[k] for k in EXPORTED_META if k in meta},
        "users": users,
        "runs": runs,
        "idempotency": keys,
        "refresh_tokens": refresh,
    }


def _reason(exc: BaseException) -> str:
    """The driver's own words for a database error (without SQLAlchemy's statement and links)."""
    orig = getattr(exc, "orig", None)
    return str(orig if orig is not None else exc)


def _loaded_event(data: str) -> dict[str, Any]:
    """A stored event as read back: text an older server stored that no answer could carry (a lone
    surrogate, NUL; rows hold ASCII escapes, so only a ``\\u`` escape can be one) is repaired,
    as ``import_state`` repairs a loaded state."""
    event = json.loads(data)
    if json_text_suspect(data):
        event = repair_value(event)[0]
    return event


def _event_seq(event: dict[str, Any]) -> int:
    return int(event["seq"])


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
