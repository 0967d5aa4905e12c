"""``ReplaySession``: a recorded session played again on a fresh workspace.

The session opens a workspace folder (the sample world, as a new window would) whose cloud is
embedded (a ``FakeCloud`` in this process) or served (``served=True``: the same cloud on a free
loopback port, driven through ``RemoteCloud`` over HTTP), replaces the cloud's state with the
recording's starting state, and then plays steps:

- an operator's action or a scripted failure as the control call the desk made (``control``, or the
  named helpers ``run_action``, ``grant``, ``start_run``, ``send_message``, ``fail_next``);
- an app's call through the real SDK (``app(user)`` is a ``Crouter`` with the person's connection,
  refreshed through the directory like any app's);
- an insight review's decision through the workspace's ``InsightReviews``;
- an OKF harvest judgment's decision through the workspace's ``Harvest`` (``decide_judgment``): the
  session waits, bounded, for the harvest to judge the same inputs here, then approves (whole, or the
  same outcomes) or rejects it; a judgment that never comes is a ``Divergence`` at that step.

A run started during the session gets another id than it had when recorded: ``alias`` maps the
recorded id to the new one and every helper takes recorded ids. ``expect`` compares what the cloud
shows with a recorded observation and raises ``Divergence`` (expected and seen) at the first
difference. The starting state holds no secrets; the session's own cloud supplies its signing key
and the people's refresh tokens, so the workspace's connections keep working.
"""

from __future__ import annotations

import asyncio
import copy
import uuid
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, TypeVar
from urllib.parse import quote, unquote

from ..desk import ControlClient
from ..errors import ServiceError
from ..served.errors import ControlError
from .format import JsonObject, Observation, ObservedJudgment, StepFields, fields, items
from .observe import JudgmentSource, compare, compare_judgments, judgment_inputs, observe

if TYPE_CHECKING:
    from ..sdk import Crouter, OAuth2Client
    from ..workspace import Workspace

__all__ = ["ReplaySession", "Divergence", "StepOutcome", "app_client", "merged_state", "JUDGMENT_WAIT_S"]

T = TypeVar("T")

JUDGMENT_WAIT_S = 30.0
"""How long a replay waits for the harvest to judge what a recorded judgment judged (or to reach the
state the recording observed) before it calls the step diverged."""
_JUDGMENT_POLL_S = 0.05


class Divergence(ServiceError):
    """A replayed step whose outcome or observation differs from the recording's."""

    def __init__(self, step: int, what: str, expected: object, seen: object) -> None:
        super().__init__(f"step {step}: {what}")
        self.step = step
        """The 1-based step that diverged."""
        self.what = what
        """The first difference, in words."""
        self.expected = expected
        """What the recording observed."""
        self.seen = seen
        """What the replay observed."""


class StepOutcome:
    """How a replayed call ended: its status and, when refused, the refusal's code."""

    def __init__(self, status: int | None, error: str | None = None) -> None:
        self.status = status
        self.error = error

    def __repr__(self) -> str:
        return f"{self.status}{' ' + self.error if self.error else ''}"


def merged_state(recorded: Mapping[str, object], fresh: Mapping[str, object]) -> JsonObject:
    """The recorded starting state with the secrets of ``fresh`` (the replaying cloud's own export):
    its signing key, pinned client key and token serial, and each person's refresh-token family."""
    doc = copy.deepcopy(dict(recorded))
    meta = fields(doc.get("meta"))
    fresh_meta = fields(fresh.get("meta"))
    meta["signing_key"] = copy.deepcopy(fresh_meta.get("signing_key"))
    meta["client_jwk"] = copy.deepcopy(fresh_meta.get("client_jwk"))
    meta["token_serial"] = max(_serial(meta.get("token_serial")), _serial(fresh_meta.get("token_serial")))
    doc["meta"] = meta
    fresh_users = {person["id"]: person for person in map(fields, items(fresh.get("users")))}
    users: list[JsonObject] = []
    for found in items(doc.get("users")):
        user = fields(found)
        mine = fresh_users.get(user["id"])
        if mine is not None:
            for name in ("refresh_token", "superseded", "family_revoked", "tokens_valid_from"):
                if name in mine:
                    user[name] = copy.deepcopy(mine[name])
        users.append(user)
    doc["users"] = users
    kept = {u["id"] for u in users}
    doc["refresh_tokens"] = {t: uid for t, uid in fields(fresh.get("refresh_tokens")).items() if uid in kept}
    return doc


