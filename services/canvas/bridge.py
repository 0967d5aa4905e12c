"""``RunBridge``: keeps one node object per run (and per child node) in step with the fake cloud.

The cloud calls ``apply_run(run_dto)`` for every run it creates or changes and
``apply_event(event)`` for every event it appends (shapes as in ``services.wire``); a follower with
many to apply makes each a step (``run_step``, ``event_step``, ``deleted_step``) and applies them in
one transaction (``apply_steps``); a stretch of runs and events is one step (``batch_step``;
``events_step`` for events alone) that writes them by table, as ``run_step`` and ``event_step``
would have written each (the same rows, in the same order). The run's
root node has the run id, is named by the run's title (``run_title``: its name, else its prompt) and owned by the run's person (``user_id``); an event whose
``node_id`` differs from the run id creates or updates a child node with a ``spawned`` edge from
the root. A fork (a run whose params name ``forked_from``) gets a ``forked-from`` edge from its node to
its parent's, once the parent's node is there, and a ``run.forked`` event naming the parent and turn.
Statuses follow the run, pending messages become inbox entries (each message once),
and every event is recorded on its node with a level, so watchers' inboxes hear of it. Events
carry their per-run ``seq``; one already applied to a node is skipped, so replays are harmless.

Run text is untrusted and cannot be sent again (a JavaScript app may split an emoji into a lone
surrogate), so the bridge REPAIRS and FLAGS it rather than refusing it: every string of a run DTO
or event goes through ``services.text.repair_value`` (lone surrogates become U+FFFD, NUL is
removed) before anything is stored, the recorded event carries ``text_repaired: true``, and the
node gets a ``text.repaired`` event saying what was changed, where the operator sees it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from sqlalchemy import Table, select
from sqlalchemy.orm import Session

from services.text import clip, json_clean, repair_value, run_title

from .errors import CanvasError
from .events import COMMON_LEVELS, FORKED_FROM, EventBatch, add_edge, insert_rows, publish_event
from .models import EdgeRow, InboxRow, NodeRow, ObjectRow
from .names import NODE_STATUSES, check_handle, check_node_kind
from .nodes import configure_node, node_view, spawn_node
from .objects import Tx, ensure_owner, find_object, get_row
from .service import Canvas
from .views import NodeView

__all__ = ["RunBridge", "RunPosition", "PreparedEvent", "BridgeInputError", "BridgeStep", "EVENT_LEVELS", "status_of", "outcome_name"]

EVENT_LEVELS: dict[str, int] = {
    "node.turn.started": 2,
    "node.output_text.done": 2,
    "node.turn.completed": 3,
    "node.activity": 1,
    "node.idle": 3,
    "node.question.opened": 8,
    "node.question.answered": 4,
    "node.message.received": 5,
    "node.settled": 6,
    "node.reopened": 5,
    "run.renamed": 2,
    "run.interrupted": 6,
    "run.forked": 3,
}
"""The level each run event is recorded at (a failed turn or a failed settle is raised to 8)."""
BridgeStep = Callable[[Tx], object]
"""One run, event or deletion to apply inside a canvas transaction (``RunBridge.apply_steps``)."""
_QUIET = {"node.output_text.delta"}
"""Event types not recorded (text deltas): only their ``seq`` is taken."""
_OUTCOME_STATUS = {"result": "done", "declined": "done", "canceled": "canceled",
                   "deadline_exceeded": "dead", "runtime_error": "dead"}


class BridgeInputError(CanvasError):
    """A run DTO or event dict that lacks a field the bridge needs, or has the wrong type."""

    code = "bridge_input_invalid"


def _repaired(data: Mapping[str, Any]) -> tuple[Mapping[str, Any], bool]:
    """``data`` with every string made storable (``repair_value``), and whether anything changed.
    Clean data (most of it) is found so by one scan of its JSON text and comes back as it is."""
    if not isinstance(data, Mapping):
        return data, False
    if json_clean(data):  # not JSON-like: walked below
        return data, False
    fixed, changed = repair_value(dict(data))
    return fixed, changed


def _flag_repaired(tx: Tx, node: ObjectRow, where: str, seq: Any = None) -> None:
    """Record on ``node`` that text it received was repaired: a ``text.repaired`` event."""
    publish_event(tx.session, node, "text.repaired", tx.now, level=4, data={"in": where, "seq": seq},
                  summary=f"{node.name}: text repaired in {where}: lone surrogates became U+FFFD, NUL removed")
    tx.change("node.updated", node.id, text_repaired=where)


def status_of(run_status: str | None, outcome: str | None) -> str:
    """The node status for a run status (``running`` -> ``active``, ``settled`` -> by outcome)."""
    if run_status == "settled":
        return _OUTCOME_STATUS.get(outcome or "", "done")
    return {"running": "active", "idle": "idle", "waiting_on_user": "waiting_on_user"}.get(run_status or "", "active")


def outcome_name(value: Any) -> str | None:
    """A run's outcome as its name: the DTO carries ``{outcome, ...fields}`` (or, older, the bare name)."""
    if isinstance(value, Mapping):
        value = value.get("outcome")
    return value if isinstance(value, str) and value else None