def _serial(value: object) -> int:
    """A token serial as a number (0 when there is none)."""
    return int(value) if isinstance(value, (int, float, str)) and value else 0


def app_client(workspace: "Workspace", *, over_http: bool = False) -> "OAuth2Client":
    """An app's ``OAuth2Client`` on the workspace's cloud, with its own key (trusted by the cloud) and
    the workspace's connections: ``over_http`` reaches a served cloud by its URL, else the in-process
    transport."""
    from ..cloud import generate_private_key_pem
    from ..sdk import OAuth2Client

    cloud = workspace.cloud
    if cloud is None or workspace.store is None:
        raise ServiceError("an app client needs the workspace's cloud in this process")
    pem = generate_private_key_pem("ec")
    cloud.trust_client_key(pem)
    if over_http:
        if workspace.server is None:
            raise ServiceError("the workspace is not served")
        return OAuth2Client(client_id=workspace.settings.client_id, issuer=workspace.server.url, private_key=pem,
                            redirect_uri="https://app.test/callback", store=workspace.store,
                            clock=workspace.settings.clock)
    return OAuth2Client(client_id=workspace.settings.client_id, issuer=cloud.issuer, transport=cloud.transport,
                        private_key=pem, redirect_uri="https://app.test/callback", store=workspace.store,
                        clock=workspace.settings.clock)


class ReplaySession:
    """A recording played on a workspace."""

    def __init__(self, workspace: "Workspace", control: ControlClient, *, served: bool, owns: bool) -> None:
        self.workspace = workspace
        """The workspace the session plays on."""
        self.control_client = control
        """The control API the operator's steps go through (in process, or ``RemoteCloud``)."""
        self.served = served
        """True when the cloud is served and driven over HTTP."""
        self.aliases: dict[str, str] = {}
        """Recorded run id -> the id the same run has here."""
        self.judgment_wait = JUDGMENT_WAIT_S
        """Seconds a step waits for the harvest to judge what a recorded judgment judged."""
        self._owns = owns
        self._oauth: OAuth2Client | None = None
        self._clients: dict[str, Crouter] = {}

    # -- life ---------------------------------------------------------------------------------

    @classmethod
    async def open(cls, folder: Path | str, state: Mapping[str, object], *, served: bool = False) -> "ReplaySession":
        """A fresh workspace in ``folder`` (the sample world), its cloud set to ``state``."""
        from ..workspace import Settings, Workspace

        workspace = await Workspace.open(settings=Settings(path=Path(folder), serve_port=0 if served else None))
        control: ControlClient = workspace.desk.control
        if served:
            from ..attached.client import RemoteCloud

            assert workspace.server is not None
            control = RemoteCloud(workspace.server.url, workspace.server.token)
        session = cls(workspace, control, served=served, owns=True)
        try:
            await session.load_state(state)
        except BaseException:
            await session.close()
            raise
        return session

    @classmethod
    async def attach(cls, workspace: "Workspace", state: Mapping[str, object]) -> "ReplaySession":
        """Play on an open workspace (the demo's); its cloud is set to ``state``."""
        session = cls(workspace, workspace.desk.control, served=False, owns=False)
        await session.load_state(state)
        return session

    async def load_state(self, state: Mapping[str, object]) -> None:
        """Replace the cloud's state with a recording's starting state (keeping this cloud's secrets)."""
        fresh = await self.control_client.call("GET", "/state")
        await self.control_client.call("PUT", "/state", merged_state(state, fresh))

    async def close(self) -> None:
        """Close the app's clients, the control client and (when the session opened it) the workspace."""
        for client in self._clients.values():
            await client.aclose()
        self._clients.clear()
        if self._oauth is not None:
            await self._oauth.aclose()
        if self.control_client is not self.workspace.desk.control:
            close = getattr(self.control_client, "aclose", None)
            if close is not None:
                await close()
        if self._owns:
            await self.workspace.close()

    async def __aenter__(self) -> "ReplaySession":
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        trace: TracebackType | None) -> None:
        await self.close()

    # -- ids ----------------------------------------------------------------------------------

    def alias(self, recorded: str, live: str) -> str:
        """Remember that the run recorded as ``recorded`` is ``live`` here; answers ``live``."""
        if recorded != live:
            self.aliases[recorded] = live
        return live

    def id(self, recorded: str) -> str:
        """The id here of the run recorded as ``recorded``."""
        return self.aliases.get(recorded, recorded)

    def _path(self, path: str) -> str:
        return "/".join(quote(self.id(unquote(part)), safe="") if part else part for part in path.split("/"))

    def _body(self, body: object) -> object:
        if isinstance(body, dict):
            return {k: self._body(v) for k, v in body.items()}
        if isinstance(body, list):
            return [self._body(v) for v in body]
        if isinstance(body, str):
            return self.id(body)
        return body

    # -- the operator's side ------------------------------------------------------------------

    async def control(self, method: str, path: str, body: object = None) -> JsonObject:
        """One control call as the desk made it (recorded ids in ``path`` and ``body`` mapped)."""
        body = self._body(body)
        if method == "POST" and (path.startswith("/people/") and path.endswith("/runs")
                                 or path.startswith("/runs/") and path.endswith("/message")):
            body = {**fields(body), "idempotency_key": f"replay-{uuid.uuid4().hex}"}
        answer: JsonObject = await self.control_client.call(method, self._path(path), body)
        return answer

    async def start_run(self, user: str, prompt: str, *, made: str | None = None, **more: object) -> str:
        """Start a run as the app, from the desk; ``made`` is the id it had when recorded."""
        answer = await self.control("POST", f"/people/{quote(user, safe='')}/runs", {"prompt": prompt, **more})
        run_id = str(answer["run_id"])
        return self.alias(made, run_id) if made else run_id

    async def send_message(self, run: str, text: str, **more: object) -> None:
        """Send a message to a run as the app, from the desk."""
        await self.control("POST", f"/runs/{quote(run, safe='')}/message", {"text": text, **more})

    async def cancel(self, run: str) -> None:
        """Cancel a run as the app, from the desk."""
        await self.control("POST", f"/runs/{quote(run, safe='')}/cancel", {})

    async def run_action(self, run: str, action: str, **body: object) -> JsonObject:
        """Drive a run as the runtime would: reply, fail_turn, settle, ask, idle, emit, delete."""
        return await self.control("POST", f"/runs/{quote(run, safe='')}/{action}", body)

    async def grant(self, user: str, action: str, **body: object) -> JsonObject:
        """Change a person's grant: revoke, restore, set, ..."""
        return await self.control("POST", f"/people/{quote(user, safe='')}/grant/{action}", body)

    async def person(self, user: str, action: str, **body: object) -> JsonObject:
        """A person's other control actions: refuse, expire_tokens, reconnect."""
        return await self.control("POST", f"/people/{quote(user, safe='')}/{action}", body)

    async def fail_next(self, op: str, answer: object, *, user: str | None = None,
                        times: int | None = 1) -> JsonObject:
        """Script the next answers of an operation (``FakeCloud.fail_next`` over the control API)."""
        return await self.control("POST", "/fail_next", {"op": op, "answer": answer, "user": user, "times": times})

    # -- the app's side -----------------------------------------------------------------------

    async def app(self, user: str) -> "Crouter":
        """The app's SDK client for a person (real ``OAuth2Client`` connection, refreshed as needed)."""
        found = self._clients.get(user)
        if found is None:
            if self._oauth is None:
                self._oauth = app_client(self.workspace, over_http=self.served)
            found = self._clients[user] = await self._oauth.client(user)
        return found

    async def app_call(self, user: str, call: Callable[["Crouter"], Awaitable[T]]) -> T:
        """``call(app)`` with the person's client: a refusal met while connecting (a refresh refused)
        is the call's outcome, as it is for an app whose first call refreshes."""
        return await call(await self.app(user))

    # -- insight reviews ----------------------------------------------------------------------

    async def decide_insight(self, title: str, action: str, *, candidate: int | None = 0, text: str | None = None,
                             reason: str | None = None) -> None:
        """Approve or reject the pending insight review with this title."""
        insights = self.workspace.insights
        pending = [r for r in await insights.list("pending") if r.proposal.title == title]
        if not pending:
            raise ServiceError(f"no pending insight review titled {title!r}")
        if action == "approve":
            await insights.approve(pending[0].id, candidate=candidate or 0, text=text)
        else:
            await insights.reject(pending[0].id, reason or "rejected")

    # -- OKF harvest judgments -----------------------------------------------------------------

    def _okf(self) -> JudgmentSource | None:
        """The workspace's harvest (None: it has none open)."""
        try:
            found: JudgmentSource = self.workspace.okf
        except (ServiceError, RuntimeError):  # a workspace that has not opened its knowledge
            return None
        return found

    def _inputs(self, inputs: list[str]) -> list[str]:
        """Recorded inputs in this session's ids (a run record's run id mapped)."""
        return sorted(f"record:{self.id(i[7:])}" if i.startswith("record:") else i for i in inputs)

    async def find_judgment(self, agent: str, inputs: list[str], *, state: str = "pending",
                            step: int = 0, wait: float | None = None) -> str:
        """The id here of the judgment of ``agent`` on ``inputs`` (recorded ids) in ``state``, waiting up
        to ``wait`` seconds (``judgment_wait``) for the harvest to judge them; ``Divergence`` when it never comes."""
        wait = self.judgment_wait if wait is None else wait
        okf = self._okf()
        live = self._inputs(inputs)
        seen: list[ObservedJudgment] = []
        for _ in range(max(1, int(wait / _JUDGMENT_POLL_S))):
            if okf is not None:
                seen = []
                for item in await okf.queue():
                    named = judgment_inputs(await okf.detail(item.id))
                    if item.agent == agent and named == live and item.state == state:
                        return item.id
                    if named:
                        seen.append({"agent": item.agent, "inputs": named, "state": item.state})
            await asyncio.sleep(_JUDGMENT_POLL_S)
        want: ObservedJudgment = {"agent": agent, "inputs": live, "state": state}
        raise Divergence(step, f"no {state} judgment of {agent} on {', '.join(live)} came within {wait:g} s",
                         want, seen)

    async def decide_judgment(self, agent: str, inputs: list[str], action: str, *, outcomes: list[str] | None = None,
                              reason: str | None = None, step: int = 0, wait: float | None = None) -> None:
        """Approve (whole, or only ``outcomes``: some of ``inputs``) or reject the pending OKF judgment of
        ``agent`` on ``inputs``, as the judgments pane does, once the harvest has judged them here."""
        okf = self._okf()
        judgment = await self.find_judgment(agent, inputs, step=step, wait=wait)
        assert okf is not None
        if action == "reject":
            await okf.reject(judgment, reason or "rejected")
            return
        chosen: list[str] | None = None
        if outcomes is not None:
            wanted = set(self._inputs(outcomes))
            detail = await okf.detail(judgment)
            chosen = [o.input for o in detail.outcomes if f"{o.input_kind}:{o.input_name}" in wanted]
        await okf.approve(judgment, chosen)

    async def expect_judgment(self, agent: str, inputs: list[str], state: str, *, wait: float | None = None) -> None:
        """A judgment of ``agent`` on ``inputs`` (recorded ids) is in this state (waiting up to ``wait``
        seconds for the harvest to get there)."""
        try:
            await self.find_judgment(agent, inputs, state=state, wait=wait)
        except Divergence as divergence:
            raise AssertionError(f"{divergence.what}; seen {divergence.seen}") from None

    # -- what the recording observed ----------------------------------------------------------

    async def observe(self) -> Observation:
        """What the cloud shows now (``observe.observe``), in this session's ids."""
        insights = self.workspace.insights if self.workspace.cloud is not None or self.served else None
        okf = self._okf() if self.workspace.cloud is not None or self.served else None
        return await observe(self.control_client, insights, okf)

    async def expect(self, step: int, observed: Observation | None) -> None:
        """The cloud shows what the recording observed after ``step``, or ``Divergence``. The harvest
        judges on its own schedule: a judgment not yet in the recorded state is waited for (bounded)."""
        if observed is None:
            return
        for _ in range(max(1, int(self.judgment_wait / _JUDGMENT_POLL_S))):
            seen = await self.observe()
            problem = compare(observed, seen, self.aliases)
            if problem is None:
                return
            if problem != compare_judgments(observed, seen, self.aliases):
                break  # a run, a grant or a review differs: that is not waited for
            await asyncio.sleep(_JUDGMENT_POLL_S)
        raise Divergence(step, problem or "the observation differs", observed, seen)  # the last difference seen

    async def expect_run(self, run: str, *, status: str, events: list[str], deleted: bool = False) -> None:
        """The run (recorded id) has this status and these events' types, in order."""
        live = self.id(run)
        found = next((r for r in (await self.observe())["runs"] if r["id"] == live), None)
        assert found is not None, f"run {run} ({live}) is not in the cloud"
        assert found["status"] == status, f"run {run}: status expected {status}, seen {found['status']}"
        assert found["events"] == events, f"run {run}: events expected {events}, seen {found['events']}"
        assert found["deleted"] == deleted, f"run {run}: deleted expected {deleted}, seen {found['deleted']}"

    async def expect_grant(self, user: str, state: str | None) -> None:
        """The person's grant is in this state (None: no grant)."""
        seen = (await self.observe())["grants"].get(user)
        assert seen == state, f"grant of {user}: expected {state}, seen {seen}"

    async def expect_insight(self, title: str, status: str) -> None:
        """The insight review with this title has this status."""
        seen = [s for t, s in (await self.observe())["insights"] if t == title]
        assert status in seen, f"insight review {title!r}: expected {status}, seen {seen or 'none'}"

    async def expect_refusal(self, call: Awaitable[object], status: int | None = None, code: str | None = None) -> None:
        """The call is refused (with this status and code, when given), by the control API or through the SDK."""
        from ..sdk import CrouterError

        try:
            await call
        except (ControlError, CrouterError) as refusal:
            assert status is None or refusal.status == status, f"expected a refusal {status}, seen {refusal.status} ({refusal})"
            if code is not None:
                assert refusal.code == code, f"expected the refusal code {code}, seen {refusal.code}"
            return
        raise AssertionError(f"expected a refusal {status}{' ' + code if code else ''}, and the call succeeded")

    # -- one recorded step --------------------------------------------------------------------

    async def play(self, step: StepFields) -> StepOutcome:
        """Do a recorded step; answers how it ended (a refusal is an outcome, not an error)."""
        kind = step["kind"]
        if kind in ("operator", "failure"):
            try:
                answer = await self.control(step["method"], step["path"], step.get("body"))
            except ControlError as refusal:
                return StepOutcome(refusal.status, refusal.code)
            made = step.get("made")
            run_id = answer.get("run_id") if isinstance(answer, dict) else None
            if made and isinstance(run_id, str):
                self.alias(made, run_id)
            return StepOutcome(200)
        if kind == "okf":
            await self.decide_judgment(step["agent"], step["inputs"], step["action"], outcomes=step.get("outcomes"),
                                       reason=step.get("reason"), step=_step_number(step))
            return StepOutcome(200)
        if kind == "app":
            return await self._app_step(step)
        if kind == "insight":
            await self.decide_insight(step["title"], step["action"], candidate=step.get("candidate"),
                                      text=step.get("text"), reason=step.get("reason"))
            return StepOutcome(200)
        raise ServiceError(f"no way to play a step of kind {kind}")

    async def _app_step(self, step: StepFields) -> StepOutcome:
        from ..sdk import CrouterError
        from .sdk_calls import sdk_call

        user = step.get("user")
        if not user:
            return StepOutcome(step.get("status"))  # the cloud knew no person for it: nothing to replay
        call = sdk_call(step, self.id)
        if call is None:
            return StepOutcome(step.get("status"))
        try:
            result = await self.app_call(user, call)
        except CrouterError as error:
            return StepOutcome(error.status, error.code)
        made = step.get("made")
        run_id = getattr(result, "id", None)
        if made and run_id:
            self.alias(made, str(run_id))
        return StepOutcome(200)


def _step_number(step: StepFields) -> int:
    """A loaded step's number (0 for step fields that carry none)."""
    number = fields(step).get("n")
    return number if isinstance(number, int) else 0