def _field(data: Mapping[str, Any], key: str, kind: type, what: str) -> Any:
    if not isinstance(data, Mapping):
        raise BridgeInputError(f"the {what} must be an object, got {type(data).__name__}")
    value = data.get(key)
    if not isinstance(value, kind) or isinstance(value, bool) or (isinstance(value, str) and not value):
        raise BridgeInputError(f"the {what} has no valid {key!r} (got {value!r})")
    return value


@dataclass
class _Held:
    """The rows the bridge has read or made in one unit of work, held (the session holds its rows
    weakly) so that reading one again costs no statement: objects by id, node rows by node id,
    people by user id. Nothing the bridge writes deletes one, so each stays what it is."""

    objects: dict[str, ObjectRow]
    nodes: dict[str, NodeRow]
    people: dict[str, ObjectRow]


def _held(session: Session) -> _Held:
    held = session.info.get("run_bridge")
    if held is None:
        held = session.info["run_bridge"] = _Held({}, {}, {})
    return held


def _object(session: Session, object_id: str) -> ObjectRow | None:
    """``get_row``, from the rows held when the unit of work has read it."""
    held = _held(session).objects
    row = held.get(object_id)
    if row is None:
        row = get_row(session, object_id)
        if row is not None:
            held[object_id] = row
    return row


def _spawn(tx: Tx, **fields: Any) -> ObjectRow:
    """``spawn_node``, its node held."""
    node = spawn_node(tx, **fields)
    _held(tx.session).objects[node.id] = node
    return node


def _person(tx: Tx, user_id: str) -> ObjectRow:
    people = _held(tx.session).people
    if user_id not in people:
        handle = user_id.split(":", 1)[1] if user_id.startswith("user:") else user_id
        people[user_id] = ensure_owner(tx, "user", handle)
    return people[user_id]


def _node_row(session: Session, node_id: str) -> NodeRow:
    """The node row of the node ``node_id`` (from the unit of work's rows when it holds it: no statement)."""
    held = _held(session).nodes
    row = held.get(node_id) or session.get(NodeRow, node_id)
    if row is None:
        raise BridgeInputError(f"the node {node_id!r} has no node row")
    held[node_id] = row
    return row


def _file_message(tx: Tx, node: ObjectRow, message: Mapping[str, Any], turn_active: bool) -> bool:
    """File one message DTO in the node's inbox unless it is there; whether it was new."""
    ref = message.get("id")
    ref = str(ref) if ref is not None else None
    if ref is not None and tx.session.execute(select(InboxRow.id).where(
            InboxRow.owner_id == node.id, InboxRow.ref == ref)).first():
        return False
    text = str(message.get("text") or "")
    tx.session.add(InboxRow(owner_id=node.id, kind="message", object_name="user", event_type="message", level=5,
                            at=tx.now, summary=clip(text.strip().splitlines()[0] if text.strip() else "", 80),
                            body=text, ref=ref))
    row = _node_row(tx.session, node.id)
    if turn_active:
        row.wake_pending = True
    tx.session.flush()
    tx.change("inbox.added", node.id, ref=ref, coalesced=turn_active)
    return True


@dataclass(frozen=True)
class RunPosition:
    """How far the canvas holds one run (``RunBridge.positions``)."""

    held: int
    """The highest event ``seq`` any of the run's nodes holds (0: none; the bridge applies a run's
    events in order, so every event up to it was applied or refused)."""
    current: bool
    """The root node already shows the run as its DTO says (status, name, activity, outcome, every
    pending message filed): ``run_step`` would change nothing."""


@dataclass(frozen=True)
class _PreparedRun:
    """A run DTO read for the bridge (``RunBridge._prepare_run``): its text repaired, its fields checked."""

    run: Mapping[str, Any]
    run_id: str
    user_id: str
    pending: list[Mapping[str, Any]]
    bad: list[str]
    """The fields whose text was repaired."""
    bad_messages: list[bool]
    """For each pending message, whether its text was repaired."""


@dataclass(frozen=True)
class PreparedEvent:
    """A run event read for the bridge (``RunBridge.prepare_event``): its text repaired, its fields checked."""

    event: Mapping[str, Any]
    repaired: bool
    run_id: str
    node_id: str
    type: str
    seq: int


_OBJECT_COLUMNS = ("id", "type", "kind", "name", "handle", "owner_id", "privacy", "status", "created_at", "updated_at")
_NODE_COLUMNS = ("object_id", "kind", "mode", "lifecycle", "profile", "parent_id", "activity", "outcome",
                 "turn_active", "wake_pending", "wakes", "last_seq")
"""The columns of a root node's object and node rows as ``_make_roots`` writes them (every one but ``pk``)."""
_IDS_AT_ONCE = 500
"""How many ids one ``IN (...)`` of ``positions`` names (well under SQLite's bound on parameters)."""


@dataclass
class _Applying:
    """What one ``batch_step`` carries from item to item: its unit of work, the batch its events are
    queued on, the rows held, and each node's newest event applied."""

    tx: Tx
    batch: EventBatch
    held: _Held
    last: dict[str, tuple[NodeRow, int]] = field(default_factory=dict)
    updated: dict[str, tuple[str, str, Any]] | None = None
    """With ``coalesce``: each node's ``node.updated`` for its events (its status, its newest event's
    type and seq), published once at the end."""

    def read_nodes(self, ids: Collection[str]) -> None:
        """The objects and node rows of ``ids`` not held yet, read at once (an id the canvas does not
        hold stays missing from ``held.objects``)."""
        objects, nodes, session = self.held.objects, self.held.nodes, self.tx.session
        wanted = sorted(set(ids) - objects.keys())
        for start in range(0, len(wanted), _IDS_AT_ONCE):
            chunk = wanted[start:start + _IDS_AT_ONCE]
            objects.update((o.id, o) for o in session.execute(select(ObjectRow).where(ObjectRow.id.in_(chunk))).scalars())
        rows = sorted(set(ids) & objects.keys() - nodes.keys())
        for start in range(0, len(rows), _IDS_AT_ONCE):
            chunk = rows[start:start + _IDS_AT_ONCE]
            nodes.update((n.object_id, n) for n in session.execute(
                select(NodeRow).where(NodeRow.object_id.in_(chunk))).scalars())

    def finish(self) -> None:
        """Each node's newest event seq on its row, the queued events written, the rows flushed (and,
        coalesced, each node's ``node.updated`` published, in the order of their last events)."""
        for row, seq in self.last.values():
            row.last_seq = seq
        self.batch.flush()
        self.tx.session.flush()
        for node_id, (status, type_, seq) in (self.updated or {}).items():
            self.tx.change("node.updated", node_id, status=status, event=type_, seq=seq)


class RunBridge:
    """Follows runs into the canvas: ``apply_run`` for run DTOs, ``apply_event`` for run events."""

    def __init__(self, canvas: Canvas, *, kind: str = "general") -> None:
        self.canvas = canvas
        """The canvas the run nodes live in."""
        self.kind = check_node_kind(kind)
        """The node kind given to run nodes when the run's params name none."""

    async def apply_run(self, run: Mapping[str, Any]) -> NodeView:
        """Create or update the run's root node from a run DTO; file its pending messages.

        Bad text in the DTO is repaired; when repaired text is stored (a new name, activity or
        outcome, a newly filed message) the node gets a ``text.repaired`` event naming the fields.
        """
        view = await self.canvas._write(self.run_step(run))
        assert view is not None
        return view

    async def apply_event(self, event: Mapping[str, Any]) -> NodeView:
        """Apply one run event to its node (the root, or a child spawned from the root).

        Bad text in the event is repaired and flagged (``text_repaired`` on the recorded event and a
        ``text.repaired`` event on the node).
        """
        return await self.canvas._write(self.event_step(event))

    async def apply_steps(self, steps: Sequence[BridgeStep]) -> None:
        """Apply ``steps`` (``run_step``, ``event_step``, ``deleted_step``) in order, in one canvas
        transaction: all of them, or, when one fails, none (its error is raised)."""
        def apply(tx: Tx) -> None:
            for step in steps:
                step(tx)
        await self.canvas._write(apply)

    async def positions(self, runs: Mapping[str, tuple[Mapping[str, Any], Collection[str]]]) -> dict[str, RunPosition]:
        """Where the canvas is for each run, read in one read-only unit of work, a few statements per
        500 runs: ``runs`` maps a run id to its DTO (as ``run_step`` takes it) and the ids of the nodes
        its events name; a run whose root node the canvas does not have is left out of the answer."""
        return await self.canvas._read(lambda session: _positions(session, runs))

    def deleted_step(self, run_id: str) -> BridgeStep:
        """The step recording on the run's node that the run was deleted (a ``run.deleted`` event)."""
        def apply(tx: Tx) -> None:
            row = find_object(tx.session, run_id)
            event, _ = publish_event(tx.session, row, "run.deleted", tx.now, level=6, data={})
            tx.change("event.published", row.id, type="run.deleted", level=event.level)
        return apply

    def run_step(self, run: Mapping[str, Any], *, view: bool = True) -> Callable[[Tx], NodeView | None]:
        """The step of ``apply_run`` (a ``BridgeInputError`` for a DTO it cannot take, before any write);
        without ``view`` it answers None instead of reading the node's view back."""
        prepared = self._prepare_run(run)

        def apply(tx: Tx) -> NodeView | None:
            return self._apply_run(tx, prepared, view=view)
        return apply

    def batch_step(self, items: Sequence[Mapping[str, Any] | PreparedEvent], *, coalesce: bool = False) -> BridgeStep:
        """One step applying ``items`` in order, by table: a run DTO as ``run_step`` applies it (without
        its view), a ``PreparedEvent`` as ``event_step`` does. The root nodes the canvas lacks are made
        first, their objects and node rows a statement per table (numbered in the order of ``items``);
        each run's ``created`` and ``configured`` events and every event's record are queued on one
        ``EventBatch`` in their turn, so the events, the inbox entries and the changes published come
        in the order applying the items one by one gives. A ``BridgeInputError`` for a DTO it cannot
        take, before any write.

        With ``coalesce`` the rows are the same, but each node's events publish one ``node.updated``
        between them, at the end: the node's status then, and its newest event's type and seq. A unit
        of work commits whole, at one time, so no reader could have seen the node between two of its
        events; a follower carrying thousands of events then sends its watchers (the panes, the other
        windows, the time history) a change a node, not one an event."""
        prepared = [item if isinstance(item, PreparedEvent) else self._prepare_run(item) for item in items]

        def apply(tx: Tx) -> None:
            runs = [one for one in prepared if isinstance(one, _PreparedRun)]
            state = _Applying(tx, EventBatch(tx.session), _held(tx.session), updated={} if coalesce else None)
            state.read_nodes({one.run_id for one in prepared} | {one.node_id for one in prepared
                                                                  if isinstance(one, PreparedEvent)})
            made = self._make_roots(tx, runs) if runs else {}
            for one in prepared:
                if isinstance(one, PreparedEvent):
                    self._event_into(state, one)
                    continue
                node = made.pop(one.run_id, None)
                if node is not None:  # made above: its ``created`` event and change in its turn
                    state.batch.add(node, "created", tx.now, level=COMMON_LEVELS["created"], data={},
                                    summary=f"{node.name}: created")
                    tx.change("object.created", node.id, type="node", name=node.name)
                self._apply_run(tx, one, view=False, made=() if node is None else (node.id,), batch=state.batch)
            state.finish()
        return apply

    @staticmethod
    def _prepare_run(run: Mapping[str, Any]) -> _PreparedRun:
        raw = run
        run, _ = _repaired(run)
        run_id = _field(run, "id", str, "run")
        user_id = _field(run, "user_id", str, f"run {run_id!r}")
        pending = run.get("pending") or []
        if not isinstance(pending, list) or not all(isinstance(m, Mapping) for m in pending):
            raise BridgeInputError(f"the run {run_id!r} has a 'pending' that is not a list of message objects")
        bad = [key for key in ("name", "activity", "outcome") if raw.get(key) != run.get(key)]
        raw_pending = raw.get("pending") or []
        bad_messages = [i < len(raw_pending) and raw_pending[i] != message for i, message in enumerate(pending)]
        return _PreparedRun(run, run_id, user_id, pending, bad, bad_messages)

    def _apply_run(self, tx: Tx, prepared: _PreparedRun, *, view: bool, made: Collection[str] = (),
                   batch: EventBatch | None = None) -> NodeView | None:
        """A run DTO applied to its root node (``made``: the roots this unit of work has just made, as
        new to it as a node ``_root`` makes; ``batch``: where its ``configured`` event is queued, written
        before anything else of it is)."""
        run, run_id = prepared.run, prepared.run_id
        found = _object(tx.session, run_id)
        new = found is None or run_id in made
        person = _person(tx, prepared.user_id)
        node = self._root(tx, run_id, owner_id=person.id, run=run, found=found)
        if node.owner_id is None:
            node.owner_id = person.id
        outcome = outcome_name(run.get("outcome"))
        activity = run.get("activity") if isinstance(run.get("activity"), str) else None
        fields: dict[str, Any] = {"status": status_of(run.get("status"), outcome), "activity": activity,
                                  "outcome": outcome}
        if run.get("name"):
            fields["name"] = str(run["name"])
        row = _node_row(tx.session, node.id)
        before = {"name": node.name, "activity": row.activity, "outcome": row.outcome}
        configure_node(tx, node, fields, batch=batch, row=row)
        params = run.get("params")
        if batch is not None and (prepared.pending or prepared.bad or (isinstance(params, Mapping)
                                                                         and params.get("forked_from"))):
            batch.flush()  # what follows writes events of its own: the node's journal keeps its order
        self._link_fork(tx, node, params)
        after = {"name": node.name, "activity": row.activity, "outcome": row.outcome}
        stored = [key for key in prepared.bad if new or before[key] != after[key]]
        for message, fixed in zip(prepared.pending, prepared.bad_messages, strict=True):
            if _file_message(tx, node, message, row.turn_active) and fixed:
                stored.append(f"message {message.get('id')}")
        if stored:
            _flag_repaired(tx, node, "run " + ", ".join(stored))
        return node_view(tx.session, node) if view else None

    def _make_roots(self, tx: Tx, runs: Sequence[_PreparedRun]) -> dict[str, ObjectRow]:
        """The root nodes of ``runs`` the canvas lacks (the caller has read what it holds of them:
        ``_Applying.read_nodes``), their objects and node rows made by table in the order of ``runs``
        (their ``created`` events and changes are the caller's, in their turn)."""
        session = tx.session
        held = _held(session)
        objects: list[tuple[Any, ...]] = []
        nodes: list[tuple[Any, ...]] = []
        making: set[str] = set()
        for one in runs:
            run_id, run = one.run_id, one.run
            if run_id in held.objects or run_id in making:
                continue
            making.add(run_id)
            params = run.get("params") or {}
            kind = params.get("kind") if isinstance(params, Mapping) and isinstance(params.get("kind"), str) else self.kind
            check_node_kind(kind)
            check_handle(run_id, "node id")
            name = str(run_title(run.get("name"), params.get("prompt") if isinstance(params, Mapping) else "", run_id))
            owner = _person(tx, one.user_id).id
            status = status_of(run.get("status"), outcome_name(run.get("outcome")))
            objects.append((run_id, "node", kind, name, run_id, owner, "public", status, tx.now, tx.now))
            nodes.append((run_id, kind, "base", "terminal", None, None, None, None, False, False, 0, 0))
        if not objects:
            return {}
        session.flush()  # what the session holds is written before the rows beside it
        insert_rows(session, cast(Table, ObjectRow.__table__), _OBJECT_COLUMNS, objects)
        insert_rows(session, cast(Table, NodeRow.__table__), _NODE_COLUMNS, nodes)
        ids = [row[0] for row in objects]
        for start in range(0, len(ids), _IDS_AT_ONCE):
            chunk = ids[start:start + _IDS_AT_ONCE]
            held.objects.update((o.id, o) for o in session.execute(select(ObjectRow).where(ObjectRow.id.in_(chunk))).scalars())
            held.nodes.update((n.object_id, n) for n in session.execute(
                select(NodeRow).where(NodeRow.object_id.in_(chunk))).scalars())
        return {run_id: held.objects[run_id] for run_id in ids}

    def _link_fork(self, tx: Tx, node: ObjectRow, params: object) -> None:
        """A fork's ``forked-from`` edge to its parent's node and its ``run.forked`` event, once (nothing
        while the parent's node is not in the canvas: a later run step adds them)."""
        parent_id = params.get("forked_from") if isinstance(params, Mapping) else None
        if not isinstance(parent_id, str) or not parent_id or parent_id == node.id:
            return
        parent = _object(tx.session, parent_id)
        if parent is None or parent.type != "node":
            return
        if tx.session.execute(select(EdgeRow.id).where(EdgeRow.src_id == node.id, EdgeRow.dst_id == parent.id,
                                                       EdgeRow.kind == FORKED_FROM)).first() is not None:
            return
        turn = params.get("forked_at_turn") if isinstance(params, Mapping) else None
        turn = turn if isinstance(turn, int) and not isinstance(turn, bool) else None
        add_edge(tx.session, node.id, parent.id, FORKED_FROM, tx.now)
        at = f" at turn {turn}" if turn is not None else ""
        publish_event(tx.session, node, "run.forked", tx.now, level=EVENT_LEVELS["run.forked"],
                      data={"parent": parent.id, "turn": turn}, summary=f"{node.name}: fork of {parent.name}{at}")
        tx.change("edge.added", node.id, kind=FORKED_FROM, other=parent.id)

    def _root(self, tx: Tx, run_id: str, *, owner_id: str | None, run: Mapping[str, Any] | None = None,
              found: ObjectRow | None = None) -> ObjectRow:
        """The run's root node (``found``: the object of the run id, read already), made when missing."""
        node = found if found is not None else _object(tx.session, run_id)
        if node is not None:
            if node.type != "node":
                raise BridgeInputError(f"the run id {run_id!r} names a {node.type}, not a node")
            return node
        params = (run or {}).get("params") or {}
        kind = params.get("kind") if isinstance(params, Mapping) and isinstance(params.get("kind"), str) else self.kind
        name = run_title((run or {}).get("name"), params.get("prompt") if isinstance(params, Mapping) else "", run_id)
        return _spawn(tx, node_id=run_id, name=str(name), owner_id=owner_id, kind=kind,
                      status=status_of((run or {}).get("status"), outcome_name((run or {}).get("outcome"))))

    @staticmethod
    def clean(events: Sequence[Mapping[str, Any]]) -> bool:
        """Whether every string of ``events`` is storable as it is (one scan of their JSON text): a
        caller preparing many events checks them at once and passes ``clean`` to ``prepare_event``."""
        return json_clean(events)  # not JSON-like: False, and each is walked on its own

    @staticmethod
    def prepare_event(event: Mapping[str, Any], *, clean: bool = False) -> PreparedEvent:
        """``event`` repaired and checked, as ``event_step`` and ``events_step`` take it (a
        ``BridgeInputError`` for an event the bridge cannot take); ``clean``: its text is known to be
        storable (``clean``), so it is not scanned again."""
        event, repaired = (event, False) if clean else _repaired(event)
        if type(event) is dict:  # the usual event, its fields read at once (the checks below name a bad one)
            run_id, node_id, type_, seq = event.get("run_id"), event.get("node_id"), event.get("type"), event.get("seq")
            if (type(run_id) is str and run_id and type(node_id) is str and node_id and type(type_) is str and type_
                    and type(seq) is int):
                return PreparedEvent(event, repaired, run_id, node_id, type_, seq)
        run_id = _field(event, "run_id", str, "event")
        node_id = _field(event, "node_id", str, f"event of run {run_id!r}")
        type_ = _field(event, "type", str, f"event of run {run_id!r}")
        seq = _field(event, "seq", int, f"event {type_!r} of run {run_id!r}")
        return PreparedEvent(event, repaired, run_id, node_id, type_, seq)

    def events_step(self, events: Sequence[PreparedEvent]) -> BridgeStep:
        """The step applying ``events`` in order as ``event_step`` applies each, by table: the nodes
        they name are read at once, the events recorded and the inbox entries their delivery makes
        are written in a statement each (``EventBatch``), and each node's row is updated once, at
        the end. What needs a statement of its own (a node spawned, a message filed, repaired text
        flagged) is written in its turn, after the events before it, so the rows, their ids and the
        changes published are those applying the events one by one gives (``batch_step``)."""
        return self.batch_step(events)

    def _event_into(self, state: _Applying, prepared: PreparedEvent) -> None:
        """One event of a ``batch_step``, applied as ``event_step`` applies it, its record queued."""
        tx, batch, objects = state.tx, state.batch, state.held.objects
        run_id, node_id = prepared.run_id, prepared.node_id
        root = objects.get(run_id)
        if root is None:
            batch.reset()  # a node is made: what came before it is written first
            root = self._root(tx, run_id, owner_id=None)
        elif root.type != "node":
            raise BridgeInputError(f"the run id {run_id!r} names a {root.type}, not a node")
        node = root
        if node_id != run_id:
            found = objects.get(node_id)
            if found is None:
                batch.reset()  # the root watches its new child: the watches are read again
                found = _spawn(tx, node_id=node_id, name=node_id, owner_id=root.owner_id, kind=self.kind, parent=root)
            node = found
            if node.type != "node":
                raise BridgeInputError(f"the node id {node_id!r} names a {node.type}, not a node")
        # the node's id is ``node_id`` (objects are held by their ids): read from no row
        row = state.held.nodes.get(node_id)
        if row is None:
            row = state.held.nodes[node_id] = _node_row(tx.session, node_id)
        top = state.last.get(node_id)
        if prepared.seq <= (row.last_seq if top is None else top[1]):
            return
        state.last[node_id] = (row, prepared.seq)  # written on the row once, at the end
        if prepared.type not in _QUIET:
            self._apply(tx, node, row, prepared.type, prepared.event, prepared.repaired, batch, state.updated)
        if prepared.repaired:
            batch.flush()
            _flag_repaired(tx, node, prepared.type, prepared.seq)

    def event_step(self, event: Mapping[str, Any] | PreparedEvent) -> Callable[[Tx], NodeView]:
        """The step of ``apply_event`` (a ``BridgeInputError`` for an event it cannot take, before any write)."""
        prepared = event if isinstance(event, PreparedEvent) else self.prepare_event(event)
        event, repaired = prepared.event, prepared.repaired
        run_id, node_id, type_, seq = prepared.run_id, prepared.node_id, prepared.type, prepared.seq

        def apply(tx: Tx) -> NodeView:
            root = self._root(tx, run_id, owner_id=None)
            node = root
            if node_id != run_id:
                node = _object(tx.session, node_id) or _spawn(
                    tx, node_id=node_id, name=node_id, owner_id=root.owner_id, kind=self.kind, parent=root)
                if node.type != "node":
                    raise BridgeInputError(f"the node id {node_id!r} names a {node.type}, not a node")
            row = _node_row(tx.session, node.id)
            if seq <= row.last_seq:
                return node_view(tx.session, node)
            row.last_seq = seq
            if type_ not in _QUIET:
                self._apply(tx, node, row, type_, event, repaired)
            if repaired:
                _flag_repaired(tx, node, type_, seq)
            tx.session.flush()
            return node_view(tx.session, node)
        return apply

    def _apply(self, tx: Tx, node: ObjectRow, row: NodeRow, type_: str, event: Mapping[str, Any],
               repaired: bool = False, batch: EventBatch | None = None,
               updated: dict[str, tuple[str, str, Any]] | None = None) -> None:
        """Apply one event to its node and record it: published now, or queued on ``batch`` (its
        ``node.updated`` kept in ``updated``, when given, to be published once for the node)."""
        level = EVENT_LEVELS.get(type_, 3)
        summary = f"{node.name}: {type_}"
        data: dict[str, Any] = {"seq": event.get("seq"), "event_id": event.get("id")}
        if repaired:
            data["text_repaired"] = True
        status: str | None = None
        if type_ == "node.turn.started":
            row.turn_active, row.wake_pending, status = True, False, "active"
            text = ((event.get("input") or {}).get("text") or "") if isinstance(event.get("input"), Mapping) else ""
            summary = f"{node.name}: turn started" + (f": {clip(str(text), 60)}" if text else "")
        elif type_ == "node.output_text.done":
            data["text"] = clip(str(event.get("text") or ""), 2000)
            summary = f"{node.name}: {clip(str(event.get('text') or ''), 60)}"
        elif type_ == "node.turn.completed":
            row.turn_active = False
            error = event.get("error") if isinstance(event.get("error"), Mapping) else None
            data["stop_reason"] = event.get("stop_reason")
            if event.get("stop_reason") == "error":
                level, data["error"] = 8, dict(error or {})
                summary = f"{node.name}: turn failed: {(error or {}).get('code', 'error')}"
        elif type_ == "node.activity":
            row.activity = event.get("activity") if isinstance(event.get("activity"), str) else None
            data["activity"] = row.activity
        elif type_ == "node.idle":
            row.turn_active, status = False, "idle"
        elif type_ == "node.question.opened":
            status = "waiting_on_user"
            question = event.get("question") if isinstance(event.get("question"), Mapping) else {}
            data["question"] = question.get("id")
            summary = f"{node.name}: asks: {clip(str(question.get('title') or ''), 60)}"
        elif type_ == "node.question.answered":
            status, data["question"] = "active", event.get("question_id")
        elif type_ == "node.message.received":
            message = event.get("message")
            if not isinstance(message, Mapping):
                raise BridgeInputError(f"the event node.message.received (seq {event.get('seq')}) has no message object")
            if batch is not None:
                batch.flush()  # the message's entry after the entries of the events before it
            _file_message(tx, node, message, row.turn_active)
            if event.get("start_turn") and not row.turn_active:
                status = "active"
            data["message"] = message.get("id")
            summary = f"{node.name}: message: {clip(str(message.get('text') or ''), 60)}"
        elif type_ == "node.settled":
            outcome = outcome_name(event.get("outcome"))
            row.outcome, row.turn_active, status = outcome, False, status_of("settled", outcome)
            data["outcome"] = outcome
            level = 6 if outcome == "result" else 7 if outcome == "declined" else 8
            summary = f"{node.name}: settled ({outcome})"
        elif type_ == "node.reopened":
            row.outcome, status = None, "active"
        elif type_ == "run.renamed" and isinstance(event.get("name"), str) and event["name"]:
            node.name = event["name"]
            data["name"] = event["name"]
        elif type_ == "run.interrupted":
            row.turn_active, status = False, "idle"
        if status is not None and status in NODE_STATUSES and node.status != status:
            node.status = status
        if node.updated_at != tx.now:  # set once per unit of work (setting a row's field is not free)
            node.updated_at = tx.now
        if batch is None:
            tx.session.flush()
            publish_event(tx.session, node, type_, tx.now, level=level, data=data, summary=summary)
        else:
            batch.add(node, type_, tx.now, level=level, data=data, summary=summary)
        if updated is None:
            tx.change("node.updated", node.id, status=node.status, event=type_, seq=event.get("seq"))
        else:  # the newest last: moved to the end
            node_id = node.id
            updated.pop(node_id, None)
            updated[node_id] = (node.status, type_, event.get("seq"))


def _shows(root: tuple[str | None, str, int, str | None, str | None], run_id: str, run: Mapping[str, Any],
           filed: set[tuple[str, str]]) -> bool:
    """Whether the root node's row (``_positions``' columns) shows the run as ``run`` says."""
    pending = run.get("pending") or []
    outcome = outcome_name(run.get("outcome"))
    activity = run.get("activity") if isinstance(run.get("activity"), str) else None
    status, name, _, row_activity, row_outcome = root
    return (status == status_of(run.get("status"), outcome) and row_activity == activity
            and row_outcome == outcome and (not run.get("name") or name == str(run["name"]))
            and all(isinstance(m, Mapping) and m.get("id") is not None
                    and (run_id, str(m["id"])) in filed for m in pending))


def _positions(session: Session, runs: Mapping[str, tuple[Mapping[str, Any], Collection[str]]]) -> dict[str, RunPosition]:
    nodes: dict[str, tuple[str | None, str, int, str | None, str | None]] = {}
    wanted = sorted({*runs, *(node_id for _, node_ids in runs.values() for node_id in node_ids)})
    for start in range(0, len(wanted), _IDS_AT_ONCE):
        chunk = wanted[start:start + _IDS_AT_ONCE]
        for object_id, status, name, last_seq, activity, outcome in session.execute(
                select(ObjectRow.id, ObjectRow.status, ObjectRow.name, NodeRow.last_seq, NodeRow.activity, NodeRow.outcome)
                .join(NodeRow, NodeRow.object_id == ObjectRow.id).where(ObjectRow.id.in_(chunk))):
            nodes[object_id] = (status, name, last_seq, activity, outcome)
    filed: set[tuple[str, str]] = set()  # (node, message id) of the messages filed for runs that have pending ones
    owners = sorted(run_id for run_id, (dto, _) in runs.items() if run_id in nodes and dto.get("pending"))
    for start in range(0, len(owners), _IDS_AT_ONCE):
        chunk = owners[start:start + _IDS_AT_ONCE]
        filed.update((owner, ref) for owner, ref in session.execute(
            select(InboxRow.owner_id, InboxRow.ref).where(InboxRow.owner_id.in_(chunk), InboxRow.ref.is_not(None))))
    answer: dict[str, RunPosition] = {}
    for run_id, (dto, node_ids) in runs.items():
        root = nodes.get(run_id)
        if root is None:
            continue
        held = max([root[2], *(nodes[n][2] for n in node_ids if n in nodes)])
        # the DTO as it is first: the node's text is stored repaired, so a DTO whose text it equals
        # needed no repair (most of them: scanning each for what to repair costs more than comparing)
        current = _shows(root, run_id, dto, filed) or _shows(root, run_id, _repaired(dto)[0], filed)
        answer[run_id] = RunPosition(held, current)
    return answer
